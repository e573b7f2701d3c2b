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
//! A line whose first non-blank character is a digit (or `-` and a digit) is
//! a step header `N:`, optionally followed by an assignment; other non-blank,
//! non-comment lines are assignments `name = literal` belonging to the
//! current step. A literal (`super::literal`) is a scalar, a string, or a
//! list or map in JSON's form (`[1, 2]`, `{"k": 1}`) or the language's
//! (`List(1, 2)`, `Map("k": 1)`), and ends on its line. Step numbers
//! increase; steps that are skipped (1 then 3) are rows with every input
//! absent, and at most `max_step_gap` steps may be skipped at once.
//!
//! A block is complete when the next header line (or the end of the trace)
//! is read, so on a pipe a row is returned as soon as the following header
//! arrives. A header line ends the block before it even when the header
//! itself is malformed: the finished block, and the empty rows of a gap
//! before a header whose step number is valid, are returned first and the
//! error is reported by the next call. A malformed assignment line belongs
//! to the block being read, which is then incomplete and not returned.
//!
//! The comment line `// vigil: time reset` (a comment to the Trustworthiness Checker) is a time
//! reset for `vigil run --time`: it ends the block being read, and the step numbers after it
//! start again from 0 (`RowReader::take_reset`).

use super::ReaderOptions;
use super::literal::{parse_literal, skip_spaces};
use super::source::{Lines, char_col, utf8_line};
use super::values::Schema;
use super::{RowReader, TraceError};
use crate::lang::types::Type;
use crate::row::excerpt;
use crate::value::Value;

pub(crate) struct TcReader {
    lines: Lines,
    schema: Schema,
    max_gap: u64,
    /// The step number of the next row to return.
    next_step: u64,
    /// The step of the block being read (its header has been read, its
    /// assignment lines are being gathered into `values`).
    block: Option<u64>,
    /// The assignments of the block being read, one cell per input.
    values: Vec<Option<Value>>,
    /// An error found on the header line that ended the previous block, to
    /// be reported once every row before `until` has been returned.
    pending: Option<Pending>,
    /// The trace has ended, or an error was reported: no more rows.
    ended: bool,
    /// An error was reported.
    failed: bool,
    /// Where the last header line read starts: a block or a gap still to
    /// return is read again from there after a resume (`position`).
    header_at: super::TracePosition,
    /// For a resumed reader, the step before the first header it reads,
    /// as the last finished block (step numbers must increase past it).
    resumed_prev: Option<u64>,
    /// A time reset followed the row just returned (`take_reset`).
    reset: bool,
}

struct Pending {
    until: u64,
    error: TraceError,
}

