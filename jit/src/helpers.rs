//! Host helpers: the few float operations compiled code calls instead of inlining, and the window state machines.
//!
//! Each helper is a thin `extern "C"` wrapper around exactly the Rust expression the
//! quickened tier evaluates (see `scalar_ir::ir::sem`), so the two tiers share one
//! implementation and agree bit for bit by construction, NaN payloads and signed
//! zeros included. The helpers are pure float arithmetic: they cannot panic, so no
//! unwind can ever cross a JIT frame.
//!
//! Why these and not native instructions:
//! - `frem`: Cranelift has no float remainder; Rust's `%` on `f64` is `fmod`.
//! - `fmin`/`fmax`: Cranelift's `fmin`/`fmax` propagate NaN, Rust's `f64::min`/`max`
//!   ignore it, and their signed-zero choice is the compiler's; calling the Rust
//!   function is the only choice that is exact by construction.
//! - `sin`/`cos`/`tan`: no instruction exists; the wrappers call the same libm
//!   functions `f64::sin` etc. call.
//! - `floor`/`ceil`: Cranelift uses SSE4.1 `roundsd` when the host has it, which
//!   quiets a signalling NaN, while Rust code built for the baseline x86-64 target
//!   calls libm's `floor`, which returns it unchanged (found by the differential
//!   property test). Calling Rust's own `f64::floor` follows whatever the rest of the
//!   binary was built with.

use cranelift_codegen::ir::{AbiParam, Signature, types};
use cranelift_codegen::isa::CallConv;

/// A host function compiled code may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Helper {
    Frem,
    Fmin,
    Fmax,
    Sin,
    Cos,
    Tan,
    Floor,
    Ceil,
    /// A count window's push and read (`scalar_ir::window::CountWindow::step`).
    Window,
    /// A `min`/`max` count window's push and read on its fast path
    /// (`scalar_ir::window::MinMaxWindow::step`).
    MinMax,
    /// An interval window's push and read (`scalar_ir::window::IntervalWindow::step`).
    Interval,
    /// A since's push and read (`scalar_ir::window::SinceWindow::step`).
    Since,
}

impl Helper {
    /// Every helper, in the order of [`Helper::index`].
    pub(crate) const ALL: [Helper; 12] = [
        Helper::Frem,
        Helper::Fmin,
        Helper::Fmax,
        Helper::Sin,
        Helper::Cos,
        Helper::Tan,
        Helper::Floor,
        Helper::Ceil,
        Helper::Window,
        Helper::MinMax,
        Helper::Interval,
        Helper::Since,
    ];

    /// A dense index, for per-module and per-function tables.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The symbol the helper is registered under in every module.
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Helper::Frem => "vigil_jit_frem",
            Helper::Fmin => "vigil_jit_fmin",
            Helper::Fmax => "vigil_jit_fmax",
            Helper::Sin => "vigil_jit_sin",
            Helper::Cos => "vigil_jit_cos",
            Helper::Tan => "vigil_jit_tan",
            Helper::Floor => "vigil_jit_floor",
            Helper::Ceil => "vigil_jit_ceil",
            Helper::Window => "vigil_jit_window",
            Helper::MinMax => "vigil_jit_min_max",
            Helper::Interval => "vigil_jit_interval",
            Helper::Since => "vigil_jit_since",
        }
    }

    /// The helper's address, for `JITBuilder::symbol`.
    pub(crate) fn address(self) -> *const u8 {
        match self {
            Helper::Frem => frem as *const u8,
            Helper::Fmin => fmin as *const u8,
            Helper::Fmax => fmax as *const u8,
            Helper::Sin => sin as *const u8,
            Helper::Cos => cos as *const u8,
            Helper::Tan => tan as *const u8,
            Helper::Floor => floor as *const u8,
            Helper::Ceil => ceil as *const u8,
            Helper::Window => window as *const u8,
            Helper::MinMax => min_max as *const u8,
            Helper::Interval => interval as *const u8,
            Helper::Since => since as *const u8,
        }
    }

    /// Number of `f64` arguments of a float helper (the result is one `f64`).
    pub(crate) fn arity(self) -> usize {
        match self {
            Helper::Frem | Helper::Fmin | Helper::Fmax => 2,
            Helper::Sin | Helper::Cos | Helper::Tan | Helper::Floor | Helper::Ceil => 1,
            Helper::Window | Helper::MinMax | Helper::Interval | Helper::Since => 0,
        }
    }

    /// The helper's signature under the host's C calling convention.
    pub(crate) fn signature(self, call_conv: CallConv) -> Signature {
        let mut sig = Signature::new(call_conv);
        if self == Helper::Window {
            // (window words, shape, value bits, step, enter, result slot)
            // -> status.
            for _ in 0..6 {
                sig.params.push(AbiParam::new(types::I64));
            }
            sig.returns.push(AbiParam::new(types::I64));
            return sig;
        }
        if self == Helper::MinMax {
            // (window words, n, modulus, kind, value bits, step, enter, result
            // slot) -> status.
            for _ in 0..8 {
                sig.params.push(AbiParam::new(types::I64));
            }
            sig.returns.push(AbiParam::new(types::I64));
            return sig;
        }
        if self == Helper::Interval {
            // (window words, lo, hi, kind, value bits, step, time, timed,
            // enter, result slot) -> status.
            for _ in 0..10 {
                sig.params.push(AbiParam::new(types::I64));
            }
            sig.returns.push(AbiParam::new(types::I64));
            return sig;
        }
        if self == Helper::Since {
            // (window words, lo, hi, kind, φ bits, ψ bits, step, time,
            // timed, presences, result slot) -> status.
            for _ in 0..11 {
                sig.params.push(AbiParam::new(types::I64));
            }
            sig.returns.push(AbiParam::new(types::I64));
            return sig;
        }
        for _ in 0..self.arity() {
            sig.params.push(AbiParam::new(types::F64));
        }
        sig.returns.push(AbiParam::new(types::F64));
        sig
    }
}

