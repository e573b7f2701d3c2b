//! The feed: every source's rows stamped with their time, merged into one sequence of steps
//! (`crate::merge::Merge`), and the periodic streams' ticks due between them
//! (`crate::time::Scheduler`), as [`Event`]s, one at a time.
//!
//! The feed reads a row from whichever source the merge needs next, so a step is given as
//! soon as it is final and no source is read ahead further than that. A row is stamped with
//! its time field (read in the time unit, or as RFC 3339), else its source's stamp (a live
//! source's arrival), else its index in its source (an `.input` trace's step number). Ticks
//! due before a step come before it, drawn from the scheduler one at a time (a jump in time
//! may make billions due; each is evaluated before the next is made).

use super::source::{Connection, Entry, Feeder, Mark, Msg, RowAt, Source, Where, read_one};
use super::{Event, Malformed, Stop};
use crate::lang::ast::{GapPolicy, ResetPolicy};
use crate::merge::{Merge, SourceMark};
use crate::notice::{Notice, Notify};
use crate::time::{Scheduler, Time, TimeForm, TimeUnit};
use crate::trace::{RowReader, TraceFormat};
use crate::value::Value;
use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The late rows reported one by one (as notices) before only counting.
pub(crate) const REPORTED: u64 = 10;

/// How long a feed listens to each silent source in turn when every source
/// left is silent.
const LISTEN: Duration = Duration::from_millis(20);

/// How a feed stamps, merges and schedules.
#[derive(Clone, Debug)]
pub struct FeedOptions {
    /// The cells' names (inputs, extra fields, the time field): every
    /// source's rows have one cell per name.
    pub names: Vec<String>,
    /// The time field's cell, if rows carry their time.
    pub time_cell: Option<usize>,
    /// The unit of numeric times.
    pub unit: TimeUnit,
    /// How late (ns) a row may be behind its source's latest time and be
    /// re-stamped to it.
    pub lateness: i64,
    /// Whether every row is a step of its own (a keyed run's rows are
    /// events of different keys).
    pub separate: bool,
    /// What a malformed row does.
    pub malformed: Malformed,
    /// How long a source on a thread of its own may be silent before the
    /// merge stops waiting for it.
    pub idle_timeout: Option<Duration>,
    /// The periodic streams' periods (ns): the feed ticks them when there
    /// are any.
    pub periods: Vec<i64>,
    /// The ticks' origin (else the first step's time).
    pub start: Option<Time>,
    /// The longest gap between steps (ns) before `on_gap` applies.
    pub max_gap: Option<i64>,
    /// What a gap longer than `max_gap` does to the ticks.
    pub on_gap: GapPolicy,
    /// The most ticks due before one step.
    pub max_ticks: u64,
    /// What a time reset does to the ticks.
    pub on_reset: ResetPolicy,
    /// Whether the feed keeps where each source stands after every row it
    /// queued (a little work per row): what [`Feed::positions`],
    /// [`Feed::state`] (checkpoints) and [`Feed::taken_at`] read. Without
    /// it they give the sources' starts.
    pub positions: bool,
    /// Whether the run's time follows the wall clock (`vigil run --clock
    /// wall`): without a time field every row is stamped with its arrival
    /// (and the ticks start at the run's start, unless `start` says
    /// otherwise); with one, the rows keep their own times, and once every
    /// source has been silent for `idle_timeout` the time goes on with the
    /// wall clock from the last row's. Either way the periodic streams tick
    /// while the sources are silent, and every source is read on a thread
    /// of its own.
    pub wall_clock: bool,
}

/// The system's time now, in nanoseconds since the Unix epoch.
fn wall_now() -> Time {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    Time(i64::try_from(since.as_nanos()).unwrap_or(i64::MAX))
}

/// The ticks' origin of a run whose time follows the wall clock without a time field, `now`
/// being its start: the ticks start with the run, on the last multiple of the shortest of
/// `periods` (ticks on whole seconds, and windows exact where their panes divide the periods);
/// `None` without periods.
fn wall_origin(periods: &[i64], now: Time) -> Option<Time> {
    let p = *periods.iter().min()?;
    Some(Time(now.0 - now.0.rem_euclid(p)))
}

/// The wall clock of a run whose time follows it: the time of the run's
/// start and a monotonic clock since then, so that stamps never go back
/// even when the system's clock is set back.
#[derive(Clone, Copy, Debug)]
struct WallClock {
    base: Time,
    at: Instant,
}

