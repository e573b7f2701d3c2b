//! Writers for the `text`, `csv` and `jsonl` output formats.
//!
//! - `text` is the Trustworthiness Checker's: one line `name[step] = Int(3)`
//!   per printed output and step, in the order of the output names; NoVal is
//!   not printed and ⊥ prints as `Deferred`.
//! - `csv` has a header `step,<names…>` and one row per step. It is lossless:
//!   every Str value is quoted (`"abc"`, `""` for the empty string, `"null"`,
//!   `"3"`), and nothing else is: NoVal is an empty cell, ⊥ is `null`, other
//!   values are plain literals (`3`, `2.0`, `NaN`, `-inf`, `true`, `()`). A
//!   quoted cell is therefore always a string, and vigil's CSV reader reads
//!   the file back as the values written.
//! - `jsonl` has one object per step, `{"step":0,"z":3}`, keys in the order
//!   of the output names: NoVal keys are omitted, ⊥ is `null`, Unit is the
//!   string `"()"` (so that it differs from ⊥), and non-finite floats are the
//!   strings `"NaN"`, `"inf"` and `"-inf"`, which JSON numbers cannot carry.
//!
//! The step column (CSV) and key (JSON lines) is named `step`, unless an
//! output is named `step`: then it is `_step`, or `__step`, and so on — the
//! first of these that is not an output's name (see [`step_column`]), so a
//! column never collides with another.
//!
//! A keyed run (`vigil run --key host`) names each step's key: text writes
//! `name{host=a}[3] = Int(7)` (the key as `Key` displays it: a plain word
//! as it is, anything else as a JSON string), CSV has a `host` column after
//! the step (written as an output value is, so a Str key is quoted), and
//! JSON lines a `"host"` member after the step.
//!
//! All writers buffer their output; `flush` pushes it through to the
//! underlying sink, and the CLI calls it after every row of a streamed
//! trace. Write errors keep their `io::ErrorKind` (a closed pipe is
//! `BrokenPipe`), so that the caller can tell them apart.

use super::{OutputFormat, OutputWriter};
use crate::batch::OutputBatch;
use crate::value::{Key, Sample, Value};
use scalar_ir::frame::tag;
use std::io::{self, BufWriter, Write};

/// Bytes of lines a batch gathers before handing them to the sink.
const LINES_BUFFERED: usize = 64 * 1024;

/// The name of the step column for outputs named `names`: `step`, prefixed
/// with as many underscores as it takes to differ from every output name.
pub fn step_column(names: &[String]) -> String {
    let mut name = "step".to_string();
    while names.contains(&name) {
        name.insert(0, '_');
    }
    name
}

/// Makes a writer for `format`. `names` are the printed outputs, in the
/// order the samples passed to `write_step` follow.
pub fn make_writer(
    format: OutputFormat,
    names: Vec<String>,
    out: Box<dyn Write + Send>,
) -> Box<dyn OutputWriter> {
    writer(format, names, None, out, false)
}

/// Makes a writer that continues output a writer of the same format and
/// names began (a run resumed from a checkpoint, appending to its file): it
/// writes no CSV header.
pub fn continue_writer(
    format: OutputFormat,
    names: Vec<String>,
    out: Box<dyn Write + Send>,
) -> Box<dyn OutputWriter> {
    writer(format, names, None, out, true)
}

/// Makes a writer of a keyed run, whose steps name their key (the input
/// `key`) with `write_keyed`; `continued` as for `continue_writer`.
pub fn keyed_writer(
    format: OutputFormat,
    names: Vec<String>,
    key: &str,
    out: Box<dyn Write + Send>,
    continued: bool,
) -> Box<dyn OutputWriter> {
    writer(format, names, Some(key.to_string()), out, continued)
}

fn writer(
    format: OutputFormat,
    names: Vec<String>,
    key: Option<String>,
    out: Box<dyn Write + Send>,
    header_written: bool,
) -> Box<dyn OutputWriter> {
    // The key is an input, so no output has its name; the step column must
    // differ from it too.
    let mut taken = names.clone();
    taken.extend(key.clone());
    let step = step_column(&taken);
    match format {
        OutputFormat::Text => Box::new(TextWriter {
            names,
            key,
            out: BufWriter::new(out),
            line: Vec::new(),
            label: Vec::new(),
        }),
        OutputFormat::Csv => Box::new(CsvWriter {
            names,
            step,
            key,
            out: BufWriter::new(out),
            header_written,
            line: Vec::new(),
        }),
        OutputFormat::Jsonl => Box::new(JsonlWriter {
            // Keys are encoded once; `to_string` of a `&str` cannot fail, and
            // the fallback would still be a valid (if odd) key.
            step: json_key(&step),
            key: key.as_deref().map(json_key),
            keys: names.iter().map(|n| json_key(n)).collect(),
            out: BufWriter::new(out),
            line: Vec::new(),
        }),
    }
}

