//! A scaled run's several inputs read in parallel: each regular file read whole by one of
//! process 0's workers, input `s` of `S` by worker `s % threads`.
//!
//! Without a time field, process 0's feed stamps a row of input `s` with its index among that
//! input's rows (a malformed row dropped takes none), and merges the inputs by stamp, then by
//! input: so the single-process order is (index, input). A reader here stamps input `s`'s
//! `k`-th row with the timely time `k·S + s`, which orders the rows of every input exactly so;
//! the writer's (time, position) order is then the single-process output's. A worker reading
//! several inputs takes their rows in that order too (the least next time first), so that its
//! frontier, the least time it may still send, moves on with every row.
//!
//! Where a row stops the run, the reader stops it where the single-process run stopped (a row
//! without its key: at the row; a malformed row: after that input's row before it, which is
//! when the feed reads it), through `PartSetup::stop_at`: the writer writes nothing at or
//! after it.

use super::parts::PartSetup;
use super::source::{Fill, ReadCounts, Reading};
use super::{Event, StampedRow};
use crate::notice::Notice;
use crate::pipeline::drive::Ended;
use crate::row::RowError;
use crate::trace::{self, InputSchema, ReaderOptions, RowReader, TraceFormat};

/// The inputs of a run, opened, for process 0's workers to read in parallel.
pub(crate) struct Inputs {
    /// Each input's path and reader, in priority order; a reader is taken by the worker that
    /// reads it.
    inputs: Vec<(String, Option<Box<dyn RowReader>>)>,
}

/// One input a worker reads.
struct Mine {
    /// Its index among the run's inputs.
    index: u64,
    path: String,
    /// Its reader; `None` once it ended.
    reader: Option<Box<dyn RowReader>>,
    /// Rows stamped so far (the next row's index).
    rows: u64,
}

impl Inputs {
    /// Opens the inputs `inputs` (regular files of JSON lines or CSV, in priority order, read
    /// with `schema`), as a run through the feed opens them before it starts.
    pub(crate) fn open(
        inputs: &[(String, TraceFormat)],
        schema: &InputSchema,
        options: ReaderOptions,
    ) -> Result<Inputs, String> {
        let mut opened = Vec::with_capacity(inputs.len());
        for (path, format) in inputs {
            let reader = trace::open_trace(path, *format, schema, options)
                .map_err(|e| e.to_string())?
                .reader;
            opened.push((path.clone(), Some(reader)));
        }
        Ok(Inputs { inputs: opened })
    }

    /// How many inputs there are.
    pub(crate) fn count(&self) -> usize {
        self.inputs.len()
    }

    /// The reading of process 0's worker `worker` of `threads`: inputs `worker`,
    /// `worker + threads`, … (their readers taken from here).
    pub(crate) fn reader(
        &mut self,
        worker: usize,
        threads: usize,
        setup: PartSetup,
    ) -> InputsReader {
        let total = self.inputs.len() as u64;
        let inputs = (worker..self.inputs.len())
            .step_by(threads)
            .map(|s| Mine {
                index: s as u64,
                path: self.inputs[s].0.clone(),
                reader: self.inputs[s].1.take(),
                rows: 0,
            })
            .collect();
        InputsReader {
            total,
            inputs,
            setup,
            read: 0,
            stopped_at: (u64::MAX, u64::MAX),
        }
    }
}

/// One worker's inputs, their rows taken in the single-process order.
pub(crate) struct InputsReader {
    /// The run's inputs, `S`.
    total: u64,
    inputs: Vec<Mine>,
    setup: PartSetup,
    /// Rows the readers gave (a row without its key included).
    read: u64,
    /// Where it stopped the run, if it did.
    stopped_at: (u64, u64),
}

impl InputsReader {
    /// The time of input `m`'s next row.
    fn next_time(&self, m: &Mine) -> u64 {
        m.rows.saturating_mul(self.total).saturating_add(m.index)
    }

    /// The input whose row comes next (the least next time), if one is still read.
    fn next_input(&self) -> Option<usize> {
        (self.inputs.iter().enumerate())
            .filter(|(_, m)| m.reader.is_some())
            .min_by_key(|(_, m)| self.next_time(m))
            .map(|(i, _)| i)
    }

    /// Stops the run at `time`: the writer writes no row at or after it (nor a replay of the
    /// log, where the stop is written at its place).
    fn stop(&mut self, time: u64, message: String, exit: Ended) -> Fill {
        self.stopped_at = (time, time);
        self.setup.stop_at.stop((time, time));
        super::parts::stopped(self.setup.log.as_mut(), (time, 0), message, exit)
    }

