//! The quickened register interpreter: compile a verified program once, run it many times.
//!
//! Compilation ([`QuickCode::compile`]) verifies the program, assigns every SSA value
//! its own `u64` register, preloads constants, and selects type-specialised opcodes and
//! superinstructions (in the private `compile` module). Running reuses the register file, so a run
//! allocates nothing. The opcode set lives in one table in [`ops`].
//!
//! The register file is private: its indexing skips bounds checks, which is sound
//! only for the register files this module builds for the code it compiled, so no
//! safe code outside the crate can build or index one:
//!
//! ```compile_fail
//! let regs = scalar_ir::quick::Regs::default();
//! ```

mod compile;
pub mod ops;

use ops::Regs;
pub use ops::{Code, IntervalId, Op, Opcode, PAIR_OPCODES, Pc, Reg, SinceId, Site, Tag, disasm};

use crate::frame::{BatchBuffers, BatchFrame, Exit, Frame, FrameBuffers};
use crate::ir::{Decl, Program};
use crate::verify::{VerifierErrors, verify};
use std::fmt;

/// Safe views of the frame memory for one run.
pub(crate) struct FrameRef<'a> {
    pub inputs: &'a [u64],
    pub input_tags: &'a [u8],
    pub env: &'a mut [u64],
    pub env_tags: &'a mut [u8],
    pub state: &'a mut [u64],
    pub windows: &'a mut [u64],
    pub held_tags: &'a mut [u8],
    pub step: u64,
    /// The row's time in nanoseconds, if it has one (`Frame::timed`).
    pub time: Option<i64>,
}

impl FrameRef<'_> {
    /// The time an `interval` instruction reads: the row's, or its step's.
    #[inline]
    pub(crate) fn time(&self) -> i64 {
        self.time
            .unwrap_or_else(|| crate::window::step_time(self.step))
    }
}

/// Why a program could not be compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The program failed verification.
    Verify(VerifierErrors),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Verify(e) => write!(f, "program failed verification:\n{e}"),
        }
    }
}

impl std::error::Error for Error {}

/// A program compiled for the quickened interpreter, with its register file.
#[derive(Clone, Debug)]
pub struct QuickCode {
    code: Code,
    regs: Regs,
    decl: Decl,
}

impl QuickCode {
    /// Verifies and compiles a program.
    pub fn compile(prog: &Program) -> Result<QuickCode, Error> {
        verify(prog).map_err(Error::Verify)?;
        let code = compile::lower(prog);
        let mut regs = Regs::zeroed(code.nregs);
        for &(r, bits) in &code.consts {
            regs[r] = bits;
        }
        Ok(QuickCode {
            code,
            regs,
            decl: prog.decl,
        })
    }

    /// The compiled instructions.
    pub fn code(&self) -> &Code {
        &self.code
    }

    /// The frame sizes the program declared.
    pub fn decl(&self) -> &Decl {
        &self.decl
    }

    /// The disassembly of the compiled code.
    pub fn disasm(&self) -> String {
        disasm(&self.code)
    }

    /// Runs the program on owned frame buffers and records the exit in `fb.status`.
    ///
    /// # Panics
    /// Panics if the buffers are smaller than the program's declarations; size them
    /// with [`FrameBuffers::new`].
    pub fn run(&mut self, fb: &mut FrameBuffers) -> Exit {
        assert!(
            fb.fits(&self.decl),
            "frame buffers are smaller than the program declares"
        );
        let mut fr = FrameRef {
            inputs: &fb.inputs,
            input_tags: &fb.input_tags,
            env: &mut fb.env,
            env_tags: &mut fb.env_tags,
            state: &mut fb.state,
            windows: &mut fb.windows,
            held_tags: &mut fb.held_tags,
            step: fb.step,
            time: (fb.timed != 0).then_some(fb.time),
        };
        let exit = ops::execute(&self.code, &mut self.regs, &mut fr);
        fb.status = exit.encode();
        exit
    }

    /// Runs a program that declares no input lanes directly on environment
    /// and state slices (the engine's own vectors), without building a raw
    /// frame: the safe fast path for fused regions. `time` is the row's time
    /// in nanoseconds, if it has one (else an `interval` reads its step's).
    ///
    /// # Panics
    /// Panics if the program declares inputs or the slices are shorter than
    /// its declarations.
    #[allow(clippy::too_many_arguments)]
    pub fn run_slices(
        &mut self,
        env: &mut [u64],
        env_tags: &mut [u8],
        held_tags: &mut [u8],
        state: &mut [u64],
        windows: &mut [u64],
        step: u64,
        time: Option<i64>,
    ) -> Exit {
        let d = &self.decl;
        assert!(
            d.inputs == 0
                && env.len() >= d.env as usize
                && env_tags.len() >= d.env as usize
                && held_tags.len() >= d.env as usize
                && state.len() >= d.state as usize
                && windows.len() >= d.windows as usize,
            "slices are smaller than the program declares"
        );
        let mut fr = FrameRef {
            inputs: &[],
            input_tags: &[],
            env,
            env_tags,
            state,
            windows,
            held_tags,
            step,
            time,
        };
        ops::execute(&self.code, &mut self.regs, &mut fr)
    }

