//! The sink that writes a run's outputs and alerts ([`Lines`]): of each evaluated step or tick,
//! the chosen columns ([`Columns`]: the outputs asked for, after the passed fields of the row
//! and its time) to an [`OutputWriter`], and every trigger that fired to the [`Alerts`]: JSON
//! lines to a file or stream, or readable lines to whatever the caller shows them on.
//!
//! Nothing here changes the monitor: the columns are chosen among the samples a step produced
//! before they reach the writer.

use super::Sink;
use crate::error::RuntimeError;
use crate::monitor::{Outputs, Spec};
use crate::notice::{Notice, Notify};
use crate::time::{Time, TimeForm};
use crate::trace::{self, InputSchema, OutputFormat, OutputWriter};
use crate::value::{Key, Sample, Value};
use std::borrow::Cow;
use std::io::{self, Write};

/// What a run's columns are (see [`Columns::new`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct ColumnOptions<'a> {
    /// The specification's name, for messages.
    pub spec_name: &'a str,
    /// The outputs printed, by name (all when `None`).
    pub only: Option<&'a [String]>,
    /// The fields of each row passed through to the output and the alert
    /// lines: declared inputs, or undeclared fields of the trace.
    pub pass: Option<&'a [String]>,
    /// No outputs printed (the alerts still are).
    pub quiet: bool,
    /// Rows carry their time, printed first.
    pub time: bool,
    /// The key input of a keyed run (every keyed row has it already).
    pub key: Option<&'a str>,
    /// Whether alerts go to JSON lines (whose members a passed field
    /// cannot take).
    pub alert_lines: bool,
}

/// The columns a run prints: the chosen outputs (all by default, none when
/// quiet) after the passed fields and the time.
#[derive(Clone, Debug)]
pub struct Columns {
    /// For each output of the monitor, in print order, whether it is printed.
    keep: Vec<bool>,
    /// The passed inputs: name and cell in a row.
    pass: Vec<(String, usize)>,
    /// How many of them are undeclared fields, read after the inputs.
    extra: usize,
    quiet: bool,
    /// Whether rows carry the step's time first.
    time: bool,
}

/// The passed fields that are not declared inputs, each once, in the order
/// given: the trace readers read them as untyped inputs after the declared
/// ones (cells `inputs..inputs + extra`), and the monitor never sees them.
pub fn extra_fields(spec: &Spec, pass: Option<&[String]>) -> Vec<String> {
    let inputs = spec.input_names();
    let mut extra: Vec<String> = Vec::new();
    for name in pass.into_iter().flatten() {
        if !inputs.contains(&name.as_str()) && !extra.contains(name) {
            extra.push(name.clone());
        }
    }
    extra
}

/// The schema a run's traces are read with: the declared inputs, then the
/// undeclared passed fields as untyped inputs (the rows given to the
/// monitor stop before them).
pub fn read_schema(spec: &Spec, pass: Option<&[String]>) -> InputSchema {
    let mut schema = spec.input_schema();
    for name in extra_fields(spec, pass) {
        schema.names.push(name);
        schema.types.push(crate::lang::types::Type::Any);
    }
    schema
}

/// The schema of a run's traces with the time field `time` among its
/// cells: [`read_schema`], and the time field's cell (an untyped cell after
/// the others when the field is not a declared input).
pub fn timed_schema(
    spec: &Spec,
    pass: Option<&[String]>,
    time: Option<&str>,
) -> (InputSchema, Option<usize>) {
    let mut schema = read_schema(spec, pass);
    let time_cell = time.map(|f| match schema.names.iter().position(|n| n == f) {
        Some(i) => i,
        None => {
            schema.names.push(f.to_string());
            schema.types.push(crate::lang::types::Type::Any);
            schema.names.len() - 1
        }
    });
    (schema, time_cell)
}

