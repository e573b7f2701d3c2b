//! How a scaled run's inputs are read in parallel by the workers of process 0, where the inputs
//! allow it: one regular file without a time field split into parts (`parts`), several regular
//! files each read whole by one worker (`inputs`; with a time field each through a feed of its
//! own, `timed_inputs`), or one stream without a time field cut into chunks (`chunks`). Anything
//! else (a live source, a `tcp://` listener, one file with a time field, an `.input` trace) is
//! read by process 0's feed, and [`plan`] says so with `None`. A run that checkpoints reads
//! one regular file in parts ([`checkpointed_plan`]) and anything else through the feed.

use super::consumers::ConsumerReader;
use super::source::{Reading, Source, StopAt, Tally};
use super::timed_inputs::TimedInputsReader;
use super::{chunks, inputs, parts};
use crate::notice::{Notice, Notify};
use crate::pipeline::{self, Feed, FeedOptions, Malformed};
use crate::trace::{self, InputSchema, ReaderOptions, TraceFormat};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// How process 0's workers read a scaled run's input in parallel.
pub(crate) enum Parallel {
    /// One regular file split into parts.
    Parts(parts::Parts),
    /// Several regular files, each read whole by one worker.
    Inputs(inputs::Inputs),
    /// Several regular files with a time field, each read by one worker through a feed of its
    /// own.
    Timed(TimedInputs),
    /// One stream (standard input, a FIFO) cut into chunks, each worker's taken by its reader.
    Stream(StreamChunks),
    /// One live source shared by consumers, one per worker (a Redis consumer group's, or an
    /// MQTT shared subscription's members).
    Consumers(SharedSource),
}

/// The consumers of `Parallel::Consumers`: each worker's, and the source's name.
pub(crate) struct SharedSource {
    name: String,
    consumers: Vec<Option<Box<dyn crate::live::Consumer>>>,
}

/// What the parallel readers of a scaled run need to know.
pub(crate) struct ReadSetup<'a> {
    /// The inputs as given (paths, `-`).
    pub inputs: &'a [String],
    /// The format of every trace, else each one's by its name.
    pub format: Option<TraceFormat>,
    pub reader: ReaderOptions,
    /// How a feed stamps the rows (its time field, unit, lateness, malformed-row policy): each
    /// timed input read in parallel has a feed of its own with these options.
    pub feed: &'a FeedOptions,
    /// The cells every row has (the monitor's inputs, passed fields, the time field).
    pub schema: &'a InputSchema,
    /// The live transports' options (a consumer group's name among them).
    pub live: &'a crate::live::Options,
    pub key_index: usize,
    pub key: &'a str,
    /// The monitor's inputs and the cells past them (passed fields, the time field).
    pub cells: (usize, usize),
    /// Where the readers' notices go (a skipped row, a late one).
    pub notify: Notify,
    /// The least time at which a reader stopped the run, shared by them all.
    pub stop_at: Arc<StopAt>,
    /// The workers that read a file in parts: this process's first worker's index among
    /// them, and how many there are (process 0's workers, or, when every process has the
    /// file, every worker of the run).
    pub share: (usize, usize),
    /// The replay log's path and header (`--record`): readers of a file's parts, a stream's
    /// chunks, several inputs or a shared live source each write a part of it; other inputs
    /// are then read by the feed.
    pub record: Option<&'a (String, crate::pipeline::log::Header)>,
    /// How several timed inputs write their times where they agree ([`parallel_time_form`],
    /// read once for the plan and the log's header); `None` reads them through the feed.
    pub time_form: Option<crate::time::TimeForm>,
}

impl ReadSetup<'_> {
    fn malformed(&self) -> Malformed {
        self.feed.malformed
    }
}

/// The chunks of `Parallel::Stream`: each worker's, and how many the splitter cut.
pub(crate) struct StreamChunks {
    chunks: Vec<Option<chunks::Chunks>>,
    pub(crate) cut: Arc<AtomicU64>,
}

/// The inputs of `Parallel::Timed`: each input's reader, taken by the worker that reads it.
pub(crate) struct TimedInputs {
    sources: Vec<Option<Source>>,
    stop_at: Arc<StopAt>,
    pub(crate) count: usize,
}

