//! Checkpoints of `vigil run`: `--checkpoint FILE --checkpoint-every N`, `--resume FILE` and
//! `--output-file FILE`.
//!
//! A checkpoint is the monitor's [`Snapshot`] (a [`KeyedSnapshot`] of every
//! live key with `--key`) plus where the run stood: rows
//! consumed, the input's byte offset and line (for a regular file, so a resume
//! maps the file from there instead of reading it again) with a SHA-256 of the
//! bytes on both sides of the trace's start and of the position, and the
//! output file's length. It is written between rows, every N rows and at the
//! clean end of the input, atomically: to a temporary file in the same
//! directory, fsynced, renamed over the checkpoint, and the directory fsynced.
//!
//! Exactly-once output: before a checkpoint records the output file's length,
//! the outputs of every row before it are flushed and fsynced; a resume
//! truncates the file to that length and appends. Rows evaluated after the
//! last checkpoint of a killed run are therefore written again, once, by the
//! resumed run, and the file is what an uninterrupted run writes. Outputs on
//! standard output cannot be taken back: there the rows after the last
//! checkpoint are written again (at least once; the step numbers tell them).
//!
//! The file: `VIGILCKP`, the format version, the run's description's length
//! and SHA-256 (the snapshot's envelope), the description (postcard), then
//! the snapshot in its binary form, which has a length and SHA-256 of its
//! own (its magic tells a keyed snapshot from a plain one), and nothing
//! after it. The two parts are sealed apart so that a keyed snapshot can be
//! written key by key straight into the file (`KeyedMonitor::write_snapshot`)
//! and read back key by key (`KeyedSnapshotReader`): a checkpoint of a
//! million keys never holds them all in memory besides the monitor, either
//! way. (Format 3 sealed both parts as one body, which had to be whole in
//! memory to be hashed before it was written.)

use super::{Exit, RunArgs, error};
use crate::keyed::KeyedMonitor;
use crate::monitor::{Monitor, Spec};
use crate::snapshot::{self, KeyedSnapshotReader, Snapshot, SnapshotError};
use crate::trace::{
    self, OpenError, OutputFormat, OutputWriter, ReaderOptions, ResumeAt, RowReader, TraceFile,
    TraceFormat, TracePosition,
};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::Path;

/// The first bytes of a checkpoint file.
const MAGIC: [u8; 8] = *b"VIGILCKP";

/// The checkpoint format's version: it changes with the description's
/// fields or the file's layout (the snapshot inside has a version of its
/// own). Version 3 added the alerts file's length; version 4 seals the
/// description and the snapshot apart (see the module's docs).
const VERSION: u32 = 4;

/// How many bytes of the trace, at its start and before the position, a
/// checkpoint digests to recognise the trace when resuming.
const WINDOW: u64 = 64 * 1024;

/// The trace formats, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Format {
    Tc,
    Csv,
    Jsonl,
}

impl From<TraceFormat> for Format {
    fn from(f: TraceFormat) -> Format {
        match f {
            TraceFormat::Tc => Format::Tc,
            TraceFormat::Csv => Format::Csv,
            TraceFormat::Jsonl => Format::Jsonl,
        }
    }
}

/// The output formats, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Output {
    Text,
    Csv,
    Jsonl,
}

impl From<OutputFormat> for Output {
    fn from(f: OutputFormat) -> Output {
        match f {
            OutputFormat::Text => Output::Text,
            OutputFormat::Csv => Output::Csv,
            OutputFormat::Jsonl => Output::Jsonl,
        }
    }
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Tc => "`.input`",
        Format::Csv => "CSV",
        Format::Jsonl => "JSON-lines",
    }
}

fn output_name(f: Output) -> &'static str {
    match f {
        Output::Text => "text",
        Output::Csv => "csv",
        Output::Jsonl => "jsonl",
    }
}

/// Where a checkpointed run stood, besides the monitor's state.
#[derive(Debug, Serialize, Deserialize)]
struct Info {
    /// The specification's path, for messages (the snapshot's fingerprint is
    /// what is checked).
    spec: String,
    input: InputInfo,
    output: OutputInfo,
}

