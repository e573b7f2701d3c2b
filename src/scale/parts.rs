//! A scaled run's trace read in parallel: a regular file split at row boundaries into parts,
//! each read by one of process 0's workers.
//!
//! `trace::split_points` cuts the file into parts of about `part_bytes` at line ends (JSON
//! lines, or CSV without quotes), with the lines before each. Part `k` goes to process 0's
//! worker `k % threads`, which reads it with `trace::open_trace_part` and stamps its `i`-th row
//! with the timely time `k << 32 | i`: so the order of times is the file's order, the writer's
//! (time, position) order is the single-process output's, and every worker advances its own
//! input as it reads, timely's frontier (the least time any reader may still send) telling
//! each worker when a time is complete. A run without `--time` only: a row's time field would
//! be its stamp, and a late row's re-stamping depends on every row before it. A run that
//! checkpoints is split by lines instead, and each part's reader sends the barrier at the
//! part's start (`checkpoint.rs`).

use super::source::{Fill, ReadCounts, Reading, StopAt, Tally};
use super::{Event, StampedRow};
use crate::notice::Notice;
use crate::pipeline::drive::Ended;
use crate::pipeline::log::{Header, LogWriter};
use crate::row::RowError;
use crate::trace::{self, InputSchema, ReaderOptions, RowReader, TraceFormat, TracePosition};
use std::sync::Arc;

/// The rows a part may hold: its rows' times are `k << 32 | i`.
const PART_ROWS: u64 = 1 << 32;

pub(crate) mod checkpoint;

/// The parts of one trace file, for process 0's `threads` workers.
pub(crate) struct Parts {
    path: String,
    format: TraceFormat,
    /// Each part's start, and the file's length (the last part's end).
    points: Vec<TracePosition>,
    len: u64,
    /// The index of the first part (a resumed run's parts are numbered on from the part its
    /// checkpoint was taken at).
    first: u64,
    /// With checkpoints: the barriers the readers send at their parts' starts.
    barriers: Option<Arc<checkpoint::Barriers>>,
    /// Whether the run resumed (at the first part's start): the readers' parts of the replay
    /// log are cut back to it.
    resumed: bool,
}

/// Splits the regular file `path`, a trace in `format` (JSON lines or CSV), into parts for
/// `threads` readers: `None` when it does not split (a CSV with quoted line ends, say), and
/// process 0's feed must read it whole. The caller decides that the run allows reading in parts
/// at all: several workers, no time field (a run that checkpoints splits by
/// [`checkpoint::plan`]).
pub(crate) fn plan(
    path: &str,
    format: TraceFormat,
    threads: usize,
) -> Result<Option<Parts>, String> {
    let part = part_bytes(path, threads);
    let start = TracePosition { offset: 0, line: 0 };
    let split = trace::split_points(path, format, trace::PartSize::Bytes(part), start)
        .map_err(|e| format!("{path}: cannot read the trace: {e}"))?;
    Ok(split.map(|(points, len)| Parts {
        path: path.to_string(),
        format,
        points,
        len,
        first: 0,
        barriers: None,
        resumed: false,
    }))
}

/// The size of the parts of `path` for `threads` readers: parts enough for each worker to
/// take turns a few times (so that no one holds the frontier back for long), not so small that
/// opening one costs more than reading it.
fn part_bytes(path: &str, threads: usize) -> u64 {
    let len = std::fs::metadata(path).map_or(0, |m| m.len());
    (len / (threads as u64 * 8)).clamp(64 << 10, 16 << 20)
}

impl Parts {
    /// How many parts the trace is read in.
    pub(crate) fn count(&self) -> usize {
        self.points.len()
    }

    /// The reading of worker `worker` of the `readers` that read the file (process 0's, or
    /// every process's): parts `worker`, `worker + readers`, …
    pub(crate) fn reader(&self, worker: usize, readers: usize, mut setup: PartSetup) -> PartReader {
        let mine = (worker..self.points.len()).step_by(readers);
        let parts = mine
            .map(|k| {
                let end = self.points.get(k + 1).map_or(self.len, |p| p.offset);
                (self.first + k as u64, self.points[k], end)
            })
            .collect();
        setup.barriers = self.barriers.clone();
        if let Some(log) = &mut setup.log {
            log.resumed = self.resumed.then_some(self.first * PART_ROWS);
        }
        let pieces = Pieces::File {
            path: self.path.clone(),
            format: self.format,
            parts,
            next: 0,
        };
        PartReader::new(pieces, setup)
    }
}

