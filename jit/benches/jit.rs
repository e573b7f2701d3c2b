//! The JIT against the quickened interpreter and hand-written Rust, per call and per
//! batch, on `z = x + y` and a counter; and the compile time of a module equivalent to
//! a 100-stream specification (target: under 20 ms for the module).
//!
//! Per-call benchmarks time one row on a frame reused across iterations; batch
//! benchmarks time `ROWS` rows and report throughput in rows.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use scalar_ir::frame::tag;
use scalar_ir::*;
use std::hint::black_box;
use std::time::Duration;

#[path = "../tests/common/hundred.rs"]
mod hundred;
use hundred::hundred_streams;

const ROWS: usize = 1024;

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

/// `ADD`, written by hand over the same buffers.
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

/// `COUNTER`, written by hand.
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

/// A batch of `ADD` by hand: the same guards, checked add, env store and output copy.
fn add_batch_by_hand(f: &mut FrameBuffers, b: &mut BatchBuffers) -> Exit {
    for r in 0..b.rows {
        let (lanes, tags) = (&b.in_lanes[r * 2..r * 2 + 2], &b.in_tags[r * 2..r * 2 + 2]);
        if tags[0] != tag::I64 {
            b.done = r;
            return Exit::Decline(0);
        }
        if tags[1] != tag::I64 {
            b.done = r;
            return Exit::Decline(1);
        }
        let Some(z) = (lanes[0] as i64).checked_add(lanes[1] as i64) else {
            b.done = r;
            return Exit::Trap(TrapKind::Overflow, 0);
        };
        f.env[0] = z as u64;
        f.env_tags[0] = tag::I64;
        b.out_lanes[r] = z as u64;
        b.out_tags[r] = tag::I64;
        f.step += 1;
    }
    b.done = b.rows;
    Exit::Return
}

/// A batch of `COUNTER` by hand.
fn counter_batch_by_hand(f: &mut FrameBuffers, b: &mut BatchBuffers) -> Exit {
    for r in 0..b.rows {
        let Some(z) = (f.state[0] as i64).checked_add(1) else {
            b.done = r;
            return Exit::Trap(TrapKind::Overflow, 0);
        };
        f.state[0] = z as u64;
        f.env[0] = z as u64;
        f.env_tags[0] = tag::I64;
        b.out_lanes[r] = z as u64;
        b.out_tags[r] = tag::I64;
        f.step += 1;
    }
    b.done = b.rows;
    Exit::Return
}

