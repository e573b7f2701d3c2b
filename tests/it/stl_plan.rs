//! The plan tier of property files (issue 39, `vigil::stl::StlRun`): generated formulas and
//! regular traces run on every tier give the STL evaluator's output byte for byte, in the
//! text and CSV forms, and most runs really ran on the plan; a trace that leaves the grid
//! mid-run moves to the evaluator with the same output; a `U` whose operands the evaluator
//! pairs otherwise than by time, the eager semantics and an irregular trace decline with their
//! reason.

use crate::support::{run_vigil, test_dir, write};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::Duration;
use vigil::stl::{
    Emitted, Semantics, StlMonitor, StlRun, StlSample, StlSpec, Synchronization, Verdict,
    VerdictForm, VerdictWriter,
};
use vigil::trace::{InputSchema, TraceFormat};
use vigil::{Tier, Type};

/// The tiers the plan runs on.
const TIERS: [Tier; 4] = [
    Tier::Canonical,
    Tier::Quickened,
    Tier::NativeRegions,
    Tier::NativeWhole,
];

/// A step: each signal's (name, time in ms, value).
type Step = Vec<(String, u64, f64)>;

/// The semantics and the synchronization of a run.
type Mode = (Semantics, Synchronization);

/// The default synchronization.
fn zoh(semantics: Semantics) -> Mode {
    (semantics, Synchronization::default())
}

