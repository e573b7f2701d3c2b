//! A `min`/`max` count window: its blocks' running extremes (van Herk and Gil–Werman), and its step on a fast path.
//!
//! **The algorithm.** A window of `n` values keeps them in a ring indexed by position modulo
//! `n`, so the positions fall into blocks of `n` (a block starts where its position is 0
//! modulo `n`) and the window's values are the end of the last block and the start of this
//! one. The window keeps the extreme of this block's values so far (`R`), and, made once per
//! block at its start from the ring (which then holds the whole last block, in index order),
//! the extreme of each suffix of the last block (`S[i]`: of its values at indices `i..n`). The
//! window's extreme at index `j` of a block is that of `S[j + 1]` and `R`: two comparisons a
//! value, and `n` once per `n` values for the suffixes — O(1) per value, with no
//! data-dependent branch (van Herk 1992, Gil and Werman 1993). A monotonic deque, which this
//! replaced (2026-12-08), pops a data-dependent number of values a push, and its loop's exit
//! was a mispredicted branch most pushes of a plan's `G`/`F`: a third of its step.
//!
//! **Its result** is the one the definition gives, bit for bit: of the values that are not NaN
//! the least (`min`) or greatest, the latest of equal ones (`-0.0` and `0.0` among them), and
//! NaN (`f64::NAN`'s bits) where every value is NaN. `pick` is that choice between an older
//! and a newer value; choosing by (value, position) is associative, so the suffixes and the
//! running extreme combine in any grouping to the definition's.
//!
//! **Its words** after the ring: `R`, a word no longer read (the deque's second end, kept so
//! that a window's words, and its snapshots, keep their length), then `S[0..n]`. Restoring a
//! snapshot replays the held values from the ring (`CountWindow::restore`), which makes `R`
//! and the suffixes a read will use again, so they are no part of a snapshot's meaning.
//!
//! [`CountWindow::push`] and [`CountWindow::read`] serve every aggregate: each decodes the
//! aggregate, and the push divides by the window's length to find the value's slot. A plan's
//! bounded `G`/`F` (issue 39) is a `min`/`max` count window, and its divisions and the dispatch
//! around it were about half of its step. A [`MinMaxWindow`] is built once per window (where a
//! kernel is compiled, or per step on the quickened tier) and steps the same words, the slot
//! found by a multiplication: it writes what `push` then `read` write, word for word (a
//! differential test holds it to them, and both to the definition).
//!
//! Nothing here can panic on words of the window's length, whatever they hold, and whatever
//! the modulus passed to [`MinMaxWindow::decode`]: a reduction by multiplication gives an index
//! below `n` for any multiplier (the high word of a product by `n` of a 64-bit word), so a
//! wrong one could only give wrong values, never an index out of the ring.

use super::{CountWindow, Elem, Modulo, PUSHED_AT, PUSHES, RING, Read};
use crate::window::Agg;

/// A `min` or `max` count window ready to step: its length, the modulus reducing positions
/// modulo it, and its comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MinMaxWindow {
    modn: Modulo,
    /// Whether it compares its values as floats (else as `i64`s: Int and Bool).
    float: bool,
    /// Whether it keeps the least value (`min`), else the greatest.
    min: bool,
}

/// The word index of each part of a `min`/`max` window's state ([`MinMaxWindow::layout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MinMaxLayout {
    /// How many values have entered.
    pub pushes: usize,
    /// The step of the last push, plus one (0: none yet).
    pub pushed_at: usize,
    /// The ring's first word: value `p` is at `ring + p mod n`.
    pub ring: usize,
    /// This block's running extreme.
    pub running: usize,
    /// The last block's suffix extremes' first word: `S[i]` is at `suffixes + i`.
    pub suffixes: usize,
}

impl MinMaxWindow {
    /// The fast path of `shape`, if it is a `min` or `max` window.
    pub fn of(shape: CountWindow) -> Option<MinMaxWindow> {
        let min = match shape.agg {
            Agg::Min => true,
            Agg::Max => false,
            _ => return None,
        };
        (shape.n > 0 && shape.elem != Elem::Other).then(|| MinMaxWindow {
            modn: Modulo::new(u64::from(shape.n)),
            float: shape.elem == Elem::Float,
            min,
        })
    }

    /// The window as three words for a helper's operands: its length, its modulus and its
    /// kind (bit 0: floats, bit 1: `min`).
    pub fn encode(&self) -> (u64, u64, u64) {
        let kind = u64::from(self.float) | (u64::from(self.min) << 1);
        (self.modn.n, self.modn.m, kind)
    }

