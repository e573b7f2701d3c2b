//! `vigil run`'s checkpoints (`--checkpoint FILE --checkpoint-every N`, `--resume FILE`,
//! `--output-file FILE`) set up from its options: the monitor, fresh or restored, each source
//! where the checkpoint left it, the files kept exactly once. The checkpoint itself (its file,
//! its checks, the writer) is the library's [`crate::pipeline::checkpoint`].

use super::RunArgs;
use crate::cli::{Exit, error};
use crate::keyed::KeyedMonitor;
use crate::monitor::{Monitor, Spec};
use crate::pipeline::At;
pub(super) use crate::pipeline::Monitors as Runner;
pub(super) use crate::pipeline::checkpoint::*;
use crate::pipeline::outputs::{self, OutputOptions, Outputs};
use crate::trace::{
    self, OpenError, OutputFormat, OutputWriter, ReaderOptions, RowReader, TraceFormat,
};
use std::fs::File;

/// What `vigil run` runs once its options are settled: the monitor (fresh,
/// or restored from a checkpoint), the trace's reader (past the rows a
/// checkpoint consumed), the writer, and the checkpointer if asked for.
pub(in crate::cli) struct Prepared {
    pub(in crate::cli) monitor: Runner,
    pub(in crate::cli) reader: Box<dyn RowReader>,
    pub(in crate::cli) streaming: bool,
    pub(in crate::cli) writer: Box<dyn OutputWriter>,
    pub(in crate::cli) checkpoints: Option<Checkpointer>,
    /// The `--alerts` file (a path, not `-`), created, or cut back to the
    /// length the checkpoint recorded and appended to.
    pub(in crate::cli) alerts: Option<File>,
}

/// Sets up a run: resumes from `--resume` if given (every check of the
/// checkpoint against this run is an error with exit status 1), opens the
/// trace and the output, and prepares checkpoints.
/// The rows from which `vigil run` treats a regular trace file's run as hot
/// from its first row (see `prepare`), counted as the file's bytes over 16
/// bytes for each input and one more: a guess that undercounts the rows of
/// most traces, so that a file is called hot only when it surely is.
const HOT_FILE_ROWS: u64 = 4096;

pub(in crate::cli) fn prepare(
    args: &RunArgs,
    spec: &Spec,
    format: TraceFormat,
    output: OutputFormat,
    options: ReaderOptions,
    view: &crate::cli::ops::View,
) -> Result<Prepared, Exit> {
    let fail = |message: String| {
        error(message);
        Exit::Failure
    };
    let mut loaded = match &args.resume {
        None => None,
        Some(path) => {
            let loaded = Checkpoint::read(path).map_err(fail)?;
            let input = args.input.first().map_or("", String::as_str);
            loaded.check_plain(input, format).map_err(fail)?;
            check_outputs(&loaded, args, output).map_err(fail)?;
            Some(loaded)
        }
    };
    let mut monitor = build_monitor(args, spec, loaded.as_mut())?;
    // A regular file this long is a hot run from its first row: `auto`
    // takes its last tier now, before the trace is opened and the reader's
    // and writer's threads start, rather than after its first rows
    // (`exec::TIER_UP_ROWS`), as a JIT that knows the profile would.
    // Measured on the 1M-row chain CSV: see docs/benchmark-history.md, "Tier-up".
    if let Runner::Single(m) = &mut monitor
        && let Ok(file) = std::fs::metadata(&args.input[0])
        && file.is_file()
        && file.len() / (16 * (m.input_count() as u64 + 1)) >= HOT_FILE_ROWS
    {
        m.tier_up_now();
    }
    let resume_at = loaded.as_ref().and_then(|l| l.resume_at(0, format));
    // Undeclared `--pass` fields are read as untyped inputs after the
    // declared ones; the rows given to the monitor stop before them.
    let schema = crate::cli::ops::read_schema(args, spec);
    let width = schema.names.len();
    let live = crate::cli::live::options(args, None);
    let resume_live = crate::cli::live::Resume {
        token: loaded.as_ref().and_then(|l| l.token(0)),
        written: None,
    };
    let live_input = crate::cli::live::is_url(&args.input[0]);
    let opened = if live_input {
        // One reader: an input read as several sources is a merged run's.
        crate::cli::live::open_one(&args.input[0], &schema, &live, &resume_live).map_err(fail)?
    } else {
        trace::open_trace_at(&args.input[0], format, &schema, options, resume_at)
            .map_err(|e: OpenError| fail(e.to_string()))?
    };
    let mut opened = opened;
    if let Some(l) = &loaded {
        let dropping = Dropping {
            malformed: args.on_malformed != crate::cli::OnMalformed::Stop,
            key: match &monitor {
                Runner::Keyed(m) => Some(m.key_index()),
                Runner::Single(_) => None,
            },
        };
        l.reposition(0, &args.input[0], &mut opened, width, dropping)
            .map_err(repositioned)?;
    }
    let mut reader = opened.reader;
    let names = view.writer_names(&monitor.output_names(), output);
    // (A live sink with `--output-file` is refused by `live::check_options`.)
    let asked = output_options(args, output, opened.streaming, &live);
    let opened_outputs = outputs::open(&asked, names, loaded.as_ref()).map_err(fail)?;
    let Outputs {
        writer,
        output_sync: output_file,
        alerts_file,
        alerts_sync,
    } = opened_outputs;
    let source = Source {
        path: crate::cli::live::redact(&args.input[0]),
        format,
        trace: opened.file,
    };
    let mut checkpoints = checkpointer(args, vec![source], output, output_file, alerts_sync);
    // `--quiet` prints nothing, not even a CSV header; the output file (if
    // any) is still made, so that a checkpoint can record its length.
    let mut writer: Box<dyn OutputWriter> = if view.quiet() {
        Box::new(crate::cli::ops::NullWriter)
    } else {
        writer
    };
    // A regular file is read and parsed ahead on a thread of its own, which
    // overlaps parsing with evaluating; a stream is read row by row, as the
    // rows arrive.
    if !opened.streaming {
        reader = trace::ReadAhead::spawn(reader, width, &args.input[0]);
    }
    // A fresh run to a Redis stream checkpoints before its first row: a run
    // killed before its first periodic checkpoint may have appended entries
    // already, and only a resume (which reads the stream's last `seq`)
    // writes none of them again.
    if let Some(ck) = &mut checkpoints
        && loaded.is_none()
        && matches!(args.output, crate::cli::OutputArg::Redis(_))
    {
        let written = ck
            .write(&monitor, reader.as_mut(), writer.as_mut(), None)
            .map_err(|e| fail(format!("cannot write output: {e}")))?;
        written.map_err(fail)?;
    }
    Ok(Prepared {
        monitor,
        reader,
        streaming: opened.streaming,
        writer,
        checkpoints,
        alerts: alerts_file,
    })
}

