//! Trace I/O: readers for the `.input`, CSV and JSON-lines trace formats and
//! writers for the `text`, `csv` and `jsonl` output formats.
//!
//! Readers yield one row per step; a row has one cell per declared input (in
//! declaration order): `Some(value)` when the row assigns the input, `None`
//! when it is absent (NoVal). A regular file is memory-mapped (safely against
//! truncation, see `guard.rs`); anything else (a pipe, a FIFO, a terminal) is
//! a stream, read line by line so that a monitor can sit in an endless pipe.
//! Every reader returns each row as soon as the row is complete, and every
//! row that is complete before a malformed line is returned before the error.

use crate::lang::types::Type;
use crate::value::{Sample, Value};
use std::fmt;

/// The declared inputs of a specification, in declaration order.
#[derive(Clone, Debug, Default)]
pub struct InputSchema {
    /// Each cell's name: the inputs, then any extra fields read (a time
    /// field, `--pass` fields).
    pub names: Vec<String>,
    /// Each cell's declared type (`Any` for an extra field).
    pub types: Vec<Type>,
}

/// The trace formats `vigil run --format` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// The Trustworthiness Checker's `.input` format (`0: x = 1` blocks; lists and maps
    /// as `[1, 2]`, `{"k": 1}`, `List(1, 2)` or `Map("k": 1)`).
    Tc,
    /// CSV with a header line naming the inputs (RFC 4180).
    Csv,
    /// One JSON object per line, its fields the inputs.
    Jsonl,
}

/// The output formats `vigil run --output` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// The Trustworthiness Checker's lines (`name[step] = value`).
    Text,
    /// CSV, a header then a row per step.
    Csv,
    /// One JSON object per step.
    Jsonl,
}

/// Bounds a reader enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderOptions {
    /// The most empty steps a `.input` trace may skip at once (`0: …` then
    /// `5: …` skips 4). Each skipped step is a row that the monitor evaluates,
    /// so an unbounded gap (`18446744073709551615: x = 1`) would run for
    /// ever; a larger gap is a malformed trace.
    pub max_step_gap: u64,
}

impl ReaderOptions {
    /// The default bound on step gaps: one million empty steps.
    pub const DEFAULT_MAX_STEP_GAP: u64 = 1_000_000;
}

impl Default for ReaderOptions {
    fn default() -> ReaderOptions {
        ReaderOptions {
            max_step_gap: ReaderOptions::DEFAULT_MAX_STEP_GAP,
        }
    }
}

/// What kind of failure a `TraceError` is; the CLI's exit status follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceErrorKind {
    /// The trace's text is wrong (or the file was truncated while it was
    /// read): exit status 4.
    Malformed,
    /// The bytes could not be read (an I/O error): exit status 1.
    Io,
}

/// A trace that cannot be read further: where, and what is wrong. Rendered
/// as `<file>:<line>:<col>: <message>` (lines and columns count from 1, and
/// always name a real position in the trace).
#[derive(Clone, Debug, PartialEq)]
pub struct TraceError {
    /// The trace's name.
    pub file: String,
    /// The line (from 1).
    pub line: usize,
    /// The column (from 1).
    pub col: usize,
    /// What is wrong.
    pub message: String,
    /// A malformed trace, or one that cannot be read.
    pub kind: TraceErrorKind,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

impl std::error::Error for TraceError {}

/// A trace that cannot be opened (missing, unreadable, a directory). It has
/// no position; rendered as `<file>: <message>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenError {
    /// The trace's path as given.
    pub file: String,
    /// Why it cannot be opened.
    pub message: String,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

impl std::error::Error for OpenError {}

/// What a reader says right after a call of `next_row`
/// ([`RowReader::after_row`]).
#[derive(Debug, Default)]
pub struct AfterRow {
    /// [`RowReader::can_continue`].
    pub can_continue: bool,
    /// [`RowReader::take_reset`].
    pub reset: bool,
    /// [`RowReader::position`].
    pub position: Option<TracePosition>,
    /// [`RowReader::take_warnings`].
    pub warnings: Vec<String>,
}

/// A source of rows.
pub trait RowReader: Send {
    /// Fills `row` (one cell per declared input, already sized by the caller)
    /// with the next step's inputs. Returns `Ok(false)` at the end of the
    /// trace. Every row completed before a malformed line is returned before
    /// the error. After an error the reader must not be used again, unless
    /// [`RowReader::can_continue`] says it may.
    fn next_row(&mut self, row: &mut [Option<Value>]) -> Result<bool, TraceError>;

