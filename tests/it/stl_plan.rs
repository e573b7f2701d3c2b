//! The plan tier of property files (issue 39, `vigil::stl::StlRun`): generated formulas and
//! regular traces run on every tier give the STL evaluator's output byte for byte, in the
//! text and CSV forms, and most runs really ran on the plan; a trace that leaves the grid
//! mid-run moves to the evaluator with the same output; `U`, the eager semantics and an
//! irregular trace decline with their reason.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::cell::Cell;
use std::time::Duration;
use vigil::Tier;
use vigil::stl::{
    Semantics, StlMonitor, StlRun, StlSample, StlSpec, Synchronization, VerdictForm, VerdictWriter,
};

/// The tiers the plan runs on.
const TIERS: [Tier; 4] = [
    Tier::Canonical,
    Tier::Quickened,
    Tier::NativeRegions,
    Tier::NativeWhole,
];

/// A step: each signal's (name, time in ms, value).
type Step = Vec<(String, u64, f64)>;

/// Runs `steps` through the evaluator, in `form`.
fn evaluator(spec: &StlSpec, semantics: Semantics, steps: &[Step], form: VerdictForm) -> String {
    let sync = Synchronization::default();
    let mut m = StlMonitor::new(spec, semantics, sync, &[]).unwrap();
    let mut out = VerdictWriter::new(Vec::new(), spec, semantics, form).unwrap();
    for step in steps {
        out.write(&m.step(&mut samples(spec, step))).unwrap();
    }
    String::from_utf8(out.finish().unwrap()).unwrap()
}

/// Runs `steps` through an [`StlRun`] on `tier`, in `form`; with whether it ended on the plan
/// and why it declined (the tier it ran on checked).
fn planned(
    spec: &StlSpec,
    semantics: Semantics,
    steps: &[Step],
    form: VerdictForm,
    tier: Tier,
) -> (String, bool, Option<String>) {
    let sync = Synchronization::default();
    let mut run = StlRun::new(spec, semantics, sync, &[], tier).unwrap();
    let mut out = VerdictWriter::new(Vec::new(), spec, semantics, form).unwrap();
    for step in steps {
        out.write(&run.step(&mut samples(spec, step))).unwrap();
    }
    let text = String::from_utf8(out.finish().unwrap()).unwrap();
    if run.on_plan() {
        assert_eq!(
            run.plan_tier(),
            Some(tier),
            "{}",
            run.plan_text().unwrap_or("")
        );
    }
    (text, run.on_plan(), run.declined().map(String::from))
}

fn samples(spec: &StlSpec, step: &Step) -> Vec<StlSample> {
    step.iter()
        .filter_map(|(s, t, v)| {
            Some(StlSample {
                signal: spec.signal(s)?,
                time: Duration::from_millis(*t),
                value: *v,
            })
        })
        .collect()
}

/// A formula over `b`, `x` and `a` (first mentioned in another order than their names'), with
/// interval bounds multiples of `period` ms (0 … 3 periods).
fn formula(period: u64) -> impl Strategy<Value = String> {
    let signal = prop_oneof![Just("b"), Just("x"), Just("a")];
    let cmp = prop_oneof![Just(">"), Just("<"), Just(">="), Just("<=")];
    // Halves, so that ties (a robustness of ±0) are common.
    let threshold = (-4i32..=4).prop_map(|t| format!("{}", f64::from(t) / 2.0));
    let leaf = prop_oneof![
        8 => (signal, cmp, threshold).prop_map(|(s, c, t)| format!("{s} {c} {t}")),
        1 => Just("true".to_string()),
        1 => Just("false".to_string()),
    ];
    let secs = move |k: u64| format!("{}", (k * period) as f64 / 1000.0);
    let interval = (0u64..=3, 0u64..=3).prop_map(move |(a, b)| {
        let (a, b) = (a.min(b), a.max(b));
        format!("[{},{}]", secs(a), secs(b))
    });
    leaf.prop_recursive(4, 16, 2, move |inner| {
        prop_oneof![
            1 => inner.clone().prop_map(|a| format!("!({a})")),
            1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) && ({b})")),
            1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) || ({b})")),
            1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) -> ({b})")),
            2 => (interval.clone(), inner.clone()).prop_map(|(i, a)| format!("G{i}({a})")),
            2 => (interval.clone(), inner).prop_map(|(i, a)| format!("F{i}({a})")),
        ]
    })
}

/// How a generated trace leaves the grid, if it does.
#[derive(Clone, Copy, Debug)]
enum Break {
    /// It stays on it.
    Never,
    /// At step `k` a signal has no sample.
    Missing(usize),
    /// At step `k` the time skips a period.
    Gap(usize),
    /// At step `k` the first signal's sample is a millisecond late.
    Skew(usize),
}

