//! A past-time STL since `φ S[lo, hi] ψ` as a fixed block of words, shared by every tier.
//!
//! At a step of time `t`, `φ S[lo, hi] ψ` holds iff some sample of ψ at a
//! time `t'` in `[t - hi, t - lo]` is true and every sample of φ after it
//! (at a later step, up to and including this one) is true. Its robustness
//! is the maximum over those samples of `min(ψ(t'), min of φ after t')`,
//! and with no such sample it is false (-inf). Over Bools (0 and 1) the
//! verdict is the same formula, `min` being `&&` and `max` `||`, so one
//! algorithm serves both.
//!
//! Each ψ sample is a **candidate**, whose value is `min(ψ(t'), φ's samples
//! after it)`. The words hold three rings:
//!
//! - the **pending** candidates, not yet `lo` old: (time, step, ψ) in time
//!   order, a FIFO;
//! - the **φ deque**: φ's samples since the oldest pending candidate that
//!   no later sample undercuts, increasing from the front, so the minimum
//!   of φ after a candidate is the first entry at a later step;
//! - the **deque**: the candidates in the interval that no later candidate
//!   beats, decreasing from the front (of equal values the latest wins), so
//!   its front is the result.
//!
//! A φ sample `x` lowers every candidate to at most `x`. In the deque those
//! above `x` are a prefix from its front: they become one entry, `x` at the
//! latest of their times (the others, older with the same value, are
//! beaten by it), so the deque stays monotonic. A pending candidate moves
//! into the deque once `lo` old, its value lowered by the φ deque's minimum
//! after it, and a candidate leaves the deque's front once more than `hi`
//! old. Every entry enters and leaves each ring once: amortised O(1) per
//! sample. A ring that would keep more than `cap` entries has overflowed:
//! the next read is [`IntervalRead::Full`], never a silently wrong verdict.
//!
//! Time never goes back: an earlier time counts as the latest one seen. A
//! NaN robustness is no sample. Slots an entry has left are zero, so the
//! words are a function of the entries kept, which [`SinceWindow::restore`]
//! checks. Nothing here can panic on words of the right length, whatever
//! they hold (every ring index is reduced modulo the capacity, every count
//! wraps), since the native helper calls it from JIT code, which no unwind
//! may cross.

use super::{Elem, IntervalRead};

const PUSHED_AT: usize = 0;
const LATEST: usize = 1;
const STARTED: usize = 2;
const OVERFLOW: usize = 3;
const HEADER: usize = 10;

/// A ring of the since's words: where its head and length live, where its
/// slots start, and how many words a slot has.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ring {
    /// (time, step + 1, ψ) of the candidates not yet `lo` old.
    Pending,
    /// (step + 1, φ) of φ's samples, increasing.
    Phi,
    /// (time, value) of the candidates in the interval, decreasing.
    Deque,
}

/// A since window: its interval, capacity and element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SinceWindow {
    /// The interval's near end: a ψ sample counts once this old.
    pub lo_ns: i64,
    /// The interval's far end: a ψ sample counts until more than this old.
    pub hi_ns: i64,
    /// The most entries each ring keeps (at least 1).
    pub cap: u32,
    /// `Bool` for `stl` (a verdict), `Float` for `stl_rob` (robustness).
    pub elem: Elem,
}

impl SinceWindow {
    /// Whether the window is one a program may run: a capacity, bounds in
    /// order, Bools or Floats.
    pub fn is_valid(&self) -> bool {
        self.cap > 0
            && 0 <= self.lo_ns
            && self.lo_ns <= self.hi_ns
            && matches!(self.elem, Elem::Bool | Elem::Float)
    }

    /// The number of words of its state.
    pub fn words(&self) -> usize {
        HEADER + 7 * self.cap as usize
    }

    fn cap(&self) -> usize {
        (self.cap as usize).max(1)
    }

    /// The words `(head, len)` of a ring, its first slot's word and its
    /// slot's width.
    fn layout(&self, ring: Ring) -> (usize, usize, usize, usize) {
        let cap = self.cap();
        match ring {
            Ring::Pending => (4, 5, HEADER, 3),
            Ring::Phi => (6, 7, HEADER + 3 * cap, 2),
            Ring::Deque => (8, 9, HEADER + 5 * cap, 2),
        }
    }

