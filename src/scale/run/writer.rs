//! A scaled run's writer: the pieces the workers formatted (rows' lines and alerts, and
//! barriers), written once their time is complete in the single-process order (time, barriers
//! first, then position), with each checkpoint completed once every worker's barrier is in and
//! every line before it written; and the sinks it writes to.

use super::{Outcome, Plan};
use crate::notice::Notice;
use crate::pipeline::checkpoint::barrier;
use crate::pipeline::drive::Ended;
use crate::pipeline::sink::TriggerTally;
use crate::scale::StampedRow;
use crate::trace::{self, OutputFormat, OutputWriter};
use crate::value::{Key, Sample, Value};
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};
use timely::communication::Pull;
use timely::dataflow::channels::Message;
use timely::dataflow::operators::generic::InputHandleCore;
use timely::progress::frontier::MutableAntichain;

/// What the workers send the writer: the rows a worker evaluated in one
/// activation, formatted, or its word that it took a checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) enum Piece {
    Rows(Chunk),
    /// A worker's barrier at `time`; `digest` is the source's digest of
    /// the rows before it.
    Done {
        time: u64,
        digest: u64,
    },
    /// A worker's counters and live keys at its end (`--stats`, `--summary`),
    /// sent as its rows are so that process 0 has every process's.
    End {
        worker: usize,
        stats: Box<crate::monitor::Stats>,
        keys: usize,
    },
    /// A reader of another process ended: what it read, and where it stopped the run with
    /// which error (the input's fault, or the environment's).
    ReaderEnd {
        time: u64,
        read: crate::scale::ReadCounts,
        stop: Option<(String, bool)>,
    },
}

/// Rows of one worker in the order it evaluated them (time, then
/// position), their lines and alerts one after another in two buffers: one
/// record, and two allocations, for many rows.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Chunk {
    pub(super) rows: Vec<RowPiece>,
    pub(super) out: Vec<u8>,
    pub(super) alerts: Vec<u8>,
}

/// One row of a chunk: its stamp and key, where its lines and alerts end
/// in the chunk's buffers, and the error it raised.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct RowPiece {
    pub(super) time: u64,
    pub(super) seq: u64,
    pub(super) key: Value,
    pub(super) out_end: usize,
    pub(super) alerts_end: usize,
    /// The error the row raised, if it raised one.
    pub(super) error: Option<RowFault>,
    /// Its trigger firings, for `--summary`: the trigger's name and where it
    /// fired (`3 (host=a)`, as a single-process summary says it).
    pub(super) fired: Vec<(String, String)>,
    /// For a live sink, which takes samples rather than text: the row's step
    /// and the samples of its columns (its lines are then empty).
    pub(super) samples: Option<(u64, Vec<WireSample>)>,
    /// Whether the piece is the row's own step or a tick of its key before it.
    pub(super) of: Of,
    /// A sweep's tick's sweep number (`Of::Sweep`; 0 otherwise): several sweeps at one place
    /// come in its order.
    pub(super) sweep: u64,
}

/// What a row piece is the output of. The writer counts the steps and ticks
/// it writes by it: the writer is the one place every process's rows reach,
/// so its counts are the run's (a worker's own are only its process's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Of {
    /// The row's step.
    Row,
    /// A tick of the row's key, due before the row.
    Tick,
    /// A tick of a sweep over every key (a time reset's `once` ticks, the run's tick under
    /// `--clock wall`), its `seq` its key's place in the order of keys (`Evaluated::KeyTick`):
    /// written before the barrier and the row of its time, keys in the single-process order.
    Sweep,
}

/// What went wrong with a row, as it travels to the writer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) enum RowFault {
    /// A runtime error stopping the row's key (said once; the other keys go on).
    KeyStopped { key: String, error: String },
    /// A row the monitor rejected, or too many ticks before it: the run stops there.
    Fatal(String),
}

/// A [`Sample`] as it travels between processes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) enum WireSample {
    NoVal,
    Deferred,
    Value(Value),
}

impl From<&Sample> for WireSample {
    fn from(s: &Sample) -> WireSample {
        match s {
            Sample::NoVal => WireSample::NoVal,
            Sample::Deferred => WireSample::Deferred,
            Sample::Value(v) => WireSample::Value(v.clone()),
        }
    }
}