    /// Whether the reader may be used again after the error `next_row` has
    /// just returned: the malformed row was consumed whole, and the next call
    /// reads the rows after it (`vigil run --on-malformed skip`). JSON lines
    /// and CSV can, for a malformed row (the bad line, or the bad record, is
    /// dropped); nothing can after an I/O error, a truncated file or a bad
    /// CSV header, and `.input` cannot at all, since its step numbers tie
    /// each block to the ones around it.
    fn can_continue(&self) -> bool {
        false
    }

    /// Whether a time reset followed the row just returned: in an `.input`
    /// trace, the comment line `// vigil: time reset` (the Trustworthiness
    /// Checker reads it as a comment), after which step numbers start again.
    /// Taken once. (JSON lines and CSV mark a reset in the time field.)
    fn take_reset(&mut self) -> bool {
        false
    }

    /// Warnings found while reading (for example a declared input missing
    /// from a CSV header). The CLI prints them on standard error.
    fn take_warnings(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Where the reader stands between two rows, if it can tell: reopening
    /// the trace there ([`open_trace_at`]) reads exactly the rows not yet
    /// returned. `None` when it cannot (before a CSV header is read, after
    /// an error, for readers over other sources).
    fn position(&self) -> Option<TracePosition> {
        None
    }

    /// Everything the reader says right after a call of `next_row` (whether
    /// it can continue, the reset, the position, the warnings), written into
    /// `after` in one call. Its default asks the methods above; a caller
    /// through `dyn RowReader` (the read-ahead thread, once per row) makes
    /// one dynamic call instead of four, and the default, compiled for each
    /// reader, has them inlined. `after.warnings` is appended to.
    fn after_row(&mut self, after: &mut AfterRow) {
        after.can_continue = self.can_continue();
        after.reset = self.take_reset();
        after.position = self.position();
        let warnings = self.take_warnings();
        if !warnings.is_empty() {
            after.warnings.extend(warnings);
        }
    }

    /// The time the source itself gave the row just returned, if it gives
    /// one: a live source's stamp (an MQTT message's arrival, a Redis
    /// entry's ID). A merged run stamps a row with it when the row has no
    /// time field of its own.
    fn stamp(&self) -> Option<crate::time::Time> {
        None
    }

    /// Where a live source stands after the row just returned, as the
    /// source names it (a Redis Stream's entry ID): a checkpoint records it
    /// and a resumed run reads on from there. `None` for files (their
    /// position is [`RowReader::position`]) and for sources that keep no
    /// history (MQTT).
    fn resume_token(&self) -> Option<String> {
        None
    }

    /// Says that every row returned so far is done with: its outputs are
    /// written and, in a checkpointed run, in a checkpoint. A Redis
    /// consumer group acknowledges those entries then.
    fn commit(&mut self) {}

    /// Whether the next row is already here (`next_row` will not wait for
    /// it): a run flushes its outputs when it is not, so that a live sink
    /// gets them in batches while rows pour in and at once when they stop.
    fn row_ready(&mut self) -> bool {
        false
    }
}

/// Reads rows one JSON object at a time, by the JSON-lines rule: the
/// messages of a live source, each its own text.
pub struct ObjectRows {
    schema: values::Schema,
    seen: Vec<bool>,
}

impl ObjectRows {
    /// A reader of objects for `schema`; errors name `source`.
    pub fn new(source: &str, schema: &InputSchema) -> ObjectRows {
        let schema = values::Schema::new(source, schema);
        let seen = vec![false; schema.len()];
        ObjectRows { schema, seen }
    }

    /// Fills `row` from the object `text`, the source's message `number`
    /// (an error's line).
    pub fn read(
        &mut self,
        text: &str,
        number: usize,
        row: &mut [Option<Value>],
    ) -> Result<(), TraceError> {
        jsonl::read_object(text, number, &self.schema, &mut self.seen, row)
    }

