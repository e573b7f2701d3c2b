//! File tests in the style of Cranelift's: each `tests/filetests/*.sir` holds IR text
//! with directives, and below a `; expect:` marker the expected output.
//!
//! Directives (comment lines in the IR part):
//!
//! - `; test: disasm` adds the quickened disassembly to the output.
//! - `; run: step=N inputs=[…] env=[…] state=[…]` runs the quickened interpreter on
//!   a fresh frame; any key may be left out (absent slots, zero lanes, step 0). Slot
//!   values are `i64 3`, `f64 -0.5`, `b1 true`, `absent`, `deferred` or `other`;
//!   state lanes are typed values, and the final state prints with the same types.
//!
//! Output: `parse error: L:C: message`, or `verify: ok` / `verify: error` with one
//! indented line per violation, then the disassembly if asked for, then one
//! `run N: <exit> env=[…] state=[…]` line per run. Every file that parses must also
//! round-trip through the printer. `BLESS=1` rewrites the expectations.

use scalar_ir::text::format_f64;
use scalar_ir::*;
use std::fmt::Write;
use std::path::Path;

const MARKER: &str = "; expect:";

#[derive(Clone, Copy, Debug)]
enum Ty {
    I64,
    F64,
    B1,
}

fn parse_slot(s: &str) -> (Slot, Ty) {
    let s = s.trim();
    let (kind, val) = s.split_once(' ').unwrap_or((s, ""));
    let val = val.trim();
    match kind {
        "absent" => (Slot::Absent, Ty::I64),
        "deferred" => (Slot::Deferred, Ty::I64),
        "other" => (Slot::Other, Ty::I64),
        "i64" => (Slot::I64(val.parse().expect("i64 literal")), Ty::I64),
        "f64" => (Slot::F64(parse_f(val)), Ty::F64),
        "b1" => (Slot::B1(val.parse().expect("`true` or `false`")), Ty::B1),
        _ => panic!("bad slot value `{s}`"),
    }
}

fn parse_f(s: &str) -> f64 {
    match s.strip_prefix("nan(0x").and_then(|h| h.strip_suffix(')')) {
        Some(hex) => f64::from_bits(u64::from_str_radix(hex, 16).expect("NaN bits")),
        None => s.parse().expect("f64 literal"),
    }
}

fn show_slot(s: Slot) -> String {
    match s {
        Slot::Absent => "absent".into(),
        Slot::Deferred => "deferred".into(),
        Slot::Other => "other".into(),
        Slot::I64(v) => format!("i64 {v}"),
        Slot::F64(v) => format!("f64 {}", format_f64(v.to_bits())),
        Slot::B1(v) => format!("b1 {v}"),
    }
}

fn show_exit(e: Exit) -> String {
    match e {
        Exit::Return => "return".into(),
        Exit::Decline(r) => format!("decline({r})"),
        Exit::Trap(k, s) => format!("trap({}, site{s})", k.name()),
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

fn run_directive(code: &mut QuickCode, prog: &Program, args: &str) -> String {
    let mut f = FrameBuffers::new(&prog.decl);
    let mut state_types = vec![Ty::I64; prog.decl.state as usize];
    for (key, val) in directive_pairs(args) {
        match key {
            "step" => f.step = val.parse().expect("step number"),
            "inputs" => {
                for (i, s) in list(val).into_iter().enumerate() {
                    f.set_input(i, parse_slot(s).0);
                }
            }
            "env" => {
                for (i, s) in list(val).into_iter().enumerate() {
                    f.set_env(i, parse_slot(s).0);
                }
            }
            "state" => {
                for (i, s) in list(val).into_iter().enumerate() {
                    let (slot, ty) = parse_slot(s);
                    state_types[i] = ty;
                    f.state[i] = slot.encode().1;
                }
            }
            _ => panic!("unknown run key `{key}`"),
        }
    }
    let exit = code.run(&mut f);
    let env: Vec<String> = (0..prog.decl.env as usize)
        .map(|i| show_slot(f.env(i)))
        .collect();
    let state: Vec<String> = state_types
        .iter()
        .enumerate()
        .map(|(i, ty)| match ty {
            Ty::I64 => show_slot(Slot::I64(f.state_i64(i))),
            Ty::F64 => show_slot(Slot::F64(f.state_f64(i))),
            Ty::B1 => show_slot(Slot::B1(f.state_b1(i))),
        })
        .collect();
    format!(
        "{} env=[{}] state=[{}]",
        show_exit(exit),
        env.join(", "),
        state.join(", ")
    )
}

fn actual_output(source: &str) -> String {
    let mut out = String::new();
    let prog = match parse(source) {
        Ok(p) => p,
        Err(e) => return format!("parse error: {e}\n"),
    };
    let printed = print(&prog);
    let reparsed = parse(&printed).expect("printed text parses");
    assert!(
        reparsed == prog,
        "round trip changed the program:\n{printed}"
    );
    assert_eq!(print(&reparsed), printed, "printing is not stable");
    let mut code = match QuickCode::compile(&prog) {
        Ok(c) => {
            out.push_str("verify: ok\n");
            c
        }
        Err(quick::Error::Verify(errs)) => {
            out.push_str("verify: error\n");
            for e in &errs.0 {
                let _ = writeln!(out, "  {e}");
            }
            return out;
        }
    };
    if source.lines().any(|l| l.trim() == "; test: disasm") {
        for line in code.disasm().lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    let runs = source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("; run:"));
    for (n, args) in runs.enumerate() {
        let r = run_directive(&mut code, &prog, args);
        let _ = writeln!(out, "run {}: {r}", n + 1);
    }
    out
}

#[test]
fn filetests() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let bless = std::env::var_os("BLESS").is_some_and(|v| v == "1");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("filetests directory")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sir"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no file tests found");
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable file test");
        let (source, expected) = match text.find(MARKER) {
            Some(i) => (&text[..i], &text[i + MARKER.len()..]),
            None => (text.as_str(), ""),
        };
        let expected: String = expected
            .lines()
            .skip_while(|l| l.trim().is_empty())
            .map(|l| {
                let l = l.strip_prefix(';').unwrap_or(l);
                let l = l.strip_prefix(' ').unwrap_or(l);
                format!("{l}\n")
            })
            .collect();
        let actual = actual_output(source);
        if actual != expected {
            if bless {
                let mut new = source.trim_end().to_string();
                new.push('\n');
                new.push_str(MARKER);
                new.push('\n');
                for l in actual.lines() {
                    new.push_str(format!("; {l}").trim_end());
                    new.push('\n');
                }
                std::fs::write(path, new).expect("writable file test");
            } else {
                failures.push(format!(
                    "{}:\n--- expected\n{expected}--- actual\n{actual}",
                    path.display()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} file test(s) failed (BLESS=1 rewrites expectations):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
