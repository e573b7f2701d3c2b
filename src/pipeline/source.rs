//! A feed's sources: a reader read where the feed asks for a row, or read on a thread of its
//! own (a live source merged with others, a `tcp://` connection); each source's marks, where
//! it stood after every item it queued in the merge, for checkpoints.

use super::{Malformed, Stop};
use crate::notice::{Notice, Notify};
use crate::time::Time;
use crate::trace::{self, RowReader, TraceErrorKind, TraceFormat, TracePosition};
use crate::value::Value;
use std::collections::VecDeque;
use std::io;
use std::sync::mpsc::{Receiver, sync_channel};

/// One source of a feed.
pub(super) struct Source {
    pub(super) name: String,
    pub(super) feeder: Feeder,
    pub(super) format: TraceFormat,
    /// Rows read from it this epoch (a row's time without a time field).
    pub(super) rows: u64,
    /// Rows read from it since the trace's start.
    pub(super) read: u64,
    /// Where it stood after each row (and time reset) the merge holds,
    /// oldest first, and after the last one the run took: what a
    /// checkpoint records.
    pub(super) marks: VecDeque<Mark>,
    pub(super) taken: Mark,
    /// Whether the marks are kept (`FeedOptions::positions`).
    pub(super) track: bool,
}

impl Source {
    pub(super) fn new(name: String, feeder: Feeder, format: TraceFormat) -> Source {
        Source {
            name,
            feeder,
            format,
            rows: 0,
            read: 0,
            marks: VecDeque::new(),
            taken: Mark::default(),
            track: true,
        }
    }

    /// The run took the queued item `entry` (a row of a step, or a time
    /// reset): it and everything before it are behind the source now.
    pub(super) fn take(&mut self, entry: Entry) {
        if !self.track {
            return;
        }
        while let Some(m) = self.marks.pop_front() {
            let found = m.entry == entry;
            self.taken = m;
            if found {
                return;
            }
        }
        unreachable!("the merge took an item its source did not mark");
    }

    /// The last mark made: the newest queued, else the last taken.
    pub(super) fn last_mark(&mut self) -> &mut Mark {
        self.marks.back_mut().unwrap_or(&mut self.taken)
    }
}

/// How a source's rows arrive: read here when asked for, or from a reader
/// on a thread of its own (live sources merged with others, so that one
/// silent source does not stop the others being read, and an idle timeout
/// can tell it is silent).
pub enum Feeder {
    /// A reader read on the feed's thread.
    Direct(Box<dyn RowReader>),
    /// What a reader on a thread of its own sends ([`spawn_reader`]).
    Thread(Receiver<Msg>),
}

/// An item a source put in the merge's queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Entry {
    /// Nothing yet (a source's start).
    #[default]
    Start,
    /// The row with this sequence number.
    Row(u64),
    /// A time reset.
    Reset,
}

/// Where a source stood after an item it queued (see `Source::marks`).
#[derive(Clone, Debug, Default)]
pub(super) struct Mark {
    pub(super) entry: Entry,
    /// The reader's position and resume token after the item's row.
    pub(super) at: Where,
    /// Where the row is, for messages (none for a reset).
    pub(super) location: Option<RowAt>,
    /// `Source::read` and `Source::rows` after it.
    pub(super) read: u64,
    pub(super) epoch_rows: u64,
    /// The merge's mark of the source after it.
    pub(super) merge: Option<crate::merge::SourceMark>,
    /// Whether a time reset read with the row follows it (an `.input`
    /// trace's marker, read past with the row): a resume from the row's
    /// position queues it again.
    pub(super) then_reset: bool,
}

/// A reader's position and resume token after a row.
#[derive(Clone, Debug, Default)]
pub struct Where {
    /// A regular file's position after the row.
    pub position: Option<TracePosition>,
    /// A live source's resume token (a Redis entry ID).
    pub token: Option<String>,
}