/// A case: the property file's text, the semantics, the period, the first time, the values of
/// each step (one per signal, in name order) and how the trace breaks.
fn case() -> impl Strategy<Value = (String, Semantics, u64, u64, Vec<Vec<f64>>, Break)> {
    let period = prop_oneof![Just(250u64), Just(500), Just(1000)];
    let semantics = prop_oneof![
        Just(Semantics::DelayedQuantitative),
        Just(Semantics::DelayedQualitative)
    ];
    let value = (-6i32..=6).prop_map(|v| f64::from(v) / 2.0);
    let steps = proptest::collection::vec(proptest::collection::vec(value, 3), 0..30);
    let brk = prop_oneof![
        3 => Just(Break::Never),
        1 => (0usize..30).prop_map(Break::Missing),
        1 => (0usize..30).prop_map(Break::Gap),
        1 => (0usize..30).prop_map(Break::Skew),
    ];
    (
        period,
        semantics,
        prop_oneof![Just(0u64), Just(1000), Just(333)],
        steps,
        brk,
    )
        .prop_flat_map(|(period, semantics, t0, steps, brk)| {
            let props = proptest::collection::vec(formula(period), 1..4);
            (
                props.prop_map(|fs| {
                    fs.iter()
                        .enumerate()
                        .map(|(i, f)| format!("q{i}: {f}\n"))
                        .collect::<String>()
                }),
                Just(semantics),
                Just(period),
                Just(t0),
                Just(steps),
                Just(brk),
            )
        })
}

/// The trace's steps: every signal of the file at every time `t0 + k·period`, but for the
/// break.
fn trace(spec: &StlSpec, period: u64, t0: u64, values: &[Vec<f64>], brk: Break) -> Vec<Step> {
    let mut names: Vec<String> = spec.signals().to_vec();
    names.sort();
    let mut late = 0;
    values
        .iter()
        .enumerate()
        .map(|(k, vals)| {
            if matches!(brk, Break::Gap(at) if at == k) {
                late = period;
            }
            let t = t0 + k as u64 * period + late;
            names
                .iter()
                .zip(vals.iter().cycle())
                .enumerate()
                .filter(|(i, _)| !(matches!(brk, Break::Missing(at) if at == k) && *i == 0))
                .map(|(i, (n, v))| {
                    let skew = u64::from(matches!(brk, Break::Skew(at) if at == k) && i == 0);
                    (n.clone(), t + skew, *v)
                })
                .collect()
        })
        .collect()
}

