//! Hardening of the STL frontend: generated property files and `.input` traces, well-formed
//! and then broken (arbitrary bytes, deep nesting, extreme bounds and thresholds, unbalanced
//! brackets, duplicate and empty names, non-UTF-8, long lines; rows out of order, at extreme
//! times, with values that are no numbers, truncated), through the library (`StlSpec::parse`,
//! `StlMonitor`, `StlRun` on every tier) and through the `vigil` binary (every semantics,
//! the plan tiers, every output form). No input may panic, hang or lose output: a trace that
//! goes bad mid-way prints exactly the verdicts of the same run over its good prefix, then a
//! located error. Each property has a coverage guard, so that it cannot pass vacuously.
//! `STL_HARDEN_CASES` sets the number of cases (default 128).

use crate::support::{Outcome, run_within, test_dir, write};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;
use vigil::stl::{Emitted, Semantics, StlMonitor, StlRun, StlSample, StlSpec, Synchronization};
use vigil::trace::{InputSchema, TraceFormat};
use vigil::{Tier, Type};

/// Every tier a run may ask for (`Auto` is the evaluator's).
const TIERS: [Tier; 5] = [
    Tier::Auto,
    Tier::Canonical,
    Tier::Quickened,
    Tier::NativeRegions,
    Tier::NativeWhole,
];

