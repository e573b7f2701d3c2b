//! `vigil run --key K --workers W [--processes N --process I]`: a keyed run on timely workers.
//!
//! The dataflow, per worker: process 0's first worker reads the trace (the
//! one source, `source.rs`; or process 0's workers each read parts of one
//! regular file, `parts.rs`), stamps each row and sends it into the fragment
//! [`crate::scale::keyed_monitors`], which exchanges it to the worker that
//! owns its key; that worker evaluates it and formats its output lines (and
//! alerts) right there, so formatting spreads over the workers too. The
//! formatted pieces go to one writer, process 0's first worker, which writes
//! them once their time is complete, in the order (time, position): so the
//! output is the single-process run's whatever the number of workers or
//! processes. With
//! `--unordered` each worker's pieces go straight to its own process's
//! output instead (no gathering; the order within a worker's keys is kept).
//!
//! Checkpoints (`--checkpoint DIR --checkpoint-every N`): when a row's time
//! crosses a multiple `C` of N, the source sends every worker a barrier at
//! `C`; each writes its keys (`DIR/ck-C/worker-W.ck`), and the writer, once
//! it has every worker's barrier and has written every line before `C`,
//! records the outputs' lengths in the barrier's commit record
//! (`DIR/ck-C/commit.ck`), deleting older barriers. Every file is in the
//! checkpoint format of a single-process run
//! ([`crate::pipeline::checkpoint::barrier`]). `--resume DIR` restarts every
//! process from the newest committed barrier.
//!
//! Processes connect through [`super::peers`], which first checks that every
//! one runs the same job (`job` describes it) and then watches them: a peer
//! that stops running ends the run (`on_silent_peer`) instead of blocking it.

mod parts;
mod source;

use source::{Fill, LogLens, Reading, Source, resume_record};

use super::ops::{self, View};
use super::peers;
use super::{Exit, RunArgs, error, say};
use crate::keyed::KeyedMonitor;
use crate::monitor::Spec;
use crate::pipeline::checkpoint::barrier;
use crate::pipeline::{self, Feed};
use crate::row::StepError;
use crate::scale::{Evaluated, Event, StampedRow, keyed_monitors};
use crate::time::{Time, TimeForm, TimeUnit};
use crate::trace::{self, OutputFormat, OutputWriter, ReaderOptions, TraceFormat};
use crate::value::{Key, Sample, Value};
use serde::{Deserialize, Serialize};
use std::collections::{HashSet, VecDeque};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
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
    /// A runtime error stopping the key (reported once), or a row the
    /// monitor rejected (a bug in vigil's readers; stops the run).
    error: Option<(String, bool)>,
    /// Its trigger firings, for `--summary`: the trigger's name and where it
    /// fired (`3 (host=a)`, as a single-process summary says it).
    fired: Vec<(String, String)>,
    /// For a live sink, which takes samples rather than text: the row's step
    /// and the samples of its columns (its lines are then empty).
    samples: Option<(u64, Vec<WireSample>)>,
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
        error: Option<(String, bool)>,
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
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

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
struct Sink {
    out: io::BufWriter<Box<dyn Write + Send>>,
    file: Option<std::fs::File>,
    written: u64,
    /// A live sink (`--output redis://…`, `mqtt://…`), which takes each
    /// row's samples (`RowPiece::samples`) instead of lines.
    live: Option<Box<dyn OutputWriter>>,
}

