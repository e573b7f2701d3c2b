//! A keyed run on timely workers as an embedder builds one: its sources (a [`Feed`] of
//! readers, or inputs by name, [`Inputs`], which the workers read in parallel where they allow
//! it), a [`KeyedMonitor`] shared by the workers, where the outputs and alerts go, and, as the
//! run asks, checkpoints every so many rows or time units with a resume from the newest one, a
//! replay log, and the processes of a cluster ([`Cluster`]). `vigil run --key K --workers W`
//! is this run, built from its arguments.
//!
//! A run of one process over a feed:
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use vigil::pipeline::{Feed, FeedOptions, GapPolicy, Malformed, ResetPolicy};
//! use vigil::scale::ScaledRun;
//! use vigil::time::TimeUnit;
//! use vigil::trace::{self, OutputFormat, TraceFormat};
//! use vigil::{KeyedMonitor, Spec};
//!
//! let text = "in host: Str\nin x: Int\nout total: Int\ntotal = default(total[1], 0) + x\n";
//! let spec = Spec::parse("sum.dsrv", text)?;
//! let schema = spec.input_schema();
//! let rows = "host,x\na,1\nb,10\na,2\nb,20\n";
//! let reader = trace::reader_from_bufread(
//!     "rows.csv",
//!     Box::new(std::io::Cursor::new(rows.as_bytes())),
//!     TraceFormat::Csv,
//!     &schema,
//! )?;
//! let options = FeedOptions {
//!     names: schema.names.clone(),
//!     time_cell: None,
//!     unit: TimeUnit::Seconds,
//!     lateness: 0,
//!     separate: true,
//!     malformed: Malformed::Stop,
//!     idle_timeout: None,
//!     periods: vec![],
//!     start: None,
//!     max_gap: None,
//!     on_gap: GapPolicy::CatchUp,
//!     max_ticks: 1000,
//!     on_reset: ResetPolicy::Cancel,
//!     positions: true,
//!     wall_clock: false,
//! };
//! let mut feed = Feed::new(options, vigil::notice::ignore());
//! feed.add_reader("rows.csv".into(), reader, TraceFormat::Csv);
//!
//! // Two workers, each evaluating the keys routed to it; one writer puts the lines in the
//! // single-process order.
//! let monitor = KeyedMonitor::builder(&spec, "host").build()?;
//! let out = Arc::new(Mutex::new(Vec::new()));
//! let finished = ScaledRun::new(&spec, monitor, 2, feed)?
//!     .output(OutputFormat::Csv, Box::new(Shared(out.clone())))
//!     .run()?;
//! assert_eq!(finished.fired, 0);
//! let text = String::from_utf8(out.lock().unwrap().clone())?;
//! assert_eq!(text, "step,host,total\n0,\"a\",1\n0,\"b\",10\n1,\"a\",3\n1,\"b\",30\n");
//!
//! // A `Write` whose bytes the test reads back.
//! struct Shared(Arc<Mutex<Vec<u8>>>);
//! impl std::io::Write for Shared {
//!     fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
//!         self.0.lock().unwrap().extend_from_slice(b);
//!         Ok(b.len())
//!     }
//!     fn flush(&mut self) -> std::io::Result<()> {
//!         Ok(())
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod setup;

use super::MAX_WORKERS;
use super::peers::{OnSilent, Term, Timeouts};
use super::run::{self, AlertText};
use super::source::ReadCounts;
use crate::keyed::KeyedMonitor;
use crate::live;
use crate::monitor::{Spec, Stats};
use crate::notice::Notify;
use crate::pipeline::drive::Ended;
use crate::pipeline::log::Header;
use crate::pipeline::sink::{ColumnOptions, Columns, TriggerTally};
use crate::pipeline::{Feed, FeedOptions};
use crate::trace::{InputSchema, OutputFormat, ReaderOptions, TraceFormat};
use std::io::Write;
use std::path::PathBuf;

