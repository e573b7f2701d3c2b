//! Reader for CSV traces: a header naming inputs, then one row per step.
//!
//! The format is RFC 4180 with the usual leniencies: fields are separated by
//! commas; a field may be quoted (`"a, b"`, with `""` for a quote inside,
//! line breaks allowed inside), and spaces around a quoted field are
//! ignored; a quote inside an unquoted field is an ordinary character; lines
//! end with `\n` or `\r\n`. Every record must have as many fields as the
//! header. A blank line is not a record: it is skipped, so a step is a
//! record, not a line (diagnostics name the real line).
//!
//! Columns that are not declared inputs are ignored; a declared input
//! missing from the header is absent at every step (with one warning). An
//! unquoted empty cell is an absent input. A quoted cell is text: for a Str or
//! untyped input it is that string (so `""` is the empty string and `"3"` is
//! the string 3 — this is what makes vigil's own CSV output read back as the
//! values it wrote); for an input of another type it is parsed as that type,
//! and `""` is absent. Unquoted cells of untyped (`Any`) inputs are inferred
//! cell by cell (Int, Float, Bool, Unit, else Str). A container input's cell
//! is JSON text, read by the JSON-lines rule.
//!
//! The parser is written here rather than taken from the `csv` crate because
//! that crate cannot report what this reader must: a quoted field left open
//! at the end of the file (it silently swallows every later line into one
//! row), whether a field was quoted, and where a field starts on its line.
//! It reads one line at a time, so a record arriving on a pipe is returned
//! as soon as its last line is complete.

use super::source::Lines;
use super::values::{Schema, parse_text, plain_int};
use super::{RowReader, TraceError};
use crate::lang::types::Type;
use crate::value::Value;

pub(crate) struct CsvReader {
    lines: Lines,
    schema: Schema,
    /// For each declared input, the index of its column (`None`: absent),
    /// and the header's number of fields. Filled when the header is read, on
    /// the first call to `next_row`, so that opening a pipe does not block.
    columns: Option<(Vec<Option<usize>>, usize)>,
    record: Record,
    warnings: Vec<String>,
    /// An error to report before reading anything (a resumed reader's
    /// header that could not be read again).
    failed: Option<TraceError>,
    /// Reading the source itself failed (an I/O error, a truncated file):
    /// nothing after it can be read.
    read_failed: bool,
    /// The last error was in a record after the header, which is dropped
    /// whole: the next record can be read (`can_continue`).
    record_error: bool,
}

/// One parsed record: the fields' bytes, one after the other, and where each
/// field is.
#[derive(Default)]
struct Record {
    bytes: Vec<u8>,
    fields: Vec<Field>,
    /// The line the record starts on.
    line: usize,
    /// Where the record ends (the line and the column of its terminator),
    /// for errors about missing fields.
    end: (usize, usize),
}

struct Field {
    start: usize,
    end: usize,
    quoted: bool,
    /// The field's first character (its opening quote, if quoted).
    line: usize,
    col: usize,
}

/// Where the parser is between two bytes of a record.
#[derive(Clone, Copy)]
enum State {
    /// At the start of a field.
    FieldStart,
    /// Inside a quoted field.
    Quoted,
    /// After the closing quote of a field.
    AfterQuote,
}

/// Counts columns along one line: the 1-based character column of a byte
/// offset, computed incrementally so that a line with many fields costs
/// time linear in its length.
struct Cols<'a> {
    text: &'a [u8],
    byte: usize,
    col: usize,
}

impl Cols<'_> {
    fn at(&mut self, byte: usize) -> usize {
        if byte < self.byte {
            self.byte = 0;
            self.col = 1;
        }
        // Continuation bytes of UTF-8 do not start a character.
        self.col += self.text[self.byte..byte]
            .iter()
            .filter(|b| (**b & 0xC0) != 0x80)
            .count();
        self.byte = byte;
        self.col
    }
}

fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

impl CsvReader {
    pub(crate) fn new(lines: Lines, schema: Schema) -> CsvReader {
        CsvReader {
            lines,
            schema,
            columns: None,
            record: Record::default(),
            warnings: Vec::new(),
            failed: None,
            read_failed: false,
            record_error: false,
        }
    }

