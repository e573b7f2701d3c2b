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

use super::checkpoint::{self, Runner};
use super::log::{Header, LogReader};
use super::ops;
use super::{Exit, ReplayArgs, RunArgs, error, load_spec, say};
use crate::lang::ast::{GapPolicy, ResetPolicy};
use crate::monitor::Spec;
use crate::notice::Notice;
use crate::pipeline::drive::Counts;
use crate::pipeline::inputs::{self, InputOptions};
use crate::pipeline::outputs::{self, Outputs};
use crate::pipeline::run_loop::{Events, RunLoop, SourceRows};
use crate::pipeline::sink::Alerts;
use crate::pipeline::{self, Feed, FeedOptions};
use crate::time::{Time, TimeForm, TimeUnit};
use crate::trace::{self, OutputFormat, ReaderOptions};

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
    if h.wall_clock {
        // Its times are written as the recorded run wrote them.
        args.clock = super::ClockArg::Wall;
    }
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
    if let Err(m) = refused(args, replay.is_some()) {
        return fail(&m);
    }
    let mut resumed = match checkpoint::load_merged(args, output) {
        Ok(r) => r,
        Err(exit) => return exit,
    };
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
    let reading = match &replay {
        None | Some((_, true)) => args.input.as_slice(),
        Some((_, false)) => &[],
    };
    if replay.is_some() {
        if let Some(url) = reading.iter().find(|p| super::live::is_url(p)) {
            return fail(&format!(
                "vigil replay --check cannot read the live source `{url}` again"
            ));
        }
        if reading.iter().any(|p| p.starts_with("tcp://")) {
            return fail("vigil replay --check cannot read a tcp:// input again");
        }
    }
    let mut live = super::live::options(args, time_cell);
    // Rows here are done when read: nothing tells a source when they are.
    live.ack_on_read = true;
    let input_options = InputOptions {
        schema: &schema,
        reader: options,
        format: args.format.forced(),
        malformed: args.on_malformed.into(),
        live: &live,
        key: None,
    };
    let opened = inputs::open(
        reading,
        &input_options,
        resumed.as_ref().map(|r| r.loaded()),
    );
    let inputs = match opened {
        Ok(i) => i,
        Err(refused) => {
            error(&refused.message);
            return super::exit_of(refused.ended);
        }
    };
    let streaming = inputs.streaming;
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
    let asked = checkpoint::output_options(args, output, streaming, &live);
    let opened = outputs::open(&asked, names, resumed.as_ref().map(|r| r.loaded()));
    let Outputs {
        mut writer,
        output_sync,
        alerts_file,
        alerts_sync,
    } = match opened {
        Ok(o) => o,
        Err(m) => return fail(&m),
    };
    let mut alerts = match super::alerts(args, spec, alerts_file, ops::Bar::default()) {
        Ok(a) => a,
        Err(exit) => return exit,
    };
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
            // A replay of a keyed run under the wall clock ticks its keys as it did (below).
            align: replay
                .as_ref()
                .is_some_and(|(log, _)| log.header().wall_clock && log.header().time.is_none()),
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
            // A wall-clock log checked reads its sources for their rows
            // only: its ticks are the log's.
            periods: if replay
                .as_ref()
                .is_none_or(|(log, check)| *check && !log.header().wall_clock)
                && (!keyed || args.clock == super::ClockArg::Wall)
            {
                periods.clone()
            } else {
                Vec::new()
            },
            start,
            max_gap,
            on_gap,
            max_ticks: args.max_ticks,
            on_reset,
            // Where each source stands, for a checkpoint; and, in a keyed run, to say
            // where a row without its key is.
            positions: args.checkpoint.is_some() || keyed,
            // A replay's times are its log's.
            wall_clock: args.clock == super::ClockArg::Wall && replay.is_none(),
        },
        notify.clone(),
    );
    if let Runner::Keyed(m) = &mut runner
        && args.clock == super::ClockArg::Wall
    {
        // Every key ticks on the run's ticks: from `--start`, else from its own first row,
        // on the run's grid where the rows are stamped with their arrival (the feed's
        // origin is on it too), at that row's time where they carry their own.
        m.set_ticking(crate::time::Ticking {
            start,
            max_gap,
            on_gap,
            max_ticks: args.max_ticks,
            align: time_cell.is_none(),
        });
    }
    let (kept, streaming) = inputs.join(&mut feed, &schema, args.on_malformed.into(), &notify);
    let checkpoints = checkpoint::checkpointer(args, kept, output, output_sync, alerts_sync);
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
    let mut record = args.record.as_ref().map(|path| {
        let header = Header {
            fingerprint: spec.fingerprint().to_string(),
            sources: names.clone(),
            fields: schema.names.clone(),
            time: args.time.clone(),
            unit,
            form: TimeForm::Number(unit),
            key: args.key.clone(),
            // The ticks' origin (`--start`; a replay's, its log's), so that a
            // replay's keys tick from it too. Under the wall clock without a time
            // field the feed's own origin is the run's start, which the keys do not
            // tick from (they tick on the grid from their first rows) and the log
            // does not need (it has the feed's ticks).
            start,
            max_gap,
            on_gap: gap_name(on_gap).to_string(),
            max_ticks: args.max_ticks,
            on_reset: reset_name(on_reset).to_string(),
            lateness,
            wall_clock: args.clock == super::ClockArg::Wall,
        };
        Record::new(path.clone(), header, streaming)
    });
    // A resumed run goes on with the log its checkpoint recorded.
    if let Some(r) = &resumed
        && let Err(m) = resume_record(&mut record, r)
    {
        return fail(&m);
    }
    // A log is replayed (`replay`), or checked against the traces' merge.
    // A wall-clock run's log is replayed with each source's rows checked
    // (reading the traces again cannot give the times they arrived at).
    let (replay, check, rows_of_sources) = match replay {
        Some((log, false)) => (Some(log), None, None),
        Some((log, true)) if log.header().wall_clock => {
            let sources = log.header().sources.len();
            (Some(log), None, Some(SourceRows::new(sources)))
        }
        Some((log, true)) => (None, Some(log), None),
        None => (None, None, None),
    };
    let mut feed = Events::new(feed);
    feed.record = record.filter(|_| replay.is_none() && check.is_none());
    (feed.check, feed.replay, feed.rows_of_sources) = (check, replay, rows_of_sources);
    let mut run = RunLoop {
        columns: &view,
        output,
        names,
        schema_names: schema.names.clone(),
        inputs: spec.input_names().len(),
        time_cell,
        timed: args.time.is_some() || args.clock == super::ClockArg::Wall,
        unit,
        form: form.or(feed.live.form()),
        key_input: args.key.as_deref(),
        streaming,
        malformed: args.on_malformed.into(),
        counts: Counts::default(),
        clashes: 0,
        ticks: 0,
        periods: periods.len(),
        notify,
        on_reset,
        replaying: replay_name,
        every_key_ticks: args.clock == super::ClockArg::Wall,
        checkpoints,
        merge_options: checkpoint::merge_options(args),
        samples: Vec::new(),
    };
    // The summary's clock starts with the run.
    let tally = ops::Tally::new(ops::Progress::new(true, None));
    let result = run
        .go(&mut feed, &mut runner, writer.as_mut(), &mut alerts)
        .map(super::ended);
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
    report(args, (&run, &feed), tally, &runner, &alerts);
    super::fail_on_trigger(args, status, alerts.fired())
}

