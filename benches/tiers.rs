//! Criterion benches of every tier beside the hand-written baselines (100k in-memory rows).
//!
//! Run with `cargo bench --bench tiers`; per-row cost is the reported time divided by
//! `common::ROWS`. The fusion example runs twice: with every input present (`lbl`
//! included) and with `lbl` absent, which the partition makes no difference to.
//! The chain runs dense (every input in every row) and sparse (`chain_sparse`: one
//! of `x`, `y`, `flag` per row, the others held), as telemetry often is.

mod common;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use vigil::{Monitor, OutputBatch, RowBatch, Spec, Tier, Value};

fn bench(c: &mut Criterion) {
    let (columns, mut scenarios) = common::scenarios();
    // The fusion example without its Str label: `echoed` is absent.
    let mut no_label = common::Scenario {
        name: "fusion_example_no_lbl",
        spec: common::FUSION,
        rows: (scenarios.iter())
            .find(|s| s.name == "fusion_example")
            .expect("the fusion example is a scenario")
            .rows
            .clone(),
        baseline: common::baseline_fusion,
    };
    for row in &mut no_label.rows {
        row[3] = None;
    }
    scenarios.push(no_label);
    let tiers: Vec<Tier> = Tier::ALL.into_iter().filter(|t| *t != Tier::Auto).collect();
    for s in &scenarios {
        let spec = Spec::parse(s.name, s.spec).expect("bench specs are valid");
        // A sparse scenario's typed rows set only each row's one input.
        let sparse = s.name.ends_with("_sparse");
        let mut group = c.benchmark_group(s.name);
        group.throughput(Throughput::Elements(common::ROWS as u64));
        group.sample_size(20);
        // Building a monitor (planning, lowering, JIT compilation) is set-up,
        // measured by the `compile_100_streams` group, not per row.
        for &tier in &tiers {
            group.bench_function(tier.name(), |b| {
                b.iter_batched(
                    || Monitor::builder(&spec).tier(tier).build(),
                    |mut m| {
                        for row in &s.rows {
                            black_box(m.step(row).expect("no runtime error"));
                        }
                        m
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        // The typed per-row entry: inputs set as scalars straight from the
        // columns (a Str input, the example's `lbl`, is left absent), the
        // first output read as an Int (`Outputs::int`), as a consumer of
        // the row would.
        for &tier in &tiers {
            group.bench_function(format!("{}-scalars", tier.name()), |b| {
                b.iter_batched(
                    || Monitor::builder(&spec).tier(tier).build(),
                    |mut m| {
                        let mut row = m.scalar_row();
                        let at = |name| row.input(name).ok();
                        let (x, y, flag) = (at("x"), at("y"), at("flag"));
                        for i in 0..common::ROWS {
                            if sparse {
                                row.clear();
                            }
                            let pick = columns.pick[i];
                            if let Some(x) = x.filter(|_| !sparse || pick == 0) {
                                row.set_int(x, columns.x[i]).expect("x is Int");
                            }
                            if let Some(y) = y.filter(|_| !sparse || pick == 1) {
                                row.set_int(y, columns.y[i]).expect("y is Int");
                            }
                            if let Some(flag) = flag.filter(|_| !sparse || pick == 2) {
                                row.set_bool(flag, columns.flag[i]).expect("flag is Bool");
                            }
                            let out = m.step_scalars(&row).expect("no runtime error");
                            black_box(out.int(0));
                        }
                        m
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        // The same typed rows through a `Stepper`, which checks the
        // monitor and lays out the kernel's frame once instead of on every
        // row.
        for &tier in &tiers {
            group.bench_function(format!("{}-stepper", tier.name()), |b| {
                b.iter_batched(
                    || Monitor::builder(&spec).tier(tier).build(),
                    |mut m| {
                        let mut st = m.stepper();
                        let at = |name| st.input(name).ok();
                        let (x, y, flag) = (at("x"), at("y"), at("flag"));
                        for i in 0..common::ROWS {
                            if sparse {
                                st.clear();
                            }
                            let pick = columns.pick[i];
                            if let Some(x) = x.filter(|_| !sparse || pick == 0) {
                                st.set_int(x, columns.x[i]).expect("x is Int");
                            }
                            if let Some(y) = y.filter(|_| !sparse || pick == 1) {
                                st.set_int(y, columns.y[i]).expect("y is Int");
                            }
                            if let Some(flag) = flag.filter(|_| !sparse || pick == 2) {
                                st.set_bool(flag, columns.flag[i]).expect("flag is Bool");
                            }
                            let out = st.step().expect("no runtime error");
                            black_box(out.int(0));
                        }
                        drop(st);
                        m
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        // (A spec with a tail, the example's Str stream, has no batch
        // kernel: its batches run row by row on the kernel and the tail.)
        if Monitor::builder(&spec)
            .tier(Tier::NativeWhole)
            .build()
            .tier()
            == Tier::NativeWhole
        {
            // Batches of 4,096 rows into one reused output batch, as the
            // command line runs them.
            let batches: Vec<RowBatch> = s
                .rows
                .chunks(4096)
                .map(|chunk| {
                    let mut rows = RowBatch::for_spec(&spec);
                    for row in chunk {
                        rows.push_row(row).expect("the rows fit the inputs");
                    }
                    rows
                })
                .collect();
            group.bench_function("native-whole-batch", |b| {
                b.iter_batched(
                    || {
                        // Compiling the batch kernel is set-up (the first
                        // batch would do it, about 1 ms: 10 ns a row here).
                        let mut m = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
                        m.prepare_batches();
                        (m, OutputBatch::new())
                    },
                    |(mut m, mut out)| {
                        for rows in &batches {
                            m.run_batch(rows, &mut out).expect("no runtime error");
                            black_box(out.len());
                        }
                        (m, out)
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        group.bench_function("baseline", |b| b.iter(|| black_box((s.baseline)(&columns))));
        group.finish();
    }
}

/// A generated spec of 100 streams: chained arithmetic, comparisons and a
/// few recursive accumulators (what a plan-sized JIT compile looks like).
fn hundred_streams() -> String {
    let mut src = String::from("in x: Int\nin y: Int\n");
    for i in 0..100 {
        let ty = if i % 10 == 9 { "Bool" } else { "Int" };
        src.push_str(&format!("out s{i}: {ty}\n"));
    }
    for i in 0..100 {
        let prev = if i == 0 {
            "x".to_string()
        } else if (i - 1) % 10 == 9 {
            "y".to_string()
        } else {
            format!("s{}", i - 1)
        };
        let def = match i % 10 {
            9 => format!("{prev} > 3"),
            0 => format!("default(s{i}[1], 0) + {prev} % 7"),
            k => format!("({prev} + y) * {k} - x"),
        };
        src.push_str(&format!("s{i} = {def}\n"));
    }
    src
}

fn compile(c: &mut Criterion) {
    let spec =
        Spec::parse("hundred.dsrv", &hundred_streams()).expect("the generated spec is valid");
    let mut group = c.benchmark_group("compile_100_streams");
    group.sample_size(20);
    for tier in [Tier::Quickened, Tier::NativeRegions, Tier::NativeWhole] {
        group.bench_function(tier.name(), |b| {
            b.iter(|| {
                let m = Monitor::builder(&spec).tier(tier).build();
                assert_eq!(m.tier(), tier);
                black_box(m)
            })
        });
    }
    group.finish();
}

/// `n` independent recursive accumulators, `s_i = default(s_i[1], 0) + x`: the
/// spec whose build time used to grow fourfold per doubling (issue 7).
fn accumulators(n: usize) -> String {
    let mut src = String::from("in x: Int\n");
    for i in 0..n {
        src.push_str(&format!("out s{i}: Int\ns{i} = default(s{i}[1], 0) + x\n"));
    }
    src
}

/// Parse, check, plan, fuse, lower and compile specs of 2,500 and 10,000
/// streams on every tier: the ratio between the two sizes shows whether a
/// build step is near-linear (about 4) or not. And 40,000 on the tiers that
/// build it in well under a second: canonical, quickened and `auto` (which
/// runs a whole-row program that long quickened, `exec::AUTO_NATIVE_MAX_INSTS`);
/// native-whole would take seconds a sample there (linear still: its
/// functions are bounded, `jit::MAX_FUNCTION_INSTS`).
fn build_scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("build_accumulators");
    group.sample_size(10);
    let every = [
        Tier::Canonical,
        Tier::Quickened,
        Tier::NativeRegions,
        Tier::NativeWhole,
    ];
    let sizes: [(usize, &[Tier]); 3] = [
        (2_500, &every),
        (10_000, &every),
        (40_000, &[Tier::Canonical, Tier::Quickened, Tier::Auto]),
    ];
    for (n, tiers) in sizes {
        let src = accumulators(n);
        for &tier in tiers {
            group.bench_function(format!("{}/{n}", tier.name()), |b| {
                b.iter(|| {
                    let spec = Spec::parse("acc.dsrv", &src).expect("the generated spec is valid");
                    let m = Monitor::builder(&spec).tier(tier).build();
                    assert!(tier == Tier::Auto || m.tier() == tier);
                    black_box(m)
                })
            });
        }
    }
    group.finish();
}

/// A `dynamic` whose string changes every row: each row parses, checks and
/// plans a new instance, so this is the instance's build cost on each tier.
/// `auto` builds an instance as the canonical tier does and tiers it up only
/// once it is hot (issue 36's target: at most 1.5x the canonical tier's cost);
/// a pinned native tier compiles every string.
fn dynamic_strings(c: &mut Criterion) {
    const ROWS: i64 = 2_000;
    let spec = Spec::parse(
        "dyn.dsrv",
        "in x: Int\nin s: Str\nout live\nlive = default(dynamic(s: Int, {x}), -1)\n",
    )
    .expect("the bench spec is valid");
    let rows: Vec<Vec<Option<Value>>> = (0..ROWS)
        .map(|i| {
            vec![
                Some(Value::Int(i)),
                Some(Value::Str(format!("x + {i}").into())),
            ]
        })
        .collect();
    let mut group = c.benchmark_group("dynamic_new_string_per_row");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(10);
    for tier in [Tier::Canonical, Tier::Auto, Tier::Quickened] {
        group.bench_function(tier.name(), |b| {
            b.iter_batched(
                || Monitor::builder(&spec).tier(tier).build(),
                |mut m| {
                    for row in &rows {
                        black_box(m.step(row).expect("no runtime error"));
                    }
                    m
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench, compile, build_scaling, dynamic_strings);
criterion_main!(benches);
