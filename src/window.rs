//! Sliding windows (README, "Windows"): a window's state as a fixed block of words, how a value enters it and what it reads.
//!
//! A window's whole state is `Shape::words()` 64-bit words, a size fixed by
//! the specification: the run keeps every window's words in one vector
//! (`NodeState::windows`), so snapshots, packed keyed runs and tier switches
//! carry windows as they carry offset rings, and no row allocates.
//!
//! - A **count window** of `n` keeps a ring of its last `n` values (when its
//!   aggregate needs them to subtract what leaves), the number of values
//!   pushed so far, and a running aggregate: an `i128` sum, an exact Float
//!   sum (`exact`), a count of trues, or for `min`/`max` a monotonic deque of
//!   value positions (amortised O(1) per value, at most `n` entries).
//! - A **time window** of `panes` panes of `pane_ns` keeps one partial
//!   aggregate per pane (a ring indexed by pane number) and running totals;
//!   a pane that leaves the window is subtracted from the totals (`min` and
//!   `max` scan the panes on a read instead: O(panes)). A value's pane is its
//!   time divided by the granularity, rounded down; the window at time `t`
//!   holds the panes `(pane(t) - panes, pane(t)]`, which is `(t - T, t]` with
//!   its far edge rounded to a pane boundary. Time never goes back for a
//!   window: an earlier time counts as the latest one seen.
//!
//! Float sums are exact: every Float is an integer multiple of 2^-1074, so a
//! fixed-point integer of 68 32-bit digits holds any sum of up to 2^60 of
//! them exactly, and removing a value is exact too. A read rounds that sum
//! once, to nearest, ties to even: the result does not depend on the order
//! the values came in or left, which is what lets every tier and the
//! reference evaluator (a different exact algorithm) agree bit for bit.

use crate::error::{ErrorKind, Fault};
use crate::lang::ast::{Aggregate, Window, WindowSize};
use crate::lang::types::Type;
use crate::time::Time;

/// What a window's values are, as far as its state goes (its operand's type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    Int,
    Float,
    Bool,
    /// Any other type: only `count` takes it, and keeps no values.
    Other,
}

impl Elem {
    pub fn of(t: Type) -> Elem {
        match t {
            Type::Int => Elem::Int,
            Type::Float => Elem::Float,
            Type::Bool => Elem::Bool,
            _ => Elem::Other,
        }
    }
}

/// A present value entering a window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Entry {
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A value of another type (counted only).
    Other,
}

impl Entry {
    fn bits(self) -> u64 {
        match self {
            Entry::Int(i) => i as u64,
            Entry::Float(f) => f.to_bits(),
            Entry::Bool(b) => u64::from(b),
            Entry::Other => 0,
        }
    }
}

/// What a window reads at a step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reading {
    Int(i64),
    Float(f64),
    Bool(bool),
    /// An empty window whose aggregate has no value (`avg`, `min`, `max`,
    /// `last`): ⊥.
    Empty,
}

/// A window of a plan: its size and aggregate, and what its values are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    pub window: Window,
    pub elem: Elem,
}

// Count window words.
const PUSHES: usize = 0;
const PUSHED_AT: usize = 1;
const RING: usize = 2;

// Time window words (before the totals and the panes).
const T_PUSHED_AT: usize = 0;
const T_NEWEST: usize = 1;
const T_STARTED: usize = 2;
const T_LAST: usize = 3;
const T_LAST_PANE: usize = 4;
const T_COUNT: usize = 5;
const T_TOTAL: usize = 6;

impl Shape {
    /// Whether a count window keeps its values (to subtract what leaves, or
    /// for the deque to compare).
    fn keeps_values(&self) -> bool {
        !matches!(self.window.agg, Aggregate::Count | Aggregate::Last)
    }

    /// Words of a running sum (or a count of trues): the totals of a time
    /// window, and each of its panes' partials.
    fn sum_words(&self) -> usize {
        match (self.window.agg, self.elem) {
            (Aggregate::Sum | Aggregate::Avg, Elem::Float) => exact::WORDS,
            (Aggregate::Sum | Aggregate::Avg, _) => 2,
            (Aggregate::Any | Aggregate::All, _) => 1,
            _ => 0,
        }
    }

    /// Words of one pane: its number, its count, its partial aggregate.
    fn pane_words(&self) -> usize {
        2 + match self.window.agg {
            Aggregate::Min | Aggregate::Max => 2,
            _ => self.sum_words(),
        }
    }

