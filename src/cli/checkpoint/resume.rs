//! Setting up a checkpointed run: the monitor, fresh or restored, each source where the
//! checkpoint left it (checked to be the same trace), the files kept exactly once cut back
//! to their recorded lengths, and every check of a checkpoint against the run's options.

use super::{
    Checkpointable, Checkpointer, Clock, FileInfo, Format, Info, InputInfo, Loaded, Output, Runner,
    Saved, Source, decode, digests, format_name, output_name, snapshot_error,
};
use crate::cli::RunArgs;
use crate::cli::{Exit, error};
use crate::keyed::KeyedMonitor;
use crate::monitor::{Monitor, Spec};
use crate::pipeline::{At, Where};
use crate::snapshot::SnapshotError;
use crate::trace::{
    self, OpenError, OutputFormat, OutputWriter, ReaderOptions, ResumeAt, RowReader, TraceFile,
    TraceFormat,
};
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, Write};

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
    let (loaded, saved) = match &args.resume {
        None => (None, None),
        Some(path) => {
            let file = File::open(path)
                .map_err(|e| fail(format!("cannot read checkpoint `{path}`: {e}")))?;
            let (loaded, saved) =
                decode(file).map_err(|e| fail(format!("cannot resume from `{path}`: {e}")))?;
            check_options(&loaded.info, args, format, output)
                .map_err(|e| fail(format!("cannot resume from `{path}`: {e}")))?;
            (Some((path.as_str(), loaded)), Some(saved))
        }
    };
    let mut monitor = build_monitor(args, spec, loaded.as_ref().map(|(p, l)| (*p, l)), saved)?;
    // A regular file this long is a hot run from its first row: `auto`
    // takes its last tier now, before the trace is opened and the reader's
    // and writer's threads start, rather than after its first rows
    // (`exec::TIER_UP_ROWS`), as a JIT that knows the profile would.
    // Measured on the 1M-row chain CSV: see the README's "Tier-up".
    if let Runner::Single(m) = &mut monitor
        && let Ok(file) = std::fs::metadata(&args.input[0])
        && file.is_file()
        && file.len() / (16 * (m.input_count() as u64 + 1)) >= HOT_FILE_ROWS
    {
        m.tier_up_now();
    }
    let resume_at = loaded.as_ref().and_then(|(_, l)| {
        l.info.inputs[0].file.as_ref().map(|f| ResumeAt {
            position: f.position(),
            rows: l.info.inputs[0].rows,
        })
    });
    // Undeclared `--pass` fields are read as untyped inputs after the
    // declared ones; the rows given to the monitor stop before them.
    let schema = crate::cli::ops::read_schema(args, spec);
    let width = schema.names.len();
    let live = crate::cli::live::options(args, None);
    let resume_live = crate::cli::live::Resume {
        token: loaded
            .as_ref()
            .and_then(|(_, l)| l.info.inputs[0].token.clone()),
        written: (loaded.as_ref()).and_then(|(_, l)| l.info.output.stream.as_ref().map(|s| s.1)),
    };
    let live_input = crate::cli::live::is_url(&args.input[0]);
    let opened = if live_input {
        // One reader: an input read as several sources is a merged run's.
        crate::cli::live::open_one(&args.input[0], &schema, &live, &resume_live).map_err(fail)?
    } else {
        trace::open_trace_at(&args.input[0], format, &schema, options, resume_at)
            .map_err(|e: OpenError| fail(e.to_string()))?
    };
    let mut reader = opened.reader;
    if let Some((path, l)) = &loaded {
        let at_position = match (&opened.file, &l.info.inputs[0].file) {
            // A live source goes on where the checkpoint left it (a Redis
            // Stream after its last entry; MQTT, which keeps no history,
            // from now).
            _ if live_input => true,
            (Some(trace), Some(f)) if !opened.streaming => {
                check_trace(trace, f, &args.input[0])
                    .map_err(|e| fail(format!("cannot resume from `{path}`: {e}")))?;
                true
            }
            _ => false,
        };
        if !at_position {
            let policy = Dropping {
                malformed: args.on_malformed != crate::cli::OnMalformed::Stop,
                key: match &monitor {
                    Runner::Keyed(m) => Some(m.key_index()),
                    Runner::Single(_) => None,
                },
            };
            skip_rows(reader.as_mut(), width, l.info.inputs[0].rows, policy).map_err(
                |e| match e {
                    Skip::Short(m) => fail(format!("cannot resume from `{path}`: {m}")),
                    Skip::Trace(e) => {
                        error(&e);
                        crate::cli::trace_exit(&e)
                    }
                },
            )?;
        }
    }
    let names = view.writer_names(&monitor.output_names(), output);
    let loaded_from = loaded.as_ref().map_or("", |(p, _)| *p);
    let key = args.key.as_deref();
    // A regular file's outputs are formatted and written by a thread of
    // their own, which overlaps them with reading and evaluating the next
    // rows; a stream's are written (and flushed) row by row on this one.
    let streaming = opened.streaming;
    let make = |names: Vec<String>, out: Box<dyn Write + Send>, continued: bool| {
        let writer = match key {
            Some(k) => trace::keyed_writer(output, names, k, out, continued),
            None if continued => trace::continue_writer(output, names, out),
            None => trace::make_writer(output, names, out),
        };
        if streaming {
            writer
        } else {
            trace::WriteBehind::spawn(writer)
        }
    };
    // (A live sink with `--output-file` is refused by `live::check_options`.)
    let (writer, output_file) = match &args.output_file {
        _ if let Some(url) = args.output.live() => {
            let writer =
                crate::cli::live::open_output(url, names, &live, &resume_live).map_err(fail)?;
            (writer, None)
        }
        None if streaming => (make(names, Box::new(io::stdout()), false), None),
        None => (make(names, trace::raw_stdout(), false), None),
        Some(out) => {
            let recorded = (loaded.as_ref())
                .and_then(|(_, l)| l.info.output.file.as_ref())
                .map(|f| f.len);
            let (file, sync) =
                open_kept(out, recorded, "output file", loaded_from).map_err(fail)?;
            let sink: Box<dyn Write + Send> = Box::new(file);
            let writer = make(names, sink, recorded.is_some_and(|len| len > 0));
            (writer, Some((out.clone(), sync)))
        }
    };
    let alerts_file = match args.alerts.as_deref() {
        None | Some("-") => None,
        Some(path) => {
            let recorded = (loaded.as_ref())
                .and_then(|(_, l)| l.info.output.alerts.as_ref())
                .map(|f| f.len);
            let (file, sync) =
                open_kept(path, recorded, "alerts file", loaded_from).map_err(fail)?;
            Some((file, (path.to_string(), sync)))
        }
    };
    let (alerts_file, alerts_sync) = match alerts_file {
        Some((file, sync)) => (Some(file), Some(sync)),
        None => (None, None),
    };
    let source = Source {
        path: crate::cli::live::redact(&args.input[0]),
        format,
        trace: opened.file,
    };
    let mut checkpoints = Checkpointer::new(args, vec![source], output, output_file, alerts_sync);
    // `--quiet` prints nothing, not even a CSV header; the output file (if
    // any) is still made, so that a checkpoint can record its length.
    let mut writer: Box<dyn OutputWriter> = if view.quiet {
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
        let monitor: &dyn Checkpointable = match &monitor {
            Runner::Single(m) => m.as_ref(),
            Runner::Keyed(m) => m.as_ref(),
        };
        let written = ck
            .write(monitor, reader.as_mut(), writer.as_mut(), None)
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

/// A merged run's checkpoint, read for `--resume` and checked against the
/// run's options (`load_merged`): the monitor's state, each source's
/// position, the clock and the files kept.
pub(in crate::cli) struct Resumed {
    path: String,
    loaded: Loaded,
    saved: Option<Saved>,
}

/// The options that shape a merged run's merge and scheduler, as one text a
/// checkpoint records and a resume compares.
pub(in crate::cli) fn merge_options(args: &RunArgs) -> String {
    let or_none = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
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
    )
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
    let fail = |message: String| {
        error(format!("cannot resume from `{path}`: {message}"));
        Exit::Failure
    };
    let file = File::open(path).map_err(|e| {
        error(format!("cannot read checkpoint `{path}`: {e}"));
        Exit::Failure
    })?;
    let (loaded, saved) = decode(file).map_err(fail)?;
    let Some(clock) = &loaded.info.clock else {
        return Err(fail(
            "it was taken on a run of one trace without --time; resume it with the options it was taken with".to_string(),
        ));
    };
    let now = merge_options(args);
    if clock.options != now {
        return Err(fail(format!(
            "it was taken with `{}`, and this run has `{now}`",
            clock.options
        )));
    }
    if clock.feed.sources.len() != loaded.info.inputs.len() {
        return Err(fail(
            "the checkpoint is corrupt: its clock and its inputs differ".to_string(),
        ));
    }
    check_outputs(&loaded.info, args, output).map_err(fail)?;
    Ok(Some(Resumed {
        path: path.clone(),
        loaded,
        saved: Some(saved),
    }))
}

