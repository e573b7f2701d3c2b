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

use super::source::{Fill, LogLens, Reading};
use super::{Evaluated, Event, StampedRow, keyed_monitors};
use crate::keyed::KeyedMonitor;
use crate::monitor::Stats;
use crate::notice::{Notice, Notify};
use crate::pipeline::checkpoint::barrier;
use crate::pipeline::drive::Ended;
use crate::pipeline::sink::{Columns, TriggerTally};
use crate::row::StepError;
use crate::time::{Time, TimeForm};
use crate::trace::{self, OutputFormat, OutputWriter};
use crate::value::{Key, Sample, Value};
use serde::{Deserialize, Serialize};
use std::collections::{HashSet, VecDeque};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use timely::communication::Pull;
use timely::dataflow::channels::Message;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::Probe;
use timely::dataflow::operators::generic::InputHandleCore;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::{InputHandle, ProbeHandle};
use timely::progress::frontier::MutableAntichain;

/// Rows the source sends as one batch (one message per worker at most).
const BATCH_ROWS: usize = 1024;
/// Batches the source lets be in flight before it waits for the monitors.
const BATCHES_IN_FLIGHT: usize = 8;
/// What the workers send the writer: the rows a worker evaluated in one
/// activation, formatted, or its word that it took a checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Piece {
    Rows(Chunk),
    /// A worker's barrier at `time`; `digest` is the source's digest of
    /// the rows before it.
    Done {
        time: u64,
        digest: u64,
    },
}

/// Rows of one worker in the order it evaluated them (time, then
/// position), their lines and alerts one after another in two buffers: one
/// record, and two allocations, for many rows.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Chunk {
    rows: Vec<RowPiece>,
    out: Vec<u8>,
    alerts: Vec<u8>,
}

/// One row of a chunk: its stamp and key, where its lines and alerts end
/// in the chunk's buffers, and the error it raised.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct RowPiece {
    time: u64,
    seq: u64,
    key: Value,
    out_end: usize,
    alerts_end: usize,
    /// The error the row raised, if it raised one.
    error: Option<RowFault>,
    /// Its trigger firings, for `--summary`: the trigger's name and where it
    /// fired (`3 (host=a)`, as a single-process summary says it).
    fired: Vec<(String, String)>,
    /// For a live sink, which takes samples rather than text: the row's step
    /// and the samples of its columns (its lines are then empty).
    samples: Option<(u64, Vec<WireSample>)>,
}

/// What went wrong with a row, as it travels to the writer.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum RowFault {
    /// A runtime error stopping the row's key (said once; the other keys go on).
    KeyStopped { key: String, error: String },
    /// A row the monitor rejected, or too many ticks before it: the run stops there.
    Fatal(String),
}

/// A [`Sample`] as it travels between processes.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum WireSample {
    NoVal,
    Deferred,
    Value(Value),
}

impl From<&Sample> for WireSample {
    fn from(s: &Sample) -> WireSample {
        match s {
            Sample::NoVal => WireSample::NoVal,
            Sample::Deferred => WireSample::Deferred,
            Sample::Value(v) => WireSample::Value(v.clone()),
        }
    }
}

impl From<&WireSample> for Sample {
    fn from(s: &WireSample) -> Sample {
        match s {
            WireSample::NoVal => Sample::NoVal,
            WireSample::Deferred => Sample::Deferred,
            WireSample::Value(v) => Sample::Value(v.clone()),
        }
    }
}

impl Chunk {
    /// The chunk the rows of this activation go to: the last piece, if it
    /// is one (the fragment hands its pieces on once per activation).
    fn of(out: &mut Vec<Piece>) -> &mut Chunk {
        if !matches!(out.last(), Some(Piece::Rows(_))) {
            out.push(Piece::Rows(Chunk::default()));
        }
        match out.last_mut() {
            Some(Piece::Rows(c)) => c,
            _ => unreachable!("a chunk was just made"),
        }
    }