    /// The value of cell `i` written as text (a Redis entry's field), by
    /// the rule of a CSV cell; errors as a row's.
    pub fn cell(&self, i: usize, text: &str, number: usize) -> Result<Value, TraceError> {
        values::parse_text(text, self.schema.types[i], &self.schema.names[i])
            .map_err(|m| self.schema.error(number, 1, m))
    }

    /// The cell of field `name`, if it is one of the schema's.
    pub fn lookup(&self, name: &str) -> Option<usize> {
        self.schema.lookup(name)
    }

    /// A malformed-row error at message `number`.
    pub fn error(&self, number: usize, message: impl Into<String>) -> TraceError {
        self.schema.error(number, 1, message)
    }
}

/// A place between two rows of a trace: the byte offset (from the trace's
/// start) of the first line not yet needed, and the number of lines before
/// it, so that diagnostics after a resume name the real lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracePosition {
    /// Bytes from the trace's start.
    pub offset: u64,
    /// Lines before it.
    pub line: u64,
}

/// Where to resume a trace: a position a reader gave, and the number of rows
/// read before it (the `.input` reader's step numbers go on from there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResumeAt {
    /// Where the next row starts.
    pub position: TracePosition,
    /// Rows read before it.
    pub rows: u64,
}

/// A regular trace file, read back by offset (for checkpoints, which record
/// a digest of the bytes around their position).
pub struct TraceFile {
    file: std::fs::File,
    /// Where the trace starts in the file (standard input may have been
    /// read partly before vigil).
    origin: u64,
}

impl TraceFile {
    /// The trace's current length in bytes.
    pub fn len(&self) -> std::io::Result<u64> {
        Ok(self.file.metadata()?.len().saturating_sub(self.origin))
    }

    /// Whether the trace is empty now.
    pub fn is_empty(&self) -> std::io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The bytes `from..to` of the trace (fewer if the file is shorter).
    pub fn read_range(&self, from: u64, to: u64) -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0; to.saturating_sub(from) as usize];
        let mut done = 0;
        while done < buf.len() {
            let n = self
                .file
                .read_at(&mut buf[done..], self.origin + from + done as u64)?;
            if n == 0 {
                break;
            }
            done += n;
        }
        buf.truncate(done);
        Ok(buf)
    }
}

/// A sink for the outputs of each step.
pub trait OutputWriter: Send {
    /// Writes the printed outputs of one step; `samples` is aligned with the
    /// output names given when the writer was made.
    fn write_step(&mut self, step: u64, samples: &[Sample]) -> std::io::Result<()>;
    /// Writes the outputs of one step of one key's run (a writer made by
    /// `keyed_writer`, which names the key column).
    fn write_keyed(
        &mut self,
        step: u64,
        key: &crate::value::Key,
        samples: &[Sample],
    ) -> std::io::Result<()>;
    /// Appends to `to` the lines `write_keyed` would write for one step of
    /// one key's run, instead of writing them out, and says whether it did:
    /// the text, CSV and JSON-lines writers do (a scaled run's workers format
    /// each row straight into the buffer they send the writer, rather than
    /// through this writer's buffer and a shared one); other writers do not,
    /// and the caller writes through `write_keyed`.
    fn append_keyed(
        &mut self,
        step: u64,
        key: &crate::value::Key,
        samples: &[Sample],
        to: &mut Vec<u8>,
    ) -> std::io::Result<bool> {
        let _ = (step, key, samples, to);
        Ok(false)
    }
    /// Writes out what is buffered.
    fn flush(&mut self) -> std::io::Result<()>;
    /// For a writer to a live stream (a Redis Stream), how many entries the
    /// run has written there, counting a resumed run's predecessors: after
    /// a `flush`, all of them are stored, and a checkpoint records the
    /// count so that a resumed run writes each entry once. `None` for other
    /// writers.
    fn entries_written(&self) -> Option<u64> {
        None
    }
    /// Writes the outputs of every row of `batch`, as `write_step` would
    /// with the samples of `columns` (the batch's columns of the writer's
    /// names, in their order). Writers override it to format straight from
    /// the batch's lanes.
    fn write_batch(
        &mut self,
        batch: &crate::batch::OutputBatch,
        columns: &[usize],
    ) -> std::io::Result<()> {
        let mut samples = Vec::with_capacity(columns.len());
        for row in batch.rows() {
            samples.clear();
            samples.extend(columns.iter().map(|&c| row.get(c)));
            self.write_step(row.step(), &samples)?;
        }
        Ok(())
    }
}

