//! Count windows over scalars: their state as a fixed block of words, shared by every tier.
//!
//! vigil's canonical tier (through its `window` module), the quickened interpreter (the
//! `window` instruction) and the native tier (a host helper calling [`CountWindow::step`])
//! all run this one implementation on the same words, so they agree bit for bit by
//! construction and a run moves between tiers without converting anything.
//!
//! A count window of `n` keeps the number of values pushed so far, the step of the last
//! push (a value enters once per step), a ring of its last `n` values when its aggregate
//! needs them to subtract what leaves, and a running aggregate: an `i128` sum, an exact
//! Float sum ([`exact`]), a count of trues, the last value, for `min`/`max` the
//! running extreme of the values since the last multiple of `n` and the extremes of the
//! suffixes of the `n` before them ([`minmax`]: O(1) per value, `n` words, rebuilt from the
//! held values on restore),
//! for `variance`/`stddev` Welford's running mean and sum of squared deviations (a
//! value that leaves is taken out by the inverse update, and every `n` values the two
//! are recomputed from the held values, so rounding cannot drift without bound), and
//! for the percentiles the held values in sorted order (an insertion and a removal
//! per value: O(log n) to find, O(n) to move).
//! Nothing here can panic on words of the right length, whatever they hold: the native
//! helper calls it from JIT code, which no unwind may cross.
//!
//! A `min`/`max` window's fused push and read has a fast path ([`minmax`]) on the same words.
//! An STL operator's interval window is here too ([`interval`]), and its since
//! ([`since`]), for the same reason.

pub mod interval;
pub mod minmax;
pub mod since;

/// A small deterministic generator (xorshift), so that the windows' differential tests need no
/// seed file.
#[cfg(test)]
pub(crate) struct Gen(pub(crate) u64);

#[cfg(test)]
impl Gen {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub use interval::{IntervalRead, IntervalWindow, step_time};
pub use minmax::{MinMaxLayout, MinMaxWindow};
use minmax::{block_enter, block_read};
pub use since::SinceWindow;

/// What a window computes of the values it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Agg {
    Count,
    Sum,
    Avg,
    Min,
    Max,
    Last,
    Any,
    All,
    /// The oldest value the window holds.
    First,
    /// The population variance (divided by the number of values).
    Variance,
    /// The population standard deviation: the square root of `Variance`.
    Stddev,
    /// The area under the samples over time (trapezoids); time windows only.
    Integral,
    /// The percentiles: the value of rank `floor(q * (len - 1))` in sorted
    /// order (0-based), `q` 0.5, 0.9, 0.95 and 0.99.
    P50,
    P90,
    P95,
    P99,
}

impl Agg {
    /// Every aggregate, in the order of its encoding.
    pub const ALL: [Agg; 16] = [
        Agg::Count,
        Agg::Sum,
        Agg::Avg,
        Agg::Min,
        Agg::Max,
        Agg::Last,
        Agg::Any,
        Agg::All,
        Agg::First,
        Agg::Variance,
        Agg::Stddev,
        Agg::Integral,
        Agg::P50,
        Agg::P90,
        Agg::P95,
        Agg::P99,
    ];

    /// The quantile a percentile aggregate reads (`None` for the others).
    pub fn quantile(self) -> Option<f64> {
        match self {
            Agg::P50 => Some(0.5),
            Agg::P90 => Some(0.9),
            Agg::P95 => Some(0.95),
            Agg::P99 => Some(0.99),
            _ => None,
        }
    }

    /// Whether it is `variance` or `stddev` (Welford's state).
    pub fn is_spread(self) -> bool {
        matches!(self, Agg::Variance | Agg::Stddev)
    }

