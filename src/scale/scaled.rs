//! A keyed run on timely workers as an embedder builds one: a [`Feed`] of sources, a
//! [`KeyedMonitor`] shared by the workers, and where the outputs and alerts go — the run
//! `vigil run --key K --workers W` is, in one process.
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

use super::MAX_WORKERS;
use super::run::{self, Launch, Network, Plan, Sink};
use super::source::{ReadCounts, Source, Tally};
use crate::keyed::KeyedMonitor;
use crate::monitor::{Spec, Stats};
use crate::notice::Notify;
use crate::pipeline::Feed;
use crate::pipeline::drive::Ended;
use crate::pipeline::sink::{ColumnOptions, Columns, TriggerTally};
use crate::time::TimeForm;
use crate::trace::OutputFormat;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// A keyed run on the worker threads of this process, reading one [`Feed`] (see the module's
/// example).
pub struct ScaledRun {
    monitor: KeyedMonitor,
    workers: usize,
    feed: Feed,
    key: String,
    output: OutputFormat,
    columns: Columns,
    names: Vec<String>,
    triggers: Vec<TriggerTally>,
    out: Option<Box<dyn Write + Send>>,
    alerts: Option<Box<dyn Write + Send>>,
    notify: Notify,
    stats: bool,
}

/// How a scaled run went to its end.
#[derive(Clone, Debug)]
pub struct Finished {
    /// Trigger firings written.
    pub fired: u64,
    /// Whether a key was stopped by a runtime error (said as a
    /// [`Notice::KeyStopped`](crate::notice::Notice::KeyStopped)); the other keys went on.
    pub key_stopped: bool,
    /// What the feed read.
    pub read: ReadCounts,
    /// Rows evaluated and written (a stopped key's are not).
    pub steps: u64,
    /// Each trigger's firings.
    pub triggers: Vec<TriggerTally>,
    /// Each worker's counters and live keys at the end, by worker (asked for with
    /// [`ScaledRun::stats`]).
    pub workers: Vec<(Stats, usize)>,
}

/// Why a scaled run did not go to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failed {
    /// It stopped: why, and whose fault it is (a malformed row is the input's).
    Stopped(String, Ended),
    /// A worker failed.
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
    /// [`output`](ScaledRun::output) says where they go.
    pub fn new(
        spec: &Spec,
        monitor: KeyedMonitor,
        workers: usize,
        feed: Feed,
    ) -> Result<ScaledRun, String> {
        if workers == 0 || workers > MAX_WORKERS {
            return Err(format!(
                "a scaled run has 1 to {MAX_WORKERS} workers, not {workers}"
            ));
        }
        let inputs = spec.input_names();
        let names = &feed.options().names;
        if names.len() < inputs.len() || names[..inputs.len()] != inputs[..] {
            return Err(format!(
                "the feed's fields ({}) do not start with the specification's inputs ({})",
                names.join(", "),
                inputs.join(", ")
            ));
        }
        if !feed.options().separate {
            return Err(
                "a keyed feed keeps the rows of one time apart: set FeedOptions::separate".into(),
            );
        }
        let key = inputs[monitor.key_index()].to_string();
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
            feed,
            key,
            output,
            columns,
            triggers: TriggerTally::of(spec),
            out: None,
            alerts: None,
            notify: crate::notice::ignore(),
            stats: false,
        })
    }

    /// Writes every output in `format` to `to`, in the single-process order whatever the
    /// number of workers.
    pub fn output(mut self, format: OutputFormat, to: Box<dyn Write + Send>) -> ScaledRun {
        self.output = format;
        self.names = self
            .columns
            .writer_names(&self.monitor.output_names(), format);
        self.out = Some(to);
        self
    }

    /// Writes each trigger firing to `to` as a JSON line.
    pub fn alerts(mut self, to: Box<dyn Write + Send>) -> ScaledRun {
        self.alerts = Some(to);
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

    /// Runs the workers to the end of the feed.
    pub fn run(self) -> Result<Finished, Failed> {
        let ScaledRun {
            monitor,
            workers,
            feed,
            key,
            output,
            columns,
            names,
            triggers,
            out,
            alerts,
            notify,
            stats,
        } = self;
        let options = feed.options();
        let (timed, unit) = (options.time_cell.is_some(), options.unit);
        let tally = Tally::new(options.malformed, notify.clone());
        let key_index = monitor.key_index();
        let cells = (monitor.input_count(), columns.extra());
        let source = Source::new(feed, tally, (key_index, key.clone()), cells);
        let sinks = (
            out.map(|to| {
                let mut sink = Sink::writer(to);
                // Writing the header into the sink's buffer cannot fail.
                let _ = sink.header(output, names.clone(), &key);
                sink
            }),
            alerts.map(Sink::writer),
        );
        let plan = Plan {
            output,
            key,
            key_index,
            view: columns,
            names,
            alerts_json: true,
            streaming: false,
            threads: workers,
            total_workers: workers,
            checkpoint: None,
            spec_path: String::new(),
            unordered: false,
            stats,
            summary: true,
            live_sink: false,
            at_barriers: Arc::default(),
            sources: Vec::new(),
            merge_options: String::new(),
            stop: std::sync::atomic::AtomicBool::new(false),
            stop_at: Arc::default(),
            unit_form: TimeForm::Number(unit),
            timed,
            notify,
            alert_text: Arc::new(|_: &str| {}),
        };
        let mut monitors = Vec::with_capacity(workers);
        monitors.push(monitor);
        for _ in 1..workers {
            monitors.push(monitors[0].share());
        }
        let launch = Launch {
            plan,
            monitors,
            readers: vec![Box::new(source)],
            sinks: Arc::new(Mutex::new(Some(sinks))),
            network: Network::Local,
            triggers,
        };
        match run::execute(launch) {
            Ok(f) => Ok(Finished {
                fired: f.fired,
                key_stopped: f.runtime,
                read: f.read.unwrap_or_default(),
                steps: f.steps,
                triggers: f.triggers,
                workers: f.ends.into_iter().map(|(_, s, k)| (s, k)).collect(),
            }),
            Err(run::Failed::Stopped(message, ended)) => Err(Failed::Stopped(message, ended)),
            Err(run::Failed::Computation(cause)) => Err(Failed::Computation(cause)),
        }
    }
}