/// Runs `steps` through the evaluator, in `form`.
fn evaluator(spec: &StlSpec, (semantics, sync): Mode, steps: &[Step], form: VerdictForm) -> String {
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
    (semantics, sync): Mode,
    steps: &[Step],
    form: VerdictForm,
    tier: Tier,
) -> (String, bool, Option<String>) {
    let mut run = StlRun::new(spec, semantics, sync, &[], tier).unwrap();
    let mut out = VerdictWriter::new(Vec::new(), spec, semantics, form).unwrap();
    // One buffer of verdicts for every step (`step_into`, which `step` wraps): each step's
    // verdicts replace the last's.
    let mut given = vec![Emitted {
        property: usize::MAX,
        time: Duration::MAX,
        value: Verdict::Bool(false),
    }];
    for step in steps {
        run.step_into(&mut samples(spec, step), &mut given);
        out.write(&given).unwrap();
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
/// interval bounds multiples of `period` ms (0 … 4 periods).
fn formula(period: u64) -> impl Strategy<Value = String> {
    let signal = prop_oneof![Just("b"), Just("x"), Just("a")];
    let cmp = prop_oneof![Just(">"), Just("<"), Just(">="), Just("<=")];
    // Halves, so that ties (a robustness of ±0) are common.
    let threshold = (-4i32..=4).prop_map(|t| format!("{}", f64::from(t) / 2.0));
    let compare = (signal, cmp, threshold).prop_map(|(s, c, t)| format!("{s} {c} {t}"));
    let leaf = prop_oneof![
        8 => compare.clone(),
        1 => Just("true".to_string()),
        1 => Just("false".to_string()),
    ];
    let secs = move |k: u64| format!("{}", (k * period) as f64 / 1000.0);
    let interval = (0u64..=4, 0u64..=4).prop_map(move |(a, b)| {
        let (a, b) = (a.min(b), a.max(b));
        format!("[{},{}]", secs(a), secs(b))
    });
    // `U[0,0]` (aligned operands) more often than a pair of draws gives it.
    let until = prop_oneof![4 => interval.clone(), 1 => Just("[0,0]".to_string())];
    leaf.prop_recursive(4, 16, 2, move |inner| {
        let aligned = (inner.clone(), compare.clone(), 0u8..4, interval.clone())
            .prop_map(|(a, c, how, i)| align(a, c, how, i));
        // A `U` over aligned operands made of an aligned `U`.
        let nested = (
            aligned.clone(),
            until.clone(),
            (compare.clone(), 0u8..4, interval.clone()),
        )
            .prop_map(|((a, b), i, (c, how, j))| align(format!("({a}) U{i} ({b})"), c, how, j));
        prop_oneof![
            2 => inner.clone().prop_map(|a| format!("!({a})")),
            2 => (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) && ({b})")),
            2 => (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) || ({b})")),
            2 => (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) -> ({b})")),
            4 => (interval.clone(), inner.clone()).prop_map(|(i, a)| format!("G{i}({a})")),
            4 => (interval.clone(), inner.clone()).prop_map(|(i, a)| format!("F{i}({a})")),
            1 => (inner.clone(), interval.clone(), inner).prop_map(|(a, i, b)| format!("({a}) U{i} ({b})")),
            1 => (aligned, until.clone()).prop_map(|((a, b), i)| format!("({a}) U{i} ({b})")),
            1 => (nested, until.clone()).prop_map(|((a, b), i)| format!("({a}) U{i} ({b})")),
        ]
    })
}

/// Operands for `U` made from `a` with the same horizon (random operands mostly have different
/// ones, which the plan runs otherwise; see `Lowering::until`): `a` and its negation, `a` and
/// `a` joined to the comparison `c`, or `G` of `a` beside `F` of `c` over one interval `i`.
fn align(a: String, c: String, how: u8, i: String) -> (String, String) {
    match how {
        0 => (a.clone(), format!("!({a})")),
        1 => (a.clone(), format!("({a}) && ({c})")),
        2 => (a.clone(), format!("({c}) || ({a})")),
        _ => (format!("G{i}({a})"), format!("F{i}({c})")),
    }
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
fn case() -> impl Strategy<Value = (String, Mode, u64, u64, Vec<Vec<f64>>, Break)> {
    let period = prop_oneof![Just(250u64), Just(500), Just(1000)];
    let semantics = prop_oneof![
        Just(Semantics::DelayedQuantitative),
        Just(Semantics::DelayedQualitative)
    ];
    let sync = prop_oneof![
        2 => Just(Synchronization::ZeroOrderHold),
        1 => Just(Synchronization::Linear),
        1 => Just(Synchronization::None),
    ];
    let semantics = (semantics, sync);
    let value = (-6i32..=6).prop_map(|v| f64::from(v) / 2.0);
    let steps = proptest::collection::vec(proptest::collection::vec(value, 3), 0..40);
    let brk = prop_oneof![
        3 => Just(Break::Never),
        1 => (0usize..40).prop_map(Break::Missing),
        1 => (0usize..40).prop_map(Break::Gap),
        1 => (0usize..40).prop_map(Break::Skew),
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
                        // Name order is not the order of the lines.
                        .map(|(i, f)| format!("{}{i}: {f}\n", ["z", "a", "m"][i % 3]))
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
/// comparisons of three signals whose name order is not their order of mention, bounds of
/// 0 to 4 periods, every synchronization) and regular traces, some leaving the grid mid-run;
/// most runs end on the plan.
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
    // Runs over regular traces of files with a `U`; of those, the runs on the plan, and the
    // runs on the plan of a file with a property of two or more `U` (mostly nested).
    let (u_regular, u_on_plan, u_several) = (Cell::new(0), Cell::new(0), Cell::new(0));
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
                        let untils = text.matches(" U[").count();
                        u_regular.set(u_regular.get() + usize::from(untils > 0));
                        if !plan {
                            // Over a regular trace only a `U` whose operands the evaluator
                            // pairs in a way the plan does not follow declines: an operand
                            // repeating its verdict per sample, or a `U[a,0]` (`Lowering::until`).
                            let why = why.as_deref().unwrap_or("");
                            prop_assert!(
                                why.contains(" U[") && why.contains("operand"),
                                "{text} over a regular trace declined: {why:?}"
                            );
                            continue;
                        }
                        on_plan.set(on_plan.get() + 1);
                        if untils > 0 {
                            u_on_plan.set(u_on_plan.get() + 1);
                            let several = text.lines().any(|l| l.matches(" U[").count() > 1);
                            u_several.set(u_several.get() + usize::from(several));
                        }
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
        "stl plan: {} runs ({} cases x 2 forms x {} tiers), {} over regular traces, {} of them on the plan, {} left the grid and moved to the evaluator; {} verdicts; with `U`: {} runs over regular traces, {} on the plan, {} of them of a property with two or more `U`",
        runs.get(),
        runs.get() / 2 / TIERS.len(),
        TIERS.len(),
        regular.get(),
        on_plan.get(),
        moved.get(),
        verdicts.get(),
        u_regular.get(),
        u_on_plan.get(),
        u_several.get()
    );
    // The coverage guard: most runs were over regular traces, and most of those (all but
    // some with a `U`, asserted above) on the plan.
    assert!(
        regular.get() * 2 > runs.get() && on_plan.get() * 5 > regular.get() * 4,
        "only {} of {} runs over regular traces, {} on the plan",
        regular.get(),
        runs.get(),
        on_plan.get()
    );
    assert!(moved.get() > 0, "no run left the grid");
    // `U` on the plan: most of the files with one, nested ones among them.
    assert!(
        u_on_plan.get() * 3 > u_regular.get() * 2 && u_several.get() > 0,
        "`U` on the plan in {} of {} runs ({} of two or more)",
        u_on_plan.get(),
        u_regular.get(),
        u_several.get()
    );
}

/// A case the property test found (3000 cases): a `U` over two `F`s of one horizon, without
/// synchronization, over a trace whose step 11 lacks `b`'s sample, which moves the run to
/// the evaluator; the verdict for 1,750 ms, given after the move, must be the evaluator's.
#[test]
fn a_move_under_no_synchronization_keeps_the_untils_verdicts() {
    let text = "z0: !((F[0,0.5](b > 0)) U[0,0.75] (F[0.5,0.5](x > 0)))\n";
    let spec = StlSpec::parse("g.mstlo", text).unwrap();
    let values: Vec<Vec<f64>> = [
        [-1.5, -2.5],
        [-2.0, 2.0],
        [1.0, 1.5],
        [2.0, -2.0],
        [-2.0, 0.5],
        [-1.5, 0.5],
        [-1.5, 0.5],
        [-2.5, -0.5],
        [1.5, 2.5],
        [-1.5, -2.5],
        [-1.0, -2.5],
        [-1.0, 1.0],
        [-3.0, 0.0],
        [-1.0, 0.0],
        [3.0, 0.0],
        [1.5, -0.5],
        [-3.0, 0.0],
        [-2.0, 0.0],
        [1.5, 1.5],
        [1.5, 1.5],
        [2.5, -2.5],
        [3.0, -2.5],
    ]
    .iter()
    .map(|v| v.to_vec())
    .collect();
    let steps = trace(&spec, 250, 0, &values, Break::Missing(11));
    let mode = (Semantics::DelayedQuantitative, Synchronization::None);
    let want = evaluator(&spec, mode, &steps, VerdictForm::Text);
    for tier in TIERS {
        let (got, plan, why) = planned(&spec, mode, &steps, VerdictForm::Text, tier);
        assert!(!plan && why.is_some(), "{why:?}");
        assert_eq!(got, want, "on {tier}");
    }
}

/// A `U[a,0]` whose operands have different horizons, the eager semantics and an irregular trace
/// decline, each with its reason, and give the evaluator's output.
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
    let cases: [(&str, Semantics, Vec<Step>, &str); 8] = [
        (
            "p: (x > 0) U[0,0] F[0,0.5](y > 0)\n",
            Semantics::DelayedQuantitative,
            grid(12),
            "have different horizons or give their verdicts at different samples of a step",
        ),
        (
            "p: (x > 0) U[0,0] (y > 0)\n",
            Semantics::DelayedQualitative,
            grid(12),
            "give their verdicts at different samples of a step",
        ),
        (
            "p: true U[0,1] (y > 0)\nq: x < 1\n",
            Semantics::DelayedQuantitative,
            grid(12),
            "an operand of `(true U[0,1] y > 0)` reads no signal",
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
            "p: F[0,1](x > 0)\n",
            Semantics::DelayedQuantitative,
            {
                let mut g = grid(12);
                g[7][0].2 = f64::INFINITY;
                g
            },
            "at step 7: a sample's value is inf",
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
            let want = evaluator(&spec, zoh(semantics), &steps, form);
            assert!(want.lines().count() > 2, "{text}: {want}");
            let (got, plan, why) = planned(&spec, zoh(semantics), &steps, form, Tier::NativeWhole);
            assert_eq!(got, want, "{text}");
            assert!(!plan, "{text}");
            let why = why.unwrap_or_default();
            assert!(why.contains(reason), "{text}: {why}");
        }
    }
    // The same trace on the grid runs on the plan.
    let spec = StlSpec::parse("d.mstlo", "p: G[0,1](x > 0)\nq: F[0.5,1](y < 1)\n").unwrap();
    let sem = Semantics::DelayedQuantitative;
    let (got, plan, why) = planned(
        &spec,
        zoh(sem),
        &grid(12),
        VerdictForm::Text,
        Tier::Quickened,
    );
    assert!(plan && why.is_none(), "{why:?}");
    assert_eq!(
        got,
        evaluator(&spec, zoh(sem), &grid(12), VerdictForm::Text)
    );
}

/// `U` on the plan gives the evaluator's verdicts with its pairing and timing: for a `U` whose
/// operands give their verdicts at its first sample of a step, the maximum over the whole
/// interval; where only φ's newest value is in by then, the last term is φ's running minimum
/// alone (ψ's value read as unknown); where φ's is not, the interval one value shorter;
/// `U[a,0]` once both values are in; nested under `G`, `&&` and another `U`; operands of
/// different horizons, paired by position (ψ read further on, or back, once the caches are
/// pruned).
#[test]
fn until_runs_on_the_plan_with_the_evaluators_pairing() {
    let text = "\
        both: (a > 0) U[0,1] (a < 1.5)\n\
        psi_later: (a > 0) U[0.5,1] (y > 1)\n\
        phi_later: (y > -1) U[0,1] (a < 1)\n\
        zero: (x > 0) U[0,0] !(x > 1.5)\n\
        nested: G[0,1]((x > 0) U[0,1] (y > 0)) && (a < 2)\n\
        twice: ((x > 0) U[0,1] (y > 0)) U[0,0.5] G[0,1](a < 2)\n\
        slower_psi: (x > 0) U[0,1] F[0,1.5](y > 0)\n\
        slower_phi: G[0,1](y > -1) U[0,1.5] (a < 1)\n";
    let spec = StlSpec::parse("u.mstlo", text).unwrap();
    // Values whose pairings differ: a textbook `U` (ψ's last value paired, or the whole
    // interval) gives other verdicts for `psi_later` and `phi_later`.
    let steps: Vec<Step> = (0..24u64)
        .map(|k| {
            let w = |m: u64, d: f64| ((k * m) % 7) as f64 * 0.5 - d;
            vec![
                // Slower: φ's running minimum stays high for a while.
                ("a".into(), k * 500, ((k / 2) % 4) as f64 - 1.0),
                ("x".into(), k * 500, w(5, 1.5)),
                ("y".into(), k * 500, w(2, 1.25)),
            ]
        })
        .collect();
    for sem in [
        Semantics::DelayedQuantitative,
        Semantics::DelayedQualitative,
    ] {
        let want = evaluator(&spec, zoh(sem), &steps, VerdictForm::Csv);
        for p in [
            "both",
            "psi_later",
            "phi_later",
            "zero",
            "nested",
            "twice",
            "slower_psi",
            "slower_phi",
        ] {
            assert!(want.matches(&format!("{p},")).count() >= 18, "{p}: {want}");
        }
        for tier in TIERS {
            let (got, plan, why) = planned(&spec, zoh(sem), &steps, VerdictForm::Csv, tier);
            assert!(plan, "{why:?}");
            assert_eq!(got, want, "{sem:?} on {tier}");
        }
    }
}

/// A run whose `U` has operands of different horizons that leaves the grid mid-run gives the
/// evaluator's output: the fresh evaluator is given enough of the last steps that its pairing
/// of the operands is the first one's (with only the steps the horizon spans, it paired them
/// as at the start of a run, and its next verdicts differed).
#[test]
fn until_of_different_horizons_moves_to_the_evaluator_exactly() {
    let spec = StlSpec::parse(
        "m.mstlo",
        "p: ((b < 0) -> (b > 0)) U[0,0.25] G[0,0.5](b > 0)\nq: F[0,0.5](b > 0) U[0,0.5] (b < 1)\n",
    )
    .unwrap();
    for gap in [6, 9, 21] {
        let steps: Vec<Step> = (0..30u64)
            .map(|k| {
                let t = k * 250 + if k >= gap { 250 } else { 0 };
                vec![("b".into(), t, ((k * 7) % 11) as f64 * 0.5 - 2.5)]
            })
            .collect();
        for sem in [
            Semantics::DelayedQuantitative,
            Semantics::DelayedQualitative,
        ] {
            let want = evaluator(&spec, zoh(sem), &steps, VerdictForm::Csv);
            assert!(want.lines().count() > 40, "{want}");
            let (got, plan, why) =
                planned(&spec, zoh(sem), &steps, VerdictForm::Csv, Tier::NativeWhole);
            assert!(!plan && why.is_some_and(|w| w.contains("not one period after")));
            assert_eq!(got, want, "gap at step {gap}, {sem:?}");
        }
    }
}

/// `vigil explain` shows a `U`'s pipeline on the plan (here, ψ's value of a step comes after
/// φ's, so the last term is φ's running minimum alone), and why a `U` declines.
#[test]
fn explain_shows_until_on_the_plan_or_why_not() {
    let dir = test_dir("stl_plan", "explain_until");
    let spec = write(&dir, "u.mstlo", "p: (x > 0) U[0.5,1] (y < 2)\n");
    let (status, out, err) = run_vigil(&["explain", &spec], None);
    assert_eq!((status, err.as_str()), (0, ""));
    let plan = out.split_once("plan tier (--tier").map(|(_, p)| p);
    assert_eq!(
        plan,
        Some(
            ", delayed semantics): over a trace whose every signal is sampled at every time of one grid of period p, where p divides 1 s; for p = 1 s (delayed-quantitative):
in s0: Float  // x
in s1: Float  // y
aux n0: Float
n0 = (s0 - 0.0)
aux n1: Float
n1 = (2.0 - s1)
aux n2: Float
n2 = min(n1, n0)
aux n3: Float
n3 = min(default(n0[1], 0.0), n0)
aux n4: Float
n4 = max(default(n2[1], 0.0), n3)
out p0: Float  // p
p0 = n4
"
        ),
        "{out}"
    );
    let spec = write(&dir, "d.mstlo", "q: (x > 0) U[0,0] F[0,1](y > 1)\n");
    let (status, out, _) = run_vigil(&["explain", &spec], None);
    assert_eq!(status, 0);
    assert!(
        out.ends_with("plan tier: declines (the operands of `(x > 0 U[0,0] F[0,1](y > 1))` have different horizons or give their verdicts at different samples of a step, where the evaluator's pairing of them changes after the first steps); the properties run on the STL evaluator\n"),
        "{out}"
    );
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
    let want = evaluator(&spec, zoh(sem), &steps, VerdictForm::Csv);
    assert!(want.contains("p,0,inf\n"), "{want}");
    // `r`'s window lacks x's newest value too: min over x at 0 only.
    assert!(
        want.contains("r,0,0.0\n") && want.contains("r,500,1.0\n"),
        "{want}"
    );
    assert_eq!(want.matches("q,0,inf").count(), 2, "{want}");
    for tier in TIERS {
        let (got, plan, why) = planned(&spec, zoh(sem), &steps, VerdictForm::Csv, tier);
        assert!(plan, "{why:?}");
        assert_eq!(got, want, "{tier}");
    }
}

/// Runs a conformance case as `vigil run --tier TIER` does: the checker's text output, and
/// whether the run ended on the plan.
fn run_case(dir: &Path, tier: Tier) -> (String, bool) {
    let text = std::fs::read_to_string(dir.join("spec.mstlo")).unwrap();
    let spec = StlSpec::parse("spec.mstlo", &text).unwrap();
    let name = std::fs::read_to_string(dir.join("semantics")).unwrap();
    let semantics = Semantics::from_name(name.trim()).unwrap();
    let sync = Synchronization::ZeroOrderHold;
    let mut run = StlRun::new(&spec, semantics, sync, &[], tier).unwrap();
    let schema = InputSchema {
        names: spec.signals().to_vec(),
        types: vec![Type::Any; spec.signals().len()],
    };
    let trace = dir.join("trace.input").display().to_string();
    let mut reader = vigil::trace::open_reader(&trace, TraceFormat::Tc, &schema).unwrap();
    let mut row = vec![None; schema.names.len()];
    let mut out = VerdictWriter::new(Vec::new(), &spec, semantics, VerdictForm::Text).unwrap();
    while reader.next_row(&mut row).unwrap() {
        let mut samples = vigil::stl::row_samples(&spec, &row).unwrap();
        row.iter_mut().for_each(|c| *c = None);
        out.write(&run.step(&mut samples)).unwrap();
    }
    let text = String::from_utf8(out.finish().unwrap()).unwrap();
    (text, run.on_plan())
}

/// Every case under `root` through the plan tier on the canonical and native-whole tiers:
/// `(cases run, runs on the plan)`; fails listing the cases whose output differs.
fn plan_cases(root: &Path) -> (usize, usize) {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("spec.mstlo").is_file())
        .collect();
    dirs.sort();
    let (mut planned, mut failed) = (0, Vec::new());
    for dir in &dirs {
        let want = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
        for tier in [Tier::Canonical, Tier::NativeWhole] {
            let (got, plan) = run_case(dir, tier);
            planned += usize::from(plan);
            if got != want {
                failed.push(format!("{} on {tier}", dir.display()));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    eprintln!(
        "{}: {} cases x 2 tiers, {planned} runs on the plan",
        root.display(),
        dirs.len()
    );
    (dirs.len(), planned)
}

/// The own STL conformance cases give their expected output through the plan tier.
#[test]
fn own_stl_cases_pass_through_the_plan_tier() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stl_cases");
    let (cases, _) = plan_cases(&root);
    assert!(cases >= 8);
}

/// The shared STL conformance cases give their expected output through the plan tier (ignored
/// like the other shared cases: a clone has no `../shared`; `.ci/run` runs them).
#[test]
#[ignore = "needs ../shared/conformance beside the checkout; .ci/run runs it (docs/testing.md)"]
fn shared_stl_cases_pass_through_the_plan_tier() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/stl");
    let (cases, _) = plan_cases(&root);
    assert!(cases >= 80);
}

/// `vigil run PROPS --tier T` gives the default run's output: on the plan over a regular CSV
/// trace (`--stats` says so), on the evaluator with a note of why over an irregular one.
#[test]
fn the_command_line_runs_the_plan_tier_when_a_tier_is_asked() {
    let dir = test_dir("stl_plan", "cli");
    let spec = write(
        &dir,
        "p.mstlo",
        "slow: G[0,1](speed < 2)\ngrip: (speed < 0.5) -> F[0,0.5](force > 5)\n",
    );
    let mut csv = String::from("ts,speed,force\n");
    for k in 0..40 {
        csv.push_str(&format!(
            "{},{},{}\n",
            k * 250,
            (k % 7) as f64 * 0.5,
            (k % 5) * 2
        ));
    }
    let regular = write(&dir, "t.csv", &csv);
    let args = |trace: &str, tier: Option<&str>, form: &str| {
        let mut a = vec![
            "run",
            &spec,
            "--input",
            trace,
            "--time",
            "ts",
            "--time-unit",
            "ms",
        ];
        a.extend(["--output", form]);
        a.extend(tier.map(|t| ["--tier", t]).into_iter().flatten());
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run_vigil(&a, None)
    };
    for form in ["text", "csv"] {
        let (status, want, err) = run(args(&regular, None, form));
        assert_eq!((status, err.as_str()), (0, ""));
        assert!(want.lines().count() > 30, "{want}");
        for tier in ["canonical", "quickened", "native-whole"] {
            let (status, got, err) = run(args(&regular, Some(tier), form));
            assert_eq!((status, err.as_str()), (0, ""), "{tier}");
            assert_eq!(got, want, "{tier}");
        }
    }
    let mut stats = args(&regular, Some("native-whole"), "csv");
    stats.push("--stats".into());
    let (_, _, err) = run(stats);
    assert!(
        err.starts_with("stl: delayed-quantitative semantics, zero-order-hold synchronization, on the plan, tier native-whole\n"),
        "{err}"
    );
    let irregular = write(&dir, "i.csv", csv.replace("\n750,", "\n800,"));
    let (_, want, _) = run(args(&irregular, None, "csv"));
    let (status, got, err) = run(args(&irregular, Some("native-whole"), "csv"));
    assert_eq!((status, got), (0, want));
    assert_eq!(
        err,
        "note: --tier native-whole: the properties ran on the STL evaluator: at step 3: the time 800 ms is not one period after the last (750 ms expected)\n"
    );
}

/// A variable is substituted as a constant, its value's bits kept (0.1 is not a short binary
/// fraction; a negative value is a negated literal).
#[test]
fn variables_run_on_the_plan_as_their_values() {
    let spec = StlSpec::parse("v.mstlo", "p: F[0,1](x > $lo) && G[0,0.5](x <= $hi)\n").unwrap();
    let vars = [("lo".to_string(), 0.1), ("hi".to_string(), -1e-7)];
    let sem = Semantics::DelayedQuantitative;
    let sync = Synchronization::default();
    let steps: Vec<Step> = (0..20)
        .map(|k| vec![("x".into(), k * 500, (k % 4) as f64 * 0.1 - 0.15)])
        .collect();
    let run_with = |tier: Option<Tier>| {
        let mut out = VerdictWriter::new(Vec::new(), &spec, sem, VerdictForm::Csv).unwrap();
        let mut plan = tier.map(|t| StlRun::new(&spec, sem, sync, &vars, t).unwrap());
        let mut eval = StlMonitor::new(&spec, sem, sync, &vars).unwrap();
        for step in &steps {
            let given = match &mut plan {
                Some(run) => run.step(&mut samples(&spec, step)),
                None => eval.step(&mut samples(&spec, step)),
            };
            out.write(&given).unwrap();
        }
        if let Some(run) = &plan {
            assert!(run.on_plan(), "{:?}", run.declined());
            assert!(run.plan_text().unwrap().contains("(-1e-7)"));
        }
        String::from_utf8(out.finish().unwrap()).unwrap()
    };
    let want = run_with(None);
    assert!(want.lines().count() > 15, "{want}");
    for tier in TIERS {
        assert_eq!(run_with(Some(tier)), want, "{tier}");
    }
}
