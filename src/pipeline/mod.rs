//! The stages of a run: sources, stamped and merged by time, with the periodic streams' ticks
//! between their steps ([`Feed`]), giving one sequence of [`Event`]s, which an [`Evaluator`]
//! gives to the run's [`Monitors`], handing each evaluated step and tick to a [`Sink`].
//!
//! A run is sources → feed (stamping, the merge, the scheduler) → monitor (plain, or keyed by
//! an input) → sinks (outputs, alerts, transports). The feed is the library's: `vigil run`
//! with time or several sources drives it, and so does an embedder that merges its own
//! readers ([`crate::trace::RowReader`]s: files, standard input, the live transports of
//! [`crate::live`]). What a stage has to say besides its events (a reader's warning, a late
//! row) goes to the caller's [`Notify`](crate::notice::Notify). A feed checkpoints: its
//! sources' positions ([`Feed::positions`]) and its state ([`Feed::state`], serde) taken when
//! it is [`settled`](Feed::settled), and [`Feed::resume`] on a fresh feed over the sources
//! opened at those positions gives the same events as the feed that went on.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use vigil::pipeline::{Event, Feed, FeedOptions, GapPolicy, Malformed, ResetPolicy};
//! use vigil::time::TimeUnit;
//! use vigil::trace::{self, InputSchema, TraceFormat};
//!
//! // Two sources of `t,x` rows, merged by their time field `t`.
//! let schema = InputSchema {
//!     names: vec!["x".into(), "t".into()],
//!     types: vec![vigil::Type::Int, vigil::Type::Any],
//! };
//! let open = |text: &'static str| {
//!     let bytes = Box::new(std::io::Cursor::new(text.as_bytes()));
//!     trace::reader_from_bufread("t.csv", bytes, TraceFormat::Csv, &schema).unwrap()
//! };
//! let options = FeedOptions {
//!     names: schema.names.clone(),
//!     time_cell: Some(1),
//!     unit: TimeUnit::Seconds,
//!     lateness: 0,
//!     separate: false,
//!     malformed: Malformed::Stop,
//!     idle_timeout: None,
//!     periods: vec![],
//!     start: None,
//!     max_gap: None,
//!     on_gap: GapPolicy::CatchUp,
//!     max_ticks: 1000,
//!     on_reset: ResetPolicy::Cancel,
//!     positions: false,
//!     wall_clock: false,
//! };
//! let said = Arc::new(Mutex::new(Vec::new()));
//! let log = said.clone();
//! let mut feed = Feed::new(options, Arc::new(move |n| log.lock().unwrap().push(n.to_string())));
//! feed.add_reader("a".into(), open("t,x\n1,10\n3,30\n"), TraceFormat::Csv);
//! feed.add_reader("b".into(), open("t,x\n2,20\n3,31\n"), TraceFormat::Csv);
//! let mut steps = Vec::new();
//! while let Some(event) = feed.next().unwrap() {
//!     if let Event::Rows(step) = event {
//!         steps.push((step.time.0 / 1_000_000_000, step.cells[0].clone()));
//!     }
//! }
//! use vigil::Value::Int;
//! assert_eq!(steps, [(1, Some(Int(10))), (2, Some(Int(20))), (3, Some(Int(30)))]);
//! // At time 3 both set `x`: the first source's value is kept, and the step says so.
//! ```

pub mod checkpoint;
pub mod direct;
pub mod drive;
mod feed;
pub mod inputs;
pub mod log;
pub mod outputs;
mod run;
pub mod run_loop;
pub mod sink;
mod source;

pub use crate::lang::ast::{GapPolicy, ResetPolicy};
#[cfg(feature = "scale")]
pub(crate) use feed::REPORTED as LATE_ROWS_SAID;
pub use feed::{At, Feed, FeedOptions, FeedState, SourceState, show};
pub use run::{Evaluator, Flow, Halt, Monitors, Sink};
pub use source::{
    Connection, Feeder, Msg, RowAt, Where, droppable, row_location, spawn_listener, spawn_reader,
};

use crate::merge::Step;
use crate::time::Time;
use crate::trace::{TraceError, TraceErrorKind};

/// What a feed gives: a merged step, a tick of the periodic streams, a
/// time reset every source reached (a new epoch), or a source that joined
/// (a connection to a `tcp://` input).
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A step of the merged rows.
    Rows(Step),
    /// A tick at a time, with the periods due then (one flag per period).
    Tick(Time, Vec<bool>),
    /// Every source reached a time reset: a new epoch begins.
    Reset,
    /// A source joined, with its name.
    Source(String),
}

/// What a run does with a malformed row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// Stop the run.
    Stop,
    /// Drop the row (it is not a step) and count it.
    Skip,
    /// Drop the row, count it, and say so (a [`Notice::Skipped`](crate::notice::Notice)).
    Warn,
}

/// Why a feed stopped the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    /// What went wrong, located.
    pub message: String,
    /// Whose fault it is.
    pub kind: StopKind,
}

/// Whose fault a [`Stop`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopKind {
    /// The input's: a malformed row, a time out of order, too many ticks.
    Trace,
    /// The environment's: an input that cannot be read.
    Failure,
}

impl Stop {
    /// A stop on the input's fault.
    pub fn trace(message: String) -> Stop {
        Stop {
            message,
            kind: StopKind::Trace,
        }
    }

    /// A stop on the environment's fault.
    pub fn failure(message: String) -> Stop {
        Stop {
            message,
            kind: StopKind::Failure,
        }
    }

    /// A reader's error as a stop.
    pub fn of_trace(e: &TraceError) -> Stop {
        Stop {
            message: e.to_string(),
            kind: match e.kind {
                TraceErrorKind::Malformed => StopKind::Trace,
                TraceErrorKind::Io => StopKind::Failure,
            },
        }
    }
}
