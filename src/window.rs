//! Sliding windows (docs/language.md, "Windows"): a window's state as a fixed block of words, how a value enters it and what it reads.
//!
//! A window's whole state is `Shape::words()` 64-bit words, a size fixed by
//! the specification: the run keeps every window's words in one vector
//! (`NodeState::windows`), so snapshots, packed keyed runs and tier switches
//! carry windows as they carry offset rings, and no row allocates.
//!
//! - A **count window** of `n` keeps a ring of its last `n` values (when its
//!   aggregate needs them to subtract what leaves), the number of values
//!   pushed so far, and a running aggregate: an `i128` sum, an exact Float
//!   sum (`exact`), a count of trues, or for `min`/`max` the extremes of
//!   the last block of `n` values' suffixes and of this block so far (O(1)
//!   per value, `n` words: `scalar_ir::window::minmax`).
//! - A **time window** of `panes` panes of `pane_ns` keeps one partial
//!   aggregate per pane (a ring indexed by pane number) and running totals;
//!   a pane that leaves the window is subtracted from the totals (`min` and
//!   `max` scan the panes on a read instead: O(panes)). A value's pane is its
//!   time divided by the granularity, rounded down; the window at time `t`
//!   holds the panes `(pane(t) - panes, pane(t)]`, which is `(t - T, t]` with
//!   its far edge rounded to a pane boundary. Time never goes back for a
//!   window: an earlier time counts as the latest one seen. A periodic
//!   stream reads its window at a tick's time less one nanosecond
//!   (`read_at_tick`): the rows of a tick's time come after it, so what it
//!   reads is the last `T` before it, `[t - T, t)`; a window first read at
//!   a tick lays its panes from that tick (the phase is kept in its start
//!   word), so the reads at ticks of a period the pane width divides are
//!   exact. `first`, `variance`/`stddev` (Welford's state per pane, merged
//!   by Chan's formula), `integral` (the pane's first and last samples and
//!   the trapezoids between its samples; the panes are joined by the
//!   trapezoid from one's last sample to the next one's first) and the
//!   percentiles (a DDSketch per pane, `sketch`) combine their panes,
//!   oldest first, on a read: O(panes).
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
use crate::value::{Sample, Value};

use scalar_ir::window::{
    CountWindow, Read, add_to, as_float, i128_of, is_nan, replaces, set_i128, spread, sub_from,
    sum_words, welford_add,
};
pub use scalar_ir::window::{Elem, exact};

pub mod interval;
pub mod since;
pub mod sketch;

/// What a window's values are, as far as its state goes (its operand's type).
pub fn elem_of(t: Type) -> Elem {
    match t {
        Type::Int => Elem::Int,
        Type::Float => Elem::Float,
        Type::Bool => Elem::Bool,
        _ => Elem::Other,
    }
}

/// A window of a plan: its size and aggregate, and what its values are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    pub window: Window,
    pub elem: Elem,
}

// Time window words (before the totals and the panes).
const T_PUSHED_AT: usize = 0;
const T_NEWEST: usize = 1;
const T_STARTED: usize = 2;
const T_LAST: usize = 3;
const T_LAST_PANE: usize = 4;
const T_COUNT: usize = 5;
const T_TOTAL: usize = 6;

impl Shape {
    /// The count window of `n` values of this aggregate and element.
    fn count(&self, n: u32) -> CountWindow {
        CountWindow {
            n,
            agg: self.window.agg,
            elem: self.elem,
        }
    }

    /// The count window this is, if it is one.
    pub fn count_window(&self) -> Option<CountWindow> {
        match self.window.size {
            WindowSize::Count(n) => Some(self.count(n)),
            WindowSize::Time { .. } | WindowSize::Interval { .. } | WindowSize::Since { .. } => None,
        }
    }

    /// Words of a running sum (or a count of trues): the totals of a time
    /// window, and each of its panes' partials.
    fn sum_words(&self) -> usize {
        sum_words(self.window.agg, self.elem)
    }

