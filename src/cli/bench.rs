//! `vigil bench`: one trace in memory, every tier built and timed per row and in batches, outputs checked identical.
//!
//! The trace is read once. For each tier the monitor is built (plan, lowering and compile times
//! come from its statistics), then the rows run `--repeat` times one `Monitor::step` at a time
//! and `--repeat` times through `Monitor::run_batch`, each repetition on a fresh run; the table
//! shows the median ns/row with the spread (fastest and slowest repetition), rows/s, the speed-up
//! over the canonical tier and the declines. Before any timing, every tier's outputs (and runtime
//! error) are compared with the canonical tier's, row by row and bit for bit: a tier that
//! disagrees is an engine bug, reported as such (exit 3), and nothing is timed.
//!
//! This is a tool for looking, not a measurement of record: the figures of record in
//! docs/benchmarks.md come from the criterion benches. The table fits 100 columns (`--wide` adds
//! each path's fastest and slowest repetition, the build times' parts and rows/s); `--json`
//! prints every figure with what was run where (spec, rows, repetitions, machine, vigil's
//! version, date); `--svg FILE` draws the chart (`plot`). Fewer than `SMALL_SAMPLE` rows draw a
//! warning: per-row times that short measure start-up and noise.

mod plot;

use super::{Exit, FormatArg, error, load_spec, print, say, trace_format};
use crate::bench::{self, Figures, Machine, median, spread};
use crate::monitor::{Spec, Tier};
use crate::trace::{self, ReaderOptions};
use crate::value::Value;
use std::fmt::Write as _;
use std::time::Duration;

/// `vigil bench SPEC --input TRACE …`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// The specification file (DSRV).
    pub spec: String,
    /// The trace (read into memory once).
    #[arg(long, short)]
    pub input: String,
    /// Trace format; `auto` picks by extension.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    pub format: FormatArg,
    /// The tiers to compare (default: every tier this build runs).
    #[arg(long, value_delimiter = ',', value_parser = super::tier_parser())]
    pub tiers: Option<Vec<Tier>>,
    /// Use only the first N rows of the trace.
    #[arg(long, value_name = "N")]
    pub rows: Option<usize>,
    /// Timed repetitions per tier and path (the median is shown).
    #[arg(long, value_name = "K", default_value_t = 5)]
    pub repeat: usize,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// A wider table: each path's fastest and slowest repetition, the build
    /// time's parts (plan/lowering/native compile) and rows/s.
    #[arg(long, conflicts_with = "json")]
    pub wide: bool,
    /// Also draw the results as a bar chart (SVG): log scale, whiskers from
    /// the fastest to the slowest repetition.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<String>,
}

/// Fewer timed rows than this draw a warning (see the module's doc).
const SMALL_SAMPLE: usize = 10_000;

/// What was run, where and when: the table's heading, the chart's subtitle
/// and the JSON's metadata.
struct Meta {
    /// The specification's file name.
    spec: String,
    rows: usize,
    repeat: usize,
    machine: Machine,
    /// vigil's version (the package's).
    version: &'static str,
    /// When the run started, `YYYY-MM-DD HH:MM UTC`.
    date: String,
}

impl Meta {
    fn new(args: &BenchArgs, rows: usize, repeat: usize) -> Meta {
        let spec = std::path::Path::new(&args.spec)
            .file_name()
            .map_or(args.spec.clone(), |n| n.to_string_lossy().into_owned());
        let now = time::OffsetDateTime::now_utc();
        let date = format!(
            "{:04}-{:02}-{:02} {:02}:{:02} UTC",
            now.year(),
            u8::from(now.month()),
            now.day(),
            now.hour(),
            now.minute()
        );
        Meta {
            spec,
            rows,
            repeat,
            machine: Machine::this(),
            version: env!("CARGO_PKG_VERSION"),
            date,
        }
    }

