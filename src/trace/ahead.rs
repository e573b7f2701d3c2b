//! A read-ahead reader: a trace read and parsed on a thread of its own, so
//! that parsing the next rows overlaps evaluating (and writing) the ones
//! before them.
//!
//! Parsing is most of what `vigil run` spends on its own thread once the
//! outputs are written by another ([`super::WriteBehind`]): the `.input`
//! reader turns 25 MB of text into a million rows of the add scenario. With
//! this reader the parsing thread fills chunks of [`CHUNK_ROWS`] rows, and
//! the evaluating thread takes them, at most [`CHUNKS_AHEAD`] chunks behind,
//! so memory stays flat however long the trace is.
//!
//! Everything a caller can ask of a reader is recorded with each row as the
//! wrapped reader answered it at that point, so the read-ahead reader
//! answers exactly as the wrapped one would have: the row, the error (and
//! whether the reader can continue after it), the warnings found while
//! reading it, the time reset after it and the position after it (which a
//! checkpoint records). Reading stops at the end of the trace or at an error
//! the wrapped reader cannot continue after; a caller that stops early just
//! drops the reader, and the thread ends at its next hand-over.

use super::{AfterRow, RowReader, TraceError, TraceErrorKind, TracePosition};
use crate::value::Value;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// Rows per chunk handed over: enough to make a hand-over rare.
const CHUNK_ROWS: usize = 1024;

/// Chunks parsed and not yet taken, at most.
const CHUNKS_AHEAD: usize = 2;

/// What one call of the wrapped reader's `next_row` gave.
enum Outcome {
    Row,
    End,
    /// Boxed: entries are made for every row, errors hardly ever.
    Error(Box<TraceError>),
}

/// One call's outcome with what the reader said right after it.
struct Entry {
    outcome: Outcome,
    after: AfterRow,
}

/// Entries, with `width` cells per entry (those of an entry that is not a
/// row are unused). A chunk is reused: its first `len` entries are this
/// hand-over's, and the entries and cells beyond stay allocated, so that
/// the reading thread writes each row's entry in place rather than
/// building it on its stack and copying it in (the copy's wide loads over
/// the narrow stores just made stalled on every row).
#[derive(Default)]
struct Chunk {
    entries: Vec<Entry>,
    len: usize,
    cells: Vec<Option<Value>>,
}

/// A [`RowReader`] whose wrapped reader runs ahead on a thread of its own
/// (see the module documentation).
pub struct ReadAhead {
    width: usize,
    chunks: Receiver<Chunk>,
    spare: SyncSender<Chunk>,
    chunk: Chunk,
    /// The next entry of `chunk` to give.
    next: usize,
    /// What the reader said after the entry given last.
    can_continue: bool,
    reset: bool,
    position: Option<TracePosition>,
    warnings: Vec<String>,
    /// The trace ended, or an error ended reading: nothing more comes.
    done: bool,
    /// The name of the trace, for the error of a thread that stopped.
    file: String,
}

impl ReadAhead {
    /// Runs `reader` ahead on a thread of its own, for rows of `width`
    /// cells. If the thread cannot be started, `reader` is returned as it is.
    pub fn spawn(reader: Box<dyn RowReader>, width: usize, file: &str) -> Box<dyn RowReader> {
        let (give, chunks) = sync_channel::<Chunk>(CHUNKS_AHEAD);
        let (spare, spares) = sync_channel::<Chunk>(CHUNKS_AHEAD + 1);
        // The reader travels through a channel rather than the closure, so
        // that it is still ours if the thread cannot be started.
        let (hand, take) = sync_channel::<Box<dyn RowReader>>(1);
        let thread = std::thread::Builder::new()
            .name("vigil-reader".into())
            .spawn(move || {
                if let Ok(reader) = take.recv() {
                    read(reader, width, &give, &spares);
                }
            });
        match thread {
            Ok(_) => {
                // The thread holds the receiving end until it has the
                // reader; if the send failed anyway, the first `next_row`
                // reports the thread stopped.
                let _ = hand.send(reader);
                Box::new(ReadAhead {
                    width,
                    chunks,
                    spare,
                    chunk: Chunk::default(),
                    next: 0,
                    can_continue: false,
                    reset: false,
                    position: None,
                    warnings: Vec::new(),
                    done: false,
                    file: file.to_string(),
                })
            }
            Err(_) => reader,
        }
    }
}

