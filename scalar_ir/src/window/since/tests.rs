//! The since's state machine against a direct evaluation of its definition, and its words' guarantees.

use super::*;
use crate::window::Gen;

const S: i64 = 1_000_000_000;

fn since(elem: Elem, lo: i64, hi: i64, cap: u32) -> SinceWindow {
    SinceWindow {
        lo_ns: lo,
        hi_ns: hi,
        cap,
        elem,
    }
}

/// One step of a run: its time and the samples of φ and ψ it has.
#[derive(Clone, Copy, Debug)]
struct Step {
    time: i64,
    phi: Option<u64>,
    psi: Option<u64>,
}

/// The definition, evaluated directly over every step so far (O(n²)): at
/// the last step, of the window's time `t` (the latest time seen), the
/// maximum over ψ's samples at times in `[t - hi, t - lo]` of the minimum
/// of that sample and φ's samples at later steps; false (-inf) if none.
fn oracle(s: &SinceWindow, steps: &[Step]) -> f64 {
    let mut clock = Vec::new();
    for st in steps {
        let last = clock.last().copied().unwrap_or(st.time);
        clock.push(st.time.max(last));
    }
    let value = |b: u64| match s.elem {
        Elem::Float => f64::from_bits(b),
        _ => b as f64,
    };
    let now = *clock.last().expect("a step");
    let mut best = f64::NEG_INFINITY;
    for (j, st) in steps.iter().enumerate() {
        let Some(psi) = st.psi.map(value).filter(|v| !v.is_nan()) else {
            continue;
        };
        if clock[j] < now - s.hi_ns || clock[j] > now - s.lo_ns {
            continue;
        }
        let mut v = psi;
        for later in &steps[j + 1..] {
            if let Some(x) = later.phi.map(value).filter(|x| !x.is_nan()) {
                v = v.min(x);
            }
        }
        best = best.max(v);
    }
    match s.elem {
        Elem::Float => best,
        _ => f64::from(u8::from(best > 0.0)),
    }
}

fn as_f64(s: &SinceWindow, r: IntervalRead) -> f64 {
    match (r, s.elem) {
        (IntervalRead::Bits(b), Elem::Float) => f64::from_bits(b),
        (IntervalRead::Bits(b), _) => b as f64,
        (IntervalRead::Full, _) => panic!("full"),
    }
}

/// Random since windows over random runs (times that stall and go back,
/// absent and NaN samples, Bools and Floats with ties, `lo` 0 and not)
/// agree with the definition at every step, and their words pass
/// `restore`. It fails unless both verdicts, and values lowered by φ,
/// occur often.
#[test]
fn agrees_with_the_definition() {
    let mut g = Gen(0x2545_f491_4f6c_dd1d);
    let (mut held, mut vacuous, mut lowered) = (0, 0, 0);
    for case in 0..2000 {
        let elem = if g.below(2) == 0 {
            Elem::Bool
        } else {
            Elem::Float
        };
        let lo = if g.below(2) == 0 {
            0
        } else {
            g.below(3) as i64 * S / 2
        };
        let s = since(elem, lo, lo + g.below(6) as i64 * S / 2, 64);
        let mut w = vec![0; s.words()];
        let mut steps = Vec::new();
        let mut time = 0i64;
        for k in 0..40u64 {
            time += match g.below(8) {
                0 => -S,
                1 => 0,
                _ => S / 2 * g.below(3) as i64,
            };
            let sample = |g: &mut Gen| match (g.below(6), elem) {
                (0, _) => None,
                (1, Elem::Float) => Some(f64::NAN.to_bits()),
                (_, Elem::Float) => Some((g.below(5) as f64 - 2.0).to_bits()),
                _ => Some(u64::from(g.below(3) != 0)),
            };
            let st = Step {
                time,
                phi: sample(&mut g),
                psi: sample(&mut g),
            };
            steps.push(st);
            let got = as_f64(&s, s.step(&mut w, k, time, st.phi, st.psi));
            let want = oracle(&s, &steps);
            assert_eq!(got, want, "case {case} step {k}: {s:?} {steps:?}");
            s.restore(&w, k + 1)
                .unwrap_or_else(|e| panic!("case {case} step {k}: {e}"));
            match got {
                x if x == f64::NEG_INFINITY || (elem == Elem::Bool && x == 0.0) => vacuous += 1,
                _ => held += 1,
            }
            let psi_max = steps
                .iter()
                .filter_map(|s| s.psi)
                .map(|b| as_f64(&s, IntervalRead::Bits(b)));
            if elem == Elem::Float && psi_max.fold(f64::NEG_INFINITY, f64::max) > got {
                lowered += 1;
            }
        }
    }
    assert!(
        held > 10_000 && vacuous > 10_000 && lowered > 10_000,
        "{held} held, {vacuous} vacuous, {lowered} lowered"
    );
}

