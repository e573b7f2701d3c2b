//! Checkpoints of a file read in parts: a barrier at the start of every part, sent by the
//! part's reader, and a resume that splits the rest of the file from the position the commit
//! record gives.
//!
//! With `--checkpoint-every N` the file is cut into parts of lines (not bytes): `N` lines, or a
//! whole fraction of `N` where that leaves the readers too few parts to take turns, a barrier
//! then at every `m`-th part. So a checkpoint comes about every `N` rows (at most `N`), as in a
//! run read by one feed. Part `k`'s reader sends every worker a barrier at `k << 32` (before
//! the part's first row) and leaves, for the writer's commit record, where the part starts:
//! its byte offset and lines, which a single feed's checkpoint records the same way (with the
//! digests of the bytes around it). The barrier asks for the state after every row of the
//! parts before `k`; timely's frontier passes it once every one of them is evaluated, whichever
//! worker read it.
//!
//! A resume checks the commit record against the file (its digests), then splits the file
//! from that offset, numbering the parts on from `k` so that the resumed run's barriers come
//! after the one it resumed from; the resumed part's own barrier is not sent again. The
//! commit record's merge options say the run was read in parts ([`IN_PARTS`]): a checkpoint
//! of a run read in parts is resumed in parts, and one taken by a feed by a feed.

use super::{PART_ROWS, Parts};
use crate::pipeline::checkpoint::{self, Dropping, barrier};
use crate::pipeline::{At, FeedState, SourceState, Where};
use crate::scale::Event;
use crate::scale::source::{AtBarrier, AtBarriers};
use crate::trace::{self, InputSchema, PartSize, ReaderOptions, TraceFormat, TracePosition};
use std::sync::{Arc, PoisonError};

/// What the merge options of a run read in parts with checkpoints end with.
pub(crate) const IN_PARTS: &str = " (read in parts)";

/// A run's merge options `options`, read in parts.
pub(crate) fn in_parts(options: &str) -> String {
    format!("{options}{IN_PARTS}")
}

/// What a checkpointed run reading a file in parts needs.
pub(crate) struct PartCheckpoints<'a> {
    /// Rows (lines) between two checkpoints; `None` for a run that resumes without taking
    /// checkpoints.
    pub every: Option<u64>,
    pub resumed: Option<&'a barrier::Resume>,
    pub at_barriers: &'a AtBarriers,
    /// The run's merge options, with [`IN_PARTS`].
    pub merge_options: &'a str,
    pub schema: &'a InputSchema,
    pub reader: ReaderOptions,
    /// Which rows the readers drop (for the check of a resumed file).
    pub dropping: Dropping,
    /// The replay log's path, with `--record`.
    pub record: Option<&'a str>,
}

/// The barriers the readers of a file's parts send: into `at_barriers` what the writer's
/// commit records; none for the part a resume starts at (its checkpoint exists).
pub(crate) struct Barriers {
    at_barriers: AtBarriers,
    /// The first part and every how many parts a barrier comes.
    first: u64,
    every_parts: u64,
    /// Whether the run resumed at the first part.
    resumed: bool,
    /// With `--record`, the length of the log's manifest, which the commit records as the
    /// log's (a resume checks that it records one exactly when the run does).
    log_len: std::sync::OnceLock<u64>,
}

impl Parts {
    /// Says the length of the replay log's manifest, for the commit records.
    pub(crate) fn set_log_len(&self, len: u64) {
        if let Some(b) = &self.barriers {
            let _ = b.log_len.set(len);
        }
    }
}

impl Barriers {
    /// Before part `k`'s first row (its start `at`), a barrier for each of the `workers`.
    pub(crate) fn at_part(
        &self,
        k: u64,
        at: TracePosition,
        workers: usize,
        batch: &mut Vec<Event>,
    ) {
        let from_first = k - self.first;
        if self.resumed && from_first == 0 || !from_first.is_multiple_of(self.every_parts) {
            return;
        }
        let time = k * PART_ROWS;
        // The rows before the part, as its lines: a reader does not know the rows the others
        // read (a blank line counts too). Only a feed resumed from it would read the count,
        // and it refuses a checkpoint taken in parts.
        let rows = at.line;
        let source = SourceState {
            latest: None,
            seq: rows,
            epoch_rows: rows,
            then_reset: false,
        };
        let feed = FeedState {
            sources: vec![source],
            emitted: None,
            scheduler: None,
            last_time: None,
            rfc3339: Some(false),
        };
        let place = At {
            rows,
            at: Where {
                position: Some(at),
                token: None,
            },
        };
        (self
            .at_barriers
            .lock()
            .unwrap_or_else(PoisonError::into_inner))
        .push(AtBarrier {
            time,
            log_len: self.log_len.get().copied(),
            sources: Some((vec![place], feed)),
        });
        for w in 0..workers {
            batch.push(Event::Barrier {
                time,
                worker: w as u32,
                // The digest of the rows before: a positioned resume checks the file's bytes
                // around its offset instead.
                token: 0,
            });
        }
    }
}

