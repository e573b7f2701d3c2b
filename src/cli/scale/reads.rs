//! How a scaled run reads: process 0's feed of every `--input`, or regular files read in
//! parallel by process 0's workers (one in parts, several each whole, with `--time` each through
//! a feed of its own), set up from the arguments.

use super::{Refused, fail};
use crate::cli::RunArgs;
use crate::cli::ops::View;
use crate::monitor::Spec;
use crate::pipeline::checkpoint::{self, barrier};
use crate::pipeline::{self, Feed};
use crate::scale::source::{AtBarriers, Reading, Source, StopAt, Tally, resume_record};
use crate::scale::timed_inputs::TimedInputsReader;
use crate::scale::{chunks, inputs, parts};
use crate::time::{TimeForm, TimeUnit};
use crate::trace::{self, ReaderOptions, TraceFormat};
use std::path::PathBuf;
use std::sync::Arc;

/// How process 0's workers read a scaled run's input in parallel.
pub(super) enum Parallel {
    /// One regular file split into parts.
    Parts(parts::Parts),
    /// Several regular files, each read whole by one worker.
    Inputs(inputs::Inputs),
    /// Several regular files with a time field, each read by one worker through a feed of its
    /// own.
    Timed(TimedInputs),
    /// One stream (standard input, a FIFO) cut into chunks, each worker's taken by its reader.
    Stream(StreamChunks),
}

/// The chunks of `Parallel::Stream`: each worker's, and how many the splitter cut.
pub(super) struct StreamChunks {
    chunks: Vec<Option<chunks::Chunks>>,
    pub(super) cut: Arc<std::sync::atomic::AtomicU64>,
}

/// The inputs of `Parallel::Timed`: each input's reader, taken by the worker that reads it.
pub(super) struct TimedInputs {
    sources: Vec<Option<Source>>,
    stop_at: Arc<StopAt>,
    pub(super) count: usize,
}

impl TimedInputs {
    /// Worker `worker`'s of `threads`: inputs `worker`, `worker + threads`, …
    fn reader(&mut self, worker: usize, threads: usize) -> TimedInputsReader {
        let mine = (worker..self.sources.len())
            .step_by(threads)
            .filter_map(|s| self.sources[s].take().map(|source| (s, source)))
            .collect();
        TimedInputsReader::new(mine, Arc::clone(&self.stop_at))
    }
}

impl Parallel {
    /// Process 0's `threads` workers' readers (a worker with nothing to read gets a reader
    /// that ends at once): each with its own counts, sharing `part`'s stop.
    pub(super) fn readers(
        &mut self,
        threads: usize,
        part: &parts::PartSetup,
        notify: &crate::notice::Notify,
    ) -> Vec<Box<dyn Reading>> {
        (0..threads)
            .map(|w| {
                let setup = parts::PartSetup {
                    schema: part.schema.clone(),
                    tally: Tally::new(part.tally.malformed, notify.clone()),
                    key_name: part.key_name.clone(),
                    stop_at: Arc::clone(&part.stop_at),
                    ..*part
                };
                let reader: Box<dyn Reading> = match self {
                    Parallel::Parts(p) => Box::new(p.reader(w, threads, setup)),
                    Parallel::Inputs(i) => Box::new(i.reader(w, threads, setup)),
                    Parallel::Timed(t) => Box::new(t.reader(w, threads)),
                    Parallel::Stream(s) => match s.chunks.get_mut(w).and_then(Option::take) {
                        Some(c) => Box::new(parts::PartReader::of_stream(c, setup)),
                        None => unreachable!("one reader per worker, each taken once"),
                    },
                };
                reader
            })
            .collect()
    }

    /// Whether the input is a stream, whose outputs are written as they complete.
    pub(super) fn streaming(&self) -> bool {
        matches!(self, Parallel::Stream(_))
    }
}

