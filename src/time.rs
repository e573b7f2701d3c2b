//! Time as data: the instants that stamp rows, the units they are written in, and their forms.
//!
//! Evaluation never reads a clock: a row's time comes from the row (`vigil run --time FIELD`),
//! or is its index in its source. An instant is an integer number of nanoseconds, so that
//! times compare exactly and the merge order (`crate::merge`) never depends on float rounding:
//! a number in a unit (`--time-unit s|ms|us|ns`) is scaled to nanoseconds (a float rounded to
//! the nearest one), an RFC 3339 text is nanoseconds since the Unix epoch.

use crate::value::Value;
use std::fmt;

/// An instant, in nanoseconds (since the Unix epoch for RFC 3339 times, since
/// the trace's own origin for numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub i64);

/// The unit of numeric times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    /// Seconds (the default).
    Seconds,
    /// Milliseconds.
    Millis,
    /// Microseconds.
    Micros,
    /// Nanoseconds.
    Nanos,
}

impl TimeUnit {
    /// The unit's nanoseconds.
    pub fn nanos(self) -> i64 {
        match self {
            TimeUnit::Seconds => 1_000_000_000,
            TimeUnit::Millis => 1_000_000,
            TimeUnit::Micros => 1_000,
            TimeUnit::Nanos => 1,
        }
    }

    /// `amount` of this unit in nanoseconds (rounded), if it is a duration
    /// that fits: finite, not negative, under about 292 years.
    pub fn duration(self, amount: f64) -> Option<i64> {
        let ns = amount * self.nanos() as f64;
        (amount.is_finite() && amount >= 0.0 && ns < 9.2e18).then(|| ns.round() as i64)
    }

    /// The unit named `s`, `ms`, `us` or `ns`.
    pub fn from_name(name: &str) -> Option<TimeUnit> {
        Some(match name {
            "s" => TimeUnit::Seconds,
            "ms" => TimeUnit::Millis,
            "us" => TimeUnit::Micros,
            "ns" => TimeUnit::Nanos,
            _ => return None,
        })
    }

    /// The unit's name, as `from_name` reads it.
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "s",
            TimeUnit::Millis => "ms",
            TimeUnit::Micros => "us",
            TimeUnit::Nanos => "ns",
        }
    }
}

/// How a time is written: a number in a unit, or RFC 3339 text (UTC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeForm {
    /// An Int when the time is a whole number of units, else a Float.
    Number(TimeUnit),
    /// `2026-12-01T10:00:00.5Z`.
    Rfc3339,
}

/// Why a value is not a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotATime(pub String);

impl fmt::Display for NotATime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Time {
    /// The time a value of a row's time field gives: an Int or Float in
    /// `unit`, or a Str in RFC 3339; with the form it was written in.
    pub fn from_value(v: &Value, unit: TimeUnit) -> Result<(Time, TimeForm), NotATime> {
        let out_of_range = || {
            NotATime(format!(
                "the time {} ({}) is out of range (about ±292 years around the origin)",
                crate::row::describe(v),
                unit.name()
            ))
        };
        let t = match v {
            Value::Int(i) => i.checked_mul(unit.nanos()).ok_or_else(out_of_range)?,
            Value::Float(f) if f.is_finite() => {
                let ns = (f * unit.nanos() as f64).round();
                // `as` saturates; the bounds keep the conversion exact.
                if !(-9.2e18..=9.2e18).contains(&ns) {
                    return Err(out_of_range());
                }
                ns as i64
            }
            Value::Float(_) => {
                return Err(NotATime(format!(
                    "{} is not a time",
                    crate::row::describe(v)
                )));
            }
            Value::Str(s) => {
                use time::format_description::well_known::Rfc3339;
                let parsed = time::OffsetDateTime::parse(s, &Rfc3339).map_err(|e| {
                    NotATime(format!(
                        "{} is not an RFC 3339 time ({e}), nor a number",
                        crate::row::describe(v)
                    ))
                })?;
                let ns =
                    i64::try_from(parsed.unix_timestamp_nanos()).map_err(|_| out_of_range())?;
                return Ok((Time(ns), TimeForm::Rfc3339));
            }
            _ => {
                return Err(NotATime(format!(
                    "{} is not a time (a number or an RFC 3339 text)",
                    crate::row::describe(v)
                )));
            }
        };
        Ok((Time(t), TimeForm::Number(unit)))
    }

