//! Reader for JSON-lines traces: one JSON object per line, one line per step.
//!
//! A key that is a declared input assigns it; a missing key leaves it absent;
//! other keys are ignored, since objects from real pipelines carry extra
//! fields. A declared input given twice in one object is an error, as a
//! repeated assignment is in the other formats. `null` is Unit. A number
//! written as an integer (no fraction, no exponent) is an Int, and must fit
//! in 64 bits (`-0` is Int 0); every other number is a Float, and one too
//! large for f64 (`1e400`) is an error. Arrays and objects are not values of
//! the language and are rejected. Blank lines are skipped.
//!
//! Each line is first parsed into its entries — keys and `RawValue`s, which
//! are slices of the line itself — in order, keeping repeated keys: only the
//! values of declared inputs are then decoded, and a wrong value can be
//! reported at its exact column.

use super::source::{Lines, char_col, utf8_line};
use super::values::{Schema, is_integer, parse_float, parse_int};
use super::{RowReader, TraceError};
use crate::lang::types::Type;
use crate::row::{RowError, conform, excerpt};
use crate::value::{MAX_VALUE_NESTING, Value};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

pub(crate) struct JsonlReader {
    lines: Lines,
    schema: Schema,
    /// Which inputs the current line has assigned (reused across lines).
    seen: Vec<bool>,
    /// Whether the last error was in a line that was read whole (its text,
    /// not the reading of it), so that the next line can be read.
    line_error: bool,
}

impl JsonlReader {
    pub(crate) fn new(lines: Lines, schema: Schema) -> JsonlReader {
        let seen = vec![false; schema.len()];
        JsonlReader {
            lines,
            schema,
            seen,
            line_error: false,
        }
    }
}

impl RowReader for JsonlReader {
    fn next_row(&mut self, row: &mut [Option<Value>]) -> Result<bool, TraceError> {
        loop {
            // A failed read (an I/O error, a truncated file) leaves the
            // source where it cannot go on; a line read whole can be skipped.
            self.line_error = false;
            let raw = match self.lines.next_raw() {
                Ok(Some(raw)) => raw,
                Ok(None) => return Ok(false),
                Err(e) => return Err(e),
            };
            self.line_error = true;
            let line_no = raw.number;
            let text = utf8_line(&self.schema.file, line_no, raw.text)?;
            if text.trim().is_empty() {
                continue;
            }
            read_object(text, line_no, &self.schema, &mut self.seen, row)?;
            return Ok(true);
        }
    }

    fn can_continue(&self) -> bool {
        self.line_error
    }

    /// A row is one line: the next row starts after the last line read.
    fn position(&self) -> Option<super::TracePosition> {
        Some(self.lines.position())
    }
}

/// A key of an object: a slice of the line when it has no escapes (so its
/// column is known), else the decoded string.
enum Key<'a> {
    Borrowed(&'a str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(s))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(s))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// The entries of one object, in order, repeated keys included.
struct Entries<'a>(Vec<(Key<'a>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Entries<'de>, M::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(entry) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(EntriesVisitor)
    }
}

/// The byte offset of `part` in `text`, which it is a slice of.
fn offset_in(text: &str, part: &str) -> usize {
    (part.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize)
}

