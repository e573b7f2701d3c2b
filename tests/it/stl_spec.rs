//! STL inside a specification (issue 39, docs/language.md "STL inside a specification"):
//! generated formulas (nesting, bounds, `G`/`F`, `S`, `!`, `&&`, `||`, `=>`, comparisons of one or
//! two signals) over irregular row times, `stl` and `stl_rob`, every tier against the reference
//! evaluator's scan of each interval, with snapshots mid-run and a keyed monitor; the past-time
//! reading against the separate STL evaluator's future-time verdicts; the diagnostics.

use crate::props::{Run, compare_runs};
use crate::windows::Pick;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use vigil::reference;
use vigil::time::Time;
use vigil::{KeyedMonitor, Monitor, Sample, Snapshot, Spec, Tier, Value};

/// Interval bounds, in milliseconds (row times are milliseconds apart).
const BOUNDS: [i64; 7] = [0, 0, 100, 250, 500, 1000, 2000];

fn bound(ms: i64) -> String {
    match ms {
        0 => "0".into(),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}

/// A formula of at most `depth` more levels over `x: Float` and `y: Int`.
fn formula(p: &mut Pick, depth: usize) -> String {
    let leaf = depth == 0 || p.pick(4) == 0;
    if leaf {
        let c = p.one(&["-1", "0", "1.5", "2", "3"]);
        return match p.pick(8) {
            0 => format!("x > {c}"),
            1 => format!("x < {c}"),
            2 => format!("y >= {c}"),
            3 => format!("y <= {c}"),
            4 => format!("x - y > {c}"),
            5 => "(x + 1) * 2 < y * 3".to_string(),
            6 => p.one(&["true", "false"]).to_string(),
            _ => format!("x[1] > {c}"),
        };
    }
    match p.pick(8) {
        0 => format!("!({})", formula(p, depth - 1)),
        1 => format!("({}) && ({})", formula(p, depth - 1), formula(p, depth - 1)),
        2 => format!("({}) || ({})", formula(p, depth - 1), formula(p, depth - 1)),
        3 => format!("({}) => ({})", formula(p, depth - 1), formula(p, depth - 1)),
        4 => {
            let a = p.one(&BOUNDS);
            let b = a + p.one(&BOUNDS);
            let (phi, psi) = (formula(p, depth - 1), formula(p, depth - 1));
            format!("({phi}) S[{}, {}] ({psi})", bound(a), bound(b))
        }
        op => {
            let a = p.one(&BOUNDS);
            let b = a + p.one(&BOUNDS);
            let name = if op == 5 { "F" } else { "G" };
            format!(
                "{name}[{}, {}]({})",
                bound(a),
                bound(b),
                formula(p, depth - 1)
            )
        }
    }
}

/// The spec of a formula: its verdict, its robustness and a fused reader
/// of the verdict; with `cap`, each interval keeps at most that many samples
/// (`stl(φ, N)`), so that some runs stop with `window full`.
fn spec_of(f: &str, cap: Option<u32>) -> String {
    let n = cap.map_or(String::new(), |n| format!(", {n}"));
    format!(
        "in x: Float\nin y: Int\nout q: Bool\nout r: Float\nout n: Int\n\
         q = stl({f}{n})\nr = stl_rob({f}{n})\nn = if q then 1 else 0\n"
    )
}

/// The rows of `monitor`'s run that fused code completed with an interval
/// window in it: the whole-row kernel's (where its program has an
/// `interval` instruction) and the region runs (where a region's has).
/// Zero where every interval ran on the canonical tier.
fn fused_interval_rows(monitor: &Monitor) -> u64 {
    fused_rows_with(monitor, |d| {
        matches!(d, scalar_ir::InstData::Interval { .. })
    })
}

/// The rows of `monitor`'s run that fused code completed with a since in
/// it (a `since` instruction), as `fused_interval_rows` counts intervals.
fn fused_since_rows(monitor: &Monitor) -> u64 {
    fused_rows_with(monitor, |d| matches!(d, scalar_ir::InstData::Since { .. }))
}

fn fused_rows_with(monitor: &Monitor, inst: fn(&scalar_ir::InstData) -> bool) -> u64 {
    let has = |p: &scalar_ir::Program| p.insts.iter().any(inst);
    let (engine, stats) = (monitor.engine(), monitor.stats());
    let whole = engine.whole_lowered().is_some_and(|l| has(&l.program));
    let regions = engine.lowered().any(|l| has(&l.program));
    u64::from(whole) * stats.whole_rows + u64::from(regions) * stats.region_runs
}

/// Whether a run stopped because an interval was full.
fn full(run: &Run) -> bool {
    matches!(&run.1, Some(e) if e.kind == vigil::ErrorKind::WindowFull)
}

/// Compares the reference's run with the canonical tier's: the reference
/// keeps every sample, so where the canonical run stopped with `window
/// full` only the steps before are compared.
fn compare_reference(
    spec: &Spec,
    rows: &[Vec<Option<Value>>],
    refer: Run,
    canon: &Run,
) -> Result<(), String> {
    let refer = match full(canon) {
        true => (refer.0[..canon.0.len()].to_vec(), canon.1.clone()),
        false => refer,
    };
    compare_runs(
        spec,
        rows,
        ("reference", refer),
        ("canonical", canon.clone()),
    )
}

/// A trace of `len` rows: `x` and `y` each absent at some rows, times
/// mostly increasing by 1 to 700 ms, sometimes standing still or going
/// back (the operators never go back in time).
fn trace_of(data: &[u32], len: usize) -> (Vec<Vec<Option<Value>>>, Vec<Time>) {
    let mut p = Pick { data, pos: 0 };
    let mut t = 0i64;
    let mut rows = Vec::new();
    let mut times = Vec::new();
    for _ in 0..len {
        t += match p.pick(12) {
            0 => 0,
            1 => -300,
            k => (k as i64) * 61,
        };
        times.push(Time(t * 1_000_000));
        let x = (p.pick(5) != 0).then(|| Value::Float(p.pick(9) as f64 * 0.5 - 1.0));
        let y = (p.pick(4) != 0).then(|| Value::Int(p.pick(6) as i64 - 1));
        rows.push(vec![x, y]);
    }
    (rows, times)
}

/// The run of `rows` at `times` through a `Stepper` (`step_at`), and the
/// rows its fast path completed.
fn run_stepper(monitor: &mut Monitor, rows: &[Vec<Option<Value>>], times: &[Time]) -> (Run, u64) {
    let mut stepper = monitor.stepper();
    let mut outputs = Vec::new();
    for (row, &t) in rows.iter().zip(times) {
        for (i, cell) in row.iter().enumerate() {
            match cell {
                Some(v) => stepper.set(i, Some(v)).expect("a reader's value"),
                None => stepper.unset(i),
            }
        }
        match stepper.step_at(t) {
            Ok(samples) => outputs.push(samples.to_vec()),
            Err(e) => {
                return (
                    (outputs, Some(crate::props::runtime(e))),
                    stepper.fast_rows(),
                );
            }
        }
    }
    ((outputs, None), stepper.fast_rows())
}

fn run_timed(monitor: &mut Monitor, rows: &[Vec<Option<Value>>], times: &[Time]) -> Run {
    let mut outputs = Vec::new();
    for (row, &t) in rows.iter().zip(times) {
        match monitor.step_at(t, row) {
            Ok(samples) => outputs.push(samples.to_vec()),
            Err(e) => return (outputs, Some(crate::props::runtime(e))),
        }
    }
    (outputs, None)
}

/// What the generated cases must reach, so that the property does not
/// pass vacuously.
#[derive(Default, Debug)]
struct Coverage {
    globally: usize,
    eventually: usize,
    /// An interval whose near end is not 0 (pending samples).
    lagged: usize,
    /// Temporal operators nested in one another.
    nested: usize,
    verdicts_true: usize,
    verdicts_false: usize,
    /// A robustness of an empty interval (±inf) and a finite one.
    infinite: usize,
    finite: usize,
    /// A snapshot taken with samples in an interval.
    snapshots_mid_window: usize,
    /// Runs that stopped with `window full` (a small `stl(φ, N)`).
    full: usize,
    /// Rows fused code completed with an interval window in it (on every
    /// tier but the canonical one), and of those, on native regions alone.
    fused_rows: usize,
    fused_region_rows: usize,
    /// Formulas with a since, one whose interval's near end is not 0, and
    /// rows fused code completed with a since in it.
    since: usize,
    since_lagged: usize,
    fused_since_rows: usize,
    /// Rows a stepper's fast path completed at their times (`step_at`).
    stepper_fast_rows: usize,
}

fn check(
    spec_data: &[u32],
    len: usize,
    trace_data: &[u32],
    pick: usize,
    cov: &mut Coverage,
) -> Result<(), String> {
    let mut p = Pick {
        data: spec_data,
        pos: 0,
    };
    let f = formula(&mut p, 3);
    let cap = [None, None, None, Some(2), Some(4)][p.pick(5)];
    let source = spec_of(&f, cap);
    let spec = Spec::parse("stl.dsrv", &source).map_err(|e| format!("{e}\n{source}"))?;
    let (rows, times) = trace_of(trace_data, len);
    let refer = reference::evaluate_timed(spec.checked(), &rows, &times);
    let canon = run_timed(
        &mut Monitor::builder(&spec).tier(Tier::Canonical).build(),
        &rows,
        &times,
    );
    compare_reference(&spec, &rows, refer, &canon)?;
    cov.full += usize::from(full(&canon));
    // Every tier with the rows' times, and the native regions alone.
    let regions_only = Monitor::builder(&spec)
        .tier(Tier::NativeRegions)
        .regions_only()
        .build();
    let monitors = Tier::ALL
        .into_iter()
        .map(|tier| (tier.to_string(), Monitor::builder(&spec).tier(tier).build()))
        .chain([("native regions only".to_string(), regions_only)]);
    for (name, mut monitor) in monitors {
        let run = run_timed(&mut monitor, &rows, &times);
        compare_runs(&spec, &rows, ("canonical", canon.clone()), (&name, run))?;
        let fused = fused_interval_rows(&monitor);
        cov.fused_rows += fused as usize;
        cov.fused_since_rows += fused_since_rows(&monitor) as usize;
        if name == "native regions only" {
            cov.fused_region_rows += fused as usize;
        }
    }
    // A stepper at the rows' times (`Stepper::step_at`): the fast path of
    // the whole-row kernel sets the row's time in its frame.
    for tier in Tier::ALL {
        let (run, fast) = run_stepper(
            &mut Monitor::builder(&spec).tier(tier).build(),
            &rows,
            &times,
        );
        compare_runs(
            &spec,
            &rows,
            ("canonical", canon.clone()),
            (&format!("{tier} stepper"), run),
        )?;
        cov.stepper_fast_rows += fast as usize;
    }
    // Batches, whose rows have no time (each its step's): every tier
    // against the canonical tier's batches, and those against the
    // reference at the steps' times.
    let step_times: Vec<Time> = (0..rows.len() as i64)
        .map(|k| Time(k * 1_000_000_000))
        .collect();
    let canon_batch = crate::props::run_tier_batch(&spec, &rows, Tier::Canonical);
    let refer = reference::evaluate_timed(spec.checked(), &rows, &step_times);
    compare_reference(&spec, &rows, refer, &canon_batch)?;
    for tier in Tier::ALL {
        let run = crate::props::run_tier_batch(&spec, &rows, tier);
        compare_runs(
            &spec,
            &rows,
            ("canonical batches", canon_batch.clone()),
            (&format!("{tier} batches"), run),
        )?;
    }
    // Split, snapshot (bytes or JSON), restore on another tier, go on.
    let split = pick % (len + 1);
    let mut first = Monitor::builder(&spec).tier(Tier::Quickened).build();
    let (mut outputs, mut error) = run_timed(&mut first, &rows[..split], &times[..split]);
    if error.is_none() {
        let snap = first.snapshot();
        let text = snap.to_json();
        let words = text.split("\"windows\":[").nth(1).unwrap_or("");
        let words = words.split(']').next().unwrap_or("");
        cov.snapshots_mid_window += words
            .split(',')
            .filter(|w| !w.is_empty() && *w != "0")
            .count()
            .min(1);
        let decoded = match pick % 2 {
            0 => Snapshot::from_json(&text).map_err(|e| e.to_string())?,
            _ => Snapshot::from_bytes(&snap.to_bytes()).map_err(|e| e.to_string())?,
        };
        let second = Tier::ALL[pick / 2 % Tier::ALL.len()];
        let mut resumed = Monitor::builder(&spec)
            .tier(second)
            .restore(&decoded)
            .map_err(|e| format!("restore failed: {e}"))?
            .build();
        let (more, err) = run_timed(&mut resumed, &rows[split..], &times[split..]);
        outputs.extend(more);
        error = err;
    }
    compare_runs(
        &spec,
        &rows,
        ("canonical", canon.clone()),
        ("split and restored", (outputs, error)),
    )?;
    cov.globally += f.contains("G[") as usize;
    cov.eventually += f.contains("F[") as usize;
    cov.since += f.contains("S[") as usize;
    cov.since_lagged += BOUNDS[2..]
        .iter()
        .any(|&b| f.contains(&format!("S[{}, ", bound(b)))) as usize;
    cov.lagged += BOUNDS[2..]
        .iter()
        .any(|&b| f.contains(&format!("[{}, ", bound(b)))) as usize;
    cov.nested += (f.matches('[').count() - f.matches("x[1]").count() >= 2) as usize;
    for row in &canon.0 {
        match &row[0] {
            Sample::Value(Value::Bool(true)) => cov.verdicts_true += 1,
            Sample::Value(Value::Bool(false)) => cov.verdicts_false += 1,
            _ => {}
        }
        match &row[1] {
            Sample::Value(Value::Float(r)) if r.is_infinite() => cov.infinite += 1,
            Sample::Value(Value::Float(_)) => cov.finite += 1,
            _ => {}
        }
    }
    Ok(())
}

fn strategy() -> impl Strategy<Value = (Vec<u32>, usize, Vec<u32>, usize)> {
    (
        proptest::collection::vec(any::<u32>(), 0..60),
        0..=40usize,
        proptest::collection::vec(any::<u32>(), 0..200),
        any::<usize>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn stl_formulas_agree_with_the_reference_on_every_tier(case in strategy()) {
        let (spec_data, len, trace_data, pick) = case;
        let mut cov = Coverage::default();
        check(&spec_data, len, &trace_data, pick, &mut cov).map_err(TestCaseError::fail)?;
    }
}

/// A deterministic sweep of the same cases, with the coverage guard.
#[test]
fn stl_sweep_covers_every_operator() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = strategy();
    let mut cov = Coverage::default();
    for _ in 0..150 {
        let (spec_data, len, trace_data, pick) = strategy.new_tree(&mut runner).unwrap().current();
        if let Err(e) = check(&spec_data, len, &trace_data, pick, &mut cov) {
            panic!("{e}");
        }
    }
    assert!(
        cov.globally >= 30
            && cov.eventually >= 15
            && cov.lagged >= 20
            && cov.nested >= 10
            && cov.verdicts_true >= 200
            && cov.verdicts_false >= 200
            && cov.infinite >= 20
            && cov.finite >= 200
            && cov.snapshots_mid_window >= 20
            && cov.full >= 10
            && cov.fused_rows >= 3000
            && cov.fused_region_rows >= 500
            && cov.since >= 15
            && cov.since_lagged >= 5
            && cov.fused_since_rows >= 1000
            && cov.stepper_fast_rows >= 500,
        "{cov:?}"
    );
    eprintln!("{cov:?}");
}

/// A keyed monitor keeps an interval (and a since) per key: each key's run
/// is a plain monitor's of its rows, with their times, across a snapshot.
#[test]
fn keyed_monitors_keep_an_interval_per_key() {
    let src = "in k: Int\nin x: Float\nout q: Bool\nout r: Float\nout s: Float\n\
               q = stl(G[0, 1s](x > 0) || F[500ms, 2s](x < -1))\n\
               r = stl_rob(F[0, 1500ms](x > 1))\n\
               s = stl_rob(x > -2 S[250ms, 1s] x > 1)\n";
    let spec = Spec::parse("keyed.dsrv", src).unwrap();
    for tier in Tier::ALL {
        let mut plain: Vec<Monitor> = (0..3)
            .map(|_| Monitor::builder(&spec).tier(tier).build())
            .collect();
        let mut keyed = KeyedMonitor::builder(&spec, "k")
            .tier(tier)
            .build()
            .unwrap();
        for r in 0..90i64 {
            if r == 40 {
                let snap = vigil::KeyedSnapshot::from_bytes(&keyed.snapshot().to_bytes()).unwrap();
                keyed = KeyedMonitor::builder(&spec, "k")
                    .tier(tier)
                    .restore(&snap)
                    .build()
                    .unwrap();
            }
            let x = (r % 7 != 3).then(|| Value::Float(((r * 7919) % 11) as f64 / 2.0 - 2.5));
            let row = vec![Some(Value::Int(r % 3)), x];
            let t = Time(r * 170_000_000);
            let want = plain[(r % 3) as usize].step_at(t, &row).unwrap().to_vec();
            let got = keyed.step_at(t, &row).unwrap().to_vec();
            assert_eq!(got, want, "{tier}, row {r}");
        }
        // The intervals ran in the whole-row kernel on the keys' packed
        // runs, at the rows' times (not on the canonical tier).
        if tier == Tier::NativeWhole {
            assert!(keyed.stats().packed_rows >= 40, "{:?}", keyed.stats());
        }
    }
}

/// An interval past its bound is the same runtime error (kind, stream,
/// step, message) on every tier, where fused code runs the interval: row by
/// row with the rows' times, on the native regions alone, in batches and
/// on a keyed monitor's packed runs.
#[test]
fn a_full_interval_is_the_same_error_on_every_tier_and_path() {
    let src = "in k: Int\nin x: Float\nout q: Bool\nout r: Float\n\
               q = stl(F[0, 1s](x > 2))\nr = stl_rob(G[0, 10s](x > 0), 3)\n";
    let spec = Spec::parse("full.dsrv", src).unwrap();
    // A rising robustness: the deque keeps every sample, the fourth is one
    // too many.
    let rows: Vec<Vec<Option<Value>>> = (0..6)
        .map(|i| vec![Some(Value::Int(0)), Some(Value::Float(i as f64))])
        .collect();
    let times: Vec<Time> = (0..6).map(|i| Time(i * 100_000_000)).collect();
    let canon = run_timed(
        &mut Monitor::builder(&spec).tier(Tier::Canonical).build(),
        &rows,
        &times,
    );
    let e = canon.1.clone().expect("the fourth sample is one too many");
    assert_eq!(
        (e.kind, e.step, e.stream.as_str()),
        (vigil::ErrorKind::WindowFull, 3, "r")
    );
    assert_eq!(
        e.to_string(),
        "window full in STL operator: its interval holds more than 3 samples \
         (raise the bound: `stl(φ, N)`) (stream `r`, step 3)"
    );
    let fused = [Tier::Quickened, Tier::NativeRegions, Tier::NativeWhole];
    for (name, mut monitor) in Tier::ALL
        .into_iter()
        .map(|t| (t.to_string(), Monitor::builder(&spec).tier(t).build()))
        .chain([(
            "native regions only".to_string(),
            Monitor::builder(&spec)
                .tier(Tier::NativeRegions)
                .regions_only()
                .build(),
        )])
    {
        let run = run_timed(&mut monitor, &rows, &times);
        assert_eq!(run, canon, "{name}");
        if fused.iter().any(|t| t.to_string() == name) || name.ends_with("only") {
            assert!(
                fused_interval_rows(&monitor) >= 3,
                "{name}: {:?}",
                monitor.stats()
            );
        }
    }
    let canon_batch = crate::props::run_tier_batch(&spec, &rows, Tier::Canonical);
    assert_eq!(canon_batch.1.as_ref().map(|e| e.step), Some(3));
    for tier in Tier::ALL {
        let mut monitor = Monitor::builder(&spec).tier(tier).build();
        let mut batch = monitor.batch();
        for row in &rows {
            batch.push_row(row).unwrap();
        }
        let mut out = vigil::OutputBatch::new();
        let err = monitor.run_batch(&batch, &mut out).unwrap_err();
        assert_eq!(
            Some(crate::props::runtime(err)),
            canon_batch.1,
            "{tier} batch"
        );
        if fused.contains(&tier) {
            assert!(
                fused_interval_rows(&monitor) >= 3,
                "{tier}: {:?}",
                monitor.stats()
            );
        }
        let mut keyed = KeyedMonitor::builder(&spec, "k")
            .tier(tier)
            .build()
            .unwrap();
        let mut got = None;
        for (row, &t) in rows.iter().zip(&times) {
            if let Err(e) = keyed.step_at(t, row) {
                got = Some(crate::props::runtime(e));
                break;
            }
        }
        assert_eq!(got, canon.1, "{tier} keyed");
        // (A key's first row makes its run: the kernel takes the next.)
        if tier == Tier::NativeWhole {
            assert!(keyed.stats().packed_rows >= 2, "{:?}", keyed.stats());
        }
    }
}

/// `vigil run --key k --time ts` of STL formulas, killed with SIGKILL at random points and
/// resumed from its checkpoints, writes exactly the output file of an uninterrupted run: each
/// key's intervals are in its snapshot. The uninterrupted run is also each key's run on the
/// library's plain monitor, with the rows' times.
#[test]
fn keyed_timed_runs_resume_from_checkpoints_to_the_same_output() {
    use crate::checkpoints::{Rng, killed_and_resumed, uninterrupted};
    use crate::support::{test_dir, write};
    let mut rng = Rng::new();
    let dir = test_dir("stl_spec", "kill-keyed");
    let src = "in k: Int\nin x: Float\nout q: Bool\nout r: Float\n\
               q = stl(G[0, 2s](x > -0.5) && F[250ms, 1s](x > 1), 64)\n\
               r = stl_rob(F[0, 500ms](x < 0.5))\n";
    write(&dir, "spec.dsrv", src);
    let n = 40_000i64;
    let rows: Vec<(i64, i64, Option<f64>)> = (0..n)
        .map(|i| {
            let x = (i % 13 != 5).then(|| ((i * 7919) % 17) as f64 / 4.0 - 1.5);
            (i % 5, i * 37 + (i * 13) % 29, x)
        })
        .collect();
    let text: String = rows
        .iter()
        .map(|(k, ts, x)| match x {
            Some(x) => format!("{{\"k\": {k}, \"ts\": {ts}, \"x\": {x:?}}}\n"),
            None => format!("{{\"k\": {k}, \"ts\": {ts}}}\n"),
        })
        .collect();
    let input = write(&dir, "t.jsonl", text);
    let extra = [
        "--key",
        "k",
        "--time",
        "ts",
        "--time-unit",
        "ms",
        "--output",
        "csv",
        "--checkpoint-every",
        "1500",
    ];
    let want = uninterrupted(&dir, &input, &extra, None);
    // Each key's lines (its own step numbers) are its plain monitor's run.
    let spec = Spec::parse("spec.dsrv", src).unwrap();
    let mut plain: Vec<Monitor> = (0..5).map(|_| Monitor::builder(&spec).build()).collect();
    let mut expected = String::new();
    let mut steps = [0u64; 5];
    for (k, ts, x) in &rows {
        let step = steps[*k as usize];
        steps[*k as usize] += 1;
        let row = vec![Some(Value::Int(*k)), x.map(Value::Float)];
        let out = plain[*k as usize]
            .step_at(Time(ts * 1_000_000), &row)
            .unwrap()
            .to_vec();
        let cell = |s: &Sample| match s {
            Sample::Value(Value::Bool(b)) => b.to_string(),
            Sample::Value(Value::Float(f)) => format!("{f:?}"),
            other => panic!("{other:?}"),
        };
        expected.push_str(&format!(
            "{step},{k},{ts},{},{}\n",
            cell(&out[0]),
            cell(&out[1])
        ));
    }
    let want_text = String::from_utf8_lossy(&want);
    let body: String = want_text
        .lines()
        .skip(1)
        .map(|l| format!("{l}\n"))
        .collect();
    if let Some((got, want)) = body.lines().zip(expected.lines()).find(|(a, b)| a != b) {
        panic!("the keyed timed run is not each key's plain run: {got} where {want}");
    }
    assert_eq!(body.lines().count(), rows.len());
    let (got, landed) = killed_and_resumed(&dir, &input, &extra, None, 3, &mut rng);
    assert!(
        got == want,
        "the resumed output differs from an uninterrupted run's"
    );
    eprintln!("{landed} of 3 kills landed before the end");
    assert!(
        landed >= 2,
        "only {landed} of 3 kills landed before the end"
    );
}

/// A formula written twice: for the STL property file (bounds in seconds) and for `stl(…)`.
fn twin_formula(p: &mut Pick, depth: usize, temporal: bool) -> (String, String) {
    if depth == 0 || p.pick(3) == 0 {
        let c = p.one(&["-1", "0", "1.5", "2"]);
        let op = p.one(&[">", "<", ">=", "<="]);
        let atom = format!("x {op} {c}");
        return (atom.clone(), atom);
    }
    let k = if temporal { p.pick(5) } else { p.pick(3) };
    let (a, b) = twin_formula(p, depth - 1, temporal);
    match k {
        0 => (format!("!({a})"), format!("!({b})")),
        1 | 2 => {
            let (c, d) = twin_formula(p, depth - 1, temporal);
            let op = if k == 1 { "&&" } else { "||" };
            (format!("({a}) {op} ({c})"), format!("({b}) {op} ({d})"))
        }
        op => {
            let lo = p.one(&[0i64, 100, 200]);
            let hi = lo + p.one(&[0i64, 100, 300]);
            let name = if op == 3 { "G" } else { "F" };
            (
                format!(
                    "{name}[{}, {}]({a})",
                    lo as f64 / 1000.0,
                    hi as f64 / 1000.0
                ),
                format!("{name}[{}, {}]({b})", bound(lo), bound(hi)),
            )
        }
    }
}

/// The checker's future-time verdicts (`delayed-quantitative` or `-qualitative`) of property
/// `p: f` over `x` sampled every 100 ms: (time in ms, robustness or 1.0/0.0).
fn future_verdicts(f: &str, xs: &[f64], quantitative: bool) -> Vec<(i64, f64)> {
    use vigil::stl::{Semantics, StlMonitor, StlSample, StlSpec, Synchronization, Verdict};
    let spec = StlSpec::parse("p.mstlo", &format!("p: {f}\n")).unwrap();
    let semantics = match quantitative {
        true => Semantics::from_name("delayed-quantitative").unwrap(),
        false => Semantics::from_name("delayed-qualitative").unwrap(),
    };
    let mut monitor =
        StlMonitor::new(&spec, semantics, Synchronization::ZeroOrderHold, &[]).unwrap();
    let mut out = Vec::new();
    for (k, &x) in xs.iter().enumerate() {
        let time = std::time::Duration::from_millis(100 * k as u64);
        let signal = spec.signal("x").unwrap();
        for e in monitor.step(&mut [StlSample {
            signal,
            time,
            value: x,
        }]) {
            let v = match e.value {
                Verdict::Robustness(r) => r,
                Verdict::Bool(b) => f64::from(u8::from(b)),
                other => panic!("{other:?}"),
            };
            out.push((e.time.as_millis() as i64, v));
        }
    }
    out
}

/// The past-time verdicts of `stl(f)` and `stl_rob(f)` over `xs` at 0, 100, … ms, per step:
/// (robustness, verdict).
fn past_verdicts(f: &str, xs: &[f64]) -> Vec<(f64, bool)> {
    let spec = Spec::parse(
        "p.dsrv",
        &format!("in x: Float\nout q: Bool\nout r: Float\nq = stl({f})\nr = stl_rob({f})\n"),
    )
    .unwrap();
    let mut m = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
    (xs.iter().enumerate())
        .map(|(k, &x)| {
            let out = m
                .step_at(Time(k as i64 * 100_000_000), [Some(Value::Float(x))])
                .unwrap()
                .to_vec();
            match (&out[1], &out[0]) {
                (Sample::Value(Value::Float(r)), Sample::Value(Value::Bool(q))) => (*r, *q),
                other => panic!("{other:?}"),
            }
        })
        .collect()
}

/// The exact correspondence with the checker's (future-time) STL, against vigil's STL evaluator
/// (`src/stl`, itself checked against the `mstlo` crate): over a signal `x` sampled at 0, 100, …,
/// T ms, the past-time verdict at time t of a formula over `x` is the future-time verdict at time
/// T - t of the same formula over the signal reversed in time (`x(T - t)`), for every t from the
/// formula's horizon (the sum of its intervals' far ends) on, where every interval the past-time
/// reading spans lies inside the trace. For one operator `G[a, b] ψ` or `F[a, b] ψ` with ψ free of
/// temporal operators it is also a shift: the past-time verdict at t is the future-time verdict at
/// t - a - b over the same signal (the samples of `[t - b, t - a]` either way).
#[test]
fn past_time_verdicts_are_the_checkers_future_time_verdicts_reversed_or_shifted() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (
        proptest::collection::vec(any::<u32>(), 8..40),
        proptest::collection::vec(0u32..9, 20..45),
    );
    let (mut compared, mut shifted, mut nested) = (0usize, 0usize, 0usize);
    for _ in 0..200 {
        let (data, raw) = strategy.new_tree(&mut runner).unwrap().current();
        let xs: Vec<f64> = raw.iter().map(|&v| v as f64 * 0.5 - 1.0).collect();
        let mut p = Pick {
            data: &data,
            pos: 0,
        };
        let (file_f, spec_f) = twin_formula(&mut p, 3, true);
        let last = (xs.len() as i64 - 1) * 100;
        let reversed: Vec<f64> = xs.iter().rev().copied().collect();
        let past = past_verdicts(&spec_f, &reversed);
        for quantitative in [true, false] {
            for (s, v) in future_verdicts(&file_f, &xs, quantitative) {
                let (r, q) = past[((last - s) / 100) as usize];
                let got = if quantitative {
                    r
                } else {
                    f64::from(u8::from(q))
                };
                assert!(
                    got == v,
                    "{spec_f}: past at {} ms {got}, future at {s} ms {v}",
                    last - s
                );
                compared += 1;
            }
        }
        nested += (spec_f.matches('[').count() >= 2) as usize;
        // One operator over a temporal-free operand: the shift.
        let (op, lo, hi) = (p.one(&["G", "F"]), p.one(&[0i64, 100, 200]), 0);
        let hi = lo + hi + p.one(&[0i64, 100, 300]);
        let (inner_file, inner_spec) = twin_formula(&mut p, 2, false);
        let file_f = format!(
            "{op}[{}, {}]({inner_file})",
            lo as f64 / 1000.0,
            hi as f64 / 1000.0
        );
        let spec_f = format!("{op}[{}, {}]({inner_spec})", bound(lo), bound(hi));
        let past = past_verdicts(&spec_f, &xs);
        for (s, v) in future_verdicts(&file_f, &xs, true) {
            let t = s + lo + hi;
            if t <= last {
                let got = past[(t / 100) as usize].0;
                assert!(
                    got == v,
                    "{spec_f}: past at {t} ms {got}, future at {s} ms {v}"
                );
                shifted += 1;
            }
        }
    }
    assert!(
        compared >= 3000 && shifted >= 1500 && nested >= 25,
        "{compared} {shifted} {nested}"
    );
}