    /// Ends the row of `row` with the bytes appended since the last.
    fn end_row(
        &mut self,
        row: &StampedRow,
        key: Value,
        error: Option<RowFault>,
        fired: Vec<(String, String)>,
    ) {
        self.rows.push(RowPiece {
            time: row.time,
            seq: row.seq,
            key,
            out_end: self.out.len(),
            alerts_end: self.alerts.len(),
            error,
            fired,
            samples: None,
        });
    }

    /// Row `i`'s lines and alerts.
    fn bytes(&self, i: usize) -> (&[u8], &[u8]) {
        let (o, a) = match i.checked_sub(1) {
            Some(p) => (self.rows[p].out_end, self.rows[p].alerts_end),
            None => (0, 0),
        };
        let r = &self.rows[i];
        (&self.out[o..r.out_end], &self.alerts[a..r.alerts_end])
    }
}

/// A `Write` into a buffer shared with whoever takes the bytes out: a
/// worker's writer formats into it, and the worker takes each row's lines.
#[derive(Clone, Default)]
pub(crate) struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl SharedBuf {
    /// The bytes written so far (the buffer keeps its capacity).
    fn take(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.drain_into(&mut bytes);
        bytes
    }

    /// Moves the bytes written so far to the end of `to`.
    fn drain_into(&self, to: &mut Vec<u8>) {
        let mut buf = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        to.extend_from_slice(&buf);
        buf.clear();
    }
}

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where the writer writes: standard output or a file (whose length a
/// checkpoint records), counting bytes.
pub(crate) struct Sink {
    out: io::BufWriter<Box<dyn Write + Send>>,
    file: Option<std::fs::File>,
    written: u64,
    /// A live sink (`--output redis://…`, `mqtt://…`), which takes each
    /// row's samples (`RowPiece::samples`) instead of lines.
    live: Option<Box<dyn OutputWriter>>,
}

impl Sink {
    /// A sink writing to `out` (an alerts stream of a live transport, say), whose length no
    /// checkpoint records.
    pub(crate) fn writer(out: Box<dyn Write + Send>) -> Sink {
        Sink {
            out: io::BufWriter::new(out),
            file: None,
            written: 0,
            live: None,
        }
    }

    /// A live sink (`redis://…`, `mqtt://…`), which takes each row's samples.
    pub(crate) fn live(live: Box<dyn OutputWriter>) -> Sink {
        Sink {
            live: Some(live),
            ..Sink::writer(Box::new(io::sink()))
        }
    }

    /// Writes the header of a keyed output in `output` (a CSV's column names), once, before
    /// any worker writes.
    pub(crate) fn header(
        &mut self,
        output: OutputFormat,
        names: Vec<String>,
        key: &str,
    ) -> io::Result<()> {
        let buf = SharedBuf::default();
        let mut w = trace::keyed_writer(output, names, key, Box::new(buf.clone()), false);
        w.flush()?;
        self.write(&buf.take())
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.written += bytes.len() as u64;
        self.out.write_all(bytes)
    }
    /// Flushes and, for a file, syncs it (a checkpoint's length must be on
    /// disk before the checkpoint is complete).
    /// Flushes what is buffered, a live sink's publications too.
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()?;
        match &mut self.live {
            Some(live) => live.flush(),
            None => Ok(()),
        }
    }

    fn sync(&mut self) -> io::Result<()> {
        self.flush()?;
        match &self.file {
            Some(f) => f.sync_data(),
            None => Ok(()),
        }
    }
}

/// Opens `path` (`None` or `-`: standard output) for writing: emptied, or
/// cut back to `resume_len` and appended to (`what` names it in messages).
pub(crate) fn open_sink(
    path: Option<&str>,
    resume_len: Option<u64>,
    what: &str,
) -> Result<Sink, String> {
    let Some(path) = path.filter(|p| *p != "-") else {
        return Ok(Sink {
            out: io::BufWriter::new(Box::new(io::stdout())),
            file: None,
            written: 0,
            live: None,
        });
    };
    let file = match resume_len {
        None => std::fs::File::create(path)
            .map_err(|e| format!("cannot create the {what} `{path}`: {e}"))?,
        Some(len) => crate::pipeline::checkpoint::reopen_output(path, len, what)?,
    };
    let sync = file
        .try_clone()
        .map_err(|e| format!("cannot open the {what} `{path}`: {e}"))?;
    Ok(Sink {
        out: io::BufWriter::new(Box::new(file)),
        file: Some(sync),
        written: resume_len.unwrap_or(0),
        live: None,
    })
}

