//! The batch loop of a run of one regular file without a feed ([`batches`]: a plain monitor,
//! no time, no triggers or passed fields), in batches of columns through
//! [`Monitor::run_batch`], and what every run's loop shares: its [`Counts`], how it [`End`]s
//! and whose fault that is ([`Ended`]), the [`Malformed`] policy's dropping of rows. Every
//! other run goes row by row through the one loop, [`RunLoop::go`](super::run_loop::RunLoop::go)
//! (of a [`Direct`](super::direct::Direct) reader, or of a feed). Both take checkpoints between
//! rows and end with an [`End`] after the outputs of every row before it are written.

use super::checkpoint::{Checkpointable, Checkpointer};
use super::sink::Columns;
use super::{Malformed, StopKind, droppable, row_location};
use crate::batch::OutputBatch;
use crate::monitor::Monitor;
use crate::notice::{Notice, Notify};
use crate::row::{RowError, StepError};
use crate::trace::{OutputFormat, OutputWriter, RowReader, TraceError, TraceErrorKind};
use crate::value::{Sample, Value};
use std::io::{self, Write};

/// How a batch run of one regular file goes (see the module doc).
pub struct Drive<'a> {
    /// What a malformed row does.
    pub malformed: Malformed,
    /// The source's name in messages.
    pub name: &'a str,
    /// Whether the reader's position names the line a row ended on (JSON
    /// lines and CSV, not `.input` blocks).
    pub lines: bool,
    /// Where warnings and skipped rows are said.
    pub notify: &'a Notify,
    /// Called after each batch with the rows read so far and the
    /// reader, for a progress display.
    pub progress: &'a mut dyn FnMut(u64, &dyn RowReader),
}

/// What a run of one source counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Rows the reader gave or failed on (dropped malformed rows included),
    /// from the trace's start (a resumed run counts the rows before it).
    pub rows_read: u64,
    /// Rows the monitor evaluated.
    pub steps: u64,
    /// Malformed rows dropped.
    pub skipped: u64,
}

/// How a run of one source ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// At the end of the source (a keyed run: some keys may have stopped).
    Done,
    /// Stopped early: what happened, and whose fault it is.
    Stopped(String, Ended),
}

/// Whose fault an early [`End`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The input's: a malformed row, a row the monitor rejected.
    Trace,
    /// The specification's: a runtime error.
    Runtime,
    /// The environment's: an unreadable input, a checkpoint not written.
    Failure,
}

impl Ended {
    /// The exit status the command line ends with (and a replay log
    /// records at a stop): 4 for the input's fault, 3 for the
    /// specification's, 1 for the environment's.
    pub fn status(self) -> u8 {
        match self {
            Ended::Trace => 4,
            Ended::Runtime => 3,
            Ended::Failure => 1,
        }
    }

    /// The end a status stands for (see [`Ended::status`]; an unknown one
    /// is the input's fault).
    pub fn of_status(status: u8) -> Ended {
        match status {
            1 => Ended::Failure,
            3 => Ended::Runtime,
            _ => Ended::Trace,
        }
    }
}

impl From<StopKind> for Ended {
    fn from(kind: StopKind) -> Ended {
        match kind {
            StopKind::Trace => Ended::Trace,
            StopKind::Failure => Ended::Failure,
        }
    }
}

impl Drive<'_> {
    /// Says the reader's warnings.
    #[inline]
    fn warn(&self, reader: &mut dyn RowReader) {
        for w in reader.take_warnings() {
            (self.notify)(Notice::Trace(w));
        }
    }

    /// A reader error: `true` when the policy drops the row and the reader
    /// can go on (counted, and said under `Warn`).
    fn skip_trace_error(&self, e: &TraceError, reader: &dyn RowReader, n: &mut Counts) -> bool {
        if !droppable(self.malformed, e, reader) {
            return false;
        }
        n.rows_read += 1;
        dropped(self.malformed, self.notify, e.to_string(), n);
        true
    }

    /// Where the row just read is, for a row the monitor rejected.
    fn locate(&self, reader: &dyn RowReader, n: &Counts) -> String {
        row_location(self.name, reader, self.lines, n.rows_read)
    }
}

/// A row the monitor rejected (`at` locates it): `true` when `malformed`
/// drops it (counted, and said under `Warn`).
pub(super) fn skip_rejected(
    malformed: Malformed,
    notify: &Notify,
    at: &str,
    e: &RowError,
    n: &mut Counts,
) -> bool {
    if malformed == Malformed::Stop {
        return false;
    }
    dropped(malformed, notify, format!("{at}: {e}"), n);
    true
}

/// A dropped row: counted, and said under `Warn`.
pub(super) fn dropped(malformed: Malformed, notify: &Notify, what: String, n: &mut Counts) {
    n.skipped += 1;
    if malformed == Malformed::Warn {
        notify(Notice::Skipped(what));
    }
}

/// The end of a row the monitor rejected. The readers check every value
/// with the monitor's own rule (`row::conform`), so a reader's row is never
/// rejected; if one is, the reader let a bad value of the trace through,
/// and the run stops as on a malformed trace, naming the value, rather than
/// panicking.
pub(super) fn rejected(e: &RowError) -> End {
    End::Stopped(rejected_message(e), Ended::Trace)
}

/// What a run says of a row the monitor rejected: the value named, and
/// that the reader should have caught it (the readers check every value
/// with the monitor's own rule, so one that gets through is a bug).
pub fn rejected_message(e: &RowError) -> String {
    format!(
        "the monitor rejected a row of the trace: {e} (the trace reader should have reported it; this is a bug in vigil)"
    )
}

