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

use super::Shape;
use crate::error::{ErrorKind, Fault};
use crate::lang::ast::Aggregate;
use crate::time::Time;
use crate::value::{Sample, Value};
use scalar_ir::window::Elem;

const PUSHED_AT: usize = 0;
const LATEST: usize = 1;
const STARTED: usize = 2;
const OVERFLOW: usize = 3;
const PENDING_HEAD: usize = 4;
const PENDING_LEN: usize = 5;
const DEQUE_HEAD: usize = 6;
const DEQUE_LEN: usize = 7;
const RINGS: usize = 8;

/// An interval window's bounds, as its `Shape` gives them.
#[derive(Clone, Copy, Debug)]
pub struct Interval {
    pub lo_ns: i64,
    pub hi_ns: i64,
    pub cap: u32,
}

/// Which of the two rings.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ring {
    Pending,
    Deque,
}

impl Interval {
    /// The words of the window's state.
    pub fn words(self) -> usize {
        RINGS + 4 * self.cap as usize
    }

    fn cap(self) -> usize {
        self.cap as usize
    }

    /// The words `(head, len)` of a ring and its first slot's word.
    fn layout(self, ring: Ring) -> (usize, usize, usize) {
        match ring {
            Ring::Pending => (PENDING_HEAD, PENDING_LEN, RINGS),
            Ring::Deque => (DEQUE_HEAD, DEQUE_LEN, RINGS + 2 * self.cap()),
        }
    }

    /// The word of the `i`-th sample (from the front) of a ring.
    fn at(self, w: &[u64], ring: Ring, i: usize) -> usize {
        let (head, _, base) = self.layout(ring);
        base + 2 * ((w[head] as usize + i) % self.cap())
    }

    fn len(self, w: &[u64], ring: Ring) -> usize {
        w[self.layout(ring).1] as usize
    }

    /// Appends a sample; false if the ring is full.
    fn push_back(self, w: &mut [u64], ring: Ring, time: i64, bits: u64) -> bool {
        let n = self.len(w, ring);
        if n == self.cap() {
            return false;
        }
        let at = self.at(w, ring, n);
        (w[at], w[at + 1]) = (time as u64, bits);
        w[self.layout(ring).1] += 1;
        true
    }

    fn front(self, w: &[u64], ring: Ring) -> Option<(i64, u64)> {
        (self.len(w, ring) > 0).then(|| {
            let at = self.at(w, ring, 0);
            (w[at] as i64, w[at + 1])
        })
    }

    fn back(self, w: &[u64], ring: Ring) -> Option<u64> {
        let n = self.len(w, ring);
        (n > 0).then(|| w[self.at(w, ring, n - 1) + 1])
    }

    fn pop_front(self, w: &mut [u64], ring: Ring) {
        let at = self.at(w, ring, 0);
        (w[at], w[at + 1]) = (0, 0);
        let (head, len, _) = self.layout(ring);
        w[head] = (w[head] + 1) % self.cap as u64;
        w[len] -= 1;
    }

    fn pop_back(self, w: &mut [u64], ring: Ring) {
        let n = self.len(w, ring);
        let at = self.at(w, ring, n - 1);
        (w[at], w[at + 1]) = (0, 0);
        w[self.layout(ring).1] -= 1;
    }
}

/// Whether value `new` beats `old` for the aggregate (or equals it: of
/// equal values the latest wins), so that `old` can never be the result
/// again once `new` is in the interval.
fn beats(agg: Aggregate, elem: Elem, new: u64, old: u64) -> bool {
    let min = matches!(agg, Aggregate::Min | Aggregate::All);
    match elem {
        Elem::Float => {
            let (n, o) = (f64::from_bits(new), f64::from_bits(old));
            if min { n <= o } else { n >= o }
        }
        _ => {
            if min {
                new <= old
            } else {
                new >= old
            }
        }
    }
}

impl Shape {
    fn interval(&self) -> Interval {
        match self.window.size {
            crate::lang::ast::WindowSize::Interval { lo_ns, hi_ns, cap } => {
                Interval { lo_ns, hi_ns, cap }
            }
            _ => unreachable!("an interval window's words"),
        }
    }

    /// The window's time at `time`: the latest time it has seen.
    fn interval_clock(w: &mut [u64], time: Time) -> i64 {
        if w[STARTED] == 0 {
            (w[STARTED], w[LATEST]) = (1, time.0 as u64);
        } else if time.0 > w[LATEST] as i64 {
            w[LATEST] = time.0 as u64;
        }
        w[LATEST] as i64
    }