    /// The time written in `form`.
    pub fn to_value(self, form: TimeForm) -> Value {
        match form {
            TimeForm::Number(unit) => {
                let n = unit.nanos();
                if self.0 % n == 0 {
                    Value::Int(self.0 / n)
                } else {
                    Value::Float(self.0 as f64 / n as f64)
                }
            }
            TimeForm::Rfc3339 => {
                use time::format_description::well_known::Rfc3339;
                let text = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.0))
                    .ok()
                    .and_then(|t| t.format(&Rfc3339).ok());
                match text {
                    Some(t) => Value::Str(t.into()),
                    // Years outside 0..=9999 have no RFC 3339 form.
                    None => Value::Int(self.0),
                }
            }
        }
    }

    /// The time in seconds, as `time()` gives it.
    pub fn seconds(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// The time `d` units after this one, if it exists.
    pub fn checked_add(self, nanos: i64) -> Option<Time> {
        self.0.checked_add(nanos).map(Time)
    }
}

/// The ticks of periodic streams (consistent time: the scheduler stamps its
/// events from the same clock as the rows, and they sort before the rows of
/// the same time). Period `k` ticks at `origin + j·periods[k]`, `j ≥ 0`;
/// one tick step serves every period due at its time.
///
/// It serializes (serde) as its periods and each one's next tick, so that a
/// caller checkpointing a periodic run keeps it with the monitor's
/// [`Snapshot`](crate::Snapshot); one read back is checked (positive
/// periods, one next tick each) before it can run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "SchedulerState")]
pub struct Scheduler {
    periods: Vec<i64>,
    /// The next tick of each period; `None` before the origin is set (or
    /// past the end of time).
    next: Vec<Option<i64>>,
}

/// A `Scheduler` as read, before it is checked.
#[derive(serde::Deserialize)]
struct SchedulerState {
    periods: Vec<i64>,
    next: Vec<Option<i64>>,
}

impl TryFrom<SchedulerState> for Scheduler {
    type Error = String;

    fn try_from(s: SchedulerState) -> Result<Scheduler, String> {
        if let Some(p) = s.periods.iter().find(|&&p| p <= 0) {
            return Err(format!(
                "a scheduler's period is {p} ns; periods are positive"
            ));
        }
        if s.next.len() != s.periods.len() {
            return Err(format!(
                "a scheduler has {} periods and {} next ticks",
                s.periods.len(),
                s.next.len()
            ));
        }
        Ok(Scheduler {
            periods: s.periods,
            next: s.next,
        })
    }
}

impl Scheduler {
    /// A scheduler of `periods` (nanoseconds, each positive), not started.
    pub fn new(periods: &[i64]) -> Scheduler {
        assert!(periods.iter().all(|&p| p > 0), "periods are positive");
        Scheduler {
            periods: periods.to_vec(),
            next: vec![None; periods.len()],
        }
    }

    /// A scheduler of `periods` that goes on from `old`: a period `old` has
    /// keeps its next tick; a new one ticks first one period after `now`
    /// (the time given last; its origin is then `now`), or when the origin
    /// is set if `old` has not started. For a specification edited mid-run.
    pub fn carried(periods: &[i64], old: &Scheduler, now: Option<Time>) -> Scheduler {
        let mut s = Scheduler::new(periods);
        if !old.started() {
            return s;
        }
        for (next, p) in s.next.iter_mut().zip(periods) {
            *next = match old.periods.iter().position(|q| q == p) {
                Some(k) => old.next[k],
                None => now.and_then(|t| t.checked_add(*p)).map(|t| t.0),
            };
        }
        s
    }

