//! A scaled run's stream input — standard input or a FIFO, JSON lines or CSV, without a time
//! field — read in parallel by process 0's workers.
//!
//! A splitter thread reads the stream and cuts it into chunks at row boundaries
//! (`trace::RowCutter`, which follows the CSV reader's quoting): a chunk is cut once it holds
//! `CHUNK_BYTES`, or as soon as the stream has no more bytes ready, so that a slow stream's rows
//! are not held back waiting for a full chunk. Chunk `k` goes to worker `k % threads`, which
//! parses it apart (`parts::PartReader`) and stamps its `i`-th row `k << 32 | i`, as a regular
//! file's parts are stamped: the order of times is the stream's order, and the writer's output
//! is the single-process run's. Each chunk carries its place in the stream (offset and lines
//! before it), so diagnostics name the real line, and the first chunk, whose CSV header every
//! later chunk reads.
//!
//! A worker keeps at most `CHUNKS_AHEAD` chunks waiting: the splitter waits for the slowest
//! worker, so memory stays bounded by `threads × CHUNKS_AHEAD × CHUNK_BYTES` (plus a row longer
//! than a chunk, which a single-process reader holds whole as well).

use crate::trace::{
    self, InputSchema, ReaderOptions, RowCutter, RowReader, TraceFormat, TracePosition,
};
use std::fs::File;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// A chunk is cut once it holds this many bytes (at the next row boundary after it).
const CHUNK_BYTES: usize = 256 << 10;
/// The bytes asked of the stream per read.
const READ_BYTES: usize = 64 << 10;
/// Chunks a worker may have waiting.
const CHUNKS_AHEAD: usize = 4;

/// What the splitter sends a worker.
enum Piece {
    /// Chunk `index`, starting at `at` in the stream; `head` is the first chunk.
    Chunk {
        index: u64,
        at: TracePosition,
        bytes: Arc<[u8]>,
        head: Arc<[u8]>,
    },
    /// The stream failed where chunk `index` would have begun.
    Failed { index: u64, message: String },
}

/// A stream input that can be read in chunks: opened, not yet read.
pub(crate) struct Stream {
    name: String,
    format: TraceFormat,
    file: File,
    cutter: RowCutter,
}

/// Opens `path` (`-` for standard input) when it is a stream (not a regular file) of a format
/// that can be cut between rows; `Ok(None)` otherwise (the feed reads it).
pub(crate) fn open(path: &str, format: TraceFormat) -> Result<Option<Stream>, String> {
    let Some(cutter) = RowCutter::new(format) else {
        return Ok(None);
    };
    let file = trace::open_file(path).map_err(|e| e.to_string())?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{path}: cannot read the trace's metadata: {e}"))?;
    if meta.is_file() || meta.is_dir() {
        return Ok(None);
    }
    let name = crate::trace::display_name(path);
    Ok(Some(Stream {
        name: name.to_string(),
        format,
        file,
        cutter,
    }))
}

impl Stream {
    /// Starts the splitter: each of `threads` workers' chunks, in order; `cut` counts the
    /// chunks cut.
    pub(crate) fn split(self, threads: usize, cut: Arc<AtomicU64>) -> Result<Vec<Chunks>, String> {
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..threads).map(|_| sync_channel(CHUNKS_AHEAD)).unzip();
        let Stream {
            name,
            format,
            file,
            cutter,
        } = self;
        let label = name.clone();
        std::thread::Builder::new()
            .name("vigil-splitter".into())
            .spawn(move || Splitter::new(senders, cut).run(file, cutter, &label))
            .map_err(|e| format!("cannot start the reader of `{name}`: {e}"))?;
        Ok(receivers
            .into_iter()
            .enumerate()
            .map(|(w, rx)| Chunks {
                name: name.clone(),
                format,
                rx,
                worker: w as u64,
                threads: threads as u64,
                received: 0,
                ended: false,
            })
            .collect())
    }
}

