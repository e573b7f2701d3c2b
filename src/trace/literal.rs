//! The values of the `.input` format: scalars, strings, and containers written in the
//! specification language's form (`List(1, 2)`, `Map("a": 1)`) or in JSON's (`[1, 2]`,
//! `{"a": 1}`), the forms the Trustworthiness Checker reads.
//!
//! A value is one of:
//!
//! - `true`, `false`, `()`;
//! - a number: an integer (`3`, `-0`, `+7`) is an Int and must fit in 64 bits, a decimal
//!   (`1.5`, `.5`, `2.`, `2.5e3`, `inf`, `-inf`, `nan`) is a Float (`values::parse_int`,
//!   `values::parse_float`);
//! - a string in double quotes, with the escapes `\"`, `\\`, `\n`, `\t` and `\r` (any other
//!   escape is an error);
//! - a list, `[a, b]` or `List(a, b)` (a space or tab may come between `List` and `(`);
//! - a map, `{"k": a, "l": b}` or `Map("k": a, "l": b)`: its keys are strings, a key given
//!   twice keeps its last value, and its entries are kept in key order.
//!
//! Inside a container the elements are values of the same kinds, separated by commas, with
//! any whitespace around them; an empty container is `[]`, `{}`, `List()` or `Map()` (spaces
//! inside are allowed, where the checker wants none). A trailing comma is an error, as it is
//! to the checker. A value ends on its line, containers nest at most `MAX_VALUE_NESTING`
//! deep (`[[1]]` nests 2 deep), and every malformed value is an error located at the byte
//! where it goes wrong (at the opening bracket of a container its line does not close).

use super::values::{is_integer, parse_float, parse_int};
use crate::row::excerpt;
use crate::value::{MAX_VALUE_NESTING, MapEntries, Value};
use std::sync::Arc;

/// An error in a line: the byte offset it is located at, and its message.
type Fail = (usize, String);

/// The byte after the whitespace starting at `from` (Unicode whitespace,
/// as `str::trim_start` has it; ASCII is skipped byte by byte, the rest is
/// left to `trim_start`).
pub(super) fn skip_spaces(text: &str, from: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = from;
    while bytes.get(i).is_some_and(|b| matches!(b, b' ' | b'\t')) {
        i += 1;
    }
    match bytes.get(i) {
        Some(b) if !b.is_ascii() || b.is_ascii_whitespace() || *b == 0x0b => {
            i + text[i..].len() - text[i..].trim_start().len()
        }
        _ => i,
    }
}

/// Parses one value starting at byte `at` of the line `text` (see the
/// module's documentation). Returns the value and the byte offset just
/// after it, or the offset and text of an error.
pub(super) fn parse_literal(text: &str, at: usize) -> Result<(Value, usize), Fail> {
    let rest = &text[at..];
    if rest.is_empty() {
        return Err((at, "expected a value after `=`".to_string()));
    }
    if rest.starts_with('"') {
        return parse_string(text, at);
    }
    if let Some(open) = opener(text, at) {
        return container(text, at, open, 1);
    }
    if rest.starts_with("()") {
        return Ok((Value::Unit, at + 2));
    }
    // Byte scans: the token ends at whitespace (ASCII, or any Unicode
    // whitespace after a non-ASCII byte, as `char::is_whitespace` has it);
    // `str::find` with a closure or a string pattern cost a fifth of the
    // reader's time.
    let bytes = rest.as_bytes();
    let len = match bytes
        .iter()
        .position(|b| b.is_ascii_whitespace() || *b == 0x0b || !b.is_ascii())
    {
        Some(i) if !bytes[i].is_ascii() => {
            i + rest[i..]
                .find(char::is_whitespace)
                .unwrap_or(rest.len() - i)
        }
        Some(i) => i,
        None => rest.len(),
    };
    let token = &rest[..len];
    // A comment may follow the value without a space (`x = 1// note`).
    let comment = token
        .bytes()
        .enumerate()
        .position(|(i, b)| b == b'/' && token.as_bytes().get(i + 1) == Some(&b'/'));
    let (token, len) = match comment {
        Some(c) if c > 0 => (&token[..c], c),
        _ => (token, len),
    };
    Ok((scalar(token, at)?, at + len))
}

