//! Property tests of snapshots: a run split at a random row, snapshotted, encoded (binary or
//! JSON), decoded and restored on a random tier continues exactly as the uninterrupted run.
//!
//! Specs and traces come from the generators of `props.rs`; half the cases append
//! streams of Str and Unit values (history, holds, `++`, `if` over strings), which
//! those generators do not make, so that objects in slots and rings are covered too.

use crate::props::{case_strategy, compare_runs, generate_spec, generate_trace, run_tier, runtime};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use vigil::{Monitor, OutputBatch, Snapshot, Spec, Tier, Value};

/// The tiers a run may start or continue on.
const TIERS: [Tier; 4] = [
    Tier::Canonical,
    Tier::Quickened,
    Tier::NativeRegions,
    Tier::NativeWhole,
];

/// Streams over a Str and a Unit input, appended to a generated spec.
const STRINGS: &str = "in sx: Str\nin ux: Unit\nout sa: Str\nout sb: Str\naux sc: Bool\n\
out sd: Str\nout su: Unit\nsa = default(sx[2], \"none\")\nsb = sx ++ default(sb[1], \"\")\n\
sc = sx == \"b\"\nsd = if sc then sa else sx\nsu = default(ux[1], ())\n";

/// One case: a spec and a trace.
struct Case {
    spec: Spec,
    trace: Vec<Vec<Option<Value>>>,
    /// The longest offset written in the spec (history is full after that
    /// many rows).
    max_offset: usize,
}

/// Builds a case from the generators' data; `None` if the checker rejects
/// the generated spec.
fn make_case(
    spec_data: &[u32],
    len: usize,
    trace_data: &[u32],
    absent_in_10: usize,
    strings: bool,
) -> Option<Case> {
    let g = generate_spec(spec_data, true);
    let source = if strings {
        format!("{}{STRINGS}", g.source)
    } else {
        g.source.clone()
    };
    let spec = Spec::parse("gen.dsrv", &source).ok()?;
    let mut trace = generate_trace(&g.inputs, len, trace_data, absent_in_10);
    if strings {
        // The Str and Unit cells follow from the trace data too.
        let pick = |r: usize, k: usize| {
            trace_data
                .get((r * 2 + k) % trace_data.len().max(1))
                .copied()
                .unwrap_or(0) as usize
                + r
        };
        for (r, row) in trace.iter_mut().enumerate() {
            let s = ["a", "b", "", "é\"x"];
            let p = pick(r, 0);
            row.push((p % 5 != 4).then(|| Value::Str(s[p % 4].into())));
            row.push((pick(r, 1) % 3 == 0).then_some(Value::Unit));
        }
    }
    Some(Case {
        spec,
        trace,
        max_offset: max_offset(&source),
    })
}

/// The largest `n` of an offset `[n]` in `source`.
pub(crate) fn max_offset(source: &str) -> usize {
    source
        .split('[')
        .skip(1)
        .filter_map(|rest| rest.split(']').next()?.parse::<usize>().ok())
        .max()
        .unwrap_or(0)
}

/// What one split exercised (the coverage guard sums them).
#[derive(Default, Debug)]
struct Coverage {
    splits: usize,
    /// Split with every offset ring full (and at least one ring).
    history_full: usize,
    /// The snapshot holds a Str value.
    strings: usize,
    /// The snapshot holds a non-finite float or -0.0.
    special_floats: usize,
    /// The run had stopped with a runtime error before the split.
    stopped: usize,
    /// The restored monitor promoted fused code (on a faster tier).
    promoted_after_restore: usize,
    /// Restored on another tier than the one the snapshot was taken on.
    tier_changes: usize,
}

/// Encodes and decodes a snapshot in one of the two forms.
fn round_trip(snap: &Snapshot, json: bool) -> Snapshot {
    if json {
        Snapshot::from_json(&snap.to_json()).expect("a JSON snapshot reads back")
    } else {
        Snapshot::from_bytes(&snap.to_bytes()).expect("a binary snapshot reads back")
    }
}

