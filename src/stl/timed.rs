//! Samples from trace rows and verdicts as output values: the checker's timed values
//! (`x = {"time": 500, "value": 2.0}`, T in milliseconds, or `[500, 2.0]`) in, and its verdict
//! maps (`Map({"time": Int(500), "value": Float(-5.0)})`) out, with the lockstep the checker's
//! text output prints them in.

use super::{Emitted, SignalId, StlSample, StlSpec, Verdict};
use crate::value::Value;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// Reads one of the checker's timed values: a map with an Int `time` (milliseconds, not
/// negative) and a numeric `value`, or a list `[time, value]`.
pub fn timed_value(v: &Value) -> Result<(Duration, f64), String> {
    let (time, value) = match v {
        Value::Map(m) => (
            m.get("time")
                .ok_or("a timed value has no `time` field (`{\"time\": T, \"value\": V}`)")?,
            m.get("value")
                .ok_or("a timed value has no `value` field (`{\"time\": T, \"value\": V}`)")?,
        ),
        Value::List(l) if l.len() == 2 => (&l[0], &l[1]),
        other => {
            return Err(format!(
                "a sample is `{{\"time\": T, \"value\": V}}` or `[T, V]` (T in milliseconds), not `{other}`"
            ));
        }
    };
    let time = match time {
        Value::Int(t) if *t >= 0 => Duration::from_millis(*t as u64),
        other => {
            return Err(format!(
                "a sample's time is a whole number of milliseconds, not negative, not `{other}`"
            ));
        }
    };
    let value = match value {
        Value::Float(x) => *x,
        Value::Int(i) => *i as f64,
        other => return Err(format!("a sample's value is a number, not `{other}`")),
    };
    Ok((time, value))
}

/// The samples of one row of an `.input` trace read with the signals as its inputs (in
/// [`StlSpec::signals`]' order): one per timed value present.
pub fn row_samples(spec: &StlSpec, row: &[Option<Value>]) -> Result<Vec<StlSample>, String> {
    let mut out = Vec::new();
    row_samples_into(spec, row, &mut out)?;
    Ok(out)
}

/// [`row_samples`] into `out` (what it held is dropped), a buffer a reader keeps from row to
/// row.
pub fn row_samples_into(
    spec: &StlSpec,
    row: &[Option<Value>],
    out: &mut Vec<StlSample>,
) -> Result<(), String> {
    out.clear();
    for (i, cell) in row.iter().enumerate().take(spec.signals().len()) {
        if let Some(v) = cell {
            let (time, value) =
                timed_value(v).map_err(|e| format!("`{}`: {e}", spec.signals()[i]))?;
            out.push(StlSample {
                signal: SignalId(i as u32),
                time,
                value,
            });
        }
    }
    Ok(())
}

/// The samples of one row of a CSV or JSON-lines trace read with the signals as its first
/// cells (in [`StlSpec::signals`]' order) and its time at cell `time`, a number of `unit`s
/// (not negative): one sample per number present, all at the row's time.
pub fn column_samples(
    spec: &StlSpec,
    row: &[Option<Value>],
    time: usize,
    unit: crate::time::TimeUnit,
) -> Result<Vec<StlSample>, String> {
    let mut out = Vec::new();
    column_samples_into(spec, row, time, unit, &mut out)?;
    Ok(out)
}

/// [`column_samples`] into `out` (what it held is dropped), a buffer a reader keeps from row
/// to row.
pub fn column_samples_into(
    spec: &StlSpec,
    row: &[Option<Value>],
    time: usize,
    unit: crate::time::TimeUnit,
    out: &mut Vec<StlSample>,
) -> Result<(), String> {
    out.clear();
    let t = match row.get(time) {
        Some(Some(Value::Int(i))) if *i >= 0 => *i as f64,
        Some(Some(Value::Float(x))) if *x >= 0.0 => *x,
        Some(Some(other)) => {
            return Err(format!("the time is a number, not negative, not `{other}`"));
        }
        _ => return Err("the row has no time".into()),
    };
    // Read as a DSRV run reads a numeric time (`TimeUnit::duration`).
    let ns = unit
        .duration(t)
        .ok_or_else(|| format!("the time {t} {} cannot be a time", unit.name()))?;
    let at = Duration::from_nanos(ns.unsigned_abs());
    for (i, cell) in row.iter().enumerate().take(spec.signals().len()) {
        let value = match cell {
            None => continue,
            Some(Value::Int(v)) => *v as f64,
            Some(Value::Float(v)) => *v,
            Some(other) => {
                return Err(format!(
                    "`{}` is a number, not `{other}`",
                    spec.signals()[i]
                ));
            }
        };
        out.push(StlSample {
            signal: SignalId(i as u32),
            time: at,
            value,
        });
    }
    Ok(())
}

