//! Rules shared by every trace reader: looking up declared inputs by name,
//! checking a value against an input's declared type, inferring the value of
//! untyped text (CSV cells), the one rule for numeric literals that do not
//! fit, and how much of an offending value a diagnostic quotes.

use super::{InputSchema, TraceError, TraceErrorKind};
use crate::lang::types::Type;
use crate::value::Value;
use std::collections::HashMap;

/// An `InputSchema` prepared for reading one trace: the file name used in
/// error locations and a name index, so that each assignment, column or key
/// is resolved with one hash lookup.
pub(crate) struct Schema {
    pub(crate) file: String,
    pub(crate) names: Vec<String>,
    pub(crate) types: Vec<Type>,
    index: HashMap<String, usize>,
}

impl Schema {
    pub(crate) fn new(file: &str, schema: &InputSchema) -> Schema {
        let index = schema
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        // A schema with fewer types than names treats the rest as untyped
        // rather than panicking on an index.
        let types = (0..schema.names.len())
            .map(|i| schema.types.get(i).copied().unwrap_or(Type::Any))
            .collect();
        Schema {
            file: file.to_string(),
            names: schema.names.clone(),
            types,
            index,
        }
    }

    /// The position of a declared input, or `None` for a name the
    /// specification does not declare (such names are ignored).
    pub(crate) fn lookup(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    pub(crate) fn error(&self, line: usize, col: usize, message: impl Into<String>) -> TraceError {
        TraceError {
            file: self.file.clone(),
            line,
            col,
            message: message.into(),
            kind: TraceErrorKind::Malformed,
        }
    }

    /// Checks `value` against the declared type of input `i`; an Int given
    /// to a Float input is converted, as in the language's Int→Float rule.
    pub(crate) fn conform(&self, i: usize, value: Value) -> Result<Value, String> {
        conform(value, self.types[i], &self.names[i])
    }
}

/// Checks `value` against type `ty` (see `Schema::conform`). The error
/// message names the input and shows the offending value.
pub(crate) fn conform(value: Value, ty: Type, name: &str) -> Result<Value, String> {
    match (ty, value) {
        (Type::Any, v) => Ok(v),
        (Type::Float, Value::Int(i)) => Ok(Value::Float(i as f64)),
        (Type::Int, v @ Value::Int(_))
        | (Type::Float, v @ Value::Float(_))
        | (Type::Bool, v @ Value::Bool(_))
        | (Type::Str, v @ Value::Str(_))
        | (Type::Unit, v @ Value::Unit) => Ok(v),
        (ty, v) => Err(format!(
            "expected {ty} for input `{name}`, found {}",
            describe(&v)
        )),
    }
}

/// The most characters of an offending value or line a diagnostic quotes;
/// longer text is cut there and ends with `…`, so that a 10 MB line gives a
/// readable one-line message.
pub(crate) const EXCERPT_CHARS: usize = 64;

/// `text`, cut to [`EXCERPT_CHARS`] characters (with `…`) if it is longer.
pub(crate) fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A value as shown in diagnostics: its type, then its literal
/// (`Float 2.5`, `Str "a"`, `Unit ()`); a long string is cut (see
/// [`excerpt`]).
pub(crate) fn describe(v: &Value) -> String {
    match v {
        Value::Int(i) => format!("Int {i}"),
        Value::Float(x) => format!("Float {x:?}"),
        Value::Bool(b) => format!("Bool {b}"),
        Value::Str(s) => match s.char_indices().nth(EXCERPT_CHARS) {
            Some((cut, _)) => format!("Str {:?}…", &s[..cut]),
            None => format!("Str {:?}", &**s),
        },
        Value::Unit => "Unit ()".to_string(),
    }
}

/// Whether `token` is an integer literal: an optional sign and digits only.
pub(crate) fn is_integer(token: &str) -> bool {
    let digits = token.strip_prefix(['-', '+']).unwrap_or(token);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The value of an integer literal (see [`is_integer`]); one outside the
/// range of i64 is an error in every reader, as in the specification
/// language. `-0` is Int 0.
pub(crate) fn parse_int(token: &str) -> Result<i64, String> {
    token
        .parse::<i64>()
        .map_err(|_| format!("integer `{}` does not fit in Int (64 bits)", excerpt(token)))
}

/// The value of a float literal, or `None` if `token` is not one. A decimal
/// literal too large for f64 (`1e400`) is an error in every reader rather
/// than infinity; the spelled-out specials (`inf`, `-inf`, `nan`) keep their
/// meaning, and underflow (`1e-400`) rounds to zero.
pub(crate) fn parse_float(token: &str) -> Option<Result<f64, String>> {
    let x = token.parse::<f64>().ok()?;
    Some(
        if x.is_infinite() && token.bytes().any(|b| b.is_ascii_digit()) {
            Err(format!(
                "number `{}` does not fit in Float (64 bits)",
                excerpt(token)
            ))
        } else {
            Ok(x)
        },
    )
}

/// Infers the value of untyped text: Int, then Float (including `nan` and
/// `inf`), then Bool, then Unit (`()`), else the text itself as a Str.
/// Surrounding spaces are ignored for the non-Str readings (hand-written CSV
/// often has `x, y`), but a Str keeps the text exactly as written. A number
/// that does not fit its type is an error.
pub(crate) fn infer(text: &str) -> Result<Value, String> {
    let t = text.trim();
    if is_integer(t) {
        return parse_int(t).map(Value::Int);
    }
    if let Some(x) = parse_float(t) {
        return x.map(Value::Float);
    }
    Ok(match t {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "()" => Value::Unit,
        _ => Value::Str(text.into()),
    })
}

/// Parses untyped text for an input of type `ty`: a Str input takes the text
/// as it is (so `"1"` stays a string); any other type infers the text and
/// checks the result, so that `x: Int` given `2.5` reports the Float it saw.
pub(crate) fn parse_text(text: &str, ty: Type, name: &str) -> Result<Value, String> {
    match ty {
        Type::Str => Ok(Value::Str(text.into())),
        _ => conform(infer(text)?, ty, name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_converts_to_float_and_nothing_else_converts() {
        assert_eq!(
            conform(Value::Int(2), Type::Float, "x"),
            Ok(Value::Float(2.0))
        );
        assert_eq!(
            conform(Value::Float(2.5), Type::Int, "x"),
            Err("expected Int for input `x`, found Float 2.5".to_string())
        );
        assert_eq!(
            conform(Value::Str("a".into()), Type::Int, "x"),
            Err("expected Int for input `x`, found Str \"a\"".to_string())
        );
        assert_eq!(
            conform(Value::Int(1), Type::Bool, "b"),
            Err("expected Bool for input `b`, found Int 1".to_string())
        );
        assert!(conform(Value::Unit, Type::Str, "s").is_err());
        assert!(conform(Value::Bool(true), Type::Unit, "u").is_err());
    }

    #[test]
    fn any_takes_values_as_they_are() {
        for v in [
            Value::Int(1),
            Value::Float(1.5),
            Value::Str("s".into()),
            Value::Unit,
        ] {
            assert_eq!(conform(v.clone(), Type::Any, "a"), Ok(v));
        }
    }

    #[test]
    fn inference_order() {
        let infer = |t| infer(t).unwrap();
        assert_eq!(infer("3"), Value::Int(3));
        assert_eq!(infer("-9223372036854775808"), Value::Int(i64::MIN));
        assert_eq!(infer("-0"), Value::Int(0));
        assert_eq!(infer("2.5"), Value::Float(2.5));
        assert_eq!(infer("1e3"), Value::Float(1000.0));
        assert_eq!(infer("1e-400"), Value::Float(0.0));
        assert!(matches!(infer("nan"), Value::Float(x) if x.is_nan()));
        assert_eq!(infer("-inf"), Value::Float(f64::NEG_INFINITY));
        assert_eq!(infer("true"), Value::Bool(true));
        assert_eq!(infer("()"), Value::Unit);
        assert_eq!(infer(" 7 "), Value::Int(7));
        assert_eq!(infer(" hi "), Value::Str(" hi ".into()));
    }

    #[test]
    fn numbers_that_do_not_fit_are_errors() {
        assert_eq!(
            infer("99999999999999999999"),
            Err("integer `99999999999999999999` does not fit in Int (64 bits)".to_string())
        );
        assert_eq!(
            infer("-1e400"),
            Err("number `-1e400` does not fit in Float (64 bits)".to_string())
        );
        assert_eq!(
            parse_text("1e400", Type::Float, "f"),
            Err("number `1e400` does not fit in Float (64 bits)".to_string())
        );
        // A Str input takes the text as it is.
        assert_eq!(
            parse_text("1e400", Type::Str, "s"),
            Ok(Value::Str("1e400".into()))
        );
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let long = "é".repeat(10_000);
        let e = conform(Value::Str(long.as_str().into()), Type::Int, "x").unwrap_err();
        assert_eq!(
            e,
            format!(
                "expected Int for input `x`, found Str {:?}…",
                "é".repeat(64)
            )
        );
        assert_eq!(excerpt("short"), "short");
        assert_eq!(excerpt(&"a".repeat(65)), format!("{}…", "a".repeat(64)));
        assert_eq!(excerpt(&"a".repeat(64)), "a".repeat(64));
    }

    #[test]
    fn typed_text() {
        assert_eq!(parse_text("1", Type::Str, "s"), Ok(Value::Str("1".into())));
        assert_eq!(parse_text("1", Type::Float, "f"), Ok(Value::Float(1.0)));
        assert!(
            matches!(parse_text("inf", Type::Float, "f"), Ok(Value::Float(x)) if x.is_infinite())
        );
        assert_eq!(parse_text("()", Type::Unit, "u"), Ok(Value::Unit));
        assert_eq!(
            parse_text("yes", Type::Bool, "b"),
            Err("expected Bool for input `b`, found Str \"yes\"".to_string())
        );
    }

    #[test]
    fn short_type_lists_default_to_any() {
        let s = Schema::new(
            "f",
            &InputSchema {
                names: vec!["a".into(), "b".into()],
                types: vec![Type::Int],
            },
        );
        assert_eq!(s.types, [Type::Int, Type::Any]);
        assert_eq!(s.lookup("b"), Some(1));
        assert_eq!(s.lookup("c"), None);
    }
}