/// One classified line of the trace.
enum Line<'a> {
    /// Blank or a full-line comment.
    Nothing,
    /// The comment `// vigil: time reset`.
    Reset,
    /// A header line (its text, empty if it is not UTF-8): the parsed
    /// header, or why it is malformed.
    Header(Result<Header, TraceError>, &'a str),
    /// A line holding an assignment (`text`, starting at byte `at`).
    Assignment { text: &'a str, at: usize },
    /// A line that is not a header and cannot be read (not UTF-8): it
    /// belongs to the block being read.
    Invalid(TraceError),
}

/// What follows a header's colon: the line, for the general rule, or the
/// plain Int assignment a byte scan found there (`plain_header`).
enum Rest<'a> {
    Text(&'a str),
    Plain((usize, i64)),
}

/// A well-formed step header `N:`.
struct Header {
    step: u64,
    /// The 1-based column of the step number, for errors about it.
    col: usize,
    /// The byte offset of the rest of the line, after the colon.
    rest: usize,
    line_no: usize,
}

impl TcReader {
    pub(crate) fn new(lines: Lines, schema: Schema, options: ReaderOptions) -> TcReader {
        let values = vec![None; schema.len()];
        TcReader {
            lines,
            schema,
            max_gap: options.max_step_gap,
            next_step: 0,
            block: None,
            values,
            pending: None,
            ended: false,
            failed: false,
            header_at: super::TracePosition { offset: 0, line: 0 },
            resumed_prev: None,
            reset: false,
        }
    }

    /// A reader resuming at `lines` (a position this reader gave) after
    /// `rows` rows: the next row is step `rows`.
    pub(crate) fn resumed(
        lines: Lines,
        schema: Schema,
        options: ReaderOptions,
        rows: u64,
    ) -> TcReader {
        let mut r = TcReader::new(lines, schema, options);
        r.next_step = rows;
        r.resumed_prev = rows.checked_sub(1);
        r
    }

    /// Between rows, a block or gap whose header line has been read (or an
    /// error it raised, waiting for the rows before it) is read again from
    /// that line after a resume; with none, the next row starts after the
    /// last line read. Nothing after an error.
    fn resume_position(&self) -> Option<super::TracePosition> {
        if self.failed {
            None
        } else if self.block.is_some() || self.pending.is_some() {
            Some(self.header_at)
        } else {
            Some(self.lines.position())
        }
    }

    /// Ends the reader with `e`.
    fn fail(&mut self, e: TraceError) -> Result<bool, TraceError> {
        self.ended = true;
        self.failed = true;
        self.block = None;
        Err(e)
    }
}

/// Starts the block of `header` (followed by `rest`) once the block of step
/// `prev`, if any, has been returned and `next_step` is the step after it:
/// checks the step number and the gap, and applies the header's own
/// assignment to `values` (empty). Returns the block's step, or the error to
/// report once the rows before `Pending::until` are returned.
fn start_block(
    schema: &Schema,
    values: &mut [Option<Value>],
    (next_step, max_gap): (u64, u64),
    header: Header,
    rest: Rest<'_>,
    prev: Option<u64>,
) -> Result<u64, Pending> {
    let Header {
        step,
        col,
        rest: after,
        line_no,
    } = header;
    check_step(schema, (next_step, max_gap), (step, col, line_no), prev)?;
    let assigned = match rest {
        Rest::Text(text) => assign_rest(text, after, line_no, schema, values),
        // A new block's cells are all empty: the block before was moved
        // out, or there was none.
        Rest::Plain((i, value)) => {
            let stored = put_int(&mut values[i], value);
            debug_assert!(stored, "a new block's cells are empty");
            Ok(())
        }
    };
    match assigned {
        Ok(()) => Ok(step),
        // The step number is valid, so the empty rows of the gap before it
        // are complete and are returned before the error.
        Err(error) => {
            values.fill(None);
            Err(Pending { until: step, error })
        }
    }
}

/// Checks a block's step number (at column `col` of line `line_no`)
/// against the step of the block before, `prev`, and the bound on the gap
/// before it; `next_step` is the step of the next row to return.
fn check_step(
    schema: &Schema,
    (next_step, max_gap): (u64, u64),
    (step, col, line_no): (u64, usize, usize),
    prev: Option<u64>,
) -> Result<(), Pending> {
    if let Some(prev) = prev
        && step <= prev
    {
        let what = if step == prev {
            "repeats"
        } else {
            "goes back from"
        };
        return Err(Pending {
            until: next_step,
            error: schema.error(
                line_no,
                col,
                format!("step {step} {what} step {prev}: step numbers must increase"),
            ),
        });
    }
    // Every step before `next_step` has been returned, and `step` is at
    // least `next_step` (it is above `prev`, or the first header).
    let gap = step - next_step;
    if gap > max_gap {
        let after = match prev {
            Some(p) => format!("after step {p}"),
            None => "at the start of the trace".to_string(),
        };
        return Err(Pending {
            until: next_step,
            error: schema.error(
                line_no,
                col,
                format!(
                    "step {step} skips {gap} empty steps {after}, more than the bound of {max_gap} (raise it with --max-step-gap)"
                ),
            ),
        });
    }
    Ok(())
}

impl RowReader for TcReader {
    fn position(&self) -> Option<super::TracePosition> {
        self.resume_position()
    }

    fn take_reset(&mut self) -> bool {
        std::mem::take(&mut self.reset)
    }

    fn next_row(&mut self, row: &mut [Option<Value>]) -> Result<bool, TraceError> {
        loop {
            if let Some(p) = &self.pending {
                if self.next_step < p.until {
                    row.fill(None);
                    self.next_step += 1;
                    return Ok(true);
                }
                let Some(p) = self.pending.take() else {
                    unreachable!("checked above")
                };
                return self.fail(p.error);
            }
            if self.ended {
                return Ok(false);
            }
            // A gap before the current block: the missing steps are empty
            // rows, known to be complete without reading further.
            if let Some(step) = self.block
                && self.next_step < step
            {
                row.fill(None);
                self.next_step += 1;
                return Ok(true);
            }
            let line = match self.lines.next_raw() {
                Ok(line) => line,
                Err(e) => return self.fail(e),
            };
            let Some(raw) = line else {
                self.ended = true;
                return Ok(match self.block.take() {
                    Some(step) => {
                        move_values(&mut self.values, row);
                        self.next_step = step.saturating_add(1);
                        true
                    }
                    None => false,
                });
            };
            // Most lines of a large trace are `name = 123` assignments of
            // Int inputs: those are read by a byte scan that makes no
            // `str`, and anything it does not recognise (or that would be
            // an error) goes the general way below.
            if self.block.is_some() && assign_plain_int(raw.text, &self.schema, &mut self.values) {
                continue;
            }
            // So are header lines `N: name = 123`, the other half of such
            // a trace: what follows is the header branch below, less the
            // UTF-8 check and the general parse.
            let plain = plain_header(raw.number, raw.text, &self.schema);
            let (header, rest) = match plain {
                Some((header, assignment)) => (Ok(header), Rest::Plain(assignment)),
                None => match classify(raw.number, raw.text, &self.schema) {
                    Line::Nothing => continue,
                    // A time reset ends the block being read, and step numbers
                    // start again after it; with no block being read (the
                    // trace's start, a second marker) there is nothing to reset.
                    Line::Reset => match self.block.take() {
                        Some(_) => {
                            move_values(&mut self.values, row);
                            self.next_step = 0;
                            self.reset = true;
                            return Ok(true);
                        }
                        None => continue,
                    },
                    Line::Invalid(e) => return self.fail(e),
                    Line::Assignment { text, at } => {
                        let result = if self.block.is_none() {
                            Err(self.schema.error(
                                raw.number,
                                char_col(text, at),
                                "assignment before the first step header (`0:`)",
                            ))
                        } else {
                            assign(text, at, raw.number, &self.schema, &mut self.values)
                        };
                        match result {
                            Ok(()) => continue,
                            Err(e) => return self.fail(e),
                        }
                    }
                    Line::Header(header, text) => (header, Rest::Text(text)),
                },
            };
            self.header_at = super::TracePosition {
                offset: raw.offset,
                line: raw.number as u64 - 1,
            };
            // A header line: the block being read is complete and is
            // returned now; what the header starts is settled after it.
            let finished = self.block.take();
            // After a resume, the step before it stands for the block that
            // header would have finished.
            let prev = finished.or(self.resumed_prev.take());
            if let Some(step) = finished {
                move_values(&mut self.values, row);
                self.next_step = step.saturating_add(1);
            }
            let started = header
                .map_err(|error| Pending {
                    until: self.next_step,
                    error,
                })
                .and_then(|header| {
                    start_block(
                        &self.schema,
                        &mut self.values,
                        (self.next_step, self.max_gap),
                        header,
                        rest,
                        prev,
                    )
                });
            match started {
                Ok(step) => self.block = Some(step),
                Err(p) => self.pending = Some(p),
            }
            if finished.is_some() {
                return Ok(true);
            }
        }
    }
}

/// Stores the value of a `name = -123` line (see `fast_int_assignment`)
/// whose input is not yet assigned in the block; `false` leaves the line
/// to the general reader (which reports a second assignment).
fn assign_plain_int(line: &[u8], schema: &Schema, values: &mut [Option<Value>]) -> bool {
    match fast_int_assignment(line, schema) {
        Some((i, value)) => put_int(&mut values[i], value),
        None => false,
    }
}

/// Stores Int `value` into `cell` if it is empty (`false`, untouched,
/// otherwise). Matching the empty cell first lets the store go straight
/// into it: assigned after an `is_none` check, the value was built on the
/// stack around the old cell's drop and copied in with one wide load over
/// two narrow stores, which stalled store forwarding on every value (a
/// quarter of the `.input` reader's row, profiled).
#[inline]
fn put_int(cell: &mut Option<Value>, value: i64) -> bool {
    match cell {
        None => {
            *cell = Some(Value::Int(value));
            true
        }
        Some(_) => false,
    }
}

/// A line `name = -123` (spaces and tabs around; no comment) assigning a
/// declared Int input a literal that fits in i64: the input's index and
/// the value. `None` for any other line, which the general reader then
/// reads (with its errors), so this only ever agrees with it.
fn fast_int_assignment(line: &[u8], schema: &Schema) -> Option<(usize, i64)> {
    let space = |at: usize| matches!(line.get(at), Some(b' ' | b'\t'));
    let mut at = 0;
    while space(at) {
        at += 1;
    }
    let name_start = at;
    match line.get(at) {
        Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {}
        _ => return None,
    }
    while line
        .get(at)
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    {
        at += 1;
    }
    let name = &line[name_start..at];
    while space(at) {
        at += 1;
    }
    if line.get(at) != Some(&b'=') {
        return None;
    }
    at += 1;
    while space(at) {
        at += 1;
    }
    // The value runs to the end of the line, less trailing spaces.
    let mut end = line.len();
    while end > at && space(end - 1) {
        end -= 1;
    }
    let value = super::values::plain_int(&line[at..end])?;
    let i = schema.lookup_bytes(name)?;
    (schema.types[i] == Type::Int).then_some((i, value))
}

/// A header line `N: name = -123` (spaces and tabs before the step number;
/// digits only, at most 19, so it fits; the colon right after them; then a
/// line `fast_int_assignment` reads): the header and the assignment. `None`
/// for any other line, which the general reader then reads.
fn plain_header(line_no: usize, line: &[u8], schema: &Schema) -> Option<(Header, (usize, i64))> {
    let start = line.iter().position(|b| !matches!(b, b' ' | b'\t'))?;
    let digits = line[start..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || digits > 19 || line.get(start + digits) != Some(&b':') {
        return None;
    }
    let step = line[start..start + digits]
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    let rest = start + digits + 1;
    let assignment = fast_int_assignment(&line[rest..], schema)?;
    let header = Header {
        step,
        // The line is ASCII up to here: a byte is a column.
        col: start + 1,
        rest,
        line_no,
    };
    Some((header, assignment))
}

/// Moves a finished block's cells into the caller's row, leaving the block
/// empty for the next step.
fn move_values(values: &mut [Option<Value>], row: &mut [Option<Value>]) {
    debug_assert_eq!(values.len(), row.len(), "row sized for a different schema");
    // Every cell of `row` is overwritten (so no `fill` first: it copied a
    // `None` over each cell through a stalled wide load).
    for (r, v) in row.iter_mut().zip(values.iter_mut()) {
        *r = v.take();
    }
}

fn is_comment(rest: &str) -> bool {
    rest.starts_with("//")
}

/// Classifies one line (given as bytes, so that a header line that is not
/// UTF-8 is still known to be a header line).
fn classify<'a>(line_no: usize, bytes: &'a [u8], schema: &Schema) -> Line<'a> {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let body = &bytes[start..];
    let is_header = match body {
        [b'-', d, ..] => d.is_ascii_digit(),
        [d, ..] => d.is_ascii_digit(),
        [] => false,
    };
    let text = match utf8_line(&schema.file, line_no, bytes) {
        Ok(text) => text,
        Err(e) if is_header => return Line::Header(Err(e), ""),
        Err(e) => return Line::Invalid(e),
    };
    if !is_header {
        let body = &text[start..];
        if body.trim_end() == "// vigil: time reset" {
            return Line::Reset;
        }
        if body.is_empty() || is_comment(body) {
            return Line::Nothing;
        }
        return Line::Assignment { text, at: start };
    }
    Line::Header(parse_header(text, start, line_no, schema), text)
}