/// The end of a reader's error.
pub(super) fn trace_end(e: &TraceError) -> End {
    let kind = match e.kind {
        TraceErrorKind::Malformed => Ended::Trace,
        TraceErrorKind::Io => Ended::Failure,
    };
    End::Stopped(e.to_string(), kind)
}

/// Stops early: the outputs of every row before are flushed first.
pub(super) fn stop(writer: &mut dyn OutputWriter, end: End) -> io::Result<End> {
    writer.flush()?;
    Ok(end)
}

/// The clean end of the input: a last checkpoint, if checkpoints are on,
/// so that a resume after it has nothing to redo.
fn finish(
    ck: Option<&mut Checkpointer>,
    monitor: &dyn Checkpointable,
    reader: &mut dyn RowReader,
    writer: &mut dyn OutputWriter,
    alerts: Option<&mut dyn Write>,
) -> io::Result<End> {
    match ck {
        Some(ck) => {
            if let Err(message) = ck.write(monitor, reader, writer, alerts)? {
                return stop(writer, End::Stopped(message, Ended::Failure));
            }
        }
        None => {
            writer.flush()?;
            reader.commit();
        }
    }
    Ok(End::Done)
}

/// Rows evaluated per batch when reading a regular file, at most.
const BATCH_ROWS: usize = 4096;

/// Output cells (rows times outputs) a batch holds at most. A batch keeps
/// every output of every row until it is written, about 36 bytes a cell,
/// so a spec of 100,000 outputs held 4,096 rows' worth, 14 GB; bounding the
/// cells keeps a batch near 36 MB whatever the spec's width, and costs
/// nothing below 256 outputs (a batch is still `BATCH_ROWS` rows).
const BATCH_CELLS: usize = 1 << 20;

/// Rows per batch for a monitor of `width` inputs or outputs, whichever
/// is more: `BATCH_ROWS`, fewer for a wide spec, at least one.
fn batch_rows(width: usize) -> usize {
    (BATCH_CELLS / width.max(1)).clamp(1, BATCH_ROWS)
}

/// Why reading a batch stopped before it was full.
enum Short {
    /// The end of the trace.
    Trace,
    /// A trace error, reported after the batch's rows.
    Malformed(TraceError),
    /// A row the batch rejected, reported after the rows before it.
    Rejected(RowError),
}

/// Runs `reader`'s rows in batches of columns through
/// [`Monitor::run_batch`] (one native call per run of rows on the
/// native-whole tier), writing the outputs `columns` chooses as each batch
/// completes.
pub fn batches(
    drive: &mut Drive<'_>,
    monitor: &mut Monitor,
    reader: &mut dyn RowReader,
    writer: &mut dyn OutputWriter,
    (columns, output): (&Columns, OutputFormat),
    mut ck: Option<&mut Checkpointer>,
    counts: &mut Counts,
) -> io::Result<End> {
    let inputs = monitor.input_count();
    let mut row: Vec<Option<Value>> = vec![None; inputs + columns.extra()];
    let mut samples: Vec<Sample> = Vec::with_capacity(monitor.output_names().len());
    let mut rows = monitor.batch();
    let mut out = OutputBatch::new();
    let kept = columns.batch_columns(output);
    let most = batch_rows(inputs.max(monitor.output_names().len()));
    loop {
        rows.clear();
        let mut short = None;
        // A batch ends where a checkpoint is due: checkpoints fall between rows.
        let limit = ck.as_ref().map_or(most, |c| {
            usize::try_from(c.rows_until_due()).map_or(most, |n| n.min(most))
        });
        while rows.len() < limit {
            match reader.next_row(&mut row) {
                Ok(true) => {
                    counts.rows_read += 1;
                    if let Err(e) = rows.push_row(&row[..inputs]) {
                        let at = drive.locate(reader, counts);
                        if skip_rejected(drive.malformed, drive.notify, &at, &e, counts) {
                            continue;
                        }
                        short = Some(Short::Rejected(e));
                        break;
                    }
                }
                Ok(false) => {
                    short = Some(Short::Trace);
                    break;
                }
                Err(e) if drive.skip_trace_error(&e, reader, counts) => {}
                Err(e) => {
                    short = Some(Short::Malformed(e));
                    break;
                }
            }
        }
        drive.warn(reader);
        let result = monitor.run_batch(&rows, &mut out);
        counts.steps += out.len() as u64;
        match &kept {
            Some(kept) => writer.write_batch(&out, kept)?,
            None => {
                for r in out.rows() {
                    columns.fill(&mut samples, output, None, r.iter(), None);
                    writer.write_step(r.step(), &samples)?;
                }
            }
        }
        (drive.progress)(counts.rows_read, reader);
        match result {
            Ok(()) => {}
            Err(StepError::Runtime(e)) => {
                return stop(writer, End::Stopped(e.to_string(), Ended::Runtime));
            }
            Err(StepError::Row(e)) => return stop(writer, rejected(&e)),
        }
        match short {
            Some(Short::Trace) => return finish(ck, monitor, reader, writer, None),
            Some(Short::Malformed(e)) => return stop(writer, trace_end(&e)),
            Some(Short::Rejected(e)) => return stop(writer, rejected(&e)),
            None => {}
        }
        if let Some(ck) = ck.as_deref_mut()
            && let Err(message) = ck.rows_done(rows.len() as u64, monitor, reader, writer, None)?
        {
            return stop(writer, End::Stopped(message, Ended::Failure));
        }
    }
}
