//! Reader for the Trustworthiness Checker's `.input` trace format.
//!
//! A trace is a sequence of step blocks:
//!
//! ```text
//! // a comment
//! 0: x = 1
//!    y = "a b"
//! 1:
//! 3: x = -2.5e3
//! ```
//!
//! A line whose first non-blank character is a digit is a step header
//! `N:`, optionally followed by an assignment; other non-blank,
//! non-comment lines are assignments `name = literal` belonging to the
//! current step. Step numbers increase; steps that are skipped (1 then 3)
//! are rows with every input absent. A block is complete when the next
//! header (or the end of the trace) is read, so on a pipe a row is returned
//! as soon as the following header arrives.

use super::source::{Lines, char_col};
use super::values::Schema;
use super::{RowReader, TraceError};
use crate::value::Value;

pub(crate) struct TcReader {
    lines: Lines,
    schema: Schema,
    /// The step number of the next row to return.
    next_step: u64,
    /// The block being read: its step number and its assignments so far.
    /// `None` before the first header and after the end of the trace.
    block: Option<Block>,
    ended: bool,
}

struct Block {
    step: u64,
    values: Vec<Option<Value>>,
}

/// One classified line of the trace.
enum Line {
    /// Blank or a full-line comment.
    Nothing,
    /// `N:`, with the byte offset of the rest of the line (after the colon).
    Header { step: u64, rest: usize },
    /// A line holding an assignment, starting at this byte offset.
    Assignment(usize),
}

impl TcReader {
    pub(crate) fn new(lines: Lines, schema: Schema) -> TcReader {
        TcReader {
            lines,
            schema,
            next_step: 0,
            block: None,
            ended: false,
        }
    }
}

impl RowReader for TcReader {
    fn next_row(&mut self, row: &mut [Option<Value>]) -> Result<bool, TraceError> {
        if self.block.is_none() && (self.ended || !self.read_first_header()?) {
            self.ended = true;
            return Ok(false);
        }
        let Some(block) = self.block.as_mut() else {
            return Ok(false);
        };
        // A gap before the current block: the missing steps are empty rows,
        // known to be complete without reading further.
        if self.next_step < block.step {
            row.fill(None);
            self.next_step += 1;
            return Ok(true);
        }
        loop {
            let Some((line_no, text)) = self.lines.next_line()? else {
                move_values(&mut block.values, row);
                self.block = None;
                self.ended = true;
                self.next_step += 1;
                return Ok(true);
            };
            match classify(text, line_no, &self.schema)? {
                Line::Nothing => {}
                Line::Assignment(at) => assign(text, at, line_no, &self.schema, &mut block.values)?,
                Line::Header { step, rest } => {
                    if step <= block.step {
                        let col = char_col(text, text.len() - text.trim_start().len());
                        let what = if step == block.step {
                            "repeats"
                        } else {
                            "goes back from"
                        };
                        return Err(self.schema.error(
                            line_no,
                            col,
                            format!(
                                "step {step} {what} step {}: step numbers must increase",
                                block.step
                            ),
                        ));
                    }
                    move_values(&mut block.values, row);
                    block.step = step;
                    self.next_step += 1;
                    assign_rest(text, rest, line_no, &self.schema, &mut block.values)?;
                    return Ok(true);
                }
            }
        }
    }
}

