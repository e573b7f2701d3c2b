//! Sliding windows (issue 13): generated specs of count and time windows checked against the
//! reference evaluator (which recomputes every window from the whole history), every tier
//! against the canonical one, snapshots taken mid-window, keyed monitors keeping one window
//! per key, the located diagnostics, and resident memory under long windows.

use crate::props::{
    Ty, compare_runs, generate_trace, run_monitor, run_regions_only, run_tier, run_tier_batch,
};
use proptest::prelude::*;
use vigil::reference;
use vigil::{KeyedMonitor, KeyedSnapshot, Monitor, Sample, Snapshot, Spec, Tier, Value};

/// Every tier (`Tier::ALL`, `Auto` included).
const TIERS: [Tier; 5] = Tier::ALL;

/// Choices drawn from proptest's data (0 once it runs out).
pub(crate) struct Pick<'a> {
    pub(crate) data: &'a [u32],
    pub(crate) pos: usize,
}

impl Pick<'_> {
    pub(crate) fn pick(&mut self, n: usize) -> usize {
        let v = self.data.get(self.pos).copied().unwrap_or(0) as usize;
        self.pos += 1;
        v % n
    }

    pub(crate) fn one<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.pick(xs.len())]
    }
}

/// The kinds of values a window may aggregate here.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Int,
    Float,
    Bool,
    /// The untyped input: only `count` takes it.
    Any,
}

const AGGREGATES: [&str; 16] = [
    "count", "sum", "avg", "min", "max", "last", "any", "all", "first", "variance", "stddev",
    "integral", "p50", "p90", "p95", "p99",
];

/// A spec of 1 to 4 windows over inputs `i: Int`, `f: Float`, `b: Bool`
/// and the untyped `x`, over expressions of them and over earlier windows;
/// count windows of 1 to 8 values and time windows of 1 to 5 s (a step's
/// time is its index in seconds) with default or explicit granularity.
fn window_spec(data: &[u32]) -> String {
    let mut c = Pick { data, pos: 0 };
    let mut lines = vec![
        "in i: Int".to_string(),
        "in f: Float".to_string(),
        "in b: Bool".to_string(),
        "in x".to_string(),
    ];
    // Streams a window may read, with their kind.
    let mut operands: Vec<(String, Kind)> = vec![
        ("i".into(), Kind::Int),
        ("i[1]".into(), Kind::Int),
        ("(if b then i else 3)".into(), Kind::Int),
        ("f".into(), Kind::Float),
        ("default(f[2], 0.5)".into(), Kind::Float),
        ("b".into(), Kind::Bool),
        ("(i > 0)".into(), Kind::Bool),
        ("x".into(), Kind::Any),
    ];
    for k in 0..1 + c.pick(4) {
        let (operand, kind) = operands[c.pick(operands.len())].clone();
        let aggs: Vec<&str> = AGGREGATES
            .iter()
            .copied()
            .filter(|a| match kind {
                Kind::Int | Kind::Float => !matches!(*a, "any" | "all"),
                Kind::Bool => matches!(*a, "count" | "last" | "first" | "any" | "all"),
                Kind::Any => *a == "count",
            })
            .collect();
        // Half of the windows take one of the first eight aggregates, so
        // that each keeps the share (an Int sum's overflow among them) it
        // had before the others came.
        let first_eight: Vec<&str> = (aggs.iter().copied())
            .filter(|a| AGGREGATES[..8].contains(a))
            .collect();
        let agg = match c.pick(2) {
            0 => c.one(&first_eight),
            _ => c.one(&aggs),
        };
        let size = match c.pick(3) {
            // `integral` has no meaning over a count window: a time window
            // of as many seconds instead.
            0 | 1 if agg == "integral" => format!("{}s", 1 + c.pick(8)),
            0 | 1 => format!("{}", 1 + c.pick(8)),
            _ => {
                let secs = 1 + c.pick(5);
                match c.pick(3) {
                    0 => format!("{secs}s"),
                    1 => format!("{secs}s, 1s"),
                    _ => format!("{secs}s, 500ms"),
                }
            }
        };
        let (size, agg) = match size.split_once(", ") {
            Some((total, pane)) => (total.to_string(), format!("{agg}, {pane}")),
            None => (size, agg.to_string()),
        };
        let window = format!("window({operand}, {size}, {agg})");
        let agg = agg.split(',').next().unwrap_or_default().to_string();
        let out_kind = match agg.as_str() {
            "count" => Kind::Int,
            "avg" | "variance" | "stddev" | "integral" => Kind::Float,
            "p50" | "p90" | "p95" | "p99" => Kind::Float,
            "any" | "all" => Kind::Bool,
            _ => kind,
        };
        let fallback = match out_kind {
            Kind::Int => "0",
            Kind::Float => "0.0",
            _ => "false",
        };
        let def = match c.pick(3) {
            0 => format!("default({window}, {fallback})"),
            _ => window,
        };
        let name = format!("w{k}");
        lines.push(format!("out {name}"));
        lines.push(format!("{name} = {def}"));
        // A reader of the window, which may fuse (the window has a scalar
        // signature) while the window itself runs canonically.
        if c.pick(2) == 0 {
            let read = match out_kind {
                Kind::Int => format!("{name} * 2 + i"),
                Kind::Float => format!("{name} * 0.5 + f"),
                _ => format!("{name} && b"),
            };
            lines.push(format!("out r{k}"));
            lines.push(format!("r{k} = {read}"));
        }
        operands.push((name, out_kind));
    }
    lines.join("\n") + "\n"
}

