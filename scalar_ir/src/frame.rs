//! The frame ABI shared by the quickened interpreter and the JIT, and the exit word.
//!
//! A [`Frame`] is a `#[repr(C)]` block of pointers to the lanes a program reads and
//! writes. The JIT addresses its fields through the `FRAME_*` offset constants, and
//! the interpreter reads the very same memory, so both tiers agree by construction.
//!
//! Tags (one `u8` per input and environment slot): see [`tag`]. Payload lanes are
//! `u64`: an `i64` in two's complement, an `f64` as its bits, a `b1` as 0 or 1.
//!
//! Exit word (`u64`, stored in [`Frame::status`] and returned by the code):
//!
//! | bits   | meaning                                                      |
//! |--------|--------------------------------------------------------------|
//! | 0..8   | exit class: 0 = return, 1 = decline, 2 = trap                |
//! | 8..16  | trap kind for class 2: 0 = overflow, 1 = division by zero, 2 = window full |
//! | 16..32 | zero                                                         |
//! | 32..64 | payload: the decline reason or the trap site                 |
//!
//! So `return` is the word 0, which lets native code test for the common case with
//! one comparison against zero.

use crate::ir::{Decl, TrapKind, Type};
use std::mem::offset_of;

/// Slot tags. The numbering is part of the ABI.
pub mod tag {
    /// No value at this step (an absent input, NoVal).
    pub const ABSENT: u8 = 0;
    /// Not enough history yet (⊥, Deferred).
    pub const DEFERRED: u8 = 1;
    /// An `i64` payload.
    pub const I64: u8 = 2;
    /// An `f64` payload.
    pub const F64: u8 = 3;
    /// A `b1` payload.
    pub const B1: u8 = 4;
    /// A value the scalar tiers cannot represent (string, unit, container).
    pub const OTHER: u8 = 5;
}

/// The tag that marks a present value of scalar type `ty`.
pub fn tag_of(ty: Type) -> u8 {
    match ty {
        Type::I64 => tag::I64,
        Type::F64 => tag::F64,
        Type::B1 => tag::B1,
    }
}

/// The memory one invocation of compiled code works on.
///
/// # Safety contract
/// Whoever builds a `Frame` by hand must make every pointer valid for the sizes the
/// program declares (`inputs`, `env`, `state`); [`FrameBuffers::frame`] does so.
#[repr(C)]
#[derive(Debug)]
pub struct Frame {
    /// Input payload lanes, one per input slot.
    pub inputs: *const u64,
    /// Input tags, one per input slot.
    pub input_tags: *const u8,
    /// Environment payload lanes, one per environment slot.
    pub env: *mut u64,
    /// Environment tags, one per environment slot.
    pub env_tags: *mut u8,
    /// Temporal state lanes (untagged: their types are fixed by the program).
    pub state: *mut u64,
    /// The step counter, used by ring instructions.
    pub step: u64,
    /// The exit word of the last invocation.
    pub status: u64,
    /// Window words (untyped: each `window` instruction names its window's
    /// shape), as many as the program declares `windows`.
    pub windows: *mut u64,
    /// Held tags, one per environment slot: while a slot's tag is `ABSENT`
    /// (NoVal), the tag of the last value it had, whose payload is still in
    /// its lane (the hold rule's cell). Read by `guard_held` and
    /// `guard_input_held`, written by `take_input` and `store_env_p`.
    pub held_tags: *mut u8,
    /// The row's time in nanoseconds, where `timed` is not 0 (an `interval`
    /// instruction's time).
    pub time: i64,
    /// Whether `time` is the row's time; 0: the row has none, and its time
    /// is its step's, `step` seconds (`window::step_time`), as the
    /// canonical tier defines it. A batch kernel's rows have no time.
    pub timed: u64,
}

impl Frame {
    /// The time an `interval` instruction reads at step `step` of a frame
    /// whose `time` and `timed` are these.
    #[inline]
    pub fn time_at(time: i64, timed: u64, step: u64) -> i64 {
        match timed {
            0 => crate::window::step_time(step),
            _ => time,
        }
    }
}