/// How a scaled run reads its input: in parallel when the options allow it and every input
/// is a regular file of JSON lines or CSV — one without a time field split into parts, several
/// each read by a worker (with a time field, each through a feed of its own) — or `None`:
/// process 0's feed reads them. Checkpoints and a replay log (both record one reader's
/// position) read them through the feed, and so does one file with a time field (a late row's
/// re-stamping depends on every row before it).
pub(super) fn parallel_plan(
    args: &RunArgs,
    spec: &Spec,
    threads: usize,
    (setup, stop_at): (&FeedSetup<'_>, &Arc<StopAt>),
) -> Result<Option<Parallel>, Refused> {
    let serial =
        threads < 2 || args.checkpoint.is_some() || args.resume.is_some() || args.record.is_some();
    if serial || args.input.is_empty() {
        return Ok(None);
    }
    if let Some(stream) = stream_plan(args, threads)? {
        return Ok(Some(Parallel::Stream(stream)));
    }
    let mut files = Vec::with_capacity(args.input.len());
    for path in &args.input {
        let regular = path != "-"
            && !crate::cli::live::is_url(path)
            && !path.starts_with("tcp://")
            && std::fs::metadata(path).is_ok_and(|m| m.is_file());
        // (A format not told here is the serial set-up's to report.)
        match pipeline::inputs::format_of(path, args.format.forced()) {
            Ok(format @ (TraceFormat::Csv | TraceFormat::Jsonl)) if regular => {
                files.push((path.clone(), format));
            }
            _ => return Ok(None),
        }
    }
    let options = ReaderOptions {
        max_step_gap: args.max_step_gap,
    };
    match (args.time.is_some(), files.as_slice()) {
        (true, [_]) => Ok(None),
        (true, _) => {
            if !inputs::same_time_form(&files, setup.schema, setup.time_cell, setup.unit) {
                return Ok(None);
            }
            // A run says its first late rows, as many as a feed of every input says (its
            // count is in the summary): the inputs' feeds share that budget.
            let notify = crate::cli::timed::notices();
            let said = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let late_said: crate::notice::Notify = Arc::new(move |n| {
                let late = matches!(n, crate::notice::Notice::Late { .. });
                if !late
                    || said.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                        < pipeline::LATE_ROWS_SAID
                {
                    notify(n);
                }
            });
            let mut sources = Vec::with_capacity(files.len());
            for file in &files {
                sources.push(Some(input_source(args, spec, (setup, &late_said), file)?));
            }
            Ok(Some(Parallel::Timed(TimedInputs {
                count: sources.len(),
                sources,
                stop_at: Arc::clone(stop_at),
            })))
        }
        (false, [(path, format)]) => Ok(parts::plan(path, *format, threads)
            .map_err(fail)?
            .map(Parallel::Parts)),
        (false, _) => {
            let opened = inputs::Inputs::open(&files, setup.schema, options).map_err(fail)?;
            Ok(Some(Parallel::Inputs(opened)))
        }
    }
}

/// One stream without a time field (standard input or a FIFO, JSON lines or CSV) cut into
/// chunks for the workers (`scale::chunks`), or `None`.
fn stream_plan(args: &RunArgs, threads: usize) -> Result<Option<StreamChunks>, Refused> {
    let [path] = args.input.as_slice() else {
        return Ok(None);
    };
    if args.time.is_some() || crate::cli::live::is_url(path) || path.starts_with("tcp://") {
        return Ok(None);
    }
    // (A format not told here is the serial set-up's to report.)
    let Ok(format) = pipeline::inputs::format_of(path, args.format.forced()) else {
        return Ok(None);
    };
    let Some(stream) = chunks::open(path, format).map_err(fail)? else {
        return Ok(None);
    };
    let cut = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let chunks = stream.split(threads, Arc::clone(&cut)).map_err(fail)?;
    Ok(Some(StreamChunks {
        chunks: chunks.into_iter().map(Some).collect(),
        cut,
    }))
}

/// What the set-up of process 0's feed needs to know.
pub(super) struct FeedSetup<'a> {
    pub(super) key: &'a str,
    pub(super) key_index: usize,
    pub(super) inputs: usize,
    pub(super) view: &'a View,
    pub(super) unit: TimeUnit,
    pub(super) schema: &'a crate::trace::InputSchema,
    pub(super) time_cell: Option<usize>,
    pub(super) ticking: crate::time::Ticking,
    pub(super) checkpoint: Option<&'a PathBuf>,
    pub(super) resumed: Option<&'a barrier::Resume>,
    pub(super) at_barriers: &'a AtBarriers,
}

