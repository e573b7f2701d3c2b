//! Resuming from a checkpoint: the file read and checked against the resumed run (the same
//! sources in the same order, the same outputs, the same merge), each source put back where
//! the checkpoint left it, the files kept exactly once cut back to their recorded lengths, and
//! the monitor restored.

use super::barrier::Shard;
use super::{
    At, Clock, FileInfo, Format, Info, InputInfo, Output, Saved, Where, decode, digests,
    format_name, output_name, snapshot_error,
};
use crate::keyed::{KeyedBuildError, KeyedMonitor, KeyedMonitorBuilder};
use crate::monitor::{Monitor, MonitorBuilder};
use crate::snapshot::SnapshotError;
use crate::trace::{
    self, OpenTrace, OutputFormat, ResumeAt, RowReader, TraceError, TraceFile, TraceFormat,
};
use std::fs::{File, OpenOptions};
use std::io::{self, Seek};

/// A checkpoint read back for a resume: where the run stood, and the
/// monitor's state, restored once ([`Checkpoint::restore`] or
/// [`Checkpoint::restore_keyed`]). Every check's message says `cannot
/// resume from `PATH`: …`.
pub struct Checkpoint {
    path: String,
    info: Info,
    saved: Option<Saved>,
}

/// The outputs a resumed run writes, as a checkpoint is checked against
/// them ([`Checkpoint::check_outputs`]).
#[derive(Clone, Copy, Debug)]
pub struct OutputsAsked<'a> {
    /// The output format.
    pub format: OutputFormat,
    /// The Redis Stream the outputs go to (its URL redacted), if they do.
    pub redis: Option<&'a str>,
    /// Whether the outputs go to a file (kept exactly once).
    pub output_file: bool,
    /// Whether the alerts go to a file (kept exactly once).
    pub alerts_file: bool,
}

/// Which rows of a resumed stream were not steps of the checkpointed run
/// (dropped as malformed), so that they are not counted when dropping the
/// rows the checkpoint consumed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Dropping {
    /// Malformed rows the reader can go on after were skipped.
    pub malformed: bool,
    /// In a keyed run, the key's cell: a row without it was skipped.
    pub key: Option<usize>,
}

/// Why a source could not be put back where the checkpoint left it.
#[derive(Debug)]
pub enum Reposition {
    /// It is not the checkpoint's source (or is shorter): the message says
    /// why.
    Refused(String),
    /// The trace is malformed or unreadable before the position.
    Trace(TraceError),
}

impl Checkpoint {
    /// Reads the checkpoint at `path`: its description whole, a plain
    /// snapshot whole, a keyed one checked and left in the file to be read
    /// key by key when the monitor is restored.
    pub fn read(path: &str) -> Result<Checkpoint, String> {
        let file = File::open(path).map_err(|e| format!("cannot read checkpoint `{path}`: {e}"))?;
        let (info, saved) =
            decode(file).map_err(|e| format!("cannot resume from `{path}`: {e}"))?;
        Ok(Checkpoint {
            path: path.to_string(),
            info,
            saved: Some(saved),
        })
    }

    /// The checkpoint's path, for messages.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The message of a refused resume.
    fn refused(&self, why: impl std::fmt::Display) -> String {
        format!("cannot resume from `{}`: {why}", self.path)
    }

    /// A scaled-out run's file: its barrier and which part of it this is
    /// (`None` for a single-process run's checkpoint).
    pub fn shard(&self) -> Option<&Shard> {
        self.info.shard.as_ref()
    }

    /// Refuses a scaled run's file where a single-process run's checkpoint
    /// is resumed.
    fn not_a_shard(&self) -> Result<(), String> {
        match &self.info.shard {
            None => Ok(()),
            Some(shard) => Err(self.refused(format_args!(
                "it is part of a checkpoint of a run on {} workers (--workers, --processes), keyed by `{}`; resume that run with the same options and `--resume` naming its checkpoint directory",
                shard.barrier.workers, shard.barrier.key
            ))),
        }
    }

    /// A merged run's clock (`None` for a run of one trace, row by row).
    pub fn clock(&self) -> Option<&Clock> {
        self.info.clock.as_ref()
    }