/// Byte offset of [`Frame::inputs`].
pub const FRAME_INPUTS: usize = offset_of!(Frame, inputs);
/// Byte offset of [`Frame::input_tags`].
pub const FRAME_INPUT_TAGS: usize = offset_of!(Frame, input_tags);
/// Byte offset of [`Frame::env`].
pub const FRAME_ENV: usize = offset_of!(Frame, env);
/// Byte offset of [`Frame::env_tags`].
pub const FRAME_ENV_TAGS: usize = offset_of!(Frame, env_tags);
/// Byte offset of [`Frame::state`].
pub const FRAME_STATE: usize = offset_of!(Frame, state);
/// Byte offset of [`Frame::step`].
pub const FRAME_STEP: usize = offset_of!(Frame, step);
/// Byte offset of [`Frame::status`].
pub const FRAME_STATUS: usize = offset_of!(Frame, status);
/// Byte offset of [`Frame::windows`].
pub const FRAME_WINDOWS: usize = offset_of!(Frame, windows);
/// Byte offset of [`Frame::held_tags`].
pub const FRAME_HELD_TAGS: usize = offset_of!(Frame, held_tags);
/// Byte offset of [`Frame::time`].
pub const FRAME_TIME: usize = offset_of!(Frame, time);
/// Byte offset of [`Frame::timed`].
pub const FRAME_TIMED: usize = offset_of!(Frame, timed);

// The JIT hard-codes these offsets for a 64-bit target; fail the build if they move.
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(FRAME_INPUTS == 0);
    assert!(FRAME_INPUT_TAGS == 8);
    assert!(FRAME_ENV == 16);
    assert!(FRAME_ENV_TAGS == 24);
    assert!(FRAME_STATE == 32);
    assert!(FRAME_STEP == 40);
    assert!(FRAME_STATUS == 48);
    assert!(FRAME_WINDOWS == 56);
    assert!(FRAME_HELD_TAGS == 64);
    assert!(FRAME_TIME == 72);
    assert!(FRAME_TIMED == 80);
    assert!(std::mem::size_of::<Frame>() == 88);
};

/// How a run of a program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exit {
    /// The program completed; its stores are the row's results.
    Return,
    /// The program could not handle this row; the caller runs it canonically.
    Decline(u32),
    /// A runtime error of the given kind at the given site.
    Trap(TrapKind, u32),
}

const CLASS_RETURN: u64 = 0;
const CLASS_DECLINE: u64 = 1;
const CLASS_TRAP: u64 = 2;

impl Exit {
    /// Encodes the exit as the ABI's status word.
    #[inline]
    pub const fn encode(self) -> u64 {
        match self {
            Exit::Return => CLASS_RETURN,
            Exit::Decline(reason) => CLASS_DECLINE | ((reason as u64) << 32),
            Exit::Trap(kind, site) => {
                let k = match kind {
                    TrapKind::Overflow => 0u64,
                    TrapKind::DivByZero => 1u64,
                    TrapKind::WindowFull => 2u64,
                };
                CLASS_TRAP | (k << 8) | ((site as u64) << 32)
            }
        }
    }

    /// Decodes a status word; `None` if it is not one [`Exit::encode`] produces.
    pub const fn decode(word: u64) -> Option<Exit> {
        let payload = (word >> 32) as u32;
        let class = word & 0xff;
        let kind = (word >> 8) & 0xff;
        let zero = (word >> 16) & 0xffff;
        if zero != 0 {
            return None;
        }
        match (class, kind) {
            (CLASS_RETURN, 0) if payload == 0 => Some(Exit::Return),
            (CLASS_DECLINE, 0) => Some(Exit::Decline(payload)),
            (CLASS_TRAP, 0) => Some(Exit::Trap(TrapKind::Overflow, payload)),
            (CLASS_TRAP, 1) => Some(Exit::Trap(TrapKind::DivByZero, payload)),
            (CLASS_TRAP, 2) => Some(Exit::Trap(TrapKind::WindowFull, payload)),
            _ => None,
        }
    }
}