/// The number of cases of each property.
fn cases() -> u32 {
    std::env::var("STL_HARDEN_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(128)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

/// A number of 400 digits: infinite as an f64.
fn huge() -> String {
    format!("1{}", "0".repeat(400))
}

/// An interval bound: mostly multiples of the traces' period (500 ms), else extreme or
/// malformed.
fn bound() -> impl Strategy<Value = String> {
    prop_oneof![
        24 => prop_oneof![Just("0"), Just("0.5"), Just("1"), Just("1.5")].prop_map(String::from),
        1 => prop_oneof![
            Just("1000000000".to_string()),
            Just("999999999.999999999".to_string()),
            Just("1000000000.5".to_string()),
            Just("18446744073709551616".to_string()),
            Just("-1".to_string()),
            Just("0.0000000001".to_string()),
            Just("0.001".to_string()),
            Just("1e400".to_string()),
            Just("NaN".to_string()),
            Just(String::new()),
            Just(huge()),
        ],
    ]
}

/// A comparison's threshold: mostly small numbers, else extreme, a variable or malformed.
fn threshold() -> impl Strategy<Value = String> {
    prop_oneof![
        16 => (-4i32..=4).prop_map(|t| format!("{}", f64::from(t) / 2.0)),
        1 => prop_oneof![
            Just(huge()),
            Just(format!("-{}", huge())),
            Just("$t".to_string()),
            Just("$u".to_string()),
            Just("$".to_string()),
            Just("NaN".to_string()),
            Just("inf".to_string()),
            Just("1e400".to_string()),
            Just("--1".to_string()),
            Just("0.".to_string()),
            Just(".5".to_string()),
            Just(String::new()),
        ],
    ]
}

/// A formula over `x`, `y` (and, rarely, a signal no trace carries).
fn formula() -> impl Strategy<Value = String> {
    let signal = prop_oneof![4 => Just("x"), 4 => Just("y"), 1 => Just("ghost")];
    let cmp = prop_oneof![
        40 => prop_oneof![Just(">"), Just("<"), Just(">="), Just("<=")],
        1 => Just("=="),
    ];
    let compare = (signal, cmp, threshold()).prop_map(|(s, c, t)| format!("{s} {c} {t}"));
    let leaf =
        prop_oneof![8 => compare, 1 => Just("true".to_string()), 1 => Just("false".to_string())];
    leaf.prop_recursive(4, 16, 2, |inner| {
        // Mostly in order (`a <= b`), where both are numbers.
        let interval = (bound(), bound(), prop::bool::weighted(0.9))
            .prop_map(|(a, b, sort)| {
                let (x, y) = (a.parse::<f64>(), b.parse::<f64>());
                match (x, y) {
                    (Ok(x), Ok(y)) if sort && x > y => format!("[{b},{a}]"),
                    _ => format!("[{a},{b}]"),
                }
            })
            .boxed();
        prop_oneof![
            inner.clone().prop_map(|a| format!("!({a})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) && ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) || ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) -> ({b})")),
            (interval.clone(), inner.clone()).prop_map(|(w, a)| format!("G{w}({a})")),
            (interval.clone(), inner.clone()).prop_map(|(w, a)| format!("F{w}({a})")),
            (inner.clone(), interval, inner).prop_map(|(a, w, b)| format!("({a}) U{w} ({b})")),
        ]
    })
}

/// A mutation of a file's bytes.
#[derive(Clone, Debug)]
enum Mutation {
    None,
    /// A byte put at a place (a fraction of the length).
    Insert(f64, u8),
    /// A range removed.
    Delete(f64, f64),
    /// The bytes cut at a place.
    Truncate(f64),
    /// A line repeated.
    DuplicateLine(usize),
    /// A line nested `n` deep: in brackets, `!`s, or `G[0,0.5]`s (each two levels).
    Nest(usize, Deep),
    /// A line of a hundred thousand `&&`s.
    Long,
    /// Arbitrary bytes in place of the file.
    Bytes(Vec<u8>),
}

/// What a line is nested in.
#[derive(Clone, Copy, Debug)]
enum Deep {
    Brackets,
    Not,
    Globally,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let byte = prop_oneof![
        Just(b'('),
        Just(b')'),
        Just(b'['),
        Just(b']'),
        Just(b':'),
        Just(b','),
        Just(b'#'),
        Just(b'\n'),
        Just(b'$'),
        Just(0xff),
        Just(0xc3),
        any::<u8>(),
    ];
    prop_oneof![
        20 => Just(Mutation::None),
        2 => (0.0..1.0, byte).prop_map(|(at, b)| Mutation::Insert(at, b)),
        1 => (0.0..1.0, 0.0..0.2).prop_map(|(at, len)| Mutation::Delete(at, len)),
        1 => (0.0..1.0).prop_map(Mutation::Truncate),
        1 => (0..4usize).prop_map(Mutation::DuplicateLine),
        1 => (
            prop_oneof![Just(100usize), Just(127), Just(128), Just(255), Just(256), Just(5000)],
            prop_oneof![Just(Deep::Brackets), Just(Deep::Not), Just(Deep::Globally)],
        )
            .prop_map(|(n, deep)| Mutation::Nest(n, deep)),
        1 => Just(Mutation::Long),
        1 => proptest::collection::vec(any::<u8>(), 0..64).prop_map(Mutation::Bytes),
    ]
}

fn apply(text: &str, m: &Mutation) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    let at = |f: f64, len: usize| ((f * len as f64) as usize).min(len);
    match m {
        Mutation::None => {}
        Mutation::Insert(f, byte) => b.insert(at(*f, b.len()), *byte),
        Mutation::Delete(f, len) => {
            let from = at(*f, b.len());
            let to = (from + at(*len, b.len())).min(b.len());
            b.drain(from..to);
        }
        Mutation::Truncate(f) => b.truncate(at(*f, b.len())),
        Mutation::DuplicateLine(i) => {
            if let Some(line) = text.lines().nth(*i) {
                b.extend_from_slice(format!("{line}\n").as_bytes());
            }
        }
        Mutation::Nest(n, deep) => {
            let (open, close) = match deep {
                Deep::Brackets => ("(", ")"),
                Deep::Not => ("!", ""),
                Deep::Globally => ("G[0,0.5](", ")"),
            };
            let body = format!("deep: {}x > 1{}\n", open.repeat(*n), close.repeat(*n));
            b.extend_from_slice(body.as_bytes());
        }
        Mutation::Long => {
            b.extend_from_slice(format!("long: x > 1{}\n", " && y < 2".repeat(100_000)).as_bytes())
        }
        Mutation::Bytes(bytes) => b = bytes.clone(),
    }
    b
}

/// A property file: one to three named formulas (names may repeat or be empty), then a
/// mutation of its bytes.
fn property_file() -> impl Strategy<Value = (String, Mutation)> {
    // Mostly a name of its own (`p0`, `p1`, …), else one that may repeat, or none.
    let name = prop_oneof![12 => Just(None), 1 => Just(Some("p1")), 1 => Just(Some(""))];
    let line = (name, formula());
    (proptest::collection::vec(line, 1..4), mutation()).prop_map(|(lines, m)| {
        let lines: String = (lines.iter().enumerate())
            .map(|(i, (n, f))| match n {
                Some(n) => format!("{n}: {f}\n"),
                None => format!("p{i}: {f}\n"),
            })
            .collect();
        (format!("# generated\n{lines}"), m)
    })
}

/// A bad block of an `.input` trace, put after the good ones (`step` is its step number,
/// `t` the time it would have had): the text, and whether a run must stop at it.
fn bad_block(kind: usize, step: usize, t: u64, last: u64) -> String {
    let cell = |time: &str, value: &str| format!("{{\"time\": {time}, \"value\": {value}}}");
    let ok = cell(&t.to_string(), "1.0");
    let x = |c: String| format!("{step}: x = {c}\ny = {ok}\n");
    match kind {
        0 => x(cell(&last.to_string(), "1.0")),
        1 => x(cell(&(last.saturating_sub(250)).to_string(), "1.0")),
        2 => x(cell("-5", "1.0")),
        3 => x(cell("1e30", "1.0")),
        4 => x(cell(&u64::MAX.to_string(), "1.0")),
        5 => x(cell(&i64::MAX.to_string(), "1.0")),
        6 => x(cell(&(i64::MAX - 1).to_string(), "1.0")),
        7 => x(cell(&t.to_string(), "NaN")),
        8 => x(cell(&t.to_string(), "inf")),
        9 => x(cell(&t.to_string(), "1e400")),
        10 => x(cell(&t.to_string(), "\"text\"")),
        11 => x(cell(&t.to_string(), "{\"a\": 1}")),
        12 => x(format!("{{\"time\": {t}}}")),
        13 => x("{\"value\": 1.0}".to_string()),
        14 => x(format!("[{t}, 2.5]")),
        15 => x(format!("[{t}]")),
        16 => x("3.5".to_string()),
        17 => format!("{step}: x = {ok}\nghost = {ok}\nundeclared = {ok}\n"),
        18 => format!("{step}: x = {{\"time\": {t}, \"val"),
        19 => format!("{step}: x = {ok}\ny = {{\"time\""),
        20 => format!("{}: x = {ok}\n", step.saturating_sub(1)),
        21 => format!("{step} x = {ok}\n"),
        22 => x(cell(&t.to_string(), "1.7976931348623157e308")),
        23 => x(cell(&t.to_string(), "-1.7976931348623157e308")),
        24 => x(cell(&t.to_string(), "true")),
        25 => x(format!("{{\"time\": {t}.5, \"value\": 1}}")),
        26 => format!("{step}: x = {ok}\nx = {ok}\n"),
        _ => format!("{step}: \u{fffd}\u{0}\n"),
    }
}

/// The number of kinds of [`bad_block`].
const BAD_KINDS: usize = 28;

/// A trace: `good` regular blocks (both signals every 500 ms, or, when `ragged`, some missing)
/// with values from `values`, then a bad block of `kind` and, after it, one more good block.
#[derive(Clone, Debug)]
struct TracePlan {
    values: Vec<(i8, i8)>,
    ragged: Vec<bool>,
    good: usize,
    kind: usize,
}

fn trace_plan() -> impl Strategy<Value = TracePlan> {
    (
        proptest::collection::vec((-4i8..=4, -4i8..=4), 12),
        proptest::collection::vec(prop::bool::weighted(0.15), 12),
        prop_oneof![1 => 0usize..2, 6 => 2usize..10],
        0..BAD_KINDS,
    )
        .prop_map(|(values, ragged, good, kind)| TracePlan {
            values,
            ragged,
            good,
            kind,
        })
}

impl TracePlan {
    /// The good prefix's text, and the whole trace's.
    fn texts(&self) -> (String, String) {
        let block = |i: usize| {
            let t = i as u64 * 500;
            let (x, y) = self.values[i];
            let mut s = format!(
                "{i}: x = {{\"time\": {t}, \"value\": {}}}\n",
                f64::from(x) / 2.0
            );
            if !self.ragged[i] {
                s.push_str(&format!(
                    "y = {{\"time\": {t}, \"value\": {}}}\n",
                    f64::from(y)
                ));
            }
            s
        };
        let prefix: String = (0..self.good).map(block).collect();
        let last = self.good.saturating_sub(1) as u64 * 500;
        let bad = bad_block(self.kind, self.good, self.good as u64 * 500, last);
        let after = block(self.good + 1);
        (prefix.clone(), format!("{prefix}{bad}{after}"))
    }
}

/// A bad row of a JSON-lines trace (time field `t`, in milliseconds), as [`bad_block`].
fn bad_row(kind: usize, t: u64, last: u64) -> String {
    let row = |time: &str, x: &str| format!("{{\"t\": {time}, \"x\": {x}, \"y\": 1}}\n");
    let t = t.to_string();
    match kind % 16 {
        0 => row(&last.to_string(), "1"),
        1 => row("-5", "1"),
        2 => row("1e30", "1"),
        3 => row(&u64::MAX.to_string(), "1"),
        4 => row(&i64::MAX.to_string(), "1"),
        5 => row("1e400", "1"),
        6 => row("\"noon\"", "1"),
        7 => row(&t, "\"text\""),
        8 => row(&t, "{\"a\": 1}"),
        9 => row(&t, "1e400"),
        10 => "{\"x\": 1, \"y\": 1}\n".to_string(),
        11 => format!("{{\"t\": {t}, \"x\": 1, \"ghost\": 2, \"zz\": 3}}\n"),
        12 => format!("{{\"t\": {t}, \"x\": 1"),
        13 => row("null", "1"),
        14 => row(&format!("{t}.25"), "null"),
        _ => "[1, 2]\n".to_string(),
    }
}

impl TracePlan {
    /// As [`TracePlan::texts`], a JSON-lines trace.
    fn jsonl_texts(&self) -> (String, String) {
        let row = |i: usize| {
            let t = i as u64 * 500;
            let (x, y) = self.values[i];
            let y = if self.ragged[i] {
                String::new()
            } else {
                format!(", \"y\": {y}")
            };
            format!("{{\"t\": {t}, \"x\": {}{y}}}\n", f64::from(x) / 2.0)
        };
        let prefix: String = (0..self.good).map(row).collect();
        let last = self.good.saturating_sub(1) as u64 * 500;
        let bad = bad_row(self.kind, self.good as u64 * 500, last);
        (
            prefix.clone(),
            format!("{prefix}{bad}{}", row(self.good + 1)),
        )
    }
}

/// Runs `f`, turning a panic into a failed case that shows `what`.
fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        TestCaseError::fail(format!("panicked ({msg}) on {what}"))
    })
}

