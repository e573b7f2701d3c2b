//! `vigil run` with time: every `--input` a source, merged into one sequence of steps by time.
//!
//! A run goes here when it has `--time FIELD`, more than one `--input`, `--record` or a
//! periodic specification. Each source is opened with the same schema (the declared inputs,
//! the undeclared `--pass` fields and the time field if it is not an input) and handed to the
//! library's feed (`crate::pipeline::Feed`), which stamps its rows, merges them and makes the
//! periodic streams' ticks due; this module evaluates the events it gives, writes them, and
//! prints its notices.
//!
//! Each step's time leads its CSV/JSON-lines output row (`time`) and its alert lines; the
//! text output stays the Trustworthiness Checker's. Clashes (an input two sources set at one
//! time) and re-stamped late rows are reported on standard error (the first few) and counted in
//! `--summary`.
//!
//! The steps come from `Steps`: the feed of the sources (optionally writing each event to a
//! replay log, `--record`, and optionally comparing each with a log, `vigil replay --check`),
//! or a replay log read back (`vigil replay`), whose steps are re-merged from the rows it
//! recorded, so that a replay evaluates exactly the recorded steps.

use super::checkpoint::{self, Checkpointable, Runner};
use super::log::{Event, Header, LogReader, LogWriter};
use super::ops::{self, View};
use super::{
    Alerts, Exit, OnMalformed, ReplayArgs, RunArgs, error, load_spec, say, stop, trace_format,
};
use crate::lang::ast::{GapPolicy, ResetPolicy};
use crate::merge::Step;
use crate::monitor::Spec;
use crate::notice::Notice;
use crate::pipeline::{self, Feed, FeedOptions, StopKind, show};
use crate::time::{Time, TimeForm, TimeUnit};
use crate::trace::{self, OutputFormat, OutputWriter, ReaderOptions, RowReader, TraceFormat};
use std::io::{self, Write};

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

