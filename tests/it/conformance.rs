//! Every conformance case under every tier, in process: the project's own under `tests/cases`
//! (exactly the cases of `OWN_CASES`), and the shared ones under `../shared/conformance/cases`
//! and `ext`, ignored by default because a clone has no `../shared` (docs/testing.md).

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
                a.trigger(),
                a.step(),
                a.message()
            ));
        }
    }
    out
}

/// Runs every case under `root` on every tier, failing with every mismatch;
/// returns the names of the cases run (their directories' names).
fn run_all(root: &Path) -> Vec<String> {
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
    cases.iter().map(|d| case_name(d)).collect()
}

fn case_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The project's own cases (tests/cases), by name. The test checks that it
/// ran exactly these, so a case that disappears, or stops being found (a
/// renamed `expected.txt`), fails it instead of shrinking the count silently;
/// a new case is added here with its directory.
const OWN_CASES: [&str; 33] = [
    "abs_overflow_error",
    "default_with_absent_fallback",
    "defer_keeps_first",
    "dynamic_bad_string_error",
    "dynamic_forms",
    "fix_recursion_too_deep_error",
    "functions_and_closures",
    "if_error_in_selected_arm",
    "if_self_offset_binds_arm",
    "input_list_values",
    "input_map_values",
    "list_builtins",
    "list_get_out_of_range_error",
    "list_head_empty_error",
    "map_get_missing_key_error",
    "maps_tuples_fields",
    "math_builtins",
    "nested_if_errors",
    "offsets_of_offsets_and_constants",
    "stl_empty_intervals_and_implication",
    "stl_past_time_operators",
    "strings_units_latch_init",
    "triggers_fire_on_every_tier",
    "triggers_on_the_whole_row_kernel",
    "triggers_with_noval_and_deferred",
    "unselected_error_is_noval_for_offsets",
    "untyped_invalid_operand",
    "window_bool_and_float_specials",
    "window_count_aggregates",
    "window_empty_results",
    "window_spread_percentiles_integral",
    "window_sum_overflow",
    "window_time_panes",
];

fn own_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases")
}

#[test]
fn own_cases_pass_on_every_tier() {
    let mut ran = run_all(&own_root());
    ran.sort();
    assert_eq!(
        ran,
        OWN_CASES,
        "the cases found under {} are not the expected ones (update OWN_CASES with the directory)",
        own_root().display()
    );
}

/// The shared conformance cases live beside the checkout, in
/// `../shared/conformance`, which a clone of this repository does not have.
/// So these tests are ignored by default — the test count says so, instead of
/// an `ok` for cases that never ran — and `.ci/run` runs them with
/// `--include-ignored` where the folder exists. Run that way without the
/// folder, they fail naming it.
fn shared_root(part: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/conformance")
        .join(part);
    assert!(
        root.is_dir(),
        "{} does not exist: the shared conformance cases cannot run without it \
         (these tests are #[ignore]d for that reason; run them only beside ../shared)",
        root.display()
    );
    root
}

#[test]
#[ignore = "needs ../shared/conformance beside the checkout; .ci/run runs it (docs/testing.md)"]
fn shared_cases_pass_on_every_tier() {
    let root = shared_root("cases");
    let n = run_all(&root).len();
    assert!(
        n > 100,
        "only {n} shared cases found under {}",
        root.display()
    );
}

/// The shared cases of the Trustworthiness Checker's containers, functions
/// and `dynamic`/`defer` (`ext/`), on every tier.
#[test]
#[ignore = "needs ../shared/conformance beside the checkout; .ci/run runs it (docs/testing.md)"]
fn shared_extension_cases_pass_on_every_tier() {
    let root = shared_root("ext");
    let n = run_all(&root).len();
    assert!(
        n >= 150,
        "only {n} shared extension cases found under {}",
        root.display()
    );
}

/// The reference evaluator, which implements containers, functions and
/// `dynamic` apart from the canonical tier, gives every own case's expected
/// output and error step (but the trigger and window cases, which have tests
/// of their own elsewhere).
#[test]
fn reference_evaluator_passes_the_own_cases() {
    let ran = reference_cases(&own_root());
    let expected: Vec<&str> = OWN_CASES
        .iter()
        .copied()
        .filter(|c| !c.starts_with("triggers_") && !c.starts_with("window_"))
        .collect();
    assert_eq!(ran, expected);
}

/// The same over the shared extension cases (ignored like the other shared
/// tests, for the same reason).
#[test]
#[ignore = "needs ../shared/conformance beside the checkout; .ci/run runs it (docs/testing.md)"]
fn reference_evaluator_passes_the_shared_extension_cases() {
    let root = shared_root("ext");
    let n = reference_cases(&root).len();
    assert!(n >= 150, "only {n} shared extension cases ran");
}

/// Runs the reference evaluator on every case under `root` without triggers
/// or windows, failing with every mismatch; returns the names of those run.
fn reference_cases(root: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    let mut ran = Vec::new();
    for dir in case_dirs(root) {
        let read = |f: &str| std::fs::read_to_string(dir.join(f));
        let source = read("spec.dsrv").expect("spec");
        let spec = Spec::parse("spec.dsrv", &source).expect("case specs check");
        if !spec.checked().triggers.is_empty() || source.contains("window(") {
            // Triggers and windows have cases of their own elsewhere.
            continue;
        }
        ran.push(case_name(&dir));
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
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    ran
}