/// A verdict's time in milliseconds (verdict times are sample times, which fit).
pub fn millis(t: Duration) -> i64 {
    i64::try_from(t.as_millis()).unwrap_or(i64::MAX)
}

/// A verdict's value as the checker shows it: `Float(r)`, `Bool(b)` or
/// `Map({"lower": Float(l), "upper": Float(u)})`.
pub fn verdict_value(v: Verdict) -> Value {
    match v {
        Verdict::Robustness(r) => Value::Float(r),
        Verdict::Bool(b) => Value::Bool(b),
        Verdict::Interval(i) => Value::Map(Arc::new(
            [
                (Arc::from("lower"), Value::Float(i.lower)),
                (Arc::from("upper"), Value::Float(i.upper)),
            ]
            .into_iter()
            .collect(),
        )),
    }
}

/// A verdict as the checker's output stream carries it: `{"time": ms, "value": v}`.
pub fn checker_value(e: &Emitted) -> Value {
    Value::Map(Arc::new(
        [
            (Arc::from("time"), Value::Int(millis(e.time))),
            (Arc::from("value"), verdict_value(e.value)),
        ]
        .into_iter()
        .collect(),
    ))
}

/// The checker's text output: its properties' streams in lockstep, line `i` of every property
/// (in name order) once each has given its `i`-th verdict; a property that gives fewer holds
/// the others' back, and the lines after the shortest are never printed.
#[derive(Debug)]
pub struct Lockstep {
    /// Each property's verdicts not yet printed, as a time and a verdict: a property that gives
    /// few holds the others' back for as long as the trace runs (`G[0,1e9]` beside `x > 0`),
    /// so they are kept in 40 bytes each, not as the checker's maps (about 600 bytes: 210 MB
    /// for 300,000 rows), made only when printed.
    waiting: Vec<VecDeque<(Duration, Verdict)>>,
    next: u64,
}

impl Lockstep {
    /// Lockstep over `properties` streams.
    pub fn new(properties: usize) -> Lockstep {
        Lockstep {
            waiting: vec![VecDeque::new(); properties],
            next: 0,
        }
    }

    /// Takes a verdict.
    pub fn push(&mut self, e: &Emitted) {
        self.waiting[e.property].push_back((e.time, e.value));
    }

    /// The complete lines: for each index every property has reached, `(property, index,
    /// value)` in property order.
    pub fn ready(&mut self) -> Vec<(usize, u64, Value)> {
        let mut out = Vec::new();
        while !self.waiting.is_empty() && self.waiting.iter().all(|q| !q.is_empty()) {
            for (p, q) in self.waiting.iter_mut().enumerate() {
                if let Some((time, value)) = q.pop_front() {
                    let e = Emitted {
                        property: p,
                        time,
                        value,
                    };
                    out.push((p, self.next, checker_value(&e)));
                }
            }
            self.next += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::TimeUnit;

    #[test]
    fn a_rows_numbers_are_samples_at_its_time() {
        let spec = StlSpec::parse("p.mstlo", "p: G[0,1](x > 0) && F[0,1](y < 2)\n").unwrap();
        // The signals in order of first mention, then the time cell.
        assert_eq!(spec.signals(), ["x", "y"]);
        let row = [Some(Value::Int(3)), None, Some(Value::Float(1.5))];
        let got = column_samples(&spec, &row, 2, TimeUnit::Seconds).unwrap();
        assert_eq!(got.len(), 1, "an absent cell is no sample");
        assert_eq!(got[0].signal, SignalId(0));
        assert_eq!(got[0].time, Duration::from_millis(1500));
        assert_eq!(got[0].value, 3.0);
        let both = [
            Some(Value::Float(-1.0)),
            Some(Value::Int(2)),
            Some(Value::Int(7)),
        ];
        let got = column_samples(&spec, &both, 2, TimeUnit::Millis).unwrap();
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|s| s.time == Duration::from_millis(7)));
        let late = [Some(Value::Int(1)), None, Some(Value::Int(-1))];
        let e = column_samples(&spec, &late, 2, TimeUnit::Seconds).unwrap_err();
        assert!(e.contains("not negative"), "{e}");
        let text = [Some(Value::Str("a".into())), None, Some(Value::Int(0))];
        let e = column_samples(&spec, &text, 2, TimeUnit::Seconds).unwrap_err();
        assert!(e.starts_with("`x` is a number"), "{e}");
        let timeless = [Some(Value::Int(1)), None, None];
        assert!(column_samples(&spec, &timeless, 2, TimeUnit::Seconds).is_err());
    }
}