impl From<&WireSample> for Sample {
    fn from(s: &WireSample) -> Sample {
        match s {
            WireSample::NoVal => Sample::NoVal,
            WireSample::Deferred => Sample::Deferred,
            WireSample::Value(v) => Sample::Value(v.clone()),
        }
    }
}

/// The size a worker's next chunk is made at (its rows, lines and alerts): the largest of
/// its recent chunks, the mark falling by an eighth at every chunk so that one large
/// activation does not size every later chunk. Grown from empty, each chunk's buffers were
/// copied on every doubling (about 1,500 reallocations of large buffers over 200,000 rows,
/// the most copied bytes of a scaled run); made at the size of the last chunk alone, a chunk
/// larger than the one before still grew (about 130).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ChunkSize {
    rows: usize,
    out: usize,
    alerts: usize,
}

impl Chunk {
    /// The chunk the rows of this activation go to: the last piece, if it
    /// is one (the fragment hands its pieces on once per activation), else one
    /// the writer has written (`spares`), else a new one made at the size `size`
    /// marks.
    pub(super) fn of<'o>(
        out: &'o mut Vec<Piece>,
        size: &mut ChunkSize,
        spares: &Spares,
    ) -> &'o mut Chunk {
        if !matches!(out.last(), Some(Piece::Rows(_))) {
            let chunk = spares.take().unwrap_or_else(|| Chunk {
                rows: Vec::with_capacity(size.rows),
                out: Vec::with_capacity(size.out),
                alerts: Vec::with_capacity(size.alerts),
            });
            out.push(Piece::Rows(chunk));
            let fall = |n: usize| n - n / 8;
            *size = ChunkSize {
                rows: fall(size.rows),
                out: fall(size.out),
                alerts: fall(size.alerts),
            };
        }
        match out.last_mut() {
            Some(Piece::Rows(c)) => c,
            _ => unreachable!("a chunk was just made"),
        }
    }

    /// Ends the row of `row` with the bytes appended since the last, and
    /// raises the mark `size` to the chunk's size so far.
    pub(super) fn end_row(
        &mut self,
        row: &StampedRow,
        (key, error, fired): (Value, Option<RowFault>, Vec<(String, String)>),
        of: Of,
        size: &mut ChunkSize,
    ) {
        *size = ChunkSize {
            rows: size.rows.max(self.rows.len() + 1),
            out: size.out.max(self.out.len()),
            alerts: size.alerts.max(self.alerts.len()),
        };
        self.rows.push(RowPiece {
            time: row.time,
            seq: row.seq,
            key,
            out_end: self.out.len(),
            alerts_end: self.alerts.len(),
            error,
            fired,
            samples: None,
            of,
            sweep: 0,
        });
    }

    /// Row `i`'s lines and alerts.
    fn bytes(&self, i: usize) -> (&[u8], &[u8]) {
        let (o, a) = match i.checked_sub(1) {
            Some(p) => (self.rows[p].out_end, self.rows[p].alerts_end),
            None => (0, 0),
        };
        let r = &self.rows[i];
        (&self.out[o..r.out_end], &self.alerts[a..r.alerts_end])
    }
}

/// Chunks the writer has written, emptied with their buffers kept, for the formatters of its
/// process to fill again (at most `Spares::KEPT`). A chunk's buffers are large (a
/// thousand rows' lines): made new for every activation, each was a fresh block of memory
/// from the system, and a scaled run took half as many page faults again as without them.
#[derive(Default)]
pub(crate) struct Spares(Mutex<Vec<Chunk>>);

impl Spares {
    /// The chunks kept at most.
    const KEPT: usize = 8;

    /// Keeps `chunk`, emptied, unless enough are kept.
    pub(super) fn give(&self, mut chunk: Chunk) {
        chunk.rows.clear();
        chunk.out.clear();
        chunk.alerts.clear();
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < Self::KEPT {
            kept.push(chunk);
        }
    }

    /// A chunk kept, if there is one.
    pub(super) fn take(&self) -> Option<Chunk> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).pop()
    }
}

