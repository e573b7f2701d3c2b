//! `vigil run` with time: every `--input` a source, merged into one sequence of steps by time.
//!
//! A run goes here when it has `--time FIELD` or more than one `--input`. Each source is read
//! with the same schema (the declared inputs, the undeclared `--pass` fields and the time field
//! if it is not an input); each row is stamped with its time (its time field read in
//! `--time-unit` or as RFC 3339; an `.input` trace's step number; without `--time`, its index
//! in its source) and handed to `crate::merge::Merge`, which gives the steps in the one order
//! the stamps define. The loop reads a row from whichever source the merge needs next, so a
//! step is evaluated as soon as it is final and no source is read ahead further than that.
//!
//! Each step's time leads its CSV/JSON-lines output row (`time`) and its alert lines; the
//! text output stays the Trustworthiness Checker's. Clashes (an input two sources set at one
//! time) and re-stamped late rows are reported on standard error (the first few) and counted in
//! `--summary`.
//!
//! The steps come from a `Feed`: the live merge of the sources (optionally writing each step to
//! a replay log, `--record`, and optionally comparing each with a log, `vigil replay --check`),
//! or a replay log read back (`vigil replay`), whose steps are re-merged from the rows it
//! recorded, so that a replay evaluates exactly the recorded steps.

use super::checkpoint::Runner;
use super::log::{Event, Header, LogReader, LogWriter};
use super::ops::{self, View};
use super::{
    Alerts, Exit, OnMalformed, ReplayArgs, RunArgs, error, load_spec, row_location, say, stop,
    trace_exit, trace_format,
};
use crate::lang::ast::{GapPolicy, ResetPolicy};
use crate::merge::{Merge, Step};
use crate::monitor::Spec;
use crate::row::StepError;
use crate::time::{Scheduler, Time, TimeForm, TimeUnit};
use crate::trace::{self, OutputFormat, OutputWriter, ReaderOptions, RowReader, TraceFormat};
use crate::value::Value;
use std::io::{self, Write};

/// The clashes and late rows reported one by one before only counting.
const REPORTED: u64 = 10;

/// One source of the run.
struct Source {
    name: String,
    feeder: Feeder,
    format: TraceFormat,
    /// Rows read from it.
    rows: u64,
}

/// How a source's rows arrive: read here when asked for, or from a reader
/// on a thread of its own (live sources merged with others, so that one
/// silent source does not stop the others being read, and `--idle-timeout`
/// can tell it is silent).
enum Feeder {
    Direct(Box<dyn RowReader>),
    Thread(std::sync::mpsc::Receiver<Msg>),
}

/// What a source delivers next.
enum Msg {
    /// A row, where it is, and the stamp its source gave it.
    Row(Vec<Option<Value>>, String, Option<Time>),
    /// A malformed row dropped (`--on-malformed skip|warn`).
    Skipped(String),
    Warning(String),
    End,
    /// An error that ends the source (and the run), with its status.
    Failed(String, Exit),
    /// A time reset after the row before (an `.input` trace's marker).
    Reset,
}

/// Reads the next row of `reader` (a source `name` of `format` that has
/// given `rows` rows): warnings first, then what came.
fn read_one(
    reader: &mut dyn RowReader,
    name: &str,
    format: TraceFormat,
    rows: u64,
    width: usize,
    policy: OnMalformed,
) -> (Vec<String>, Msg, bool) {
    let mut cells = vec![None; width];
    let next = reader.next_row(&mut cells);
    let warnings = reader.take_warnings();
    let msg = match next {
        Ok(true) => {
            let lines = format != TraceFormat::Tc;
            Msg::Row(
                cells,
                row_location(name, reader, lines, rows + 1),
                reader.stamp(),
            )
        }
        Ok(false) => Msg::End,
        Err(e) if ops::droppable(policy, &e, reader) => Msg::Skipped(e.to_string()),
        Err(e) => Msg::Failed(e.to_string(), trace_exit(&e)),
    };
    let reset = matches!(msg, Msg::Row(..)) && reader.take_reset();
    (warnings, msg, reset)
}