    /// The first word of the `i`-th entry (from the front) of a ring.
    fn at(&self, w: &[u64], ring: Ring, i: usize) -> usize {
        let (head, _, base, width) = self.layout(ring);
        let cap = self.cap();
        let slot = ((w[head] % cap as u64) as usize + i % cap) % cap;
        base + width * slot
    }

    fn len(&self, w: &[u64], ring: Ring) -> usize {
        w[self.layout(ring).1].min(self.cap() as u64) as usize
    }

    /// The entry `i` of a ring: its first two words and, for a pending
    /// candidate, its value.
    fn entry(&self, w: &[u64], ring: Ring, i: usize) -> (u64, u64, u64) {
        let at = self.at(w, ring, i);
        match ring {
            Ring::Pending => (w[at], w[at + 1], w[at + 2]),
            _ => (w[at], 0, w[at + 1]),
        }
    }

    /// Writes entry `i` of a ring (`key` and `value`; `step` for a
    /// pending candidate).
    fn set(&self, w: &mut [u64], ring: Ring, i: usize, key: u64, step: u64, value: u64) {
        let at = self.at(w, ring, i);
        w[at] = key;
        match ring {
            Ring::Pending => (w[at + 1], w[at + 2]) = (step, value),
            _ => w[at + 1] = value,
        }
    }

    fn clear(&self, w: &mut [u64], ring: Ring, i: usize) {
        let at = self.at(w, ring, i);
        let width = self.layout(ring).3;
        w[at..at + width].fill(0);
    }

    /// Appends an entry, or marks the window overflowed where the ring is
    /// full.
    fn push_back(&self, w: &mut [u64], ring: Ring, key: u64, step: u64, value: u64) {
        let n = self.len(w, ring);
        if n == self.cap() {
            w[OVERFLOW] = 1;
            return;
        }
        self.set(w, ring, n, key, step, value);
        w[self.layout(ring).1] = n as u64 + 1;
    }

    /// Drops the front entry of a ring that holds one.
    fn pop_front(&self, w: &mut [u64], ring: Ring) {
        let n = self.len(w, ring);
        self.clear(w, ring, 0);
        let (head, len, _, _) = self.layout(ring);
        w[head] = (w[head] % self.cap() as u64 + 1) % self.cap() as u64;
        w[len] = n.saturating_sub(1) as u64;
    }

    /// Drops the back entry of a ring that holds one.
    fn pop_back(&self, w: &mut [u64], ring: Ring) {
        let n = self.len(w, ring);
        self.clear(w, ring, n.wrapping_sub(1));
        w[self.layout(ring).1] = n.saturating_sub(1) as u64;
    }

    /// Puts an entry before the front of a ring that has room.
    fn push_front(&self, w: &mut [u64], ring: Ring, key: u64, value: u64) {
        let (head, len, _, _) = self.layout(ring);
        let cap = self.cap() as u64;
        w[head] = (w[head] % cap + cap - 1) % cap;
        w[len] = (self.len(w, ring) as u64 + 1).min(cap);
        self.set(w, ring, 0, key, 0, value);
    }

    /// Whether value `a` is at most `b` (Floats as floats, Bools as
    /// integers).
    fn le(&self, a: u64, b: u64) -> bool {
        match self.elem {
            Elem::Float => f64::from_bits(a) <= f64::from_bits(b),
            _ => (a as i64) <= (b as i64),
        }
    }

    /// The window's time at `time`: the latest time it has seen.
    fn clock(w: &mut [u64], time: i64) -> i64 {
        if w[STARTED] == 0 {
            (w[STARTED], w[LATEST]) = (1, time as u64);
        } else if time > w[LATEST] as i64 {
            w[LATEST] = time as u64;
        }
        w[LATEST] as i64
    }

    /// Whether `bits` is a sample (a NaN robustness is none).
    fn is_sample(&self, bits: u64) -> bool {
        !(self.elem == Elem::Float && f64::from_bits(bits).is_nan())
    }

