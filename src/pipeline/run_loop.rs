//! The one row loop of a run ([`RunLoop::go`]): each event its [`Steps`] give — one reader's
//! rows read directly ([`Direct`](super::direct::Direct)), or the events of a [`Feed`]
//! (sources stamped and merged by time, the periodic streams' ticks between their steps) or
//! of a replay log ([`Events`]) — given to an [`Evaluator`] and written through a [`Lines`]
//! sink, a rejected row dropped or the run stopped as the [`Malformed`] policy says, a
//! streaming run's outputs flushed once no row is waiting, and checkpoints taken between
//! steps where the steps are settled (a merged run's with the feed's state, [`Clock`]). A feed's
//! events are also written to a replay log (`--record`) or compared with one (`--check`).
//! (A plain monitor over a regular file is evaluated in batches instead:
//! [`drive::batches`](super::drive::batches).)

use super::checkpoint::{Checkpointer, Clock, OutputFileInfo};
use super::drive::{Counts, End, Ended, rejected, skip_rejected, stop};
use super::log::{Event, Header, LogReader, LogWriter};
use super::sink::{Alerts, Columns, Lines};
use super::{
    Evaluator, Event as FeedEvent, Feed, Flow, Halt, Malformed, Monitors, ResetPolicy, show,
};
use crate::merge::Step;
use crate::notice::{Notice, Notify};
use crate::row::RowError;
use crate::time::{Time, TimeForm, TimeUnit};
use crate::trace::{OutputFormat, OutputWriter};
use crate::value::Sample;
use std::io;

/// Where the steps come from: the feed of the sources (each step written to
/// a log with `record`, or compared with a log's with `check`), or a log's
/// steps (`replay`).
pub struct Events {
    /// The feed of the sources.
    pub live: Feed,
    /// The log each event is written to (`--record`).
    pub record: Option<Record>,
    /// The log each event is compared with (`--check`).
    pub check: Option<LogReader>,
    /// The log whose events are evaluated instead of the feed's (`replay`).
    pub replay: Option<LogReader>,
    /// With `replay`: each source's rows, read from the feed, that the log's
    /// rows of that source must equal (`--check` of a log whose times were
    /// the wall clock's, which reading the traces again cannot give: the
    /// log's times and ticks are taken, its rows checked).
    pub rows_of_sources: Option<SourceRows>,
    /// The event the loop is evaluating.
    slot: Option<FeedEvent>,
}

impl Events {
    /// The events of `live`, neither recorded, checked nor replayed (set
    /// the fields that differ).
    pub fn new(live: Feed) -> Events {
        Events {
            live,
            record: None,
            check: None,
            replay: None,
            rows_of_sources: None,
            slot: None,
        }
    }
}

/// Each source's rows as a feed reads them, taken one by one in the order
/// of a log's rows of that source ([`Events::rows_of_sources`]).
pub struct SourceRows {
    waiting: Vec<std::collections::VecDeque<Vec<Option<crate::value::Value>>>>,
}

impl SourceRows {
    /// For a feed of `sources` sources.
    pub fn new(sources: usize) -> SourceRows {
        SourceRows {
            waiting: vec![std::collections::VecDeque::new(); sources],
        }
    }