/// What a library run over a trace's rows gave: the verdicts, and the error that stopped it.
struct Ran {
    verdicts: Vec<Emitted>,
    error: Option<String>,
}

/// Reads `trace` as the CLI does and runs its rows through `run` (a step per row).
fn through_rows(
    spec: &StlSpec,
    trace: &str,
    mut step: impl FnMut(&mut Vec<StlSample>) -> Vec<Emitted>,
) -> Ran {
    let schema = InputSchema {
        names: spec.signals().to_vec(),
        types: vec![Type::Any; spec.signals().len()],
    };
    let mut reader = vigil::trace::reader_from_bytes(
        "t.input",
        trace.as_bytes().to_vec(),
        TraceFormat::Tc,
        &schema,
    )
    .expect("a reader over bytes");
    let mut row = vec![None; schema.names.len()];
    let mut samples = Vec::new();
    let mut verdicts = Vec::new();
    loop {
        row.iter_mut().for_each(|c| *c = None);
        match reader.next_row(&mut row) {
            Ok(true) => {}
            Ok(false) => {
                return Ran {
                    verdicts,
                    error: None,
                };
            }
            Err(e) => {
                return Ran {
                    verdicts,
                    error: Some(e.to_string()),
                };
            }
        }
        if let Err(e) = vigil::stl::row_samples_into(spec, &row, &mut samples) {
            return Ran {
                verdicts,
                error: Some(e),
            };
        }
        verdicts.extend(step(&mut samples));
    }
}

