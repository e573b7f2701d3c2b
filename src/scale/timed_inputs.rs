//! A scaled run's several inputs with a time field, read in parallel: each regular file read by
//! one of process 0's workers through a feed of its own, input `s` by worker `s % threads`.
//!
//! Process 0's feed of every input merges their rows by stamp (time, then input, then the
//! input's order), each stamped by its own input alone: a late row within the lateness takes its
//! input's latest time, a later one is an error of that input. So a feed of one input stamps its
//! rows as the feed of all does, and a reader here gives input `s`'s `k`-th row the position
//! `s << 40 | k` beside its time: the writer's (time, position) order is then the merge's, and
//! the output the single-process run's. A worker reading several inputs takes their rows in
//! that order too (the least (time, position) first).
//!
//! Where a row stops the run the readers stop it where the single-process run does, through
//! [`StopAt`]: a row without its key at itself; a row its input cannot give (malformed, too
//! late) right after that input's row before it, since the merge reads an input's next row as
//! soon as it took the one before (and every input's first before it gives any).

use super::Event;
use super::parts::PartLog;
use super::source::{Fill, ReadCounts, Reading, Source, StopAt};
use std::sync::Arc;

/// The bits of a row's position that number it within its input.
const INPUT_ROWS_BITS: u32 = 40;

/// One input a worker reads, through its own feed.
struct Mine {
    source: Source,
    /// Its next row, read ahead to choose between the inputs.
    head: Option<Event>,
    /// Its last row given: time and position.
    last: Option<(u64, u64)>,
    /// Whether it has no more rows.
    ended: bool,
}

/// One worker's inputs with a time field, their rows taken in the merge's order.
pub(crate) struct TimedInputsReader {
    inputs: Vec<Mine>,
    stop_at: Arc<StopAt>,
    /// Why one of its inputs stopped the run: said once the rows of its other inputs before
    /// the stop are given.
    stopped: Option<(String, crate::pipeline::drive::Ended)>,
    /// Where it stopped the run, if it did.
    stopped_at: (u64, u64),
    /// The buffer an input's next row is read into (kept: a row is read ahead every row).
    one: Vec<Event>,
    /// Its part of the replay log (`--record`): each row at its (time, position), with the
    /// stamp its input's feed gave it.
    log: Option<PartLog>,
}

impl TimedInputsReader {
    /// The reader of `sources` (each a [`Source`] over a feed of one input, the `index`-th of
    /// the run's), stopping the run through `stop_at`.
    pub(crate) fn new(
        sources: Vec<(usize, Source)>,
        stop_at: Arc<StopAt>,
        log: Option<PartLog>,
    ) -> TimedInputsReader {
        let inputs = sources
            .into_iter()
            .map(|(index, mut source)| {
                source.seq_base = (index as u64) << INPUT_ROWS_BITS;
                // The readers' rows merge by their stamps.
                source.stamp_times = true;
                Mine {
                    source,
                    head: None,
                    last: None,
                    ended: false,
                }
            })
            .collect();
        TimedInputsReader {
            inputs,
            stop_at,
            stopped: None,
            stopped_at: (u64::MAX, u64::MAX),
            one: Vec::with_capacity(1),
            log,
        }
    }

    /// Reads every input's next row ahead. An input that cannot give it stops the run (and
    /// reads no more); the others go on up to the stop.
    fn read_ahead(&mut self) {
        for m in &mut self.inputs {
            if m.head.is_some() || m.ended {
                continue;
            }
            let one = &mut self.one;
            match m.source.fill(one, 1, 0) {
                Fill::More | Fill::Ended if !one.is_empty() => m.head = one.pop(),
                Fill::More | Fill::Ended => m.ended = true,
                Fill::Stopped(message, ended) => {
                    let at = match m.source.rejected.take() {
                        // A row without its key: the run stops at it.
                        Some(at) => at,
                        // The input's next row could not be read: the single-process run
                        // stopped right after the input's row before it.
                        None => m.last.map_or((0, 0), |(t, q)| (t, q + 1)),
                    };
                    self.stop_at.stop(at);
                    m.ended = true;
                    // The first stop in the merge's order is the run's.
                    if at < self.stopped_at {
                        self.stopped_at = at;
                        self.stopped = Some((message, ended));
                    }
                }
            }
        }
    }