/// Where JSON `text` first opens an array or object more than `limit`
/// deep (`[[1]]` reaches 2), as a byte offset, if it does. It scans the
/// bytes without parsing (strings skipped, escapes included), so the
/// parsers that follow, which recurse per level, never see deeper text.
/// Malformed text is left to them.
pub(crate) fn too_deep(text: &str, limit: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in text.as_bytes().iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// The message of a value nested too deep.
fn too_deep_message() -> String {
    format!(
        "the value nests arrays or objects more than {} deep, the limit for values",
        MAX_VALUE_NESTING
    )
}

pub(super) fn read_object(
    text: &str,
    line_no: usize,
    schema: &Schema,
    seen: &mut [bool],
    row: &mut [Option<Value>],
) -> Result<(), TraceError> {
    // The line's object is one level; its values may nest the limit below it.
    if let Some(at) = too_deep(text, MAX_VALUE_NESTING + 1) {
        return Err(schema.error(line_no, char_col(text, at), too_deep_message()));
    }
    let body = text.trim_start();
    let start = text.len() - body.len();
    if !body.starts_with('{') {
        return Err(schema.error(
            line_no,
            char_col(text, start),
            "expected a JSON object (`{\"input\": value, ...}`) on each line",
        ));
    }
    let Entries(entries) = serde_json::from_str(text).map_err(|e| {
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
    seen.fill(false);
    for (key, raw) in &entries {
        let Some(i) = schema.lookup(key.as_str()) else {
            continue;
        };
        // The raw value borrows from `text`, so its offset is its column.
        let value_at = offset_in(text, raw.get());
        if seen[i] {
            // At the key's opening quote when the key is a slice of the
            // line, else at its value.
            let at = match key {
                Key::Borrowed(k) => offset_in(text, k).saturating_sub(1),
                Key::Owned(_) => value_at,
            };
            return Err(schema.error(
                line_no,
                char_col(text, at),
                format!(
                    "key `{}` appears twice in this object (input `{}` is assigned twice in this step)",
                    schema.names[i], schema.names[i]
                ),
            ));
        }
        seen[i] = true;
        let value = decode(raw.get(), schema.types[i], &schema.names[i])
            .map_err(|m| schema.error(line_no, char_col(text, value_at), m))?;
        row[i] = Some(value);
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

/// A JSON value as the JSON rule ([`json_value`]) sees it: taken from the
/// text of a line by the reader, or from a parsed `serde_json::Value` by
/// `Monitor::row_from_json` ([`serde_value`]).
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    Str(&'a str),
    /// A number, as written.
    Number(&'a str),
    /// An array or an object, parsed.
    Compound(&'a serde_json::Value),
}

/// The JSON-lines rule: the value that JSON value `j` gives input `name` of
/// type `ty`. `null` is Unit; a number written as an integer is an Int and
/// must fit in 64 bits, any other number is a Float and must not overflow;
/// a Float input also accepts the strings of [`NON_FINITE`]; an array is a
/// List (a Tuple for a Tuple input) and an object a Map, for inputs declared
/// with a container type only (elsewhere they are not values), their parts
/// by the same rule. The result then passes `row::conform`.
pub(crate) fn json_value(j: Json<'_>, ty: Type, name: &str) -> Result<Value, RowError> {
    let value = match j {
        Json::Null => Value::Unit,
        Json::Bool(b) => Value::Bool(b),
        Json::Str(s) => match NON_FINITE.iter().find(|(text, _)| *text == s) {
            Some((_, x)) if ty == Type::Float => Value::Float(*x),
            _ => Value::Str(s.into()),
        },
        Json::Number(text) => number(text).map_err(|message| RowError::InvalidNumber {
            input: name.to_string(),
            message,
        })?,
        Json::Compound(v) if matches!(ty, Type::List | Type::Tuple | Type::Map) => {
            let value = container(v, name)?;
            return match (ty, value) {
                (Type::Tuple, Value::List(items)) => Ok(Value::tuple(items.to_vec())),
                (_, value) => conform(value, ty, name),
            };
        }
        Json::Compound(_) => {
            return Err(RowError::NotAValue {
                input: name.to_string(),
            });
        }
    };
    conform(value, ty, name)
}

/// A container input's value from its JSON text: arrays are Lists, objects
/// Maps (a key given twice keeps its last value, as in any JSON object
/// read into a map), every other value by the rule of an `Any` input.
fn raw_container(raw: &str, name: &str) -> Result<Value, String> {
    match raw.as_bytes().first() {
        Some(b'[') => {
            let items: Vec<&RawValue> =
                serde_json::from_str(raw).map_err(|e| format!("invalid JSON array: {e}"))?;
            let items = items
                .iter()
                .map(|x| raw_container(x.get(), name))
                .collect::<Result<_, _>>()?;
            Ok(Value::list(items))
        }
        Some(b'{') => {
            let Entries(entries) =
                serde_json::from_str(raw).map_err(|e| format!("invalid JSON object: {e}"))?;
            let mut map = crate::value::MapEntries::new();
            for (k, x) in entries {
                map.insert(k.as_str().into(), raw_container(x.get(), name)?);
            }
            Ok(Value::Map(std::sync::Arc::new(map)))
        }
        _ => decode(raw, Type::Any, name),
    }
}

/// A JSON value inside a container input: arrays are Lists, objects Maps,
/// scalars by the JSON rule for an `Any` input.
fn container(v: &serde_json::Value, name: &str) -> Result<Value, RowError> {
    use serde_json::Value as J;
    Ok(match v {
        J::Array(items) => Value::list(
            items
                .iter()
                .map(|x| container(x, name))
                .collect::<Result<_, _>>()?,
        ),
        J::Object(entries) => Value::Map(std::sync::Arc::new(
            entries
                .iter()
                .map(|(k, x)| Ok((k.as_str().into(), container(x, name)?)))
                .collect::<Result<_, RowError>>()?,
        )),
        scalar => serde_value(scalar, Type::Any, name)?,
    })
}

/// A JSON number: integers by their spelling, as in the other formats, so
/// that `-0` is Int 0 and a too-large integer is an error rather than a
/// Float.
fn number(text: &str) -> Result<Value, String> {
    if is_integer(text) {
        return parse_int(text).map(Value::Int);
    }
    match parse_float(text) {
        Some(x) => x.map(Value::Float),
        None => Err(format!("invalid JSON value `{}`", excerpt(text))),
    }
}

/// The JSON rule for a value `serde_json` has already parsed. Such a number
/// has lost its spelling unless serde_json's `arbitrary_precision` feature is
/// on: by default serde_json reads `-0` and integers beyond the range of u64
/// as floats, and so they are Floats here (and an Int input rejects them);
/// every other number is read as the reader reads its text.
pub(crate) fn serde_value(v: &serde_json::Value, ty: Type, name: &str) -> Result<Value, RowError> {
    use serde_json::Value as J;
    let j = match v {
        J::Null => Json::Null,
        J::Bool(b) => Json::Bool(*b),
        J::String(s) => Json::Str(s),
        // The common case, an integer that fits, needs no text.
        J::Number(n) => match n.as_i64() {
            Some(i) => return conform(Value::Int(i), ty, name),
            None => return json_value(Json::Number(&n.to_string()), ty, name),
        },
        J::Array(_) | J::Object(_) => Json::Compound(v),
    };
    json_value(j, ty, name)
}

/// The value JSON text `text` gives input `name` of type `ty` by the
/// JSON-lines rule (a container input's cell of a CSV trace).
pub(crate) fn value_from_text(text: &str, ty: Type, name: &str) -> Result<Value, String> {
    if too_deep(text, MAX_VALUE_NESTING).is_some() {
        return Err(too_deep_message());
    }
    serde_json::from_str::<&RawValue>(text).map_err(|e| format!("invalid JSON value: {e}"))?;
    decode(text, ty, name)
}

/// Decodes one raw JSON value (already validated as JSON by the parse of
/// its line) for input `name` of type `ty`.
fn decode(raw: &str, ty: Type, name: &str) -> Result<Value, String> {
    let text;
    let parsed;
    let j = match raw.as_bytes().first() {
        Some(b'"') => {
            text = serde_json::from_str::<String>(raw)
                .map_err(|e| format!("invalid JSON string: {e}"))?;
            Json::Str(&text)
        }
        // A container input's parts follow the rule of an `Any` input,
        // each from its own text (so an integer too large for an Int is an
        // error there too, not a Float).
        Some(b'[' | b'{') if matches!(ty, Type::List | Type::Tuple | Type::Map) => {
            return match (ty, raw_container(raw, name)?) {
                (Type::Tuple, Value::List(items)) => Ok(Value::tuple(items.to_vec())),
                (_, value) => conform(value, ty, name).map_err(|e| e.to_string()),
            };
        }
        Some(b'[' | b'{') => {
            parsed = serde_json::from_str::<serde_json::Value>(raw)
                .map_err(|e| format!("invalid JSON value: {e}"))?;
            Json::Compound(&parsed)
        }
        _ => match raw {
            "null" => Json::Null,
            "true" => Json::Bool(true),
            "false" => Json::Bool(false),
            _ => Json::Number(raw),
        },
    };
    json_value(j, ty, name).map_err(|e| e.to_string())
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
    fn arrays_and_objects_for_container_inputs_only() {
        let decls = [("l", Type::List), ("t", Type::Tuple), ("m", Type::Map)];
        let rows = read(
            r#"{"l": [1, 2.5, "a", [true, null]], "t": [1, 2], "m": {"b": 1, "a": {"c": []}}}"#,
            &decls,
        )
        .unwrap();
        let [Some(l), Some(t), Some(m)] = &rows[0][..] else {
            panic!("{rows:?}")
        };
        assert_eq!(
            l.to_string(),
            "List([Int(1), Float(2.5), Str(\"a\"), List([Bool(true), Unit])])"
        );
        assert_eq!(t.to_string(), "Tuple([Int(1), Int(2)])");
        assert_eq!(t.type_name(), "Tuple");
        assert_eq!(
            m.to_string(),
            "Map({\"a\": Map({\"c\": List([])}), \"b\": Int(1)})"
        );
        // A container for a scalar or untyped input, and a scalar for a
        // container input, are errors located at the value.
        let e = read(r#"{"x": [1]}"#, XY).unwrap_err();
        assert!(e.contains("t.jsonl:1:7"), "{e}");
        let e = read(r#"{"y": {"a": 1}}"#, XY).unwrap_err();
        assert!(e.contains("t.jsonl:1:7"), "{e}");
        let e = read(r#"{"l": 3}"#, &decls).unwrap_err();
        assert!(e.contains("expected List"), "{e}");
        let e = read(r#"{"l": [99999999999999999999]}"#, &decls).unwrap_err();
        assert!(e.contains("t.jsonl:1:7"), "{e}");
    }

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
        assert_eq!(one("-0"), Value::Int(0));
        assert_eq!(one("9.2e18"), Value::Float(9.2e18));
        assert_eq!(one("1e-400"), Value::Float(0.0));
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

    /// Parsed JSON values follow the reader's rule, except where serde_json
    /// has already lost a number's spelling (`-0`, integers beyond u64).
    #[test]
    fn parsed_values_follow_the_readers_rule() {
        use super::serde_value;
        use crate::row::RowError;
        let v = |text: &str, ty: Type| {
            let j: serde_json::Value = serde_json::from_str(text).unwrap();
            serde_value(&j, ty, "v").map_err(|e| e.to_string())
        };
        assert_eq!(
            v("-9223372036854775808", Type::Int),
            Ok(Value::Int(i64::MIN))
        );
        assert_eq!(v("3", Type::Float), Ok(Value::Float(3.0)));
        assert_eq!(v("2.0", Type::Any), Ok(Value::Float(2.0)));
        assert_eq!(v("1e300", Type::Float), Ok(Value::Float(1e300)));
        assert_eq!(v("\"inf\"", Type::Float), Ok(Value::Float(f64::INFINITY)));
        assert_eq!(v("\"inf\"", Type::Str), Ok(Value::Str("inf".into())));
        assert_eq!(v("null", Type::Unit), Ok(Value::Unit));
        assert_eq!(v("true", Type::Bool), Ok(Value::Bool(true)));
        assert_eq!(
            v("18446744073709551615", Type::Int),
            Err("integer `18446744073709551615` does not fit in Int (64 bits)".into())
        );
        assert_eq!(
            v("[1]", Type::Any),
            Err("input `v` is given an array or object, which is not a trace value".into())
        );
        // serde_json reads `-0` as the float -0.0.
        assert_eq!(
            v("-0", Type::Int),
            Err("expected Int for input `v`, found Float -0.0".into())
        );
        let j = serde_json::json!({"k": 1});
        assert!(matches!(
            serde_value(&j, Type::Any, "v"),
            Err(RowError::NotAValue { .. })
        ));
    }

    /// Issue 7: `-0` is Int 0 for an Int input, as in the other formats.
    #[test]
    fn minus_zero_is_int_zero() {
        assert_eq!(
            read("{\"x\": -0}", XY).unwrap(),
            [vec![Some(Value::Int(0)), None]]
        );
        let rows = read("{\"f\": -0}", &[("f", Type::Float)]).unwrap();
        assert_eq!(rows, [vec![Some(Value::Float(0.0))]]);
    }

    /// Issue 7: numbers that do not fit are errors located at the value's
    /// first character, with the same messages as the other formats.
    #[test]
    fn numbers_that_do_not_fit() {
        assert_eq!(
            read("{\"y\":   1e400}", XY).unwrap_err(),
            "t.jsonl:1:9: number `1e400` does not fit in Float (64 bits)"
        );
        assert_eq!(
            read("{\"y\": -9223372036854775809}", XY).unwrap_err(),
            "t.jsonl:1:7: integer `-9223372036854775809` does not fit in Int (64 bits)"
        );
        // Keys that are not declared inputs are not decoded.
        assert_eq!(read("{\"z\": 1e400}", XY).unwrap(), [vec![None, None]]);
    }

    /// Issue 7: a repeated key used to be accepted, the last one winning.
    #[test]
    fn a_repeated_key_is_an_error() {
        assert_eq!(
            read("{\"x\": 1}\n{\"x\": 1, \"y\": 2, \"x\": 2}", XY).unwrap_err(),
            "t.jsonl:2:18: key `x` appears twice in this object (input `x` is assigned twice in this step)"
        );
        // A key written with an escape is located at its value.
        assert_eq!(
            read("{\"x\": 1, \"\\u0078\": 2}", XY).unwrap_err(),
            "t.jsonl:1:20: key `x` appears twice in this object (input `x` is assigned twice in this step)"
        );
        // Keys that are not declared inputs may repeat.
        assert_eq!(
            read("{\"z\": 1, \"z\": 2, \"x\": 3}", XY).unwrap(),
            [vec![Some(Value::Int(3)), None]]
        );
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let long = "q".repeat(10_000_000);
        let e = read(&format!("{{\"x\": \"{long}\"}}"), XY).unwrap_err();
        assert_eq!(
            e,
            format!(
                "t.jsonl:1:7: expected Int for input `x`, found Str {:?}…",
                "q".repeat(64)
            )
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
        let src: Box<dyn BufRead + Send> = Box::new(BufReader::new(Script(vec![
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