    /// Reads rows into `batch` until it holds `n` or the inputs end.
    fn fill_rows(&mut self, batch: &mut Vec<Event>, n: usize) -> Fill {
        let width = self.setup.schema.names.len();
        while batch.len() < n {
            let Some(i) = self.next_input() else {
                return Fill::Ended;
            };
            let time = self.next_time(&self.inputs[i]);
            if self.setup.stop_at.passed((time, time)) {
                // Another reader stopped the run at an earlier row.
                return Fill::Ended;
            }
            let total = self.total;
            let m = &mut self.inputs[i];
            let reader = m
                .reader
                .as_mut()
                .expect("`next_input` takes a reader still open");
            let mut cells = super::source::empty_cells(width);
            let next = reader.next_row(&mut cells);
            for w in reader.take_warnings() {
                (self.setup.tally.notify)(Notice::Trace(w));
            }
            match next {
                Ok(true) => self.read += 1,
                Ok(false) => {
                    m.reader = None;
                    continue;
                }
                Err(e) => {
                    // A malformed row dropped (`--on-malformed skip|warn`) takes no index, as
                    // in the feed.
                    let Some((message, exit)) = self.setup.tally.malformed_row(&e, reader.as_ref())
                    else {
                        continue;
                    };
                    // The feed reads an input's next row as soon as it gave the one before
                    // (the merge needs every input's next time), and every input's first
                    // before it gives any: so the single-process run stopped right after
                    // this input's row before, having written the rows up to it.
                    let at = match m.rows.checked_sub(1) {
                        Some(before) => before * total + m.index + 1,
                        None => 0,
                    };
                    return self.stop(at, message, exit);
                }
            }
            // The row takes its index, with its key or without.
            m.rows += 1;
            if cells[self.setup.key_index].is_none() {
                let at = crate::pipeline::row_location(&m.path, reader.as_ref(), true, 0);
                let e = RowError::MissingKey {
                    input: self.setup.key_name.clone(),
                };
                if self.setup.tally.skip_rejected(&at, &e) {
                    continue;
                }
                return self.stop(time, format!("{at}: {e}"), Ended::Trace);
            }
            cells.truncate(self.setup.cells);
            // The row's place in the replay log, with the feed's stamp: its input, and its
            // index among that input's rows.
            let stamp = (m.index as u32, m.rows - 1);
            if let Some(log) = &mut self.setup.log
                && let Err(message) = log.row_of(time, stamp, &cells)
            {
                return self.stop(time, message, Ended::Failure);
            }
            // Untimed: the position is the time.
            batch.push(Event::Row(StampedRow::new(time, time, None, cells)));
        }
        Fill::More
    }
}

impl Reading for InputsReader {
    fn fill(&mut self, batch: &mut Vec<Event>, n: usize, _workers: usize) -> Fill {
        let fill = self.fill_rows(batch, n);
        // At its end the worker's part of the log is on disk, a header alone if it read
        // nothing (the manifest names it, and a part left by an earlier run is replaced).
        if let Fill::Ended = fill
            && let Some(log) = &mut self.setup.log
            && let Err(message) = log.flush(true)
        {
            let at = self.frontier();
            return self.stop(at, message, Ended::Failure);
        }
        fill
    }

    fn frontier(&self) -> u64 {
        self.next_input()
            .map_or(u64::MAX, |i| self.next_time(&self.inputs[i]))
    }

    fn stopped_at(&self) -> (u64, u64) {
        self.stopped_at
    }

    fn read(&self) -> ReadCounts {
        let t = &self.setup.tally;
        ReadCounts {
            rows: self.read + t.rows_read,
            skipped: t.skipped,
            late: 0,
            sources: self.inputs.len(),
        }
    }
}

/// Rows read from an input's start to find how it writes its times.
const FORM_PROBE_ROWS: usize = 1000;

/// How every input's first time (within its first rows) is written, as numbers in `unit` or as
/// RFC 3339 dates, where they agree (`None` where they do not, or one cannot be read). A run
/// writes every time as the first one it read was written, which process 0's feed reads from
/// the inputs in their order; inputs read apart each learn it from their own first row, so they
/// may be read apart only when the ways agree.
pub(crate) fn common_time_form(
    inputs: &[(String, TraceFormat)],
    schema: &InputSchema,
    time_cell: Option<usize>,
    unit: crate::time::TimeUnit,
) -> Option<crate::time::TimeForm> {
    let Some(cell) = time_cell else {
        return Some(crate::time::TimeForm::Number(unit));
    };
    let mut forms = Vec::with_capacity(inputs.len());
    for (path, format) in inputs {
        let Ok(opened) = trace::open_trace(path, *format, schema, ReaderOptions::default()) else {
            return None;
        };
        let mut reader = opened.reader;
        let mut cells = vec![None; schema.names.len()];
        let form = (0..FORM_PROBE_ROWS).find_map(|_| match reader.next_row(&mut cells) {
            Ok(true) => cells[cell]
                .as_ref()
                .and_then(|v| crate::time::Time::from_value(v, unit).ok())
                .map(|(_, form)| Some(form)),
            // The end, or a row that does not read: look no further.
            Ok(false) | Err(_) => Some(None),
        });
        forms.push(form.flatten()?);
    }
    let first = *forms.first()?;
    forms.iter().all(|&f| f == first).then_some(first)
}
