//! Rules shared by every trace reader: looking up declared inputs by name,
//! inferring the value of untyped text (CSV cells), and the one rule for
//! numeric literals that do not fit. Checking a value against an input's
//! declared type, and how much of an offending value a diagnostic quotes,
//! are the rules of every row (`crate::row`), used here as they are.

use super::{InputSchema, TraceError, TraceErrorKind};
use crate::lang::types::Type;
use crate::row::conform;
use crate::row::excerpt;
use crate::value::Value;

/// Up to this many inputs, a name is looked up by comparing it with each.
const FEW_NAMES: usize = 8;

/// An `InputSchema` prepared for reading one trace: the file name used in
/// error locations and a name index, so that each assignment, column or key
/// is resolved with one hash lookup.
pub(crate) struct Schema {
    pub(crate) file: String,
    pub(crate) names: Vec<String>,
    pub(crate) types: Vec<Type>,
    /// hashbrown's map with its default hasher (foldhash): the lookup is
    /// made for every assignment of a `.input` trace, and SipHash cost a
    /// tenth of reading one.
    index: hashbrown::HashMap<String, usize>,
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
        if self.names.len() <= FEW_NAMES {
            return self.scan(name.as_bytes());
        }
        self.index.get(name).copied()
    }

    /// A few names are found faster by comparing them than by hashing.
    /// Names are short: they are compared byte by byte in place, since a
    /// slice comparison calls `memcmp`, whose call cost most of the lookup
    /// (9% of reading an `.input` trace of the add scenario, profiled).
    #[inline]
    fn scan(&self, name: &[u8]) -> Option<usize> {
        self.names.iter().position(|n| {
            let n = n.as_bytes();
            n.len() == name.len() && n.iter().zip(name).all(|(a, b)| a == b)
        })
    }

    /// As `lookup`, for a name given as bytes (an ASCII identifier a
    /// reader's byte scan found): no UTF-8 check for a few names.
    pub(crate) fn lookup_bytes(&self, name: &[u8]) -> Option<usize> {
        if self.names.len() <= FEW_NAMES {
            return self.scan(name);
        }
        std::str::from_utf8(name).ok().and_then(|n| self.lookup(n))
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

    /// Checks `value` against the declared type of input `i` with the one
    /// rule of every row (`row::conform`: an Int given to a Float input is
    /// converted); the error is the message the readers report.
    pub(crate) fn conform(&self, i: usize, value: Value) -> Result<Value, String> {
        conform(value, self.types[i], &self.names[i]).map_err(|e| e.to_string())
    }
}

/// Whether `token` is an integer literal: an optional sign and digits only.
pub(crate) fn is_integer(token: &str) -> bool {
    let digits = token.strip_prefix(['-', '+']).unwrap_or(token);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The value of `-123` or `123` (ASCII digits, an optional minus, nothing
/// else) if it fits in i64: the common case of every reader, read without
/// making a `str`. `None` for anything else, which the reader's general
/// rule then reads (with its errors), so this only ever agrees with it.
#[inline]
pub(crate) fn plain_int(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, bytes),
    };
    if digits.is_empty() {
        return None;
    }
    // Accumulated negatively so that i64::MIN fits.
    let mut value: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
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
        // A container is its JSON text (as vigil's CSV output writes it),
        // read by the JSON-lines rule.
        Type::List | Type::Tuple | Type::Map => {
            super::jsonl::value_from_text(text.trim(), ty, name)
        }
        _ => conform(infer(text)?, ty, name).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ints_agree_with_the_general_rule() {
        for text in [
            "0",
            "-0",
            "7",
            "-15",
            "007",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "-9223372036854775809",
            "",
            "-",
            "+5",
            " 5",
            "5 ",
            "1.5",
            "1e3",
            "--1",
            "12a",
        ] {
            let general = infer(text).ok().and_then(|v| match v {
                Value::Int(i) if text.bytes().all(|b| b == b'-' || b.is_ascii_digit()) => Some(i),
                _ => None,
            });
            assert_eq!(plain_int(text.as_bytes()), general, "{text:?}");
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