/// What a source delivers next.
pub enum Msg {
    /// A row, where it is (for messages, and the reader's position after
    /// it), and the stamp its source gave it.
    Row(Vec<Option<Value>>, RowAt, Where, Option<Time>),
    /// A malformed row dropped (the policy is not [`Malformed::Stop`]).
    Skipped(String),
    /// A reader's warning.
    Warning(String),
    /// The source has no more rows.
    End,
    /// An error that ends the source (and the run).
    Failed(Stop),
    /// A time reset after the row before (an `.input` trace's marker).
    Reset,
}

/// Where a row is, for messages: `name:LINE:1` where the reader's position
/// names the line the row ended on (JSON lines and CSV), else `name: row N`.
pub fn row_location(name: &str, reader: &dyn RowReader, lines: bool, row: u64) -> String {
    RowAt::of(reader, lines, row).show(name)
}

/// Where a row is in its source, for messages; kept as numbers, and
/// written out with the source's name only when a message says it (a row's
/// location is taken for every row, and said for few).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowAt {
    /// The line the row ended on (rows are lines: JSON lines and CSV).
    Line(u64),
    /// The row's number, 1 for the first (an `.input` block).
    Row(u64),
}

impl RowAt {
    /// Where the row `reader` has just given is: the line it ended on when
    /// rows are lines (`lines`) and the reader knows it, else its number
    /// `row`.
    pub fn of(reader: &dyn RowReader, lines: bool, row: u64) -> RowAt {
        match reader.position() {
            Some(p) if lines => RowAt::Line(p.line),
            _ => RowAt::Row(row),
        }
    }

    /// `name:LINE:1`, or `name: row N`.
    pub fn show(self, name: &str) -> String {
        match self {
            RowAt::Line(line) => format!("{name}:{line}:1"),
            RowAt::Row(row) => format!("{name}: row {row}"),
        }
    }
}

/// Whether `policy` drops a row the reader failed on with `e`: a malformed
/// row, of a reader that can go on after it.
pub fn droppable(policy: Malformed, e: &trace::TraceError, reader: &dyn RowReader) -> bool {
    policy != Malformed::Stop && e.kind == TraceErrorKind::Malformed && reader.can_continue()
}

/// Reads the next row of `reader` (a source `name` of `format` that has
/// given `rows` rows): warnings first, then what came (with the reader's
/// position after it when `track`), and whether a time reset followed the
/// row.
pub(super) fn read_one(
    reader: &mut dyn RowReader,
    (format, rows): (TraceFormat, u64),
    width: usize,
    policy: Malformed,
    track: bool,
) -> (Vec<String>, Msg, bool) {
    let mut cells = vec![None; width];
    let next = reader.next_row(&mut cells);
    let warnings = reader.take_warnings();
    let msg = match next {
        Ok(true) => {
            let lines = format != TraceFormat::Tc;
            Msg::Row(
                cells,
                RowAt::of(reader, lines, rows + 1),
                match track {
                    true => Where {
                        position: reader.position(),
                        token: reader.resume_token(),
                    },
                    false => Where::default(),
                },
                reader.stamp(),
            )
        }
        Ok(false) => Msg::End,
        Err(e) if droppable(policy, &e, reader) => Msg::Skipped(e.to_string()),
        Err(e) => Msg::Failed(Stop::of_trace(&e)),
    };
    let reset = matches!(msg, Msg::Row(..)) && reader.take_reset();
    (warnings, msg, reset)
}

