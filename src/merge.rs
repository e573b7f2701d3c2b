//! The deterministic merge of several sources into one sequence of steps (consistent time).
//!
//! Every row is stamped (time, source, sequence): its time, the priority of its source (the
//! order the sources are given) and its position in that source. Steps follow the stamps:
//!
//! - **One step per distinct time across sources**: the first row at time T of every source
//!   that has one forms one step (each source contributes its inputs), the second rows at T the
//!   next step, and so on — rows of one source with equal times are separate steps, in order.
//! - **Clashes**: an input set by two sources in one step takes the value of the source given
//!   first; the step reports each clash (the CLI counts them in its summary).
//! - **Separate rows** (`Merge::separate`, for keyed runs, whose rows are events of different
//!   keys): no two rows share a step; they follow the stamps (time, source, sequence).
//! - **Order within a source**: times never decrease. A row up to the lateness bound `L` older
//!   than its source's latest time is re-stamped to that time (the step keeps both stamps);
//!   an older row is an error.
//! - **When a step is ready**: the step at the smallest queued time T is final once every
//!   source that has not ended has a row queued (its next row, stamped ≥ its queued one, cannot
//!   come before T), or is idle: a live source silent for longer than the caller waits
//!   (`Merge::idle`, the CLI's `--idle-timeout`) no longer holds steps back until its next row;
//!   a row it then delivers older than the last step given is re-stamped to that step's time
//!   (the watermark: time never goes back) and counted as late. So the merge never guesses: a reader (`wants`) says which source must
//!   deliver a row next, and the same rows always give the same steps, whatever the order in
//!   which they were pushed.

use crate::time::Time;
use crate::value::Value;
use std::collections::VecDeque;
use std::fmt;

/// A row's place in the merged order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stamp {
    /// The row's time (after re-stamping).
    pub time: Time,
    /// Its source's priority: the source's index.
    pub source: u32,
    /// Its position in its source (0 for the first row).
    pub seq: u64,
}

/// One source row of a step: its stamp and, if it was re-stamped, the time
/// it carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contribution {
    /// The row's stamp.
    pub stamp: Stamp,
    /// The row's own time, when it was late and re-stamped.
    pub late: Option<Time>,
}

/// An input two sources set in one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clash {
    /// The input's cell.
    pub cell: usize,
    /// The source whose value was taken (the one given first).
    pub kept: u32,
    /// The source whose value was dropped.
    pub dropped: u32,
}

/// One merged step: its time, the cells (every source's inputs), the rows
/// it was made of (in source order, with their own cells: what a replay log
/// records) and the clashes.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The step's time.
    pub time: Time,
    /// One cell per input.
    pub cells: Vec<Option<Value>>,
    /// The source rows merged into the step, by source priority.
    pub rows: Vec<(Contribution, Vec<Option<Value>>)>,
    /// Inputs set by more than one of them.
    pub clashes: Vec<Clash>,
}

impl Step {
    /// The step the rows `rows` (one per source at most, in source order)
    /// make at `time`: each cell from the first row that sets it; a clash
    /// for each later one (but for cell `exempt`).
    pub fn of_rows(
        time: Time,
        width: usize,
        rows: Vec<(Contribution, Vec<Option<Value>>)>,
        exempt: Option<usize>,
    ) -> Step {
        // One row (every step of one source, most of a merge's): its cells
        // are the step's, and nothing can clash.
        if let [(_, row)] = &rows[..]
            && row.len() == width
        {
            return Step {
                time,
                cells: row.clone(),
                rows,
                clashes: Vec::new(),
            };
        }
        let mut cells: Vec<Option<Value>> = vec![None; width];
        let mut setter: Vec<Option<u32>> = vec![None; width];
        let mut clashes = Vec::new();
        for (c, row) in &rows {
            for (k, v) in row.iter().enumerate() {
                let Some(v) = v else { continue };
                match setter[k] {
                    None => {
                        setter[k] = Some(c.stamp.source);
                        cells[k] = Some(v.clone());
                    }
                    Some(kept) if exempt != Some(k) => clashes.push(Clash {
                        cell: k,
                        kept,
                        dropped: c.stamp.source,
                    }),
                    Some(_) => {}
                }
            }
        }
        Step {
            time,
            cells,
            rows,
            clashes,
        }
    }
}

/// Why a row cannot be merged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MergeError {
    /// A row older than its source's latest time by more than the lateness
    /// bound.
    OutOfOrder {
        /// The source.
        source: u32,
        /// The row's time.
        time: Time,
        /// The source's latest time.
        latest: Time,
    },
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::OutOfOrder { time, latest, .. } => write!(
                f,
                "its time is {} before the latest time of its source; the rows of one source \
                 must be in time order (--lateness allows rows that late)",
                Gap(latest.0.saturating_sub(time.0)),
            ),
        }
    }
}

