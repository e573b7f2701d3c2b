//! A past-time STL operator's interval window, shared by every tier: the samples of `[t - hi, t - lo]` as a monotonic deque in a fixed block of words.
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
//! overflowed: its next read is [`IntervalRead::Full`], never a silently
//! wrong verdict.
//!
//! Time never goes back for a window: an earlier time counts as the latest
//! one seen. A NaN robustness enters nothing (as `min`/`max` skip NaN).
//! Slots a sample has left are zero, so the words are a function of the
//! samples kept, which [`IntervalWindow::restore`] checks.
//!
//! A step runs on one of two paths that write the same words. Where the
//! rings' heads and lengths are as a run writes them (every head below the
//! capacity, every length at most it), the **fast path** holds them in
//! locals, picks the aggregate's comparison once, settles once per step
//! and lets a sample that is in the interval at once (`lo` 0: the common
//! `G[0, b]`/`F[0, b]`) skip the pending ring; anything else takes the
//! **general path**, every index reduced modulo the capacity. A test holds
//! the first to the second word for word.
//!
//! vigil's canonical tier (`window::interval`), the quickened interpreter
//! (the `interval` instruction) and native code (the helper
//! `vigil_jit_interval`) all run this one implementation on the same words.
//! Nothing here can panic on words of the right length, whatever they hold
//! (the fast path's indices stay below the capacity it checked, the general
//! path's are taken modulo it, every count wraps), since the
//! native helper calls it from JIT code, which no unwind may cross.

use super::{Agg, Elem, replaces};

const PUSHED_AT: usize = 0;
const LATEST: usize = 1;
const STARTED: usize = 2;
const OVERFLOW: usize = 3;
const PENDING_HEAD: usize = 4;
const PENDING_LEN: usize = 5;
const DEQUE_HEAD: usize = 6;
const DEQUE_LEN: usize = 7;
const RINGS: usize = 8;

/// The time of step `step` where a row has no time of its own: the step
/// index in seconds, in nanoseconds (saturating).
pub fn step_time(step: u64) -> i64 {
    (step as i64).saturating_mul(1_000_000_000)
}

/// An interval window: its bounds, capacity, aggregate and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IntervalWindow {
    /// The interval's near end: a sample enters it once this old.
    pub lo_ns: i64,
    /// The interval's far end: a sample leaves it once more than this old.
    pub hi_ns: i64,
    /// The most samples each ring keeps (at least 1).
    pub cap: u32,
    /// `all`/`any` over Bools (`G`/`F` of `stl`), `min`/`max` over Floats
    /// (of `stl_rob`).
    pub agg: Agg,
    pub elem: Elem,
}

/// What a read gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntervalRead {
    /// The result's bits: the deque's front, or the empty interval's
    /// (`G`: true, +inf; `F`: false, -inf).
    Bits(u64),
    /// The window has had to keep more than `cap` samples (a runtime
    /// error, `window full`).
    Full,
}

/// Which of the two rings.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ring {
    Pending,
    Deque,
}

/// The rings' heads and lengths in locals while a step runs, on rings
/// whose heads are below the capacity and lengths at most it.
#[derive(Clone, Copy)]
struct Heads {
    cap: usize,
    ph: usize,
    pl: usize,
    dh: usize,
    dl: usize,
}

impl Heads {
    /// A slot index below twice the capacity, back into the ring.
    #[inline]
    fn wrap(&self, i: usize) -> usize {
        if i >= self.cap { i - self.cap } else { i }
    }

