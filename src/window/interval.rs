//! A past-time STL operator's window (docs/language.md, "STL inside a specification"): the samples of the last `[t - hi, t - lo]`, as a monotonic deque in a fixed block of words.
//!
//! `G[lo, hi] φ` at time `t` is the minimum (`all` for a Bool) of φ's
//! samples whose time lies in `[t - hi, t - lo]`, `F[lo, hi] φ` the maximum
//! (`any`). The words hold two rings of `cap` samples (time, value bits):
//! the **pending** samples, newer than `t - lo` (not in the interval yet, a
//! FIFO), and the **deque**, the samples of the interval that some later
//! sample has not beaten, oldest first, so its front is the result. A
//! sample moves from pending to the deque once it is `lo` old, dropping the
//! samples at the deque's back it beats (of equal values the latest wins),
//! and leaves the deque's front once it is more than `hi` old: amortised
//! O(1) per sample. A window that would keep more than `cap` samples has
//! overflowed: its next read is a runtime error naming the bound, never a
//! silently wrong verdict.
//!
//! Time never goes back for a window: an earlier time counts as the latest
//! one seen. A NaN robustness enters nothing (as `min`/`max` skip NaN).
//! Slots a sample has left are zero, so the words are a function of the
//! samples kept, which `restore` checks.
//!
//! The state machine itself is `scalar_ir::window::IntervalWindow`, which
//! the quickened and native tiers run on the same words; this module maps
//! its reads to samples and its overflow to the runtime error.

use super::Shape;
use crate::error::{ErrorKind, Fault};
use crate::lang::ast::{Aggregate, WindowSize};
use crate::time::Time;
use crate::value::{Sample, Value};
use scalar_ir::window::{IntervalRead, IntervalWindow};

/// The runtime error of an interval that has had to keep more than `cap`
/// samples: the canonical tier's, and the fused tiers' for their trap.
pub fn full_fault(cap: u32) -> Fault {
    Fault {
        kind: ErrorKind::WindowFull,
        op: "STL operator",
        detail: Some(format!(
            "its interval holds more than {cap} samples (raise the bound: `stl(φ, N)`)"
        )),
    }
}

impl Shape {
    /// The interval window this is, if it is one (`scalar_ir::window::
    /// IntervalWindow`, the state machine every tier runs).
    pub fn interval_window(&self) -> Option<IntervalWindow> {
        match self.window.size {
            WindowSize::Interval { lo_ns, hi_ns, cap } => Some(IntervalWindow {
                lo_ns,
                hi_ns,
                cap,
                agg: self.window.agg,
                elem: self.elem,
            }),
            _ => None,
        }
    }

    fn interval(&self) -> IntervalWindow {
        self.interval_window()
            .expect("engine bug: an interval window's words")
    }

    /// Enters a sample (see `Shape::push`).
    pub(super) fn interval_push(&self, w: &mut [u64], step: u64, time: Time, bits: u64) {
        self.interval().push(w, step, time.0, bits);
    }

    /// The verdict at `time`: the deque's front, or the empty interval's
    /// (`G`: true, +inf; `F`: false, -inf).
    pub(super) fn interval_read(&self, w: &mut [u64], time: Time) -> Result<Sample, Fault> {
        let iv = self.interval();
        let bits = match iv.read(w, time.0) {
            IntervalRead::Bits(b) => b,
            IntervalRead::Full => return Err(full_fault(iv.cap)),
        };
        Ok(Sample::Value(match self.window.agg {
            Aggregate::All | Aggregate::Any => Value::Bool(bits != 0),
            _ => Value::Float(f64::from_bits(bits)),
        }))
    }

    /// Checks an interval window's words from a snapshot taken before step
    /// `step`: everything here is state, so nothing is rebuilt.
    pub(super) fn interval_restore(&self, w: &[u64], step: u64) -> Result<(), String> {
        self.interval().restore(w, step)
    }

    /// `explain`'s description of an interval window.
    pub(super) fn interval_describe(&self) -> String {
        let iv = self.interval();
        let zero = crate::lang::ast::duration_or_zero;
        let kept = match iv.lo_ns {
            0 => "a monotonic deque of samples".to_string(),
            lo => format!("a monotonic deque and the samples not yet {} old", zero(lo)),
        };
        format!(
            "STL interval [{}, {}]: {kept}, at most {} samples, {} bytes, amortised O(1) per sample",
            zero(iv.lo_ns),
            zero(iv.hi_ns),
            iv.cap,
            iv.words() * 8
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::ast::Window;
    use scalar_ir::window::Elem;

    fn shape(agg: Aggregate, lo: i64, hi: i64, cap: u32) -> Shape {
        let elem = match agg {
            Aggregate::All | Aggregate::Any => Elem::Bool,
            _ => Elem::Float,
        };
        Shape {
            window: Window {
                size: WindowSize::Interval {
                    lo_ns: lo * 1_000_000_000,
                    hi_ns: hi * 1_000_000_000,
                    cap,
                },
                agg,
            },
            elem,
        }
    }

    fn secs(t: i64) -> Time {
        Time(t * 1_000_000_000)
    }

    /// `G[1, 2]` over samples at 0 … 5 s reads the minimum of those 1 to 2
    /// seconds old, and an empty interval's +inf before any is.
    #[test]
    fn lagged_minimum_over_its_interval() {
        let s = shape(Aggregate::Min, 1, 2, 4);
        let mut w = vec![0; s.words()];
        let values = [5.0, 3.0, 4.0, 9.0, 1.0, 7.0];
        let mut got = Vec::new();
        for (k, v) in values.into_iter().enumerate() {
            s.push(&mut w, k as u64, secs(k as i64), f64::to_bits(v));
            match s.read(&mut w, secs(k as i64)).unwrap() {
                Sample::Value(Value::Float(f)) => got.push(f),
                other => panic!("{other:?}"),
            }
            s.restore(&mut w.clone(), k as u64 + 1).unwrap();
        }
        assert_eq!(got, [f64::INFINITY, 5.0, 3.0, 3.0, 4.0, 1.0]);
    }

    /// More samples than the bound is an error at the read, never a wrong
    /// verdict; samples a later one beats take no room (the deque keeps
    /// only those that can still be the minimum).
    #[test]
    fn overflow_is_an_error() {
        let s = shape(Aggregate::Min, 0, 10, 2);
        let mut w = vec![0; s.words()];
        for k in 0..3 {
            s.push(&mut w, k, secs(k as i64), f64::to_bits(3.0 - k as f64));
        }
        assert!(s.read(&mut w, secs(2)).is_ok(), "a falling signal keeps one sample");
        let mut w = vec![0; s.words()];
        for k in 0..3 {
            s.push(&mut w, k, secs(k as i64), f64::to_bits(k as f64));
        }
        let e = s.read(&mut w, secs(2)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::WindowFull);
    }

    /// A snapshot whose deque is not monotonic, or whose free slots hold a
    /// sample, is refused.
    #[test]
    fn restore_refuses_broken_deques() {
        let s = shape(Aggregate::Any, 0, 10, 3);
        let mut w = vec![0; s.words()];
        s.push(&mut w, 0, secs(0), 1);
        s.push(&mut w, 1, secs(1), 0);
        s.restore(&mut w.clone(), 2).unwrap();
        let mut broken = w.clone();
        broken[8 + 2 * 3 + 5] = 1;
        assert!(s.restore(&mut broken, 2).is_err());
        let mut broken = w.clone();
        broken[8 + 2 * 3 + 3] = 1;
        assert!(s.restore(&mut broken, 2).is_err(), "equal values: the latest wins");
    }
}