/// A `Write` into a buffer shared with whoever takes the bytes out: a
/// worker's writer formats into it, and the worker takes each row's lines.
#[derive(Clone, Default)]
pub(crate) struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl SharedBuf {
    /// The bytes written so far (the buffer keeps its capacity).
    pub(super) fn take(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.drain_into(&mut bytes);
        bytes
    }

    /// Moves the bytes written so far to the end of `to`.
    pub(super) fn drain_into(&self, to: &mut Vec<u8>) {
        let mut buf = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        to.extend_from_slice(&buf);
        buf.clear();
    }
}

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where the writer writes: standard output or a file (whose length a
/// checkpoint records), counting bytes.
pub(crate) struct Sink {
    out: io::BufWriter<Box<dyn Write + Send>>,
    file: Option<std::fs::File>,
    written: u64,
    /// A live sink (`--output redis://…`, `mqtt://…`), which takes each
    /// row's samples (`RowPiece::samples`) instead of lines.
    live: Option<Box<dyn OutputWriter>>,
}

impl Sink {
    /// A sink writing to `out` (an alerts stream of a live transport, say), whose length no
    /// checkpoint records.
    pub(crate) fn writer(out: Box<dyn Write + Send>) -> Sink {
        Sink {
            out: io::BufWriter::new(out),
            file: None,
            written: 0,
            live: None,
        }
    }

    /// A live sink (`redis://…`, `mqtt://…`), which takes each row's samples.
    pub(crate) fn live(live: Box<dyn OutputWriter>) -> Sink {
        Sink {
            live: Some(live),
            ..Sink::writer(Box::new(io::sink()))
        }
    }

    /// Writes the header of a keyed output in `output` (a CSV's column names), once, before
    /// any worker writes.
    pub(crate) fn header(
        &mut self,
        output: OutputFormat,
        names: Vec<String>,
        key: &str,
    ) -> io::Result<()> {
        let buf = SharedBuf::default();
        let mut w = trace::keyed_writer(output, names, key, Box::new(buf.clone()), false);
        w.flush()?;
        self.write(&buf.take())
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.written += bytes.len() as u64;
        self.out.write_all(bytes)
    }
    /// Flushes and, for a file, syncs it (a checkpoint's length must be on
    /// disk before the checkpoint is complete).
    /// Flushes what is buffered, a live sink's publications too.
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()?;
        match &mut self.live {
            Some(live) => live.flush(),
            None => Ok(()),
        }
    }

    fn sync(&mut self) -> io::Result<()> {
        self.flush()?;
        match &self.file {
            Some(f) => f.sync_data(),
            None => Ok(()),
        }
    }
}

/// Opens `path` (`None` or `-`: standard output) for writing: emptied, or
/// cut back to `resume_len` and appended to (`what` names it in messages).
pub(crate) fn open_sink(
    path: Option<&str>,
    resume_len: Option<u64>,
    what: &str,
) -> Result<Sink, String> {
    let Some(path) = path.filter(|p| *p != "-") else {
        return Ok(Sink {
            out: io::BufWriter::new(Box::new(io::stdout())),
            file: None,
            written: 0,
            live: None,
        });
    };
    let file = match resume_len {
        None => std::fs::File::create(path)
            .map_err(|e| format!("cannot create the {what} `{path}`: {e}"))?,
        Some(len) => crate::pipeline::checkpoint::reopen_output(path, len, what)?,
    };
    let sync = file
        .try_clone()
        .map_err(|e| format!("cannot open the {what} `{path}`: {e}"))?;
    Ok(Sink {
        out: io::BufWriter::new(Box::new(file)),
        file: Some(sync),
        written: resume_len.unwrap_or(0),
        live: None,
    })
}

/// The output and the alerts file (absent: nothing, or standard error).
/// Gone once writing failed: nothing more is written.
pub(crate) type Sinks = (Option<Sink>, Option<Sink>);

/// The writer's input: pieces, over either channel's puller `P`.
pub(super) type Pieces<'a, 'b, P> = (
    &'a mut InputHandleCore<u64, Vec<Piece>, P>,
    &'b MutableAntichain<u64>,
);

/// The output and the alerts as the writer holds them, shared with whoever must flush them
/// when the run is cut short (a silent peer: [`flush_sinks`]).
pub(crate) type SharedSinks = Arc<Mutex<Option<Sinks>>>;