fn json_key(name: &str) -> String {
    serde_json::to_string(name).unwrap_or_else(|_| "\"?\"".to_string())
}

struct TextWriter {
    names: Vec<String>,
    /// The key input's name, for a keyed run.
    key: Option<String>,
    out: BufWriter<Box<dyn Write + Send>>,
    /// The lines being built, reused across steps.
    line: Vec<u8>,
    /// A keyed step's label, `{host=a}`, reused across steps.
    label: Vec<u8>,
}

impl OutputWriter for TextWriter {
    fn write_step(&mut self, step: u64, samples: &[Sample]) -> io::Result<()> {
        self.write(step, None, samples)
    }

    fn write_batch(&mut self, batch: &OutputBatch, columns: &[usize]) -> io::Result<()> {
        debug_assert_eq!(columns.len(), self.names.len(), "one column per name");
        // Int and Bool cells, nearly all of a large run's, are formatted
        // from the batch's lanes without making a `Sample`.
        let line = &mut self.line;
        line.clear();
        let mut step_buf = itoa::Buffer::new();
        let mut num = itoa::Buffer::new();
        for r in 0..batch.len() {
            let step = step_buf.format(batch.first_step() + r as u64).as_bytes();
            for (name, &c) in self.names.iter().zip(columns) {
                let (t, lane) = batch.raw(r, c);
                match t {
                    tag::ABSENT => continue,
                    tag::I64 | tag::B1 => {
                        line.extend_from_slice(name.as_bytes());
                        line.push(b'[');
                        line.extend_from_slice(step);
                        if t == tag::I64 {
                            line.extend_from_slice(b"] = Int(");
                            line.extend_from_slice(num.format(lane as i64).as_bytes());
                            line.extend_from_slice(b")\n");
                        } else if lane != 0 {
                            line.extend_from_slice(b"] = Bool(true)\n");
                        } else {
                            line.extend_from_slice(b"] = Bool(false)\n");
                        }
                    }
                    _ => push_text_line(line, name, b"", step, &batch.get(r, c))?,
                }
            }
            if line.len() >= LINES_BUFFERED {
                self.out.write_all(line)?;
                line.clear();
            }
        }
        self.out.write_all(line)
    }

    fn write_keyed(&mut self, step: u64, key: &Key, samples: &[Sample]) -> io::Result<()> {
        self.write(step, Some(key), samples)
    }