/// Reads a source on a thread of its own (opened there by `open`: a reader
/// stays on the thread that opened it), sending what it reads: at most a
/// few hundred rows ahead, as the channel is bounded, so a fast source waits
/// for the merge rather than filling memory.
fn spawn_reader(
    name: String,
    format: TraceFormat,
    width: usize,
    policy: OnMalformed,
    open: impl FnOnce() -> Result<Box<dyn RowReader>, String> + Send + 'static,
) -> std::sync::mpsc::Receiver<Msg> {
    let (tx, rx) = std::sync::mpsc::sync_channel(256);
    std::thread::spawn(move || {
        let mut reader = match open() {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Msg::Failed(e, Exit::Failure));
                return;
            }
        };
        let mut rows = 0;
        loop {
            let (warnings, msg, reset) =
                read_one(reader.as_mut(), &name, format, rows, width, policy);
            for w in warnings {
                if tx.send(Msg::Warning(w)).is_err() {
                    return;
                }
            }
            rows += u64::from(matches!(msg, Msg::Row(..)));
            let last = matches!(msg, Msg::End | Msg::Failed(..));
            // The run gone (it stopped), or the source done: stop reading.
            if tx.send(msg).is_err() || last {
                return;
            }
            if reset {
                rows = 0;
                if tx.send(Msg::Reset).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// A connection accepted by a `tcp://` input: its name and its rows.
type Connection = (String, std::sync::mpsc::Receiver<Msg>);

/// Accepts connections on `listener`, each a JSON-lines source read on a
/// thread of its own, handed to the run in accept order.
fn spawn_listener(
    listener: std::net::TcpListener,
    schema: crate::trace::InputSchema,
    policy: OnMalformed,
) -> std::sync::mpsc::Receiver<Connection> {
    let (tx, rx) = std::sync::mpsc::channel();
    let at = match listener.local_addr() {
        Ok(a) => format!("tcp://{a}"),
        Err(_) => "the tcp:// input".to_string(),
    };
    std::thread::spawn(move || {
        let mut backoff = AcceptBackoff::new();
        for stream in listener.incoming() {
            let stream = match stream {
                Ok(s) => {
                    backoff.accepted(&at);
                    s
                }
                // A connection that went before it was taken: the
                // listener itself is fine.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue;
                }
                Err(e) => {
                    backoff.failed(&at, &e);
                    continue;
                }
            };
            let name = match stream.peer_addr() {
                Ok(a) => format!("tcp://{a}"),
                Err(_) => "tcp://?".to_string(),
            };
            let (n, schema) = (name.clone(), schema.clone());
            let width = schema.names.len();
            let rows = spawn_reader(name.clone(), TraceFormat::Jsonl, width, policy, move || {
                let source = Box::new(io::BufReader::new(stream));
                trace::reader_from_bufread(&n, source, TraceFormat::Jsonl, &schema)
                    .map_err(|e| e.to_string())
            });
            if tx.send((name, rows)).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits between failed accepts of a `tcp://` listener. A failure that
/// lasts (out of file descriptors: `EMFILE`, `ENFILE`; out of memory) fails
/// again at once on every retry, as the pending connection stays queued, so
/// retrying without a pause would spin a core: the pause starts at 10 ms and
/// doubles up to 1 s, back to 10 ms once a connection is accepted. The
/// failure is said once per episode (a run of failures), not per failure.
struct AcceptBackoff {
    next: std::time::Duration,
    /// Whether accepting is failing (said once).
    failing: bool,
}

impl AcceptBackoff {
    const FIRST: std::time::Duration = std::time::Duration::from_millis(10);
    const LAST: std::time::Duration = std::time::Duration::from_secs(1);

    fn new() -> AcceptBackoff {
        AcceptBackoff {
            next: AcceptBackoff::FIRST,
            failing: false,
        }
    }

    /// Accepting on `at` failed with `error`: says so (the first failure of
    /// an episode) and waits before the next attempt.
    fn failed(&mut self, at: &str, error: &io::Error) {
        if !self.failing {
            let hint = match error.raw_os_error() {
                Some(libc::EMFILE | libc::ENFILE) => {
                    " (out of file descriptors: raise the limit, `ulimit -n`, or have clients close connections)"
                }
                _ => "",
            };
            say(format_args!(
                "vigil: {at}: cannot accept a connection: {error}{hint}; retrying after a pause that grows to {}s, until it can\n",
                AcceptBackoff::LAST.as_secs_f64()
            ));
            self.failing = true;
        }
        std::thread::sleep(self.next);
        self.next = (self.next * 2).min(AcceptBackoff::LAST);
    }

    /// A connection was accepted on `at`.
    fn accepted(&mut self, at: &str) {
        if self.failing {
            say(format_args!("vigil: {at}: accepting connections again\n"));
        }
        self.failing = false;
        self.next = AcceptBackoff::FIRST;
    }
}

/// `vigil replay SPEC LOG [--check --input …]`: the run's options come
/// from the command line, how times were read (and the key) from the log.
pub(super) fn replay(r: &ReplayArgs) -> Exit {
    let fail = |m: &str| {
        error(m);
        Exit::Failure
    };
    if let Err(m) = super::live::check_options(&r.run) {
        return fail(&m);
    }
    if r.run.time.is_some()
        || r.run.key.is_some()
        || r.run.lateness.is_some()
        || r.run.start.is_some()
        || r.run.max_gap.is_some()
    {
        return fail(
            "vigil replay: the time field, its unit, the lateness, the key and the scheduler's options (--start, --max-gap, --on-gap) come from the log",
        );
    }
    let spec = match load_spec(&r.run.spec) {
        Ok(s) => s,
        Err(exit) => return exit,
    };
    let log = match LogReader::open(&r.log) {
        Ok(l) => l,
        Err(m) => return fail(&m),
    };
    let h = log.header().clone();
    if h.fingerprint != spec.fingerprint().to_string() {
        return fail(&format!(
            "`{}` was recorded with another specification (its fingerprint {}, this specification's {})",
            r.log,
            &h.fingerprint[..h.fingerprint.len().min(16)],
            spec.fingerprint().short()
        ));
    }
    if r.check && r.run.input.len() != h.sources.len() {
        return fail(&format!(
            "vigil replay --check: the log was recorded from {} trace{} ({}); pass each with --input, in that order",
            h.sources.len(),
            if h.sources.len() == 1 { "" } else { "s" },
            h.sources.join(", ")
        ));
    }
    if !r.check && !r.run.input.is_empty() {
        return fail("vigil replay: --input is read only with --check");
    }
    let mut args = r.run.clone();
    args.time = h.time.clone();
    args.time_unit = h.unit.name().to_string();
    args.key = h.key.clone();
    args.on_gap = Some(h.on_gap.clone());
    args.max_ticks = h.max_ticks;
    args.on_reset = Some(h.on_reset.clone());
    run(&args, &spec, args.output.format(), Some((log, r.check)))
}

/// Why `--checkpoint`/`--resume` are refused on a merged run, naming what
/// of the command line made the run a merged one (the first that applies),
/// and what to do instead.
fn no_checkpoints(args: &RunArgs, spec: &Spec, replaying: bool) -> String {
    let periodic = spec.checked().has_periodic_streams();
    let why = if replaying {
        "vigil replay: a replay does not write or resume checkpoints (it re-runs the log from its start); drop --checkpoint and --resume".to_string()
    } else if let Some(tcp) = args.input.iter().find(|i| i.starts_with("tcp://")) {
        format!(
            "a tcp:// input (`{tcp}`): its connections cannot be read again from a checkpoint's position"
        )
    } else if args.input.len() > 1 {
        format!(
            "{} --input traces merged into one run: a checkpoint holds one trace's position; run without --checkpoint and --resume",
            args.input.len()
        )
    } else if args.record.is_some() {
        "--record: a resumed run could not continue the replay log; record without checkpoints, or checkpoint without --record".to_string()
    } else if periodic {
        "a specification with periodic streams (`@ period`): the scheduler of their ticks is not part of a checkpoint; run it without --checkpoint and --resume".to_string()
    } else {
        "--time: the merge by time is not part of a checkpoint; without --time, a row's time is its index in the trace and the run can be checkpointed".to_string()
    };
    if replaying {
        return why;
    }
    format!("--checkpoint and --resume do not work with {why}")
}

/// Checks `--idle-timeout`: a positive number of seconds (under 10^9, which
/// a `Duration` holds).
fn idle_timeout(args: &RunArgs) -> Result<(), String> {
    match args.idle_timeout {
        Some(t) if !(t.is_finite() && t > 0.0 && t < 1e9) => Err(format!(
            "--idle-timeout {t}: the timeout must be a positive number of seconds (under 1e9): how long a live trace may be silent before the merge stops waiting for it; leave it out to wait for every trace"
        )),
        _ => Ok(()),
    }
}

/// The scheduler's origin and gap from a log's header (a replay), else from
/// the options.
fn scheduling(
    args: &RunArgs,
    unit: TimeUnit,
    replay: Option<&Header>,
) -> Result<(Option<Time>, Option<i64>), String> {
    if let Some(h) = replay {
        return Ok((h.start, h.max_gap));
    }
    let start = match &args.start {
        None => None,
        // Read as a trace's untyped time cell is: a number, else a text.
        Some(text) => {
            let v = trace::parse_text(text, crate::lang::types::Type::Any, "--start")?;
            Some(
                Time::from_value(&v, unit)
                    .map_err(|e| format!("--start: {e}"))?
                    .0,
            )
        }
    };
    let max_gap = match args.max_gap {
        None => None,
        Some(g) => Some(
            unit.duration(g)
                .ok_or_else(|| format!("--max-gap {g}: not a duration"))?,
        ),
    };
    Ok((start, max_gap))
}

/// `vigil run` over merged sources (see the module doc); with `replay`, the
/// steps of a log (`true`: and the sources, checked against it).
pub(super) fn run(
    args: &RunArgs,
    spec: &Spec,
    output: OutputFormat,
    replay: Option<(LogReader, bool)>,
) -> Exit {
    let fail = |m: &str| {
        error(m);
        Exit::Failure
    };
    if args.checkpoint.is_some() || args.resume.is_some() {
        return fail(&no_checkpoints(args, spec, replay.is_some()));
    }
    if let Err(m) = idle_timeout(args) {
        return fail(&m);
    }
    let unit = TimeUnit::from_name(&args.time_unit).expect("clap allows only known units");
    let lateness = match args.lateness.map(|l| (l, unit.duration(l))) {
        None => 0,
        Some((_, Some(ns))) => ns,
        Some((l, None)) => return fail(&format!("--lateness {l}: not a duration")),
    };
    // A log's run re-stamps as the recorded one did.
    let lateness = replay
        .as_ref()
        .map_or(lateness, |(l, _)| l.header().lateness);
    let view = match View::new(args, spec, output) {
        Ok(v) => v,
        Err(m) => return fail(&m),
    };
    // The schema every source is read with.
    let (schema, time_cell) = ops::timed_schema(args, spec);
    let width = schema.names.len();
    let options = ReaderOptions {
        max_step_gap: args.max_step_gap,
    };
    if let Some((log, _)) = &replay
        && log.header().fields != schema.names
    {
        return fail(&format!(
            "the log's fields ({}) are not this run's ({}): replay with the --pass fields it was recorded with",
            log.header().fields.join(", "),
            schema.names.join(", ")
        ));
    }
    if replay.is_none() && args.input.is_empty() {
        return fail("the trace is missing: pass --input FILE (or - for standard input)");
    }
    let mut sources = Vec::new();
    let mut streaming = false;
    let reading = match &replay {
        None | Some((_, true)) => args.input.as_slice(),
        Some((_, false)) => &[],
    };
    let mut listener = None;
    let mut live = super::live::Options::of(args, time_cell);
    // Rows here are done when read: nothing tells a source when they are.
    live.ack_on_read = true;
    for path in reading {
        if super::live::is_url(path) {
            if replay.is_some() {
                return fail(&format!(
                    "vigil replay --check cannot read the live source `{path}` again"
                ));
            }
            let readers = match super::live::open_input(
                path,
                &schema,
                &live,
                &super::live::Resume::default(),
            ) {
                Ok(r) => r,
                Err(m) => return fail(&m),
            };
            for super::live::Source { name, reader } in readers {
                sources.push(Source {
                    name,
                    feeder: Feeder::Direct(reader),
                    format: TraceFormat::Jsonl,
                    rows: 0,
                });
            }
            streaming = true;
            continue;
        }
        if let Some(addr) = path.strip_prefix("tcp://") {
            if replay.is_some() {
                return fail("vigil replay --check cannot read a tcp:// input again");
            }
            if listener.is_some() {
                return fail("one tcp:// input at most (its connections are the sources)");
            }
            match std::net::TcpListener::bind(addr) {
                Ok(l) => listener = Some(l),
                Err(e) => return fail(&format!("--input {path}: cannot listen: {e}")),
            }
            streaming = true;
            continue;
        }
        let format = match trace_format(path, args.format) {
            Ok(f) => f,
            Err(exit) => return exit,
        };
        if format == TraceFormat::Tc && args.on_malformed != OnMalformed::Stop {
            return fail(
                "--on-malformed skip|warn needs JSON-lines or CSV traces: a malformed `.input` block cannot be skipped alone",
            );
        }
        let opened = match trace::open_trace(path, format, &schema, options) {
            Ok(o) => o,
            Err(e) => return fail(&e.to_string()),
        };
        streaming |= opened.streaming;
        sources.push(Source {
            name: if path == "-" {
                "<stdin>".into()
            } else {
                path.clone()
            },
            feeder: Feeder::Direct(opened.reader),
            format,
            rows: 0,
        });
    }
    let policy = args.on_malformed;
    if streaming && (sources.len() > 1 || listener.is_some()) {
        // Live sources merged: each read on a thread of its own, by the
        // reader opened above. (Opening it again there closed the first
        // one: a FIFO's writer could then find no reader and fail with a
        // broken pipe.)
        let width = schema.names.len();
        sources = sources
            .into_iter()
            .map(|mut src| {
                if let Feeder::Direct(reader) = src.feeder {
                    let rx = spawn_reader(src.name.clone(), src.format, width, policy, move || {
                        Ok(reader)
                    });
                    src.feeder = Feeder::Thread(rx);
                }
                src
            })
            .collect();
    }
    if let Some(l) = &listener
        && let Ok(addr) = l.local_addr()
    {
        // The address (a port 0 asked for any free port) for whoever connects.
        say(format_args!("vigil: listening on tcp://{addr}\n"));
    }
    let connections = listener.map(|l| spawn_listener(l, schema.clone(), policy));
    let mut runner = match super::checkpoint::new_monitor(args, spec) {
        Ok(r) => r,
        Err(exit) => return exit,
    };
    if let Err(exit) = super::check_tier(args, &runner.stats()) {
        return exit;
    }
    let names = view.writer_names(&runner.output_names(), output);
    let sink: Box<dyn Write + Send> = match &args.output_file {
        None => Box::new(io::stdout()),
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Box::new(f),
            Err(e) => return fail(&format!("cannot create the output file `{path}`: {e}")),
        },
    };
    let mut writer = match (args.output.live(), &args.key) {
        (Some(url), _) => {
            match super::live::open_output(url, names, &live, &super::live::Resume::default()) {
                Ok(w) => w,
                Err(m) => return fail(&m),
            }
        }
        (None, Some(k)) => trace::keyed_writer(output, names, k, sink, false),
        (None, None) => trace::make_writer(output, names, sink),
    };
    let mut alerts = match Alerts::open(args, spec) {
        Ok(a) => a,
        Err(exit) => return exit,
    };
    let mut merge = Merge::new(sources.len(), width, lateness);
    if let Some(cell) = time_cell {
        merge = merge.exempt(cell);
    }
    if args.key.is_some() {
        // A keyed row is one key's event: rows at one time stay apart.
        merge = merge.separate();
    }
    let periods: Vec<i64> = match &runner {
        Runner::Single(m) => m.periods().to_vec(),
        Runner::Keyed(m) => m.periods().to_vec(),
    };
    let (start, max_gap) = match scheduling(args, unit, replay.as_ref().map(|(l, _)| l.header())) {
        Ok(s) => s,
        Err(m) => return fail(&m),
    };
    // The scheduler's policies: the flag, else the spec's choice, else the
    // default (a log's are its recorded run's, set as flags).
    let c = spec.checked();
    let on_gap = (args.on_gap.as_deref().map(gap_policy))
        .or(c.on_gap)
        .unwrap_or(GapPolicy::CatchUp);
    let on_reset = (args.on_reset.as_deref().map(reset_policy))
        .or(c.on_reset)
        .unwrap_or(ResetPolicy::Cancel);
    // A keyed run ticks each key as its own rows make its ticks due (the
    // monitor's `ticks_before`), under the run's rules; the feed has no
    // scheduler of its own then.
    if let Runner::Keyed(m) = &mut runner {
        m.set_ticking(crate::time::Ticking {
            start,
            max_gap,
            on_gap,
            max_ticks: args.max_ticks,
        });
    }
    let keyed = matches!(runner, Runner::Keyed(_));
    let names: Vec<String> = match &replay {
        Some((log, _)) => log.header().sources.clone(),
        None => sources.iter().map(|s| s.name.clone()).collect(),
    };
    let form = replay.as_ref().map(|(log, _)| log.header().form);
    let replay_name = match &replay {
        Some((log, false)) => Some(log.name().to_string()),
        _ => None,
    };
    let record = args.record.as_ref().map(|path| Record {
        path: path.clone(),
        header: Header {
            fingerprint: spec.fingerprint().to_string(),
            sources: names.clone(),
            fields: schema.names.clone(),
            time: args.time.clone(),
            unit,
            form: TimeForm::Number(unit),
            key: args.key.clone(),
            start,
            max_gap,
            on_gap: gap_name(on_gap).to_string(),
            max_ticks: args.max_ticks,
            on_reset: reset_name(on_reset).to_string(),
            lateness,
        },
        writer: None,
        live: streaming,
    });
    // A log is replayed (`replay`), or checked against the traces' merge.
    let (replay, check) = match replay {
        Some((log, false)) => (Some(log), None),
        Some((log, true)) => (None, Some(log)),
        None => (None, None),
    };
    let live = replay.is_none();
    let mut feed = Feed {
        merge,
        record: record.filter(|_| live && check.is_none()),
        check,
        replay,
        scheduler: (live && !keyed && !periods.is_empty()).then(|| Scheduler::new(&periods)),
        ticks_until: None,
        pending: Default::default(),
        connections,
    };
    let mut run = Run {
        args,
        view: &view,
        output,
        sources,
        names,
        schema_names: schema.names.clone(),
        inputs: spec.input_names().len(),
        time_cell,
        unit,
        form,
        streaming,
        tally: ops::Tally::new(args.on_malformed, ops::Progress::new(true, None)),
        clashes: 0,
        late: 0,
        status: Exit::Success,
        start,
        max_gap,
        last_time: None,
        ticks: 0,
        periods: periods.len(),
        replaying: replay_name,
        on_gap,
        on_reset,
    };
    let result = run.go(&mut feed, &mut runner, writer.as_mut(), &mut alerts);
    let logged = match &mut feed.record {
        Some(r) => r.finish(run.form),
        None => Ok(()),
    };
    if let Err(e) = logged {
        return fail(&format!(
            "cannot write the replay log `{}`: {e}",
            args.record.as_deref().unwrap_or("")
        ));
    }
    let status = match result
        .and_then(|s| writer.flush().map(|()| s))
        .and_then(|s| alerts.flush().map(|()| s))
    {
        Ok(s) => s,
        Err(e) => return super::output_error(&e),
    };
    if args.summary || args.fail_on_trigger {
        let stats = runner.stats();
        say(format_args!(
            "{}summary: {} sources merged; {} clash{}; {} late row{} re-stamped; {} tick{}\n",
            run.tally.summary(&stats, &alerts.triggers),
            run.names.len(),
            run.clashes,
            if run.clashes == 1 { "" } else { "es" },
            run.late,
            if run.late == 1 { "" } else { "s" },
            run.ticks,
            if run.ticks == 1 { "" } else { "s" },
        ));
    }
    if args.stats {
        say(format_args!("{}", runner.stats()));
        if let Runner::Keyed(m) = &runner {
            say(format_args!("keys: {} live\n", m.key_count()));
        }
    }
    super::fail_on_trigger(args, status, alerts.fired)
}

/// Where the steps come from: the merge of the sources (each step written
/// to a log with `record`, or compared with a log's with `check`), or a
/// log's steps (`replay`).
struct Feed {
    merge: Merge,
    record: Option<Record>,
    check: Option<LogReader>,
    replay: Option<LogReader>,
    /// The ticks of periodic streams (live runs of a timed spec), and the
    /// events due before the next step is read.
    scheduler: Option<Scheduler>,
    /// The scheduler's ticks up to this time come next, before `pending`.
    /// They are drawn from the scheduler one at a time as the run asks for
    /// them, never queued: a jump in time may be due billions of ticks
    /// (`--max-ticks` allows up to 2^64), and each must be evaluated and
    /// written before the next is made, so memory stays constant and the
    /// outputs of a long gap show as they come.
    ticks_until: Option<Time>,
    pending: std::collections::VecDeque<Event>,
    /// A `tcp://` input's connections, each a source joining the merge.
    connections: Option<std::sync::mpsc::Receiver<Connection>>,
}

/// A replay log being written: its header waits for the first step, which
/// tells how times are written.
struct Record {
    path: String,
    header: Header,
    writer: Option<LogWriter>,
    /// Whether a source is live (then every line is flushed as written).
    live: bool,
}

impl Record {
    /// The log's writer, its header written (with `form`, once known) the
    /// first time.
    fn writer(&mut self, form: Option<TimeForm>) -> io::Result<&mut LogWriter> {
        if self.writer.is_none() {
            if let Some(f) = form {
                self.header.form = f;
            }
            self.writer = Some(LogWriter::create(&self.path, &self.header)?);
        }
        Ok(self.writer.as_mut().expect("created above"))
    }

    fn write(&mut self, event: &Event, form: Option<TimeForm>) -> io::Result<()> {
        let live = self.live;
        let w = self.writer(form)?;
        match event {
            Event::Rows(step) => w.write_step(step)?,
            Event::Tick(t, due) => w.write_tick(*t, due)?,
            Event::Stop(message, status) => w.write_stop(message, *status)?,
            Event::Source(name) => w.write_source(name)?,
            Event::Reset => w.write_reset()?,
        }
        // A live run's log is as far as its outputs, should it be killed.
        if live {
            w.flush_buffer()?;
        }
        Ok(())
    }

    /// Flushes the log (writing the header of one without steps).
    fn finish(&mut self, form: Option<TimeForm>) -> io::Result<()> {
        self.writer(form)?.flush()
    }
}

/// The state of a merged run.
struct Run<'a> {
    args: &'a RunArgs,
    view: &'a View,
    output: OutputFormat,
    sources: Vec<Source>,
    /// The sources' names (for a replay, as the log names them).
    names: Vec<String>,
    /// The cells' names (inputs, extra fields, time field).
    schema_names: Vec<String>,
    inputs: usize,
    time_cell: Option<usize>,
    unit: TimeUnit,
    /// How times are written: as the first time read was.
    form: Option<TimeForm>,
    streaming: bool,
    tally: ops::Tally,
    clashes: u64,
    late: u64,
    /// A keyed run's status so far (a key stopped by a runtime error).
    status: Exit,
    /// The ticks' origin (`--start`), the longest gap between rows before
    /// `--on-gap` applies, the last input step's time, and ticks so far.
    start: Option<Time>,
    max_gap: Option<i64>,
    last_time: Option<Time>,
    ticks: u64,
    /// The specification's periods (for reading ticks of a log).
    periods: usize,
    /// The scheduler's policies.
    on_gap: GapPolicy,
    on_reset: ResetPolicy,
    /// The log a replay reads its steps from (for its messages).
    replaying: Option<String>,
}

impl Run<'_> {
    fn go(
        &mut self,
        feed: &mut Feed,
        runner: &mut Runner,
        writer: &mut dyn OutputWriter,
        alerts: &mut Alerts,
    ) -> io::Result<Exit> {
        let mut stopped = std::collections::HashSet::new();
        loop {
            let event = match self.next(feed, writer)? {
                Ok(Some(event)) => event,
                Ok(None) => return Ok(self.status),
                Err(exit) => return Ok(exit),
            };
            let done = match event {
                Event::Rows(step) => self.evaluate(step, runner, writer, alerts, &mut stopped)?,
                Event::Tick(t, due) => self.tick(t, &due, runner, writer, alerts)?,
                // A new epoch changes the merge and the scheduler only; a
                // keyed run's schedulers are its keys' (each fires its
                // `--on-reset once` tick here).
                Event::Reset => match runner {
                    Runner::Keyed(m) if !m.periods().is_empty() => {
                        m.reset_ticks(self.on_reset);
                        self.keyed_ticks(m, writer, alerts, &mut stopped)?
                    }
                    _ => None,
                },
                Event::Stop(..) | Event::Source(..) => {
                    unreachable!("the feed ends at a stop and takes sources in")
                }
            };
            if let Some(exit) = done {
                return Ok(exit);
            }
        }
    }

    /// A time reset every source reached: the scheduler's work is cancelled
    /// or run once (`--on-reset`) and it starts again at the next row's
    /// time; queued as events (the ticks, then the reset).
    fn reset(&mut self, feed: &mut Feed) {
        if let Some(sched) = &mut feed.scheduler {
            let periods = self.periods;
            if self.on_reset == ResetPolicy::Once
                && let Some(last) = self.last_time
            {
                feed.pending
                    .push_back(Event::Tick(last, vec![true; periods]));
            }
            *sched = Scheduler::new(sched.periods());
        }
        self.last_time = None;
        feed.pending.push_back(Event::Reset);
    }

    /// Adds the connections a `tcp://` input has accepted as sources (the
    /// next in priority, in accept order), waiting up to `wait` for one.
    fn accept(&mut self, feed: &mut Feed, wait: Option<std::time::Duration>) -> io::Result<()> {
        let Some(conns) = &feed.connections else {
            return Ok(());
        };
        let mut first = match wait {
            Some(d) => conns.recv_timeout(d).ok(),
            None => None,
        };
        loop {
            let Some((name, rows)) = first.take().or_else(|| conns.try_recv().ok()) else {
                return Ok(());
            };
            let s = feed.merge.add_source();
            debug_assert_eq!(s, self.sources.len());
            if let Some(r) = &mut feed.record {
                r.write(&Event::Source(name.clone()), self.form)?;
            }
            self.sources.push(Source {
                name: name.clone(),
                feeder: Feeder::Thread(rows),
                format: TraceFormat::Jsonl,
                rows: 0,
            });
            self.names.push(name);
        }
    }

    /// Ends a live feed on an error of its traces (or its ticks): the log
    /// records the end, so that a replay stops with the same error and
    /// status; a log being checked must end the same way.
    fn end_feed<T>(
        &mut self,
        feed: &mut Feed,
        message: String,
        exit: Exit,
        writer: &mut dyn OutputWriter,
    ) -> io::Result<Result<T, Exit>> {
        let ours = Event::Stop(message.clone(), exit as u8);
        if let Some(r) = &mut feed.record {
            r.write(&ours, self.form)?;
        }
        // (A log that cannot be read there leaves the traces' own error.)
        if let Some(log) = &mut feed.check
            && let Ok(Some(why)) = self.diverged(log, Some(&ours))
        {
            return stop(writer, &why, Exit::Trace).map(Err);
        }
        stop(writer, &message, exit).map(Err)
    }

    /// How `ours`, the live run's next event, differs from the checked
    /// log's, as the message that stops the run (`None` if they agree;
    /// `Err` if the log cannot be read).
    fn diverged(
        &self,
        log: &mut LogReader,
        ours: Option<&Event>,
    ) -> Result<Option<String>, String> {
        let logged = log.next_event(self.time_cell, self.periods)?;
        Ok(diverges(ours, logged.as_ref(), &self.names).map(|why| {
            format!(
                "{}: the traces diverge from the log at step {}: {why}",
                log.at(),
                self.tally.steps
            )
        }))
    }

    /// Evaluates and writes the ticks a keyed monitor has due (its
    /// `ticks_before` or `reset_ticks` made them), each key's with its key;
    /// a runtime error stops that key alone, as a row's does.
    fn keyed_ticks(
        &mut self,
        m: &mut crate::keyed::KeyedMonitor,
        writer: &mut dyn OutputWriter,
        alerts: &mut Alerts,
        stopped: &mut std::collections::HashSet<crate::value::Key>,
    ) -> io::Result<Option<Exit>> {
        let form = self.form.unwrap_or(TimeForm::Number(self.unit));
        let timed = self.args.time.is_some();
        let mut samples = Vec::new();
        while let Some(ticked) = m.next_tick() {
            match ticked {
                Ok(o) => {
                    let t = o.time().unwrap_or(Time(0)).to_value(form);
                    let context: Vec<(&str, &Value)> = match timed {
                        true => vec![("time", &t)],
                        false => Vec::new(),
                    };
                    samples.clear();
                    self.view.fill(
                        &mut samples,
                        self.output,
                        None,
                        o.iter(),
                        timed.then_some(&t),
                    );
                    alerts.report(&o, &context, &self.tally.progress)?;
                    self.ticks += 1;
                    if let Some(k) = o.key() {
                        writer.write_keyed(o.step(), k, &samples)?;
                    }
                }
                Err(StepError::Runtime(e)) => {
                    let key = m.last_key().cloned();
                    if key.is_some_and(|k| stopped.insert(k)) {
                        writer.flush()?;
                        error(&e);
                    }
                    self.status = Exit::Runtime;
                }
                Err(StepError::Row(e)) => unreachable!("a tick has no row: {e}"),
            }
        }
        if self.streaming {
            writer.flush()?;
            alerts.flush()?;
        }
        Ok(None)
    }

    /// Evaluates a tick of the periods `due` at `t`.
    fn tick(
        &mut self,
        t: Time,
        due: &[bool],
        runner: &mut Runner,
        writer: &mut dyn OutputWriter,
        alerts: &mut Alerts,
    ) -> io::Result<Option<Exit>> {
        let Runner::Single(m) = runner else {
            // A keyed run's ticks are its keys' (never the feed's): only a
            // log written by something else can have one.
            return stop(
                writer,
                &"the log has a tick, which a keyed run never records (its keys' ticks follow from their rows)",
                Exit::Trace,
            )
            .map(Some);
        };
        let form = self.form.unwrap_or(TimeForm::Number(self.unit));
        let time = t.to_value(form);
        let timed = self.args.time.is_some();
        let context: Vec<(&str, &Value)> = match timed {
            true => vec![("time", &time)],
            false => Vec::new(),
        };
        let mut samples = Vec::new();
        match m.tick(t, due) {
            Ok(o) => {
                self.view.fill(
                    &mut samples,
                    self.output,
                    None,
                    o.iter(),
                    timed.then_some(&time),
                );
                alerts.report(&o, &context, &self.tally.progress)?;
                self.ticks += 1;
                writer.write_step(o.step(), &samples)?;
                if self.streaming {
                    writer.flush()?;
                    alerts.flush()?;
                }
                Ok(None)
            }
            Err(StepError::Runtime(e)) => stop(writer, &e, Exit::Runtime).map(Some),
            Err(StepError::Row(e)) => unreachable!("a tick has no row: {e}"),
        }
    }

    /// Makes the scheduler's ticks due before an input step at `t` the
    /// next events (`Feed::ticks_until`; after the origin is set: `--start`,
    /// else this first time), as `--max-gap`, `--on-gap` and `--max-ticks`
    /// say.
    fn schedule(&mut self, feed: &mut Feed, t: Time) -> Result<(), String> {
        let Some(sched) = &mut feed.scheduler else {
            return Ok(());
        };
        // The one rule a keyed run applies to each key's ticks too.
        let rules = crate::time::Ticking {
            start: self.start,
            max_gap: self.max_gap,
            on_gap: self.on_gap,
            max_ticks: self.args.max_ticks,
        };
        if let Err(due) = rules.schedule(sched, self.last_time, t) {
            return Err(format!(
                "{due} ticks are due before the row at time {}, more than --max-ticks {} (a jump in time? --max-gap G --on-gap skip fires one tick per period over it)",
                show(t.to_value(self.form.unwrap_or(TimeForm::Number(self.unit)))),
                self.args.max_ticks
            ));
        }
        feed.ticks_until = Some(t);
        self.last_time = Some(t);
        Ok(())
    }

    /// The next step of the feed; `Err` ends the run (after the outputs so
    /// far) with that status.
    fn next(
        &mut self,
        feed: &mut Feed,
        writer: &mut dyn OutputWriter,
    ) -> io::Result<Result<Option<Event>, Exit>> {
        let exempt = self.time_cell;
        if let Some(log) = &mut feed.replay {
            loop {
                return match log.next_event(exempt, self.periods) {
                    Ok(Some(Event::Stop(message, status))) => {
                        stop(writer, &message, exit_of(status)).map(Err)
                    }
                    Ok(Some(Event::Source(name))) => {
                        self.names.push(name);
                        log.add_source();
                        continue;
                    }
                    Ok(event) => Ok(Ok(event)),
                    Err(m) => stop(writer, &m, Exit::Trace).map(Err),
                };
            }
        }
        let event = match due_tick(feed).or_else(|| feed.pending.pop_front()) {
            Some(event) => Some(event),
            None => match self.merged(feed, writer)? {
                Ok(event) => event,
                Err(exit) => return Ok(Err(exit)),
            },
        };
        let Feed { record, check, .. } = feed;
        if let Some(log) = check {
            match self.diverged(log, event.as_ref()) {
                Ok(None) => {}
                Ok(Some(m)) | Err(m) => return stop(writer, &m, Exit::Trace).map(Err),
            }
        }
        if let (Some(r), Some(e)) = (record, &event) {
            r.write(e, self.form)?;
        }
        Ok(Ok(event))
    }

    /// The next event of the sources' merge (nothing is due before it): a
    /// step, or the first of the ticks due before it, or what a time reset
    /// queued; `None` once every source has ended.
    fn merged(
        &mut self,
        feed: &mut Feed,
        writer: &mut dyn OutputWriter,
    ) -> io::Result<Result<Option<Event>, Exit>> {
        let step = loop {
            self.accept(feed, None)?;
            // An idle source is idle until its next row arrives: one
            // waiting now goes into the merge before the next step.
            let idle: Vec<usize> = feed.merge.idle_sources().collect();
            for s in idle {
                let read = self.read_within(s, &mut feed.merge, Some(std::time::Duration::ZERO))?;
                if let Err((message, exit)) = read {
                    return self.end_feed(feed, message, exit, writer);
                }
            }
            if let Some(step) = feed.merge.pop() {
                break step;
            }
            if feed.merge.pop_reset() {
                self.reset(feed);
                return Ok(Ok(feed.pending.pop_front()));
            }
            let read = match feed.merge.wants() {
                Some(s) => self.read(s, &mut feed.merge)?,
                None if feed.merge.is_done() && feed.connections.is_none() => return Ok(Ok(None)),
                // Every source has ended: wait for a connection.
                None if feed.merge.idle_sources().next().is_none() => {
                    self.accept(feed, Some(std::time::Duration::from_millis(50)))?;
                    Ok(())
                }
                // Every source left is idle: listen to each in turn
                // until one delivers (or ends).
                None => {
                    let idle: Vec<usize> = feed.merge.idle_sources().collect();
                    let poll = std::time::Duration::from_millis(20);
                    let mut got = Ok(());
                    for s in idle {
                        got = self.read_within(s, &mut feed.merge, Some(poll))?;
                        if got.is_err() {
                            break;
                        }
                    }
                    got
                }
            };
            if let Err((message, exit)) = read {
                return self.end_feed(feed, message, exit, writer);
            }
        };
        if let Err(m) = self.schedule(feed, step.time) {
            return self.end_feed(feed, m, Exit::Trace, writer);
        }
        feed.pending.push_back(Event::Rows(step));
        Ok(Ok(due_tick(feed).or_else(|| feed.pending.pop_front())))
    }

    /// Reads the next row of source `s` into the merge (or ends it).
    fn read(&mut self, s: usize, merge: &mut Merge) -> io::Result<Result<(), (String, Exit)>> {
        let wait = self
            .args
            .idle_timeout
            .map(std::time::Duration::from_secs_f64);
        self.read_within(s, merge, wait)
    }

    /// Reads what source `s` delivers next into the merge; a live source
    /// silent for `wait` is marked idle instead.
    fn read_within(
        &mut self,
        s: usize,
        merge: &mut Merge,
        wait: Option<std::time::Duration>,
    ) -> io::Result<Result<(), (String, Exit)>> {
        let width = self.schema_names.len();
        let policy = self.args.on_malformed;
        let mut reset_after = false;
        let (cells, at, stamp) = loop {
            let src = &mut self.sources[s];
            let msg = match &mut src.feeder {
                Feeder::Direct(reader) => {
                    let (warnings, msg, reset) = read_one(
                        reader.as_mut(),
                        &src.name,
                        src.format,
                        src.rows,
                        width,
                        policy,
                    );
                    for w in warnings {
                        say(format_args!("warning: {w}\n"));
                    }
                    reset_after = reset;
                    msg
                }
                Feeder::Thread(rx) => match wait {
                    None => rx.recv().unwrap_or(Msg::End),
                    Some(d) => match rx.recv_timeout(d) {
                        Ok(m) => m,
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                            merge.idle(s);
                            return Ok(Ok(()));
                        }
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Msg::End,
                    },
                },
            };
            match msg {
                Msg::Row(cells, at, stamp) => break (cells, at, stamp),
                Msg::Warning(w) => say(format_args!("warning: {w}\n")),
                Msg::Skipped(e) => self.tally.skipped_row(&e),
                Msg::End => {
                    merge.end(s);
                    return Ok(Ok(()));
                }
                Msg::Failed(m, exit) => return Ok(Err((m, exit))),
                Msg::Reset => {
                    merge.push_reset(s);
                    src.rows = 0;
                    return Ok(Ok(()));
                }
            }
        };
        let src = &mut self.sources[s];
        src.rows += 1;
        self.tally.rows_read += 1;
        // A time reset: the row's time field is `reset` (nothing else of it
        // is read).
        if let Some(cell) = self.time_cell
            && src.format != TraceFormat::Tc
            && matches!(&cells[cell], Some(Value::Str(t)) if &**t == "reset")
        {
            merge.push_reset(s);
            return Ok(Ok(()));
        }
        // A live source's row without a time field has the stamp its source
        // gave it (the edge stamps it).
        let stamp = stamp.filter(|_| self.time_cell.is_none_or(|cell| cells[cell].is_none()));
        let time = match (self.time_cell, src.format) {
            _ if let Some(t) = stamp => {
                self.form.get_or_insert(TimeForm::Number(self.unit));
                Ok(t)
            }
            (Some(cell), f) if f != TraceFormat::Tc => match &cells[cell] {
                None => Err(format!(
                    "the row has no time field `{}`",
                    self.schema_names[cell]
                )),
                Some(v) => Time::from_value(v, self.unit)
                    .map(|(t, form)| {
                        self.form.get_or_insert(form);
                        t
                    })
                    .map_err(|e| format!("time field `{}`: {e}", self.schema_names[cell])),
            },
            // An `.input` trace's step number, or a row's index: in units.
            _ => {
                let index = i64::try_from(src.rows - 1).unwrap_or(i64::MAX);
                self.form.get_or_insert(TimeForm::Number(self.unit));
                index
                    .checked_mul(self.unit.nanos())
                    .map(Time)
                    .ok_or_else(|| "the row's index is out of the time range".to_string())
            }
        };
        let pushed = time.and_then(|t| merge.push(s, t, cells).map_err(|e| e.to_string()));
        match pushed {
            Ok(c) => {
                if let Some(own) = c.late {
                    self.late += 1;
                    if self.late <= REPORTED {
                        let form = self.form.unwrap_or(TimeForm::Number(self.unit));
                        say(format_args!(
                            "warning: {at}: a late row (time {}) is re-stamped to {} (within --lateness, or after its trace was idle past --idle-timeout)\n",
                            show(own.to_value(form)),
                            show(c.stamp.time.to_value(form)),
                        ));
                    }
                }
                // An `.input` trace's reset marker follows the row.
                if reset_after {
                    merge.push_reset(s);
                    self.sources[s].rows = 0;
                }
                Ok(Ok(()))
            }
            Err(m) => {
                if self.args.on_malformed != OnMalformed::Stop {
                    self.tally.skip_rejected(&at, &m);
                    return Ok(Ok(()));
                }
                Ok(Err((format!("{at}: {m}"), Exit::Trace)))
            }
        }
    }

    /// Evaluates one merged step; `Some` ends the run with that status.
    fn evaluate(
        &mut self,
        step: Step,
        runner: &mut Runner,
        writer: &mut dyn OutputWriter,
        alerts: &mut Alerts,
        stopped: &mut std::collections::HashSet<crate::value::Key>,
    ) -> io::Result<Option<Exit>> {
        let form = self.form.unwrap_or(TimeForm::Number(self.unit));
        let time = step.time.to_value(form);
        for c in &step.clashes {
            self.clashes += 1;
            if self.clashes <= REPORTED {
                say(format_args!(
                    "warning: time {}: `{}` is set by both `{}` and `{}`; the value of `{}` is kept (the first --input has priority)\n",
                    show(time.clone()),
                    self.schema_names[c.cell],
                    self.names[c.kept as usize],
                    self.names[c.dropped as usize],
                    self.names[c.kept as usize],
                ));
            }
        }
        let cells = &step.cells;
        let mut samples = Vec::new();
        let mut context = self.view.context(cells);
        let timed = self.args.time.is_some();
        if timed {
            context.insert(0, ("time", &time));
        }
        let shown_time = timed.then_some(&time);
        // `time()` is the step's time with `--time`, else the step index.
        let row = &cells[..self.inputs];
        // A keyed row of a periodic spec: its key's ticks due first.
        if let Runner::Keyed(m) = &mut *runner
            && !m.periods().is_empty()
        {
            // Without `--time` a key's row is stamped with its index among
            // the key's rows, as in a run of the key's rows alone.
            let at = match timed {
                true => Ok(step.time),
                false => {
                    let key = cells[m.key_index()].clone().map(crate::value::Key::from);
                    let n = key.and_then(|k| m.input_steps(&k)).unwrap_or(0);
                    i64::try_from(n)
                        .ok()
                        .and_then(|n| n.checked_mul(self.unit.nanos()))
                        .map(Time)
                        .ok_or_else(|| "the row's index is out of the time range".to_string())
                }
            };
            let due = match at {
                Ok(at) => m.ticks_before(at, row),
                Err(m) => return stop(writer, &m, Exit::Trace).map(Some),
            };
            match due {
                Ok(()) => {
                    if let Some(exit) = self.keyed_ticks(m, writer, alerts, stopped)? {
                        return Ok(Some(exit));
                    }
                }
                Err(StepError::Row(crate::row::RowError::TooManyTicks { key, due, max })) => {
                    // As a plain run's: the run ends (`Run::schedule`).
                    let message = format!(
                        "{due} ticks of key {key} are due before its row at time {}, more than --max-ticks {max} (a jump in time? --max-gap G --on-gap skip fires one tick per period over it)",
                        show(time.clone()),
                    );
                    return stop(writer, &message, Exit::Trace).map(Some);
                }
                // A stopped key or a rejected row: the row says so below.
                Err(_) => {}
            }
        }
        let stepped = match (&mut *runner, timed) {
            (Runner::Single(m), true) => m.step_at(step.time, row),
            (Runner::Single(m), false) => m.step(row),
            (Runner::Keyed(m), true) => m.step_at(step.time, row),
            (Runner::Keyed(m), false) => m.step(row),
        };
        let result = stepped.map(|o| {
            self.view
                .fill(&mut samples, self.output, Some(cells), o.iter(), shown_time);
            let key = o.key().cloned();
            let reported = alerts.report(&o, &context, &self.tally.progress);
            (o.step(), key, reported)
        });
        match result {
            Ok((n, key, reported)) => {
                reported?;
                self.tally.steps += 1;
                match key {
                    Some(k) => writer.write_keyed(n, &k, &samples)?,
                    None => writer.write_step(n, &samples)?,
                }
                if self.streaming {
                    writer.flush()?;
                    alerts.flush()?;
                }
                Ok(None)
            }
            Err(StepError::Runtime(e)) => match runner {
                Runner::Single(_) => stop(writer, &e, Exit::Runtime).map(Some),
                Runner::Keyed(m) => {
                    // That key stops; the others go on (as `run_keyed`).
                    let key = cells[m.key_index()].clone().map(crate::value::Key::from);
                    if key.is_some_and(|k| stopped.insert(k)) {
                        writer.flush()?;
                        error(&e);
                    }
                    self.status = Exit::Runtime;
                    Ok(None)
                }
            },
            Err(StepError::Row(e)) => {
                let at = format!("time {}", show(time.clone()));
                // A log's rows were not read by a trace reader: a value of
                // the wrong type there is a malformed log, not a bug.
                if let Some(log) = &self.replaying {
                    return stop(
                        writer,
                        &format_args!("{log}: the log's row at {at} does not fit the inputs: {e}"),
                        Exit::Trace,
                    )
                    .map(Some);
                }
                if self.tally.skip_rejected(&at, &e) {
                    return Ok(None);
                }
                let (message, exit) = super::rejected(&e);
                stop(writer, &message, exit).map(Some)
            }
        }
    }
}

/// The next of the scheduler's ticks due (`Feed::ticks_until`), made now;
/// `None` once none is left.
fn due_tick(feed: &mut Feed) -> Option<Event> {
    let until = feed.ticks_until?;
    let tick = feed.scheduler.as_mut()?.next_until(until);
    if tick.is_none() {
        feed.ticks_until = None;
    }
    tick.map(|(t, due)| Event::Tick(t, due))
}

/// The policies as the flags and the log name them.
fn gap_policy(name: &str) -> GapPolicy {
    match name {
        "skip" => GapPolicy::Skip,
        _ => GapPolicy::CatchUp,
    }
}

fn gap_name(p: GapPolicy) -> &'static str {
    match p {
        GapPolicy::Skip => "skip",
        GapPolicy::CatchUp => "catch-up",
    }
}

fn reset_policy(name: &str) -> ResetPolicy {
    match name {
        "once" => ResetPolicy::Once,
        _ => ResetPolicy::Cancel,
    }
}

fn reset_name(p: ResetPolicy) -> &'static str {
    match p {
        ResetPolicy::Once => "once",
        ResetPolicy::Cancel => "cancel",
    }
}