impl TimedInputs {
    /// Worker `worker`'s of `threads`: inputs `worker`, `worker + threads`, …
    fn reader(
        &mut self,
        worker: usize,
        threads: usize,
        log: Option<parts::PartLog>,
    ) -> TimedInputsReader {
        let mine = (worker..self.sources.len())
            .step_by(threads)
            .filter_map(|s| self.sources[s].take().map(|source| (s, source)))
            .collect();
        TimedInputsReader::new(mine, Arc::clone(&self.stop_at), log)
    }
}

impl Parallel {
    /// Process 0's `threads` workers' readers (a worker with nothing to read gets a reader
    /// that ends at once): each with its own counts, sharing the setup's stop.
    pub(crate) fn readers(
        &mut self,
        threads: usize,
        setup: &ReadSetup<'_>,
    ) -> Vec<Box<dyn Reading>> {
        (0..threads)
            .map(|w| {
                // A stream's chunks are read by process 0's workers alone.
                let worker = match self {
                    Parallel::Parts(_) => setup.share.0 + w,
                    _ => w,
                };
                let part = parts::PartSetup {
                    log: (setup.record).map(|(path, h)| parts::PartLog::new(path, h, worker)),
                    barriers: None,
                    schema: setup.schema.clone(),
                    options: setup.reader,
                    tally: Tally::new(setup.malformed(), setup.notify.clone()),
                    key_index: setup.key_index,
                    key_name: setup.key.to_string(),
                    cells: setup.cells.0 + setup.cells.1,
                    stop_at: Arc::clone(&setup.stop_at),
                };
                let reader: Box<dyn Reading> = match self {
                    Parallel::Parts(p) => {
                        let (first, all) = setup.share;
                        Box::new(p.reader(first + w, all, part))
                    }
                    Parallel::Inputs(i) => Box::new(i.reader(w, threads, part)),
                    Parallel::Timed(t) => Box::new(t.reader(w, threads, part.log)),
                    Parallel::Stream(s) => match s.chunks.get_mut(w).and_then(Option::take) {
                        Some(c) => Box::new(parts::PartReader::of_stream(c, part)),
                        None => unreachable!("one reader per worker, each taken once"),
                    },
                    Parallel::Consumers(s) => match s.consumers.get_mut(w).and_then(Option::take) {
                        Some(c) => Box::new(ConsumerReader::new(
                            c,
                            s.name.clone(),
                            (setup.schema.names.len(), part.cells),
                            (setup.key_index, setup.key.to_string()),
                            (part.tally, Arc::clone(&setup.stop_at)),
                            part.log,
                        )),
                        None => unreachable!("one reader per worker, each taken once"),
                    },
                };
                reader
            })
            .collect()
    }

    /// Whether the input is a stream, whose outputs are written as they complete.
    pub(crate) fn streaming(&self) -> bool {
        matches!(self, Parallel::Stream(_) | Parallel::Consumers(_))
    }

    /// What the workers read, for `--stats`: "the trace read in 4 parts by 2 workers".
    pub(crate) fn describe(&self, threads: usize, all: usize) -> String {
        match self {
            Parallel::Parts(p) if all > threads => format!(
                "the trace read in {} parts by the run's {all} workers, {threads} of them here",
                p.count()
            ),
            Parallel::Parts(p) => {
                format!("the trace read in {} parts by {threads} workers", p.count())
            }
            Parallel::Inputs(i) => {
                format!("{} inputs read in parallel by {threads} workers", i.count())
            }
            Parallel::Timed(t) => format!(
                "{} inputs read in parallel by {threads} workers, each through a feed of its own",
                t.count
            ),
            Parallel::Stream(s) => format!(
                "the stream read in {} chunks by {threads} workers",
                s.cut.load(Ordering::Relaxed)
            ),
            Parallel::Consumers(s) => format!(
                "{} read by {} consumers of its group, one per worker",
                s.name,
                s.consumers.len()
            ),
        }
    }
}