    fn append_keyed(
        &mut self,
        step: u64,
        key: &Key,
        samples: &[Sample],
        to: &mut Vec<u8>,
    ) -> io::Result<bool> {
        self.append(step, Some(key), samples, to)?;
        Ok(true)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl TextWriter {
    fn write(&mut self, step: u64, key: Option<&Key>, samples: &[Sample]) -> io::Result<()> {
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        let appended = self.append(step, key, samples, &mut line);
        let written = appended.and_then(|()| self.out.write_all(&line));
        self.line = line;
        written
    }

    /// Appends the lines of one step to `line`.
    fn append(
        &mut self,
        step: u64,
        key: Option<&Key>,
        samples: &[Sample],
        line: &mut Vec<u8>,
    ) -> io::Result<()> {
        debug_assert_eq!(
            samples.len(),
            self.names.len(),
            "one sample per output name"
        );
        let mut step_buf = itoa::Buffer::new();
        let step = step_buf.format(step).as_bytes();
        // `{host=a}`, built once per step into a buffer kept across steps (a
        // `String` made for every step cost a keyed run an allocation and its
        // growth per row).
        let label = &mut self.label;
        label.clear();
        if let (Some(k), Some(name)) = (key, &self.key) {
            write!(label, "{{{name}={k}}}")?;
        }
        for (name, sample) in self.names.iter().zip(samples) {
            push_text_line(line, name, label, step, sample)?;
        }
        Ok(())
    }
}

/// Appends the text line of one output's sample, `name{label}[step] =
/// Int(3)`; nothing for NoVal. This is the hot path of `vigil run` on large
/// traces (one line per output per step), so lines are assembled as bytes
/// with `itoa` rather than through `fmt`; floats and strings keep
/// `Display`, which gives the Trustworthiness Checker's `{:?}` forms.
fn push_text_line(
    line: &mut Vec<u8>,
    name: &str,
    label: &[u8],
    step: &[u8],
    sample: &Sample,
) -> io::Result<()> {
    if matches!(sample, Sample::NoVal) {
        return Ok(());
    }
    line.extend_from_slice(name.as_bytes());
    line.extend_from_slice(label);
    line.push(b'[');
    line.extend_from_slice(step);
    line.extend_from_slice(b"] = ");
    match sample {
        Sample::Value(Value::Int(i)) => {
            line.extend_from_slice(b"Int(");
            line.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes());
            line.extend_from_slice(b")\n");
        }
        Sample::Value(Value::Bool(b)) => {
            line.extend_from_slice(if *b {
                b"Bool(true)\n"
            } else {
                b"Bool(false)\n"
            });
        }
        Sample::Deferred => line.extend_from_slice(b"Deferred\n"),
        other => writeln!(line, "{other}")?,
    }
    Ok(())
}

struct CsvWriter {
    names: Vec<String>,
    step: String,
    /// The key column's name, for a keyed run.
    key: Option<String>,
    out: BufWriter<Box<dyn Write + Send>>,
    /// The header is written with the first row (or at the first flush, for
    /// an empty trace) so that making a writer does no I/O.
    header_written: bool,
    /// The line being built, reused across steps.
    line: Vec<u8>,
}

/// Appends `text` as a quoted CSV field: `"…"`, with `""` for a quote.
fn push_quoted(line: &mut Vec<u8>, text: &[u8]) {
    line.push(b'"');
    for part in text.split_inclusive(|b| *b == b'"') {
        line.extend_from_slice(part);
        if part.last() == Some(&b'"') {
            line.push(b'"');
        }
    }
    line.push(b'"');
}

/// Appends a header name, quoted only if CSV requires it (stream names are
/// identifiers, so in practice never).
fn push_name(line: &mut Vec<u8>, name: &str) {
    let needs_quotes = name.is_empty()
        || name
            .bytes()
            .any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
        || name.starts_with([' ', '\t'])
        || name.ends_with([' ', '\t']);
    if needs_quotes {
        push_quoted(line, name.as_bytes());
    } else {
        line.extend_from_slice(name.as_bytes());
    }
}

impl CsvWriter {
    fn write_header(&mut self) -> io::Result<()> {
        if !self.header_written {
            self.header_written = true;
            let line = &mut self.line;
            line.clear();
            push_name(line, &self.step);
            for name in self.key.iter().chain(&self.names) {
                line.push(b',');
                push_name(line, name);
            }
            line.push(b'\n');
            self.out.write_all(line)?;
        }
        Ok(())
    }
}

/// Appends a value's cell text, unquoted: a Str as it is, a scalar as the
/// CSV cell rule reads it back, a container as its JSON text.
fn push_cell_text(line: &mut Vec<u8>, v: &Value) -> io::Result<()> {
    match v {
        Value::Str(s) => line.extend_from_slice(s.as_bytes()),
        Value::Int(i) => line.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        Value::Float(x) => write!(line, "{x:?}")?,
        Value::Bool(b) => line.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Unit => line.extend_from_slice(b"()"),
        _ => push_json_value(line, v)?,
    }
    Ok(())
}

/// Appends a value as a CSV cell: a Str quoted, anything else plain.
fn push_csv_value(line: &mut Vec<u8>, v: &Value) -> io::Result<()> {
    match v {
        Value::Str(s) => push_quoted(line, s.as_bytes()),
        Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::Unit => push_cell_text(line, v)?,
        // A container is its JSON text, quoted as one cell.
        _ => {
            let mut json = Vec::new();
            push_json_value(&mut json, v)?;
            push_quoted(line, &json);
        }
    }
    Ok(())
}

impl CsvWriter {
    fn write(&mut self, step: u64, key: Option<&Key>, samples: &[Sample]) -> io::Result<()> {
        debug_assert_eq!(
            samples.len(),
            self.names.len(),
            "one sample per output name"
        );
        self.write_header()?;
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        let appended = self.append(step, key, samples, &mut line);
        let written = appended.and_then(|()| self.out.write_all(&line));
        self.line = line;
        written
    }