    /// Source `s`'s next row, read from `feed` as far as needed (`None`
    /// once it has no more).
    fn next_of(
        &mut self,
        feed: &mut Feed,
        s: usize,
    ) -> Result<Option<Vec<Option<crate::value::Value>>>, String> {
        while self.waiting.get(s).is_some_and(|w| w.is_empty()) {
            match feed.next() {
                Ok(Some(super::Event::Rows(step))) => {
                    for (c, cells) in step.rows {
                        if let Some(w) = self.waiting.get_mut(c.stamp.source as usize) {
                            w.push_back(cells);
                        }
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => return Ok(None),
                Err(stop) => return Err(stop.message),
            }
        }
        Ok(self.waiting.get_mut(s).and_then(|w| w.pop_front()))
    }

    /// Whether any source has a row the log did not take.
    fn any_left(&mut self, feed: &mut Feed) -> Result<bool, String> {
        for s in 0..self.waiting.len() {
            if self.next_of(feed, s)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// A replay log being written: its header waits for the first step, which
/// tells how times are written.
pub struct Record {
    path: String,
    header: Header,
    writer: Option<LogWriter>,
    /// A resumed run's log, cut back to the length its checkpoint
    /// recorded, to go on writing (its header is there already).
    resumed: Option<std::fs::File>,
    /// Whether a source is live (then every line is flushed as written).
    live: bool,
}

impl Record {
    /// A log to be written at `path` with `header` (`live`: every line
    /// flushed as written).
    pub fn new(path: String, header: Header, live: bool) -> Record {
        Record {
            path,
            header,
            writer: None,
            resumed: None,
            live,
        }
    }

    /// The log's writer, its header written (with `form`, once known) the
    /// first time.
    fn writer(&mut self, form: Option<TimeForm>) -> io::Result<&mut LogWriter> {
        if self.writer.is_none() {
            if let Some(f) = form {
                self.header.form = f;
            }
            self.writer = Some(match self.resumed.take() {
                Some(file) => LogWriter::continued(file, self.header.fields.clone()),
                None => LogWriter::create(&self.path, &self.header)?,
            });
        }
        Ok(self.writer.as_mut().expect("created above"))
    }

    /// Writes `event` (times written as `form`, once known).
    pub fn write(&mut self, event: &Event, form: Option<TimeForm>) -> io::Result<()> {
        let live = self.live;
        let w = self.writer(form)?;
        match event {
            Event::Rows(step) => w.write_step(step)?,
            Event::Tick(t, due) => w.write_tick(*t, due)?,
            Event::Stop(message, status) => w.write_stop(message, *status)?,
            Event::Source(name) => w.write_source(name)?,
            Event::Reset => w.write_reset()?,
        }
        // A live run's log is as far as its outputs, should it be killed.
        if live {
            w.flush_buffer()?;
        }
        Ok(())
    }

    /// The log's path, for messages.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The log's length once everything written so far is on disk (its
    /// header written first, with `form`): what a scaled run's checkpoint
    /// records.
    pub fn synced_len(&mut self, form: Option<TimeForm>) -> io::Result<u64> {
        self.writer(form)?.synced_len()
    }

    /// Goes on with the log a checkpoint recorded at `len` bytes (cut back
    /// to it; its header is there already), as a resumed run does.
    pub fn resume_at(&mut self, len: u64) -> Result<(), String> {
        if len > 0 {
            self.resumed = Some(super::checkpoint::reopen_output(
                &self.path,
                len,
                "replay log",
            )?);
        }
        Ok(())
    }

    /// Flushes the log (writing the header of one without steps).
    pub fn finish(&mut self, form: Option<TimeForm>) -> io::Result<()> {
        self.writer(form)?.flush()
    }
}

/// A run: its options and what it has counted (see the module doc).
pub struct RunLoop<'a> {
    /// The columns printed.
    pub columns: &'a Columns,
    /// The output format.
    pub output: OutputFormat,
    /// The sources' names (for a replay, as the log names them); a
    /// connection that joins is added.
    pub names: Vec<String>,
    /// The cells' names (inputs, extra fields, time field).
    pub schema_names: Vec<String>,
    /// The monitor's inputs, first among a step's cells.
    pub inputs: usize,
    /// The time field's cell, if rows carry their time.
    pub time_cell: Option<usize>,
    /// Whether steps are evaluated at their time (a time field).
    pub timed: bool,
    /// The unit of numeric times.
    pub unit: TimeUnit,
    /// How times are written: as the first time read was.
    pub form: Option<TimeForm>,
    /// The key input of a keyed run.
    pub key_input: Option<&'a str>,
    /// Whether outputs and alerts are flushed after every event.
    pub streaming: bool,
    /// What a row the monitor rejects does.
    pub malformed: Malformed,
    /// Steps evaluated (and rows dropped) so far.
    pub counts: Counts,
    /// Clashes so far (inputs two sources set at one time).
    pub clashes: u64,
    /// Ticks evaluated so far.
    pub ticks: u64,
    /// The specification's periods (for reading ticks of a log).
    pub periods: usize,
    /// Where the run's notices go.
    pub notify: Notify,
    /// What a time reset does to a keyed run's ticks.
    pub on_reset: ResetPolicy,
    /// Whether a tick is the run's, for every key of a keyed monitor (a run
    /// whose time follows the wall clock: [`Evaluator::every_key_ticks`]).
    pub every_key_ticks: bool,
    /// The log a replay reads its steps from (for its messages).
    pub replaying: Option<String>,
    /// Checkpoints, taken between steps.
    pub checkpoints: Option<Checkpointer>,
    /// The options that shape the merge, as a checkpoint records them
    /// ([`Clock::options`]).
    pub merge_options: String,
    /// The samples of a step's outputs, kept from step to step so that
    /// writing one allocates nothing.
    pub samples: Vec<Sample>,
}

/// Where a run's loop ([`RunLoop::go`]) takes its events from, and what
/// it asks of them between events: the feed of the sources or a replay log
/// ([`Events`]), or one reader read directly
/// ([`Direct`](super::direct::Direct): no time and one source, so a row is a
/// step as it is read). The loop is generic over it, so that a direct run
/// pays nothing for the feed's merge.
pub trait Steps {
    /// The next event (`None` at the clean end, the reader's or the feed's
    /// counts added to `run.counts`); `Err` ends the run with that end,
    /// after the outputs so far.
    fn next_event(
        &mut self,
        run: &mut RunLoop<'_>,
        writer: &mut dyn OutputWriter,
    ) -> io::Result<Result<Option<&FeedEvent>, End>>;

    /// Whether no row is waiting, so that a streaming run flushes its
    /// outputs now (a run that sits in an endless pipe has written every
    /// row it evaluated).
    fn caught_up(&mut self) -> bool;

    /// Lets the sources know the rows so far are done with (their outputs
    /// flushed), where no checkpoint keeps them: a consumer group may then
    /// let them go.
    fn commit(&mut self) {}

    /// Where the row of `source` the last step took is, for a rejected
    /// row's message; empty where that is not known.
    fn locate(&self, source: Option<usize>, counts: &Counts) -> String;

    /// Says the progress after a step (the rows read so far).
    fn progress(&mut self, _counts: &Counts) {}

    /// Whether a checkpoint may be taken now: nothing is pending.
    fn settled(&self) -> bool;

    /// Writes a checkpoint of `runner` with where the sources stand (a
    /// merged run's with its [`Clock`], shaped by `merge_options`).
    fn checkpoint(
        &mut self,
        ck: &mut Checkpointer,
        merge_options: &str,
        runner: &Monitors,
        writer: &mut dyn OutputWriter,
        alerts: &mut Alerts,
    ) -> io::Result<Result<(), String>>;

    /// The clean end, after the last checkpoint if `checkpointed`.
    fn ended(&mut self, _checkpointed: bool, _writer: &mut dyn OutputWriter) -> io::Result<()> {
        Ok(())
    }
}

impl Steps for Events {
    fn next_event(
        &mut self,
        run: &mut RunLoop<'_>,
        writer: &mut dyn OutputWriter,
    ) -> io::Result<Result<Option<&FeedEvent>, End>> {
        let event = match run.next(self, writer)? {
            Ok(event) => event,
            Err(end) => return Ok(Err(end)),
        };
        self.slot = match event.map(Event::into_feed) {
            None => None,
            Some(Some(event)) => Some(event),
            Some(None) => unreachable!("the feed ends at a stop"),
        };
        Ok(Ok(self.slot.as_ref()))
    }

    fn caught_up(&mut self) -> bool {
        true
    }

    fn locate(&self, source: Option<usize>, _: &Counts) -> String {
        source.map(|s| self.live.taken_at(s)).unwrap_or_default()
    }

    fn settled(&self) -> bool {
        self.live.settled()
    }

    fn checkpoint(
        &mut self,
        ck: &mut Checkpointer,
        merge_options: &str,
        runner: &Monitors,
        writer: &mut dyn OutputWriter,
        alerts: &mut Alerts,
    ) -> io::Result<Result<(), String>> {
        let clock = Clock {
            options: merge_options.to_string(),
            feed: self.live.state(),
            record: match &mut self.record {
                None => None,
                Some(r) => Some(OutputFileInfo {
                    path: r.path.clone(),
                    // A log not begun yet is empty: a resume begins it.
                    len: match &mut r.writer {
                        Some(w) => w.synced_len()?,
                        None => 0,
                    },
                }),
            },
        };
        let at = self.live.positions();
        ck.write_at(runner, &at, Some(clock), writer, alerts.sink())
    }
}

impl<'a> RunLoop<'a> {
    /// A run writing `columns` in `output`, of a monitor of `inputs`
    /// inputs, saying its notices through `notify`: not streaming, stopping
    /// at a malformed row, without time, ticks, logs or checkpoints (set
    /// the fields that differ).
    pub fn new(
        columns: &'a Columns,
        output: OutputFormat,
        inputs: usize,
        notify: Notify,
    ) -> RunLoop<'a> {
        RunLoop {
            columns,
            output,
            names: Vec::new(),
            schema_names: Vec::new(),
            inputs,
            time_cell: None,
            timed: false,
            unit: TimeUnit::Seconds,
            form: None,
            key_input: None,
            streaming: false,
            malformed: Malformed::Stop,
            counts: Counts::default(),
            clashes: 0,
            ticks: 0,
            periods: 0,
            notify,
            on_reset: ResetPolicy::Cancel,
            every_key_ticks: false,
            replaying: None,
            checkpoints: None,
            merge_options: String::new(),
            samples: Vec::new(),
        }
    }

    /// Runs `steps`' events through `runner` into `writer` and `alerts`
    /// until they end or the run stops; also says whether a key was
    /// stopped by a runtime error (a keyed run).
    pub fn go<S: Steps + ?Sized>(
        &mut self,
        steps: &mut S,
        runner: &mut Monitors,
        writer: &mut dyn OutputWriter,
        alerts: &mut Alerts,
    ) -> io::Result<(End, bool)> {
        let mut evaluator =
            Evaluator::new(self.timed, self.inputs).every_key_ticks(self.every_key_ticks);
        // One sink for the whole run (building one per event cost a tenth
        // of a direct run's loop).
        let notify = self.notify.clone();
        let mut lines = Lines {
            columns: self.columns,
            output: self.output,
            writer,
            alerts,
            form: None,
            key_input: self.key_input,
            notify: &notify,
            steps: 0,
            ticks: 0,
            samples: std::mem::take(&mut self.samples),
        };
        let end = self.turn(&mut evaluator, steps, runner, &mut lines);
        self.samples = lines.samples;
        Ok((end?, evaluator.keys_stopped()))
    }

    fn turn<S: Steps + ?Sized>(
        &mut self,
        evaluator: &mut Evaluator,
        steps: &mut S,
        runner: &mut Monitors,
        lines: &mut Lines<'_>,
    ) -> io::Result<End> {
        loop {
            let event = match steps.next_event(self, lines.writer)? {
                Ok(Some(event)) => event,
                Ok(None) => {
                    // The clean end: a last checkpoint, so that a resume
                    // after it has nothing to redo.
                    let checkpointed = self.checkpoints.is_some();
                    if checkpointed && let Err(m) = self.checkpoint(steps, runner, lines)? {
                        return stop(lines.writer, End::Stopped(m.to_string(), Ended::Failure));
                    }
                    steps.ended(checkpointed, lines.writer)?;
                    return Ok(End::Done);
                }
                Err(end) => return Ok(end),
            };
            if self.timed {
                lines.form = Some(self.form());
            }
            let (steps_before, ticks_before) = (lines.steps, lines.ticks);
            let (rows, time, source, flow) = match event {
                FeedEvent::Rows(step) => {
                    if !step.clashes.is_empty() {
                        self.clashes(step);
                    }
                    // The source of a keyed step's one row, to say where a rejected row is.
                    let source = step.rows.first().map(|(c, _)| c.stamp.source as usize);
                    let flow = evaluator.step(runner, step.time, &step.cells, lines)?;
                    // A step read directly from one reader lists no rows: it is one.
                    let rows = Some(step.rows.len().max(1) as u64);
                    (rows, step.time, source, flow)
                }
                FeedEvent::Tick(t, _) => {
                    let flow = evaluator.event(runner, event, self.on_reset, lines)?;
                    (None, *t, None, flow)
                }
                _ => {
                    let flow = evaluator.event(runner, event, self.on_reset, lines)?;
                    (None, Time(0), None, flow)
                }
            };
            self.counts.steps += lines.steps - steps_before;
            self.ticks += lines.ticks - ticks_before;
            if self.streaming && steps.caught_up() {
                lines.writer.flush()?;
                lines.alerts.flush()?;
                if self.checkpoints.is_none() {
                    steps.commit();
                }
            }
            match flow {
                Flow::Go => {}
                Flow::Rejected(e) => {
                    match self.rejected(steps, source, time, e) {
                        // A dropped row is no step: no checkpoint falls after it.
                        None => continue,
                        Some(end) => return stop(lines.writer, end),
                    }
                }
                Flow::Stop(halt) => return stop(lines.writer, self.halted(halt, time)),
            }
            steps.progress(&self.counts);
            // Checkpoints fall between steps with nothing pending (a step's
            // ticks come before it): the state is then the monitor's, the
            // merge's marks and the scheduler's.
            let due = rows.is_some_and(|n| (self.checkpoints.as_mut()).is_some_and(|c| c.count(n)));
            if due
                && steps.settled()
                && let Err(m) = self.checkpoint(steps, runner, lines)?
            {
                return stop(lines.writer, End::Stopped(m.to_string(), Ended::Failure));
            }
        }
    }

    /// A row the monitor rejected at `time` (of `source`): `None` when the
    /// policy drops it, else how the run ends.
    fn rejected<S: Steps + ?Sized>(
        &mut self,
        steps: &S,
        source: Option<usize>,
        time: Time,
        e: RowError,
    ) -> Option<End> {
        let shown = || self.shown(time);
        // A log's rows were not read by a trace reader: a value of the wrong
        // type there is a malformed log, not a bug.
        if let Some(log) = &self.replaying {
            let at = format!("time {}", shown());
            let message = format!("{log}: the log's row at {at} does not fit the inputs: {e}");
            return Some(End::Stopped(message, Ended::Trace));
        }
        // Where the row is, when the source kept it (`FeedOptions::positions`).
        let at = Some(steps.locate(source, &self.counts))
            .filter(|at| !at.is_empty())
            .unwrap_or_else(|| format!("time {}", shown()));
        if skip_rejected(self.malformed, &self.notify, &at, &e, &mut self.counts) {
            return None;
        }
        // A row without its key is the input's fault, located; any other
        // rejected value got past a reader, a bug.
        Some(match e {
            RowError::MissingKey { .. } => End::Stopped(format!("{at}: {e}"), Ended::Trace),
            e => rejected(&e),
        })
    }

    /// How the run ends on `halt` at `time`.
    fn halted(&self, halt: Halt, time: Time) -> End {
        match halt {
            Halt::Runtime(e) => End::Stopped(e.to_string(), Ended::Runtime),
            Halt::TooManyTicks { key, due, max } => {
                // As a plain run's: the run ends (the feed's schedule).
                let at = self.shown(time);
                let message = format!(
                    "{due} ticks of key {key} are due before its row at time {at}, more than --max-ticks {max} (a jump in time? --max-gap G --on-gap skip fires one tick per period over it)",
                );
                End::Stopped(message, Ended::Trace)
            }
            Halt::KeyedTick => {
                let message = "the log has a tick, which a keyed run never records (its keys' ticks follow from their rows)";
                End::Stopped(message.to_string(), Ended::Trace)
            }
        }
    }

    /// How times are written: as the first time read was, else as numbers
    /// in the unit.
    fn form(&self) -> TimeForm {
        self.form.unwrap_or(TimeForm::Number(self.unit))
    }

    /// `time` as messages show it.
    fn shown(&self, time: Time) -> String {
        show(time.to_value(self.form()))
    }

    /// Reports the clashes of `step` (the first few; every one counted).
    fn clashes(&mut self, step: &Step) {
        for c in &step.clashes {
            self.clashes += 1;
            if self.clashes <= REPORTED {
                (self.notify)(Notice::Clash {
                    time: self.shown(step.time),
                    input: self.schema_names[c.cell].clone(),
                    kept: self.names[c.kept as usize].clone(),
                    dropped: self.names[c.dropped as usize].clone(),
                });
            }
        }
    }

    /// Writes a checkpoint now, with where `steps` stand.
    fn checkpoint<S: Steps + ?Sized>(
        &mut self,
        steps: &mut S,
        runner: &Monitors,
        lines: &mut Lines<'_>,
    ) -> io::Result<Result<(), String>> {
        match &mut self.checkpoints {
            None => Ok(Ok(())),
            Some(ck) => {
                let options = &self.merge_options;
                steps.checkpoint(ck, options, runner, lines.writer, lines.alerts)
            }
        }
    }

    /// Ends a live feed on an error of its traces (or its ticks): the log
    /// records the end, so that a replay stops with the same error and
    /// status; a log being checked must end the same way.
    fn end_feed<T>(
        &mut self,
        feed: &mut Events,
        message: String,
        ended: Ended,
        writer: &mut dyn OutputWriter,
    ) -> io::Result<Result<T, End>> {
        let ours = Event::Stop(message.clone(), ended.status());
        if let Some(r) = &mut feed.record {
            r.write(&ours, self.form)?;
        }
        // (A log that cannot be read there leaves the traces' own error.)
        if let Some(log) = &mut feed.check
            && let Ok(Some(why)) = self.diverged(log, Some(&ours))
        {
            return stop(writer, End::Stopped(why.to_string(), Ended::Trace)).map(Err);
        }
        stop(writer, End::Stopped(message, ended)).map(Err)
    }

    /// How `ours`, the live run's next event, differs from the checked
    /// log's, as the message that stops the run (`None` if they agree;
    /// `Err` if the log cannot be read).
    fn diverged(
        &self,
        log: &mut LogReader,
        ours: Option<&Event>,
    ) -> Result<Option<String>, String> {
        let logged = log.next_event(self.time_cell, self.periods)?;
        Ok(diverges(ours, logged.as_ref(), &self.names).map(|why| {
            format!(
                "{}: the traces diverge from the log at step {}: {why}",
                log.at(),
                self.counts.steps
            )
        }))
    }

    /// How the sources' rows differ from a log's next `event` (its rows, or
    /// its end: then no source may have a row left); `None` if they agree.
    fn unlike_sources(
        &self,
        rows: &mut SourceRows,
        live: &mut Feed,
        event: &Result<Option<Event>, String>,
    ) -> Option<String> {
        let name = |s: usize| self.names.get(s).map_or("?", String::as_str).to_string();
        match event {
            Ok(Some(Event::Rows(step))) => {
                for (c, want) in &step.rows {
                    let s = c.stamp.source as usize;
                    match rows.next_of(live, s) {
                        Err(m) => return Some(m),
                        Ok(None) => {
                            return Some(format!(
                                "the trace `{}` ended; the log has more of its rows",
                                name(s)
                            ));
                        }
                        // `Value`'s equality is bitwise (floats by their bits).
                        Ok(Some(got)) if &got != want => {
                            return Some(format!(
                                "row {} of `{}` is not the log's",
                                c.stamp.seq + 1,
                                name(s)
                            ));
                        }
                        Ok(Some(_)) => {}
                    }
                }
                None
            }
            Ok(None | Some(Event::Stop(..))) => match rows.any_left(live) {
                Err(m) => Some(m),
                Ok(true) => Some("the log ended; the traces have more rows".into()),
                Ok(false) => None,
            },
            _ => None,
        }
    }

    /// The next step of the feed; `Err` ends the run (after the outputs so
    /// far) with that status.
    fn next(
        &mut self,
        feed: &mut Events,
        writer: &mut dyn OutputWriter,
    ) -> io::Result<Result<Option<Event>, End>> {
        let exempt = self.time_cell;
        let Events {
            live,
            replay,
            rows_of_sources,
            ..
        } = feed;
        if let Some(log) = replay {
            loop {
                let event = log.next_event(exempt, self.periods);
                if let Some(rows) = rows_of_sources
                    && let Some(why) = self.unlike_sources(rows, live, &event)
                {
                    let m = format!(
                        "{}: the traces diverge from the log at step {}: {why}",
                        log.at(),
                        self.counts.steps
                    );
                    return stop(writer, End::Stopped(m, Ended::Trace)).map(Err);
                }
                return match event {
                    Ok(Some(Event::Stop(message, status))) => stop(
                        writer,
                        End::Stopped(message.to_string(), Ended::of_status(status)),
                    )
                    .map(Err),
                    Ok(Some(Event::Source(name))) => {
                        self.names.push(name);
                        log.add_source();
                        continue;
                    }
                    Ok(event) => Ok(Ok(event)),
                    Err(m) => stop(writer, End::Stopped(m.to_string(), Ended::Trace)).map(Err),
                };
            }
        }
        let event = loop {
            let event = match feed.live.next() {
                Ok(event) => event,
                Err(s) => {
                    return self.end_feed(feed, s.message, s.kind.into(), writer);
                }
            };
            if self.form.is_none() {
                self.form = feed.live.form();
            }
            match event {
                // A connection joined: its name, in the log too.
                Some(super::Event::Source(name)) => {
                    if let Some(r) = &mut feed.record {
                        r.write(&Event::Source(name.clone()), self.form)?;
                    }
                    self.names.push(name);
                }
                event => break event.map(Event::from),
            }
        };
        let Events { record, check, .. } = feed;
        if let Some(log) = check {
            match self.diverged(log, event.as_ref()) {
                Ok(None) => {}
                Ok(Some(m)) | Err(m) => {
                    return stop(writer, End::Stopped(m.to_string(), Ended::Trace)).map(Err);
                }
            }
        }
        if let (Some(r), Some(e)) = (record, &event) {
            r.write(e, self.form)?;
        }
        Ok(Ok(event))
    }
}

/// How the step the traces gave differs from the one the log has, if it
/// does: its time, or a row (source, position, late stamp, cells bit for
/// bit).
fn diverges(live: Option<&Event>, logged: Option<&Event>, names: &[String]) -> Option<String> {
    let (live, logged) = match (live, logged) {
        (None, None) => return None,
        (None, Some(_)) => return Some("the traces ended; the log has more steps".into()),
        (Some(_), None) => return Some("the log ended; the traces have more rows".into()),
        (Some(Event::Tick(a, x)), Some(Event::Tick(b, y))) => {
            return (a != b || x != y).then(|| {
                format!(
                    "a tick at {}ns in the run, at {}ns in the log (or of other periods)",
                    a.0, b.0
                )
            });
        }
        (Some(Event::Stop(a, x)), Some(Event::Stop(b, y))) => {
            return (a != b || x != y)
                .then(|| format!("the run stops with `{a}`, the log with `{b}`"));
        }
        (Some(Event::Stop(a, _)), Some(_)) => {
            return Some(format!("the run stops with `{a}` where the log goes on"));
        }
        (Some(_), Some(Event::Stop(b, _))) => {
            return Some(format!("the log stops with `{b}` where the run goes on"));
        }
        (Some(Event::Tick(..)), Some(_)) => {
            return Some("the run has a tick where the log has rows".into());
        }
        (Some(_), Some(Event::Tick(..))) => {
            return Some("the run has rows where the log has a tick".into());
        }
        (Some(Event::Reset), Some(Event::Reset)) => return None,
        (Some(Event::Reset), Some(_)) | (Some(_), Some(Event::Reset)) => {
            return Some("a time reset on one side only".into());
        }
        (Some(Event::Source(_)), _) | (_, Some(Event::Source(_))) => {
            return Some(
                "the log has a connection to a tcp:// input, which cannot be read again".into(),
            );
        }
        (Some(Event::Rows(a)), Some(Event::Rows(b))) => (a, b),
    };
    if live.time != logged.time {
        return Some(format!(
            "its time is {}ns in the traces, {}ns in the log",
            live.time.0, logged.time.0
        ));
    }
    let rows = |s: &Step| -> Vec<String> {
        s.rows
            .iter()
            .map(|(c, _)| {
                format!(
                    "row {} of {}",
                    c.stamp.seq + 1,
                    names[c.stamp.source as usize]
                )
            })
            .collect()
    };
    let same = live.rows.len() == logged.rows.len()
        && live
            .rows
            .iter()
            .zip(&logged.rows)
            // `Value`'s equality is bitwise (floats by their bits).
            .all(|((a, x), (b, y))| a.stamp == b.stamp && a.late == b.late && x == y);
    (!same).then(|| {
        format!(
            "the traces give {}, the log has {}",
            describe_rows(&rows(live), live),
            describe_rows(&rows(logged), logged)
        )
    })
}

fn describe_rows(rows: &[String], s: &Step) -> String {
    let cells: Vec<String> = s
        .rows
        .iter()
        .map(|(_, c)| {
            c.iter()
                .map(|v| v.as_ref().map_or("-".to_string(), |v| v.to_string()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    rows.iter()
        .zip(cells)
        .map(|(r, c)| format!("{r} ({c})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The clashes reported one by one before only counting (the feed says the
/// first late rows the same way).
const REPORTED: u64 = 10;