/// An interval that would keep more samples than its bound stops the run with a runtime error
/// naming the bound (exit 3), after the outputs of every earlier step, on every tier; a falling
/// signal, whose deque keeps one sample, does not.
#[test]
fn an_interval_past_its_bound_is_a_runtime_error() {
    use crate::support::{run_vigil, test_dir, write};
    let dir = test_dir("stl_spec", "bound");
    let spec = write(
        &dir,
        "spec.dsrv",
        "in x: Float\nout r: Float\nr = stl_rob(G[0, 10s](x > 0), 2)\n",
    );
    let rising = write(&dir, "rising.csv", "x\n1\n2\n3\n4\n");
    let falling = write(&dir, "falling.csv", "x\n4\n3\n2\n1\n");
    for tier in [
        "canonical",
        "quickened",
        "native-regions",
        "native-whole",
        "auto",
    ] {
        let (code, out, err) = run_vigil(&["run", &spec, "--input", &rising, "--tier", tier], None);
        assert_eq!(code, 3, "{tier}: {err}");
        assert_eq!(out, "r[0] = Float(1.0)\nr[1] = Float(1.0)\n", "{tier}");
        // (native-whole also warns that it runs native regions.)
        assert!(
            err.ends_with(
                "error: window full in STL operator: its interval holds more than 2 samples \
                 (raise the bound: `stl(φ, N)`) (stream `r`, step 2)\n"
            ),
            "{tier}: {err}"
        );
        let (code, out, err) =
            run_vigil(&["run", &spec, "--input", &falling, "--tier", tier], None);
        assert_eq!(code, 0, "{tier}: {err}");
        assert_eq!(out.lines().last(), Some("r[3] = Float(1.0)"), "{tier}");
    }
}