impl TcReader {
    /// Reads up to the first step header. Returns `false` if the trace has
    /// none (it is empty, or holds only blank lines and comments).
    fn read_first_header(&mut self) -> Result<bool, TraceError> {
        while let Some((line_no, text)) = self.lines.next_line()? {
            match classify(text, line_no, &self.schema)? {
                Line::Nothing => {}
                Line::Assignment(at) => {
                    return Err(self.schema.error(
                        line_no,
                        char_col(text, at),
                        "assignment before the first step header (`0:`)",
                    ));
                }
                Line::Header { step, rest } => {
                    let mut values = vec![None; self.schema.len()];
                    assign_rest(text, rest, line_no, &self.schema, &mut values)?;
                    self.block = Some(Block { step, values });
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

/// Moves a finished block's cells into the caller's row, leaving the block
/// empty for the next step.
fn move_values(values: &mut [Option<Value>], row: &mut [Option<Value>]) {
    debug_assert_eq!(values.len(), row.len(), "row sized for a different schema");
    row.fill(None);
    for (r, v) in row.iter_mut().zip(values.iter_mut()) {
        *r = v.take();
    }
}

fn is_comment(rest: &str) -> bool {
    rest.starts_with("//")
}

fn classify(text: &str, line_no: usize, schema: &Schema) -> Result<Line, TraceError> {
    let body = text.trim_start();
    let start = text.len() - body.len();
    if body.is_empty() || is_comment(body) {
        return Ok(Line::Nothing);
    }
    let first = body.as_bytes()[0];
    if first == b'-' && body.as_bytes().get(1).is_some_and(u8::is_ascii_digit) {
        return Err(schema.error(
            line_no,
            char_col(text, start),
            "step numbers cannot be negative",
        ));
    }
    if !first.is_ascii_digit() {
        return Ok(Line::Assignment(start));
    }
    let digits = body.bytes().take_while(u8::is_ascii_digit).count();
    let step: u64 = body[..digits]
        .parse()
        .map_err(|_| schema.error(line_no, char_col(text, start), "step number too large"))?;
    let after = start + digits;
    let colon = after + (text[after..].len() - text[after..].trim_start().len());
    if !text[colon..].starts_with(':') {
        return Err(schema.error(
            line_no,
            char_col(text, colon),
            format!("expected `:` after step number {step}"),
        ));
    }
    Ok(Line::Header {
        step,
        rest: colon + 1,
    })
}

/// Applies what follows a header's colon: nothing, a comment, or an assignment.
fn assign_rest(
    text: &str,
    rest: usize,
    line_no: usize,
    schema: &Schema,
    values: &mut [Option<Value>],
) -> Result<(), TraceError> {
    let body = text[rest..].trim_start();
    if body.is_empty() || is_comment(body) {
        return Ok(());
    }
    assign(text, text.len() - body.len(), line_no, schema, values)
}

/// Parses `name = literal` starting at byte `at` of `text` and stores the
/// value if `name` is a declared input.
fn assign(
    text: &str,
    at: usize,
    line_no: usize,
    schema: &Schema,
    values: &mut [Option<Value>],
) -> Result<(), TraceError> {
    let err = |pos: usize, msg: String| schema.error(line_no, char_col(text, pos), msg);
    let bytes = text.as_bytes();
    let name_len = text[at..]
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    if name_len == 0 || bytes[at].is_ascii_digit() {
        return Err(err(
            at,
            "expected an input name or a step header `N:`".to_string(),
        ));
    }
    let name = &text[at..at + name_len];
    let mut pos = skip_spaces(text, at + name_len);
    if bytes.get(pos) != Some(&b'=') {
        return Err(err(pos, format!("expected `=` after `{name}`")));
    }
    pos = skip_spaces(text, pos + 1);
    let value_at = pos;
    let (value, end) = parse_literal(text, pos).map_err(|(p, m)| err(p, m))?;
    let end = skip_spaces(text, end);
    if end < text.len() && !is_comment(&text[end..]) {
        return Err(err(end, "unexpected text after the value".to_string()));
    }
    // Names the specification does not declare are ignored, but their
    // literals are still checked above: a malformed line is malformed.
    let Some(i) = schema.lookup(name) else {
        return Ok(());
    };
    if values[i].is_some() {
        return Err(err(
            at,
            format!("input `{name}` is assigned twice in this step"),
        ));
    }
    values[i] = Some(schema.conform(i, value).map_err(|m| err(value_at, m))?);
    Ok(())
}

fn skip_spaces(text: &str, from: usize) -> usize {
    from + text[from..].len() - text[from..].trim_start().len()
}

/// Parses one literal starting at byte `at`: `"string"`, `()`, `true`,
/// `false`, an integer, or a float (`1.5`, `-0.0`, `2.5e3`, `nan`, `inf`,
/// `-inf`). Returns the value and the byte offset just after it, or the
/// offset and text of an error.
fn parse_literal(text: &str, at: usize) -> Result<(Value, usize), (usize, String)> {
    let rest = &text[at..];
    if rest.is_empty() {
        return Err((at, "expected a value after `=`".to_string()));
    }
    if rest.starts_with('"') {
        return parse_string(text, at);
    }
    if rest.starts_with("()") {
        return Ok((Value::Unit, at + 2));
    }
    let len = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let token = &rest[..len];
    // A comment may follow the value without a space (`x = 1// note`).
    let (token, len) = match token.find("//") {
        Some(c) if c > 0 => (&token[..c], c),
        _ => (token, len),
    };
    let value = match token {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ if is_integer(token) => match token.parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => {
                return Err((
                    at,
                    format!("integer `{token}` does not fit in Int (64 bits)"),
                ));
            }
        },
        _ => match token.parse::<f64>() {
            Ok(x) => Value::Float(x),
            Err(_) => return Err((at, format!("invalid value `{token}`"))),
        },
    };
    Ok((value, at + len))
}

fn is_integer(token: &str) -> bool {
    let digits = token.strip_prefix(['-', '+']).unwrap_or(token);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Parses a double-quoted string with the escapes `\"`, `\\`, `\n`, `\t`
/// and `\r`.
fn parse_string(text: &str, at: usize) -> Result<(Value, usize), (usize, String)> {
    let mut out = String::new();
    let mut chars = text[at + 1..].char_indices().map(|(i, c)| (i + at + 1, c));
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((Value::Str(out.into()), i + 1)),
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

    /// Reads every row, or the first error rendered as `file:line:col: msg`.
    fn read(text: &str, decls: &[(&str, Type)]) -> Result<Vec<Vec<Option<Value>>>, String> {
        let s = schema(decls);
        let mut r = reader_from_bytes("t.input", text.as_bytes().to_vec(), TraceFormat::Tc, &s)
            .map_err(|e| e.to_string())?;
        let mut rows = Vec::new();
        let mut row = vec![None; decls.len()];
        while r.next_row(&mut row).map_err(|e| e.to_string())? {
            rows.push(row.clone());
        }
        Ok(rows)
    }

    fn err(text: &str, decls: &[(&str, Type)]) -> String {
        read(text, decls).unwrap_err()
    }

    const XY: &[(&str, Type)] = &[("x", Type::Int), ("y", Type::Any)];

    #[test]
    fn blocks_with_continuation_lines() {
        let rows = read("0: x = 1\n   y = 2\n1: x = 3\n   y = 4.5\n", XY).unwrap();
        assert_eq!(
            rows,
            [
                vec![Some(Value::Int(1)), Some(Value::Int(2))],
                vec![Some(Value::Int(3)), Some(Value::Float(4.5))],
            ]
        );
    }

    #[test]
    fn empty_headers_gaps_blank_lines_and_comments() {
        let text = "// header comment\n\n0:\n   // inside\n2: y = true // trailing\n\n5:\n";
        let rows = read(text, XY).unwrap();
        let empty = vec![None, None];
        assert_eq!(rows.len(), 6);
        assert_eq!(rows[0], empty);
        assert_eq!(rows[1], empty);
        assert_eq!(rows[2], vec![None, Some(Value::Bool(true))]);
        assert_eq!(rows[3..], [empty.clone(), empty.clone(), empty]);
    }

    #[test]
    fn a_trace_may_start_after_step_zero() {
        let rows = read("2: x = 1", XY).unwrap();
        assert_eq!(
            rows,
            [
                vec![None, None],
                vec![None, None],
                vec![Some(Value::Int(1)), None]
            ]
        );
    }

    #[test]
    fn empty_traces() {
        assert_eq!(read("", XY).unwrap().len(), 0);
        assert_eq!(read("\n// nothing\n  \n", XY).unwrap().len(), 0);
    }

    #[test]
    fn literals() {
        let decls = &[("a", Type::Any)];
        let one = |lit: &str| {
            read(&format!("0: a = {lit}\n"), decls).unwrap()[0][0]
                .clone()
                .unwrap()
        };
        assert_eq!(one("-9223372036854775808"), Value::Int(i64::MIN));
        assert_eq!(one("9223372036854775807"), Value::Int(i64::MAX));
        assert_eq!(one("1.5"), Value::Float(1.5));
        assert_eq!(one("-0.0"), Value::Float(-0.0));
        assert_eq!(one("2.5e3"), Value::Float(2500.0));
        assert!(matches!(one("nan"), Value::Float(x) if x.is_nan()));
        assert_eq!(one("inf"), Value::Float(f64::INFINITY));
        assert_eq!(one("-inf"), Value::Float(f64::NEG_INFINITY));
        assert_eq!(one("true"), Value::Bool(true));
        assert_eq!(one("false"), Value::Bool(false));
        assert_eq!(one("\"hello world\""), Value::Str("hello world".into()));
        assert_eq!(
            one(r#""say \"hi\" \\o/""#),
            Value::Str(r#"say "hi" \o/"#.into())
        );
        assert_eq!(one("\"a // b\""), Value::Str("a // b".into()));
        assert_eq!(one("()"), Value::Unit);
    }

    #[test]
    fn int_converts_to_float_for_float_inputs() {
        let rows = read("0: f = 2", &[("f", Type::Float)]).unwrap();
        assert_eq!(rows[0][0], Some(Value::Float(2.0)));
    }

    #[test]
    fn undeclared_names_are_ignored() {
        let rows = read("0: z = 9\n   x = 1\n   z = 10\n", XY).unwrap();
        assert_eq!(rows, [vec![Some(Value::Int(1)), None]]);
    }

    #[test]
    fn type_mismatches_are_located_at_the_value() {
        assert_eq!(
            err("0: x = 1\n1:   x =  2.5\n", XY),
            "t.input:2:11: expected Int for input `x`, found Float 2.5"
        );
        assert_eq!(
            err("0:\n  x = \"a\"", XY),
            "t.input:2:7: expected Int for input `x`, found Str \"a\""
        );
    }

    #[test]
    fn step_numbers_must_increase() {
        assert_eq!(
            err("0: x = 1\n1:\n1: x = 2\n", XY),
            "t.input:3:1: step 1 repeats step 1: step numbers must increase"
        );
        assert_eq!(
            err("3: x = 1\n 2:\n", XY),
            "t.input:2:2: step 2 goes back from step 3: step numbers must increase"
        );
    }

    #[test]
    fn rows_before_an_error_are_returned() {
        let s = schema(XY);
        let mut r = reader_from_bytes(
            "t",
            b"0: x = 1\n1: x = 2\n0:\n".to_vec(),
            TraceFormat::Tc,
            &s,
        )
        .unwrap();
        let mut row = vec![None, None];
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row[0], Some(Value::Int(1)));
        assert!(r.next_row(&mut row).is_err());
    }

    #[test]
    fn assigned_twice_is_an_error() {
        assert_eq!(
            err("0: x = 1\n   y = 1\n   x = 2\n", XY),
            "t.input:3:4: input `x` is assigned twice in this step"
        );
    }

    #[test]
    fn malformed_lines_are_located() {
        assert_eq!(
            err("x = 1\n", XY),
            "t.input:1:1: assignment before the first step header (`0:`)"
        );
        assert_eq!(
            err("0 x = 1\n", XY),
            "t.input:1:3: expected `:` after step number 0"
        );
        assert_eq!(
            err("-1: x = 1\n", XY),
            "t.input:1:1: step numbers cannot be negative"
        );
        assert_eq!(err("0: x 1\n", XY), "t.input:1:6: expected `=` after `x`");
        assert_eq!(
            err("0: x =\n", XY),
            "t.input:1:7: expected a value after `=`"
        );
        assert_eq!(
            err("0: x = 1 2\n", XY),
            "t.input:1:10: unexpected text after the value"
        );
        assert_eq!(err("0: y = abc\n", XY), "t.input:1:8: invalid value `abc`");
        assert_eq!(
            err("0: y = \"abc\n", XY),
            "t.input:1:8: unterminated string"
        );
        assert_eq!(
            err("0: y = \"a\\qb\"\n", XY),
            "t.input:1:10: unknown escape `\\q` in string"
        );
        assert_eq!(
            err("0: = 1\n", XY),
            "t.input:1:4: expected an input name or a step header `N:`"
        );
        assert_eq!(
            err("0: x = 9223372036854775808\n", XY),
            "t.input:1:8: integer `9223372036854775808` does not fit in Int (64 bits)"
        );
        assert_eq!(
            err("99999999999999999999999:\n", XY),
            "t.input:1:1: step number too large"
        );
        assert_eq!(
            err("0: é = ?\n", XY),
            "t.input:1:4: expected an input name or a step header `N:`"
        );
        assert_eq!(err("0: y = é\n", XY), "t.input:1:8: invalid value `é`");
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(
            err("0: y = \"é\" x\n", XY),
            "t.input:1:12: unexpected text after the value"
        );
    }

    #[test]
    fn crlf_line_endings() {
        let rows = read("0: x = 1\r\n   y = \"a\"\r\n", XY).unwrap();
        assert_eq!(
            rows,
            [vec![Some(Value::Int(1)), Some(Value::Str("a".into()))]]
        );
    }

    /// A source that hands out one scripted chunk per `read` and panics if
    /// asked for more: a reader that reads ahead would block on a pipe.
    struct Script(Vec<&'static [u8]>);

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            assert!(
                !self.0.is_empty(),
                "the reader read ahead of the row it needed"
            );
            let chunk = self.0.remove(0);
            buf[..chunk.len()].copy_from_slice(chunk);
            Ok(chunk.len())
        }
    }

    #[test]
    fn a_block_is_returned_when_the_next_header_arrives() {
        let chunks: Vec<&'static [u8]> = vec![
            b"0: x = 1
",
            b"   y = 2
",
            b"3: x = 4
",
            b"",
        ];
        let src: Box<dyn BufRead> = Box::new(BufReader::new(Script(chunks)));
        let mut r = reader_from_bufread("-", src, TraceFormat::Tc, &schema(XY)).unwrap();
        let mut row = vec![None, None];
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row, [Some(Value::Int(1)), Some(Value::Int(2))]);
        // The empty rows of the gap need no further input.
        assert!(r.next_row(&mut row).unwrap());
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row, [None, None]);
        // Step 3 is complete at the end of the input (the empty chunk).
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row, [Some(Value::Int(4)), None]);
        assert!(!r.next_row(&mut row).unwrap());
        assert!(!r.next_row(&mut row).unwrap());
    }
}