    /// Moves the sample (`t`, `bits`) into the deque: drops the samples at
    /// its back that it beats, then appends it, or marks the window
    /// overflowed where the deque is full.
    #[inline(always)]
    fn enter<const FLOAT: bool, const MIN: bool>(&mut self, w: &mut [u64], t: i64, bits: u64) {
        let deque = RINGS + 2 * self.cap;
        while self.dl > 0 {
            let at = deque + 2 * self.wrap(self.dh + self.dl - 1);
            if !beats_as::<FLOAT, MIN>(bits, w[at + 1]) {
                break;
            }
            (w[at], w[at + 1]) = (0, 0);
            self.dl -= 1;
        }
        if self.dl == self.cap {
            w[OVERFLOW] = 1;
        } else {
            let at = deque + 2 * self.wrap(self.dh + self.dl);
            (w[at], w[at + 1]) = (t as u64, bits);
            self.dl += 1;
        }
    }
}

/// [`replaces`] with its element and direction fixed at compile time.
#[inline(always)]
fn beats_as<const FLOAT: bool, const MIN: bool>(new: u64, old: u64) -> bool {
    if FLOAT {
        let (n, o) = (f64::from_bits(new), f64::from_bits(old));
        if MIN { n <= o } else { n >= o }
    } else {
        let (n, o) = (new as i64, old as i64);
        if MIN { n <= o } else { n >= o }
    }
}

impl IntervalWindow {
    /// Whether the window is one a program may run: a capacity, bounds in
    /// order, and `all`/`any` over Bools or `min`/`max` over Floats (what
    /// `stl(…)` and `stl_rob(…)` make).
    pub fn is_valid(&self) -> bool {
        let kinds = matches!(
            (self.agg, self.elem),
            (Agg::All | Agg::Any, Elem::Bool) | (Agg::Min | Agg::Max, Elem::Float)
        );
        self.cap > 0 && 0 <= self.lo_ns && self.lo_ns <= self.hi_ns && kinds
    }

    /// The number of words of its state.
    pub fn words(&self) -> usize {
        RINGS + 4 * self.cap as usize
    }

    fn cap(&self) -> usize {
        (self.cap as usize).max(1)
    }

    /// The words `(head, len)` of a ring and its first slot's word.
    fn layout(&self, ring: Ring) -> (usize, usize, usize) {
        match ring {
            Ring::Pending => (PENDING_HEAD, PENDING_LEN, RINGS),
            Ring::Deque => (DEQUE_HEAD, DEQUE_LEN, RINGS + 2 * self.cap()),
        }
    }

    /// The word of the `i`-th sample (from the front) of a ring.
    #[inline]
    fn at(&self, w: &[u64], ring: Ring, i: usize) -> usize {
        let (head, _, base) = self.layout(ring);
        let (cap, h) = (self.cap(), w[head]);
        // The words a run writes keep `head < cap` and ask for `i < cap`:
        // one conditional subtraction (a division per access cost a tenth
        // of a row). Anything else, which no run writes, is reduced modulo
        // the capacity, so that no index leaves the ring.
        let slot = if h < cap as u64 && i < cap {
            let s = h as usize + i;
            if s >= cap { s - cap } else { s }
        } else {
            ((h % cap as u64) as usize + i % cap) % cap
        };
        base + 2 * slot
    }

    fn len(&self, w: &[u64], ring: Ring) -> usize {
        w[self.layout(ring).1].min(self.cap() as u64) as usize
    }

    /// Appends a sample; false if the ring is full.
    fn push_back(&self, w: &mut [u64], ring: Ring, time: i64, bits: u64) -> bool {
        let n = self.len(w, ring);
        if n == self.cap() {
            return false;
        }
        let at = self.at(w, ring, n);
        (w[at], w[at + 1]) = (time as u64, bits);
        w[self.layout(ring).1] = n as u64 + 1;
        true
    }

    fn front(&self, w: &[u64], ring: Ring) -> Option<(i64, u64)> {
        (self.len(w, ring) > 0).then(|| {
            let at = self.at(w, ring, 0);
            (w[at] as i64, w[at + 1])
        })
    }

    fn back(&self, w: &[u64], ring: Ring) -> Option<u64> {
        let n = self.len(w, ring);
        (n > 0).then(|| w[self.at(w, ring, n - 1) + 1])
    }