/// Splits `path` (a trace in `format`) into parts of `every` lines for a run that
/// checkpoints (for `threads` readers, by size as [`super::plan`] does, for a run that only
/// resumes), from the position a resumed commit record gives (checked against the file);
/// `None` when the file does not split. Also gives the file as the commit record names it.
pub(crate) fn plan(
    path: &str,
    format: TraceFormat,
    threads: usize,
    ck: &PartCheckpoints<'_>,
) -> Result<Option<(Parts, checkpoint::Source)>, String> {
    let (resume_at, first) = match ck.resumed {
        None => (None, 0),
        Some(r) => {
            r.record.check_commit(ck.merge_options)?;
            crate::scale::source::check_record(ck.record, r.commit.record_len, &r.dir)?;
            if r.barrier.time % PART_ROWS != 0 {
                return Err(format!(
                    "cannot resume from `{}`: its barrier is not at the start of a part",
                    r.dir.display()
                ));
            }
            let Some(at) = r.record.check_source(0, path, format)? else {
                return Err(format!(
                    "cannot resume from `{}`: it records no position in `{path}`",
                    r.dir.display()
                ));
            };
            (Some(at), r.barrier.time / PART_ROWS)
        }
    };
    let from = resume_at.map_or(TracePosition { offset: 0, line: 0 }, |r| r.position);
    let mut opened = trace::open_trace_at(path, format, ck.schema, ck.reader, resume_at)
        .map_err(|e| e.to_string())?;
    if let Some(r) = ck.resumed {
        let width = ck.schema.names.len();
        r.record
            .reposition(0, path, &mut opened, width, ck.dropping)
            .map_err(|e| match e {
                checkpoint::Reposition::Refused(m) => m,
                checkpoint::Reposition::Trace(e) => e.to_string(),
            })?;
    }
    let (size, every_parts) = match ck.every {
        Some(every) => {
            let lines = lines_from(path, from.offset)
                .map_err(|e| format!("{path}: cannot read the trace: {e}"))?;
            let (part, m) = part_lines(every, lines, threads);
            (PartSize::Lines(part), m)
        }
        None => (PartSize::Bytes(super::part_bytes(path, threads)), 1),
    };
    let split = trace::split_points(path, format, size, from)
        .map_err(|e| format!("{path}: cannot read the trace: {e}"))?;
    let Some((points, len)) = split else {
        return Ok(None);
    };
    let barriers = ck.every.map(|_| Barriers {
        at_barriers: Arc::clone(ck.at_barriers),
        first,
        every_parts,
        resumed: ck.resumed.is_some(),
        log_len: std::sync::OnceLock::new(),
    });
    let parts = Parts {
        path: path.to_string(),
        format,
        points,
        len,
        first,
        barriers: barriers.map(Arc::new),
        resumed: ck.resumed.is_some(),
    };
    let kept = checkpoint::Source {
        path: path.to_string(),
        format,
        trace: opened.file,
    };
    Ok(Some((parts, kept)))
}

/// The lines of a part of a file of `lines` lines (from its resumed position) read by
/// `threads` workers with a checkpoint every `every` lines, and every how many parts a
/// checkpoint comes: `every` lines a part, unless that leaves fewer than 8 parts per reader;
/// then a whole fraction of it (at least 1,024 lines, where opening a part costs little
/// beside reading it).
fn part_lines(every: u64, lines: u64, threads: usize) -> (u64, u64) {
    let wanted = (threads as u64).saturating_mul(8).max(1);
    let part = every.min(lines.div_ceil(wanted).max(1024)).max(1);
    (part, (every / part).max(1))
}

/// The lines of `path` from byte `offset` on (a last line without its end counted too).
fn lines_from(path: &str, offset: u64) -> std::io::Result<u64> {
    use std::io::Seek;
    let mut file = std::fs::File::open(path)?;
    file.seek(std::io::SeekFrom::Start(offset))?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut lines, mut last) = (0u64, b'\n');
    loop {
        let n = trace::read_some(&mut file, &mut buf)?;
        if n == 0 {
            break;
        }
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        last = buf[n - 1];
    }
    Ok(lines + u64::from(last != b'\n'))
}

#[cfg(test)]
mod tests {
    use super::part_lines;

    #[test]
    fn parts_are_a_whole_fraction_of_the_checkpoint_period() {
        // Enough parts already: a part per checkpoint.
        assert_eq!(part_lines(5_000, 150_000, 2), (5_000, 1));
        // Too few: smaller parts, a barrier every few (18,750-line parts, a barrier every 5,
        // 93,750 lines: at most the period).
        assert_eq!(part_lines(100_000, 300_000, 2), (18_750, 5));
        // Never below 1,024 lines, unless the period is.
        assert_eq!(part_lines(100_000, 2_000, 2), (1_024, 97));
        assert_eq!(part_lines(100, 2_000, 2), (100, 1));
        assert_eq!(part_lines(1, 0, 2), (1, 1));
    }
}