    /// The number of sources the checkpoint has.
    pub fn sources(&self) -> usize {
        self.info.inputs.len()
    }

    /// Checks that this is a run of one trace row by row (not a merged
    /// run's), of `input` read as `format`.
    pub fn check_plain(&self, input: &str, format: TraceFormat) -> Result<(), String> {
        self.not_a_shard()?;
        let info = &self.info;
        if info.clock.is_some() || info.inputs.len() != 1 {
            return Err(self.refused(format_args!(
                "it was taken on a merged run of {} source{} (--time, several --input traces, or a specification with periodic streams); resume it with the same options",
                info.inputs.len(),
                if info.inputs.len() == 1 { "" } else { "s" }
            )));
        }
        check_input(&info.inputs[0], input, format).map_err(|e| self.refused(e))
    }

    /// Checks that this is a merged run's checkpoint, taken with the merge
    /// options `options` (as one text; see [`Clock::options`]).
    pub fn check_merged(&self, options: &str) -> Result<&Clock, String> {
        self.not_a_shard()?;
        self.clock_of(options)
    }

    /// Checks that this is a scaled run's commit record with its sources'
    /// positions, taken with the merge options `options` (as
    /// [`Checkpoint::check_merged`] checks a merged run's).
    pub fn check_commit(&self, options: &str) -> Result<&Clock, String> {
        if !self.info.commits() {
            return Err(self.refused("it is not a scaled run's commit record"));
        }
        self.clock_of(options)
    }

    /// The clock, checked to have been taken with `options`.
    fn clock_of(&self, options: &str) -> Result<&Clock, String> {
        let Some(clock) = &self.info.clock else {
            return Err(self.refused(
                "it was taken on a run of one trace without --time; resume it with the options it was taken with",
            ));
        };
        if clock.options != options {
            return Err(self.refused(format_args!(
                "it was taken with `{}`, and this run has `{options}`",
                clock.options
            )));
        }
        if clock.feed.sources.len() != self.info.inputs.len() {
            return Err(self.refused("the checkpoint is corrupt: its clock and its inputs differ"));
        }
        Ok(clock)
    }

    /// Checks the resumed run's outputs against the checkpoint's: the
    /// format, and each file (or Redis stream) it continues.
    pub fn check_outputs(&self, now: &OutputsAsked<'_>) -> Result<(), String> {
        check_outputs(&self.info, now).map_err(|e| self.refused(e))
    }

    /// Checks that source `i` of this run is the checkpoint's (`name`, its
    /// URL redacted if live, read as `format`), and gives where a regular
    /// file goes on from.
    pub fn check_source(
        &self,
        i: usize,
        name: &str,
        format: TraceFormat,
    ) -> Result<Option<ResumeAt>, String> {
        let inputs = &self.info.inputs;
        let Some(info) = inputs.get(i) else {
            return Err(self.refused(format_args!(
                "it was taken on {} source{}, and this run has more",
                inputs.len(),
                if inputs.len() == 1 { "" } else { "s" }
            )));
        };
        if info.path != crate::live::redact(name) {
            return Err(self.refused(format_args!(
                "its source {} is `{}`, and this run's is `{name}`: give the inputs in the order the run was started with",
                i + 1,
                info.path
            )));
        }
        check_input(info, name, format).map_err(|e| self.refused(e))?;
        Ok(self.resume_at(i, format))
    }

    /// Where source `i`, read as `format`, goes on from if it is a regular
    /// file: its position, and the rows an `.input` reader numbers its
    /// steps on from (the rows of the epoch in a merged run, none when a
    /// time reset read with the last row is behind the position).
    pub fn resume_at(&self, i: usize, format: TraceFormat) -> Option<ResumeAt> {
        let info = &self.info.inputs[i];
        let rows = match (format, self.clock().and_then(|c| c.feed.sources.get(i))) {
            (TraceFormat::Tc, Some(m)) if m.then_reset => 0,
            (TraceFormat::Tc, Some(m)) => m.epoch_rows,
            _ => info.rows,
        };
        info.file.as_ref().map(|f| ResumeAt {
            position: f.position(),
            rows,
        })
    }