impl std::error::Error for MergeError {}

/// A duration in nanoseconds, written in the largest unit that divides it.
pub(crate) struct Gap(pub(crate) i64);

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, unit) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
            if self.0 % n == 0 {
                return write!(f, "{}{unit}", self.0 / n);
            }
        }
        write!(f, "{}ns", self.0)
    }
}

/// What a source's queue holds: rows, and time-reset markers.
enum Item {
    Row(Contribution, Vec<Option<Value>>),
    Reset,
}

impl Item {
    /// The time of a row; `None` for a marker.
    fn time(&self) -> Option<Time> {
        match self {
            Item::Row(c, _) => Some(c.stamp.time),
            Item::Reset => None,
        }
    }
}

/// One source's queue and order state.
#[derive(Default)]
struct Source {
    queue: VecDeque<Item>,
    ended: bool,
    /// Silent for too long (`Merge::idle`): steps do not wait for it.
    idle: bool,
    latest: Option<Time>,
    seq: u64,
}

/// The merge of several sources' rows into steps (see the module doc).
pub struct Merge {
    width: usize,
    lateness: i64,
    /// A cell no clash is counted for (the time field, when it is an
    /// input: every source sets it to the same time).
    exempt: Option<usize>,
    /// Whether every row is a step of its own (`separate`).
    separate: bool,
    sources: Vec<Source>,
    /// The time of the last step given: the watermark no later row may go
    /// below (it can, from a source that was idle).
    emitted: Option<Time>,
}

impl Merge {
    /// A merge of `sources` sources whose rows have `width` cells; rows up
    /// to `lateness` nanoseconds late are re-stamped.
    pub fn new(sources: usize, width: usize, lateness: i64) -> Merge {
        Merge {
            width,
            lateness: lateness.max(0),
            exempt: None,
            separate: false,
            sources: (0..sources).map(|_| Source::default()).collect(),
            emitted: None,
        }
    }

    /// Adds a source (a connection accepted while the merge runs), of the
    /// lowest priority so far; returns its index.
    pub fn add_source(&mut self) -> usize {
        self.sources.push(Source::default());
        self.sources.len() - 1
    }

    /// Counts no clash for cell `cell`.
    pub fn exempt(mut self, cell: usize) -> Merge {
        self.exempt = Some(cell);
        self
    }

    /// Makes every row a step of its own, in stamp order (time, then
    /// source, then sequence): for rows that are events of different keys
    /// (a keyed run), which one step must not mix.
    pub fn separate(mut self) -> Merge {
        self.separate = true;
        self
    }

    /// Queues the next row of `source`, at `time`. Returns its stamp.
    pub fn push(
        &mut self,
        source: usize,
        time: Time,
        cells: Vec<Option<Value>>,
    ) -> Result<Contribution, MergeError> {
        assert_eq!(cells.len(), self.width, "a row has one cell per input");
        let s = &mut self.sources[source];
        assert!(!s.ended, "a row pushed after its source ended");
        s.idle = false;
        let (stamped, late) = match s.latest {
            Some(latest) if time < latest => {
                if latest.0.saturating_sub(time.0) > self.lateness {
                    return Err(MergeError::OutOfOrder {
                        source: source as u32,
                        time,
                        latest,
                    });
                }
                (latest, Some(time))
            }
            _ => (time, None),
        };
        // A source that was idle may deliver a row older than steps already
        // given: it is re-stamped to the watermark (it cannot move time
        // back), and counted as late.
        // The source's own order is checked against its own times: a row
        // re-stamped to the watermark below does not move it.
        s.latest = Some(stamped);
        // Behind a time reset, a row is of the next epoch: the watermark of
        // this one does not apply to it.
        let next_epoch = s.queue.iter().any(|i| matches!(i, Item::Reset));
        let (stamped, late) = match self.emitted {
            Some(w) if stamped < w && !next_epoch => (w, late.or(Some(time))),
            _ => (stamped, late),
        };
        let s = &mut self.sources[source];
        let c = Contribution {
            stamp: Stamp {
                time: stamped,
                source: source as u32,
                seq: s.seq,
            },
            late,
        };
        s.seq += 1;
        s.queue.push_back(Item::Row(c, cells));
        Ok(c)
    }

