//! The evaluation stage: each event of a feed given to the run's monitor (one, or one per key),
//! and each step or tick it evaluates handed to the caller's [`Sink`].
//!
//! The rules are the ones every single-process run follows: a step is evaluated at its time
//! with a time field, else as the next step; a keyed monitor of a periodic specification
//! evaluates a key's ticks just before that key's row ([`KeyedMonitor::ticks_before`], at the
//! row's time, else at the key's row index in the index unit); a runtime error stops a plain
//! run, and only its key in a keyed one (said once, through [`Sink::key_stopped`]); a row the
//! monitor rejects is the caller's to drop or stop at ([`Flow::Rejected`]).

use super::Event;
use crate::error::RuntimeError;
use crate::keyed::KeyedMonitor;
use crate::lang::ast::ResetPolicy;
use crate::monitor::{Monitor, Outputs, Stats};
use crate::row::{RowError, StepError};
use crate::time::Time;
use crate::value::{Key, Value};
use std::collections::HashSet;
use std::io;

/// The monitor a run drives: one, or one per key of an input.
pub enum Monitors {
    /// One monitor for every row.
    Single(Box<Monitor>),
    /// A monitor per key.
    Keyed(Box<KeyedMonitor>),
}

impl Monitors {
    /// The output streams' names.
    pub fn output_names(&self) -> Vec<&str> {
        match self {
            Monitors::Single(m) => m.output_names(),
            Monitors::Keyed(m) => m.output_names(),
        }
    }

    /// The monitor's counters.
    pub fn stats(&self) -> Stats {
        match self {
            Monitors::Single(m) => m.stats(),
            Monitors::Keyed(m) => m.stats(),
        }
    }

    /// The periods of the specification's periodic streams (ns).
    pub fn periods(&self) -> &[i64] {
        match self {
            Monitors::Single(m) => m.periods(),
            Monitors::Keyed(m) => m.periods(),
        }
    }
}

/// Where a run's evaluated steps and ticks go.
pub trait Sink {
    /// An evaluated step (`cells`: the step's cells, inputs first) or tick
    /// (`cells` is `None`) at `time`; a keyed monitor's outputs name their
    /// key.
    fn write(
        &mut self,
        outputs: &Outputs<'_>,
        cells: Option<&[Option<Value>]>,
        time: Time,
    ) -> io::Result<()>;

    /// `key` was stopped by `error` (a keyed run; said once per key): its
    /// later rows and ticks are not evaluated, the other keys go on.
    fn key_stopped(&mut self, key: &Key, error: &RuntimeError) -> io::Result<()>;
}

/// What the run does after an event.
#[derive(Debug)]
pub enum Flow {
    /// It goes on.
    Go,
    /// The monitor rejected the step's row: the caller drops it and goes
    /// on, or stops.
    Rejected(RowError),
    /// It stops.
    Stop(Halt),
}

/// Why a run stops.
#[derive(Debug)]
pub enum Halt {
    /// A plain monitor's runtime error.
    Runtime(RuntimeError),
    /// More ticks of `key` due before its row than the bound.
    TooManyTicks {
        /// The key, as it displays.
        key: String,
        /// The ticks due.
        due: u128,
        /// The bound.
        max: u64,
    },
    /// A tick for a keyed monitor, whose ticks are its keys' (made due by
    /// their rows): only a log written by something else has one.
    KeyedTick,
}

/// Evaluates a run's events (see the module doc).
pub struct Evaluator {
    /// Whether rows carry their time (a step is evaluated at it).
    timed: bool,
    /// The inputs' cells, first in a step's cells.
    inputs: usize,
    /// The keys stopped by a runtime error.
    stopped: HashSet<Key>,
    /// Whether a tick is the run's, for every key (a run whose time follows
    /// the wall clock); else a keyed monitor's ticks are its keys' own.
    every_key_ticks: bool,
}

impl Evaluator {
    /// An evaluator of steps whose first `inputs` cells are the monitor's,
    /// evaluated at their time when `timed`.
    pub fn new(timed: bool, inputs: usize) -> Evaluator {
        Evaluator {
            timed,
            inputs,
            stopped: HashSet::new(),
            every_key_ticks: false,
        }
    }

    /// Makes a tick the run's, for every key of a keyed monitor
    /// ([`KeyedMonitor::advance_to`]): a run whose time follows the wall
    /// clock ticks every key while the sources are silent.
    pub fn every_key_ticks(mut self, on: bool) -> Evaluator {
        self.every_key_ticks = on;
        self
    }

    /// Whether a key was stopped by a runtime error (a keyed run then ends
    /// with a runtime error's status).
    pub fn keys_stopped(&self) -> bool {
        !self.stopped.is_empty()
    }