#[derive(Debug, Serialize, Deserialize)]
struct InputInfo {
    /// The input's path as given (`-` for standard input), for messages.
    path: String,
    format: Format,
    /// Rows consumed: the snapshot's step.
    rows: u64,
    /// For a regular file whose reader knew its position: where the next
    /// row starts.
    file: Option<FileInfo>,
    /// For a live source that keeps a history (a Redis Stream): the last
    /// entry consumed.
    token: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct FileInfo {
    /// Bytes from the trace's start, and lines before it.
    offset: u64,
    line: u64,
    /// SHA-256 of the trace's first `min(WINDOW, offset)` bytes, and of the
    /// `min(WINDOW, offset)` bytes before `offset`.
    head: [u8; 32],
    tail: [u8; 32],
}

#[derive(Debug, Serialize, Deserialize)]
struct OutputInfo {
    format: Output,
    /// `None`: standard output (or a live sink).
    file: Option<OutputFileInfo>,
    /// For a live sink that keeps a history (a Redis Stream): its URL and
    /// the entries written to it.
    stream: Option<(String, u64)>,
    /// The `--alerts` file, kept exactly once like the output file.
    alerts: Option<OutputFileInfo>,
}

#[derive(Debug, Serialize, Deserialize)]
struct OutputFileInfo {
    path: String,
    /// The file's length once the outputs of every row before the
    /// checkpoint were written and synced.
    len: u64,
}

/// A checkpoint's description, read from its file (its monitor state is
/// `Saved`, read apart).
struct Loaded {
    info: Info,
}

/// The monitor state a checkpoint holds: a plain snapshot, or a keyed one
/// checked and ready to be read key by key from the file.
enum Saved {
    Single(Snapshot),
    Keyed(KeyedSnapshotReader<'static>),
}

/// The monitor `vigil run` drives: a plain one, or a keyed one (`--key`).
pub(super) enum Runner {
    Single(Box<Monitor>),
    Keyed(Box<KeyedMonitor>),
}

/// A writer a snapshot can be streamed into (its header is patched with a
/// seek at the end).
pub(super) trait WriteSeek: Write + Seek {}

impl<W: Write + Seek> WriteSeek for W {}

/// A monitor a checkpoint can be taken of.
pub(super) trait Checkpointable {
    /// Rows evaluated (over every key).
    fn rows(&self) -> u64;
    /// Writes the state to checkpoint in its binary form into `out` (a
    /// keyed monitor key by key); an error of kind `InvalidData` says why
    /// it cannot be resumed from (then no checkpoint is written).
    fn write_state(&self, out: &mut dyn WriteSeek) -> io::Result<()>;
    /// The state's binary form in memory (a scaled-out worker's snapshot
    /// file), or why it cannot be resumed from.
    #[cfg(feature = "scale")]
    fn state_bytes(&self) -> Result<Vec<u8>, String> {
        let mut out = io::Cursor::new(Vec::new());
        self.write_state(&mut out).map_err(|e| e.to_string())?;
        Ok(out.into_inner())
    }
}

/// Why a run holding a function value is not checkpointed: a resume from
/// it would be refused.
const HOLDS_FUNCTION: &str = "the run holds a function value in a stream or its history, which a checkpoint cannot keep (a resume would be refused)";

impl Checkpointable for Monitor {
    fn rows(&self) -> u64 {
        self.steps()
    }

    fn write_state(&self, out: &mut dyn WriteSeek) -> io::Result<()> {
        let snapshot = self.snapshot();
        if snapshot.holds_function() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, HOLDS_FUNCTION));
        }
        out.write_all(&snapshot.to_bytes())
    }
}

impl Checkpointable for KeyedMonitor {
    fn rows(&self) -> u64 {
        KeyedMonitor::rows(self)
    }

    fn write_state(&self, out: &mut dyn WriteSeek) -> io::Result<()> {
        self.write_snapshot(out).map_err(|e| match e.kind() {
            // A key's run holds a function value: said in a checkpoint's words.
            io::ErrorKind::InvalidData => {
                io::Error::new(io::ErrorKind::InvalidData, HOLDS_FUNCTION)
            }
            _ => e,
        })
    }
}