/// A worker's chunks of a stream: `worker`, `worker + threads`, …
pub(crate) struct Chunks {
    name: String,
    format: TraceFormat,
    rx: Receiver<Piece>,
    worker: u64,
    threads: u64,
    received: u64,
    ended: bool,
}

impl Chunks {
    /// The stream's name in messages.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The index of the worker's next chunk, unless the stream has ended.
    pub(crate) fn next_index(&self) -> Option<u64> {
        (!self.ended).then_some(self.worker + self.received * self.threads)
    }

    /// Waits for the worker's next chunk and opens a reader of it: `None` at the stream's end,
    /// an error where the stream failed.
    pub(crate) fn open(
        &mut self,
        schema: &InputSchema,
        options: ReaderOptions,
    ) -> Option<Result<Box<dyn RowReader>, String>> {
        let expected = self.next_index()?;
        match self.rx.recv() {
            Ok(Piece::Chunk {
                index,
                at,
                bytes,
                head,
            }) => {
                assert_eq!(index, expected, "the splitter deals chunks in turn");
                self.received += 1;
                let f = self.format;
                Some(Ok(trace::open_trace_chunk(
                    &self.name, bytes, head, f, schema, options, at,
                )))
            }
            Ok(Piece::Failed { index, message }) => {
                assert_eq!(index, expected, "the splitter deals chunks in turn");
                self.ended = true;
                Some(Err(message))
            }
            Err(_) => {
                self.ended = true;
                None
            }
        }
    }
}

/// The splitter's state: where the next chunk starts and whose it is.
struct Splitter {
    senders: Vec<SyncSender<Piece>>,
    cut: Arc<AtomicU64>,
    index: u64,
    at: TracePosition,
    head: Option<Arc<[u8]>>,
}

impl Splitter {
    fn new(senders: Vec<SyncSender<Piece>>, cut: Arc<AtomicU64>) -> Splitter {
        Splitter {
            senders,
            cut,
            index: 0,
            at: TracePosition { offset: 0, line: 0 },
            head: None,
        }
    }

    /// Sends `piece` to the worker whose turn it is; `false` when that worker has stopped
    /// reading (the run stopped at or before this chunk: nothing later is read).
    fn send(&mut self, piece: Piece) -> bool {
        let worker = (self.index % self.senders.len() as u64) as usize;
        self.index += 1;
        self.senders[worker].send(piece).is_ok()
    }

    /// Sends `bytes` as the next chunk.
    fn chunk(&mut self, bytes: Vec<u8>) -> bool {
        let bytes: Arc<[u8]> = bytes.into();
        let head = Arc::clone(self.head.get_or_insert_with(|| Arc::clone(&bytes)));
        let at = self.at;
        self.at.offset += bytes.len() as u64;
        self.at.line += memchr::memchr_iter(b'\n', &bytes).count() as u64;
        let index = self.index;
        self.cut.fetch_add(1, Ordering::Relaxed);
        self.send(Piece::Chunk {
            index,
            at,
            bytes,
            head,
        })
    }

    /// Sends the rows of `buf` before `boundary` as the next chunk, keeping the rest; `false`
    /// as [`Splitter::send`] says.
    fn cut(&mut self, buf: &mut Vec<u8>, boundary: usize) -> bool {
        let rest = buf.split_off(boundary);
        self.chunk(std::mem::replace(buf, rest))
    }