mod ahead;
mod behind;
mod csv_reader;
mod cut;
mod guard;
mod jsonl;
mod literal;
mod source;
mod tc;
mod values;
mod writer;

pub use ahead::ReadAhead;
pub use behind::{WriteBehind, raw_stdout};
pub(crate) use jsonl::serde_value;
pub(crate) use jsonl::too_deep;
// A scaled run's stream reader (`scale::chunks`) opens its stream as a trace is opened.
#[cfg(feature = "scale")]
pub(crate) use source::open_file;
// The REPL session's rows, and the command line's `--start`.
pub(crate) use values::parse_text;
pub use writer::{
    alert_line, alert_line_with, cell_text, continue_writer, json_text, keyed_writer, make_writer,
    step_column,
};

use std::io::BufRead;

/// An opened trace file.
pub struct OpenTrace {
    /// Its rows.
    pub reader: Box<dyn RowReader>,
    /// The trace is not a regular file (a pipe, a FIFO, `/dev/stdin` on a
    /// pipe, a terminal): its rows arrive over time, so a consumer should
    /// evaluate and write them one at a time rather than in batches.
    pub streaming: bool,
    /// The regular file the trace is, if it is one.
    pub file: Option<TraceFile>,
}

/// Opens a trace for reading: a file, or `-` for standard input. How it is
/// read follows the file's type (see `OpenTrace::streaming`), not its name.
/// Errors while reading name `path` as the file (`<stdin>` for `-`).
pub fn open_trace(
    path: &str,
    format: TraceFormat,
    schema: &InputSchema,
    options: ReaderOptions,
) -> Result<OpenTrace, OpenError> {
    open_trace_at(path, format, schema, options, None)
}

/// Opens a trace as [`open_trace`] does, resuming a regular file at `resume`
/// (a position its reader gave earlier): only the rows after it are read.
/// A stream cannot be repositioned: it is read from where it stands, and
/// skipping rows already seen is the caller's business. The `.input`
/// reader's step numbers go on from `resume.rows`; a CSV file's header is
/// read from its start.
pub fn open_trace_at(
    path: &str,
    format: TraceFormat,
    schema: &InputSchema,
    options: ReaderOptions,
    resume: Option<ResumeAt>,
) -> Result<OpenTrace, OpenError> {
    let name = display_name(path);
    let at = resume.map_or(0, |r| r.position.offset);
    let opened = source::open_source_at(path, at)?;
    let file = opened
        .origin
        .map(|(file, origin)| TraceFile { file, origin });
    let reader = match (resume, &file) {
        (Some(r), Some(f)) if !opened.streaming => {
            resumed_reader(name, opened.bytes, format, schema, options, r, || {
                from_start(f)
            })
        }
        _ => make_reader(name, opened.bytes, format, schema, options),
    };
    Ok(OpenTrace {
        reader,
        streaming: opened.streaming,
        file,
    })
}

/// A trace's name in messages and logs: its path, or `<stdin>` for `-`.
pub fn display_name(path: &str) -> &str {
    if path == "-" { "<stdin>" } else { path }
}

/// How big [`split_points`] makes the parts of a trace file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartSize {
    /// About this many bytes: each part starts at the first row starting at or after a
    /// multiple of it.
    Bytes(u64),
    /// This many lines (a CSV file's header is the first part's first line).
    Lines(u64),
}