    /// The number of words of the window's state.
    pub fn words(&self) -> usize {
        match self.window.size {
            WindowSize::Count(n) => {
                let n = n as usize;
                let ring = if self.keeps_values() { n } else { 0 };
                RING + ring
                    + match self.window.agg {
                        Aggregate::Count => 0,
                        Aggregate::Last => 1,
                        Aggregate::Min | Aggregate::Max => 2 + n,
                        _ => self.sum_words(),
                    }
            }
            WindowSize::Time { panes, .. } => {
                T_TOTAL + self.sum_words() + panes as usize * self.pane_words()
            }
        }
    }

    /// The window's static memory bound and cost per step, for `explain`.
    pub fn describe(&self) -> String {
        let bytes = self.words() * 8;
        let agg = self.window.agg;
        match self.window.size {
            WindowSize::Count(n) => {
                let what = match agg {
                    Aggregate::Count => "a count".to_string(),
                    Aggregate::Last => "the last value".to_string(),
                    Aggregate::Min | Aggregate::Max => {
                        format!("{n} values and a deque of at most {n} positions")
                    }
                    Aggregate::Sum | Aggregate::Avg if self.elem == Elem::Float => {
                        format!("{n} values and an exact sum")
                    }
                    _ => format!("{n} values and a running total"),
                };
                let per = match agg {
                    Aggregate::Min | Aggregate::Max => "amortised O(1) per step",
                    _ => "O(1) per step",
                };
                format!("count window of {n}: {what}, {bytes} bytes, {per}")
            }
            WindowSize::Time { pane_ns, panes } => {
                let per = match agg {
                    Aggregate::Min | Aggregate::Max => format!("O({panes}) per read"),
                    _ => "O(1) per step".to_string(),
                };
                format!(
                    "time window of {}: {panes} panes of {}, {bytes} bytes, {per}",
                    crate::lang::ast::duration(pane_ns * i64::from(panes)),
                    crate::lang::ast::duration(pane_ns),
                )
            }
        }
    }

    /// Enters the present value `v` of step `step`, at time `time`, unless
    /// this step's value is in already (a window node and the end of the row
    /// both push; whichever comes first does).
    pub fn push(&self, w: &mut [u64], step: u64, time: Time, v: Entry) {
        match self.window.size {
            WindowSize::Count(n) => {
                if w[PUSHED_AT] == step + 1 {
                    return;
                }
                w[PUSHED_AT] = step + 1;
                self.push_count(w, u64::from(n), v);
            }
            WindowSize::Time { pane_ns, panes } => {
                if w[T_PUSHED_AT] == step + 1 {
                    return;
                }
                w[T_PUSHED_AT] = step + 1;
                let p = self.advance(w, pane_of(time, pane_ns), panes);
                self.push_time(w, p, panes, v);
            }
        }
    }

    /// What the window holds at time `time` (after this step's push).
    pub fn read(&self, w: &mut [u64], time: Time) -> Result<Reading, Fault> {
        match self.window.size {
            WindowSize::Count(n) => self.read_count(w, u64::from(n)),
            WindowSize::Time { pane_ns, panes } => {
                self.advance(w, pane_of(time, pane_ns), panes);
                self.read_time(w, panes)
            }
        }
    }

    fn push_count(&self, w: &mut [u64], n: u64, v: Entry) {
        let pushes = w[PUSHES];
        let at = (pushes % n) as usize;
        let keeps = self.keeps_values();
        let agg_at = RING + if keeps { n as usize } else { 0 };
        let leaving = (keeps && pushes >= n).then(|| w[RING + at]);
        match self.window.agg {
            Aggregate::Count => {}
            Aggregate::Last => w[agg_at] = v.bits(),
            Aggregate::Sum | Aggregate::Avg | Aggregate::Any | Aggregate::All => {
                let total = &mut w[agg_at..agg_at + self.sum_words()];
                add_to(total, self.elem, v.bits(), 1);
                if let Some(old) = leaving {
                    add_to(total, self.elem, old, -1);
                }
            }
            Aggregate::Min | Aggregate::Max => {
                let (ring, dq) = w[RING..].split_at_mut(n as usize);
                let (ends, slots) = dq.split_at_mut(2);
                let (mut front, mut back) = (ends[0], ends[1]);
                // The window after this push holds positions
                // `pushes + 1 - n ..= pushes`.
                while front < back && slots[(front % n) as usize] + n <= pushes {
                    front += 1;
                }
                if !is_nan(self.elem, v.bits()) {
                    let min = self.window.agg == Aggregate::Min;
                    while front < back {
                        let pos = slots[((back - 1) % n) as usize];
                        let held = ring[(pos % n) as usize];
                        // The newest of equal values stays (ties: latest wins).
                        if !replaces(self.elem, v.bits(), held, min) {
                            break;
                        }
                        back -= 1;
                    }
                    slots[(back % n) as usize] = pushes;
                    back += 1;
                }
                (ends[0], ends[1]) = (front, back);
            }
        }
        if keeps {
            w[RING + at] = v.bits();
        }
        w[PUSHES] = pushes + 1;
    }

