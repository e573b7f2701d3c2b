//! Byte sources for the trace readers: memory-mapped files, in-memory
//! buffers and standard input, plus a line splitter that tracks line numbers.
//!
//! Every source is exposed as a `BufRead`, so the readers have a single code
//! path. A mapped file is read through a `Cursor` over the mapping: the pages
//! are loaded lazily by the kernel and only the current line is copied, which
//! keeps memory constant however long the trace is. Standard input is read one
//! line at a time with `read_until`, which never waits for more bytes than the
//! end of the current line, so a reader can sit at the end of an endless pipe.

use super::TraceError;
use memmap2::Mmap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor};

/// The bytes behind an in-memory source: a file mapping or an owned buffer.
pub(crate) enum Backing {
    Map(Mmap),
    Bytes(Vec<u8>),
}

impl AsRef<[u8]> for Backing {
    fn as_ref(&self) -> &[u8] {
        match self {
            Backing::Map(m) => m,
            Backing::Bytes(b) => b,
        }
    }
}

/// An error that is not tied to a position in the trace (the file cannot be
/// opened, for instance). It is reported at line 1, column 1 so that every
/// `TraceError` keeps the 1-based `file:line:col` shape.
pub(crate) fn unlocated(file: &str, message: String) -> TraceError {
    TraceError {
        file: file.to_string(),
        line: 1,
        col: 1,
        message,
    }
}

/// Opens `path` as a buffered byte source: `-` is standard input, a regular
/// file is memory-mapped, and anything else (a FIFO, `/dev/stdin`, a process
/// substitution) is read through a `BufReader`, because such files cannot be
/// mapped and may never end.
pub(crate) fn open_source(path: &str) -> Result<Box<dyn BufRead>, TraceError> {
    if path == "-" {
        return Ok(Box::new(io::stdin().lock()));
    }
    let file =
        File::open(path).map_err(|e| unlocated(path, format!("cannot open the trace: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| unlocated(path, format!("cannot read the trace's metadata: {e}")))?;
    if !meta.is_file() {
        return Ok(Box::new(BufReader::new(file)));
    }
    // Mapping a zero-length file fails on Linux (EINVAL), and an empty trace
    // needs no mapping anyway.
    if meta.len() == 0 {
        return Ok(Box::new(Cursor::new(Backing::Bytes(Vec::new()))));
    }
    // SAFETY: the mapping is only read. If another process truncates or
    // rewrites the file while it is mapped the bytes read may change (or the
    // process may receive SIGBUS); that is the accepted trade-off of mapping
    // trace files, which vigil never writes to.
    let map = unsafe { Mmap::map(&file) }
        .map_err(|e| unlocated(path, format!("cannot map the trace into memory: {e}")))?;
    Ok(Box::new(Cursor::new(Backing::Map(map))))
}

/// An in-memory byte source, for tests and embedders that already hold a trace.
pub(crate) fn bytes_source(bytes: Vec<u8>) -> Box<dyn BufRead> {
    Box::new(Cursor::new(Backing::Bytes(bytes)))
}

/// Splits a byte source into lines, counting them from 1. Line terminators
/// (`\n` or `\r\n`) are removed.
pub(crate) struct Lines {
    file: String,
    reader: Box<dyn BufRead>,
    buf: Vec<u8>,
    line: usize,
}

impl Lines {
    pub(crate) fn new(file: &str, reader: Box<dyn BufRead>) -> Lines {
        Lines {
            file: file.to_string(),
            reader,
            buf: Vec::new(),
            line: 0,
        }
    }

    /// Returns the next line and its 1-based number, or `None` at the end of
    /// the source. A line that is not UTF-8 is an error located at its first
    /// invalid byte.
    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &str)>, TraceError> {
        self.buf.clear();
        let n = self
            .reader
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| TraceError {
                file: self.file.clone(),
                line: self.line + 1,
                col: 1,
                message: format!("cannot read the trace: {e}"),
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
        }
        // Editors on Windows may start a file with a UTF-8 byte-order mark;
        // it is not part of the first line's text.
        let start = if self.line == 1 && self.buf.starts_with(b"\xEF\xBB\xBF") {
            3
        } else {
            0
        };
        match std::str::from_utf8(&self.buf[start..]) {
            Ok(s) => Ok(Some((self.line, s))),
            Err(e) => {
                let valid = e.valid_up_to();
                // The prefix up to `valid` is UTF-8 by construction.
                let prefix = String::from_utf8_lossy(&self.buf[start..start + valid]);
                Err(TraceError {
                    file: self.file.clone(),
                    line: self.line,
                    col: prefix.chars().count() + 1,
                    message: "the line is not valid UTF-8".to_string(),
                })
            }
        }
    }
}

/// The 1-based column, counted in characters, of byte offset `byte` in `line`.
pub(crate) fn char_col(line: &str, byte: usize) -> usize {
    let byte = byte.min(line.len());
    // Offsets come from our own scanning and always fall on char boundaries;
    // `get` keeps a wrong offset from panicking all the same.
    line.get(..byte).map_or(byte, |p| p.chars().count()) + 1
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
        let mut lines = Lines::new("e", open_source(empty.to_str().unwrap()).unwrap());
        assert_eq!(lines.next_line().unwrap(), None);
        std::fs::remove_file(&empty).unwrap();

        let full = dir.join(format!("vigil-trace-full-{}", std::process::id()));
        std::fs::File::create(&full)
            .unwrap()
            .write_all(b"x\ny\n")
            .unwrap();
        let mut lines = Lines::new("f", open_source(full.to_str().unwrap()).unwrap());
        assert_eq!(lines.next_line().unwrap(), Some((1, "x")));
        assert_eq!(lines.next_line().unwrap(), Some((2, "y")));
        assert_eq!(lines.next_line().unwrap(), None);
        std::fs::remove_file(&full).unwrap();
    }

    #[test]
    fn missing_file_is_an_error() {
        let e = open_source("/nonexistent/vigil/trace.csv").err().unwrap();
        assert_eq!(e.file, "/nonexistent/vigil/trace.csv");
        assert!(
            e.message.starts_with("cannot open the trace"),
            "{}",
            e.message
        );
    }

    #[test]
    fn char_columns() {
        assert_eq!(char_col("abc", 0), 1);
        assert_eq!(char_col("é=1", 3), 3);
        assert_eq!(char_col("ab", 9), 3);
    }
}
