//! Scale-out (the `scale` feature, on by default): keyed monitors as a timely-dataflow fragment,
//! over worker threads and processes.
//!
//! vigil does not grow a cluster of its own: a keyed run spreads over
//! timely-dataflow's workers (threads of one process, or processes on one or
//! several machines). The fragment [`keyed_monitors`] takes a stream of
//! [`Event`]s, exchanges each row to the worker that owns its key (a fixed
//! hash of the key, the same in every process), and runs one
//! [`KeyedMonitor`] per worker over the keys it owns.
//!
//! **Time.** The timely timestamp orders the rows as a single-process run
//! takes them: vigil's readers give a row's index in the feed's order (with
//! `--time` too, as the feed gives rows in the merge's order, so that a row is
//! complete as soon as it is read), and readers whose rows merge by time
//! (several timed inputs read in parallel) its stamp, the time in nanoseconds
//! mapped order-preservingly into `u64` ([`timely_time`]). A batch of
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

pub(crate) mod chunks;
mod consumers;
pub(crate) mod feeding;
pub(crate) mod inputs;
pub(crate) mod parts;
pub(crate) mod peers;
mod places;
pub(crate) mod reading;
mod route;
pub(crate) mod run;
mod scaled;
pub(crate) mod source;
pub(crate) mod timed_inputs;

pub use peers::{OnSilent, Term, Timeouts};
pub use route::{ROUTE_HASH, feed, route};
pub use run::{MAX_PROCESSES, MAX_TOTAL_WORKERS, MAX_WORKERS, install_quiet_panics};
pub use scaled::{AlertsTo, Cluster, Failed, Finished, Inputs, OutputTo, ScaledRun, WorkerEnd};
pub use source::ReadCounts;

use crate::keyed::KeyedMonitor;
use crate::monitor::Outputs;
use crate::row::StepError;
use crate::value::{Key, Value};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use timely::dataflow::StreamVec;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::{Capability, InputCapability};

/// A value as it crosses processes (serialized): what [`Value`] holds, with
/// a Float kept as its bits so that it arrives bit for bit. Between threads
/// of one process values move as they are (a Str's text is shared, never
/// copied).
#[derive(Serialize, Deserialize)]
enum Wire {
    Int(i64),
    Float(u64),
    Bool(bool),
    Str(String),
    Unit,
    List(Vec<Wire>),
    Tuple(Vec<Wire>),
    Map(Vec<(String, Wire)>),
    Marker(bool),
}

impl Wire {
    /// A container's wire form (a function has none: it never leaves its
    /// process).
    fn of<E: serde::ser::Error>(v: &Value) -> Result<Wire, E> {
        fn all<'v, E: serde::ser::Error>(
            items: impl Iterator<Item = &'v Value>,
        ) -> Result<Vec<Wire>, E> {
            items.map(Wire::of).collect()
        }
        Ok(match v {
            Value::Int(i) => Wire::Int(*i),
            Value::Float(x) => Wire::Float(x.to_bits()),
            Value::Bool(b) => Wire::Bool(*b),
            Value::Str(t) => Wire::Str(t.to_string()),
            Value::Unit => Wire::Unit,
            Value::List(items) => Wire::List(all(items.iter())?),
            Value::Tuple(items) => Wire::Tuple(all(items.iter())?),
            Value::Map(m) => Wire::Map(
                m.iter()
                    .map(|(k, x)| Ok((k.to_string(), Wire::of(x)?)))
                    .collect::<Result<_, E>>()?,
            ),
            Value::Marker(m) => Wire::Marker(*m == crate::value::Marker::Deferred),
            Value::Func(_) => {
                return Err(E::custom(
                    "a function value cannot be sent to another process",
                ));
            }
        })
    }

    fn value(self) -> Value {
        match self {
            Wire::Int(i) => Value::Int(i),
            Wire::Float(bits) => Value::Float(f64::from_bits(bits)),
            Wire::Bool(b) => Value::Bool(b),
            Wire::Str(t) => Value::Str(t.into()),
            Wire::Unit => Value::Unit,
            Wire::List(items) => Value::list(items.into_iter().map(Wire::value).collect()),
            Wire::Tuple(items) => Value::tuple(items.into_iter().map(Wire::value).collect()),
            Wire::Marker(deferred) => Value::Marker(match deferred {
                true => crate::value::Marker::Deferred,
                false => crate::value::Marker::NoVal,
            }),
            Wire::Map(m) => Value::Map(std::sync::Arc::new(
                m.into_iter().map(|(k, x)| (k.into(), x.value())).collect(),
            )),
        }
    }
}

