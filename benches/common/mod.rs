//! Shared benchmark scenarios: specs, deterministic rows, and hand-written Rust baselines.
//!
//! The rows come from the same 64-bit LCG as `../shared/perf/gen_traces.py`, so the
//! in-memory benches see the data the end-to-end peers' figures were measured on.

#![allow(dead_code)]

pub mod counting;

use std::hint::black_box;
use std::sync::Arc;
use vigil::Value;

pub const ROWS: usize = 100_000;

pub const ADD: &str = "in x: Int\nin y: Int\nout z: Int\nz = x + y\n";
pub const COUNTER: &str = "in x: Int\nout z: Int\nz = default(z[1], 0) + x\n";
pub const CHAIN: &str = include_str!("../../examples/chain.dsrv");
/// `COUNTER` with its input and stream declared without types: the fused
/// tiers speculate `x` is an Int (from its first value).
pub const COUNTER_UNTYPED: &str = "in x\nout z\nz = default(z[1], 0) + x\n";
pub const FUSION: &str = include_str!("../../examples/fusion.dsrv");
/// Windows (issue 13): a 100-value average and maximum at every row.
pub const WINDOW_AVG: &str = "in x: Int\nout a: Float\na = window(x, 100, avg)\n";
pub const WINDOW_MAX: &str = "in x: Int\nout m: Int\nm = window(x, 100, max)\n";

/// One scenario: a spec, its input columns (in declaration order), and a
/// hand-written baseline computing the same outputs.
pub struct Scenario {
    pub name: &'static str,
    pub spec: &'static str,
    pub rows: Vec<Vec<Option<Value>>>,
    pub baseline: fn(&Columns) -> i64,
}

/// The generated inputs as plain columns, for the baselines.
pub struct Columns {
    pub x: Vec<i64>,
    pub y: Vec<i64>,
    pub flag: Vec<bool>,
    pub lbl: Vec<Arc<str>>,
    /// For the sparse scenarios: the one input each row sets (0 = x,
    /// 1 = y, 2 = flag), as `scripts/gen_traces.py` picks them.
    pub pick: Vec<u8>,
}

/// The 64-bit LCG of `../shared/perf/gen_traces.py` (seed 12345): each call
/// gives the next 31-bit draw.
pub fn lcg() -> impl FnMut() -> u64 {
    lcg_from(12345)
}

/// The LCG from `state`.
pub fn lcg_from(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    }
}

pub fn columns(n: usize) -> Columns {
    let mut next = lcg();
    let (mut x, mut y, mut flag) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        x.push((next() % 41) as i64 - 20);
        y.push((next() % 41) as i64 - 20);
        flag.push(next().is_multiple_of(2));
    }
    let lbl = (0..n)
        .map(|i| Arc::from(if i % 2 == 0 { "a" } else { "b" }))
        .collect();
    let mut draw = lcg_from(67890);
    let pick = (0..n).map(|_| (draw() % 3) as u8).collect();
    Columns {
        x,
        y,
        flag,
        lbl,
        pick,
    }
}

pub fn scenarios() -> (Columns, Vec<Scenario>) {
    let c = columns(ROWS);
    let int = |v: i64| Some(Value::Int(v));
    let rows_of = |f: &dyn Fn(usize) -> Vec<Option<Value>>| (0..ROWS).map(f).collect::<Vec<_>>();
    let scenarios = vec![
        Scenario {
            name: "add",
            spec: ADD,
            rows: rows_of(&|i| vec![int(c.x[i]), int(c.y[i])]),
            baseline: baseline_add,
        },
        Scenario {
            name: "counter",
            spec: COUNTER,
            rows: rows_of(&|i| vec![int(c.x[i])]),
            baseline: baseline_counter,
        },
        Scenario {
            name: "counter_untyped",
            spec: COUNTER_UNTYPED,
            rows: rows_of(&|i| vec![int(c.x[i])]),
            baseline: baseline_counter,
        },
        Scenario {
            name: "chain",
            spec: CHAIN,
            rows: rows_of(&|i| vec![int(c.x[i]), int(c.y[i]), Some(Value::Bool(c.flag[i]))]),
            baseline: baseline_chain,
        },
        // Sparse telemetry: each row sets one of the chain's inputs.
        Scenario {
            name: "chain_sparse",
            spec: CHAIN,
            rows: rows_of(&|i| {
                let mut row = vec![None, None, None];
                row[c.pick[i] as usize] = match c.pick[i] {
                    0 => int(c.x[i]),
                    1 => int(c.y[i]),
                    _ => Some(Value::Bool(c.flag[i])),
                };
                row
            }),
            baseline: baseline_chain_sparse,
        },
        Scenario {
            name: "fusion_example",
            spec: FUSION,
            rows: rows_of(&|i| {
                vec![
                    int(c.x[i]),
                    int(c.y[i]),
                    Some(Value::Bool(c.flag[i])),
                    Some(Value::Str(c.lbl[i].clone())),
                ]
            }),
            baseline: baseline_fusion,
        },
        Scenario {
            name: "window_avg",
            spec: WINDOW_AVG,
            rows: rows_of(&|i| vec![int(c.x[i])]),
            baseline: baseline_window_avg,
        },
        Scenario {
            name: "window_max",
            spec: WINDOW_MAX,
            rows: rows_of(&|i| vec![int(c.x[i])]),
            baseline: baseline_window_max,
        },
    ];
    (c, scenarios)
}