pub(super) use crate::pipeline::run_loop::Record;

/// What a merged run refuses of its options (`replaying`: a log's run).
fn refused(args: &RunArgs, replaying: bool) -> Result<(), String> {
    let tcp = args.input.iter().any(|i| i.starts_with("tcp://"));
    if (args.checkpoint.is_some() || args.resume.is_some()) && (replaying || tcp) {
        return Err(no_checkpoints(args, replaying));
    }
    idle_timeout(args)?;
    // The wall clock moves rows' own times on only after a silence (a
    // replay takes its times from its log).
    if !replaying
        && args.clock == super::ClockArg::Wall
        && let (Some(field), None) = (&args.time, args.idle_timeout)
    {
        return Err(format!(
            "--clock wall with --time {field}: give --idle-timeout SECONDS, how long every trace may be silent before the time goes on with the wall clock from the last row's"
        ));
    }
    Ok(())
}

/// Goes on with the replay log a resumed run's checkpoint recorded: the
/// same `--record` must be given, and the log is cut back to its length.
fn resume_record(record: &mut Option<Record>, resumed: &checkpoint::Resumed) -> Result<(), String> {
    let path = resumed.path();
    match (record, resumed.clock().record.as_ref()) {
        (None, None) => Ok(()),
        (Some(rec), Some(info)) => rec
            .resume_at(info.len)
            .map_err(|m| format!("cannot resume from `{path}`: {m}")),
        (None, Some(info)) => Err(format!(
            "cannot resume from `{path}`: it was taken with `--record {}`; pass it again to continue that log",
            info.path
        )),
        (Some(_), None) => Err(format!(
            "cannot resume from `{path}`: it was taken without --record, so it cannot continue a replay log"
        )),
    }
}

/// Prints a merged run's `--summary` (`tally` began with the run) and
/// `--stats`.
fn report(
    args: &RunArgs,
    (run, feed): (&RunLoop<'_>, &Events),
    mut tally: ops::Tally,
    runner: &Runner,
    alerts: &Alerts,
) {
    if args.summary || args.fail_on_trigger {
        tally.add(run.counts);
        tally.add_read(feed.live.rows_read(), feed.live.skipped());
        let late = feed.live.late();
        let plural =
            |n: u64, one: &'static str, more: &'static str| if n == 1 { one } else { more };
        say(format_args!(
            "{}summary: {} sources merged; {} clash{}; {} late row{} re-stamped; {} tick{}\n",
            tally.summary(&runner.stats(), alerts.triggers()),
            run.names.len(),
            run.clashes,
            plural(run.clashes, "", "es"),
            late,
            plural(late, "", "s"),
            run.ticks,
            plural(run.ticks, "", "s"),
        ));
    }
    if args.stats {
        say(format_args!("{}", runner.stats()));
        if let Runner::Keyed(m) = runner {
            say(format_args!("keys: {} live\n", m.key_count()));
        }
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

pub(super) fn reset_policy(name: &str) -> ResetPolicy {
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
