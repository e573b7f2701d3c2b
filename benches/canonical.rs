//! Criterion benches of the canonical tier beside hand-written Rust baselines (100k in-memory rows).
//!
//! Run with `cargo bench --bench canonical`; per-row cost is the reported time divided
//! by `common::ROWS` (criterion also prints it as throughput in elements/s).

mod common;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use vigil::{Monitor, Spec, Tier};

fn bench(c: &mut Criterion) {
    let (columns, scenarios) = common::scenarios();
    for s in &scenarios {
        let spec = Spec::parse(s.name, s.spec).expect("bench specs are valid");
        let mut group = c.benchmark_group(s.name);
        group.throughput(Throughput::Elements(common::ROWS as u64));
        group.sample_size(20);
        group.bench_function("canonical", |b| {
            b.iter_batched(
                || Monitor::builder(&spec).tier(Tier::Canonical).build(),
                |mut m| {
                    for row in &s.rows {
                        black_box(m.step(row).expect("no runtime error"));
                    }
                    m
                },
                BatchSize::PerIteration,
            )
        });
        group.bench_function("baseline", |b| b.iter(|| black_box((s.baseline)(&columns))));
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