impl Runner {
    pub(super) fn output_names(&self) -> Vec<&str> {
        match self {
            Runner::Single(m) => m.output_names(),
            Runner::Keyed(m) => m.output_names(),
        }
    }

    pub(super) fn stats(&self) -> crate::monitor::Stats {
        match self {
            Runner::Single(m) => m.stats(),
            Runner::Keyed(m) => m.stats(),
        }
    }
}

/// A checkpoint file's envelope error, in a checkpoint's words.
fn envelope_error(e: SnapshotError) -> String {
    match e {
        SnapshotError::NotASnapshot => "not a vigil checkpoint".to_string(),
        SnapshotError::Version { found, supported } if found < supported => format!(
            "checkpoint format version {found} is not supported (this vigil reads version {supported}): it was written by an earlier vigil; start the run afresh, or resume it with the vigil that wrote it"
        ),
        SnapshotError::Version { found, supported } => format!(
            "checkpoint format version {found} is not supported (this vigil reads version {supported})"
        ),
        SnapshotError::Truncated { expected, found } => format!(
            "the checkpoint is truncated: its header announces {expected} bytes of data, {found} are present"
        ),
        SnapshotError::Checksum => {
            "the checkpoint is corrupt: its contents do not match their checksum".to_string()
        }
        other => other.to_string().replace("snapshot", "checkpoint"),
    }
}

/// An error of the snapshot inside a checkpoint file: damage is the
/// checkpoint's (`the checkpoint is corrupt: …`), a version the snapshot's.
fn snapshot_error(e: SnapshotError) -> String {
    match e {
        SnapshotError::Version { .. } => e.to_string(),
        e => envelope_error(e),
    }
}

/// Reads a checkpoint from `file`: its description (sealed, checked
/// whole) and its snapshot — a plain one read whole, a keyed one checked
/// (its checksum read through once) and left in the file to be read key by
/// key when the monitor is built.
fn decode(mut file: File) -> Result<(Loaded, Saved), String> {
    let read = |e: io::Error| format!("cannot read it: {e}");
    let corrupt = |m: &str| format!("the checkpoint is corrupt: {m}");
    let mut sealed = Vec::with_capacity(snapshot::HEADER_LEN);
    (&mut file)
        .take(snapshot::HEADER_LEN as u64)
        .read_to_end(&mut sealed)
        .map_err(read)?;
    if sealed.len() == snapshot::HEADER_LEN {
        // The description's length, from the header; `take` reads no more
        // than the file has, whatever the header claims.
        let len = u64::from_le_bytes(sealed[12..20].try_into().map_err(|_| corrupt("header"))?);
        (&mut file)
            .take(len)
            .read_to_end(&mut sealed)
            .map_err(read)?;
    }
    let info = snapshot::unseal(&sealed, &MAGIC, VERSION).map_err(envelope_error)?;
    let info: Info = snapshot::decode_postcard(info).map_err(envelope_error)?;
    let mut magic = Vec::with_capacity(8);
    let start = file.stream_position().map_err(read)?;
    (&mut file).take(8).read_to_end(&mut magic).map_err(read)?;
    file.seek(io::SeekFrom::Start(start)).map_err(read)?;
    let (state, rows) = if magic == snapshot::KEYED_MAGIC {
        let keyed = KeyedSnapshotReader::new(file).map_err(snapshot_error)?;
        let rows = keyed.rows();
        (Saved::Keyed(keyed), rows)
    } else if magic.len() < 8 {
        return Err(
            "the checkpoint is truncated: it ends before the monitor's snapshot".to_string(),
        );
    } else {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(read)?;
        let single = Snapshot::from_bytes(&bytes).map_err(|e| match e {
            SnapshotError::NotASnapshot => corrupt("no snapshot after its description"),
            e => snapshot_error(e),
        })?;
        let rows = single.step();
        (Saved::Single(single), rows)
    };
    if rows != info.input.rows {
        return Err(corrupt("its row count and its snapshot's differ"));
    }
    Ok((Loaded { info }, state))
}