/// Why `--checkpoint`/`--resume` are refused on this merged run: a replay
/// (it re-runs its log), or a `tcp://` input (its connections cannot be
/// read again from a position); and what to do instead.
fn no_checkpoints(args: &RunArgs, replaying: bool) -> String {
    let why = if replaying {
        "vigil replay: a replay does not write or resume checkpoints (it re-runs the log from its start); drop --checkpoint and --resume".to_string()
    } else {
        let tcp = args.input.iter().find(|i| i.starts_with("tcp://"));
        format!(
            "a tcp:// input (`{}`): its connections cannot be read again from a checkpoint's position",
            tcp.map_or("", String::as_str)
        )
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
pub(super) fn scheduling(
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
    let tcp = args.input.iter().any(|i| i.starts_with("tcp://"));
    if (args.checkpoint.is_some() || args.resume.is_some()) && (replay.is_some() || tcp) {
        return fail(&no_checkpoints(args, replay.is_some()));
    }
    let mut resumed = match checkpoint::load_merged(args, output) {
        Ok(r) => r,
        Err(exit) => return exit,
    };
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
    let view = match ops::view(args, spec, output) {
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
    // Each source: its name, reader and format.
    let mut sources: Vec<(String, Box<dyn RowReader>, TraceFormat)> = Vec::new();
    // The sources as a checkpoint records them.
    let mut kept = Vec::new();
    let mut streaming = false;
    let reading = match &replay {
        None | Some((_, true)) => args.input.as_slice(),
        Some((_, false)) => &[],
    };
    let mut listener = None;
    let mut live = super::live::options(args, time_cell);
    // Rows here are done when read: nothing tells a source when they are.
    live.ack_on_read = true;
    for path in reading {
        if super::live::is_url(path) {
            if replay.is_some() {
                return fail(&format!(
                    "vigil replay --check cannot read the live source `{path}` again"
                ));
            }
            let resume = super::live::Resume {
                token: resumed.as_ref().and_then(|r| r.token(sources.len())),
                written: None,
            };
            let readers = match super::live::open_input(path, &schema, &live, &resume) {
                Ok(r) => r,
                Err(m) => return fail(&m),
            };
            for super::live::Source { name, reader } in readers {
                if let Some(r) = &resumed
                    && let Err(exit) = r.source(sources.len(), &name, TraceFormat::Jsonl)
                {
                    return exit;
                }
                kept.push(checkpoint::Source {
                    path: super::live::redact(&name),
                    format: TraceFormat::Jsonl,
                    trace: None,
                });
                sources.push((name, reader, TraceFormat::Jsonl));
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
        let resume_at = match &resumed {
            Some(r) => match r.source(sources.len(), path, format) {
                Ok(at) => at,
                Err(exit) => return exit,
            },
            None => None,
        };
        let mut opened = match trace::open_trace_at(path, format, &schema, options, resume_at) {
            Ok(o) => o,
            Err(e) => return fail(&e.to_string()),
        };
        streaming |= opened.streaming;
        if let Some(r) = &resumed {
            let malformed = args.on_malformed != OnMalformed::Stop;
            if let Err(exit) = r.reposition(sources.len(), path, &mut opened, width, malformed) {
                return exit;
            }
        }
        let name = if path == "-" {
            "<stdin>".into()
        } else {
            path.clone()
        };
        kept.push(checkpoint::Source {
            path: path.clone(),
            format,
            trace: opened.file,
        });
        sources.push((name, opened.reader, format));
    }
    if let Some(r) = &resumed
        && r.sources() != sources.len()
    {
        return fail(&format!(
            "cannot resume from `{}`: it was taken on {} sources, and this run has {}",
            r.path(),
            r.sources(),
            sources.len()
        ));
    }
    let runner = match &mut resumed {
        Some(r) => r.monitor(args, spec),
        None => checkpoint::new_monitor(args, spec),
    };
    let mut runner = match runner {
        Ok(r) => r,
        Err(exit) => return exit,
    };
    if let Err(exit) = super::check_tier(args, &runner.stats()) {
        return exit;
    }
    let names = view.writer_names(&runner.output_names(), output);
    // The files a checkpointed run keeps exactly once: cut back to the
    // lengths its checkpoint recorded, each with a handle to sync it through.
    let keep = |path: &str, alerts: bool| match &resumed {
        Some(r) => r.kept(path, alerts),
        None => checkpoint::create_kept(path, if alerts { "alerts file" } else { "output file" }),
    };
    let checkpointed = args.checkpoint.is_some() || resumed.is_some();
    let (sink, output_sync, continued): (Box<dyn Write + Send>, _, _) = match &args.output_file {
        None => (Box::new(io::stdout()), None, false),
        Some(path) if checkpointed => match keep(path, false) {
            Ok((file, sync)) => {
                let continued = file.metadata().is_ok_and(|m| m.len() > 0);
                (Box::new(file), Some((path.clone(), sync)), continued)
            }
            Err(exit) => return exit,
        },
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => (Box::new(f), None, false),
            Err(e) => return fail(&format!("cannot create the output file `{path}`: {e}")),
        },
    };
    let mut writer = match (args.output.live(), &args.key) {
        (Some(url), _) => {
            let resume = super::live::Resume {
                token: None,
                written: resumed.as_ref().and_then(|r| r.written()),
            };
            match super::live::open_output(url, names, &live, &resume) {
                Ok(w) => w,
                Err(m) => return fail(&m),
            }
        }
        (None, Some(k)) => trace::keyed_writer(output, names, k, sink, continued),
        (None, None) if continued => trace::continue_writer(output, names, sink),
        (None, None) => trace::make_writer(output, names, sink),
    };
    let (alerts_file, alerts_sync) = match args.alerts.as_deref() {
        Some(path) if path != "-" && checkpointed => match keep(path, true) {
            Ok((file, sync)) => (Some(file), Some((path.to_string(), sync))),
            Err(exit) => return exit,
        },
        _ => (None, None),
    };
    let mut alerts = match super::alerts(args, spec, alerts_file, ops::Bar::default()) {
        Ok(a) => a,
        Err(exit) => return exit,
    };
    let checkpoints = checkpoint::checkpointer(args, kept, output, output_sync, alerts_sync);
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
        // Without `--time` a key's row stands at its index in `--time-unit`.
        m.set_index_unit(unit.nanos());
    }
    let keyed = matches!(runner, Runner::Keyed(_));
    let notify = notices();
    let mut feed = Feed::new(
        FeedOptions {
            names: schema.names.clone(),
            time_cell,
            unit,
            lateness,
            // A keyed row is one key's event: rows at one time stay apart.
            separate: args.key.is_some(),
            malformed: args.on_malformed.into(),
            idle_timeout: args.idle_timeout.map(std::time::Duration::from_secs_f64),
            // A replay's ticks are its log's (a checked one's come from its
            // sources, to be compared with the log's); a keyed run's are its
            // keys'.
            periods: if replay.as_ref().is_none_or(|(_, check)| *check) && !keyed {
                periods.clone()
            } else {
                Vec::new()
            },
            start,
            max_gap,
            on_gap,
            max_ticks: args.max_ticks,
            on_reset,
            positions: args.checkpoint.is_some(),
        },
        notify.clone(),
    );
    let merged_live = streaming && (sources.len() > 1 || listener.is_some());
    for (name, reader, format) in sources {
        feed.add_reader(name, reader, format);
    }
    if merged_live {
        // Live sources merged: each read on a thread of its own, by the
        // reader opened above. (Opening it again there closed the first
        // one: a FIFO's writer could then find no reader and fail with a
        // broken pipe.)
        feed.read_on_threads();
    }
    if let Some(l) = listener {
        if let Ok(addr) = l.local_addr() {
            // The address (a port 0 asked for any free port) for whoever connects.
            notify(Notice::Listening {
                at: format!("tcp://{addr}"),
            });
        }
        let policy = args.on_malformed.into();
        feed.listen(pipeline::spawn_listener(
            l,
            schema.clone(),
            policy,
            notify.clone(),
        ));
    }
    if let Some(r) = &resumed {
        let at: Vec<pipeline::At> = (0..r.sources()).map(|i| r.at(i)).collect();
        feed.resume(&r.clock().feed, &at);
    }
    let names: Vec<String> = match &replay {
        Some((log, _)) => log.header().sources.clone(),
        None => feed.source_names().map(String::from).collect(),
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
        resumed: None,
        live: streaming,
    });
    // A resumed run goes on with the log its checkpoint recorded.
    let mut record = record;
    if let Some(r) = &resumed {
        let logged = r.clock().record.as_ref();
        match (&mut record, logged) {
            (None, None) => {}
            (Some(rec), Some(info)) if info.len > 0 => {
                match checkpoint::reopen_output(&rec.path, info.len, "replay log") {
                    Ok(f) => rec.resumed = Some(f),
                    Err(m) => return fail(&format!("cannot resume from `{}`: {m}", r.path())),
                }
            }
            (Some(_), Some(_)) => {}
            (None, Some(info)) => {
                return fail(&format!(
                    "cannot resume from `{}`: it was taken with `--record {}`; pass it again to continue that log",
                    r.path(),
                    info.path
                ));
            }
            (Some(_), None) => {
                return fail(&format!(
                    "cannot resume from `{}`: it was taken without --record, so it cannot continue a replay log",
                    r.path()
                ));
            }
        }
    }
    // A log is replayed (`replay`), or checked against the traces' merge.
    let (replay, check) = match replay {
        Some((log, false)) => (Some(log), None),
        Some((log, true)) => (None, Some(log)),
        None => (None, None),
    };
    let mut feed = Steps {
        record: record.filter(|_| replay.is_none() && check.is_none()),
        live: feed,
        check,
        replay,
    };
    let mut run = Run {
        args,
        view: &view,
        output,
        names,
        schema_names: schema.names.clone(),
        inputs: spec.input_names().len(),
        time_cell,
        unit,
        form: form.or(feed.live.form()),
        streaming,
        tally: ops::Tally::new(args.on_malformed, ops::Progress::new(true, None)),
        clashes: 0,
        checkpoints,
        samples: Vec::new(),
        ticks: 0,
        periods: periods.len(),
        replaying: replay_name,
        notify,
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
    (run.tally).add_read(feed.live.rows_read(), feed.live.skipped());
    let late = feed.live.late();
    if args.summary || args.fail_on_trigger {
        let stats = runner.stats();
        say(format_args!(
            "{}summary: {} sources merged; {} clash{}; {} late row{} re-stamped; {} tick{}\n",
            run.tally.summary(&stats, alerts.triggers()),
            run.names.len(),
            run.clashes,
            if run.clashes == 1 { "" } else { "es" },
            late,
            if late == 1 { "" } else { "s" },
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
    super::fail_on_trigger(args, status, alerts.fired())
}

/// Where the steps come from: the feed of the sources (each step written to
/// a log with `record`, or compared with a log's with `check`), or a log's
/// steps (`replay`).
struct Steps {
    live: Feed,
    record: Option<Record>,
    check: Option<LogReader>,
    replay: Option<LogReader>,
}

/// A replay log being written: its header waits for the first step, which
/// tells how times are written.
pub(super) struct Record {
    path: String,
    header: Header,
    writer: Option<LogWriter>,
    /// A resumed run's log, cut back to the length its checkpoint
    /// recorded, to go on writing (its header is there already).
    resumed: Option<std::fs::File>,
    /// Whether a source is live (then every line is flushed as written).
    live: bool,
}

impl Record {
    /// A log to be written at `path` with `header` (`live`: every line
    /// flushed as written). (A scaled run's; the merged run builds its own.)
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(super) fn new(path: String, header: Header, live: bool) -> Record {
        Record {
            path,
            header,
            writer: None,
            resumed: None,
            live,
        }
    }

    /// The log's writer, its header written (with `form`, once known) the
    /// first time.
    fn writer(&mut self, form: Option<TimeForm>) -> io::Result<&mut LogWriter> {
        if self.writer.is_none() {
            if let Some(f) = form {
                self.header.form = f;
            }
            self.writer = Some(match self.resumed.take() {
                Some(file) => LogWriter::continued(file, self.header.fields.clone()),
                None => LogWriter::create(&self.path, &self.header)?,
            });
        }
        Ok(self.writer.as_mut().expect("created above"))
    }

    pub(super) fn write(&mut self, event: &Event, form: Option<TimeForm>) -> io::Result<()> {
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

    /// The log's path, for messages.
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(super) fn path(&self) -> &str {
        &self.path
    }

    /// The log's length once everything written so far is on disk (its
    /// header written first, with `form`): what a scaled run's checkpoint
    /// records.
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(super) fn synced_len(&mut self, form: Option<TimeForm>) -> io::Result<u64> {
        self.writer(form)?.synced_len()
    }

    /// Goes on with the log a checkpoint recorded at `len` bytes (cut back
    /// to it; its header is there already), as a resumed run does.
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(super) fn resume_at(&mut self, len: u64) -> Result<(), String> {
        if len > 0 {
            self.resumed = Some(checkpoint::reopen_output(&self.path, len, "replay log")?);
        }
        Ok(())
    }

    /// Flushes the log (writing the header of one without steps).
    pub(super) fn finish(&mut self, form: Option<TimeForm>) -> io::Result<()> {
        self.writer(form)?.flush()
    }
}

/// The state of a merged run.
struct Run<'a> {
    args: &'a RunArgs,
    view: &'a View,
    output: OutputFormat,
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
    /// Ticks evaluated so far.
    ticks: u64,
    /// The specification's periods (for reading ticks of a log).
    periods: usize,
    /// Where the run's notices go (printed on standard error).
    notify: crate::notice::Notify,
    /// What a time reset does to a keyed run's ticks (`--on-reset`).
    on_reset: ResetPolicy,
    /// The log a replay reads its steps from (for its messages).
    replaying: Option<String>,
    /// Checkpoints (`--checkpoint`), taken between steps.
    checkpoints: Option<checkpoint::Checkpointer>,
    /// The samples of a step's outputs, kept from step to step so that
    /// writing one allocates nothing.
    samples: Vec<crate::value::Sample>,
}

impl Run<'_> {
    fn go(
        &mut self,
        feed: &mut Steps,
        runner: &mut Runner,
        writer: &mut dyn OutputWriter,
        alerts: &mut Alerts,
    ) -> io::Result<Exit> {
        let mut evaluator = pipeline::Evaluator::new(self.args.time.is_some(), self.inputs);
        loop {
            let event = match self.next(feed, writer)? {
                Ok(Some(event)) => event,
                Ok(None) => {
                    // The clean end: a last checkpoint, so that a resume
                    // after it has nothing to redo.
                    if self.checkpoints.is_some()
                        && let Err(m) = self.checkpoint(feed, runner, writer, alerts)?
                    {
                        return stop(writer, &m, Exit::Failure);
                    }
                    return Ok(match evaluator.keys_stopped() {
                        true => Exit::Runtime,
                        false => Exit::Success,
                    });
                }
                Err(exit) => return Ok(exit),
            };
            let (rows, time) = match &event {
                Event::Rows(step) => {
                    self.clashes(step);
                    (Some(step.rows.len() as u64), step.time)
                }
                Event::Tick(t, _) => (None, *t),
                _ => (None, Time(0)),
            };
            let Some(event) = event.into_feed() else {
                unreachable!("the feed ends at a stop")
            };
            let form = self.form.unwrap_or(TimeForm::Number(self.unit));
            let mut lines = crate::pipeline::sink::Lines {
                columns: self.view,
                output: self.output,
                writer: &mut *writer,
                alerts: &mut *alerts,
                form: self.args.time.is_some().then_some(form),
                key_input: self.args.key.as_deref(),
                notify: &self.notify,
                steps: 0,
                ticks: 0,
                samples: std::mem::take(&mut self.samples),
            };
            let flow = evaluator.event(runner, &event, self.on_reset, &mut lines)?;
            let (steps, ticks) = (lines.steps, lines.ticks);
            self.samples = lines.samples;
            self.tally.steps += steps;
            self.ticks += ticks;
            if self.streaming {
                writer.flush()?;
                alerts.flush()?;
            }
            let shown = || show(time.to_value(form));
            match flow {
                pipeline::Flow::Go => {}
                pipeline::Flow::Rejected(e) => {
                    let at = format!("time {}", shown());
                    // A log's rows were not read by a trace reader: a value
                    // of the wrong type there is a malformed log, not a bug.
                    if let Some(log) = &self.replaying {
                        let message =
                            format!("{log}: the log's row at {at} does not fit the inputs: {e}");
                        return stop(writer, &message, Exit::Trace);
                    }
                    if !self.tally.skip_rejected(&at, &e) {
                        let (message, exit) = super::rejected(&e);
                        return stop(writer, &message, exit);
                    }
                }
                pipeline::Flow::Stop(pipeline::Halt::Runtime(e)) => {
                    return stop(writer, &e, Exit::Runtime);
                }
                pipeline::Flow::Stop(pipeline::Halt::TooManyTicks { key, due, max }) => {
                    // As a plain run's: the run ends (the feed's schedule).
                    let message = format!(
                        "{due} ticks of key {key} are due before its row at time {}, more than --max-ticks {max} (a jump in time? --max-gap G --on-gap skip fires one tick per period over it)",
                        shown(),
                    );
                    return stop(writer, &message, Exit::Trace);
                }
                pipeline::Flow::Stop(pipeline::Halt::KeyedTick) => {
                    return stop(
                        writer,
                        &"the log has a tick, which a keyed run never records (its keys' ticks follow from their rows)",
                        Exit::Trace,
                    );
                }
            }
            // Checkpoints fall between steps with nothing pending (a step's
            // ticks come before it): the state is then the monitor's, the
            // merge's marks and the scheduler's.
            let due = rows.is_some_and(|n| (self.checkpoints.as_mut()).is_some_and(|c| c.count(n)));
            if due
                && feed.live.settled()
                && let Err(m) = self.checkpoint(feed, runner, writer, alerts)?
            {
                return stop(writer, &m, Exit::Failure);
            }
        }
    }

    /// Reports the clashes of `step` (the first few; every one counted).
    fn clashes(&mut self, step: &Step) {
        let form = self.form.unwrap_or(TimeForm::Number(self.unit));
        for c in &step.clashes {
            self.clashes += 1;
            if self.clashes <= REPORTED {
                (self.notify)(Notice::Clash {
                    time: show(step.time.to_value(form)),
                    input: self.schema_names[c.cell].clone(),
                    kept: self.names[c.kept as usize].clone(),
                    dropped: self.names[c.dropped as usize].clone(),
                });
            }
        }
    }

    /// Writes a checkpoint now (see `checkpoint::Clock`).
    fn checkpoint(
        &mut self,
        feed: &mut Steps,
        runner: &Runner,
        writer: &mut dyn OutputWriter,
        alerts: &mut Alerts,
    ) -> io::Result<Result<(), String>> {
        let Some(ck) = &mut self.checkpoints else {
            return Ok(Ok(()));
        };
        let clock = checkpoint::Clock {
            options: checkpoint::merge_options(self.args),
            feed: feed.live.state(),
            record: match &mut feed.record {
                None => None,
                Some(r) => Some(checkpoint::OutputFileInfo {
                    path: r.path.clone(),
                    // A log not begun yet is empty: a resume begins it.
                    len: match &mut r.writer {
                        Some(w) => w.synced_len()?,
                        None => 0,
                    },
                }),
            },
        };
        let monitor: &dyn Checkpointable = match runner {
            Runner::Single(m) => m.as_ref(),
            Runner::Keyed(m) => m.as_ref(),
        };
        let at = feed.live.positions();
        ck.write_at(monitor, &at, Some(clock), writer, alerts.sink())
    }

    /// Ends a live feed on an error of its traces (or its ticks): the log
    /// records the end, so that a replay stops with the same error and
    /// status; a log being checked must end the same way.
    fn end_feed<T>(
        &mut self,
        feed: &mut Steps,
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

    /// The next step of the feed; `Err` ends the run (after the outputs so
    /// far) with that status.
    fn next(
        &mut self,
        feed: &mut Steps,
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
        let event = loop {
            let event = match feed.live.next() {
                Ok(event) => event,
                Err(s) => {
                    let exit = match s.kind {
                        StopKind::Trace => Exit::Trace,
                        StopKind::Failure => Exit::Failure,
                    };
                    return self.end_feed(feed, s.message, exit, writer);
                }
            };
            if self.form.is_none() {
                self.form = feed.live.form();
            }
            match event {
                // A connection joined: its name, in the log too.
                Some(pipeline::Event::Source(name)) => {
                    if let Some(r) = &mut feed.record {
                        r.write(&Event::Source(name.clone()), self.form)?;
                    }
                    self.names.push(name);
                }
                event => break event.map(Event::from),
            }
        };
        let Steps { record, check, .. } = feed;
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
}

/// The policies as the flags and the log name them.
pub(super) fn gap_policy(name: &str) -> GapPolicy {
    match name {
        "skip" => GapPolicy::Skip,
        _ => GapPolicy::CatchUp,
    }
}

pub(super) fn gap_name(p: GapPolicy) -> &'static str {
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

pub(super) fn reset_name(p: ResetPolicy) -> &'static str {
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

/// The clashes reported one by one before only counting (the feed says the
/// first late rows the same way).
const REPORTED: u64 = 10;

/// Where a merged run's notices go: standard error, a warning as such.
pub(super) fn notices() -> crate::notice::Notify {
    notices_under(ops::Bar::default())
}

/// As `notices`, written with the progress bar `bar` off the terminal.
pub(super) fn notices_under(bar: ops::Bar) -> crate::notice::Notify {
    std::sync::Arc::new(move |n: Notice| {
        let prefix = match () {
            () if n.is_error() => "error",
            () if n.is_warning() => "warning",
            () => "vigil",
        };
        bar.suspend(|| say(format_args!("{prefix}: {n}\n")));
    })
}