    /// The window of [`MinMaxWindow::encode`]'s words, or `None` for a length of 0 or past
    /// `u32::MAX`, or a kind past 3. The modulus is taken as given (computing it again is the
    /// division this path saves); see the module's note on why no modulus can make a step
    /// panic.
    #[inline]
    pub fn decode(n: u64, m: u64, kind: u64) -> Option<MinMaxWindow> {
        (n > 0 && n <= u64::from(u32::MAX) && kind < 4).then_some(MinMaxWindow {
            modn: Modulo { n, m },
            float: kind & 1 != 0,
            min: kind & 2 != 0,
        })
    }

    /// The number of words of its state: [`CountWindow::words`] of a `min`/`max` window.
    pub fn words(&self) -> usize {
        self.layout().suffixes + self.modn.n as usize
    }

    /// Where each part of its state is among its words (see the module's note), for code
    /// that steps it inline (the native tiers' `min_max_inline`): the layout [`MinMaxWindow::step`]
    /// reads and writes.
    pub fn layout(&self) -> MinMaxLayout {
        let running = RING + self.modn.n as usize;
        MinMaxLayout {
            pushes: PUSHES,
            pushed_at: PUSHED_AT,
            ring: RING,
            running,
            // After the running extreme, one word no longer read (the deque's second end).
            suffixes: running + 2,
        }
    }

    /// Its length, `n`.
    pub fn length(&self) -> u64 {
        self.modn.n
    }

    /// Its modulus: `pushes mod n` is the high word of `(m·pushes mod 2⁶⁴)·n` for every
    /// `pushes` below 2³² (Lemire).
    pub fn multiplier(&self) -> u64 {
        self.modn.m
    }

    /// Whether it compares its values as Floats (else as `i64`s: Int and Bool).
    pub fn compares_floats(&self) -> bool {
        self.float
    }

    /// Whether it keeps the least value (`min`), else the greatest.
    pub fn keeps_least(&self) -> bool {
        self.min
    }

    /// [`CountWindow::step`] where `enter` (else [`CountWindow::read`] alone): enters value
    /// `bits` of step `step` unless a value of this step is in already, then reads.
    #[inline]
    pub fn step(&self, w: &mut [u64], step: u64, bits: u64, enter: bool) -> Read {
        match (self.float, self.min) {
            (true, true) => self.step_as::<true, true>(w, step, bits, enter),
            (true, false) => self.step_as::<true, false>(w, step, bits, enter),
            (false, true) => self.step_as::<false, true>(w, step, bits, enter),
            (false, false) => self.step_as::<false, false>(w, step, bits, enter),
        }
    }

    /// [`MinMaxWindow::step`] for one comparison.
    #[inline(always)]
    fn step_as<const FLOAT: bool, const MIN: bool>(
        &self,
        w: &mut [u64],
        step: u64,
        bits: u64,
        enter: bool,
    ) -> Read {
        let n = self.modn.n as usize;
        if w.len() != self.words() {
            // No caller passes other words (the helper's slice is this long); read them as
            // an empty window rather than index outside them.
            return Read::Empty;
        }
        let (head, rest) = w.split_at_mut(RING);
        let (ring, agg) = rest.split_at_mut(n);
        let pushes = head[PUSHES];
        if enter && head[PUSHED_AT] != step.wrapping_add(1) {
            head[PUSHED_AT] = step.wrapping_add(1);
            let at = self.modn.of(pushes);
            block_enter::<FLOAT, MIN>(ring, agg, at, bits);
            if let Some(slot) = ring.get_mut(at) {
                *slot = bits;
            }
            head[PUSHES] = pushes.wrapping_add(1);
            return Read::Bits(block_read::<FLOAT, MIN>(agg, at, pushes >= n as u64));
        }
        if pushes == 0 {
            return Read::Empty;
        }
        let at = self.modn.of(pushes - 1);
        Read::Bits(block_read::<FLOAT, MIN>(agg, at, pushes > n as u64))
    }
}

/// Which of two values a `min` (`MIN`) or `max` window keeps, of `older` and `newer` (Floats
/// where `FLOAT`, else Ints or Bools as `i64`s): the newer where it is at least as extreme (the
/// latest of equal values), or where the older is NaN; the older where the newer is NaN (a NaN
/// is passed over, as `f64::min` passes over it).
#[inline(always)]
fn pick<const FLOAT: bool, const MIN: bool>(older: u64, newer: u64) -> u64 {
    let newer_wins = if FLOAT {
        let (o, v) = (f64::from_bits(older), f64::from_bits(newer));
        o.is_nan() || if MIN { v <= o } else { v >= o }
    } else {
        let (o, v) = (older as i64, newer as i64);
        if MIN { v <= o } else { v >= o }
    };
    if newer_wins { newer } else { older }
}