/// A batch after rows stepped with their times: the batch's rows have no
/// time (each is its step's) on every tier. The canonical tier once read
/// the last stepped row's time at every row of the batch, where the batch
/// kernel reads the steps'.
#[test]
fn a_batch_after_timed_rows_reads_its_steps_times() {
    let src = "in x: Float\nout r: Float\nr = stl_rob(G[0, 2s](x > 0))\n";
    let spec = Spec::parse("mixed.dsrv", src).unwrap();
    let run = |tier: Tier| {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        let mut out = Vec::new();
        for k in 0..4i64 {
            let row = [Some(Value::Float(k as f64))];
            out.push(m.step_at(Time(k * 100_000_000), row).unwrap().to_vec());
        }
        let mut batch = m.batch();
        for k in 0..8 {
            batch.push_row(&[Some(Value::Float(k as f64))]).unwrap();
        }
        let mut outputs = vigil::OutputBatch::new();
        m.run_batch(&batch, &mut outputs).unwrap();
        out.extend(outputs.rows().map(|r| r.to_vec()));
        (out, fused_interval_rows(&m))
    };
    let (canon, _) = run(Tier::Canonical);
    // The timed rows are at 0 … 300 ms; the batch's at steps 4 … 11, so
    // 4 … 11 s: at step 7 (7 s) G[0, 2s] sees the batch's 1, 2, 3.
    let at = |k: usize| match &canon[k][0] {
        Sample::Value(Value::Float(r)) => *r,
        other => panic!("{other:?}"),
    };
    assert_eq!((at(4), at(6), at(7), at(11)), (0.0, 0.0, 1.0, 5.0));
    for tier in [Tier::Quickened, Tier::NativeRegions, Tier::NativeWhole] {
        let (got, fused) = run(tier);
        assert_eq!(got, canon, "{tier}");
        assert!(fused >= 8, "{tier}: {fused} rows fused");
    }
}