impl Columns {
    /// The columns `options` ask for, written in `output`; `Err` says why
    /// they cannot be (an unknown output, a passed field nothing carries).
    pub fn new(
        spec: &Spec,
        options: &ColumnOptions<'_>,
        output: OutputFormat,
    ) -> Result<Columns, String> {
        let outputs = spec.output_names();
        let keep = match options.only {
            None => vec![!options.quiet; outputs.len()],
            Some(list) => {
                if let Some(name) = list.iter().find(|n| !outputs.contains(&n.as_str())) {
                    return Err(format!(
                        "--only: `{name}` is not an output of `{}` (its outputs: {})",
                        options.spec_name,
                        if outputs.is_empty() {
                            "none".to_string()
                        } else {
                            outputs.join(", ")
                        }
                    ));
                }
                outputs
                    .iter()
                    .map(|o| list.iter().any(|n| n == o))
                    .collect()
            }
        };
        let inputs = spec.input_names();
        let extra = extra_fields(spec, options.pass);
        let mut pass: Vec<(String, usize)> = Vec::new();
        for name in options.pass.into_iter().flatten() {
            // A declared input's cell, or an undeclared field's, which the
            // reader fills after the inputs (see `extra_fields`).
            let i = match inputs.iter().position(|n| n == name) {
                Some(i) => i,
                None => {
                    let k = extra
                        .iter()
                        .position(|n| n == name)
                        .expect("every undeclared passed field is an extra field");
                    inputs.len() + k
                }
            };
            // An alert line's own members cannot be taken by a passed field.
            if options.alert_lines
                && [
                    "step",
                    "trigger",
                    "state",
                    "suppressed",
                    "message",
                    "values",
                ]
                .contains(&name.as_str())
            {
                return Err(format!(
                    "--pass: `{name}` cannot be passed with --alerts: every alert line has a member `{name}` of its own"
                ));
            }
            // The key is in every keyed row already, and a field named twice
            // is passed once.
            if options.key == Some(name.as_str()) || pass.iter().any(|(n, _)| n == name) {
                continue;
            }
            pass.push((name.clone(), i));
        }
        // Text lines have no place for context; passing is refused when
        // nothing would carry it rather than silently doing nothing.
        let rows_carry = output != OutputFormat::Text && !options.quiet;
        if options.pass.is_some() && !rows_carry && !options.alert_lines {
            return Err(
                "--pass: nothing would carry the passed fields: text output lines and the alert lines on standard error have no place for them; use --output csv|jsonl, or --alerts FILE|-"
                    .to_string(),
            );
        }
        Ok(Columns {
            keep,
            pass,
            extra: extra.len(),
            quiet: options.quiet,
            time: options.time,
        })
    }

    /// Whether no outputs are printed.
    pub fn quiet(&self) -> bool {
        self.quiet
    }

    /// The undeclared passed fields a row carries after the inputs.
    pub fn extra(&self) -> usize {
        self.extra
    }

    /// Whether rows must be evaluated one at a time (passed fields are read
    /// from each row, which a batch does not keep).
    pub fn needs_rows(&self) -> bool {
        !self.pass.is_empty()
    }

    /// The batch columns the writer's names are, when a row's printed
    /// samples are its kept outputs alone (no passed fields, no time
    /// column); `None` otherwise.
    pub fn batch_columns(&self, format: OutputFormat) -> Option<Vec<usize>> {
        let carries = Columns::rows_carry(format) && (self.time || !self.pass.is_empty());
        (!carries).then(|| (0..self.keep.len()).filter(|&c| self.keep[c]).collect())
    }

    /// Whether printed rows carry the passed fields (not in text output).
    fn rows_carry(format: OutputFormat) -> bool {
        format != OutputFormat::Text
    }