    /// The aggregate's name in a specification (`window(x, 20, max)`).
    pub fn name(self) -> &'static str {
        match self {
            Agg::Count => "count",
            Agg::Sum => "sum",
            Agg::Avg => "avg",
            Agg::Min => "min",
            Agg::Max => "max",
            Agg::Last => "last",
            Agg::Any => "any",
            Agg::All => "all",
            Agg::First => "first",
            Agg::Variance => "variance",
            Agg::Stddev => "stddev",
            Agg::Integral => "integral",
            Agg::P50 => "p50",
            Agg::P90 => "p90",
            Agg::P95 => "p95",
            Agg::P99 => "p99",
        }
    }

    /// The aggregate named `name`.
    pub fn from_name(name: &str) -> Option<Agg> {
        Agg::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// How a window's values (and results) are represented.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    Int,
    Float,
    Bool,
    /// Any other type: only `count` takes it, and keeps no values.
    Other,
}

/// What a read gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// The result's bits, in the representation of [`result_elem`].
    Bits(u64),
    /// An empty window whose aggregate has no value (`avg`, `min`, `max`,
    /// `last`, `first`, `variance`, `stddev`, the percentiles): ⊥.
    Empty,
    /// An Int `sum` outside the 64-bit range.
    Overflow,
}

/// The representation of what aggregate `agg` of values of `elem` gives.
pub fn result_elem(agg: Agg, elem: Elem) -> Elem {
    match agg {
        Agg::Count => Elem::Int,
        Agg::Avg | Agg::Variance | Agg::Stddev | Agg::Integral => Elem::Float,
        Agg::P50 | Agg::P90 | Agg::P95 | Agg::P99 => Elem::Float,
        Agg::Any | Agg::All => Elem::Bool,
        Agg::Sum | Agg::Min | Agg::Max | Agg::Last | Agg::First => elem,
    }
}

/// A count window: its size, aggregate and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CountWindow {
    pub n: u32,
    pub agg: Agg,
    pub elem: Elem,
}

const PUSHES: usize = 0;
const PUSHED_AT: usize = 1;
const RING: usize = 2;

/// Positions reduced modulo a window's length `n` (at most `u32::MAX`) by two multiplications
/// where they fit in 32 bits (Lemire, Kaser and Kurz, "Faster remainder by direct computation",
/// 2019: `m = ⌈2⁶⁴ / n⌉`, and `x mod n` is the high word of `(m·x mod 2⁶⁴)·n` for every 32-bit
/// `x`), by a division otherwise: the fast path of `min`/`max` ([`minmax`]) reduces each
/// push's position with the multiplier computed once per window, where a division was a good
/// part of a plan's `G`/`F` step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Modulo {
    n: u64,
    m: u64,
}

impl Modulo {
    /// For `n` ≥ 1 (≤ `u32::MAX`): one division, for every position reduced after.
    #[inline]
    fn new(n: u64) -> Modulo {
        Modulo {
            n,
            // `n = 1` gives 2⁶⁴, which wraps to 0: every 32-bit position reduces to 0.
            m: (u64::MAX / n).wrapping_add(1),
        }
    }

    /// `x % n`, as an index.
    #[inline(always)]
    fn of(self, x: u64) -> usize {
        if x <= u64::from(u32::MAX) {
            ((u128::from(self.m.wrapping_mul(x)) * u128::from(self.n)) >> 64) as usize
        } else {
            (x % self.n) as usize
        }
    }
}

// Welford's words (after the ring): the running mean, the sum of squared
// deviations from it (both Float bits, over the finite values held), and
// how many of the held values are NaN or infinite.
const MEAN: usize = 0;
const M2: usize = 1;
const NONFINITE: usize = 2;

impl CountWindow {
    /// Whether it keeps its values (to subtract what leaves, or for a
    /// `min`/`max` to make its suffixes from).
    fn keeps_values(&self) -> bool {
        !matches!(self.agg, Agg::Count | Agg::Last | Agg::Integral)
    }

    /// The first word of its running aggregate.
    fn agg_at(&self) -> usize {
        RING + if self.keeps_values() {
            self.n as usize
        } else {
            0
        }
    }