    fn read_count(&self, w: &mut [u64], n: u64) -> Result<Reading, Fault> {
        let pushes = w[PUSHES];
        let len = pushes.min(n);
        let keeps = self.keeps_values();
        let agg_at = RING + if keeps { n as usize } else { 0 };
        match self.window.agg {
            Aggregate::Count => Ok(Reading::Int(len as i64)),
            Aggregate::Last if len == 0 => Ok(Reading::Empty),
            Aggregate::Last => Ok(self.reading(w[agg_at])),
            Aggregate::Min | Aggregate::Max => {
                if len == 0 {
                    return Ok(Reading::Empty);
                }
                let (front, back) = (w[agg_at], w[agg_at + 1]);
                if front == back {
                    // Every value in the window is NaN.
                    return Ok(Reading::Float(f64::NAN));
                }
                let pos = w[agg_at + 2 + (front % n) as usize];
                Ok(self.reading(w[RING + (pos % n) as usize]))
            }
            _ => self.total(&mut w[agg_at..agg_at + self.sum_words()], len),
        }
    }

    /// Moves a time window to pane `p` (or keeps it at the latest pane seen,
    /// if `p` is earlier), subtracting the panes that leave; returns the
    /// window's newest pane.
    fn advance(&self, w: &mut [u64], p: i64, panes: u32) -> i64 {
        if w[T_STARTED] == 0 {
            w[T_STARTED] = 1;
            w[T_NEWEST] = p as u64;
            return p;
        }
        let old = w[T_NEWEST] as i64;
        if p <= old {
            return old;
        }
        let panes_i = i64::from(panes);
        // The panes in the window before, and the newest to leave now.
        let (lo, hi) = (old - panes_i + 1, p - panes_i);
        if hi >= lo {
            if hi - lo + 1 >= panes_i {
                for slot in 0..panes as usize {
                    self.evict(w, slot, panes);
                }
            } else {
                for q in lo..=hi {
                    let slot = q.rem_euclid(panes_i) as usize;
                    let at = self.pane_at(slot, panes);
                    if w[at] as i64 == q {
                        self.evict(w, slot, panes);
                    }
                }
            }
        }
        w[T_NEWEST] = p as u64;
        p
    }

    /// The first word of pane slot `slot`.
    fn pane_at(&self, slot: usize, panes: u32) -> usize {
        debug_assert!(slot < panes as usize);
        T_TOTAL + self.sum_words() + slot * self.pane_words()
    }

    /// Subtracts a pane's partial from the totals and empties it.
    fn evict(&self, w: &mut [u64], slot: usize, panes: u32) {
        let at = self.pane_at(slot, panes);
        let count = w[at + 1];
        if count == 0 {
            return;
        }
        w[T_COUNT] -= count;
        let k = self.sum_words();
        if k > 0 && !matches!(self.window.agg, Aggregate::Min | Aggregate::Max) {
            let (head, tail) = w.split_at_mut(at + 2);
            let partial = &mut tail[..k];
            let total = &mut head[T_TOTAL..T_TOTAL + k];
            sub_from(total, partial, self.elem);
        }
        w[at..at + self.pane_words()].fill(0);
    }

    fn push_time(&self, w: &mut [u64], p: i64, panes: u32, v: Entry) {
        let slot = p.rem_euclid(i64::from(panes)) as usize;
        let at = self.pane_at(slot, panes);
        if w[at + 1] == 0 {
            w[at] = p as u64;
        }
        w[at + 1] += 1;
        w[T_COUNT] += 1;
        let bits = v.bits();
        match self.window.agg {
            Aggregate::Count => {}
            Aggregate::Last => {
                w[T_LAST] = bits;
                w[T_LAST_PANE] = p as u64;
            }
            Aggregate::Min | Aggregate::Max => {
                if !is_nan(self.elem, bits) {
                    let min = self.window.agg == Aggregate::Min;
                    if w[at + 3] == 0 || replaces(self.elem, bits, w[at + 2], min) {
                        w[at + 2] = bits;
                    }
                    w[at + 3] += 1;
                }
            }
            _ => {
                let k = self.sum_words();
                add_to(&mut w[at + 2..at + 2 + k], self.elem, bits, 1);
                add_to(&mut w[T_TOTAL..T_TOTAL + k], self.elem, bits, 1);
            }
        }
    }