    /// Words of one pane: its number, its count, its partial aggregate.
    fn pane_words(&self) -> usize {
        2 + match self.window.agg {
            Aggregate::Min | Aggregate::Max => 2,
            Aggregate::Last => 0,
            Aggregate::First => 1,
            // Welford's mean, sum of squared deviations, non-finite count.
            Aggregate::Variance | Aggregate::Stddev => 3,
            // First sample (time, value), last sample, area between them.
            Aggregate::Integral => 5,
            Aggregate::P50 | Aggregate::P90 | Aggregate::P95 | Aggregate::P99 => sketch::WORDS,
            Aggregate::Count | Aggregate::Sum | Aggregate::Avg | Aggregate::Any | Aggregate::All => {
                self.sum_words()
            }
        }
    }

    /// Words after a percentile time window's panes: the sketch of its
    /// closed panes (all but the newest) merged, oldest first, and the
    /// newest pane it was merged for (plus one; 0: none). A pane is closed
    /// for good (values enter the newest pane only), so a read merges that
    /// sketch and the newest pane's rather than every pane's; it is derived
    /// state, merged again when the newest pane changes and after a restore.
    fn closed_words(&self) -> usize {
        match self.window.agg.quantile() {
            Some(_) => 1 + sketch::WORDS,
            None => 0,
        }
    }

    /// The number of words of the window's state.
    pub fn words(&self) -> usize {
        match self.window.size {
            WindowSize::Count(n) => self.count(n).words(),
            WindowSize::Interval { .. } => self.interval_window().map_or(0, |iv| iv.words()),
            WindowSize::Since { .. } => self.since_window().map_or(0, |s| s.words()),
            WindowSize::Time { panes, .. } => {
                T_TOTAL
                    + self.sum_words()
                    + panes as usize * self.pane_words()
                    + self.closed_words()
            }
        }
    }

