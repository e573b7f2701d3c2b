//! Reader for JSON-lines traces: one JSON object per line, one line per step.
//!
//! A key that is a declared input assigns it; a missing key leaves it absent;
//! other keys are ignored, since objects from real pipelines carry extra
//! fields. `null` is Unit. Numbers written as integers that fit in an i64
//! are Int, every other number is Float. Arrays and objects are not values
//! of the language and are rejected.
//!
//! Each line is first parsed into a map from keys to `RawValue`s, which are
//! slices of the line itself: only the values of declared inputs are then
//! decoded, and a wrong value can be reported at its exact column.

use super::source::{Lines, char_col};
use super::values::Schema;
use super::{RowReader, TraceError};
use crate::lang::types::Type;
use crate::value::Value;
use serde_json::value::RawValue;
use std::collections::HashMap;

pub(crate) struct JsonlReader {
    lines: Lines,
    schema: Schema,
}

impl JsonlReader {
    pub(crate) fn new(lines: Lines, schema: Schema) -> JsonlReader {
        JsonlReader { lines, schema }
    }
}

impl RowReader for JsonlReader {
    fn next_row(&mut self, row: &mut [Option<Value>]) -> Result<bool, TraceError> {
        loop {
            let Some((line_no, text)) = self.lines.next_line()? else {
                return Ok(false);
            };
            if text.trim().is_empty() {
                continue;
            }
            read_object(text, line_no, &self.schema, row)?;
            return Ok(true);
        }
    }
}

fn read_object(
    text: &str,
    line_no: usize,
    schema: &Schema,
    row: &mut [Option<Value>],
) -> Result<(), TraceError> {
    let body = text.trim_start();
    let start = text.len() - body.len();
    if !body.starts_with('{') {
        return Err(schema.error(
            line_no,
            char_col(text, start),
            "expected a JSON object (`{\"input\": value, ...}`) on each line",
        ));
    }
    let map: HashMap<String, &RawValue> = serde_json::from_str(text).map_err(|e| {
        // serde_json counts columns in bytes from 1; its message ends with
        // the position, which the TraceError already carries.
        let byte = e.column().saturating_sub(1);
        let message = e.to_string();
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(m, _)| m);
        schema.error(
            line_no,
            char_col(text, byte),
            format!("invalid JSON: {message}"),
        )
    })?;
    row.fill(None);
    for (i, cell) in row.iter_mut().enumerate().take(schema.len()) {
        let Some(raw) = map.get(&schema.names[i]) else {
            continue;
        };
        let raw = raw.get();
        // The raw value borrows from `text`, so its offset is its column.
        let offset = (raw.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
        let value = decode(raw, schema.types[i], &schema.names[i])
            .and_then(|v| schema.conform(i, v))
            .map_err(|m| schema.error(line_no, char_col(text, offset), m))?;
        *cell = Some(value);
    }
    Ok(())
}

/// The strings the JSON-lines writer uses for non-finite floats, which JSON
/// numbers cannot carry. A Float input accepts them so that vigil's own
/// output can be fed back as a trace.
const NON_FINITE: [(&str, f64); 4] = [
    ("NaN", f64::NAN),
    ("nan", f64::NAN),
    ("inf", f64::INFINITY),
    ("-inf", f64::NEG_INFINITY),
];