/// One generated case.
struct Case {
    spec: Spec,
    trace: Vec<Vec<Option<Value>>>,
}

fn make_case(spec_data: &[u32], len: usize, trace_data: &[u32], absent: usize) -> Case {
    let source = window_spec(spec_data);
    let spec = Spec::parse("windows.dsrv", &source)
        .unwrap_or_else(|e| panic!("a generated window spec is rejected: {e}\n{source}"));
    let inputs = [Some(Ty::Int), Some(Ty::Float), Some(Ty::Bool), None];
    let trace = generate_trace(&inputs, len, trace_data, absent);
    Case { spec, trace }
}

/// What the generated cases must cover, so that the properties do not pass
/// vacuously.
#[derive(Default, Debug)]
struct Coverage {
    time_windows: usize,
    count_windows: usize,
    /// Each aggregate read from a window holding values.
    aggregates: [usize; 16],
    /// Each aggregate read from a time window holding values (`integral`
    /// has no count window).
    in_time: [usize; 16],
    /// A window read ⊥ (empty, an aggregate without an empty result).
    empty: usize,
    /// A runtime error inside a window's sum.
    overflow: usize,
    /// A NaN read from a Float window.
    nan: usize,
    /// A snapshot taken with values in its windows.
    snapshots_mid_window: usize,
    /// Rows (or region runs) fused code ran on native-whole and quickened
    /// for specs whose windows are all count windows.
    fused: u64,
    /// Rows where an input a count window reads bare is absent (the window
    /// enters nothing and is read as it is) that fused code ran without a
    /// decline: on the native whole-row kernel, on the quickened whole-row
    /// program, and in native regions (with no whole-row program).
    absent_fused: [u64; 3],
}