/// A keyed run on worker threads (see the module's example).
pub struct ScaledRun {
    monitor: KeyedMonitor,
    workers: usize,
    reads: Reads,
    key: String,
    output: OutputFormat,
    columns: Columns,
    names: Vec<String>,
    triggers: Vec<TriggerTally>,
    has_triggers: bool,
    out: OutputTo,
    alerts: Option<AlertsTo>,
    alert_text: Option<AlertText>,
    notify: Notify,
    stats: bool,
    tally: bool,
    spec_path: String,
    checkpoint: Option<(PathBuf, u64)>,
    resume: Option<PathBuf>,
    merge_options: String,
    record: Option<(String, Header)>,
    cluster: Option<Cluster>,
    unordered: bool,
}

/// Where a scaled run's rows come from.
enum Reads {
    /// A feed the caller opened, read by process 0's first worker.
    Feed(Box<Feed>),
    /// Inputs by name, opened by the run.
    Inputs(Box<Inputs>),
}

/// A scaled run's inputs by name, opened by the run: trace files (by their extension, or
/// `format`), `-` (standard input), FIFOs, live sources' URLs and one `tcp://` listener, as
/// `vigil run --input` takes them. Where the inputs allow it, process 0's workers read them in
/// parallel: one regular file without a time field in parts (of `--checkpoint-every` lines
/// when the run checkpoints, each part's reader sending the barrier at its start), several
/// regular files one each (with a time field, each through a feed of its own), one stream
/// without a time field in chunks. A replay log is then written in parts, one per reader of a
/// file's parts or a stream's chunks. Anything else — and every other run that checkpoints or
/// resumes, or records a replay log — is read by one feed of them all in process 0's first
/// worker, put back where a resumed checkpoint left each input.
pub struct Inputs {
    /// The inputs as given.
    pub names: Vec<String>,
    /// The cells every row has, with their types: the spec's inputs, then any other fields
    /// (passed through, the time field); the feed's names are these.
    pub schema: InputSchema,
    /// The format of every trace file, else each one's by its name.
    pub format: Option<TraceFormat>,
    /// The trace readers' options.
    pub reader: ReaderOptions,
    /// How the rows are stamped, merged and scheduled; `separate` must be set (a keyed row is
    /// one key's event).
    pub feed: FeedOptions,
    /// The live transports' options.
    pub live: live::Options,
    /// Whether every process of a cluster holds the inputs (shared storage, or a copy at the
    /// same path): then a file read in parts is read by every process's workers, each its
    /// share, instead of by process 0's alone. The processes check in their handshake that
    /// they read the same file (its length, and a digest of its first and last 64 KiB).
    pub on_every_process: bool,
}

/// Where a scaled run writes its outputs.
pub enum OutputTo {
    /// Nowhere (the run is for its alerts or counts).
    Nowhere,
    /// A writer of the caller's.
    Writer(Box<dyn Write + Send>),
    /// A file (`-`: standard output), emptied, or cut back to a resumed checkpoint's length
    /// so that each line is written exactly once across a kill and a resume.
    File(String),
    /// A live sink's URL (`mqtt://…`, `redis://…`), with the transports' options; alert lines
    /// go to its alerts topic or stream when the run's alerts are not sent elsewhere.
    Live(String, Box<live::Options>),
}

/// Where a scaled run writes its trigger firings, as JSON lines.
pub enum AlertsTo {
    /// A writer of the caller's.
    Writer(Box<dyn Write + Send>),
    /// A file, kept exactly once across a kill and a resume as the output file is.
    File(String),
}

/// This process's part of a run over several processes: its index, every process's
/// `host:port`, what every process must agree on (compared in a handshake before anything is
/// written), how long to wait for the peers, and what to do when a running peer falls silent
/// (called once, after the lines written so far are flushed).
pub struct Cluster {
    /// This process's index.
    pub process: usize,
    /// Every process's address, by index.
    pub addresses: Vec<String>,
    /// The job as the caller describes it (the run adds the routing hash, vigil's version and
    /// the resumed barrier).
    pub job: Vec<Term>,
    /// How long to wait for the peers to connect, and for a word from a running one.
    pub timeouts: Timeouts,
    /// Called once when a running peer has been silent for longer than `timeouts.peer`, with
    /// its index and the silence.
    pub on_silent: OnSilent,
}