fn decode(raw: &str, ty: Type, name: &str) -> Result<Value, String> {
    let v: serde_json::Value =
        serde_json::from_str(raw).map_err(|e| format!("invalid JSON value: {e}"))?;
    Ok(match v {
        serde_json::Value::Null => Value::Unit,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            // Without serde_json's arbitrary-precision feature every number
            // has an f64 reading; NaN is only a guard.
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => match NON_FINITE.iter().find(|(text, _)| *text == s) {
            Some((_, x)) if ty == Type::Float => Value::Float(*x),
            _ => Value::Str(s.into()),
        },
        serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
            return Err(format!(
                "input `{name}` is given an array or object, which is not a trace value"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::{InputSchema, TraceFormat, reader_from_bufread, reader_from_bytes};
    use crate::lang::types::Type;
    use crate::value::Value;
    use std::io::{BufRead, BufReader, Read};

    fn schema(decls: &[(&str, Type)]) -> InputSchema {
        InputSchema {
            names: decls.iter().map(|(n, _)| n.to_string()).collect(),
            types: decls.iter().map(|(_, t)| *t).collect(),
        }
    }

    fn read(text: &str, decls: &[(&str, Type)]) -> Result<Vec<Vec<Option<Value>>>, String> {
        let mut r = reader_from_bytes(
            "t.jsonl",
            text.as_bytes().to_vec(),
            TraceFormat::Jsonl,
            &schema(decls),
        )
        .map_err(|e| e.to_string())?;
        let mut rows = Vec::new();
        let mut row = vec![None; decls.len()];
        while r.next_row(&mut row).map_err(|e| e.to_string())? {
            rows.push(row.clone());
        }
        Ok(rows)
    }

    const XY: &[(&str, Type)] = &[("x", Type::Int), ("y", Type::Any)];

    #[test]
    fn objects_missing_keys_extra_keys_and_blank_lines() {
        let rows = read(
            "{\"x\": 1, \"y\": 2}\n\n  \n{\"y\": \"a\", \"z\": [1]}\n{}\n",
            XY,
        )
        .unwrap();
        assert_eq!(
            rows,
            [
                vec![Some(Value::Int(1)), Some(Value::Int(2))],
                vec![None, Some(Value::Str("a".into()))],
                vec![None, None],
            ]
        );
    }

    #[test]
    fn value_kinds() {
        let decls = &[("a", Type::Any)];
        let one = |lit: &str| {
            read(&format!("{{\"a\": {lit}}}"), decls).unwrap()[0][0]
                .clone()
                .unwrap()
        };
        assert_eq!(one("null"), Value::Unit);
        assert_eq!(one("true"), Value::Bool(true));
        assert_eq!(one("-9223372036854775808"), Value::Int(i64::MIN));
        assert_eq!(
            one("9223372036854775808"),
            Value::Float(9223372036854775808.0)
        );
        assert_eq!(one("2.0"), Value::Float(2.0));
        assert_eq!(one("1e3"), Value::Float(1000.0));
        assert_eq!(one("-0.0"), Value::Float(-0.0));
        assert_eq!(one("\"a \\\"b\\\"\""), Value::Str("a \"b\"".into()));
        // Untyped inputs keep strings as strings, even "NaN".
        assert_eq!(one("\"NaN\""), Value::Str("NaN".into()));
    }

    #[test]
    fn float_inputs_convert_ints_and_accept_non_finite_strings() {
        let decls = &[("f", Type::Float)];
        let rows = read("{\"f\": 3}\n{\"f\": \"-inf\"}\n{\"f\": \"NaN\"}\n", decls).unwrap();
        assert_eq!(rows[0][0], Some(Value::Float(3.0)));
        assert_eq!(rows[1][0], Some(Value::Float(f64::NEG_INFINITY)));
        assert!(matches!(rows[2][0], Some(Value::Float(x)) if x.is_nan()));
    }

    #[test]
    fn type_mismatches_are_located_at_the_value() {
        assert_eq!(
            read("{\"x\": 1}\n{\"y\": 0, \"x\":  2.5}\n", XY).unwrap_err(),
            "t.jsonl:2:16: expected Int for input `x`, found Float 2.5"
        );
        assert_eq!(
            read("{\"é\": 0, \"x\": \"a\"}", XY).unwrap_err(),
            "t.jsonl:1:15: expected Int for input `x`, found Str \"a\""
        );
        assert_eq!(
            read("{\"x\": null}", XY).unwrap_err(),
            "t.jsonl:1:7: expected Int for input `x`, found Unit ()"
        );
    }

    #[test]
    fn arrays_objects_and_non_objects_are_errors() {
        assert_eq!(
            read("{\"y\": [1, 2]}", XY).unwrap_err(),
            "t.jsonl:1:7: input `y` is given an array or object, which is not a trace value"
        );
        assert_eq!(
            read("{\"y\": {}}", XY).unwrap_err(),
            "t.jsonl:1:7: input `y` is given an array or object, which is not a trace value"
        );
        assert_eq!(
            read("{}\n  [1]\n", XY).unwrap_err(),
            "t.jsonl:2:3: expected a JSON object (`{\"input\": value, ...}`) on each line"
        );
        assert_eq!(
            read("3\n", XY).unwrap_err(),
            "t.jsonl:1:1: expected a JSON object (`{\"input\": value, ...}`) on each line"
        );
    }

    #[test]
    fn malformed_json_is_located() {
        let e = read("{\"x\": 1,}", XY).unwrap_err();
        assert!(
            e.starts_with("t.jsonl:1:9: invalid JSON: trailing comma"),
            "{e}"
        );
        let e = read("{\"x\": 1} 2", XY).unwrap_err();
        assert!(
            e.starts_with("t.jsonl:1:10: invalid JSON: trailing characters"),
            "{e}"
        );
        let e = read("{\"x\": 1", XY).unwrap_err();
        assert!(e.starts_with("t.jsonl:1:"), "{e}");
        assert!(!e.contains(" at line "), "{e}");
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
        let src: Box<dyn BufRead> = Box::new(BufReader::new(Script(vec![
            b"{\"x\": 1}\n",
            b"{\"x\": 2}\n",
        ])));
        let mut r = reader_from_bufread("-", src, TraceFormat::Jsonl, &schema(XY)).unwrap();
        let mut row = vec![None, None];
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row[0], Some(Value::Int(1)));
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row[0], Some(Value::Int(2)));
    }
}