    /// Queues a time reset of `source` (see `pop_reset`): its later rows
    /// may start again at any time.
    pub fn push_reset(&mut self, source: usize) {
        let s = &mut self.sources[source];
        s.idle = false;
        s.latest = None;
        s.queue.push_back(Item::Reset);
    }

    /// The time reset every source has reached, if one is due: once every
    /// source that has not ended (and is not idle) has a reset marker first
    /// in its queue, and every row before them has been merged, the markers
    /// are taken and the watermark is cleared — a new epoch, whose times
    /// may start anywhere. Returns whether that happened.
    pub fn pop_reset(&mut self) -> bool {
        let waiting = |s: &Source| matches!(s.queue.front(), Some(Item::Reset));
        let parked = self.sources.iter().any(waiting);
        let all = self
            .sources
            .iter()
            .all(|s| waiting(s) || (s.queue.is_empty() && (s.ended || s.idle)));
        if !(parked && all) {
            return false;
        }
        for s in &mut self.sources {
            if waiting(s) {
                s.queue.pop_front();
            }
        }
        self.emitted = None;
        true
    }

    /// Marks `source` as ended: it has no more rows.
    pub fn end(&mut self, source: usize) {
        self.sources[source].ended = true;
    }

    /// Marks `source` as idle (silent for longer than the caller waits, a
    /// live source): steps stop waiting for it until its next row, which
    /// clears the mark.
    pub fn idle(&mut self, source: usize) {
        self.sources[source].idle = true;
    }

    /// The sources that are idle and have not ended.
    pub fn idle_sources(&self) -> impl Iterator<Item = usize> + '_ {
        (self.sources.iter().enumerate())
            .filter(|(_, s)| s.idle && !s.ended)
            .map(|(i, _)| i)
    }

    /// The source that must deliver a row (or end) before the next step is
    /// final; `None` when a step is ready, or every source has ended or is
    /// idle.
    pub fn wants(&self) -> Option<usize> {
        self.sources
            .iter()
            .position(|s| !s.ended && !s.idle && s.queue.is_empty())
    }

    /// Whether every source has ended and every row has been merged.
    pub fn is_done(&self) -> bool {
        self.sources.iter().all(|s| s.ended && s.queue.is_empty())
    }

    /// The next step, if it is final (see `wants`).
    pub fn pop(&mut self) -> Option<Step> {
        if self.wants().is_some() {
            return None;
        }
        // A source at a reset marker waits for the others (`pop_reset`).
        let time = self
            .sources
            .iter()
            .filter_map(|s| s.queue.front().and_then(Item::time))
            .min()?;
        let mut rows = Vec::new();
        for s in &mut self.sources {
            if s.queue.front().and_then(Item::time) != Some(time) {
                continue;
            }
            if self.separate && !rows.is_empty() {
                break;
            }
            if let Some(Item::Row(c, cells)) = s.queue.pop_front() {
                rows.push((c, cells));
            }
        }
        let step = Step::of_rows(time, self.width, rows, self.exempt);
        self.emitted = Some(time);
        Some(step)
    }

    /// Where `source` stands in its own order now: the latest time it gave
    /// (re-stamps below it are measured from it) and the sequence number
    /// its next row gets. A checkpoint records it after each row, so that
    /// a resumed merge, given the rows after that one again, stamps them
    /// as the first merge did.
    pub fn mark(&self, source: usize) -> SourceMark {
        let s = &self.sources[source];
        SourceMark {
            latest: s.latest,
            seq: s.seq,
        }
    }

    /// The time of the last step given (the watermark), if any this epoch.
    pub fn emitted(&self) -> Option<Time> {
        self.emitted
    }

    /// Sets where a fresh merge's sources and watermark stand: a resumed
    /// run's, from the marks and the watermark a checkpoint recorded (see
    /// `mark`). Panics if a source has rows queued already.
    pub fn resume(&mut self, marks: &[SourceMark], emitted: Option<Time>) {
        assert_eq!(marks.len(), self.sources.len(), "one mark per source");
        for (s, m) in self.sources.iter_mut().zip(marks) {
            assert!(s.queue.is_empty(), "a merge resumes before any row");
            s.latest = m.latest;
            s.seq = m.seq;
        }
        self.emitted = emitted;
    }
}