/// How process 0's feed (or an input's own, read in parallel) stamps and merges a keyed run's
/// rows: the options' time field, lateness and malformed-row policy, each row a step of its own.
fn feed_options(
    args: &RunArgs,
    spec: &Spec,
    f: &FeedSetup<'_>,
) -> Result<pipeline::FeedOptions, Refused> {
    let unit = f.unit;
    let lateness = match args.lateness.map(|l| (l, unit.duration(l))) {
        None => 0,
        Some((_, Some(ns))) => ns,
        Some((l, None)) => return Err(fail(format!("--lateness {l}: not a duration"))),
    };
    Ok(pipeline::FeedOptions {
        names: f.schema.names.clone(),
        time_cell: f.time_cell,
        unit,
        lateness,
        // A keyed row is one key's event: rows at one time stay apart.
        separate: true,
        malformed: args.on_malformed.into(),
        idle_timeout: args.idle_timeout.map(std::time::Duration::from_secs_f64),
        periods: Vec::new(),
        start: None,
        max_gap: None,
        on_gap: f.ticking.on_gap,
        max_ticks: args.max_ticks,
        on_reset: (spec.checked().on_reset).unwrap_or(crate::lang::ast::ResetPolicy::Cancel),
        // A rejected row is located by its source's position.
        positions: true,
        wall_clock: false,
    })
}