    /// Drops the front sample of a ring that holds one.
    fn pop_front(&self, w: &mut [u64], ring: Ring) {
        let n = self.len(w, ring);
        let at = self.at(w, ring, 0);
        (w[at], w[at + 1]) = (0, 0);
        let (head, len, _) = self.layout(ring);
        let (cap, h) = (self.cap() as u64, w[head]);
        w[head] = match h < cap - 1 {
            true => h + 1,
            false => (h % cap + 1) % cap,
        };
        w[len] = n.saturating_sub(1) as u64;
    }

    /// Drops the back sample of a ring that holds one.
    fn pop_back(&self, w: &mut [u64], ring: Ring) {
        let n = self.len(w, ring);
        let at = self.at(w, ring, n.wrapping_sub(1));
        (w[at], w[at + 1]) = (0, 0);
        w[self.layout(ring).1] = n.saturating_sub(1) as u64;
    }

    /// Whether value `new` beats `old` (or equals it: of equal values the
    /// latest wins), so that `old` can never be the result again once `new`
    /// is in the interval.
    fn beats(&self, new: u64, old: u64) -> bool {
        replaces(self.elem, new, old, matches!(self.agg, Agg::Min | Agg::All))
    }

    /// The window's time at `time`: the latest time it has seen.
    #[inline]
    fn clock(w: &mut [u64], time: i64) -> i64 {
        if w[STARTED] == 0 {
            (w[STARTED], w[LATEST]) = (1, time as u64);
        } else if time > w[LATEST] as i64 {
            w[LATEST] = time as u64;
        }
        w[LATEST] as i64
    }

    /// Moves the samples `lo` old into the deque and drops those more than
    /// `hi` old, at time `now`. Each sample moves and leaves once, so the
    /// loops are bounded by the rings' lengths.
    fn settle(&self, w: &mut [u64], now: i64) {
        while let Some((t, bits)) = self.front(w, Ring::Pending) {
            if t > now.saturating_sub(self.lo_ns) {
                break;
            }
            self.pop_front(w, Ring::Pending);
            while self
                .back(w, Ring::Deque)
                .is_some_and(|old| self.beats(bits, old))
            {
                self.pop_back(w, Ring::Deque);
            }
            if !self.push_back(w, Ring::Deque, t, bits) {
                w[OVERFLOW] = 1;
            }
        }
        while self
            .front(w, Ring::Deque)
            .is_some_and(|(t, _)| t < now.saturating_sub(self.hi_ns))
        {
            self.pop_front(w, Ring::Deque);
        }
    }

    /// Enters value `bits` of step `step` at time `time` (nanoseconds),
    /// unless a value of this step is in already (the canonical tier pushes
    /// at a window node and at the end of a row, and a row a kernel stopped
    /// on runs again canonically).
    #[inline]
    pub fn push(&self, w: &mut [u64], step: u64, time: i64, bits: u64) {
        if w[PUSHED_AT] == step.wrapping_add(1) {
            return;
        }
        w[PUSHED_AT] = step.wrapping_add(1);
        let now = Self::clock(w, time);
        match self.heads(w) {
            Some(h) => {
                self.run(w, h, now, Some(bits));
            }
            None => self.push_general(w, now, bits),
        }
    }

    /// [`IntervalWindow::push`]'s work after the clock on words whose rings
    /// are not as a run writes them: every index reduced modulo the
    /// capacity.
    fn push_general(&self, w: &mut [u64], now: i64, bits: u64) {
        let nan = self.elem == Elem::Float && f64::from_bits(bits).is_nan();
        if !nan && !self.push_back(w, Ring::Pending, now, bits) {
            w[OVERFLOW] = 1;
        }
        self.settle(w, now);
    }

    /// The verdict at `time` (after this step's push, if any): the deque's
    /// front, the empty interval's, or [`IntervalRead::Full`].
    #[inline]
    pub fn read(&self, w: &mut [u64], time: i64) -> IntervalRead {
        let now = Self::clock(w, time);
        match self.heads(w) {
            Some(h) => self.run(w, h, now, None),
            None => {
                self.settle(w, now);
                self.result(w)
            }
        }
    }