/// The value of a token that is not a string, unit or container: a Bool,
/// an Int or a Float (`at` locates its errors).
fn scalar(token: &str, at: usize) -> Result<Value, Fail> {
    Ok(match token {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ if is_integer(token) => Value::Int(parse_int(token).map_err(|m| (at, m))?),
        _ => match parse_float(token) {
            Some(x) => Value::Float(x.map_err(|m| (at, m))?),
            None => return Err((at, format!("invalid value `{}`", excerpt(token)))),
        },
    })
}

/// Parses a double-quoted string with the escapes `\"`, `\\`, `\n`, `\t`
/// and `\r`.
fn parse_string(text: &str, at: usize) -> Result<(Value, usize), Fail> {
    let (s, end) = string(text, at)?;
    Ok((Value::Str(s.into()), end))
}

/// The text of the double-quoted string starting at byte `at`, and the
/// byte after its closing quote.
fn string(text: &str, at: usize) -> Result<(String, usize), Fail> {
    let mut out = String::new();
    let mut chars = text[at + 1..].char_indices().map(|(i, c)| (i + at + 1, c));
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, i + 1)),
            '\\' => match chars.next() {
                Some((_, '"')) => out.push('"'),
                Some((_, '\\')) => out.push('\\'),
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, other)) => {
                    return Err((i, format!("unknown escape `\\{other}` in string")));
                }
                None => break,
            },
            c => out.push(c),
        }
    }
    Err((at, "unterminated string".to_string()))
}

/// The opening of a container: what it makes and where its contents start.
#[derive(Clone, Copy)]
struct Open {
    /// A map (`{`, `Map(`), else a list (`[`, `List(`).
    map: bool,
    /// The byte that closes it.
    close: u8,
    /// The byte after the opening bracket.
    inner: usize,
}

/// The container opened at byte `at`, if one is: `[`, `{`, or `List` or
/// `Map` followed by `(` (spaces or tabs between them, as the checker
/// allows).
fn opener(text: &str, at: usize) -> Option<Open> {
    let bytes = text.as_bytes();
    let (map, close, after) = match bytes.get(at)? {
        b'[' => {
            return Some(Open {
                map: false,
                close: b']',
                inner: at + 1,
            });
        }
        b'{' => {
            return Some(Open {
                map: true,
                close: b'}',
                inner: at + 1,
            });
        }
        b'L' if text[at..].starts_with("List") => (false, b')', at + 4),
        b'M' if text[at..].starts_with("Map") => (true, b')', at + 3),
        _ => return None,
    };
    let paren = after
        + bytes[after..]
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t'))
            .count();
    (bytes.get(paren) == Some(&b'(')).then_some(Open {
        map,
        close,
        inner: paren + 1,
    })
}

/// Whether nothing of the value can follow byte `pos`: the line ends there,
/// or a comment starts.
fn line_ends(text: &str, pos: usize) -> bool {
    text.get(pos..)
        .is_none_or(|rest| rest.is_empty() || rest.starts_with("//"))
}

/// What is at byte `pos`, for a message: the character, or the end of the
/// line.
fn found(text: &str, pos: usize) -> String {
    match text.get(pos..).and_then(|rest| rest.chars().next()) {
        Some(c) if !line_ends(text, pos) => format!("`{c}`"),
        _ => "the end of the line".to_string(),
    }
}