/// The reader of one input with a time field through a feed of its own (`Parallel::Timed`).
fn input_source(
    args: &RunArgs,
    spec: &Spec,
    (f, late_said): (&FeedSetup<'_>, &crate::notice::Notify),
    (path, format): &(String, TraceFormat),
) -> Result<Source, Refused> {
    let mut feed = Feed::new(feed_options(args, spec, f)?, late_said.clone());
    let options = ReaderOptions {
        max_step_gap: args.max_step_gap,
    };
    let opened =
        trace::open_trace(path, *format, f.schema, options).map_err(|e| fail(e.to_string()))?;
    feed.add_reader(path.clone(), opened.reader, *format);
    let tally = Tally::new(args.on_malformed.into(), crate::cli::timed::notices());
    let key = (f.key_index, f.key.to_string());
    Ok(Source::new(feed, tally, key, (f.inputs, f.view.extra())))
}

/// Process 0's feed of every `--input` (files, standard input, live sources, a `tcp://`
/// listener), stamped and merged, as the scaled run's reader, with its checkpoint barriers,
/// replay log and resume position; whether the input is a stream; and the sources as its
/// checkpoints record them.
pub(super) fn feed_source(
    args: &RunArgs,
    spec: &Spec,
    f: &FeedSetup<'_>,
) -> Result<(Source, bool, Vec<checkpoint::Source>), Refused> {
    let FeedSetup {
        key,
        key_index,
        inputs,
        view,
        unit,
        schema,
        time_cell,
        ticking,
        checkpoint,
        resumed,
        at_barriers,
    } = *f;
    let crate::time::Ticking {
        start: origin,
        max_gap,
        ..
    } = ticking;
    if args.input.is_empty() {
        return Err(fail(
            "the trace is missing: pass --input FILE (or - for standard input)".into(),
        ));
    }
    // A resumed run puts its sources back where the commit record says
    // they stood (`positioned`), as a single-process run's resume does: a
    // regular file at its position (checked to be the same trace), a Redis
    // Stream (or consumer group) after its last entry taken, standard input
    // with the rows taken dropped. An MQTT broker keeps no history: what it
    // delivered before the checkpoint is not delivered again (and what was
    // published while the run was down is lost).
    //
    // A commit record without positions (an earlier vigil's) is resumed as
    // it was then: the sources read again from their start, the rows
    // before the checkpoint skipped and their digest checked; untimed rows
    // of a source that cannot be read again are numbered on from it.
    let positioned = resumed.filter(|r| r.record.clock().is_some());
    let merge_options = crate::cli::checkpoint::merge_options(args);
    // Checked before any source is opened; the feed resumes from it below.
    let clock = match positioned {
        Some(r) => Some(r.record.check_commit(&merge_options).map_err(fail)?),
        None => None,
    };
    let replayable = !args.input.iter().any(|i| i.starts_with("mqtt://"));
    let feed_options = feed_options(args, spec, f)?;
    let (lateness, feed_on_gap, feed_on_reset) = (
        feed_options.lateness,
        feed_options.on_gap,
        feed_options.on_reset,
    );
    let mut feed = Feed::new(feed_options, crate::cli::timed::notices());
    let live = crate::cli::live::options(args, time_cell);
    let input_options = pipeline::inputs::InputOptions {
        schema,
        reader: ReaderOptions {
            max_step_gap: args.max_step_gap,
        },
        format: args.format.forced(),
        malformed: args.on_malformed.into(),
        live: &live,
        // A row without its key was skipped by the source (`scale::source`).
        key: Some(key_index),
    };
    let opened = pipeline::inputs::open(&args.input, &input_options, positioned.map(|r| &r.record))
        .map_err(|refused| (refused.message, crate::cli::exit_of(refused.ended)))?;
    let notify = crate::cli::timed::notices();
    let (kept, streaming) = opened.join(&mut feed, schema, args.on_malformed.into(), &notify);
    let every = checkpoint.as_ref().map(|_| match time_cell {
        None => args.checkpoint_every,
        Some(_) => (args.checkpoint_every as i64)
            .saturating_mul(unit.nanos())
            .max(1) as u64,
    });
    if let (Some(r), Some(clock)) = (positioned, clock) {
        let at: Vec<pipeline::At> = (0..kept.len()).map(|i| r.record.at(i)).collect();
        feed.resume(&clock.feed, &at);
    }
    let skip_before = resumed.as_ref().map_or(0, |r| r.barrier.time);
    // Untimed rows are numbered on from the checkpoint when nothing before
    // it is read again; those of a source read again from its start are
    // numbered from 0 and skipped up to it.
    let (first_seq, skip_before) = match (positioned.is_some() || !replayable, time_cell) {
        (true, None) => (skip_before, 0),
        (true, Some(_)) => (0, 0),
        (false, _) => (0, skip_before),
    };
    let mut record = args.record.as_ref().map(|path| {
        let header = crate::cli::log::Header {
            fingerprint: spec.fingerprint().to_string(),
            sources: feed.source_names().map(String::from).collect(),
            fields: schema.names.clone(),
            time: args.time.clone(),
            unit,
            form: TimeForm::Number(unit),
            key: args.key.clone(),
            start: origin,
            max_gap,
            on_gap: crate::cli::timed::gap_name(feed_on_gap).to_string(),
            max_ticks: args.max_ticks,
            on_reset: crate::cli::timed::reset_name(feed_on_reset).to_string(),
            lateness,
            wall_clock: false,
        };
        crate::cli::timed::Record::new(path.clone(), header, streaming)
    });
    if let Some(r) = &resumed {
        resume_record(
            record.as_mut(),
            r.commit.record_len,
            args.record.as_deref(),
            &r.dir,
        )
        .map_err(fail)?;
    }
    let tally = Tally::new(args.on_malformed.into(), crate::cli::timed::notices());
    let mut source = Source::new(
        feed,
        tally,
        (key_index, key.to_string()),
        (inputs, view.extra()),
    );
    source.record = record;
    source.seq = first_seq;
    source.every = every;
    source.first_barrier = resumed.is_none()
        && every.is_some()
        && matches!(args.output, crate::cli::OutputArg::Redis(_));
    source.skip_before = skip_before;
    // An earlier vigil's timed barrier is a stamp (`scale::timely_time`, at or past 2^63 for
    // any time since 1970); this one's is a row's index, far below it.
    source.skip_by_stamp = time_cell.is_some() && skip_before >= 1 << 63;
    source.expect_digest = resumed
        .as_ref()
        .filter(|_| replayable && positioned.is_none())
        .map(|r| r.commit.input_digest);
    source.at_barriers = Arc::clone(at_barriers);
    Ok((source, streaming, kept))
}
