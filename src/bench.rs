//! Every tier of a specification checked against the canonical tier and timed over the same
//! rows in memory: what `vigil bench` prints, for an embedder that compares the tiers itself.
//!
//! [`check`] runs the rows on each tier (and through a [`Stepper`] where every cell is a
//! scalar) and compares the outputs and runtime error with the canonical tier's, bit for bit:
//! a tier that disagrees is an engine bug. [`measure`] then builds each tier's monitor (its
//! plan, lowering and compile times from its statistics) and times `repeat` passes of the rows
//! one [`Monitor::step`] at a time, in batches through [`Monitor::run_batch`] and through a
//! stepper, each pass on a fresh run. These are figures for looking, not of record: criterion
//! benches give those.
//!
//! ```
//! use vigil::{Spec, Tier, Value, bench};
//!
//! let spec = Spec::parse("sum.dsrv", "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x\n")?;
//! let rows: Vec<Vec<Option<Value>>> = (0..1000).map(|i| vec![Some(Value::Int(i))]).collect();
//! let tiers = [Tier::Canonical, Tier::Quickened];
//! assert_eq!(bench::check(&spec, &tiers, &rows), Ok(None));
//! let figures = bench::measure(&spec, &tiers, &rows, 3);
//! assert_eq!(figures.len(), 2);
//! assert_eq!(figures[1].tier, Tier::Quickened);
//! assert_eq!(figures[1].per_row.len(), 3);
//! assert!(figures[1].stepper.is_some()); // every cell a scalar
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::monitor::{Monitor, Outputs, Spec, Stepper, Tier};
use crate::row::StepError;
use crate::value::{Sample, Value};
use std::time::{Duration, Instant};

/// The machine the figures come from.
pub struct Machine {
    /// The processor's model name (Linux's `/proc/cpuinfo`), if known.
    pub cpu: Option<String>,
    /// The hardware threads this process may use.
    pub threads: usize,
    /// The operating system (`std::env::consts::OS`).
    pub os: &'static str,
    /// The processor architecture (`std::env::consts::ARCH`).
    pub arch: &'static str,
}

impl Machine {
    /// This machine.
    pub fn this() -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                let line = info.lines().find(|l| l.starts_with("model name"))?;
                Some(
                    line.split_once(':')?
                        .1
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                )
            });
        Machine {
            cpu,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
        }
    }

    /// The machine in a line: processor, threads, system.
    pub fn describe(&self) -> String {
        format!(
            "{}, {} threads, {} {}",
            self.cpu.as_deref().unwrap_or("unknown processor"),
            self.threads,
            self.os,
            self.arch
        )
    }
}

/// One tier's figures.
#[derive(Debug)]
pub struct Figures {
    /// The tier asked for, and the one that ran.
    pub requested: Tier,
    /// The tier that ran (another where the requested one cannot run the spec).
    pub tier: Tier,
    /// Why that tier runs (the monitor's statistics).
    pub why: String,
    /// The times to plan, lower and compile the monitor.
    pub plan: Duration,
    /// (See `plan`.)
    pub lowering: Duration,
    /// (See `plan`.)
    pub compile: Duration,
    /// ns/row of each repetition, one row at a time.
    pub per_row: Vec<f64>,
    /// ns/row of each repetition, in batches.
    pub batch: Vec<f64>,
    /// Through a `Stepper`, when every cell of the trace is a scalar (or
    /// absent), so that the stepper is given the same rows.
    pub stepper: Option<Vec<f64>>,
    /// The rows the fast tiers declined to the canonical one.
    pub declines: u64,
}

/// A run's outputs: every step's samples, then the runtime error, if any.
type Outcome = (Vec<Vec<Sample>>, Option<String>);

/// Rows per batch (the command line's own batch size).
pub const BATCH_ROWS: usize = 4096;