    /// The periods scheduled.
    pub fn periods(&self) -> &[i64] {
        &self.periods
    }

    /// Whether the origin is set.
    pub fn started(&self) -> bool {
        self.next.iter().any(Option::is_some)
    }

    /// The time of the next tick, once the origin is set.
    pub fn next_time(&self) -> Option<Time> {
        self.next.iter().flatten().copied().min().map(Time)
    }

    /// Sets the origin: every period's first tick is at `origin`.
    pub fn start(&mut self, origin: Time) {
        self.next.fill(Some(origin.0));
    }

    /// The first multiple of the shortest period (counted from time 0) at or after `t`:
    /// the origin of ticks on the grid of a run under the wall clock ([`Ticking::align`]).
    /// `t` itself without periods, or where the multiple is past the end of time.
    pub fn aligned(&self, t: Time) -> Time {
        let Some(&p) = self.periods.iter().min() else {
            return t;
        };
        match t.0.rem_euclid(p) {
            0 => t,
            r => Time(t.0.checked_add(p - r).unwrap_or(t.0)),
        }
    }

    /// The next tick at or before `until`, with the periods due then (one
    /// flag per period), and moves past it; `None` when the next tick is
    /// after `until`.
    pub fn next_until(&mut self, until: Time) -> Option<(Time, Vec<bool>)> {
        let t = self.next.iter().flatten().copied().min()?;
        if t > until.0 {
            return None;
        }
        let due: Vec<bool> = self.next.iter().map(|n| *n == Some(t)).collect();
        for (n, p) in self.next.iter_mut().zip(&self.periods) {
            if *n == Some(t) {
                *n = t.checked_add(*p);
            }
        }
        Some((Time(t), due))
    }

    /// As [`Scheduler::next_until`], writing the periods due into `due`
    /// (one flag per period) rather than allocating them: a keyed monitor
    /// draws every key's ticks through one buffer.
    pub fn next_due(&mut self, until: Time, due: &mut [bool]) -> Option<Time> {
        let t = self.next.iter().flatten().copied().min()?;
        if t > until.0 {
            return None;
        }
        for ((n, p), d) in self.next.iter_mut().zip(&self.periods).zip(due.iter_mut()) {
            *d = *n == Some(t);
            if *d {
                *n = t.checked_add(*p);
            }
        }
        Some(Time(t))
    }

    /// Each period's next tick (`None`: not started, or past the end of
    /// time), in the order of [`Scheduler::periods`].
    pub fn next_ticks(&self) -> &[Option<i64>] {
        &self.next
    }

    /// Sets each period's next tick (as [`Scheduler::next_ticks`] gave
    /// them); `false`, changing nothing, if `next` has another length.
    pub fn set_next_ticks(&mut self, next: &[Option<i64>]) -> bool {
        if next.len() != self.next.len() {
            return false;
        }
        self.next.copy_from_slice(next);
        true
    }

    /// Forgets the origin: the scheduler is as new (a time reset).
    pub fn stop(&mut self) {
        self.next.fill(None);
    }

    /// The ticks from the next one up to `until` (inclusive) that exist.
    pub fn ticks_until(&self, until: Time) -> u128 {
        (self.next.iter().zip(&self.periods))
            .filter_map(|(n, p)| {
                let n = (*n)?;
                (n <= until.0).then(|| ((until.0 - n) / p) as u128 + 1)
            })
            .sum()
    }

    /// Moves every period to its last tick at or before `until` (a time gap
    /// skipped: each period then ticks once, at that tick, rather than at
    /// every tick it missed).
    pub fn skip_to(&mut self, until: Time) {
        for (n, p) in self.next.iter_mut().zip(&self.periods) {
            if let Some(t) = *n
                && t < until.0
            {
                let missed = (until.0 - t) / p;
                *n = Some(t + missed * p);
            }
        }
    }
}

