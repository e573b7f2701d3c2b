//! One live source read in parallel by process 0's workers as consumers sharing it (a Redis
//! Stream read by a consumer group, or an MQTT source by members of a shared subscription, one
//! per worker): each worker's reader is delivered other rows, stamped with their entry's time
//! (`timely_time` of the ID's) or their arrival (from one clock every member shares), so that
//! every row travels at its place in the stream (or in the order of arrival) and the writer
//! puts the outputs in that order — for Redis, the single-process run's. A consumer with
//! nothing to read moves its frontier to what the group has delivered (`Consumer::delivered`),
//! since every row it is given later comes after it: the other workers' rows are then written
//! without waiting for it.

use super::parts::PartLog;
use super::source::{Fill, ReadCounts, Reading, StopAt, Tally};
use super::{Event, StampedRow, timely_time};
use crate::live::{Consumer, Polled};
use crate::pipeline::drive::Ended;
use crate::row::RowError;
use std::sync::Arc;

/// A worker's consumer of the shared source.
pub(crate) struct ConsumerReader {
    consumer: Box<dyn Consumer>,
    /// The source's name in messages.
    name: String,
    width: usize,
    key: (usize, String),
    /// The cells a row keeps (the monitor's inputs, the passed fields).
    cells: usize,
    tally: Tally,
    /// Every later row is at or after this time.
    frontier: u64,
    read: u64,
    /// The least row at which a reader stopped the run, shared by every reader.
    stop_at: Arc<StopAt>,
    /// Where this reader stopped it, if it did.
    stopped_at: (u64, u64),
    /// Its part of the replay log (`--record`): each row at its place, with its stamp.
    log: Option<PartLog>,
}

impl ConsumerReader {
    pub(crate) fn new(
        consumer: Box<dyn Consumer>,
        name: String,
        (width, cells): (usize, usize),
        key: (usize, String),
        (tally, stop_at): (Tally, Arc<StopAt>),
        log: Option<PartLog>,
    ) -> ConsumerReader {
        ConsumerReader {
            consumer,
            name,
            width,
            key,
            cells,
            tally,
            frontier: 0,
            read: 0,
            stop_at,
            stopped_at: (u64::MAX, u64::MAX),
            log,
        }
    }

    /// Stops the run at the row just read: the writer writes no row at or after it, as a
    /// single-process run writes nothing after its error.
    fn stop(&mut self, message: String, exit: Ended) -> Fill {
        let time = (self.consumer.stamp()).map_or(self.frontier, |t| timely_time(t.0));
        self.stopped_at = (time, time);
        self.stop_at.stop((time, time));
        super::parts::stopped(self.log.as_mut(), (time, 0), message, exit)
    }

    /// Moves the frontier past the group's last delivered entry, when nothing is to be read.
    fn idle(&mut self) -> Result<(), String> {
        let delivered = self.consumer.delivered().map_err(|e| e.to_string())?;
        if let Some(t) = delivered {
            self.frontier = self.frontier.max(timely_time(t.0).saturating_add(1));
        }
        Ok(())
    }

    /// Reads rows into `batch` until it holds `n`, or none has arrived.
    fn fill_rows(&mut self, batch: &mut Vec<Event>, n: usize) -> Fill {
        while batch.len() < n {
            // The rows that have arrived go out together; the next may be long in coming.
            if !batch.is_empty() && !self.consumer.row_ready() {
                return Fill::More;
            }
            let mut cells = super::source::empty_cells(self.width);
            match self.consumer.poll(&mut cells) {
                Ok(Polled::Row) => self.read += 1,
                Ok(Polled::Idle) => {
                    return match self.idle() {
                        // Another reader stopped the run at a row before any this one can
                        // still be given.
                        Ok(()) if self.stop_at.passed((self.frontier, self.frontier)) => {
                            Fill::Ended
                        }
                        Ok(()) => Fill::More,
                        Err(message) => Fill::Stopped(message, Ended::Failure),
                    };
                }
                Ok(Polled::End) => {
                    self.frontier = u64::MAX;
                    return Fill::Ended;
                }
                Err(e) => match self.tally.malformed_row(&e, self.consumer.as_ref()) {
                    // A malformed row dropped (`--on-malformed skip|warn`).
                    None => continue,
                    Some((message, exit)) => return self.stop(message, exit),
                },
            }
            let Some(stamp) = self.consumer.stamp() else {
                let message = format!("{}: a row without its entry's stamp", self.name);
                return Fill::Stopped(message, Ended::Failure);
            };
            let time = timely_time(stamp.0);
            self.frontier = time.saturating_add(1);
            if self.stop_at.passed((time, time)) {
                // Another reader stopped the run at an earlier row.
                return Fill::Ended;
            }
            if cells[self.key.0].is_none() {
                let at = crate::pipeline::row_location(&self.name, self.consumer.as_ref(), true, 0);
                let e = RowError::MissingKey {
                    input: self.key.1.clone(),
                };
                if self.tally.skip_rejected(&at, &e) {
                    continue;
                }
                return self.stop(format!("{at}: {e}"), Ended::Trace);
            }
            cells.truncate(self.cells);
            if let Some(log) = &mut self.log
                && let Err(message) = log.row_at(time, stamp.0, &cells)
            {
                return self.stop(message, Ended::Failure);
            }
            // Untimed: the entry's place in the stream is the row's time and position.
            batch.push(Event::Row(StampedRow::new(time, time, None, cells)));
        }
        Fill::More
    }
}

impl Reading for ConsumerReader {
    fn fill(&mut self, batch: &mut Vec<Event>, n: usize, _workers: usize) -> Fill {
        let fill = self.fill_rows(batch, n);
        // The rows sent are in the log's part, handed to the file (a stream's rows may be
        // the last for long), and at the end on disk (a header alone if it read nothing).
        let flushed = match (&fill, &mut self.log) {
            (Fill::More, Some(log)) => log.flush(false),
            (Fill::Ended, Some(log)) => log.flush(true),
            _ => Ok(()),
        };
        match flushed {
            Ok(()) => fill,
            Err(message) => self.stop(message, Ended::Failure),
        }
    }

    fn frontier(&self) -> u64 {
        self.frontier
    }

    fn in_pieces(&self) -> bool {
        true
    }

    fn stopped_at(&self) -> (u64, u64) {
        self.stopped_at
    }

    fn read(&self) -> ReadCounts {
        ReadCounts {
            rows: self.read + self.tally.rows_read,
            skipped: self.tally.skipped,
            late: 0,
            sources: 0,
        }
    }
}