    /// The number of words of its state.
    pub fn words(&self) -> usize {
        self.agg_at()
            + match self.agg {
                // An integral has no meaning over a count of values (the
                // checker refuses one); its words are none and it reads ⊥.
                Agg::Count | Agg::First | Agg::Integral => 0,
                Agg::Last => 1,
                Agg::Min | Agg::Max => 2 + self.n as usize,
                Agg::Variance | Agg::Stddev => 3,
                // The number of sorted values, then the sorted values.
                Agg::P50 | Agg::P90 | Agg::P95 | Agg::P99 => 1 + self.n as usize,
                Agg::Sum | Agg::Avg | Agg::Any | Agg::All => sum_words(self.agg, self.elem),
            }
    }

    /// Enters value `bits` of step `step`, unless a value of this step is in
    /// already (the canonical tier pushes at a window node and at the end of
    /// a row, and a row a kernel stopped on runs again canonically).
    pub fn push(&self, w: &mut [u64], step: u64, bits: u64) {
        if w[PUSHED_AT] == step.wrapping_add(1) {
            return;
        }
        w[PUSHED_AT] = step.wrapping_add(1);
        self.enter(w, bits);
    }

    /// What the window holds now.
    pub fn read(&self, w: &mut [u64]) -> Read {
        let n = u64::from(self.n.max(1));
        let len = w[PUSHES].min(n);
        let agg_at = self.agg_at();
        match self.agg {
            Agg::Count => Read::Bits(len),
            Agg::Integral => Read::Empty,
            Agg::Last | Agg::First | Agg::Variance | Agg::Stddev if len == 0 => Read::Empty,
            Agg::P50 | Agg::P90 | Agg::P95 | Agg::P99 if len == 0 => Read::Empty,
            Agg::Last => Read::Bits(w[agg_at]),
            Agg::First => Read::Bits(w[RING + ((w[PUSHES] - len) % n) as usize]),
            Agg::Variance | Agg::Stddev => {
                let a = &w[agg_at..agg_at + 3];
                spread(self.agg, a[NONFINITE], f64::from_bits(a[M2]), len)
            }
            Agg::P50 | Agg::P90 | Agg::P95 | Agg::P99 => {
                let sorted = (w[agg_at] as usize).min(self.n as usize);
                if sorted == 0 {
                    // Every value held is a NaN.
                    return Read::Bits(f64::NAN.to_bits());
                }
                let q = self.agg.quantile().unwrap_or(0.5);
                let rank = rank_of(q, sorted as u64) as usize;
                Read::Bits(as_float(self.elem, w[agg_at + 1 + rank]).to_bits())
            }
            Agg::Min | Agg::Max => {
                if len == 0 {
                    return Read::Empty;
                }
                let agg = &w[RING + n as usize..];
                let at = ((w[PUSHES] - 1) % n) as usize;
                let full = w[PUSHES] > n;
                Read::Bits(match (self.elem == Elem::Float, self.agg == Agg::Min) {
                    (true, true) => block_read::<true, true>(agg, at, full),
                    (true, false) => block_read::<true, false>(agg, at, full),
                    (false, true) => block_read::<false, true>(agg, at, full),
                    (false, false) => block_read::<false, false>(agg, at, full),
                })
            }
            _ => {
                let k = sum_words(self.agg, self.elem);
                total(self.agg, self.elem, &mut w[agg_at..agg_at + k], len)
            }
        }
    }

    /// A fused window node's work: push the step's (present) value, then
    /// read; never [`Read::Empty`], since the window holds that value.
    pub fn step(&self, w: &mut [u64], step: u64, bits: u64) -> Read {
        // `min`/`max` in one pass, with one division rather than one in the push and one in
        // the read (the same words: `minmax`).
        if let Some(fast) = MinMaxWindow::of(*self) {
            return fast.step(w, step, bits, true);
        }
        self.push(w, step, bits);
        self.read(w)
    }