/// Runs `case` on `first` up to row `split`, snapshots, round-trips the
/// snapshot, restores it on `second` and continues (row by row, or in
/// batches); the outputs and error must equal `expected`, the uninterrupted
/// canonical run.
fn check_split(
    case: &Case,
    split: usize,
    (first, second): (Tier, Tier),
    json: bool,
    batches: bool,
    cov: &mut Coverage,
) -> Result<(), String> {
    let expected = run_tier(&case.spec, &case.trace, Tier::Canonical);
    let mut monitor = Monitor::builder(&case.spec).tier(first).build();
    let mut outputs = Vec::new();
    let mut error = None;
    for row in &case.trace[..split] {
        match monitor.step(row) {
            Ok(o) => outputs.push(o.to_vec()),
            Err(e) => {
                error = Some(runtime(e));
                break;
            }
        }
    }
    let snap = monitor.snapshot();
    let decoded = round_trip(&snap, json);
    if decoded != snap {
        return Err("the snapshot changed through its encoding".into());
    }
    let mut resumed = Monitor::builder(&case.spec)
        .tier(second)
        .restore(&decoded)
        .map_err(|e| format!("restore failed: {e}"))?
        .build();
    if resumed.snapshot() != snap {
        return Err("a restored monitor's snapshot differs from the one it restored".into());
    }
    if resumed.steps() != monitor.steps() {
        return Err("the restored step count differs".into());
    }
    if let Some(e) = &error {
        // A stopped run stays stopped: the next row reports the same error.
        let row = vec![None; resumed.input_count()];
        if resumed.step(&row).err().map(runtime).as_ref() != Some(e) {
            return Err(format!(
                "a restored stopped monitor did not report `{e}` again"
            ));
        }
    } else if batches {
        for chunk in case.trace[split..].chunks(5) {
            let mut rows = resumed.batch();
            for row in chunk {
                rows.push_row(row)
                    .map_err(|e| format!("a generated row was rejected: {e}"))?;
            }
            let mut out = OutputBatch::new();
            let result = resumed.run_batch(&rows, &mut out);
            outputs.extend(out.rows().map(|r| r.to_vec()));
            if let Err(e) = result {
                error = Some(runtime(e));
                break;
            }
        }
    } else {
        for row in &case.trace[split..] {
            match resumed.step(row) {
                Ok(o) => outputs.push(o.to_vec()),
                Err(e) => {
                    error = Some(runtime(e));
                    break;
                }
            }
        }
    }
    let what = format!(
        "split at {split} of {}, {first} -> {second}, {}{}",
        case.trace.len(),
        if json { "JSON" } else { "binary" },
        if batches { ", batches" } else { "" }
    );
    compare_runs(
        &case.spec,
        &case.trace,
        ("uninterrupted canonical", expected),
        (&what, (outputs, error)),
    )?;
    let text = snap.to_json();
    cov.splits += 1;
    cov.history_full += (case.max_offset > 0 && split >= case.max_offset) as usize;
    cov.strings += text.contains("{\"Str\":") as usize;
    cov.special_floats += ["NaN", "inf", "-0.0"].iter().any(|s| text.contains(s)) as usize;
    cov.stopped += snap.is_stopped() as usize;
    cov.promoted_after_restore +=
        (second != Tier::Canonical && resumed.stats().promotions > 0) as usize;
    cov.tier_changes += (first != second) as usize;
    Ok(())
}

/// Checks one generated case: a split at `split_pick % (len + 1)`, taken on
/// every tier and restored on a tier picked by `tier_pick`.
fn check_case(
    (spec_data, len, trace_data): &(Vec<u32>, usize, Vec<u32>),
    (split_pick, tier_pick, variant): (usize, usize, usize),
    cov: &mut Coverage,
) -> Result<(), TestCaseError> {
    let Some(case) = make_case(spec_data, *len, trace_data, variant % 4, variant % 2 == 0) else {
        return Err(TestCaseError::reject("rejected spec"));
    };
    let split = split_pick % (case.trace.len() + 1);
    for (k, &first) in TIERS.iter().enumerate() {
        let second = TIERS[(tier_pick + k * 3) % TIERS.len()];
        let json = (variant + k) % 2 == 0;
        let batches = (variant / 2 + k) % 3 == 0;
        check_split(&case, split, (first, second), json, batches, cov)
            .map_err(TestCaseError::fail)?;
    }
    Ok(())
}

proptest! {
    // Each case builds nine monitors (four of them compiled natively); fewer
    // cases than the other properties, and a deterministic sweep below.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_restored_run_continues_exactly(
        case in case_strategy(),
        split_pick in 0..64usize,
        tier_pick in 0..4usize,
        variant in 0..8usize,
    ) {
        check_case(&case, (split_pick, tier_pick, variant), &mut Coverage::default())?;
    }
}