    /// A φ sample `x` at the step `key` (step + 1): lowers the candidates
    /// in the deque to at most `x`, and enters the φ deque if a pending
    /// candidate will need it.
    fn phi(&self, w: &mut [u64], key: u64, x: u64) {
        let mut latest = None;
        while self.len(w, Ring::Deque) > 0 {
            let (t, _, v) = self.entry(w, Ring::Deque, 0);
            if !self.le(x, v) {
                break;
            }
            latest = Some(t);
            self.pop_front(w, Ring::Deque);
        }
        if let Some(t) = latest {
            // The lowered prefix is one entry: `x` at its latest time.
            self.push_front(w, Ring::Deque, t, x);
        }
        if self.len(w, Ring::Pending) == 0 {
            return;
        }
        while self.len(w, Ring::Phi) > 0 {
            let (_, _, v) = self.entry(w, Ring::Phi, self.len(w, Ring::Phi) - 1);
            if !self.le(x, v) {
                break;
            }
            self.pop_back(w, Ring::Phi);
        }
        self.push_back(w, Ring::Phi, key, 0, x);
    }

    /// Moves the candidates `lo` old into the deque and drops those more
    /// than `hi` old, at time `now`.
    fn settle(&self, w: &mut [u64], now: i64) {
        while self.len(w, Ring::Pending) > 0 {
            let (t, key, psi) = self.entry(w, Ring::Pending, 0);
            if t as i64 > now.saturating_sub(self.lo_ns) {
                break;
            }
            self.pop_front(w, Ring::Pending);
            // φ's samples at this candidate's step or before are not after
            // it, nor after any later candidate.
            while self.len(w, Ring::Phi) > 0 && self.entry(w, Ring::Phi, 0).0 <= key {
                self.pop_front(w, Ring::Phi);
            }
            let mut v = psi;
            if self.len(w, Ring::Phi) > 0 {
                let (_, _, m) = self.entry(w, Ring::Phi, 0);
                if self.le(m, v) {
                    v = m;
                }
            }
            while self.len(w, Ring::Deque) > 0 {
                let (_, _, old) = self.entry(w, Ring::Deque, self.len(w, Ring::Deque) - 1);
                if !self.le(old, v) {
                    break;
                }
                self.pop_back(w, Ring::Deque);
            }
            self.push_back(w, Ring::Deque, t, 0, v);
        }
        if self.len(w, Ring::Pending) == 0 {
            // No candidate needs φ's minimum any more.
            while self.len(w, Ring::Phi) > 0 {
                self.pop_front(w, Ring::Phi);
            }
        }
        while self.len(w, Ring::Deque) > 0
            && (self.entry(w, Ring::Deque, 0).0 as i64) < now.saturating_sub(self.hi_ns)
        {
            self.pop_front(w, Ring::Deque);
        }
    }

    /// Enters the step's samples of φ and ψ (`None` where the operand has
    /// none) at `time` (nanoseconds), unless this step's are in already
    /// (the canonical tier pushes at the since's node and at the end of a
    /// row, and a row a kernel stopped on runs again canonically). φ's
    /// sample comes first: it is not after ψ's sample of the same step.
    pub fn push(&self, w: &mut [u64], step: u64, time: i64, phi: Option<u64>, psi: Option<u64>) {
        if w.len() != self.words() || w[PUSHED_AT] == step.wrapping_add(1) {
            return;
        }
        let key = step.wrapping_add(1);
        w[PUSHED_AT] = key;
        let now = Self::clock(w, time);
        if let Some(x) = phi.filter(|&x| self.is_sample(x)) {
            self.phi(w, key, x);
        }
        if let Some(y) = psi.filter(|&y| self.is_sample(y)) {
            self.push_back(w, Ring::Pending, now as u64, key, y);
        }
        self.settle(w, now);
    }

    /// The verdict at `time` (after this step's push, if any): the deque's
    /// front, the vacuous `false` (-inf), or [`IntervalRead::Full`].
    pub fn read(&self, w: &mut [u64], time: i64) -> IntervalRead {
        if w.len() != self.words() {
            return IntervalRead::Full;
        }
        let now = Self::clock(w, time);
        self.settle(w, now);
        if w[OVERFLOW] != 0 {
            return IntervalRead::Full;
        }
        IntervalRead::Bits(match (self.len(w, Ring::Deque), self.elem) {
            (0, Elem::Float) => f64::NEG_INFINITY.to_bits(),
            (0, _) => 0,
            _ => self.entry(w, Ring::Deque, 0).2,
        })
    }

