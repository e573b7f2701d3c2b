//! Criterion benches of the canonical tier beside hand-written Rust baselines (100k in-memory rows).
//!
//! Run with `cargo bench --bench canonical`; per-row cost is the reported time divided
//! by `common::ROWS` (criterion also prints it as throughput in elements/s).

mod common;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use vigil::{Monitor, Spec, Tier, Value};

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

/// Issue 34, item 17: a stream accumulating a list with `List.append`, beside a
/// hand-written `Vec` that pushes the same values (the physical limit). A list
/// copied at every step made this quadratic; a persistent list keeps it linear.
fn list_append(c: &mut Criterion) {
    const ROWS: i64 = 20_000;
    let spec = Spec::parse(
        "list_append",
        "in x: Int\naux l: List<Int>\nl = List.append(default(l[1], List()), x)\n\
         out n: Int\nn = List.len(l)\n",
    )
    .expect("the bench spec is valid");
    let rows: Vec<[Option<Value>; 1]> = (0..ROWS).map(|i| [Some(Value::Int(i))]).collect();
    let mut group = c.benchmark_group("list_append");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(20);
    group.bench_function("canonical", |b| {
        b.iter_batched(
            || Monitor::builder(&spec).tier(Tier::Canonical).build(),
            |mut m| {
                for row in &rows {
                    black_box(m.step(row).expect("no runtime error"));
                }
                m
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("baseline", |b| {
        b.iter(|| {
            let mut list: Vec<Value> = Vec::new();
            for i in 0..ROWS {
                list.push(Value::Int(i));
                black_box(list.len());
            }
            list
        })
    });
    group.finish();
}

criterion_group!(benches, bench, list_append);
criterion_main!(benches);