    /// The column names the writer gets: the time and the passed inputs (in
    /// CSV and JSON lines only), then the printed outputs in print order.
    pub fn writer_names(&self, outputs: &[&str], format: OutputFormat) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        if Columns::rows_carry(format) {
            if self.time {
                names.push("time".into());
            }
            names.extend(self.pass.iter().map(|(n, _)| n.clone()));
        }
        names.extend(
            outputs
                .iter()
                .zip(&self.keep)
                .filter(|(_, keep)| **keep)
                .map(|(n, _)| n.to_string()),
        );
        names
    }

    /// The samples of one step for the writer, aligned with `writer_names`
    /// (`time` is the step's time, when rows carry it).
    pub fn fill(
        &self,
        samples: &mut Vec<Sample>,
        format: OutputFormat,
        row: Option<&[Option<Value>]>,
        outputs: impl Iterator<Item = Sample>,
        time: Option<&Value>,
    ) {
        samples.clear();
        if Columns::rows_carry(format) && self.time {
            samples.push(time.map_or(Sample::NoVal, |t| Sample::Value(t.clone())));
        }
        if Columns::rows_carry(format) {
            match row {
                Some(row) => samples.extend(self.pass.iter().map(|(_, i)| match &row[*i] {
                    Some(v) => Sample::Value(v.clone()),
                    None => Sample::NoVal,
                })),
                // A tick has no input row: its passed fields are absent
                // (a batch of rows never has passed fields: such a run goes
                // row by row).
                None => samples.extend(self.pass.iter().map(|_| Sample::NoVal)),
            }
        }
        samples.extend(
            outputs
                .zip(&self.keep)
                .filter(|(_, keep)| **keep)
                .map(|(s, _)| s),
        );
    }

    /// The passed fields of `row` that have a value, for an alert line.
    pub fn context<'r>(&'r self, row: &'r [Option<Value>]) -> Vec<(&'r str, &'r Value)> {
        self.pass
            .iter()
            .filter_map(|(n, i)| row[*i].as_ref().map(|v| (n.as_str(), v)))
            .collect()
    }
}

/// A writer that writes nothing (no outputs printed): no CSV header either.
pub struct NullWriter;

impl OutputWriter for NullWriter {
    fn write_step(&mut self, _: u64, _: &[Sample]) -> io::Result<()> {
        Ok(())
    }

    fn write_keyed(&mut self, _: u64, _: &Key, _: &[Sample]) -> io::Result<()> {
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `text` as an alert line shows it: control and invisible characters
/// escaped (`\n`, `\u{1b}`), so that a value in the data (a Str in a
/// message, a key) can neither split the line nor forge another one.
pub fn escaped(text: &str) -> Cow<'_, str> {
    use crate::lang::diag::{is_invisible, show_char};
    if !text.chars().any(is_invisible) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.chars().map(show_char).collect())
}

/// One trigger's firings, for a run's summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerTally {
    /// The trigger's name.
    pub name: String,
    /// How many times it fired.
    pub count: u64,
    /// The first step it fired at (with the key, in a keyed run:
    /// `3 (host=a)`).
    pub first: Option<String>,
    /// The last step it fired at.
    pub last: Option<String>,
}

impl TriggerTally {
    /// Where an alert fired, as the summary says it: its step, and in a
    /// keyed run the key input's name and the key (a key is data: at most
    /// 64 characters of it, escaped).
    pub fn place(step: u64, key: Option<(&str, &dyn std::fmt::Display)>) -> String {
        match key {
            Some((name, k)) => format!(
                "{step} ({name}={})",
                escaped(&crate::row::excerpt(&k.to_string()))
            ),
            None => step.to_string(),
        }
    }

    /// Counts a firing of trigger `name` at `at` (a `place`) in `tallies`.
    pub fn count(tallies: &mut [TriggerTally], name: &str, at: String) {
        if let Some(t) = tallies.iter_mut().find(|t| t.name == name) {
            t.count += 1;
            if t.first.is_none() {
                t.first = Some(at.clone());
            }
            t.last = Some(at);
        }
    }

    /// A tally of each trigger of `spec`, none fired yet.
    pub fn of(spec: &Spec) -> Vec<TriggerTally> {
        spec.trigger_names()
            .into_iter()
            .map(|name| TriggerTally {
                name: name.to_string(),
                count: 0,
                first: None,
                last: None,
            })
            .collect()
    }
}

/// Where readable alert lines go when no alerts file is given (a
/// terminal's standard error, behind whatever else is drawn there).
pub trait AlertLines {
    /// Shows one line (it ends with a newline).
    fn line(&mut self, text: &str);
    /// Shows the lines held back, if any.
    fn flush(&mut self);
}