    fn read_time(&self, w: &mut [u64], panes: u32) -> Result<Reading, Fault> {
        let len = w[T_COUNT];
        let newest = w[T_NEWEST] as i64;
        let panes_i = i64::from(panes);
        match self.window.agg {
            Aggregate::Count => Ok(Reading::Int(len as i64)),
            Aggregate::Last => {
                if len > 0 && w[T_LAST_PANE] as i64 > newest - panes_i {
                    Ok(self.reading(w[T_LAST]))
                } else {
                    Ok(Reading::Empty)
                }
            }
            Aggregate::Min | Aggregate::Max => {
                if len == 0 {
                    return Ok(Reading::Empty);
                }
                let min = self.window.agg == Aggregate::Min;
                let mut best: Option<u64> = None;
                // Oldest pane first, so that of equal values the latest wins.
                for q in newest - panes_i + 1..=newest {
                    let at = self.pane_at(q.rem_euclid(panes_i) as usize, panes);
                    if w[at] as i64 == q && w[at + 1] > 0 && w[at + 3] > 0 {
                        let v = w[at + 2];
                        if best.is_none_or(|b| replaces(self.elem, v, b, min)) {
                            best = Some(v);
                        }
                    }
                }
                Ok(best.map_or(Reading::Float(f64::NAN), |b| self.reading(b)))
            }
            _ => {
                let k = self.sum_words();
                self.total(&mut w[T_TOTAL..T_TOTAL + k], len)
            }
        }
    }

    /// The reading of a running total over `len` values (sum, avg, any, all).
    fn total(&self, total: &mut [u64], len: u64) -> Result<Reading, Fault> {
        let agg = self.window.agg;
        Ok(match (agg, self.elem) {
            (Aggregate::Any, _) => Reading::Bool(total[0] > 0),
            (Aggregate::All, _) => Reading::Bool(total[0] == len),
            (Aggregate::Avg, _) if len == 0 => Reading::Empty,
            (Aggregate::Sum, Elem::Int) => {
                let s = i128_of(total);
                Reading::Int(
                    i64::try_from(s)
                        .map_err(|_| Fault::new(ErrorKind::IntegerOverflow, "window sum"))?,
                )
            }
            (Aggregate::Avg, Elem::Int) => Reading::Float(i128_of(total) as f64 / len as f64),
            (Aggregate::Sum, _) => Reading::Float(exact::round(total, len)),
            _ => Reading::Float(exact::round(total, len) / len as f64),
        })
    }

    /// A held value's bits as a reading of the window's element type.
    fn reading(&self, bits: u64) -> Reading {
        match self.elem {
            Elem::Int => Reading::Int(bits as i64),
            Elem::Float => Reading::Float(f64::from_bits(bits)),
            Elem::Bool | Elem::Other => Reading::Bool(bits != 0),
        }
    }
}

impl Shape {
    /// Checks words read from a snapshot taken before step `step` and
    /// rebuilds what follows from the rest: a count window's running
    /// aggregate and deque from its held values, a time window's totals
    /// from its panes. Words that no run could hold are an error (never a
    /// panic or a hang later).
    pub fn restore(&self, w: &mut [u64], step: u64) -> Result<(), String> {
        if w.len() != self.words() {
            return Err(format!(
                "{} words, the window has {}",
                w.len(),
                self.words()
            ));
        }
        let bool_ok = |bits: u64| self.elem != Elem::Bool || bits <= 1;
        match self.window.size {
            WindowSize::Count(n) => {
                let n = u64::from(n);
                if w[PUSHED_AT] > step {
                    return Err(format!("a value pushed at step {}", w[PUSHED_AT] - 1));
                }
                let (pushes, pushed_at) = (w[PUSHES], w[PUSHED_AT]);
                let len = pushes.min(n);
                if self.window.agg == Aggregate::Last && len > 0 && !bool_ok(w[RING]) {
                    return Err("a Bool that is neither 0 nor 1".into());
                }
                if !self.keeps_values() {
                    return Ok(());
                }
                let held: Vec<u64> = (pushes - len..pushes)
                    .map(|pos| w[RING + (pos % n) as usize])
                    .collect();
                if !held.iter().all(|&b| bool_ok(b)) {
                    return Err("a Bool that is neither 0 nor 1".into());
                }
                w.fill(0);
                w[PUSHES] = pushes - len;
                for bits in held {
                    self.push_count(w, n, self.entry(bits));
                }
                w[PUSHED_AT] = pushed_at;
                Ok(())
            }
            WindowSize::Time { panes, .. } => self.restore_time(w, step, panes),
        }
    }