/// Parses the container that `open` opens at byte `at`, the `depth`-th
/// container of the value counted from the outermost: its elements, and the
/// byte after its closing bracket.
fn container(text: &str, at: usize, open: Open, depth: usize) -> Result<(Value, usize), Fail> {
    // Refused before anything inside is read, so the parse recurses no
    // deeper than the bound, however deep the text nests.
    if depth > MAX_VALUE_NESTING {
        return Err((
            at,
            format!(
                "the value nests containers more than {MAX_VALUE_NESTING} deep, the limit for values"
            ),
        ));
    }
    let bytes = text.as_bytes();
    let close = char::from(open.close);
    let unclosed = || {
        (
            at,
            format!(
                "unclosed `{}`: a value must end on its line",
                &text[at..open.inner]
            ),
        )
    };
    let mut items = Vec::new();
    let mut entries = MapEntries::new();
    let mut pos = skip_spaces(text, open.inner);
    // An empty container closes at once; any other element is required.
    let mut closed = bytes.get(pos) == Some(&open.close);
    while !closed {
        if line_ends(text, pos) {
            return Err(unclosed());
        }
        let key = if open.map {
            if bytes.get(pos) != Some(&b'"') {
                return Err((
                    pos,
                    format!(
                        "expected a string key (`\"key\": value`), found {}",
                        found(text, pos)
                    ),
                ));
            }
            let (key, end) = string(text, pos)?;
            pos = skip_spaces(text, end);
            if bytes.get(pos) != Some(&b':') {
                return Err((
                    pos,
                    format!("expected `:` after the key, found {}", found(text, pos)),
                ));
            }
            pos = skip_spaces(text, pos + 1);
            if line_ends(text, pos) {
                return Err(unclosed());
            }
            Some(key)
        } else {
            None
        };
        let (value, end) = element(text, pos, depth)?;
        match key {
            // A key given twice keeps its last value, as the checker's
            // maps (and JSON objects read into maps) do.
            Some(key) => {
                entries.insert(key.into(), value);
            }
            None => items.push(value),
        }
        pos = skip_spaces(text, end);
        match bytes.get(pos) {
            Some(&b) if b == open.close => closed = true,
            Some(b',') => {
                pos = skip_spaces(text, pos + 1);
                if bytes.get(pos) == Some(&open.close) {
                    return Err((
                        pos,
                        "expected a value after `,` (a trailing comma is not allowed)".to_string(),
                    ));
                }
            }
            _ if line_ends(text, pos) => return Err(unclosed()),
            _ => {
                return Err((
                    pos,
                    format!("expected `,` or `{close}`, found {}", found(text, pos)),
                ));
            }
        }
    }
    let value = if open.map {
        Value::Map(Arc::new(entries))
    } else {
        Value::list(items)
    };
    Ok((value, pos + 1))
}

/// Whether byte `b` ends a token inside a container.
fn delimits(b: u8) -> bool {
    matches!(
        b,
        b',' | b'[' | b']' | b'{' | b'}' | b'(' | b')' | b':' | b'"'
    ) || b.is_ascii_whitespace()
        || b == 0x0b
}

/// Parses one element of a container at byte `pos` (not the end of the
/// line), inside the `depth`-th container: a value of any kind, whose token
/// ends at whitespace, punctuation or a comment.
fn element(text: &str, pos: usize, depth: usize) -> Result<(Value, usize), Fail> {
    let rest = &text[pos..];
    if rest.starts_with('"') {
        return parse_string(text, pos);
    }
    if let Some(open) = opener(text, pos) {
        return container(text, pos, open, depth + 1);
    }
    if rest.starts_with("()") {
        return Ok((Value::Unit, pos + 2));
    }
    let mut len = 0;
    for (i, c) in rest.char_indices() {
        let ends = if c.is_ascii() {
            delimits(c as u8) || rest[i..].starts_with("//")
        } else {
            c.is_whitespace()
        };
        if ends {
            break;
        }
        len = i + c.len_utf8();
    }
    if len == 0 {
        return Err((pos, format!("expected a value, found {}", found(text, pos))));
    }
    Ok((scalar(&rest[..len], pos)?, pos + len))
}

#[cfg(test)]
mod tests {
    use super::parse_literal;
    use crate::value::{MAX_VALUE_NESTING, Value};
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// The value of the whole of `text`, printed as the text output prints it.
    fn shown(text: &str) -> String {
        match parse_literal(text, 0) {
            Ok((v, end)) => {
                assert_eq!(end, text.len(), "{text}: the value ends early");
                v.to_string()
            }
            Err((at, m)) => panic!("{text}: error at byte {at}: {m}"),
        }
    }