pub use crate::lang::ast::GapPolicy;

/// The rules a run's ticks follow, as `vigil run` applies them to a merged
/// run (`--start`, `--max-gap`, `--on-gap`, `--max-ticks`): a keyed monitor
/// applies them to each key's ticks over that key's rows
/// ([`crate::KeyedMonitorBuilder::ticking`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticking {
    /// The ticks' origin; `None`: the time of the first row (of each key,
    /// in a keyed monitor).
    pub start: Option<Time>,
    /// The longest gap between two rows (nanoseconds) before `on_gap`
    /// applies; `None`: no gap is too long.
    pub max_gap: Option<i64>,
    /// What a gap longer than `max_gap` does to the ticks it spans.
    pub on_gap: GapPolicy,
    /// The most ticks due before one row: more is an error (a jump in time
    /// that would run for ever).
    pub max_ticks: u64,
    /// Where `start` is `None`: whether the first tick is on the grid of
    /// the shortest period (its first multiple at or after the first row's
    /// time, [`Scheduler::aligned`]) rather than at the first row's time.
    /// A keyed run under the wall clock aligns: every key ticks on the
    /// run's grid, from its own first row on (not from the run's start,
    /// which would give a key first seen an hour in an hour of ticks
    /// before it existed).
    pub align: bool,
}

impl Default for Ticking {
    /// `vigil run`'s defaults: the first row's origin, no gap bound,
    /// catch-up, at most a million ticks before a row.
    fn default() -> Ticking {
        Ticking {
            start: None,
            max_gap: None,
            on_gap: GapPolicy::CatchUp,
            max_ticks: 1_000_000,
            align: false,
        }
    }
}

impl Ticking {
    /// Makes `sched`'s ticks due before a row at `t` (the row before it was
    /// at `last`, if there is one), as a merged run does before each input
    /// step: the origin is set first (`start`, else `t`, or the grid's first
    /// tick at or after it where `align`), a gap longer than
    /// `max_gap` is skipped under [`GapPolicy::Skip`], and the ticks then
    /// due up to `t` (inclusive: ticks come before the rows of their time)
    /// are counted. More than `max_ticks` is `Err` with that count, and
    /// `sched` is left unchanged.
    pub fn schedule(&self, sched: &mut Scheduler, last: Option<Time>, t: Time) -> Result<(), u128> {
        let before = (!sched.started() || self.max_gap.is_some()).then(|| sched.next.clone());
        if !sched.started() {
            let origin = match (self.start, self.align) {
                (Some(start), _) => start,
                (None, false) => t,
                (None, true) => sched.aligned(t),
            };
            sched.start(origin);
        }
        if let (Some(gap), Some(last)) = (self.max_gap, last)
            && t.0.saturating_sub(last.0) > gap
            && self.on_gap == GapPolicy::Skip
        {
            sched.skip_to(t);
        }
        let due = sched.ticks_until(t);
        if due > u128::from(self.max_ticks) {
            if let Some(next) = before {
                sched.next = next;
            }
            return Err(due);
        }
        Ok(())
    }
}