/// Where readable alert lines go (a run whose alerts are not JSON lines): the caller shows
/// them, each a line ending with a newline.
pub(crate) type AlertText = Arc<dyn Fn(&str) + Send + Sync>;

/// Flushes what the writer has written so far, waiting up to `wait` for a worker that holds the
/// sinks: the lines written are whole rows in order. A worker holding them in a write that does
/// not return leaves them unwritten.
pub(crate) fn flush_sinks(sinks: &SharedSinks, wait: std::time::Duration) {
    let give_up = std::time::Instant::now() + wait;
    loop {
        match sinks.try_lock() {
            Ok(mut guard) => {
                if let Some((out, alerts)) = guard.as_mut() {
                    for s in [out, alerts].into_iter().flatten() {
                        let _ = s.flush();
                    }
                }
                return;
            }
            Err(_) if std::time::Instant::now() < give_up => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(_) => return,
        }
    }
}

/// The writer: rows whose time is complete, in order (time, position), to
/// the output and alerts; a checkpoint completed once every
/// worker's barrier is in and every line before it written.
pub(super) struct PieceWriter {
    plan: Arc<Plan>,
    sinks: Arc<Mutex<Option<Sinks>>>,
    outcome: Arc<Mutex<Outcome>>,
    /// Chunks received, each with its first row not yet written.
    chunks: Vec<(Chunk, usize)>,
    /// Barriers received and not yet taken, by time.
    barriers: Vec<(u64, u64)>,
    /// The barrier being counted: its time and the workers in so far.
    done: Option<(u64, usize)>,
    /// A rejected row stopped the run: nothing after it is written.
    stopped: bool,
}

/// Where a piece goes in the output's order: its time, its class (a sweep's
/// tick 0, a barrier 1, a row 2), its sweep, its position.
type Place = (u64, u8, u64, u64);

/// What the writer takes next: a barrier, or row `row` of chunk `chunk`.
#[derive(Clone, Copy)]
enum Next {
    Barrier { time: u64, digest: u64 },
    Row { chunk: usize, row: usize },
}

impl PieceWriter {
    /// The writer of `plan`'s run, to `sinks`, gathering what it counts in `outcome`.
    pub(super) fn new(
        plan: Arc<Plan>,
        sinks: Arc<Mutex<Option<Sinks>>>,
        outcome: Arc<Mutex<Outcome>>,
    ) -> PieceWriter {
        PieceWriter {
            plan,
            sinks,
            outcome,
            chunks: Vec::new(),
            barriers: Vec::new(),
            done: None,
            stopped: false,
        }
    }

    /// The sink operator's logic, over the pieces of either channel.
    pub(super) fn logic<P>(mut self) -> impl for<'a, 'b> FnMut(Pieces<'a, 'b, P>) + 'static
    where
        P: Pull<Message<u64, Vec<Piece>>>,
    {
        move |(input, frontier)| {
            input.for_each(|_, data| {
                for piece in data.drain(..) {
                    match piece {
                        Piece::Rows(c) => self.chunks.push((c, 0)),
                        Piece::Done { time, digest } => self.barriers.push((time, digest)),
                        Piece::End {
                            worker,
                            stats,
                            keys,
                        } => {
                            let mut o = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
                            o.ends.push((worker, *stats, keys));
                        }
                        Piece::ReaderEnd { time, read, stop } => self.reader_end(time, read, stop),
                    }
                }
            });
            let ready = self.ready(|t| !frontier.less_equal(&t));
            self.write(&ready, frontier.is_empty());
            // Chunks written to their end go back to the formatters.
            let spares = &self.plan.spares;
            self.chunks.retain_mut(|(c, next)| {
                let written = *next >= c.rows.len();
                if written {
                    spares.give(std::mem::take(c));
                }
                !written
            });
        }
    }

    /// A reader of another process ended: its counts join the run's, and a stop it made is
    /// the writer's too (no row at or after it is written, and of several the earliest is the
    /// run's error). It comes before the frontier passes its time, so before any row at or
    /// after it can be written.
    fn reader_end(
        &mut self,
        time: u64,
        read: crate::scale::ReadCounts,
        stop: Option<(String, bool)>,
    ) {
        let mut o = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
        *o.read.get_or_insert_default() += read;
        if let Some((message, input)) = stop {
            self.plan.stop_at.stop((time, time));
            let ended = if input { Ended::Trace } else { Ended::Failure };
            if o.trace.is_none() || o.trace_at > (time, time) {
                o.trace = Some((message, ended));
                o.trace_at = (time, time);
            }
        }
    }

