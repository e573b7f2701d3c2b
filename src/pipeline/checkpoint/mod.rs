//! Checkpoints of a run: the monitor's state and where every stage stood, written atomically
//! between rows, and read back to resume the run as if it had never stopped.
//!
//! A checkpoint is the monitor's [`Snapshot`] (a [`KeyedSnapshot`](crate::snapshot::KeyedSnapshot)
//! of every live key for a keyed monitor) plus where the run stood: for each source the rows
//! consumed, a regular file's byte offset and line (so a resume maps the file from there instead
//! of reading it again) with a SHA-256 of the bytes at the trace's start and before the
//! position, a live source's resume token (a Redis entry ID); for a merged run the feed's state
//! ([`Clock`]: the merge, the scheduler of periodic streams, the replay log's length); and the
//! length of each file kept exactly once (the outputs, the alerts) or the entries written to a
//! live sink. It is written between rows ([`Checkpointer`]), every N rows and at the clean end
//! of the input, atomically: to a temporary file in the same directory, fsynced, renamed over
//! the checkpoint, and the directory fsynced. [`Checkpoint::read`] reads one back and checks it
//! against the resumed run (the same sources, outputs and options), and restores its monitor.
//!
//! Exactly-once output: before a checkpoint records the output file's length, the outputs of
//! every row before it are flushed and fsynced; a resume truncates the file to that length and
//! appends ([`Checkpoint::kept`]). Rows evaluated after the last checkpoint of a killed run are
//! therefore written again, once, by the resumed run, and the file is what an uninterrupted run
//! writes. Outputs on standard output cannot be taken back: there the rows after the last
//! checkpoint are written again (at least once; the step numbers tell them).
//!
//! The file: `VIGILCKP`, the format version, the run's description's length and SHA-256 (the
//! snapshot's envelope), the description (postcard), then the snapshot in its binary form, which
//! has a length and SHA-256 of its own (its magic tells a keyed snapshot from a plain one), and
//! nothing after it. The two parts are sealed apart so that a keyed snapshot can be written key
//! by key straight into the file (`KeyedMonitor::write_snapshot`) and read back key by key
//! (`KeyedSnapshotReader`): a checkpoint of a million keys never holds them all in memory
//! besides the monitor, either way. (Format 3 sealed both parts as one body, which had to be
//! whole in memory to be hashed before it was written.)
//!
//! ```
//! use vigil::pipeline::checkpoint::{Checkpoint, CheckpointOptions, Checkpointer, Source};
//! use vigil::pipeline::{At, Where};
//! use vigil::trace::{self, OutputFormat, TraceFormat};
//! use vigil::{Monitor, Spec, Value};
//!
//! let text = "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x\n";
//! let spec = Spec::parse("sum.dsrv", text)?;
//! let dir = std::env::temp_dir().join(format!("vigil-doc-ck-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let path = dir.join("run.ck").to_string_lossy().into_owned();
//! let rows = |xs: &[i64]| xs.iter().map(|x| vec![Some(Value::Int(*x))]).collect::<Vec<_>>();
//!
//! // A run of three rows, checkpointed after them (its outputs go nowhere here).
//! let mut monitor = Monitor::builder(&spec).build();
//! for row in rows(&[1, 2, 3]) {
//!     monitor.step(&row)?;
//! }
//! let options = CheckpointOptions { path: path.clone(), every: 1000, spec: "sum.dsrv".into(), sink: None };
//! let source = Source { path: "rows".into(), format: TraceFormat::Csv, trace: None };
//! let mut checkpointer = Checkpointer::new(options, vec![source], OutputFormat::Csv, None, None);
//! let mut writer = trace::make_writer(OutputFormat::Csv, vec!["total".into()], Box::new(std::io::sink()));
//! let at = At { rows: 3, at: Where::default() };
//! checkpointer.write_at(&monitor, &[at], None, writer.as_mut(), None)??;
//!
//! // Later, another process: the checkpoint read back, checked and restored.
//! let mut checkpoint = Checkpoint::read(&path)?;
//! checkpoint.check_plain("rows", TraceFormat::Csv)?;
//! let mut resumed = checkpoint.restore(Monitor::builder(&spec))?;
//! let total = resumed.step(&rows(&[4])[0])?.get(0);
//! assert_eq!(total, vigil::Sample::Value(Value::Int(10)));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::{At, Monitors, Where};
use crate::keyed::KeyedMonitor;
use crate::monitor::{Monitor, Spec};
use crate::snapshot::{self, KeyedSnapshotReader, Snapshot, SnapshotError};
use crate::trace::{OutputFormat, OutputWriter, RowReader, TraceFile, TraceFormat, TracePosition};
use barrier::Shard;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::Path;

/// The first bytes of a checkpoint file.
const MAGIC: [u8; 8] = *b"VIGILCKP";