/// Where a regular trace file can be split into parts read apart, from `from` (the trace's
/// start, or a row's start a checkpoint recorded) to its end, each part of about `size`: each
/// part's start (and the lines before it), the first being `from`, with the file's length.
/// Every line end is a row boundary in JSON lines (a JSON string holds no raw newline) and in
/// a CSV file without quotes; `None` for a CSV file holding a quote (a quoted field may span
/// lines) and for `.input` (a block spans lines). One pass over the file from `from`, counting
/// line ends (a CSV file's part before `from` is searched for quotes too).
pub fn split_points(
    path: &str,
    format: TraceFormat,
    size: PartSize,
    from: TracePosition,
) -> std::io::Result<Option<(Vec<TracePosition>, u64)>> {
    use std::io::{Read, Seek};
    if format == TraceFormat::Tc {
        return Ok(None);
    }
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    if format == TraceFormat::Csv && from.offset > 0 {
        // A quote before `from` makes the file unsplittable as a whole.
        let mut before = (&mut file).take(from.offset);
        loop {
            let n = read_some(&mut before, &mut buf)?;
            if n == 0 {
                break;
            }
            if memchr::memchr(b'"', &buf[..n]).is_some() {
                return Ok(None);
            }
        }
    }
    file.seek(std::io::SeekFrom::Start(from.offset))?;
    let mut points = vec![from];
    let (mut offset, mut lines) = (from.offset, from.line);
    // Where the part after one starting at (`offset`, `line`) may start, at the earliest.
    let after = |offset: u64, line: u64| match size {
        PartSize::Bytes(part) => (offset / part.max(1) + 1) * part.max(1),
        PartSize::Lines(n) => line + n.max(1),
    };
    let mut next = after(from.offset, from.line);
    loop {
        let n = read_some(&mut file, &mut buf)?;
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        if format == TraceFormat::Csv && memchr::memchr(b'"', chunk).is_some() {
            return Ok(None);
        }
        for at in memchr::memchr_iter(b'\n', chunk) {
            lines += 1;
            let start = offset + at as u64 + 1;
            let due = match size {
                PartSize::Bytes(_) => start >= next,
                PartSize::Lines(_) => lines >= next,
            };
            if due {
                points.push(TracePosition {
                    offset: start,
                    line: lines,
                });
                next = after(start, lines);
            }
        }
        offset += n as u64;
    }
    // A part would start at the end: it has no rows.
    if points.len() > 1 && points.last().is_some_and(|p| p.offset >= offset) {
        points.pop();
    }
    Ok(Some((points, offset)))
}

/// Reads what `r` has into `buf` (0 at its end), again when a signal interrupted the read.
pub(crate) fn read_some(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            done => return done,
        }
    }
}

pub use cut::RowCutter;

/// A reader of `bytes`, a piece of the trace `name` cut at row boundaries (see [`RowCutter`])
/// starting at `at`, whose first piece is `head`: its rows have their real line numbers, and a
/// CSV piece after the first reads its header from `head`.
pub fn open_trace_chunk(
    name: &str,
    bytes: std::sync::Arc<[u8]>,
    head: std::sync::Arc<[u8]>,
    format: TraceFormat,
    schema: &InputSchema,
    options: ReaderOptions,
    at: TracePosition,
) -> Box<dyn RowReader> {
    let source: Box<dyn BufRead + Send> = Box::new(std::io::Cursor::new(bytes));
    if at.offset == 0 {
        return make_reader(name, source, format, schema, options);
    }
    let at = ResumeAt {
        position: at,
        rows: 0,
    };
    let header = || -> Box<dyn BufRead + Send> { Box::new(std::io::Cursor::new(head)) };
    resumed_reader(name, source, format, schema, options, at, header)
}

/// Opens the part of a regular trace file from `at` (a row's start, as
/// [`split_points`] gives them) to `end` (the next part's start, or the
/// file's length): its reader returns the rows starting in it, with their
/// real line numbers, and ends at `end`. A CSV file's header is read from
/// its start (the first part reads it as its first record).
pub fn open_trace_part(
    path: &str,
    format: TraceFormat,
    schema: &InputSchema,
    options: ReaderOptions,
    at: TracePosition,
    end: u64,
) -> Result<Box<dyn RowReader>, OpenError> {
    use std::io::Read;
    let opened = source::open_source_at(path, at.offset)?;
    let file = match opened.origin {
        Some((file, origin)) if !opened.streaming => TraceFile { file, origin },
        _ => {
            return Err(OpenError {
                file: path.to_string(),
                message: "a trace read in parts must be a regular file".into(),
            });
        }
    };
    let bytes: Box<dyn BufRead + Send> = Box::new(opened.bytes.take(end.saturating_sub(at.offset)));
    if at.offset == 0 {
        return Ok(make_reader(path, bytes, format, schema, options));
    }
    let resume = ResumeAt {
        position: at,
        rows: 0,
    };
    Ok(resumed_reader(
        path,
        bytes,
        format,
        schema,
        options,
        resume,
        || from_start(&file),
    ))
}

