//! Notices: what a run's stages tell the operator besides their results (a broker lost and
//! found again, a subscription made), handed to a function the caller chooses.
//!
//! The library prints nothing. A stage that has something to say (a live transport
//! reconnecting on a thread of its own, say) calls the [`Notify`] it was given; the command
//! line's prints each notice on standard error, an embedder's may log it or count it.

use std::fmt;
use std::sync::Arc;

/// What a stage says.
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

impl Notice {
    /// Whether the notice warns of a possible loss (rather than informs).
    pub fn is_warning(&self) -> bool {
        matches!(self, Notice::Undelivered { .. })
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
        }
    }
}

/// Where a stage's notices go: called from whichever thread the stage runs on.
pub type Notify = Arc<dyn Fn(Notice) + Send + Sync>;

/// A [`Notify`] that drops every notice.
pub fn ignore() -> Notify {
    Arc::new(|_| {})
}