    /// The end of its reading: the error an input stopped the run with, if one did (in the
    /// log's part after the rows before it), and the part on disk.
    fn end(&mut self) -> Fill {
        match self.stopped.take() {
            Some((message, ended)) => {
                super::parts::stopped(self.log.as_mut(), self.stopped_at, message, ended)
            }
            None => match self.log.as_mut().map(|log| log.flush(true)) {
                Some(Err(failed)) => Fill::Stopped(failed, crate::pipeline::drive::Ended::Failure),
                _ => Fill::Ended,
            },
        }
    }

    /// Writes a row given to the log's part: at its (time, position), with its input's
    /// stamp (the input and its index in the position, the time its feed gave it).
    fn log_row(&mut self, event: &Event) -> Result<(), String> {
        let (Some(log), Event::Row(row)) = (&mut self.log, event) else {
            return Ok(());
        };
        let input = (row.seq >> INPUT_ROWS_BITS) as u32;
        let index = row.seq & ((1 << INPUT_ROWS_BITS) - 1);
        let ns = row.at.unwrap_or(0);
        log.row_stamped((row.time, row.seq), (input, index), ns, &row.cells)
    }
}

/// A row event's (time, position).
fn place(event: &Event) -> (u64, u64) {
    match event {
        Event::Row(r) => (r.time, r.seq),
        // A feed without checkpoints sends no barriers, and one whose rows travel at their
        // stamps no resets (it stops at one).
        Event::Barrier { time, .. }
        | Event::Reset { time, .. }
        | Event::Advance { time, .. }
        | Event::ReaderEnd { time, .. } => (*time, 0),
    }
}

impl Reading for TimedInputsReader {
    fn fill(&mut self, batch: &mut Vec<Event>, n: usize, _workers: usize) -> Fill {
        while batch.len() < n {
            self.read_ahead();
            let next = (self.inputs.iter().enumerate())
                .filter_map(|(i, m)| m.head.as_ref().map(|h| (place(h), i)))
                .min();
            let Some((at, i)) = next else {
                return self.end();
            };
            if self.stop_at.passed(at) {
                // This reader or another stopped the run at an earlier row.
                return self.end();
            }
            let m = &mut self.inputs[i];
            m.last = Some(at);
            let Some(row) = m.head.take() else {
                continue;
            };
            if let Err(message) = self.log_row(&row) {
                self.stop_at.stop(at);
                self.stopped_at = at;
                return Fill::Stopped(message, crate::pipeline::drive::Ended::Failure);
            }
            batch.push(row);
        }
        // A batch's rows are handed to the file (the readers' rows are not synced each).
        if let Some(log) = &mut self.log
            && let Err(message) = log.flush(false)
        {
            return Fill::Stopped(message, crate::pipeline::drive::Ended::Failure);
        }
        Fill::More
    }

    fn frontier(&self) -> u64 {
        // Every later row is at or after the least row read ahead, or, for an input not read
        // ahead yet, after its last.
        (self.inputs.iter())
            .filter(|m| !m.ended || m.head.is_some())
            .map(|m| match &m.head {
                Some(h) => place(h).0,
                None => m.last.map_or(0, |(t, _)| t),
            })
            .min()
            .unwrap_or(u64::MAX)
    }

    fn stopped_at(&self) -> (u64, u64) {
        self.stopped_at
    }

    fn read(&self) -> ReadCounts {
        let mut all = ReadCounts::default();
        for m in &self.inputs {
            all += m.source.read();
        }
        all
    }
}