extern "C" fn frem(a: f64, b: f64) -> f64 {
    a % b
}

extern "C" fn fmin(a: f64, b: f64) -> f64 {
    a.min(b)
}

extern "C" fn fmax(a: f64, b: f64) -> f64 {
    a.max(b)
}

extern "C" fn sin(a: f64) -> f64 {
    a.sin()
}

extern "C" fn cos(a: f64) -> f64 {
    a.cos()
}

extern "C" fn tan(a: f64) -> f64 {
    a.tan()
}

extern "C" fn floor(a: f64) -> f64 {
    a.floor()
}

extern "C" fn ceil(a: f64) -> f64 {
    a.ceil()
}

/// A count window's push and read on the words at `words` (the frame's window
/// words plus the instruction's base): enters `bits` unless `enter` is 0,
/// writes the result's bits to `out` and returns 0; returns 1 where an Int
/// sum leaves 64 bits and 2 where the window is empty (its read is ⊥, which
/// only a window that entered nothing can be). It cannot panic on words of
/// its window's length (see `scalar_ir::window`), so no unwind crosses the
/// JIT frame.
extern "C" fn window(
    words: *mut u64,
    shape: u64,
    bits: u64,
    step: u64,
    enter: u64,
    out: *mut u64,
) -> u64 {
    let Some(shape) = scalar_ir::window::CountWindow::decode(shape) else {
        // The translator encodes shapes the verifier accepted.
        return 1;
    };
    // SAFETY: the translator passes `frame.windows + base`, and the verifier
    // checked `base + shape.words() <= decl.windows`, for which the caller of
    // the kernel guarantees a valid, exclusive region (as for `state`); `out`
    // is a stack slot of the calling kernel.
    let words = unsafe { std::slice::from_raw_parts_mut(words, shape.words()) };
    if enter != 0 {
        shape.push(words, step, bits);
    }
    match shape.read(words) {
        scalar_ir::window::Read::Bits(b) => {
            // SAFETY: see above.
            unsafe { out.write(b) };
            0
        }
        scalar_ir::window::Read::Overflow => 1,
        scalar_ir::window::Read::Empty => {
            // SAFETY: see above. (Written anyway, so that `out` is never
            // read uninitialized, whatever the caller does with status 2.)
            unsafe { out.write(0) };
            2
        }
    }
}

/// A `min`/`max` count window's push and read on its fast path, on the words
/// at `words` (the frame's window words plus the instruction's base), the
/// window given as `MinMaxWindow::encode`'s words (its length `n`, modulus
/// `m` and kind: decoding them is two comparisons, where a shape word's
/// decoding and the modulus's division were a good part of a `G`/`F` step):
/// enters `bits` unless `enter` is 0, writes the result's bits to `out` and
/// returns 0; returns 2 where the window is empty (its read is ⊥). It
/// cannot panic on words of its window's length, whatever `m` is (see
/// `scalar_ir::window::minmax`), so no unwind crosses the JIT frame.
#[allow(clippy::too_many_arguments)]
extern "C" fn min_max(
    words: *mut u64,
    n: u64,
    m: u64,
    kind: u64,
    bits: u64,
    step: u64,
    enter: u64,
    out: *mut u64,
) -> u64 {
    let Some(shape) = scalar_ir::window::MinMaxWindow::decode(n, m, kind) else {
        // The translator encodes windows the verifier accepted.
        return 1;
    };
    // SAFETY: the translator passes `frame.windows + base`, and the verifier
    // checked `base + words() <= decl.windows` for the instruction's count
    // window, whose words these are (`MinMaxWindow::words` is
    // `CountWindow::words` of a `min`/`max` window); the caller of the kernel
    // guarantees a valid, exclusive region (as for `state`); `out` is a stack
    // slot of the calling kernel.
    let words = unsafe { std::slice::from_raw_parts_mut(words, shape.words()) };
    let (status, b) = match shape.step(words, step, bits, enter != 0) {
        scalar_ir::window::Read::Bits(b) => (0, b),
        // A `min`/`max` never overflows; status 1 is the translator's bug.
        scalar_ir::window::Read::Overflow => (1, 0),
        scalar_ir::window::Read::Empty => (2, 0),
    };
    // SAFETY: see above (written either way, so that `out` is never read
    // uninitialized).
    unsafe { out.write(b) };
    status
}

