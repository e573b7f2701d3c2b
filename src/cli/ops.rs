//! Operator controls of `vigil run`: which columns are printed (`--only`,
//! `--quiet`, `--pass`), what a malformed row does (`--on-malformed`), the
//! end-of-run summary (`--summary`), the progress bar on a terminal, and the
//! check of the tier that runs against the one requested (`--strict-tier`).
//!
//! None of this changes the monitor: the columns are chosen among the
//! samples a step produced before they reach the writer, and a skipped row
//! is simply never given to the monitor.

use super::{RunArgs, say};
use crate::monitor::{Spec, Stats, Tier};
use crate::trace::{OutputFormat, OutputWriter, RowReader, TraceError};
use crate::value::{Key, Sample, Value};
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{self, IsTerminal};
use std::time::Instant;

/// What `vigil run` does with a malformed row (`--on-malformed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnMalformed {
    /// Stop the run with status 4 (the default).
    Stop,
    /// Drop the row (it is not a step) and count it.
    Skip,
    /// Drop the row, count it, and report it on standard error.
    Warn,
}

/// The columns a run prints: the chosen outputs (`--only`, all by default,
/// none with `--quiet`) after the passed inputs (`--pass`).
pub(super) struct View {
    /// For each output of the monitor, in print order, whether it is printed.
    keep: Vec<bool>,
    /// The passed inputs: name and cell in a row.
    pass: Vec<(String, usize)>,
    /// How many of them are undeclared fields, read after the inputs.
    extra: usize,
    pub(super) quiet: bool,
    /// Whether rows carry the step's time first (`--time`).
    time: bool,
}

/// The `--pass` fields that are not declared inputs, each once, in the order
/// given: the trace readers read them as untyped inputs after the declared
/// ones (cells `inputs..inputs + extra`), and the monitor never sees them.
pub(super) fn extra_fields(args: &RunArgs, spec: &Spec) -> Vec<String> {
    let inputs = spec.input_names();
    let mut extra: Vec<String> = Vec::new();
    for name in args.pass.iter().flatten() {
        if !inputs.contains(&name.as_str()) && !extra.contains(name) {
            extra.push(name.clone());
        }
    }
    extra
}

/// The schema a run's traces are read with: the declared inputs, then the
/// undeclared `--pass` fields as untyped inputs (the rows given to the
/// monitor stop before them).
pub(super) fn read_schema(args: &RunArgs, spec: &Spec) -> crate::trace::InputSchema {
    let mut schema = spec.input_schema();
    for name in extra_fields(args, spec) {
        schema.names.push(name);
        schema.types.push(crate::lang::types::Type::Any);
    }
    schema
}

/// The schema of a run's traces with `--time`'s field among its cells:
/// `read_schema`, and the time field's cell (an untyped cell after the
/// others when the field is not a declared input).
pub(super) fn timed_schema(
    args: &RunArgs,
    spec: &Spec,
) -> (crate::trace::InputSchema, Option<usize>) {
    let mut schema = read_schema(args, spec);
    let time_cell = args
        .time
        .as_ref()
        .map(|f| match schema.names.iter().position(|n| n == f) {
            Some(i) => i,
            None => {
                schema.names.push(f.clone());
                schema.types.push(crate::lang::types::Type::Any);
                schema.names.len() - 1
            }
        });
    (schema, time_cell)
}