/// How `threads` workers read `setup`'s inputs in parallel, or `None`: process 0's feed reads
/// them (see the module doc). A run of one worker reads through the feed, and so does a run
/// under the wall clock. A run that records a replay log has each reader write its part of the
/// log (`pipeline::log::parts`), whose rows have one order to be merged in, their places (a
/// shared live source's are its entries' or arrivals' stamps, several timed inputs' their
/// stamps and positions).
pub(crate) fn plan(setup: &ReadSetup<'_>, threads: usize) -> Result<Option<Parallel>, String> {
    // Under the wall clock the feed stamps arrivals and ticks while the sources are silent.
    if threads < 2 && setup.share.1 < 2 || setup.inputs.is_empty() || setup.feed.wall_clock {
        return Ok(None);
    }
    // A process other than the first reads its share of a file's parts, nothing else.
    let first = setup.share.0 == 0;
    if first && let Some(shared) = consumers_plan(setup, threads)? {
        return Ok(Some(Parallel::Consumers(shared)));
    }
    if !first {
        return match (setup.feed.time_cell, setup.inputs) {
            (None, [path]) if is_regular(path) => {
                match pipeline::inputs::format_of(path, setup.format) {
                    Ok(format @ (TraceFormat::Csv | TraceFormat::Jsonl)) => {
                        Ok(parts::plan(path, format, setup.share.1)?.map(Parallel::Parts))
                    }
                    _ => Ok(None),
                }
            }
            _ => Ok(None),
        };
    }
    if let Some(stream) = stream_plan(setup, threads)? {
        return Ok(Some(Parallel::Stream(stream)));
    }
    let Some(files) = regular_files(setup.inputs, setup.format) else {
        return Ok(None);
    };
    let timed = setup.feed.time_cell;
    match (timed, files.as_slice()) {
        (Some(_), [_]) => Ok(None),
        (Some(_), _) => {
            if setup.time_form.is_none() {
                return Ok(None);
            }
            // A run says its first late rows, as many as a feed of every input says (its
            // count is in the summary): the inputs' feeds share that budget.
            let notify = setup.notify.clone();
            let said = Arc::new(AtomicU64::new(0));
            let late_said: Notify = Arc::new(move |n| {
                let late = matches!(n, Notice::Late { .. });
                if !late || said.fetch_add(1, Ordering::Relaxed) < pipeline::LATE_ROWS_SAID {
                    notify(n);
                }
            });
            let mut sources = Vec::with_capacity(files.len());
            for file in &files {
                sources.push(Some(input_source(setup, &late_said, file)?));
            }
            Ok(Some(Parallel::Timed(TimedInputs {
                count: sources.len(),
                sources,
                stop_at: Arc::clone(&setup.stop_at),
            })))
        }
        (None, [(path, format)]) => {
            Ok(parts::plan(path, *format, setup.share.1.max(threads))?.map(Parallel::Parts))
        }
        (None, _) => Ok(Some(Parallel::Inputs(inputs::Inputs::open(
            &files,
            setup.schema,
            setup.reader,
        )?))),
    }
}

/// How `threads` workers of process 0 read `setup`'s one regular file without a time field
/// in parts for a run that checkpoints (`ck`), or `None`: the feed reads it (several inputs, a
/// stream, a live source, a file every process reads, or a resumed checkpoint that a feed
/// took). Also gives the file as the commit records name it.
pub(crate) fn checkpointed_plan(
    setup: &ReadSetup<'_>,
    threads: usize,
    ck: &parts::checkpoint::PartCheckpoints<'_>,
) -> Result<Option<(Parallel, crate::pipeline::checkpoint::Source)>, String> {
    let local = setup.share == (0, threads);
    let [path] = setup.inputs else {
        return Ok(None);
    };
    if threads < 2 || !local || setup.feed.time_cell.is_some() || setup.feed.wall_clock {
        return Ok(None);
    }
    let taken_in_parts = |r: &crate::pipeline::checkpoint::barrier::Resume| {
        (r.record.clock()).is_some_and(|c| c.options.ends_with(parts::checkpoint::IN_PARTS))
    };
    if !is_regular(path) || ck.resumed.is_some_and(|r| !taken_in_parts(r)) {
        return Ok(None);
    }
    match pipeline::inputs::format_of(path, setup.format) {
        Ok(format @ (TraceFormat::Csv | TraceFormat::Jsonl)) => {
            let planned = parts::checkpoint::plan(path, format, threads, ck)?;
            Ok(planned.map(|(p, kept)| (Parallel::Parts(p), kept)))
        }
        _ => Ok(None),
    }
}