impl Resumed {
    /// The merged run's clock.
    pub(in crate::cli) fn clock(&self) -> &Clock {
        self.loaded
            .info
            .clock
            .as_ref()
            .expect("checked by load_merged")
    }

    /// The checkpoint's path, for messages.
    pub(in crate::cli) fn path(&self) -> &str {
        &self.path
    }

    /// The monitor, restored from the checkpoint (once).
    pub(in crate::cli) fn monitor(&mut self, args: &RunArgs, spec: &Spec) -> Result<Runner, Exit> {
        let saved = self.saved.take().expect("the monitor is restored once");
        build_monitor(args, spec, Some((&self.path, &self.loaded)), Some(saved))
    }

    /// Checks that source `i` of this run is the checkpoint's (`name`,
    /// read as `format`; live or not), and gives where a regular file goes
    /// on from.
    pub(in crate::cli) fn source(
        &self,
        i: usize,
        name: &str,
        format: TraceFormat,
    ) -> Result<Option<ResumeAt>, Exit> {
        let fail = |message: String| {
            error(format!("cannot resume from `{}`: {message}", self.path));
            Exit::Failure
        };
        let inputs = &self.loaded.info.inputs;
        let Some(info) = inputs.get(i) else {
            return Err(fail(format!(
                "it was taken on {} source{}, and this run has more",
                inputs.len(),
                if inputs.len() == 1 { "" } else { "s" }
            )));
        };
        if info.path != crate::cli::live::redact(name) {
            return Err(fail(format!(
                "its source {} is `{}`, and this run's is `{name}`: give the inputs in the order the run was started with",
                i + 1,
                info.path
            )));
        }
        check_input(info, name, format).map_err(fail)?;
        // An `.input` reader numbers its steps on from the rows before its
        // position, which a time reset starts again: the rows of the epoch,
        // none when the reset (read with the row) is behind the position.
        let rows = match (format, self.clock().feed.sources.get(i)) {
            (TraceFormat::Tc, Some(m)) if m.then_reset => 0,
            (TraceFormat::Tc, Some(m)) => m.epoch_rows,
            _ => info.rows,
        };
        Ok(info.file.as_ref().map(|f| ResumeAt {
            position: f.position(),
            rows,
        }))
    }