/// A reader over `source`, which starts at `at.position` of a trace whose
/// earlier rows were read before; a CSV trace's header is read again from
/// `start` (the trace's start).
fn resumed_reader(
    name: &str,
    source: Box<dyn BufRead + Send>,
    format: TraceFormat,
    schema: &InputSchema,
    options: ReaderOptions,
    at: ResumeAt,
    start: impl FnOnce() -> Box<dyn BufRead + Send>,
) -> Box<dyn RowReader> {
    let prepared = values::Schema::new(name, schema);
    let line = usize::try_from(at.position.line).unwrap_or(usize::MAX);
    let lines = source::Lines::resumed(name, source, at.position.offset, line);
    match format {
        TraceFormat::Tc => Box::new(tc::TcReader::resumed(lines, prepared, options, at.rows)),
        TraceFormat::Jsonl => Box::new(jsonl::JsonlReader::new(lines, prepared)),
        TraceFormat::Csv => {
            // The header is the first record: read it again from the start.
            let header = source::Lines::new(name, start());
            Box::new(csv_reader::CsvReader::resumed(lines, header, prepared))
        }
    }
}

/// A regular trace file read from its start, apart from the reader's handle.
fn from_start(file: &TraceFile) -> Box<dyn BufRead + Send> {
    Box::new(std::io::BufReader::new(FileFrom {
        file: file.file.try_clone(),
        at: file.origin,
    }))
}

/// Reads a file from an offset by `pread`, leaving the handle's own
/// position alone (it is shared with the handle the trace is mapped from).
struct FileFrom {
    file: std::io::Result<std::fs::File>,
    at: u64,
}

