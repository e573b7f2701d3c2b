//! Byte sources for the trace readers: memory-mapped files, in-memory
//! buffers and streams, plus a line splitter that tracks line numbers.
//!
//! Every source is exposed as a `BufRead`, so the readers have a single code
//! path. What a source is depends on the file's type (`fstat`), never on its
//! name: a regular file (named, or standard input redirected from one) is
//! memory-mapped and read through [`GuardedMap`], which survives the file
//! being truncated under it; anything else — a pipe, a FIFO, `/dev/stdin`, a
//! process substitution, a terminal, a socket — is a stream, read one line
//! at a time with `read_until`, which never waits for more bytes than the end
//! of the current line, so a reader can sit at the end of an endless pipe.

use super::guard::{GuardedMap, Truncated};
use super::{OpenError, TraceError, TraceErrorKind};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Seek};

/// An opened trace: its bytes, and whether it is a stream (not a regular
/// file), whose rows must be evaluated and written one at a time.
pub(crate) struct Opened {
    pub(crate) bytes: Box<dyn BufRead + Send>,
    pub(crate) streaming: bool,
    /// For a regular file: a second handle on it and the offset the trace
    /// starts at (standard input may have been read partly), so a checkpoint
    /// can read back the bytes around a position.
    pub(crate) origin: Option<(File, u64)>,
}

/// Opens `path`, or for `-` a duplicate of descriptor 0, so that standard
/// input is classified and read exactly like a named file.
pub(crate) fn open_file(path: &str) -> Result<File, OpenError> {
    let fail = |message: String| OpenError {
        file: path.to_string(),
        message,
    };
    if path == "-" {
        use std::os::fd::AsFd;
        let fd = io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| fail(format!("cannot read standard input: {e}")))?;
        Ok(File::from(fd))
    } else {
        File::open(path).map_err(|e| fail(format!("cannot open the trace: {e}")))
    }
}

/// Opens `path` (`-` is standard input) and decides by the file's type how
/// to read it: a regular file is mapped (see the module doc), anything else
/// is a stream. A directory is an error. A regular file is read from `at`
/// bytes past the trace's start (0, or a position to resume a checkpointed
/// run at); a stream is read from where it stands, whatever `at` is.
pub(crate) fn open_source_at(path: &str, at: u64) -> Result<Opened, OpenError> {
    let fail = |message: String| OpenError {
        file: path.to_string(),
        message,
    };
    let file = open_file(path)?;
    let meta = file
        .metadata()
        .map_err(|e| fail(format!("cannot read the trace's metadata: {e}")))?;
    if meta.is_dir() {
        return Err(fail("cannot read the trace: it is a directory".to_string()));
    }
    if !meta.is_file() {
        return Ok(Opened {
            bytes: Box::new(BufReader::new(file)),
            streaming: true,
            origin: None,
        });
    }
    // Standard input redirected from a file may have been read partly by an
    // earlier command; reading resumes where it stands.
    let mut file = file;
    let origin = if path == "-" {
        file.stream_position().unwrap_or(0)
    } else {
        0
    };
    let second = file
        .try_clone()
        .map_err(|e| fail(format!("cannot open the trace: {e}")))?;
    let start = origin.saturating_add(at);
    // Mapping a zero-length file fails on Linux (EINVAL), and an empty trace
    // needs no mapping anyway.
    if meta.len() <= start {
        return Ok(Opened {
            bytes: Box::new(Cursor::new(Vec::new())),
            streaming: false,
            origin: Some((second, origin)),
        });
    }
    let bytes: Box<dyn BufRead + Send> = match GuardedMap::open(file, start) {
        Ok(Ok(map)) => Box::new(map),
        // No guard available: an ordinary buffered read, which a truncation
        // cannot crash.
        Ok(Err(mut file)) => {
            file.seek(io::SeekFrom::Start(start))
                .map_err(|e| fail(format!("cannot read the trace: {e}")))?;
            Box::new(BufReader::with_capacity(64 * 1024, file))
        }
        Err(e) => return Err(fail(format!("cannot map the trace into memory: {e}"))),
    };
    Ok(Opened {
        bytes,
        streaming: false,
        origin: Some((second, origin)),
    })
}