/// The output and the alerts file (absent: nothing, or standard error).
/// Gone once writing failed: nothing more is written.
pub(crate) type Sinks = (Option<Sink>, Option<Sink>);

/// The writer's input: pieces, over either channel's puller `P`.
type Pieces<'a, 'b, P> = (
    &'a mut InputHandleCore<u64, Vec<Piece>, P>,
    &'b MutableAntichain<u64>,
);

/// What a run ended with, gathered from its workers.
#[derive(Default)]
struct Outcome {
    /// Trigger firings written (for `--fail-on-trigger`).
    fired: u64,
    /// The trace error that ended the input (reported after the outputs).
    trace: Option<(String, Ended)>,
    /// The time of the row that error stopped at (readers of parts).
    trace_at: u64,
    /// A key stopped by a runtime error (status 3).
    runtime: bool,
    /// A rejected row, or a failure of the writer or a checkpoint.
    failure: Option<(String, Ended)>,
    /// With `--stats` or `--summary`, each of this process's workers'
    /// counters and live keys at the end, by worker index.
    ends: Vec<(usize, crate::monitor::Stats, usize)>,
    /// Each trigger's firings as the writer wrote them (`--summary`).
    triggers: Vec<TriggerTally>,
    /// Rows the source read and malformed rows it skipped (process 0).
    read: Option<(u64, u64)>,
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
    /// The replay log's length at each barrier (`Source::log_lens`).
    pub log_lens: LogLens,
    /// Set when nothing more can be written (a closed pipe, a failed write,
    /// a rejected row): the source stops reading, and the run ends.
    pub stop: std::sync::atomic::AtomicBool,
    /// The least time at which a reader of parts stopped the run (a
    /// malformed row): nothing at or after it is written, as a
    /// single-process run writes nothing after its error.
    pub stop_at: Arc<std::sync::atomic::AtomicU64>,
    /// How times are written (rows without `--time` stand at their index in this unit).
    pub unit_form: TimeForm,
    /// Whether rows carry their time (`--time`): their lines show it.
    pub timed: bool,
    /// Where notices go: a key stopped by a runtime error.
    pub notify: Notify,
    /// Where readable alert lines go (`alerts_json` off and no alerts file).
    pub alert_text: AlertText,
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

/// The output and the alerts as the writer holds them, shared with whoever must flush them
/// when the run is cut short (a silent peer: [`flush_sinks`]).
pub(crate) type SharedSinks = Arc<Mutex<Option<Sinks>>>;

/// Where readable alert lines go (a run whose alerts are not JSON lines): the caller shows
/// them, each a line ending with a newline.
pub(crate) type AlertText = Arc<dyn Fn(&str) + Send + Sync>;

/// Flushes what the writer has written so far, waiting up to `wait` for a worker that holds the
/// sinks: the lines written are whole rows in order. A worker holding them in a write that does
/// not return leaves them unwritten.
pub(crate) fn flush_sinks(sinks: &SharedSinks, wait: std::time::Duration) {
    let give_up = std::time::Instant::now() + wait;
    loop {
        match sinks.try_lock() {
            Ok(mut guard) => {
                if let Some((out, alerts)) = guard.as_mut() {
                    for s in [out, alerts].into_iter().flatten() {
                        let _ = s.flush();
                    }
                }
                return;
            }
            Err(_) if std::time::Instant::now() < give_up => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(_) => return,
        }
    }
}

/// A scaled run ready to start in this process: what its workers share, their monitors, the
/// readers (process 0's) and the sinks (the writer's process's), connected to its peers.
pub(crate) struct Launch {
    pub plan: Plan,
    /// This process's workers' monitors, by local index.
    pub monitors: Vec<KeyedMonitor>,
    /// The readers, by worker index (process 0's workers; none elsewhere).
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
    pub read: Option<(u64, u64)>,
}

impl Finished {
    /// One `Stats` for a summary of this process's workers (see `merged_stats`).
    pub fn merged_stats(&self) -> Option<Stats> {
        merged_stats(&self.ends)
    }
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
    let guards = {
        let outcome = Arc::clone(&outcome);
        start(network, threads, move |worker| {
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
                    formatter(Arc::clone(&p), (index, Arc::clone(&out))),
                );
                let pieces = pieces.probe_with(&probe);
                let writer = PieceWriter {
                    plan: Arc::clone(&p),
                    sinks: Arc::clone(&sinks),
                    outcome: Arc::clone(&out),
                    chunks: Vec::new(),
                    barriers: Vec::new(),
                    done: None,
                    stopped: false,
                };
                if p.unordered {
                    pieces.sink(Pipeline, "Write", writer.logic());
                } else {
                    pieces.sink(Exchange::new(|_: &Piece| 0), "Write", writer.logic());
                }
            });
            // Process 0's workers read (the first its feed, or each its
            // parts of the file).
            let source = match readers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_mut(index)
            {
                Some(r) => r.take(),
                None => None,
            };
            if let Some(source) = source {
                let stopped = feed(worker, &mut input, &probe, source, &plan, &outcome);
                if let Some(s) = stopped {
                    // Of readers of parts, the one that stopped first in
                    // the file's order (the least time) is the run's.
                    let at = plan.stop_at.load(std::sync::atomic::Ordering::SeqCst);
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
    // run like a worker's, not a crash of vigil.
    let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| guards.join()));
    let failed = match joined {
        Ok(results) => results.into_iter().find_map(Result::err),
        Err(_) => Some("a network thread failed".to_string()),
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
    })
}