    fn restore_time(&self, w: &mut [u64], step: u64, panes: u32) -> Result<(), String> {
        if w[T_PUSHED_AT] > step || w[T_STARTED] > 1 {
            return Err("a push or start that no run makes".into());
        }
        if w[T_STARTED] == 0 {
            return match w.iter().all(|&x| x == 0) {
                true => Ok(()),
                false => Err("state in a window that never started".into()),
            };
        }
        if self.window.agg == Aggregate::Last && self.elem == Elem::Bool && w[T_LAST] > 1 {
            return Err("a Bool that is neither 0 nor 1".into());
        }
        let newest = w[T_NEWEST] as i64;
        let panes_i = i64::from(panes);
        let k = self.sum_words();
        let sums = k > 0 && !matches!(self.window.agg, Aggregate::Min | Aggregate::Max);
        let mut count = 0u64;
        let mut total = vec![0u64; k];
        for slot in 0..panes as usize {
            let at = self.pane_at(slot, panes);
            let pane = &mut w[at..at + self.pane_words()];
            let (q, c) = (pane[0] as i64, pane[1]);
            if c == 0 {
                if pane.iter().any(|&x| x != 0) {
                    return Err(format!("pane slot {slot} is empty but holds state"));
                }
                continue;
            }
            if q.rem_euclid(panes_i) != slot as i64
                || q <= newest.saturating_sub(panes_i)
                || q > newest
            {
                return Err(format!(
                    "pane slot {slot} holds pane {q}, outside the window"
                ));
            }
            count = count.checked_add(c).ok_or("a count past 2^64")?;
            let partial = &mut pane[2..];
            match self.window.agg {
                Aggregate::Min | Aggregate::Max if partial[1] > c => {
                    return Err(format!("pane {q} holds more values than its count"));
                }
                Aggregate::Min | Aggregate::Max => {}
                Aggregate::Any | Aggregate::All if partial[0] > c => {
                    return Err(format!("pane {q} holds more trues than values"));
                }
                _ if sums && self.elem == Elem::Float => {
                    exact::check(partial, c).map_err(|m| format!("pane {q}: {m}"))?;
                    exact::merge(&mut total, partial, 1);
                }
                _ if sums && k == 2 => {
                    let t = i128_of(&total)
                        .checked_add(i128_of(partial))
                        .ok_or("a sum past 2^127")?;
                    set_i128(&mut total, t);
                }
                _ if sums => total[0] += partial[0],
                _ => {}
            }
        }
        w[T_COUNT] = count;
        w[T_TOTAL..T_TOTAL + k].copy_from_slice(&total);
        Ok(())
    }

    /// A held value's bits as an entry of the window's element type.
    fn entry(&self, bits: u64) -> Entry {
        match self.elem {
            Elem::Int => Entry::Int(bits as i64),
            Elem::Float => Entry::Float(f64::from_bits(bits)),
            Elem::Bool => Entry::Bool(bits != 0),
            Elem::Other => Entry::Other,
        }
    }
}

/// The pane of time `t` for panes of `pane_ns` nanoseconds.
pub fn pane_of(t: Time, pane_ns: i64) -> i64 {
    t.0.div_euclid(pane_ns)
}

/// The time a window sees at a step: the row's time, or without one the
/// step index in seconds (as `time()`).
pub fn time_at(time: Option<Time>, step: u64) -> Time {
    time.unwrap_or_else(|| Time((step as i64).saturating_mul(1_000_000_000)))
}

fn is_nan(elem: Elem, bits: u64) -> bool {
    elem == Elem::Float && f64::from_bits(bits).is_nan()
}

/// Whether value `v` takes the place of `held` as the minimum (`min`) or
/// maximum: it is as small (large) or smaller (larger). Neither is NaN.
fn replaces(elem: Elem, v: u64, held: u64, min: bool) -> bool {
    match elem {
        Elem::Float => {
            let (v, h) = (f64::from_bits(v), f64::from_bits(held));
            if min { v <= h } else { v >= h }
        }
        _ => {
            let (v, h) = (v as i64, held as i64);
            if min { v <= h } else { v >= h }
        }
    }
}

