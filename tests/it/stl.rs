//! STL properties (issue 39): the checker's STL conformance cases (own copies in
//! `tests/stl_cases/`, the shared ones under `../shared/conformance/stl`), the command line, the
//! diagnostics, and the oracle: the `mstlo` crate, the checker's own engine, compared verdict for
//! verdict with vigil's STL monitor on generated formulas and signals under every semantics and
//! synchronization.

use crate::support::{run_vigil, test_dir, write};
use expect_test::expect;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::path::{Path, PathBuf};
use std::time::Duration;
use vigil::Type;
use vigil::stl::{
    Emitted, Interval, Lockstep, Semantics, StlMonitor, StlSample, StlSpec, Synchronization,
    Verdict,
};
use vigil::trace::{InputSchema, TraceFormat};

/// Runs a case in process as `vigil run` does: the checker's text output.
fn run_case(dir: &Path) -> String {
    let spec_path = dir.join("spec.mstlo");
    let text = std::fs::read_to_string(&spec_path).unwrap();
    let spec = StlSpec::parse(&spec_path.display().to_string(), &text).unwrap();
    let name = std::fs::read_to_string(dir.join("semantics")).unwrap();
    let semantics = Semantics::from_name(name.trim()).unwrap();
    let mut monitor =
        StlMonitor::new(&spec, semantics, Synchronization::ZeroOrderHold, &[]).unwrap();
    let schema = InputSchema {
        names: spec.signals().to_vec(),
        types: vec![Type::Any; spec.signals().len()],
    };
    let trace = dir.join("trace.input").display().to_string();
    let mut reader = vigil::trace::open_reader(&trace, TraceFormat::Tc, &schema).unwrap();
    let mut row = vec![None; schema.names.len()];
    let mut lockstep = Lockstep::new(spec.properties().len());
    let names: Vec<&str> = spec.properties().collect();
    let mut out = String::new();
    while reader.next_row(&mut row).unwrap() {
        let mut samples = vigil::stl::row_samples(&spec, &row).unwrap();
        row.iter_mut().for_each(|c| *c = None);
        for v in monitor.step(&mut samples) {
            lockstep.push(&v);
        }
        for (p, i, v) in lockstep.ready() {
            out.push_str(&format!("{}[{i}] = {v}\n", names[p]));
        }
    }
    out
}

/// Runs every case under `root`; returns, per semantics, the cases run and those that failed.
fn run_cases(root: &Path) -> Vec<(Semantics, usize, Vec<String>)> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("spec.mstlo").is_file())
        .collect();
    dirs.sort();
    let mut table: Vec<(Semantics, usize, Vec<String>)> =
        Semantics::ALL.iter().map(|&s| (s, 0, Vec::new())).collect();
    for dir in dirs {
        let name = std::fs::read_to_string(dir.join("semantics")).unwrap();
        let semantics = Semantics::from_name(name.trim())
            .unwrap_or_else(|| panic!("{}: unknown semantics `{}`", dir.display(), name.trim()));
        let want = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
        let got = run_case(&dir);
        let entry = table.iter_mut().find(|e| e.0 == semantics).unwrap();
        entry.1 += 1;
        if got != want {
            entry.2.push(format!(
                "{}:\n--- got\n{got}--- want\n{want}",
                dir.display()
            ));
        }
    }
    table
}

/// Fails listing every failed case, after a line per semantics: `passed/run`.
fn check_table(table: &[(Semantics, usize, Vec<String>)], at_least: usize) {
    let summary: String = table
        .iter()
        .map(|(s, n, failed)| format!("{}: {}/{n} passed\n", s.name(), n - failed.len()))
        .collect();
    let ran: usize = table.iter().map(|e| e.1).sum();
    let failures: Vec<&String> = table.iter().flat_map(|e| &e.2).collect();
    assert!(
        failures.is_empty() && ran >= at_least,
        "{summary}({ran} cases, at least {at_least} expected)\n{}",
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprint!("{summary}");
}

fn own_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stl_cases")
}