impl View {
    /// The view `args` asks for; `Err` is a usage error's message.
    pub(super) fn new(args: &RunArgs, spec: &Spec, output: OutputFormat) -> Result<View, String> {
        let outputs = spec.output_names();
        let keep = match &args.only {
            None => vec![!args.quiet; outputs.len()],
            Some(list) => {
                for name in list {
                    if !outputs.contains(&name.as_str()) {
                        return Err(format!(
                            "--only: `{name}` is not an output of `{}` (its outputs: {})",
                            args.spec,
                            if outputs.is_empty() {
                                "none".to_string()
                            } else {
                                outputs.join(", ")
                            }
                        ));
                    }
                }
                outputs
                    .iter()
                    .map(|o| list.iter().any(|n| n == o))
                    .collect()
            }
        };
        let inputs = spec.input_names();
        let extra = extra_fields(args, spec);
        let mut pass: Vec<(String, usize)> = Vec::new();
        for name in args.pass.iter().flatten() {
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
            if args.alerts.is_some()
                && ["step", "trigger", "message", "values"].contains(&name.as_str())
            {
                return Err(format!(
                    "--pass: `{name}` cannot be passed with --alerts: every alert line has a member `{name}` of its own"
                ));
            }
            // The key is in every keyed row already, and a field named twice
            // is passed once.
            if args.key.as_deref() == Some(name.as_str()) || pass.iter().any(|(n, _)| n == name) {
                continue;
            }
            pass.push((name.clone(), i));
        }
        // Text lines have no place for context; `--pass` is refused when
        // nothing would carry it rather than silently doing nothing.
        let rows_carry = output != OutputFormat::Text && !args.quiet;
        if args.pass.is_some() && !rows_carry && args.alerts.is_none() {
            return Err(
                "--pass: nothing would carry the passed fields: text output lines and the alert lines on standard error have no place for them; use --output csv|jsonl, or --alerts FILE|-"
                    .to_string(),
            );
        }
        Ok(View {
            keep,
            pass,
            extra: extra.len(),
            quiet: args.quiet,
            time: args.time.is_some(),
        })
    }

    /// The undeclared passed fields a row carries after the inputs.
    pub(super) fn extra(&self) -> usize {
        self.extra
    }

    /// Whether rows must be evaluated one at a time (passed fields are read
    /// from each row, which a batch does not keep).
    pub(super) fn needs_rows(&self) -> bool {
        !self.pass.is_empty()
    }

    /// The batch columns the writer's names are, when a row's printed
    /// samples are its kept outputs alone (no passed fields, no time
    /// column); `None` otherwise.
    pub(super) fn batch_columns(&self, format: OutputFormat) -> Option<Vec<usize>> {
        let carries = View::rows_carry(format) && (self.time || !self.pass.is_empty());
        (!carries).then(|| (0..self.keep.len()).filter(|&c| self.keep[c]).collect())
    }

    /// Whether printed rows carry the passed fields (not in text output).
    fn rows_carry(format: OutputFormat) -> bool {
        format != OutputFormat::Text
    }