    /// The line under the title: what was timed, where and when.
    fn subtitle(&self) -> String {
        format!(
            "{} rows × {} repetitions · {} · vigil {} · {}",
            self.rows,
            self.repeat,
            self.machine.describe(),
            self.version,
            self.date
        )
    }
}

pub(super) fn bench(args: &BenchArgs) -> Exit {
    let spec = match load_spec(&args.spec) {
        Ok(s) => s,
        Err(exit) => return exit,
    };
    let rows = match read_rows(args, &spec) {
        Ok(r) => r,
        Err(exit) => return exit,
    };
    if rows.is_empty() {
        error(format_args!("`{}` has no rows to run", args.input));
        return Exit::Failure;
    }
    let tiers: Vec<Tier> = match &args.tiers {
        Some(t) => t.clone(),
        None => Tier::ALL.into_iter().filter(|t| *t != Tier::Auto).collect(),
    };
    let repeat = args.repeat.max(1);
    // Every tier must match the reference before anything is timed.
    let stopped = match bench::check(&spec, &tiers, &rows) {
        Ok(stopped) => stopped,
        Err((what, why)) => {
            error(format_args!(
                "{what} disagrees with the canonical tier ({why}): this is a bug in vigil; nothing was timed"
            ));
            return Exit::Runtime;
        }
    };
    let figures = bench::measure(&spec, &tiers, &rows, repeat);
    let meta = Meta::new(args, rows.len(), repeat);
    if rows.len() < SMALL_SAMPLE {
        say(format_args!(
            "warning: only {} rows were timed: with fewer than {SMALL_SAMPLE} the figures measure \
             start-up and noise more than the tiers (use a longer trace)\n",
            rows.len()
        ));
    }
    if let Some(path) = &args.svg
        && let Err(e) = draw(path, &meta, &figures)
    {
        error(format_args!("cannot draw `{path}`: {e}"));
        return Exit::Failure;
    }
    let text = if args.json {
        json(&meta, &figures)
    } else if args.wide {
        wide_table(&meta, &figures, stopped.as_deref())
    } else {
        table(&meta, &figures, stopped.as_deref())
    };
    print(&text)
}