    /// Where source `i` stood: the rows read from it, its position and its
    /// resume token.
    pub(in crate::cli) fn at(&self, i: usize) -> At {
        let info = &self.loaded.info.inputs[i];
        At {
            rows: info.rows,
            at: Where {
                position: info.file.as_ref().map(|f| f.position()),
                token: info.token.clone(),
            },
        }
    }

    /// The entries the run had written to its Redis output stream.
    pub(in crate::cli) fn written(&self) -> Option<u64> {
        self.loaded.info.output.stream.as_ref().map(|s| s.1)
    }

    /// The number of sources the checkpoint has.
    pub(in crate::cli) fn sources(&self) -> usize {
        self.loaded.info.inputs.len()
    }

    /// Source `i`'s live resume token (a Redis Stream's last entry taken).
    pub(in crate::cli) fn token(&self, i: usize) -> Option<String> {
        self.loaded.info.inputs.get(i)?.token.clone()
    }

    /// Puts source `i`'s reader where the checkpoint left it: a regular
    /// file opened at its position is checked to be the same trace; a
    /// stream (which cannot be repositioned) has the rows the run had read
    /// dropped; a live source goes on where its resume token says.
    pub(in crate::cli) fn reposition(
        &self,
        i: usize,
        name: &str,
        opened: &mut trace::OpenTrace,
        width: usize,
        malformed: bool,
    ) -> Result<(), Exit> {
        let info = &self.loaded.info.inputs[i];
        let fail = |message: String| {
            error(format!("cannot resume from `{}`: {message}", self.path));
            Exit::Failure
        };
        match (&opened.file, &info.file) {
            _ if crate::cli::live::is_url(name) => Ok(()),
            (Some(trace), Some(f)) if !opened.streaming => {
                check_trace(trace, f, name).map_err(fail)
            }
            _ => {
                let policy = Dropping {
                    malformed,
                    key: None,
                };
                skip_rows(opened.reader.as_mut(), width, info.rows, policy).map_err(|e| match e {
                    Skip::Short(m) => fail(format!("`{name}`: {m}")),
                    Skip::Trace(e) => {
                        error(&e);
                        crate::cli::trace_exit(&e)
                    }
                })
            }
        }
    }