/// [`Wire`] borrowing its text, for serializing (the same encoding).
#[derive(Serialize)]
enum WireRef<'a> {
    Int(i64),
    Float(u64),
    Bool(bool),
    Str(&'a str),
    Unit,
    List(Vec<Wire>),
    Tuple(Vec<Wire>),
    Map(Vec<(String, Wire)>),
}

impl Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Int(i) => WireRef::Int(*i),
            Value::Float(x) => WireRef::Float(x.to_bits()),
            Value::Bool(b) => WireRef::Bool(*b),
            Value::Str(t) => WireRef::Str(t),
            Value::Unit => WireRef::Unit,
            container => match Wire::of(container)? {
                Wire::List(items) => WireRef::List(items),
                Wire::Tuple(items) => WireRef::Tuple(items),
                Wire::Map(m) => WireRef::Map(m),
                _ => unreachable!("a container's wire form is a container"),
            },
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        Ok(Wire::deserialize(d)?.value())
    }
}

/// A total order of keys, for a caller sorting them: by type (Int, Float,
/// Bool, Str, Unit), then Ints by value, Floats by `total_cmp`, Bools false
/// first, Strs by their bytes. A total order that agrees with the keys'
/// equality (bitwise).
pub fn key_cmp(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Int(a), Value::Int(b)) => a.cmp(b),
        (Value::Float(a), Value::Float(b)) => a.total_cmp(b),
        (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
        (Value::Str(a), Value::Str(b)) => a.as_bytes().cmp(b.as_bytes()),
        (Value::List(x), Value::List(y)) => {
            let mut by_item = x.iter().zip(y.iter()).map(|(a, b)| key_cmp(a, b));
            by_item.find(|o| o.is_ne()).unwrap_or(x.len().cmp(&y.len()))
        }
        (Value::Tuple(x), Value::Tuple(y)) => {
            let mut by_item = x.iter().zip(y.iter()).map(|(a, b)| key_cmp(a, b));
            by_item.find(|o| o.is_ne()).unwrap_or(x.len().cmp(&y.len()))
        }
        (Value::Map(x), Value::Map(y)) => {
            let mut by_entry = x.iter().zip(y.iter()).map(|((ka, a), (kb, b))| {
                ka.as_bytes().cmp(kb.as_bytes()).then_with(|| key_cmp(a, b))
            });
            by_entry
                .find(|o| o.is_ne())
                .unwrap_or(x.len().cmp(&y.len()))
        }
        (Value::Func(x), Value::Func(y)) => (std::sync::Arc::as_ptr(x) as *const () as usize)
            .cmp(&(std::sync::Arc::as_ptr(y) as *const () as usize)),
        _ => a.kind().cmp(&b.kind()),
    }
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
        /// A word the source attaches, handed back with the evaluated
        /// barrier (vigil's CLI sends a digest of the rows before it, which
        /// a resume checks its trace against).
        token: u64,
    },
    /// A time reset for worker `worker`, before the rows at and after `time`: every key's
    /// ticks start again at its next row, the ticks a jump would skip cancelled, or, with
    /// `once`, each fired once (a periodic specification's; nothing otherwise), as a
    /// single-process run's [`KeyedMonitor::reset_ticks`] does.
    Reset {
        /// The time of the first row after the reset.
        time: u64,
        /// The worker it is for.
        worker: u32,
        /// Whether each key's ticks due fire once (`on_reset once`) rather than being
        /// cancelled.
        once: bool,
        /// Its number among the run's sweeps (resets and `Advance`s), which orders the ticks
        /// of several at one place.
        sweep: u64,
        /// Whether the run's times are shown as RFC 3339 dates (the feed's form): a sweep's
        /// ticks have no row of their own to say so (a resumed run's first ones none before).
        rfc3339: bool,
    },
    /// The run's tick under `--clock wall`, for worker `worker`, before the rows at and after
    /// `time`: every key's ticks up to `to` (ns), as a single-process run's
    /// [`KeyedMonitor::advance_to`] does while the sources are silent.
    Advance {
        /// The time of the next row.
        time: u64,
        /// The worker it is for.
        worker: u32,
        /// The time every key ticks up to, in nanoseconds.
        to: i64,
        /// Its number among the run's sweeps (see `Reset::sweep`).
        sweep: u64,
        /// How the run's times are shown (see `Reset::rfc3339`).
        rfc3339: bool,
    },
    /// The end of a reader of another process than the writer's (every process reading its
    /// share of a file): what it read, and the error it stopped the run with at `time`, for
    /// the writer, which writes no row at or after it.
    ReaderEnd {
        /// Where the reader stopped the run, else a time at or after its last row.
        time: u64,
        /// The worker it is for: the writer's.
        worker: u32,
        /// What the reader read.
        read: source::ReadCounts,
        /// The error that stopped the run, and whether it is the input's fault (else the
        /// environment's).
        stop: Option<(String, bool)>,
    },
}