/// The inputs as regular files of JSON lines or CSV, each with its format, or `None` where one
/// is not (a stream, a live source, a listener, another format): what may be read apart.
fn regular_files(
    inputs: &[String],
    format: Option<TraceFormat>,
) -> Option<Vec<(String, TraceFormat)>> {
    (inputs.iter())
        .map(|path| match pipeline::inputs::format_of(path, format) {
            // (A format not told here is the feed's set-up to report.)
            Ok(format @ (TraceFormat::Csv | TraceFormat::Jsonl)) if is_regular(path) => {
                Some((path.clone(), format))
            }
            _ => None,
        })
        .collect()
}

/// How several inputs with a time field (`time_cell`) write their times, where they agree
/// ([`inputs::common_time_form`]), or `None` where they are not several regular files that may
/// be read in parallel. Their first rows are read for it: only regular files are, so nothing a
/// run reads (standard input, a FIFO) is taken from it.
pub(crate) fn parallel_time_form(
    names: &[String],
    format: Option<TraceFormat>,
    schema: &InputSchema,
    time_cell: Option<usize>,
    unit: crate::time::TimeUnit,
) -> Option<crate::time::TimeForm> {
    let cell = time_cell?;
    let files = regular_files(names, format).filter(|f| f.len() > 1)?;
    inputs::common_time_form(&files, schema, Some(cell), unit)
}

/// Whether `path` names a regular file (not standard input, a URL or a FIFO).
fn is_regular(path: &str) -> bool {
    path != "-"
        && !crate::live::is_url(path)
        && !path.starts_with("tcp://")
        && std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// One live source without a time field that consumers can share (a Redis Stream read by a
/// consumer group, an MQTT source by a shared subscription's members), one consumer per
/// worker, or `None`. With a time field the feed reads it: a
/// late row's re-stamping depends on every row before it.
fn consumers_plan(setup: &ReadSetup<'_>, threads: usize) -> Result<Option<SharedSource>, String> {
    let [input] = setup.inputs else {
        return Ok(None);
    };
    if setup.feed.time_cell.is_some() || !crate::live::is_url(input) {
        return Ok(None);
    }
    let Some(consumers) = crate::live::open_consumers(input, setup.schema, setup.live, threads)?
    else {
        return Ok(None);
    };
    Ok(Some(SharedSource {
        name: crate::live::redact(input),
        consumers: consumers.into_iter().map(Some).collect(),
    }))
}

/// One stream without a time field (standard input or a FIFO, JSON lines or CSV) cut into
/// chunks for the workers (`scale::chunks`), or `None`.
fn stream_plan(setup: &ReadSetup<'_>, threads: usize) -> Result<Option<StreamChunks>, String> {
    let [path] = setup.inputs else {
        return Ok(None);
    };
    if setup.feed.time_cell.is_some() || crate::live::is_url(path) || path.starts_with("tcp://") {
        return Ok(None);
    }
    // (A format not told here is the feed's set-up to report.)
    let Ok(format) = pipeline::inputs::format_of(path, setup.format) else {
        return Ok(None);
    };
    let Some(stream) = chunks::open(path, format)? else {
        return Ok(None);
    };
    let cut = Arc::new(AtomicU64::new(0));
    let chunks = stream.split(threads, Arc::clone(&cut))?;
    Ok(Some(StreamChunks {
        chunks: chunks.into_iter().map(Some).collect(),
        cut,
    }))
}

/// The reader of one input with a time field through a feed of its own (`Parallel::Timed`).
fn input_source(
    setup: &ReadSetup<'_>,
    late_said: &Notify,
    (path, format): &(String, TraceFormat),
) -> Result<Source, String> {
    let mut feed = Feed::new(setup.feed.clone(), late_said.clone());
    let opened =
        trace::open_trace(path, *format, setup.schema, setup.reader).map_err(|e| e.to_string())?;
    feed.add_reader(path.clone(), opened.reader, *format);
    let tally = Tally::new(setup.malformed(), setup.notify.clone());
    let key = (setup.key_index, setup.key.to_string());
    Ok(Source::new(feed, tally, key, setup.cells))
}