/// A scalar value as seen in a tagged slot, for setting up and reading frames.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Slot {
    Absent,
    Deferred,
    I64(i64),
    F64(f64),
    B1(bool),
    Other,
}

impl Slot {
    /// The tag and payload lane for this slot value.
    pub fn encode(self) -> (u8, u64) {
        match self {
            Slot::Absent => (tag::ABSENT, 0),
            Slot::Deferred => (tag::DEFERRED, 0),
            Slot::I64(v) => (tag::I64, v as u64),
            Slot::F64(v) => (tag::F64, v.to_bits()),
            Slot::B1(v) => (tag::B1, v as u64),
            Slot::Other => (tag::OTHER, 0),
        }
    }

    /// Rebuilds a slot value from a tag and a payload lane; unknown tags read as `Other`.
    pub fn decode(tag: u8, lane: u64) -> Slot {
        match tag {
            tag::ABSENT => Slot::Absent,
            tag::DEFERRED => Slot::Deferred,
            tag::I64 => Slot::I64(lane as i64),
            tag::F64 => Slot::F64(f64::from_bits(lane)),
            tag::B1 => Slot::B1(lane != 0),
            _ => Slot::Other,
        }
    }
}

/// Owned, safely sized storage for a frame.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrameBuffers {
    pub inputs: Vec<u64>,
    pub input_tags: Vec<u8>,
    pub env: Vec<u64>,
    pub env_tags: Vec<u8>,
    pub state: Vec<u64>,
    pub step: u64,
    pub status: u64,
    pub windows: Vec<u64>,
    pub held_tags: Vec<u8>,
    /// [`Frame::time`] and [`Frame::timed`].
    pub time: i64,
    pub timed: u64,
}

impl FrameBuffers {
    /// Zeroed buffers (all slots absent) sized for a program's declarations.
    pub fn new(decl: &Decl) -> FrameBuffers {
        FrameBuffers {
            inputs: vec![0; decl.inputs as usize],
            input_tags: vec![tag::ABSENT; decl.inputs as usize],
            env: vec![0; decl.env as usize],
            env_tags: vec![tag::ABSENT; decl.env as usize],
            state: vec![0; decl.state as usize],
            step: 0,
            status: 0,
            windows: vec![0; decl.windows as usize],
            held_tags: vec![tag::ABSENT; decl.env as usize],
            time: 0,
            timed: 0,
        }
    }

    /// Whether the buffers are large enough for a program with these declarations.
    pub fn fits(&self, decl: &Decl) -> bool {
        self.inputs.len() >= decl.inputs as usize
            && self.input_tags.len() >= decl.inputs as usize
            && self.env.len() >= decl.env as usize
            && self.env_tags.len() >= decl.env as usize
            && self.state.len() >= decl.state as usize
            && self.windows.len() >= decl.windows as usize
            && self.held_tags.len() >= decl.env as usize
    }

    /// A raw frame pointing into these buffers, valid while they are not moved or resized.
    pub fn frame(&mut self) -> Frame {
        Frame {
            inputs: self.inputs.as_ptr(),
            input_tags: self.input_tags.as_ptr(),
            env: self.env.as_mut_ptr(),
            env_tags: self.env_tags.as_mut_ptr(),
            state: self.state.as_mut_ptr(),
            step: self.step,
            status: self.status,
            windows: self.windows.as_mut_ptr(),
            held_tags: self.held_tags.as_mut_ptr(),
            time: self.time,
            timed: self.timed,
        }
    }

    /// Sets input `slot`.
    pub fn set_input(&mut self, slot: usize, v: Slot) {
        (self.input_tags[slot], self.inputs[slot]) = v.encode();
    }

    /// Reads input `slot`.
    pub fn input(&self, slot: usize) -> Slot {
        Slot::decode(self.input_tags[slot], self.inputs[slot])
    }

    /// Sets environment `slot`.
    pub fn set_env(&mut self, slot: usize, v: Slot) {
        (self.env_tags[slot], self.env[slot]) = v.encode();
    }