impl Sink {
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
fn open_sink(path: Option<&str>, resume_len: Option<u64>, what: &str) -> Result<Sink, String> {
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
        Some(len) => super::checkpoint::reopen_output(path, len, what)?,
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
type Sinks = (Option<Sink>, Option<Sink>);

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
    trace: Option<(String, Exit)>,
    /// The time of the row that error stopped at (readers of parts).
    trace_at: u64,
    /// A key stopped by a runtime error (status 3).
    runtime: bool,
    /// A rejected row, or a failure of the writer or a checkpoint.
    failure: Option<(String, Exit)>,
    /// With `--stats` or `--summary`, each of this process's workers'
    /// counters and live keys at the end, by worker index.
    ends: Vec<(usize, crate::monitor::Stats, usize)>,
    /// Each trigger's firings as the writer wrote them (`--summary`).
    triggers: Vec<ops::TriggerTally>,
    /// Rows the source read and malformed rows it skipped (process 0).
    read: Option<(u64, u64)>,
}

/// The options of a scaled run that a worker needs.
struct Plan {
    output: OutputFormat,
    key: String,
    key_index: usize,
    view: View,
    /// The writer's column names.
    names: Vec<String>,
    /// Alerts: as JSON lines (to `--alerts`), else readable lines on stderr.
    alerts_json: bool,
    /// Whether the trace is a stream (outputs flushed as they complete).
    streaming: bool,
    threads: usize,
    total_workers: usize,
    checkpoint: Option<PathBuf>,
    /// The specification's path, which its checkpoint files name.
    spec_path: String,
    unordered: bool,
    /// `--stats`: each worker's counters are kept at the end.
    stats: bool,
    /// `--summary` (or `--fail-on-trigger`, which prints it too): firings
    /// are tallied by trigger as they are written.
    summary: bool,
    /// Whether the output is a live sink (rows travel as samples).
    live_sink: bool,
    /// The replay log's length at each barrier (`Source::log_lens`).
    log_lens: LogLens,
    /// Set when nothing more can be written (a closed pipe, a failed write,
    /// a rejected row): the source stops reading, and the run ends.
    stop: std::sync::atomic::AtomicBool,
    /// The least time at which a reader of parts stopped the run (a
    /// malformed row): nothing at or after it is written, as a
    /// single-process run writes nothing after its error.
    stop_at: Arc<std::sync::atomic::AtomicU64>,
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
fn worker_id(index: usize) -> u32 {
    u32::try_from(index).expect("`launch` bounds a run to MAX_TOTAL_WORKERS workers")
}

/// `vigil run … --workers W` / `--processes N --process I`.
pub(super) fn run(args: &RunArgs, spec: &Spec, output: OutputFormat) -> Exit {
    match prepare_and_run(args, spec, output) {
        Ok(exit) => exit,
        Err((message, exit)) => {
            error(message);
            exit
        }
    }
}

fn refuse(args: &RunArgs) -> Result<(), String> {
    if args.clock == super::ClockArg::Wall {
        return Err(
            "--clock wall does not work with --workers or --processes yet: a key's ticks follow its own rows there (run without them)"
                .into(),
        );
    }
    // A time reset makes times start again, and a timely timestamp cannot
    // go back: the fragment would need an epoch in its timestamps, and the
    // writer the single-process order of every key's `once` ticks.
    if args.on_reset.is_some() {
        return Err(
            "--on-reset does not work with --workers or --processes yet: a scaled run stops at a time reset (run without them)"
                .into(),
        );
    }
    let checkpointed = args.checkpoint.is_some() || args.resume.is_some();
    if checkpointed && let Some(tcp) = args.input.iter().find(|i| i.starts_with("tcp://")) {
        return Err(format!(
            "--checkpoint and --resume do not work with a tcp:// input (`{tcp}`): its connections cannot be read again from a checkpoint's position"
        ));
    }
    if checkpointed && args.group.is_some() {
        return Err(
            "--checkpoint and --resume with a Redis consumer group (--group) do not work with --workers or --processes yet: a resumed scaled run reads its sources again from their start, and a group delivers each entry once"
                .into(),
        );
    }
    if args.unordered && checkpointed {
        return Err(
            "--unordered cannot checkpoint: a checkpoint records the length of the ordered output"
                .into(),
        );
    }
    Ok(())
}

/// The most worker threads per process (`--workers`). Timely gives every
/// worker a channel to every other for each exchange, so memory and start-up
/// time grow with the square of the workers: on 1,000 rows (a debug build)
/// 64 workers take 0.1 s and 35 MB, 256 take 1.2 s and 127 MB, 512 take
/// 5.1 s and 392 MB; 1,000 took 12.8 s and 1.3 GB, and 5,000 aborted on
/// allocation. Workers beyond the machine's cores only take turns (the
/// largest machines have 256 hardware threads); more machines need more
/// processes.
pub(super) const MAX_WORKERS: usize = 256;
/// The most processes (`--processes`): each holds two connections and three
/// threads (timely's sender and receiver, vigil's watchdog) for every other.
pub(super) const MAX_PROCESSES: usize = 256;
/// The most workers over all processes: each process holds its workers'
/// channels to every worker of the run.
pub(super) const MAX_TOTAL_WORKERS: usize = 1024;

/// Where the workers run: threads of this process, or this process's part
/// of a cluster (its index, and every process's address).
enum Launch {
    Local,
    Cluster {
        process: usize,
        addresses: Vec<String>,
    },
}

/// The launch the options ask for, with the threads per process and this
/// process's index.
fn launch(args: &RunArgs) -> Result<(Launch, usize, usize), String> {
    let threads = args.workers.map_or(1, std::num::NonZeroUsize::get);
    let processes = args.processes.map_or(1, std::num::NonZeroUsize::get);
    let process = args.process.unwrap_or(0);
    if process >= processes {
        return Err(format!(
            "--process {process} is not one of the {processes} processes (0 to {})",
            processes - 1
        ));
    }
    if threads * processes > MAX_TOTAL_WORKERS {
        return Err(format!(
            "{processes} processes of {threads} workers make {} workers, and a run has at most {MAX_TOTAL_WORKERS}: every process holds channels to every worker of the run, so memory grows with the product; use fewer workers per process",
            threads * processes
        ));
    }
    if processes == 1 {
        return Ok((Launch::Local, threads, 0));
    }
    if args.process.is_none() {
        return Err("--processes N needs --process I (this process's index, 0 to N-1)".into());
    }
    let addresses: Vec<String> = match &args.hostfile {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the hostfile `{path}`: {e}"))?;
            let hosts: Vec<String> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from)
                .collect();
            if hosts.len() != processes {
                return Err(format!(
                    "the hostfile `{path}` names {} processes (one host:port per line), but --processes is {processes}",
                    hosts.len()
                ));
            }
            hosts
        }
        None => (0..processes)
            .map(|i| format!("127.0.0.1:{}", 2101 + i))
            .collect(),
    };
    Ok((Launch::Cluster { process, addresses }, threads, process))
}