/// The digests of the trace's bytes around `offset` (see `FileInfo`).
fn digests(trace: &TraceFile, offset: u64) -> io::Result<([u8; 32], [u8; 32])> {
    let w = WINDOW.min(offset);
    let head = trace.read_range(0, w)?;
    let tail = trace.read_range(offset - w, offset)?;
    Ok((snapshot::sha256(&head), snapshot::sha256(&tail)))
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, fsynced, renamed over `path`, then the directory fsynced, so a
/// crash leaves the old checkpoint or the new one, never a mix. (Only a
/// scaled-out run writes whole files so.)
#[cfg(feature = "scale")]
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomically_with(path, |out| out.write_all(bytes))
}

/// As `write_atomically`, the bytes written by `write` into a buffered
/// writer on the temporary file (which it may seek in). A failure removes
/// the temporary file and leaves any earlier checkpoint as it was.
pub(super) fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut io::BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other("the path names no file"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".tmp");
    let tmp = dir.join(tmp_name);
    let written = File::create(&tmp).and_then(|f| {
        let mut out = io::BufWriter::with_capacity(1 << 20, f);
        write(&mut out)?;
        let f = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        f.sync_all()
    });
    // A temporary file that could not be written whole (a full disk, a run
    // holding a function value found halfway) is taken away, not left
    // behind as a partial `.FILE.tmp`.
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    File::open(dir)?.sync_all()
}

/// Writes checkpoints of one run.
pub(super) struct Checkpointer {
    path: String,
    every: u64,
    /// Rows since the last checkpoint.
    since: u64,
    spec: String,
    input: String,
    format: Format,
    trace: Option<TraceFile>,
    output_format: Output,
    /// The output file's path and a handle to sync it through.
    output: Option<(String, File)>,
    /// The alerts file's path and a handle to sync it through.
    alerts: Option<(String, File)>,
    /// The live sink's URL (`--output redis://…`).
    sink: Option<String>,
}

impl Checkpointer {
    /// How many rows may run before the next checkpoint is due (a batch
    /// ends there, so checkpoints fall between rows).
    pub(super) fn rows_until_due(&self) -> u64 {
        self.every - self.since
    }

    /// Accounts for `n` rows whose outputs were written, and checkpoints
    /// when one is due. `Err` is an output error; `Ok(Err(message))` a
    /// checkpoint that could not be written.
    pub(super) fn rows_done(
        &mut self,
        n: u64,
        monitor: &dyn Checkpointable,
        reader: &mut dyn RowReader,
        writer: &mut dyn OutputWriter,
        alerts: Option<&mut dyn Write>,
    ) -> io::Result<Result<(), String>> {
        self.since += n;
        if self.since < self.every {
            return Ok(Ok(()));
        }
        self.write(monitor, reader, writer, alerts)
    }