/// The variables a spec reads, each given a value.
fn variables(spec: &StlSpec) -> Vec<(String, f64)> {
    spec.variables().iter().map(|v| (v.clone(), 1.5)).collect()
}

/// Library: a mutated property file parses or fails with a located diagnostic; a monitor of
/// one that parses runs a trace that goes bad mid-way, on every tier, without a panic, with
/// the plan tier's verdicts the evaluator's and the verdicts before the bad row those of the
/// good prefix.
#[test]
fn the_stl_library_survives_hostile_files_and_traces() {
    let semantics = prop_oneof![
        Just(Semantics::DelayedQuantitative),
        Just(Semantics::DelayedQualitative),
        Just(Semantics::EagerQualitative),
        Just(Semantics::RobustnessInterval),
    ];
    let sync = prop_oneof![
        Just(Synchronization::None),
        Just(Synchronization::ZeroOrderHold),
        Just(Synchronization::Linear),
    ];
    let (evaluated, stopped, planned) = (Cell::new(0), Cell::new(0), Cell::new(0));
    runner()
        .run(
            &(
                property_file(),
                trace_plan(),
                semantics,
                sync,
                0..TIERS.len(),
            ),
            |((text, m), plan, semantics, sync, tier)| {
                let bytes = apply(&text, &m);
                let source = String::from_utf8_lossy(&bytes).into_owned();
                let what = format!("{source:?} under {semantics:?}");
                let parsed = no_panic(&what, || StlSpec::parse("p.mstlo", &source))?;
                let spec = match parsed {
                    Ok(spec) => spec,
                    Err(d) => {
                        let shown = no_panic(&what, || d.to_string())?;
                        prop_assert!(shown.contains("p.mstlo:"), "unlocated: {shown}");
                        return Ok(());
                    }
                };
                // What `vigil explain` says of it, and each property's horizon.
                no_panic(&what, || {
                    let horizons: Vec<Duration> = (0..spec.properties().len())
                        .map(|p| spec.horizon(p))
                        .collect();
                    (spec.explain(), horizons)
                })?;
                let vars = variables(&spec);
                let (prefix, whole) = plan.texts();
                let what = format!("{what} over {whole:?}");
                let tier = TIERS[tier];
                let result = no_panic(&what, || {
                    let mut eval = StlMonitor::new(&spec, semantics, sync, &vars).unwrap();
                    let mut run = StlRun::new(&spec, semantics, sync, &vars, tier).unwrap();
                    let mut on_plan = false;
                    let ran = through_rows(&spec, &whole, |s| {
                        let mine = run.step(&mut s.clone());
                        on_plan |= run.on_plan();
                        let theirs = eval.step(s);
                        // As text, so that a NaN verdict equals itself.
                        assert_eq!(
                            format!("{mine:?}"),
                            format!("{theirs:?}"),
                            "the plan differs"
                        );
                        theirs
                    });
                    let mut fresh = StlMonitor::new(&spec, semantics, sync, &vars).unwrap();
                    let good = through_rows(&spec, &prefix, |s| fresh.step(s));
                    (ran, good, on_plan)
                })?;
                let (ran, good, on_plan) = result;
                prop_assert!(
                    good.error.is_none(),
                    "the good prefix failed: {:?}",
                    good.error
                );
                if !ran.verdicts.is_empty() {
                    evaluated.set(evaluated.get() + 1);
                }
                planned.set(planned.get() + usize::from(on_plan));
                if let Some(e) = &ran.error {
                    stopped.set(stopped.get() + 1);
                    let (ran, good) = (
                        format!("{:?}", ran.verdicts),
                        format!("{:?}", good.verdicts),
                    );
                    prop_assert_eq!(ran, good, "{} lost output: {}", what, e);
                }
                Ok(())
            },
        )
        .unwrap();
    let (n, e, s, p) = (
        cases() as usize,
        evaluated.get(),
        stopped.get(),
        planned.get(),
    );
    eprintln!(
        "library: of {n} cases, {e} gave verdicts, {s} stopped at a bad row, {p} ran on the plan"
    );
    // About a third give verdicts, a quarter stop at a bad row and a tenth run on the plan:
    // the bounds are far below, so that a random seed does not fail them.
    assert!(e * 8 >= n, "only {e} of {n} cases reached evaluation");
    assert!(s * 12 >= n, "only {s} of {n} cases stopped at a bad row");
    assert!(p * 40 >= n, "only {p} of {n} cases ran on the plan");
}

