//! Process 0's feed as a scaled run's reader (`Source`): every `--input` stamped and merged by
//! `pipeline::Feed`, with the checkpoint barriers, the input digest a resume checks, and the
//! replay log (`--record`) whose length each barrier records; and the `Reading` trait it shares
//! with the readers of a file's parts (`parts.rs`).

use super::{Event, StampedRow, timely_time};
use crate::notice::{Notice, Notify};
use crate::pipeline::drive::Ended;
use crate::pipeline::run_loop::Record;
use crate::pipeline::{self, Feed, Malformed};
use crate::time::TimeForm;
use crate::value::Value;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

/// The source's state: the feed of process 0 (every `--input`, stamped and
/// merged), and the row it gave last.
pub(crate) struct Source {
    pub(crate) feed: Feed,
    /// The replay log (`--record`) of the feed's steps.
    pub(crate) record: Option<Record>,
    /// The log's length and the sources' positions at each barrier (its
    /// time), for the writer to record when the checkpoint completes.
    pub(crate) at_barriers: AtBarriers,
    /// With checkpoints: where the sources stood, and the feed's state,
    /// before the step taken last (a barrier comes before the row it is due
    /// at, which the feed has taken already).
    pub(crate) before: Option<(Vec<crate::pipeline::At>, crate::pipeline::FeedState)>,
    /// The row just taken (inputs, `--pass` fields, the time field) and
    /// where it is, for messages.
    pub(crate) row: Vec<Option<Value>>,
    pub(crate) at: String,
    /// Rows given so far (the next row's position).
    pub(crate) seq: u64,
    /// The timely time of the next event where rows travel at their index (not their stamp):
    /// the rows given so far and the sweeps sent between them. A sweep (a time reset, the wall
    /// clock's tick) takes a time of its own, so that the input moves past it at once and its
    /// ticks are complete, and written, while the sources are silent; at the next row's time
    /// they could be written only once that row came.
    pub(crate) clock: u64,
    /// Whether rows carry their time (`--time`).
    pub(crate) timed: bool,
    /// The time of the row given last (ns), with `--time`.
    pub(crate) last: Option<i64>,
    /// Checkpoints every this much of the time axis, and the next one due.
    pub(crate) every: Option<u64>,
    pub(crate) next_checkpoint: Option<u64>,
    /// Whether a barrier comes before the first row too: a fresh run to a
    /// Redis Stream, which may append entries before its first periodic
    /// checkpoint, and which only a resume (it reads the entries written)
    /// does not write again.
    pub(crate) first_barrier: bool,
    /// Rows before this time were evaluated before a resume: skipped.
    pub(crate) skip_before: u64,
    /// Whether `skip_before` is a stamp, not a row's index: the barrier time of a commit record
    /// an earlier vigil wrote for a run with `--time`, whose timely times were stamps.
    pub(crate) skip_by_stamp: bool,
    /// The digest of every row read so far (see `Complete::input_digest`),
    /// and, when resuming, the one the checkpoint recorded, until checked.
    pub(crate) digest: xxhash_rust::xxh3::Xxh3,
    pub(crate) expect_digest: Option<u64>,
    pub(crate) tally: Tally,
    pub(crate) key_index: usize,
    pub(crate) key_name: String,
    pub(crate) inputs: usize,
    /// The undeclared `--pass` fields read after the inputs.
    pub(crate) extra: usize,
    /// Added to every row's position: an input's rows numbered apart from the others' when
    /// each input has a source of its own (`timed_inputs`).
    pub(crate) seq_base: u64,
    /// Whether a row's timely time is its stamp (with `--time`), as where several readers'
    /// rows merge by it (`timed_inputs`); else it is the row's index in the feed's order.
    pub(crate) stamp_times: bool,
    /// Where the row that stopped the source was, when the monitor would reject it (a row
    /// without its key): (time, position).
    pub(crate) rejected: Option<(u64, u64)>,
    /// The sweeps over every key sent so far (resets, the wall clock's ticks): each is
    /// numbered, so that the ticks of several at one place keep their order.
    sweeps: u64,
}

/// A reader's counts, and what it does with a row the monitor would reject (a missing key).
pub(crate) struct Tally {
    pub malformed: Malformed,
    /// Rows read that the reader itself counted (a feed counts its own).
    pub rows_read: u64,
    /// Malformed and rejected rows dropped.
    pub skipped: u64,
    /// Where a dropped row is said, under the `warn` policy.
    pub notify: Notify,
}