/// How a scaled run went to its end.
#[derive(Clone, Debug)]
pub struct Finished {
    /// Trigger firings written.
    pub fired: u64,
    /// Whether a key was stopped by a runtime error (said as a
    /// [`Notice::KeyStopped`](crate::notice::Notice::KeyStopped)); the other keys went on.
    pub key_stopped: bool,
    /// What the readers read (process 0's; nothing in another process).
    pub read: ReadCounts,
    /// Rows evaluated and written (a stopped key's are not).
    pub steps: u64,
    /// Ticks evaluated and written.
    pub ticks: u64,
    /// Each trigger's firings (with [`ScaledRun::tally`], on by default).
    pub triggers: Vec<TriggerTally>,
    /// Each worker's counters and live keys at the end (asked for with [`ScaledRun::stats`]):
    /// in the process that writes the outputs, every worker's; elsewhere, none.
    pub workers: Vec<WorkerEnd>,
    /// How process 0's workers read the inputs in parallel ("the trace read in 4 parts by 2
    /// workers"), or `None`: one feed read them.
    pub reading: Option<String>,
}

/// A worker's counters and live keys at the end of a run.
#[derive(Clone, Debug)]
pub struct WorkerEnd {
    /// Its index in the run.
    pub worker: usize,
    /// Its monitor's counters (the rows routed to it).
    pub stats: Stats,
    /// Its live keys.
    pub keys: usize,
}

impl Finished {
    /// The workers' counters as one, for a summary.
    pub fn merged_stats(&self) -> Option<Stats> {
        run::merged_stats(self.workers.iter().map(|w| &w.stats))
    }
}

/// Why a scaled run did not go to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failed {
    /// It stopped: why, and whose fault it is (a malformed row is the input's).
    Stopped(String, Ended),
    /// A worker failed, or timely's network did (a peer process gone). After a lost peer, this
    /// process's workers are left parked (unwinding them through timely's clean-up would abort
    /// the process): the program should end soon after.
    Computation(String),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Stopped(message, _) => write!(f, "{message}"),
            Failed::Computation(cause) => write!(f, "the computation failed: {cause}"),
        }
    }
}

impl std::error::Error for Failed {}

impl ScaledRun {
    /// A run of `monitor` (built from `spec`) on `workers` threads over `feed`'s rows, which
    /// must be the spec's inputs in order, then any other fields (a time field), each row a
    /// step of its own (`FeedOptions::separate`). Its outputs are discarded until
    /// [`output`](ScaledRun::output) says where they go. A run over a feed cannot checkpoint
    /// (the feed's sources were opened by the caller, so a resume could not put them back):
    /// [`ScaledRun::inputs`] can.
    pub fn new(
        spec: &Spec,
        monitor: KeyedMonitor,
        workers: usize,
        feed: Feed,
    ) -> Result<ScaledRun, String> {
        check_fields(spec, feed.options())?;
        ScaledRun::with(spec, monitor, workers, Reads::Feed(Box::new(feed)))
    }