/// One `Stats` for a summary of this process's workers: the first worker's
/// (every worker runs the same code on the same tier) with every worker's
/// rows and declines added up.
fn merged_stats(ends: &[(usize, crate::monitor::Stats, usize)]) -> Option<crate::monitor::Stats> {
    let ((_, first, _), rest) = ends.split_first()?;
    let mut stats = first.clone();
    for (_, s, _) in rest {
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

/// Keeps the panics of timely's network threads and of the workers they take down off
/// standard error: a scaled run reports the cause once, as an error, after every worker has
/// stopped. Every other panic is reported as before, and then ends the process (status 101):
/// a worker that stopped would leave the others waiting for its progress for ever. A program
/// running scaled runs installs it once, before the first.
pub fn install_quiet_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(cause) = message.strip_prefix("timely communication error: ") {
            LOST.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert_with(|| cause.to_string());
            return;
        }
        if message.contains("MergeQueue poisoned")
            || message.starts_with("Send thread panic")
            || message.starts_with("Recv thread panic")
        {
            return;
        }
        previous(info);
        // Any other panic is a bug in vigil. A worker that stopped would
        // leave the others waiting for its progress for ever, so the
        // process ends here, as a panic ends a single-threaded run.
        std::process::exit(101);
    }));
}

/// A batch from the reader thread: its events, the time the input may
/// advance to after them, and, at the end of the input, the error that
/// ended it (if one did).
struct Batch {
    events: Vec<Event>,
    frontier: u64,
    end: Option<Option<(String, Ended)>>,
    /// On the last batch: the rows read and the malformed rows skipped.
    read: Option<(u64, u64)>,
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
) -> Option<(String, Ended)> {
    let batch_rows = if plan.streaming { 1 } else { BATCH_ROWS };
    let workers = plan.total_workers;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(BATCHES_IN_FLIGHT);
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
                let read = last.then(|| source.read());
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
        return Some((
            format!("cannot start the trace reader: {e}"),
            Ended::Failure,
        ));
    }
    let mut in_flight: VecDeque<u64> = VecDeque::new();
    let limit = if plan.streaming { 0 } else { BATCHES_IN_FLIGHT };
    loop {
        if plan.stop.load(std::sync::atomic::Ordering::Relaxed) {
            // Nothing more can be written: the rows still unread are not
            // evaluated (as a single-process run stops at a closed pipe).
            return None;
        }
        let batch = match rx.try_recv() {
            Ok(b) => b,
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                worker.step_or_park(Some(std::time::Duration::from_millis(1)));
                continue;
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                return Some((
                    "the trace reader stopped unexpectedly".into(),
                    Ended::Failure,
                ));
            }
        };
        if let Some(first) = batch.events.first() {
            let last = batch.events.last().map_or(0, Event::time);
            // Every event's time is at or after the input's: the source
            // advanced it only to a time no later row precedes.
            debug_assert!(first.time() >= *input.time());
            input.advance_to(first.time());
            for event in batch.events {
                input.send(event);
            }
            in_flight.push_back(last);
        }
        if let Some(end) = batch.end {
            if let Some((rows, skipped)) = batch.read {
                // Every reader's rows (several read a file in parts).
                let mut o = outcome.lock().unwrap_or_else(PoisonError::into_inner);
                let (r, s) = o.read.get_or_insert((0, 0));
                (*r, *s) = (*r + rows, *s + skipped);
            }
            return end;
        }
        input.advance_to(batch.frontier.max(*input.time()));
        input.flush();
        worker.step();
        // Wait for the oldest batches while too many are in flight (a
        // stream waits for each row, so that its outputs are written as they
        // complete).
        while let Some(&oldest) = in_flight.front() {
            if !probe.less_equal(&oldest) {
                in_flight.pop_front();
            } else if in_flight.len() > limit && *input.time() > oldest {
                worker.step();
            } else {
                break;
            }
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
        let written = barrier::write_worker(
            &dir,
            &plan.spec_path,
            plan.output,
            &barrier,
            worker,
            monitor,
        );
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
/// At the end it keeps the worker's counters in `outcome` for `--stats`.
fn formatter(
    plan: Arc<Plan>,
    (worker, outcome): (usize, Arc<Mutex<Outcome>>),
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
    move |evaluated, out| {
        let (row, result, tick) = match evaluated {
            Evaluated::Barrier { time, token, .. } => {
                out.push(Piece::Done {
                    time,
                    digest: token,
                });
                return;
            }
            Evaluated::End { monitor } => {
                if plan.stats || plan.summary {
                    let end = (worker, monitor.stats(), monitor.key_count());
                    outcome
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .ends
                        .push(end);
                }
                return;
            }
            Evaluated::Row { row, result } => (row, result, false),
            // A tick of a row's key is written just before the row, at the
            // row's place in the output (the single-process order).
            Evaluated::Tick { row, result } => (row, result, true),
        };
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
                    if live.is_none() {
                        // Writing into memory cannot fail.
                        let _ = writer.write_keyed(outputs.step(), key, &samples);
                        let _ = writer.flush();
                    }
                    let chunk = Chunk::of(out);
                    buf.drain_into(&mut chunk.out);
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
                    chunk.end_row(row, key_value, None, fired);
                    if let Some(last) = chunk.rows.last_mut() {
                        last.samples = live;
                    }
                }
                Err(StepError::Runtime(e)) => {
                    let key = Key::new(key_value.clone());
                    if stopped.insert(key.clone()) {
                        let fault = RowFault::KeyStopped {
                            key: key.to_string(),
                            error: e.to_string(),
                        };
                        Chunk::of(out).end_row(row, key_value, Some(fault), Vec::new());
                    }
                }
                // Too many ticks due before a key's row ends the run, as a
                // single-process run's does.
                Err(StepError::Row(e @ crate::row::RowError::TooManyTicks { .. })) => {
                    let fault = RowFault::Fatal(format!("{e} (--max-ticks)"));
                    Chunk::of(out).end_row(row, key_value, Some(fault), Vec::new());
                }
                Err(StepError::Row(e)) => {
                    let fault = RowFault::Fatal(crate::pipeline::drive::rejected_message(&e));
                    Chunk::of(out).end_row(row, key_value, Some(fault), Vec::new());
                }
            }
        }
    }
}