/// Where `vigil run`'s outputs go, from its options (`streaming`: a source
/// is a stream; a resumed run's files are kept exactly once too).
pub(in crate::cli) fn output_options<'a>(
    args: &'a RunArgs,
    output: OutputFormat,
    streaming: bool,
    live: &'a crate::live::Options,
) -> OutputOptions<'a> {
    OutputOptions {
        format: output,
        file: args.output_file.as_deref(),
        live: args.output.live(),
        live_options: live,
        key: args.key.as_deref(),
        alerts: args.alerts.as_deref(),
        checkpointed: args.checkpoint.is_some(),
        streaming,
    }
}

/// The options that shape a merged run's merge and scheduler, as one text a
/// checkpoint records and a resume compares.
pub(in crate::cli) fn merge_options(args: &RunArgs) -> String {
    let or_none = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
    // The wall clock is said only when used, so that the text of a run on
    // the data's time is what it was before `--clock`.
    let clock = match args.clock {
        super::ClockArg::Data => "",
        super::ClockArg::Wall => " --clock wall",
    };
    format!(
        "--time {} --time-unit {} --lateness {} --start {} --max-gap {} --on-gap {} --on-reset {} --max-ticks {}",
        or_none(args.time.clone()),
        args.time_unit,
        or_none(args.lateness.map(|l| l.to_string())),
        or_none(args.start.clone()),
        or_none(args.max_gap.map(|g| g.to_string())),
        or_none(args.on_gap.clone()),
        or_none(args.on_reset.clone()),
        args.max_ticks,
    ) + clock
}

/// The checkpointer of a run with `--checkpoint` (`None` without): of its
/// `sources`, with the output file and the alerts file it keeps exactly
/// once.
pub(super) fn checkpointer(
    args: &RunArgs,
    sources: Vec<Source>,
    output: OutputFormat,
    output_file: Option<(String, File)>,
    alerts: Option<(String, File)>,
) -> Option<Checkpointer> {
    let options = CheckpointOptions {
        path: args.checkpoint.clone()?,
        every: args.checkpoint_every,
        spec: args.spec.clone(),
        sink: match &args.output {
            super::OutputArg::Redis(url) => Some(crate::live::redact(url)),
            _ => None,
        },
    };
    Some(Checkpointer::new(
        options,
        sources,
        output,
        output_file,
        alerts,
    ))
}