/// `φ S[a, b] ψ` against its definition, evaluated directly here (O(n²)): at a step of time
/// `t` (the latest row time so far), the maximum over ψ's samples at times in `[t - b, t - a]`
/// of the minimum of that sample and φ's samples at the later steps up to this one; false
/// (-inf) where there is none. A Bool stream alone has a sample where it has a value; a
/// comparison holds its signal, so it has one at every step once the signal has had a value.
/// Every tier, row by row at the rows' times; it fails unless both verdicts, finite and
/// vacuous robustness, and rows that fused code ran with the since, all occur.
#[test]
fn since_is_its_definition_on_every_tier() {
    let mut seed = 0x853c_49e6_748f_ea9bu64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let (mut held, mut not_held, mut finite, mut vacuous, mut fused) = (0, 0, 0, 0, 0);
    for case in 0..40 {
        let lo = [0i64, 0, 100, 250][next(4) as usize];
        let hi = lo + [0i64, 100, 500, 1000][next(4) as usize];
        let src = format!(
            "in p: Bool\nin q: Bool\nin x: Float\nout a: Bool\nout b: Float\n\
             a = stl(p S[{}, {}] q)\nb = stl_rob(x > 0.5 S[{}, {}] x < 2)\n",
            bound(lo),
            bound(hi),
            bound(lo),
            bound(hi)
        );
        let spec = Spec::parse("since.dsrv", &src).unwrap();
        let (mut rows, mut times) = (Vec::new(), Vec::new());
        let mut t = 0i64;
        for _ in 0..150 {
            t += match next(10) {
                0 => 0,
                1 => -120,
                k => k as i64 * 37,
            };
            times.push(t);
            let bool_or_none = |k: u64| (k < 4).then_some(Value::Bool(k < 3));
            let p = bool_or_none(next(5));
            let q = bool_or_none(next(6) + 1);
            let x = (next(6) != 0).then(|| Value::Float(next(7) as f64 * 0.5 - 0.5));
            rows.push(vec![p, q, x]);
        }
        // The definition, step by step.
        let mut want: Vec<(bool, f64)> = Vec::new();
        let mut clock: Vec<i64> = Vec::new();
        let mut x_held: Vec<Option<f64>> = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            clock.push(clock.last().map_or(times[i], |&c| c.max(times[i])));
            let x_now = match &row[2] {
                Some(Value::Float(x)) => Some(*x),
                _ => x_held.last().copied().flatten(),
            };
            x_held.push(x_now);
            let now = clock[i];
            let inside = |j: usize| clock[j] >= now - hi && clock[j] <= now - lo;
            let flag = |k: usize, c: usize| match &rows[k][c] {
                Some(Value::Bool(b)) => Some(*b),
                _ => None,
            };
            let verdict = (0..=i).any(|j| {
                inside(j)
                    && flag(j, 1) == Some(true)
                    && (j + 1..=i).all(|k| flag(k, 0) != Some(false))
            });
            let mut rob = f64::NEG_INFINITY;
            for j in (0..=i).filter(|&j| inside(j)) {
                let Some(xj) = x_held[j] else { continue };
                let mut v = 2.0 - xj;
                for xk in x_held[j + 1..=i].iter().flatten() {
                    v = v.min(xk - 0.5);
                }
                rob = rob.max(v);
            }
            want.push((verdict, rob));
        }
        let ts: Vec<Time> = times.iter().map(|&ms| Time(ms * 1_000_000)).collect();
        for tier in Tier::ALL {
            let mut m = Monitor::builder(&spec).tier(tier).build();
            let (run, err) = run_timed(&mut m, &rows, &ts);
            assert_eq!(err, None, "case {case}, {tier}");
            for (k, (out, &(verdict, rob))) in run.iter().zip(&want).enumerate() {
                let got = match (&out[0], &out[1]) {
                    (Sample::Value(Value::Bool(a)), Sample::Value(Value::Float(b))) => (*a, *b),
                    other => panic!("{other:?}"),
                };
                assert!(
                    got.0 == verdict && got.1 == rob,
                    "case {case}, {tier}, step {k}: {got:?}, the definition ({verdict}, {rob})\n{src}"
                );
                if tier == Tier::Canonical {
                    held += usize::from(verdict);
                    not_held += usize::from(!verdict);
                    finite += usize::from(rob.is_finite());
                    vacuous += usize::from(rob == f64::NEG_INFINITY);
                }
            }
            fused += fused_since_rows(&m);
        }
    }
    assert!(
        held > 500 && not_held > 500 && finite > 500 && vacuous > 50 && fused > 5000,
        "{held} held, {not_held} not, {finite} finite, {vacuous} vacuous, {fused} fused"
    );
}