    /// Writes a checkpoint now: flushes and syncs the outputs (and the
    /// alerts written through `alerts`), then writes the monitor's state
    /// with the input and output positions.
    pub(super) fn write(
        &mut self,
        monitor: &dyn Checkpointable,
        reader: &mut dyn RowReader,
        writer: &mut dyn OutputWriter,
        alerts: Option<&mut dyn Write>,
    ) -> io::Result<Result<(), String>> {
        self.since = 0;
        writer.flush()?;
        if let Some(alerts) = alerts {
            alerts.flush()?;
        }
        let synced = |file: &Option<(String, File)>, what: &str| match file {
            None => Ok(None),
            Some((path, f)) => match f.sync_data().and_then(|()| f.metadata()) {
                Ok(m) => Ok(Some(OutputFileInfo {
                    path: path.clone(),
                    len: m.len(),
                })),
                Err(e) => Err(format!(
                    "cannot write checkpoint `{}`: cannot sync the {what} `{path}`: {e}",
                    self.path
                )),
            },
        };
        let output = match synced(&self.output, "output file") {
            Ok(info) => info,
            Err(message) => return Ok(Err(message)),
        };
        let alerts = match synced(&self.alerts, "alerts file") {
            Ok(info) => info,
            Err(message) => return Ok(Err(message)),
        };
        let file = match (&self.trace, reader.position()) {
            (Some(trace), Some(TracePosition { offset, line })) => match digests(trace, offset) {
                Ok((head, tail)) => Some(FileInfo {
                    offset,
                    line,
                    head,
                    tail,
                }),
                Err(e) => {
                    return Ok(Err(format!(
                        "cannot write checkpoint `{}`: cannot read the input back: {e}",
                        self.path
                    )));
                }
            },
            _ => None,
        };
        let info = Info {
            spec: self.spec.clone(),
            input: InputInfo {
                path: self.input.clone(),
                format: self.format,
                rows: monitor.rows(),
                file,
                token: reader.resume_token(),
            },
            output: OutputInfo {
                format: self.output_format,
                file: output,
                stream: (self.sink.clone()).zip(writer.entries_written()),
                alerts,
            },
        };
        let info = postcard::to_stdvec(&info).expect("a checkpoint's description serialises");
        let info = snapshot::seal(&MAGIC, VERSION, &info);
        // The monitor's state goes straight into the file (a keyed one key
        // by key), never whole into memory.
        let written = write_atomically_with(Path::new(&self.path), |out| {
            out.write_all(&info)?;
            monitor.write_state(out)
        })
        .map_err(|e| format!("cannot write checkpoint `{}`: {e}", self.path));
        // The rows are in a checkpoint: a consumer group may let them go.
        if written.is_ok() {
            reader.commit();
        }
        Ok(written)
    }
}

/// What `vigil run` runs once its options are settled: the monitor (fresh,
/// or restored from a checkpoint), the trace's reader (past the rows a
/// checkpoint consumed), the writer, and the checkpointer if asked for.
pub(super) struct Prepared {
    pub(super) monitor: Runner,
    pub(super) reader: Box<dyn RowReader>,
    pub(super) streaming: bool,
    pub(super) writer: Box<dyn OutputWriter>,
    pub(super) checkpoints: Option<Checkpointer>,
    /// The `--alerts` file (a path, not `-`), created, or cut back to the
    /// length the checkpoint recorded and appended to.
    pub(super) alerts: Option<File>,
}

/// Sets up a run: resumes from `--resume` if given (every check of the
/// checkpoint against this run is an error with exit status 1), opens the
/// trace and the output, and prepares checkpoints.
/// The rows from which `vigil run` treats a regular trace file's run as hot
/// from its first row (see `prepare`), counted as the file's bytes over 16
/// bytes for each input and one more: a guess that undercounts the rows of
/// most traces, so that a file is called hot only when it surely is.
const HOT_FILE_ROWS: u64 = 4096;

