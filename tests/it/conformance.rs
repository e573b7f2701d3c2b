//! Every conformance case (the project's own under `tests/cases`, and the shared ones under
//! `../shared/conformance/cases` and `ext` when present) under every tier, in process.

use crate::support::run_text;
use std::path::{Path, PathBuf};
use vigil::trace::TraceFormat;
use vigil::{Spec, Tier};

fn case_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            }
        }
        if dir.join("spec.dsrv").exists() && dir.join("expected.txt").exists() {
            out.push(dir);
        }
    }
    out.sort();
    out
}

/// Runs one case on one tier; returns a description of the mismatch.
fn check_case(dir: &Path, tier: Tier) -> Result<(), String> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f));
    let source = read("spec.dsrv").map_err(|e| e.to_string())?;
    let spec = Spec::parse("spec.dsrv", &source).map_err(|d| d.render())?;
    let trace = read("trace.input").map_err(|e| e.to_string())?;
    let expected = read("expected.txt").map_err(|e| e.to_string())?;
    let expected_error = read("expected_error.txt").ok();
    let (out, err) = run_text(&spec, &trace, TraceFormat::Tc, tier);
    // vigil's own trigger cases also pin the alerts (the CLI's lines).
    if let Ok(want) = read("expected_alerts.txt") {
        let got = alerts(&spec, &trace, tier);
        if got != want {
            return Err(format!(
                "alerts differ:\n--- expected\n{want}--- got\n{got}"
            ));
        }
    }
    if out != expected {
        return Err(format!(
            "output differs:\n--- expected\n{expected}--- got\n{out}"
        ));
    }
    match (expected_error, err) {
        (None, None) => Ok(()),
        (Some(want), Some(got)) => {
            let step: u64 = want
                .trim()
                .strip_prefix("step ")
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse().ok())
                .ok_or("bad expected_error.txt")?;
            let kind_ok = [
                "overflow",
                "division by zero",
                "invalid operand",
                "index out of bounds",
                "missing key",
                "empty list",
                "invalid dynamic expression",
                "recursion too deep",
            ]
            .iter()
            .any(|k| want.contains(k) && got.to_string().contains(k));
            if got.step == step && kind_ok {
                Ok(())
            } else {
                Err(format!("expected error `{}`, got `{got}`", want.trim()))
            }
        }
        (want, got) => Err(format!("expected error {want:?}, got {got:?}")),
    }
}

/// The alerts of a run, one `alert: NAME at step N: MESSAGE` line each (as
/// `vigil run` prints them without `--alerts`).
fn alerts(spec: &Spec, trace: &str, tier: Tier) -> String {
    let mut reader = vigil::trace::reader_from_bytes(
        "trace",
        trace.as_bytes().to_vec(),
        TraceFormat::Tc,
        &spec.input_schema(),
    )
    .expect("trace opens");
    let mut monitor = vigil::Monitor::builder(spec).tier(tier).build();
    let mut row = vec![None; monitor.input_count()];
    let mut out = String::new();
    while reader.next_row(&mut row).expect("trace is well formed") {
        let Ok(outputs) = monitor.step(&row) else {
            break;
        };
        for a in outputs.alerts() {
            out.push_str(&format!(
                "alert: {} at step {}: {}\n",
                a.trigger, a.step, a.message
            ));
        }
    }
    out
}

fn run_all(root: &Path) -> usize {
    let cases = case_dirs(root);
    let mut failures = Vec::new();
    for tier in Tier::ALL {
        for dir in &cases {
            if let Err(why) = check_case(dir, tier) {
                failures.push(format!("{} [{tier}]: {why}", dir.display()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    cases.len()
}

#[test]
fn own_cases_pass_on_every_tier() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    assert!(
        run_all(&root) > 0,
        "no cases found under {}",
        root.display()
    );
}

/// The shared cases live beside the checkout; a clone without them says so
/// plainly (CI always has them, and `.ci/run` also runs them through the binary).
#[test]
fn shared_cases_pass_on_every_tier() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/cases");
    if !root.exists() {
        eprintln!(
            "SKIPPED: {} does not exist, so the shared conformance cases did not run",
            root.display()
        );
        return;
    }
    let n = run_all(&root);
    assert!(
        n > 100,
        "only {n} shared cases found under {}",
        root.display()
    );
}

/// The shared cases of the Trustworthiness Checker's containers, functions
/// and `dynamic`/`defer` (`ext/`), on every tier.
#[test]
fn shared_extension_cases_pass_on_every_tier() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/ext");
    if !root.exists() {
        eprintln!(
            "SKIPPED: {} does not exist, so the shared extension cases did not run",
            root.display()
        );
        return;
    }
    let n = run_all(&root);
    assert!(
        n >= 150,
        "only {n} shared extension cases found under {}",
        root.display()
    );
}

/// The reference evaluator, which implements containers, functions and
/// `dynamic` apart from the canonical tier, gives every shared extension
/// case's expected output and error step too (and every own case's).
#[test]
fn reference_evaluator_passes_the_extension_cases() {
    let roots = [
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/ext"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases"),
    ];
    let mut failures = Vec::new();
    let mut n = 0;
    for dir in roots
        .iter()
        .filter(|r| r.exists())
        .flat_map(|r| case_dirs(r))
    {
        let read = |f: &str| std::fs::read_to_string(dir.join(f));
        let source = read("spec.dsrv").expect("spec");
        let spec = Spec::parse("spec.dsrv", &source).expect("case specs check");
        if !spec.checked().triggers.is_empty() || source.contains("window(") {
            // Triggers and windows have cases of their own elsewhere.
            continue;
        }
        n += 1;
        let mut reader = vigil::trace::reader_from_bytes(
            "trace",
            read("trace.input").expect("trace").into_bytes(),
            TraceFormat::Tc,
            &spec.input_schema(),
        )
        .expect("trace opens");
        let mut rows = Vec::new();
        let mut row = vec![None; spec.checked().inputs.len()];
        while reader.next_row(&mut row).expect("trace is well formed") {
            rows.push(row.clone());
        }
        let (outs, err) = vigil::reference::evaluate(spec.checked(), &rows);
        let names: Vec<String> = (spec.checked().outputs.iter())
            .map(|&o| spec.checked().stream(o).name.clone())
            .collect();
        let mut text = String::new();
        for (step, samples) in outs.iter().enumerate() {
            for (name, s) in names.iter().zip(samples) {
                if !s.is_noval() {
                    text.push_str(&format!("{name}[{step}] = {s}\n"));
                }
            }
        }
        let want = read("expected.txt").expect("expected");
        let want_step = read("expected_error.txt").ok().map(|e| {
            let rest = e.trim().strip_prefix("step ").expect("`step N: …`");
            rest.split(':')
                .next()
                .expect("a step")
                .parse::<u64>()
                .expect("a step")
        });
        if text != want || err.as_ref().map(|e| e.step) != want_step {
            failures.push(format!("{}: got\n{text}{err:?}", dir.display()));
        }
    }
    assert!(n > 10, "only {n} cases ran");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