/// Library: samples at extreme times (up to `Duration::MAX`) and of every value (NaN, ±inf),
/// in any order, fed straight to a monitor and a plan-tier run, panic nowhere.
#[test]
fn the_stl_monitor_takes_samples_at_any_time_and_value() {
    let time = prop_oneof![
        6 => (0u64..20).prop_map(|i| Duration::from_millis(i * 500)),
        1 => prop_oneof![
            Just(Duration::MAX),
            Just(Duration::MAX - Duration::from_secs(1)),
            Just(Duration::from_secs(u64::MAX / 2)),
            Just(Duration::from_millis(i64::MAX as u64)),
            Just(Duration::from_nanos(1)),
        ],
    ];
    let value = prop_oneof![
        6 => (-4i8..=4).prop_map(|v| f64::from(v) / 2.0),
        1 => prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(f64::MAX),
            Just(-0.0),
        ],
    ];
    let step = proptest::collection::vec((0u32..3, time, value), 0..4);
    let files = prop_oneof![
        Just("p: G[0,1](x > 0)\nq: F[0.5,1.5](x < 1) && y > 0\n"),
        Just("p: (x > 0) U[0,1] (y > 1)\n"),
        Just("p: G[0,1000000000](F[0,1000000000](x > 0))\n"),
        Just("p: true\nq: !(y <= 1) -> G[0,0](x >= 2)\n"),
    ];
    let semantics = prop::sample::select(Semantics::ALL.to_vec());
    let given = Cell::new(0);
    runner()
        .run(
            &(
                files,
                proptest::collection::vec(step, 1..12),
                semantics,
                0..TIERS.len(),
            ),
            |(file, steps, semantics, tier)| {
                let spec = StlSpec::parse("p.mstlo", file).unwrap();
                let what = format!("{file:?} under {semantics:?} over {steps:?}");
                let n = no_panic(&what, || {
                    let sync = Synchronization::default();
                    let mut eval = StlMonitor::new(&spec, semantics, sync, &[]).unwrap();
                    let mut run = StlRun::new(&spec, semantics, sync, &[], TIERS[tier]).unwrap();
                    let mut n = 0;
                    for step in &steps {
                        let mut samples: Vec<StlSample> = step
                            .iter()
                            .filter_map(|&(s, time, value)| {
                                let signal = spec.signals().get(s as usize)?;
                                Some(StlSample {
                                    signal: spec.signal(signal)?,
                                    time,
                                    value,
                                })
                            })
                            .collect();
                        n += run.step(&mut samples.clone()).len();
                        n += eval.step(&mut samples).len();
                        run.held();
                        eval.held();
                    }
                    n
                })?;
                given.set(given.get() + usize::from(n > 0));
                Ok(())
            },
        )
        .unwrap();
    let n = cases() as usize;
    eprintln!("samples: of {n} cases, {} gave verdicts", given.get());
    assert!(
        given.get() * 4 >= n,
        "only {} of {n} cases gave verdicts",
        given.get()
    );
}