/// A since past its bound (more ψ samples not yet `a` old than `N`) is the
/// canonical tier's runtime error on every tier, row by row, on the native
/// regions alone and in batches, with fused code running the since.
#[test]
fn a_full_since_is_the_same_error_on_every_tier() {
    let src = "in x: Float\nout r: Float\nr = stl_rob(x > 0 S[5s, 10s] x > 1, 3)\n";
    let spec = Spec::parse("full.dsrv", src).unwrap();
    let rows: Vec<Vec<Option<Value>>> =
        (0..6).map(|i| vec![Some(Value::Float(i as f64))]).collect();
    let times: Vec<Time> = (0..6).map(|i| Time(i * 100_000_000)).collect();
    let canon = run_timed(
        &mut Monitor::builder(&spec).tier(Tier::Canonical).build(),
        &rows,
        &times,
    );
    let e = canon
        .1
        .clone()
        .expect("the fourth pending sample is one too many");
    assert_eq!(
        e.to_string(),
        "window full in STL operator: its interval holds more than 3 samples \
         (raise the bound: `stl(φ, N)`) (stream `r`, step 3)"
    );
    let regions_only = Monitor::builder(&spec)
        .tier(Tier::NativeRegions)
        .regions_only()
        .build();
    let monitors = Tier::ALL
        .into_iter()
        .map(|t| (t, Monitor::builder(&spec).tier(t).build()))
        .chain([(Tier::NativeRegions, regions_only)]);
    for (tier, mut monitor) in monitors {
        assert_eq!(run_timed(&mut monitor, &rows, &times), canon, "{tier}");
        // (Auto runs canonically until the run is hot.)
        if ![Tier::Canonical, Tier::Auto].contains(&tier) {
            assert!(
                fused_since_rows(&monitor) >= 3,
                "{tier}: {:?}",
                monitor.stats()
            );
        }
        let batch = crate::props::run_tier_batch(&spec, &rows, tier);
        assert_eq!(
            batch.1.as_ref().map(|e| (e.kind, e.step)),
            Some((e.kind, 3)),
            "{tier} batch"
        );
    }
}