pub(super) fn prepare(
    args: &RunArgs,
    spec: &Spec,
    format: TraceFormat,
    output: OutputFormat,
    options: ReaderOptions,
    view: &super::ops::View,
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
        l.info.input.file.as_ref().map(|f| ResumeAt {
            position: TracePosition {
                offset: f.offset,
                line: f.line,
            },
            rows: l.info.input.rows,
        })
    });
    // Undeclared `--pass` fields are read as untyped inputs after the
    // declared ones; the rows given to the monitor stop before them.
    let schema = super::ops::read_schema(args, spec);
    let width = schema.names.len();
    let live = super::live::Options::of(args, None);
    let resume_live = super::live::Resume {
        token: loaded
            .as_ref()
            .and_then(|(_, l)| l.info.input.token.clone()),
        written: (loaded.as_ref()).and_then(|(_, l)| l.info.output.stream.as_ref().map(|s| s.1)),
    };
    let live_input = super::live::is_url(&args.input[0]);
    let opened = if live_input {
        // One reader: an input read as several sources is a merged run's.
        super::live::open_one(&args.input[0], &schema, &live, &resume_live).map_err(fail)?
    } else {
        trace::open_trace_at(&args.input[0], format, &schema, options, resume_at)
            .map_err(|e: OpenError| fail(e.to_string()))?
    };
    let mut reader = opened.reader;
    if let Some((path, l)) = &loaded {
        let at_position = match (&opened.file, &l.info.input.file) {
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
                malformed: args.on_malformed != super::OnMalformed::Stop,
                key: match &monitor {
                    Runner::Keyed(m) => Some(m.key_index()),
                    Runner::Single(_) => None,
                },
            };
            skip_rows(reader.as_mut(), width, l.info.input.rows, policy).map_err(|e| match e {
                Skip::Short(m) => fail(format!("cannot resume from `{path}`: {m}")),
                Skip::Trace(e) => {
                    error(&e);
                    super::trace_exit(&e)
                }
            })?;
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
            let writer = super::live::open_output(url, names, &live, &resume_live).map_err(fail)?;
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
    let mut checkpoints = args.checkpoint.as_ref().map(|path| Checkpointer {
        path: path.clone(),
        every: args.checkpoint_every,
        since: 0,
        spec: args.spec.clone(),
        input: super::live::redact(&args.input[0]),
        format: format.into(),
        trace: opened.file,
        output_format: output.into(),
        output: output_file,
        alerts: alerts_sync,
        sink: match &args.output {
            super::OutputArg::Redis(url) => Some(super::live::redact(url)),
            _ => None,
        },
    });
    // `--quiet` prints nothing, not even a CSV header; the output file (if
    // any) is still made, so that a checkpoint can record its length.
    let mut writer: Box<dyn OutputWriter> = if view.quiet {
        Box::new(super::ops::NullWriter)
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
        && matches!(args.output, super::OutputArg::Redis(_))
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

/// Refuses `--checkpoint` for a specification with a stream of function
/// type: its slot and history hold function values, which a checkpoint
/// cannot keep, so every checkpoint of it would be one no run can resume.
/// (A function inside a container, or in an untyped stream, is caught when
/// a checkpoint is taken: that one is not written, and the run stops.)
pub(super) fn check_checkpointable(spec: &Spec) -> Result<(), String> {
    let checked = spec.checked();
    match (checked.streams.iter()).find(|s| s.ty == crate::lang::types::Type::Fn) {
        Some(s) => Err(format!(
            "--checkpoint cannot be used with this specification: stream `{}` holds function values, which a checkpoint cannot keep (a resume would be refused); compute its calls in streams of value type instead",
            crate::row::excerpt(&s.name)
        )),
        None => Ok(()),
    }
}

/// A fresh monitor, plain or keyed, as the run's options ask (the merged
/// run's; a resumed one comes from `prepare`).
pub(super) fn new_monitor(args: &RunArgs, spec: &Spec) -> Result<Runner, Exit> {
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
    let (was, now) = (info.input.format, Format::from(format));
    if was != now {
        return Err(format!(
            "it was taken on a {} trace, and this run reads {}",
            format_name(was),
            format_name(now)
        ));
    }
    let (was, now) = (info.output.format, Output::from(output));
    if was != now {
        return Err(format!(
            "it was taken with `--output {}`, and this run has `--output {}`",
            output_name(was),
            output_name(now)
        ));
    }
    let input = args.input.first().map_or("", String::as_str);
    match (&info.input.token, &info.input.file) {
        (Some(_), _) if !input.starts_with("redis://") => {
            return Err(format!(
                "it was taken on the Redis stream `{}`; pass it again with --input",
                info.input.path
            ));
        }
        (_, Some(_)) if super::live::is_url(input) => {
            return Err(format!(
                "it was taken on the trace `{}`, and this run reads `{input}`",
                info.input.path
            ));
        }
        _ => {}
    }
    match (&info.output.stream, &args.output) {
        (Some((url, _)), super::OutputArg::Redis(now)) if *url == super::live::redact(now) => {}
        (Some((url, _)), _) => {
            return Err(format!(
                "it was taken with `--output {url}`; pass it again to continue that stream"
            ));
        }
        (None, super::OutputArg::Redis(_)) => {
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
pub(super) fn reopen_output(path: &str, len: u64, what: &str) -> Result<File, String> {
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