    /// Opens the output file (or the alerts file, `what`) kept exactly once
    /// at `path`, cut back to the length the checkpoint recorded.
    pub(in crate::cli) fn kept(&self, path: &str, alerts: bool) -> Result<(File, File), Exit> {
        let out = &self.loaded.info.output;
        let (recorded, what) = match alerts {
            false => (out.file.as_ref(), "output file"),
            true => (out.alerts.as_ref(), "alerts file"),
        };
        open_kept(path, recorded.map(|f| f.len), what, &self.path).map_err(|m| {
            error(m);
            Exit::Failure
        })
    }
}

/// Opens a file a checkpointed run keeps exactly once, fresh (`what`, for
/// messages): created, with a second handle to sync it through.
pub(in crate::cli) fn created(path: &str, what: &str) -> Result<(File, File), Exit> {
    open_kept(path, None, what, "").map_err(|m| {
        error(m);
        Exit::Failure
    })
}

/// A fresh monitor, plain or keyed, as the run's options ask (the merged
/// run's; a resumed one comes from `prepare`).
pub(in crate::cli) fn new_monitor(args: &RunArgs, spec: &Spec) -> Result<Runner, Exit> {
    build_monitor(args, spec, None, None)
}

/// The monitor of the run: plain, or keyed by `--key`; fresh, or restored
/// from `saved`, the state of the checkpoint `loaded` from its path (every
/// mismatch is status 1).
fn build_monitor(
    args: &RunArgs,
    spec: &Spec,
    loaded: Option<(&str, &Loaded)>,
    saved: Option<Saved>,
) -> Result<Runner, Exit> {
    let fail = |message: String| {
        error(message);
        Exit::Failure
    };
    let refused = |path: &str, l: &Loaded, e: &dyn std::fmt::Display| {
        fail(format!(
            "cannot resume from `{path}` (taken with `{}`): {e}",
            l.info.spec
        ))
    };
    let Some(key) = &args.key else {
        let builder = Monitor::builder(spec)
            .tier(args.tier)
            .max_string_bytes(args.max_string_bytes);
        return Ok(Runner::Single(Box::new(match loaded.zip(saved) {
            None => builder.build(),
            Some(((path, l), saved)) => match saved {
                Saved::Single(snap) => builder
                    .restore(&snap)
                    .map_err(|e| refused(path, l, &e))?
                    .build(),
                Saved::Keyed(snap) => {
                    return Err(refused(
                        path,
                        l,
                        &format_args!(
                            "it was taken with `--key {}`; pass it again",
                            snap.key_input()
                        ),
                    ));
                }
            },
        })));
    };
    let mut builder = KeyedMonitor::builder(spec, key)
        .tier(args.tier)
        .max_string_bytes(args.max_string_bytes);
    if let Some(n) = args.max_keys {
        builder = builder.max_keys(n);
    }
    let builder = match loaded.zip(saved) {
        None => builder,
        Some(((path, l), saved)) => match saved {
            Saved::Keyed(reader) => builder.restore_from(reader),
            Saved::Single(_) => {
                return Err(refused(
                    path,
                    l,
                    &"it was taken without `--key`, and this run has `--key`",
                ));
            }
        },
    };
    builder
        .build()
        .map(|m| Runner::Keyed(Box::new(m)))
        .map_err(|e| match (e, loaded) {
            // Damage found while the keys are read from the file is the
            // checkpoint's, as damage found before.
            (
                crate::keyed::KeyedBuildError::Snapshot(
                    e @ (SnapshotError::Malformed(_) | SnapshotError::Io(_)),
                ),
                Some((path, _)),
            ) => fail(format!(
                "cannot resume from `{path}`: {}",
                snapshot_error(e)
            )),
            (crate::keyed::KeyedBuildError::Snapshot(e), Some((path, l))) => refused(path, l, &e),
            (e, _) => fail(e.to_string()),
        })
}