    /// Reads environment `slot`.
    pub fn env(&self, slot: usize) -> Slot {
        Slot::decode(self.env_tags[slot], self.env[slot])
    }

    /// Sets state `lane` to an `i64`.
    pub fn set_state_i64(&mut self, lane: usize, v: i64) {
        self.state[lane] = v as u64;
    }

    /// Sets state `lane` to an `f64`.
    pub fn set_state_f64(&mut self, lane: usize, v: f64) {
        self.state[lane] = v.to_bits();
    }

    /// Sets state `lane` to a `b1`.
    pub fn set_state_b1(&mut self, lane: usize, v: bool) {
        self.state[lane] = v as u64;
    }

    /// Reads state `lane` as an `i64`.
    pub fn state_i64(&self, lane: usize) -> i64 {
        self.state[lane] as i64
    }

    /// Reads state `lane` as an `f64`.
    pub fn state_f64(&self, lane: usize) -> f64 {
        f64::from_bits(self.state[lane])
    }

    /// Reads state `lane` as a `b1`.
    pub fn state_b1(&self, lane: usize) -> bool {
        self.state[lane] != 0
    }

    /// The exit of the last run.
    pub fn exit(&self) -> Option<Exit> {
        Exit::decode(self.status)
    }
}

/// The memory one invocation of a *batch kernel* works on: a [`Frame`] plus row-major
/// input and output columns.
///
/// A batch kernel runs the program once per row, in row order. Row `r`'s inputs
/// are the lanes and tags at `in_lanes + r * in_stride` / `in_tags + r * in_stride`
/// (the interpreter points `frame.inputs` / `frame.input_tags` there; native code
/// reads them through cursors of its own and leaves those two fields as they
/// were); the environment, state and `frame.step` are shared by
/// all rows, so temporal state written by the program's own `store_state` /
/// `ring_store` carries from one row to the next. When a row returns, the kernel
/// copies environment slot `out_slots[j]` (lane and tag) to column `j` of output
/// row `r` (`out_lanes[r * n_out + j]`, `out_tags[r * n_out + j]`) and increments
/// `frame.step` (wrapping at `u64::MAX`). It stops at the first row whose exit is
/// not `return` (that row's outputs are not copied and the step is not incremented),
/// stores that exit word in `frame.status` and returns it; `done` receives the number
/// of rows that returned. Output rows from `done` on are not part of the result: a
/// native kernel for known outputs writes a row's output lanes as it computes them,
/// so the row that stopped it may have some written.
///
/// `frame` comes first, so a `*mut BatchFrame` is also a valid `*mut Frame`.
///
/// # Safety contract
/// As for [`Frame`] (its `inputs` / `input_tags` may be anything: the kernel sets
/// them), plus: `in_lanes` / `in_tags` valid for `rows * in_stride` elements with
/// `in_stride >=` the program's `inputs` (`==` for a native kernel compiled
/// for known outputs); `out_slots` valid for `n_out` slot numbers,
/// each below the program's `env`; `out_lanes` / `out_tags` valid for `rows * n_out`
/// elements. [`BatchBuffers::frame`] builds one that satisfies all of this.
#[repr(C)]
#[derive(Debug)]
pub struct BatchFrame {
    /// The per-row frame (environment, state and step persist across rows).
    pub frame: Frame,
    /// Number of rows to run.
    pub rows: u64,
    /// Input payload lanes, row-major: row `r` starts at `r * in_stride`.
    pub in_lanes: *const u64,
    /// Input tags, row-major like `in_lanes`.
    pub in_tags: *const u8,
    /// Input lanes (and tags) per row.
    pub in_stride: u64,
    /// Output payload lanes, row-major: row `r` starts at `r * n_out`.
    pub out_lanes: *mut u64,
    /// Output tags, row-major like `out_lanes`.
    pub out_tags: *mut u8,
    /// The environment slot copied to each output column.
    pub out_slots: *const u32,
    /// Output columns per row (the length of `out_slots`).
    pub n_out: u64,
    /// Written by the kernel: how many rows returned.
    pub done: u64,
}