    /// A reader resuming at `lines` (a position this reader gave, after the
    /// header), with the header read from `header` (the trace's start). A
    /// header that cannot be read now is reported by the first `next_row`.
    pub(crate) fn resumed(lines: Lines, header: Lines, schema: Schema) -> CsvReader {
        let mut first = CsvReader::new(header, schema);
        let columns = first.read_header();
        let mut reader = CsvReader::new(lines, first.schema);
        reader.warnings = first.warnings;
        match columns {
            Ok(c) => reader.columns = Some(c),
            Err(e) => reader.failed = Some(e),
        }
        reader
    }

    /// Reads the next record into `self.record`; `false` at the end of the
    /// trace. Blank lines before it are skipped.
    fn read_record(&mut self) -> Result<bool, TraceError> {
        let rec = &mut self.record;
        rec.bytes.clear();
        rec.fields.clear();
        let mut state = State::FieldStart;
        // The opening quote of the field being read, while in `Quoted`.
        let mut open = (0, 0);
        loop {
            let raw = match self.lines.next_raw() {
                Ok(raw) => raw,
                Err(e) => {
                    self.read_failed = true;
                    return Err(e);
                }
            };
            let Some(raw) = raw else {
                return match state {
                    State::FieldStart if rec.fields.is_empty() => Ok(false),
                    State::Quoted => Err(self.schema.error(
                        open.0,
                        open.1,
                        "this quoted field is never closed: the trace ends before its closing `\"`",
                    )),
                    // A record is only left unfinished inside quotes.
                    _ => unreachable!("a record ends with its line"),
                };
            };
            let (text, line) = (raw.text, raw.number);
            if rec.fields.is_empty() && matches!(state, State::FieldStart) {
                if text.is_empty() {
                    continue;
                }
                rec.line = line;
            }
            let mut cols = Cols {
                text,
                byte: 0,
                col: 1,
            };
            let mut i = 0;
            loop {
                match state {
                    State::FieldStart => {
                        let lead = text[i..].iter().take_while(|b| is_space(**b)).count();
                        if text.get(i + lead) == Some(&b'"') {
                            open = (line, cols.at(i + lead));
                            rec.fields.push(Field {
                                start: rec.bytes.len(),
                                end: rec.bytes.len(),
                                quoted: true,
                                line: open.0,
                                col: open.1,
                            });
                            i += lead + 1;
                            state = State::Quoted;
                            continue;
                        }
                        let len = text[i..]
                            .iter()
                            .position(|b| *b == b',')
                            .unwrap_or(text.len() - i);
                        let start = rec.bytes.len();
                        rec.bytes.extend_from_slice(&text[i..i + len]);
                        rec.fields.push(Field {
                            start,
                            end: rec.bytes.len(),
                            quoted: false,
                            line,
                            col: cols.at(i),
                        });
                        i += len;
                        if i == text.len() {
                            rec.end = (line, cols.at(i));
                            return Ok(true);
                        }
                        i += 1;
                    }
                    State::Quoted => match text[i..].iter().position(|b| *b == b'"') {
                        None => {
                            // The field goes on over the line break, which
                            // is part of its value.
                            rec.bytes.extend_from_slice(&text[i..]);
                            rec.bytes.extend_from_slice(raw.terminator);
                            break;
                        }
                        Some(k) => {
                            rec.bytes.extend_from_slice(&text[i..i + k]);
                            i += k + 1;
                            if text.get(i) == Some(&b'"') {
                                rec.bytes.push(b'"');
                                i += 1;
                            } else {
                                if let Some(f) = rec.fields.last_mut() {
                                    f.end = rec.bytes.len();
                                }
                                state = State::AfterQuote;
                            }
                        }
                    },
                    State::AfterQuote => {
                        i += text[i..].iter().take_while(|b| is_space(**b)).count();
                        match text.get(i) {
                            None => {
                                rec.end = (line, cols.at(i));
                                return Ok(true);
                            }
                            Some(b',') => {
                                i += 1;
                                state = State::FieldStart;
                            }
                            Some(_) => {
                                return Err(self.schema.error(
                                    line,
                                    cols.at(i),
                                    "unexpected text after the closing quote of a field (a quote inside a quoted field is written `\"\"`)",
                                ));
                            }
                        }
                    }
                }
            }
        }
    }

