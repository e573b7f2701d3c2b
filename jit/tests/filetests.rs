//! Every `scalar_ir/tests/filetests/*.sir` program, compiled by the JIT and run from the
//! same frames as the quickened interpreter (the file's `; run:` directives), must
//! leave identical exit words, environments and state. Files that do not parse or
//! verify must be rejected by the JIT too.
//!
//! The directive parsing duplicates the minimal part of scalar_ir's runner: `step=N`,
//! `inputs=[…]`, `env=[…]`, `state=[…]` with slot values `i64 3`, `f64 -0.5`,
//! `f64 nan(0x…)`, `b1 true`, `absent`, `deferred`, `other`.

mod common;

use scalar_ir::{FrameBuffers, QuickCode, Slot};
use std::path::Path;

fn parse_slot(s: &str) -> Slot {
    let s = s.trim();
    let (kind, val) = s.split_once(' ').unwrap_or((s, ""));
    let val = val.trim();
    match kind {
        "absent" => Slot::Absent,
        "deferred" => Slot::Deferred,
        "other" => Slot::Other,
        "i64" => Slot::I64(val.parse().expect("i64 literal")),
        "f64" => Slot::F64(
            match val.strip_prefix("nan(0x").and_then(|h| h.strip_suffix(')')) {
                Some(hex) => f64::from_bits(u64::from_str_radix(hex, 16).expect("NaN bits")),
                None => val.parse().expect("f64 literal"),
            },
        ),
        "b1" => Slot::B1(val.parse().expect("`true` or `false`")),
        _ => panic!("bad slot value `{s}`"),
    }
}

fn list(s: &str) -> Vec<&str> {
    let inner = s.trim().trim_start_matches('[').trim_end_matches(']');
    if inner.trim().is_empty() {
        Vec::new()
    } else {
        inner.split(',').collect()
    }
}

/// Splits `k=v k=[a, b]` into pairs.
fn directive_pairs(s: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=').expect("key=value");
        let after = after.trim_start();
        let end = if after.starts_with('[') {
            after.find(']').expect("closing `]`") + 1
        } else {
            after.find(' ').unwrap_or(after.len())
        };
        out.push((key.trim(), &after[..end]));
        rest = after[end..].trim_start();
    }
    out
}

fn start_frame(decl: &scalar_ir::Decl, args: &str) -> FrameBuffers {
    let mut f = FrameBuffers::new(decl);
    for (key, val) in directive_pairs(args) {
        match key {
            "step" => f.step = val.parse().expect("step number"),
            "inputs" => list(val)
                .into_iter()
                .enumerate()
                .for_each(|(i, s)| f.set_input(i, parse_slot(s))),
            "env" => list(val)
                .into_iter()
                .enumerate()
                .for_each(|(i, s)| f.set_env(i, parse_slot(s))),
            "state" => list(val)
                .into_iter()
                .enumerate()
                .for_each(|(i, s)| f.state[i] = parse_slot(s).encode().1),
            _ => panic!("unknown run key `{key}`"),
        }
    }
    f
}

#[test]
fn jit_matches_quickened_on_every_filetest() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scalar_ir/tests/filetests");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("filetests directory")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sir"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no file tests found");
    let (mut compiled, mut runs) = (0, 0);
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable file test");
        let source = text.split("; expect:").next().unwrap_or_default();
        let Ok(prog) = scalar_ir::parse(source) else {
            continue;
        };
        let quick = QuickCode::compile(&prog);
        let native = jit::compile(&prog);
        let (mut quick, native) = match (quick, native) {
            (Ok(q), Ok(n)) => (q, n),
            (Err(_), Err(jit::CompileError::Verify(_))) => continue,
            (q, n) => panic!(
                "{}: quickened {:?} but JIT {:?}",
                path.display(),
                q.err(),
                n.err()
            ),
        };
        compiled += 1;
        for args in source
            .lines()
            .filter_map(|l| l.trim().strip_prefix("; run:"))
        {
            let start = start_frame(&prog.decl, args);
            common::assert_same(&mut quick, native.main(), &prog, &start);
            runs += 1;
        }
    }
    assert!(
        compiled >= 6 && runs >= 20,
        "only {compiled} programs and {runs} runs"
    );
}