impl WallClock {
    fn start() -> WallClock {
        WallClock {
            base: wall_now(),
            at: Instant::now(),
        }
    }

    /// The time now.
    fn now(&self) -> Time {
        let elapsed = i64::try_from(self.at.elapsed().as_nanos()).unwrap_or(i64::MAX);
        Time(self.base.0.saturating_add(elapsed))
    }

    /// How long until `t` (zero if it is past).
    fn until(&self, t: Time) -> Duration {
        Duration::from_nanos(u64::try_from(t.0.saturating_sub(self.now().0)).unwrap_or(0))
    }
}

/// The feed of one run (see the module doc).
pub struct Feed {
    options: FeedOptions,
    sources: Vec<Source>,
    merge: Merge,
    scheduler: Option<Scheduler>,
    /// The scheduler's ticks up to this time come next, before `pending`.
    ticks_until: Option<Time>,
    pending: VecDeque<Event>,
    /// A `tcp://` input's connections, each a source joining the merge.
    connections: Option<Receiver<Connection>>,
    /// How times are written: as the first time read was.
    form: Option<TimeForm>,
    /// The last step's time (for the gap rule), this epoch.
    last_time: Option<Time>,
    rows_read: u64,
    skipped: u64,
    late: u64,
    notify: Notify,
    /// The wall clock, when the run's time follows it.
    wall: Option<WallClock>,
    /// The wall clock's time when the last step was given, and that step's
    /// time: the time goes on with the wall clock from there after an idle
    /// timeout.
    anchor: Option<(Time, Time)>,
    /// The time the wall clock moved the run to while its sources were
    /// silent: a later row of an earlier time is stamped with it.
    advanced: Option<Time>,
    /// Whether the wall clock is moving the time on (the sources silent
    /// past the idle timeout, and no row since).
    silent: bool,
}

/// Where one source stood at a checkpoint: the rows read from it up to the
/// last one a step took, and the reader's position and token after it.
#[derive(Clone, Debug)]
pub struct At {
    /// Rows read from the source's start.
    pub rows: u64,
    /// The reader's position and resume token.
    pub at: Where,
}

/// A feed's state besides its sources' positions, at a checkpoint: each
/// source's place in the merge's order, the watermark, the scheduler, the
/// last step's time and how times are written. A checkpoint is taken only
/// when nothing is pending ([`Feed::settled`]), so the rows the merge holds
/// queued are not in it: they lie after each source's position, and a
/// resumed feed reads and merges them again, stamped as before.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FeedState {
    /// Per source, in the order they were added.
    pub sources: Vec<SourceState>,
    /// The time of the last step given this epoch (ns).
    pub emitted: Option<i64>,
    /// The periodic streams' scheduler, if there are any.
    pub scheduler: Option<Scheduler>,
    /// The last step's time (ns), for the gap rule.
    pub last_time: Option<i64>,
    /// Whether times are written as RFC 3339 (`None`: no time read yet).
    pub rfc3339: Option<bool>,
}

/// One source's place in a feed (see [`FeedState`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceState {
    /// The latest time it gave this epoch (ns): later rows are re-stamped
    /// against it.
    pub latest: Option<i64>,
    /// The sequence number of its next row.
    pub seq: u64,
    /// Its rows this epoch (a row's time without a time field).
    pub epoch_rows: u64,
    /// Whether a time reset read with its last row taken follows that row
    /// (an `.input` trace's marker): a resume queues it again.
    pub then_reset: bool,
}

impl Feed {
    /// A feed with no sources yet, telling `notify` what it has to say.
    pub fn new(options: FeedOptions, notify: Notify) -> Feed {
        let mut merge = Merge::new(0, options.names.len(), options.lateness);
        if let Some(cell) = options.time_cell {
            merge = merge.exempt(cell);
        }
        if options.separate {
            merge = merge.separate();
        }
        let scheduler = (!options.periods.is_empty()).then(|| Scheduler::new(&options.periods));
        let wall = options.wall_clock.then(WallClock::start);
        let mut options = options;
        if let Some(w) = wall
            && options.time_cell.is_none()
            && let Some(origin) = wall_origin(&options.periods, w.now())
        {
            options.start.get_or_insert(origin);
        }
        // Arrival times are written as dates.
        let form = (wall.is_some() && options.time_cell.is_none()).then_some(TimeForm::Rfc3339);
        Feed {
            options,
            sources: Vec::new(),
            merge,
            scheduler,
            ticks_until: None,
            pending: VecDeque::new(),
            connections: None,
            form,
            last_time: None,
            rows_read: 0,
            skipped: 0,
            late: 0,
            notify,
            wall,
            anchor: None,
            advanced: None,
            silent: false,
        }
    }