/// An in-memory byte source, for tests and embedders that already hold a trace.
pub(crate) fn bytes_source(bytes: Vec<u8>) -> Box<dyn BufRead + Send> {
    Box::new(Cursor::new(bytes))
}

/// The trace error for a failed read at `line:col`: a truncated file is a
/// malformed trace (it ends in the middle); any other failure is an I/O error.
pub(crate) fn read_error(file: &str, line: usize, col: usize, e: &io::Error) -> TraceError {
    let truncated = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<Truncated>());
    let (kind, message) = match truncated {
        Some(t) => (TraceErrorKind::Malformed, t.to_string()),
        None => (TraceErrorKind::Io, format!("cannot read the trace: {e}")),
    };
    TraceError {
        file: file.to_string(),
        line,
        col,
        message,
        kind,
    }
}

/// Splits a byte source into lines, counting them from 1. Line terminators
/// (`\n` or `\r\n`) are removed, and a UTF-8 byte-order mark at the start of
/// the first line is dropped.
pub(crate) struct Lines {
    file: String,
    reader: Box<dyn BufRead + Send>,
    buf: Vec<u8>,
    /// Where the line's text starts in `buf` (after a byte-order mark) and
    /// ends (before its terminator).
    start: usize,
    end: usize,
    line: usize,
    /// The byte offset, from the trace's start, of the current line and of
    /// the end of the bytes read (where the next line starts).
    line_offset: u64,
    offset: u64,
    /// Where the current line lies: in `buf` (a copy), or still in the
    /// reader's own buffer, where it takes up the first `Borrowed` bytes
    /// (consumed when the next line is read).
    held: Held,
}

/// Where `Lines` keeps the current line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Held {
    Copied,
    Borrowed(usize),
}

impl Lines {
    pub(crate) fn new(file: &str, reader: Box<dyn BufRead + Send>) -> Lines {
        Lines::resumed(file, reader, 0, 0)
    }

    /// Lines of a source that starts `offset` bytes into the trace, after
    /// `line` lines: numbers and offsets go on from there.
    pub(crate) fn resumed(
        file: &str,
        reader: Box<dyn BufRead + Send>,
        offset: u64,
        line: usize,
    ) -> Lines {
        Lines {
            file: file.to_string(),
            reader,
            buf: Vec::new(),
            start: 0,
            end: 0,
            line,
            line_offset: offset,
            offset,
            held: Held::Copied,
        }
    }

    /// Where the next line starts (bytes from the trace's start) and how
    /// many lines come before it.
    pub(crate) fn position(&self) -> super::TracePosition {
        super::TracePosition {
            offset: self.offset,
            line: self.line as u64,
        }
    }

    /// Reads the next line; `false` at the end of the source. A read error is
    /// located where the line stopped.
    #[inline]
    fn advance(&mut self) -> Result<bool, TraceError> {
        if let Held::Borrowed(len) = self.held {
            self.reader.consume(len);
            self.held = Held::Copied;
        }
        // A whole line in the reader's buffer (nearly every line of a
        // mapped or buffered file) is used where it is, without copying.
        match self.reader.fill_buf() {
            Ok(avail) => {
                // The end of the source: asking again would read again
                // (a terminal would wait for more).
                if avail.is_empty() {
                    return Ok(false);
                }
                if let Some(i) = memchr::memchr(b'\n', avail) {
                    let len = i + 1;
                    (self.start, self.end) = text_of(&avail[..len], self.line == 0);
                    self.count(len);
                    self.held = Held::Borrowed(len);
                    return Ok(true);
                }
            }
            // Retried by `read_until` below.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(read_error(&self.file, self.line + 1, 1, &e)),
        }
        self.buf.clear();
        if let Err(e) = self.reader.read_until(b'\n', &mut self.buf) {
            // The bytes read before the error are in `buf`: the column is
            // just after them.
            let col = String::from_utf8_lossy(&self.buf).chars().count() + 1;
            return Err(read_error(&self.file, self.line + 1, col, &e));
        }
        if self.buf.is_empty() {
            return Ok(false);
        }
        (self.start, self.end) = text_of(&self.buf, self.line == 0);
        self.count(self.buf.len());
        Ok(true)
    }