#[test]
fn own_stl_cases_pass() {
    let table = run_cases(&own_root());
    // Every semantics is among them.
    assert!(table.iter().all(|e| e.1 > 0), "a semantics has no own case");
    check_table(&table, 8);
}

/// The shared STL cases (ignored like the other shared cases: a clone has no `../shared`;
/// `.ci/run` runs them).
#[test]
#[ignore = "needs ../shared/conformance beside the checkout; .ci/run runs it (docs/testing.md)"]
fn shared_stl_cases_pass_under_every_semantics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/stl");
    assert!(root.is_dir(), "{} does not exist", root.display());
    check_table(&run_cases(&root), 80);
}

#[test]
fn the_command_line_runs_a_case_in_each_format() {
    let case = own_root().join("s301_0001");
    let spec = case.join("spec.mstlo").display().to_string();
    let trace = case.join("trace.input").display().to_string();
    let (status, out, err) = run_vigil(&["run", &spec, "--input", &trace], None);
    assert_eq!((status, err.as_str()), (0, ""));
    assert_eq!(
        out,
        std::fs::read_to_string(case.join("expected.txt")).unwrap()
    );
    let (status, out, _) = run_vigil(&["run", &spec, "--input", &trace, "--output", "csv"], None);
    assert_eq!(status, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "property,time,value");
    assert!(lines.contains(&"p0,500,-5.0"), "{out}");
    // CSV lists every verdict, not only the lines the text format's lockstep prints.
    assert!(lines.len() > 1 + 3 * 8, "{out}");
    let (status, out, _) = run_vigil(
        &["run", &spec, "--input", &trace, "--output", "jsonl"],
        None,
    );
    assert_eq!(status, 0);
    assert_eq!(
        out.lines().next(),
        Some(r#"{"property":"p0","time":500,"value":-5.0}"#)
    );
}

#[test]
fn robustness_intervals_and_infinities_in_csv_and_json() {
    let dir = test_dir("stl", "intervals");
    let spec = write(&dir, "p.mstlo", "g: G[0,1](x > 0)\n");
    let trace = write(
        &dir,
        "t.input",
        "0: x = {\"time\": 0, \"value\": 2.0}\n1: x = {\"time\": 2000, \"value\": 1}\n",
    );
    let run = |format: &str| {
        run_vigil(
            &[
                "run",
                &spec,
                "--input",
                &trace,
                "--semantics",
                "robustness-interval",
                "--output",
                format,
            ],
            None,
        )
    };
    let (status, out, err) = run("csv");
    assert_eq!((status, err.as_str()), (0, ""));
    expect![[r#"
        property,time,lower,upper
        g,0,-inf,2.0
        g,0,2.0,2.0
        g,2000,-inf,1.0
    "#]]
    .assert_eq(&out);
    let (_, out, _) = run("jsonl");
    expect![[r#"
        {"property":"g","time":0,"value":{"lower":"-inf","upper":2.0}}
        {"property":"g","time":0,"value":{"lower":2.0,"upper":2.0}}
        {"property":"g","time":2000,"value":{"lower":"-inf","upper":1.0}}
    "#]]
    .assert_eq(&out);
}

#[test]
fn csv_traces_take_a_time_field_and_variables_a_value() {
    let dir = test_dir("stl", "csv");
    let spec = write(&dir, "p.stl", "hot: F[0,1](temp > $limit)\n");
    let trace = write(&dir, "t.csv", "t,temp\n0,20\n500,31\n1000,\n2000,25\n");
    let (status, out, err) = run_vigil(
        &[
            "run",
            &spec,
            "--input",
            &trace,
            "--time",
            "t",
            "--time-unit",
            "ms",
            "--mstlo-vars",
            "limit=30",
        ],
        None,
    );
    assert_eq!((status, err.as_str()), (0, ""));
    // The empty cell at 1000 ms is no sample.
    expect![[r#"
        hot[0] = Map({"time": Int(0), "value": Float(1.0)})
        hot[1] = Map({"time": Int(500), "value": Float(1.0)})
    "#]]
    .assert_eq(&out);
    refused(
        &["run", &spec, "--input", &trace, "--time", "t"],
        "`$limit` has no value",
    );
    // The checker's spelling: `--language mstlo`, variables as separate pairs.
    let renamed = write(&dir, "p.txt", "hot: F[0,1](temp > $limit) && temp < $cap\n");
    let (status, again, err) = run_vigil(
        &[
            "run",
            &renamed,
            "--language",
            "mstlo",
            "--input",
            &trace,
            "--time",
            "t",
            "--time-unit",
            "ms",
            "--mstlo-vars",
            "limit=30",
            "cap=100",
            "--mstlo-synchronization",
            "none",
        ],
        None,
    );
    assert_eq!((status, err.as_str()), (0, ""));
    // `temp < $cap` is 69 or more where `F` is 1: the minimum is the first run's verdicts.
    assert_eq!(again, out);
    refused(
        &["run", &spec, "--input", &trace, "--mstlo-vars", "limit=30"],
        "needs --time FIELD",
    );
}

#[test]
fn refusals_and_errors_are_located_and_keep_earlier_output() {
    let dir = test_dir("stl", "errors");
    let spec = write(&dir, "p.mstlo", "p: x > 1\n");
    let bad = write(&dir, "bad.mstlo", "p: G[2,1](x > 3)\nq x > 1\n");
    let trace = write(
        &dir,
        "t.input",
        "0: x = {\"time\": 0, \"value\": 2.0}\n1: x = {\"time\": 1000, \"value\": \"hot\"}\n",
    );
    let (status, out, err) = run_vigil(&["run", &bad, "--input", &trace], None);
    assert_eq!((status, out.as_str()), (2, ""));
    let err = err.replace(&bad, "bad.mstlo");
    expect![[r#"
        error: the interval's start (2) is after its end (1)
         --> bad.mstlo:1:5
          |
        1 | p: G[2,1](x > 3)
          |     ^^^^^
        
        error: a property line is `name: formula`
         --> bad.mstlo:2:1
          |
        2 | q x > 1
          | ^^^^^^^
          = hint: for example `safe: G[0,2](x > 3)`
        error: could not check `bad.mstlo` due to 2 previous errors
    "#]]
    .assert_eq(&err);
    let (status, _, _) = run_vigil(&["check", &bad], None);
    assert_eq!(status, 2);
    // The first row's verdict is written before the second row's error.
    let (status, out, err) = run_vigil(&["run", &spec, "--input", &trace], None);
    assert_eq!(status, 4);
    assert_eq!(
        out,
        "p[0] = Map({\"time\": Int(0), \"value\": Float(1.0)})\n"
    );
    assert!(
        err.contains("row 1: `x`: a sample's value is a number"),
        "{err}"
    );
    // On the plan tier too (the second row's error comes before it decides).
    let (status, tiered, _) = run_vigil(
        &["run", &spec, "--input", &trace, "--tier", "canonical"],
        None,
    );
    assert_eq!((status, tiered), (4, out));
    let dsrv = write(&dir, "s.dsrv", "in x: Int\nout y: Int\ny = x\n");
    let (status, _, err) = run_vigil(
        &[
            "run",
            &dsrv,
            "--input",
            &trace,
            "--semantics",
            "eager-qualitative",
        ],
        None,
    );
    assert_eq!(status, 1);
    assert!(
        err.contains("--semantics applies to STL property files"),
        "{err}"
    );
}

#[test]
fn a_sample_whose_time_does_not_increase_is_dropped_with_a_warning() {
    let dir = test_dir("stl", "order");
    let spec = write(&dir, "p.mstlo", "p: x > 1\n");
    let trace = write(
        &dir,
        "t.input",
        "0: x = {\"time\": 1000, \"value\": 2.0}\n1: x = {\"time\": 1000, \"value\": 5.0}\n",
    );
    let (status, out, err) = run_vigil(&["run", &spec, "--input", &trace], None);
    assert_eq!(status, 0);
    assert_eq!(out.lines().count(), 1);
    assert!(
        err.contains("is ignored: its time is not after the last one"),
        "{err}"
    );
}

/// Runs vigil with `args` and requires a usage error (exit 1) whose message holds `needle`.
fn refused(args: &[&str], needle: &str) {
    let (status, _, err) = run_vigil(args, None);
    assert_eq!(status, 1, "{err}");
    assert!(err.contains(needle), "{err}");
}

// ---------------------------------------------------------------------------------------------
// The oracle: the `mstlo` crate.

/// A generated formula, as text both parsers read.
fn formula() -> impl Strategy<Value = String> {
    let signal = prop_oneof![Just("x"), Just("y"), Just("z")];
    let cmp = prop_oneof![Just(">"), Just("<"), Just(">="), Just("<=")];
    let threshold = (-8i32..=8).prop_map(|t| format!("{}", f64::from(t) / 2.0));
    let leaf = prop_oneof![
        8 => (signal, cmp, threshold).prop_map(|(s, c, t)| format!("{s} {c} {t}")),
        1 => Just("true".to_string()),
        1 => Just("false".to_string()),
    ];
    let bound = prop_oneof![Just(0.0), Just(0.5), Just(1.0), Just(2.0), Just(3.0)];
    let interval = (bound.clone(), bound).prop_map(|(a, b): (f64, f64)| {
        let (a, b) = if a <= b { (a, b) } else { (b, a) };
        format!("[{a},{b}]")
    });
    leaf.prop_recursive(3, 12, 2, move |inner| {
        prop_oneof![
            inner.clone().prop_map(|a| format!("!({a})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) && ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) || ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) -> ({b})")),
            (interval.clone(), inner.clone()).prop_map(|(i, a)| format!("G{i}({a})")),
            (interval.clone(), inner.clone()).prop_map(|(i, a)| format!("F{i}({a})")),
            (inner.clone(), interval.clone(), inner)
                .prop_map(|(a, i, b)| format!("({a}) U{i} ({b})")),
        ]
    })
}

/// A generated trace: steps at irregular, increasing times, each setting some of the signals.
fn steps() -> impl Strategy<Value = Vec<Vec<(&'static str, u64, f64)>>> {
    let gap = prop_oneof![Just(250u64), Just(500), Just(1000), Just(1500), Just(2750)];
    let value = (-10i32..=10).prop_map(|v| f64::from(v) / 2.0);
    let present = proptest::collection::vec((any::<bool>(), value), 3);
    proptest::collection::vec((gap, present), 1..40).prop_map(|steps| {
        let mut time = 0;
        steps
            .into_iter()
            .map(|(gap, cells)| {
                time += gap;
                ["x", "y", "z"]
                    .into_iter()
                    .zip(cells)
                    .filter(|(_, (on, _))| *on)
                    .map(|(s, (_, v))| (s, time, v))
                    .collect()
            })
            .collect()
    })
}

/// A verdict of either side, comparable bit for bit (NaN equals NaN).
#[derive(Debug, PartialEq)]
enum Seen {
    F(u64),
    B(bool),
    I(u64, u64),
}

fn seen(v: Verdict) -> Seen {
    match v {
        Verdict::Robustness(r) => Seen::F(r.to_bits()),
        Verdict::Bool(b) => Seen::B(b),
        Verdict::Interval(Interval { lower, upper }) => Seen::I(lower.to_bits(), upper.to_bits()),
    }
}

trait Oracle: mstlo::RobustnessSemantics + Copy + std::fmt::Debug + 'static {
    fn seen(self) -> Seen;
}
impl Oracle for f64 {
    fn seen(self) -> Seen {
        Seen::F(self.to_bits())
    }
}
impl Oracle for bool {
    fn seen(self) -> Seen {
        Seen::B(self)
    }
}
impl Oracle for mstlo::RobustnessInterval {
    fn seen(self) -> Seen {
        Seen::I(self.0.to_bits(), self.1.to_bits())
    }
}

/// mstlo driven as the checker drives it: one monitor per property (in name order), each
/// step's samples of the properties' signals sorted by time then name.
fn mstlo_run<S>(
    semantics: S,
    sync: mstlo::SynchronizationStrategy,
    formulas: &[String],
    signals: &[String],
    steps: &[Vec<(&'static str, u64, f64)>],
) -> Vec<Vec<(u64, Seen)>>
where
    S: mstlo::SemanticType + Copy,
    S::Output: Oracle,
{
    formulas
        .iter()
        .map(|f| {
            let mut monitor = mstlo::StlMonitor::builder()
                .formula(mstlo::parse_stl(f).unwrap())
                .synchronization_strategy(sync)
                .semantics(semantics)
                .build()
                .unwrap();
            let mut out = Vec::new();
            for step in steps {
                let mut step: Vec<_> = step
                    .iter()
                    .filter(|s| signals.iter().any(|n| n == s.0))
                    .collect();
                step.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)));
                for &&(signal, t, v) in &step {
                    let sample = mstlo::Step::new(signal, v, Duration::from_millis(t));
                    for verdict in monitor.update(&sample).into_verdicts() {
                        out.push((verdict.timestamp.as_millis() as u64, verdict.value.seen()));
                    }
                }
            }
            out
        })
        .collect()
}

fn vigil_run(
    spec: &StlSpec,
    semantics: Semantics,
    sync: Synchronization,
    steps: &[Vec<(&'static str, u64, f64)>],
) -> Vec<Vec<(u64, Seen)>> {
    let mut monitor = StlMonitor::new(spec, semantics, sync, &[]).unwrap();
    let mut out: Vec<Vec<(u64, Seen)>> = spec.properties().map(|_| Vec::new()).collect();
    for step in steps {
        let mut samples: Vec<StlSample> = step
            .iter()
            .filter_map(|&(s, t, value)| {
                Some(StlSample {
                    signal: spec.signal(s)?,
                    time: Duration::from_millis(t),
                    value,
                })
            })
            .collect();
        for Emitted {
            property,
            time,
            value,
        } in monitor.step(&mut samples)
        {
            out[property].push((time.as_millis() as u64, seen(value)));
        }
    }
    out
}

/// vigil's STL monitor gives mstlo's verdicts, in mstlo's order, on generated properties
/// (nested G, F, U, the Boolean layer, up to three signals sampled at irregular times) under
/// every semantics and synchronization strategy.
#[test]
fn stl_monitor_agrees_with_mstlo() {
    let mut runner = TestRunner::new(Config {
        cases: 400,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (proptest::collection::vec(formula(), 1..4), steps());
    let verdicts = std::cell::Cell::new(0usize);
    let temporal = std::cell::Cell::new(0usize);
    runner
        .run(&strategy, |(formulas, steps)| {
            let text: String = formulas
                .iter()
                .enumerate()
                .map(|(i, f)| format!("p{i}: {f}\n"))
                .collect();
            let spec = StlSpec::parse("gen.mstlo", &text).unwrap();
            let signals = spec.signals().to_vec();
            let in_order: Vec<String> = spec
                .properties()
                .map(|name| formulas[name[1..].parse::<usize>().unwrap()].clone())
                .collect();
            for sync in Synchronization::ALL {
                let theirs = match sync {
                    Synchronization::None => mstlo::SynchronizationStrategy::None,
                    Synchronization::ZeroOrderHold => mstlo::SynchronizationStrategy::ZeroOrderHold,
                    Synchronization::Linear => mstlo::SynchronizationStrategy::Linear,
                };
                for semantics in Semantics::ALL {
                    let want = match semantics {
                        Semantics::DelayedQuantitative => mstlo_run(
                            mstlo::DelayedQuantitative,
                            theirs,
                            &in_order,
                            &signals,
                            &steps,
                        ),
                        Semantics::DelayedQualitative => mstlo_run(
                            mstlo::DelayedQualitative,
                            theirs,
                            &in_order,
                            &signals,
                            &steps,
                        ),
                        Semantics::EagerQualitative => {
                            mstlo_run(mstlo::EagerQualitative, theirs, &in_order, &signals, &steps)
                        }
                        Semantics::RobustnessInterval => {
                            mstlo_run(mstlo::Rosi, theirs, &in_order, &signals, &steps)
                        }
                    };
                    let got = vigil_run(&spec, semantics, sync, &steps);
                    let n = got.iter().map(Vec::len).sum::<usize>();
                    verdicts.set(verdicts.get() + n);
                    if in_order.iter().any(|f| f.contains('[')) {
                        temporal.set(temporal.get() + n);
                    }
                    prop_assert_eq!(
                        &got,
                        &want,
                        "{} under {} with {}",
                        text,
                        semantics.name(),
                        sync.name()
                    );
                }
            }
            Ok(())
        })
        .unwrap();
    // Coverage: the comparison saw many verdicts, many of temporal properties.
    let (verdicts, temporal) = (verdicts.get(), temporal.get());
    assert!(
        verdicts > 20_000 && temporal > 10_000,
        "{verdicts} verdicts, {temporal} temporal"
    );
}

#[test]
fn explain_shows_each_propertys_horizon_and_state() {
    let (status, out, err) = run_vigil(&["explain", "examples/stl/arm.mstlo"], None);
    assert_eq!((status, err.as_str()), (0, ""));
    expect![[r#"
        property grip: (speed < 0.1 -> F[0,1](force > 5))
          signals: speed, force (synchronized, --mstlo-synchronization)
          horizon: 1 s (a delayed verdict for time t once the samples reach t + 1 s)
          state (bounded by the samples within each span while every signal keeps being sampled):
            [0,1] F: a monotonic deque of its operand's values and its pending times, over the last 1 s of samples
        property slow: G[0,2](speed < 2)
          signals: speed
          horizon: 2 s (a delayed verdict for time t once the samples reach t + 2 s)
          state (bounded by the samples within each span while every signal keeps being sampled):
            [0,2] G: a monotonic deque of its operand's values and its pending times, over the last 2 s of samples
        plan tier (--tier, delayed semantics): over a trace whose every signal is sampled at every time of one grid of period p, where p divides 1 s; for p = 1 s (delayed-quantitative):
        in s0: Float  // speed
        in s1: Float  // force
        aux n0: Float
        n0 = (0.1 - s0)
        aux n1: Float
        n1 = (s1 - 5.0)
        aux n2: Float
        n2 = window(n1, 2, max)
        aux n3: Float
        n3 = max(-(default(n0[1], 0.0)), n2)
        out p0: Float  // grip
        p0 = n3
        aux n4: Float
        n4 = (2.0 - s0)
        aux n5: Float
        n5 = window(n4, 2, min)
        aux n6: Float
        n6 = default(n5[1], 0.0)
        out p1: Float  // slow
        p1 = n6
    "#]].assert_eq(&out);
}

/// `--stats` reports an STL run (its semantics, what it read and gave, and the most values it
/// held, which the properties' horizons bound); `--summary`, whose lines are a DSRV run's, is
/// refused rather than ignored.
#[test]
fn stats_report_the_run_and_summary_is_refused() {
    let dir = test_dir("stl", "stats");
    let spec = write(&dir, "p.mstlo", "hi: G[0,1](x > 0)\n");
    let trace = write(
        &dir,
        "t.input",
        "0: x = {\"time\": 0, \"value\": 1.0}\n1: x = {\"time\": 500, \"value\": 2.0}\n\
         2: x = {\"time\": 1000, \"value\": -1.0}\n3: x = {\"time\": 2500, \"value\": 3.0}\n",
    );
    let (status, out, err) = run_vigil(&["run", &spec, "--input", &trace, "--stats"], None);
    assert_eq!(status, 0, "{err}");
    assert!(out.starts_with("hi[0] = "), "{out}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "stl: delayed-quantitative semantics, zero-order-hold synchronization, on the STL evaluator",
            &format!("rows: 4, samples: 4, verdicts: {}", out.lines().count()),
        ],
        "{err}"
    );
    assert!(lines[2].starts_with("held: at most "), "{err}");
    refused(
        &["run", &spec, "--input", &trace, "--summary"],
        "--summary applies to DSRV specifications",
    );
    // So are the other options an STL run used to take and ignore.
    for flag in [&["--quiet"][..], &["--on-malformed", "skip"]] {
        refused(
            &[&["run", &spec, "--input", &trace][..], flag].concat(),
            &format!("{} applies to DSRV specifications", flag[0]),
        );
    }
}
