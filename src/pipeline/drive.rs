//! The loops of a run of one source without a feed (no time, one trace): row by row through
//! the [`Evaluator`] into a [`Lines`] sink ([`rows`]: a keyed monitor, a stream, triggers or
//! passed fields), or in batches of columns through [`Monitor::run_batch`] ([`batches`]: a
//! plain monitor over a regular file). Both take checkpoints between rows, drop malformed rows
//! as the [`Malformed`] policy says, and end with an [`End`] after the outputs of every row
//! before it are written.
//!
//! ```
//! use vigil::pipeline::drive::{self, Counts, Drive, End};
//! use vigil::pipeline::sink::{Alerts, ColumnOptions, Columns, Lines};
//! use vigil::pipeline::{Malformed, Monitors};
//! use vigil::trace::{self, OutputFormat, RowReader, TraceFormat};
//! use vigil::{Monitor, Spec};
//!
//! let text = "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x\n";
//! let spec = Spec::parse("sum.dsrv", text)?;
//! // Four rows, one of them malformed.
//! let rows = Box::new(std::io::Cursor::new(b"x\n1\n2\nthree\n4\n".to_vec()));
//! let mut reader = trace::reader_from_bufread("rows.csv", rows, TraceFormat::Csv, &spec.input_schema())?;
//! let mut monitors = Monitors::Single(Box::new(Monitor::builder(&spec).build()));
//!
//! // The outputs go to a CSV file, the alerts (none here) nowhere.
//! let out = std::env::temp_dir().join(format!("vigil-doc-drive-{}.csv", std::process::id()));
//! let columns = Columns::new(&spec, &ColumnOptions::default(), OutputFormat::Csv)?;
//! let names = columns.writer_names(&monitors.output_names(), OutputFormat::Csv);
//! let mut writer = trace::make_writer(OutputFormat::Csv, names, Box::new(std::fs::File::create(&out)?));
//! let mut alerts = Alerts::json(&spec, None, Box::new(std::io::sink()), "nowhere".into());
//! let notify = vigil::notice::ignore();
//! let mut lines = Lines {
//!     columns: &columns,
//!     output: OutputFormat::Csv,
//!     writer: writer.as_mut(),
//!     alerts: &mut alerts,
//!     form: None,
//!     key_input: None,
//!     notify: &notify,
//!     steps: 0,
//!     ticks: 0,
//!     samples: Vec::new(),
//! };
//! let mut progress = |_: u64, _: &dyn RowReader| {};
//! let mut drive = Drive {
//!     malformed: Malformed::Skip,
//!     streaming: false,
//!     name: "rows.csv",
//!     lines: true,
//!     notify: &notify,
//!     progress: &mut progress,
//! };
//! let mut counts = Counts::default();
//! let (end, _) = drive::rows(&mut drive, &mut monitors, reader.as_mut(), &mut lines, None, &mut counts)?;
//! assert_eq!(end, End::Done);
//! assert_eq!((counts.rows_read, counts.steps, counts.skipped), (4, 3, 1));
//! drop(lines);
//! writer.flush()?;
//! assert_eq!(std::fs::read_to_string(&out)?, "step,total\n0,1\n1,3\n2,7\n");
//! # std::fs::remove_file(&out)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::checkpoint::{Checkpointable, Checkpointer};
use super::sink::{Columns, Lines};
use super::{Evaluator, Flow, Halt, Malformed, Monitors, StopKind, droppable, row_location};
use crate::batch::OutputBatch;
use crate::monitor::Monitor;
use crate::notice::{Notice, Notify};
use crate::row::{RowError, StepError};
use crate::time::Time;
use crate::trace::{OutputFormat, OutputWriter, RowReader, TraceError, TraceErrorKind};
use crate::value::{Sample, Value};
use std::io::{self, Write};

/// How a run of one source goes (see the module doc).
pub struct Drive<'a> {
    /// What a malformed row does.
    pub malformed: Malformed,
    /// Whether the source is a stream: outputs and alerts are flushed once
    /// no row is waiting, so that a run can sit in an endless pipe and a
    /// killed run has written every row it evaluated.
    pub streaming: bool,
    /// The source's name in messages.
    pub name: &'a str,
    /// Whether the reader's position names the line a row ended on (JSON
    /// lines and CSV, not `.input` blocks).
    pub lines: bool,
    /// Where warnings and skipped rows are said.
    pub notify: &'a Notify,
    /// Called after each row (or batch) with the rows read so far and the
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
fn dropped(malformed: Malformed, notify: &Notify, what: String, n: &mut Counts) {
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
fn trace_end(e: &TraceError) -> End {
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

/// Runs `reader`'s rows one at a time through an [`Evaluator`] into
/// `lines` (whose `columns` say the cells a row has beyond the monitor's
/// inputs). A keyed run's runtime error stops its key only (said through
/// the sink); the run then ends `Done`, and the caller asks
/// [`Evaluator::keys_stopped`] through `stopped`.
pub fn rows(
    drive: &mut Drive<'_>,
    monitor: &mut Monitors,
    reader: &mut dyn RowReader,
    lines: &mut Lines<'_>,
    mut ck: Option<&mut Checkpointer>,
    counts: &mut Counts,
) -> io::Result<(End, bool)> {
    let inputs = match &*monitor {
        Monitors::Single(m) => m.input_count(),
        Monitors::Keyed(m) => m.input_count(),
    };
    // The declared inputs, then any undeclared passed fields (the monitor
    // is given the first `inputs` cells).
    let mut row: Vec<Option<Value>> = vec![None; inputs + lines.columns.extra()];
    let mut evaluator = Evaluator::new(false, inputs);
    let steps = lines.steps;
    let end = loop {
        let next = reader.next_row(&mut row);
        drive.warn(reader);
        match next {
            Ok(true) => {}
            Ok(false) => {
                let alerts = lines.alerts.sink();
                break finish(ck, &*monitor, reader, lines.writer, alerts)?;
            }
            Err(e) if drive.skip_trace_error(&e, reader, counts) => continue,
            Err(e) => break stop(lines.writer, trace_end(&e))?,
        }
        counts.rows_read += 1;
        match evaluator.step(monitor, Time(0), &row, lines)? {
            Flow::Go => {
                if drive.streaming && !reader.row_ready() {
                    lines.writer.flush()?;
                    lines.alerts.flush()?;
                    if ck.is_none() {
                        reader.commit();
                    }
                }
            }
            Flow::Rejected(e) => {
                let at = drive.locate(reader, counts);
                if skip_rejected(drive.malformed, drive.notify, &at, &e, counts) {
                    continue;
                }
                let end = match e {
                    RowError::MissingKey { .. } => End::Stopped(format!("{at}: {e}"), Ended::Trace),
                    e => rejected(&e),
                };
                break stop(lines.writer, end)?;
            }
            Flow::Stop(Halt::Runtime(e)) => {
                break stop(lines.writer, End::Stopped(e.to_string(), Ended::Runtime))?;
            }
            Flow::Stop(halt) => {
                unreachable!(
                    "a row of a spec without periodic streams stops only on an error: {halt:?}"
                )
            }
        }
        (drive.progress)(counts.rows_read, reader);
        if let Some(ck) = ck.as_deref_mut() {
            let alerts = lines.alerts.sink();
            if let Err(message) = ck.rows_done(1, &*monitor, reader, lines.writer, alerts)? {
                break stop(lines.writer, End::Stopped(message, Ended::Failure))?;
            }
        }
    };
    counts.steps += lines.steps - steps;
    Ok((end, evaluator.keys_stopped()))
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