    /// Where source `i` stood: the rows read from it, its position and its
    /// resume token.
    pub fn at(&self, i: usize) -> At {
        let info = &self.info.inputs[i];
        At {
            rows: info.rows,
            at: Where {
                position: info.file.as_ref().map(FileInfo::position),
                token: info.token.clone(),
            },
        }
    }

    /// The entries the run had written to its Redis output stream.
    pub fn written(&self) -> Option<u64> {
        self.info.output.stream.as_ref().map(|s| s.1)
    }

    /// Source `i`'s live resume token (a Redis Stream's last entry taken).
    pub fn token(&self, i: usize) -> Option<String> {
        self.info.inputs.get(i)?.token.clone()
    }

    /// Puts source `i`'s reader (`opened`, of `width` cells, from `name`)
    /// where the checkpoint left it: a regular file opened at its position
    /// is checked to be the same trace; a stream (which cannot be
    /// repositioned) has the rows the run had read dropped (`dropping`
    /// says which rows were not counted); a live source goes on where its
    /// resume token says.
    pub fn reposition(
        &self,
        i: usize,
        name: &str,
        opened: &mut OpenTrace,
        width: usize,
        dropping: Dropping,
    ) -> Result<(), Reposition> {
        let info = &self.info.inputs[i];
        match (&opened.file, &info.file) {
            _ if crate::live::is_url(name) => Ok(()),
            (Some(trace), Some(f)) if !opened.streaming => {
                check_trace(trace, f, name).map_err(|e| Reposition::Refused(self.refused(e)))
            }
            _ => {
                skip_rows(opened.reader.as_mut(), width, info.rows, dropping).map_err(|e| match e {
                    Reposition::Refused(m) => {
                        Reposition::Refused(self.refused(format_args!("`{name}`: {m}")))
                    }
                    e => e,
                })
            }
        }
    }

    /// Opens the output file (or, with `alerts`, the alerts file) kept
    /// exactly once at `path`, cut back to the length the checkpoint
    /// recorded; also gives a second handle, for a checkpoint to sync it
    /// through.
    pub fn kept(&self, path: &str, alerts: bool) -> Result<(File, File), String> {
        let out = &self.info.output;
        let (recorded, what) = match alerts {
            false => (out.file.as_ref(), "output file"),
            true => (out.alerts.as_ref(), "alerts file"),
        };
        open_kept(path, recorded.map(|f| f.len), what, &self.path)
    }

    /// The message of a snapshot the monitor refused.
    fn refused_state(&self, e: &dyn std::fmt::Display) -> String {
        format!(
            "cannot resume from `{}` (taken with `{}`): {e}",
            self.path, self.info.spec
        )
    }

    /// The plain monitor `builder` builds, restored from the checkpoint
    /// (once: a second restore panics).
    pub fn restore(&mut self, builder: MonitorBuilder<'_>) -> Result<Monitor, String> {
        match self
            .saved
            .take()
            .expect("a checkpoint's monitor is restored once")
        {
            Saved::Single(snap) => match builder.restore(&snap) {
                Ok(b) => Ok(b.build()),
                Err(e) => Err(self.refused_state(&e)),
            },
            Saved::Keyed(snap) => Err(self.refused_state(&format_args!(
                "it was taken with `--key {}`; pass it again",
                snap.key_input()
            ))),
            Saved::Nothing => Err(self.refused(NO_MONITOR)),
        }
    }

    /// The keyed monitor `builder` builds, restored from the checkpoint key
    /// by key (once: a second restore panics).
    pub fn restore_keyed(
        &mut self,
        builder: KeyedMonitorBuilder<'_>,
    ) -> Result<KeyedMonitor, String> {
        let builder = match self
            .saved
            .take()
            .expect("a checkpoint's monitor is restored once")
        {
            Saved::Keyed(reader) => builder.restore_from(reader),
            Saved::Single(_) => {
                return Err(
                    self.refused_state(&"it was taken without `--key`, and this run has `--key`")
                );
            }
            Saved::Nothing => return Err(self.refused(NO_MONITOR)),
        };
        builder.build().map_err(|e| self.keyed_error(e))
    }