/// Checks one case: canonical == reference; every tier (row by row, and in
/// batches on native-whole) == canonical; a run split at `split` and
/// restored on `second` == the uninterrupted one.
fn check(
    case: &Case,
    split: usize,
    second: Tier,
    json: bool,
    cov: &mut Coverage,
) -> Result<(), String> {
    let canon = run_tier(&case.spec, &case.trace, Tier::Canonical);
    let refer = reference::evaluate(case.spec.checked(), &case.trace);
    compare_runs(
        &case.spec,
        &case.trace,
        ("canonical", canon.clone()),
        ("reference", refer),
    )?;
    for tier in TIERS {
        let run = run_tier(&case.spec, &case.trace, tier);
        let name = tier.to_string();
        compare_runs(
            &case.spec,
            &case.trace,
            ("canonical", canon.clone()),
            (&name, run),
        )?;
    }
    let regions = run_regions_only(&case.spec, &case.trace);
    compare_runs(
        &case.spec,
        &case.trace,
        ("canonical", canon.clone()),
        ("native regions alone", regions),
    )?;
    if !case.spec.checked().source.contains("s, ") {
        for tier in [Tier::NativeWhole, Tier::Quickened] {
            let mut m = Monitor::builder(&case.spec).tier(tier).build();
            run_monitor(&mut m, &case.trace);
            cov.fused += m.stats().whole_rows + m.stats().region_runs;
        }
        absent_coverage(case, cov);
    }
    let batches = run_tier_batch(&case.spec, &case.trace, Tier::NativeWhole);
    compare_runs(
        &case.spec,
        &case.trace,
        ("canonical", canon.clone()),
        ("batches", batches),
    )?;
    // Split, snapshot, restore on `second`, continue.
    let split = split.min(case.trace.len());
    let mut first = Monitor::builder(&case.spec).tier(Tier::Quickened).build();
    let (mut outputs, mut error) = run_monitor(&mut first, &case.trace[..split]);
    if error.is_none() {
        let snap = first.snapshot();
        let text = snap.to_json();
        // Some window word is not zero: the windows hold state.
        let words = text.split("\"windows\":[").nth(1).unwrap_or("");
        let words = words.split(']').next().unwrap_or("");
        cov.snapshots_mid_window += words.split(',').any(|w| !w.is_empty() && w != "0") as usize;
        let decoded = if json {
            Snapshot::from_json(&text).map_err(|e| e.to_string())?
        } else {
            Snapshot::from_bytes(&snap.to_bytes()).map_err(|e| e.to_string())?
        };
        let mut resumed = Monitor::builder(&case.spec)
            .tier(second)
            .restore(&decoded)
            .map_err(|e| format!("restore failed: {e}"))?
            .build();
        let (more, err) = run_monitor(&mut resumed, &case.trace[split..]);
        outputs.extend(more);
        error = err;
    }
    let what = format!("split at {split}, restored on {second}");
    compare_runs(
        &case.spec,
        &case.trace,
        ("canonical", canon.clone()),
        (&what, (outputs, error)),
    )?;
    // Coverage.
    let source = &case.spec.checked().source;
    cov.time_windows += source.contains("s, ") as usize;
    cov.count_windows += source
        .lines()
        .any(|l| l.contains("window(") && !l.contains("s, ")) as usize;
    let (rows, err) = &canon;
    cov.overflow += err.as_ref().is_some_and(|e| e.op == "window sum") as usize;
    let names = case.spec.output_names();
    for (k, name) in names.iter().enumerate() {
        let line = source
            .lines()
            .find(|l| l.starts_with(&format!("{name} = ")))
            .unwrap_or("");
        let agg = AGGREGATES
            .iter()
            .position(|a| line.contains(&format!(", {a})")) || line.contains(&format!(", {a},")));
        for row in rows {
            match &row[k] {
                Sample::Deferred if !line.starts_with(&format!("{name} = default")) => {
                    cov.empty += 1
                }
                Sample::Value(Value::Float(v)) if v.is_nan() => cov.nan += 1,
                Sample::Value(_) => {
                    if let Some(a) = agg {
                        cov.aggregates[a] += 1;
                        cov.in_time[a] += line.contains("s, ") as usize;
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Counts the rows where a count window's bare input is absent that ran
/// fused without declining, on each of the three fused ways (see
/// `Coverage::absent_fused`).
fn absent_coverage(case: &Case, cov: &mut Coverage) {
    let source = &case.spec.checked().source;
    let names = case.spec.input_names();
    let bare: Vec<usize> = (0..names.len())
        .filter(|&k| source.contains(&format!("window({}, ", names[k])))
        .collect();
    let declines = |m: &Monitor| m.stats().declines.iter().map(|(_, n)| n).sum::<u64>();
    let builders = [
        Monitor::builder(&case.spec).tier(Tier::NativeWhole),
        Monitor::builder(&case.spec).tier(Tier::Quickened),
        Monitor::builder(&case.spec)
            .tier(Tier::NativeRegions)
            .regions_only(),
    ];
    for (way, builder) in builders.into_iter().enumerate() {
        let mut m = builder.build();
        for row in &case.trace {
            let (runs, declined) = (m.stats().whole_rows + m.stats().region_runs, declines(&m));
            if m.step(row).is_err() {
                break;
            }
            let fused = m.stats().whole_rows + m.stats().region_runs > runs;
            let absent = bare.iter().any(|&k| row[k].is_none());
            cov.absent_fused[way] += u64::from(absent && fused && declines(&m) == declined);
        }
    }
}

fn strategy() -> impl Strategy<Value = (Vec<u32>, usize, Vec<u32>, usize, usize)> {
    (
        proptest::collection::vec(any::<u32>(), 0..60),
        0..=30usize,
        proptest::collection::vec(any::<u32>(), 0..400),
        // Inputs absent with probability 0 to 100%, 0 to 30% as often
        // (dense rows reach an Int sum's overflow).
        prop_oneof![0..4usize, 0..=10usize],
        any::<usize>(),
    )
}

fn run_case(
    (spec_data, len, trace_data, absent, pick): &(Vec<u32>, usize, Vec<u32>, usize, usize),
    cov: &mut Coverage,
) -> Result<(), String> {
    let case = make_case(spec_data, *len, trace_data, *absent);
    let second = TIERS[pick % TIERS.len()];
    check(&case, pick / 7 % (len + 1), second, pick % 2 == 0, cov)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn windows_agree_with_the_reference_on_every_tier(case in strategy()) {
        let mut cov = Coverage::default();
        run_case(&case, &mut cov).map_err(TestCaseError::fail)?;
    }
}

/// A deterministic sweep of the same cases, with the coverage guard: the
/// generator must reach every aggregate with values, empty windows, an
/// overflowing sum, NaN, time and count windows, and mid-window snapshots.
#[test]
fn windows_sweep_covers_every_aggregate() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = strategy();
    let mut cov = Coverage::default();
    for _ in 0..1000 {
        let case = strategy.new_tree(&mut runner).expect("a case").current();
        run_case(&case, &mut cov).unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(
        cov.time_windows >= 100 && cov.count_windows >= 150,
        "{cov:?}"
    );
    assert!(cov.aggregates.iter().all(|&n| n >= 200), "{cov:?}");
    // Every aggregate also in time windows, where the new ones combine
    // panes (and the percentiles read a sketch), and in count windows.
    let in_count = |a: usize| cov.aggregates[a] - cov.in_time[a];
    assert!(cov.in_time.iter().all(|&n| n >= 25), "{cov:?}");
    assert!(
        (0..16).all(|a| AGGREGATES[a] == "integral" || in_count(a) >= 50),
        "{cov:?}"
    );
    assert!(
        cov.empty >= 50 && cov.nan >= 50 && cov.overflow >= 3,
        "{cov:?}"
    );
    assert!(cov.snapshots_mid_window >= 150, "{cov:?}");
    assert!(cov.fused >= 1000, "{cov:?}");
    assert!(cov.absent_fused.iter().all(|&n| n >= 500), "{cov:?}");
}

/// Dense `min`/`max` count windows — over a stream computed every row (`f - 0.0`, which
/// keeps `-0.0` and NaN, not the input itself, whose window enters only where it is present),
/// so the native tiers push and read them inline (`jit::translate`'s `min_max_inline`), and
/// the helper only at a block's start and for a row run again — over values with NaNs, infinities, signed zeros and ties, across
/// many blocks of every length up to 9: the reference, every tier row by row, the regions
/// alone and batches give the canonical tier's bits, and the whole-row kernel runs the rows
/// (so the inline path is what is compared). A snapshot taken mid-block resumes the same.
#[test]
fn dense_min_max_windows_agree_on_every_tier() {
    let floats = [
        0.0,
        -0.0,
        1.5,
        -2.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.5,
    ];
    let mut g = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        g ^= g << 13;
        g ^= g >> 7;
        g ^= g << 17;
        g
    };
    for n in 1..=9 {
        let src = format!(
            "in f: Float\nin i: Int\nout a: Float\nout b: Float\nout c: Int\nout d: Int\n\
             a = window(f - 0.0, {n}, min)\nb = window(f - 0.0, {n}, max)\n\
             c = window(i + 0, {n}, min)\nd = window(i + 0, {n}, max)\n"
        );
        let spec = Spec::parse("dense.dsrv", &src).expect("a valid spec");
        let trace: Vec<Vec<Option<Value>>> = (0..120)
            .map(|_| {
                let f = floats[(next() % floats.len() as u64) as usize];
                let i = (next() % 5) as i64 - 2;
                vec![Some(Value::Float(f)), Some(Value::Int(i))]
            })
            .collect();
        let canon = run_tier(&spec, &trace, Tier::Canonical);
        let refer = reference::evaluate(spec.checked(), &trace);
        let mut runs = vec![("reference".to_string(), refer)];
        for tier in TIERS {
            runs.push((tier.to_string(), run_tier(&spec, &trace, tier)));
        }
        runs.push(("regions".into(), run_regions_only(&spec, &trace)));
        let batches = run_tier_batch(&spec, &trace, Tier::NativeWhole);
        runs.push(("batches".into(), batches));
        for (name, run) in runs {
            compare_runs(&spec, &trace, ("canonical", canon.clone()), (&name, run))
                .unwrap_or_else(|e| panic!("n = {n}: {e}"));
        }
        let mut m = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
        run_monitor(&mut m, &trace[..50]);
        assert_eq!(m.stats().whole_rows, 50, "n = {n}: {:?}", m.stats());
        let snap = Snapshot::from_bytes(&m.snapshot().to_bytes()).expect("decodes");
        let mut resumed = Monitor::builder(&spec)
            .tier(Tier::NativeWhole)
            .restore(&snap)
            .expect("restores")
            .build();
        let (rest, err) = run_monitor(&mut resumed, &trace[50..]);
        assert_eq!(err, None);
        assert_eq!(rest[..], canon.0[50..], "n = {n}: resumed mid-block");
    }
}

/// A keyed monitor keeps one window per key, on every tier, through a
/// keyed snapshot taken mid-window (binary, then JSON).
#[test]
fn keyed_monitors_keep_a_window_per_key() {
    // With time windows (a canonical tail), and with count windows only,
    // which the whole-row kernel runs on each key's packed run in place.
    let with_time = "in k: Int\nin v: Int\nin f: Float\nout s\nout m\nout a\nout c\n\
               out sd\nout i\nout p\nout fi\n\
               s = window(v, 3, sum)\nm = window(v, 4, max)\na = window(f, 2s, avg)\n\
               c = window(v, 3s, count, 1s)\nsd = window(f, 4s, stddev, 1s)\n\
               i = window(v, 5s, integral)\np = window(f, 3s, p90, 1s)\nfi = window(v, 2s, first)\n";
    let counts = "in k: Int\nin v: Int\nin f: Float\nout s\nout m\nout a\n\
               out va\nout p\nout fi\n\
               s = window(v, 3, sum)\nm = window(v, 4, max)\na = window(f, 2, avg)\n\
               va = window(f, 3, variance)\np = window(v, 4, p50)\nfi = window(f, 3, first)\n";
    for src in [with_time, counts] {
        keyed_case(src);
    }
}

fn keyed_case(src: &str) {
    let spec = Spec::parse("keyed.dsrv", src).unwrap();
    let rows: Vec<Vec<Option<Value>>> = (0..60i64)
        .map(|r| {
            let v = (r * 7919 % 23) - 11;
            vec![
                Some(Value::Int(r % 3)),
                (r % 5 != 4).then_some(Value::Int(v)),
                (r % 4 != 1).then_some(Value::Float(v as f64 / 4.0)),
            ]
        })
        .collect();
    for tier in TIERS {
        // One plain monitor per key is the expected run of that key (each
        // key's steps are its own rows).
        let mut plain: Vec<Monitor> = (0..3)
            .map(|_| Monitor::builder(&spec).tier(tier).build())
            .collect();
        let mut keyed = KeyedMonitor::builder(&spec, "k")
            .tier(tier)
            .build()
            .unwrap();
        for (r, row) in rows.iter().enumerate() {
            if r == 20 || r == 41 {
                let snap = keyed.snapshot();
                let snap = match r {
                    20 => KeyedSnapshot::from_bytes(&snap.to_bytes()).unwrap(),
                    _ => KeyedSnapshot::from_json(&snap.to_json()).unwrap(),
                };
                keyed = KeyedMonitor::builder(&spec, "k")
                    .tier(tier)
                    .restore(&snap)
                    .build()
                    .unwrap();
            }
            let k = r % 3;
            let want = plain[k].step(row).unwrap().to_vec();
            let got = keyed.step(row).unwrap().to_vec();
            assert_eq!(got, want, "{tier}, row {r}");
        }
        if tier == Tier::NativeWhole && !src.contains("s, ") {
            assert!(keyed.stats().packed_rows > 0, "the packed kernel never ran");
        }
    }
}

/// A periodic stream's time window collects its operand's values at every
/// input step, between its ticks (a tick sorts before the rows of its
/// time), and slides with the ticks' time; the run is the same on every
/// tier, and the example of docs/language.md runs with `--time`.
#[test]
fn periodic_streams_read_time_windows_fed_between_ticks() {
    let dir = crate::support::test_dir("windows", "periodic");
    let spec = crate::support::write(
        &dir,
        "p.dsrv",
        "in lat: Float\nout avg @ 1s\nout n @ 1s\n\
         avg = default(window(lat, 3s, avg, 1s), 0.0)\nn = window(lat, 3s, count, 1s)\n",
    );
    let trace = crate::support::write(
        &dir,
        "t.jsonl",
        "{\"ts\":0.0,\"lat\":1.0}\n{\"ts\":0.5,\"lat\":3.0}\n{\"ts\":1.2,\"lat\":5.0}\n\
         {\"ts\":2.7,\"lat\":7.0}\n{\"ts\":4.1,\"lat\":9.0}\n{\"ts\":6.0,\"lat\":11.0}\n",
    );
    // A tick at t reads [t - 3s, t): the rows at 0 and 0.5 are in the
    // tick at 3's window (issue 37: a row exactly on a tick, as the one at
    // 0, was seen by T/P - 1 ticks, and the 1 s panes cut off the one at
    // 0.5 too).
    let expected = "step,time,avg,n\n0,0,0.0,0\n1,0,,\n2,0.5,,\n3,1,2.0,2\n4,1.2,,\n5,2,3.0,3\n\
                    6,2.7,,\n7,3,4.0,4\n8,4,6.0,2\n9,4.1,,\n10,5,8.0,2\n11,6,9.0,1\n12,6,,\n";
    for tier in ["canonical", "quickened", "native-regions", "native-whole"] {
        let args = [
            "run", &spec, "--input", &trace, "--time", "ts", "--tier", tier, "--output", "csv",
        ];
        let (code, out, err) = crate::support::run_vigil(&args, None);
        assert_eq!(code, 0, "{tier}: {err}");
        assert_eq!(out, expected, "{tier}");
    }
    let (code, _, err) = crate::support::run_vigil(
        &[
            "run",
            "examples/latency_slo.dsrv",
            "--input",
            "examples/requests.jsonl",
            "--time",
            "ts",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("alert: slo_breach at step") && err.contains("alert: error_burst at step"),
        "{err}"
    );
}

/// Issue 37, cross-checked with rtlola-cli: a row exactly on a tick is seen
/// by T/P ticks (it was seen by T/P - 1, and by none when T = P: at tick t
/// the row at t comes after it, and at t + T it was exactly T old), and a
/// window read at ticks on the panes' grid is exact (its far edge was
/// rounded to a pane: 6 instead of 7 with the default pane, 4 with 1 s).
#[test]
fn a_tick_reads_the_last_t_before_it_exactly() {
    let dir = crate::support::test_dir("windows", "on-tick");
    let count = crate::support::write(
        &dir,
        "count.dsrv",
        "in x: Int\nout n: Int @ 1s\nn = window(x, 1s, count)\n",
    );
    let rows = crate::support::write(&dir, "rows.csv", "t,x\n0,1\n1,2\n2,3\n");
    let sums = crate::support::write(
        &dir,
        "sums.dsrv",
        "in x: Int\nout s: Int @ 1s\ns = window(x, 5s, sum)\nout s1: Int @ 1s\ns1 = window(x, 5s, sum, 1s)\n",
    );
    let irregular =
        crate::support::write(&dir, "irregular.csv", "t,x\n0.02,1\n0.6,2\n4.9,4\n5.5,8\n");
    let ticks = |out: &str| -> Vec<String> {
        // The tick lines: every column but the step.
        (out.lines().skip(1))
            .filter(|l| !l.ends_with(','))
            .map(|l| l.split_once(',').map_or(l, |(_, rest)| rest).to_string())
            .collect()
    };
    for tier in ["canonical", "quickened", "native-regions", "native-whole"] {
        let run = |spec: &str, trace: &str| {
            let args = [
                "run",
                spec,
                "--input",
                trace,
                "--time",
                "t",
                "--time-unit",
                "s",
                "--start",
                "0",
                "--tier",
                tier,
                "--output",
                "csv",
            ];
            let (code, out, err) = crate::support::run_vigil(&args, None);
            assert_eq!(code, 0, "{tier}: {err}");
            ticks(&out)
        };
        assert_eq!(run(&count, &rows), ["0,0", "1,1", "2,1"], "{tier}");
        let sums = run(&sums, &irregular);
        assert_eq!(sums[5], "5,7,7", "{tier}: {sums:?}");
        assert_eq!(sums[1..5], ["1,3,3", "2,3,3", "3,3,3", "4,3,3"], "{tier}");
    }
}

/// Issue 37: a periodic stream reads an event stream's held value in every
/// read — a copy, `init`, an operator — where a copy was always NoVal and
/// `init(x, d)` stayed `d` after `x` had arrived.
#[test]
fn a_periodic_stream_reads_an_event_streams_held_value() {
    let dir = crate::support::test_dir("windows", "tick-reads");
    let spec = crate::support::write(
        &dir,
        "p.dsrv",
        "in x: Int\nout y: Int\ny = x + 1\nout p: Int @ 1s\np = y\nout q: Int @ 1s\nq = x\n\
         out ini: Int @ 1s\nini = init(x, -1)\nout h: Int @ 1s\nh = x + 0\n",
    );
    let trace = crate::support::write(&dir, "t.csv", "t,x\n0.5,4\n2.5,5\n");
    let expected = "step,time,y,p,q,ini,h\n0,0,,,,-1,\n1,0.5,5,,,,\n2,1,,5,4,4,4\n\
                    3,2,,5,4,4,4\n4,2.5,6,,,,\n";
    for tier in ["canonical", "quickened", "native-regions", "native-whole"] {
        let args = [
            "run",
            &spec,
            "--input",
            &trace,
            "--time",
            "t",
            "--time-unit",
            "s",
            "--start",
            "0",
            "--tier",
            tier,
            "--output",
            "csv",
        ];
        let (code, out, err) = crate::support::run_vigil(&args, None);
        assert_eq!(code, 0, "{tier}: {err}");
        assert_eq!(out, expected, "{tier}");
    }
}

/// Issue 37: a window first read at a tick lays its panes from that tick, so
/// ticks from a first row's time that is not on the panes' grid (0.02 s,
/// 50 ms panes) still read exactly the last T (the far edge was rounded).
#[test]
fn a_window_read_at_ticks_is_exact_from_any_origin() {
    let dir = crate::support::test_dir("windows", "phase");
    let spec = crate::support::write(
        &dir,
        "s.dsrv",
        "in x: Int\nout s: Int @ 1s\ns = window(x, 5s, sum)\nout s1: Int @ 1s\ns1 = window(x, 5s, sum, 1s)\n",
    );
    let trace = crate::support::write(&dir, "t.csv", "t,x\n0.02,1\n0.6,2\n4.9,4\n5.5,8\n6.03,16\n");
    for tier in ["canonical", "native-whole"] {
        let args = [
            "run", &spec, "--input", &trace, "--time", "t", "--tier", tier, "--output", "csv",
        ];
        let (code, out, err) = crate::support::run_vigil(&args, None);
        assert_eq!(code, 0, "{tier}: {err}");
        // Ticks at 1.02 … 6.02 read [t - 5, t): the rows at 0.02, 0.6 and 4.9 at 5.02; then
        // those at 0.02 and 0.6 have left and 5.5's has come at 6.02.
        assert!(out.contains("\n8,5.02,7,7\n"), "{tier}: {out}");
        assert!(out.contains("\n10,6.02,12,12\n"), "{tier}: {out}");
    }
}

/// A window added by a live edit over an input that had values before it
/// is empty until the input comes again: a row where the input is absent
/// reads it (⊥, so the `default`'s fallback) without entering a value. The
/// fused tiers decline that row alone, saying why, and agree with the
/// canonical tier; rows with the input absent after it has a value run
/// fused.
#[test]
fn a_repaired_window_over_an_absent_input_declines_while_empty() {
    let before = Spec::parse("a.dsrv", "in x: Int\nin y: Int\nout s: Int\ns = x + y\n").unwrap();
    let after = Spec::parse(
        "b.dsrv",
        "in x: Int\nin y: Int\nout s: Int\nout w: Float\ns = x + y\nw = default(window(x, 3, avg), -1.0)\n",
    )
    .unwrap();
    let row = |x: Option<i64>, y: i64| vec![x.map(Value::Int), Some(Value::Int(y))];
    let trace = [
        row(Some(1), 1),
        row(Some(2), 2),
        row(None, 3),
        row(None, 4),
        row(Some(5), 5),
        row(None, 6),
    ];
    let run = |tier: Tier| {
        let mut m = Monitor::builder(&before).tier(tier).build();
        let mut out = Vec::new();
        for (r, row) in trace.iter().enumerate() {
            if r == 2 {
                let (snapshot, _) = m.repair(&after).expect("the run is not stopped");
                m = Monitor::builder(&after)
                    .tier(tier)
                    .restore(&snapshot)
                    .expect("a repaired snapshot restores")
                    .build();
            }
            out.push(m.step(row).expect("no runtime error").to_vec());
        }
        (out, m.stats())
    };
    let (canon, _) = run(Tier::Canonical);
    let w: Vec<Sample> = canon[2..].iter().map(|r| r[1].clone()).collect();
    let f = |v: f64| Sample::Value(Value::Float(v));
    assert_eq!(w, [f(-1.0), f(-1.0), f(5.0), f(5.0)]);
    for tier in [Tier::Quickened, Tier::NativeRegions, Tier::NativeWhole] {
        let (out, stats) = run(tier);
        assert_eq!(out, canon, "{tier}");
        // The whole-row program declines the two rows, and so does the
        // window's region where a tier runs regions on declined rows.
        let empty = "`x` absent, its window empty (a read of ⊥)";
        assert!(
            stats.declines.contains(&(format!("row: {empty}"), 2))
                && (stats.declines.iter()).all(|(why, n)| why.ends_with(empty) && *n == 2),
            "{tier}: {:?}",
            stats.declines
        );
        assert_eq!(stats.whole_rows, 2, "{tier}");
    }
}