/// The writer: rows whose time is complete, in order (time, position), to
/// the output and alerts; a checkpoint completed once every
/// worker's barrier is in and every line before it written.
struct PieceWriter {
    plan: Arc<Plan>,
    sinks: Arc<Mutex<Option<Sinks>>>,
    outcome: Arc<Mutex<Outcome>>,
    /// Chunks received, each with its first row not yet written.
    chunks: Vec<(Chunk, usize)>,
    /// Barriers received and not yet taken, by time.
    barriers: Vec<(u64, u64)>,
    /// The barrier being counted: its time and the workers in so far.
    done: Option<(u64, usize)>,
    /// A rejected row stopped the run: nothing after it is written.
    stopped: bool,
}

/// What the writer takes next: a barrier, or row `row` of chunk `chunk`.
#[derive(Clone, Copy)]
enum Next {
    Barrier { time: u64, digest: u64 },
    Row { chunk: usize, row: usize },
}

impl PieceWriter {
    /// The sink operator's logic, over the pieces of either channel.
    fn logic<P>(mut self) -> impl for<'a, 'b> FnMut(Pieces<'a, 'b, P>) + 'static
    where
        P: Pull<Message<u64, Vec<Piece>>>,
    {
        move |(input, frontier)| {
            input.for_each(|_, data| {
                for piece in data.drain(..) {
                    match piece {
                        Piece::Rows(c) => self.chunks.push((c, 0)),
                        Piece::Done { time, digest } => self.barriers.push((time, digest)),
                    }
                }
            });
            let ready = self.ready(|t| !frontier.less_equal(&t));
            self.write(&ready, frontier.is_empty());
            // Chunks written to their end are dropped.
            self.chunks.retain(|(c, next)| *next < c.rows.len());
        }
    }

