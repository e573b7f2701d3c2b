//! A past-time STL since `φ S[lo, hi] ψ` (docs/language.md, "STL inside a specification") on the canonical tier: the plan's window words run by `scalar_ir::window::SinceWindow`.
//!
//! The state machine is `scalar_ir::window::SinceWindow`, which the
//! quickened and native tiers run on the same words; this module maps the
//! operands' samples to its pushes, its reads to samples and its overflow
//! to the runtime error (`super::interval::full_fault`, as an interval's).

use super::Shape;
use super::interval::full_fault;
use crate::error::Fault;
use crate::lang::ast::WindowSize;
use crate::time::Time;
use crate::value::{Sample, Value};
use scalar_ir::window::{Elem, IntervalRead, SinceWindow};

impl Shape {
    /// The since this is, if it is one (`scalar_ir::window::SinceWindow`,
    /// the state machine every tier runs).
    pub fn since_window(&self) -> Option<SinceWindow> {
        match self.window.size {
            WindowSize::Since { lo_ns, hi_ns, cap } => Some(SinceWindow {
                lo_ns,
                hi_ns,
                cap,
                elem: self.elem,
            }),
            _ => None,
        }
    }

    fn since(&self) -> SinceWindow {
        self.since_window()
            .expect("engine bug: a since's words")
    }

    /// Enters the step's samples of φ and ψ (their bits; `None` where an
    /// operand has no value), once per step.
    pub fn since_push(
        &self,
        w: &mut [u64],
        step: u64,
        time: Time,
        phi: Option<u64>,
        psi: Option<u64>,
    ) {
        self.since().push(w, step, time.0, phi, psi);
    }

    /// The verdict at `time`: the best candidate's, or the vacuous false
    /// (-inf).
    pub(super) fn since_read(&self, w: &mut [u64], time: Time) -> Result<Sample, Fault> {
        let s = self.since();
        let bits = match s.read(w, time.0) {
            IntervalRead::Bits(b) => b,
            IntervalRead::Full => return Err(full_fault(s.cap)),
        };
        Ok(Sample::Value(match s.elem {
            Elem::Float => Value::Float(f64::from_bits(bits)),
            _ => Value::Bool(bits != 0),
        }))
    }

    /// Checks a since's words from a snapshot taken before step `step`.
    pub(super) fn since_restore(&self, w: &[u64], step: u64) -> Result<(), String> {
        self.since().restore(w, step)
    }

    /// `explain`'s description of a since.
    pub(super) fn since_describe(&self) -> String {
        let s = self.since();
        let zero = crate::lang::ast::duration_or_zero;
        let kept = match s.lo_ns {
            0 => "a monotonic deque of ψ's samples, each lowered by φ's after it".to_string(),
            lo => format!(
                "a monotonic deque of ψ's samples, each lowered by φ's after it, and those not yet {} old with a deque of φ's minima",
                zero(lo)
            ),
        };
        format!(
            "STL since [{}, {}]: {kept}, at most {} samples per ring, {} bytes, amortised O(1) per sample",
            zero(s.lo_ns),
            zero(s.hi_ns),
            s.cap,
            s.words() * 8
        )
    }
}