/// Reads a source on a thread of its own (opened there by `open`: a reader
/// stays on the thread that opened it), sending what it reads: at most a
/// few hundred rows ahead, as the channel is bounded, so a fast source waits
/// for the merge rather than filling memory.
pub fn spawn_reader(
    format: TraceFormat,
    width: usize,
    policy: Malformed,
    open: impl FnOnce() -> Result<Box<dyn RowReader>, String> + Send + 'static,
) -> Receiver<Msg> {
    let (tx, rx) = sync_channel(256);
    std::thread::spawn(move || {
        let mut reader = match open() {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Msg::Failed(Stop::failure(e)));
                return;
            }
        };
        let mut rows = 0;
        loop {
            let (warnings, msg, reset) =
                read_one(reader.as_mut(), (format, rows), width, policy, true);
            for w in warnings {
                if tx.send(Msg::Warning(w)).is_err() {
                    return;
                }
            }
            rows += u64::from(matches!(msg, Msg::Row(..)));
            let last = matches!(msg, Msg::End | Msg::Failed(..));
            // The run gone (it stopped), or the source done: stop reading.
            if tx.send(msg).is_err() || last {
                return;
            }
            if reset {
                rows = 0;
                if tx.send(Msg::Reset).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// A connection accepted by a `tcp://` input: its name and its rows.
pub type Connection = (String, Receiver<Msg>);

/// Accepts connections on `listener`, each a JSON-lines source read on a
/// thread of its own, handed to the feed in accept order.
pub fn spawn_listener(
    listener: std::net::TcpListener,
    schema: crate::trace::InputSchema,
    policy: Malformed,
    notify: Notify,
) -> Receiver<Connection> {
    let (tx, rx) = std::sync::mpsc::channel();
    let at = match listener.local_addr() {
        Ok(a) => format!("tcp://{a}"),
        Err(_) => "the tcp:// input".to_string(),
    };
    std::thread::spawn(move || {
        let mut backoff = AcceptBackoff::new(notify);
        for stream in listener.incoming() {
            let stream = match stream {
                Ok(s) => {
                    backoff.accepted(&at);
                    s
                }
                // A connection that went before it was taken: the
                // listener itself is fine.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue;
                }
                Err(e) => {
                    backoff.failed(&at, &e);
                    continue;
                }
            };
            let name = match stream.peer_addr() {
                Ok(a) => format!("tcp://{a}"),
                Err(_) => "tcp://?".to_string(),
            };
            let (n, schema) = (name.clone(), schema.clone());
            let width = schema.names.len();
            let rows = spawn_reader(TraceFormat::Jsonl, width, policy, move || {
                let source = Box::new(io::BufReader::new(stream));
                trace::reader_from_bufread(&n, source, TraceFormat::Jsonl, &schema)
                    .map_err(|e| e.to_string())
            });
            if tx.send((name, rows)).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits between failed accepts of a `tcp://` listener. A failure that
/// lasts (out of file descriptors: `EMFILE`, `ENFILE`; out of memory) fails
/// again at once on every retry, as the pending connection stays queued, so
/// retrying without a pause would spin a core: the pause starts at 10 ms and
/// doubles up to 1 s, back to 10 ms once a connection is accepted. The
/// failure is said once per episode (a run of failures), not per failure.
pub(super) struct AcceptBackoff {
    next: std::time::Duration,
    /// Whether accepting is failing (said once).
    failing: bool,
    notify: Notify,
}

impl AcceptBackoff {
    pub(super) const FIRST: std::time::Duration = std::time::Duration::from_millis(10);
    pub(super) const LAST: std::time::Duration = std::time::Duration::from_secs(1);

    pub(super) fn new(notify: Notify) -> AcceptBackoff {
        AcceptBackoff {
            next: AcceptBackoff::FIRST,
            failing: false,
            notify,
        }
    }

    /// Accepting on `at` failed with `error`: says so (the first failure of
    /// an episode) and waits before the next attempt.
    pub(super) fn failed(&mut self, at: &str, error: &io::Error) {
        if !self.failing {
            let hint = match error.raw_os_error() {
                Some(libc::EMFILE | libc::ENFILE) => {
                    " (out of file descriptors: raise the limit, `ulimit -n`, or have clients close connections)"
                }
                _ => "",
            };
            (self.notify)(Notice::AcceptFailing {
                at: at.to_string(),
                error: format!("{error}{hint}"),
                pause: AcceptBackoff::LAST.as_secs_f64(),
            });
            self.failing = true;
        }
        std::thread::sleep(self.next);
        self.next = (self.next * 2).min(AcceptBackoff::LAST);
    }

    /// A connection was accepted on `at`.
    pub(super) fn accepted(&mut self, at: &str) {
        if self.failing {
            (self.notify)(Notice::Accepting { at: at.to_string() });
        }
        self.failing = false;
        self.next = AcceptBackoff::FIRST;
    }
}