impl Tally {
    pub(crate) fn new(malformed: Malformed, notify: Notify) -> Tally {
        Tally {
            malformed,
            rows_read: 0,
            skipped: 0,
            notify,
        }
    }

    /// Adds rows read and malformed rows dropped.
    pub(crate) fn add_read(&mut self, rows: u64, skipped: u64) {
        self.rows_read += rows;
        self.skipped += skipped;
    }

    /// The error `e` of `reader`'s next row: `None` when the policy drops the row (read,
    /// skipped, and with `warn` said), else the run's stop, its message and whose fault it is.
    pub(crate) fn malformed_row(
        &mut self,
        e: &crate::trace::TraceError,
        reader: &dyn crate::trace::RowReader,
    ) -> Option<(String, Ended)> {
        if pipeline::droppable(self.malformed, e, reader) {
            self.add_read(1, 1);
            if self.malformed == Malformed::Warn {
                (self.notify)(Notice::Skipped(e.to_string()));
            }
            return None;
        }
        let stop = pipeline::Stop::of_trace(e);
        Some((stop.message, stop.kind.into()))
    }

    /// A row the monitor rejected (`at` locates it): `true` when the policy drops it (and, with
    /// `warn`, says so).
    pub(crate) fn skip_rejected(&mut self, at: &str, e: &dyn std::fmt::Display) -> bool {
        if self.malformed == Malformed::Stop {
            return false;
        }
        self.skipped += 1;
        if self.malformed == Malformed::Warn {
            (self.notify)(Notice::Skipped(format!("{at}: {e}")));
        }
        true
    }
}

/// What process 0's source knew at each barrier not yet completed: the source keeps them, the
/// writer records them in the barrier's commit record and drops them.
pub(crate) type AtBarriers = Arc<Mutex<Vec<AtBarrier>>>;

/// What process 0's source knew at the barrier at `time`.
pub(crate) struct AtBarrier {
    pub(crate) time: u64,
    /// The replay log's length (`--record`).
    pub(crate) log_len: Option<u64>,
    /// Where the sources stood and the feed's state: after the last row before the barrier.
    pub(crate) sources: Option<(Vec<crate::pipeline::At>, crate::pipeline::FeedState)>,
}

/// A reader of rows into the dataflow: process 0's feed of every input
/// (`Source`), or a worker's parts of one file (`parts::PartReader`).
pub(crate) trait Reading: Send + 'static {
    /// Reads up to `n` events into `batch` (`workers`: the barriers' count).
    fn fill(&mut self, batch: &mut Vec<Event>, n: usize, workers: usize) -> Fill;
    /// The time every later event is at or after.
    fn frontier(&self) -> u64;
    /// What it read, so far.
    fn read(&self) -> ReadCounts;
    /// Where it stopped the run, (time, position), when it did: of several readers that
    /// stopped it, the earliest's error is the run's.
    fn stopped_at(&self) -> (u64, u64) {
        (0, 0)
    }
    /// Whether a stream's rows come in pieces that `fill` ends at (the chunks of a stream read
    /// in parallel): then a batch may hold many rows even when the output is a stream's,
    /// since a piece holds the rows that have arrived.
    fn in_pieces(&self) -> bool {
        false
    }
}

impl Reading for Source {
    fn fill(&mut self, batch: &mut Vec<Event>, n: usize, workers: usize) -> Fill {
        Source::fill(self, batch, n, workers)
    }

    fn frontier(&self) -> u64 {
        Source::frontier(self)
    }

    fn read(&self) -> ReadCounts {
        let (feed, tally) = (&self.feed, &self.tally);
        ReadCounts {
            rows: feed.rows_read() + tally.rows_read,
            skipped: feed.skipped() + tally.skipped,
            late: feed.late(),
            sources: feed.source_names().count(),
        }
    }
}

/// Where a reader stopped the run: the least row position (time, then position) at which one
/// did. The writer writes no row at or after it, as a single-process run writes nothing after
/// its error; the readers read no further than it.
#[derive(Debug)]
pub(crate) struct StopAt {
    /// The stop's time: a row of an earlier time is before it, whatever its position (every
    /// row's check, without the lock).
    time: std::sync::atomic::AtomicU64,
    at: Mutex<(u64, u64)>,
}