    /// Reads `file` to its end, dealing its chunks out.
    fn run(mut self, mut file: File, mut cutter: RowCutter, name: &str) {
        let mut buf: Vec<u8> = Vec::with_capacity(CHUNK_BYTES + READ_BYTES);
        // The end of the last row boundary found in `buf`.
        let mut boundary = None;
        loop {
            let old = buf.len();
            buf.resize(old + READ_BYTES, 0);
            let read = file.read(&mut buf[old..]);
            buf.truncate(old + *read.as_ref().unwrap_or(&0));
            match read {
                // The last row may lack its line end; the reader reads it as a single-process
                // reader does.
                Ok(0) => {
                    if !buf.is_empty() {
                        self.chunk(buf);
                    }
                    return;
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // The rows complete before the failure are read, as one reader reads
                    // them; the failure comes where the next row would have.
                    if let Some(b) = boundary
                        && !self.cut(&mut buf, b)
                    {
                        return;
                    }
                    let line = self.at.line + memchr::memchr_iter(b'\n', &buf).count() as u64;
                    let message = format!("{name}:{}: cannot read the trace: {e}", line + 1);
                    let index = self.index;
                    self.send(Piece::Failed { index, message });
                    return;
                }
            }
            if let Some(b) = cutter.scan(&buf[old..]) {
                boundary = Some(old + b);
            }
            if let Some(b) = boundary
                && (buf.len() >= CHUNK_BYTES || !ready(&file))
            {
                boundary = None;
                if !self.cut(&mut buf, b) {
                    return;
                }
            }
        }
    }
}

/// Whether `file` has bytes to read now (or its end): a slow stream's rows are cut into a
/// chunk as soon as they are complete rather than waiting for a full chunk.
fn ready(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `poll` is one initialised `pollfd` that lives across the call, the count says
    // one, and the descriptor is open for as long as `file` is borrowed; a zero timeout does
    // not block.
    let n = unsafe { libc::poll(&mut poll, 1, 0) };
    n > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::types::Type;

    /// Every row of a stream in chunks, read by `threads` workers' chunk readers in turn, is
    /// the row one reader gives, with its line: here over a pipe the test writes slowly and in
    /// bursts, so chunks are cut both full and short.
    #[test]
    fn chunks_read_in_turn_give_every_row_of_the_stream() {
        let mut text = String::from("host,temp\n");
        for i in 0..60_000 {
            text.push_str(&format!("\"h{}\",{}.5\n", i % 7, i));
        }
        let (reader, mut writer) = std::io::pipe().expect("a pipe");
        let bytes = text.clone().into_bytes();
        let feeder = std::thread::spawn(move || {
            use std::io::Write;
            for (k, piece) in bytes.chunks(100_000).enumerate() {
                writer.write_all(piece).expect("the pipe takes the bytes");
                if k % 3 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        });
        let fd: std::os::fd::OwnedFd = reader.into();
        let stream = Stream {
            name: "pipe".into(),
            format: TraceFormat::Csv,
            file: File::from(fd),
            cutter: RowCutter::new(TraceFormat::Csv).expect("csv cuts"),
        };
        let threads = 3;
        let mut chunks = stream
            .split(threads, Arc::default())
            .expect("the splitter starts");
        let schema = InputSchema {
            names: vec!["host".into(), "temp".into()],
            types: vec![Type::Str, Type::Float],
        };
        let options = ReaderOptions::default();
        let mut rows = Vec::new();
        let mut opened = 0;
        'turns: loop {
            for c in &mut chunks {
                let Some(reader) = c.open(&schema, options) else {
                    break 'turns;
                };
                let mut reader = reader.expect("the pipe does not fail");
                opened += 1;
                let mut cells = vec![None; 2];
                while reader.next_row(&mut cells).expect("a well-formed row") {
                    rows.push(format!("{:?}", cells));
                }
            }
        }
        feeder.join().expect("the feeder ends");
        assert!(
            opened > threads,
            "the stream was cut into {opened} chunks only"
        );
        let mut one = trace::make_reader(
            "pipe",
            Box::new(std::io::Cursor::new(text.into_bytes())),
            TraceFormat::Csv,
            &schema,
            options,
        );
        let mut want = Vec::new();
        let mut cells = vec![None; 2];
        while one.next_row(&mut cells).expect("a well-formed row") {
            want.push(format!("{:?}", cells));
        }
        assert_eq!(rows.len(), 60_000);
        assert!(rows == want, "the chunks' rows differ from one reader's");
    }
}
