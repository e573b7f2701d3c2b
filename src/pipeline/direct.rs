//! The steps of a run of one reader without a feed (no time, one source): each row read is
//! a step as it is, given to the run's one loop ([`RunLoop::go`]) as [`Direct`] steps.
//!
//! ```
//! use vigil::pipeline::direct::Direct;
//! use vigil::pipeline::drive::End;
//! use vigil::pipeline::run_loop::RunLoop;
//! use vigil::pipeline::sink::{Alerts, ColumnOptions, Columns};
//! use vigil::pipeline::{Malformed, Monitors};
//! use vigil::trace::{self, OutputFormat, RowReader, TraceFormat};
//! use vigil::{Monitor, Spec};
//!
//! let text = "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x\n";
//! let spec = Spec::parse("sum.dsrv", text)?;
//! // Four rows, one of them malformed.
//! let rows = Box::new(std::io::Cursor::new(b"x\n1\n2\nthree\n4\n".to_vec()));
//! let mut reader = trace::reader_from_bufread("rows.csv", rows, TraceFormat::Csv, &spec.input_schema())?;
//! let mut monitors = Monitors::Single(Box::new(Monitor::builder(&spec).build()));
//!
//! // The outputs go to a CSV file, the alerts (none here) nowhere.
//! let out = std::env::temp_dir().join(format!("vigil-doc-drive-{}.csv", std::process::id()));
//! let columns = Columns::new(&spec, &ColumnOptions::default(), OutputFormat::Csv)?;
//! let names = columns.writer_names(&monitors.output_names(), OutputFormat::Csv);
//! let mut writer = trace::make_writer(OutputFormat::Csv, names, Box::new(std::fs::File::create(&out)?));
//! let mut alerts = Alerts::json(&spec, None, Box::new(std::io::sink()), "nowhere".into());
//! let mut run = RunLoop {
//!     malformed: Malformed::Skip,
//!     ..RunLoop::new(&columns, OutputFormat::Csv, 1, vigil::notice::ignore())
//! };
//! let mut progress = |_: u64, _: &dyn RowReader| {};
//! let mut steps = Direct::new(reader.as_mut(), "rows.csv", true, 1, &mut progress);
//! let (end, _) = run.go(&mut steps, &mut monitors, writer.as_mut(), &mut alerts)?;
//! assert_eq!(end, End::Done);
//! assert_eq!((run.counts.rows_read, run.counts.steps, run.counts.skipped), (4, 3, 1));
//! writer.flush()?;
//! assert_eq!(std::fs::read_to_string(&out)?, "step,total\n0,1\n1,3\n2,7\n");
//! # std::fs::remove_file(&out)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::checkpoint::Checkpointer;
use super::drive::{Counts, End, dropped, stop, trace_end};
use super::run_loop::{RunLoop, Steps};
use super::sink::Alerts;
use super::{Event, Monitors, droppable, row_location};
use crate::merge::Step;
use crate::notice::Notice;
use crate::time::Time;
use crate::trace::{OutputWriter, RowReader};
use std::io;

/// The steps of one reader read directly, for the run's loop
/// ([`RunLoop::go`]): no time and one source, so each row is a step as it
/// is read, into the one step this keeps (nothing is allocated per row).
/// A keyed monitor, a stream, triggers or passed fields go this way; a
/// plain monitor over a regular file goes in [`batches`](super::drive::batches).
pub struct Direct<'a> {
    reader: &'a mut dyn RowReader,
    /// The source's name in messages.
    name: &'a str,
    /// Whether the reader's position names the line a row ended on (JSON
    /// lines and CSV, not `.input` blocks).
    lines: bool,
    progress: &'a mut dyn FnMut(u64, &dyn RowReader),
    /// The step being evaluated: its cells are the row's (the monitor's
    /// inputs, then any passed fields).
    step: Event,
}

impl<'a> Direct<'a> {
    /// The steps of `reader`, a source called `name` whose rows have
    /// `width` cells (`lines`: its positions name lines), saying the rows
    /// read so far through `progress` after each.
    pub fn new(
        reader: &'a mut dyn RowReader,
        name: &'a str,
        lines: bool,
        width: usize,
        progress: &'a mut dyn FnMut(u64, &dyn RowReader),
    ) -> Direct<'a> {
        let step = Step {
            time: Time(0),
            cells: vec![None; width],
            rows: Vec::new(),
            clashes: Vec::new(),
        };
        Direct {
            reader,
            name,
            lines,
            progress,
            step: Event::Rows(step),
        }
    }
}

impl Steps for Direct<'_> {
    #[inline]
    fn next_event(
        &mut self,
        run: &mut RunLoop<'_>,
        writer: &mut dyn OutputWriter,
    ) -> io::Result<Result<Option<&Event>, End>> {
        loop {
            let Event::Rows(step) = &mut self.step else {
                unreachable!("a direct run's event is its step")
            };
            let next = self.reader.next_row(&mut step.cells);
            for w in self.reader.take_warnings() {
                (run.notify)(Notice::Trace(w));
            }
            match next {
                Ok(true) => break,
                Ok(false) => return Ok(Ok(None)),
                Err(e) if droppable(run.malformed, &e, &*self.reader) => {
                    run.counts.rows_read += 1;
                    dropped(run.malformed, &run.notify, e.to_string(), &mut run.counts);
                }
                Err(e) => return stop(writer, trace_end(&e)).map(Err),
            }
        }
        run.counts.rows_read += 1;
        Ok(Ok(Some(&self.step)))
    }

    #[inline]
    fn caught_up(&mut self) -> bool {
        !self.reader.row_ready()
    }

    fn commit(&mut self) {
        self.reader.commit();
    }

    fn locate(&self, _: Option<usize>, counts: &Counts) -> String {
        row_location(self.name, &*self.reader, self.lines, counts.rows_read)
    }

    #[inline]
    fn progress(&mut self, counts: &Counts) {
        (self.progress)(counts.rows_read, &*self.reader);
    }

    #[inline]
    fn settled(&self) -> bool {
        true
    }

    fn checkpoint(
        &mut self,
        ck: &mut Checkpointer,
        _: &str,
        runner: &Monitors,
        writer: &mut dyn OutputWriter,
        alerts: &mut Alerts,
    ) -> io::Result<Result<(), String>> {
        ck.write(runner, &mut *self.reader, writer, alerts.sink())
    }

    fn ended(&mut self, checkpointed: bool, writer: &mut dyn OutputWriter) -> io::Result<()> {
        // A checkpoint committed the rows; else they are done with now.
        if !checkpointed {
            writer.flush()?;
            self.reader.commit();
        }
        Ok(())
    }
}