    /// The window's static memory bound and cost per step, for `explain`.
    pub fn describe(&self) -> String {
        let bytes = self.words() * 8;
        let agg = self.window.agg;
        match self.window.size {
            WindowSize::Interval { .. } => self.interval_describe(),
            WindowSize::Since { .. } => self.since_describe(),
            WindowSize::Count(n) => {
                let what = match agg {
                    Aggregate::Count => "a count".to_string(),
                    Aggregate::Last => "the last value".to_string(),
                    Aggregate::First => format!("{n} values"),
                    Aggregate::Integral => "nothing (refused: no time)".to_string(),
                    Aggregate::Min | Aggregate::Max => {
                        format!("{n} values and the extremes of {n} suffixes")
                    }
                    Aggregate::Variance | Aggregate::Stddev => {
                        format!("{n} values and Welford's mean and sum of squares")
                    }
                    Aggregate::P50 | Aggregate::P90 | Aggregate::P95 | Aggregate::P99 => {
                        format!("{n} values and the same {n} sorted (exact)")
                    }
                    Aggregate::Sum | Aggregate::Avg if self.elem == Elem::Float => {
                        format!("{n} values and an exact sum")
                    }
                    _ => format!("{n} values and a running total"),
                };
                let per = match agg {
                    Aggregate::Min | Aggregate::Max => "amortised O(1) per step",
                    Aggregate::Variance | Aggregate::Stddev => {
                        "amortised O(1) per step (recomputed every N values)"
                    }
                    Aggregate::P50 | Aggregate::P90 | Aggregate::P95 | Aggregate::P99 => {
                        "O(N) per step (a sorted insertion and removal)"
                    }
                    _ => "O(1) per step",
                };
                format!("count window of {n}: {what}, {bytes} bytes, {per}")
            }
            WindowSize::Time { pane_ns, panes } => {
                let per = match agg {
                    Aggregate::P50 | Aggregate::P90 | Aggregate::P95 | Aggregate::P99 => format!(
                        "a DDSketch per pane and one of the closed panes merged ({}% relative error, at most {} bins per sign), O(bins) per value and per read, O({panes} panes × bins) when a new pane starts",
                        sketch::ALPHA * 100.0,
                        sketch::MAX_BINS,
                    ),
                    Aggregate::Min
                    | Aggregate::Max
                    | Aggregate::First
                    | Aggregate::Variance
                    | Aggregate::Stddev
                    | Aggregate::Integral => format!("O({panes}) per read"),
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

    /// Enters the present value of step `step` (its bits in the window's
    /// element representation), at time `time`, unless this step's value is
    /// in already (a window node and the end of the row both push;
    /// whichever comes first does).
    pub fn push(&self, w: &mut [u64], step: u64, time: Time, bits: u64) {
        match self.window.size {
            WindowSize::Count(n) => self.count(n).push(w, step, bits),
            WindowSize::Interval { .. } => self.interval_push(w, step, time, bits),
            // A since enters both its operands at once (`Shape::since_push`).
            WindowSize::Since { .. } => unreachable!("engine bug: a since pushed one operand"),
            WindowSize::Time { pane_ns, panes } => {
                if w[T_PUSHED_AT] == step + 1 {
                    return;
                }
                w[T_PUSHED_AT] = step + 1;
                let phase = phase_of(w, pane_ns, None);
                let p = self.advance(w, pane_of(time.0.saturating_sub(phase), pane_ns), panes, phase);
                self.push_time(w, p, panes, time.0, bits);
            }
        }
    }

    /// What the window holds at time `time` (after this step's push): a
    /// value of its result type, or ⊥ for an empty window of an aggregate
    /// without an empty result.
    pub fn read(&self, w: &mut [u64], time: Time) -> Result<Sample, Fault> {
        self.read_from(w, time, None)
    }

    /// What the window holds at a tick at `tick` (a periodic stream's read):
    /// the last `T` before it, `[tick - T, tick)`, since the rows of a tick's
    /// time come after it. A window first read at a tick lays its panes from
    /// that tick on, so that the reads at the ticks of a period its panes
    /// divide are exact.
    pub fn read_at_tick(&self, w: &mut [u64], tick: Time) -> Result<Sample, Fault> {
        // Time is in nanoseconds: `tick - 1` is the last instant before it.
        self.read_from(w, Time(tick.0.saturating_sub(1)), Some(tick))
    }

    fn read_from(&self, w: &mut [u64], time: Time, tick: Option<Time>) -> Result<Sample, Fault> {
        match self.window.size {
            WindowSize::Count(n) => self.reading(self.count(n).read(w)),
            // At a tick the rows of its time have not come yet: the
            // interval's samples are those before it.
            WindowSize::Interval { .. } => self.interval_read(w, tick.unwrap_or(time)),
            WindowSize::Since { .. } => self.since_read(w, tick.unwrap_or(time)),
            WindowSize::Time { pane_ns, panes } => {
                let phase = phase_of(w, pane_ns, tick);
                self.advance(w, pane_of(time.0.saturating_sub(phase), pane_ns), panes, phase);
                self.read_time(w, panes)
            }
        }
    }

    /// Moves a time window to pane `p` (or keeps it at the latest pane seen,
    /// if `p` is earlier), subtracting the panes that leave; returns the
    /// window's newest pane.
    fn advance(&self, w: &mut [u64], p: i64, panes: u32, phase: i64) -> i64 {
        if w[T_STARTED] == 0 {
            // Started: the word keeps the panes' phase too (1 + phase).
            w[T_STARTED] = 1 + phase as u64;
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
            sub_from(total, partial);
        }
        w[at..at + self.pane_words()].fill(0);
    }

    fn push_time(&self, w: &mut [u64], p: i64, panes: u32, time: i64, bits: u64) {
        let slot = p.rem_euclid(i64::from(panes)) as usize;
        let at = self.pane_at(slot, panes);
        let before = w[at + 1];
        if before == 0 {
            w[at] = p as u64;
        }
        w[at + 1] += 1;
        w[T_COUNT] += 1;
        let partial = at + 2..at + self.pane_words();
        match self.window.agg {
            Aggregate::Count => {}
            Aggregate::First => {
                if before == 0 {
                    w[at + 2] = bits;
                }
            }
            Aggregate::Variance | Aggregate::Stddev => {
                let a = &mut w[partial];
                let finite = before - a[2].min(before);
                welford_add(a, as_float(self.elem, bits), finite);
            }
            Aggregate::Integral => {
                // Time never goes back for a window: a sample of an earlier
                // time than the latest one counts at that latest time.
                let t = match w[T_LAST_PANE] {
                    0 => time,
                    _ => time.max(w[T_LAST] as i64),
                };
                (w[T_LAST], w[T_LAST_PANE]) = (t as u64, 1);
                let v = as_float(self.elem, bits);
                let a = &mut w[partial];
                if before == 0 {
                    a.copy_from_slice(&[t as u64, v.to_bits(), t as u64, v.to_bits(), 0]);
                } else {
                    let (t1, v1) = (a[2] as i64, f64::from_bits(a[3]));
                    let area = f64::from_bits(a[4]) + trapezoid(t1, v1, t, v);
                    a[2..].copy_from_slice(&[t as u64, v.to_bits(), area.to_bits()]);
                }
            }
            Aggregate::P50 | Aggregate::P90 | Aggregate::P95 | Aggregate::P99 => {
                sketch::add(&mut w[partial], as_float(self.elem, bits));
            }
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

    /// The first words of the panes in the window that hold values, oldest
    /// first (an iterator: a read, once a row, allocates nothing).
    fn live_panes<'a>(&'a self, w: &'a [u64], panes: u32) -> impl Iterator<Item = usize> + 'a {
        let newest = w[T_NEWEST] as i64;
        let panes_i = i64::from(panes);
        (newest - panes_i + 1..=newest)
            .map(move |q| (q, self.pane_at(q.rem_euclid(panes_i) as usize, panes)))
            .filter(move |&(q, at)| w[at] as i64 == q && w[at + 1] > 0)
            .map(|(_, at)| at)
    }

    /// `first`, `variance`/`stddev`, `integral` and the percentiles: their
    /// panes combined, oldest first.
    fn read_combined(&self, w: &[u64], panes: u32) -> Result<Sample, Fault> {
        let mut live = self.live_panes(w, panes).peekable();
        let partial = |at: usize| &w[at + 2..at + self.pane_words()];
        let agg = self.window.agg;
        let Some(&oldest) = live.peek() else {
            return match agg {
                Aggregate::Integral => self.reading(Read::Bits(0f64.to_bits())),
                _ => Ok(Sample::Deferred),
            };
        };
        let read = match agg {
            Aggregate::First => Read::Bits(partial(oldest)[0]),
            Aggregate::Variance | Aggregate::Stddev => {
                let parts = live.map(|at| (w[at + 1], partial(at)));
                let (n, nonfinite, m2) = merge_spreads(parts);
                spread(agg, nonfinite, m2, n)
            }
            Aggregate::Integral => Read::Bits(join_areas(live.map(partial)).to_bits()),
            _ => unreachable!("percentiles read through `read_percentile`"),
        };
        self.reading(read)
    }

    /// A percentile's read: the closed panes' merged sketch (merged again
    /// if the newest pane has changed since) and the newest pane's, merged
    /// in that order, which is the order of merging every pane oldest first.
    fn read_percentile(&self, w: &mut [u64], panes: u32) -> Result<Sample, Fault> {
        let Some(last_live) = self.live_panes(w, panes).last() else {
            return Ok(Sample::Deferred);
        };
        let newest = w[T_NEWEST] as i64;
        let newest_at = self.pane_at(newest.rem_euclid(i64::from(panes)) as usize, panes);
        let closed_at = w.len() - self.closed_words();
        let mark = (newest as u64).wrapping_add(1);
        let partial = |at: usize| at + 2..at + self.pane_words();
        if w[closed_at] != mark || mark == 0 {
            let closed = self.live_panes(w, panes).filter(|&at| at != newest_at);
            let merged = sketch::merged(closed.map(|at| &w[partial(at)]));
            sketch::store(&mut w[closed_at + 1..], &merged);
            w[closed_at] = mark;
        }
        let newest_live = last_live == newest_at;
        let panes_read = std::iter::once(&w[closed_at + 1..])
            .chain(newest_live.then(|| &w[partial(newest_at)]));
        let q = self.window.agg.quantile().unwrap_or(0.5);
        let v = sketch::quantile(panes_read, q);
        self.reading(Read::Bits(v.unwrap_or(f64::NAN).to_bits()))
    }

    fn read_time(&self, w: &mut [u64], panes: u32) -> Result<Sample, Fault> {
        let len = w[T_COUNT];
        let newest = w[T_NEWEST] as i64;
        let panes_i = i64::from(panes);
        match self.window.agg {
            Aggregate::Count => Ok(Sample::Value(Value::Int(len as i64))),
            agg if agg.quantile().is_some() => self.read_percentile(w, panes),
            agg if combines_panes(agg) => self.read_combined(w, panes),
            Aggregate::Last => {
                if len > 0 && w[T_LAST_PANE] as i64 > newest - panes_i {
                    self.reading(Read::Bits(w[T_LAST]))
                } else {
                    Ok(Sample::Deferred)
                }
            }
            Aggregate::Min | Aggregate::Max => {
                if len == 0 {
                    return Ok(Sample::Deferred);
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
                self.reading(Read::Bits(best.unwrap_or(f64::NAN.to_bits())))
            }
            _ => {
                let k = self.sum_words();
                self.total(&mut w[T_TOTAL..T_TOTAL + k], len)
            }
        }
    }

    /// The reading of a running total over `len` values (sum, avg, any, all).
    fn total(&self, total: &mut [u64], len: u64) -> Result<Sample, Fault> {
        self.reading(scalar_ir::window::total(
            self.window.agg,
            self.elem,
            total,
            len,
        ))
    }

    /// A read of the state machine as a value of the window's result type.
    fn reading(&self, read: Read) -> Result<Sample, Fault> {
        let agg = self.window.agg;
        Ok(match read {
            Read::Empty => Sample::Deferred,
            Read::Overflow => return Err(Fault::new(ErrorKind::IntegerOverflow, "window sum")),
            Read::Bits(bits) => {
                Sample::Value(match scalar_ir::window::result_elem(agg, self.elem) {
                    Elem::Int => Value::Int(bits as i64),
                    Elem::Float => Value::Float(f64::from_bits(bits)),
                    Elem::Bool | Elem::Other => Value::Bool(bits != 0),
                })
            }
        })
    }
}

impl Shape {
    /// Checks words read from a snapshot taken before step `step` and
    /// rebuilds what follows from the rest: a count window's running
    /// aggregate (a `min`/`max`'s extremes) from its held values, a time window's totals
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
        match self.window.size {
            WindowSize::Count(n) => self.count(n).restore(w, step),
            WindowSize::Interval { .. } => self.interval_restore(w, step),
            WindowSize::Since { .. } => self.since_restore(w, step),
            WindowSize::Time { panes, .. } => self.restore_time(w, step, panes),
        }
    }

    fn restore_time(&self, w: &mut [u64], step: u64, panes: u32) -> Result<(), String> {
        let pane_ns = match self.window.size {
            WindowSize::Time { pane_ns, .. } => pane_ns,
            WindowSize::Count(_) | WindowSize::Interval { .. } | WindowSize::Since { .. } => {
                unreachable!("a time window's words")
            }
        };
        if w[T_PUSHED_AT] > step || w[T_STARTED] > pane_ns as u64 {
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
        if self.window.agg == Aggregate::Integral && w[T_LAST_PANE] > 1 {
            return Err("an integral's latest time that no run keeps".into());
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
                Aggregate::First if self.elem == Elem::Bool && partial[0] > 1 => {
                    return Err("a Bool that is neither 0 nor 1".into());
                }
                Aggregate::Variance | Aggregate::Stddev if partial[2] > c => {
                    return Err(format!("pane {q} holds more non-finite values than values"));
                }
                Aggregate::Integral if (partial[0] as i64) > (partial[2] as i64) => {
                    return Err(format!("pane {q}'s samples go back in time"));
                }
                Aggregate::P50 | Aggregate::P90 | Aggregate::P95 | Aggregate::P99 => {
                    sketch::check(partial, c).map_err(|m| format!("pane {q}: {m}"))?;
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
        // The closed panes' merged sketch is derived: merged again at the
        // next read.
        let closed_at = w.len() - self.closed_words();
        w[closed_at..].fill(0);
        Ok(())
    }
}

/// Whether a time window of aggregate `agg` keeps a partial state per pane
/// that a read combines, oldest pane first (rather than running totals or a
/// scan for the best value): `first`, `variance`, `stddev`, `integral` and
/// the percentiles.
pub fn combines_panes(agg: Aggregate) -> bool {
    matches!(
        agg,
        Aggregate::First | Aggregate::Variance | Aggregate::Stddev | Aggregate::Integral
    ) || agg.quantile().is_some()
}

/// The area of the trapezoid between samples `(t0, v0)` and `(t1, v1)`
/// (times in nanoseconds, the area in value × seconds).
pub fn trapezoid(t0: i64, v0: f64, t1: i64, v1: f64) -> f64 {
    let dt = t1.saturating_sub(t0) as f64 / 1e9;
    dt * (v0 + v1) / 2.0
}

/// Panes' integrals (each its first sample's time and value, its last's and
/// the area between, as words) joined, oldest first: each pane's area and
/// the trapezoid from one pane's last sample to the next one's first.
pub fn join_areas<'a>(parts: impl Iterator<Item = &'a [u64]>) -> f64 {
    let mut total = 0.0;
    let mut prev: Option<(i64, f64)> = None;
    for a in parts {
        let (t0, v0) = (a[0] as i64, f64::from_bits(a[1]));
        if let Some((t, v)) = prev {
            total += trapezoid(t, v, t0, v0);
        }
        total += f64::from_bits(a[4]);
        prev = Some((a[2] as i64, f64::from_bits(a[3])));
    }
    total
}

/// Panes' Welford states (each its number of values and its words: mean,
/// sum of squared deviations, non-finite count) merged oldest first by
/// Chan's formula: the number of values, of non-finite ones, and the sum of
/// squared deviations of the finite ones from their mean.
pub fn merge_spreads<'a>(parts: impl Iterator<Item = (u64, &'a [u64])>) -> (u64, u64, f64) {
    let (mut n, mut nonfinite, mut mean, mut m2) = (0u64, 0u64, 0.0f64, 0.0f64);
    let mut finite = 0u64;
    for (count, a) in parts {
        n += count;
        nonfinite += a[2];
        let k = count - a[2].min(count);
        if k == 0 {
            continue;
        }
        let (mb, m2b) = (f64::from_bits(a[0]), f64::from_bits(a[1]));
        if finite == 0 {
            (mean, m2) = (mb, m2b);
        } else {
            let total = (finite + k) as f64;
            let d = mb - mean;
            mean += d * k as f64 / total;
            m2 += m2b + d * d * (finite as f64) * (k as f64) / total;
        }
        finite += k;
    }
    (n, nonfinite, m2)
}

/// The pane of time `t` for panes of `pane_ns` nanoseconds.
pub fn pane_of(t: i64, pane_ns: i64) -> i64 {
    t.div_euclid(pane_ns)
}

/// The phase of a time window's panes (they start at multiples of the pane
/// width plus it): the one it started with (`T_STARTED` holds 1 + phase);
/// for a window not started yet, a first read at a tick lays the panes from
/// that tick, anything else from multiples of the width.
fn phase_of(w: &[u64], pane_ns: i64, tick: Option<Time>) -> i64 {
    match w[T_STARTED] {
        0 => tick.map_or(0, |t| t.0.rem_euclid(pane_ns)),
        started => (started - 1) as i64,
    }
}

/// The time a window sees at a step: the row's time, or without one the
/// step index in seconds (as `time()`).
pub fn time_at(time: Option<Time>, step: u64) -> Time {
    time.unwrap_or_else(|| Time(scalar_ir::window::step_time(step)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::ast::{Aggregate, Window, WindowSize};

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
        let int = |i: i64| Sample::Value(Value::Int(i));
        shape.push(&mut w, 0, s(0), 1);
        shape.push(&mut w, 1, s(1), 2);
        shape.push(&mut w, 2, s(2), 4);
        assert_eq!(shape.read(&mut w, s(2)).unwrap(), int(7));
        assert_eq!(shape.read(&mut w, s(3)).unwrap(), int(6));
        assert_eq!(shape.read(&mut w, s(100)).unwrap(), int(0));
        shape.push(&mut w, 3, s(100), 8);
        assert_eq!(shape.read(&mut w, s(101)).unwrap(), int(8));
        // Time never goes back for a window.
        assert_eq!(shape.read(&mut w, s(50)).unwrap(), int(8));
    }

    fn time_shape(agg: Aggregate) -> Shape {
        Shape {
            window: Window {
                size: WindowSize::Time {
                    pane_ns: 1_000_000_000,
                    panes: 3,
                },
                agg,
            },
            elem: Elem::Float,
        }
    }

    /// `integral` joins its panes by the trapezoid between them, and a
    /// sample of an earlier time counts at the latest time seen.
    #[test]
    fn integrals_join_panes_and_never_go_back() {
        let shape = time_shape(Aggregate::Integral);
        let mut w = vec![0; shape.words()];
        let s = |t: f64| Time((t * 1e9) as i64);
        let f = |x: f64| x.to_bits();
        shape.push(&mut w, 0, s(0.5), f(2.0));
        shape.push(&mut w, 1, s(1.5), f(4.0));
        shape.push(&mut w, 2, s(1.0), f(4.0));
        shape.push(&mut w, 3, s(2.5), f(0.0));
        // 3 (0.5 → 1.5) + 0 (the late sample, at 1.5) + 2 (1.5 → 2.5).
        assert_eq!(shape.read(&mut w, s(2.5)).unwrap(), Sample::Value(Value::Float(5.0)));
        // At 3.5 the pane of 0.5 has left: 0 + 2.
        assert_eq!(shape.read(&mut w, s(3.5)).unwrap(), Sample::Value(Value::Float(2.0)));
        assert_eq!(shape.read(&mut w, s(9.0)).unwrap(), Sample::Value(Value::Float(0.0)));
    }

    /// A snapshot's words that no run could hold are refused, not trusted:
    /// a percentile's sketch, a spread's non-finite count.
    #[test]
    fn restores_refuse_broken_sketches_and_spreads() {
        let shape = time_shape(Aggregate::P99);
        let mut w = vec![0; shape.words()];
        for (step, x) in [1.0, 2.0, 40.0, f64::NAN].into_iter().enumerate() {
            shape.push(&mut w, step as u64, Time(step as i64 * 400_000_000), x.to_bits());
        }
        let mut ok = w.clone();
        shape.restore(&mut ok, 4).unwrap();
        assert_eq!(ok, w);
        for word in [T_TOTAL + 3, T_TOTAL + 5, T_TOTAL + 8] {
            let mut broken = w.clone();
            broken[word] ^= 0x0101_0000;
            assert!(shape.restore(&mut broken, 4).is_err(), "word {word}");
        }
        let count = CountWindow {
            n: 3,
            agg: Aggregate::Variance,
            elem: Elem::Float,
        };
        let mut w = vec![0; count.words()];
        for (step, x) in [1.0, f64::INFINITY, 2.0, 5.0].into_iter().enumerate() {
            count.push(&mut w, step as u64, f64::to_bits(x));
        }
        let mut ok = w.clone();
        count.restore(&mut ok, 4).unwrap();
        assert_eq!(ok, w, "Welford's words are kept as they were");
        let mut broken = w.clone();
        *broken.last_mut().unwrap() = 0;
        assert!(count.restore(&mut broken, 4).is_err());
    }
}