    /// Appends the line of one step to `line` (the header written or not).
    fn append(
        &self,
        step: u64,
        key: Option<&Key>,
        samples: &[Sample],
        line: &mut Vec<u8>,
    ) -> io::Result<()> {
        line.extend_from_slice(itoa::Buffer::new().format(step).as_bytes());
        if let Some(k) = key {
            line.push(b',');
            push_csv_value(line, k.value())?;
        }
        for sample in samples {
            line.push(b',');
            match sample {
                Sample::NoVal => {}
                Sample::Deferred => line.extend_from_slice(b"null"),
                Sample::Value(v) => push_csv_value(line, v)?,
            }
        }
        line.push(b'\n');
        Ok(())
    }
}

impl OutputWriter for CsvWriter {
    fn write_step(&mut self, step: u64, samples: &[Sample]) -> io::Result<()> {
        self.write(step, None, samples)
    }

    fn write_keyed(&mut self, step: u64, key: &Key, samples: &[Sample]) -> io::Result<()> {
        self.write(step, Some(key), samples)
    }

    fn append_keyed(
        &mut self,
        step: u64,
        key: &Key,
        samples: &[Sample],
        to: &mut Vec<u8>,
    ) -> io::Result<bool> {
        // The header goes out first, through `write_keyed`.
        if !self.header_written {
            return Ok(false);
        }
        self.append(step, Some(key), samples, to)?;
        Ok(true)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_header()?;
        self.out.flush()
    }
}

struct JsonlWriter {
    /// The step key, the key input's name (a keyed run) and the output
    /// keys, already JSON-encoded.
    step: String,
    key: Option<String>,
    keys: Vec<String>,
    out: BufWriter<Box<dyn Write + Send>>,
    /// The line being built, reused across steps.
    line: Vec<u8>,
}

/// A value's JSON text, as the `jsonl` writer writes it (a live sink's
/// payloads and fields).
pub fn json_text(v: &Value) -> Vec<u8> {
    let mut text = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = push_json_value(&mut text, v);
    text
}

/// A value's text as the `csv` writer writes a cell, unquoted: a Str as it
/// is, a container as its JSON text (a Redis entry's fields, which the CSV
/// cell rule reads back).
pub fn cell_text(v: &Value) -> Vec<u8> {
    let mut text = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = push_cell_text(&mut text, v);
    text
}

/// Appends a value as a JSON member's value (see the module doc).
fn push_json_value(line: &mut Vec<u8>, v: &Value) -> io::Result<()> {
    match v {
        Value::Int(i) => write!(line, "{i}")?,
        Value::Float(x) if x.is_nan() => line.extend_from_slice(b"\"NaN\""),
        Value::Float(x) if x.is_infinite() => {
            line.extend_from_slice(if *x > 0.0 { b"\"inf\"" } else { b"\"-inf\"" })
        }
        // Rust's `{:?}` of a finite float (`2.0`, `1e16`, `-0.0`) is a
        // valid JSON number.
        Value::Float(x) => write!(line, "{x:?}")?,
        Value::Bool(b) => write!(line, "{b}")?,
        Value::Str(s) => serde_json::to_writer(&mut *line, &**s)?,
        Value::Unit => line.extend_from_slice(b"\"()\""),
        Value::List(_) | Value::Tuple(_) => {
            line.push(b'[');
            let items: Box<dyn Iterator<Item = &Value>> = match v {
                Value::List(items) => Box::new(items.iter()),
                Value::Tuple(items) => Box::new(items.iter()),
                _ => unreachable!("matched a list or a tuple"),
            };
            for (k, x) in items.enumerate() {
                if k > 0 {
                    line.push(b',');
                }
                push_json_value(line, x)?;
            }
            line.push(b']');
        }
        Value::Map(entries) => {
            line.push(b'{');
            for (k, (key, x)) in entries.iter().enumerate() {
                if k > 0 {
                    line.push(b',');
                }
                serde_json::to_writer(&mut *line, &**key)?;
                line.push(b':');
                push_json_value(line, x)?;
            }
            line.push(b'}');
        }
        // A function has no JSON form: its text, as a string.
        Value::Func(_) => serde_json::to_writer(&mut *line, &v.to_string())?,
        // A list's NoVal or ⊥ element.
        Value::Marker(_) => line.extend_from_slice(b"null"),
    }
    Ok(())
}

/// One alert as a JSON line (`vigil run --alerts`): `{"step":17,` then the
/// key (`"host":"a",`) for a keyed run, `"trigger":…,"message":…,"values":{…}}`
/// with each value as the `jsonl` output writes it (⊥ is `null`, a NoVal
/// stream is left out).
pub fn alert_line(alert: &crate::monitor::Alert<'_>, key: Option<(&str, &Key)>) -> Vec<u8> {
    alert_line_with(alert, key, &[])
}

/// One alert as a JSON line, as [`alert_line`] writes it, with `context`
/// (`vigil run --pass host,region`: input fields and their values at the
/// step) after the step and the key.
pub fn alert_line_with(
    alert: &crate::monitor::Alert<'_>,
    key: Option<(&str, &Key)>,
    context: &[(&str, &Value)],
) -> Vec<u8> {
    let mut line = Vec::new();
    let _ = write!(line, "{{\"step\":{}", alert.step());
    if let Some((name, k)) = key {
        let _ = write!(line, ",{}:", json_key(name));
        let _ = push_json_value(&mut line, k.value());
    }
    for (name, v) in context {
        let _ = write!(line, ",{}:", json_key(name));
        let _ = push_json_value(&mut line, v);
    }
    let _ = write!(line, ",\"trigger\":{}", json_key(alert.trigger()));
    // A trigger's alerting clauses add what they know: `resolve` the state,
    // `every` the firings held back since the last alert.
    match alert.state() {
        None => {}
        Some(crate::lang::check::AlertState::Firing) => {
            line.extend_from_slice(b",\"state\":\"firing\"")
        }
        Some(crate::lang::check::AlertState::Resolved) => {
            line.extend_from_slice(b",\"state\":\"resolved\"")
        }
    }
    if let Some(n) = alert.suppressed() {
        let _ = write!(line, ",\"suppressed\":{n}");
    }
    if !alert.labels().is_empty() {
        line.extend_from_slice(b",\"labels\":{");
        for (k, (name, text)) in alert.labels().iter().enumerate() {
            let comma = if k == 0 { "" } else { "," };
            let _ = write!(line, "{comma}{}:{}", json_key(name), json_key(text));
        }
        line.push(b'}');
    }
    let _ = write!(
        line,
        ",\"message\":{},\"values\":{{",
        json_key(alert.message())
    );
    let mut first = true;
    for (name, sample) in alert.values() {
        let v = match sample {
            Sample::NoVal => continue,
            Sample::Deferred => None,
            Sample::Value(v) => Some(v),
        };
        let _ = write!(line, "{}{}:", if first { "" } else { "," }, json_key(name));
        first = false;
        match v {
            None => line.extend_from_slice(b"null"),
            Some(v) => {
                let _ = push_json_value(&mut line, v);
            }
        }
    }
    line.extend_from_slice(b"}}\n");
    line
}

impl JsonlWriter {
    fn write(&mut self, step: u64, key: Option<&Key>, samples: &[Sample]) -> io::Result<()> {
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        let appended = self.append(step, key, samples, &mut line);
        let written = appended.and_then(|()| self.out.write_all(&line));
        self.line = line;
        written
    }