/// The checker's `φ U[0, b] ψ` (future time) over a signal reversed in time is vigil's
/// `φ S[0, b] (φ && ψ)` (past time), verdict and robustness, against the STL evaluator (itself
/// checked against the `mstlo` crate). The checker's `U` at `t` takes the best `t'` in
/// `[t, t + b]` with φ over `[t, t']`, φ at `t'` included; reversed, that is a `t'` in
/// `[s - b, s]` with φ at `t'` and after it up to `s`, where vigil's `S` asks φ only after `t'`
/// (docs/language.md): so `φ && ψ` on the right. Only a near end of 0: mstlo 0.1.1's `U`
/// ignores its interval's near end.
#[test]
fn since_is_the_checkers_until_reversed() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (
        proptest::collection::vec(any::<u32>(), 8..40),
        proptest::collection::vec(0u32..9, 20..45),
    );
    let mut compared = 0usize;
    for _ in 0..150 {
        let (data, raw) = strategy.new_tree(&mut runner).unwrap().current();
        let xs: Vec<f64> = raw.iter().map(|&v| v as f64 * 0.5 - 1.0).collect();
        let mut p = Pick {
            data: &data,
            pos: 0,
        };
        let (phi_file, phi_spec) = twin_formula(&mut p, 1, false);
        let (psi_file, psi_spec) = twin_formula(&mut p, 1, false);
        let hi = p.one(&[0i64, 100, 200, 500]);
        let file_f = format!("({phi_file}) U[0, {}] ({psi_file})", hi as f64 / 1000.0);
        let spec_f = format!(
            "({phi_spec}) S[0, {}] (({phi_spec}) && ({psi_spec}))",
            bound(hi)
        );
        let last = (xs.len() as i64 - 1) * 100;
        let reversed: Vec<f64> = xs.iter().rev().copied().collect();
        let past = past_verdicts(&spec_f, &reversed);
        for quantitative in [true, false] {
            for (s, v) in future_verdicts(&file_f, &xs, quantitative) {
                let (r, q) = past[((last - s) / 100) as usize];
                let got = if quantitative {
                    r
                } else {
                    f64::from(u8::from(q))
                };
                assert!(
                    got == v,
                    "{spec_f} / {file_f}: past at {} ms {got}, future at {s} ms {v}",
                    last - s
                );
                compared += 1;
            }
        }
    }
    assert!(compared >= 3000, "{compared}");
}