/// Byte offset of [`BatchFrame::frame`] (zero: a batch frame starts with its frame).
pub const BATCH_FRAME: usize = offset_of!(BatchFrame, frame);
/// Byte offset of [`BatchFrame::rows`].
pub const BATCH_ROWS: usize = offset_of!(BatchFrame, rows);
/// Byte offset of [`BatchFrame::in_lanes`].
pub const BATCH_IN_LANES: usize = offset_of!(BatchFrame, in_lanes);
/// Byte offset of [`BatchFrame::in_tags`].
pub const BATCH_IN_TAGS: usize = offset_of!(BatchFrame, in_tags);
/// Byte offset of [`BatchFrame::in_stride`].
pub const BATCH_IN_STRIDE: usize = offset_of!(BatchFrame, in_stride);
/// Byte offset of [`BatchFrame::out_lanes`].
pub const BATCH_OUT_LANES: usize = offset_of!(BatchFrame, out_lanes);
/// Byte offset of [`BatchFrame::out_tags`].
pub const BATCH_OUT_TAGS: usize = offset_of!(BatchFrame, out_tags);
/// Byte offset of [`BatchFrame::out_slots`].
pub const BATCH_OUT_SLOTS: usize = offset_of!(BatchFrame, out_slots);
/// Byte offset of [`BatchFrame::n_out`].
pub const BATCH_N_OUT: usize = offset_of!(BatchFrame, n_out);
/// Byte offset of [`BatchFrame::done`].
pub const BATCH_DONE: usize = offset_of!(BatchFrame, done);

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(BATCH_FRAME == 0);
    assert!(BATCH_ROWS == 88);
    assert!(BATCH_IN_LANES == 96);
    assert!(BATCH_IN_TAGS == 104);
    assert!(BATCH_IN_STRIDE == 112);
    assert!(BATCH_OUT_LANES == 120);
    assert!(BATCH_OUT_TAGS == 128);
    assert!(BATCH_OUT_SLOTS == 136);
    assert!(BATCH_N_OUT == 144);
    assert!(BATCH_DONE == 152);
    assert!(std::mem::size_of::<BatchFrame>() == 160);
};

/// Owned, safely sized row-major columns for a batch run (the environment, state and
/// step live in a [`FrameBuffers`] beside it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchBuffers {
    /// Number of rows.
    pub rows: usize,
    /// Input lanes and tags per row.
    pub in_stride: usize,
    /// Input payload lanes, `rows * in_stride`, row-major.
    pub in_lanes: Vec<u64>,
    /// Input tags, `rows * in_stride`, row-major.
    pub in_tags: Vec<u8>,
    /// The environment slot copied to each output column.
    pub out_slots: Vec<u32>,
    /// Output payload lanes, `rows * out_slots.len()`, row-major.
    pub out_lanes: Vec<u64>,
    /// Output tags, `rows * out_slots.len()`, row-major.
    pub out_tags: Vec<u8>,
    /// How many rows returned in the last run.
    pub done: usize,
}

impl BatchBuffers {
    /// Absent inputs and zeroed outputs for `rows` rows of a program with these
    /// declarations, copying out the environment slots `out_slots`.
    pub fn new(decl: &Decl, rows: usize, out_slots: Vec<u32>) -> BatchBuffers {
        let stride = decl.inputs as usize;
        let n_out = out_slots.len();
        BatchBuffers {
            rows,
            in_stride: stride,
            in_lanes: vec![0; rows * stride],
            in_tags: vec![tag::ABSENT; rows * stride],
            out_lanes: vec![0; rows * n_out],
            out_tags: vec![tag::ABSENT; rows * n_out],
            out_slots,
            done: 0,
        }
    }

    /// Every environment slot of a program with these declarations, in order.
    pub fn whole_env(decl: &Decl) -> Vec<u32> {
        (0..decl.env).collect()
    }

    /// Sets input `slot` of row `row`.
    pub fn set_input(&mut self, row: usize, slot: usize, v: Slot) {
        let i = row * self.in_stride + slot;
        (self.in_tags[i], self.in_lanes[i]) = v.encode();
    }