/// Checks every tier of `tiers` against the canonical tier over `rows`
/// (and through a stepper where every cell is a scalar): the canonical
/// run's runtime error, if it stopped at one (`Ok(None)`: it ran every
/// row), or what disagrees, as `(what, why)` — an engine bug.
pub fn check(
    spec: &Spec,
    tiers: &[Tier],
    rows: &[Vec<Option<Value>>],
) -> Result<Option<String>, (String, String)> {
    let scalar = all_scalars(rows);
    let expected = outcome(spec, Tier::Canonical, rows);
    for &tier in tiers {
        let got = outcome(spec, tier, rows);
        if let Some(why) = mismatch(spec, &expected, &got) {
            return Err((tier.name().to_string(), why));
        }
        if scalar && let Some(why) = mismatch(spec, &expected, &stepper_outcome(spec, tier, rows)) {
            return Err((format!("{tier} through a stepper"), why));
        }
    }
    Ok(expected.1)
}

/// Whether every cell of `rows` is a scalar (or absent): a stepper takes
/// scalars only, so it is timed only when it is given the rows the other
/// paths are.
fn all_scalars(rows: &[Vec<Option<Value>>]) -> bool {
    (rows.iter().flatten().flatten())
        .all(|v| matches!(v, Value::Int(_) | Value::Float(_) | Value::Bool(_)))
}

/// Times each tier of `tiers` over `rows`, `repeat` passes a path (at least
/// one): per row, in batches, and through a stepper where every cell is a
/// scalar. Check the tiers first ([`check`]).
pub fn measure(
    spec: &Spec,
    tiers: &[Tier],
    rows: &[Vec<Option<Value>>],
    repeat: usize,
) -> Vec<Figures> {
    let (scalar, repeat) = (all_scalars(rows), repeat.max(1));
    let mut figures = Vec::new();
    for &tier in tiers {
        let mut m = Monitor::builder(spec).tier(tier).build();
        let stats = m.stats();
        let mut f = Figures {
            requested: tier,
            tier: m.tier(),
            why: stats.why,
            plan: stats.plan_time,
            lowering: stats.lowering_time,
            compile: stats.compile_time,
            per_row: Vec::new(),
            batch: Vec::new(),
            stepper: None,
            declines: 0,
        };
        for _ in 0..repeat {
            m.reset();
            f.per_row.push(time_rows(&mut m, rows));
        }
        f.declines = m.stats().declines.iter().map(|(_, n)| n).sum();
        // The batch kernels are compiled before the first timed batch, which
        // would otherwise include a millisecond of compilation (on 100,000
        // rows, 10 ns a row: as much as the kernel's own time).
        m.prepare_batches();
        for _ in 0..repeat {
            m.reset();
            f.batch.push(time_batches(&mut m, rows));
        }
        if scalar {
            let times = (0..repeat).map(|_| {
                m.reset();
                time_stepper(&mut m, rows)
            });
            f.stepper = Some(times.collect());
        }
        figures.push(f);
    }
    figures
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
    time_pass(rows, |row| m.step(row).map(read))
}

/// ns/row of one pass of `rows` through a `Stepper` (setting the cells is
/// timed, as it is part of giving a row).
fn time_stepper(m: &mut Monitor, rows: &[Vec<Option<Value>>]) -> f64 {
    let mut stepper = m.stepper();
    time_pass(rows, |row| {
        set_cells(&mut stepper, row);
        stepper.step().map(read)
    })
}

/// Reads a step's outputs, so that nothing is optimised away (a spec may
/// print none).
fn read(o: Outputs<'_>) {
    std::hint::black_box(o.iter().next());
}

/// ns/row of `step` over `rows`, up to a runtime error.
fn time_pass(
    rows: &[Vec<Option<Value>>],
    mut step: impl FnMut(&[Option<Value>]) -> Result<(), StepError>,
) -> f64 {
    let start = Instant::now();
    let mut done = 0;
    for row in rows {
        match step(row) {
            Ok(()) => done += 1,
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

/// The median of `xs` (not empty).
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The fastest and slowest of `xs`.
pub fn spread(xs: &[f64]) -> (f64, f64) {
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(0.0, f64::max);
    (min, max)
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
