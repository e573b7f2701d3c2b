//! Criterion benches of scale-out: 1,000,000 rows over 10,000 keys through the timely fragment
//! (`vigil::scale::keyed_monitors`) on 1 and 2 workers, beside one `KeyedMonitor` over the same
//! rows on this thread.
//!
//! Run with `cargo bench --bench scale`. Per-row cost is the reported time divided by `ROWS`.
//! The spec is the keyed bench's ten streams keyed by a Str `host`. Every variant starts from the
//! same rows in memory: the single monitor steps them; the fragment's worker 0 stamps each into
//! an `Event` (its cells in wire form, as the CLI's reader does) and sends it, and the workers
//! evaluate the rows of their keys once each time completes. The difference between the single
//! monitor and one worker is what the dataflow costs per row (stamping, the exchange, the
//! per-time buffering); two workers show what a second core buys back.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use timely::dataflow::InputHandle;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::operator::Operator;
use vigil::scale::{Evaluated, Event, StampedRow, keyed_monitors};
use vigil::{KeyedMonitor, Spec, Value};

mod common;

const ROWS: usize = 1_000_000;
const KEYS: u64 = 10_000;
/// Rows per timely timestamp (the CLI sends batches of 1,024).
const PER_TIME: usize = 1024;

fn spec() -> Spec {
    let text = format!("in host: Str\n{}", include_str!("common/ten_streams.dsrv"));
    Spec::parse("ten.dsrv", &text).expect("the bench spec parses")
}

fn rows() -> Vec<Vec<Option<Value>>> {
    let mut next = common::lcg();
    let names: Vec<Value> = (0..KEYS)
        .map(|k| Value::from(format!("host-{k}")))
        .collect();
    (0..ROWS)
        .map(|_| {
            let key = names[(next() % KEYS) as usize].clone();
            let x = (next() % 41) as i64 - 20;
            vec![
                Some(key),
                Some(Value::Int(x)),
                Some(Value::Float(x as f64 / 2.0)),
            ]
        })
        .collect()
}

/// Runs the fragment over `rows` on `workers` threads; returns the rows
/// evaluated (checked by the caller, so nothing is optimised away).
fn fragment(spec: &Arc<Spec>, rows: &Arc<Vec<Vec<Option<Value>>>>, workers: usize) -> u64 {
    let evaluated = Arc::new(AtomicU64::new(0));
    let (spec, rows, count) = (Arc::clone(spec), Arc::clone(rows), Arc::clone(&evaluated));
    timely::execute(timely::Config::process(workers), move |worker| {
        let mut input =
            InputHandle::<u64, timely::container::CapacityContainerBuilder<Vec<Event>>>::new();
        let count = Arc::clone(&count);
        let spec = Arc::clone(&spec);
        worker.dataflow(|scope| {
            let events = timely::dataflow::operators::Input::input_from(&scope, &mut input);
            keyed_monitors(
                events,
                0,
                |_| KeyedMonitor::builder(&spec, "host").build().expect("keyed"),
                |_, _, _| {},
                |e, out: &mut Vec<u64>| {
                    if let Evaluated::Row { result, .. } = e {
                        out.push(result.expect("no runtime error").step());
                    }
                },
            )
            .sink(Pipeline, "Count", move |(input, _)| {
                input.for_each(|_, data| {
                    count.fetch_add(data.len() as u64, Ordering::Relaxed);
                })
            });
        });
        if worker.index() == 0 {
            for (i, r) in rows.iter().enumerate() {
                let t = (i / PER_TIME) as u64;
                if i % PER_TIME == 0 {
                    input.advance_to(t);
                    worker.step();
                }
                input.send(Event::Row(StampedRow::new(t, i as u64, None, r.clone())));
            }
        }
    })
    .expect("timely starts");
    evaluated.load(Ordering::Relaxed)
}

fn bench(c: &mut Criterion) {
    let spec = Arc::new(spec());
    let rows = Arc::new(rows());
    let mut g = c.benchmark_group("scale");
    g.sample_size(10);
    g.throughput(Throughput::Elements(ROWS as u64));
    g.bench_function("keyed_monitor_this_thread", |b| {
        b.iter(|| {
            let mut m = KeyedMonitor::builder(&spec, "host").build().expect("keyed");
            for r in rows.iter() {
                black_box(m.step(r).expect("no runtime error").step());
            }
            m.key_count()
        })
    });
    for workers in [1, 2] {
        g.bench_function(format!("timely_{workers}_worker"), |b| {
            b.iter(|| assert_eq!(fragment(&spec, &rows, workers), ROWS as u64))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