fn i128_of(w: &[u64]) -> i128 {
    (i128::from(w[1] as i64) << 64) | i128::from(w[0])
}

fn set_i128(w: &mut [u64], v: i128) {
    w[0] = v as u64;
    w[1] = (v >> 64) as u64;
}

/// Adds (`sign` 1) or removes (-1) a value's bits to a running total.
fn add_to(total: &mut [u64], elem: Elem, bits: u64, sign: i64) {
    match (total.len(), elem) {
        (1, _) => total[0] = total[0].wrapping_add_signed(sign * (bits as i64)),
        (2, _) => set_i128(
            total,
            i128_of(total) + i128::from(sign) * i128::from(bits as i64),
        ),
        _ => exact::add(total, f64::from_bits(bits), sign),
    }
}

/// Subtracts a partial total from a total of the same form.
fn sub_from(total: &mut [u64], partial: &[u64], elem: Elem) {
    let _ = elem;
    match total.len() {
        1 => total[0] = total[0].wrapping_sub(partial[0]),
        2 => set_i128(total, i128_of(total) - i128_of(partial)),
        _ => exact::merge(total, partial, -1),
    }
}

/// Exact sums of Floats in a fixed block of words (see the module doc).
pub mod exact {
    /// 32-bit digits of the fixed-point sum; digit 0 is worth 2^-1074.
    pub const LIMBS: usize = 68;
    const POS_INF: usize = LIMBS;
    const NEG_INF: usize = LIMBS + 1;
    const NAN: usize = LIMBS + 2;
    const NEG_ZERO: usize = LIMBS + 3;
    /// Additions since the digits were last normalised.
    const PENDING: usize = LIMBS + 4;
    pub const WORDS: usize = LIMBS + 5;

    /// Normalise well before a digit (changed by less than 2^32 per
    /// addition) could leave an i64.
    const NORMALISE_EVERY: u64 = 1 << 28;

    /// Adds (`sign` 1) or removes (-1) `x`.
    pub fn add(acc: &mut [u64], x: f64, sign: i64) {
        let count = |acc: &mut [u64], k: usize| acc[k] = acc[k].wrapping_add_signed(sign);
        if x.is_nan() {
            return count(acc, NAN);
        }
        if x.is_infinite() {
            return count(acc, if x > 0.0 { POS_INF } else { NEG_INF });
        }
        if x == 0.0 {
            if x.is_sign_negative() {
                count(acc, NEG_ZERO);
            }
            return;
        }
        let bits = x.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as u32;
        let frac = bits & ((1 << 52) - 1);
        // x = m * 2^(shift - 1074).
        let (m, shift) = if exp == 0 {
            (frac, 0)
        } else {
            (frac | (1 << 52), exp - 1)
        };
        let s = if bits >> 63 == 1 { -sign } else { sign };
        let wide = u128::from(m) << (shift % 32);
        let limb = (shift / 32) as usize;
        for k in 0..3 {
            let chunk = ((wide >> (32 * k)) & 0xffff_ffff) as i64;
            acc[limb + k] = (acc[limb + k] as i64 + s * chunk) as u64;
        }
        acc[PENDING] += 1;
        if acc[PENDING] >= NORMALISE_EVERY {
            normalise(acc);
        }
    }

    /// `acc += sign * part`, digit by digit (both in carry-save form).
    pub fn merge(acc: &mut [u64], part: &[u64], sign: i64) {
        for k in 0..LIMBS {
            acc[k] = (acc[k] as i64 + sign * part[k] as i64) as u64;
        }
        for k in [POS_INF, NEG_INF, NAN, NEG_ZERO] {
            acc[k] = acc[k].wrapping_add_signed(sign * part[k] as i64);
        }
        acc[PENDING] += part[PENDING] + 1;
        if acc[PENDING] >= NORMALISE_EVERY {
            normalise(acc);
        }
    }

    /// Checks an accumulator read from a snapshot, over `count` values: no
    /// digit so large that adding to it could overflow, no more special
    /// values than values. Normalises it.
    pub fn check(acc: &mut [u64], count: u64) -> Result<(), String> {
        if acc[..LIMBS]
            .iter()
            .any(|&d| (d as i64).unsigned_abs() >= 1 << 61)
            || acc[PENDING] >= NORMALISE_EVERY
        {
            return Err("an exact sum out of range".into());
        }
        if [POS_INF, NEG_INF, NAN, NEG_ZERO]
            .iter()
            .any(|&k| acc[k] > count)
        {
            return Err("more special values than values".into());
        }
        normalise(acc);
        Ok(())
    }

