//! A `min`/`max` count window's step on a fast path: its length's modulus computed once, its comparison fixed at compile time, push and read in one pass.
//!
//! [`CountWindow::push`] and [`CountWindow::read`] serve every aggregate: each decodes the
//! aggregate, and the push divides by the window's length to find the value's slot. A plan's
//! bounded `G`/`F` (issue 39) is a `min`/`max` count window, and its divisions and the dispatch
//! around the deque were about half of its step. A [`MinMaxWindow`] is built once per window
//! (where a kernel is compiled, or per step on the quickened tier) and steps the same monotonic
//! deque (`deque_enter`, here, which `CountWindow::push` calls too) on the same words, the
//! slot found by a multiplication: it writes what `push` then `read` write, word for word (a
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
        RING + 2 * self.modn.n as usize + 2
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
        let (ring, dq) = rest.split_at_mut(n);
        if enter && head[PUSHED_AT] != step.wrapping_add(1) {
            head[PUSHED_AT] = step.wrapping_add(1);
            let pushes = head[PUSHES];
            let at = self.modn.of(pushes);
            deque_enter::<FLOAT, MIN>(ring, dq, at, bits);
            if let Some(slot) = ring.get_mut(at) {
                *slot = bits;
            }
            head[PUSHES] = pushes.wrapping_add(1);
        }
        if head[PUSHES] == 0 {
            return Read::Empty;
        }
        Read::Bits(deque_front(ring, dq))
    }
}

/// A `min` (`MIN`) or `max` window's push of `bits` (a Float where `FLOAT`,
/// else an Int or Bool) into its monotonic deque, `dq`: its head and length,
/// then `n` slots (`n` the ring's length) holding, from the head on, the ring
/// indices of the values no later value has beaten, oldest first. `ring` holds
/// the window's values by position modulo `n`; this push's value goes to index
/// `at` (the caller writes it after), where the value leaving is, once the
/// window is full. A NaN leaves the deque as it is (the window's minimum
/// passes over it, as `f64::min` does).
///
/// The deque holds ring indices rather than positions, so that nothing is
/// reduced modulo `n` here: the values it holds are at distinct positions of
/// the window, oldest first, so the value leaving is the front's if the front
/// is at `at`, and only that one leaves. (Restoring a snapshot rebuilds the
/// deque from the held values, so its words are no part of a snapshot's
/// meaning.) Words no run writes (a head or a length past `n`, a slot past the
/// ring) are reduced or passed over, never indexed outside the words.
#[inline(always)]
pub(super) fn deque_enter<const FLOAT: bool, const MIN: bool>(
    ring: &[u64],
    dq: &mut [u64],
    at: usize,
    bits: u64,
) {
    let n = ring.len();
    let (ends, slots) = dq.split_at_mut(2);
    if n == 0 || slots.len() != n {
        return;
    }
    let (mut head, mut len) = (ends[0], ends[1].min(n as u64) as usize);
    if head >= n as u64 {
        head %= n as u64;
    }
    let mut head = head as usize;
    let wrap = |i: usize| if i >= n { i - n } else { i };
    if len > 0 && slots[head] == at as u64 {
        head = wrap(head + 1);
        len -= 1;
    }
    if !(FLOAT && f64::from_bits(bits).is_nan()) {
        while len > 0 {
            let Some(&held) = ring.get(slots[wrap(head + len - 1)] as usize) else {
                break;
            };
            // The newest of equal values stays (ties: latest wins).
            let replaces = if FLOAT {
                let (v, h) = (f64::from_bits(bits), f64::from_bits(held));
                if MIN { v <= h } else { v >= h }
            } else {
                let (v, h) = (bits as i64, held as i64);
                if MIN { v <= h } else { v >= h }
            };
            if !replaces {
                break;
            }
            len -= 1;
        }
        // A run's deque has room: the value leaving left it above.
        if len < n {
            slots[wrap(head + len)] = at as u64;
            len += 1;
        }
    }
    (ends[0], ends[1]) = (head as u64, len as u64);
}

/// The value at a `min`/`max` window's deque's front (`dq` as
/// [`deque_enter`] keeps it, over `ring`): the window's minimum (maximum), or
/// NaN where the deque is empty, every value in the window NaN.
#[inline(always)]
pub(super) fn deque_front(ring: &[u64], dq: &[u64]) -> u64 {
    let nan = f64::NAN.to_bits();
    if dq.len() < 2 || dq[1] == 0 {
        return nan;
    }
    let slot = usize::try_from(dq[0])
        .ok()
        .and_then(|h| dq[2..].get(h))
        .and_then(|&i| usize::try_from(i).ok());
    slot.and_then(|i| ring.get(i)).copied().unwrap_or(nan)
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
            let shape = CountWindow {
                n: 1 + g.below(7) as u32,
                agg: [Agg::Min, Agg::Max][g.below(2) as usize],
                elem: [Elem::Float, Elem::Int, Elem::Bool][g.below(3) as usize],
            };
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

    /// Words no run writes (any head, length or slot) step without a panic, on both paths.
    #[test]
    fn arbitrary_words_never_panic() {
        let mut g = Gen(0x0123_4567_89ab_cdef);
        for _ in 0..2000 {
            let shape = CountWindow {
                n: 1 + g.below(5) as u32,
                agg: [Agg::Min, Agg::Max][g.below(2) as usize],
                elem: [Elem::Float, Elem::Int][g.below(2) as usize],
            };
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