    /// The error for `text`: its byte offset and message.
    fn error(text: &str) -> (usize, String) {
        match parse_literal(text, 0) {
            Ok((v, end)) => panic!("{text}: read {v} up to byte {end}"),
            Err(e) => e,
        }
    }

    #[test]
    fn json_style_lists_and_maps() {
        assert_eq!(shown("[1, 2, 3]"), "List([Int(1), Int(2), Int(3)])");
        assert_eq!(shown("[1,2,3]"), "List([Int(1), Int(2), Int(3)])");
        assert_eq!(shown("[ 1 ,\t2 ]"), "List([Int(1), Int(2)])");
        assert_eq!(
            shown(r#"{"time": 0, "value": 5.0}"#),
            r#"Map({"time": Int(0), "value": Float(5.0)})"#
        );
        assert_eq!(
            shown(r#"{"b":1,"a":[true, "x y", ()]}"#),
            r#"Map({"a": List([Bool(true), Str("x y"), Unit]), "b": Int(1)})"#
        );
        assert_eq!(
            shown(r#"[{"k": [[-1.5e3, nan]]}, []]"#),
            r#"List([Map({"k": List([List([Float(-1500.0), Float(NaN)])])}), List([])])"#
        );
    }

    #[test]
    fn dsrv_style_lists_and_maps() {
        assert_eq!(shown("List(0, 1, 2)"), "List([Int(0), Int(1), Int(2)])");
        assert_eq!(shown("List (0)"), "List([Int(0)])");
        assert_eq!(shown("List()"), "List([])");
        assert_eq!(
            shown(r#"Map("x": 0, "y": List(1))"#),
            r#"Map({"x": Int(0), "y": List([Int(1)])})"#
        );
        assert_eq!(shown("Map()"), "Map({})");
        // The forms mix.
        assert_eq!(
            shown(r#"[List(1), Map("a": {"b": []})]"#),
            r#"List([List([Int(1)]), Map({"a": Map({"b": List([])})})])"#
        );
    }

    #[test]
    fn empty_containers_may_hold_spaces() {
        for (text, want) in [
            ("[]", "List([])"),
            ("[ ]", "List([])"),
            ("{}", "Map({})"),
            ("{ \t}", "Map({})"),
            ("List( )", "List([])"),
            ("Map( )", "Map({})"),
        ] {
            assert_eq!(shown(text), want, "{text}");
        }
    }

    #[test]
    fn numbers_in_containers_follow_the_rule_of_every_number() {
        assert_eq!(
            shown("[-0, +7, .5, 2., 1e3, inf, -inf]"),
            "List([Int(0), Int(7), Float(0.5), Float(2.0), Float(1000.0), Float(inf), Float(-inf)])"
        );
        assert_eq!(
            error("[1, 1e400]"),
            (
                4,
                "number `1e400` does not fit in Float (64 bits)".to_string()
            )
        );
        assert_eq!(
            error("[9223372036854775808]"),
            (
                1,
                "integer `9223372036854775808` does not fit in Int (64 bits)".to_string()
            )
        );
    }

    #[test]
    fn strings_in_containers_keep_their_escapes_and_punctuation() {
        assert_eq!(
            shown(r#"["a, b]", "say \"hi\"", "\\", "x // y", "é"]"#),
            r#"List([Str("a, b]"), Str("say \"hi\""), Str("\\"), Str("x // y"), Str("é")])"#
        );
        assert_eq!(
            shown(r#"{"k\"ey": 1, "": 2}"#),
            r#"Map({"": Int(2), "k\"ey": Int(1)})"#
        );
        assert_eq!(
            error(r#"["a\qb"]"#),
            (3, "unknown escape `\\q` in string".to_string())
        );
        assert_eq!(error(r#"["ab]"#), (1, "unterminated string".to_string()));
    }

    /// A key given twice keeps its last value, as the checker's maps do.
    #[test]
    fn a_repeated_key_keeps_its_last_value() {
        assert_eq!(shown(r#"{"a": 1, "a": 2}"#), r#"Map({"a": Int(2)})"#);
    }

    #[test]
    fn a_value_ends_where_its_container_closes() {
        assert_eq!(parse_literal("x = [1] // c", 4).unwrap().1, 7);
        assert_eq!(parse_literal("x = Map() 2", 4).unwrap().1, 9);
        // A word that only starts like a container is a token.
        assert_eq!(
            parse_literal("x = Listing", 4).unwrap_err(),
            (4, "invalid value `Listing`".to_string())
        );
        assert_eq!(
            parse_literal("x = List", 4).unwrap_err(),
            (4, "invalid value `List`".to_string())
        );
    }

    #[test]
    fn malformed_containers_are_located() {
        let cases: &[(&str, usize, &str)] = &[
            ("[1,", 0, "unclosed `[`: a value must end on its line"),
            ("[1, 2", 0, "unclosed `[`: a value must end on its line"),
            ("[", 0, "unclosed `[`: a value must end on its line"),
            (
                "List (1 // c",
                0,
                "unclosed `List (`: a value must end on its line",
            ),
            (r#"{"a":"#, 0, "unclosed `{`: a value must end on its line"),
            ("[1, [2]", 0, "unclosed `[`: a value must end on its line"),
            (
                "[1,]",
                3,
                "expected a value after `,` (a trailing comma is not allowed)",
            ),
            (
                r#"{"a": 1, }"#,
                9,
                "expected a value after `,` (a trailing comma is not allowed)",
            ),
            ("[,]", 1, "expected a value, found `,`"),
            ("[1 2]", 3, "expected `,` or `]`, found `2`"),
            ("[1}", 2, "expected `,` or `]`, found `}`"),
            ("List(1]", 6, "expected `,` or `)`, found `]`"),
            ("[abc]", 1, "invalid value `abc`"),
            ("[1//]", 0, "unclosed `[`: a value must end on its line"),
            ("[(1)]", 1, "expected a value, found `(`"),
            (
                "{a: 1}",
                1,
                "expected a string key (`\"key\": value`), found `a`",
            ),
            (
                "Map(1: 2)",
                4,
                "expected a string key (`\"key\": value`), found `1`",
            ),
            (r#"{"a" 1}"#, 5, "expected `:` after the key, found `1`"),
            (
                r#"{"a""#,
                4,
                "expected `:` after the key, found the end of the line",
            ),
        ];
        for &(text, at, message) in cases {
            assert_eq!(error(text), (at, message.to_string()), "{text}");
        }
    }

    /// Containers nest up to the bound on values and not one level more;
    /// text nested far deeper is refused at the first level too many,
    /// without the parse recursing past it.
    #[test]
    fn nesting_is_bounded() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let (v, _) = parse_literal(&nested(MAX_VALUE_NESTING), 0).unwrap();
        assert!(!v.nests_deeper_than(MAX_VALUE_NESTING));
        let message = format!(
            "the value nests containers more than {MAX_VALUE_NESTING} deep, the limit for values"
        );
        assert_eq!(
            error(&nested(MAX_VALUE_NESTING + 1)),
            (MAX_VALUE_NESTING, message.clone())
        );
        let deep = format!("{}{}", "List(".repeat(100_000), ")".repeat(100_000));
        assert_eq!(error(&deep), (5 * MAX_VALUE_NESTING, message.clone()));
        let maps = r#"{"a": "#.repeat(100_000);
        assert_eq!(error(&maps), (6 * MAX_VALUE_NESTING, message));
    }

    /// A value as a trace writes it: each container in JSON's form or the
    /// language's, with its own spacing.
    #[derive(Clone, Debug)]
    enum Written {
        Leaf(Value),
        List {
            dsrv: bool,
            space: &'static str,
            items: Vec<Written>,
        },
        Map {
            dsrv: bool,
            space: &'static str,
            entries: Vec<(String, Written)>,
        },
    }

    /// A string literal for `s`, escaped as the reader unescapes it.
    fn quoted(s: &str) -> String {
        let mut out = String::from('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    impl Written {
        fn text(&self) -> String {
            match self {
                Written::Leaf(Value::Str(s)) => quoted(s),
                Written::Leaf(Value::Unit) => "()".to_string(),
                Written::Leaf(Value::Float(x)) => format!("{x:?}"),
                Written::Leaf(Value::Int(i)) => i.to_string(),
                Written::Leaf(Value::Bool(b)) => b.to_string(),
                Written::Leaf(other) => unreachable!("not a leaf: {other}"),
                Written::List { dsrv, space, items } => {
                    let sep = format!("{space},{space}");
                    let inner: Vec<String> = items.iter().map(Written::text).collect();
                    let (open, close) = if *dsrv { ("List(", ")") } else { ("[", "]") };
                    format!("{open}{space}{}{space}{close}", inner.join(&sep))
                }
                Written::Map {
                    dsrv,
                    space,
                    entries,
                } => {
                    let sep = format!("{space},{space}");
                    let inner: Vec<String> = entries
                        .iter()
                        .map(|(k, v)| format!("{}{space}:{space}{}", quoted(k), v.text()))
                        .collect();
                    let (open, close) = if *dsrv { ("Map(", ")") } else { ("{", "}") };
                    format!("{open}{space}{}{space}{close}", inner.join(&sep))
                }
            }
        }

        /// The value the reader should read (a key given twice keeps its
        /// last value).
        fn value(&self) -> Value {
            match self {
                Written::Leaf(v) => v.clone(),
                Written::List { items, .. } => {
                    Value::list(items.iter().map(Written::value).collect())
                }
                Written::Map { entries, .. } => {
                    let mut map = crate::value::MapEntries::new();
                    for (k, v) in entries {
                        map.insert(k.as_str().into(), v.value());
                    }
                    Value::Map(std::sync::Arc::new(map))
                }
            }
        }
    }

    fn written() -> impl Strategy<Value = Written> {
        let text = "[a-z ,:\\[\\]{}()\"\\\\/é\t\n]{0,6}";
        let leaf = prop_oneof![
            any::<i64>().prop_map(Value::Int),
            any::<f64>()
                .prop_filter("NaN has many spellings", |x| !x.is_nan())
                .prop_map(Value::Float),
            any::<bool>().prop_map(Value::Bool),
            Just(Value::Unit),
            text.prop_map(|s: String| Value::Str(s.into())),
        ]
        .prop_map(Written::Leaf);
        let space = prop_oneof![Just(""), Just(" "), Just("\t "), Just("  ")];
        leaf.prop_recursive(4, 32, 5, move |inner| {
            prop_oneof![
                (any::<bool>(), space.clone(), vec(inner.clone(), 0..5))
                    .prop_map(|(dsrv, space, items)| Written::List { dsrv, space, items }),
                (
                    any::<bool>(),
                    space.clone(),
                    vec(("[a-c\"]{0,2}", inner), 0..5)
                )
                    .prop_map(|(dsrv, space, entries)| Written::Map {
                        dsrv,
                        space,
                        entries
                    }),
            ]
        })
    }

    proptest! {
        /// Whatever a trace writes in either form, with any spacing, reads
        /// back as the value written, up to its last byte.
        #[test]
        fn written_values_read_back(w in written()) {
            let text = w.text();
            let got = parse_literal(&text, 0);
            prop_assert_eq!(got, Ok((w.value(), text.len())), "{}", text);
        }

        /// Any line made of the grammar's own characters is a value or an
        /// error inside the line, never a panic.
        #[test]
        fn any_text_is_a_value_or_a_located_error(
            text in "[0-9a-zLMpstI ,:\\[\\]{}()\"\\\\/.e+\\-é\t]{0,40}"
        ) {
            match parse_literal(&text, 0) {
                Ok((_, end)) => prop_assert!(end <= text.len()),
                Err((at, _)) => prop_assert!(at <= text.len()),
            }
        }
    }

    #[test]
    fn scalars_are_read_as_before() {
        for (text, want) in [
            ("1", Value::Int(1)),
            ("-2.5", Value::Float(-2.5)),
            ("true", Value::Bool(true)),
            ("()", Value::Unit),
            ("\"a b\"", Value::Str("a b".into())),
        ] {
            assert_eq!(parse_literal(text, 0).unwrap().0, want, "{text}");
        }
    }
}