    /// Propagates carries: every digit but the top one in `0..2^32`, the
    /// top one signed (the sum's sign).
    fn normalise(acc: &mut [u64]) {
        let mut carry = 0i64;
        for d in acc.iter_mut().take(LIMBS - 1) {
            let v = *d as i64 + carry;
            *d = (v & 0xffff_ffff) as u64;
            carry = v >> 32;
        }
        acc[LIMBS - 1] = (acc[LIMBS - 1] as i64 + carry) as u64;
        acc[PENDING] = 0;
    }

    /// The sum rounded to the nearest Float (ties to even), over `len`
    /// values: NaN if it holds a NaN or both infinities, an infinity if it
    /// holds one, and a zero sum is -0.0 only if every value is -0.0 (as
    /// IEEE addition gives).
    pub fn round(acc: &mut [u64], len: u64) -> f64 {
        if acc[NAN] > 0 || (acc[POS_INF] > 0 && acc[NEG_INF] > 0) {
            return f64::NAN;
        }
        if acc[POS_INF] > 0 {
            return f64::INFINITY;
        }
        if acc[NEG_INF] > 0 {
            return f64::NEG_INFINITY;
        }
        normalise(acc);
        let neg = (acc[LIMBS - 1] as i64) < 0;
        let mut mag = [0u32; LIMBS];
        for (m, &d) in mag.iter_mut().zip(acc.iter()) {
            *m = d as u32;
        }
        if neg {
            // Two's complement over the digits.
            let mut carry = 1u64;
            for m in mag.iter_mut() {
                let v = u64::from(!*m) + carry;
                *m = v as u32;
                carry = v >> 32;
            }
        }
        let Some(top) = mag.iter().rposition(|&m| m != 0) else {
            return if len > 0 && acc[NEG_ZERO] == len {
                -0.0
            } else {
                0.0
            };
        };
        let mut p = 32 * top + 31 - mag[top].leading_zeros() as usize;
        let sign = if neg { -1.0 } else { 1.0 };
        if p < 53 {
            // At most 53 bits: exact, a multiple of the smallest subnormal.
            return sign * bits(&mag, 0, p + 1) as f64 * f64::from_bits(1);
        }
        let m = bits(&mag, p - 53, 54);
        let sticky = below(&mag, p - 53);
        let mut mant = m >> 1;
        if m & 1 == 1 && (sticky || mant & 1 == 1) {
            mant += 1;
            if mant == 1 << 53 {
                mant >>= 1;
                p += 1;
            }
        }
        let biased = p as u64 - 51;
        if biased >= 2047 {
            return sign * f64::INFINITY;
        }
        let b = (biased << 52) | (mant & ((1 << 52) - 1)) | (u64::from(neg) << 63);
        f64::from_bits(b)
    }

    /// `count <= 64` bits of `mag` from bit `lo`.
    fn bits(mag: &[u32; LIMBS], lo: usize, count: usize) -> u64 {
        let (limb, off) = (lo / 32, lo % 32);
        let mut wide = 0u128;
        for k in 0..3 {
            if let Some(&d) = mag.get(limb + k) {
                wide |= u128::from(d) << (32 * k);
            }
        }
        ((wide >> off) & ((1u128 << count) - 1)) as u64
    }