    /// A run of `monitor` (built from `spec`) on `workers` threads over `inputs`, opened by
    /// the run (see [`Inputs`]): their rows' fields must be the spec's inputs in order, then
    /// any other fields (a time field).
    ///
    /// A run over a file that checkpoints every 2 rows into a directory, and a second one
    /// resumed from its newest checkpoint, which goes on from there and leaves the same output
    /// file:
    ///
    /// ```
    /// use vigil::pipeline::{FeedOptions, GapPolicy, Malformed, ResetPolicy};
    /// use vigil::scale::{Inputs, OutputTo, ScaledRun};
    /// use vigil::time::TimeUnit;
    /// use vigil::trace::{OutputFormat, ReaderOptions};
    /// use vigil::{KeyedMonitor, Spec};
    ///
    /// let dir = std::env::temp_dir().join(format!("vigil-doc-scaled-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let (trace, out) = (dir.join("rows.csv"), dir.join("out.csv"));
    /// std::fs::write(&trace, "host,x\na,1\nb,10\na,2\nb,20\na,3\n")?;
    /// let text = "in host: Str\nin x: Int\nout total: Int\ntotal = default(total[1], 0) + x\n";
    /// let spec = Spec::parse("sum.dsrv", text)?;
    /// let inputs = || Inputs {
    ///     names: vec![trace.display().to_string()],
    ///     schema: spec.input_schema(),
    ///     format: None,
    ///     reader: ReaderOptions::default(),
    ///     feed: FeedOptions {
    ///         names: spec.input_schema().names,
    ///         time_cell: None,
    ///         unit: TimeUnit::Seconds,
    ///         lateness: 0,
    ///         separate: true,
    ///         malformed: Malformed::Stop,
    ///         idle_timeout: None,
    ///         periods: vec![],
    ///         start: None,
    ///         max_gap: None,
    ///         on_gap: GapPolicy::CatchUp,
    ///         max_ticks: 1000,
    ///         on_reset: ResetPolicy::Cancel,
    ///         positions: true,
    ///         wall_clock: false,
    ///     },
    ///     live: vigil::live::Options::new(vigil::notice::ignore()),
    ///     on_every_process: false,
    /// };
    /// let checkpoints = dir.join("ck");
    /// let run = |resume: bool| -> Result<_, Box<dyn std::error::Error>> {
    ///     let monitor = KeyedMonitor::builder(&spec, "host").build()?;
    ///     let mut run = ScaledRun::inputs(&spec, monitor, 2, inputs())?
    ///         .output_to(OutputFormat::Csv, OutputTo::File(out.display().to_string()))
    ///         .checkpoint(checkpoints.clone(), 2, "sum.dsrv");
    ///     if resume {
    ///         run = run.resume(checkpoints.clone());
    ///     }
    ///     Ok(run.run()?)
    /// };
    /// let first = run(false)?;
    /// assert_eq!(first.steps, 5);
    /// let written = std::fs::read_to_string(&out)?;
    /// assert_eq!(written, "step,host,total\n0,\"a\",1\n0,\"b\",10\n1,\"a\",3\n1,\"b\",30\n2,\"a\",6\n");
    /// // Resumed from the newest checkpoint (after 4 rows), the run evaluates only the rest.
    /// let resumed = run(true)?;
    /// assert!(resumed.steps < 5);
    /// assert_eq!(std::fs::read_to_string(&out)?, written);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inputs(
        spec: &Spec,
        monitor: KeyedMonitor,
        workers: usize,
        inputs: Inputs,
    ) -> Result<ScaledRun, String> {
        check_fields(spec, &inputs.feed)?;
        ScaledRun::with(spec, monitor, workers, Reads::Inputs(Box::new(inputs)))
    }

    fn with(
        spec: &Spec,
        monitor: KeyedMonitor,
        workers: usize,
        reads: Reads,
    ) -> Result<ScaledRun, String> {
        if workers == 0 || workers > MAX_WORKERS {
            return Err(format!(
                "a scaled run has 1 to {MAX_WORKERS} workers, not {workers}"
            ));
        }
        let key = spec.input_names()[monitor.key_index()].to_string();
        let output = OutputFormat::Csv;
        let columns = Columns::new(
            spec,
            &ColumnOptions {
                key: Some(&key),
                alert_lines: true,
                ..ColumnOptions::default()
            },
            output,
        )?;
        Ok(ScaledRun {
            names: Vec::new(),
            monitor,
            workers,
            reads,
            key,
            output,
            columns,
            triggers: TriggerTally::of(spec),
            has_triggers: !spec.trigger_names().is_empty(),
            out: OutputTo::Nowhere,
            alerts: None,
            alert_text: None,
            notify: crate::notice::ignore(),
            stats: false,
            tally: true,
            spec_path: String::new(),
            checkpoint: None,
            resume: None,
            merge_options: String::new(),
            record: None,
            cluster: None,
            unordered: false,
        })
    }

    /// Writes every output in `format` to `to`, in the single-process order whatever the
    /// number of workers.
    pub fn output(self, format: OutputFormat, to: Box<dyn Write + Send>) -> ScaledRun {
        self.output_to(format, OutputTo::Writer(to))
    }

    /// Writes every output in `format` to `to` (see [`OutputTo`]).
    pub fn output_to(mut self, format: OutputFormat, to: OutputTo) -> ScaledRun {
        self.output = format;
        self.names = self
            .columns
            .writer_names(&self.monitor.output_names(), format);
        self.out = to;
        self
    }

    /// Which columns the outputs have (the outputs kept, the fields passed through, the time),
    /// as [`Columns`] says; the default is every output.
    pub fn columns(mut self, columns: Columns) -> ScaledRun {
        self.columns = columns;
        self.names = self
            .columns
            .writer_names(&self.monitor.output_names(), self.output);
        self
    }

    /// Writes each trigger firing to `to` as a JSON line.
    pub fn alerts(self, to: Box<dyn Write + Send>) -> ScaledRun {
        self.alerts_to(AlertsTo::Writer(to))
    }

    /// Writes each trigger firing as a JSON line to `to` (see [`AlertsTo`]).
    pub fn alerts_to(mut self, to: AlertsTo) -> ScaledRun {
        self.alerts = Some(to);
        self
    }

    /// Gives each trigger firing to `text` as a readable line when the alerts go neither to
    /// [`alerts_to`](ScaledRun::alerts_to) nor to a live output's alerts.
    pub fn alert_lines(mut self, text: impl Fn(&str) + Send + Sync + 'static) -> ScaledRun {
        self.alert_text = Some(std::sync::Arc::new(text));
        self
    }

    /// Says what the run has to say (a key stopped, a skipped row) to `notify`.
    pub fn notify(mut self, notify: Notify) -> ScaledRun {
        self.notify = notify;
        self
    }

    /// Keeps each worker's counters for [`Finished::workers`].
    pub fn stats(mut self) -> ScaledRun {
        self.stats = true;
        self
    }

    /// Whether each trigger's firings are tallied for [`Finished::triggers`] (on by default).
    pub fn tally(mut self, on: bool) -> ScaledRun {
        self.tally = on;
        self
    }

    /// Writes a checkpoint into `dir` every `every` rows (with a time field, every `every`
    /// ns of it): each worker's keys and a commit record of where the inputs and the outputs
    /// stood, the newest committed one kept. A fresh run clears the checkpoints an earlier run
    /// left there. `spec_path` is the specification's path, which the files name.
    pub fn checkpoint(mut self, dir: PathBuf, every: u64, spec_path: &str) -> ScaledRun {
        self.checkpoint = Some((dir, every.max(1)));
        self.spec_path = spec_path.to_string();
        self
    }

    /// Resumes from the newest committed checkpoint in `dir`: every worker's keys restored,
    /// each input put back where it stood, the output and alerts files cut back to what was
    /// written then. A checkpoint of another key, number of workers or routing hash is
    /// refused.
    pub fn resume(mut self, dir: PathBuf) -> ScaledRun {
        self.resume = Some(dir);
        self
    }

    /// The options that shape the merge and the scheduler, as one text a checkpoint records
    /// and a resume compares (a resume with other options is refused).
    pub fn merge_options(mut self, text: String) -> ScaledRun {
        self.merge_options = text;
        self
    }

    /// Records every row the feed gives, in its order, to the replay log `path` with `header`
    /// (its sources are filled in by the run), which `vigil replay` reads.
    pub fn record(mut self, path: String, header: Header) -> ScaledRun {
        self.record = Some((path, header));
        self
    }

    /// Runs this process's workers as part of `cluster` (see [`Cluster`]).
    pub fn cluster(mut self, cluster: Cluster) -> ScaledRun {
        self.cluster = Some(cluster);
        self
    }

    /// Writes each worker's rows as it evaluates them, to its own process's output, instead
    /// of gathering them in the single-process order (no checkpoints then).
    pub fn unordered(mut self) -> ScaledRun {
        self.unordered = true;
        self
    }

    /// Runs the workers to the end of the input.
    pub fn run(self) -> Result<Finished, Failed> {
        setup::run(self)
    }
}

