//! A keyed run on timely workers, whole: its readers feed the fragment [`super::keyed_monitors`],
//! each worker formats the rows it evaluated, and one writer writes them in the single-process
//! order, with the checkpoint barriers completed as they pass.
//!
//! The dataflow, per worker: process 0's first worker reads the trace (the one source,
//! `source.rs`; or process 0's workers each read parts of one regular file, `parts.rs`), stamps
//! each row and sends it into [`super::keyed_monitors`], which exchanges it to the worker that
//! owns its key; that worker evaluates it and formats its output lines (and alerts) right
//! there, so formatting spreads over the workers too. The formatted pieces go to one writer,
//! process 0's first worker, which writes them once their time is complete, in the order (time,
//! position): so the output is the single-process run's whatever the number of workers or
//! processes. An unordered run's pieces go straight to each worker's own process's output
//! instead (no gathering; the order within a worker's keys is kept).
//!
//! Checkpoints: when a row's time crosses a multiple `C` of the checkpoint period, the source
//! sends every worker a barrier at `C`; each writes its keys (`DIR/ck-C/worker-W.ck`), and the
//! writer, once it has every worker's barrier and has written every line before `C`, records
//! the outputs' lengths in the barrier's commit record (`DIR/ck-C/commit.ck`), deleting older
//! barriers. Every file is in the checkpoint format of a single-process run
//! ([`crate::pipeline::checkpoint::barrier`]).
//!
//! What the run has to say goes to the caller: notices (a key stopped, a skipped row) to its
//! [`Notify`], readable alert lines to its [`AlertText`]; what it counted comes back in
//! [`Finished`], for the caller to print.

mod writer;

pub(crate) use writer::{AlertText, SharedSinks, Sink, Sinks, flush_sinks, open_sink};
use writer::{Chunk, ChunkSize, Of, Piece, PieceWriter, RowFault, SharedBuf, WireSample};

use crate::keyed::KeyedMonitor;
use crate::monitor::Stats;
use crate::notice::Notify;
use crate::pipeline::checkpoint::barrier;
use crate::pipeline::drive::Ended;
use crate::pipeline::sink::{Columns, TriggerTally};
use crate::row::StepError;
use crate::scale::source::{AtBarriers, Fill, ReadCounts, Reading, StopAt};
use crate::scale::{Evaluated, Event, StampedRow, keyed_monitors};
use crate::time::{Time, TimeForm};
use crate::trace::{self, OutputFormat, OutputWriter};
use crate::value::{Key, Sample, Value};
use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::Probe;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::{InputHandle, ProbeHandle};

/// Rows the source sends as one batch (one message per worker at most).
const BATCH_ROWS: usize = 1024;
/// Batches the source lets be in flight before it waits for the monitors.
const BATCHES_IN_FLIGHT: usize = 8;

/// The rows from which a reader's batch goes into the dataflow as one message.
const WHOLE_BATCH: usize = 64;

/// What a run ended with, gathered from its workers.
#[derive(Default)]
struct Outcome {
    /// Trigger firings written (for `--fail-on-trigger`).
    fired: u64,
    /// The trace error that ended the input (reported after the outputs).
    trace: Option<(String, Ended)>,
    /// Where the reader that error stopped stopped the run (several readers).
    trace_at: (u64, u64),
    /// A key stopped by a runtime error (status 3).
    runtime: bool,
    /// A rejected row, or a failure of the writer or a checkpoint.
    failure: Option<(String, Ended)>,
    /// With `--stats` or `--summary`, each of this process's workers'
    /// counters and live keys at the end, by worker index.
    ends: Vec<(usize, crate::monitor::Stats, usize)>,
    /// Each trigger's firings as the writer wrote them (`--summary`).
    triggers: Vec<TriggerTally>,
    /// What the readers read (process 0).
    read: Option<ReadCounts>,
    /// Rows and ticks written, by every process (a stopped key's are not;
    /// the writer counts them).
    steps: u64,
    ticks: u64,
}