    /// Counts a line of `len` bytes (terminator included) as read.
    #[inline]
    fn count(&mut self, len: usize) {
        self.line_offset = self.offset;
        self.offset += len as u64;
        self.line += 1;
    }

    /// The current line, with its terminator.
    #[inline]
    fn current(&mut self) -> Result<&[u8], TraceError> {
        match self.held {
            Held::Copied => Ok(&self.buf),
            // The reader hands back the same bytes: nothing was consumed.
            Held::Borrowed(len) => match self.reader.fill_buf() {
                Ok(avail) if avail.len() >= len => Ok(&avail[..len]),
                Ok(_) => Err(read_error(
                    &self.file,
                    self.line,
                    1,
                    &std::io::Error::other("the reader lost a buffered line"),
                )),
                Err(e) => Err(read_error(&self.file, self.line, 1, &e)),
            },
        }
    }

    /// Returns the next line as bytes (without its terminator), its
    /// terminator, and its 1-based number; `None` at the end of the source.
    #[inline(always)]
    pub(crate) fn next_raw(&mut self) -> Result<Option<RawLine<'_>>, TraceError> {
        if !self.advance()? {
            return Ok(None);
        }
        let (offset, number, start, end) = (self.line_offset, self.line, self.start, self.end);
        let line = self.current()?;
        Ok(Some(RawLine {
            offset,
            number,
            text: &line[start..end],
            terminator: &line[end..],
        }))
    }

    /// Returns the next line and its 1-based number, or `None` at the end of
    /// the source. A line that is not UTF-8 is an error located at its first
    /// invalid byte.
    // The readers take raw lines (to tell a failed read from a bad line);
    // the tests of this module read whole lines.
    #[cfg(test)]
    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &str)>, TraceError> {
        if !self.advance()? {
            return Ok(None);
        }
        let (number, start, end) = (self.line, self.start, self.end);
        let file = self.file.clone();
        let line = self.current()?;
        let text = utf8_line(&file, number, &line[start..end])?;
        Ok(Some((number, text)))
    }
}

/// `text` (line `line` of `file`) as a `str`, or an error located at its
/// first invalid byte.
pub(crate) fn utf8_line<'a>(
    file: &str,
    line: usize,
    text: &'a [u8],
) -> Result<&'a str, TraceError> {
    std::str::from_utf8(text).map_err(|e| TraceError {
        file: file.to_string(),
        line,
        col: byte_col(text, e.valid_up_to()),
        message: "the line is not valid UTF-8".to_string(),
        kind: TraceErrorKind::Malformed,
    })
}

/// One line of a source, as bytes.
pub(crate) struct RawLine<'a> {
    /// Where the line starts, in bytes from the trace's start.
    pub(crate) offset: u64,
    pub(crate) number: usize,
    pub(crate) text: &'a [u8],
    /// `\n`, `\r\n`, or empty for a last line without one.
    pub(crate) terminator: &'a [u8],
}

/// Where the text of `line` (a non-empty line with its terminator) starts
/// and ends: before its `\n` or `\r\n`, and, in the `first` line of a
/// source, after a UTF-8 byte-order mark (editors on Windows may start a
/// file with one; it is not part of the text).
fn text_of(line: &[u8], first: bool) -> (usize, usize) {
    let mut end = line.len();
    if line[end - 1] == b'\n' {
        end -= 1;
        if end > 0 && line[end - 1] == b'\r' {
            end -= 1;
        }
    }
    let start = if first && line[..end].starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    (start, end)
}

