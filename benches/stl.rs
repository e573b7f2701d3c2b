//! Criterion bench of vigil's STL monitor beside the `mstlo` crate (0.1.1, the Trustworthiness
//! Checker's engine, incremental algorithm), on the same signal in the same run (issue 39).
//!
//! Run with `cargo bench --bench stl`; each group times both on one trace of `SAMPLES` samples
//! of one signal every 10 ms, so the per-sample ratio is the ratio of the two times.
//!
//! The `vigil_plan_*` functions of the delayed-quantitative groups time the same
//! property file on the plan tier (`StlRun`: the properties compiled onto a DSRV specification,
//! run by a `Monitor` on native-whole, auto — the register interpreter while native code
//! compiles on a background thread, as `vigil run` does by default — or canonical), which
//! gives the evaluator's verdicts,
//! one buffer of verdicts kept from step to step (`StlRun::step_into`). They time the whole
//! trace, the plan's compilation at its second sample included; `vigil_plan_native-whole_started`
//! times the same samples on a run already on the plan (built in the set-up, as the
//! `stl_dsrv_*` groups build their monitors), the cost per sample the target is
//! about, and `vigil_plan_start` the start alone (the run built and its first two samples).
//!
//! The `stl_dsrv_*` groups time the same formulas inside a DSRV specification
//! (`stl_rob(…)`, past-time, compiled to plan nodes, interval windows and a since for `S`,
//! beside mstlo's `U`) on the native-whole
//! tier (its intervals fused into the whole-row kernel) and on the canonical tier, one
//! `Monitor::step_at` per sample, and on native-whole through a `Stepper` (`step_at`, the
//! sample set in place), beside mstlo's delayed-quantitative monitor: both give one
//! robustness per sample.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use vigil::stl::{Semantics, SignalId, StlMonitor, StlRun, StlSample, StlSpec, Synchronization};
use vigil::{Monitor, Spec, Tier, Value};

const SAMPLES: u64 = 20_000;