/// The options of a scaled run that a worker needs.
pub(crate) struct Plan {
    pub output: OutputFormat,
    pub key: String,
    pub key_index: usize,
    pub view: Columns,
    /// The writer's column names.
    pub names: Vec<String>,
    /// Alerts: as JSON lines (to `--alerts`), else readable lines on stderr.
    pub alerts_json: bool,
    /// Whether the trace is a stream (outputs flushed as they complete).
    pub streaming: bool,
    pub threads: usize,
    pub total_workers: usize,
    pub checkpoint: Option<PathBuf>,
    /// The specification's path, which its checkpoint files name.
    pub spec_path: String,
    pub unordered: bool,
    /// `--stats`: each worker's counters are kept at the end.
    pub stats: bool,
    /// `--summary` (or `--fail-on-trigger`, which prints it too): firings
    /// are tallied by trigger as they are written.
    pub summary: bool,
    /// Whether the output is a live sink (rows travel as samples).
    pub live_sink: bool,
    /// The replay log's length and the sources' positions at each barrier
    /// (`Source::at_barriers`).
    pub at_barriers: AtBarriers,
    /// Process 0's sources as its checkpoints record them (empty: none
    /// recorded, a run of parallel readers), and the options that shape the
    /// merge (`Clock::options`).
    pub sources: Vec<crate::pipeline::checkpoint::Source>,
    pub merge_options: String,
    /// Set when nothing more can be written (a closed pipe, a failed write,
    /// a rejected row): the source stops reading, and the run ends.
    pub stop: std::sync::atomic::AtomicBool,
    /// The least time at which a reader of parts stopped the run (a
    /// malformed row): nothing at or after it is written, as a
    /// single-process run writes nothing after its error.
    pub stop_at: Arc<StopAt>,
    /// How times are written (rows without `--time` stand at their index in this unit).
    pub unit_form: TimeForm,
    /// Whether this process's readers are not the writer's (every process reads its share
    /// of a file): each sends its end, and the error it stopped the run with, through the
    /// dataflow ([`Event::ReaderEnd`]).
    pub remote_readers: bool,
    /// Whether rows carry their time (`--time`): their lines show it.
    pub timed: bool,
    /// Where notices go: a key stopped by a runtime error.
    pub notify: Notify,
    /// Where readable alert lines go (`alerts_json` off and no alerts file).
    pub alert_text: AlertText,
    /// The chunks the writer has written, for this process's formatters to fill again.
    pub spares: writer::Spares,
}

impl Plan {
    /// The barrier at `time`, as this run's checkpoint files record it.
    fn barrier(&self, time: u64) -> barrier::Barrier {
        barrier::Barrier {
            time,
            workers: worker_id(self.total_workers),
            key: self.key.clone(),
            route_hash: crate::scale::ROUTE_HASH.to_string(),
        }
    }
}

/// A worker's index as checkpoint files number it.
pub(crate) fn worker_id(index: usize) -> u32 {
    u32::try_from(index).expect("`launch` bounds a run to MAX_TOTAL_WORKERS workers")
}

/// The most worker threads per process. Timely gives every worker a channel to every other
/// for each exchange, so memory and start-up time grow with the square of the workers: on
/// 1,000 rows (a debug build) 64 workers take 0.1 s and 35 MB, 256 take 1.2 s and 127 MB, 512
/// take 5.1 s and 392 MB; 1,000 took 12.8 s and 1.3 GB, and 5,000 aborted on allocation.
/// Workers beyond the machine's cores only take turns (the largest machines have 256 hardware
/// threads); more machines need more processes.
pub const MAX_WORKERS: usize = 256;
/// The most processes: each holds two connections and three threads (timely's sender and
/// receiver, vigil's watchdog) for every other.
pub const MAX_PROCESSES: usize = 256;
/// The most workers over all processes: each process holds its workers' channels to every
/// worker of the run.
pub const MAX_TOTAL_WORKERS: usize = 1024;

/// Where the workers run, once connected: threads of this process, or
/// this process's part of a cluster and its connections to the others.
pub(crate) enum Network {
    Local,
    Cluster {
        process: usize,
        sockets: Vec<Option<std::net::TcpStream>>,
    },
}

/// Starts the workers of `network` running `func`.
fn start<T, F>(
    network: Network,
    threads: usize,
    func: F,
) -> Result<timely::communication::WorkerGuards<T>, String>
where
    T: Send + 'static,
    F: Fn(&mut timely::worker::Worker) -> T + Send + Sync + 'static,
{
    match network {
        Network::Local => timely::execute(timely::Config::process(threads), func),
        Network::Cluster { process, sockets } => {
            use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
            use timely::communication::allocator::{AllocatorBuilder, ProcessBuilder};
            let hooks = timely::communication::Hooks::default();
            let local = ProcessBuilder::new_typed_vector(
                threads,
                hooks.refill.clone(),
                hooks.spill.clone(),
            );
            let (builders, guard) =
                initialize_networking_from_sockets(local, sockets, process, threads, hooks)
                    .map_err(|e| format!("cannot start the network: {e}"))?;
            timely::execute::execute_from(
                builders.into_iter().map(AllocatorBuilder::Tcp).collect(),
                Box::new(guard),
                timely::WorkerConfig::default(),
                func,
            )
        }
    }
}