impl Event {
    /// Its time on the timely axis.
    pub fn time(&self) -> u64 {
        match self {
            Event::Row(r) => r.time,
            Event::Barrier { time, .. }
            | Event::Reset { time, .. }
            | Event::Advance { time, .. }
            | Event::ReaderEnd { time, .. } => *time,
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
    /// The declared inputs' cells (the key among them), then any cells
    /// carried along for `emit` (`vigil run --pass`'s undeclared fields),
    /// which the monitor does not see.
    pub cells: Vec<Option<Value>>,
}

impl StampedRow {
    /// A row of `cells` (the declared inputs, in order) at timely time
    /// `time`, position `seq`; `at` is `time()`'s time in nanoseconds, if
    /// the run has one.
    pub fn new(time: u64, seq: u64, at: Option<i64>, cells: Vec<Option<Value>>) -> StampedRow {
        StampedRow {
            time,
            seq,
            at,
            rfc3339: false,
            cells,
        }
    }
}

/// What the fragment hands the caller's `emit` for each event a worker
/// evaluates, in stamp order per worker.
pub enum Evaluated<'a> {
    /// A row: its stamp, its cells and the monitor's result.
    Row {
        /// The row as it came.
        row: &'a StampedRow,
        /// What the worker's monitor made of it.
        result: Result<Outputs<'a>, StepError>,
    },
    /// A tick of the key of `row`, evaluated just before it (a
    /// specification with periodic streams: a key's ticks are made due by
    /// its own rows, [`KeyedMonitor::ticks_before`]); its outputs name the
    /// key and carry the tick's time ([`Outputs::time`]).
    Tick {
        /// The row the tick comes before.
        row: &'a StampedRow,
        /// The tick's outputs, or the runtime error that stopped its key.
        result: Result<Outputs<'a>, StepError>,
    },
    /// A tick of a sweep over every key of the worker: a time reset's `once` ticks
    /// ([`Event::Reset`]) or the run's tick under `--clock wall` ([`Event::Advance`]),
    /// evaluated before the row at `time`. A single-process run takes the keys in the order
    /// they were first seen (least recently used first under a bound on live keys): `order`
    /// is the key's first row's position (`StampedRow::seq`; its last row's under a bound), by
    /// which the ticks of every worker's keys are put in that order.
    KeyTick {
        /// The time of the sweep's event.
        time: u64,
        /// The sweep's number: several at one place come in its order.
        sweep: u64,
        /// Whether the tick's time is shown as an RFC 3339 date (see `Event::Reset`).
        rfc3339: bool,
        /// The key's place in the order of keys (see above).
        order: u64,
        /// The key.
        key: Key,
        /// The tick's outputs, or the runtime error that stopped its key.
        result: Result<Outputs<'a>, StepError>,
    },
    /// A barrier, after `on_barrier` has seen the monitor.
    Barrier {
        /// The checkpoint's time.
        time: u64,
        /// The worker that took it.
        worker: u32,
        /// The barrier's token, as sent.
        token: u64,
    },
    /// A reader of another process ended ([`Event::ReaderEnd`]), handed on as it came.
    ReaderEnd {
        /// Where it stopped the run, else a time at or after its last row.
        time: u64,
        /// What it read.
        read: source::ReadCounts,
        /// The error that stopped the run, and whether it is the input's fault.
        stop: Option<(String, bool)>,
    },
    /// The end: the input is closed and every event evaluated. The worker's
    /// monitor, for what it holds then (its counters, its keys); given once.
    /// What `emit` records here goes out at the last time the input had (0
    /// if it had none), after everything else of that time: so a worker's
    /// counters can travel to another worker, or another process, the way
    /// its rows do.
    End {
        /// The worker's monitor.
        monitor: &'a KeyedMonitor,
    },
}

/// Builds the keyed monitors' part of a dataflow: `events` are exchanged by
/// key (rows) or by their worker (barriers), each worker evaluates its own
/// with the monitor `make` builds (called once per worker, with the
/// worker's index), calls `on_barrier` at each barrier, and `emit` turns
/// each evaluated event into records of the returned stream (at the event's
/// capability; records should carry the event's time), and is given the
/// monitor once at the end ([`Evaluated::End`]).
///
/// `key_index` is the key input's cell in a row (`KeyedMonitor::key_index`).
///
/// ```
/// use timely::container::CapacityContainerBuilder;
/// use timely::dataflow::InputHandle;
/// use vigil::scale::{Evaluated, Event, StampedRow, keyed_monitors};
/// use vigil::{KeyedMonitor, Spec, Value};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let spec = std::sync::Arc::new(Spec::parse(
///     "hot.dsrv",
///     "in host: Str\nin temp: Float\nout hot: Bool\nhot = temp > 30.0",
/// )?);
/// timely::execute(timely::Config::process(2), move |worker| {
///     let mut input = InputHandle::<u64, CapacityContainerBuilder<Vec<Event>>>::new();
///     let spec = spec.clone();
///     worker.dataflow(|scope| {
///         let events = timely::dataflow::operators::Input::input_from(&scope, &mut input);
///         keyed_monitors(
///             events,
///             0, // the key's cell: `host`
///             |_worker| KeyedMonitor::builder(&spec, "host").build().unwrap(),
///             |_time, _worker, _monitor| {}, // at a checkpoint barrier
///             |evaluated, out: &mut Vec<String>| {
///                 if let Evaluated::Row { result: Ok(o), .. } = evaluated {
///                     out.push(format!("{:?} step {}: {:?}", o.key(), o.step(), o.to_vec()));
///                 }
///             },
///         ); // … then `.inspect(…)`, `.probe_with(…)` or operators of your own
///     });
///     if worker.index() == 0 {
///         let row = vec![Some(Value::from("web-1")), Some(Value::Float(31.5))];
///         input.send(Event::Row(StampedRow::new(0, 0, None, row)));
///     }
/// })?;
/// # Ok(())
/// # }
/// ```
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
        Event::Barrier { worker, .. }
        | Event::Reset { worker, .. }
        | Event::Advance { worker, .. }
        | Event::ReaderEnd { worker, .. } => u64::from(*worker),
    });
    events.unary_frontier(pact, "KeyedMonitors", move |initial, _info| {
        // Held at the input's frontier, so that what `emit` records at the
        // end has a time to go out at; it follows the frontier, so it holds
        // nothing back that the records' own capabilities would not.
        let mut held = Some(initial);
        let mut stash = Stash::default();
        let mut out: Vec<O> = Vec::new();
        move |(input, frontier), output| {
            input.for_each(|cap, data| stash.push(&cap, data, Some(0)));
            let (cap, ready) = stash.ready(|t| !frontier.less_equal(&t));
            for event in &ready {
                match event {
                    Event::Row(row) => {
                        if let Some(Some(key)) = row.cells.get(key_index) {
                            monitor.note_place(key, row.seq);
                        }
                        let inputs = &row.cells[..monitor.input_count().min(row.cells.len())];
                        // A periodic specification's ticks of the row's
                        // key come first; a row they refuse (too many
                        // ticks due) is not evaluated.
                        if !monitor.periods().is_empty() {
                            let at = row.at.map(crate::time::Time);
                            match monitor.ticks_before_row(at, inputs) {
                                Ok(()) => {
                                    while let Some(result) = monitor.next_tick() {
                                        emit(Evaluated::Tick { row, result }, &mut out);
                                    }
                                }
                                Err(
                                    e @ StepError::Row(crate::row::RowError::TooManyTicks {
                                        ..
                                    }),
                                ) => {
                                    emit(
                                        Evaluated::Row {
                                            row,
                                            result: Err(e),
                                        },
                                        &mut out,
                                    );
                                    continue;
                                }
                                // A stopped key or a rejected row: the row
                                // says so.
                                Err(_) => {}
                            }
                        }
                        let result = match row.at {
                            Some(ns) => monitor.step_at(crate::time::Time(ns), inputs),
                            None => monitor.step(inputs),
                        };
                        emit(Evaluated::Row { row, result }, &mut out);
                    }
                    Event::Reset {
                        time,
                        once,
                        sweep,
                        rfc3339,
                        ..
                    } => {
                        if !monitor.periods().is_empty() {
                            monitor.reset_ticks(match once {
                                true => crate::lang::ast::ResetPolicy::Once,
                                false => crate::lang::ast::ResetPolicy::Cancel,
                            });
                            let at = (*time, *sweep, *rfc3339);
                            sweep_keys(&mut monitor, at, &mut emit, &mut out);
                        }
                    }
                    Event::Advance {
                        time,
                        to,
                        sweep,
                        rfc3339,
                        ..
                    } => {
                        if !monitor.periods().is_empty() {
                            monitor.advance_to(crate::time::Time(*to));
                            let at = (*time, *sweep, *rfc3339);
                            sweep_keys(&mut monitor, at, &mut emit, &mut out);
                        }
                    }
                    Event::ReaderEnd {
                        time, read, stop, ..
                    } => emit(
                        Evaluated::ReaderEnd {
                            time: *time,
                            read: *read,
                            stop: stop.clone(),
                        },
                        &mut out,
                    ),
                    Event::Barrier {
                        time,
                        worker,
                        token,
                    } => {
                        on_barrier(*time, *worker, &monitor);
                        emit(
                            Evaluated::Barrier {
                                time: *time,
                                worker: *worker,
                                token: *token,
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
            if let Some(cap) = &mut held {
                if let Some(&least) = frontier.frontier().iter().min()
                    && *cap.time() < least
                {
                    cap.downgrade(&least);
                }
                if frontier.is_empty() && stash.is_empty() {
                    emit(Evaluated::End { monitor: &monitor }, &mut out);
                    if !out.is_empty() {
                        output.session(&*cap).give_iterator(out.drain(..));
                    }
                    held = None;
                }
            }
        }
    })
}

/// Emits the ticks a sweep over every key made due (a time reset's `once` ticks, the run's
/// tick under `--clock wall`), each at its place `(time, sweep)` with its key's order
/// (`Evaluated::KeyTick`).
fn sweep_keys<O>(
    monitor: &mut KeyedMonitor,
    (time, sweep, rfc3339): (u64, u64, bool),
    emit: &mut impl FnMut(Evaluated<'_>, &mut Vec<O>),
    out: &mut Vec<O>,
) {
    loop {
        let (order, key, result) = match monitor.next_placed_tick() {
            None => return,
            Some((order, Ok(outputs))) => {
                let key = (outputs.key().cloned()).expect("a keyed monitor's ticks name their key");
                (order, key, Ok(outputs))
            }
            // A tick that failed is of the key the monitor ticked last.
            Some((order, Err(e))) => {
                let key = (monitor.last_key().cloned()).expect("a tick that failed names its key");
                (order, key, Err(e))
            }
        };
        let tick = Evaluated::KeyTick {
            time,
            sweep,
            rfc3339,
            order,
            key,
            result,
        };
        emit(tick, out);
    }
}

/// Records received and not yet taken: each message's records (in the
/// order they were sent), under a capability at the least time of those
/// records.
///
/// A message's capability is moved on to its records' least time as they
/// are kept and as some are taken. Holding it at the message's own time
/// instead held every later time back: a reader's round travels at its
/// first row's time, and where a round's later rows wait for another
/// reader's frontier, the dataflow's frontier stayed at that first row,
/// the other reader's rounds never completed, and with both readers at
/// their limit of rounds in flight the run waited for ever.
pub struct Stash<D> {
    /// Each message's capability, the least time of its records, and its
    /// records not yet taken.
    pending: Vec<(Option<Capability<u64>>, u64, Vec<D>)>,
}

impl<D> Default for Stash<D> {
    fn default() -> Self {
        Stash {
            pending: Vec::new(),
        }
    }
}

/// The order a worker evaluates and the writer writes: time, then barriers
/// before rows, then what `within` says.
pub trait Stamped {
    /// The timely time.
    fn time(&self) -> u64;
    /// The order of two records of one time.
    fn within(&self, other: &Self) -> Ordering;
}

impl Stamped for Event {
    fn time(&self) -> u64 {
        Event::time(self)
    }
    /// Resets first (a barrier of their time is taken after them: the feed's position it
    /// records is past the reset), then barriers, then rows in trace order (their keys do not
    /// matter here: a worker's keys are independent of each other).
    fn within(&self, other: &Event) -> Ordering {
        let rank = |e: &Event| match e {
            Event::Reset { worker, .. } | Event::Advance { worker, .. } => (0, u64::from(*worker)),
            Event::Barrier { worker, .. } => (1, u64::from(*worker)),
            Event::ReaderEnd { worker, .. } => (2, u64::from(*worker)),
            Event::Row(r) => (3, r.seq),
        };
        rank(self).cmp(&rank(other))
    }
}

/// Moves a kept capability on to `least`, its records' least time, where that is later
/// (`u64::MAX`, no record, keeps it: the message is dropped with its records).
fn move_on(cap: &mut Option<Capability<u64>>, least: u64) {
    if let Some(c) = cap
        && least != u64::MAX
        && least > *c.time()
    {
        c.downgrade(&least);
    }
}

fn stamp_order<D: Stamped>(a: &D, b: &D) -> Ordering {
    a.time().cmp(&b.time()).then_with(|| a.within(b))
}

impl<D> Stash<D> {
    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

impl<D: Stamped> Stash<D> {
    /// Keeps the records of a message, under its capability for output
    /// `port` (an operator without outputs, a sink, keeps none).
    pub fn push(&mut self, cap: &InputCapability<u64>, data: &mut Vec<D>, port: Option<usize>) {
        let mut cap = port.and_then(|p| cap.retain_least(p));
        let least = data.iter().map(Stamped::time).min().unwrap_or(u64::MAX);
        move_on(&mut cap, least);
        self.pending.push((cap, least, std::mem::take(data)));
    }

    /// Takes every record whose time `done` says is complete, in order
    /// (time, then `within`), with a capability that may send them all: any
    /// of their messages' capabilities is at or before every record's own
    /// time, which is what the records downstream are ordered by.
    pub fn ready(&mut self, done: impl Fn(u64) -> bool) -> (Option<Capability<u64>>, Vec<D>) {
        // Sized at once for the messages whose least time is complete (nearly always taken
        // whole): grown from empty, the records were copied on every doubling.
        let ready_at_most = (self.pending.iter())
            .filter(|(_, least, _)| done(*least))
            .map(|(_, _, records)| records.len())
            .sum();
        let mut ready = Vec::with_capacity(ready_at_most);
        let mut cap = None;
        self.pending.retain_mut(|(c, least, records)| {
            let before = ready.len();
            // A message none of whose records is complete is passed over
            // at once: with several readers (a file read in parts), many
            // wait for an earlier part, and scanning each of them on every
            // activation made a run quadratic.
            if !done(*least) {
                return true;
            }
            if records.iter().all(|d| done(d.time())) {
                // The common case: the whole message is complete.
                ready.append(records);
            } else {
                let mut kept = Vec::new();
                for d in records.drain(..) {
                    if done(d.time()) {
                        ready.push(d);
                    } else {
                        kept.push(d);
                    }
                }
                *least = kept.iter().map(Stamped::time).min().unwrap_or(u64::MAX);
                *records = kept;
            }
            if ready.len() > before && cap.is_none() {
                cap = c.clone();
            }
            // (After the clone: the records taken may be before the ones kept.)
            move_on(c, *least);
            // A message whose records are all taken drops its capability.
            !records.is_empty()
        });
        // One source sends in order, so this is mostly a check.
        if !ready.is_sorted_by(|a, b| stamp_order(a, b).is_le()) {
            ready.sort_by(stamp_order);
        }
        (cap, ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_cross_processes_bit_for_bit() {
        let values = [
            Value::Int(i64::MIN),
            Value::Float(f64::from_bits(0x7ff8_0000_dead_beef)),
            Value::Float(-0.0),
            Value::Bool(true),
            Value::Str("two words \"quoted\"".into()),
            Value::Unit,
        ];
        for v in values {
            let text = serde_json::to_string(&v).unwrap();
            let back: Value = serde_json::from_str(&text).unwrap();
            assert!(back == v, "{v:?} came back as {back:?}");
        }
    }

    #[test]
    fn keys_order_by_type_then_value_and_route_by_bits() {
        let mut keys = [
            Value::Str("b".into()),
            Value::Unit,
            Value::Float(0.0),
            Value::Int(3),
            Value::Str("a".into()),
            Value::Float(-0.0),
            Value::Bool(false),
            Value::Int(-1),
        ];
        keys.sort_by(key_cmp);
        let shown: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
        assert_eq!(
            shown.join(" "),
            "Int(-1) Int(3) Float(-0.0) Float(0.0) Bool(false) Str(\"a\") Str(\"b\") Unit"
        );
        // Equal keys route alike; 0.0 and -0.0 are two keys.
        assert_eq!(
            route(&Value::Str("a".into())),
            route(&Value::Str("a".into()))
        );
        assert_ne!(route(&Value::Float(0.0)), route(&Value::Float(-0.0)));
        // The hash is fixed: these are XXH3-64 (seed 0) of the documented
        // encoding, and no build may route differently (a checkpoint's
        // workers hold the keys routed to them).
        let mut encoded = vec![3];
        encoded.extend_from_slice(&5u64.to_le_bytes());
        encoded.extend_from_slice(b"host1");
        assert_eq!(
            route(&Value::Str("host1".into())),
            xxhash_rust::xxh3::xxh3_64(&encoded)
        );
        let mut encoded = vec![0];
        encoded.extend_from_slice(&(-7i64).to_le_bytes());
        assert_eq!(route(&Value::Int(-7)), xxhash_rust::xxh3::xxh3_64(&encoded));
        // XXH3-64's published answer for the empty input (seed 0): the
        // algorithm is the specified one.
        assert_eq!(xxhash_rust::xxh3::xxh3_64(b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(timely_time(-1) + 1, timely_time(0));
        assert!(timely_time(i64::MIN) < timely_time(i64::MAX));
    }
}