    fn field_text(&self, j: usize) -> Result<&str, TraceError> {
        let f = &self.record.fields[j];
        std::str::from_utf8(&self.record.bytes[f.start..f.end]).map_err(|_| {
            self.schema
                .error(f.line, f.col, "the cell is not valid UTF-8")
        })
    }

    fn read_header(&mut self) -> Result<(Vec<Option<usize>>, usize), TraceError> {
        let mut columns = vec![None; self.schema.len()];
        if !self.read_record()? {
            // An empty file has no header at all and no steps, so there is
            // nothing to warn about.
            return Ok((columns, 0));
        }
        let width = self.record.fields.len();
        for j in 0..width {
            // A column whose name is not UTF-8 cannot name a declared input.
            let Ok(name) = self.field_text(j) else {
                continue;
            };
            let Some(i) = self.schema.lookup(name.trim()) else {
                continue;
            };
            if columns[i].is_some() {
                let f = &self.record.fields[j];
                return Err(self.schema.error(
                    f.line,
                    f.col,
                    format!(
                        "input `{}` has two columns in the header",
                        self.schema.names[i]
                    ),
                ));
            }
            columns[i] = Some(j);
        }
        for (i, column) in columns.iter().enumerate() {
            if column.is_none() {
                self.warnings.push(format!(
                    "{}: input `{}` is not a column of the CSV header; it is absent at every step",
                    self.schema.file, self.schema.names[i]
                ));
            }
        }
        Ok((columns, width))
    }

    fn read_row(
        &mut self,
        columns: &[Option<usize>],
        width: usize,
        row: &mut [Option<Value>],
    ) -> Result<bool, TraceError> {
        if !self.read_record()? {
            return Ok(false);
        }
        let rec = &self.record;
        let found = rec.fields.len();
        if found != width {
            let (line, col) = match rec.fields.get(width) {
                Some(extra) => (extra.line, extra.col),
                None => rec.end,
            };
            return Err(self.schema.error(
                line,
                col,
                format!("expected {width} fields as in the header, found {found}"),
            ));
        }
        row.fill(None);
        for (i, (cell, column)) in row.iter_mut().zip(columns).enumerate() {
            let Some(j) = *column else { continue };
            let f = &self.record.fields[j];
            if !f.quoted && f.start == f.end {
                continue;
            }
            let ty = self.schema.types[i];
            // An Int cell of plain digits, nearly every cell of a numeric
            // trace, is read without making a `str`.
            if !f.quoted
                && ty == Type::Int
                && let Some(v) = plain_int(&self.record.bytes[f.start..f.end])
            {
                *cell = Some(Value::Int(v));
                continue;
            }
            let text = self.field_text(j)?;
            let value = match (f.quoted, ty) {
                (true, Type::Str | Type::Any) => Value::Str(text.into()),
                (true, _) if text.is_empty() => continue,
                _ => parse_text(text, ty, &self.schema.names[i])
                    .map_err(|m| self.schema.error(f.line, f.col, m))?,
            };
            *cell = Some(value);
        }
        Ok(true)
    }
}