    /// The deque's front, the empty interval's value, or `Full`.
    #[inline]
    fn result(&self, w: &[u64]) -> IntervalRead {
        if w[OVERFLOW] != 0 {
            return IntervalRead::Full;
        }
        let min = matches!(self.agg, Agg::Min | Agg::All);
        IntervalRead::Bits(match (self.front(w, Ring::Deque), self.elem, min) {
            (Some((_, b)), _, _) => b,
            (None, Elem::Float, true) => f64::INFINITY.to_bits(),
            (None, Elem::Float, false) => f64::NEG_INFINITY.to_bits(),
            (None, _, true) => 1,
            (None, _, false) => 0,
        })
    }

    /// A fused window node's work: enter the step's value where `enter`,
    /// then read at `time`.
    #[inline]
    pub fn step(
        &self,
        w: &mut [u64],
        step: u64,
        time: i64,
        bits: u64,
        enter: bool,
    ) -> IntervalRead {
        // The push settles the rings at the step's time, so the read's
        // settle would find nothing to move: one pass does both.
        if enter && w[PUSHED_AT] != step.wrapping_add(1) {
            w[PUSHED_AT] = step.wrapping_add(1);
            let now = Self::clock(w, time);
            if let Some(h) = self.heads(w) {
                return self.run(w, h, now, Some(bits));
            }
            self.push_general(w, now, bits);
        }
        self.read(w, time)
    }

    /// The rings' heads and lengths where they are as a run writes them
    /// (every head below the capacity, every length at most it, the words
    /// of the window's length): then [`IntervalWindow::run`] may index the
    /// rings without reducing anything.
    #[inline]
    fn heads(&self, w: &[u64]) -> Option<Heads> {
        let cap = self.cap as usize;
        if cap == 0 || w.len() != self.words() {
            return None;
        }
        let c = u64::from(self.cap);
        let (ph, pl, dh, dl) = (w[PENDING_HEAD], w[PENDING_LEN], w[DEQUE_HEAD], w[DEQUE_LEN]);
        (ph < c && pl <= c && dh < c && dl <= c).then_some(Heads {
            cap,
            ph: ph as usize,
            pl: pl as usize,
            dh: dh as usize,
            dl: dl as usize,
        })
    }

    /// Enters `new` (if any) at time `now`, settles the rings and reads,
    /// on rings [`IntervalWindow::heads`] found in order: the same words
    /// [`IntervalWindow::push_general`] and [`IntervalWindow::settle`]
    /// write and the result [`IntervalWindow::result`] reads, with the
    /// aggregate's comparison chosen once rather than at every sample.
    #[inline]
    fn run(&self, w: &mut [u64], h: Heads, now: i64, new: Option<u64>) -> IntervalRead {
        match (
            self.elem == Elem::Float,
            matches!(self.agg, Agg::Min | Agg::All),
        ) {
            (true, true) => self.run_as::<true, true>(w, h, now, new),
            (true, false) => self.run_as::<true, false>(w, h, now, new),
            (false, true) => self.run_as::<false, true>(w, h, now, new),
            (false, false) => self.run_as::<false, false>(w, h, now, new),
        }
    }