/// Where a run's alerts go.
enum AlertsOut {
    /// JSON lines to a file or stream; `dest` names it in messages.
    Json {
        out: io::BufWriter<Box<dyn Write>>,
        dest: String,
    },
    /// Readable lines.
    Lines(Box<dyn AlertLines>),
}

/// An alert as a readable line (with its newline): `alert: NAME at step N
/// (KEY=VALUE): MESSAGE`, `resolved` after the name for a resolved alert,
/// `(N held back)` and `[label=text]` after the message; every part that
/// comes from the data escaped, so that it cannot split the line.
pub fn readable_alert(alert: &crate::monitor::Alert<'_>, key: Option<(&str, &str)>) -> String {
    let state = match alert.state() {
        Some(crate::AlertState::Resolved) => " resolved",
        _ => "",
    };
    let mut line = format!("alert: {}{state} at step {}", alert.trigger(), alert.step());
    if let Some((name, k)) = key {
        line.push_str(&format!(" ({name}={})", escaped(k)));
    }
    line.push_str(": ");
    line.push_str(&escaped(alert.message()));
    if let Some(n) = alert.suppressed().filter(|n| *n > 0) {
        line.push_str(&format!(" ({n} held back)"));
    }
    for (name, text) in alert.labels() {
        line.push_str(&format!(" [{name}={}]", escaped(text)));
    }
    line.push('\n');
    line
}

/// Where trigger firings go: JSON lines (`trace::alert_line_with`) to a
/// file or stream, or readable lines to an [`AlertLines`]; and how many
/// each trigger fired.
pub struct Alerts {
    out: AlertsOut,
    /// The key input's name, in a keyed run.
    key: Option<String>,
    /// Firings so far.
    fired: u64,
    /// Each trigger's firings.
    triggers: Vec<TriggerTally>,
}

impl Alerts {
    /// The alerts of a run of `spec` (keyed by `key`) written as JSON lines
    /// to `out`, named `dest` in messages.
    pub fn json(spec: &Spec, key: Option<&str>, out: Box<dyn Write>, dest: String) -> Alerts {
        Alerts::with(
            spec,
            key,
            AlertsOut::Json {
                out: io::BufWriter::new(out),
                dest,
            },
        )
    }

    /// The alerts of a run of `spec` (keyed by `key`) shown as readable
    /// lines (`alert: NAME at step N: MESSAGE`).
    pub fn readable(spec: &Spec, key: Option<&str>, lines: Box<dyn AlertLines>) -> Alerts {
        Alerts::with(spec, key, AlertsOut::Lines(lines))
    }

    fn with(spec: &Spec, key: Option<&str>, out: AlertsOut) -> Alerts {
        Alerts {
            out,
            key: key.map(str::to_string),
            fired: 0,
            triggers: TriggerTally::of(spec),
        }
    }

    /// Firings so far.
    pub fn fired(&self) -> u64 {
        self.fired
    }

    /// Each trigger's firings so far.
    pub fn triggers(&self) -> &[TriggerTally] {
        &self.triggers
    }