    /// Evaluates one event of a feed (a [`Event::Source`] is nothing to
    /// evaluate; a [`Event::Reset`] restarts a keyed monitor's ticks under
    /// `on_reset`, a plain one's being the feed's).
    pub fn event<S: Sink + ?Sized>(
        &mut self,
        monitors: &mut Monitors,
        event: &Event,
        on_reset: ResetPolicy,
        sink: &mut S,
    ) -> io::Result<Flow> {
        match event {
            Event::Rows(step) => self.step(monitors, step.time, &step.cells, sink),
            Event::Tick(t, due) => self.tick(monitors, *t, due, sink),
            Event::Reset => match monitors {
                Monitors::Keyed(m) if !m.periods().is_empty() => {
                    m.reset_ticks(on_reset);
                    self.keyed_ticks(m, sink)
                }
                _ => Ok(Flow::Go),
            },
            Event::Source(_) => Ok(Flow::Go),
        }
    }

    /// Evaluates a step of `cells` at `time`: a keyed monitor's ticks of
    /// the row's key first, then the row.
    pub fn step<S: Sink + ?Sized>(
        &mut self,
        monitors: &mut Monitors,
        time: Time,
        cells: &[Option<Value>],
        sink: &mut S,
    ) -> io::Result<Flow> {
        let row = &cells[..self.inputs];
        if let Monitors::Keyed(m) = monitors
            && !m.periods().is_empty()
        {
            match m.ticks_before_row(self.timed.then_some(time), row) {
                Ok(()) => {
                    if let Flow::Stop(halt) = self.keyed_ticks(m, sink)? {
                        return Ok(Flow::Stop(halt));
                    }
                }
                Err(StepError::Row(RowError::TooManyTicks { key, due, max })) => {
                    return Ok(Flow::Stop(Halt::TooManyTicks { key, due, max }));
                }
                // A stopped key or a rejected row: the row says so below.
                Err(_) => {}
            }
        }
        let timed = self.timed;
        let stepped = match monitors {
            Monitors::Single(m) if timed => m.step_at(time, row),
            Monitors::Single(m) => m.step(row),
            Monitors::Keyed(m) if timed => m.step_at(time, row),
            Monitors::Keyed(m) => m.step(row),
        };
        match stepped {
            Ok(o) => {
                sink.write(&o, Some(cells), time)?;
                Ok(Flow::Go)
            }
            Err(StepError::Runtime(e)) => match monitors {
                Monitors::Single(_) => Ok(Flow::Stop(Halt::Runtime(e))),
                Monitors::Keyed(m) => {
                    // That key stops; the others go on.
                    if let Some(key) = cells[m.key_index()].clone().map(Key::from)
                        && self.stopped.insert(key.clone())
                    {
                        sink.key_stopped(&key, &e)?;
                    }
                    Ok(Flow::Go)
                }
            },
            Err(StepError::Row(e)) => Ok(Flow::Rejected(e)),
        }
    }

    /// Evaluates a tick of the periods `due` at `t` (a plain monitor's).
    pub fn tick<S: Sink + ?Sized>(
        &mut self,
        monitors: &mut Monitors,
        t: Time,
        due: &[bool],
        sink: &mut S,
    ) -> io::Result<Flow> {
        let m = match monitors {
            Monitors::Single(m) => m,
            Monitors::Keyed(m) if self.every_key_ticks => {
                m.advance_to(t);
                return self.keyed_ticks(m, sink);
            }
            Monitors::Keyed(_) => return Ok(Flow::Stop(Halt::KeyedTick)),
        };
        match m.tick(t, due) {
            Ok(o) => {
                sink.write(&o, None, t)?;
                Ok(Flow::Go)
            }
            Err(StepError::Runtime(e)) => Ok(Flow::Stop(Halt::Runtime(e))),
            Err(StepError::Row(e)) => unreachable!("a tick has no row: {e}"),
        }
    }

    /// Evaluates and writes the ticks a keyed monitor has due (its
    /// `ticks_before` or `reset_ticks` made them), each key's with its key;
    /// a runtime error stops that key alone, as a row's does.
    fn keyed_ticks<S: Sink + ?Sized>(
        &mut self,
        m: &mut KeyedMonitor,
        sink: &mut S,
    ) -> io::Result<Flow> {
        while let Some(ticked) = m.next_tick() {
            match ticked {
                Ok(o) => {
                    let t = o.time().unwrap_or(Time(0));
                    sink.write(&o, None, t)?;
                }
                Err(StepError::Runtime(e)) => {
                    if let Some(key) = m.last_key().cloned()
                        && self.stopped.insert(key.clone())
                    {
                        sink.key_stopped(&key, &e)?;
                    }
                }
                Err(StepError::Row(e)) => unreachable!("a tick has no row: {e}"),
            }
        }
        Ok(Flow::Go)
    }
}
