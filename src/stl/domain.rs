//! The robustness domains an STL property is evaluated in: Float robustness (the quantitative
//! semantics), Booleans (the qualitative ones) and robustness intervals (RoSI).
//!
//! Each is the algebra the `mstlo` crate (0.1.1, the Trustworthiness Checker's engine) defines
//! for it, value for value: conjunction is the minimum, `x > c` is `x - c`, an empty eventually
//! window is -∞, and "unknown" is NaN, `false` or (-∞, +∞).

use std::fmt::Debug;

/// A robustness interval: the true robustness lies in `[lower, upper]`. It is final once the
/// two bounds meet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    /// The lower bound (-∞ while nothing bounds it).
    pub lower: f64,
    /// The upper bound (+∞ while nothing bounds it).
    pub upper: f64,
}

/// The operations the operators need of a robustness domain.
pub(crate) trait Domain: Copy + PartialEq + Debug {
    /// Conjunction.
    fn and(l: Self, r: Self) -> Self;
    /// Disjunction.
    fn or(l: Self, r: Self) -> Self;
    /// Negation.
    fn not(v: Self) -> Self;
    /// The value of an empty eventually window (the identity of `or`).
    fn eventually_identity() -> Self;
    /// The value of an empty globally window (the identity of `and`).
    fn globally_identity() -> Self;
    /// `true`.
    fn top() -> Self;
    /// `false`.
    fn bottom() -> Self;
    /// `value > c`.
    fn greater(value: f64, c: f64) -> Self;
    /// `value < c`.
    fn less(value: f64, c: f64) -> Self;
    /// A value not known yet.
    fn unknown() -> Self;
    /// Whether `old` can never again be the window's extremum once `new` is in it (the
    /// monotonic deque's eviction test: `is_max` for eventually, else globally).
    fn dominated(old: Self, new: Self, is_max: bool) -> bool;
}

impl Domain for f64 {
    fn and(l: f64, r: f64) -> f64 {
        l.min(r)
    }
    fn or(l: f64, r: f64) -> f64 {
        l.max(r)
    }
    fn not(v: f64) -> f64 {
        -v
    }
    fn eventually_identity() -> f64 {
        f64::NEG_INFINITY
    }
    fn globally_identity() -> f64 {
        f64::INFINITY
    }
    fn top() -> f64 {
        f64::INFINITY
    }
    fn bottom() -> f64 {
        f64::NEG_INFINITY
    }
    fn greater(value: f64, c: f64) -> f64 {
        value - c
    }
    fn less(value: f64, c: f64) -> f64 {
        c - value
    }
    fn unknown() -> f64 {
        f64::NAN
    }
    fn dominated(old: f64, new: f64, is_max: bool) -> bool {
        if is_max { old <= new } else { old >= new }
    }
}

impl Domain for bool {
    fn and(l: bool, r: bool) -> bool {
        l && r
    }
    fn or(l: bool, r: bool) -> bool {
        l || r
    }
    fn not(v: bool) -> bool {
        !v
    }
    fn eventually_identity() -> bool {
        false
    }
    fn globally_identity() -> bool {
        true
    }
    fn top() -> bool {
        true
    }
    fn bottom() -> bool {
        false
    }
    fn greater(value: f64, c: f64) -> bool {
        value > c
    }
    fn less(value: f64, c: f64) -> bool {
        value < c
    }
    // Two-valued: "not known" reads as false, as in mstlo.
    fn unknown() -> bool {
        false
    }
    fn dominated(old: bool, new: bool, is_max: bool) -> bool {
        if is_max { !old || new } else { old || !new }
    }
}

impl Domain for Interval {
    fn and(l: Interval, r: Interval) -> Interval {
        Interval {
            lower: l.lower.min(r.lower),
            upper: l.upper.min(r.upper),
        }
    }
    fn or(l: Interval, r: Interval) -> Interval {
        Interval {
            lower: l.lower.max(r.lower),
            upper: l.upper.max(r.upper),
        }
    }
    fn not(v: Interval) -> Interval {
        Interval {
            lower: -v.upper,
            upper: -v.lower,
        }
    }
    fn eventually_identity() -> Interval {
        Interval::point(f64::NEG_INFINITY)
    }
    fn globally_identity() -> Interval {
        Interval::point(f64::INFINITY)
    }
    fn top() -> Interval {
        Interval::point(f64::INFINITY)
    }
    fn bottom() -> Interval {
        Interval::point(f64::NEG_INFINITY)
    }
    fn greater(value: f64, c: f64) -> Interval {
        Interval::point(value - c)
    }
    fn less(value: f64, c: f64) -> Interval {
        Interval::point(c - value)
    }
    fn unknown() -> Interval {
        Interval {
            lower: f64::NEG_INFINITY,
            upper: f64::INFINITY,
        }
    }
    // Only a strictly separated interval is out of the race.
    fn dominated(old: Interval, new: Interval, is_max: bool) -> bool {
        if is_max {
            old.upper <= new.lower
        } else {
            old.lower >= new.upper
        }
    }
}

impl Interval {
    /// The interval holding one value.
    pub fn point(v: f64) -> Interval {
        Interval { lower: v, upper: v }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_robustness_and_negation() {
        assert_eq!(<f64 as Domain>::greater(5.0, 3.0), 2.0);
        assert_eq!(<f64 as Domain>::less(2.0, 5.0), 3.0);
        assert!(<f64 as Domain>::unknown().is_nan());
        assert_eq!(
            Interval::not(Interval {
                lower: 1.0,
                upper: 2.0
            }),
            Interval {
                lower: -2.0,
                upper: -1.0
            }
        );
        assert!(!<bool as Domain>::greater(5.0, 5.0));
    }

    #[test]
    fn domination_is_strict_separation_for_intervals() {
        let a = Interval {
            lower: 1.0,
            upper: 2.0,
        };
        let b = Interval {
            lower: 0.5,
            upper: 3.0,
        };
        assert!(!Interval::dominated(a, b, true));
        assert!(Interval::dominated(a, Interval::point(2.0), true));
        assert!(<bool as Domain>::dominated(false, true, true));
        assert!(!<bool as Domain>::dominated(true, false, true));
    }
}