    /// A fused since node's work: enter the step's samples, then read.
    pub fn step(
        &self,
        w: &mut [u64],
        step: u64,
        time: i64,
        phi: Option<u64>,
        psi: Option<u64>,
    ) -> IntervalRead {
        self.push(w, step, time, phi, psi);
        self.read(w, time)
    }

    /// Checks words from a snapshot taken before step `step`: everything
    /// here is state, so nothing is rebuilt.
    pub fn restore(&self, w: &[u64], step: u64) -> Result<(), String> {
        if w.len() != self.words() || self.cap == 0 {
            return Err(format!("{} words, the since has {}", w.len(), self.words()));
        }
        if w[PUSHED_AT] > step || w[STARTED] > 1 || w[OVERFLOW] > 1 {
            return Err("a push, start or overflow that no run makes".into());
        }
        if w[STARTED] == 0 && w.iter().any(|&x| x != 0) {
            return Err("state in a since that never started".into());
        }
        let mut live = vec![false; w.len()];
        for ring in [Ring::Pending, Ring::Phi, Ring::Deque] {
            let (head, len, _, width) = self.layout(ring);
            if w[head] >= u64::from(self.cap) || w[len] > u64::from(self.cap) {
                return Err("a ring's head or length past its capacity".into());
            }
            let mut prev: Option<(u64, u64)> = None;
            for i in 0..self.len(w, ring) {
                let at = self.at(w, ring, i);
                live[at..at + width].fill(true);
                let (key, key2, v) = self.entry(w, ring, i);
                self.check_entry(w, ring, (key, key2, v), prev)?;
                prev = Some((key, v));
            }
        }
        for (k, used) in live.iter().enumerate().skip(HEADER) {
            if !used && w[k] != 0 {
                return Err(format!("word {k} is free but holds a sample"));
            }
        }
        Ok(())
    }

    /// One entry's check against the one before it in its ring.
    fn check_entry(
        &self,
        w: &[u64],
        ring: Ring,
        (key, key2, v): (u64, u64, u64),
        prev: Option<(u64, u64)>,
    ) -> Result<(), String> {
        if self.elem == Elem::Bool && v > 1 {
            return Err("a Bool that is neither 0 nor 1".into());
        }
        if !self.is_sample(v) {
            return Err("a NaN, which no since keeps".into());
        }
        let latest = w[LATEST] as i64;
        let ordered = match ring {
            Ring::Pending => key as i64 <= latest && key2 <= w[PUSHED_AT],
            Ring::Phi => key <= w[PUSHED_AT],
            Ring::Deque => key as i64 <= latest,
        };
        let after = |p: Option<(u64, u64)>| match (ring, p) {
            (_, None) => true,
            (Ring::Pending, Some((k, _))) => k as i64 <= key as i64,
            (Ring::Phi, Some((k, pv))) => k < key && !self.le(v, pv),
            (Ring::Deque, Some((k, pv))) => k as i64 <= key as i64 && !self.le(pv, v),
        };
        if !ordered || !after(prev) {
            return Err(format!("{ring:?} entries out of order"));
        }
        Ok(())
    }

    /// The window's kind as one word (for an instruction's operand and the
    /// native helper's argument): `cap` and the element, as
    /// [`super::CountWindow::encode`] lays out `n`, an aggregate (`any` for
    /// Bools, `max` for Floats) and the element.
    pub fn encode_kind(&self) -> u64 {
        let agg = match self.elem {
            Elem::Float => super::Agg::Max,
            _ => super::Agg::Any,
        };
        super::CountWindow {
            n: self.cap,
            agg,
            elem: self.elem,
        }
        .encode()
    }

    /// The since of bounds `lo_ns`, `hi_ns` and a kind word of
    /// [`SinceWindow::encode_kind`]; `None` unless it is valid.
    pub fn decode(lo_ns: i64, hi_ns: i64, kind: u64) -> Option<SinceWindow> {
        let k = super::CountWindow::decode(kind)?;
        let w = SinceWindow {
            lo_ns,
            hi_ns,
            cap: k.n,
            elem: k.elem,
        };
        (w.is_valid() && w.encode_kind() == kind).then_some(w)
    }
}

#[cfg(test)]
mod tests;