/// The 1-based column, counted in characters, of byte offset `byte` in `line`.
pub(crate) fn char_col(line: &str, byte: usize) -> usize {
    let byte = byte.min(line.len());
    // Offsets come from our own scanning and always fall on char boundaries;
    // `get` keeps a wrong offset from panicking all the same.
    line.get(..byte).map_or(byte, |p| p.chars().count()) + 1
}

/// The 1-based column, counted in characters, of byte offset `byte` in a line
/// that may not be UTF-8 (an invalid sequence counts as one column).
pub(crate) fn byte_col(line: &[u8], byte: usize) -> usize {
    let byte = byte.min(line.len());
    String::from_utf8_lossy(&line[..byte]).chars().count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines_of(bytes: &[u8]) -> Vec<Result<String, TraceError>> {
        let mut lines = Lines::new("t", bytes_source(bytes.to_vec()));
        let mut out = Vec::new();
        loop {
            match lines.next_line() {
                Ok(Some((_, l))) => out.push(Ok(l.to_string())),
                Ok(None) => break,
                Err(e) => {
                    out.push(Err(e));
                    break;
                }
            }
        }
        out
    }

    #[test]
    fn splits_lines_and_strips_terminators() {
        let got = lines_of(b"a\r\nb\n\nc");
        let got: Vec<_> = got.into_iter().map(|l| l.unwrap()).collect();
        assert_eq!(got, ["a", "b", "", "c"]);
    }

    #[test]
    fn a_byte_order_mark_is_dropped_from_the_first_line_only() {
        let got = lines_of(b"\xEF\xBB\xBFa\n\xEF\xBB\xBFb\n");
        assert_eq!(got[0], Ok("a".to_string()));
        assert_eq!(got[1], Ok("\u{feff}b".to_string()));
    }

    #[test]
    fn invalid_utf8_is_located() {
        let got = lines_of(b"ok\nab\xffc\n");
        assert_eq!(got[0], Ok("ok".to_string()));
        let e = got[1].clone().unwrap_err();
        assert_eq!((e.line, e.col), (2, 3));
    }

    #[test]
    fn empty_and_nonempty_files_open() {
        let dir = std::env::temp_dir();
        let empty = dir.join(format!("vigil-trace-empty-{}", std::process::id()));
        std::fs::File::create(&empty).unwrap();
        let opened = open_source_at(empty.to_str().unwrap(), 0).unwrap();
        assert!(!opened.streaming);
        let mut lines = Lines::new("e", opened.bytes);
        assert_eq!(lines.next_line().unwrap(), None);
        std::fs::remove_file(&empty).unwrap();

        let full = dir.join(format!("vigil-trace-full-{}", std::process::id()));
        std::fs::File::create(&full)
            .unwrap()
            .write_all(b"x\ny\n")
            .unwrap();
        let opened = open_source_at(full.to_str().unwrap(), 0).unwrap();
        assert!(!opened.streaming);
        let mut lines = Lines::new("f", opened.bytes);
        assert_eq!(lines.next_line().unwrap(), Some((1, "x")));
        assert_eq!(lines.next_line().unwrap(), Some((2, "y")));
        assert_eq!(lines.next_line().unwrap(), None);
        std::fs::remove_file(&full).unwrap();
    }

    #[test]
    fn missing_file_is_an_error() {
        let e = open_source_at("/nonexistent/vigil/trace.csv", 0)
            .err()
            .unwrap();
        assert_eq!(e.file, "/nonexistent/vigil/trace.csv");
        assert!(
            e.message.starts_with("cannot open the trace"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_directory_is_an_error() {
        let dir = std::env::temp_dir();
        let e = open_source_at(dir.to_str().unwrap(), 0).err().unwrap();
        assert_eq!(e.message, "cannot read the trace: it is a directory");
    }

    #[test]
    fn a_fifo_is_a_stream() {
        let path = std::env::temp_dir().join(format!("vigil-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        // Opening a FIFO for reading blocks until a writer opens it.
        let writer_path = path.clone();
        let writer = std::thread::spawn(move || {
            let mut w = std::fs::OpenOptions::new()
                .write(true)
                .open(&writer_path)
                .unwrap();
            w.write_all(b"a\nb\n").unwrap();
        });
        let opened = open_source_at(path.to_str().unwrap(), 0).unwrap();
        assert!(opened.streaming);
        writer.join().unwrap();
        let mut lines = Lines::new("p", opened.bytes);
        assert_eq!(lines.next_line().unwrap(), Some((1, "a")));
        assert_eq!(lines.next_line().unwrap(), Some((2, "b")));
        assert_eq!(lines.next_line().unwrap(), None);
        std::fs::remove_file(&path).unwrap();
    }

    /// A file of `n` numbered lines, `line 000000\n` (12 bytes each).
    fn numbered_file(name: &str, n: usize) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("vigil-{name}-{}", std::process::id()));
        let mut text = Vec::with_capacity(n * 12);
        for i in 0..n {
            writeln!(text, "line {i:06}").unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Reads lines until the end or an error; returns how many were read
    /// and the error.
    fn read_all(lines: &mut Lines) -> (usize, Option<TraceError>) {
        let mut n = 0;
        loop {
            match lines.next_line() {
                Ok(Some((no, text))) => {
                    assert_eq!(text, format!("line {:06}", no - 1));
                    n += 1;
                }
                Ok(None) => return (n, None),
                Err(e) => return (n, Some(e)),
            }
        }
    }

    /// The file shrinks under the mapping, far below the part still to be
    /// read: the next copy touches pages past the end of the file, which
    /// raises SIGBUS — without the guard, this test process dies.
    #[test]
    fn a_file_truncated_while_mapped_is_an_error_not_a_crash() {
        let path = numbered_file("trunc-far", 100_000);
        let opened = open_source_at(path.to_str().unwrap(), 0).unwrap();
        let mut lines = Lines::new("t", opened.bytes);
        assert_eq!(lines.next_line().unwrap(), Some((1, "line 000000")));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(100)
            .unwrap();
        let (n, e) = read_all(&mut lines);
        let e = e.expect("the truncation is reported");
        // Every line of the first 64 KiB chunk was read before the
        // truncation; the error names the line the chunk boundary cuts.
        assert_eq!(n + 1, 65536 / 12);
        assert_eq!(e.kind, TraceErrorKind::Malformed);
        assert_eq!(
            e.to_string(),
            format!(
                "t:{}:5: the trace file was truncated while it was read (it had 1200000 bytes when opened, 100 now)",
                65536 / 12 + 1
            )
        );
        // The reader stays failed.
        assert!(lines.next_line().is_err());
        drop(lines);
        std::fs::remove_file(&path).unwrap();
    }

    /// A truncation that ends in the last mapped page raises no signal (the
    /// kernel shows zeros past the end): the length check catches it.
    #[test]
    fn a_truncation_within_the_last_page_is_caught_by_the_length_check() {
        let path = numbered_file("trunc-near", 10_000);
        let opened = open_source_at(path.to_str().unwrap(), 0).unwrap();
        let mut lines = Lines::new("t", opened.bytes);
        assert!(lines.next_line().unwrap().is_some());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(119_990)
            .unwrap();
        let (n, e) = read_all(&mut lines);
        let e = e.expect("the truncation is reported");
        assert_eq!(n + 1, 65536 / 12);
        assert!(
            e.message
                .contains("(it had 120000 bytes when opened, 119990 now)"),
            "{e}"
        );
        drop(lines);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn an_untouched_file_reads_to_the_end() {
        let path = numbered_file("whole", 20_000);
        let opened = open_source_at(path.to_str().unwrap(), 0).unwrap();
        let mut lines = Lines::new("t", opened.bytes);
        assert_eq!(read_all(&mut lines), (20_000, None));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn char_columns() {
        assert_eq!(char_col("abc", 0), 1);
        assert_eq!(char_col("é=1", 3), 3);
        assert_eq!(char_col("ab", 9), 3);
    }
}