    /// Reads input `slot` of row `row`.
    pub fn input_at(&self, row: usize, slot: usize) -> Slot {
        let i = row * self.in_stride + slot;
        Slot::decode(self.in_tags[i], self.in_lanes[i])
    }

    /// Reads output column `col` of row `row`.
    pub fn output(&self, row: usize, col: usize) -> Slot {
        let i = row * self.out_slots.len() + col;
        Slot::decode(self.out_tags[i], self.out_lanes[i])
    }

    /// Whether these buffers and `fb` are consistent and large enough for a program
    /// with these declarations (the condition for [`BatchBuffers::frame`] to be sound).
    pub fn fits(&self, fb: &FrameBuffers, decl: &Decl) -> bool {
        let n_in = self.rows.checked_mul(self.in_stride);
        let n_out = self.rows.checked_mul(self.out_slots.len());
        fb.fits(decl)
            && self.in_stride >= decl.inputs as usize
            && n_in.is_some_and(|n| self.in_lanes.len() >= n && self.in_tags.len() >= n)
            && n_out.is_some_and(|n| self.out_lanes.len() >= n && self.out_tags.len() >= n)
            && self
                .out_slots
                .iter()
                .all(|&s| (s as usize) < fb.env.len() && s < decl.env)
    }

    /// A raw batch frame over these columns and `fb`'s environment, state and step,
    /// valid while neither is moved or resized. Check [`BatchBuffers::fits`] first.
    pub fn frame(&mut self, fb: &mut FrameBuffers) -> BatchFrame {
        let mut frame = fb.frame();
        frame.inputs = self.in_lanes.as_ptr();
        frame.input_tags = self.in_tags.as_ptr();
        BatchFrame {
            frame,
            rows: self.rows as u64,
            in_lanes: self.in_lanes.as_ptr(),
            in_tags: self.in_tags.as_ptr(),
            in_stride: self.in_stride as u64,
            out_lanes: self.out_lanes.as_mut_ptr(),
            out_tags: self.out_tags.as_mut_ptr(),
            out_slots: self.out_slots.as_ptr(),
            n_out: self.out_slots.len() as u64,
            done: 0,
        }
    }

    /// Copies a finished batch frame's results back: `done` here, and the step and
    /// status into `fb` (the environment and state were written in place).
    pub fn finish(&mut self, bf: &BatchFrame, fb: &mut FrameBuffers) {
        self.done = bf.done as usize;
        fb.step = bf.frame.step;
        fb.status = bf.frame.status;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_round_trips() {
        for e in [
            Exit::Return,
            Exit::Decline(0),
            Exit::Decline(u32::MAX),
            Exit::Trap(TrapKind::Overflow, 7),
            Exit::Trap(TrapKind::DivByZero, u32::MAX),
            Exit::Trap(TrapKind::WindowFull, 3),
        ] {
            assert_eq!(Exit::decode(e.encode()), Some(e));
        }
        assert_eq!(Exit::Return.encode(), 0);
        assert_eq!(Exit::decode(3), None);
        assert_eq!(Exit::decode(1 << 16), None);
        assert_eq!(Exit::decode(2 | (3 << 8)), None);
        assert_eq!(Exit::decode(1 << 32), None);
    }

    #[test]
    fn slots_round_trip() {
        let mut fb = FrameBuffers::new(&Decl {
            inputs: 1,
            env: 1,
            state: 1,
            sites: 0,
            windows: 0,
        });
        for v in [
            Slot::Absent,
            Slot::Deferred,
            Slot::I64(-3),
            Slot::B1(true),
            Slot::Other,
        ] {
            fb.set_env(0, v);
            assert_eq!(fb.env(0), v);
            fb.set_input(0, v);
            assert_eq!(fb.input(0), v);
        }
        fb.set_env(0, Slot::F64(-0.0));
        assert_eq!(fb.env[0], (-0.0f64).to_bits());
        fb.set_state_f64(0, 2.5);
        assert_eq!(fb.state_f64(0), 2.5);
    }
}