impl fmt::Display for Time {
    /// Nanoseconds, as the merge's messages name instants.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aligned_origin_is_the_shortest_periods_next_multiple() {
        let sched = Scheduler::new(&[300, 100]);
        assert_eq!(sched.aligned(Time(0)), Time(0));
        assert_eq!(sched.aligned(Time(1)), Time(100));
        assert_eq!(sched.aligned(Time(100)), Time(100));
        assert_eq!(sched.aligned(Time(-150)), Time(-100));
        // Past the end of time it stays where it is; without periods there is no grid.
        assert_eq!(sched.aligned(Time(i64::MAX)), Time(i64::MAX));
        assert_eq!(Scheduler::new(&[]).aligned(Time(7)), Time(7));
        // `align` applies where no start is given: the first row's time, on the grid.
        let rules = Ticking {
            align: true,
            ..Ticking::default()
        };
        let mut sched = Scheduler::new(&[100]);
        rules.schedule(&mut sched, None, Time(250)).unwrap();
        assert_eq!(sched.next_time(), Some(Time(300)));
        let rules = Ticking {
            start: Some(Time(50)),
            ..rules
        };
        let mut sched = Scheduler::new(&[100]);
        rules.schedule(&mut sched, None, Time(250)).unwrap();
        assert_eq!(sched.next_until(Time(250)).map(|(t, _)| t), Some(Time(50)));
    }

    #[test]
    fn numbers_scale_exactly_and_floats_round_to_the_nanosecond() {
        let (t, form) = Time::from_value(&Value::Int(1500), TimeUnit::Millis).unwrap();
        assert_eq!(t, Time(1_500_000_000));
        assert_eq!(form, TimeForm::Number(TimeUnit::Millis));
        assert_eq!(t.to_value(form), Value::Int(1500));
        let (t, _) = Time::from_value(&Value::Float(0.1), TimeUnit::Seconds).unwrap();
        assert_eq!(t, Time(100_000_000));
        assert_eq!(
            Time(1_250_000_000).to_value(TimeForm::Number(TimeUnit::Seconds)),
            Value::Float(1.25)
        );
        assert!(Time::from_value(&Value::Int(i64::MAX), TimeUnit::Seconds).is_err());
        assert!(Time::from_value(&Value::Float(f64::NAN), TimeUnit::Seconds).is_err());
        assert!(Time::from_value(&Value::Float(1e300), TimeUnit::Seconds).is_err());
        assert!(Time::from_value(&Value::Bool(true), TimeUnit::Seconds).is_err());
        assert_eq!(TimeUnit::Millis.duration(1.5), Some(1_500_000));
        assert_eq!(TimeUnit::Seconds.duration(-1.0), None);
        assert_eq!(TimeUnit::Seconds.duration(f64::NAN), None);
        assert_eq!(TimeUnit::Seconds.duration(1e10), None);
    }

    #[test]
    fn ticks_of_several_periods_share_steps_at_common_times() {
        let mut s = Scheduler::new(&[2, 3]);
        assert!(s.next_until(Time(100)).is_none(), "not started");
        s.start(Time(10));
        let mut got = Vec::new();
        while let Some((t, due)) = s.next_until(Time(16)) {
            got.push((t.0, due));
        }
        assert_eq!(
            got,
            [
                (10, vec![true, true]),
                (12, vec![true, false]),
                (13, vec![false, true]),
                (14, vec![true, false]),
                (16, vec![true, true]),
            ]
        );
        assert_eq!(s.ticks_until(Time(22)), 3 + 2);
        // From 18 and 19, skipping to 101 leaves one tick of each, at 100.
        s.skip_to(Time(101));
        assert_eq!(s.next_until(Time(101)), Some((Time(100), vec![true, true])));
        assert_eq!(s.next_until(Time(101)), None);
        assert_eq!(s.next_until(Time(103)).unwrap().0, Time(102));
    }

    #[test]
    fn rfc3339_times_are_nanoseconds_since_the_epoch() {
        let v = Value::Str("1970-01-01T00:00:01.5+01:00".into());
        let (t, form) = Time::from_value(&v, TimeUnit::Seconds).unwrap();
        assert_eq!(t, Time(1_500_000_000 - 3_600_000_000_000));
        assert_eq!(form, TimeForm::Rfc3339);
        assert_eq!(
            Time(1_500_000_000).to_value(TimeForm::Rfc3339),
            Value::Str("1970-01-01T00:00:01.5Z".into())
        );
        let e = Time::from_value(&Value::Str("yesterday".into()), TimeUnit::Seconds).unwrap_err();
        assert!(e.0.contains("not an RFC 3339 time"), "{e}");
    }
}