/// Parses the header `N:` whose first character is at byte `start` of `text`.
fn parse_header(
    text: &str,
    start: usize,
    line_no: usize,
    schema: &Schema,
) -> Result<Header, TraceError> {
    let body = &text[start..];
    let col = char_col(text, start);
    if body.starts_with('-') {
        return Err(schema.error(line_no, col, "step numbers cannot be negative"));
    }
    let digits = body.bytes().take_while(u8::is_ascii_digit).count();
    let step: u64 = body[..digits].parse().map_err(|_| {
        schema.error(
            line_no,
            col,
            format!(
                "step number `{}` is too large (the largest is {})",
                excerpt(&body[..digits]),
                u64::MAX
            ),
        )
    })?;
    let after = start + digits;
    let colon = after + (text[after..].len() - text[after..].trim_start().len());
    if !text[colon..].starts_with(':') {
        return Err(schema.error(
            line_no,
            char_col(text, colon),
            format!("expected `:` after step number {step}"),
        ));
    }
    Ok(Header {
        step,
        col,
        rest: colon + 1,
        line_no,
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
    if assign_plain_int(&text.as_bytes()[rest..], schema, values) {
        return Ok(());
    }
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
        return Err(err(pos, format!("expected `=` after `{}`", excerpt(name))));
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
    // A list given to a Tuple input is a tuple, as an array is in the
    // other formats: the format has no tuple literal of its own.
    let value = match (schema.types[i], value) {
        (Type::Tuple, Value::List(items)) => Value::tuple(items.to_vec()),
        (_, value) => value,
    };
    values[i] = Some(schema.conform(i, value).map_err(|m| err(value_at, m))?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{
        InputSchema, ReaderOptions, TraceFormat, make_reader, reader_from_bufread,
        reader_from_bytes,
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

    #[test]
    fn a_time_reset_ends_the_block_and_restarts_the_step_numbers() {
        let s = schema(&[("x", Type::Int)]);
        let text = "// vigil: time reset\n0: x = 1\n2: x = 2\n// vigil: time reset\n// vigil: time reset\n0: x = 3\n";
        let mut r =
            reader_from_bytes("t.input", text.as_bytes().to_vec(), TraceFormat::Tc, &s).unwrap();
        let mut row = vec![None];
        let mut got = Vec::new();
        while r.next_row(&mut row).unwrap() {
            got.push((row[0].clone(), r.take_reset()));
        }
        let int = |i| Some(Value::Int(i));
        // A marker at the start, or right after another, resets nothing.
        assert_eq!(
            got,
            [
                (int(1), false),
                (None, false),
                (int(2), true),
                (int(3), false)
            ]
        );
    }

    fn err(text: &str, decls: &[(&str, Type)]) -> String {
        read(text, decls).unwrap_err()
    }

    /// The byte-scan path of `name = 123` lines agrees with the general
    /// reader at its edges: spacing, the extremes of Int, a Float input, a
    /// comment, an undeclared name; and what it declines is still an error
    /// where it was.
    #[test]
    fn plain_int_lines_read_as_the_general_rule_reads_them() {
        let decls = &[("x", Type::Int), ("f", Type::Float), ("a", Type::Any)];
        let text = "0: x=1\n f = 2\n\ta =\t-3\n1:\tx = -9223372036854775808  \n  y = 5\n2: x = 9223372036854775807 // max\n3: x = 007\n";
        let i = |v: i64| Some(Value::Int(v));
        assert_eq!(
            read(text, decls).unwrap(),
            vec![
                vec![i(1), Some(Value::Float(2.0)), i(-3)],
                vec![i(i64::MIN), None, None],
                vec![i(i64::MAX), None, None],
                vec![i(7), None, None],
            ]
        );
        assert_eq!(
            err("0: x = 9223372036854775808\n", decls),
            "t.input:1:8: integer `9223372036854775808` does not fit in Int (64 bits)"
        );
        assert_eq!(
            err("0: x = 1\n   x = 2\n", decls),
            "t.input:2:4: input `x` is assigned twice in this step"
        );
        assert_eq!(
            err("x = 1\n", decls),
            "t.input:1:1: assignment before the first step header (`0:`)"
        );
    }

    /// Header lines with a plain Int assignment (`plain_header`) read as the
    /// general rule reads them: gaps, the step checks and their columns,
    /// and the lines it leaves to the general rule (a space before the
    /// colon, a Float input, a step number of 20 digits).
    #[test]
    fn plain_header_lines_read_as_the_general_rule_reads_them() {
        let decls = &[("x", Type::Int), ("f", Type::Float)];
        let i = |v: i64| Some(Value::Int(v));
        assert_eq!(
            read(
                "0: x = 1\n  2:\tx = -2\n3 : x = 3\n4: f = 4\n\t5:x=5\n",
                decls
            )
            .unwrap(),
            vec![
                vec![i(1), None],
                vec![None, None],
                vec![i(-2), None],
                vec![i(3), None],
                vec![None, Some(Value::Float(4.0))],
                vec![i(5), None],
            ]
        );
        assert_eq!(
            err("  4: x = 1\n  4: x = 2\n", decls),
            "t.input:2:3: step 4 repeats step 4: step numbers must increase"
        );
        assert_eq!(
            err("4: x = 1\n\t3: x = 2\n", decls),
            "t.input:2:2: step 3 goes back from step 4: step numbers must increase"
        );
        assert_eq!(
            err("0: x = 1\n9999999999999999999: x = 2\n", decls),
            "t.input:2:1: step 9999999999999999999 skips 9999999999999999998 empty steps after step 0, more than the bound of 1000000 (raise it with --max-step-gap)"
        );
        assert_eq!(
            err("0: x = 1\n99999999999999999999: x = 2\n", decls),
            "t.input:2:1: step number `99999999999999999999` is too large (the largest is 18446744073709551615)"
        );
        // The rows before a header's error are returned first.
        assert_eq!(
            rows_then_error(
                "0: x = 1\n1: x = 2\n1: x = 3\n",
                decls,
                ReaderOptions::default()
            ),
            (
                vec![vec![i(1), None], vec![i(2), None]],
                Some("t.input:3:1: step 1 repeats step 1: step numbers must increase".to_string())
            )
        );
    }

    /// Every row the reader returns, then its error (if any), with bounds.
    fn rows_then_error(
        text: &str,
        decls: &[(&str, Type)],
        options: ReaderOptions,
    ) -> (Vec<Vec<Option<Value>>>, Option<String>) {
        let s = schema(decls);
        let src: Box<dyn BufRead + Send> = Box::new(std::io::Cursor::new(text.as_bytes().to_vec()));
        let mut r = make_reader("t.input", src, TraceFormat::Tc, &s, options);
        let mut rows = Vec::new();
        let mut row = vec![None; decls.len()];
        loop {
            match r.next_row(&mut row) {
                Ok(true) => rows.push(row.clone()),
                Ok(false) => return (rows, None),
                Err(e) => {
                    // The reader stays ended after its error.
                    assert_eq!(r.next_row(&mut row), Ok(false));
                    return (rows, Some(e.to_string()));
                }
            }
        }
    }

    fn int(i: i64) -> Option<Value> {
        Some(Value::Int(i))
    }

    const X: &[(&str, Type)] = &[("x", Type::Int)];

    /// Issue 7: a header line ends the block before it, so that block is
    /// returned before the header's error, whatever is wrong with it.
    #[test]
    fn the_block_before_a_malformed_header_is_returned() {
        let cases = [
            ("2: x = abc", "t.input:3:8: invalid value `abc`"),
            (
                "1: x = 3",
                "t.input:3:1: step 1 repeats step 1: step numbers must increase",
            ),
            (
                "0:",
                "t.input:3:1: step 0 goes back from step 1: step numbers must increase",
            ),
            ("2 x = 3", "t.input:3:3: expected `:` after step number 2"),
            ("-2: x = 3", "t.input:3:1: step numbers cannot be negative"),
            (
                "99999999999999999999: x = 3",
                "t.input:3:1: step number `99999999999999999999` is too large (the largest is 18446744073709551615)",
            ),
            (
                "2: x = \"a\"",
                "t.input:3:8: expected Int for input `x`, found Str \"a\"",
            ),
        ];
        for (third, want) in cases {
            let text = format!("0: x = 1\n1: x = 2\n{third}\n");
            let (rows, e) = rows_then_error(&text, X, ReaderOptions::default());
            assert_eq!(rows, [vec![int(1)], vec![int(2)]], "{third}");
            assert_eq!(e.as_deref(), Some(want), "{third}");
        }
    }

    #[test]
    fn a_header_line_that_is_not_utf8_still_ends_the_block() {
        let s = schema(X);
        let mut r = reader_from_bytes(
            "t",
            b"0: x = 1\n1: x = \xff\n".to_vec(),
            TraceFormat::Tc,
            &s,
        )
        .unwrap();
        let mut row = vec![None];
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row, [int(1)]);
        assert_eq!(
            r.next_row(&mut row).unwrap_err().to_string(),
            "t:2:8: the line is not valid UTF-8"
        );
    }

    /// A malformed assignment line belongs to the block being read, which
    /// is incomplete: it is not returned.
    #[test]
    fn a_malformed_continuation_line_drops_only_its_block() {
        let (rows, e) = rows_then_error(
            "0: x = 1\n1: x = 2\n   y = abc\n2: x = 3\n",
            XY,
            ReaderOptions::default(),
        );
        assert_eq!(rows, [vec![int(1), None]]);
        assert_eq!(e.as_deref(), Some("t.input:3:8: invalid value `abc`"));
    }

    /// The empty rows of a gap before a header with a valid step number are
    /// complete, and are returned before the error on that header.
    #[test]
    fn gap_rows_before_a_malformed_assignment_are_returned() {
        let (rows, e) = rows_then_error("0: x = 1\n5: x = abc\n", X, ReaderOptions::default());
        assert_eq!(
            rows,
            [vec![int(1)], vec![None], vec![None], vec![None], vec![None]]
        );
        assert_eq!(e.as_deref(), Some("t.input:2:8: invalid value `abc`"));
    }

    #[test]
    fn step_gaps_are_bounded() {
        let options = ReaderOptions { max_step_gap: 3 };
        // A gap of exactly the bound is fine.
        let (rows, e) = rows_then_error("0: x = 1\n4: x = 2\n", X, options);
        assert_eq!((rows.len(), e), (5, None));
        let (rows, e) = rows_then_error("0: x = 1\n5: x = 2\n", X, options);
        assert_eq!(rows, [vec![int(1)]]);
        assert_eq!(
            e.as_deref(),
            Some(
                "t.input:2:1: step 5 skips 4 empty steps after step 0, more than the bound of 3 (raise it with --max-step-gap)"
            )
        );
        let (rows, e) = rows_then_error("3: x = 2\n", X, options);
        assert_eq!((rows.len(), e), (4, None));
        let (rows, e) = rows_then_error(
            "  18446744073709551615: x = 2\n",
            X,
            ReaderOptions::default(),
        );
        assert_eq!(rows, Vec::<Vec<Option<Value>>>::new());
        assert_eq!(
            e.as_deref(),
            Some(
                "t.input:1:3: step 18446744073709551615 skips 18446744073709551615 empty steps at the start of the trace, more than the bound of 1000000 (raise it with --max-step-gap)"
            )
        );
    }

    /// Steps near `u64::MAX` neither overflow nor panic: the last possible
    /// step is returned, and a header after it is an error.
    #[test]
    fn the_largest_step_number_ends_the_trace() {
        use super::super::source::{Lines, bytes_source};
        use super::super::values::Schema;
        use super::TcReader;
        use crate::trace::RowReader;
        let text = "18446744073709551614:\n18446744073709551615: x = 1\n18446744073709551615:\n";
        let mut r = TcReader::new(
            Lines::new("t", bytes_source(text.as_bytes().to_vec())),
            Schema::new("t", &schema(X)),
            ReaderOptions::default(),
        );
        // As if every earlier step had been read.
        r.next_step = u64::MAX - 1;
        let mut row = vec![None];
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row, [None]);
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row, [int(1)]);
        assert_eq!(
            r.next_row(&mut row).unwrap_err().to_string(),
            "t:3:1: step 18446744073709551615 repeats step 18446744073709551615: step numbers must increase"
        );
    }

    #[test]
    fn numbers_that_do_not_fit() {
        assert_eq!(
            err("0: y = 1e400\n", XY),
            "t.input:1:8: number `1e400` does not fit in Float (64 bits)"
        );
        assert_eq!(
            err("0: y = -99999999999999999999\n", XY),
            "t.input:1:8: integer `-99999999999999999999` does not fit in Int (64 bits)"
        );
        let rows = read("0: x = -0\n   y = 1e-400\n", XY).unwrap();
        assert_eq!(rows, [vec![int(0), Some(Value::Float(0.0))]]);
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let long = "z".repeat(10_000_000);
        let e = err(&format!("0: y = {long}\n"), XY);
        assert_eq!(
            e,
            format!("t.input:1:8: invalid value `{}…`", "z".repeat(64))
        );
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
        assert!(r.next_row(&mut row).unwrap());
        assert_eq!(row[0], Some(Value::Int(2)));
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
            "t.input:1:1: step number `99999999999999999999999` is too large (the largest is 18446744073709551615)"
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

    /// Issue 40: container values as the Trustworthiness Checker writes
    /// them (`[1, 2]`, `{"k": 1}`) and as the language does (`List(1)`,
    /// `Map("k": 1)`), on header and continuation lines, for untyped and
    /// typed inputs; a list given to a Tuple input is a tuple.
    #[test]
    fn container_values() {
        let decls = &[
            ("a", Type::Any),
            ("l", Type::List),
            ("m", Type::Map),
            ("t", Type::Tuple),
        ];
        let text = "0: a = [1, 2]\n   l = List(1,2.5)\n   m = {\"time\": 0, \"value\": 5.0}\n   t = [1, \"a\"]\n1: m = Map(\"x\": [])\n   a = {}\r\n2: l = [] // none\n";
        let shown = |row: &[Option<Value>]| {
            row.iter()
                .map(|v| v.as_ref().map_or("-".to_string(), Value::to_string))
                .collect::<Vec<_>>()
        };
        let rows = read(text, decls).unwrap();
        assert_eq!(
            rows.iter().map(|r| shown(r)).collect::<Vec<_>>(),
            [
                vec![
                    "List([Int(1), Int(2)])",
                    "List([Int(1), Float(2.5)])",
                    "Map({\"time\": Int(0), \"value\": Float(5.0)})",
                    "Tuple([Int(1), Str(\"a\")])",
                ],
                vec!["Map({})", "-", "Map({\"x\": List([])})", "-"],
                vec!["-", "List([])", "-", "-"],
            ]
        );
    }

    /// Issue 40: what the reader refused before (`invalid value `[1,``)
    /// is the list the checker reads.
    #[test]
    fn a_json_style_list_for_an_untyped_input() {
        let rows = read("0: l = [1, 2]\n", &[("l", Type::Any)]).unwrap();
        assert_eq!(
            rows,
            [vec![Some(Value::list(vec![Value::Int(1), Value::Int(2)]))]]
        );
    }

    /// A malformed container is an error at the byte where it goes wrong
    /// (counted in characters), and a container of the wrong type is one at
    /// the value, like any other value.
    #[test]
    fn malformed_and_mistyped_containers_are_located() {
        let decls = &[("samples", Type::Any), ("x", Type::Int), ("l", Type::List)];
        for (text, want) in [
            (
                "0: samples = [1,\n",
                "t.input:1:14: unclosed `[`: a value must end on its line",
            ),
            (
                "0: samples = [1,\n   2]\n",
                "t.input:1:14: unclosed `[`: a value must end on its line",
            ),
            (
                "0: samples = [\"é\" 2]\n",
                "t.input:1:19: expected `,` or `]`, found `2`",
            ),
            (
                "0: samples = [1, 2,]\n",
                "t.input:1:20: expected a value after `,` (a trailing comma is not allowed)",
            ),
            (
                "0: samples = {x: 1}\n",
                "t.input:1:15: expected a string key (`\"key\": value`), found `x`",
            ),
            (
                "0: samples = [1] 2\n",
                "t.input:1:18: unexpected text after the value",
            ),
            (
                "0: x = [1]\n",
                "t.input:1:8: expected Int for input `x`, found List List([Int(1)])",
            ),
            (
                "0: l = {\"a\": 1}\n",
                "t.input:1:8: expected List for input `l`, found Map Map({\"a\": Int(1)})",
            ),
            (
                "0: undeclared = [1\n",
                "t.input:1:17: unclosed `[`: a value must end on its line",
            ),
        ] {
            assert_eq!(err(text, decls), want, "{text}");
        }
    }

    /// Text nested far past the bound on values is refused at the first
    /// level too many, never overflowing the stack.
    #[test]
    fn deeply_nested_containers_are_refused() {
        let n = 1_000_000;
        let text = format!("0: a = {}{}\n", "[".repeat(n), "]".repeat(n));
        let col = 8 + crate::value::MAX_VALUE_NESTING;
        assert_eq!(
            err(&text, &[("a", Type::Any)]),
            format!(
                "t.input:1:{col}: the value nests containers more than {} deep, the limit for values",
                crate::value::MAX_VALUE_NESTING
            )
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
        let src: Box<dyn BufRead + Send> = Box::new(BufReader::new(Script(chunks)));
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