/// What every part reader shares: the schema and the options, the key's
/// cell, the cells a row sends, and the least time at which a reader
/// stopped the run (rows at or after it are not written).
pub(crate) struct PartSetup {
    pub(crate) schema: InputSchema,
    pub(crate) options: ReaderOptions,
    pub(crate) tally: Tally,
    pub(crate) key_index: usize,
    pub(crate) key_name: String,
    pub(crate) cells: usize,
    pub(crate) stop_at: Arc<StopAt>,
    /// The reader's part of the run's replay log (`--record`), if it records one.
    pub(crate) log: Option<PartLog>,
    /// With checkpoints, the barriers at the parts' starts (set by [`Parts::reader`]).
    pub(crate) barriers: Option<Arc<checkpoint::Barriers>>,
}

/// A reader's part of a scaled run's replay log (`pipeline::log::parts`): created at its first
/// read, a line per row it sends and the stop it makes, flushed at its end (and, reading a
/// stream, after every batch, so that the log is as far as the outputs).
pub(crate) struct PartLog {
    path: String,
    header: Header,
    worker: usize,
    writer: Option<LogWriter>,
    /// A resumed run's: the part is cut back to its lines before this time, then appended to.
    resumed: Option<u64>,
}

impl PartLog {
    /// Worker `worker`'s part of the log recorded at `path` with `header`: `PATH.w<worker>`.
    pub(crate) fn new(path: &str, header: &Header, worker: usize) -> PartLog {
        PartLog {
            path: part_path(path, worker),
            header: header.clone(),
            worker,
            writer: None,
            resumed: None,
        }
    }

    /// The part's writer, created the first time.
    fn writer(&mut self) -> std::io::Result<&mut LogWriter> {
        if self.writer.is_none() {
            self.writer = Some(match self.resumed {
                None => LogWriter::create_part(&self.path, &self.header, self.worker)?,
                Some(before) => {
                    let file = crate::pipeline::log::cut_part(&self.path, before)
                        .map_err(std::io::Error::other)?;
                    LogWriter::continued(file, self.header.fields.clone())
                }
            });
        }
        Ok(self.writer.as_mut().expect("created above"))
    }

    /// The message of a failed write.
    fn failed(&self, e: std::io::Error) -> String {
        format!("cannot write the replay log `{}`: {e}", self.path)
    }

    /// Writes a row of input `source` at place `o`, its position `seq` among that input's rows
    /// and its step's time `seq` units: the feed's stamp of a row of several inputs.
    pub(crate) fn row_of(
        &mut self,
        o: u64,
        (source, seq): (u32, u64),
        cells: &[Option<crate::value::Value>],
    ) -> Result<(), String> {
        let time = i64::try_from(seq)
            .ok()
            .and_then(|k| k.checked_mul(self.header.unit.nanos()))
            .unwrap_or(i64::MAX);
        self.row_stamped((o, 0), (source, seq), time, cells)
    }

    /// Writes a row of input `source` at place `at` (its time and position), its position
    /// `seq` among that input's rows and its step's time `time` (ns): the stamp of a row of
    /// several timed inputs, each re-stamped by its input's feed.
    pub(crate) fn row_stamped(
        &mut self,
        at: (u64, u64),
        (source, seq): (u32, u64),
        time: i64,
        cells: &[Option<crate::value::Value>],
    ) -> Result<(), String> {
        (self.writer())
            .and_then(|w| w.write_part_row_of(at, (source, seq), time, cells))
            .map_err(|e| self.failed(e))
    }

    /// Writes a row of a live source read by consumers at place `o`, its step's time `time`
    /// (ns: its entry's or its arrival's).
    pub(crate) fn row_at(
        &mut self,
        o: u64,
        time: i64,
        cells: &[Option<crate::value::Value>],
    ) -> Result<(), String> {
        (self.writer())
            .and_then(|w| w.write_part_row_at(o, time, cells))
            .map_err(|e| self.failed(e))
    }

    /// Writes the stop of the run at place `at` (a time and a position), and syncs the part.
    pub(crate) fn stop_placed(
        &mut self,
        at: (u64, u64),
        message: &str,
        status: u8,
    ) -> Result<(), String> {
        (self.writer())
            .and_then(|w| w.write_part_stop(at, message, status))
            .map_err(|e| self.failed(e))?;
        self.flush(true)
    }

    /// Writes out what is buffered and syncs the part (`synced`), or hands it to the file.
    pub(crate) fn flush(&mut self, synced: bool) -> Result<(), String> {
        let flushed = match self.writer() {
            Ok(w) if synced => w.flush(),
            Ok(w) => w.flush_buffer(),
            Err(e) => Err(e),
        };
        flushed.map_err(|e| self.failed(e))
    }
}