/// The outputs of the run, as a checkpoint is checked against them.
fn outputs_asked(args: &RunArgs, output: OutputFormat) -> OutputsAsked<'static> {
    OutputsAsked {
        format: output,
        redis: None,
        output_file: args.output_file.is_some(),
        alerts_file: args.alerts.as_deref().is_some_and(|p| p != "-"),
    }
}

/// Checks a checkpoint's outputs against the run's (`--output`,
/// `--output-file`, `--alerts`).
fn check_outputs(loaded: &Checkpoint, args: &RunArgs, output: OutputFormat) -> Result<(), String> {
    let redis = match &args.output {
        super::OutputArg::Redis(url) => Some(crate::live::redact(url)),
        _ => None,
    };
    loaded.check_outputs(&OutputsAsked {
        redis: redis.as_deref(),
        ..outputs_asked(args, output)
    })
}

/// The exit of a source that could not be put back where a checkpoint left
/// it (the message said).
fn repositioned(e: Reposition) -> Exit {
    match e {
        Reposition::Refused(m) => {
            error(m);
            Exit::Failure
        }
        Reposition::Trace(e) => {
            error(&e);
            crate::cli::trace_exit(&e)
        }
    }
}

/// A merged run's checkpoint, read for `--resume` and checked against the
/// run's options (`load_merged`): the monitor's state, each source's
/// position, the clock and the files kept. Its methods say what fails (on
/// standard error) and give the exit status.
pub(in crate::cli) struct Resumed {
    loaded: Checkpoint,
}

/// Says `message` and gives the exit status of a failed run.
fn failed(message: String) -> Exit {
    error(message);
    Exit::Failure
}

/// Reads `--resume`'s checkpoint for a merged run (`None` without one):
/// it must be a merged run's, of as many sources, with the same merge
/// options and outputs.
pub(in crate::cli) fn load_merged(
    args: &RunArgs,
    output: OutputFormat,
) -> Result<Option<Resumed>, Exit> {
    let Some(path) = &args.resume else {
        return Ok(None);
    };
    let loaded = Checkpoint::read(path).map_err(failed)?;
    loaded.check_merged(&merge_options(args)).map_err(failed)?;
    check_outputs(&loaded, args, output).map_err(failed)?;
    Ok(Some(Resumed { loaded }))
}

impl Resumed {
    /// The merged run's clock.
    pub(in crate::cli) fn clock(&self) -> &Clock {
        self.loaded.clock().expect("checked by load_merged")
    }

    /// The checkpoint as the library reads it.
    pub(in crate::cli) fn loaded(&self) -> &Checkpoint {
        &self.loaded
    }

    /// The checkpoint's path, for messages.
    pub(in crate::cli) fn path(&self) -> &str {
        self.loaded.path()
    }

    /// The monitor, restored from the checkpoint (once).
    pub(in crate::cli) fn monitor(&mut self, args: &RunArgs, spec: &Spec) -> Result<Runner, Exit> {
        build_monitor(args, spec, Some(&mut self.loaded))
    }

    /// Where source `i` stood: the rows read from it, its position and its
    /// resume token.
    pub(in crate::cli) fn at(&self, i: usize) -> At {
        self.loaded.at(i)
    }

    /// The number of sources the checkpoint has.
    pub(in crate::cli) fn sources(&self) -> usize {
        self.loaded.sources()
    }
}

/// A fresh monitor, plain or keyed, as the run's options ask (the merged
/// run's; a resumed one comes from `prepare`).
pub(in crate::cli) fn new_monitor(args: &RunArgs, spec: &Spec) -> Result<Runner, Exit> {
    build_monitor(args, spec, None)
}

/// The monitor of the run: plain, or keyed by `--key`; fresh, or restored
/// from the checkpoint `loaded` (every mismatch is status 1).
fn build_monitor(
    args: &RunArgs,
    spec: &Spec,
    loaded: Option<&mut Checkpoint>,
) -> Result<Runner, Exit> {
    let Some(key) = &args.key else {
        let builder = Monitor::builder(spec)
            .tier(args.tier)
            .max_string_bytes(args.max_string_bytes);
        let monitor = match loaded {
            None => builder.build(),
            Some(l) => l.restore(builder).map_err(failed)?,
        };
        return Ok(Runner::Single(Box::new(monitor)));
    };
    let mut builder = KeyedMonitor::builder(spec, key)
        .tier(args.tier)
        .max_string_bytes(args.max_string_bytes);
    if let Some(n) = args.max_keys {
        builder = builder.max_keys(n);
    }
    let monitor = match loaded {
        None => builder.build().map_err(|e| failed(e.to_string()))?,
        Some(l) => l.restore_keyed(builder).map_err(failed)?,
    };
    Ok(Runner::Keyed(Box::new(monitor)))
}