/// The plan tier gives the evaluator's text and CSV output on every tier over generated
/// property files (1 to 3 properties, nested `!`, `&&`, `||`, `->`, `G`, `F`, `true`, `false`,
/// comparisons of three signals whose name order is not their order of mention) and regular
/// traces, some leaving the grid mid-run; most runs end on the plan.
#[test]
fn the_plan_tier_gives_the_evaluators_output_on_every_tier() {
    let mut runner = TestRunner::new(Config {
        cases: std::env::var("STL_PLAN_CASES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(96),
        failure_persistence: None,
        ..Config::default()
    });
    let (runs, on_plan, regular, moved) = (Cell::new(0), Cell::new(0), Cell::new(0), Cell::new(0));
    let verdicts = Cell::new(0usize);
    runner
        .run(&case(), |(text, semantics, period, t0, values, brk)| {
            let spec = StlSpec::parse("g.mstlo", &text).unwrap();
            let steps = trace(&spec, period, t0, &values, brk);
            let breaks = match brk {
                Break::Never => false,
                Break::Missing(k) | Break::Gap(k) | Break::Skew(k) => k < steps.len(),
            };
            for form in [VerdictForm::Text, VerdictForm::Csv] {
                let want = evaluator(&spec, semantics, &steps, form);
                if form == VerdictForm::Csv {
                    verdicts.set(verdicts.get() + want.lines().count() - 1);
                }
                for tier in TIERS {
                    let (got, plan, why) = planned(&spec, semantics, &steps, form, tier);
                    prop_assert_eq!(
                        &got,
                        &want,
                        "{} on {} ({:?}, period {} ms, from {} ms, {:?}), declined: {:?}",
                        text,
                        tier,
                        semantics,
                        period,
                        t0,
                        brk,
                        why
                    );
                    runs.set(runs.get() + 1);
                    if !breaks && steps.len() >= 2 && !spec.signals().is_empty() {
                        regular.set(regular.get() + 1);
                        prop_assert!(plan, "{text} over a regular trace declined: {why:?}");
                        on_plan.set(on_plan.get() + 1);
                    }
                    if breaks && steps.len() >= 2 && !plan {
                        moved.set(moved.get() + 1);
                        prop_assert!(why.is_some());
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    eprintln!(
        "stl plan: {} runs ({} cases x 2 forms x {} tiers), {} over regular traces all on the plan, {} left the grid and moved to the evaluator; {} verdicts",
        runs.get(),
        runs.get() / 2 / TIERS.len(),
        TIERS.len(),
        on_plan.get(),
        moved.get(),
        verdicts.get()
    );
    // The coverage guard: most runs were on the plan, not declined.
    assert!(
        on_plan.get() * 2 > runs.get(),
        "only {} of {} runs on the plan",
        on_plan.get(),
        runs.get()
    );
    assert!(moved.get() > 0, "no run left the grid");
}

/// `U`, the eager semantics and an irregular trace decline, each with its reason, and give the
/// evaluator's output.
#[test]
fn until_eager_and_an_irregular_trace_decline_to_the_evaluator() {
    let grid = |n: u64| -> Vec<Step> {
        (0..n)
            .map(|k| {
                let v = (k % 5) as f64 - 2.0;
                vec![("x".into(), k * 500, v), ("y".into(), k * 500, -v)]
            })
            .collect()
    };
    let cases: [(&str, Semantics, Vec<Step>, &str); 5] = [
        (
            "p: (x > 0) U[0,1] (y > 0)\n",
            Semantics::DelayedQuantitative,
            grid(12),
            "`U` (until)",
        ),
        (
            "p: G[0,1](x > 0)\n",
            Semantics::EagerQualitative,
            grid(12),
            "eager-qualitative semantics",
        ),
        (
            "p: G[0,1](x > 0)\nq: F[0.5,1](y < 1)\n",
            Semantics::DelayedQuantitative,
            {
                let mut g = grid(12);
                // The third step is late: the trace is not on one grid.
                for s in &mut g[2] {
                    s.1 += 100;
                }
                g
            },
            "at step 2: the time 1100 ms is not one period after the last (1000 ms expected)",
        ),
        (
            "p: G[0,1](x > 0) && y < 1\n",
            Semantics::DelayedQualitative,
            {
                let mut g = grid(12);
                g[0].pop();
                g
            },
            "at the first step: a signal has no sample",
        ),
        (
            "p: G[0,0.75](x > 0)\n",
            Semantics::DelayedQuantitative,
            grid(12),
            "not a multiple of the trace's period",
        ),
    ];
    for (text, semantics, steps, reason) in cases {
        let spec = StlSpec::parse("d.mstlo", text).unwrap();
        for form in [VerdictForm::Text, VerdictForm::Csv] {
            let want = evaluator(&spec, semantics, &steps, form);
            assert!(want.lines().count() > 2, "{text}: {want}");
            let (got, plan, why) = planned(&spec, semantics, &steps, form, Tier::NativeWhole);
            assert_eq!(got, want, "{text}");
            assert!(!plan, "{text}");
            let why = why.unwrap_or_default();
            assert!(why.contains(reason), "{text}: {why}");
        }
    }
    // The same trace on the grid runs on the plan.
    let spec = StlSpec::parse("d.mstlo", "p: G[0,1](x > 0)\nq: F[0.5,1](y < 1)\n").unwrap();
    let sem = Semantics::DelayedQuantitative;
    let (got, plan, why) = planned(&spec, sem, &grid(12), VerdictForm::Text, Tier::Quickened);
    assert!(plan && why.is_none(), "{why:?}");
    assert_eq!(got, evaluator(&spec, sem, &grid(12), VerdictForm::Text));
}

/// The evaluator's timing kept: a `G[1,1]` over `x` in a run that also samples `a` (taken
/// first, by name) gives its verdict at `a`'s sample, before `x`'s value of that time is in
/// its window, so the verdict is vacuous (+inf); `true` repeats its verdict once per signal.
#[test]
fn the_evaluators_timing_is_kept_on_the_plan() {
    let text = "p: G[0.5,0.5](x > 0)\nq: true\nr: G[0,0.5](x > 0)\ns: a < 1\n";
    let spec = StlSpec::parse("t.mstlo", text).unwrap();
    let steps: Vec<Step> = (0..4)
        .map(|k| vec![("x".into(), k * 500, k as f64), ("a".into(), k * 500, 0.0)])
        .collect();
    let sem = Semantics::DelayedQuantitative;
    let want = evaluator(&spec, sem, &steps, VerdictForm::Csv);
    assert!(want.contains("p,0,inf\n"), "{want}");
    // `r`'s window lacks x's newest value too: min over x at 0 only.
    assert!(
        want.contains("r,0,0.0\n") && want.contains("r,500,1.0\n"),
        "{want}"
    );
    assert_eq!(want.matches("q,0,inf").count(), 2, "{want}");
    for tier in TIERS {
        let (got, plan, why) = planned(&spec, sem, &steps, VerdictForm::Csv, tier);
        assert!(plan, "{why:?}");
        assert_eq!(got, want, "{tier}");
    }
}