impl RowReader for CsvReader {
    fn next_row(&mut self, row: &mut [Option<Value>]) -> Result<bool, TraceError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let (columns, width) = match self.columns.take() {
            Some(c) => c,
            None => self.read_header()?,
        };
        self.record_error = false;
        let result = self.read_row(&columns, width, row);
        self.columns = Some((columns, width));
        // A record is read to its end (or, for text after a closing quote,
        // to the end of that line) before it is checked, so the next one
        // starts on the following line.
        self.record_error = result.is_err() && !self.read_failed;
        result
    }

    fn can_continue(&self) -> bool {
        self.record_error
    }

    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// A record ends with its line, so the next row starts after the last
    /// line read; before the header is read there is no such place.
    fn position(&self) -> Option<super::TracePosition> {
        self.columns.as_ref().map(|_| self.lines.position())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{
        InputSchema, RowReader, TraceFormat, reader_from_bufread, reader_from_bytes,
    };
    use crate::lang::types::Type;
    use crate::value::Value;
    use std::io::{BufRead, BufReader, Read};

    fn schema(decls: &[(&str, Type)]) -> InputSchema {
        InputSchema {
            names: decls.iter().map(|(n, _)| n.to_string()).collect(),
            types: decls.iter().map(|(_, t)| *t).collect(),
        }
    }

    fn open(text: &str, decls: &[(&str, Type)]) -> Box<dyn RowReader> {
        reader_from_bytes(
            "t.csv",
            text.as_bytes().to_vec(),
            TraceFormat::Csv,
            &schema(decls),
        )
        .unwrap()
    }

    fn read(text: &str, decls: &[(&str, Type)]) -> Result<Vec<Vec<Option<Value>>>, String> {
        let mut r = open(text, decls);
        let mut rows = Vec::new();
        let mut row = vec![None; decls.len()];
        while r.next_row(&mut row).map_err(|e| e.to_string())? {
            rows.push(row.clone());
        }
        Ok(rows)
    }

    const XY: &[(&str, Type)] = &[("x", Type::Int), ("y", Type::Any)];

    fn int(i: i64) -> Option<Value> {
        Some(Value::Int(i))
    }

    /// Int cells of plain digits are read by a byte scan; every other
    /// spelling still goes the general way, with its errors.
    /// A container input's cell is JSON text (quoted or not), as vigil's
    /// CSV output writes containers, so that output reads back as a trace.
    #[test]
    fn container_cells_are_json() {
        let decls = [("l", Type::List), ("t", Type::Tuple), ("m", Type::Map)];
        let rows = read(
            "l,t,m\n\"[1,[2.5,\"\"a\"\"]]\",\"[1,2]\",\"{\"\"k\"\":null}\"\n[],,\n",
            &decls,
        )
        .unwrap();
        let shown: Vec<String> = rows[0]
            .iter()
            .map(|v| v.as_ref().unwrap().to_string())
            .collect();
        assert_eq!(
            shown,
            [
                "List([Int(1), List([Float(2.5), Str(\"a\")])])",
                "Tuple([Int(1), Int(2)])",
                "Map({\"k\": Unit})"
            ]
        );
        assert_eq!(rows[1][0], Some(Value::list(Vec::new())));
        assert_eq!(rows[1][1], None);
        let e = read("l\n\"[1,\"\n", &decls[..1]).unwrap_err();
        assert!(e.contains("t.csv:2:1") && e.contains("invalid JSON"), "{e}");
        let e = read("l\n7\n", &decls[..1]).unwrap_err();
        assert!(e.contains("expected List"), "{e}");
    }

    #[test]
    fn plain_int_cells_read_as_the_general_rule_reads_them() {
        let decls = &[("x", Type::Int), ("f", Type::Float)];
        let i = |v: i64| Some(Value::Int(v));
        assert_eq!(
            read("x,f\n-9223372036854775808,3\n 7 ,-0\n\"5\",\n", decls).unwrap(),
            vec![
                vec![i(i64::MIN), Some(Value::Float(3.0))],
                vec![i(7), Some(Value::Float(0.0))],
                vec![i(5), None],
            ]
        );
        assert_eq!(
            read("x\n9223372036854775808\n", &[("x", Type::Int)]).unwrap_err(),
            "t.csv:2:1: integer `9223372036854775808` does not fit in Int (64 bits)"
        );
    }

    #[test]
    fn header_order_extra_columns_and_empty_cells() {
        let rows = read("junk,y,x\nq,2,1\n,,3\nz,,\n", XY).unwrap();
        assert_eq!(
            rows,
            [vec![int(1), int(2)], vec![int(3), None], vec![None, None]]
        );
    }

    #[test]
    fn typed_columns() {
        let decls = &[
            ("i", Type::Int),
            ("f", Type::Float),
            ("b", Type::Bool),
            ("s", Type::Str),
            ("u", Type::Unit),
        ];
        let rows = read(
            "i,f,b,s,u\n-9223372036854775808,2,true,1,()\n0,nan,false,\"a, b\",\n",
            decls,
        )
        .unwrap();
        assert_eq!(
            rows[0],
            [
                int(i64::MIN),
                Some(Value::Float(2.0)),
                Some(Value::Bool(true)),
                Some(Value::Str("1".into())),
                Some(Value::Unit)
            ]
        );
        assert!(matches!(rows[1][1], Some(Value::Float(x)) if x.is_nan()));
        assert_eq!(rows[1][3], Some(Value::Str("a, b".into())));
        assert_eq!(rows[1][4], None);
    }

    #[test]
    fn untyped_columns_are_inferred_per_cell() {
        let decls = &[("a", Type::Any)];
        let rows = read("a\n1\n1.5\ninf\ntrue\n()\nhello world\n", decls).unwrap();
        let got: Vec<_> = rows.into_iter().map(|r| r[0].clone().unwrap()).collect();
        assert_eq!(got[0], Value::Int(1));
        assert_eq!(got[1], Value::Float(1.5));
        assert_eq!(got[2], Value::Float(f64::INFINITY));
        assert_eq!(got[3], Value::Bool(true));
        assert_eq!(got[4], Value::Unit);
        assert_eq!(got[5], Value::Str("hello world".into()));
    }

    #[test]
    fn missing_input_warns_once() {
        let mut r = open("x\n1\n2\n", XY);
        let mut row = vec![None, None];
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row, [int(1), None]);
        let w = r.take_warnings();
        assert_eq!(
            w,
            ["t.csv: input `y` is not a column of the CSV header; it is absent at every step"]
        );
        assert!(r.next_row(&mut row).unwrap());
        assert!(r.take_warnings().is_empty());
        assert!(!r.next_row(&mut row).unwrap());
    }

    #[test]
    fn empty_files_and_header_only_files() {
        let mut r = open("", XY);
        let mut row = vec![None, None];
        assert!(!r.next_row(&mut row).unwrap());
        assert!(r.take_warnings().is_empty());
        assert_eq!(read("x,y\n", XY).unwrap().len(), 0);
    }

    #[test]
    fn type_mismatches_are_located_at_the_cell() {
        assert_eq!(
            read("y,x\n1,2\nabc,2.5\n", XY).unwrap_err(),
            "t.csv:3:5: expected Int for input `x`, found Float 2.5"
        );
        assert_eq!(
            read("y,x\n\"a,b\",a\n", XY).unwrap_err(),
            "t.csv:2:7: expected Int for input `x`, found Str \"a\""
        );
        assert_eq!(
            read("b\nyes\n", &[("b", Type::Bool)]).unwrap_err(),
            "t.csv:2:1: expected Bool for input `b`, found Str \"yes\""
        );
    }

    #[test]
    fn malformed_csv_is_located() {
        assert_eq!(
            read("x,y\n1,2\n1,2,3\n", XY).unwrap_err(),
            "t.csv:3:5: expected 2 fields as in the header, found 3"
        );
        assert_eq!(
            read("x,y\n1,2\n1\n", XY).unwrap_err(),
            "t.csv:3:2: expected 2 fields as in the header, found 1"
        );
        assert_eq!(
            read("x,y\n\"1\" 2,3\n", XY).unwrap_err(),
            "t.csv:2:5: unexpected text after the closing quote of a field (a quote inside a quoted field is written `\"\"`)"
        );
        assert_eq!(
            read("x,x\n1,2\n", XY).unwrap_err(),
            "t.csv:1:3: input `x` has two columns in the header"
        );
    }

    #[test]
    fn invalid_utf8_cell_is_located() {
        let s = schema(XY);
        let mut r =
            reader_from_bytes("t.csv", b"y,x\nab,\xff\n".to_vec(), TraceFormat::Csv, &s).unwrap();
        let mut row = vec![None, None];
        assert_eq!(
            r.next_row(&mut row).unwrap_err().to_string(),
            "t.csv:2:4: the cell is not valid UTF-8"
        );
    }

    /// Issue 7: an unterminated quote used to swallow every later line into
    /// one row.
    #[test]
    fn an_unterminated_quoted_field_is_an_error() {
        let decls = &[("x", Type::Int), ("s", Type::Str)];
        assert_eq!(
            read("x,s\n1,\"abc\n2,b\n3,c\n", decls).unwrap_err(),
            "t.csv:2:3: this quoted field is never closed: the trace ends before its closing `\"`"
        );
        // The rows before it are returned first.
        let mut r = open("x,s\n0,a\n1,\"abc\n2,b\n", decls);
        let mut row = vec![None, None];
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row, [int(0), Some(Value::Str("a".into()))]);
        assert!(r.next_row(&mut row).is_err());
    }

    #[test]
    fn quoted_fields_span_lines_and_keep_their_line_breaks() {
        let decls = &[("x", Type::Int), ("s", Type::Str)];
        let rows = read("x,s\r\n1,\"a\r\nb \"\"q\"\"\"\r\n2, \"c,d\" \r\n", decls).unwrap();
        assert_eq!(
            rows,
            [
                vec![int(1), Some(Value::Str("a\r\nb \"q\"".into()))],
                vec![int(2), Some(Value::Str("c,d".into()))],
            ]
        );
        // Errors after a multi-line record name the real line.
        assert_eq!(
            read("x,s\n1,\"a\nb\"\nz,c\n", decls).unwrap_err(),
            "t.csv:4:1: expected Int for input `x`, found Str \"z\""
        );
    }

    /// A quoted cell is text: a string for Str and untyped inputs (so the
    /// empty string and `"3"` are expressible), parsed for other types.
    #[test]
    fn quoted_cells_are_strings() {
        let decls = &[("a", Type::Any), ("i", Type::Int), ("s", Type::Str)];
        let rows = read(
            "a,i,s\n\"3\",\"4\",\"\"\n\"\",\"\",\n3,,x\n\"null\",5,\"\"\"\"\n",
            decls,
        )
        .unwrap();
        let s = |t: &str| Some(Value::Str(t.into()));
        assert_eq!(
            rows,
            [
                vec![s("3"), int(4), s("")],
                vec![s(""), None, None],
                vec![int(3), None, s("x")],
                vec![s("null"), int(5), s("\"")],
            ]
        );
    }

    /// Blank lines are not records: steps count records, and diagnostics
    /// name the real line.
    #[test]
    fn blank_lines_are_skipped() {
        assert_eq!(
            read("\nx,y\n\n1,2\n\n\n3,4\n\n", XY).unwrap(),
            [vec![int(1), int(2)], vec![int(3), int(4)]]
        );
        assert_eq!(
            read("x\n1\n\n2\nq\n", &[("x", Type::Int)]).unwrap_err(),
            "t.csv:5:1: expected Int for input `x`, found Str \"q\""
        );
    }

    #[test]
    fn numbers_that_do_not_fit() {
        assert_eq!(
            read("y,x\n1,2\n1e400,2\n", XY).unwrap_err(),
            "t.csv:3:1: number `1e400` does not fit in Float (64 bits)"
        );
        assert_eq!(
            read("y,x\n1,99999999999999999999\n", XY).unwrap_err(),
            "t.csv:2:3: integer `99999999999999999999` does not fit in Int (64 bits)"
        );
        assert_eq!(read("x,y\n-0,-0\n", XY).unwrap(), [vec![int(0), int(0)]]);
    }

    #[test]
    fn many_fields_on_one_line_cost_linear_time() {
        // 200,000 columns, the declared inputs last: the columns of the
        // fields are counted incrementally (a quadratic count would take
        // minutes here, not milliseconds).
        let mut text = "c,".repeat(200_000);
        text.push_str("x,y\n");
        text.push_str(&"é,".repeat(200_000));
        text.push_str("1,zz\n");
        let e = read(&text, &[("x", Type::Int), ("y", Type::Int)]).unwrap_err();
        assert_eq!(
            e,
            "t.csv:2:400003: expected Int for input `y`, found Str \"zz\""
        );
    }

    #[test]
    fn header_names_are_trimmed() {
        assert_eq!(read("x, y\n1, 2\n", XY).unwrap(), [vec![int(1), int(2)]]);
    }

    /// A source that hands out one scripted chunk per `read` and panics if
    /// asked for more: a reader that reads ahead would block on a pipe.
    struct Script(Vec<&'static [u8]>);

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            assert!(
                !self.0.is_empty(),
                "the reader read ahead of the row it returned"
            );
            let chunk = self.0.remove(0);
            buf[..chunk.len()].copy_from_slice(chunk);
            Ok(chunk.len())
        }
    }

    #[test]
    fn rows_are_returned_without_reading_ahead() {
        let src: Box<dyn BufRead + Send> =
            Box::new(BufReader::new(Script(vec![b"x,y\n", b"1,2\n", b"3,4\n"])));
        let mut r = reader_from_bufread("-", src, TraceFormat::Csv, &schema(XY)).unwrap();
        let mut row = vec![None, None];
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row, [int(1), int(2)]);
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row, [int(3), int(4)]);
    }
}