/// The signal: a slow sine with a faster ripple, one sample every 10 ms.
fn signal() -> Vec<(Duration, f64)> {
    (0..SAMPLES)
        .map(|i| {
            let t = i as f64 * 0.01;
            (
                Duration::from_millis(i * 10),
                (t * 0.7).sin() + 0.3 * (t * 5.3).sin(),
            )
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let samples = signal();
    // The trace two periods on, for a run started on the trace's first two samples.
    let later: Vec<(Duration, f64)> = (samples.iter())
        .map(|&(time, value)| (time + Duration::from_millis(20), value))
        .collect();
    let formulas = [
        ("globally", "G[0,1](x > -1)"),
        ("eventually", "F[0,5](x > 0.9)"),
        ("until", "(x > -1) U[0,2] (x > 0.5)"),
        ("nested", "G[0,1](F[0,2](x > 0))"),
    ];
    for (name, formula) in formulas {
        let spec = StlSpec::parse("bench.mstlo", &format!("p: {formula}\n")).expect("valid");
        let x = spec.signal("x").expect("x is a signal");
        for semantics in [
            Semantics::DelayedQuantitative,
            Semantics::RobustnessInterval,
        ] {
            let mut group = c.benchmark_group(format!("stl_{name}_{}", semantics.name()));
            group.throughput(Throughput::Elements(SAMPLES));
            group.sample_size(10);
            group.bench_function("vigil", |b| {
                b.iter_batched(
                    || {
                        StlMonitor::new(&spec, semantics, Synchronization::ZeroOrderHold, &[])
                            .expect("no variables")
                    },
                    |mut m| black_box(verdicts(&samples, x, |step| m.step(step).len())),
                    BatchSize::PerIteration,
                )
            });
            // The property file on the plan tier (`StlRun`), where it runs there: the delayed
            // semantics over this regular signal.
            let on_plan = semantics == Semantics::DelayedQuantitative;
            for tier in [Tier::NativeWhole, Tier::Auto, Tier::Canonical]
                .into_iter()
                .filter(|_| on_plan)
            {
                group.bench_function(format!("vigil_plan_{tier}"), |b| {
                    b.iter_batched(
                        || {
                            let sync = Synchronization::ZeroOrderHold;
                            StlRun::new(&spec, semantics, sync, &[], tier).expect("no variables")
                        },
                        |mut m| {
                            // One buffer for every step's verdicts (`StlRun::step_into`).
                            let mut out = Vec::new();
                            let n = verdicts(&samples, x, |step| {
                                m.step_into(step, &mut out);
                                out.len()
                            });
                            // A run that left the plan would time the evaluator.
                            assert!(m.on_plan(), "{:?}", m.declined());
                            black_box(n)
                        },
                        BatchSize::PerIteration,
                    )
                });
            }
            // The same per sample once the plan is running: the run built and given two
            // samples in the set-up (its second compiles the plan, a cost paid once per run,
            // timed alone by `vigil_plan_start`), then the trace's samples timed, as the
            // `stl_dsrv_*` groups time a monitor built in their set-up. The timed steps are the
            // trace's samples two periods on: the same values, one step each.
            if on_plan {
                let started = |samples: &[(Duration, f64)]| {
                    let sync = Synchronization::ZeroOrderHold;
                    let mut run = StlRun::new(&spec, semantics, sync, &[], Tier::NativeWhole)
                        .expect("no variables");
                    let mut out = Vec::new();
                    for &(time, value) in &samples[..2] {
                        run.step_into(
                            &mut [StlSample {
                                signal: x,
                                time,
                                value,
                            }],
                            &mut out,
                        );
                    }
                    assert!(run.on_plan(), "{:?}", run.declined());
                    run
                };
                group.bench_function("vigil_plan_native-whole_started", |b| {
                    b.iter_batched(
                        || started(&samples),
                        |mut m| {
                            let mut out = Vec::new();
                            let n = verdicts(&later, x, |step| {
                                m.step_into(step, &mut out);
                                out.len()
                            });
                            assert!(m.on_plan(), "{:?}", m.declined());
                            black_box(n)
                        },
                        BatchSize::PerIteration,
                    )
                });
                group.bench_function("vigil_plan_start", |b| {
                    b.iter(|| black_box(started(&samples)))
                });
            }
            let parsed = mstlo::parse_stl(formula).expect("mstlo parses it");
            group.bench_function("mstlo", |b| {
                b.iter_batched(
                    || parsed.clone(),
                    |f| match semantics {
                        Semantics::RobustnessInterval => {
                            black_box(mstlo_run(mstlo::Rosi, f, &samples))
                        }
                        _ => black_box(mstlo_run(mstlo::DelayedQuantitative, f, &samples)),
                    },
                    BatchSize::PerIteration,
                )
            });
            group.finish();
        }
    }
}

/// How many verdicts `step` gives over the samples of `x`, one step per sample.
fn verdicts(
    samples: &[(Duration, f64)],
    x: SignalId,
    mut step: impl FnMut(&mut [StlSample]) -> usize,
) -> usize {
    samples
        .iter()
        .map(|&(time, value)| {
            step(&mut [StlSample {
                signal: x,
                time,
                value,
            }])
        })
        .sum()
}

/// mstlo's monitor of `formula` under `semantics` over the samples of `x`: how many verdicts.
fn mstlo_run<S>(
    semantics: S,
    formula: mstlo::FormulaDefinition,
    samples: &[(Duration, f64)],
) -> usize
where
    S: mstlo::SemanticType,
    S::Output: Copy + std::fmt::Debug,
{
    let mut m = mstlo::StlMonitor::builder()
        .formula(formula)
        .semantics(semantics)
        .build()
        .expect("builds");
    samples
        .iter()
        .map(|&(time, value)| {
            m.update(&mstlo::Step::new("x", value, time))
                .into_verdicts()
                .len()
        })
        .sum()
}

/// The same formulas as `stl_rob(…)` in a specification, beside mstlo.
fn bench_dsrv(c: &mut Criterion) {
    let samples = signal();
    let formulas = [
        ("globally", "G[0,1](x > -1)", "G[0, 1s](x > -1)"),
        ("eventually", "F[0,5](x > 0.9)", "F[0, 5s](x > 0.9)"),
        (
            "nested",
            "G[0,1](F[0,2](x > 0))",
            "G[0, 1s](F[0, 2s](x > 0))",
        ),
        // Past-time since beside mstlo's future-time until of the same
        // shape (each keeps the samples of its 2 s interval).
        (
            "since",
            "(x > -1) U[0,2] (x > 0.5)",
            "x > -1 S[0, 2s] x > 0.5",
        ),
    ];
    for (name, mstlo_formula, formula) in formulas {
        // 5 s at 100 Hz: 501 samples in the longest interval.
        let source = format!("in x: Float\nout r: Float\nr = stl_rob({formula}, 1024)\n");
        let spec = Spec::parse("bench.dsrv", &source).expect("valid");
        let mut group = c.benchmark_group(format!("stl_dsrv_{name}"));
        group.throughput(Throughput::Elements(SAMPLES));
        group.sample_size(10);
        for tier in [Tier::NativeWhole, Tier::Canonical] {
            group.bench_function(format!("vigil_{tier}"), |b| {
                b.iter_batched(
                    || Monitor::builder(&spec).tier(tier).build(),
                    |mut m| {
                        let mut total = 0.0;
                        for &(time, value) in &samples {
                            let t = vigil::time::Time(time.as_nanos() as i64);
                            let out = m.step_at(t, [Some(Value::Float(value))]).expect("runs");
                            if let vigil::Sample::Value(Value::Float(r)) = out.get(0) {
                                total += r;
                            }
                        }
                        black_box(total)
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        // The same run through a stepper: the sample set in place, each step
        // at its time (`Stepper::step_at`), the whole-row kernel's fast path.
        group.bench_function("vigil_native-whole_stepper", |b| {
            b.iter_batched(
                || Monitor::builder(&spec).tier(Tier::NativeWhole).build(),
                |mut m| {
                    let mut stepper = m.stepper();
                    let mut total = 0.0;
                    for &(time, value) in &samples {
                        let t = vigil::time::Time(time.as_nanos() as i64);
                        stepper.set_float(0, value).expect("a Float input");
                        let out = stepper.step_at(t).expect("runs");
                        if let Some(r) = out.float(0) {
                            total += r;
                        }
                    }
                    black_box(total)
                },
                BatchSize::PerIteration,
            )
        });
        let parsed = mstlo::parse_stl(mstlo_formula).expect("mstlo parses it");
        group.bench_function("mstlo", |b| {
            b.iter_batched(
                || parsed.clone(),
                |f| black_box(mstlo_run(mstlo::DelayedQuantitative, f, &samples)),
                BatchSize::PerIteration,
            )
        });
        group.finish();
    }
}

criterion_group!(benches, bench, bench_dsrv);
criterion_main!(benches);
