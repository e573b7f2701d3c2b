//! Scale-out: keyed monitors as a timely-dataflow fragment, over worker threads and processes.
//!
//! vigil does not grow a cluster of its own: a keyed run spreads over
//! timely-dataflow's workers (threads of one process, or processes on one or
//! several machines). The fragment [`keyed_monitors`] takes a stream of
//! [`Event`]s, exchanges each row to the worker that owns its key (a fixed
//! hash of the key, the same in every process), and runs one
//! [`KeyedMonitor`] per worker over the keys it owns.
//!
//! **Time.** The timely timestamp is the row's stamp on the time axis: its
//! time in nanoseconds (mapped order-preservingly into `u64`, see
//! [`timely_time`]) with `--time`, else its index in the trace. A batch of
//! rows travels at the timestamp of its first row and every event carries
//! its own time, so rows need not be one message each. A worker evaluates
//! the rows of a time only once the frontier has passed it (every row of it
//! has arrived), in stamp order (time, then the row's position `seq`), so
//! each key sees exactly the order a single-process run gives it.
//!
//! **Checkpoints.** A [`Event::Barrier`] at time `C`, sent to every worker,
//! asks for the state after every row before `C`: the worker evaluates the
//! rows before `C`, hands its monitor to `on_barrier`, then goes on. Barriers
//! sort before the rows of their time, and a worker holds the capability of
//! every barrier until it has taken it, so the frontier downstream passes
//! `C` only once every worker has; that is the alignment Flink's barriers
//! need, given for free by timely's progress tracking.

use crate::keyed::KeyedMonitor;
use crate::monitor::Outputs;
use crate::row::StepError;
use crate::value::Value;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use timely::dataflow::StreamVec;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::{Capability, InputCapability};

/// A value as it crosses threads and processes: what [`Value`] holds, with a
/// Float kept as its bits (so that it arrives bit for bit).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Wire {
    /// An Int.
    Int(i64),
    /// A Float, as its bits.
    Float(u64),
    /// A Bool.
    Bool(bool),
    /// A Str.
    Str(String),
    /// The Unit value.
    Unit,
}

impl Wire {
    /// The wire form of `value`.
    pub fn of(value: &Value) -> Wire {
        match value {
            Value::Int(i) => Wire::Int(*i),
            Value::Float(x) => Wire::Float(x.to_bits()),
            Value::Bool(b) => Wire::Bool(*b),
            Value::Str(s) => Wire::Str(s.to_string()),
            Value::Unit => Wire::Unit,
        }
    }

    /// The value it carries.
    pub fn value(&self) -> Value {
        match self {
            Wire::Int(i) => Value::Int(*i),
            Wire::Float(bits) => Value::Float(f64::from_bits(*bits)),
            Wire::Bool(b) => Value::Bool(*b),
            Wire::Str(s) => Value::Str(s.as_str().into()),
            Wire::Unit => Value::Unit,
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Wire::Int(_) => 0,
            Wire::Float(_) => 1,
            Wire::Bool(_) => 2,
            Wire::Str(_) => 3,
            Wire::Unit => 4,
        }
    }
}