/// A `min` (`MIN`) or `max` window's push of `bits` at ring index `at` (see the module's note):
/// at a block's start (`at` 0) the last block's suffix extremes are made from the ring (which
/// holds it whole: the caller writes `bits` to the ring after), and the running extreme
/// restarts from `bits`; otherwise `bits` joins it. `agg` is the words after the ring (`R`,
/// one unused, `S`); words of other lengths are passed over, never indexed outside.
#[inline(always)]
pub(super) fn block_enter<const FLOAT: bool, const MIN: bool>(
    ring: &[u64],
    agg: &mut [u64],
    at: usize,
    bits: u64,
) {
    let n = ring.len();
    let [running, _, suffix @ ..] = agg else {
        return;
    };
    if at != 0 {
        *running = pick::<FLOAT, MIN>(*running, bits);
        return;
    }
    *running = bits;
    if suffix.len() == n && n > 0 {
        // From the last index down: `S[i]` is the extreme of `ring[i]` (older) and `S[i + 1]`.
        let mut later = ring[n - 1];
        suffix[n - 1] = later;
        for (s, &v) in suffix[..n - 1].iter_mut().zip(&ring[..n - 1]).rev() {
            later = pick::<FLOAT, MIN>(v, later);
            *s = later;
        }
    }
}

