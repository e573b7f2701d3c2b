//! Criterion benches of every tier beside the hand-written baselines (100k in-memory rows).
//!
//! Run with `cargo bench --bench tiers`; per-row cost is the reported time divided by
//! `common::ROWS`. The fusion example runs twice: with every input present (`lbl`
//! included) and with `lbl` absent, which the partition makes no difference to.

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use vigil::{Monitor, Spec, Tier};

fn bench(c: &mut Criterion) {
    let (columns, mut scenarios) = common::scenarios();
    // The fusion example without its Str label: `echoed` is absent.
    let mut no_label = common::Scenario {
        name: "fusion_example_no_lbl",
        spec: common::FUSION,
        rows: scenarios[3].rows.clone(),
        baseline: common::baseline_fusion,
    };
    for row in &mut no_label.rows {
        row[3] = None;
    }
    scenarios.push(no_label);
    let tiers: Vec<Tier> = Tier::ALL.into_iter().filter(|t| *t != Tier::Auto).collect();
    for s in &scenarios {
        let spec = Spec::parse(s.name, s.spec).expect("bench specs are valid");
        let mut group = c.benchmark_group(s.name);
        group.throughput(Throughput::Elements(common::ROWS as u64));
        group.sample_size(20);
        for &tier in &tiers {
            group.bench_function(tier.name(), |b| {
                b.iter(|| {
                    let mut m = Monitor::builder(&spec).tier(tier).build();
                    for row in &s.rows {
                        black_box(m.step(row).expect("no runtime error"));
                    }
                })
            });
        }
        group.bench_function("baseline", |b| b.iter(|| black_box((s.baseline)(&columns))));
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