/// The reading thread: fills chunks until the trace ends, an error ends
/// reading, or the consumer is gone.
fn read(
    mut reader: Box<dyn RowReader>,
    width: usize,
    give: &SyncSender<Chunk>,
    spares: &Receiver<Chunk>,
) {
    loop {
        let mut chunk = spares.try_recv().unwrap_or_default();
        // The consumer took every row's cells; an entry that was not a row
        // may have left some.
        for cell in &mut chunk.cells {
            *cell = None;
        }
        chunk.len = 0;
        let mut last = false;
        while chunk.len < CHUNK_ROWS && !last {
            let start = chunk.len * width;
            if chunk.cells.len() < start + width {
                chunk.cells.resize(start + width, None);
            }
            if chunk.entries.len() == chunk.len {
                chunk.entries.push(Entry {
                    outcome: Outcome::End,
                    after: AfterRow::default(),
                });
            }
            let result = reader.next_row(&mut chunk.cells[start..start + width]);
            let entry = &mut chunk.entries[chunk.len];
            chunk.len += 1;
            entry.outcome = match result {
                Ok(true) => Outcome::Row,
                Ok(false) => Outcome::End,
                Err(e) => Outcome::Error(Box::new(e)),
            };
            // (The consumer took the warnings of the entry's last use.)
            entry.after.warnings.clear();
            reader.after_row(&mut entry.after);
            last = match entry.outcome {
                Outcome::Row => false,
                Outcome::End => true,
                Outcome::Error(_) => !entry.after.can_continue,
            };
        }
        if give.send(chunk).is_err() || last {
            return;
        }
    }
}

impl RowReader for ReadAhead {
    fn next_row(&mut self, row: &mut [Option<Value>]) -> Result<bool, TraceError> {
        if self.done {
            return Ok(false);
        }
        if self.next == self.chunk.len {
            let used = std::mem::take(&mut self.chunk);
            // Returned for reuse; if the thread has ended, it is dropped.
            let _ = self.spare.try_send(used);
            match self.chunks.recv() {
                Ok(chunk) => self.chunk = chunk,
                Err(_) => {
                    // The thread ended without an end or a final error: it
                    // panicked, which `read` never does itself.
                    self.done = true;
                    return Err(TraceError {
                        file: self.file.clone(),
                        line: 1,
                        col: 1,
                        message: "the trace reader thread stopped".into(),
                        kind: TraceErrorKind::Io,
                    });
                }
            }
            self.next = 0;
        }
        let i = self.next;
        self.next += 1;
        let entry = &mut self.chunk.entries[i];
        self.can_continue = entry.after.can_continue;
        self.reset = entry.after.reset;
        self.position = entry.after.position;
        self.warnings.append(&mut entry.after.warnings);
        match std::mem::replace(&mut entry.outcome, Outcome::End) {
            Outcome::Row => {
                debug_assert_eq!(row.len(), self.width, "rows of the width read");
                let cells = &mut self.chunk.cells[i * self.width..(i + 1) * self.width];
                for (cell, value) in row.iter_mut().zip(cells) {
                    *cell = value.take();
                }
                Ok(true)
            }
            Outcome::End => {
                self.done = true;
                Ok(false)
            }
            Outcome::Error(e) => {
                self.done = !self.can_continue;
                Err(*e)
            }
        }
    }

    fn can_continue(&self) -> bool {
        self.can_continue
    }

