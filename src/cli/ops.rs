//! Operator controls of `vigil run`: which columns are printed (`--only`,
//! `--quiet`, `--pass`), what a malformed row does (`--on-malformed`), the
//! end-of-run summary (`--summary`), the progress bar on a terminal, and the
//! check of the tier that runs against the one requested (`--strict-tier`).
//!
//! None of this changes the monitor: the columns are chosen among the
//! samples a step produced before they reach the writer, and a skipped row
//! is simply never given to the monitor.

use super::RunArgs;
use crate::monitor::{Spec, Stats, Tier};
use crate::trace::{OutputFormat, RowReader};
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

pub(super) use crate::pipeline::sink::{Columns as View, NullWriter, TriggerTally};

/// The columns `args` ask for (`--only`, `--quiet`, `--pass`, `--time`);
/// `Err` is a usage error's message.
pub(super) fn view(args: &RunArgs, spec: &Spec, output: OutputFormat) -> Result<View, String> {
    let options = crate::pipeline::sink::ColumnOptions {
        spec_name: &args.spec,
        only: args.only.as_deref(),
        pass: args.pass.as_deref(),
        quiet: args.quiet,
        time: args.time.is_some() || args.clock == super::ClockArg::Wall,
        key: args.key.as_deref(),
        alert_lines: args.alerts.is_some(),
    };
    View::new(spec, &options, output)
}

/// The schema a run's traces are read with: the declared inputs, then the
/// undeclared `--pass` fields as untyped inputs.
pub(super) fn read_schema(args: &RunArgs, spec: &Spec) -> crate::trace::InputSchema {
    crate::pipeline::sink::read_schema(spec, args.pass.as_deref())
}

/// The schema of a run's traces with `--time`'s field among its cells, and
/// that field's cell.
pub(super) fn timed_schema(
    args: &RunArgs,
    spec: &Spec,
) -> (crate::trace::InputSchema, Option<usize>) {
    crate::pipeline::sink::timed_schema(spec, args.pass.as_deref(), args.time.as_deref())
}

/// The counters of one run, and its progress bar.
pub(super) struct Tally {
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
    pub(super) fn new(progress: Progress) -> Tally {
        Tally {
            rows_read: 0,
            steps: 0,
            skipped: 0,
            started: Instant::now(),
            progress,
        }
    }

    /// Adds what a run of one source counted.
    pub(super) fn add(&mut self, counts: crate::pipeline::drive::Counts) {
        self.rows_read += counts.rows_read;
        self.steps += counts.steps;
        self.skipped += counts.skipped;
    }

    /// Adds the rows a feed read and the malformed rows it dropped (a merged
    /// run's feed counts them, and says the dropped ones itself).
    pub(super) fn add_read(&mut self, rows: u64, skipped: u64) {
        self.rows_read += rows;
        self.skipped += skipped;
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