/// A `min`/`max` window's result (see the module's note), its last value at ring index `at`:
/// this block's running extreme, and where the window holds the end of the last block (`full`:
/// `n` values or more have entered, so there is a last block, and `at + 1 < n`) its suffix from
/// `at + 1` before it. NaN, as `f64::NAN`'s bits, where every value held is one.
#[inline(always)]
pub(super) fn block_read<const FLOAT: bool, const MIN: bool>(
    agg: &[u64],
    at: usize,
    full: bool,
) -> u64 {
    let [running, _, suffix @ ..] = agg else {
        return f64::NAN.to_bits();
    };
    let best = match suffix.get(at.wrapping_add(1)) {
        Some(&older) if full => pick::<FLOAT, MIN>(older, *running),
        _ => *running,
    };
    if FLOAT && f64::from_bits(best).is_nan() {
        f64::NAN.to_bits()
    } else {
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::{Gen, replaces};

    /// Random `min`/`max` windows over random values (NaNs, infinities, signed zeros and ties
    /// among them), stepped with and without a value, and steps repeated: the fast path writes
    /// the words and reads the result that `push` then `read` do.
    #[test]
    fn the_fast_path_writes_what_push_and_read_write() {
        let mut g = Gen(0x2545_f491_4f6c_dd1d);
        let floats = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            2.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        for case in 0..2000 {
            let shape = random_shape(&mut g, 7, &[Elem::Float, Elem::Int, Elem::Bool]);
            let fast = MinMaxWindow::of(shape).expect("a min/max window");
            let (n, m, kind) = fast.encode();
            assert_eq!(MinMaxWindow::decode(n, m, kind), Some(fast));
            let mut a = vec![0; shape.words()];
            assert_eq!(fast.words(), a.len());
            let mut b = a.clone();
            let mut step = 0u64;
            let mut held: Vec<u64> = Vec::new();
            for _ in 0..40 {
                let bits = match shape.elem {
                    Elem::Float => floats[g.below(floats.len() as u64) as usize].to_bits(),
                    Elem::Bool => g.below(2),
                    _ => (g.below(7) as i64 - 3) as u64,
                };
                let enter = g.below(4) != 0;
                if enter && a[PUSHED_AT] != step + 1 {
                    held.push(bits);
                }
                if enter {
                    shape.push(&mut a, step, bits);
                }
                let want = shape.read(&mut a);
                let got = fast.step(&mut b, step, bits, enter);
                assert_eq!((got, &b), (want, &a), "case {case}, {shape:?}");
                let last = &held[held.len().saturating_sub(shape.n as usize)..];
                assert_eq!(
                    got,
                    by_definition(shape, last),
                    "case {case}, {shape:?}, {last:?}"
                );
                // A step is sometimes taken twice (a row run again).
                if g.below(5) != 0 {
                    step += 1;
                }
            }
        }
    }

    /// The least (greatest) of the values `last` that are not NaN, the latest of equal ones
    /// (`-0.0` and `0.0` among them); NaN where every one is; ⊥ where there is none.
    fn by_definition(shape: CountWindow, last: &[u64]) -> Read {
        if last.is_empty() {
            return Read::Empty;
        }
        let float = shape.elem == Elem::Float;
        let mut best: Option<u64> = None;
        for &v in last {
            if float && f64::from_bits(v).is_nan() {
                continue;
            }
            let takes = best.is_none_or(|b| replaces(shape.elem, v, b, shape.agg == Agg::Min));
            if takes {
                best = Some(v);
            }
        }
        Read::Bits(best.unwrap_or(f64::NAN.to_bits()))
    }

    /// A `min` or `max` window of 1 to `most` values of one of `elems`.
    fn random_shape(g: &mut Gen, most: u64, elems: &[Elem]) -> CountWindow {
        CountWindow {
            n: 1 + g.below(most) as u32,
            agg: [Agg::Min, Agg::Max][g.below(2) as usize],
            elem: elems[g.below(elems.len() as u64) as usize],
        }
    }

    /// A window restored from its words, with the words after its ring (the running extreme and
    /// the suffixes) broken, reads from then on what the window it was taken from reads: they
    /// are rebuilt from the held values, whichever index of a block the snapshot was taken at.
    #[test]
    fn a_restore_rebuilds_the_extremes_from_the_held_values() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        for case in 0..1000 {
            let shape = random_shape(&mut g, 6, &[Elem::Float, Elem::Int]);
            let value = |g: &mut Gen| match shape.elem {
                Elem::Float => [0.0, -0.0, 1.5, -2.0, f64::NAN][g.below(5) as usize].to_bits(),
                _ => (g.below(5) as i64 - 2) as u64,
            };
            let mut a = vec![0; shape.words()];
            let taken = g.below(20);
            for step in 0..taken {
                shape.push(&mut a, step, value(&mut g));
            }
            let mut b = a.clone();
            for word in &mut b[RING + shape.n as usize..] {
                *word = g.next();
            }
            shape.restore(&mut b, taken).expect("a run's words restore");
            for step in taken..taken + 15 {
                let bits = value(&mut g);
                shape.push(&mut a, step, bits);
                shape.push(&mut b, step, bits);
                assert_eq!(
                    shape.read(&mut b),
                    shape.read(&mut a),
                    "case {case}, {shape:?}"
                );
            }
        }
    }

    /// Words no run writes (any head, length or slot) step without a panic, on both paths.
    #[test]
    fn arbitrary_words_never_panic() {
        let mut g = Gen(0x0123_4567_89ab_cdef);
        for _ in 0..2000 {
            let shape = random_shape(&mut g, 5, &[Elem::Float, Elem::Int]);
            let fast = MinMaxWindow::of(shape).expect("a min/max window");
            let mut a: Vec<u64> = (0..shape.words())
                .map(|_| match g.below(3) {
                    0 => g.next(),
                    1 => g.below(9),
                    _ => 0,
                })
                .collect();
            let mut b = a.clone();
            for step in 0..8 {
                let bits = g.next();
                shape.push(&mut a, step, bits);
                let _ = shape.read(&mut a);
                let _ = fast.step(&mut b, step, bits, g.below(2) == 0);
            }
        }
    }

    /// The layout names the words `step` writes: the count, the step, the value's ring slot,
    /// the running extreme and, at a block's start, the suffixes (`n` = 3, `max` of Ints).
    #[test]
    fn the_layout_names_the_words_a_step_writes() {
        let shape = CountWindow {
            n: 3,
            agg: Agg::Max,
            elem: Elem::Int,
        };
        let fast = MinMaxWindow::of(shape).expect("a min/max window");
        let l = fast.layout();
        assert_eq!((fast.length(), l.suffixes + 3), (3, fast.words()));
        assert!(!fast.compares_floats() && !fast.keeps_least());
        let mut w = vec![0; fast.words()];
        for (step, v) in [5u64, 9, 7, 4].into_iter().enumerate() {
            let _ = fast.step(&mut w, step as u64, v, true);
        }
        // Values 5, 9, 7 made one block; 4 starts the next at index 0.
        assert_eq!(w[l.pushes], 4);
        assert_eq!(w[l.pushed_at], 4);
        assert_eq!(&w[l.ring..l.ring + 3], &[4, 9, 7]);
        assert_eq!(w[l.running], 4);
        assert_eq!(&w[l.suffixes..l.suffixes + 3], &[9, 9, 7]);
        assert_eq!((fast.multiplier().wrapping_mul(4) as u128 * 3) >> 64, 1);
    }

    #[test]
    fn only_min_and_max_windows_have_the_fast_path() {
        let shape = |agg, elem| CountWindow { n: 3, agg, elem };
        assert!(MinMaxWindow::of(shape(Agg::Sum, Elem::Float)).is_none());
        assert!(MinMaxWindow::of(shape(Agg::Min, Elem::Other)).is_none());
        assert!(MinMaxWindow::decode(0, 0, 0).is_none());
        assert!(MinMaxWindow::decode(1 << 32, 0, 0).is_none());
        assert!(MinMaxWindow::decode(3, 0, 4).is_none());
        // A wrong modulus gives wrong values, never a panic.
        let w = MinMaxWindow::decode(3, 12_345, 3).expect("a window");
        let mut words = vec![0; w.words()];
        for step in 0..20 {
            let _ = w.step(&mut words, step, (step as f64).to_bits(), true);
        }
    }
}