    /// The column names the writer gets: the passed inputs (in CSV and JSON
    /// lines only), then the printed outputs in print order.
    pub(super) fn writer_names(&self, outputs: &[&str], format: OutputFormat) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        if View::rows_carry(format) {
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
    /// (`time` is the step's time, in a run with `--time`).
    pub(super) fn fill(
        &self,
        samples: &mut Vec<Sample>,
        format: OutputFormat,
        row: Option<&[Option<Value>]>,
        outputs: impl Iterator<Item = Sample>,
        time: Option<&Value>,
    ) {
        samples.clear();
        if View::rows_carry(format) && self.time {
            samples.push(time.map_or(Sample::NoVal, |t| Sample::Value(t.clone())));
        }
        if View::rows_carry(format) {
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
    pub(super) fn context<'r>(&'r self, row: &'r [Option<Value>]) -> Vec<(&'r str, &'r Value)> {
        self.pass
            .iter()
            .filter_map(|(n, i)| row[*i].as_ref().map(|v| (n.as_str(), v)))
            .collect()
    }
}

/// A writer that writes nothing (`--quiet`): no CSV header either.
pub(super) struct NullWriter;

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

/// The counters and the malformed-row policy of one run.
pub(super) struct Tally {
    pub(super) on_malformed: OnMalformed,
    /// Rows the reader gave or failed on (skipped malformed rows included).
    pub(super) rows_read: u64,
    /// Rows the monitor evaluated.
    pub(super) steps: u64,
    /// Malformed rows dropped.
    pub(super) skipped: u64,
    started: Instant,
    pub(super) progress: Progress,
}

impl From<OnMalformed> for crate::pipeline::Malformed {
    fn from(policy: OnMalformed) -> crate::pipeline::Malformed {
        match policy {
            OnMalformed::Stop => crate::pipeline::Malformed::Stop,
            OnMalformed::Skip => crate::pipeline::Malformed::Skip,
            OnMalformed::Warn => crate::pipeline::Malformed::Warn,
        }
    }
}

impl Tally {
    pub(super) fn new(on_malformed: OnMalformed, progress: Progress) -> Tally {
        Tally {
            on_malformed,
            rows_read: 0,
            steps: 0,
            skipped: 0,
            started: Instant::now(),
            progress,
        }
    }

    /// A reader error: `true` when the policy drops the row and the reader
    /// can go on (counted, and reported with `warn`); `false` when the run
    /// stops. An I/O error or a reader that cannot continue always stops.
    pub(super) fn skip_trace_error(&mut self, e: &TraceError, reader: &dyn RowReader) -> bool {
        if !crate::pipeline::droppable(self.on_malformed.into(), e, reader) {
            return false;
        }
        self.rows_read += 1;
        self.dropped(e);
        true
    }

    /// A row the monitor rejected (`at` locates it): `true` when the policy
    /// drops it.
    pub(super) fn skip_rejected(&mut self, at: &str, e: &dyn std::fmt::Display) -> bool {
        if self.on_malformed == OnMalformed::Stop {
            return false;
        }
        self.dropped(&format_args!("{at}: {e}"));
        true
    }

    /// Adds the rows a feed read and the malformed rows it dropped (a merged
    /// run's feed counts them, and says the dropped ones itself).
    pub(super) fn add_read(&mut self, rows: u64, skipped: u64) {
        self.rows_read += rows;
        self.skipped += skipped;
    }

    fn dropped(&mut self, what: &dyn std::fmt::Display) {
        self.skipped += 1;
        if self.on_malformed == OnMalformed::Warn {
            self.progress
                .bar()
                .suspend(|| say(format_args!("warning: {what}; the row is skipped\n")));
        }
    }

    /// The summary's lines (`--summary`): rows, steps, skipped rows, the
    /// tier, declines, each trigger's firings, and the rate.
    pub(super) fn summary(&self, stats: &Stats, triggers: &[TriggerTally]) -> String {
        let plural =
            |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut text = format!(
            "summary: {} read, {} evaluated, {} skipped\n",
            plural(self.rows_read, "row", "rows"),
            plural(self.steps, "step", "steps"),
            plural(self.skipped, "malformed row", "malformed rows"),
        );
        let declined: u64 = stats.declines.iter().map(|(_, n)| n).sum();
        text.push_str(&format!(
            "summary: tier {} ({}); {}",
            stats.tier,
            stats.why,
            plural(declined, "decline", "declines")
        ));
        if !stats.declines.is_empty() {
            let reasons: Vec<String> = stats
                .declines
                .iter()
                .map(|(why, n)| format!("{n}: {why}"))
                .collect();
            text.push_str(&format!(" ({})", reasons.join("; ")));
        }
        text.push('\n');
        for t in triggers {
            match (&t.first, &t.last) {
                (Some(first), Some(last)) => text.push_str(&format!(
                    "summary: trigger {}: {}, first at step {first}, last at step {last}\n",
                    t.name,
                    plural(t.count, "firing", "firings")
                )),
                _ => text.push_str(&format!("summary: trigger {}: no firings\n", t.name)),
            }
        }
        let secs = self.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 {
            self.rows_read as f64 / secs
        } else {
            0.0
        };
        text.push_str(&format!("summary: {secs:.3} s, {rate:.0} rows/s\n"));
        text
    }
}

/// One trigger's firings, for the summary.
pub(super) struct TriggerTally {
    pub(super) name: String,
    pub(super) count: u64,
    /// The first and last step it fired at (with the key, in a keyed run:
    /// `3 (host=a)`).
    pub(super) first: Option<String>,
    pub(super) last: Option<String>,
}

impl TriggerTally {
    /// Where an alert fired, as the summary says it: its step, and in a
    /// keyed run the key input's name and the key (a key is data: at most
    /// 64 characters of it, escaped).
    pub(super) fn place(step: u64, key: Option<(&str, &dyn std::fmt::Display)>) -> String {
        match key {
            Some((name, k)) => format!(
                "{step} ({name}={})",
                super::escaped(&crate::row::excerpt(&k.to_string()))
            ),
            None => step.to_string(),
        }
    }

    /// Counts a firing of trigger `name` at `at` (a `place`) in `tallies`.
    pub(super) fn count(tallies: &mut [TriggerTally], name: &str, at: String) {
        if let Some(t) = tallies.iter_mut().find(|t| t.name == name) {
            t.count += 1;
            if t.first.is_none() {
                t.first = Some(at.clone());
            }
            t.last = Some(at);
        }
    }

    pub(super) fn of(spec: &Spec) -> Vec<TriggerTally> {
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

/// The progress bar of a file run on a terminal: rows, the share of the
/// file's bytes read, rows per second. Absent otherwise, so that nothing
/// extra reaches a standard error that is a file or a pipe.
pub(super) struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    /// Rows at the last update (updates are spaced to cost nothing per row).
    shown: u64,
}

/// A handle on a run's progress bar (none when no bar is shown), for the
/// writers of standard error to write with the bar off the terminal.
#[derive(Clone, Default)]
pub(super) struct Bar(Option<ProgressBar>);

impl Bar {
    /// Whether a bar is on the terminal (then standard error is written
    /// only with it suspended).
    pub(super) fn is_shown(&self) -> bool {
        self.0.is_some()
    }

    /// Runs `f` (which writes to standard error) with the bar hidden.
    pub(super) fn suspend(&self, f: impl FnOnce()) {
        match &self.0 {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }
}

/// Rows between two updates of the progress bar.
const PROGRESS_EVERY: u64 = 4096;

impl Progress {
    /// A bar for a run over a regular file of `len` bytes, when standard
    /// error is a terminal.
    pub(super) fn new(streaming: bool, len: Option<u64>) -> Progress {
        let bar = match len {
            Some(len) if !streaming && io::stderr().is_terminal() => {
                let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
                // The template is a constant; a failure would only lose the
                // bar's layout, never the run.
                if let Ok(style) = ProgressStyle::with_template("{bar:30} {percent:>3}% {msg}") {
                    bar.set_style(style);
                }
                Some(bar)
            }
            _ => None,
        };
        Progress {
            bar,
            started: Instant::now(),
            shown: 0,
        }
    }

    /// Updates the bar after `rows` rows, `reader` standing where it is.
    #[inline]
    pub(super) fn update(&mut self, rows: u64, reader: &dyn RowReader) {
        if self.bar.is_some() && rows >= self.shown + PROGRESS_EVERY {
            self.show(rows, reader);
        }
    }

    /// Shows `rows` and the reader's position on the bar.
    fn show(&mut self, rows: u64, reader: &dyn RowReader) {
        let Some(bar) = &self.bar else { return };
        self.shown = rows;
        if let Some(p) = reader.position() {
            bar.set_position(p.offset);
        }
        let secs = self.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 { rows as f64 / secs } else { 0.0 };
        bar.set_message(format!("{rows} rows, {rate:.0} rows/s"));
    }

    /// A handle on the bar, for what writes to standard error while it is
    /// shown.
    pub(super) fn bar(&self) -> Bar {
        Bar(self.bar.clone())
    }

    /// Takes the bar off the terminal at the end of the run.
    pub(super) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Why an explicitly requested tier is not the one running, and the one
/// that runs instead (`None` when the request is met, or is `auto`). Only
/// a difference is reported, so a run on the tier asked for stays silent.
pub(super) fn tier_fallback(requested: Tier, stats: &Stats) -> Option<(String, Tier)> {
    (requested != Tier::Auto && stats.tier != requested).then(|| (stats.why.clone(), stats.tier))
}