/// Runs the binary, bounded by a timeout (a hang fails the test).
fn run(args: &[&str]) -> Outcome {
    run_within(args, Duration::from_secs(30))
}

/// No panic, and a failure says where.
fn check_outcome(o: &Outcome, files: &[&str], what: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        o.code != Some(101) && !o.err.contains("panicked") && o.code.is_some(),
        "vigil crashed ({:?}) on {}: {}",
        o.code,
        what,
        o.err
    );
    if matches!(o.code, Some(2 | 4)) {
        let located = files.iter().any(|f| {
            o.err
                .split(&format!("{f}:"))
                .skip(1)
                .any(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        });
        prop_assert!(located, "an unlocated error on {}: {}", what, o.err);
    }
    Ok(())
}

/// The binary: a mutated property file and a trace that goes bad mid-way, under a semantics,
/// a tier and an output form, exits with a located error or 0, never a panic, within the
/// timeout; where the run stops at the bad row, its output is the good prefix's run's.
#[test]
fn vigil_run_survives_hostile_stl_files_and_traces() {
    let d = test_dir("stlh", "binary");
    let semantics = prop::sample::select(Semantics::ALL.to_vec());
    let tier = prop::sample::select(vec!["auto", "canonical", "native-whole"]);
    let output = prop::sample::select(vec!["text", "csv", "jsonl"]);
    // The trace as `.input` (mostly) or as JSON lines with a time field.
    let jsonl = prop::bool::weighted(0.3);
    let (evaluated, stopped) = (Cell::new(0), Cell::new(0));
    let case = Cell::new(0);
    runner()
        .run(
            &(
                property_file(),
                trace_plan(),
                semantics,
                tier,
                output,
                jsonl,
            ),
            |((text, m), plan, semantics, tier, output, jsonl)| {
                case.set(case.get() + 1);
                let bytes = apply(&text, &m);
                let spec_path = write(&d, "f.mstlo", &bytes);
                let (prefix, whole, ext) = if jsonl {
                    let (p, w) = plan.jsonl_texts();
                    (p, w, "jsonl")
                } else {
                    let (p, w) = plan.texts();
                    (p, w, "input")
                };
                let (whole_name, prefix_name) = (format!("whole.{ext}"), format!("prefix.{ext}"));
                let whole_path = write(&d, &whole_name, &whole);
                let prefix_path = write(&d, &prefix_name, &prefix);
                let vars = StlSpec::parse("f.mstlo", &String::from_utf8_lossy(&bytes))
                    .map(|s| {
                        variables(&s)
                            .iter()
                            .map(|(n, v)| format!("{n}={v}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_default();
                let mut args = vec![
                    "run",
                    &spec_path,
                    "--semantics",
                    semantics.name(),
                    "--tier",
                    tier,
                    "--output",
                    output,
                ];
                if !vars.is_empty() {
                    args.extend(["--mstlo-vars", &vars]);
                }
                if jsonl {
                    args.extend(["--time", "t", "--time-unit", "ms"]);
                }
                let what = format!(
                    "{:?} over {whole:?} ({})",
                    String::from_utf8_lossy(&bytes),
                    args.join(" ")
                );
                let with = |input: &str| {
                    let mut a = args.clone();
                    a.extend(["--input", input]);
                    run(&a)
                };
                let o = with(&whole_path);
                check_outcome(&o, &["f.mstlo", &whole_name], &what)?;
                if o.out.lines().count() > usize::from(output != "text") {
                    evaluated.set(evaluated.get() + 1);
                }
                if o.code == Some(4) {
                    stopped.set(stopped.get() + 1);
                    let p = with(&prefix_path);
                    check_outcome(&p, &["f.mstlo", &prefix_name], &what)?;
                    prop_assert_eq!(p.code, Some(0), "the good prefix failed: {}", p.err);
                    prop_assert_eq!(&o.out, &p.out, "output lost on {}: {}", what, o.err);
                }
                Ok(())
            },
        )
        .unwrap();
    let (n, e, s) = (cases() as usize, evaluated.get(), stopped.get());
    eprintln!("binary: of {n} runs, {e} printed verdicts, {s} stopped at a bad row");
    assert!(e * 8 >= n, "only {e} of {n} runs printed verdicts");
    assert!(s * 12 >= n, "only {s} of {n} runs stopped at a bad row");
}

/// Regression: a sample near `Duration::MAX` (a library caller's time) overflowed `t + b` in
/// the evaluator's `G`/`F`/`U` and panicked (`overflow when adding durations`).
#[test]
fn a_sample_at_the_largest_time_does_not_overflow_the_evaluator() {
    for file in ["p: G[0,1](F[0,1](x > 0))\n", "p: (x > 0) U[0,1] (x > 1)\n"] {
        let spec = StlSpec::parse("p.mstlo", file).unwrap();
        let x = spec.signal("x").unwrap();
        for semantics in Semantics::ALL {
            let sync = Synchronization::default();
            let mut m = StlMonitor::new(&spec, semantics, sync, &[]).unwrap();
            for time in [
                Duration::ZERO,
                Duration::MAX - Duration::from_secs(1),
                Duration::MAX,
            ] {
                m.step(&mut [StlSample {
                    signal: x,
                    time,
                    value: 1.0,
                }]);
            }
        }
    }
}

/// Regression: a run on the plan whose last step is less than a period before `Duration::MAX`
/// overflowed the next step's time (`last + period`) and panicked; it moves to the evaluator.
#[test]
fn a_plan_run_near_the_largest_time_moves_to_the_evaluator() {
    let spec = StlSpec::parse("p.mstlo", "p: G[0,1](x > 0)\n").unwrap();
    let x = spec.signal("x").unwrap();
    let end = Duration::MAX - Duration::from_millis(1500);
    let mut run = StlRun::new(
        &spec,
        Semantics::DelayedQuantitative,
        Synchronization::default(),
        &[],
        Tier::Canonical,
    )
    .unwrap();
    let mut eval = StlMonitor::new(
        &spec,
        Semantics::DelayedQuantitative,
        Synchronization::default(),
        &[],
    )
    .unwrap();
    // Two steps a second apart put the run on the plan; the third is less than a period on,
    // and the one after it a whole period on would be past `Duration::MAX`.
    for (k, ms) in [0, 1000, 1400].into_iter().enumerate() {
        let time = end + Duration::from_millis(ms);
        let mut step = [StlSample {
            signal: x,
            time,
            value: 1.0,
        }];
        assert_eq!(
            run.step(&mut step.clone()),
            eval.step(&mut step),
            "step {k}"
        );
        assert_eq!(run.on_plan(), k == 1, "step {k}: {:?}", run.declined());
    }
    assert!(
        run.declined()
            .is_some_and(|why| why.contains("past the largest time"))
    );
}

/// Regression: an `.input` sample that is no timed value (a string, a negative time) was
/// reported as `row N` only; the error names the line its step starts on, as the trace
/// reader's own errors do.
#[test]
fn a_bad_stl_sample_is_reported_at_its_line() {
    let d = test_dir("stlh", "sample_line");
    let spec = write(&d, "p.mstlo", "p: G[0,0.5](x > 0)\n");
    let trace = "0: x = {\"time\": 0, \"value\": 1}\n\
                 1: x = {\"time\": 500, \"value\": 2}\n\
                 // a comment\n\
                 2: x = {\"time\": 1000, \"value\": \"high\"}\n";
    let input = write(&d, "t.input", trace);
    let o = run(&["run", &spec, "--input", &input]);
    assert_eq!(o.code, Some(4), "{}", o.err);
    assert!(
        o.err
            .contains("t.input:4: row 2: `x`: a sample's value is a number"),
        "{}",
        o.err
    );
    assert_eq!(
        o.out,
        "p[0] = Map({\"time\": Int(0), \"value\": Float(1.0)})\n"
    );
}

/// Regression: a property file that is not UTF-8 failed with `stream did not contain valid
/// UTF-8` (exit status 1), naming no place; it is a located error of the file (status 2).
#[test]
fn a_property_file_that_is_not_utf8_is_a_located_error() {
    let d = test_dir("stlh", "not_utf8");
    let spec = write(&d, "p.mstlo", b"# fine\np: x \xff> 1\n");
    let input = write(&d, "t.input", "0: x = {\"time\": 0, \"value\": 1}\n");
    let o = run(&["run", &spec, "--input", &input]);
    assert_eq!(o.code, Some(2), "{}", o.err);
    assert!(
        o.err
            .starts_with("error: the property file is not valid UTF-8: invalid byte 0xFF\n --> ")
            && o.err.contains("p.mstlo:2:6\n"),
        "{}",
        o.err
    );
}

/// Regression: the parser looked each property's name, signal and variable up by a scan of
/// those seen so far, so a file of n lines took time in n² (20,000 lines: 6 s; a hostile file
/// of a million lines would have run for hours). 50,000 lines took about 40 s in a debug
/// build; they take well under a second.
#[test]
fn a_file_of_many_properties_and_signals_parses_in_linear_time() {
    let n = 50_000;
    let file: String = (0..n).map(|k| format!("p{k}: x{k} > $v{k}\n")).collect();
    let start = std::time::Instant::now();
    let spec = StlSpec::parse("p.mstlo", &file).unwrap();
    let took = start.elapsed();
    assert_eq!((spec.properties().len(), spec.signals().len()), (n, n));
    assert_eq!(spec.variables().len(), n);
    assert!(took < Duration::from_secs(10), "{n} lines took {took:?}");
    let twice = format!("{file}p7: x > 1\n");
    let e = StlSpec::parse("p.mstlo", &twice).unwrap_err().to_string();
    assert!(
        e.contains("the property `p7` is defined twice (first on line 8)"),
        "{e}"
    );
}

/// Regression: where the language refused the plan's generated specification (here its count
/// windows, 200 of a million values each, 101 of them past the bound), the note said so with
/// the whole rendering of its errors, each with its line of a text the user never sees: 60 KB
/// of standard error. It is now the first error's message and how many more there are.
#[test]
fn a_refused_plan_is_noted_in_one_line() {
    let d = test_dir("stlh", "refused_plan");
    let file: String = (0..200)
        .map(|k| format!("p{k}: G[0,1000](x > {k}) && y > {k}\n"))
        .collect();
    let spec = write(&d, "p.mstlo", file);
    // A grid of 1 ms: each `G[0,1000]` a window of a million values.
    let trace: String = (0..3)
        .map(|i| {
            format!(
                "{i}: x = {{\"time\": {i}, \"value\": 1}}\ny = {{\"time\": {i}, \"value\": 1}}\n"
            )
        })
        .collect();
    let input = write(&d, "t.input", trace);
    let o = run(&["run", &spec, "--input", &input, "--tier", "canonical"]);
    assert_eq!(o.code, Some(0), "{}", o.err);
    let note = "note: --tier canonical: the properties ran on the STL evaluator: the generated \
                specification is refused: the specification's windows exceed 100000000 values \
                kept by count windows in all (and 100 more errors)\n";
    assert_eq!(o.err, note);
}

/// Regression: in the text form, a property that gives few verdicts (`G[0,1e9]`) holds the
/// others' lines back as long as the trace runs (the checker's lockstep), and each was kept as
/// the checker's map, about 600 bytes: 300,000 rows peaked at 210 MB where the CSV form, which
/// holds nothing back, peaked at 36 MB (debug build). A held line is now a time and a verdict.
#[cfg(target_os = "linux")]
#[test]
fn lines_held_back_in_lockstep_are_kept_small() {
    if crate::support::report_peak_if_child() {
        return;
    }
    const TEST: &str = "stl_hardening::lines_held_back_in_lockstep_are_kept_small";
    let d = test_dir("stlh", "lockstep_memory");
    let spec = write(&d, "p.mstlo", "p: G[0,1000000000](x > 0)\nq: x > 0\n");
    let trace: String = (0..300_000)
        .map(|i| format!("{i}: x = {{\"time\": {i}, \"value\": 1}}\n"))
        .collect();
    let input = write(&d, "t.input", trace);
    let (code, text) = crate::support::peak_rss(TEST, &["run", &spec, "--input", &input]);
    assert_eq!(code, 0);
    let csv_args = ["run", &spec, "--input", &input, "--output", "csv"];
    let (code, csv) = crate::support::peak_rss(TEST, &csv_args);
    assert_eq!(code, 0);
    let mb = |b: u64| b as f64 / f64::from(1 << 20);
    eprintln!("text: {:.0} MB, csv: {:.0} MB", mb(text), mb(csv));
    // 300,000 held lines of 40 bytes, in a deque that may have doubled: about 10 MB more (the
    // maps made it 170 MB more).
    assert!(
        text < csv + (48 << 20),
        "text {:.0} MB, csv {:.0} MB",
        mb(text),
        mb(csv)
    );
}

/// Regression: `--time x` where `x` is a signal of the properties failed at the first row with
/// `the row has no time` (the field read as the signal's, the time's cell left empty); it is
/// refused up front, saying why.
#[test]
fn a_signal_is_not_the_time_field() {
    let d = test_dir("stlh", "time_is_signal");
    let spec = write(&d, "p.mstlo", "p: G[0,0.5](x > 0)\n");
    let input = write(&d, "t.jsonl", "{\"x\": 0}\n{\"x\": 500}\n");
    let o = run(&[
        "run",
        &spec,
        "--input",
        &input,
        "--time",
        "x",
        "--time-unit",
        "ms",
    ]);
    assert_eq!(o.code, Some(1), "{}", o.err);
    assert_eq!(
        o.err,
        "error: --time x: `x` is a signal of the properties; the time is another field\n"
    );
}
