//! Quickened interpreter against hand-written Rust for the same per-row computation.
//!
//! Each benchmark times one run (one row) on a frame that is reused across iterations,
//! so the numbers are the per-row cost of dispatch plus the work itself.

use criterion::{Criterion, criterion_group, criterion_main};
use scalar_ir::frame::tag;
use scalar_ir::*;
use std::hint::black_box;

const ADD: &str = "program inputs=2 env=1 state=0 sites=1
block0:
    guard_input 0, i64, 0
    v0 = load_input.i64 0
    guard_input 1, i64, 1
    v1 = load_input.i64 1
    v2 = iadd_ck v0, v1, site0
    store_env.i64 0, v2
    return
";

const COUNTER: &str = "program inputs=0 env=1 state=1 sites=1
block0:
    v0 = load_state.i64 0
    v1 = iconst 1
    v2 = iadd_ck v0, v1, site0
    store_state.i64 0, v2
    store_env.i64 0, v2
    return
";

/// The same as `ADD`, written by hand over the same buffers.
fn add_by_hand(f: &mut FrameBuffers) -> Exit {
    if f.input_tags[0] != tag::I64 {
        return Exit::Decline(0);
    }
    if f.input_tags[1] != tag::I64 {
        return Exit::Decline(1);
    }
    match (f.inputs[0] as i64).checked_add(f.inputs[1] as i64) {
        Some(z) => {
            f.env[0] = z as u64;
            f.env_tags[0] = tag::I64;
            Exit::Return
        }
        None => Exit::Trap(TrapKind::Overflow, 0),
    }
}

/// The same as `COUNTER`, written by hand.
fn counter_by_hand(f: &mut FrameBuffers) -> Exit {
    match (f.state[0] as i64).checked_add(1) {
        Some(z) => {
            f.state[0] = z as u64;
            f.env[0] = z as u64;
            f.env_tags[0] = tag::I64;
            Exit::Return
        }
        None => Exit::Trap(TrapKind::Overflow, 0),
    }
}

fn benches(c: &mut Criterion) {
    let add = parse(ADD).expect("bench program parses");
    let mut code = QuickCode::compile(&add).expect("bench program verifies");
    let mut f = FrameBuffers::new(&add.decl);
    f.set_input(0, Slot::I64(3));
    f.set_input(1, Slot::I64(4));
    let mut g = c.benchmark_group("z = x + y");
    g.bench_function("quickened", |b| {
        b.iter(|| black_box(code.run(black_box(&mut f))))
    });
    g.bench_function("hand-written", |b| {
        b.iter(|| black_box(add_by_hand(black_box(&mut f))))
    });
    g.finish();

    let counter = parse(COUNTER).expect("bench program parses");
    let mut code = QuickCode::compile(&counter).expect("bench program verifies");
    let mut f = FrameBuffers::new(&counter.decl);
    let mut g = c.benchmark_group("counter");
    g.bench_function("quickened", |b| {
        b.iter(|| {
            f.state[0] = 0;
            black_box(code.run(black_box(&mut f)))
        })
    });
    g.bench_function("hand-written", |b| {
        b.iter(|| {
            f.state[0] = 0;
            black_box(counter_by_hand(black_box(&mut f)))
        })
    });
    g.finish();
}

criterion_group!(quick, benches);
criterion_main!(quick);