/// The checkpoint format's version: it changes with the description's
/// fields or the file's layout (the snapshot inside has a version of its
/// own). Version 3 added the alerts file's length; version 4 seals the
/// description and the snapshot apart (see the module's docs); version 5
/// has an input per source and a merged run's clock; version 6 adds a scaled-out run's
/// barrier (`barrier`), whose workers and commit record write this format too. Version 5 is
/// still read: its description is version 6's without the barrier.
const VERSION: u32 = 6;

/// The oldest format version still read (see `InfoV5`).
const OLDEST: u32 = 5;

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
    /// One per source: the run's input, or each source a merged run reads.
    inputs: Vec<InputInfo>,
    output: OutputInfo,
    /// A merged run's (`--time`, several inputs, a periodic specification)
    /// merge and scheduler; `None` for a run of one trace, row by row.
    clock: Option<Clock>,
    /// A scaled-out run's file: its barrier and which part of it this is
    /// (`None` for every single-process run).
    shard: Option<Shard>,
}

/// A version-5 checkpoint's description: version 6's without `shard`.
#[derive(Deserialize)]
struct InfoV5 {
    spec: String,
    inputs: Vec<InputInfo>,
    output: OutputInfo,
    clock: Option<Clock>,
}

impl Info {
    /// Whether this is a scaled run's commit record (a file without a monitor).
    fn commits(&self) -> bool {
        matches!(
            self.shard,
            Some(Shard {
                part: barrier::Part::Commit(_),
                ..
            })
        )
    }
}