fn per_call(c: &mut Criterion) {
    let add = parse(ADD).expect("bench program parses");
    let mut quick = QuickCode::compile(&add).expect("verifies");
    let native = jit::compile(&add).expect("compiles");
    let f_native = native.main();
    let mut f = FrameBuffers::new(&add.decl);
    f.set_input(0, Slot::I64(3));
    f.set_input(1, Slot::I64(4));
    let mut g = c.benchmark_group("per call: z = x + y");
    g.bench_function("quickened", |b| {
        b.iter(|| black_box(quick.run(black_box(&mut f))))
    });
    g.bench_function("jit (safe run)", |b| {
        b.iter(|| black_box(f_native.run(black_box(&mut f))))
    });
    let mut frame = f.frame();
    let row = f_native.row_fn();
    g.bench_function("jit (raw frame)", |b| {
        // SAFETY: `frame` points into `f`, sized for the program, alive throughout.
        b.iter(|| black_box(unsafe { row(black_box(&mut frame)) }))
    });
    g.bench_function("hand-written", |b| {
        b.iter(|| black_box(add_by_hand(black_box(&mut f))))
    });
    g.finish();

    let counter = parse(COUNTER).expect("bench program parses");
    let mut quick = QuickCode::compile(&counter).expect("verifies");
    let native = jit::compile(&counter).expect("compiles");
    let f_native = native.main();
    let mut f = FrameBuffers::new(&counter.decl);
    let mut g = c.benchmark_group("per call: counter");
    g.bench_function("quickened", |b| {
        b.iter(|| {
            f.state[0] = 0;
            black_box(quick.run(black_box(&mut f)))
        })
    });
    g.bench_function("jit (safe run)", |b| {
        b.iter(|| {
            f.state[0] = 0;
            black_box(f_native.run(black_box(&mut f)))
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

fn batches(c: &mut Criterion) {
    let add = parse(ADD).expect("bench program parses");
    let mut quick = QuickCode::compile(&add).expect("verifies");
    let native = jit::compile(&add).expect("compiles");
    let f_native = native.main();
    let mut f = FrameBuffers::new(&add.decl);
    let mut batch = BatchBuffers::new(&add.decl, ROWS, vec![0]);
    for r in 0..ROWS {
        batch.set_input(r, 0, Slot::I64(r as i64));
        batch.set_input(r, 1, Slot::I64(7));
    }
    let mut g = c.benchmark_group(format!("batch of {ROWS}: z = x + y"));
    g.throughput(Throughput::Elements(ROWS as u64));
    g.bench_function("quickened run_batch", |b| {
        b.iter(|| black_box(quick.run_batch(black_box(&mut f), black_box(&mut batch))))
    });
    g.bench_function("jit batch kernel", |b| {
        b.iter(|| black_box(f_native.run_batch(black_box(&mut f), black_box(&mut batch))))
    });
    g.bench_function("jit row kernel per row", |b| {
        b.iter(|| {
            for r in 0..ROWS {
                f.inputs[0] = batch.in_lanes[2 * r];
                f.inputs[1] = batch.in_lanes[2 * r + 1];
                f.input_tags[0] = batch.in_tags[2 * r];
                f.input_tags[1] = batch.in_tags[2 * r + 1];
                black_box(f_native.run(&mut f));
                batch.out_lanes[r] = f.env[0];
                batch.out_tags[r] = f.env_tags[0];
                f.step += 1;
            }
        })
    });
    g.bench_function("hand-written", |b| {
        b.iter(|| black_box(add_batch_by_hand(black_box(&mut f), black_box(&mut batch))))
    });
    g.finish();

    let counter = parse(COUNTER).expect("bench program parses");
    let mut quick = QuickCode::compile(&counter).expect("verifies");
    let native = jit::compile(&counter).expect("compiles");
    let f_native = native.main();
    let mut f = FrameBuffers::new(&counter.decl);
    let mut batch = BatchBuffers::new(&counter.decl, ROWS, vec![0]);
    let mut g = c.benchmark_group(format!("batch of {ROWS}: counter"));
    g.throughput(Throughput::Elements(ROWS as u64));
    g.bench_function("quickened run_batch", |b| {
        b.iter(|| {
            f.state[0] = 0;
            black_box(quick.run_batch(black_box(&mut f), black_box(&mut batch)))
        })
    });
    g.bench_function("jit batch kernel", |b| {
        b.iter(|| {
            f.state[0] = 0;
            black_box(f_native.run_batch(black_box(&mut f), black_box(&mut batch)))
        })
    });
    g.bench_function("hand-written", |b| {
        b.iter(|| {
            f.state[0] = 0;
            black_box(counter_batch_by_hand(
                black_box(&mut f),
                black_box(&mut batch),
            ))
        })
    });
    g.finish();
}

fn compile_time(c: &mut Criterion) {
    let prog = hundred_streams();
    let insts: usize = prog
        .layout
        .blocks
        .iter()
        .map(|&b| prog.layout.block_insts(b).len())
        .sum();
    // One measured compile, reported by the module itself.
    let code = jit::compile(&prog).expect("compiles");
    eprintln!(
        "100-stream program ({insts} IR instructions, row + batch kernels): module compile_time() = {:?}",
        code.compile_time()
    );
    drop(code);
    let mut g = c.benchmark_group("compile");
    g.sample_size(20).measurement_time(Duration::from_secs(10));
    g.bench_with_input(
        BenchmarkId::new("100-stream module (new + compile + finalize + free)", insts),
        &prog,
        |b, p| b.iter(|| black_box(jit::compile(black_box(p)).expect("compiles"))),
    );
    let add = parse(ADD).expect("bench program parses");
    g.bench_function("z = x + y module (new + compile + finalize + free)", |b| {
        b.iter(|| black_box(jit::compile(black_box(&add)).expect("compiles")))
    });
    g.bench_function("quickened compile of the 100-stream program", |b| {
        b.iter(|| black_box(QuickCode::compile(black_box(&prog)).expect("verifies")))
    });
    g.finish();
}

criterion_group!(jit_benches, per_call, batches, compile_time);
criterion_main!(jit_benches);