/// Keys are ordered (for the output order, time then key): by type (Int,
/// Float, Bool, Str, Unit), then Ints by value, Floats by `total_cmp`, Bools
/// false first, Strs by their bytes. It is a total order that agrees with
/// equality (bitwise, as keys compare).
impl Ord for Wire {
    fn cmp(&self, other: &Wire) -> Ordering {
        match (self, other) {
            (Wire::Int(a), Wire::Int(b)) => a.cmp(b),
            (Wire::Float(a), Wire::Float(b)) => f64::from_bits(*a).total_cmp(&f64::from_bits(*b)),
            (Wire::Bool(a), Wire::Bool(b)) => a.cmp(b),
            (Wire::Str(a), Wire::Str(b)) => a.as_bytes().cmp(b.as_bytes()),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for Wire {
    fn partial_cmp(&self, other: &Wire) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The worker hash of a key: SipHash with fixed keys over the key's wire
/// form, so every process of one build routes a key to the same worker.
pub fn route(key: &Wire) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

/// The timely timestamp of a time in nanoseconds: `i64` order kept in `u64`
/// (the sign bit flipped), so times before 1970 sort first.
pub fn timely_time(ns: i64) -> u64 {
    (ns as u64) ^ (1 << 63)
}

/// What flows into the fragment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Event {
    /// A row of the trace.
    Row(StampedRow),
    /// A checkpoint barrier for worker `worker`: the state after every row
    /// with a time before `time`.
    Barrier {
        /// The checkpoint's time.
        time: u64,
        /// The worker it is for.
        worker: u32,
    },
}

impl Event {
    /// Its time on the timely axis.
    pub fn time(&self) -> u64 {
        match self {
            Event::Row(r) => r.time,
            Event::Barrier { time, .. } => *time,
        }
    }
}

/// A row with its stamp.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StampedRow {
    /// The timely time (see the module doc).
    pub time: u64,
    /// Its position in the trace (0 for the first row): ties among rows of
    /// one time are broken by it, as a single-process run reads them.
    pub seq: u64,
    /// The time `time()` reads, in nanoseconds, in a run with `--time`.
    pub at: Option<i64>,
    /// Whether the trace gives its times as RFC 3339 texts (so outputs show
    /// them so), rather than numbers.
    pub rfc3339: bool,
    /// The declared inputs' cells (the key among them).
    pub cells: Vec<Option<Wire>>,
}

/// What the fragment hands the caller's `emit` for each event a worker
/// evaluates, in stamp order per worker.
pub enum Evaluated<'a> {
    /// A row: its stamp, its cells and the monitor's result.
    Row {
        /// The row as it came.
        row: &'a StampedRow,
        /// Its cells as values.
        cells: &'a [Option<Value>],
        /// What the worker's monitor made of it.
        result: Result<Outputs<'a>, StepError>,
    },
    /// A barrier, after `on_barrier` has seen the monitor.
    Barrier {
        /// The checkpoint's time.
        time: u64,
        /// The worker that took it.
        worker: u32,
    },
}

/// Builds the keyed monitors' part of a dataflow: `events` are exchanged by
/// key (rows) or by their worker (barriers), each worker evaluates its own
/// with the monitor `make` builds (called once per worker, with the
/// worker's index), calls `on_barrier` at each barrier, and `emit` turns
/// each evaluated event into records of the returned stream (at the event's
/// capability; records should carry the event's time).
///
/// `key_index` is the key input's cell in a row (`KeyedMonitor::key_index`).
pub fn keyed_monitors<'s, O, M, B, F>(
    events: StreamVec<'s, u64, Event>,
    key_index: usize,
    make: M,
    mut on_barrier: B,
    mut emit: F,
) -> StreamVec<'s, u64, O>
where
    O: Clone + 'static,
    M: FnOnce(usize) -> KeyedMonitor,
    B: FnMut(u64, u32, &KeyedMonitor) + 'static,
    F: FnMut(Evaluated<'_>, &mut Vec<O>) + 'static,
{
    let worker = events.scope().index();
    let mut monitor = make(worker);
    let pact = Exchange::new(move |e: &Event| match e {
        Event::Row(r) => r
            .cells
            .get(key_index)
            .and_then(Option::as_ref)
            .map_or(0, route),
        Event::Barrier { worker, .. } => u64::from(*worker),
    });
    events.unary_frontier(pact, "KeyedMonitors", move |initial, _info| {
        drop(initial);
        let mut stash = Stash::default();
        let mut cells: Vec<Option<Value>> = Vec::new();
        let mut out: Vec<O> = Vec::new();
        move |(input, frontier), output| {
            input.for_each(|cap, data| stash.push(&cap, data, Some(0)));
            let (cap, ready) = stash.ready(|t| !frontier.less_equal(&t));
            for event in &ready {
                match event {
                    Event::Row(row) => {
                        cells.clear();
                        cells.extend(row.cells.iter().map(|c| c.as_ref().map(Wire::value)));
                        let result = match row.at {
                            Some(ns) => monitor.step_at(crate::time::Time(ns), &cells[..]),
                            None => monitor.step(&cells[..]),
                        };
                        emit(
                            Evaluated::Row {
                                row,
                                cells: &cells,
                                result,
                            },
                            &mut out,
                        );
                    }
                    Event::Barrier { time, worker } => {
                        on_barrier(*time, *worker, &monitor);
                        emit(
                            Evaluated::Barrier {
                                time: *time,
                                worker: *worker,
                            },
                            &mut out,
                        );
                    }
                }
            }
            if let Some(cap) = cap
                && !out.is_empty()
            {
                output.session(&cap).give_iterator(out.drain(..));
            }
            out.clear();
        }
    })
}

/// Events received and not yet evaluated, each under the capability of the
/// message it came in.
pub struct Stash<D> {
    pending: Vec<(Option<Arc<Capability<u64>>>, D)>,
}

impl<D> Default for Stash<D> {
    fn default() -> Self {
        Stash {
            pending: Vec::new(),
        }
    }
}

/// The order a worker evaluates and the writer writes: time, then barriers
/// before rows, then what the caller's key says.
pub trait Stamped {
    /// The timely time.
    fn time(&self) -> u64;
    /// Within a time: barriers (`None`) first, then by this.
    fn order(&self) -> Option<(Option<&Wire>, u64)>;
}

impl Stamped for Event {
    fn time(&self) -> u64 {
        Event::time(self)
    }
    fn order(&self) -> Option<(Option<&Wire>, u64)> {
        match self {
            // Rows of one time in trace order (their key does not matter
            // here: a worker's keys are independent of each other).
            Event::Row(r) => Some((None, r.seq)),
            Event::Barrier { .. } => None,
        }
    }
}

impl<D: Stamped> Stash<D> {
    /// Keeps the records of a message, under its capability for output
    /// `port` (an operator without outputs, a sink, keeps none).
    pub fn push(&mut self, cap: &InputCapability<u64>, data: &mut Vec<D>, port: Option<usize>) {
        let cap = port.and_then(|p| cap.retain_least(p)).map(Arc::new);
        self.pending
            .extend(data.drain(..).map(|d| (cap.clone(), d)));
    }

    /// Takes every record whose time `done` says is complete, in order
    /// (time, barriers first, then `order`), with a capability that may send
    /// them all: any of their messages' capabilities is at or before every
    /// record's own time, which is what the records downstream are ordered
    /// by.
    pub fn ready(&mut self, done: impl Fn(u64) -> bool) -> (Option<Capability<u64>>, Vec<D>) {
        let mut ready = Vec::new();
        let mut kept = Vec::with_capacity(self.pending.len());
        let mut cap = None;
        for (c, d) in self.pending.drain(..) {
            if done(d.time()) {
                if cap.is_none() {
                    cap = c.as_deref().cloned();
                }
                ready.push(d);
            } else {
                kept.push((c, d));
            }
        }
        // The capabilities of messages whose records are all taken are
        // dropped here, with their last record.
        self.pending = kept;
        ready.sort_by(|a, b| {
            a.time()
                .cmp(&b.time())
                .then_with(|| a.order().cmp(&b.order()))
        });
        (cap, ready)
    }
}
