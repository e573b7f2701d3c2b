//! Where a trace arriving as a byte stream can be cut between rows, so that pieces of it can be
//! parsed apart (a scaled run reading standard input in parallel) and give the rows the whole
//! stream gives.
//!
//! In JSON lines every line end ends a row (a JSON string holds no raw line break). In CSV a
//! line end inside a quoted field belongs to the field, so the cutter follows the CSV reader's
//! quoting rules (`csv_reader.rs`): a `"` opens a quoted field only at a field's start (after
//! spaces), `""` inside one is a quote, and the next lone `"` closes it. Anything the reader
//! rejects after a closing quote ends with its line, as the reader's error does. `.input`
//! traces are not cut: a step's block spans lines.

use super::TraceFormat;

/// Where a CSV scan stands between two bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Csv {
    /// At a field's start, before any byte but spaces.
    FieldStart,
    /// Inside an unquoted field (or after a closed quote): a line end ends the row.
    Unquoted,
    /// Inside a quoted field.
    Quoted,
    /// Just after a `"` inside a quoted field: another `"` makes a quote, anything else closed
    /// the field.
    QuoteInQuoted,
    /// After a quoted field's closing quote (and spaces): a comma or the line's end must come.
    AfterQuote,
    /// After text the reader rejects following a closing quote: the reader drops the rest of
    /// the line and starts its next row on the next line.
    Discard,
}

/// A scanner of a trace's bytes for row boundaries, fed the stream's bytes in order.
#[derive(Debug)]
pub struct RowCutter {
    /// `None` for JSON lines, whose every line end is a boundary.
    csv: Option<Csv>,
}

impl RowCutter {
    /// A cutter for a trace in `format`; `None` for `.input`, which cannot be cut by lines.
    pub fn new(format: TraceFormat) -> Option<RowCutter> {
        match format {
            TraceFormat::Jsonl => Some(RowCutter { csv: None }),
            TraceFormat::Csv => Some(RowCutter {
                csv: Some(Csv::FieldStart),
            }),
            TraceFormat::Tc => None,
        }
    }

    /// Scans `bytes`, the stream's next bytes after those scanned before: the index just after
    /// the last row boundary among them (a line end that ends a row), if there is one.
    pub fn scan(&mut self, bytes: &[u8]) -> Option<usize> {
        let Some(state) = self.csv else {
            return memchr::memrchr(b'\n', bytes).map(|at| at + 1);
        };
        // Without a quote outside a quoted field every line end is a boundary: the common case
        // needs no walk over every byte.
        let plain = matches!(state, Csv::FieldStart | Csv::Unquoted);
        if plain && memchr::memchr(b'"', bytes).is_none() {
            let last = memchr::memrchr(b'\n', bytes);
            self.csv = Some(match last {
                Some(at) => after_plain(Csv::FieldStart, &bytes[at + 1..]),
                None => after_plain(state, bytes),
            });
            return last.map(|at| at + 1);
        }
        let mut state = state;
        let mut cut = None;
        for (i, &b) in bytes.iter().enumerate() {
            state = match (state, b) {
                (Csv::Quoted, b'"') => Csv::QuoteInQuoted,
                (Csv::Quoted, _) => Csv::Quoted,
                (Csv::QuoteInQuoted, b'"') => Csv::Quoted,
                (Csv::FieldStart, b'"') => Csv::Quoted,
                (_, b'\n') => {
                    cut = Some(i + 1);
                    Csv::FieldStart
                }
                (Csv::Discard, _) => Csv::Discard,
                (_, b',') => Csv::FieldStart,
                (Csv::FieldStart, b' ' | b'\t') => Csv::FieldStart,
                (Csv::QuoteInQuoted | Csv::AfterQuote, b' ' | b'\t' | b'\r') => Csv::AfterQuote,
                (Csv::QuoteInQuoted | Csv::AfterQuote, _) => Csv::Discard,
                _ => Csv::Unquoted,
            };
        }
        self.csv = Some(state);
        cut
    }
}

/// Where a scan standing at `start` (outside quotes) stands after `tail`, bytes holding no quote
/// and no line end.
fn after_plain(start: Csv, tail: &[u8]) -> Csv {
    let space = |b: &u8| *b == b' ' || *b == b'\t';
    match tail.iter().rposition(|&b| b == b',') {
        Some(comma) if tail[comma + 1..].iter().all(space) => Csv::FieldStart,
        None if tail.iter().all(space) => start,
        _ => Csv::Unquoted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every boundary the cutter gives when fed `text` in pieces of `size` bytes.
    fn cuts(format: TraceFormat, text: &str, size: usize) -> Vec<usize> {
        let mut cutter = RowCutter::new(format).expect("a format that cuts");
        let mut found = Vec::new();
        for (k, piece) in text.as_bytes().chunks(size).enumerate() {
            if let Some(at) = cutter.scan(piece) {
                found.push(k * size + at);
            }
        }
        found
    }

    /// The index after the last row boundary at or before each piece's end, computed from the
    /// rows themselves.
    fn expected(rows: &[&str], text_len: usize, size: usize) -> Vec<usize> {
        let mut ends = Vec::new();
        let mut at = 0;
        for r in rows {
            at += r.len();
            ends.push(at);
        }
        assert_eq!(at, text_len);
        (0..text_len.div_ceil(size))
            .filter_map(|k| {
                let (lo, hi) = (k * size, ((k + 1) * size).min(text_len));
                ends.iter().rev().find(|&&e| e > lo && e <= hi).copied()
            })
            .collect()
    }

    #[test]
    fn csv_rows_are_cut_only_where_a_row_ends() {
        let rows = [
            "host,temp,note\n",
            "h1,1.5,plain\n",
            "h2, \"two\nlines\",x\n",
            "h3,2,\"a \"\"quoted\"\" word\n, and a comma\"\n",
            "h\"4,3,a quote inside\n",
            "h5,\"x\" ,y\n",
            "\n",
            "h6,4,\"\"\n",
            "h8,\"x\"y,\"still\n",
            "a row of its own to the reader\n",
            "h9,\"r\"\r\n",
            " \"h7\",5,z\n",
        ];
        let text: String = rows.concat();
        for size in 1..=text.len() {
            assert_eq!(
                cuts(TraceFormat::Csv, &text, size),
                expected(&rows, text.len(), size),
                "pieces of {size} bytes"
            );
        }
    }

    #[test]
    fn json_lines_are_cut_at_every_line_end() {
        let rows = ["{\"a\":1}\n", "{\"a\":\"x,\\\"y\"}\n", "\n", "{\"a\":3}\n"];
        let text: String = rows.concat();
        for size in 1..=text.len() {
            assert_eq!(
                cuts(TraceFormat::Jsonl, &text, size),
                expected(&rows, text.len(), size),
                "pieces of {size} bytes"
            );
        }
        assert!(RowCutter::new(TraceFormat::Tc).is_none());
    }

    /// A quote left open holds every later line end inside the field, as the reader reads it.
    #[test]
    fn an_open_quote_holds_back_every_later_line_end() {
        let mut cutter = RowCutter::new(TraceFormat::Csv).expect("csv cuts");
        assert_eq!(cutter.scan(b"a,b\n1,\"open\n2,3\n"), Some(4));
        assert_eq!(cutter.scan(b"4,5\n"), None);
    }
}