impl std::io::Read for FileFrom {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let file = self
            .file
            .as_ref()
            .map_err(|e| std::io::Error::new(e.kind(), e.to_string()))?;
        let n = file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Opens a trace for reading with the default bounds; see [`open_trace`].
pub fn open_reader(
    path: &str,
    format: TraceFormat,
    schema: &InputSchema,
) -> Result<Box<dyn RowReader>, OpenError> {
    Ok(open_trace(path, format, schema, ReaderOptions::default())?.reader)
}

/// A reader over a trace held in memory; `name` is the file name used in
/// error locations. (It cannot fail; the `Result` is kept for callers
/// written against earlier versions.)
pub fn reader_from_bytes(
    name: &str,
    bytes: Vec<u8>,
    format: TraceFormat,
    schema: &InputSchema,
) -> Result<Box<dyn RowReader>, TraceError> {
    Ok(make_reader(
        name,
        source::bytes_source(bytes),
        format,
        schema,
        ReaderOptions::default(),
    ))
}

/// A reader over any buffered byte stream (a socket, a pipe, a test
/// script). Rows are returned as soon as their lines are complete; `name`
/// is the file name used in error locations. (It cannot fail; the `Result`
/// is kept for callers written against earlier versions.)
pub fn reader_from_bufread(
    name: &str,
    source: Box<dyn BufRead + Send>,
    format: TraceFormat,
    schema: &InputSchema,
) -> Result<Box<dyn RowReader>, TraceError> {
    Ok(make_reader(
        name,
        source,
        format,
        schema,
        ReaderOptions::default(),
    ))
}

/// A reader over any buffered byte stream, with explicit bounds.
pub fn make_reader(
    name: &str,
    source: Box<dyn BufRead + Send>,
    format: TraceFormat,
    schema: &InputSchema,
    options: ReaderOptions,
) -> Box<dyn RowReader> {
    let prepared = values::Schema::new(name, schema);
    let lines = source::Lines::new(name, source);
    match format {
        TraceFormat::Tc => Box::new(tc::TcReader::new(lines, prepared, options)),
        TraceFormat::Csv => Box::new(csv_reader::CsvReader::new(lines, prepared)),
        TraceFormat::Jsonl => Box::new(jsonl::JsonlReader::new(lines, prepared)),
    }
}

/// The trace format implied by a file name's extension, for
/// `--format auto`: `.input`, `.in`, `.tc` → Tc; `.csv` → Csv; `.jsonl`,
/// `.ndjson`, `.json` → Jsonl. Case is ignored. `None` when the extension
/// is missing or unknown (standard input, for instance).
pub fn format_from_path(path: &str) -> Option<TraceFormat> {
    let ext = std::path::Path::new(path)
        .extension()?
        .to_str()?
        .to_ascii_lowercase();
    match ext.as_str() {
        "input" | "in" | "tc" => Some(TraceFormat::Tc),
        "csv" => Some(TraceFormat::Csv),
        "jsonl" | "ndjson" | "json" => Some(TraceFormat::Jsonl),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::types::Type;
    use std::io::Write;

    #[test]
    fn formats_from_extensions() {
        assert_eq!(format_from_path("a/b.input"), Some(TraceFormat::Tc));
        assert_eq!(format_from_path("b.in"), Some(TraceFormat::Tc));
        assert_eq!(format_from_path("b.TC"), Some(TraceFormat::Tc));
        assert_eq!(format_from_path("b.csv"), Some(TraceFormat::Csv));
        assert_eq!(format_from_path("b.jsonl"), Some(TraceFormat::Jsonl));
        assert_eq!(format_from_path("b.ndjson"), Some(TraceFormat::Jsonl));
        assert_eq!(format_from_path("b.json"), Some(TraceFormat::Jsonl));
        assert_eq!(format_from_path("-"), None);
        assert_eq!(format_from_path("trace"), None);
        assert_eq!(format_from_path("trace.txt"), None);
    }

    fn temp_file(name: &str, contents: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("vigil-{}-{name}", std::process::id()));
        std::fs::File::create(&path)
            .unwrap()
            .write_all(contents)
            .unwrap();
        path
    }

    #[test]
    fn split_points_cut_by_bytes_or_lines_from_a_position() {
        let path = temp_file("split.jsonl", b"1\n2\n3\n4\n5\n");
        let path = path.to_str().unwrap();
        let at = |offset, line| TracePosition { offset, line };
        let split = |size, from| split_points(path, TraceFormat::Jsonl, size, from).unwrap();
        let start = at(0, 0);
        // Lines start at 0, 2, 4, 6, 8; the file is 10 bytes.
        assert_eq!(
            split(PartSize::Bytes(3), start),
            Some((vec![at(0, 0), at(4, 2), at(6, 3)], 10))
        );
        assert_eq!(
            split(PartSize::Lines(2), start),
            Some((vec![at(0, 0), at(4, 2), at(8, 4)], 10))
        );
        assert_eq!(
            split(PartSize::Lines(2), at(4, 2)),
            Some((vec![at(4, 2), at(8, 4)], 10))
        );
        assert_eq!(
            split(PartSize::Lines(9), at(10, 5)),
            Some((vec![at(10, 5)], 10))
        );
        // A quote anywhere in a CSV file, before the position too, makes it unsplittable.
        let csv = temp_file("split.csv", b"x\n\"1\"\n2\n3\n");
        let csv = csv.to_str().unwrap();
        let from = at(6, 2);
        assert_eq!(
            split_points(csv, TraceFormat::Csv, PartSize::Lines(1), from).unwrap(),
            None
        );
        std::fs::remove_file(path).unwrap();
        std::fs::remove_file(csv).unwrap();
    }

    #[test]
    fn files_in_every_format_read_the_same_rows() {
        let schema = InputSchema {
            names: vec!["x".into(), "s".into()],
            types: vec![Type::Float, Type::Str],
        };
        let traces: [(&str, &[u8]); 3] = [
            ("t.input", b"0: x = 1\n   s = \"a b\"\n2: x = 2.5\n"),
            ("t.csv", b"x,s\n1,a b\n,\n2.5,\n"),
            ("t.jsonl", b"{\"x\": 1, \"s\": \"a b\"}\n{}\n{\"x\": 2.5}\n"),
        ];
        for (name, bytes) in traces {
            let path = temp_file(name, bytes);
            let path_str = path.to_str().unwrap();
            let format = format_from_path(path_str).unwrap();
            let mut r = open_reader(path_str, format, &schema).unwrap();
            let mut row = vec![None, None];
            let mut rows = Vec::new();
            while r.next_row(&mut row).unwrap() {
                rows.push(row.clone());
            }
            assert_eq!(
                rows,
                [
                    vec![Some(Value::Float(1.0)), Some(Value::Str("a b".into()))],
                    vec![None, None],
                    vec![Some(Value::Float(2.5)), None],
                ],
                "{name}"
            );
            std::fs::remove_file(&path).unwrap();
        }
    }

    #[test]
    fn errors_name_the_file_path() {
        let schema = InputSchema {
            names: vec!["x".into()],
            types: vec![Type::Int],
        };
        let path = temp_file("bad.jsonl", b"{\"x\": true}\n");
        let path_str = path.to_str().unwrap();
        let mut r = open_reader(path_str, TraceFormat::Jsonl, &schema).unwrap();
        let e = r.next_row(&mut [None]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{path_str}:1:7: expected Int for input `x`, found Bool true")
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn empty_files_are_empty_traces() {
        let schema = InputSchema::default();
        for (name, format) in [
            ("e.input", TraceFormat::Tc),
            ("e.csv", TraceFormat::Csv),
            ("e.jsonl", TraceFormat::Jsonl),
        ] {
            let path = temp_file(name, b"");
            let mut r = open_reader(path.to_str().unwrap(), format, &schema).unwrap();
            assert!(!r.next_row(&mut []).unwrap(), "{name}");
            std::fs::remove_file(&path).unwrap();
        }
    }

    /// Reads every row and the final error, noting the reader's position
    /// before each row.
    #[allow(clippy::type_complexity)]
    fn rows_and_positions(
        mut r: Box<dyn RowReader>,
        width: usize,
    ) -> (
        Vec<Vec<Option<Value>>>,
        Vec<Option<TracePosition>>,
        Option<String>,
    ) {
        let mut row = vec![None; width];
        let (mut rows, mut positions) = (Vec::new(), vec![r.position()]);
        loop {
            match r.next_row(&mut row) {
                Ok(true) => {
                    rows.push(row.clone());
                    positions.push(r.position());
                }
                Ok(false) => return (rows, positions, None),
                Err(e) => return (rows, positions, Some(e.to_string())),
            }
        }
    }

    /// A reader reopened at any position it gave reads exactly the rows
    /// after it, with the same line numbers in its diagnostics: `.input`
    /// blocks, gaps, comments and a malformed header at the end; CSV quoted
    /// fields over several lines, blank lines and a bad cell; JSON lines
    /// with blank lines and a bad value.
    #[test]
    fn readers_resume_at_the_positions_they_give() {
        let schema = InputSchema {
            names: vec!["x".into(), "s".into()],
            types: vec![Type::Int, Type::Str],
        };
        let traces: [(&str, &[u8]); 3] = [
            (
                "r.input",
                b"// start\n0: x = 1\n   s = \"a\"\n\n1:\n4: x = 2\n// c\n5: s = \"b\"\n   x = 3\n9:\n10: x = 4\n9: x = 5\n",
            ),
            (
                "r.csv",
                b"\xEF\xBB\xBFs,x\n\"a\nb\",1\n\n,2\n\"c\",\n\n\"d\"\"\",3\n,zz\n",
            ),
            (
                "r.jsonl",
                b"{\"x\": 1}\n\n{\"s\": \"a\"}\n{}\n\n{\"x\": 2, \"s\": \"b\"}\n{\"x\": true}\n",
            ),
        ];
        for (name, bytes) in traces {
            let path = temp_file(name, bytes);
            let path_str = path.to_str().unwrap();
            let format = format_from_path(path_str).unwrap();
            let open = |resume| {
                open_trace_at(path_str, format, &schema, ReaderOptions::default(), resume)
                    .unwrap()
                    .reader
            };
            let (rows, positions, error) = rows_and_positions(open(None), 2);
            assert!(
                rows.len() >= 4 && error.is_some(),
                "{name}: {rows:?} {error:?}"
            );
            for (k, position) in positions.iter().enumerate() {
                let Some(position) = *position else {
                    // Only a CSV reader before its header has no position.
                    assert!(
                        k == 0 && name == "r.csv",
                        "{name}: no position after {k} rows"
                    );
                    continue;
                };
                let resume = ResumeAt {
                    position,
                    rows: k as u64,
                };
                let (rest, _, rest_error) = rows_and_positions(open(Some(resume)), 2);
                assert_eq!(
                    rest,
                    rows[k..],
                    "{name}: resumed after {k} rows at {position:?}"
                );
                assert_eq!(rest_error, error, "{name}: resumed after {k} rows");
            }
            std::fs::remove_file(&path).unwrap();
        }
    }
}
