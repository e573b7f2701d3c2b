//! The library API: `Spec` (parse and check), `Monitor` (step rows through a chosen tier), `Tier`.

pub use crate::canonical::ops::DEFAULT_MAX_STRING_BYTES;
use crate::error::RuntimeError;
pub use crate::exec::Tier;
use crate::exec::{Engine, Run};
use crate::lang::check::CheckedSpec;
use crate::lang::diag::Diagnostics;
use crate::lang::types::Type;
use crate::plan::Plan;
use crate::snapshot::{Snapshot, SnapshotError};
use crate::trace::InputSchema;
use crate::value::{Sample, Value};
use std::fmt;
use std::sync::Arc;

/// A parsed and checked specification.
///
/// ```
/// let spec = vigil::Spec::parse("counter.dsrv", "in x: Int\nout z: Int\nz = default(z[1], 0) + x").unwrap();
/// assert_eq!(spec.output_names(), ["z"]);
/// ```
#[derive(Clone, Debug)]
pub struct Spec {
    checked: Arc<CheckedSpec>,
}

impl Spec {
    /// Parses and checks `source`; `file` names it in diagnostics.
    pub fn parse(file: &str, source: &str) -> Result<Spec, Diagnostics> {
        crate::lang::parse_and_check(file, source).map(|c| Spec {
            checked: Arc::new(c),
        })
    }

    /// As `parse`, from the bytes of a file: the specification must be UTF-8
    /// (a leading byte-order mark is ignored); invalid UTF-8 is a located
    /// error at the first invalid byte.
    pub fn parse_bytes(file: &str, bytes: &[u8]) -> Result<Spec, Diagnostics> {
        crate::lang::parse_and_check_bytes(file, bytes).map(|c| Spec {
            checked: Arc::new(c),
        })
    }

    pub fn checked(&self) -> &Arc<CheckedSpec> {
        &self.checked
    }

    /// Declared inputs in declaration order: the cells of a row.
    pub fn input_names(&self) -> Vec<&str> {
        self.checked
            .inputs
            .iter()
            .map(|&s| self.checked.stream(s).name.as_str())
            .collect()
    }

    /// Printed outputs in print order (first mention in the spec text).
    pub fn output_names(&self) -> Vec<&str> {
        self.checked
            .outputs
            .iter()
            .map(|&s| self.checked.stream(s).name.as_str())
            .collect()
    }

    /// The declared inputs as trace readers need them.
    pub fn input_schema(&self) -> InputSchema {
        InputSchema {
            names: self.input_names().into_iter().map(String::from).collect(),
            types: self
                .checked
                .inputs
                .iter()
                .map(|&s| self.checked.stream(s).declared.unwrap_or(Type::Any))
                .collect(),
        }
    }
}

/// What a monitor counted: per tier, rows executed and declined (by reason),
/// promotions, materializations, and the time spent planning and lowering.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub tier: Tier,
    pub rows: u64,
    /// Streams evaluated by the canonical tier.
    pub canonical_streams: u64,
    /// Region runs completed by the fused tier.
    pub region_runs: u64,
    /// Rows completed by the whole-row kernel.
    pub whole_rows: u64,
    /// Cranelift compile time of the plan's native code.
    pub compile_time: std::time::Duration,
    /// Programs the JIT declined (they run quickened).
    pub compile_declines: Vec<String>,
    /// Region runs declined, by reason.
    pub declines: Vec<(String, u64)>,
    pub promotions: u64,
    pub materializations: u64,
    pub plan_time: std::time::Duration,
    pub lowering_time: std::time::Duration,
    /// Why `tier` was picked.
    pub why: String,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "tier: {} ({})", self.tier, self.why)?;
        writeln!(f, "rows: {}", self.rows)?;
        writeln!(
            f,
            "canonical: {} stream evaluations",
            self.canonical_streams
        )?;
        if self.tier != Tier::Canonical {
            let declined: u64 = self.declines.iter().map(|(_, n)| n).sum();
            if self.tier == Tier::NativeWhole {
                writeln!(
                    f,
                    "native-whole: {} rows executed by the whole-row kernel",
                    self.whole_rows
                )?;
            } else {
                writeln!(
                    f,
                    "{}: {} region runs executed",
                    self.tier, self.region_runs
                )?;
            }
            writeln!(f, "declined: {declined}")?;
            for (why, n) in &self.declines {
                writeln!(f, "  {n}: {why}")?;
            }
            writeln!(
                f,
                "promotions: {}, materializations: {}",
                self.promotions, self.materializations
            )?;
            writeln!(
                f,
                "plan: {:.3} ms, lowering: {:.3} ms, native compile: {:.3} ms",
                self.plan_time.as_secs_f64() * 1e3,
                self.lowering_time.as_secs_f64() * 1e3,
                self.compile_time.as_secs_f64() * 1e3
            )?;
            for d in &self.compile_declines {
                writeln!(f, "JIT declined {d}; it runs quickened")?;
            }
        }
        Ok(())
    }
}