    /// Everything whose time `done` says is complete, in the output's order:
    /// time, barriers first (their checkpoint records the output before the
    /// rows of their time), then position: the single-process run's order
    /// (the merge's stamp order, `seq` numbering the rows as process 0's
    /// source gives them).
    fn ready(&mut self, done: impl Fn(u64) -> bool) -> Vec<Next> {
        let mut ready = Vec::new();
        for (chunk, (c, next)) in self.chunks.iter_mut().enumerate() {
            // A chunk's rows are in time order: its complete rows are a prefix.
            while *next < c.rows.len() && done(c.rows[*next].time) {
                ready.push(Next::Row { chunk, row: *next });
                *next += 1;
            }
        }
        self.barriers.retain(|&(time, digest)| {
            let taken = done(time);
            if taken {
                ready.push(Next::Barrier { time, digest });
            }
            !taken
        });
        let chunks = &self.chunks;
        let order = |a: &Next, b: &Next| -> std::cmp::Ordering {
            // A barrier sorts before the rows of its time (`None` first).
            let key = |n: &Next| match *n {
                Next::Barrier { time, .. } => (time, None),
                Next::Row { chunk, row } => {
                    let r = &chunks[chunk].0.rows[row];
                    (r.time, Some(r.seq))
                }
            };
            key(a).cmp(&key(b))
        };
        // One worker's rows of distinct times (no `--time`) are in order
        // already; a sort is mostly a check.
        if !ready.is_sorted_by(|a, b| order(a, b).is_le()) {
            ready.sort_by(order);
        }
        ready
    }