/// A reader's stop of the run at place `at` with `message`: written at its place in the
/// reader's part of the log, where it keeps one (a part that cannot be written is said in the
/// message the run stops with).
pub(crate) fn stopped(
    log: Option<&mut PartLog>,
    at: (u64, u64),
    message: String,
    exit: Ended,
) -> Fill {
    if let Some(log) = log
        && let Err(failed) = log.stop_placed(at, &message, exit.status())
    {
        return Fill::Stopped(format!("{message} ({failed})"), exit);
    }
    Fill::Stopped(message, exit)
}

/// Where worker `worker`'s part of the log recorded at `path` is.
pub(crate) fn part_path(path: &str, worker: usize) -> String {
    format!("{path}.w{worker}")
}

/// Where a worker's parts come from.
enum Pieces {
    /// Parts of a regular file: index, start, end; `next` is the next to open.
    File {
        path: String,
        format: TraceFormat,
        parts: Vec<(u64, TracePosition, u64)>,
        next: usize,
    },
    /// Chunks of a stream, cut at row boundaries by `chunks`'s splitter.
    Stream(super::chunks::Chunks),
}

/// One worker's parts of the trace, read one after another.
pub(crate) struct PartReader {
    pieces: Pieces,
    /// The trace's name in messages.
    name: String,
    /// The part open now, and its reader.
    part: u64,
    reader: Option<Box<dyn RowReader>>,
    /// The row of the open part read next.
    row: u64,
    setup: PartSetup,
    /// Rows the reader gave (a row without its key included).
    read: u64,
    /// Where it stopped the run, if it did.
    stopped_at: (u64, u64),
}

impl PartReader {
    fn new(pieces: Pieces, setup: PartSetup) -> PartReader {
        let name = match &pieces {
            Pieces::File { path, .. } => path.clone(),
            Pieces::Stream(chunks) => chunks.name().to_string(),
        };
        PartReader {
            pieces,
            name,
            part: 0,
            reader: None,
            row: 0,
            setup,
            read: 0,
            stopped_at: (u64::MAX, u64::MAX),
        }
    }

    /// A worker's reader of the chunks of a stream.
    pub(crate) fn of_stream(chunks: super::chunks::Chunks, setup: PartSetup) -> PartReader {
        PartReader::new(Pieces::Stream(chunks), setup)
    }

    /// The index of the next part this reader would open, if it has one.
    fn next_part(&self) -> Option<u64> {
        match &self.pieces {
            Pieces::File { parts, next, .. } => parts.get(*next).map(|p| p.0),
            Pieces::Stream(chunks) => chunks.next_index(),
        }
    }

    /// Opens the next part; `false` when none is left, or the run stopped
    /// before it.
    fn open_next(
        &mut self,
        batch: &mut Vec<Event>,
        workers: usize,
    ) -> Result<bool, (String, Ended)> {
        let Some(k) = self.next_part() else {
            return Ok(false);
        };
        if self.setup.stop_at.passed((k * PART_ROWS, k * PART_ROWS)) {
            return Ok(false);
        }
        let s = &self.setup;
        let reader = match &mut self.pieces {
            Pieces::File {
                path,
                format,
                parts,
                next,
            } => {
                let (_, at, end) = parts[*next];
                *next += 1;
                let reader = trace::open_trace_part(path, *format, &s.schema, s.options, at, end)
                    .map_err(|e| (e.to_string(), Ended::Failure))?;
                if let Some(barriers) = &s.barriers {
                    barriers.at_part(k, at, workers, batch);
                }
                reader
            }
            Pieces::Stream(chunks) => match chunks.open(&s.schema, s.options) {
                Some(Ok(reader)) => reader,
                Some(Err(message)) => {
                    // The stream failed where this chunk would have begun.
                    self.part = k;
                    self.row = 0;
                    return Err((message, Ended::Failure));
                }
                None => return Ok(false),
            },
        };
        self.reader = Some(reader);
        self.part = k;
        self.row = 0;
        Ok(true)
    }

    /// Stops the run at the row about to be read (`time`): no reader reads
    /// a later part, and the writer writes no row at or after it.
    fn stop(&mut self, message: String, exit: Ended) -> Fill {
        let time = self.part * PART_ROWS + self.row;
        self.stopped_at = (time, time);
        self.setup.stop_at.stop((time, time));
        stopped(self.setup.log.as_mut(), (time, 0), message, exit)
    }