/// A since inside an `if` arm (canonical there: a read moves its clock)
/// gives the canonical tier's outputs on every tier, the rest of the row
/// fused around it.
#[test]
fn a_since_inside_an_if_arm_agrees_on_every_tier() {
    let src = "in x: Float\nin y: Int\nout z: Bool\nout w: Float\n\
               z = if y > 0 then stl(x > 0 S[100ms, 1s] x > 1) else false\n\
               w = if y > 1 then stl_rob(x > -1 S[0, 500ms] x > 0.5) else 0.0\n";
    let spec = Spec::parse("arm.dsrv", src).unwrap();
    let rows: Vec<Vec<Option<Value>>> = (0..300i64)
        .map(|i| {
            let x = (i % 5 != 2).then(|| Value::Float(((i * 7919) % 9) as f64 * 0.5 - 1.0));
            vec![x, Some(Value::Int((i * 31) % 3))]
        })
        .collect();
    let times: Vec<Time> = (0..300i64).map(|i| Time(i * 83_000_000)).collect();
    let canon = run_timed(
        &mut Monitor::builder(&spec).tier(Tier::Canonical).build(),
        &rows,
        &times,
    );
    assert_eq!(canon.1, None);
    let held = canon
        .0
        .iter()
        .filter(|r| r[0] == Sample::Value(Value::Bool(true)))
        .count();
    assert!(held > 20, "{held} rows hold");
    for tier in Tier::ALL {
        let run = run_timed(
            &mut Monitor::builder(&spec).tier(tier).build(),
            &rows,
            &times,
        );
        compare_runs(
            &spec,
            &rows,
            ("canonical", canon.clone()),
            (&tier.to_string(), run),
        )
        .unwrap();
    }
}