    /// Writes what is complete (`ready`); `finished`: every piece has come.
    fn write(&mut self, ready: &[Next], finished: bool) {
        let sinks = Arc::clone(&self.sinks);
        let mut guard = sinks.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((out, alerts)) = guard.as_mut() else {
            return;
        };
        if let Err(e) = self.write_to(ready, finished, out.as_mut(), alerts.as_mut()) {
            if e.kind() != io::ErrorKind::BrokenPipe {
                let mut o = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
                o.failure
                    .get_or_insert((format!("cannot write output: {e}"), Ended::Failure));
            }
            // Nothing more is written (a closed pipe ends output quietly).
            *guard = None;
            self.plan
                .stop
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn write_to(
        &mut self,
        ready: &[Next],
        finished: bool,
        mut out: Option<&mut Sink>,
        mut alerts: Option<&mut Sink>,
    ) -> io::Result<()> {
        let stop_at = self.plan.stop_at.load(std::sync::atomic::Ordering::SeqCst);
        for &next in ready {
            if let Next::Row { chunk, row } = next
                && self.chunks[chunk].0.rows[row].time >= stop_at
            {
                // A reader of parts stopped the run there.
                self.stopped = true;
            }
            if self.stopped {
                break;
            }
            match next {
                Next::Row { chunk, row } => {
                    let c = &self.chunks[chunk].0;
                    let (bytes, alert_bytes) = c.bytes(row);
                    if let Some(out) = out.as_deref_mut() {
                        let piece = &c.rows[row];
                        match (&mut out.live, &piece.samples) {
                            (Some(live), Some((step, samples))) => {
                                let samples: Vec<Sample> =
                                    samples.iter().map(Sample::from).collect();
                                live.write_keyed(*step, &Key::new(piece.key.clone()), &samples)?;
                                if self.plan.streaming {
                                    live.flush()?;
                                }
                            }
                            _ => out.write(bytes)?,
                        }
                    }
                    if !alert_bytes.is_empty() {
                        // One line per firing, in either form.
                        let firings = alert_bytes.iter().filter(|&&b| b == b'\n').count();
                        let mut o = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
                        o.fired += firings as u64;
                        for (name, at) in &c.rows[row].fired {
                            TriggerTally::count(&mut o.triggers, name, at.clone());
                        }
                        drop(o);
                        match alerts.as_deref_mut() {
                            Some(a) => a.write(alert_bytes)?,
                            None => (self.plan.alert_text)(&String::from_utf8_lossy(alert_bytes)),
                        }
                    }
                    if let Some(fault) = &c.rows[row].error {
                        if let Some(out) = out.as_deref_mut() {
                            out.out.flush()?;
                        }
                        let mut o = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
                        match fault {
                            RowFault::Fatal(message) => {
                                o.failure.get_or_insert((message.clone(), Ended::Trace));
                                self.stopped = true;
                                self.plan
                                    .stop
                                    .store(true, std::sync::atomic::Ordering::Relaxed);
                            }
                            RowFault::KeyStopped { key, error } => {
                                o.runtime = true;
                                drop(o);
                                (self.plan.notify)(Notice::KeyStopped {
                                    input: self.plan.key.clone(),
                                    key: key.clone(),
                                    error: error.clone(),
                                });
                            }
                        }
                    }
                }
                Next::Barrier { time, digest } => {
                    let n = match self.done {
                        Some((t, n)) if t == time => n + 1,
                        _ => 1,
                    };
                    self.done = Some((time, n));
                    if n == self.plan.total_workers {
                        let sinks = [out.as_deref_mut(), alerts.as_deref_mut()];
                        complete(&self.plan, time, digest, sinks)?;
                    }
                }
            }
        }
        if self.plan.streaming || finished {
            for s in [out, alerts].into_iter().flatten() {
                s.flush()?;
            }
        }
        Ok(())
    }
}

/// Completes checkpoint `time`: the outputs before it on disk, their
/// lengths recorded, the checkpoint marked complete and older ones removed.
fn complete(plan: &Plan, time: u64, digest: u64, sinks: [Option<&mut Sink>; 2]) -> io::Result<()> {
    let Some(root) = &plan.checkpoint else {
        return Ok(());
    };
    let mut lens = [0u64; 2];
    let mut sink_entries = None;
    for (i, sink) in sinks.into_iter().enumerate() {
        if let Some(s) = sink {
            s.sync()?;
            lens[i] = s.written;
            if i == 0 {
                sink_entries = s.live.as_ref().and_then(|l| l.entries_written());
            }
        }
    }
    let record_len = {
        let mut logged = plan.log_lens.lock().unwrap_or_else(PoisonError::into_inner);
        let len = logged.iter().find(|(t, _)| *t == time).map(|&(_, l)| l);
        logged.retain(|(t, _)| *t > time);
        len
    };
    let commit = barrier::Commit {
        output_len: lens[0],
        alerts_len: lens[1],
        input_digest: digest,
        record_len,
        sink_entries,
    };
    let dir = barrier::barrier_dir(root, time);
    let barrier = plan.barrier(time);
    barrier::write_commit(&dir, &plan.spec_path, plan.output, &barrier, commit)?;
    // Older barriers are superseded.
    barrier::remove(root, |t| t < time);
    Ok(())
}