/// A scaled run ready to start in this process: what its workers share, their monitors, the
/// readers (process 0's) and the sinks (the writer's process's), connected to its peers.
pub(crate) struct Launch {
    pub plan: Plan,
    /// This process's workers' monitors, by local index.
    pub monitors: Vec<KeyedMonitor>,
    /// The readers, by this process's worker index (process 0's workers; elsewhere none, or
    /// the workers' parts of a file every process holds).
    pub readers: Vec<Box<dyn Reading>>,
    /// The sinks, opened (`None` in a process that does not write).
    pub sinks: SharedSinks,
    pub network: Network,
    /// Each trigger's tally, empty (see [`Finished::triggers`]).
    pub triggers: Vec<TriggerTally>,
}

/// What a run that went to its end counted.
pub(crate) struct Finished {
    /// A key was stopped by a runtime error (it was said as a notice).
    pub runtime: bool,
    /// Trigger firings written.
    pub fired: u64,
    /// With stats or a summary asked for, each of this process's workers' counters and live
    /// keys at the end, by worker index.
    pub ends: Vec<(usize, Stats, usize)>,
    /// Each trigger's firings as the writer wrote them (with a summary asked for).
    pub triggers: Vec<TriggerTally>,
    /// Rows the readers read and malformed rows they skipped (process 0).
    pub read: Option<ReadCounts>,
    /// Rows evaluated and written, as a single-process run counts its steps.
    pub steps: u64,
    /// Ticks evaluated and written.
    pub ticks: u64,
}

/// Why a run did not go to its end.
pub(crate) enum Failed {
    /// It stopped: the message, and whose fault it is.
    Stopped(String, Ended),
    /// A worker or timely's network failed (a peer process gone): the cause.
    Computation(String),
}

