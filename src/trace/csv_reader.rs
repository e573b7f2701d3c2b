//! Reader for CSV traces: a header naming inputs, then one row per step.
//!
//! Parsing is done by the `csv` crate, which reads its source in chunks but
//! returns each record as soon as its terminator has been read, so a row
//! arriving on a pipe is available without waiting for the next one. Columns
//! that are not declared inputs are ignored; a declared input missing from
//! the header is absent at every step (with one warning); an empty cell is
//! an absent input. Typed columns are parsed by their declared type, and
//! untyped (`Any`) columns are inferred cell by cell.

use super::source::unlocated;
use super::values::{Schema, parse_text};
use super::{RowReader, TraceError};
use crate::value::Value;
use std::io::BufRead;

pub(crate) struct CsvReader {
    reader: csv::Reader<Box<dyn BufRead>>,
    schema: Schema,
    /// For each declared input, the index of its column (`None`: absent).
    /// Filled when the header is read, on the first call to `next_row`, so
    /// that opening a pipe does not block.
    columns: Option<Vec<Option<usize>>>,
    record: csv::ByteRecord,
    warnings: Vec<String>,
}

impl CsvReader {
    pub(crate) fn new(source: Box<dyn BufRead>, schema: Schema) -> CsvReader {
        let reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .from_reader(source);
        CsvReader {
            reader,
            schema,
            columns: None,
            record: csv::ByteRecord::new(),
            warnings: Vec::new(),
        }
    }

    fn read_header(&mut self) -> Result<Vec<Option<usize>>, TraceError> {
        let header = match self.reader.byte_headers() {
            Ok(h) => h.clone(),
            Err(e) => return Err(self.csv_error(e)),
        };
        let mut columns = vec![None; self.schema.len()];
        for (j, field) in header.iter().enumerate() {
            // A column whose name is not UTF-8 cannot name a declared input.
            let Ok(name) = std::str::from_utf8(field) else {
                continue;
            };
            let Some(i) = self.schema.lookup(name.trim()) else {
                continue;
            };
            if columns[i].is_some() {
                return Err(self.schema.error(
                    1,
                    field_col(&header, j),
                    format!(
                        "input `{}` has two columns in the header",
                        self.schema.names[i]
                    ),
                ));
            }
            columns[i] = Some(j);
        }
        // An empty file has no header at all and no steps, so there is
        // nothing to warn about.
        if !header.is_empty() {
            for (i, column) in columns.iter().enumerate() {
                if column.is_none() {
                    self.warnings.push(format!(
                        "{}: input `{}` is not a column of the CSV header; it is absent at every step",
                        self.schema.file, self.schema.names[i]
                    ));
                }
            }
        }
        Ok(columns)
    }

    fn csv_error(&self, e: csv::Error) -> TraceError {
        let line = e.position().map_or(1, |p| p.line() as usize);
        match e.kind() {
            csv::ErrorKind::UnequalLengths {
                expected_len, len, ..
            } => self.schema.error(
                line,
                1,
                format!("expected {expected_len} fields as in the header, found {len}"),
            ),
            csv::ErrorKind::Io(io) => {
                self.schema
                    .error(line, 1, format!("cannot read the trace: {io}"))
            }
            _ => unlocated(&self.schema.file, e.to_string()),
        }
    }
}

impl RowReader for CsvReader {
    fn next_row(&mut self, row: &mut [Option<Value>]) -> Result<bool, TraceError> {
        let columns = match self.columns.take() {
            Some(c) => c,
            None => self.read_header()?,
        };
        let result = self.read_record(&columns, row);
        self.columns = Some(columns);
        result
    }

    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }
}

impl CsvReader {
    fn read_record(
        &mut self,
        columns: &[Option<usize>],
        row: &mut [Option<Value>],
    ) -> Result<bool, TraceError> {
        match self.reader.read_byte_record(&mut self.record) {
            Ok(false) => return Ok(false),
            Ok(true) => {}
            Err(e) => return Err(self.csv_error(e)),
        }
        let line = self.record.position().map_or(1, |p| p.line() as usize);
        row.fill(None);
        for (i, (cell, column)) in row.iter_mut().zip(columns).enumerate() {
            let Some(j) = *column else { continue };
            let bytes = self.record.get(j).unwrap_or_default();
            if bytes.is_empty() {
                continue;
            }
            let at = || field_col(&self.record, j);
            let text = std::str::from_utf8(bytes)
                .map_err(|_| self.schema.error(line, at(), "the cell is not valid UTF-8"))?;
            let value = parse_text(text, self.schema.types[i], &self.schema.names[i])
                .map_err(|m| self.schema.error(line, at(), m))?;
            *cell = Some(value);
        }
        Ok(true)
    }
}

/// The 1-based column (in characters) where field `j` of a record starts.
///
/// The `csv` crate reports where a record starts but not where its fields
/// do, so the column is recomputed from the field contents, assuming each
/// earlier field was quoted only if it had to be (contains a comma, a quote
/// or a line break) — which is what CSV writers produce. The result is
/// exact for such files and an estimate otherwise.
fn field_col(record: &csv::ByteRecord, j: usize) -> usize {
    let mut col = 1;
    for field in record.iter().take(j) {
        let text = String::from_utf8_lossy(field);
        col += text.chars().count() + 1;
        if field
            .iter()
            .any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
        {
            col += 2 + field.iter().filter(|b| **b == b'"').count();
        }
    }
    col
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
            "t.csv:3:1: expected 2 fields as in the header, found 3"
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
        let src: Box<dyn BufRead> =
            Box::new(BufReader::new(Script(vec![b"x,y\n", b"1,2\n", b"3,4\n"])));
        let mut r = reader_from_bufread("-", src, TraceFormat::Csv, &schema(XY)).unwrap();
        let mut row = vec![None, None];
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row, [int(1), int(2)]);
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row, [int(3), int(4)]);
    }
}