/// The exit status a log's end records.
fn exit_of(status: u8) -> Exit {
    match status {
        1 => Exit::Failure,
        3 => Exit::Runtime,
        _ => Exit::Trace,
    }
}

/// How the step the traces gave differs from the one the log has, if it
/// does: its time, or a row (source, position, late stamp, cells bit for
/// bit).
fn diverges(live: Option<&Event>, logged: Option<&Event>, names: &[String]) -> Option<String> {
    let (live, logged) = match (live, logged) {
        (None, None) => return None,
        (None, Some(_)) => return Some("the traces ended; the log has more steps".into()),
        (Some(_), None) => return Some("the log ended; the traces have more rows".into()),
        (Some(Event::Tick(a, x)), Some(Event::Tick(b, y))) => {
            return (a != b || x != y).then(|| {
                format!(
                    "a tick at {}ns in the run, at {}ns in the log (or of other periods)",
                    a.0, b.0
                )
            });
        }
        (Some(Event::Stop(a, x)), Some(Event::Stop(b, y))) => {
            return (a != b || x != y)
                .then(|| format!("the run stops with `{a}`, the log with `{b}`"));
        }
        (Some(Event::Stop(a, _)), Some(_)) => {
            return Some(format!("the run stops with `{a}` where the log goes on"));
        }
        (Some(_), Some(Event::Stop(b, _))) => {
            return Some(format!("the log stops with `{b}` where the run goes on"));
        }
        (Some(Event::Tick(..)), Some(_)) => {
            return Some("the run has a tick where the log has rows".into());
        }
        (Some(_), Some(Event::Tick(..))) => {
            return Some("the run has rows where the log has a tick".into());
        }
        (Some(Event::Reset), Some(Event::Reset)) => return None,
        (Some(Event::Reset), Some(_)) | (Some(_), Some(Event::Reset)) => {
            return Some("a time reset on one side only".into());
        }
        (Some(Event::Source(_)), _) | (_, Some(Event::Source(_))) => {
            return Some(
                "the log has a connection to a tcp:// input, which cannot be read again".into(),
            );
        }
        (Some(Event::Rows(a)), Some(Event::Rows(b))) => (a, b),
    };
    if live.time != logged.time {
        return Some(format!(
            "its time is {}ns in the traces, {}ns in the log",
            live.time.0, logged.time.0
        ));
    }
    let rows = |s: &Step| -> Vec<String> {
        s.rows
            .iter()
            .map(|(c, _)| {
                format!(
                    "row {} of {}",
                    c.stamp.seq + 1,
                    names[c.stamp.source as usize]
                )
            })
            .collect()
    };
    let same = live.rows.len() == logged.rows.len()
        && live
            .rows
            .iter()
            .zip(&logged.rows)
            // `Value`'s equality is bitwise (floats by their bits).
            .all(|((a, x), (b, y))| a.stamp == b.stamp && a.late == b.late && x == y);
    (!same).then(|| {
        format!(
            "the traces give {}, the log has {}",
            describe_rows(&rows(live), live),
            describe_rows(&rows(logged), logged)
        )
    })
}

fn describe_rows(rows: &[String], s: &Step) -> String {
    let cells: Vec<String> = s
        .rows
        .iter()
        .map(|(_, c)| {
            c.iter()
                .map(|v| v.as_ref().map_or("-".to_string(), |v| v.to_string()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    rows.iter()
        .zip(cells)
        .map(|(r, c)| format!("{r} ({c})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A time as messages write it: its number, or its RFC 3339 text.
fn show(v: Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format!("{f:?}"),
        other => other.to_string(),
    }
}