    /// [`IntervalWindow::run`] for one comparison: `FLOAT` compares the
    /// values as floats (else as integers, as [`replaces`] does), `MIN`
    /// keeps the least.
    #[inline]
    fn run_as<const FLOAT: bool, const MIN: bool>(
        &self,
        w: &mut [u64],
        mut h: Heads,
        now: i64,
        new: Option<u64>,
    ) -> IntervalRead {
        let enters_at = now.saturating_sub(self.lo_ns);
        if let Some(bits) = new
            && !(FLOAT && f64::from_bits(bits).is_nan())
        {
            if h.pl == 0 && now <= enters_at {
                // The common case (`lo` is 0): the sample would pass
                // through the empty pending ring at once, its slot written
                // and zeroed again and the ring's head moved on.
                let at = RINGS + 2 * h.ph;
                (w[at], w[at + 1]) = (0, 0);
                h.ph = h.wrap(h.ph + 1);
                h.enter::<FLOAT, MIN>(w, now, bits);
            } else if h.pl == h.cap {
                w[OVERFLOW] = 1;
            } else {
                let at = RINGS + 2 * h.wrap(h.ph + h.pl);
                (w[at], w[at + 1]) = (now as u64, bits);
                h.pl += 1;
            }
        }
        while h.pl > 0 {
            let at = RINGS + 2 * h.ph;
            let t = w[at] as i64;
            if t > enters_at {
                break;
            }
            let bits = w[at + 1];
            (w[at], w[at + 1]) = (0, 0);
            (h.ph, h.pl) = (h.wrap(h.ph + 1), h.pl - 1);
            h.enter::<FLOAT, MIN>(w, t, bits);
        }
        let leaves_before = now.saturating_sub(self.hi_ns);
        let deque = RINGS + 2 * h.cap;
        while h.dl > 0 {
            let at = deque + 2 * h.dh;
            if w[at] as i64 >= leaves_before {
                break;
            }
            (w[at], w[at + 1]) = (0, 0);
            (h.dh, h.dl) = (h.wrap(h.dh + 1), h.dl - 1);
        }
        (w[PENDING_HEAD], w[PENDING_LEN]) = (h.ph as u64, h.pl as u64);
        (w[DEQUE_HEAD], w[DEQUE_LEN]) = (h.dh as u64, h.dl as u64);
        match (w[OVERFLOW], h.dl, FLOAT, MIN) {
            (0, 0, true, true) => IntervalRead::Bits(f64::INFINITY.to_bits()),
            (0, 0, true, false) => IntervalRead::Bits(f64::NEG_INFINITY.to_bits()),
            (0, 0, false, min) => IntervalRead::Bits(u64::from(min)),
            (0, _, _, _) => IntervalRead::Bits(w[deque + 2 * h.dh + 1]),
            _ => IntervalRead::Full,
        }
    }

    /// The step as it was before [`IntervalWindow::run`]: every ring index
    /// reduced modulo the capacity, the push and the read settling apart.
    /// The tests hold the fast path to it word for word.
    #[cfg(test)]
    fn step_general(
        &self,
        w: &mut [u64],
        step: u64,
        time: i64,
        bits: u64,
        enter: bool,
    ) -> IntervalRead {
        if enter && w[PUSHED_AT] != step.wrapping_add(1) {
            w[PUSHED_AT] = step.wrapping_add(1);
            let now = Self::clock(w, time);
            self.push_general(w, now, bits);
        }
        let now = Self::clock(w, time);
        self.settle(w, now);
        self.result(w)
    }

