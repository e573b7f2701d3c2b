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
//! This is a tool for looking, not a measurement of record: the README's performance figures come
//! from the criterion benches. `--json` prints the table as JSON, `--svg FILE` draws it (plotters).

use super::{Exit, FormatArg, error, load_spec, print, trace_format};
use crate::monitor::{Monitor, Spec, Stepper, Tier};
use crate::row::StepError;
use crate::trace::{self, ReaderOptions};
use crate::value::{Sample, Value};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

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
    /// Also draw the results as a bar chart (SVG).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<String>,
}

/// One tier's figures.
#[derive(Debug)]
struct Figures {
    /// The tier asked for, and the one that ran.
    requested: Tier,
    tier: Tier,
    why: String,
    plan: Duration,
    lowering: Duration,
    compile: Duration,
    /// ns/row of each repetition, per row and in batches.
    per_row: Vec<f64>,
    batch: Vec<f64>,
    /// Through a `Stepper`, when every cell of the trace is a scalar (or
    /// absent), so that the stepper is given the same rows.
    stepper: Option<Vec<f64>>,
    declines: u64,
}

/// A run's outputs: every step's samples, then the runtime error, if any.
type Outcome = (Vec<Vec<Sample>>, Option<String>);

/// Rows per batch (the CLI's own batch size).
const BATCH_ROWS: usize = 4096;

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
    // A stepper takes scalars only: it is timed when it is given the rows
    // the other paths are.
    let scalar = (rows.iter().flatten().flatten())
        .all(|v| matches!(v, Value::Int(_) | Value::Float(_) | Value::Bool(_)));
    // The reference every tier must match before anything is timed.
    let expected = outcome(&spec, Tier::Canonical, &rows);
    for &tier in &tiers {
        let got = outcome(&spec, tier, &rows);
        let stepped = scalar.then(|| stepper_outcome(&spec, tier, &rows));
        let wrong = (mismatch(&spec, &expected, &got).map(|why| (tier.name().to_string(), why)))
            .or_else(|| {
                let stepped = stepped.as_ref()?;
                let why = mismatch(&spec, &expected, stepped)?;
                Some((format!("{tier} through a stepper"), why))
            });
        if let Some((what, why)) = wrong {
            error(format_args!(
                "{what} disagrees with the canonical tier ({why}): this is a bug in vigil; nothing was timed"
            ));
            return Exit::Runtime;
        }
    }
    let mut figures = Vec::new();
    for &tier in &tiers {
        let monitor = Monitor::builder(&spec).tier(tier).build();
        let stats = monitor.stats();
        let mut f = Figures {
            requested: tier,
            tier: monitor.tier(),
            why: stats.why,
            plan: stats.plan_time,
            lowering: stats.lowering_time,
            compile: stats.compile_time,
            per_row: Vec::new(),
            batch: Vec::new(),
            stepper: None,
            declines: 0,
        };
        let mut m = monitor;
        for _ in 0..repeat {
            m.reset();
            f.per_row.push(time_rows(&mut m, &rows));
        }
        f.declines = m.stats().declines.iter().map(|(_, n)| n).sum();
        for _ in 0..repeat {
            m.reset();
            f.batch.push(time_batches(&mut m, &rows));
        }
        if scalar {
            let times = (0..repeat).map(|_| {
                m.reset();
                time_stepper(&mut m, &rows)
            });
            f.stepper = Some(times.collect());
        }
        figures.push(f);
    }
    if let Some(path) = &args.svg
        && let Err(e) = draw(path, &figures)
    {
        error(format_args!("cannot draw `{path}`: {e}"));
        return Exit::Failure;
    }
    let text = if args.json {
        json(&figures, rows.len())
    } else {
        table(&figures, rows.len(), expected.1.as_deref())
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

/// Every step's outputs on `tier`, up to a runtime error.
fn outcome(spec: &Spec, tier: Tier, rows: &[Vec<Option<Value>>]) -> Outcome {
    let mut m = Monitor::builder(spec).tier(tier).build();
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        match m.step(row) {
            Ok(o) => out.push(o.to_vec()),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
    (out, None)
}

/// Gives a stepper the cells of `row` (every one a scalar or absent).
fn set_cells(stepper: &mut Stepper<'_>, row: &[Option<Value>]) {
    for (k, cell) in row.iter().enumerate() {
        // The reader conformed every value to its input, as the setters do.
        stepper
            .set(k, cell.as_ref())
            .expect("a reader's scalar cells fit their inputs");
    }
}

/// `outcome` through a `Stepper` (the trace's cells all scalars).
fn stepper_outcome(spec: &Spec, tier: Tier, rows: &[Vec<Option<Value>>]) -> Outcome {
    let mut m = Monitor::builder(spec).tier(tier).build();
    let mut stepper = m.stepper();
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        set_cells(&mut stepper, row);
        match stepper.step() {
            Ok(o) => out.push(o.to_vec()),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
    (out, None)
}

/// Where two outcomes differ, if they do (`Value`'s equality is bitwise:
/// floats by their bits).
fn mismatch(spec: &Spec, a: &Outcome, b: &Outcome) -> Option<String> {
    let names = spec.output_names();
    for (step, (x, y)) in a.0.iter().zip(&b.0).enumerate() {
        if let Some(k) = (0..x.len()).find(|&k| x[k] != y[k]) {
            return Some(format!(
                "step {step}, `{}`: {} against {}",
                names[k], x[k], y[k]
            ));
        }
    }
    if a.0.len() != b.0.len() || a.1 != b.1 {
        return Some(format!(
            "the canonical run ends after {} steps ({}), this one after {} ({})",
            a.0.len(),
            a.1.as_deref().unwrap_or("no error"),
            b.0.len(),
            b.1.as_deref().unwrap_or("no error")
        ));
    }
    None
}

/// ns/row of one pass of `rows` through `Monitor::step` (to a runtime
/// error, which the check above made the same on every tier).
fn time_rows(m: &mut Monitor, rows: &[Vec<Option<Value>>]) -> f64 {
    let start = Instant::now();
    let mut done = 0;
    for row in rows {
        match m.step(row) {
            Ok(o) => {
                // Read the outputs, so that nothing is optimised away (a
                // spec may print none).
                std::hint::black_box(o.iter().next());
                done += 1;
            }
            Err(StepError::Runtime(_)) => break,
            Err(StepError::Row(_)) => unreachable!("a reader's rows fit"),
        }
    }
    start.elapsed().as_nanos() as f64 / done.max(1) as f64
}

/// ns/row of one pass of `rows` through a `Stepper` (setting the cells is
/// timed, as it is part of giving a row).
fn time_stepper(m: &mut Monitor, rows: &[Vec<Option<Value>>]) -> f64 {
    let mut stepper = m.stepper();
    let start = Instant::now();
    let mut done = 0;
    for row in rows {
        set_cells(&mut stepper, row);
        match stepper.step() {
            Ok(o) => {
                std::hint::black_box(o.iter().next());
                done += 1;
            }
            Err(StepError::Runtime(_)) => break,
            Err(StepError::Row(_)) => unreachable!("a reader's rows fit"),
        }
    }
    start.elapsed().as_nanos() as f64 / done.max(1) as f64
}

/// ns/row of one pass of `rows` through `Monitor::run_batch`, in batches
/// of `BATCH_ROWS` (filling the batches is not timed).
fn time_batches(m: &mut Monitor, rows: &[Vec<Option<Value>>]) -> f64 {
    let batches: Vec<_> = rows
        .chunks(BATCH_ROWS)
        .map(|chunk| {
            let mut b = m.batch();
            for r in chunk {
                let _ = b.push_row(r);
            }
            b
        })
        .collect();
    let mut out = crate::batch::OutputBatch::new();
    let start = Instant::now();
    let mut done = 0;
    for b in &batches {
        let result = m.run_batch(b, &mut out);
        done += out.len();
        if result.is_err() {
            break;
        }
    }
    start.elapsed().as_nanos() as f64 / done.max(1) as f64
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn spread(xs: &[f64]) -> (f64, f64) {
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(0.0, f64::max);
    (min, max)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn table(figures: &[Figures], rows: usize, stopped: Option<&str>) -> String {
    let canonical = figures.iter().find(|f| f.tier == Tier::Canonical);
    let base = |path: fn(&Figures) -> &[f64]| canonical.map(|c| median(path(c)));
    let (row_base, batch_base) = (base(|f| &f.per_row), base(|f| &f.batch));
    let stepper_base = canonical.and_then(|c| c.stepper.as_deref()).map(median);
    let mut out = format!("{rows} rows, outputs identical on every tier\n");
    if let Some(e) = stopped {
        let _ = writeln!(out, "(every tier stops at the same runtime error: {e})");
    }
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
        let speedup =
            |base: Option<f64>, x: f64| base.map_or("-".into(), |b| format!("{:.2}", b / x));
        let name = match f.requested == f.tier {
            true => f.tier.name().to_string(),
            false => format!("{}→{}", f.requested.name(), f.tier.name()),
        };
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
            name,
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
    if figures.iter().all(|f| f.stepper.is_none()) {
        let _ = writeln!(
            out,
            "stepper: not timed (a stepper takes scalars, and the trace has other values)"
        );
    }
    for f in figures.iter().filter(|f| f.why != "requested") {
        let _ = writeln!(out, "{}: {}", f.requested.name(), f.why);
    }
    out
}

fn json(figures: &[Figures], rows: usize) -> String {
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
    format!(
        "{}\n",
        serde_json::json!({ "rows": rows, "identical": true, "tiers": tiers })
    )
}

/// The medians as grouped bars (per row, in batches) per tier.
fn draw(path: &str, figures: &[Figures]) -> Result<(), String> {
    use plotters::prelude::*;
    let (w, h) = (120 + 190 * figures.len() as u32, 360);
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let top = figures
        .iter()
        .map(|f| {
            let stepped = f.stepper.as_deref().map_or(0.0, median);
            median(&f.per_row).max(median(&f.batch)).max(stepped)
        })
        .fold(1.0, f64::max);
    let (x0, y0, plot_h) = (80i32, 320i32, 260.0);
    let text = |s: &str, x: i32, y: i32| Text::new(s.to_string(), (x, y), ("sans-serif", 13));
    root.draw(&text("ns/row (median)", 8, 16))
        .map_err(|e| e.to_string())?;
    for (i, f) in figures.iter().enumerate() {
        let x = x0 + 190 * i as i32;
        let stepped = f.stepper.as_deref().map(|t| (median(t), GREEN));
        let bars = [
            Some((median(&f.per_row), BLUE)),
            Some((median(&f.batch), RED)),
            stepped,
        ];
        for (k, (v, colour)) in bars
            .into_iter()
            .enumerate()
            .filter_map(|(k, b)| Some((k, b?)))
        {
            let bar = (v / top * plot_h) as i32;
            let left = x + 50 * k as i32;
            root.draw(&Rectangle::new(
                [(left, y0 - bar), (left + 40, y0)],
                colour.mix(0.7).filled(),
            ))
            .map_err(|e| e.to_string())?;
            root.draw(&text(&format!("{v:.1}"), left, y0 - bar - 4))
                .map_err(|e| e.to_string())?;
        }
        root.draw(&text(f.requested.name(), x, y0 + 18))
            .map_err(|e| e.to_string())?;
    }
    root.draw(&text(
        "blue: per row   red: in batches   green: through a stepper",
        8,
        h as i32 - 6,
    ))
    .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_differing_tier_is_found_to_the_bit() {
        let spec = Spec::parse("t.dsrv", "in x: Float\nout y: Float\ny = x\n").unwrap();
        let f = |v: f64| Sample::Value(Value::Float(v));
        let a: Outcome = (vec![vec![f(1.0)], vec![f(0.0)]], None);
        assert_eq!(mismatch(&spec, &a, &a.clone()), None);
        let b: Outcome = (vec![vec![f(1.0)], vec![f(-0.0)]], None);
        let why = mismatch(&spec, &a, &b).unwrap();
        assert!(why.starts_with("step 1, `y`"), "{why}");
        let c: Outcome = (vec![vec![f(1.0)]], Some("boom".into()));
        assert!(
            mismatch(&spec, &a, &c)
                .unwrap()
                .contains("ends after 2 steps")
        );
    }
}