/// A deterministic sweep of the property, with a coverage guard: the splits
/// must land after the history is full, hold Str values and special floats,
/// follow a runtime error, change tiers, and be promoted again after the
/// restore — else the property could pass without testing what matters.
#[test]
fn restored_runs_continue_exactly_sweep() {
    let mut runner = TestRunner::deterministic();
    let strategy = (case_strategy(), 0..64usize, 0..4usize, 0..8usize);
    let mut cov = Coverage::default();
    let mut rejected = 0;
    for _ in 0..120 {
        let (case, split, tier, variant) = strategy.new_tree(&mut runner).unwrap().current();
        match check_case(&case, (split, tier, variant), &mut cov) {
            Ok(()) => {}
            Err(TestCaseError::Reject(_)) => rejected += 1,
            Err(TestCaseError::Fail(why)) => panic!("{why}"),
        }
    }
    eprintln!("snapshots: {cov:?}, {rejected} specs rejected");
    assert!(cov.splits >= 400, "{cov:?}");
    assert!(cov.history_full >= 100, "{cov:?}");
    assert!(cov.strings >= 50, "{cov:?}");
    assert!(cov.special_floats >= 50, "{cov:?}");
    assert!(cov.stopped >= 20, "{cov:?}");
    assert!(cov.promoted_after_restore >= 50, "{cov:?}");
    assert!(cov.tier_changes >= 200, "{cov:?}");
}

/// The string streams join any generated spec: their names do not collide
/// with the generator's (`i0`…, `s0`…), and every row gets their cells.
#[test]
fn string_streams_extend_generated_specs() {
    let case = make_case(&[], 3, &[], 0, true).expect("the simplest spec with strings checks");
    assert_eq!(case.trace[0].len(), case.spec.input_names().len());
    assert!(case.spec.output_names().contains(&"sb"));
}

/// `vigil repl`'s `:tier T` is a snapshot of the run restored on T. Over
/// generated specs and traces, switching tiers at several random points (every
/// tier in turn) gives exactly the uninterrupted canonical run; the coverage
/// guard requires switches after the history is full and runs with several
/// switches, so the property cannot pass on trivial cases.
#[test]
fn tier_switches_at_random_points_continue_exactly() {
    let mut runner = TestRunner::deterministic();
    let strategy = (case_strategy(), proptest::collection::vec(0..6usize, 0..64));
    let (mut cases, mut full_switches, mut many) = (0, 0, 0);
    for _ in 0..120 {
        let ((spec_data, len, trace_data), picks) =
            strategy.new_tree(&mut runner).unwrap().current();
        let Some(case) = make_case(
            &spec_data,
            len,
            &trace_data,
            picks.len() % 4,
            picks.len() % 2 == 0,
        ) else {
            continue;
        };
        let expected = run_tier(&case.spec, &case.trace, Tier::Canonical);
        let mut tier = 0;
        let mut monitor = Monitor::builder(&case.spec).tier(TIERS[tier]).build();
        let (mut outputs, mut error, mut switches) = (Vec::new(), None, 0);
        for (r, row) in case.trace.iter().enumerate() {
            // A switch before this row when its pick says so.
            if picks.get(r).is_some_and(|p| *p == 0) {
                tier = (tier + 1) % TIERS.len();
                let snap = monitor.snapshot();
                monitor = Monitor::builder(&case.spec)
                    .tier(TIERS[tier])
                    .restore(&snap)
                    .expect("a run's own snapshot restores")
                    .build();
                switches += 1;
                full_switches += usize::from(case.max_offset > 0 && r >= case.max_offset);
            }
            match monitor.step(row) {
                Ok(o) => outputs.push(o.to_vec()),
                Err(e) => {
                    error = Some(runtime(e));
                    break;
                }
            }
        }
        if let Err(e) = compare_runs(
            &case.spec,
            &case.trace,
            ("uninterrupted canonical", expected),
            (&format!("{switches} tier switches"), (outputs, error)),
        ) {
            panic!("{e}");
        }
        cases += 1;
        many += usize::from(switches >= 3);
    }
    eprintln!(
        "tier switches: {cases} cases, {full_switches} switches after the history filled, {many} runs with 3+ switches"
    );
    assert!(cases >= 60, "only {cases} cases");
    assert!(
        full_switches >= 50,
        "only {full_switches} switches after the history filled"
    );
    assert!(many >= 10, "only {many} runs with three switches or more");
}