    /// Writes the row about to be sent (`time`, `cells`) to the reader's part of the log.
    fn log_row(&mut self, time: u64, cells: &[Option<crate::value::Value>]) -> Result<(), String> {
        let Some(log) = &mut self.setup.log else {
            return Ok(());
        };
        (log.writer())
            .and_then(|w| w.write_part_row(time, cells))
            .map_err(|e| log.failed(e))
    }

    /// Ends a fill: the log flushed (synced at the end of the input; handed to the file after
    /// a batch of a stream).
    fn end_fill(&mut self, fill: Fill) -> Fill {
        let streaming = self.in_pieces();
        let Some(log) = &mut self.setup.log else {
            return fill;
        };
        let flushed = match &fill {
            Fill::Ended => log.flush(true),
            Fill::More if streaming => log.flush(false),
            _ => Ok(()),
        };
        match flushed {
            Ok(()) => fill,
            Err(message) => self.stop(message, Ended::Failure),
        }
    }

    /// Reads rows into `batch` until it holds `n`, or a part ends.
    fn fill_rows(&mut self, batch: &mut Vec<Event>, n: usize, workers: usize) -> Fill {
        let width = self.setup.schema.names.len();
        while batch.len() < n {
            if self.reader.is_none() {
                match self.open_next(batch, workers) {
                    Ok(true) => {}
                    Ok(false) => return Fill::Ended,
                    Err((message, exit)) => return self.stop(message, exit),
                }
            }
            let part = self.part;
            let time = part * PART_ROWS + self.row;
            if self.setup.stop_at.passed((time, time)) {
                // Another reader stopped the run at an earlier row.
                return Fill::Ended;
            }
            let reader = self.reader.as_mut().expect("opened above");
            let mut cells = super::source::empty_cells(width);
            let next = reader.next_row(&mut cells);
            // Only the first part's reader reads the CSV header as a record
            // of its own; every part's reports it (a missing input).
            let warnings = reader.take_warnings();
            if part == 0 {
                for w in warnings {
                    (self.setup.tally.notify)(Notice::Trace(w));
                }
            }
            match next {
                Ok(true) => self.read += 1,
                Ok(false) => {
                    // With checkpoints, the part's lines of the log are on disk before the
                    // frontier passes the part (and a commit can count on them).
                    if self.setup.barriers.is_some()
                        && let Some(log) = &mut self.setup.log
                        && let Err(message) = log.flush(true)
                    {
                        return self.stop(message, Ended::Failure);
                    }
                    self.reader = None;
                    // A batch holds rows of one part: its message's
                    // capability (its first row's time) then holds back no
                    // later part's rows.
                    if !batch.is_empty() {
                        return Fill::More;
                    }
                    continue;
                }
                Err(e) => match self.setup.tally.malformed_row(&e, reader.as_ref()) {
                    // A malformed row dropped (`--on-malformed skip|warn`).
                    None => continue,
                    Some((message, exit)) => return self.stop(message, exit),
                },
            }
            if cells[self.setup.key_index].is_none() {
                let at = crate::pipeline::row_location(&self.name, reader.as_ref(), true, 0);
                let e = RowError::MissingKey {
                    input: self.setup.key_name.clone(),
                };
                if self.setup.tally.skip_rejected(&at, &e) {
                    continue;
                }
                return self.stop(format!("{at}: {e}"), Ended::Trace);
            }
            let time = part * PART_ROWS + self.row;
            cells.truncate(self.setup.cells);
            if let Err(message) = self.log_row(time, &cells) {
                return self.stop(message, Ended::Failure);
            }
            self.row += 1;
            // Untimed: the position is the time.
            batch.push(Event::Row(StampedRow::new(time, time, None, cells)));
        }
        Fill::More
    }
}

impl Reading for PartReader {
    fn fill(&mut self, batch: &mut Vec<Event>, n: usize, workers: usize) -> Fill {
        let fill = self.fill_rows(batch, n, workers);
        self.end_fill(fill)
    }

    fn frontier(&self) -> u64 {
        match (&self.reader, self.next_part()) {
            (Some(_), _) => self.part * PART_ROWS + self.row,
            (None, Some(k)) => k * PART_ROWS,
            (None, None) => u64::MAX,
        }
    }

    fn stopped_at(&self) -> (u64, u64) {
        self.stopped_at
    }

    fn in_pieces(&self) -> bool {
        matches!(self.pieces, Pieces::Stream(_))
    }

    fn read(&self) -> ReadCounts {
        let t = &self.setup.tally;
        ReadCounts {
            rows: self.read + t.rows_read,
            skipped: t.skipped,
            late: 0,
            sources: 0,
        }
    }
}