/// The options of a resumed run must be those the checkpoint was taken
/// with where they change what the rows mean or how the output continues.
fn check_options(
    info: &Info,
    args: &RunArgs,
    format: TraceFormat,
    output: OutputFormat,
) -> Result<(), String> {
    if info.clock.is_some() || info.inputs.len() != 1 {
        return Err(format!(
            "it was taken on a merged run of {} source{} (--time, several --input traces, or a specification with periodic streams); resume it with the same options",
            info.inputs.len(),
            if info.inputs.len() == 1 { "" } else { "s" }
        ));
    }
    let input = args.input.first().map_or("", String::as_str);
    check_input(&info.inputs[0], input, format)?;
    check_outputs(info, args, output)
}

/// The checks of one source of a resumed run against the checkpoint's:
/// the format, and a file for a file, a Redis stream for a Redis stream.
fn check_input(info: &InputInfo, input: &str, format: TraceFormat) -> Result<(), String> {
    let (was, now) = (info.format, Format::from(format));
    if was != now {
        return Err(format!(
            "it was taken on a {} trace, and this run reads {}",
            format_name(was),
            format_name(now)
        ));
    }
    match (&info.token, &info.file) {
        (Some(_), _) if !input.starts_with("redis://") => Err(format!(
            "it was taken on the Redis stream `{}`; pass it again with --input",
            info.path
        )),
        (_, Some(_)) if crate::cli::live::is_url(input) => Err(format!(
            "it was taken on the trace `{}`, and this run reads `{input}`",
            info.path
        )),
        _ => Ok(()),
    }
}

/// The checks of a resumed run's outputs against the checkpoint's: the
/// format, and each file (or Redis stream) it continues.
fn check_outputs(info: &Info, args: &RunArgs, output: OutputFormat) -> Result<(), String> {
    let (was, now) = (info.output.format, Output::from(output));
    if was != now {
        return Err(format!(
            "it was taken with `--output {}`, and this run has `--output {}`",
            output_name(was),
            output_name(now)
        ));
    }
    match (&info.output.stream, &args.output) {
        (Some((url, _)), crate::cli::OutputArg::Redis(now))
            if *url == crate::cli::live::redact(now) => {}
        (Some((url, _)), _) => {
            return Err(format!(
                "it was taken with `--output {url}`; pass it again to continue that stream"
            ));
        }
        (None, crate::cli::OutputArg::Redis(_)) => {
            return Err(
                "it was taken with its outputs elsewhere, so it cannot continue a Redis stream"
                    .to_string(),
            );
        }
        _ => {}
    }
    let alerts_file = args.alerts.as_deref().filter(|p| *p != "-");
    match (&info.output.alerts, alerts_file) {
        (Some(f), None) => {
            return Err(format!(
                "it was taken with `--alerts {}`; pass it again to continue that file",
                f.path
            ));
        }
        (None, Some(_)) => {
            return Err(
                "it was taken without an alerts file, so it cannot continue one (its alerts so far are not in it)"
                    .to_string(),
            );
        }
        _ => {}
    }
    match (&info.output.file, &args.output_file) {
        (Some(f), None) => Err(format!(
            "it was taken with `--output-file {}`; pass it again to continue that file",
            f.path
        )),
        (None, Some(_)) => Err(
            "it was taken with the outputs on standard output, so it cannot continue an output file"
                .to_string(),
        ),
        _ => Ok(()),
    }
}

