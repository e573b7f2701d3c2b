//! Synchronization of several signals: a formula over `x` and `y` sees, at every time either
//! was sampled, a value of each, the missing one filled in by zero-order hold (the last value)
//! or linear interpolation (between the samples around it), as the checker's `mstlo` does.
//!
//! A sample of one signal fills in that signal at the times other signals were sampled since
//! its previous sample, so the filled-in samples come out when the signal's next real sample
//! arrives (a filled-in value needs the sample after it for interpolation, and zero-order hold
//! waits the same way in mstlo). The timeline keeps only the times no signal has passed yet.

use super::ops::Sample;
use super::{SignalId, Synchronization};
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound::Excluded;
use std::time::Duration;

/// The synchronizer of one property's signals.
#[derive(Clone, Debug)]
pub(crate) struct Synchronizer {
    strategy: Synchronization,
    /// The last real sample of each signal.
    last: HashMap<SignalId, Sample>,
    /// The sample times not yet passed by every signal.
    timeline: BTreeSet<Duration>,
}

impl Synchronizer {
    pub(crate) fn new(strategy: Synchronization) -> Synchronizer {
        Synchronizer {
            strategy,
            last: HashMap::new(),
            timeline: BTreeSet::new(),
        }
    }

    /// The synchronized samples one real sample gives, in order: the filled-in ones, then it.
    /// (The monitor has dropped samples whose time does not increase per signal.)
    pub(crate) fn push(&mut self, s: Sample, out: &mut Vec<Sample>) {
        if self.strategy == Synchronization::None {
            self.last.insert(s.signal, s);
            out.push(s);
            return;
        }
        self.timeline.insert(s.time);
        if let Some(prev) = self.last.get(&s.signal).copied() {
            for &t in self.timeline.range((Excluded(prev.time), Excluded(s.time))) {
                let value = match self.strategy {
                    Synchronization::Linear => {
                        let total = s.time.as_secs_f64() - prev.time.as_secs_f64();
                        let part = t.as_secs_f64() - prev.time.as_secs_f64();
                        let alpha = if total != 0.0 { part / total } else { 0.0 };
                        prev.value + (s.value - prev.value) * alpha
                    }
                    _ => prev.value,
                };
                out.push(Sample {
                    signal: s.signal,
                    time: t,
                    value,
                });
            }
        }
        self.last.insert(s.signal, s);
        out.push(s);
        if let Some(frontier) = self.last.values().map(|l| l.time).min() {
            self.timeline = self.timeline.split_off(&frontier);
        }
    }

    /// How many times the timeline holds, for the memory bound.
    pub(crate) fn held(&self) -> usize {
        self.timeline.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(signal: u32, ms: u64, value: f64) -> Sample {
        Sample {
            signal: SignalId(signal),
            time: Duration::from_millis(ms),
            value,
        }
    }

    fn run(strategy: Synchronization, samples: &[Sample]) -> Vec<(u32, u64, f64)> {
        let mut sync = Synchronizer::new(strategy);
        let mut out = Vec::new();
        for &s in samples {
            sync.push(s, &mut out);
        }
        out.iter()
            .map(|s| (s.signal.0, s.time.as_millis() as u64, s.value))
            .collect()
    }

    #[test]
    fn a_signal_is_filled_in_at_the_others_times_when_it_next_arrives() {
        let samples = [
            at(1, 0, 0.0),
            at(0, 1000, 1.0),
            at(0, 2000, 10.0),
            at(1, 4000, 30.0),
        ];
        assert_eq!(
            run(Synchronization::ZeroOrderHold, &samples),
            [
                (1, 0, 0.0),
                (0, 1000, 1.0),
                (0, 2000, 10.0),
                (1, 1000, 0.0),
                (1, 2000, 0.0),
                (1, 4000, 30.0)
            ]
        );
        assert_eq!(
            run(Synchronization::Linear, &samples)[3..5],
            [(1, 1000, 7.5), (1, 2000, 15.0)]
        );
        assert_eq!(run(Synchronization::None, &samples).len(), 4);
    }
}