    /// Everything whose time `done` says is complete, in the output's order:
    /// time, barriers first (their checkpoint records the output before the
    /// rows of their time), then position: the single-process run's order
    /// (the merge's stamp order, `seq` numbering the rows as process 0's
    /// source gives them).
    fn ready(&mut self, done: impl Fn(u64) -> bool) -> Vec<Next> {
        // Each with its place in the order, worked out once rather than at every comparison
        // of the sort (through its chunk's row).
        let mut ready: Vec<(Place, Next)> = Vec::new();
        for (chunk, (c, next)) in self.chunks.iter_mut().enumerate() {
            // A chunk's rows are in time order: its complete rows are a prefix.
            let start = *next;
            while *next < c.rows.len() && done(c.rows[*next].time) {
                *next += 1;
            }
            ready.reserve(*next - start);
            ready.extend((start..*next).map(|row| {
                // A sweep's ticks sort first (sweep by sweep, each key by key), a barrier next
                // (it records the output before the rows of its time), then the rows.
                let r = &c.rows[row];
                let class = if r.of == Of::Sweep { 0 } else { 2 };
                ((r.time, class, r.sweep, r.seq), Next::Row { chunk, row })
            }));
        }
        self.barriers.retain(|&(time, digest)| {
            let taken = done(time);
            if taken {
                ready.push(((time, 1, 0, 0), Next::Barrier { time, digest }));
            }
            !taken
        });
        // One worker's rows of distinct times (no `--time`) are in order
        // already; a sort is mostly a check. (Stable: the barriers of one time
        // keep the order they came in.)
        if !ready.is_sorted_by_key(|(place, _)| *place) {
            ready.sort_by_key(|(place, _)| *place);
        }
        ready.into_iter().map(|(_, next)| next).collect()
    }