impl Default for StopAt {
    fn default() -> StopAt {
        StopAt {
            time: std::sync::atomic::AtomicU64::new(u64::MAX),
            at: Mutex::new((u64::MAX, u64::MAX)),
        }
    }
}

impl StopAt {
    /// Stops the run at `at` (time, position), unless it stopped earlier.
    pub(crate) fn stop(&self, at: (u64, u64)) {
        let mut held = self.at.lock().unwrap_or_else(PoisonError::into_inner);
        if at < *held {
            *held = at;
            self.time.store(at.0, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Whether the row at `at` (time, position) is at or after the stop.
    pub(crate) fn passed(&self, at: (u64, u64)) -> bool {
        if at.0 < self.time.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        at >= *self.at.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a scaled run's readers read, added up over them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReadCounts {
    /// Rows read (malformed rows dropped included).
    pub rows: u64,
    /// Malformed rows, and rows without their key, dropped.
    pub skipped: u64,
    /// Late rows re-stamped.
    pub late: u64,
    /// The sources read (a file read in parts is one, counted by none of its readers).
    pub sources: usize,
}

impl std::ops::AddAssign for ReadCounts {
    fn add_assign(&mut self, other: ReadCounts) {
        self.rows += other.rows;
        self.skipped += other.skipped;
        self.late += other.late;
        self.sources += other.sources;
    }
}

/// Whether the source has more to give.
pub(crate) enum Fill {
    More,
    Ended,
    Stopped(String, Ended),
}

impl Source {
    /// The reader of `feed`'s rows, with no checkpoint barriers, replay log or resume: `key`
    /// is the key input's cell and name, `cells` the inputs' count and the passed fields'.
    pub(crate) fn new(
        feed: Feed,
        tally: Tally,
        key: (usize, String),
        cells: (usize, usize),
    ) -> Source {
        let timed = feed.options().time_cell.is_some();
        Source {
            feed,
            record: None,
            at_barriers: AtBarriers::default(),
            before: None,
            row: Vec::new(),
            at: String::new(),
            seq: 0,
            clock: 0,
            timed,
            last: None,
            every: None,
            next_checkpoint: None,
            first_barrier: false,
            skip_before: 0,
            skip_by_stamp: false,
            digest: xxhash_rust::xxh3::Xxh3::new(),
            expect_digest: None,
            tally,
            key_index: key.0,
            key_name: key.1,
            inputs: cells.0,
            extra: cells.1,
            seq_base: 0,
            stamp_times: false,
            rejected: None,
            sweeps: 0,
        }
    }

    /// Reads up to `n` events into `batch`.
    fn fill(&mut self, batch: &mut Vec<Event>, n: usize, workers: usize) -> Fill {
        while batch.len() < n {
            // A checkpoint records the feed where it is settled: a row the feed holds behind
            // the ticks due before it has been taken from its source already.
            if self.every.is_some() && self.feed.settled() {
                self.before = Some((self.feed.positions(), self.feed.state()));
            }
            let next = self.feed.next();
            let Ok(Some(pipeline::Event::Rows(step))) = &next else {
                if matches!(next, Ok(Some(pipeline::Event::Tick(..))))
                    && let Err(e) = self.barrier_before_held_row(batch, workers)
                {
                    return Fill::Stopped(e, Ended::Failure);
                }
                if let Err(e) = self.log(&next) {
                    return Fill::Stopped(e, Ended::Failure);
                }
                if let Ok(Some(pipeline::Event::Reset)) = next {
                    match self.reset(batch, workers) {
                        None => continue,
                        Some(stop) => return stop,
                    }
                }
                if let Ok(Some(pipeline::Event::Tick(t, _))) = next {
                    self.advance(t, batch, workers);
                    continue;
                }
                match self.other(next) {
                    Some(fill) => return fill,
                    None => continue,
                }
            };
            // Every row is a step of its own (a keyed feed).
            let Some((c, _)) = step.rows.first() else {
                continue;
            };
            let (source, ns) = (c.stamp.source as usize, step.time.0);
            // (Under the wall clock without a time field, the row's arrival.)
            let at_ns = (self.timed || self.feed.options().wall_clock).then_some(ns);
            let (axis, time, skipped) = self.place_of(ns);
            if !skipped {
                if let Err(e) = self.barrier((axis, time), batch, workers) {
                    return Fill::Stopped(e, Ended::Failure);
                }
                if let Err(e) = self.log(&next) {
                    return Fill::Stopped(e, Ended::Failure);
                }
            }
            let Ok(Some(pipeline::Event::Rows(step))) = next else {
                continue;
            };
            let Some((_, cells)) = step.rows.into_iter().next() else {
                continue;
            };
            self.at.clear();
            (self.at).push_str(&self.feed.taken_at(source));
            self.row = cells;
            if at_ns.is_some() {
                self.last = at_ns;
            }
            if self.row[self.key_index].is_none() {
                let e = crate::row::RowError::MissingKey {
                    input: self.key_name.clone(),
                };
                match self.reject(&e) {
                    Some(stop) => {
                        self.rejected = Some((time, self.seq_base + self.seq));
                        return stop;
                    }
                    None => continue,
                }
            }
            let seq = self.seq_base + self.seq;
            self.seq += 1;
            self.clock += 1;
            if skipped {
                self.digest_row(axis);
                continue;
            }
            if let Err(message) = self.check_digest() {
                return Fill::Stopped(message, Ended::Failure);
            }
            // After the barrier: a barrier's digest covers the rows before it.
            self.digest_row(axis);
            // The declared inputs, then the undeclared fields `--pass`
            // carries (the formatter reads them; the monitor does not).
            let cells = self.row[..self.inputs + self.extra].to_vec();
            batch.push(Event::Row(StampedRow {
                time,
                seq,
                at: at_ns,
                rfc3339: self.feed.form() == Some(TimeForm::Rfc3339),
                cells,
            }));
        }
        Fill::More
    }

    /// Where the next row, of time `ns`, goes: its place on the axis checkpoints are counted on
    /// (which an earlier vigil's resume skips by and the digest covers: the stamp with `--time`,
    /// else the row's index), its timely time, and whether a resume skips it.
    fn place_of(&self, ns: i64) -> (u64, u64, bool) {
        let axis = match self.timed {
            true => timely_time(ns),
            false => self.seq,
        };
        // The timely time: the stamp where several readers' rows merge by it, else the row's
        // index in the feed's order, which is the merge's order already. An index is complete
        // as soon as its row is given, so the rows of the latest time are written at once, not
        // when a row of a later time comes (a stamp is complete only then: rows of its time
        // may follow).
        let time = match self.stamp_times {
            true => axis,
            false => self.clock,
        };
        // Rows before a resumed checkpoint were evaluated, and logged, before it; a barrier
        // comes before the row it is due at, so the log's length it records leaves that row
        // out.
        let skipped = match self.skip_by_stamp {
            true => axis < self.skip_before,
            false => time < self.skip_before,
        };
        (axis, time, skipped)
    }

    /// A barrier due at the row the feed holds behind the ticks due before it (the feed ticks
    /// under the wall clock), sent before those ticks, where the feed was settled. At the row
    /// it would record the feed's sources past the row and the scheduler past its ticks: a
    /// resume lost the row. So the resumed feed gives the ticks and the row again.
    fn barrier_before_held_row(
        &mut self,
        batch: &mut Vec<Event>,
        workers: usize,
    ) -> Result<(), String> {
        let Some(ns) = self.feed.held_row_time() else {
            return Ok(());
        };
        let (axis, time, skipped) = self.place_of(ns.0);
        match skipped {
            true => Ok(()),
            false => self.barrier((axis, time), batch, workers),
        }
    }

    /// A time reset: a reset for every worker before the next row (at its index; a reset
    /// before a resumed checkpoint is in the restored monitors already), and the checkpoint
    /// count starting again at the next row, since times start again. Where rows travel at
    /// their stamps (several timed inputs read in parallel) a time that goes back cannot be
    /// sent: the run stops there.
    fn reset(&mut self, batch: &mut Vec<Event>, workers: usize) -> Option<Fill> {
        if self.stamp_times {
            return Some(Fill::Stopped(
                format!(
                    "{}: a time reset in an input read in parallel with others by time: times cannot go back where rows merge by their stamps (give the inputs one --time-less order, or run without --workers)",
                    self.feed.source_names().next().unwrap_or("the trace")
                ),
                Ended::Trace,
            ));
        }
        let time = self.clock;
        let before_resume = match self.skip_by_stamp {
            true => self
                .last
                .is_none_or(|ns| timely_time(ns) < self.skip_before),
            false => time < self.skip_before,
        };
        if !before_resume {
            let once = self.feed.options().on_reset == crate::lang::ast::ResetPolicy::Once;
            self.sweeps += 1;
            self.clock += 1;
            for w in 0..workers {
                batch.push(Event::Reset {
                    time,
                    worker: w as u32,
                    once,
                    sweep: self.sweeps,
                    rfc3339: self.feed.form() == Some(TimeForm::Rfc3339),
                });
            }
        }
        self.next_checkpoint = None;
        None
    }

    /// The run's tick under `--clock wall` (the feed ticks only then: a keyed run's keys
    /// otherwise tick on their own rows): every worker ticks its keys up to `t` before the
    /// next row, at its index.
    fn advance(&mut self, t: crate::time::Time, batch: &mut Vec<Event>, workers: usize) {
        let time = self.clock;
        if time < self.skip_before {
            return;
        }
        self.sweeps += 1;
        self.clock += 1;
        for w in 0..workers {
            batch.push(Event::Advance {
                time,
                worker: w as u32,
                to: t.0,
                sweep: self.sweeps,
                rfc3339: self.feed.form() == Some(TimeForm::Rfc3339),
            });
        }
    }

    /// What the feed gave besides a row: the end of the input or the error
    /// that stopped it (`Some`), else nothing to send (`None`).
    fn other(&mut self, next: Result<Option<pipeline::Event>, pipeline::Stop>) -> Option<Fill> {
        match next {
            // A tick is `advance`'s, a reset `reset`'s; a tcp:// connection joining is
            // logged only.
            Ok(Some(
                pipeline::Event::Tick(..) | pipeline::Event::Source(_) | pipeline::Event::Reset,
            )) => None,
            Ok(Some(pipeline::Event::Rows(_))) => None,
            Ok(None) => Some(match self.check_digest() {
                Ok(()) => Fill::Ended,
                Err(message) => Fill::Stopped(message, Ended::Failure),
            }),
            Err(stop) => Some(Fill::Stopped(stop.message, stop.kind.into())),
        }
    }

    /// With checkpoints: before the first row at or past the next multiple
    /// of `every` (at `axis`, its stamp or index; no row lies between the
    /// multiple and it), a barrier for every worker at the row's timely
    /// `time`, carrying the digest of the rows before it, with the replay
    /// log's length (synced) kept for the writer to record. The first row
    /// (or the first after a resume) starts the count.
    fn barrier(
        &mut self,
        (axis, time): (u64, u64),
        batch: &mut Vec<Event>,
        workers: usize,
    ) -> Result<(), String> {
        let Some(every) = self.every else {
            return Ok(());
        };
        let due = std::mem::take(&mut self.first_barrier)
            || self.next_checkpoint.is_some_and(|next| axis >= next);
        if due {
            let log_len = match &mut self.record {
                Some(record) => Some(record.synced_len(self.feed.form()).map_err(|e| {
                    format!("cannot write the replay log `{}`: {e}", record.path())
                })?),
                None => None,
            };
            let mut at = self
                .at_barriers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            at.push(AtBarrier {
                time,
                log_len,
                sources: self.before.take(),
            });
            drop(at);
            for w in 0..workers {
                batch.push(Event::Barrier {
                    time,
                    worker: w as u32,
                    token: self.digest.digest(),
                });
            }
        }
        if due || self.next_checkpoint.is_none() {
            self.next_checkpoint = Some((axis - axis % every).saturating_add(every));
        }
        Ok(())
    }

    /// Writes what the feed gave to the replay log (`--record`): a step, the
    /// error that stops the run, or, at the end, the header of a log
    /// without steps.
    fn log(
        &mut self,
        next: &Result<Option<pipeline::Event>, pipeline::Stop>,
    ) -> Result<(), String> {
        let Some(record) = &mut self.record else {
            return Ok(());
        };
        let form = self.feed.form();
        let written = match next {
            Ok(Some(pipeline::Event::Rows(step))) => {
                record.write(&pipeline::log::Event::Rows(step.clone()), form)
            }
            Ok(Some(pipeline::Event::Source(name))) => {
                record.write(&pipeline::log::Event::Source(name.clone()), form)
            }
            // A time reset, and the run's tick under the wall clock, as a single-process
            // run's log has them.
            Ok(Some(e @ (pipeline::Event::Tick(..) | pipeline::Event::Reset))) => {
                record.write(&pipeline::log::Event::from(e.clone()), form)
            }
            Ok(None) => record.finish(form),
            Err(stop) => {
                // The log records the exit status the run stops with.
                let status = Ended::from(stop.kind).status();
                let event = pipeline::log::Event::Stop(stop.message.clone(), status);
                record
                    .write(&event, form)
                    .and_then(|()| record.finish(form))
            }
        };
        written.map_err(|e| format!("cannot write the replay log `{}`: {e}", record.path()))
    }

    /// Adds the row just read (its time and declared inputs) to the digest.
    /// The bytes are the routing hash's encoding (`scale::feed`), the time
    /// as 8 little-endian bytes and an absent cell as 0xff, so that any
    /// build can check the digest of another.
    fn digest_row(&mut self, time: u64) {
        self.digest.update(&time.to_le_bytes());
        for cell in &self.row[..self.inputs] {
            match cell {
                None => self.digest.update(&[0xff]),
                Some(v) => crate::scale::feed(&mut self.digest, v),
            }
        }
    }

    /// On a resume, once every row before the checkpoint has been read:
    /// they must be the rows the checkpoint was taken after.
    fn check_digest(&mut self) -> Result<(), String> {
        match self.expect_digest.take() {
            Some(d) if d != self.digest.digest() => {
                let names: Vec<&str> = self.feed.source_names().collect();
                Err(format!(
                    "cannot resume: the trace `{}` differs from the one the checkpoint was taken on (its rows before the checkpoint are not the same)",
                    names.join("`, `")
                ))
            }
            _ => Ok(()),
        }
    }

    /// A row the source refuses (`e` says why): dropped by
    /// `--on-malformed skip|warn` (`None`), else the run stops at it.
    fn reject(&mut self, e: &dyn std::fmt::Display) -> Option<Fill> {
        if self.tally.skip_rejected(&self.at, e) {
            return None;
        }
        Some(Fill::Stopped(format!("{}: {e}", self.at), Ended::Trace))
    }

    /// The time every later row is at or after (what the input may advance
    /// to): the next row's index (after the rows a resume skips, without
    /// `--time`); with stamps for times, the last stamp, since rows of one
    /// time may follow.
    fn frontier(&self) -> u64 {
        match (self.timed, self.stamp_times) {
            (false, _) => self.clock.max(self.skip_before),
            (true, false) => self.clock,
            (true, true) => self.last.map_or(0, timely_time),
        }
    }
}

/// A row of `width` absent cells for a reader to read into. (`vec![None; width]` cloned the
/// absent cell through `Value`'s `Clone`, one cell at a time: about 90 instructions a row.)
pub(crate) fn empty_cells(width: usize) -> Vec<Option<Value>> {
    let mut cells = Vec::with_capacity(width);
    cells.resize_with(width, || None);
    cells
}

/// Continues the replay log (`--record`) a resumed checkpoint recorded at
/// `len` bytes, or refuses a resume that would start or drop one.
pub(crate) fn resume_record(
    record: Option<&mut Record>,
    len: Option<u64>,
    record_path: Option<&str>,
    path: &Path,
) -> Result<(), String> {
    let recording = record.is_some().then(|| record_path.unwrap_or(""));
    check_record(recording, len, path)?;
    match (record, len) {
        (Some(r), Some(len)) => r
            .resume_at(len)
            .map_err(|m| format!("cannot resume from `{}`: {m}", path.display())),
        _ => Ok(()),
    }
}

/// Refuses a resume from the checkpoint at `path` (whose replay log was `len` long, if it
/// recorded one) that would start a replay log (`recording`: its path) or drop one.
pub(crate) fn check_record(
    recording: Option<&str>,
    len: Option<u64>,
    path: &Path,
) -> Result<(), String> {
    let at = path.display();
    match (recording, len) {
        (None, Some(_)) => Err(format!(
            "cannot resume from `{at}`: it was taken with --record; pass it again to continue that log"
        )),
        (Some(log), None) => Err(format!(
            "cannot resume from `{at}`: it was taken without --record (`{log}`), so it cannot continue a replay log"
        )),
        _ => Ok(()),
    }
}