/// What every process of a run must agree on (the handshake compares them,
/// `peers::connect`): everything that changes what a worker computes or
/// formats, or how the workers are wired. Left out, since only process 0
/// uses them or they change no result: the trace and how it is read
/// (`--input`, `--format`, `--max-step-gap`), where the output goes
/// (`--output-file`), `--hostfile`, `--tier`, `--strict-tier`,
/// `--checkpoint-every`, `--fail-on-trigger` and the timeouts.
fn job(args: &RunArgs, spec: &Spec, resumed_at: Option<u64>) -> Vec<peers::Term> {
    use peers::Term;
    // The fingerprint leaves out the triggers' messages (they are not run
    // state), but they are what an alert line says.
    let mut spec_text = spec.fingerprint().to_string();
    for t in &spec.checked().triggers {
        spec_text.push_str(&format!("\n{}: {:?}", t.name, t.message));
    }
    let digest: String = crate::snapshot::sha256(spec_text.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut terms = vec![
        Term::new(
            "route",
            crate::scale::ROUTE_HASH,
            format!("keys routed by `{}`", crate::scale::ROUTE_HASH),
        ),
        Term::new(
            "version",
            concat!("vigil ", env!("CARGO_PKG_VERSION")),
            concat!("vigil ", env!("CARGO_PKG_VERSION")),
        ),
        Term::new(
            "spec",
            digest.clone(),
            format!("the specification `{}` (digest {digest})", args.spec),
        ),
    ];
    // An option as given, or its absence.
    let mut option = |flag: &str, value: Option<String>| {
        let shown = match &value {
            Some(v) if v.is_empty() => format!("`{flag}`"),
            Some(v) => format!("`{flag} {v}`"),
            None => format!("without `{flag}`"),
        };
        terms.push(Term::new(flag, value.unwrap_or_else(|| "-".into()), shown));
    };
    let flag = |on: bool| on.then(String::new);
    let count = |n: Option<std::num::NonZeroUsize>| n.map_or(1, |n| n.get()).to_string();
    option("--key", args.key.clone());
    option("--workers", Some(count(args.workers)));
    option("--processes", Some(count(args.processes)));
    let output = match &args.output {
        super::OutputArg::Text => "text",
        super::OutputArg::Csv => "csv",
        super::OutputArg::Jsonl => "jsonl",
        super::OutputArg::Mqtt(url) | super::OutputArg::Redis(url) => url,
    };
    option("--output", Some(output.to_string()));
    // The alerts' form (JSON lines, or readable lines on standard error);
    // where they go is process 0's.
    option("--alerts", flag(args.alerts.is_some()));
    option("--only", args.only.as_ref().map(|o| o.join(",")));
    option("--quiet", flag(args.quiet));
    option("--pass", args.pass.as_ref().map(|p| p.join(",")));
    option("--max-keys", args.max_keys.map(|n| n.to_string()));
    option(
        "--max-string-bytes",
        Some(args.max_string_bytes.to_string()),
    );
    option(
        "--on-malformed",
        Some(format!("{:?}", args.on_malformed).to_lowercase()),
    );
    option("--time", args.time.clone());
    option("--time-unit", Some(args.time_unit.clone()));
    option("--lateness", args.lateness.map(|l| l.to_string()));
    option("--start", args.start.clone());
    option("--max-gap", args.max_gap.map(|g| g.to_string()));
    option("--on-gap", args.on_gap.clone());
    option("--on-reset", args.on_reset.clone());
    option("--max-ticks", Some(args.max_ticks.to_string()));
    option("--unordered", flag(args.unordered));
    // A process that writes no snapshot at a barrier leaves the checkpoint
    // incomplete; one resumed from another checkpoint than the others runs
    // its keys from another state.
    option("--checkpoint", flag(args.checkpoint.is_some()));
    terms.push(match resumed_at {
        Some(t) => Term::new(
            "--resume",
            t.to_string(),
            format!("`--resume` from the checkpoint at {t}"),
        ),
        None => Term::new("--resume", "-", "without `--resume`"),
    });
    terms
}

/// Where the workers run, once connected: threads of this process, or
/// this process's part of a cluster and its connections to the others.
enum Network {
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

/// What a process does when a peer has sent no heartbeat for
/// `--peer-timeout`: its workers wait for that peer's progress and cannot
/// be woken, and timely's threads cannot be joined while the peer's
/// connection is open, so the process writes out what it has, says why, and
/// exits with status 1. (A peer whose connection closes is timely's to
/// report, as a lost connection.)
fn on_silent_peer(
    process: usize,
    checkpoint: Option<String>,
    sinks: Arc<Mutex<Option<Sinks>>>,
) -> peers::OnSilent {
    static ENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    Arc::new(move |peer, silence| {
        if ENDING.swap(true, std::sync::atomic::Ordering::SeqCst) {
            // Another peer's watcher is ending the process already.
            return;
        }
        // The lines written so far are whole rows in order: written out,
        // as a run that lost a peer writes them. A worker holding the sinks
        // in a write that does not return leaves them unwritten.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(1);
        loop {
            match sinks.try_lock() {
                Ok(mut guard) => {
                    if let Some((out, alerts)) = guard.as_mut() {
                        for s in [out, alerts].into_iter().flatten() {
                            let _ = s.flush();
                        }
                    }
                    break;
                }
                Err(_) if std::time::Instant::now() < give_up => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(_) => break,
            }
        }
        let hint = match &checkpoint {
            Some(dir) => format!(
                "; restart every process with --resume {dir} to go on from its last complete checkpoint"
            ),
            None => String::new(),
        };
        error(format_args!(
            "the computation failed in process {process}: process {peer} sent no heartbeat for {} (stopped, hung, or cut off from this process; --peer-timeout sets how long to wait){hint}",
            peers::seconds(silence)
        ));
        std::process::exit(Exit::Failure as i32);
    })
}

type Failed = (String, Exit);

fn prepare_and_run(args: &RunArgs, spec: &Spec, output: OutputFormat) -> Result<Exit, Failed> {
    let fail = |m: String| (m, Exit::Failure);
    let Some(key) = args.key.clone() else {
        return Err(fail(
            "--workers and --processes run a keyed monitor: pass --key FIELD (the input whose values the workers share out)".into(),
        ));
    };
    refuse(args).map_err(fail)?;
    let (launch, threads, process) = launch(args).map_err(fail)?;
    let processes = args.processes.map_or(1, std::num::NonZeroUsize::get);
    let total_workers = threads * processes;
    let view = ops::view(args, spec, output).map_err(fail)?;
    // One monitor is built (planned, lowered, compiled) per process; every
    // worker's is a `share` of it, running the same code.
    let mut builder = KeyedMonitor::builder(spec, &key)
        .tier(args.tier)
        .max_string_bytes(args.max_string_bytes);
    // `--max-keys` bounds each worker's live keys (every worker's monitor
    // is a `share` of this one, bound included): a global bound would need
    // the workers to agree on recency across threads and processes for
    // every row.
    if let Some(n) = args.max_keys {
        builder = builder.max_keys(n);
    }
    // A key's ticks are made due by its own rows and evaluated just before
    // them by the worker owning the key (`Evaluated::Tick`), so they travel
    // with the row and are written at its place: the single-process order.
    // The rules are a single-process keyed run's: the flags, else the
    // spec's gap policy.
    let unit = TimeUnit::from_name(&args.time_unit).expect("clap allows only known units");
    let (origin, max_gap) = super::timed::scheduling(args, unit, None).map_err(fail)?;
    let on_gap = (args.on_gap.as_deref().map(super::timed::gap_policy))
        .or(spec.checked().on_gap)
        .unwrap_or(crate::lang::ast::GapPolicy::CatchUp);
    builder = builder.ticking(crate::time::Ticking {
        start: origin,
        max_gap,
        on_gap,
        max_ticks: args.max_ticks,
    });
    let mut template = builder.build().map_err(|e| fail(e.to_string()))?;
    // Without `--time` a key's row stands at its index in `--time-unit`.
    template.set_index_unit(unit.nanos());
    if let Err(exit) = super::check_tier(args, &template.stats()) {
        return Ok(exit);
    }
    let key_index = template.key_index();
    let inputs = template.input_count();
    let names = view.writer_names(&template.output_names(), output);

    // Checkpoints and resuming.
    let checkpoint = args.checkpoint.as_ref().map(PathBuf::from);
    if let Some(dir) = &checkpoint {
        std::fs::create_dir_all(dir).map_err(|e| {
            fail(format!(
                "cannot create the checkpoint directory `{}`: {e}",
                dir.display()
            ))
        })?;
    }
    let resumed = match &args.resume {
        None => None,
        Some(dir) => Some(
            barrier::resume(
                Path::new(dir),
                crate::scale::ROUTE_HASH,
                worker_id(total_workers),
                &key,
            )
            .map_err(fail)?,
        ),
    };
    // This process's workers' monitors, restored when resuming; made here
    // so that a checkpoint that does not fit is an error before any work.
    let mut monitors = Vec::with_capacity(threads);
    for t in 0..threads {
        let w = worker_id(process * threads + t);
        let monitor = match &resumed {
            None => template.share(),
            Some(resume) => resume.restore_worker(w, &template).map_err(fail)?,
        };
        monitors.push(Some(monitor));
    }
    drop(template);
    let monitors = Arc::new(Mutex::new(monitors));

    // The source and the writer live in process 0's first worker.
    let unit = TimeUnit::from_name(&args.time_unit).expect("clap allows only known units");
    let (schema, time_cell) = ops::timed_schema(args, spec);
    let mut streaming = false;
    let log_lens: LogLens = Arc::default();
    // A regular file without `--time` is read in parts by process 0's
    // workers (`parts`); anything else by process 0's feed.
    let parts = match process {
        0 => parts::plan(args, threads).map_err(fail)?,
        _ => None,
    };
    let stop_at = Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
    let source = if process == 0 && parts.is_none() {
        if args.input.is_empty() {
            return Err(fail(
                "the trace is missing: pass --input FILE (or - for standard input)".into(),
            ));
        }
        // A resumed run reads its sources again from their start and skips
        // the rows before the checkpoint, checking their digest: a Redis
        // Stream is read again from its first entry. An MQTT broker keeps
        // no history, so what it delivered before the checkpoint is not
        // delivered again (and what was published while the run was down
        // is lost): the rows a resumed run reads are new, untimed ones are
        // numbered on from the checkpoint, and there is no digest to check.
        let replayable = !args.input.iter().any(|i| i.starts_with("mqtt://"));
        let c = spec.checked();
        let lateness = match args.lateness.map(|l| (l, unit.duration(l))) {
            None => 0,
            Some((_, Some(ns))) => ns,
            Some((l, None)) => return Err(fail(format!("--lateness {l}: not a duration"))),
        };
        let feed_on_gap = on_gap;
        let feed_on_reset = c.on_reset.unwrap_or(crate::lang::ast::ResetPolicy::Cancel);
        let feed_options = pipeline::FeedOptions {
            names: schema.names.clone(),
            time_cell,
            unit,
            lateness,
            // A keyed row is one key's event: rows at one time stay apart.
            separate: true,
            malformed: args.on_malformed.into(),
            idle_timeout: args.idle_timeout.map(std::time::Duration::from_secs_f64),
            periods: Vec::new(),
            start: None,
            max_gap: None,
            on_gap: feed_on_gap,
            max_ticks: args.max_ticks,
            on_reset: feed_on_reset,
            // A rejected row is located by its source's position.
            positions: true,
            wall_clock: false,
        };
        let mut feed = Feed::new(feed_options, super::timed::notices());
        let live_options = super::live::options(args, time_cell);
        let mut listener = None;
        for input in &args.input {
            if let Some(addr) = input.strip_prefix("tcp://") {
                if listener.is_some() {
                    return Err(fail(
                        "one tcp:// input at most (its connections are the sources)".into(),
                    ));
                }
                let l = std::net::TcpListener::bind(addr)
                    .map_err(|e| fail(format!("--input {input}: cannot listen: {e}")))?;
                listener = Some(l);
                streaming = true;
                continue;
            }
            if super::live::is_url(input) {
                let sources = super::live::open_input(
                    input,
                    &schema,
                    &live_options,
                    &super::live::Resume::default(),
                )
                .map_err(fail)?;
                for super::live::Source { name, reader } in sources {
                    feed.add_reader(name, reader, TraceFormat::Jsonl);
                }
                streaming = true;
                continue;
            }
            let format = super::trace_format(input, args.format).map_err(|e| (String::new(), e))?;
            if format == TraceFormat::Tc && args.on_malformed != super::OnMalformed::Stop {
                return Err(fail(
                    "--on-malformed skip|warn needs JSON-lines or CSV traces: a malformed `.input` block cannot be skipped alone".into(),
                ));
            }
            let options = ReaderOptions {
                max_step_gap: args.max_step_gap,
            };
            let opened = trace::open_trace(input, format, &schema, options)
                .map_err(|e| fail(e.to_string()))?;
            streaming |= opened.streaming;
            let name = match input.as_str() {
                "-" => "<stdin>".to_string(),
                path => path.to_string(),
            };
            feed.add_reader(name, opened.reader, format);
        }
        if streaming && (args.input.len() > 1 || listener.is_some()) {
            // Live sources merged: each read on a thread of its own, so
            // that a silent one does not hold the others back.
            feed.read_on_threads();
        }
        if let Some(l) = listener {
            // A tcp:// listener's connections join as sources, as in a
            // single-process run (`timed.rs`).
            let notify = super::timed::notices();
            if let Ok(addr) = l.local_addr() {
                notify(crate::notice::Notice::Listening {
                    at: format!("tcp://{addr}"),
                });
            }
            feed.listen(pipeline::spawn_listener(
                l,
                schema.clone(),
                args.on_malformed.into(),
                notify,
            ));
        }
        let every = checkpoint.as_ref().map(|_| match time_cell {
            None => args.checkpoint_every,
            Some(_) => (args.checkpoint_every as i64)
                .saturating_mul(unit.nanos())
                .max(1) as u64,
        });
        let skip_before = resumed.as_ref().map_or(0, |r| r.barrier.time);
        // Untimed rows of a source read again are numbered from 0 and
        // skipped up to the checkpoint; new ones are numbered on from it.
        let (first_seq, skip_before) = match (replayable, time_cell) {
            (false, None) => (skip_before, 0),
            _ => (0, skip_before),
        };
        let mut record = args.record.as_ref().map(|path| {
            let header = super::log::Header {
                fingerprint: spec.fingerprint().to_string(),
                sources: feed.source_names().map(String::from).collect(),
                fields: schema.names.clone(),
                time: args.time.clone(),
                unit,
                form: TimeForm::Number(unit),
                key: args.key.clone(),
                start: origin,
                max_gap,
                on_gap: super::timed::gap_name(feed_on_gap).to_string(),
                max_ticks: args.max_ticks,
                on_reset: super::timed::reset_name(feed_on_reset).to_string(),
                lateness,
                wall_clock: false,
            };
            super::timed::Record::new(path.clone(), header, streaming)
        });
        if let Some(r) = &resumed {
            resume_record(record.as_mut(), r.commit.record_len, args, &r.dir).map_err(fail)?;
        }
        Some(Source {
            feed,
            record,
            row: Vec::new(),
            at: String::new(),
            seq: first_seq,
            timed: time_cell.is_some(),
            last: None,
            every,
            next_checkpoint: None,
            first_barrier: resumed.is_none()
                && every.is_some()
                && matches!(args.output, super::OutputArg::Redis(_)),
            skip_before,
            digest: xxhash_rust::xxh3::Xxh3::new(),
            expect_digest: resumed
                .as_ref()
                .filter(|_| replayable)
                .map(|r| r.commit.input_digest),
            log_lens: Arc::clone(&log_lens),
            tally: ops::Tally::new(args.on_malformed, ops::Progress::new(true, None)),
            key_index,
            key_name: key.clone(),
            inputs,
            extra: view.extra(),
        })
    } else {
        None
    };

    // The processes connect and agree on the job before anything is
    // emptied or cleared: a process refused for running another job has
    // changed nothing.
    let sinks: Arc<Mutex<Option<Sinks>>> = Arc::new(Mutex::new(None));
    let network = match launch {
        Launch::Local => Network::Local,
        Launch::Cluster { process, addresses } => {
            let job = job(args, spec, resumed.as_ref().map(|r| r.barrier.time));
            let timeouts = peers::Timeouts {
                connect: args.connect_timeout,
                peer: args.peer_timeout,
            };
            let on_silent = on_silent_peer(process, args.checkpoint.clone(), Arc::clone(&sinks));
            let connected =
                peers::connect(&addresses, process, &job, timeouts, on_silent).map_err(fail)?;
            Network::Cluster {
                process,
                sockets: connected.data,
            }
        }
    };
    // A fresh run's checkpoints replace any left from an earlier run, so
    // that a later resume cannot pick a stale one of a later time. Process 0
    // clears them before its workers start, so before any worker can write
    // one of this run (barriers come from process 0's source).
    if let Some(dir) = &checkpoint
        && args.resume.is_none()
        && process == 0
    {
        barrier::remove(dir, |_| true);
    }
    let writes = process == 0 || args.unordered;
    let resume_lens = resumed
        .as_ref()
        .map(|r| (r.commit.output_len, r.commit.alerts_len));
    let opened = if writes {
        let out = if args.quiet {
            None
        } else if let Some(url) = args.output.live() {
            let options = super::live::options(args, None);
            // A Redis Stream sink gets no entry twice: the resumed run does
            // not send again those the checkpoint counted (nor, as a
            // single-process run, those past it already in the stream).
            let resume = super::live::Resume {
                token: None,
                written: resumed.as_ref().and_then(|r| r.commit.sink_entries),
            };
            let live =
                super::live::open_output(url, names.clone(), &options, &resume).map_err(fail)?;
            Some(Sink {
                out: io::BufWriter::new(Box::new(io::sink())),
                file: None,
                written: 0,
                live: Some(live),
            })
        } else {
            let mut sink = open_sink(
                args.output_file.as_deref(),
                resume_lens.map(|l| l.0),
                "output file",
            )
            .map_err(fail)?;
            // The CSV header, once, before any worker writes (a resumed
            // run's file has it).
            if resumed.is_none() {
                let buf = SharedBuf::default();
                let mut w =
                    trace::keyed_writer(output, names.clone(), &key, Box::new(buf.clone()), false);
                w.flush()
                    .and_then(|()| sink.write(&buf.take()))
                    .map_err(|e| fail(format!("cannot write output: {e}")))?;
            }
            Some(sink)
        };
        let alerts = match (args.alerts.as_deref(), &args.output) {
            // A run publishing to MQTT or Redis sends its alerts there too
            // (as JSON lines, `PREFIX/alerts`, `STREAM:alerts`).
            (None, super::OutputArg::Mqtt(url) | super::OutputArg::Redis(url))
                if !spec.trigger_names().is_empty() =>
            {
                let options = super::live::options(args, None);
                Some(Sink {
                    out: io::BufWriter::new(super::live::alerts_sink(url, &options).map_err(fail)?),
                    file: None,
                    written: 0,
                    live: None,
                })
            }
            (None, _) => None,
            (Some(path), _) => {
                Some(open_sink(Some(path), resume_lens.map(|l| l.1), "alerts file").map_err(fail)?)
            }
        };
        Some((out, alerts))
    } else {
        None
    };
    let plan = Arc::new(Plan {
        output,
        key: key.clone(),
        key_index,
        view,
        names,
        alerts_json: args.alerts.is_some()
            || matches!(
                args.output,
                super::OutputArg::Mqtt(_) | super::OutputArg::Redis(_)
            ),
        streaming,
        threads,
        total_workers,
        checkpoint,
        spec_path: args.spec.clone(),
        unordered: args.unordered,
        stats: args.stats,
        summary: args.summary || args.fail_on_trigger,
        live_sink: args.output.live().is_some(),
        log_lens,
        stop: std::sync::atomic::AtomicBool::new(false),
        stop_at: Arc::clone(&stop_at),
    });
    let outcome = Arc::new(Mutex::new(Outcome {
        triggers: ops::TriggerTally::of(spec),
        ..Outcome::default()
    }));
    // The summary's clock starts with the run (its rate is rows a second).
    let mut summary = ops::Tally::new(args.on_malformed, ops::Progress::new(true, None));
    let mut readers: Vec<Option<Box<dyn Reading>>> = Vec::new();
    match (&parts, source) {
        (Some(p), _) => {
            for w in 0..threads {
                let setup = parts::PartSetup {
                    schema: schema.clone(),
                    options: ReaderOptions {
                        max_step_gap: args.max_step_gap,
                    },
                    tally: ops::Tally::new(args.on_malformed, ops::Progress::new(true, None)),
                    key_index,
                    key_name: key.clone(),
                    cells: inputs + plan.view.extra(),
                    stop_at: Arc::clone(&stop_at),
                };
                readers.push(Some(Box::new(p.reader(w, threads, setup))));
            }
        }
        (None, Some(s)) => readers.push(Some(Box::new(s))),
        (None, None) => {}
    }
    let readers = Arc::new(Mutex::new(readers));
    *sinks.lock().unwrap_or_else(PoisonError::into_inner) = opened;
    let unit_form = TimeForm::Number(unit);
    let timed = args.time.is_some();

    install_quiet_panics();
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
                    formatter(Arc::clone(&p), unit_form, timed, (index, Arc::clone(&out))),
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
        .map_err(fail)?
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
        let hint = match &args.checkpoint {
            Some(dir) => format!(
                "; restart every process with --resume {dir} to go on from its last complete checkpoint"
            ),
            None => String::new(),
        };
        let cause = match LOST.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some(lost) => format!("the connection to another process was lost ({lost})"),
            None => e,
        };
        return Err(fail(format!(
            "the computation failed in process {process}: {cause}{hint}"
        )));
    }
    let outcome = std::mem::take(&mut *outcome.lock().unwrap_or_else(PoisonError::into_inner));
    if let Some(f) = outcome.failure {
        return Err(f);
    }
    if let Some(t) = outcome.trace {
        return Err(t);
    }
    let status = if outcome.runtime {
        Exit::Runtime
    } else {
        Exit::Success
    };
    let mut ends = outcome.ends;
    ends.sort_by_key(|(w, ..)| *w);
    // The rows this process's workers evaluated (routed to them).
    let rows: u64 = ends.iter().map(|(_, s, _)| s.rows).sum();
    // Process 0 read the rows and wrote the alerts: its summary is the run's.
    if (args.summary || args.fail_on_trigger)
        && process == 0
        && let Some(stats) = merged_stats(&ends)
    {
        // Process 0 read the rows; every process evaluated its workers'.
        (summary.rows_read, summary.skipped) = outcome.read.unwrap_or_default();
        summary.steps = rows;
        super::say(format_args!(
            "{}",
            summary.summary(&stats, &outcome.triggers)
        ));
    }
    let status = super::fail_on_trigger(args, status, outcome.fired);
    if args.stats {
        // This process's workers, each with its own counters (their rows
        // are the rows routed to it).
        for (w, stats, keys) in &ends {
            super::say(format_args!(
                "worker {w} of {total_workers}:\n{stats}keys: {keys} live\n"
            ));
        }
        if let Some(p) = &parts {
            super::say(format_args!(
                "process {process}: the trace read in {} parts by {threads} workers\n",
                p.count()
            ));
        }
        let keys: usize = ends.iter().map(|(.., k)| k).sum();
        super::say(format_args!(
            "process {process}: {rows} rows, {keys} keys live over {} workers\n",
            ends.len()
        ));
    }
    Ok(status)
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

/// Keeps the panics of timely's network threads and of the workers they
/// take down off standard error: the run reports the cause once, as an
/// error, after every worker has stopped. Every other panic is reported as
/// before.
fn install_quiet_panics() {
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
    end: Option<Option<(String, Exit)>>,
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
) -> Option<(String, Exit)> {
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
        return Some((format!("cannot start the trace reader: {e}"), Exit::Failure));
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
                    Exit::Failure,
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
                Exit::Failure,
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
    unit_form: TimeForm,
    timed: bool,
    (worker, outcome): (usize, Arc<Mutex<Outcome>>),
) -> impl FnMut(Evaluated<'_>, &mut Vec<Piece>) + 'static {
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
                            let at = ops::TriggerTally::place(alert.step(), Some((&plan.key, key)));
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
                        let message =
                            format!("{e} ({}={key}); its later rows are not evaluated", plan.key);
                        Chunk::of(out).end_row(row, key_value, Some((message, false)), Vec::new());
                    }
                }
                // Too many ticks due before a key's row ends the run, as a
                // single-process run's does.
                Err(StepError::Row(e @ crate::row::RowError::TooManyTicks { .. })) => {
                    let message = format!("{e} (--max-ticks)");
                    Chunk::of(out).end_row(row, key_value, Some((message, true)), Vec::new());
                }
                Err(StepError::Row(e)) => {
                    let message = crate::pipeline::drive::rejected_message(&e);
                    Chunk::of(out).end_row(row, key_value, Some((message, true)), Vec::new());
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
                    .get_or_insert((format!("cannot write output: {e}"), Exit::Failure));
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
                            ops::TriggerTally::count(&mut o.triggers, name, at.clone());
                        }
                        drop(o);
                        match alerts.as_deref_mut() {
                            Some(a) => a.write(alert_bytes)?,
                            None => say(format_args!("{}", String::from_utf8_lossy(alert_bytes))),
                        }
                    }
                    if let Some((message, fatal)) = &c.rows[row].error {
                        if let Some(out) = out.as_deref_mut() {
                            out.out.flush()?;
                        }
                        let mut o = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
                        if *fatal {
                            o.failure.get_or_insert((message.clone(), Exit::Trace));
                            self.stopped = true;
                            self.plan
                                .stop
                                .store(true, std::sync::atomic::Ordering::Relaxed);
                        } else {
                            o.runtime = true;
                            error(message);
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