    /// Adds a source read on the feed's thread (the next in priority).
    pub fn add_reader(&mut self, name: String, reader: Box<dyn RowReader>, format: TraceFormat) {
        self.add(Source::new(name, Feeder::Direct(reader), format));
    }

    /// Adds a source read on a thread of its own
    /// ([`spawn_reader`](super::spawn_reader)).
    pub fn add_thread(&mut self, name: String, rows: Receiver<Msg>, format: TraceFormat) {
        self.add(Source::new(name, Feeder::Thread(rows), format));
    }

    fn add(&mut self, mut source: Source) {
        source.track = self.options.positions;
        if self.wall.is_some()
            && let Feeder::Direct(_) = source.feeder
        {
            // A source on the feed's thread would hold the ticks back while
            // it is silent.
            let width = self.options.names.len();
            let policy = self.options.malformed;
            if let Feeder::Direct(reader) =
                std::mem::replace(&mut source.feeder, Feeder::Thread(dead()))
            {
                source.feeder = Feeder::Thread(super::spawn_reader(
                    source.format,
                    width,
                    policy,
                    move || Ok(reader),
                ));
            }
        }
        let s = self.merge.add_source();
        debug_assert_eq!(s, self.sources.len());
        self.sources.push(source);
    }

    /// Takes the connections of a `tcp://` listener
    /// ([`spawn_listener`](super::spawn_listener)) as sources as they come,
    /// each announced by an [`Event::Source`].
    pub fn listen(&mut self, connections: Receiver<Connection>) {
        self.connections = Some(connections);
    }

    /// Moves every source read on the feed's thread to a thread of its own
    /// (live sources merged: one silent source must not stop the others
    /// being read, and an idle timeout must tell it is silent).
    pub fn read_on_threads(&mut self) {
        let width = self.options.names.len();
        let policy = self.options.malformed;
        for src in &mut self.sources {
            let feeder = std::mem::replace(&mut src.feeder, Feeder::Thread(dead()));
            src.feeder = match feeder {
                Feeder::Direct(reader) => {
                    Feeder::Thread(super::spawn_reader(src.format, width, policy, move || {
                        Ok(reader)
                    }))
                }
                thread => thread,
            };
        }
    }

    /// How the feed stamps, merges and schedules.
    pub fn options(&self) -> &FeedOptions {
        &self.options
    }

    /// The ticks' origin, if set before the first row (`start`, or the
    /// run's start under the wall clock without a time field).
    pub fn origin(&self) -> Option<Time> {
        self.options.start
    }