/// Runs `launch`'s workers to the end of their input, and says how it went.
pub(crate) fn execute(launch: Launch) -> Result<Finished, Failed> {
    let Launch {
        plan,
        monitors,
        readers,
        sinks,
        network,
        triggers,
    } = launch;
    let plan = Arc::new(plan);
    let threads = plan.threads;
    let monitors: Vec<Option<KeyedMonitor>> = monitors.into_iter().map(Some).collect();
    let monitors = Arc::new(Mutex::new(monitors));
    let readers: Vec<Option<Box<dyn Reading>>> = readers.into_iter().map(Some).collect();
    let readers = Arc::new(Mutex::new(readers));
    let outcome = Arc::new(Mutex::new(Outcome {
        triggers,
        ..Outcome::default()
    }));
    install_network_hook();
    let (wake, woken) = std::sync::mpsc::channel::<Wake>();
    let guards = {
        let outcome = Arc::clone(&outcome);
        let sinks = Arc::clone(&sinks);
        let wake = wake.clone();
        start(network, threads, move |worker| {
            // The hook stops this thread, rather than unwinding it, when the network fails.
            WORKER.with(|w| *w.borrow_mut() = Some(wake.clone()));
            let index = worker.index();
            let local = index % plan.threads;
            let monitor = monitors.lock().unwrap_or_else(PoisonError::into_inner)[local]
                .take()
                .expect("each worker takes its own monitor once");
            let mut input =
                InputHandle::<u64, timely::container::CapacityContainerBuilder<Vec<Event>>>::new();
            let probe = ProbeHandle::<u64>::new();
            let p = Arc::clone(&plan);
            let out = Arc::clone(&outcome);
            worker.dataflow(|scope| {
                let events = timely::dataflow::operators::Input::input_from(&scope, &mut input);
                let pieces = keyed_monitors(
                    events,
                    p.key_index,
                    move |_| monitor,
                    barrier_writer(Arc::clone(&p), Arc::clone(&out)),
                    formatter(Arc::clone(&p), index),
                );
                let pieces = pieces.probe_with(&probe);
                let writer = PieceWriter::new(Arc::clone(&p), Arc::clone(&sinks), Arc::clone(&out));
                if p.unordered {
                    pieces.sink(Pipeline, "Write", writer.logic());
                } else {
                    pieces.sink(Exchange::new(|_: &Piece| 0), "Write", writer.logic());
                }
            });
            // Process 0's workers read (the first its feed, or each its
            // parts of the file), and, when every process holds the file,
            // every process's workers their parts.
            let source = match readers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_mut(local)
            {
                Some(r) => r.take(),
                None => None,
            };
            if let Some(source) = source {
                let stopped = feed(worker, &mut input, &probe, source, &plan, &outcome);
                if let Some((s, at)) = stopped {
                    // Of several readers, the one that stopped first in the
                    // output's order is the run's.
                    let mut o = outcome.lock().unwrap_or_else(PoisonError::into_inner);
                    if o.trace.is_none() || o.trace_at > at {
                        o.trace = Some(s);
                        o.trace_at = at;
                    }
                }
            }
            drop(input);
            while worker.step_or_park(None) {}
        })
        .map_err(|m| Failed::Stopped(m, Ended::Failure))?
    };
    // Joining the workers also joins timely's network threads, whose guard
    // panics when one of them did (a peer gone): that is a failure of the
    // run like a worker's, not a crash of vigil. The join runs on a thread of
    // its own, because a worker the network hook stopped never ends: the run
    // ends at the first of the join and a stopped worker.
    let joining = std::thread::Builder::new()
        .name("vigil-join".into())
        .spawn(move || {
            let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| guards.join()));
            let _ = wake.send(Wake::Joined(match joined {
                Ok(results) => results.into_iter().find_map(Result::err),
                Err(_) => Some("a network thread failed".to_string()),
            }));
        });
    let failed = match joining {
        Err(e) => Some(format!("cannot start a thread to join the workers: {e}")),
        // The channel cannot close first: this function holds a sender until the end.
        Ok(_) => match woken.recv().expect("the join thread reports") {
            Wake::Joined(failed) => failed,
            Wake::Stopped(cause) => {
                // The stopped worker holds the sinks' handles for ever: the lines written so
                // far (whole rows in order) are flushed here, as a run that lost a peer's
                // heartbeat flushes them.
                flush_sinks(&sinks, std::time::Duration::from_secs(1));
                Some(cause)
            }
        },
    };
    if let Some(e) = failed {
        let cause = match LOST.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some(lost) => format!("the connection to another process was lost ({lost})"),
            None => e,
        };
        return Err(Failed::Computation(cause));
    }
    let outcome = std::mem::take(&mut *outcome.lock().unwrap_or_else(PoisonError::into_inner));
    if let Some((message, ended)) = outcome.failure.or(outcome.trace) {
        return Err(Failed::Stopped(message, ended));
    }
    let mut ends = outcome.ends;
    ends.sort_by_key(|(w, ..)| *w);
    Ok(Finished {
        runtime: outcome.runtime,
        fired: outcome.fired,
        ends,
        triggers: outcome.triggers,
        read: outcome.read,
        steps: outcome.steps,
        ticks: outcome.ticks,
    })
}

/// One `Stats` for a summary of this process's workers: the first worker's
/// (every worker runs the same code on the same tier) with every worker's
/// rows and declines added up.
pub(crate) fn merged_stats<'a>(
    mut ends: impl Iterator<Item = &'a crate::monitor::Stats>,
) -> Option<crate::monitor::Stats> {
    let mut stats = ends.next()?.clone();
    for s in ends {
        stats.rows += s.rows;
        for (why, n) in &s.declines {
            match stats.declines.iter_mut().find(|(w, _)| w == why) {
                Some((_, m)) => *m += n,
                None => stats.declines.push((why.clone(), *n)),
            }
        }
    }
    Some(stats)
}

/// The first failure of timely's network threads (a peer process gone), as
/// they reported it.
static LOST: Mutex<Option<String>> = Mutex::new(None);

/// What ends the wait for a run's workers: their join (with the first failure, if any), or a
/// worker the network hook stopped (with the cause).
enum Wake {
    Joined(Option<String>),
    Stopped(String),
}

thread_local! {
    /// In a worker thread of a run: where the network hook says it stopped the thread.
    static WORKER: std::cell::RefCell<Option<std::sync::mpsc::Sender<Wake>>> =
        const { std::cell::RefCell::new(None) };
}