/// The printed outputs of the step just evaluated, in print order: a view of
/// the monitor's state, so a step copies nothing it is not asked for.
#[derive(Clone, Copy)]
pub struct Outputs<'a> {
    state: &'a crate::canonical::NodeState,
    streams: &'a [crate::lang::check::StreamId],
}

impl Outputs<'_> {
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// Output `i` (see `Monitor::output_index`).
    pub fn get(&self, i: usize) -> Sample {
        self.state.raw(self.streams[i].0)
    }

    pub fn iter(&self) -> impl Iterator<Item = Sample> + '_ {
        self.streams.iter().map(|s| self.state.raw(s.0))
    }

    pub fn to_vec(&self) -> Vec<Sample> {
        self.iter().collect()
    }
}

impl fmt::Debug for Outputs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Configures a `Monitor`.
pub struct MonitorBuilder<'a> {
    spec: &'a Spec,
    tier: Tier,
    max_string_bytes: usize,
    /// The plan and run state of a snapshot to continue (`restore`).
    restored: Option<Restored>,
}

/// A snapshot checked against its plan, waiting for `build`.
struct Restored {
    plan: Arc<Plan>,
    state: crate::canonical::NodeState,
    failed: Option<RuntimeError>,
}

impl MonitorBuilder<'_> {
    pub fn tier(mut self, tier: Tier) -> Self {
        self.tier = tier;
        self
    }

    /// The longest string (in bytes) a `++` may produce; a longer result is a
    /// runtime error of kind `string too long` at that step, on every tier.
    /// Default: 16 MiB ([`DEFAULT_MAX_STRING_BYTES`]).
    pub fn max_string_bytes(mut self, bytes: usize) -> Self {
        self.max_string_bytes = bytes;
        self
    }

    /// Continues the run `snapshot` was taken of (on any tier) instead of
    /// starting at step 0. A snapshot of another specification, or one whose
    /// contents do not fit this one, is an error; nothing is misread.
    pub fn restore(mut self, snapshot: &Snapshot) -> Result<Self, SnapshotError> {
        let plan = Arc::new(Plan::new(self.spec.checked.clone()));
        let (state, failed) = snapshot.restore_state(&plan)?;
        self.restored = Some(Restored {
            plan,
            state,
            failed,
        });
        Ok(self)
    }

    pub fn build(self) -> Monitor {
        let (engine, mut run) = match self.restored {
            None => {
                let plan = Arc::new(Plan::new(self.spec.checked.clone()));
                let engine = Engine::new(plan, self.tier);
                let run = engine.new_run();
                (engine, run)
            }
            Some(r) => {
                let engine = Engine::new(r.plan, self.tier);
                let mut run = Run::from_state(&engine, r.state);
                run.failed = r.failed;
                (engine, run)
            }
        };
        run.state.max_string_bytes = self.max_string_bytes;
        Monitor { engine, run }
    }
}