/// Refuses a feed whose fields do not start with the spec's inputs, or that merges the rows of
/// one time into one step.
fn check_fields(spec: &Spec, options: &FeedOptions) -> Result<(), String> {
    let inputs = spec.input_names();
    let names = &options.names;
    if names.len() < inputs.len() || names[..inputs.len()] != inputs[..] {
        return Err(format!(
            "the feed's fields ({}) do not start with the specification's inputs ({})",
            names.join(", "),
            inputs.join(", ")
        ));
    }
    if !options.separate {
        return Err(
            "a keyed feed keeps the rows of one time apart: set FeedOptions::separate".into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{GapPolicy, Malformed, ResetPolicy};
    use crate::time::TimeUnit;

    const SPEC: &str =
        "in host: Str\nin x: Int\nout total: Int\ntotal = default(total[1], 0) + x\n";

    fn feed(spec: &Spec) -> Feed {
        let options = FeedOptions {
            names: spec.input_schema().names,
            time_cell: None,
            unit: TimeUnit::Seconds,
            lateness: 0,
            separate: true,
            malformed: Malformed::Stop,
            idle_timeout: None,
            periods: vec![],
            start: None,
            max_gap: None,
            on_gap: GapPolicy::CatchUp,
            max_ticks: 10,
            on_reset: ResetPolicy::Cancel,
            positions: true,
            wall_clock: false,
        };
        Feed::new(options, crate::notice::ignore())
    }

    fn refusal(run: ScaledRun) -> String {
        match run.run() {
            Err(Failed::Stopped(message, Ended::Failure)) => message,
            other => panic!("not refused: {other:?}"),
        }
    }

    /// What a run cannot do is refused before it starts, with the reason.
    #[test]
    fn a_run_that_cannot_be_kept_or_placed_is_refused() {
        let spec = Spec::parse("sum.dsrv", SPEC).unwrap();
        let run = || {
            let monitor = KeyedMonitor::builder(&spec, "host").build().unwrap();
            ScaledRun::new(&spec, monitor, 2, feed(&spec)).unwrap()
        };
        let dir =
            std::env::temp_dir().join(format!("vigil-scaled-refusals-{}", std::process::id()));
        let m = refusal(run().checkpoint(dir.clone(), 10, "sum.dsrv"));
        assert!(m.contains("over a feed cannot checkpoint"), "{m}");
        assert!(!dir.exists(), "nothing made for a refused run");
        let m = refusal(run().resume(dir));
        assert!(m.contains("over a feed cannot checkpoint or resume"), "{m}");
        let cluster = |process| Cluster {
            process,
            addresses: vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
            job: Vec::new(),
            timeouts: Timeouts {
                connect: std::time::Duration::from_millis(10),
                peer: std::time::Duration::from_millis(10),
            },
            on_silent: std::sync::Arc::new(|_, _| {}),
        };
        let m = refusal(run().cluster(cluster(2)));
        assert!(m.contains("not one of the cluster's 2 processes"), "{m}");
        assert!(
            ScaledRun::new(
                &spec,
                KeyedMonitor::builder(&spec, "host").build().unwrap(),
                0,
                feed(&spec)
            )
            .is_err()
        );
    }
}