/// The trace's rows, in memory.
fn read_rows(args: &BenchArgs, spec: &Spec) -> Result<Vec<Vec<Option<Value>>>, Exit> {
    let format = trace_format(&args.input, args.format)?;
    let schema = spec.input_schema();
    let opened = trace::open_trace(&args.input, format, &schema, ReaderOptions::default())
        .map_err(|e| {
            error(&e);
            Exit::Failure
        })?;
    let mut reader = opened.reader;
    let mut rows = Vec::new();
    let mut row = vec![None; schema.names.len()];
    let limit = args.rows.unwrap_or(usize::MAX);
    while rows.len() < limit {
        match reader.next_row(&mut row) {
            Ok(true) => rows.push(row.clone()),
            Ok(false) => break,
            Err(e) => {
                error(&e);
                return Err(Exit::Trace);
            }
        }
    }
    Ok(rows)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The heading of both tables: what was run, where and when.
fn heading(meta: &Meta, stopped: Option<&str>) -> String {
    let mut out = format!(
        "{} rows × {} repetitions of {}, outputs identical on every tier\n\
         vigil {} on {}, {}\n",
        meta.rows,
        meta.repeat,
        meta.spec,
        meta.version,
        meta.machine.describe(),
        meta.date
    );
    if let Some(e) = stopped {
        let _ = writeln!(out, "(every tier stops at the same runtime error: {e})");
    }
    out
}

/// The lines under both tables: the stepper when it was not timed, and each
/// tier that fell back, with the reason.
fn footnotes(out: &mut String, figures: &[Figures]) {
    if figures.iter().all(|f| f.stepper.is_none()) {
        let _ = writeln!(
            out,
            "stepper: not timed (a stepper takes scalars, and the trace has other values)"
        );
    }
    for f in figures.iter().filter(|f| f.why != "requested") {
        let name = match f.requested == f.tier {
            true => f.tier.name().to_string(),
            false => format!("{}→{}", f.requested.name(), f.tier.name()),
        };
        wrap(out, &format!("{name}: {}", f.why));
    }
}

/// Appends `text` to `out` in lines of at most 100 columns (where its words
/// allow), the later ones indented.
fn wrap(out: &mut String, text: &str) {
    let mut width = 0;
    for word in text.split(' ') {
        let n = word.chars().count();
        if width > 0 && width + 1 + n > 100 {
            out.push_str("\n  ");
            width = 2;
        } else if width > 0 {
            out.push(' ');
            width += 1;
        }
        out.push_str(word);
        width += n;
    }
    out.push('\n');
}

/// A tier's name in the tables: the one asked for, starred when another ran
/// (the footnotes say which and why).
fn tier_label(f: &Figures) -> String {
    match f.requested == f.tier {
        true => f.tier.name().to_string(),
        false => format!("{}*", f.requested.name()),
    }
}

/// The speed-up of `x` over `base`, or `-`.
fn speedup(base: Option<f64>, x: f64) -> String {
    base.map_or("-".into(), |b| format!("{:.2}", b / x))
}

/// The canonical tier's medians per row, in batches and through a stepper,
/// the bases of the speed-ups.
fn bases(figures: &[Figures]) -> [Option<f64>; 3] {
    let canonical = figures.iter().find(|f| f.tier == Tier::Canonical);
    [
        canonical.map(|c| median(&c.per_row)),
        canonical.map(|c| median(&c.batch)),
        canonical.and_then(|c| c.stepper.as_deref()).map(median),
    ]
}

/// The table, no wider than 100 columns: per tier the build time, each
/// path's median and speed-up over canonical, the widest spread of its paths
/// and the declines.
fn table(meta: &Meta, figures: &[Figures], stopped: Option<&str>) -> String {
    let [row_base, batch_base, stepper_base] = bases(figures);
    let mut out = heading(meta, stopped);
    let _ = writeln!(
        out,
        "{:<15} {:>9} {:>10} {:>6} {:>9} {:>6} {:>10} {:>6} {:>7} {:>8}",
        "tier",
        "build ms",
        "per row ns",
        "×canon",
        "batch ns",
        "×canon",
        "stepper ns",
        "×canon",
        "spread",
        "declines"
    );
    for f in figures {
        let (r, b) = (median(&f.per_row), median(&f.batch));
        let (stepped, stepped_speedup) = match &f.stepper {
            Some(times) => {
                let s = median(times);
                (plot::short(s), speedup(stepper_base, s))
            }
            None => ("-".into(), "-".into()),
        };
        // The widest (slowest - fastest) / median of the tier's paths.
        let spread = [Some(&f.per_row), Some(&f.batch), f.stepper.as_ref()]
            .into_iter()
            .flatten()
            .map(|xs| {
                let (lo, hi) = spread(xs);
                (hi - lo) / median(xs)
            })
            .fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "{:<15} {:>9.2} {:>10} {:>6} {:>9} {:>6} {:>10} {:>6} {:>7} {:>8}",
            tier_label(f),
            ms(f.plan) + ms(f.lowering) + ms(f.compile),
            plot::short(r),
            speedup(row_base, r),
            plot::short(b),
            speedup(batch_base, b),
            stepped,
            stepped_speedup,
            format!("{:.0}%", spread * 100.0),
            f.declines,
        );
    }
    let _ = writeln!(
        out,
        "(medians of the repetitions; spread: (slowest - fastest) / median, the widest of a tier's paths)"
    );
    footnotes(&mut out, figures);
    out
}