/// A running monitor: feed it rows, one step each.
///
/// ```
/// use vigil::{Monitor, Sample, Spec, Value};
/// let spec = Spec::parse("sum.dsrv", "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x").unwrap();
/// let mut monitor = Monitor::builder(&spec).build();
/// let x = monitor.input_index("x").unwrap();
/// let mut row = vec![None; monitor.input_count()];
/// for v in [1, 2, 3] {
///     row[x] = Some(Value::Int(v));
///     monitor.step(&row).unwrap();
/// }
/// assert_eq!(monitor.output("total"), Some(Sample::Value(Value::Int(6))));
/// ```
pub struct Monitor {
    engine: Engine,
    run: Run,
}

impl Monitor {
    pub fn builder(spec: &Spec) -> MonitorBuilder<'_> {
        MonitorBuilder {
            spec,
            tier: Tier::Auto,
            max_string_bytes: DEFAULT_MAX_STRING_BYTES,
            restored: None,
        }
    }

    /// The tier actually running (never `Auto`).
    pub fn tier(&self) -> Tier {
        self.engine.tier
    }

    pub fn plan(&self) -> &Plan {
        self.engine.plan()
    }

    /// The engine running the rows (partition, regions, state).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn input_count(&self) -> usize {
        self.engine.plan().spec.inputs.len()
    }

    /// The cell of input `name` in a row.
    pub fn input_index(&self, name: &str) -> Option<usize> {
        let spec = &self.engine.plan().spec;
        spec.inputs
            .iter()
            .position(|&s| spec.stream(s).name == name)
    }

    /// The position of output `name` in `step`'s result.
    pub fn output_index(&self, name: &str) -> Option<usize> {
        let spec = &self.engine.plan().spec;
        spec.outputs
            .iter()
            .position(|&s| spec.stream(s).name == name)
    }

    pub fn output_names(&self) -> Vec<&str> {
        let spec = &self.engine.plan().spec;
        spec.outputs
            .iter()
            .map(|&s| spec.stream(s).name.as_str())
            .collect()
    }

    /// The current value of output `name` (after the last step).
    pub fn output(&self, name: &str) -> Option<Sample> {
        let s = self.engine.plan().spec.stream_by_name(name)?;
        Some(self.run.state.raw(s.0))
    }

    /// The bytes allocated for offset history (see `NodeState::history_bytes`).
    pub fn history_bytes(&self) -> usize {
        self.run.state.history_bytes()
    }

    /// The number of steps evaluated so far.
    pub fn steps(&self) -> u64 {
        self.run.state.step
    }

    /// Counters of the run so far.
    pub fn stats(&self) -> Stats {
        let s = &self.engine.stats;
        Stats {
            tier: self.engine.tier,
            rows: s.rows,
            canonical_streams: s.canonical_streams,
            region_runs: s.region_runs,
            whole_rows: s.whole_rows,
            compile_time: s.compile_time,
            compile_declines: s.compile_declines.clone(),
            declines: self.engine.describe_declines(),
            promotions: s.promotions,
            materializations: s.materializations,
            plan_time: s.plan_time,
            lowering_time: s.lowering_time,
            why: self.engine.why.clone(),
        }
    }

    /// Evaluates many rows held in columns (`RowBatch`), writing every
    /// printed output of every row to `out`. On the native-whole tier one
    /// native call evaluates a run of rows. After a runtime error, `out`
    /// holds the rows before it, and the monitor is stopped.
    ///
    /// ```
    /// use vigil::{Monitor, OutputBatch, RowBatch, Sample, Spec, Value};
    /// let spec = Spec::parse("c.dsrv", "in x: Int\nout z: Int\nz = default(z[1], 0) + x").unwrap();
    /// let mut monitor = Monitor::builder(&spec).build();
    /// let mut rows = RowBatch::new(monitor.input_count());
    /// for v in 1..=100 {
    ///     rows.push_row(&[Some(Value::Int(v))]);
    /// }
    /// let mut out = OutputBatch::new();
    /// monitor.run_batch(&rows, &mut out).unwrap();
    /// assert_eq!(out.get(99, 0), Sample::Value(Value::Int(5050)));
    /// ```
    pub fn run_batch(
        &mut self,
        rows: &crate::batch::RowBatch,
        out: &mut crate::batch::OutputBatch,
    ) -> Result<(), RuntimeError> {
        if let Some(e) = &self.run.failed {
            out.reset(self.output_names().len(), 0);
            return Err(e.clone());
        }
        self.engine
            .run_batch(&mut self.run, rows, out)
            .inspect_err(|e| self.run.failed = Some(e.clone()))
    }

    /// Evaluates one row (one cell per declared input, `None` = absent) and
    /// returns every printed output's sample, in print order. After a runtime
    /// error the monitor is stopped: every later call returns that error.
    pub fn step(&mut self, row: &[Option<Value>]) -> Result<Outputs<'_>, RuntimeError> {
        if let Some(e) = &self.run.failed {
            return Err(e.clone());
        }
        if let Err(e) = self.engine.run_row(&mut self.run, row) {
            self.run.failed = Some(e.clone());
            return Err(e);
        }
        let spec = &self.engine.plan().spec;
        Ok(Outputs {
            state: &self.run.state,
            streams: &spec.outputs,
        })
    }
}