    fn take_reset(&mut self) -> bool {
        std::mem::take(&mut self.reset)
    }

    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    fn position(&self) -> Option<TracePosition> {
        self.position
    }
}

#[cfg(test)]
mod tests {
    use super::super::{InputSchema, TraceFormat, reader_from_bytes};
    use super::*;
    use crate::lang::types::Type;

    /// Everything a caller sees of a reader, call by call, continuing after
    /// errors while the reader can, up to `calls` calls.
    fn transcript(mut r: Box<dyn RowReader>, width: usize, calls: usize) -> Vec<String> {
        let mut seen = Vec::new();
        let mut row = vec![None; width];
        for _ in 0..calls {
            let result = r.next_row(&mut row);
            let stop = match &result {
                Ok(false) => true,
                Err(_) => !r.can_continue(),
                Ok(true) => false,
            };
            // A row's cells mean something after a row only.
            let cells = match result {
                Ok(true) => format!("{row:?}"),
                _ => String::new(),
            };
            seen.push(format!(
                "{:?} {cells} cont={} reset={} at={:?} warn={:?}",
                result.as_ref().map(|_| ()),
                r.can_continue(),
                r.take_reset(),
                r.position(),
                r.take_warnings()
            ));
            if stop {
                break;
            }
        }
        seen
    }

    fn same_as_direct(text: &str, format: TraceFormat, types: &[Type]) {
        let names = ["x", "y", "s"];
        let schema = InputSchema {
            names: names[..types.len()].iter().map(|n| n.to_string()).collect(),
            types: types.to_vec(),
        };
        let open = || {
            reader_from_bytes("t", text.as_bytes().to_vec(), format, &schema)
                .expect("readers over bytes open")
        };
        let width = types.len();
        let direct = transcript(open(), width, 10_000);
        let ahead = transcript(ReadAhead::spawn(open(), width, "t"), width, 10_000);
        assert!(direct.len() > 3, "the trace is read: {direct:?}");
        assert_eq!(ahead, direct, "{format:?}");
    }

    /// A read-ahead reader answers every call as the reader it wraps: rows
    /// past several chunks, errors it continues after (CSV and JSON lines
    /// drop a malformed row), warnings, positions, the end.
    #[test]
    fn answers_as_the_wrapped_reader() {
        let mut csv = String::from("x,y,t\n");
        let mut jsonl = String::new();
        for i in 0..3000 {
            if i % 997 == 5 {
                csv.push_str("oops,1\n");
                jsonl.push_str("{\"x\": \"oops\"}\n");
            }
            // A row malformed after a good cell, in a chunk reused after
            // the ones before it.
            if i % 1301 == 7 {
                csv.push_str("7,oops,\n");
                jsonl.push_str("{\"x\": 7, \"y\": \"oops\"}\n");
            }
            csv.push_str(&format!("{i},{},\n", i * 3));
            jsonl.push_str(&format!("{{\"x\": {i}, \"s\": \"v{i}\"}}\n"));
        }
        // `s` is missing from the header: a warning.
        same_as_direct(&csv, TraceFormat::Csv, &[Type::Int, Type::Int, Type::Str]);
        same_as_direct(
            &jsonl,
            TraceFormat::Jsonl,
            &[Type::Int, Type::Int, Type::Str],
        );
    }

    /// An `.input` trace with a time reset, ending on an error after which
    /// the reader cannot go on: every row before it, then the error, then
    /// nothing.
    #[test]
    fn stops_where_the_wrapped_reader_cannot_go_on() {
        let mut tc = String::new();
        for i in 0..2500 {
            tc.push_str(&format!("{i}: x = {i}\n   y = 1\n"));
        }
        tc.push_str("// vigil: time reset\n0: x = 1\n1: x = nope\n2: x = 3\n");
        same_as_direct(&tc, TraceFormat::Tc, &[Type::Int, Type::Int]);
    }
}