/// Whether a panic's message is timely's network failing under a thread: its network thread's
/// own error, or the poisoned queues a worker finds after it.
fn network_panic(message: &str) -> bool {
    message.starts_with("timely communication error: ")
        || message.contains("MergeQueue")
        || message.starts_with("Send thread panic")
        || message.starts_with("Recv thread panic")
}

/// A panic's message (empty if its payload is not text).
fn panic_message<'a>(info: &'a std::panic::PanicHookInfo<'_>) -> &'a str {
    info.payload()
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| info.payload().downcast_ref::<&str>().copied())
        .unwrap_or("")
}

/// Installs, once per process, the panic hook that makes a lost peer a failure of the run and
/// not an abort of the process. When a peer goes, timely's network threads panic, and a worker
/// then panics at its next use of the poisoned queues. Unwinding that worker would run
/// timely's destructors, which flush what they hold into the same poisoned queues and panic
/// again; a panic during unwinding aborts the whole process, with none of the run's report.
/// So the hook keeps those panics quiet, records the network's cause, and stops the worker's
/// thread where it is (parked for good, its state left alone); [`execute`] then ends the run
/// with the cause. Every other panic goes to the hook that was installed before.
fn install_network_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = panic_message(info);
            if !network_panic(message) {
                return previous(info);
            }
            if let Some(cause) = message.strip_prefix("timely communication error: ") {
                LOST.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert_with(|| cause.to_string());
            }
            let Some(wake) = WORKER.with(|w| w.borrow().clone()) else {
                // A network thread (or the join): it unwinds, and the join reports it.
                return;
            };
            let cause = match LOST.lock().unwrap_or_else(PoisonError::into_inner).clone() {
                Some(lost) => format!("the connection to another process was lost ({lost})"),
                None => format!("a worker lost its connection to the other processes ({message})"),
            };
            let _ = wake.send(Wake::Stopped(cause));
            loop {
                std::thread::park();
            }
        }));
    });
}

/// Keeps the panics of timely's network threads and of the workers they take down off
/// standard error (see `install_network_hook`): a scaled run reports the cause once, as an
/// error. Every other panic is reported as before, and then ends the process (status 101): a
/// worker that stopped would leave the others waiting for its progress for ever. A program
/// running scaled runs installs it once, before the first.
pub fn install_quiet_panics() {
    install_network_hook();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let network = network_panic(panic_message(info));
        previous(info);
        if !network {
            // Any other panic is a bug in vigil. A worker that stopped would
            // leave the others waiting for its progress for ever, so the
            // process ends here, as a panic ends a single-threaded run.
            std::process::exit(101);
        }
    }));
}

/// A batch from the reader thread: its events, the time the input may
/// advance to after them, and, at the end of the input, the error that
/// ended it (if one did).
struct Batch {
    events: Vec<Event>,
    frontier: u64,
    end: Option<Option<(String, Ended)>>,
    /// On the last batch: what the reader read, and where it stopped the run if it did.
    read: Option<(ReadCounts, (u64, u64))>,
}