/// An interval window's push and read on the words at `words` (the frame's
/// window words plus the instruction's base), at the row's time (`time`
/// where `timed` is not 0, else the step's): enters `bits` unless `enter` is
/// 0, writes the result's bits to `out` and returns 0; returns 1 where the
/// window has had to keep more than its capacity (`window full`). It cannot
/// panic on words of its window's length (see
/// `scalar_ir::window::interval`), so no unwind crosses the JIT frame.
#[allow(clippy::too_many_arguments)]
extern "C" fn interval(
    words: *mut u64,
    lo_ns: i64,
    hi_ns: i64,
    kind: u64,
    bits: u64,
    step: u64,
    time: i64,
    timed: u64,
    enter: u64,
    out: *mut u64,
) -> u64 {
    let Some(shape) = scalar_ir::window::IntervalWindow::decode(lo_ns, hi_ns, kind) else {
        // The translator encodes windows the verifier accepted.
        return 1;
    };
    // SAFETY: the translator passes `frame.windows + base`, and the verifier
    // checked `base + shape.words() <= decl.windows`, for which the caller of
    // the kernel guarantees a valid, exclusive region (as for `state`); `out`
    // is a stack slot of the calling kernel.
    let words = unsafe { std::slice::from_raw_parts_mut(words, shape.words()) };
    let time = scalar_ir::Frame::time_at(time, timed, step);
    match shape.step(words, step, time, bits, enter != 0) {
        scalar_ir::window::IntervalRead::Bits(b) => {
            // SAFETY: see above.
            unsafe { out.write(b) };
            0
        }
        scalar_ir::window::IntervalRead::Full => {
            // SAFETY: see above (written so that `out` is never read
            // uninitialized).
            unsafe { out.write(0) };
            1
        }
    }
}

/// A since's push and read on the words at `words` (the frame's window
/// words plus the instruction's base), at the row's time (`time` where
/// `timed` is not 0, else the step's): enters φ's `phi` where bit 0 of
/// `present` is set and ψ's `psi` where bit 1 is, writes the result's bits
/// to `out` and returns 0; returns 1 where a ring has had to keep more
/// than its capacity (`window full`). It cannot panic on words of its
/// since's length (see `scalar_ir::window::since`), so no unwind crosses
/// the JIT frame.
#[allow(clippy::too_many_arguments)]
extern "C" fn since(
    words: *mut u64,
    lo_ns: i64,
    hi_ns: i64,
    kind: u64,
    phi: u64,
    psi: u64,
    step: u64,
    time: i64,
    timed: u64,
    present: u64,
    out: *mut u64,
) -> u64 {
    let Some(shape) = scalar_ir::window::SinceWindow::decode(lo_ns, hi_ns, kind) else {
        // The translator encodes sinces the verifier accepted.
        return 1;
    };
    // SAFETY: the translator passes `frame.windows + base`, and the verifier
    // checked `base + shape.words() <= decl.windows`, for which the caller of
    // the kernel guarantees a valid, exclusive region (as for `state`); `out`
    // is a stack slot of the calling kernel.
    let words = unsafe { std::slice::from_raw_parts_mut(words, shape.words()) };
    let time = scalar_ir::Frame::time_at(time, timed, step);
    let (phi, psi) = (
        (present & 1 != 0).then_some(phi),
        (present & 2 != 0).then_some(psi),
    );
    let (status, bits) = match shape.step(words, step, time, phi, psi) {
        scalar_ir::window::IntervalRead::Bits(b) => (0, b),
        scalar_ir::window::IntervalRead::Full => (1, 0),
    };
    // SAFETY: see above (written either way, so that `out` is never read
    // uninitialized).
    unsafe { out.write(bits) };
    status
}
