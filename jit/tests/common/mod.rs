//! Shared by the JIT's test binaries: run a program on the quickened interpreter and
//! on the JIT (row kernel and a one-row batch) from the same frame, and compare.

#![allow(dead_code)]

pub mod hundred;
pub mod programs;

use jit::NativeFn;
use scalar_ir::{BatchBuffers, Exit, FrameBuffers, Program, QuickCode};

/// A batch as its contract defines it after a run: the output rows done
/// (a kernel for known outputs writes a row's lanes as it computes them,
/// so the lanes of the row that stopped it may hold some; nothing reads
/// them), the rest as they were given.
pub fn rows_done(b: &BatchBuffers) -> BatchBuffers {
    let mut b = b.clone();
    let n = b.done * b.out_slots.len();
    b.out_lanes.truncate(n);
    b.out_tags.truncate(n);
    b
}

/// Everything a run leaves behind, compared bitwise (floats as their bits).
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub exit: Exit,
    pub fb: FrameBuffers,
}

pub fn run_quick(code: &mut QuickCode, start: &FrameBuffers) -> Outcome {
    let mut fb = start.clone();
    let exit = code.run(&mut fb);
    Outcome { exit, fb }
}

pub fn run_native(f: NativeFn<'_>, start: &FrameBuffers) -> Outcome {
    let mut fb = start.clone();
    let exit = f.run(&mut fb);
    Outcome { exit, fb }
}

/// Runs `start` as a one-row batch copying out the whole environment; returns the
/// outcome as a row run would leave it (step restored) plus the copied row.
pub fn run_native_batch_of_one(f: NativeFn<'_>, prog: &Program, start: &FrameBuffers) -> Outcome {
    let mut fb = start.clone();
    let mut batch = BatchBuffers::new(&prog.decl, 1, BatchBuffers::whole_env(&prog.decl));
    batch
        .in_lanes
        .copy_from_slice(&start.inputs[..prog.decl.inputs as usize]);
    batch
        .in_tags
        .copy_from_slice(&start.input_tags[..prog.decl.inputs as usize]);
    let exit = f.run_batch(&mut fb, &mut batch);
    if exit == Exit::Return {
        assert_eq!(batch.done, 1);
        assert_eq!(
            fb.step,
            start.step.wrapping_add(1),
            "a returning row advances the step"
        );
        assert_eq!(batch.out_lanes, fb.env, "the batch copies the whole env");
        assert_eq!(batch.out_tags, fb.env_tags);
        fb.step = start.step;
    } else {
        assert_eq!(batch.done, 0);
        assert_eq!(fb.step, start.step);
    }
    Outcome { exit, fb }
}

/// Asserts that the JIT (row and one-row batch) leaves exactly what the quickened
/// interpreter leaves, starting from `start`.
pub fn assert_same(code: &mut QuickCode, f: NativeFn<'_>, prog: &Program, start: &FrameBuffers) {
    let want = run_quick(code, start);
    let got = run_native(f, start);
    assert_eq!(
        got,
        want,
        "row kernel differs from quickened on\n{}",
        scalar_ir::print(prog)
    );
    let got = run_native_batch_of_one(f, prog, start);
    assert_eq!(
        got,
        want,
        "batch kernel differs from quickened on\n{}",
        scalar_ir::print(prog)
    );
}