/// The wide table (`--wide`): each path's median with its fastest and
/// slowest repetition, the build time's parts and rows/s.
fn wide_table(meta: &Meta, figures: &[Figures], stopped: Option<&str>) -> String {
    let [row_base, batch_base, stepper_base] = bases(figures);
    let mut out = heading(meta, stopped);
    let _ = writeln!(
        out,
        "{:<15} {:>22} {:>24} {:>12} {:>9} {:>24} {:>9} {:>24} {:>9} {:>9}",
        "tier",
        "build ms (plan/lower/jit)",
        "per row ns (min-max)",
        "rows/s",
        "×canon",
        "batch ns (min-max)",
        "×canon",
        "stepper ns (min-max)",
        "×canon",
        "declines"
    );
    for f in figures {
        let (r, b) = (median(&f.per_row), median(&f.batch));
        let ((r0, r1), (b0, b1)) = (spread(&f.per_row), spread(&f.batch));
        let (stepped, stepped_speedup) = match &f.stepper {
            Some(times) => {
                let (s, (s0, s1)) = (median(times), spread(times));
                (
                    format!("{s:.1} ({s0:.1}-{s1:.1})"),
                    speedup(stepper_base, s),
                )
            }
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "{:<15} {:>22} {:>24} {:>12.0} {:>9} {:>24} {:>9} {:>24} {:>9} {:>9}",
            tier_label(f),
            format!(
                "{:.2}/{:.2}/{:.2}",
                ms(f.plan),
                ms(f.lowering),
                ms(f.compile)
            ),
            format!("{r:.1} ({r0:.1}-{r1:.1})"),
            1e9 / r,
            speedup(row_base, r),
            format!("{b:.1} ({b0:.1}-{b1:.1})"),
            speedup(batch_base, b),
            stepped,
            stepped_speedup,
            f.declines,
        );
    }
    footnotes(&mut out, figures);
    out
}

fn json(meta: &Meta, figures: &[Figures]) -> String {
    let tiers: Vec<serde_json::Value> = figures
        .iter()
        .map(|f| {
            serde_json::json!({
                "requested": f.requested.name(),
                "tier": f.tier.name(),
                "why": f.why,
                "plan_ms": ms(f.plan),
                "lowering_ms": ms(f.lowering),
                "compile_ms": ms(f.compile),
                "per_row_ns": f.per_row,
                "per_row_median_ns": median(&f.per_row),
                "batch_ns": f.batch,
                "batch_median_ns": median(&f.batch),
                "stepper_ns": f.stepper,
                "stepper_median_ns": f.stepper.as_deref().map(median),
                "declines": f.declines,
            })
        })
        .collect();
    let m = &meta.machine;
    format!(
        "{}\n",
        serde_json::json!({
            "spec": meta.spec,
            "rows": meta.rows,
            "repeat": meta.repeat,
            "small_sample": meta.rows < SMALL_SAMPLE,
            "vigil_version": meta.version,
            "date": meta.date,
            "machine": {"cpu": m.cpu, "threads": m.threads, "os": m.os, "arch": m.arch},
            "identical": true,
            "tiers": tiers,
        })
    )
}

/// The chart (`plot`), written to `path`.
fn draw(path: &str, meta: &Meta, figures: &[Figures]) -> Result<(), String> {
    let bars: Vec<plot::TierBars> = figures
        .iter()
        .map(|f| plot::TierBars {
            label: tier_label(f),
            paths: [
                Some(plot::Timing::of(&f.per_row)),
                Some(plot::Timing::of(&f.batch)),
                f.stepper.as_deref().map(plot::Timing::of),
            ],
        })
        .collect();
    let title = format!("vigil bench: {}, ns per row by tier", meta.spec);
    let svg = plot::svg(&title, &meta.subtitle(), &bars)?;
    std::fs::write(path, svg).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footnotes_wrap_at_100_columns() {
        let mut out = String::new();
        let long = "word ".repeat(40);
        wrap(&mut out, long.trim());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(lines.iter().all(|l| l.chars().count() <= 100), "{out}");
        assert!(lines[1].starts_with("  word"), "{out}");
        assert_eq!(out.split_whitespace().count(), 40);
    }
}