/// Checks that the trace is the one the checkpoint was taken on, as far as
/// the bytes before the position go: at least as long, and the same bytes
/// at its start and before the position (a trace that grew since is fine).
fn check_trace(trace: &TraceFile, f: &FileInfo, path: &str) -> Result<(), String> {
    let read = |e: io::Error| format!("cannot read the input `{path}`: {e}");
    let len = trace.len().map_err(read)?;
    if len < f.offset {
        return Err(format!(
            "the input `{path}` has {len} bytes, fewer than the {} it had been read to: it is not the trace the checkpoint was taken on",
            f.offset
        ));
    }
    let (head, tail) = digests(trace, f.offset).map_err(read)?;
    if head != f.head || tail != f.tail {
        return Err(format!(
            "the input `{path}` differs from the trace the checkpoint was taken on (its first {} bytes read so far are not the same)",
            f.offset
        ));
    }
    Ok(())
}

/// Why rows could not be skipped.
enum Skip {
    /// The input has fewer rows than the checkpoint consumed.
    Short(String),
    Trace(trace::TraceError),
}

/// Which rows of a resumed stream were not steps of the checkpointed run
/// (`--on-malformed skip|warn`), so that they are not counted when dropping
/// the rows the checkpoint consumed.
#[derive(Clone, Copy)]
struct Dropping {
    /// Malformed rows the reader can go on after were skipped.
    malformed: bool,
    /// In a keyed run, the key's cell: a row without it was skipped.
    key: Option<usize>,
}

/// Reads and drops the first `rows` rows of a stream (which cannot be
/// repositioned): a resumed stream is the same trace from its start.
fn skip_rows(
    reader: &mut dyn RowReader,
    width: usize,
    rows: u64,
    policy: Dropping,
) -> Result<(), Skip> {
    let mut row = vec![None; width];
    let mut k = 0;
    while k < rows {
        match reader.next_row(&mut row) {
            Ok(true) => {
                let keyless = policy.key.is_some_and(|i| row[i].is_none());
                if !(policy.malformed && keyless) {
                    k += 1;
                }
            }
            Ok(false) => {
                return Err(Skip::Short(format!(
                    "the input ended after {k} rows, but the checkpoint was taken after {rows}"
                )));
            }
            Err(e)
                if policy.malformed
                    && e.kind == trace::TraceErrorKind::Malformed
                    && reader.can_continue() => {}
            Err(e) => return Err(Skip::Trace(e)),
        }
    }
    Ok(())
}

/// Opens a file a checkpointed run keeps exactly once (`what`: the output
/// file, the alerts file): created, or, with the length a checkpoint
/// (loaded from `loaded_from`) `recorded`, cut back to it for appending. Also
/// gives a second handle, for a checkpoint to sync it through.
fn open_kept(
    path: &str,
    recorded: Option<u64>,
    what: &str,
    loaded_from: &str,
) -> Result<(File, File), String> {
    let file = match recorded {
        None => {
            File::create(path).map_err(|e| format!("cannot create the {what} `{path}`: {e}"))?
        }
        Some(len) => reopen_output(path, len, what)
            .map_err(|e| format!("cannot resume from `{loaded_from}`: {e}"))?,
    };
    let sync = file
        .try_clone()
        .map_err(|e| format!("cannot open the {what} `{path}`: {e}"))?;
    Ok((file, sync))
}

/// Opens the output file of a resumed run (or another file it writes,
/// named `what` in messages), cut back to the length the checkpoint
/// recorded, for appending.
pub(in crate::cli) fn reopen_output(path: &str, len: u64, what: &str) -> Result<File, String> {
    let mut f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| format!("cannot open the {what} `{path}`: {e}"))?;
    let now = f
        .metadata()
        .map_err(|e| format!("cannot open the {what} `{path}`: {e}"))?
        .len();
    if now < len {
        return Err(format!(
            "the {what} `{path}` has {now} bytes, fewer than the {len} the checkpoint recorded"
        ));
    }
    f.set_len(len)
        .and_then(|()| f.seek(io::SeekFrom::Start(len)))
        .map_err(|e| format!("cannot truncate the {what} `{path}`: {e}"))?;
    Ok(f)
}