    /// Whether any bit of `mag` below bit `lo` is set.
    fn below(mag: &[u32; LIMBS], lo: usize) -> bool {
        let (limb, off) = (lo / 32, lo % 32);
        mag[..limb].iter().any(|&d| d != 0) || (mag[limb] & ((1u32 << off) - 1)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::ast::{Aggregate, Window, WindowSize};

    fn exact_sum(xs: &[f64]) -> f64 {
        let mut acc = vec![0u64; exact::WORDS];
        for &x in xs {
            exact::add(&mut acc, x, 1);
        }
        exact::round(&mut acc, xs.len() as u64)
    }

    #[test]
    fn exact_sums_round_once() {
        assert_eq!(exact_sum(&[0.1, 0.2]), 0.30000000000000004);
        assert_eq!(exact_sum(&[1e100, 1.0, -1e100]), 1.0);
        assert_eq!(exact_sum(&[f64::MAX, f64::MAX, -f64::MAX]), f64::MAX);
        assert_eq!(exact_sum(&[f64::MAX, f64::MAX]), f64::INFINITY);
        assert_eq!(
            exact_sum(&[f64::from_bits(1), f64::from_bits(1)]),
            f64::from_bits(2)
        );
        assert_eq!(exact_sum(&[-0.0, -0.0]).to_bits(), (-0.0f64).to_bits());
        assert_eq!(exact_sum(&[-0.0, 0.0]).to_bits(), 0.0f64.to_bits());
        assert_eq!(exact_sum(&[1.5, -1.5]).to_bits(), 0.0f64.to_bits());
        assert!(exact_sum(&[f64::INFINITY, f64::NEG_INFINITY]).is_nan());
        assert_eq!(exact_sum(&[f64::NEG_INFINITY, 1.0]), f64::NEG_INFINITY);
        // Ties to even: 2^53 + 1 is halfway between 2^53 and 2^53 + 2.
        assert_eq!(exact_sum(&[9007199254740992.0, 1.0]), 9007199254740992.0);
        assert_eq!(exact_sum(&[9007199254740994.0, 1.0]), 9007199254740996.0);
        // ... and just above halfway rounds up.
        assert_eq!(
            exact_sum(&[9007199254740992.0, 1.0, 1e-300]),
            9007199254740994.0
        );
        assert_eq!(exact_sum(&[-3.0, 1.0]), -2.0);
    }

    #[test]
    fn removing_restores_the_sum_exactly() {
        let mut acc = vec![0u64; exact::WORDS];
        for x in [1e300, 0.1, -7.25, f64::from_bits(3), 1e-300] {
            exact::add(&mut acc, x, 1);
        }
        for x in [1e300, -7.25, f64::from_bits(3), 1e-300] {
            exact::add(&mut acc, x, -1);
        }
        assert_eq!(exact::round(&mut acc, 1), 0.1);
    }

    fn count(n: u32, agg: Aggregate, elem: Elem) -> (Shape, Vec<u64>) {
        let shape = Shape {
            window: Window {
                size: WindowSize::Count(n),
                agg,
            },
            elem,
        };
        let words = vec![0; shape.words()];
        (shape, words)
    }

    #[test]
    fn count_windows_slide() {
        let (s, mut w) = count(3, Aggregate::Max, Elem::Int);
        let mut got = Vec::new();
        for (step, v) in [5, 1, 2, 0, 0, 7].into_iter().enumerate() {
            s.push(&mut w, step as u64, Time(0), Entry::Int(v));
            got.push(s.read(&mut w, Time(0)).unwrap());
        }
        let want = [5, 5, 5, 2, 2, 7].map(Reading::Int);
        assert_eq!(got, want);
        let (s, mut w) = count(2, Aggregate::Sum, Elem::Int);
        s.push(&mut w, 0, Time(0), Entry::Int(i64::MAX));
        s.push(&mut w, 1, Time(0), Entry::Int(1));
        assert!(s.read(&mut w, Time(0)).is_err());
        s.push(&mut w, 2, Time(0), Entry::Int(-1));
        assert_eq!(s.read(&mut w, Time(0)).unwrap(), Reading::Int(0));
        // A second push of the same step is ignored.
        s.push(&mut w, 2, Time(0), Entry::Int(100));
        assert_eq!(s.read(&mut w, Time(0)).unwrap(), Reading::Int(0));
    }

    #[test]
    fn time_windows_drop_panes_that_leave() {
        let shape = Shape {
            window: Window {
                size: WindowSize::Time {
                    pane_ns: 1_000_000_000,
                    panes: 3,
                },
                agg: Aggregate::Sum,
            },
            elem: Elem::Int,
        };
        let mut w = vec![0; shape.words()];
        let s = |t: i64| Time(t * 1_000_000_000);
        shape.push(&mut w, 0, s(0), Entry::Int(1));
        shape.push(&mut w, 1, s(1), Entry::Int(2));
        shape.push(&mut w, 2, s(2), Entry::Int(4));
        assert_eq!(shape.read(&mut w, s(2)).unwrap(), Reading::Int(7));
        assert_eq!(shape.read(&mut w, s(3)).unwrap(), Reading::Int(6));
        assert_eq!(shape.read(&mut w, s(100)).unwrap(), Reading::Int(0));
        shape.push(&mut w, 3, s(100), Entry::Int(8));
        assert_eq!(shape.read(&mut w, s(101)).unwrap(), Reading::Int(8));
        // Time never goes back for a window.
        assert_eq!(shape.read(&mut w, s(50)).unwrap(), Reading::Int(8));
    }
}