/// A source's place in its own order (`Merge::mark`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceMark {
    /// The latest time the source gave, if any this epoch.
    pub latest: Option<Time>,
    /// The sequence number of its next row.
    pub seq: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(i: i64) -> Option<Value> {
        Some(Value::Int(i))
    }

    /// Runs the merge over `rows` (source, time, cells), pushing each
    /// source's rows when the merge asks for them.
    fn merge(
        sources: usize,
        lateness: i64,
        rows: &[(usize, i64, [Option<Value>; 2])],
    ) -> Vec<Step> {
        let mut m = Merge::new(sources, 2, lateness);
        let mut next: Vec<std::vec::IntoIter<_>> = (0..sources)
            .map(|s| {
                rows.iter()
                    .filter(|r| r.0 == s)
                    .cloned()
                    .collect::<Vec<_>>()
                    .into_iter()
            })
            .collect();
        let mut out = Vec::new();
        loop {
            if let Some(step) = m.pop() {
                out.push(step);
                continue;
            }
            let Some(s) = m.wants() else { break };
            match next[s].next() {
                Some((_, t, cells)) => {
                    m.push(s, Time(t), cells.to_vec()).unwrap();
                }
                None => m.end(s),
            }
        }
        assert!(m.is_done());
        out
    }

    /// A merge resumed after every step it gave, from the marks of each
    /// source's last row taken, re-reading the rows after them, gives the
    /// same steps as the merge that went on: late rows, ties and a row
    /// re-stamped to its source's latest time included.
    #[test]
    fn a_merge_resumed_from_its_marks_gives_the_same_steps() {
        let rows: Vec<(usize, i64, [Option<Value>; 2])> = vec![
            (0, 1, [int(1), None]),
            (1, 1, [None, int(2)]),
            (0, 3, [int(3), None]),
            (0, 2, [int(4), None]),
            (1, 2, [None, int(5)]),
            (1, 2, [None, int(6)]),
            (0, 4, [int(7), None]),
            (1, 5, [None, int(8)]),
            (1, 4, [None, int(9)]),
        ];
        let want = merge(2, 2, &rows);
        let per_source: Vec<Vec<_>> = (0..2)
            .map(|s| rows.iter().filter(|r| r.0 == s).cloned().collect())
            .collect();
        for cut in 0..=want.len() {
            // The first merge, up to `cut` steps, marking each row it queues.
            let mut m = Merge::new(2, 2, 2);
            let mut read = [0usize; 2];
            let mut marks: [Vec<SourceMark>; 2] = Default::default();
            let mut taken = [(0usize, None::<SourceMark>); 2];
            let mut got = Vec::new();
            while got.len() < cut {
                if let Some(step) = m.pop() {
                    for (c, _) in &step.rows {
                        let s = c.stamp.source as usize;
                        let k = usize::try_from(c.stamp.seq).unwrap();
                        taken[s] = (k + 1, Some(marks[s][k]));
                    }
                    got.push(step);
                    continue;
                }
                let s = m.wants().unwrap();
                match per_source[s].get(read[s]) {
                    Some((_, t, cells)) => {
                        m.push(s, Time(*t), cells.to_vec()).unwrap();
                        marks[s].push(m.mark(s));
                        read[s] += 1;
                    }
                    None => m.end(s),
                }
            }
            // The resumed merge: the rows after each source's last taken.
            let mut r = Merge::new(2, 2, 2);
            let resumed: Vec<SourceMark> = (taken.iter())
                .map(|(_, mark)| {
                    mark.unwrap_or(SourceMark {
                        latest: None,
                        seq: 0,
                    })
                })
                .collect();
            r.resume(&resumed, m.emitted());
            let mut next = [taken[0].0, taken[1].0];
            loop {
                if let Some(step) = r.pop() {
                    got.push(step);
                    continue;
                }
                let Some(s) = r.wants() else { break };
                match per_source[s].get(next[s]) {
                    Some((_, t, cells)) => {
                        r.push(s, Time(*t), cells.to_vec()).unwrap();
                        next[s] += 1;
                    }
                    None => r.end(s),
                }
            }
            assert_eq!(got, want, "resumed after {cut} steps");
        }
    }

    #[test]
    fn equal_times_of_two_sources_are_one_step_and_of_one_source_two() {
        let steps = merge(
            2,
            0,
            &[
                (0, 1, [int(1), None]),
                (0, 1, [int(2), None]),
                (0, 3, [int(3), None]),
                (1, 1, [None, int(10)]),
                (1, 2, [None, int(20)]),
            ],
        );
        let shown: Vec<(i64, Vec<Option<Value>>)> =
            steps.iter().map(|s| (s.time.0, s.cells.clone())).collect();
        assert_eq!(
            shown,
            [
                (1, vec![int(1), int(10)]),
                (1, vec![int(2), None]),
                (2, vec![None, int(20)]),
                (3, vec![int(3), None]),
            ]
        );
        assert_eq!(steps[0].rows.len(), 2);
    }

    #[test]
    fn an_idle_source_does_not_hold_steps_back_and_cannot_move_time_back() {
        let mut m = Merge::new(2, 2, 0);
        m.push(0, Time(5), vec![int(1), None]).unwrap();
        assert_eq!(m.wants(), Some(1));
        m.idle(1);
        assert_eq!(m.idle_sources().collect::<Vec<_>>(), [1]);
        assert_eq!(m.pop().unwrap().time, Time(5));
        // Its late row comes after the watermark: re-stamped to it.
        let c = m.push(1, Time(3), vec![None, int(2)]).unwrap();
        assert_eq!((c.stamp.time, c.late), (Time(5), Some(Time(3))));
        assert_eq!(m.idle_sources().count(), 0);
        // Its own order is still its own times: 4 follows 3.
        let c = m.push(1, Time(4), vec![None, int(3)]).unwrap();
        assert_eq!((c.stamp.time, c.late), (Time(5), Some(Time(4))));
    }

    #[test]
    fn a_time_reset_waits_for_every_source_then_starts_an_epoch() {
        let mut m = Merge::new(2, 2, 0);
        m.push(0, Time(100), vec![int(1), None]).unwrap();
        m.push_reset(0);
        m.push(0, Time(5), vec![int(2), None]).unwrap();
        m.push(1, Time(90), vec![None, int(1)]).unwrap();
        assert_eq!(m.pop().unwrap().time, Time(90));
        assert_eq!(m.wants(), Some(1), "source 1 may still have old-epoch rows");
        m.push(1, Time(100), vec![None, int(2)]).unwrap();
        assert_eq!(m.pop().unwrap().time, Time(100), "both rows at 100");
        assert!(
            m.pop().is_none() && !m.pop_reset(),
            "source 1 has not reset"
        );
        m.push_reset(1);
        assert!(m.pop().is_none());
        assert!(m.pop_reset());
        // The new epoch's rows are not late, though older than the last step.
        m.push(1, Time(6), vec![None, int(3)]).unwrap();
        m.end(0);
        m.end(1);
        let (a, b) = (m.pop().unwrap(), m.pop().unwrap());
        assert_eq!((a.time, b.time), (Time(5), Time(6)));
        assert!(a.rows.iter().chain(&b.rows).all(|(c, _)| c.late.is_none()));
        assert!(m.is_done());
    }

    #[test]
    fn separate_rows_follow_the_stamps() {
        let mut m = Merge::new(2, 2, 0).separate();
        m.push(0, Time(4), vec![int(1), None]).unwrap();
        m.push(1, Time(4), vec![int(2), None]).unwrap();
        m.end(0);
        m.end(1);
        let a = m.pop().unwrap();
        let b = m.pop().unwrap();
        assert_eq!((a.cells[0].clone(), b.cells[0].clone()), (int(1), int(2)));
        assert!(a.clashes.is_empty() && m.pop().is_none());
    }

    #[test]
    fn a_clash_takes_the_first_source_and_is_reported() {
        let steps = merge(2, 0, &[(0, 5, [int(1), None]), (1, 5, [int(2), int(3)])]);
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].cells, [int(1), int(3)]);
        assert_eq!(
            steps[0].clashes,
            [Clash {
                cell: 0,
                kept: 0,
                dropped: 1
            }]
        );
    }

    #[test]
    fn a_late_row_is_restamped_within_the_bound_and_refused_beyond() {
        let steps = merge(1, 2, &[(0, 5, [int(1), None]), (0, 4, [int(2), None])]);
        assert_eq!(steps[1].time, Time(5));
        assert_eq!(steps[1].rows[0].0.late, Some(Time(4)));
        let mut m = Merge::new(1, 2, 2);
        m.push(0, Time(5), vec![None, None]).unwrap();
        let e = m.push(0, Time(2), vec![None, None]).unwrap_err();
        assert!(e.to_string().contains("3ns before"), "{e}");
    }

    #[test]
    fn no_step_is_final_while_a_source_may_still_deliver_an_earlier_row() {
        let mut m = Merge::new(2, 2, 0);
        m.push(0, Time(5), vec![int(1), None]).unwrap();
        assert_eq!(m.wants(), Some(1));
        assert!(m.pop().is_none());
        m.push(1, Time(3), vec![None, int(1)]).unwrap();
        assert_eq!(m.pop().unwrap().time, Time(3));
        assert!(m.pop().is_none(), "source 1 may still have a row before 5");
        m.end(1);
        assert_eq!(m.pop().unwrap().time, Time(5));
        m.end(0);
        assert!(m.is_done());
    }
}