impl From<InfoV5> for Info {
    fn from(v: InfoV5) -> Info {
        Info {
            spec: v.spec,
            inputs: v.inputs,
            output: v.output,
            clock: v.clock,
            shard: None,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct InputInfo {
    /// The input's path as given (`-` for standard input), for messages.
    path: String,
    format: Format,
    /// Rows consumed: the snapshot's step, or in a merged run the rows read
    /// from this source up to the last one a step took (what a resume
    /// skips of a stream).
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

impl FileInfo {
    /// Where the trace goes on from.
    fn position(&self) -> TracePosition {
        TracePosition {
            offset: self.offset,
            line: self.line,
        }
    }
}

/// A merged run's state besides the monitor (`timed.rs`): the options that
/// shape its merge, the feed's state (`pipeline::FeedState`: where each
/// source stands in the merge's order, the watermark, the scheduler of
/// periodic streams, the last time, how times are written), and the replay
/// log's length. A checkpoint is taken only when the feed is settled, so the
/// rows the merge held queued are not in it: they lie after each source's
/// position, and the resumed run reads and merges them again, stamped as
/// before.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Clock {
    /// The options that shape the merge and the scheduler (`merge_options`),
    /// which a resumed run must have too.
    pub options: String,
    /// The feed's state ([`Feed::state`](super::Feed::state)).
    pub feed: super::FeedState,
    /// The replay log (`--record`), kept exactly once like the output file.
    pub record: Option<OutputFileInfo>,
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

/// A file a run keeps exactly once (its outputs, its alerts, its replay
/// log), as a checkpoint records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OutputFileInfo {
    /// The file's path.
    pub path: String,
    /// The file's length once the outputs of every row before the
    /// checkpoint were written and synced.
    pub len: u64,
}

/// The monitor state a checkpoint holds: a plain snapshot, a keyed one
/// checked and ready to be read key by key from the file, or none (a scaled
/// run's commit record).
enum Saved {
    Single(Snapshot),
    Keyed(KeyedSnapshotReader<'static>),
    Nothing,
}

/// A writer a snapshot can be streamed into (its header is patched with a
/// seek at the end).
pub trait WriteSeek: Write + Seek {}

impl<W: Write + Seek> WriteSeek for W {}

/// A monitor a checkpoint can be taken of.
pub trait Checkpointable {
    /// Rows evaluated (over every key).
    fn rows(&self) -> u64;
    /// Writes the state to checkpoint in its binary form into `out` (a
    /// keyed monitor key by key); an error of kind `InvalidData` says why
    /// it cannot be resumed from (then no checkpoint is written).
    fn write_state(&self, out: &mut dyn WriteSeek) -> io::Result<()>;
    /// The state's binary form in memory (a scaled-out worker's snapshot
    /// file), or why it cannot be resumed from.
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

impl Checkpointable for Monitors {
    fn rows(&self) -> u64 {
        match self {
            Monitors::Single(m) => m.rows(),
            Monitors::Keyed(m) => Checkpointable::rows(m.as_ref()),
        }
    }

    fn write_state(&self, out: &mut dyn WriteSeek) -> io::Result<()> {
        match self {
            Monitors::Single(m) => m.write_state(out),
            Monitors::Keyed(m) => m.write_state(out),
        }
    }
}

/// A checkpoint file's envelope error, in a checkpoint's words.
fn envelope_error(e: SnapshotError) -> String {
    match e {
        SnapshotError::NotASnapshot => "not a vigil checkpoint".to_string(),
        SnapshotError::Version { found, supported } if found < supported => format!(
            "checkpoint format version {found} is not supported (this vigil reads versions {OLDEST} to {supported}): it was written by an earlier vigil; start the run afresh, or resume it with the vigil that wrote it"
        ),
        SnapshotError::Version { found, supported } => format!(
            "checkpoint format version {found} is not supported (this vigil reads versions {OLDEST} to {supported})"
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
fn decode(mut file: File) -> Result<(Info, Saved), String> {
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
    let info: Info = match snapshot::unseal(&sealed, &MAGIC, VERSION) {
        Ok(info) => snapshot::decode_postcard(info).map_err(envelope_error)?,
        Err(SnapshotError::Version { found: OLDEST, .. }) => {
            let info = snapshot::unseal(&sealed, &MAGIC, OLDEST).map_err(envelope_error)?;
            snapshot::decode_postcard::<InfoV5>(info)
                .map_err(envelope_error)?
                .into()
        }
        Err(e) => return Err(envelope_error(e)),
    };
    if info.commits() {
        // A commit record holds no monitor: nothing may follow it.
        let mut rest = [0u8; 1];
        return match file.read(&mut rest).map_err(read)? {
            0 => Ok((info, Saved::Nothing)),
            _ => Err(corrupt("bytes after its commit record")),
        };
    }
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
    // A plain run's one input counts the snapshot's rows (a merged run's
    // steps are not rows).
    let single = info.inputs.len() == 1 && info.clock.is_none();
    if single && rows != info.inputs[0].rows {
        return Err(corrupt("its row count and its snapshot's differ"));
    }
    Ok((info, state))
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
/// crash leaves the old checkpoint or the new one, never a mix.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomically_with(path, |out| out.write_all(bytes))
}

/// As `write_atomically`, the bytes written by `write` into a buffered
/// writer on the temporary file (which it may seek in). A failure removes
/// the temporary file and leaves any earlier checkpoint as it was.
pub fn write_atomically_with(
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

/// One source of a checkpointed run: its name, format and, for a regular
/// file, the file (read back for the digests).
pub struct Source {
    /// The source's name as given (a live source's URL without its
    /// password: [`crate::live::redact`]), for messages and the checks of a
    /// resume.
    pub path: String,
    /// How its rows are written.
    pub format: TraceFormat,
    /// A regular file's trace, read back for the digests.
    pub trace: Option<TraceFile>,
}

/// What a run's checkpoints are: where they go, how often, and what the
/// run is (for messages and the checks of a resume).
#[derive(Clone, Debug)]
pub struct CheckpointOptions {
    /// The checkpoint file's path.
    pub path: String,
    /// Rows between two checkpoints (at least 1).
    pub every: u64,
    /// The specification's path, for messages.
    pub spec: String,
    /// A live sink that keeps a history (a Redis Stream's URL, redacted):
    /// the entries written to it are recorded.
    pub sink: Option<String>,
}

/// Writes checkpoints of one run.
pub struct Checkpointer {
    options: CheckpointOptions,
    /// Rows since the last checkpoint.
    since: u64,
    sources: Vec<Source>,
    output_format: Output,
    /// The output file's path and a handle to sync it through.
    output: Option<(String, File)>,
    /// The alerts file's path and a handle to sync it through.
    alerts: Option<(String, File)>,
}

impl Checkpointer {
    /// The checkpointer of a run of `sources` writing `output`, with the
    /// output file and the alerts file it keeps exactly once (their paths
    /// and handles to sync them through).
    pub fn new(
        options: CheckpointOptions,
        sources: Vec<Source>,
        output: OutputFormat,
        output_file: Option<(String, File)>,
        alerts: Option<(String, File)>,
    ) -> Checkpointer {
        assert!(options.every > 0, "a checkpoint every 0 rows");
        Checkpointer {
            options,
            since: 0,
            sources,
            output_format: output.into(),
            output: output_file,
            alerts,
        }
    }

    /// How many rows may run before the next checkpoint is due (a batch
    /// ends there, so checkpoints fall between rows).
    pub fn rows_until_due(&self) -> u64 {
        self.options.every - self.since
    }

    /// Accounts for `n` rows taken; whether a checkpoint is due (a merged
    /// run then writes one with `write_at`, once nothing is pending).
    pub fn count(&mut self, n: u64) -> bool {
        self.since += n;
        self.since >= self.options.every
    }

    /// Accounts for `n` rows whose outputs were written, and checkpoints
    /// when one is due. `Err` is an output error; `Ok(Err(message))` a
    /// checkpoint that could not be written.
    pub fn rows_done(
        &mut self,
        n: u64,
        monitor: &dyn Checkpointable,
        reader: &mut dyn RowReader,
        writer: &mut dyn OutputWriter,
        alerts: Option<&mut dyn Write>,
    ) -> io::Result<Result<(), String>> {
        if !self.count(n) {
            return Ok(Ok(()));
        }
        self.write(monitor, reader, writer, alerts)
    }

    /// Writes a checkpoint of a run of one trace now (see `write_at`); the
    /// rows are then committed to the reader's source.
    pub fn write(
        &mut self,
        monitor: &dyn Checkpointable,
        reader: &mut dyn RowReader,
        writer: &mut dyn OutputWriter,
        alerts: Option<&mut dyn Write>,
    ) -> io::Result<Result<(), String>> {
        let at = At {
            rows: monitor.rows(),
            at: Where {
                position: reader.position(),
                token: reader.resume_token(),
            },
        };
        let written = self.write_at(monitor, &[at], None, writer, alerts)?;
        // The rows are in a checkpoint: a consumer group may let them go.
        if written.is_ok() {
            reader.commit();
        }
        Ok(written)
    }

    /// Writes a checkpoint now: flushes and syncs the outputs (and the
    /// alerts written through `alerts`), then writes the monitor's state
    /// with each source's position (`at`, one per source), a merged run's
    /// `clock`, and the output positions.
    pub fn write_at(
        &mut self,
        monitor: &dyn Checkpointable,
        at: &[At],
        clock: Option<Clock>,
        writer: &mut dyn OutputWriter,
        alerts: Option<&mut dyn Write>,
    ) -> io::Result<Result<(), String>> {
        assert_eq!(at.len(), self.sources.len(), "one position per source");
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
                    self.options.path
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
        let inputs = match input_infos(&self.sources, at) {
            Ok(inputs) => inputs,
            Err(e) => {
                return Ok(Err(format!(
                    "cannot write checkpoint `{}`: {e}",
                    self.options.path
                )));
            }
        };
        let info = Info {
            spec: self.options.spec.clone(),
            inputs,
            clock,
            shard: None,
            output: OutputInfo {
                format: self.output_format,
                file: output,
                stream: (self.options.sink.clone()).zip(writer.entries_written()),
                alerts,
            },
        };
        let info = postcard::to_stdvec(&info).expect("a checkpoint's description serialises");
        let info = snapshot::seal(&MAGIC, VERSION, &info);
        // The monitor's state goes straight into the file (a keyed one key
        // by key), never whole into memory.
        let written = write_atomically_with(Path::new(&self.options.path), |out| {
            out.write_all(&info)?;
            monitor.write_state(out)
        })
        .map_err(|e| format!("cannot write checkpoint `{}`: {e}", self.options.path));
        Ok(written)
    }
}

/// What a checkpoint records of each of `sources`, standing at `at`: its name
/// and format, the rows read, a regular file's position with the digests of
/// the bytes around it, a live source's resume token. (An error says which
/// input could not be read back.)
fn input_infos(sources: &[Source], at: &[At]) -> Result<Vec<InputInfo>, String> {
    let mut inputs = Vec::with_capacity(at.len());
    for (source, at) in sources.iter().zip(at) {
        let file = match (&source.trace, at.at.position) {
            (Some(trace), Some(TracePosition { offset, line })) => {
                let (head, tail) = digests(trace, offset)
                    .map_err(|e| format!("cannot read the input `{}` back: {e}", source.path))?;
                Some(FileInfo {
                    offset,
                    line,
                    head,
                    tail,
                })
            }
            _ => None,
        };
        inputs.push(InputInfo {
            path: source.path.clone(),
            format: source.format.into(),
            rows: at.rows,
            file,
            token: at.at.token.clone(),
        });
    }
    Ok(inputs)
}

/// Refuses `--checkpoint` for a specification with a stream of function
/// type: its slot and history hold function values, which a checkpoint
/// cannot keep, so every checkpoint of it would be one no run can resume.
/// (A function inside a container, or in an untyped stream, is caught when
/// a checkpoint is taken: that one is not written, and the run stops.)
pub fn check_checkpointable(spec: &Spec) -> Result<(), String> {
    let checked = spec.checked();
    match (checked.streams.iter()).find(|s| s.ty == crate::lang::types::Type::Fn) {
        Some(s) => Err(format!(
            "--checkpoint cannot be used with this specification: stream `{}` holds function values, which a checkpoint cannot keep (a resume would be refused); compute its calls in streams of value type instead",
            crate::row::excerpt(&s.name)
        )),
        None => Ok(()),
    }
}

pub mod barrier;
mod restore;
pub use restore::{Checkpoint, Dropping, OutputsAsked, Reposition, created, reopen_output};