/// Overflow is checked as vigil checks it, so the baselines do the same work.
fn ck(v: Option<i64>) -> i64 {
    v.expect("the benchmark data never overflows")
}

pub fn baseline_add(c: &Columns) -> i64 {
    let mut out = [0i64; 1];
    for i in 0..c.x.len() {
        out[0] = ck(c.x[i].checked_add(c.y[i]));
        black_box(&out);
    }
    out[0]
}

pub fn baseline_counter(c: &Columns) -> i64 {
    let mut z = 0i64;
    for i in 0..c.x.len() {
        z = ck(z.checked_add(c.x[i]));
        black_box(&z);
    }
    z
}

/// The chain scenario: the fusion example without its Str stream.
pub fn baseline_chain(c: &Columns) -> i64 {
    let mut acc = (0i64, 0i64);
    let mut out = [0i64; 9];
    for i in 0..c.x.len() {
        out = chain_row(c.x[i], c.y[i], c.flag[i], &mut acc);
        black_box(&out);
    }
    out[6]
}

/// One row of the chain: its nine outputs, from the inputs and the two
/// accumulators (`blended`, `total`), which it advances.
#[inline(always)]
fn chain_row(x: i64, y: i64, flag: bool, (blended, total): &mut (i64, i64)) -> [i64; 9] {
    let scaled = ck(x.checked_mul(2));
    let offset = ck(y.checked_add(5));
    let merged = ck(scaled.checked_add(offset));
    *blended = ck(blended.checked_add(if flag { merged } else { scaled }));
    let delta = ck(blended.checked_sub(merged));
    let ratio = ck(delta.checked_mul(3));
    *total = ck(total.checked_add(ratio));
    let level = ck(total.checked_add(ratio));
    let alert = level > 20;
    [
        scaled,
        offset,
        merged,
        *blended,
        delta,
        ratio,
        *total,
        level,
        alert as i64,
    ]
}

/// The chain over sparse rows: each row sets one input, the others are
/// held (their last values; zero before the first, where the monitor's
/// outputs are NoVal for a row or two).
pub fn baseline_chain_sparse(c: &Columns) -> i64 {
    let (mut x, mut y, mut flag) = (0i64, 0i64, false);
    let mut acc = (0i64, 0i64);
    let mut out = [0i64; 9];
    for i in 0..c.x.len() {
        match c.pick[i] {
            0 => x = c.x[i],
            1 => y = c.y[i],
            _ => flag = c.flag[i],
        }
        out = chain_row(x, y, flag, &mut acc);
        black_box(&out);
    }
    out[6]
}

/// The fusion example (docs/engine.md, "The fusion example") with every input present (the Str label echoed).
pub fn baseline_fusion(c: &Columns) -> i64 {
    let (mut blended, mut total) = (0i64, 0i64);
    for i in 0..c.x.len() {
        let scaled = ck(c.x[i].checked_mul(2));
        let offset = ck(c.y[i].checked_add(5));
        let merged = ck(scaled.checked_add(offset));
        blended = ck(blended.checked_add(if c.flag[i] { merged } else { scaled }));
        let delta = ck(blended.checked_sub(merged));
        let ratio = ck(delta.checked_mul(3));
        total = ck(total.checked_add(ratio));
        let echoed = c.lbl[i].clone();
        let level = ck(total.checked_add(ratio));
        let alert = level > 20;
        black_box((
            &scaled, &offset, &merged, &blended, &delta, &ratio, &total, &echoed, &level, &alert,
        ));
    }
    total
}

/// `window(x, 100, avg)` by hand: a ring of the last 100 values and a
/// running total (128-bit, as vigil keeps it), the average of those present.
pub fn baseline_window_avg(c: &Columns) -> i64 {
    const N: usize = 100;
    let mut ring = [0i64; N];
    let (mut sum, mut pushes) = (0i128, 0usize);
    let mut avg = 0.0f64;
    for &x in &c.x {
        let at = pushes % N;
        if pushes >= N {
            sum -= i128::from(ring[at]);
        }
        ring[at] = x;
        sum += i128::from(x);
        pushes += 1;
        avg = sum as f64 / pushes.min(N) as f64;
        black_box(&avg);
    }
    avg.to_bits() as i64
}

/// `window(x, 100, max)` by hand: a ring of the last 100 values and a
/// monotonic deque of positions (amortised O(1) per row).
pub fn baseline_window_max(c: &Columns) -> i64 {
    const N: usize = 100;
    let mut ring = [0i64; N];
    let mut deque: std::collections::VecDeque<usize> = std::collections::VecDeque::with_capacity(N);
    let mut max = 0i64;
    for (pos, &x) in c.x.iter().enumerate() {
        while deque.front().is_some_and(|&p| p + N <= pos) {
            deque.pop_front();
        }
        while deque.back().is_some_and(|&p| ring[p % N] <= x) {
            deque.pop_back();
        }
        deque.push_back(pos);
        ring[pos % N] = x;
        max = ring[deque[0] % N];
        black_box(&max);
    }
    max
}
