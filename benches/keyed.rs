//! Criterion benches of keyed monitors: 10,000 keys over 1,000,000 interleaved rows, beside one
//! monitor over the same rows and a hand-written keyed loop; and the memory a key costs.
//!
//! Run with `cargo bench --bench keyed`. Per-row cost is the reported time divided by `ROWS`.
//! The spec has ten streams with offsets up to 3; it is keyed by an Int (`dev`, every stream
//! scalar, so `auto` runs native-whole) and by a Str (`host`: a plain monitor runs native
//! regions, since a Str input keeps native-whole off, but a keyed one leaves its key out of the
//! kernel and runs native-whole). Before the benches run, the per-key memory (live heap bytes, counted
//! by the allocator below) is printed beside a single monitor's.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::collections::HashMap;
use std::hint::black_box;
use vigil::{KeyedMonitor, Monitor, Spec, Tier, Value};

const ROWS: usize = 1_000_000;
const KEYS: usize = 10_000;

/// Ten streams, offsets up to 3; a key input is declared before them.
const STREAMS: &str = include_str!("common/ten_streams.dsrv");

mod common;

use common::counting::{Counting, live};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The rows: a key drawn at random (a 64-bit LCG, as the other benches' data)
/// for each row, so keys interleave; `x` in -20..=20, `y` its half.
struct Data {
    keys: Vec<u32>,
    x: Vec<i64>,
}

fn data() -> Data {
    let mut next = common::lcg();
    let (mut keys, mut x) = (Vec::with_capacity(ROWS), Vec::with_capacity(ROWS));
    for _ in 0..ROWS {
        keys.push((next() % KEYS as u64) as u32);
        x.push((next() % 41) as i64 - 20);
    }
    Data { keys, x }
}

/// The rows with the key as an Int or as a Str (`host-N`).
fn rows(d: &Data, str_key: bool) -> Vec<[Option<Value>; 3]> {
    let names: Vec<Value> = (0..KEYS)
        .map(|k| Value::from(format!("host-{k}")))
        .collect();
    (0..ROWS)
        .map(|r| {
            let k = d.keys[r] as usize;
            let key = if str_key {
                names[k].clone()
            } else {
                Value::Int(k as i64)
            };
            [
                Some(key),
                Some(Value::Int(d.x[r])),
                Some(Value::Float(d.x[r] as f64 * 0.5)),
            ]
        })
        .collect()
}

/// The ten streams of one key, by hand: what the spec computes, with the
/// offsets as explicit history (`x[1..=3]` newest first, `s3[1..=2]`).
#[derive(Default)]
struct KeyState {
    steps: u64,
    s1: i64,
    s5: i64,
    s9: i64,
    x_hist: [i64; 3],
    y_prev: f64,
    s3_hist: [f64; 2],
}

impl KeyState {
    /// One row; returns a fold of the outputs so nothing is optimised away.
    fn step(&mut self, x: i64, y: f64) -> i64 {
        let n = self.steps;
        let s1 = if n >= 1 { self.s1 } else { 0 } + x;
        let s2 = x - if n >= 3 { self.x_hist[2] } else { 0 };
        let s3 = y * 2.0;
        let s4 = s3 > if n >= 2 { self.s3_hist[1] } else { 0.0 };
        let s5 = if n >= 1 { self.s5 } else { 0 } + s2;
        let s6 = if n >= 1 { self.y_prev } else { 0.0 } + y;
        let s7 = x > 10;
        let s8 = if s7 { x } else { 0 };
        let s9 = if n >= 1 { self.s9 } else { 0 } + 1;
        let s10 = s4 && s7;
        self.s1 = s1;
        self.s5 = s5;
        self.s9 = s9;
        self.x_hist = [x, self.x_hist[0], self.x_hist[1]];
        self.y_prev = y;
        self.s3_hist = [s3, self.s3_hist[0]];
        self.steps += 1;
        s1 ^ s2 ^ s5 ^ s8 ^ s9 ^ (s6 as i64) ^ i64::from(s10)
    }
}

fn baseline(d: &Data) -> i64 {
    let mut keys: HashMap<u32, KeyState> = HashMap::new();
    let mut acc = 0;
    for r in 0..ROWS {
        let x = d.x[r];
        acc ^= keys.entry(d.keys[r]).or_default().step(x, x as f64 * 0.5);
    }
    acc
}

/// Prints the live heap bytes a key costs (every key past its offsets),
/// beside a single monitor's whole state.
fn report_memory(spec: &Spec, key: &str, rows: &[[Option<Value>; 3]]) {
    let before = live();
    let mut m = KeyedMonitor::builder(spec, key).build().unwrap();
    for r in rows {
        m.step(r).unwrap();
    }
    let keyed = live() - before;
    let keys = m.key_count();
    drop(m);
    let before = live();
    let mut single = Monitor::builder(spec).build();
    for r in &rows[..1000] {
        single.step(r).unwrap();
    }
    let one = live() - before;
    eprintln!(
        "memory ({key} key): {} bytes per key over {keys} keys (engine included); \
         a single monitor, engine included: {one} bytes",
        keyed / keys as isize
    );
}

fn bench(c: &mut Criterion) {
    let d = data();
    for (key, ty, str_key) in [("dev", "Int", false), ("host", "Str", true)] {
        let spec = Spec::parse("keyed.dsrv", &format!("in {key}: {ty}\n{STREAMS}")).unwrap();
        let rows = rows(&d, str_key);
        report_memory(&spec, key, &rows);
        let mut group = c.benchmark_group(format!("keyed_{key}"));
        group.throughput(Throughput::Elements(ROWS as u64));
        group.sample_size(10);
        for tier in [Tier::Canonical, Tier::Auto] {
            group.bench_function(format!("single_monitor_{}", tier.name()), |b| {
                b.iter_batched(
                    || {
                        // The steady state: `auto`'s native code built before the rows, not
                        // on a background thread while they run.
                        let mut m = Monitor::builder(&spec).tier(tier).build();
                        m.tier_up_now();
                        m
                    },
                    |mut m| {
                        for r in &rows {
                            black_box(m.step(r).expect("no runtime error"));
                        }
                        m
                    },
                    BatchSize::PerIteration,
                )
            });
            group.bench_function(format!("keyed_10000_{}", tier.name()), |b| {
                b.iter_batched(
                    || {
                        let mut m = KeyedMonitor::builder(&spec, key)
                            .tier(tier)
                            .build()
                            .unwrap();
                        m.tier_up_now();
                        m
                    },
                    |mut m| {
                        for r in &rows {
                            black_box(m.step(r).expect("no runtime error"));
                        }
                        m
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        group.bench_function("baseline_hashmap", |b| b.iter(|| black_box(baseline(&d))));
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