    /// Runs the program on a raw ABI frame and records the exit in `frame.status`.
    ///
    /// # Safety
    /// Every pointer in `frame` must be valid (and the mutable ones exclusive) for as
    /// many lanes and tags as the program declares, as for the JIT.
    pub unsafe fn run_frame(&mut self, frame: &mut Frame) -> Exit {
        let time = (frame.timed != 0).then_some(frame.time);
        // SAFETY: forwarded.
        unsafe { self.run_frame_at(frame, time) }
    }

    /// `run_frame` with the row's time `time` (`None`: its step's).
    ///
    /// # Safety
    /// As for [`QuickCode::run_frame`].
    unsafe fn run_frame_at(&mut self, frame: &mut Frame, time: Option<i64>) -> Exit {
        let d = self.decl;
        // SAFETY: the caller guarantees the sizes; empty slices use a dangling
        // pointer because a frame may carry null for an unused area.
        let exit = unsafe {
            let mut fr = FrameRef {
                inputs: slice(frame.inputs, d.inputs),
                input_tags: slice(frame.input_tags, d.inputs),
                env: slice_mut(frame.env, d.env),
                env_tags: slice_mut(frame.env_tags, d.env),
                state: slice_mut(frame.state, d.state),
                windows: slice_mut(frame.windows, d.windows),
                held_tags: slice_mut(frame.held_tags, d.env),
                step: frame.step,
                time,
            };
            ops::execute(&self.code, &mut self.regs, &mut fr)
        };
        frame.status = exit.encode();
        exit
    }

    /// Runs the program over the rows of a batch, the reference loop for batch kernels
    /// (see [`BatchFrame`] for the contract): row `r` reads its inputs from row `r` of
    /// `batch`'s input columns and shares `fb`'s environment, state and step. After
    /// each returning row the environment slots `batch.out_slots` are copied to output
    /// row `r` and `fb.step` is incremented (wrapping at `u64::MAX`). The first row
    /// that does not return stops the batch; its exit is returned and recorded in
    /// `fb.status`, and `batch.done` counts the rows that returned.
    ///
    /// # Panics
    /// Panics unless `batch.fits(fb, decl)` holds.
    pub fn run_batch(&mut self, fb: &mut FrameBuffers, batch: &mut BatchBuffers) -> Exit {
        assert!(
            batch.fits(fb, &self.decl),
            "batch or frame buffers are smaller than the program declares"
        );
        let (stride, n_out) = (batch.in_stride, batch.out_slots.len());
        for r in 0..batch.rows {
            let mut fr = FrameRef {
                inputs: &batch.in_lanes[r * stride..(r + 1) * stride],
                input_tags: &batch.in_tags[r * stride..(r + 1) * stride],
                env: &mut fb.env,
                env_tags: &mut fb.env_tags,
                state: &mut fb.state,
                windows: &mut fb.windows,
                held_tags: &mut fb.held_tags,
                step: fb.step,
                // A batch's rows have no time: each reads its step's.
                time: None,
            };
            let exit = ops::execute(&self.code, &mut self.regs, &mut fr);
            fb.status = exit.encode();
            if exit != Exit::Return {
                batch.done = r;
                return exit;
            }
            for (j, &slot) in batch.out_slots.iter().enumerate() {
                batch.out_lanes[r * n_out + j] = fb.env[slot as usize];
                batch.out_tags[r * n_out + j] = fb.env_tags[slot as usize];
            }
            fb.step = fb.step.wrapping_add(1);
        }
        batch.done = batch.rows;
        fb.status = Exit::Return.encode();
        Exit::Return
    }

    /// [`QuickCode::run_batch`] on a raw batch frame: the same loop, one
    /// [`QuickCode::run_frame`] per row.
    ///
    /// # Safety
    /// `batch` must satisfy the [`BatchFrame`] safety contract for this program.
    pub unsafe fn run_batch_frame(&mut self, batch: &mut BatchFrame) -> Exit {
        let (stride, n_out) = (batch.in_stride as usize, batch.n_out as usize);
        for r in 0..batch.rows as usize {
            // SAFETY: the caller guarantees every column covers `rows` rows and every
            // output slot is in range.
            let exit = unsafe {
                batch.frame.inputs = batch.in_lanes.add(r * stride);
                batch.frame.input_tags = batch.in_tags.add(r * stride);
                // A batch's rows have no time: each reads its step's.
                self.run_frame_at(&mut batch.frame, None)
            };
            if exit != Exit::Return {
                batch.done = r as u64;
                return exit;
            }
            for j in 0..n_out {
                // SAFETY: as above.
                unsafe {
                    let slot = *batch.out_slots.add(j) as usize;
                    *batch.out_lanes.add(r * n_out + j) = *batch.frame.env.add(slot);
                    *batch.out_tags.add(r * n_out + j) = *batch.frame.env_tags.add(slot);
                }
            }
            batch.frame.step = batch.frame.step.wrapping_add(1);
        }
        batch.done = batch.rows;
        batch.frame.status = Exit::Return.encode();
        Exit::Return
    }
}

unsafe fn slice<'a, T>(p: *const T, n: u32) -> &'a [T] {
    if n == 0 {
        &[]
    } else {
        // SAFETY: forwarded from `run_frame`'s contract.
        unsafe { std::slice::from_raw_parts(p, n as usize) }
    }
}

unsafe fn slice_mut<'a, T>(p: *mut T, n: u32) -> &'a mut [T] {
    if n == 0 {
        &mut []
    } else {
        // SAFETY: forwarded from `run_frame`'s contract.
        unsafe { std::slice::from_raw_parts_mut(p, n as usize) }
    }
}

#[cfg(test)]
mod tests;