    /// Moves the samples `lo` old into the deque and drops those more than
    /// `hi` old, at time `now`.
    fn interval_settle(&self, w: &mut [u64], now: i64) {
        let iv = self.interval();
        let agg = self.window.agg;
        while let Some((t, bits)) = iv.front(w, Ring::Pending) {
            if t > now.saturating_sub(iv.lo_ns) {
                break;
            }
            iv.pop_front(w, Ring::Pending);
            while iv
                .back(w, Ring::Deque)
                .is_some_and(|old| beats(agg, self.elem, bits, old))
            {
                iv.pop_back(w, Ring::Deque);
            }
            if !iv.push_back(w, Ring::Deque, t, bits) {
                w[OVERFLOW] = 1;
            }
        }
        while iv
            .front(w, Ring::Deque)
            .is_some_and(|(t, _)| t < now.saturating_sub(iv.hi_ns))
        {
            iv.pop_front(w, Ring::Deque);
        }
    }

    /// Enters a sample (see `Shape::push`).
    pub(super) fn interval_push(&self, w: &mut [u64], step: u64, time: Time, bits: u64) {
        if w[PUSHED_AT] == step + 1 {
            return;
        }
        w[PUSHED_AT] = step + 1;
        let now = Self::interval_clock(w, time);
        let nan = self.elem == Elem::Float && f64::from_bits(bits).is_nan();
        if !nan && !self.interval().push_back(w, Ring::Pending, now, bits) {
            w[OVERFLOW] = 1;
        }
        self.interval_settle(w, now);
    }

    /// The verdict at `time`: the deque's front, or the empty interval's
    /// (`G`: true, +inf; `F`: false, -inf).
    pub(super) fn interval_read(&self, w: &mut [u64], time: Time) -> Result<Sample, Fault> {
        let now = Self::interval_clock(w, time);
        self.interval_settle(w, now);
        if w[OVERFLOW] != 0 {
            return Err(Fault {
                kind: ErrorKind::WindowFull,
                op: "STL operator",
                detail: Some(format!(
                    "its interval holds more than {} samples (raise the bound: `stl(φ, N)`)",
                    self.interval().cap
                )),
            });
        }
        let agg = self.window.agg;
        let front = self.interval().front(w, Ring::Deque).map(|(_, b)| b);
        Ok(Sample::Value(match (agg, front) {
            (Aggregate::All | Aggregate::Any, Some(b)) => Value::Bool(b != 0),
            (Aggregate::All, None) => Value::Bool(true),
            (Aggregate::Any, None) => Value::Bool(false),
            (_, Some(b)) => Value::Float(f64::from_bits(b)),
            (Aggregate::Min, None) => Value::Float(f64::INFINITY),
            (_, None) => Value::Float(f64::NEG_INFINITY),
        }))
    }

    /// Checks an interval window's words from a snapshot taken before step
    /// `step`: everything here is state, so nothing is rebuilt.
    pub(super) fn interval_restore(&self, w: &[u64], step: u64) -> Result<(), String> {
        let iv = self.interval();
        if w[PUSHED_AT] > step || w[STARTED] > 1 || w[OVERFLOW] > 1 {
            return Err("a push, start or overflow that no run makes".into());
        }
        if w[STARTED] == 0 && w.iter().any(|&x| x != 0) {
            return Err("state in a window that never started".into());
        }
        let latest = w[LATEST] as i64;
        let mut live = vec![false; 2 * iv.cap()];
        let mut last_time = i64::MIN;
        for ring in [Ring::Deque, Ring::Pending] {
            let (head, len, _) = iv.layout(ring);
            if w[head] >= u64::from(iv.cap) || w[len] > u64::from(iv.cap) {
                return Err("a ring's head or length past its capacity".into());
            }
            let mut prev: Option<u64> = None;
            for i in 0..iv.len(w, ring) {
                let at = iv.at(w, ring, i);
                live[(at - RINGS) / 2] = true;
                let (t, bits) = (w[at] as i64, w[at + 1]);
                if t < last_time || t > latest {
                    return Err("samples out of time order".into());
                }
                last_time = t;
                if self.elem == Elem::Bool && bits > 1 {
                    return Err("a Bool that is neither 0 nor 1".into());
                }
                if self.elem == Elem::Float && f64::from_bits(bits).is_nan() {
                    return Err("a NaN, which no window keeps".into());
                }
                if ring == Ring::Deque
                    && let Some(old) = prev
                    && beats(self.window.agg, self.elem, bits, old)
                {
                    return Err("a deque that is not monotonic".into());
                }
                prev = Some(bits);
            }
        }
        for (slot, used) in live.iter().enumerate() {
            let at = RINGS + 2 * slot;
            if !used && (w[at] != 0 || w[at + 1] != 0) {
                return Err(format!("slot {slot} is free but holds a sample"));
            }
        }
        Ok(())
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
    use crate::lang::ast::{Window, WindowSize};

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
        broken[RINGS + 2 * 3 + 5] = 1;
        assert!(s.restore(&mut broken, 2).is_err());
        let mut broken = w.clone();
        broken[RINGS + 2 * 3 + 3] = 1;
        assert!(s.restore(&mut broken, 2).is_err(), "equal values: the latest wins");
    }
}