impl Spec {
    /// The specification's identity for snapshots: the fingerprint its
    /// snapshots carry, the same in every process for the same checked
    /// specification (whitespace and comments aside).
    pub fn fingerprint(&self) -> crate::snapshot::Fingerprint {
        crate::snapshot::fingerprint(&Plan::new(self.checked.clone()))
    }
}

/// Snapshots and restarts (see `crate::snapshot`).
impl Monitor {
    /// The whole run state at this step boundary (values, holds, history,
    /// builtin flags, step count, and the error that stopped the run, if
    /// one did), independent of the tier: [`MonitorBuilder::restore`]
    /// continues it on any tier, in this process or another.
    ///
    /// ```
    /// use vigil::{Monitor, Sample, Snapshot, Spec, Tier, Value};
    /// let spec = Spec::parse("c.dsrv", "in x: Int\nout z: Int\nz = default(z[1], 0) + x").unwrap();
    /// let mut monitor = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
    /// for v in 1..=3 {
    ///     monitor.step(&[Some(Value::Int(v))]).unwrap();
    /// }
    /// let json = monitor.snapshot().to_json();   // or `to_bytes()`
    ///
    /// let mut resumed = Monitor::restore(&spec, &Snapshot::from_json(&json).unwrap()).unwrap();
    /// let outputs = resumed.step(&[Some(Value::Int(4))]).unwrap();
    /// assert_eq!(outputs.get(0), Sample::Value(Value::Int(10)));
    ///
    /// // A snapshot of another specification is refused, never misread.
    /// let other = Spec::parse("o.dsrv", "in x: Int\nout z: Int\nz = x").unwrap();
    /// assert!(Monitor::restore(&other, &Snapshot::from_json(&json).unwrap()).is_err());
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::capture(self.engine.plan(), &self.run)
    }

    /// A monitor of `spec` on the default tier that continues the run
    /// `snapshot` was taken of: `Monitor::builder(spec).restore(snapshot)?.build()`.
    pub fn restore(spec: &Spec, snapshot: &Snapshot) -> Result<Monitor, SnapshotError> {
        Ok(Monitor::builder(spec).restore(snapshot)?.build())
    }

    /// Starts over at step 0 (no history, not stopped), keeping the compiled
    /// code, the tier, the string bound and the statistics counters.
    pub fn reset(&mut self) {
        let max = self.run.state.max_string_bytes;
        self.run = self.engine.new_run();
        self.run.state.max_string_bytes = max;
    }
}