    /// Checks words from a snapshot taken before step `step`: everything
    /// here is state, so nothing is rebuilt.
    pub fn restore(&self, w: &[u64], step: u64) -> Result<(), String> {
        if w.len() != self.words() || self.cap == 0 {
            return Err(format!(
                "{} words, the window has {}",
                w.len(),
                self.words()
            ));
        }
        if w[PUSHED_AT] > step || w[STARTED] > 1 || w[OVERFLOW] > 1 {
            return Err("a push, start or overflow that no run makes".into());
        }
        if w[STARTED] == 0 && w.iter().any(|&x| x != 0) {
            return Err("state in a window that never started".into());
        }
        let latest = w[LATEST] as i64;
        let mut live = vec![false; 2 * self.cap()];
        let mut last_time = i64::MIN;
        for ring in [Ring::Deque, Ring::Pending] {
            let (head, len, _) = self.layout(ring);
            if w[head] >= u64::from(self.cap) || w[len] > u64::from(self.cap) {
                return Err("a ring's head or length past its capacity".into());
            }
            let mut prev: Option<u64> = None;
            for i in 0..self.len(w, ring) {
                let at = self.at(w, ring, i);
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
                    && self.beats(bits, old)
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

    /// The window's kind as one word (for an instruction's operand and the
    /// native helper's argument): `cap`, the aggregate and the element, as
    /// [`super::CountWindow::encode`] lays out `n`, the aggregate and the
    /// element.
    pub fn encode_kind(&self) -> u64 {
        super::CountWindow {
            n: self.cap,
            agg: self.agg,
            elem: self.elem,
        }
        .encode()
    }

    /// The window of bounds `lo_ns`, `hi_ns` and a kind word of
    /// [`IntervalWindow::encode_kind`]; `None` unless it is valid.
    #[inline]
    pub fn decode(lo_ns: i64, hi_ns: i64, kind: u64) -> Option<IntervalWindow> {
        let k = super::CountWindow::decode(kind)?;
        let w = IntervalWindow {
            lo_ns,
            hi_ns,
            cap: k.n,
            agg: k.agg,
            elem: k.elem,
        };
        w.is_valid().then_some(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::Gen;

    fn window(agg: Agg, lo: i64, hi: i64, cap: u32) -> IntervalWindow {
        let elem = match agg {
            Agg::All | Agg::Any => Elem::Bool,
            _ => Elem::Float,
        };
        IntervalWindow {
            lo_ns: lo * 1_000_000_000,
            hi_ns: hi * 1_000_000_000,
            cap,
            agg,
            elem,
        }
    }

    fn float(r: IntervalRead) -> f64 {
        match r {
            IntervalRead::Bits(b) => f64::from_bits(b),
            IntervalRead::Full => panic!("full"),
        }
    }

    /// `G[1, 2]` over samples at 0 … 5 s reads the minimum of those 1 to 2
    /// seconds old, and an empty interval's +inf before any is.
    #[test]
    fn lagged_minimum_over_its_interval() {
        let s = window(Agg::Min, 1, 2, 4);
        let mut w = vec![0; s.words()];
        let values = [5.0, 3.0, 4.0, 9.0, 1.0, 7.0];
        let mut got = Vec::new();
        for (k, v) in values.into_iter().enumerate() {
            let t = step_time(k as u64);
            got.push(float(s.step(&mut w, k as u64, t, f64::to_bits(v), true)));
            s.restore(&w, k as u64 + 1).unwrap();
        }
        assert_eq!(got, [f64::INFINITY, 5.0, 3.0, 3.0, 4.0, 1.0]);
    }

    /// More samples than the bound is `Full` at the read, never a wrong
    /// verdict; samples a later one beats take no room.
    #[test]
    fn overflow_is_full() {
        let s = window(Agg::Min, 0, 10, 2);
        let mut w = vec![0; s.words()];
        for k in 0..3 {
            s.push(&mut w, k, step_time(k), f64::to_bits(3.0 - k as f64));
        }
        assert!(matches!(
            s.read(&mut w, step_time(2)),
            IntervalRead::Bits(_)
        ));
        let mut w = vec![0; s.words()];
        for k in 0..3 {
            s.push(&mut w, k, step_time(k), f64::to_bits(k as f64));
        }
        assert_eq!(s.read(&mut w, step_time(2)), IntervalRead::Full);
    }

    /// A step's push enters once, and a read at the same time changes
    /// nothing: a row a kernel declined runs again canonically on the
    /// same words.
    #[test]
    fn push_and_read_are_idempotent_within_a_step() {
        let s = window(Agg::Any, 0, 1, 3);
        let mut w = vec![0; s.words()];
        s.step(&mut w, 0, 5, 1, true);
        let once = w.clone();
        s.step(&mut w, 0, 5, 1, true);
        assert_eq!(w, once);
    }

    /// Whatever the words hold, a step neither panics nor leaves its words'
    /// length (the native helper's guarantee).
    #[test]
    fn arbitrary_words_never_panic() {
        let s = window(Agg::Max, 0, 3, 3);
        for seed in 0..200u64 {
            let mut w: Vec<u64> = (0..s.words() as u64)
                .map(|i| (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i).rotate_left(i as u32))
                .collect();
            s.step(
                &mut w,
                seed,
                seed as i64 * 7,
                f64::to_bits(1.0),
                seed % 2 == 0,
            );
        }
    }

    /// The fast path (`run`, the rings in locals, `lo` 0's sample skipping
    /// the pending ring, one settle per step) writes the words and reads
    /// the results the general path does, on random windows (every
    /// aggregate, `lo` 0 and not, small capacities that overflow), times
    /// that stall and go back, repeated steps, absent and NaN values,
    /// separate pushes and reads, and words a run never writes. It fails
    /// if the fast path never ran, or the `lo` 0 shortcut never did.
    #[test]
    fn the_fast_path_writes_what_the_general_path_writes() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        let (mut fast, mut shortcut) = (0, 0);
        for case in 0..3000 {
            let agg = [Agg::Min, Agg::Max, Agg::All, Agg::Any][g.below(4) as usize];
            let lo = if g.below(2) == 0 {
                0
            } else {
                g.below(4) as i64
            };
            let s = window(agg, lo, lo + g.below(5) as i64, 1 + g.below(6) as u32);
            let mut a = vec![0; s.words()];
            if case % 10 == 9 {
                // Words no run writes: heads and lengths past the
                // capacity (the general path) or free slots holding
                // samples (the fast one).
                for x in a.iter_mut() {
                    *x = if g.below(3) == 0 { g.next() % 9 } else { 0 };
                }
            }
            let mut b = a.clone();
            let (mut step, mut time) = (0u64, 0i64);
            for _ in 0..60 {
                if g.below(4) != 0 {
                    step += 1;
                }
                time += match g.below(8) {
                    0 => -1_000_000_000,
                    1 | 2 => 0,
                    _ => 500_000_000 * g.below(3) as i64,
                };
                let bits = match (s.elem, g.below(10)) {
                    (Elem::Float, 0) => f64::NAN.to_bits(),
                    (Elem::Float, _) => (g.below(5) as f64 - 2.0).to_bits(),
                    _ => g.below(2),
                };
                if s.heads(&a).is_some() {
                    fast += 1;
                    shortcut += usize::from(lo == 0 && a[PENDING_LEN] == 0);
                }
                let (x, y) = match g.below(4) {
                    0 => {
                        s.push(&mut a, step, time, bits);
                        if b[PUSHED_AT] != step.wrapping_add(1) {
                            b[PUSHED_AT] = step.wrapping_add(1);
                            let now = IntervalWindow::clock(&mut b, time);
                            s.push_general(&mut b, now, bits);
                        }
                        (
                            s.read(&mut a, time),
                            s.step_general(&mut b, step, time, 0, false),
                        )
                    }
                    1 => (
                        s.read(&mut a, time),
                        s.step_general(&mut b, step, time, 0, false),
                    ),
                    k => {
                        let enter = k == 2;
                        (
                            s.step(&mut a, step, time, bits, enter),
                            s.step_general(&mut b, step, time, bits, enter),
                        )
                    }
                };
                assert_eq!((x, &a), (y, &b), "case {case}: {s:?}");
            }
        }
        assert!(
            fast > 150_000 && shortcut > 80_000,
            "{fast} fast, {shortcut} shortcut"
        );
    }

    #[test]
    fn kinds_round_trip() {
        let s = window(Agg::Any, 1, 2, 9);
        assert_eq!(
            IntervalWindow::decode(s.lo_ns, s.hi_ns, s.encode_kind()),
            Some(s)
        );
        assert_eq!(IntervalWindow::decode(2, 1, s.encode_kind()), None);
        let bad = IntervalWindow {
            elem: Elem::Int,
            ..s
        };
        assert_eq!(IntervalWindow::decode(1, 2, bad.encode_kind()), None);
    }
}