    /// Reports every trigger that fired at the step of `outputs`; a JSON
    /// line carries `context()` (the time and the passed fields of the
    /// row), made only when a trigger fires.
    pub fn report<'v>(
        &mut self,
        outputs: &Outputs<'_>,
        context: impl FnOnce() -> Vec<(&'v str, &'v Value)>,
    ) -> io::Result<()> {
        let mut context = Some(context);
        let mut made = Vec::new();
        for alert in outputs.alerts() {
            if let Some(make) = context.take() {
                made = make();
            }
            self.fired += 1;
            let key = self.key.as_deref().zip(outputs.key());
            let shown = key.map(|(name, k)| (name, k as &dyn std::fmt::Display));
            let place = TriggerTally::place(alert.step(), shown);
            TriggerTally::count(&mut self.triggers, alert.trigger(), place);
            match &mut self.out {
                AlertsOut::Json { out, dest } => out
                    .write_all(&trace::alert_line_with(&alert, key, &made))
                    .map_err(|e| at(dest, e))?,
                AlertsOut::Lines(lines) => {
                    let key = key.map(|(name, k)| (name, k.to_string()));
                    let line = readable_alert(&alert, key.as_ref().map(|(n, k)| (*n, k.as_str())));
                    lines.line(&line);
                }
            }
        }
        Ok(())
    }

    /// Writes out what is buffered.
    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.out {
            AlertsOut::Json { out, dest } => out.flush().map_err(|e| at(dest, e)),
            AlertsOut::Lines(lines) => {
                lines.flush();
                Ok(())
            }
        }
    }

    /// The JSON lines' writer, for a checkpoint to flush before it records
    /// the file's length.
    pub fn sink(&mut self) -> Option<&mut dyn Write> {
        match &mut self.out {
            AlertsOut::Json { out, .. } => Some(out as &mut dyn Write),
            AlertsOut::Lines(_) => None,
        }
    }
}

/// An I/O error of a destination other than the outputs (the alerts), so
/// that its message names it: the error inside the `io::Error` a sink
/// returns, of the same kind (so a closed pipe is still one).
#[derive(Debug)]
pub struct Destination {
    /// Where the write went (`the alerts file `a.jsonl``).
    pub what: String,
    /// What failed.
    pub source: io::Error,
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

impl std::error::Error for Destination {}

/// Tags an I/O error with the destination `what` it happened on.
pub fn at(what: &str, source: io::Error) -> io::Error {
    io::Error::new(
        source.kind(),
        Destination {
            what: what.to_string(),
            source,
        },
    )
}

/// The sink of a run that writes (see the module doc): each step's and
/// tick's columns to the writer, its alerts, and the counts of each. A key
/// stopped by a runtime error is said through the `Notify`
/// ([`Notice::KeyStopped`]).
pub struct Lines<'a> {
    /// The columns printed.
    pub columns: &'a Columns,
    /// The output format.
    pub output: OutputFormat,
    /// Where the columns go.
    pub writer: &'a mut dyn OutputWriter,
    /// Where the alerts go.
    pub alerts: &'a mut Alerts,
    /// How times are written, when rows carry their time (it leads the
    /// columns and the alerts).
    pub form: Option<TimeForm>,
    /// The key input of a keyed run (its stopped keys are named by it).
    pub key_input: Option<&'a str>,
    /// Where a stopped key is said.
    pub notify: &'a Notify,
    /// Steps written so far.
    pub steps: u64,
    /// Ticks written so far.
    pub ticks: u64,
    /// The samples of a step, kept from step to step so that writing one
    /// allocates nothing.
    pub samples: Vec<Sample>,
}

impl Sink for Lines<'_> {
    fn write(
        &mut self,
        o: &Outputs<'_>,
        cells: Option<&[Option<Value>]>,
        time: Time,
    ) -> io::Result<()> {
        let t = self.form.map(|form| time.to_value(form));
        (self.columns).fill(&mut self.samples, self.output, cells, o.iter(), t.as_ref());
        let columns = self.columns;
        self.alerts.report(o, || {
            let mut context = cells.map_or_else(Vec::new, |c| columns.context(c));
            if let Some(t) = &t {
                context.insert(0, ("time", t));
            }
            context
        })?;
        match cells {
            Some(_) => self.steps += 1,
            None => self.ticks += 1,
        }
        match o.key() {
            Some(k) => self.writer.write_keyed(o.step(), k, &self.samples),
            None => self.writer.write_step(o.step(), &self.samples),
        }
    }

    /// Said the first time only: the key's later rows return the same
    /// error, at the step it stopped at.
    fn key_stopped(&mut self, key: &Key, e: &RuntimeError) -> io::Result<()> {
        self.writer.flush()?;
        (self.notify)(Notice::KeyStopped {
            input: self.key_input.unwrap_or("key").to_string(),
            key: key.to_string(),
            error: e.to_string(),
        });
        Ok(())
    }
}
