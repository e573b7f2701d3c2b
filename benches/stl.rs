//! Criterion bench of vigil's STL monitor beside the `mstlo` crate (0.1.1, the Trustworthiness
//! Checker's engine, incremental algorithm), on the same signal in the same run (issue 39).
//!
//! Run with `cargo bench --bench stl`; each group times both on one trace of `SAMPLES` samples
//! of one signal every 10 ms, so the per-sample ratio is the ratio of the two times.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use vigil::stl::{Semantics, StlMonitor, StlSample, StlSpec, Synchronization};

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
                    |mut m| {
                        let mut n = 0;
                        for &(time, value) in &samples {
                            let mut step = [StlSample {
                                signal: x,
                                time,
                                value,
                            }];
                            n += m.step(&mut step).len();
                        }
                        black_box(n)
                    },
                    BatchSize::PerIteration,
                )
            });
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

criterion_group!(benches, bench);
criterion_main!(benches);
