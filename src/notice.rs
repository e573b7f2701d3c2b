//! Notices: what a run's stages tell the operator besides their results (a broker lost and
//! found again, a subscription made), handed to a function the caller chooses.
//!
//! The library prints nothing. A stage that has something to say (a live transport
//! reconnecting on a thread of its own, say) calls the [`Notify`] it was given; the command
//! line's prints each notice on standard error, an embedder's may log it or count it.

use std::fmt;
use std::sync::Arc;

/// What a stage says.
#[derive(Clone, Debug, PartialEq)]
pub enum Notice {
    /// A broker or connection was lost; the stage reconnects with backoff,
    /// the monitor keeping its state. Said once per loss.
    Lost {
        /// What was lost (a source or sink, by its redacted URL).
        what: String,
        /// Why.
        error: String,
    },
    /// What was lost answers again.
    Reconnected {
        /// The source or sink.
        what: String,
    },
    /// A live source subscribed to its topics.
    Subscribed {
        /// The source.
        what: String,
        /// The topics, as the broker confirmed them.
        topics: String,
    },
    /// A Redis consumer group was gone (a server restarted without its
    /// data) and is made again.
    GroupRemade {
        /// The source.
        what: String,
        /// The group's name.
        group: String,
    },
    /// A sink could not hand its last outputs to its broker in time: some
    /// may be lost.
    Undelivered {
        /// The sink.
        what: String,
        /// How long it waited.
        seconds: u64,
    },
    /// A `tcp://` input listens (a port 0 asked for any free port: this is
    /// the one to connect to).
    Listening {
        /// `tcp://ADDRESS:PORT`.
        at: String,
    },
    /// A `tcp://` listener cannot accept a connection; it retries after a
    /// pause growing up to `pause` seconds. Said once per episode.
    AcceptFailing {
        /// The listener.
        at: String,
        /// Why, with a hint where one helps.
        error: String,
        /// The longest pause between retries, in seconds.
        pause: f64,
    },
    /// The listener accepts connections again.
    Accepting {
        /// The listener.
        at: String,
    },
    /// A source's reader warns (a column of no input, say).
    Trace(String),
    /// A malformed row was dropped (said under the `warn` policy only).
    Skipped(String),
    /// A late row was re-stamped: where it is, its own time and its stamp,
    /// as the run writes times. The first few of a run are said.
    Late {
        /// Where the row is.
        at: String,
        /// The time it carried.
        own: String,
        /// The time it was stamped with.
        stamp: String,
    },
    /// An input two sources set at one time: the value of the source given
    /// first is kept. The first few of a run are said.
    Clash {
        /// The step's time, as the run writes times.
        time: String,
        /// The input.
        input: String,
        /// The source whose value is kept, and the one whose is dropped.
        kept: String,
        /// The other source.
        dropped: String,
    },
    /// A keyed run's key was stopped by a runtime error: its later rows
    /// are not evaluated, the other keys go on. Said once per key.
    KeyStopped {
        /// The key input's name.
        input: String,
        /// The key.
        key: String,
        /// The runtime error.
        error: String,
    },
}

impl Notice {
    /// Whether the notice is an error (the run goes on, but ends with a
    /// runtime error's status).
    pub fn is_error(&self) -> bool {
        matches!(self, Notice::KeyStopped { .. })
    }

    /// Whether the notice warns of a possible loss (rather than informs).
    pub fn is_warning(&self) -> bool {
        matches!(
            self,
            Notice::Undelivered { .. }
                | Notice::Trace(_)
                | Notice::Skipped(_)
                | Notice::Late { .. }
                | Notice::Clash { .. }
        )
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::Lost { what, error } => write!(
                f,
                "lost {what}: {error}; reconnecting (the monitor keeps its state)"
            ),
            Notice::Reconnected { what } => write!(f, "reconnected to {what}"),
            Notice::Subscribed { what, topics } => write!(f, "subscribed to {what}: {topics}"),
            Notice::GroupRemade { what, group } => {
                write!(f, "{what}: group `{group}` is gone; making it again")
            }
            Notice::Undelivered { what, seconds } => write!(
                f,
                "{what}: the broker did not take the last outputs within {seconds} s; some may be lost"
            ),
            Notice::Listening { at } => write!(f, "listening on {at}"),
            Notice::AcceptFailing { at, error, pause } => write!(
                f,
                "{at}: cannot accept a connection: {error}; retrying after a pause that grows to {pause}s, until it can"
            ),
            Notice::Accepting { at } => write!(f, "{at}: accepting connections again"),
            Notice::Trace(w) => write!(f, "{w}"),
            Notice::Skipped(what) => write!(f, "{what}; the row is skipped"),
            Notice::Late { at, own, stamp } => write!(
                f,
                "{at}: a late row (time {own}) is re-stamped to {stamp} (within --lateness, or after its trace was idle past --idle-timeout)"
            ),
            Notice::Clash {
                time,
                input,
                kept,
                dropped,
            } => write!(
                f,
                "time {time}: `{input}` is set by both `{kept}` and `{dropped}`; the value of `{kept}` is kept (the first --input has priority)"
            ),
            Notice::KeyStopped { input, key, error } => {
                write!(
                    f,
                    "{error} ({input}={key}); its later rows are not evaluated"
                )
            }
        }
    }
}

/// Where a stage's notices go: called from whichever thread the stage runs on.
pub type Notify = Arc<dyn Fn(Notice) + Send + Sync>;

/// A [`Notify`] that drops every notice.
pub fn ignore() -> Notify {
    Arc::new(|_| {})
}