    /// The sources' names, in priority order.
    pub fn source_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.sources.iter().map(|s| s.name.as_str())
    }

    /// How the times read so far are written: as the first one was.
    pub fn form(&self) -> Option<TimeForm> {
        self.form
    }

    /// Rows read, malformed rows dropped, and late rows re-stamped, so far.
    pub fn rows_read(&self) -> u64 {
        self.rows_read
    }

    /// Malformed rows dropped so far.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Late rows re-stamped so far.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// Whether nothing is pending: the events given so far are every event
    /// of the rows taken, so a checkpoint may be taken.
    pub fn settled(&self) -> bool {
        self.pending.is_empty()
    }

    /// The time of the row the feed holds behind the ticks due before it (it gives those
    /// first), if it holds one: a row taken from its source, so the feed is not settled.
    pub fn held_row_time(&self) -> Option<Time> {
        self.pending.iter().find_map(|e| match e {
            Event::Rows(step) => Some(step.time),
            _ => None,
        })
    }

    /// Where the row of source `source` a step took last is, for messages
    /// (`file:LINE:1`, or `name: row N`); empty when the feed does not keep it or has no such
    /// source.
    pub fn taken_at(&self, source: usize) -> String {
        // A replay's steps name sources its feed may not read.
        let Some(src) = self.sources.get(source) else {
            return String::new();
        };
        src.taken
            .location
            .map_or_else(String::new, |at| at.show(&src.name))
    }

    /// Where each source stands (see [`At`]).
    pub fn positions(&self) -> Vec<At> {
        (self.sources.iter())
            .map(|s| At {
                rows: s.taken.read,
                at: s.taken.at.clone(),
            })
            .collect()
    }

    /// The feed's state for a checkpoint (see [`FeedState`]).
    pub fn state(&self) -> FeedState {
        FeedState {
            sources: (self.sources.iter())
                .map(|s| SourceState {
                    latest: s.taken.merge.and_then(|m| m.latest).map(|t| t.0),
                    seq: s.taken.merge.map_or(0, |m| m.seq),
                    epoch_rows: s.taken.epoch_rows,
                    then_reset: s.taken.then_reset,
                })
                .collect(),
            emitted: self.merge.emitted().map(|t| t.0),
            scheduler: self.scheduler.clone(),
            last_time: self.last_time.map(|t| t.0),
            rfc3339: self.form.map(|f| f == TimeForm::Rfc3339),
        }
    }

    /// Puts a fresh feed, whose sources are open at the positions `at`,
    /// where `state` says it stood: each source's rows and marks, the
    /// merge's watermark, the scheduler, and a time reset read with a
    /// source's last row taken queued again. Panics unless there is one
    /// state and one position per source.
    pub fn resume(&mut self, state: &FeedState, at: &[At]) {
        assert_eq!(
            state.sources.len(),
            self.sources.len(),
            "one state per source"
        );
        assert_eq!(at.len(), self.sources.len(), "one position per source");
        let marks: Vec<SourceMark> = (state.sources.iter())
            .map(|m| SourceMark {
                latest: m.latest.map(Time),
                seq: m.seq,
            })
            .collect();
        self.merge.resume(&marks, state.emitted.map(Time));
        for (s, src) in self.sources.iter_mut().enumerate() {
            let m = state.sources[s];
            src.read = at[s].rows;
            src.rows = m.epoch_rows;
            src.taken = Mark {
                entry: Entry::Start,
                at: at[s].at.clone(),
                location: None,
                read: at[s].rows,
                epoch_rows: m.epoch_rows,
                merge: Some(marks[s]),
                then_reset: m.then_reset,
            };
            if m.then_reset {
                self.merge.push_reset(s);
                src.rows = 0;
                let at = src.taken.at.clone();
                mark(src, &self.merge, s, Entry::Reset, at, None);
            }
        }
        if self.scheduler.is_some() {
            self.scheduler.clone_from(&state.scheduler);
        }
        self.last_time = state.last_time.map(Time);
        self.ticks_until = self.last_time;
        self.form = state.rfc3339.map(|r| match r {
            true => TimeForm::Rfc3339,
            false => TimeForm::Number(self.options.unit),
        });
    }

    /// The next event: a tick due, else what is pending, else the next step
    /// of the merge (and the ticks due before it); `None` once every source
    /// has ended. `Err` ends the run: a source failed, or a time is out of
    /// the rules.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Event>, Stop> {
        if let Some(tick) = self.due_tick() {
            return Ok(Some(tick));
        }
        if let Some(event) = self.pending.pop_front() {
            return Ok(Some(event));
        }
        self.merged()
    }

    /// The next of the scheduler's ticks due (`ticks_until`), made now;
    /// `None` once none is left.
    #[inline]
    fn due_tick(&mut self) -> Option<Event> {
        let until = self.ticks_until?;
        let tick = self.scheduler.as_mut()?.next_until(until);
        if tick.is_none() {
            self.ticks_until = None;
        }
        tick.map(|(t, due)| Event::Tick(t, due))
    }

    /// The next event of the sources' merge (nothing is due before it): a
    /// step, or the first of the ticks due before it, or what a time reset
    /// queued; `None` once every source has ended.
    fn merged(&mut self) -> Result<Option<Event>, Stop> {
        let step = loop {
            self.accept(None);
            // An idle source is idle until its next row arrives: one
            // waiting now goes into the merge before the next step.
            let idle: Vec<usize> = self.merge.idle_sources().collect();
            for s in idle {
                self.read_within(s, Some(Duration::ZERO))?;
            }
            if let Some(step) = self.merge.pop() {
                for (c, _) in &step.rows {
                    self.sources[c.stamp.source as usize].take(Entry::Row(c.stamp.seq));
                }
                break step;
            }
            if self.merge.pop_reset() {
                for src in &mut self.sources {
                    if src.marks.front().is_some_and(|m| m.entry == Entry::Reset) {
                        src.take(Entry::Reset);
                    }
                }
                self.reset();
                return Ok(self.pending.pop_front());
            }
            if let Some(tick) = self.wall_tick()? {
                return Ok(Some(tick));
            }
            match self.merge.wants() {
                Some(s) => self.read_within(s, self.wait())?,
                None if self.merge.is_done() && self.connections.is_none() => return Ok(None),
                // Every source has ended: wait for a connection.
                None if self.merge.idle_sources().next().is_none() => {
                    self.accept(Some(Duration::from_millis(50)));
                }
                // Every source left is idle: listen to each in turn until
                // one delivers (or ends).
                None => {
                    let idle: Vec<usize> = self.merge.idle_sources().collect();
                    let wait = self.wait().map_or(LISTEN, |w| w.min(LISTEN));
                    for s in idle {
                        self.read_within(s, Some(wait))?;
                    }
                }
            }
        };
        let mut step = step;
        if let Some(advanced) = self.advanced
            && step.time < advanced
        {
            // The wall clock moved the time past this row while its
            // sources were silent: it is late, and stamped with that time.
            self.late += 1;
            if self.late <= REPORTED {
                let form = self.form.unwrap_or(TimeForm::Number(self.options.unit));
                let source = step.rows.first().map(|(c, _)| c.stamp.source as usize);
                (self.notify)(Notice::Late {
                    at: source.map_or_else(String::new, |s| self.sources[s].name.clone()),
                    own: show(step.time.to_value(form)),
                    stamp: show(advanced.to_value(form)),
                });
            }
            step.time = advanced;
        }
        if let Some(w) = &self.wall {
            self.anchor = Some((w.now(), step.time));
            self.silent = false;
        }
        self.schedule(step.time)?;
        self.pending.push_back(Event::Rows(step));
        Ok(self.due_tick().or_else(|| self.pending.pop_front()))
    }

    /// How long a read may wait for a source: the idle timeout, and under
    /// the wall clock no later than the next tick (arrival times need no
    /// timeout: a row is final when it arrives).
    fn wait(&self) -> Option<Duration> {
        let Some(w) = &self.wall else {
            return self.options.idle_timeout;
        };
        let tick = self.wall_deadline().map(|t| w.until(t));
        let idle = match self.options.time_cell {
            None => Some(Duration::ZERO),
            Some(_) => self.options.idle_timeout,
        };
        match (tick, idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Under the wall clock, the wall time the next tick falls due at: the
    /// next tick's time with arrival times; with rows' own times, the next
    /// tick's time less the last step's time after the last step's arrival
    /// (from when the sources have been silent for the idle timeout).
    fn wall_deadline(&self) -> Option<Time> {
        self.wall.as_ref()?;
        let sched = self.scheduler.as_ref()?;
        let next = match sched.next_time() {
            Some(t) => t,
            // Not started: with arrival times the origin is the run's start.
            None => self
                .options
                .start
                .filter(|_| self.options.time_cell.is_none())?,
        };
        match self.options.time_cell {
            None => Some(next),
            Some(_) => {
                let (at, last) = self.anchor?;
                let idle = self.options.idle_timeout?;
                let ahead = next.0.saturating_sub(last.0);
                // Silent already: the time goes on with the wall clock.
                let idle_ns = match self.silent {
                    true => 0,
                    false => i64::try_from(idle.as_nanos()).unwrap_or(i64::MAX),
                };
                Some(Time(at.0.saturating_add(ahead.max(idle_ns))))
            }
        }
    }

    /// Under the wall clock, the first of the ticks due by now while the
    /// sources are silent (the time moved on to now: see
    /// [`FeedOptions::wall_clock`]).
    fn wall_tick(&mut self) -> Result<Option<Event>, Stop> {
        // A run on the data's time pays one test here per step.
        let Some(w) = self.wall else {
            return Ok(None);
        };
        let Some(deadline) = self.wall_deadline() else {
            return Ok(None);
        };
        let now = w.now();
        if now < deadline {
            return Ok(None);
        }
        // With arrival times, up to now; with the rows' own, up to the tick
        // due (the time goes on tick by tick while the sources are silent).
        let to = match self.options.time_cell {
            None => now,
            Some(_) => match self.scheduler.as_ref().and_then(Scheduler::next_time) {
                Some(t) => t,
                None => return Ok(None),
            },
        };
        // A row that arrives later is stamped at least with this time.
        self.advanced = Some(to);
        self.schedule(to)?;
        // No idle timeout again until a row comes.
        self.silent = true;
        Ok(self.due_tick())
    }

    /// A time reset every source reached: the scheduler's work is cancelled
    /// or run once (`on_reset`) and it starts again at the next row's time;
    /// queued as events (the tick, then the reset).
    fn reset(&mut self) {
        if let Some(sched) = &mut self.scheduler {
            if self.options.on_reset == ResetPolicy::Once
                && let Some(last) = self.last_time
            {
                let periods = sched.periods().len();
                self.pending
                    .push_back(Event::Tick(last, vec![true; periods]));
            }
            *sched = Scheduler::new(sched.periods());
        }
        self.last_time = None;
        self.pending.push_back(Event::Reset);
    }

    /// Adds the connections a `tcp://` input has accepted as sources (the
    /// next in priority, in accept order), waiting up to `wait` for one.
    fn accept(&mut self, wait: Option<Duration>) {
        let Some(conns) = &self.connections else {
            return;
        };
        let mut first = wait.and_then(|d| conns.recv_timeout(d).ok());
        let mut joined = Vec::new();
        while let Some((name, rows)) = first.take().or_else(|| conns.try_recv().ok()) {
            joined.push((name, rows));
        }
        for (name, rows) in joined {
            self.add_thread(name.clone(), rows, TraceFormat::Jsonl);
            self.pending.push_back(Event::Source(name));
        }
    }

    /// Makes the scheduler's ticks due before a step at `t` the next events
    /// (after the origin is set: `start`, else this first time), as the gap
    /// rules and `max_ticks` say.
    fn schedule(&mut self, t: Time) -> Result<(), Stop> {
        let Some(sched) = &mut self.scheduler else {
            return Ok(());
        };
        // The one rule a keyed monitor applies to each key's ticks too.
        let rules = crate::time::Ticking {
            start: self.options.start,
            max_gap: self.options.max_gap,
            on_gap: self.options.on_gap,
            max_ticks: self.options.max_ticks,
            // A plain run's ticks start at its origin (under the wall clock, the run's start).
            align: false,
        };
        if let Err(due) = rules.schedule(sched, self.last_time, t) {
            let form = self.form.unwrap_or(TimeForm::Number(self.options.unit));
            return Err(Stop::trace(format!(
                "{due} ticks are due before the row at time {}, more than --max-ticks {} (a jump in time? --max-gap G --on-gap skip fires one tick per period over it)",
                show(t.to_value(form)),
                self.options.max_ticks
            )));
        }
        self.ticks_until = Some(t);
        self.last_time = Some(t);
        Ok(())
    }

    /// Reads what source `s` delivers next into the merge; a source on a
    /// thread of its own silent for `wait` is marked idle instead.
    fn read_within(&mut self, s: usize, wait: Option<Duration>) -> Result<(), Stop> {
        let width = self.options.names.len();
        let policy = self.options.malformed;
        let mut reset_after = false;
        let (cells, at, place, stamp) = loop {
            let src = &mut self.sources[s];
            let msg = match &mut src.feeder {
                Feeder::Direct(reader) => {
                    let (warnings, msg, reset) = read_one(
                        reader.as_mut(),
                        (src.format, src.rows),
                        width,
                        policy,
                        src.track,
                    );
                    for w in warnings {
                        (self.notify)(Notice::Trace(w));
                    }
                    reset_after = reset;
                    msg
                }
                Feeder::Thread(rx) => match wait {
                    None => rx.recv().unwrap_or(Msg::End),
                    Some(d) => match rx.recv_timeout(d) {
                        Ok(m) => m,
                        Err(RecvTimeoutError::Timeout) => {
                            self.merge.idle(s);
                            return Ok(());
                        }
                        Err(RecvTimeoutError::Disconnected) => Msg::End,
                    },
                },
            };
            match msg {
                Msg::Row(cells, at, place, stamp) => break (cells, at, place, stamp),
                Msg::Warning(w) => (self.notify)(Notice::Trace(w)),
                Msg::Skipped(e) => {
                    self.rows_read += 1;
                    self.dropped(e);
                }
                Msg::End => {
                    self.merge.end(s);
                    return Ok(());
                }
                Msg::Failed(stop) => return Err(stop),
                Msg::Reset => {
                    self.merge.push_reset(s);
                    let src = &mut self.sources[s];
                    src.rows = 0;
                    src.last_mark().then_reset = true;
                    let at = src.last_mark().at.clone();
                    mark(src, &self.merge, s, Entry::Reset, at, None);
                    return Ok(());
                }
            }
        };
        let src = &mut self.sources[s];
        src.rows += 1;
        src.read += 1;
        self.rows_read += 1;
        // A time reset: the row's time field is `reset` (nothing else of it
        // is read).
        if let Some(cell) = self.options.time_cell
            && src.format != TraceFormat::Tc
            && matches!(&cells[cell], Some(Value::Str(t)) if &**t == "reset")
        {
            self.merge.push_reset(s);
            mark(src, &self.merge, s, Entry::Reset, place, None);
            return Ok(());
        }
        let time = self.stamp(s, &cells, stamp);
        let pushed = time.and_then(|t| self.merge.push(s, t, cells).map_err(|e| e.to_string()));
        match pushed {
            Ok(c) => {
                if let Some(own) = c.late {
                    self.late += 1;
                    if self.late <= REPORTED {
                        let form = self.form.unwrap_or(TimeForm::Number(self.options.unit));
                        (self.notify)(Notice::Late {
                            at: at.show(&self.sources[s].name),
                            own: show(own.to_value(form)),
                            stamp: show(c.stamp.time.to_value(form)),
                        });
                    }
                }
                let src = &mut self.sources[s];
                let entry = Entry::Row(c.stamp.seq);
                mark(src, &self.merge, s, entry, place.clone(), Some(at));
                // An `.input` trace's reset marker follows the row.
                if reset_after {
                    self.merge.push_reset(s);
                    let src = &mut self.sources[s];
                    src.rows = 0;
                    src.last_mark().then_reset = true;
                    mark(src, &self.merge, s, Entry::Reset, place, None);
                }
                Ok(())
            }
            Err(m) => {
                let at = at.show(&self.sources[s].name);
                if self.options.malformed != Malformed::Stop {
                    self.dropped(format!("{at}: {m}"));
                    return Ok(());
                }
                Err(Stop::trace(format!("{at}: {m}")))
            }
        }
    }

    /// The time of a row of source `s` with `cells` and its source's
    /// `stamp`: a live source's stamp when the row has no time field, the
    /// time field, or the row's index (an `.input` trace's step number).
    fn stamp(
        &mut self,
        s: usize,
        cells: &[Option<Value>],
        stamp: Option<Time>,
    ) -> Result<Time, String> {
        let unit = self.options.unit;
        let time_cell = self.options.time_cell;
        let src = &self.sources[s];
        let stamp = stamp.filter(|_| time_cell.is_none_or(|cell| cells[cell].is_none()));
        if let Some(w) = &self.wall
            && time_cell.is_none()
        {
            // Its arrival: now, as the feed takes it (a stamp taken on the
            // reader's thread could be older than a tick given since).
            self.form.get_or_insert(TimeForm::Rfc3339);
            return Ok(w.now());
        }
        match (time_cell, src.format) {
            _ if let Some(t) = stamp => {
                self.form.get_or_insert(TimeForm::Number(unit));
                Ok(t)
            }
            (Some(cell), f) if f != TraceFormat::Tc => match &cells[cell] {
                None => Err(format!(
                    "the row has no time field `{}`",
                    self.options.names[cell]
                )),
                Some(v) => Time::from_value(v, unit)
                    .map(|(t, form)| {
                        self.form.get_or_insert(form);
                        t
                    })
                    .map_err(|e| format!("time field `{}`: {e}", self.options.names[cell])),
            },
            // An `.input` trace's step number, or a row's index: in units.
            _ => {
                let index = i64::try_from(src.rows - 1).unwrap_or(i64::MAX);
                self.form.get_or_insert(TimeForm::Number(unit));
                index
                    .checked_mul(unit.nanos())
                    .map(Time)
                    .ok_or_else(|| "the row's index is out of the time range".to_string())
            }
        }
    }

    /// A malformed row dropped: counted, and said under `warn`.
    fn dropped(&mut self, what: String) {
        self.skipped += 1;
        if self.options.malformed == Malformed::Warn {
            (self.notify)(Notice::Skipped(what));
        }
    }
}

/// Marks where source `s` stands after queueing `entry` (at `location`),
/// read up to `at`.
fn mark(
    src: &mut Source,
    merge: &Merge,
    s: usize,
    entry: Entry,
    at: Where,
    location: Option<RowAt>,
) {
    if !src.track {
        return;
    }
    src.marks.push_back(Mark {
        entry,
        at,
        location,
        read: src.read,
        epoch_rows: src.rows,
        merge: Some(merge.mark(s)),
        then_reset: false,
    });
}

/// A receiver with no sender: a placeholder while a feeder is moved.
fn dead() -> Receiver<Msg> {
    std::sync::mpsc::channel().1
}

/// A time as messages write it: its number, or its RFC 3339 text.
pub fn show(v: Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format!("{f:?}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::types::Type;
    use crate::trace::{InputSchema, reader_from_bufread};

    fn schema() -> InputSchema {
        InputSchema {
            names: vec!["x".into(), "t".into()],
            types: vec![Type::Int, Type::Any],
        }
    }

    /// A CSV source of `rows` (time, x), from its `skip`-th row on.
    fn reader(rows: &[(&str, i64)], skip: usize) -> Box<dyn RowReader> {
        let mut text = "t,x\n".to_string();
        for (t, x) in &rows[skip..] {
            text.push_str(&format!("{t},{x}\n"));
        }
        let bytes = Box::new(std::io::Cursor::new(text.into_bytes()));
        reader_from_bufread("s.csv", bytes, TraceFormat::Csv, &schema()).unwrap()
    }

    fn feed(a: &[(&str, i64)], b: &[(&str, i64)], skip: [usize; 2]) -> Feed {
        let options = FeedOptions {
            names: schema().names,
            time_cell: Some(1),
            unit: TimeUnit::Seconds,
            lateness: 2_000_000_000,
            separate: false,
            malformed: Malformed::Stop,
            idle_timeout: None,
            periods: vec![3_000_000_000],
            start: None,
            max_gap: None,
            on_gap: GapPolicy::CatchUp,
            max_ticks: 100,
            on_reset: ResetPolicy::Once,
            positions: true,
            wall_clock: false,
        };
        let mut f = Feed::new(options, crate::notice::ignore());
        f.add_reader("a".into(), reader(a, skip[0]), TraceFormat::Csv);
        f.add_reader("b".into(), reader(b, skip[1]), TraceFormat::Csv);
        f
    }

    /// A feed resumed at every point where it is settled, over its sources
    /// opened after the rows its positions say were taken, gives the events
    /// of the feed that went on: steps, late rows, ties, ticks and a time
    /// reset included.
    #[test]
    fn a_feed_resumed_where_it_settled_gives_the_same_events() {
        let a = [
            ("1", 1),
            ("3", 2),
            ("2", 3),
            ("7", 4),
            ("reset", 0),
            ("1", 5),
            ("4", 6),
        ];
        let b = [
            ("1", 10),
            ("2", 20),
            ("2", 30),
            ("8", 40),
            ("reset", 0),
            ("3", 50),
        ];
        let mut whole = feed(&a, &b, [0, 0]);
        let mut want = Vec::new();
        while let Some(e) = whole.next().unwrap() {
            want.push(e);
        }
        assert!(want.iter().any(|e| matches!(e, Event::Tick(..))));
        assert!(want.iter().any(|e| matches!(e, Event::Reset)));
        let mut resumed_at = 0;
        for cut in 0..want.len() {
            let mut first = feed(&a, &b, [0, 0]);
            let mut got = Vec::new();
            for _ in 0..cut {
                got.push(first.next().unwrap().unwrap());
            }
            if !first.settled() || !matches!(got.last(), Some(Event::Rows(_))) {
                continue;
            }
            resumed_at += 1;
            let (state, at) = (first.state(), first.positions());
            let skip = [at[0].rows as usize, at[1].rows as usize];
            let mut second = feed(&a, &b, skip);
            second.resume(&state, &at);
            while let Some(e) = second.next().unwrap() {
                got.push(e);
            }
            assert_eq!(got, want, "resumed after {cut} events");
        }
        assert!(resumed_at >= 5, "resumed at {resumed_at} points only");
    }
}