    /// The push itself, at the next position.
    fn enter(&self, w: &mut [u64], bits: u64) {
        let n = u64::from(self.n.max(1));
        let pushes = w[PUSHES];
        let at = (pushes % n) as usize;
        let keeps = self.keeps_values();
        let agg_at = self.agg_at();
        let leaving = (keeps && pushes >= n).then(|| w[RING + at]);
        match self.agg {
            Agg::Count | Agg::First | Agg::Integral => {}
            Agg::Last => w[agg_at] = bits,
            Agg::Variance | Agg::Stddev => {
                let len = pushes.min(n);
                let a = &mut w[agg_at..agg_at + 3];
                let mut finite = len - a[NONFINITE].min(len);
                if let Some(old) = leaving
                    && welford_remove(a, as_float(self.elem, old), finite)
                {
                    finite = finite.saturating_sub(1);
                }
                welford_add(a, as_float(self.elem, bits), finite);
            }
            Agg::P50 | Agg::P90 | Agg::P95 | Agg::P99 => {
                let sorted = &mut w[agg_at..agg_at + 1 + n as usize];
                if let Some(old) = leaving {
                    sorted_remove(self.elem, sorted, old);
                }
                sorted_insert(self.elem, sorted, bits);
            }
            Agg::Sum | Agg::Avg | Agg::Any | Agg::All => {
                let total = &mut w[agg_at..agg_at + sum_words(self.agg, self.elem)];
                add_to(total, self.elem, bits, 1);
                if let Some(old) = leaving {
                    add_to(total, self.elem, old, -1);
                }
            }
            Agg::Min | Agg::Max => {
                let (ring, agg) = w[RING..].split_at_mut(n as usize);
                // The comparison fixed at compile time: the generic one's
                // matches on the element and the direction were a good part
                // of a push.
                let enter = match (self.elem == Elem::Float, self.agg == Agg::Min) {
                    (true, true) => block_enter::<true, true>,
                    (true, false) => block_enter::<true, false>,
                    (false, true) => block_enter::<false, true>,
                    (false, false) => block_enter::<false, false>,
                };
                enter(ring, agg, at, bits);
            }
        }
        if keeps {
            w[RING + at] = bits;
        }
        w[PUSHES] = pushes.wrapping_add(1);
        if self.agg.is_spread() && w[PUSHES].is_multiple_of(n) {
            // Every `n` values, the window holds only values that entered
            // since the last recomputation: recompute from them (two passes),
            // so that the rounding of the updates cannot accumulate.
            let (ring, rest) = w[RING..].split_at_mut(n as usize);
            reanchor(self.elem, ring, &mut rest[..3]);
        }
    }