    /// Writes what is complete (`ready`); `finished`: every piece has come.
    fn write(&mut self, ready: &[Next], finished: bool) {
        let sinks = Arc::clone(&self.sinks);
        let mut guard = sinks.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((out, alerts)) = guard.as_mut() else {
            return;
        };
        // The steps and ticks written, counted here and added to the run's once (a lock of
        // the outcome for every row cost the writer a few percent).
        let mut written = (0, 0);
        let result = self.write_to(
            ready,
            finished,
            [out.as_mut(), alerts.as_mut()],
            &mut written,
        );
        {
            let mut o = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
            o.steps += written.0;
            o.ticks += written.1;
        }
        if let Err(e) = result {
            if e.kind() != io::ErrorKind::BrokenPipe {
                let mut o = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
                o.failure
                    .get_or_insert((format!("cannot write output: {e}"), Ended::Failure));
            }
            // Nothing more is written (a closed pipe ends output quietly).
            *guard = None;
            self.plan
                .stop
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Writes `ready` to the output and the alerts (`sinks`), counting the steps and ticks
    /// written in `written`.
    fn write_to(
        &mut self,
        ready: &[Next],
        finished: bool,
        sinks: [Option<&mut Sink>; 2],
        written: &mut (u64, u64),
    ) -> io::Result<()> {
        let [mut out, mut alerts] = sinks;
        let stop_at = &self.plan.stop_at;
        for &next in ready {
            if let Next::Row { chunk, row } = next
                && let r = &self.chunks[chunk].0.rows[row]
                && stop_at.passed((r.time, r.seq))
            {
                // A reader of parts stopped the run there.
                self.stopped = true;
            }
            if self.stopped {
                break;
            }
            match next {
                Next::Row { chunk, row } => {
                    let c = &self.chunks[chunk].0;
                    let (bytes, alert_bytes) = c.bytes(row);
                    if c.rows[row].error.is_none() {
                        match c.rows[row].of {
                            Of::Row => written.0 += 1,
                            Of::Tick | Of::Sweep => written.1 += 1,
                        }
                    }
                    if let Some(out) = out.as_deref_mut() {
                        let piece = &c.rows[row];
                        match (&mut out.live, &piece.samples) {
                            (Some(live), Some((step, samples))) => {
                                let samples: Vec<Sample> =
                                    samples.iter().map(Sample::from).collect();
                                live.write_keyed(*step, &Key::new(piece.key.clone()), &samples)?;
                                if self.plan.streaming {
                                    live.flush()?;
                                }
                            }
                            _ => out.write(bytes)?,
                        }
                    }
                    if !alert_bytes.is_empty() {
                        // One line per firing, in either form.
                        let firings = alert_bytes.iter().filter(|&&b| b == b'\n').count();
                        let mut o = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
                        o.fired += firings as u64;
                        for (name, at) in &c.rows[row].fired {
                            TriggerTally::count(&mut o.triggers, name, at.clone());
                        }
                        drop(o);
                        match alerts.as_deref_mut() {
                            Some(a) => a.write(alert_bytes)?,
                            None => (self.plan.alert_text)(&String::from_utf8_lossy(alert_bytes)),
                        }
                    }
                    if let Some(fault) = &c.rows[row].error {
                        if let Some(out) = out.as_deref_mut() {
                            out.out.flush()?;
                        }
                        let mut o = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
                        match fault {
                            RowFault::Fatal(message) => {
                                o.failure.get_or_insert((message.clone(), Ended::Trace));
                                self.stopped = true;
                                self.plan
                                    .stop
                                    .store(true, std::sync::atomic::Ordering::Relaxed);
                            }
                            RowFault::KeyStopped { key, error } => {
                                o.runtime = true;
                                drop(o);
                                (self.plan.notify)(Notice::KeyStopped {
                                    input: self.plan.key.clone(),
                                    key: key.clone(),
                                    error: error.clone(),
                                });
                            }
                        }
                    }
                }
                Next::Barrier { time, digest } => {
                    let n = match self.done {
                        Some((t, n)) if t == time => n + 1,
                        _ => 1,
                    };
                    self.done = Some((time, n));
                    if n == self.plan.total_workers {
                        let sinks = [out.as_deref_mut(), alerts.as_deref_mut()];
                        complete(&self.plan, time, digest, sinks)?;
                    }
                }
            }
        }
        if self.plan.streaming || finished {
            for s in [out, alerts].into_iter().flatten() {
                s.flush()?;
            }
        }
        Ok(())
    }
}

/// Completes checkpoint `time`: the outputs before it on disk, their
/// lengths recorded, the checkpoint marked complete and older ones removed.
fn complete(plan: &Plan, time: u64, digest: u64, sinks: [Option<&mut Sink>; 2]) -> io::Result<()> {
    let Some(root) = &plan.checkpoint else {
        return Ok(());
    };
    let mut lens = [0u64; 2];
    let mut sink_entries = None;
    for (i, sink) in sinks.into_iter().enumerate() {
        if let Some(s) = sink {
            s.sync()?;
            lens[i] = s.written;
            if i == 0 {
                sink_entries = s.live.as_ref().and_then(|l| l.entries_written());
            }
        }
    }
    let at = {
        let mut at = plan
            .at_barriers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let this = (at.iter())
            .position(|a| a.time == time)
            .map(|i| at.remove(i));
        at.retain(|a| a.time > time);
        this
    };
    let record_len = at.as_ref().and_then(|a| a.log_len);
    let commit = barrier::Commit {
        output_len: lens[0],
        alerts_len: lens[1],
        input_digest: digest,
        record_len,
        sink_entries,
    };
    let dir = barrier::barrier_dir(root, time);
    let barrier = plan.barrier(time);
    // Where process 0's sources stood, as a single-process run's checkpoint
    // records them: a resume puts them back there.
    let inputs = at
        .and_then(|a| a.sources)
        .filter(|(at, _)| !plan.sources.is_empty() && at.len() == plan.sources.len())
        .map(|(at, feed)| barrier::Inputs {
            sources: &plan.sources,
            at,
            clock: crate::pipeline::checkpoint::Clock {
                options: plan.merge_options.clone(),
                feed,
                // The replay log's length is the commit record's own.
                record: None,
            },
        });
    barrier::write_commit(&dir, &plan.spec_path, plan.output, &barrier, commit, inputs)?;
    // Older barriers are superseded.
    barrier::remove(root, |t| t < time);
    Ok(())
}