/// The source loop of process 0's first worker. The trace is read on a
/// thread of its own (parsing overlaps evaluation, and a reader blocked on
/// a silent pipe does not keep the worker from noticing a peer's failure);
/// the worker sends its batches, keeps at most `BATCHES_IN_FLIGHT`
/// unfinished, and returns the error that stopped the input, if one did.
fn feed(
    worker: &mut timely::worker::Worker,
    input: &mut InputHandle<u64, timely::container::CapacityContainerBuilder<Vec<Event>>>,
    probe: &ProbeHandle<u64>,
    mut source: Box<dyn Reading>,
    plan: &Plan,
    outcome: &Mutex<Outcome>,
) -> Option<((String, Ended), (u64, u64))> {
    // A stream's rows are sent one by one, each as soon as it is read (the next may be long in
    // coming), unless they come in pieces of the rows that have arrived.
    let one_by_one = plan.streaming && !source.in_pieces();
    let batch_rows = if one_by_one { 1 } else { BATCH_ROWS };
    let capacity = if one_by_one {
        BATCH_ROWS
    } else {
        BATCHES_IN_FLIGHT
    };
    let workers = plan.total_workers;
    // The reader may block before its first batch (a stream's chunk not yet cut): the times
    // before its first row are complete from the start, or another reader's rows would wait
    // for its first batch.
    let start = source.frontier();
    if start != u64::MAX && start > *input.time() {
        input.advance_to(start);
    }
    let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(capacity);
    let spawned = std::thread::Builder::new()
        .name("vigil-reader".into())
        .spawn(move || {
            loop {
                let mut events = Vec::with_capacity(batch_rows + workers);
                let end = match source.fill(&mut events, batch_rows, workers) {
                    Fill::More => None,
                    Fill::Ended => Some(None),
                    Fill::Stopped(message, exit) => Some(Some((message, exit))),
                };
                let last = end.is_some();
                let read = last.then(|| (source.read(), source.stopped_at()));
                let batch = Batch {
                    events,
                    frontier: source.frontier(),
                    end,
                    read,
                };
                if tx.send(batch).is_err() || last {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        let message = format!("cannot start the trace reader: {e}");
        return Some(((message, Ended::Failure), (0, 0)));
    }
    let mut in_flight: VecDeque<u64> = VecDeque::new();
    // A stream's rows come one per batch, each as soon as it is read: the batches waiting are
    // taken together (up to a batch's rows) before the worker steps, so that a fast stream is
    // not evaluated one row per step (a hundred times slower), while a slow stream's row is
    // stepped as soon as no other waits.
    let per_step = if one_by_one { BATCH_ROWS } else { 1 };
    let mut taken = 0;
    let mut round_last = None;
    // The input's time moves on once per round, not once per batch: a round's batches travel
    // as one message at its first row's time (every event carries its own), so a stream's
    // rows, one per batch, do not each cost the dataflow a progress update.
    let mut round_frontier = *input.time();
    loop {
        if plan.stop.load(std::sync::atomic::Ordering::Relaxed) {
            // Nothing more can be written: the rows still unread are not
            // evaluated (as a single-process run stops at a closed pipe).
            return None;
        }
        let mut batch = match rx.try_recv() {
            Ok(b) => b,
            Err(std::sync::mpsc::TryRecvError::Empty) if taken > 0 => {
                taken = 0;
                input.advance_to(round_frontier.max(*input.time()));
                step_round(worker, input, probe, &mut in_flight, round_last.take());
                continue;
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                worker.step_or_park(Some(std::time::Duration::from_millis(1)));
                continue;
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                let message = "the trace reader stopped unexpectedly".to_string();
                return Some(((message, Ended::Failure), (0, 0)));
            }
        };
        if let Some(first) = batch.events.first() {
            let last = batch.events.last().map_or(0, Event::time);
            // Every event's time is at or after the input's: the source
            // advanced it only to a time no later row precedes.
            debug_assert!(first.time() >= *input.time());
            if round_last.is_none() {
                input.advance_to(first.time());
            }
            // A batch of many rows goes into the dataflow as one message, which the exchange
            // splits by key, rather than row by row through the input's own buffer (one more
            // move of every row, and a container of the buffer's for every 93); a stream's
            // one-row batches are still gathered by that buffer.
            if batch.events.len() >= WHOLE_BATCH {
                input.send_batch(&mut batch.events);
            } else {
                for event in batch.events.drain(..) {
                    input.send(event);
                }
            }
            round_last = Some(last);
        }
        if let Some(end) = batch.end {
            let mut stopped_at = (0, 0);
            if let Some((read, at)) = batch.read {
                // Every reader's rows (several read a file in parts).
                let mut o = outcome.lock().unwrap_or_else(PoisonError::into_inner);
                *o.read.get_or_insert_default() += read;
                stopped_at = at;
                drop(o);
                if plan.remote_readers {
                    // The writer, in another process, hears of it through the dataflow.
                    let stop = end.as_ref().map(|(m, e)| (m.clone(), *e == Ended::Trace));
                    let time = match &stop {
                        Some(_) => at.0.max(*input.time()),
                        None => *input.time(),
                    };
                    input.advance_to(time);
                    input.send(Event::ReaderEnd {
                        time,
                        worker: 0,
                        read,
                        stop,
                    });
                }
            }
            return end.map(|e| (e, stopped_at));
        }
        round_frontier = round_frontier.max(batch.frontier);
        taken += 1;
        if taken >= per_step {
            taken = 0;
            input.advance_to(round_frontier.max(*input.time()));
            step_round(worker, input, probe, &mut in_flight, round_last.take());
        }
    }
}

/// Sends what the source loop took since its last step and steps the worker, then waits for
/// the oldest rounds while too many are in flight: `last` is the time of this round's last
/// row, if it had rows.
fn step_round(
    worker: &mut timely::worker::Worker,
    input: &mut InputHandle<u64, timely::container::CapacityContainerBuilder<Vec<Event>>>,
    probe: &ProbeHandle<u64>,
    in_flight: &mut VecDeque<u64>,
    last: Option<u64>,
) {
    in_flight.extend(last);
    input.flush();
    worker.step();
    while let Some(&oldest) = in_flight.front() {
        if !probe.less_equal(&oldest) {
            in_flight.pop_front();
        } else if in_flight.len() > BATCHES_IN_FLIGHT && *input.time() > oldest {
            // Waiting for the monitors: parked (woken by their progress), not spinning, so
            // that the reader threads and the other workers have the cores.
            worker.step_or_park(Some(std::time::Duration::from_millis(1)));
        } else {
            break;
        }
    }
}

/// What each worker does at a barrier: writes its keys' snapshot into the
/// checkpoint's directory. A failure is the run's (it cannot be completed).
fn barrier_writer(
    plan: Arc<Plan>,
    outcome: Arc<Mutex<Outcome>>,
) -> impl FnMut(u64, u32, &KeyedMonitor) + 'static {
    move |time, worker, monitor| {
        let Some(dir) = &plan.checkpoint else {
            return;
        };
        let dir = barrier::barrier_dir(dir, time);
        // A run holding a function value is not checkpointed: no resume
        // could restore it.
        let barrier = plan.barrier(time);
        // The places of the keys first, where they are kept (a sweep's ticks are ordered by
        // them), then the keys.
        let places = crate::scale::places::write(&dir, worker, monitor);
        let written = places.and_then(|()| {
            barrier::write_worker(
                &dir,
                &plan.spec_path,
                plan.output,
                &barrier,
                worker,
                monitor,
            )
        });
        if let Err(e) = written {
            let mut o = outcome.lock().unwrap_or_else(PoisonError::into_inner);
            o.failure.get_or_insert((
                format!("cannot write the checkpoint `{}`: {e}", dir.display()),
                Ended::Failure,
            ));
        }
    }
}

/// Formats each evaluated row where it was evaluated: its output lines (as
/// the writer of a single-process keyed run writes them), its alerts, and
/// the error that stopped its key.
///
/// At the end it sends the worker's counters to the writer, for `--stats`
/// and `--summary` (a worker of another process has no other way there).
fn formatter(
    plan: Arc<Plan>,
    worker: usize,
) -> impl FnMut(Evaluated<'_>, &mut Vec<Piece>) + 'static {
    let (unit_form, timed) = (plan.unit_form, plan.timed);
    let buf = SharedBuf::default();
    let mut writer: Box<dyn OutputWriter> = trace::keyed_writer(
        plan.output,
        plan.names.clone(),
        &plan.key,
        Box::new(buf.clone()),
        true,
    );
    let mut samples: Vec<Sample> = Vec::new();
    let mut stopped: HashSet<Key> = HashSet::new();
    let mut size = ChunkSize::default();
    // The row a sweep's tick stands in for: its time and order, and its key's cell.
    let mut swept = StampedRow::new(0, 0, None, vec![None; plan.key_index + 1]);
    let mut sweep = 0;
    move |evaluated, out| {
        let (row, result, of) = match evaluated {
            Evaluated::Barrier { time, token, .. } => {
                out.push(Piece::Done {
                    time,
                    digest: token,
                });
                return;
            }
            Evaluated::ReaderEnd { time, read, stop } => {
                out.push(Piece::ReaderEnd { time, read, stop });
                return;
            }
            Evaluated::End { monitor } => {
                if plan.stats || plan.summary {
                    out.push(Piece::End {
                        worker,
                        stats: Box::new(monitor.stats()),
                        keys: monitor.key_count(),
                    });
                }
                return;
            }
            Evaluated::Row { row, result } => (row, result, Of::Row),
            // A tick of a row's key is written just before the row, at the
            // row's place in the output (the single-process order).
            Evaluated::Tick { row, result } => (row, result, Of::Tick),
            // A sweep's tick is written at its event's place, keys in the order of their
            // last rows (`Of::Sweep`).
            Evaluated::KeyTick {
                time,
                sweep: n,
                rfc3339,
                order,
                key,
                result,
            } => {
                sweep = n;
                (swept.time, swept.seq, swept.rfc3339) = (time, order, rfc3339);
                swept.cells[plan.key_index] = Some(key.value().clone());
                (&swept, result, Of::Sweep)
            }
        };
        let tick = of != Of::Row;
        {
            let cells = &row.cells;
            let key_value = row.cells[plan.key_index].clone().unwrap_or(Value::Unit);
            match result {
                Ok(outputs) => {
                    let form = if row.rfc3339 {
                        TimeForm::Rfc3339
                    } else {
                        unit_form
                    };
                    let at = if tick {
                        outputs.time().map(|t| t.0)
                    } else {
                        row.at
                    };
                    let time_value = at.map(|ns| Time(ns).to_value(form));
                    let shown = if timed { time_value.as_ref() } else { None };
                    // A tick has no input row: its passed fields are absent.
                    let row_cells = (!tick).then_some(&cells[..]);
                    plan.view
                        .fill(&mut samples, plan.output, row_cells, outputs.iter(), shown);
                    let key = outputs
                        .key()
                        .expect("a keyed monitor's outputs name their key");
                    let live = plan.live_sink.then(|| {
                        (
                            outputs.step(),
                            samples.iter().map(WireSample::from).collect(),
                        )
                    });
                    let chunk = Chunk::of(out, &mut size, &plan.spares);
                    if live.is_none() {
                        // Formatted straight into the chunk where the writer can (writing into
                        // memory cannot fail).
                        let step = outputs.step();
                        let appended = writer.append_keyed(step, key, &samples, &mut chunk.out);
                        if !matches!(appended, Ok(true)) {
                            let _ = writer.write_keyed(step, key, &samples);
                            let _ = writer.flush();
                            buf.drain_into(&mut chunk.out);
                        }
                    }
                    let mut fired = Vec::new();
                    for alert in outputs.alerts() {
                        if plan.summary {
                            let at = TriggerTally::place(alert.step(), Some((&plan.key, key)));
                            fired.push((alert.trigger().to_string(), at));
                        }
                        if plan.alerts_json {
                            let context = match tick {
                                true => Vec::new(),
                                false => plan.view.context(cells),
                            };
                            chunk.alerts.extend(trace::alert_line_with(
                                &alert,
                                Some((&plan.key, key)),
                                &context,
                            ));
                        } else {
                            let key = key.to_string();
                            let line = crate::pipeline::sink::readable_alert(
                                &alert,
                                Some((&plan.key, &key)),
                            );
                            chunk.alerts.extend_from_slice(line.as_bytes());
                        }
                    }
                    chunk.end_row(row, (key_value, None, fired), of, &mut size);
                    if let Some(last) = chunk.rows.last_mut() {
                        last.samples = live;
                        if of == Of::Sweep {
                            last.sweep = sweep;
                        }
                    }
                }
                Err(StepError::Runtime(e)) => {
                    let key = Key::new(key_value.clone());
                    if stopped.insert(key.clone()) {
                        let fault = RowFault::KeyStopped {
                            key: key.to_string(),
                            error: e.to_string(),
                        };
                        // (At a sweep's place for a sweep's tick.)
                        let of = if of == Of::Sweep { Of::Sweep } else { Of::Row };
                        let chunk = Chunk::of(out, &mut size, &plan.spares);
                        chunk.end_row(row, (key_value, Some(fault), Vec::new()), of, &mut size);
                        if let Some(last) = chunk.rows.last_mut().filter(|_| of == Of::Sweep) {
                            last.sweep = sweep;
                        }
                    }
                }
                // Too many ticks due before a key's row ends the run, as a
                // single-process run's does.
                Err(StepError::Row(e @ crate::row::RowError::TooManyTicks { .. })) => {
                    let fault = RowFault::Fatal(format!("{e} (--max-ticks)"));
                    let piece = (key_value, Some(fault), Vec::new());
                    Chunk::of(out, &mut size, &plan.spares).end_row(row, piece, Of::Row, &mut size);
                }
                Err(StepError::Row(e)) => {
                    let fault = RowFault::Fatal(crate::pipeline::drive::rejected_message(&e));
                    let piece = (key_value, Some(fault), Vec::new());
                    Chunk::of(out, &mut size, &plan.spares).end_row(row, piece, Of::Row, &mut size);
                }
            }
        }
    }
}