    /// Checks words read from a snapshot taken before step `step` and
    /// rebuilds the running aggregate (a `min`/`max`'s extremes) from the held values
    /// (words no run could hold are an error, never a panic or a hang).
    pub fn restore(&self, w: &mut [u64], step: u64) -> Result<(), String> {
        if w.len() != self.words() || self.n == 0 {
            return Err(format!(
                "{} words, the window has {}",
                w.len(),
                self.words()
            ));
        }
        let n = u64::from(self.n);
        let bool_ok = |bits: u64| self.elem != Elem::Bool || bits <= 1;
        if w[PUSHED_AT] > step {
            return Err(format!("a value pushed at step {}", w[PUSHED_AT] - 1));
        }
        let (pushes, pushed_at) = (w[PUSHES], w[PUSHED_AT]);
        let len = pushes.min(n);
        if self.agg == Agg::Last && len > 0 && !bool_ok(w[RING]) {
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
        // Welford's mean and sum of squares depend on the order values came
        // and went (and on when they were last recomputed), not only on the
        // values held: they are kept as the snapshot has them, and the count
        // of non-finite values, which depends on the held values only, must
        // agree.
        let agg_at = self.agg_at();
        let welford: Option<[u64; 3]> = self
            .agg
            .is_spread()
            .then(|| [w[agg_at], w[agg_at + 1], w[agg_at + 2]]);
        w.fill(0);
        w[PUSHES] = pushes - len;
        for &bits in &held {
            self.enter(w, bits);
        }
        w[PUSHED_AT] = pushed_at;
        if self.agg.quantile().is_some() {
            // The replay above took the zeroed ring's words for values
            // leaving: the sorted values are the held ones, entered afresh.
            let sorted = &mut w[agg_at..agg_at + 1 + n as usize];
            sorted.fill(0);
            for &bits in &held {
                sorted_insert(self.elem, sorted, bits);
            }
        }
        if let Some(kept) = welford {
            if kept[NONFINITE] != w[agg_at + NONFINITE] {
                return Err("a count of non-finite values that the held values do not have".into());
            }
            w[agg_at + MEAN] = kept[MEAN];
            w[agg_at + M2] = kept[M2];
        }
        Ok(())
    }

    /// The window as one word (for an instruction's operand): `n`, the
    /// aggregate and the element.
    pub fn encode(&self) -> u64 {
        let agg = self.agg as u64;
        let elem = self.elem as u64;
        u64::from(self.n) | (agg << 32) | (elem << 40)
    }

    /// The window a word of [`CountWindow::encode`] names.
    #[inline]
    pub fn decode(word: u64) -> Option<CountWindow> {
        const ELEMS: [Elem; 4] = [Elem::Int, Elem::Float, Elem::Bool, Elem::Other];
        let n = word as u32;
        let agg = *Agg::ALL.get(((word >> 32) & 0xff) as usize)?;
        let elem = *ELEMS.get(((word >> 40) & 0xff) as usize)?;
        (n > 0 && word >> 48 == 0).then_some(CountWindow { n, agg, elem })
    }
}

/// Words of a running sum (or count of trues) of aggregate `agg`.
pub fn sum_words(agg: Agg, elem: Elem) -> usize {
    match (agg, elem) {
        (Agg::Sum | Agg::Avg, Elem::Float) => exact::WORDS,
        (Agg::Sum | Agg::Avg, _) => 2,
        (Agg::Any | Agg::All, _) => 1,
        _ => 0,
    }
}

/// The reading of a running total over `len` values (sum, avg, any, all).
pub fn total(agg: Agg, elem: Elem, total: &mut [u64], len: u64) -> Read {
    let float = |f: f64| Read::Bits(f.to_bits());
    match (agg, elem) {
        (Agg::Any, _) => Read::Bits(u64::from(total[0] > 0)),
        (Agg::All, _) => Read::Bits(u64::from(total[0] == len)),
        (Agg::Avg, _) if len == 0 => Read::Empty,
        (Agg::Sum, Elem::Int) => match i64::try_from(i128_of(total)) {
            Ok(s) => Read::Bits(s as u64),
            Err(_) => Read::Overflow,
        },
        (Agg::Avg, Elem::Int) => float(i128_of(total) as f64 / len as f64),
        (Agg::Sum, _) => float(exact::round(total, len)),
        _ => float(exact::round(total, len) / len as f64),
    }
}

/// A value's bits as the Float the spread, percentile and integral
/// aggregates compute with (an Int converted).
pub fn as_float(elem: Elem, bits: u64) -> f64 {
    match elem {
        Elem::Float => f64::from_bits(bits),
        _ => bits as i64 as f64,
    }
}

/// The 0-based rank a percentile reads of `len` sorted values:
/// `floor(q * (len - 1))`, as `sketches_ddsketch` ranks.
pub fn rank_of(q: f64, len: u64) -> u64 {
    ((q * (len.saturating_sub(1)) as f64) as u64).min(len.saturating_sub(1))
}

/// The reading of `variance` or `stddev` from Welford's sum of squared
/// deviations `m2` over `len` values, `nonfinite` of which are NaN or
/// infinite: NaN if any is, else `m2 / len` (rounding may leave `m2` a
/// hair below zero: it reads 0).
pub fn spread(agg: Agg, nonfinite: u64, m2: f64, len: u64) -> Read {
    if nonfinite > 0 {
        return Read::Bits(f64::NAN.to_bits());
    }
    let m2 = if m2 < 0.0 { 0.0 } else { m2 };
    let var = m2 / len as f64;
    let v = if agg == Agg::Stddev { var.sqrt() } else { var };
    Read::Bits(v.to_bits())
}

/// Welford's update of `a` (mean, m2, non-finite count) by a value entering
/// a window of `finite` finite values.
pub fn welford_add(a: &mut [u64], x: f64, finite: u64) {
    if !x.is_finite() {
        a[NONFINITE] = a[NONFINITE].wrapping_add(1);
        return;
    }
    let k = (finite + 1) as f64;
    let mean = f64::from_bits(a[MEAN]);
    let d = x - mean;
    let mean = mean + d / k;
    let m2 = f64::from_bits(a[M2]) + d * (x - mean);
    a[MEAN] = mean.to_bits();
    a[M2] = m2.to_bits();
}

/// The inverse of [`welford_add`]: `x` leaves a window of `finite` finite
/// values. Whether it was one of them.
pub fn welford_remove(a: &mut [u64], x: f64, finite: u64) -> bool {
    if !x.is_finite() {
        a[NONFINITE] = a[NONFINITE].saturating_sub(1);
        return false;
    }
    if finite <= 1 {
        a[MEAN] = 0f64.to_bits();
        a[M2] = 0f64.to_bits();
        return true;
    }
    let k = (finite - 1) as f64;
    let old = f64::from_bits(a[MEAN]);
    let mean = old - (x - old) / k;
    let m2 = f64::from_bits(a[M2]) - (x - mean) * (x - old);
    a[MEAN] = mean.to_bits();
    a[M2] = m2.to_bits();
    true
}

/// Recomputes Welford's mean and sum of squared deviations from the values
/// of `ring` (all held, oldest first: it is called when the number of values
/// pushed is a multiple of the ring's length): the mean of the finite ones,
/// then the sum of their squared deviations from it, each summed in order.
fn reanchor(elem: Elem, ring: &[u64], a: &mut [u64]) {
    let finite = || {
        ring.iter()
            .map(|&b| as_float(elem, b))
            .filter(|x| x.is_finite())
    };
    let count = finite().count();
    if count == 0 {
        a[MEAN] = 0f64.to_bits();
        a[M2] = 0f64.to_bits();
        return;
    }
    let mean = finite().sum::<f64>() / count as f64;
    let m2: f64 = finite().map(|x| (x - mean) * (x - mean)).sum();
    a[MEAN] = mean.to_bits();
    a[M2] = m2.to_bits();
}

/// The order percentiles sort by: Ints as `i64`, Floats by IEEE total order
/// (NaN never enters; -0.0 before 0.0, so that equal keys are equal bits).
fn sort_key_cmp(elem: Elem, a: u64, b: u64) -> std::cmp::Ordering {
    match elem {
        Elem::Float => f64::from_bits(a).total_cmp(&f64::from_bits(b)),
        _ => (a as i64).cmp(&(b as i64)),
    }
}

/// Inserts `bits` into the sorted values (`sorted[0]` their number, then
/// the values), unless it is a NaN or there is no room (never, for a
/// window's own words: a value leaves before one enters a full window).
fn sorted_insert(elem: Elem, sorted: &mut [u64], bits: u64) {
    let (len, vals) = sorted.split_at_mut(1);
    let n = (len[0] as usize).min(vals.len());
    if is_nan(elem, bits) || n >= vals.len() {
        return;
    }
    let at = vals[..n].partition_point(|&v| sort_key_cmp(elem, v, bits).is_le());
    vals.copy_within(at..n, at + 1);
    vals[at] = bits;
    len[0] = n as u64 + 1;
}

/// Removes one value equal to `bits` from the sorted values (a NaN was
/// never entered).
fn sorted_remove(elem: Elem, sorted: &mut [u64], bits: u64) {
    let (len, vals) = sorted.split_at_mut(1);
    let n = (len[0] as usize).min(vals.len());
    if is_nan(elem, bits) {
        return;
    }
    let at = vals[..n].partition_point(|&v| sort_key_cmp(elem, v, bits).is_lt());
    if at < n && sort_key_cmp(elem, vals[at], bits).is_eq() {
        vals.copy_within(at + 1..n, at);
        len[0] = n as u64 - 1;
    }
}

/// Whether `bits` of an `elem` value are a NaN.
pub fn is_nan(elem: Elem, bits: u64) -> bool {
    elem == Elem::Float && f64::from_bits(bits).is_nan()
}

/// Whether value `v` takes the place of `held` as the minimum (`min`) or
/// maximum: it is as small (large) or smaller (larger). Neither is NaN.
pub fn replaces(elem: Elem, v: u64, held: u64, min: bool) -> bool {
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

/// The `i128` in two words.
pub fn i128_of(w: &[u64]) -> i128 {
    (i128::from(w[1] as i64) << 64) | i128::from(w[0])
}

/// Stores an `i128` in two words.
pub fn set_i128(w: &mut [u64], v: i128) {
    w[0] = v as u64;
    w[1] = (v >> 64) as u64;
}

/// Adds (`sign` 1) or removes (-1) a value's bits to a running total of
/// one word (trues), two (an `i128`) or an exact Float sum.
pub fn add_to(total: &mut [u64], elem: Elem, bits: u64, sign: i64) {
    match (total.len(), elem) {
        (1, _) => total[0] = total[0].wrapping_add_signed(sign.wrapping_mul(bits as i64)),
        (2, _) => set_i128(
            total,
            i128_of(total).wrapping_add(i128::from(sign) * i128::from(bits as i64)),
        ),
        _ => exact::add(total, f64::from_bits(bits), sign),
    }
}

/// Subtracts a partial total from a total of the same form.
pub fn sub_from(total: &mut [u64], partial: &[u64]) {
    match total.len() {
        1 => total[0] = total[0].wrapping_sub(partial[0]),
        2 => set_i128(total, i128_of(total).wrapping_sub(i128_of(partial))),
        _ => exact::merge(total, partial, -1),
    }
}

/// Exact sums of Floats in a fixed block of words: every Float is an
/// integer multiple of 2^-1074, so a fixed-point integer of 68 32-bit digits
/// holds any sum of up to 2^60 of them exactly, and removing a value is
/// exact too. A read rounds once, to nearest, ties to even: the result does
/// not depend on the order values came in or left.
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
            acc[limb + k] = (acc[limb + k] as i64).wrapping_add(s * chunk) as u64;
        }
        acc[PENDING] = acc[PENDING].wrapping_add(1);
        if acc[PENDING] >= NORMALISE_EVERY {
            normalise(acc);
        }
    }

    /// `acc += sign * part`, digit by digit (both in carry-save form).
    pub fn merge(acc: &mut [u64], part: &[u64], sign: i64) {
        for k in 0..LIMBS {
            acc[k] = (acc[k] as i64).wrapping_add(sign.wrapping_mul(part[k] as i64)) as u64;
        }
        for k in [POS_INF, NEG_INF, NAN, NEG_ZERO] {
            acc[k] = acc[k].wrapping_add_signed(sign.wrapping_mul(part[k] as i64));
        }
        acc[PENDING] = acc[PENDING].wrapping_add(part[PENDING]).wrapping_add(1);
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
            let v = (*d as i64).wrapping_add(carry);
            *d = (v & 0xffff_ffff) as u64;
            carry = v >> 32;
        }
        acc[LIMBS - 1] = (acc[LIMBS - 1] as i64).wrapping_add(carry) as u64;
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

    fn exact_sum(xs: &[f64]) -> f64 {
        let mut acc = vec![0u64; exact::WORDS];
        for &x in xs {
            exact::add(&mut acc, x, 1);
        }
        exact::round(&mut acc, xs.len() as u64)
    }

    /// `Modulo::of` is `%` for every length a window can have and positions on both sides of
    /// 32 bits (where it changes method) and of each multiple of the length near them.
    #[test]
    fn modulo_is_the_remainder() {
        let big = u64::from(u32::MAX);
        for n in [1, 2, 3, 7, 101, 501, 1 << 16, (1 << 31) + 1, big - 1, big] {
            let modn = Modulo::new(n);
            let near = |x: u64| x.saturating_sub(3)..=x.saturating_add(3);
            let xs = (0..2000)
                .chain(near(n))
                .chain(near(2 * n))
                .chain(near(big))
                .chain(near(big / n * n))
                .chain(near(u64::MAX - 3))
                .chain((0..5000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 40)));
            for x in xs {
                assert_eq!(modn.of(x) as u64, x % n, "{x} mod {n}");
            }
        }
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

    #[test]
    fn count_windows_slide() {
        let max = CountWindow {
            n: 3,
            agg: Agg::Max,
            elem: Elem::Int,
        };
        let mut w = vec![0; max.words()];
        let got: Vec<Read> = [5i64, 1, 2, 0, 0, 7]
            .into_iter()
            .enumerate()
            .map(|(step, v)| max.step(&mut w, step as u64, v as u64))
            .collect();
        assert_eq!(got, [5, 5, 5, 2, 2, 7].map(Read::Bits));
        let sum = CountWindow {
            n: 2,
            agg: Agg::Sum,
            elem: Elem::Int,
        };
        let mut w = vec![0; sum.words()];
        sum.push(&mut w, 0, i64::MAX as u64);
        assert_eq!(sum.step(&mut w, 1, 1), Read::Overflow);
        assert_eq!(sum.step(&mut w, 2, -1i64 as u64), Read::Bits(0));
        // A second push of the same step is ignored.
        assert_eq!(sum.step(&mut w, 2, 100), Read::Bits(0));
        assert_eq!(CountWindow::decode(sum.encode()), Some(sum));
        assert_eq!(CountWindow::decode(1 << 50), None);
    }

    /// Sliding Welford stays close to the two-pass variance of the values
    /// held, on values far from zero (where the textbook sum-of-squares
    /// formula loses every digit) over many times the window's length.
    #[test]
    fn sliding_variance_stays_accurate() {
        let var = CountWindow {
            n: 100,
            agg: Agg::Variance,
            elem: Elem::Float,
        };
        let mut w = vec![0; var.words()];
        let mut seed = 12345u64;
        let mut xs = Vec::new();
        let mut worst = 0f64;
        for step in 0..100_000u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let x = 1e9 + (seed >> 40) as f64 / 1e3;
            xs.push(x);
            let Read::Bits(got) = var.step(&mut w, step, x.to_bits()) else {
                panic!("a variance reads a value");
            };
            if step % 37 == 0 {
                let held = &xs[xs.len().saturating_sub(100)..];
                let mean = held.iter().sum::<f64>() / held.len() as f64;
                let want =
                    held.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / held.len() as f64;
                if want > 0.0 {
                    worst = worst.max((f64::from_bits(got) - want).abs() / want);
                }
            }
        }
        assert!(worst < 1e-6, "relative error {worst}");
    }

    /// Exact percentiles: the value of rank floor(q (len - 1)), NaN skipped,
    /// the values leaving taken out of the sorted ones.
    #[test]
    fn count_window_percentiles_are_exact() {
        let p50 = CountWindow {
            n: 4,
            agg: Agg::P50,
            elem: Elem::Float,
        };
        let mut w = vec![0; p50.words()];
        let got: Vec<f64> = [3.0, 1.0, f64::NAN, 2.0, 10.0, -0.0, 0.0]
            .into_iter()
            .enumerate()
            .map(
                |(step, x)| match p50.step(&mut w, step as u64, x.to_bits()) {
                    Read::Bits(b) => f64::from_bits(b),
                    other => panic!("{other:?}"),
                },
            )
            .collect();
        assert_eq!(got[..6], [3.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        assert_eq!(got[6].to_bits(), 0f64.to_bits());
    }
}