/// The counter-example of docs/language.md: samples at 0, 1.5 and 2 s, ψ
/// true at 0 and 2, φ false at 1.5; `φ S[0.4s, 2s] ψ` is false at 2 s
/// (the ψ at 0 is followed by φ's false, the ψ at 2 is not 0.4 s old),
/// where `F[0.4s, 2s] ψ && G[0, 0.4s](φ S ψ)` would hold.
#[test]
fn the_documented_counter_example() {
    let s = since(Elem::Bool, 2 * S / 5, 2 * S, 8);
    let mut w = vec![0; s.words()];
    let rows = [(0, 1, 1), (3 * S / 2, 0, 0), (2 * S, 1, 1)];
    let got: Vec<_> = rows
        .iter()
        .enumerate()
        .map(|(k, &(t, phi, psi))| s.step(&mut w, k as u64, t, Some(phi), Some(psi)))
        .collect();
    assert_eq!(
        got,
        [
            IntervalRead::Bits(0),
            IntervalRead::Bits(0),
            IntervalRead::Bits(0)
        ]
    );
    // With φ true at 1.5 s the ψ at 0 s carries on to 2 s.
    let mut w = vec![0; s.words()];
    for (k, &(t, _, psi)) in rows.iter().enumerate() {
        s.step(&mut w, k as u64, t, Some(1), Some(psi));
    }
    assert_eq!(s.read(&mut w, 2 * S), IntervalRead::Bits(1));
}

/// More pending candidates than the bound is `Full` at the read, never a
/// wrong verdict.
#[test]
fn overflow_is_full() {
    let s = since(Elem::Float, 10 * S, 20 * S, 2);
    let mut w = vec![0; s.words()];
    for k in 0..2 {
        s.push(&mut w, k, k as i64 * S, None, Some(1.0f64.to_bits()));
    }
    assert!(matches!(s.read(&mut w, 2 * S), IntervalRead::Bits(_)));
    s.push(&mut w, 2, 2 * S, None, Some(1.0f64.to_bits()));
    assert_eq!(s.read(&mut w, 2 * S), IntervalRead::Full);
}

/// A step's push enters once: a row a kernel declined runs again
/// canonically on the same words.
#[test]
fn push_is_idempotent_within_a_step() {
    let s = since(Elem::Bool, 0, S, 3);
    let mut w = vec![0; s.words()];
    s.step(&mut w, 0, 5, Some(1), Some(1));
    let once = w.clone();
    s.step(&mut w, 0, 5, Some(0), Some(0));
    assert_eq!(w, once);
}

/// Whatever the words hold, a step neither panics nor leaves its words
/// (the native helper's guarantee), and a short block of words is `Full`.
#[test]
fn arbitrary_words_never_panic() {
    let s = since(Elem::Float, S, 3 * S, 3);
    for seed in 0..500u64 {
        let mut g = Gen(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut w: Vec<u64> = (0..s.words()).map(|_| g.next() >> g.below(64)).collect();
        for k in 0..4 {
            s.step(
                &mut w,
                seed + k,
                (seed * 7) as i64,
                Some(g.next()),
                Some(g.next()),
            );
        }
        assert_eq!(w.len(), s.words());
    }
    assert_eq!(s.read(&mut [0; 3], 0), IntervalRead::Full);
}

/// A snapshot whose deque is not monotonic, or whose free words hold a
/// sample, is refused.
#[test]
fn restore_refuses_broken_words() {
    let s = since(Elem::Float, 0, 10 * S, 3);
    let mut w = vec![0; s.words()];
    s.push(&mut w, 0, 0, None, Some(5.0f64.to_bits()));
    s.push(&mut w, 1, S, None, Some(3.0f64.to_bits()));
    s.restore(&w, 2).unwrap();
    let deque = HEADER + 5 * 3;
    let mut broken = w.clone();
    broken[deque + 3] = 7.0f64.to_bits();
    assert!(
        s.restore(&broken, 2).is_err(),
        "a later candidate beats an earlier"
    );
    let mut broken = w.clone();
    broken[deque + 5] = 1;
    assert!(s.restore(&broken, 2).is_err(), "a free slot holds a value");
}

#[test]
fn kinds_round_trip() {
    for elem in [Elem::Bool, Elem::Float] {
        let s = since(elem, S, 2 * S, 9);
        assert_eq!(
            SinceWindow::decode(s.lo_ns, s.hi_ns, s.encode_kind()),
            Some(s)
        );
        assert_eq!(SinceWindow::decode(2, 1, s.encode_kind()), None);
    }
    let bad = since(Elem::Int, 1, 2, 9);
    assert_eq!(SinceWindow::decode(1, 2, bad.encode_kind()), None);
}