    /// Appends the line of one step to `line`.
    fn append(
        &self,
        step: u64,
        key: Option<&Key>,
        samples: &[Sample],
        line: &mut Vec<u8>,
    ) -> io::Result<()> {
        debug_assert_eq!(samples.len(), self.keys.len(), "one sample per output name");
        write!(line, "{{{}:{step}", self.step)?;
        if let (Some(k), Some(name)) = (key, &self.key) {
            write!(line, ",{name}:")?;
            push_json_value(line, k.value())?;
        }
        for (name, sample) in self.keys.iter().zip(samples) {
            match sample {
                Sample::NoVal => continue,
                Sample::Deferred => write!(line, ",{name}:null")?,
                Sample::Value(v) => {
                    write!(line, ",{name}:")?;
                    push_json_value(line, v)?;
                }
            }
        }
        line.extend_from_slice(b"}\n");
        Ok(())
    }
}

impl OutputWriter for JsonlWriter {
    fn write_step(&mut self, step: u64, samples: &[Sample]) -> io::Result<()> {
        self.write(step, None, samples)
    }

    fn write_keyed(&mut self, step: u64, key: &Key, samples: &[Sample]) -> io::Result<()> {
        self.write(step, Some(key), samples)
    }

    fn append_keyed(
        &mut self,
        step: u64,
        key: &Key,
        samples: &[Sample],
        to: &mut Vec<u8>,
    ) -> io::Result<bool> {
        self.append(step, Some(key), samples, to)?;
        Ok(true)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests;