    /// A scaled run's worker's monitor: a [`KeyedMonitor::share`] of
    /// `template` (running its compiled code) restored from this worker
    /// file key by key (once: a second restore panics).
    pub fn restore_shared(&mut self, template: &KeyedMonitor) -> Result<KeyedMonitor, String> {
        match self
            .saved
            .take()
            .expect("a checkpoint's monitor is restored once")
        {
            Saved::Keyed(reader) => template
                .share_restored_from(reader)
                .map_err(|e| self.keyed_error(e)),
            Saved::Single(_) => Err(self.refused_state(
                &"it was taken without `--key`, and a run on several workers is keyed",
            )),
            Saved::Nothing => Err(self.refused(NO_MONITOR)),
        }
    }

    /// A keyed snapshot's error, in a resume's words.
    fn keyed_error(&self, e: KeyedBuildError) -> String {
        match e {
            // Damage found while the keys are read from the file is the
            // checkpoint's, as damage found before.
            KeyedBuildError::Snapshot(e @ (SnapshotError::Malformed(_) | SnapshotError::Io(_))) => {
                self.refused(snapshot_error(e))
            }
            KeyedBuildError::Snapshot(e) => self.refused_state(&e),
            e => e.to_string(),
        }
    }
}

/// Why a scaled run's commit record restores no monitor.
const NO_MONITOR: &str = "it is the commit record of a run on several workers, which holds no monitor: resume that run with `--resume` naming its checkpoint directory";

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
        (_, Some(_)) if crate::live::is_url(input) => Err(format!(
            "it was taken on the trace `{}`, and this run reads `{input}`",
            info.path
        )),
        _ => Ok(()),
    }
}

/// The checks of a resumed run's outputs against the checkpoint's.
fn check_outputs(info: &Info, now: &OutputsAsked<'_>) -> Result<(), String> {
    let (was, format) = (info.output.format, Output::from(now.format));
    if was != format {
        return Err(format!(
            "it was taken with `--output {}`, and this run has `--output {}`",
            output_name(was),
            output_name(format)
        ));
    }
    match (&info.output.stream, now.redis) {
        (Some((url, _)), Some(now)) if url == now => {}
        (Some((url, _)), _) => {
            return Err(format!(
                "it was taken with `--output {url}`; pass it again to continue that stream"
            ));
        }
        (None, Some(_)) => {
            return Err(
                "it was taken with its outputs elsewhere, so it cannot continue a Redis stream"
                    .to_string(),
            );
        }
        _ => {}
    }
    match (&info.output.alerts, now.alerts_file) {
        (Some(f), false) => {
            return Err(format!(
                "it was taken with `--alerts {}`; pass it again to continue that file",
                f.path
            ));
        }
        (None, true) => {
            return Err(
                "it was taken without an alerts file, so it cannot continue one (its alerts so far are not in it)"
                    .to_string(),
            );
        }
        _ => {}
    }
    match (&info.output.file, now.output_file) {
        (Some(f), false) => Err(format!(
            "it was taken with `--output-file {}`; pass it again to continue that file",
            f.path
        )),
        (None, true) => Err(
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

/// Reads and drops the first `rows` rows of a stream (which cannot be
/// repositioned): a resumed stream is the same trace from its start.
fn skip_rows(
    reader: &mut dyn RowReader,
    width: usize,
    rows: u64,
    policy: Dropping,
) -> Result<(), Reposition> {
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
                return Err(Reposition::Refused(format!(
                    "the input ended after {k} rows, but the checkpoint was taken after {rows}"
                )));
            }
            Err(e)
                if policy.malformed
                    && e.kind == trace::TraceErrorKind::Malformed
                    && reader.can_continue() => {}
            Err(e) => return Err(Reposition::Trace(e)),
        }
    }
    Ok(())
}

/// Opens a file a run keeps exactly once, fresh (`what`, for messages:
/// the output file, the alerts file, the replay log): created, with a
/// second handle, for a checkpoint to sync it through.
pub fn created(path: &str, what: &str) -> Result<(File, File), String> {
    open_kept(path, None, what, "")
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
pub fn reopen_output(path: &str, len: u64, what: &str) -> Result<File, String> {
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
