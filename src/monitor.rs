//! The library API: `Spec` (parse and check), `Monitor` (step rows through a chosen tier), `Tier`.
//!
//! Every row a monitor is given is checked against the specification's
//! inputs before it runs (`crate::row`); a rejected row is an error value
//! and leaves the monitor running.

use crate::batch::{OutputBatch, RowBatch};
pub use crate::canonical::ops::DEFAULT_MAX_STRING_BYTES;
pub use crate::exec::Tier;
use crate::exec::{Engine, RegionsTier, Run};
use crate::lang::check::{CheckedSpec, Piece, StreamId};
use crate::lang::diag::Diagnostics;
use crate::lang::types::Type;
use crate::plan::{Plan, Slot};
use crate::row::{Checked, Row, RowError, RowSchema, ScalarRow, StepError};
use crate::snapshot::{Repair, RepairError, Snapshot, SnapshotError};
use crate::trace::InputSchema;
use crate::value::{Key, Sample, Value};
use scalar_ir::frame::tag;
use std::fmt;
use std::sync::Arc;

mod stepper;
pub(crate) use stepper::OwnedStepper;
pub use stepper::Stepper;

/// A parsed and checked specification.
///
/// ```
/// let spec = vigil::Spec::parse("counter.dsrv", "in x: Int\nout z: Int\nz = default(z[1], 0) + x").unwrap();
/// assert_eq!(spec.output_names(), ["z"]);
/// ```
#[derive(Clone, Debug)]
pub struct Spec {
    checked: Arc<CheckedSpec>,
    /// The inputs rows are checked against, shared by every monitor, batch
    /// and row of this specification.
    inputs: Arc<RowSchema>,
}

impl Spec {
    /// Parses and checks `source`; `file` names it in diagnostics. The
    /// error, `Diagnostics`, implements `std::error::Error` and displays as
    /// `vigil check` prints it:
    ///
    /// ```
    /// fn load() -> Result<vigil::Spec, Box<dyn std::error::Error>> {
    ///     let spec = vigil::Spec::parse("bad.dsrv", "in x: Int\nout y: Int\ny = x + z")?;
    ///     Ok(spec)
    /// }
    /// let e = load().unwrap_err();
    /// assert!(e.to_string().starts_with("error: unknown stream `z`"), "{e}");
    /// assert!(e.to_string().ends_with("error: could not check `bad.dsrv` due to 1 previous error"));
    /// ```
    pub fn parse(file: &str, source: &str) -> Result<Spec, Diagnostics> {
        crate::lang::parse_and_check(file, source).map(Spec::new)
    }

    /// As `parse`, from the bytes of a file: the specification must be UTF-8
    /// (a leading byte-order mark is ignored); invalid UTF-8 is a located
    /// error at the first invalid byte.
    pub fn parse_bytes(file: &str, bytes: &[u8]) -> Result<Spec, Diagnostics> {
        crate::lang::parse_and_check_bytes(file, bytes).map(Spec::new)
    }

    fn new(checked: CheckedSpec) -> Spec {
        let inputs = checked
            .inputs
            .iter()
            .map(|&s| checked.stream(s))
            .map(|s| (s.name.clone(), s.declared.unwrap_or(Type::Any)))
            .unzip();
        Spec {
            inputs: Arc::new(RowSchema::new(inputs.0, inputs.1)),
            checked: Arc::new(checked),
        }
    }

    /// An empty row of this specification's inputs, to fill by name (see
    /// [`Row`]).
    pub fn row(&self) -> Row {
        Row::new(self.inputs.clone())
    }

    /// The row a JSON object gives, by the JSON-lines reader's rules (see
    /// [`Monitor::row_from_json`]).
    pub fn row_from_json(
        &self,
        object: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Row, RowError> {
        json_row(&self.inputs, object)
    }

    /// The inputs rows are checked against.
    pub(crate) fn inputs(&self) -> &Arc<RowSchema> {
        &self.inputs
    }

    /// The printed outputs' names, in print order, as monitors share them.
    pub(crate) fn outputs_shared(&self) -> Arc<[String]> {
        self.output_names().into_iter().map(String::from).collect()
    }

    /// The checked specification (internal: for explain and tests).
    #[doc(hidden)]
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

    /// The triggers' names, in declaration order (`trigger_N` for the N-th
    /// unnamed one).
    pub fn trigger_names(&self) -> Vec<&str> {
        self.checked
            .triggers
            .iter()
            .map(|t| t.name.as_str())
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

    /// The declared inputs as trace readers need them (internal).
    #[doc(hidden)]
    pub fn input_schema(&self) -> InputSchema {
        // (The trace readers keep their own form of the inputs, with the
        // file name their errors carry.)
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
// Serializable so that a scaled run's workers can send theirs to process 0.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// The tier running (never `Auto`).
    pub tier: Tier,
    /// Rows evaluated.
    pub rows: u64,
    /// Streams evaluated by the canonical tier.
    pub canonical_streams: u64,
    /// Region runs completed by the fused tier.
    pub region_runs: u64,
    /// Rows completed by the whole-row kernel.
    pub whole_rows: u64,
    /// Of those, the rows the native batch kernel completed
    /// ([`Monitor::run_batch`]).
    pub batch_rows: u64,
    /// Of these, the rows of batches whose columns each held one type on
    /// every row, the type the kernel tests for: they ran on the batch
    /// kernel that tests no row's inputs.
    pub typed_batch_rows: u64,
    /// Of the whole-row kernel's rows, those a keyed monitor's kernel
    /// completed on a key's packed run in place (without unpacking it).
    pub packed_rows: u64,
    /// Of those, the rows the kernel's warm-up form completed: a key's first
    /// rows, before its offset history is full (for specs whose every offset
    /// is under a `default`).
    pub warm_rows: u64,
    /// Cranelift compile time of the plan's native code.
    pub compile_time: std::time::Duration,
    /// Programs the JIT declined (they run quickened).
    pub compile_declines: Vec<String>,
    /// The most scalar IR instructions compiled into one native function:
    /// at most `jit::MAX_FUNCTION_INSTS` (4,096) for row kernels, since a
    /// longer program is compiled as chunks called in order, which keeps
    /// build time linear in the size of the spec.
    pub largest_function: usize,
    /// When `Tier::Auto` moved the run from the register interpreter to
    /// native code compiled on a background thread (see
    /// [`MonitorBuilder::tier_up_after`]); `None` before the switch, or
    /// when no switch is to come.
    pub tier_up: Option<crate::exec::TierUpStats>,
    /// Region runs declined, by reason.
    pub declines: Vec<(String, u64)>,
    /// Programs promoted (their offset history found full and of their type).
    pub promotions: u64,
    /// Promoted programs demoted back to the canonical tier's state (which
    /// already holds everything: nothing is copied).
    pub materializations: u64,
    /// Time spent partitioning the schedule into regions.
    pub plan_time: std::time::Duration,
    /// Time spent lowering regions to the scalar IR (compilation excluded).
    pub lowering_time: std::time::Duration,
    /// Why `tier` was picked.
    pub why: String,
    /// Speculation on the representation of untyped inputs (`in x`), when
    /// the spec has any and a fused tier runs: what was speculated, and how
    /// many rows contradicted it (or that it was given up).
    pub speculation: Option<String>,
    /// The `dynamic`/`defer` instances of the run, when the spec has any:
    /// how many were started and are running, the tier of the last, and the
    /// time spent building them (parse, check, plan and, on a faster tier,
    /// fusion and compilation).
    pub dynamic: Option<crate::canonical::dynamic::DynStats>,
}

impl Stats {
    /// The counters of `engine` (every run it has evaluated rows of).
    pub(crate) fn of(engine: &Engine) -> Stats {
        let s = &engine.stats;
        Stats {
            tier: engine.tier,
            rows: s.rows,
            canonical_streams: s.canonical_streams,
            region_runs: s.region_runs,
            whole_rows: s.whole_rows,
            batch_rows: s.batch_rows,
            typed_batch_rows: s.typed_batch_rows,
            packed_rows: s.packed_rows,
            warm_rows: s.warm_rows,
            compile_time: s.compile_time,
            compile_declines: s.compile_declines.clone(),
            largest_function: s.largest_function,
            tier_up: s.tier_up,
            declines: engine.describe_declines(),
            promotions: s.promotions,
            materializations: s.materializations,
            plan_time: s.plan_time,
            lowering_time: s.lowering_time,
            why: engine.describe_tier(),
            speculation: engine.describe_speculation(),
            dynamic: None,
        }
    }

    /// `Stats::of` with the `dynamic` instances of `run`.
    pub(crate) fn of_run(engine: &Engine, run: &crate::exec::Run) -> Stats {
        let mut stats = Stats::of(engine);
        if !run.state.dynamic.is_empty() {
            let mut d = crate::canonical::dynamic::DynStats::default();
            for r in &run.state.dynamic {
                r.add_stats(&mut d);
            }
            stats.dynamic = Some(d);
        }
        stats
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "tier: {} ({})", self.tier, self.why)?;
        writeln!(f, "rows: {}", self.rows)?;
        if let Some(d) = &self.dynamic {
            writeln!(
                f,
                "dynamic: {} instances started, {} running (the last on {}), built in {:.3} ms",
                d.started,
                d.live,
                if d.tier.is_empty() { "-" } else { d.tier },
                d.build_time.as_secs_f64() * 1e3
            )?;
        }
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
                if self.batch_rows > 0 {
                    writeln!(
                        f,
                        "  {} of them in batches ({} in batches of one type per column, their inputs untested)",
                        self.batch_rows, self.typed_batch_rows
                    )?;
                }
                if self.region_runs > 0 {
                    writeln!(
                        f,
                        "  native regions of declined rows: {} region runs executed",
                        self.region_runs
                    )?;
                }
                if self.packed_rows > 0 {
                    writeln!(
                        f,
                        "  {} of them on keys' packed runs in place ({} before their history was full)",
                        self.packed_rows, self.warm_rows
                    )?;
                }
            } else if self.whole_rows > 0 {
                // The quickened tier, or native regions on a plan with a
                // whole-row program: that program runs interpreted.
                writeln!(
                    f,
                    "{}: {} rows executed by the whole-row program",
                    self.tier, self.whole_rows
                )?;
                let native = if self.tier == Tier::NativeRegions {
                    "native "
                } else {
                    ""
                };
                writeln!(
                    f,
                    "  {native}regions of declined rows: {} region runs executed",
                    self.region_runs
                )?;
            } else {
                writeln!(
                    f,
                    "{}: {} region runs executed",
                    self.tier, self.region_runs
                )?;
            }
            if let Some(speculation) = &self.speculation {
                writeln!(f, "speculation: {speculation}")?;
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
    state: StreamsView<'a>,
    spec: &'a CheckedSpec,
    step: u64,
    key: Option<&'a Key>,
}

/// A trigger that fired: its condition was `true` at a step (see
/// [`Outputs::alerts`]). Read through its methods, as every other view of a
/// step.
///
/// ```
/// use vigil::{Monitor, Sample, Spec, Value};
///
/// let spec = Spec::parse(
///     "hot.dsrv",
///     "in temp: Float\nout hot: Bool\nhot = temp > 30.0\ntrigger too_hot: hot \"{temp} degrees\"",
/// )?;
/// let mut monitor = Monitor::builder(&spec).build();
/// let row = monitor.row().set("temp", 31.5)?;
/// let outputs = monitor.step(&row)?;
/// let alert = outputs.alerts().next().expect("the trigger fired");
/// assert_eq!((alert.trigger(), alert.step()), ("too_hot", 0));
/// assert_eq!(alert.message(), "31.5 degrees");
/// assert_eq!(alert.values(), [("temp", Sample::Value(Value::Float(31.5)))]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Alert<'a> {
    trigger: &'a str,
    step: u64,
    message: String,
    values: Vec<(&'a str, Sample)>,
    state: Option<crate::AlertState>,
    suppressed: Option<i64>,
    labels: &'a [(String, String)],
}

impl<'a> Alert<'a> {
    /// The trigger's name (`trigger_N` for the N-th unnamed trigger).
    pub fn trigger(&self) -> &'a str {
        self.trigger
    }

    /// The step it fired at (the key's step, for a keyed monitor).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The message, each `{name}` replaced by that stream's value at the
    /// step in its plain form (`31.5`, `web-1`, `true`, `()`; `-` for NoVal,
    /// `Deferred` for ⊥).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Every stream the message names, once, with its sample at the step.
    pub fn values(&self) -> &[(&'a str, Sample)] {
        &self.values
    }

    /// For a trigger with `resolve`: whether its condition holds (`Firing`)
    /// or has just stopped holding (`Resolved`); `None` for other triggers.
    pub fn state(&self) -> Option<crate::AlertState> {
        self.state
    }

    /// For a trigger with `every`: the firings held back since its last
    /// alert; `None` for other triggers.
    pub fn suppressed(&self) -> Option<i64> {
        self.suppressed
    }

    /// The labels the trigger declares (`severity critical`, `label team =
    /// "ops"`), as (name, text), in the order written.
    pub fn labels(&self) -> &'a [(String, String)] {
        self.labels
    }

    /// The message, taken out of the alert.
    pub fn into_message(self) -> String {
        self.message
    }
}

/// Where the streams' values of a step are read from: a run state, or a
/// keyed monitor's packed run (which a kernel updated in place).
#[derive(Clone, Copy)]
pub(crate) enum StreamsView<'a> {
    State(&'a crate::canonical::NodeState),
    /// A keyed monitor's packed run without objects
    /// (`PackLayout::raw_stream`), but for its key input (slot, key), whose
    /// value is the key.
    Packed {
        words: &'a [u64],
        layout: &'a crate::canonical::pack::PackLayout,
        key: (Slot, &'a Key),
    },
}

impl StreamsView<'_> {
    /// The raw value of stream slot `slot`.
    #[inline]
    fn raw(&self, s: StreamId) -> Sample {
        let slot = Slot::from(s);
        match self {
            StreamsView::State(st) => st.raw(slot),
            StreamsView::Packed { .. } => self.packed_raw(slot),
        }
    }

    /// `raw` of a keyed monitor's packed run, out of line: a plain
    /// monitor's read (`Outputs::get` after `Monitor::step`) stays short.
    #[inline(never)]
    fn packed_raw(&self, slot: Slot) -> Sample {
        match self {
            StreamsView::Packed { key, .. } if slot == key.0 => {
                Sample::Value(key.1.value().clone())
            }
            StreamsView::Packed { words, layout, .. } => layout.raw_stream(words, slot),
            StreamsView::State(st) => st.raw(slot),
        }
    }

    /// The tag and lane of stream `s` (`tag::OTHER` for a value with no
    /// scalar form).
    #[inline(always)]
    fn frame_cell(&self, s: StreamId) -> (u8, u64) {
        match self {
            StreamsView::State(st) => st.frame_cell(Slot::from(s)),
            _ => match self.raw(s) {
                Sample::Value(v) => crate::canonical::scalar_form(&v).unwrap_or((tag::OTHER, 0)),
                Sample::NoVal => (tag::ABSENT, 0),
                Sample::Deferred => (tag::DEFERRED, 0),
            },
        }
    }
}

impl<'a> Outputs<'a> {
    #[inline]
    pub(crate) fn new(
        state: StreamsView<'a>,
        spec: &'a CheckedSpec,
        step: u64,
        key: Option<&'a Key>,
    ) -> Outputs<'a> {
        Outputs {
            state,
            spec,
            step,
            key,
        }
    }

    /// The triggers that fired at this step (their condition is `true`), in
    /// declaration order, with their messages rendered. A spec without
    /// triggers allocates nothing here.
    pub fn alerts(&self) -> impl Iterator<Item = Alert<'a>> + '_ {
        let state = self.state;
        let spec = self.spec;
        let step = self.step;
        spec.triggers
            .iter()
            .filter(move |t| matches!(state.raw(t.stream), Sample::Value(Value::Bool(true))))
            .map(move |t| {
                let mut message = String::new();
                for piece in &t.message {
                    match piece {
                        Piece::Text(text) => message.push_str(text),
                        Piece::Stream(s, format) => format.write(&state.raw(*s), &mut message),
                    }
                }
                Alert {
                    trigger: &t.name,
                    step,
                    message,
                    values: t
                        .values
                        .iter()
                        .map(|s| (spec.stream(*s).name.as_str(), state.raw(*s)))
                        .collect(),
                    state: t.state,
                    labels: &t.labels,
                    suppressed: t.suppressed.and_then(|s| match state.raw(s) {
                        Sample::Value(Value::Int(n)) => Some(n),
                        _ => None,
                    }),
                }
            })
    }

    /// The key whose run evaluated the step (a [`crate::KeyedMonitor`]'s
    /// row); `None` for a plain monitor.
    pub fn key(&self) -> Option<&'a Key> {
        self.key
    }

    /// The step just evaluated (0-based, as the output writers number it).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The time the step was evaluated at, if it had one (a row given with
    /// its time, or a tick); `None` otherwise, and for a row a keyed
    /// monitor's kernel evaluated in place (which has no periodic streams).
    pub fn time(&self) -> Option<crate::time::Time> {
        match self.state {
            StreamsView::State(st) => st.time,
            StreamsView::Packed { .. } => None,
        }
    }

    /// The number of printed outputs.
    pub fn len(&self) -> usize {
        self.spec.outputs.len()
    }

    /// Whether the specification prints no output.
    pub fn is_empty(&self) -> bool {
        self.spec.outputs.is_empty()
    }

    /// Output `i` (see `Monitor::output_index`; [`Outputs::by_name`] finds
    /// it by name).
    #[inline]
    pub fn get(&self, i: usize) -> Sample {
        self.state.raw(self.spec.outputs[i])
    }

    /// The output named `name`; `None` when no printed output has that name
    /// (an input, an `aux` stream or a trigger is not one). It looks the name
    /// up at each call: a loop over many steps finds the index once with
    /// `Monitor::output_index` and reads [`Outputs::get`].
    ///
    /// ```
    /// use vigil::{Monitor, Sample, Spec, Value};
    ///
    /// let spec = Spec::parse("t.dsrv", "in x: Int\nout double: Int\ndouble = x * 2")?;
    /// let mut monitor = Monitor::builder(&spec).build();
    /// let row = monitor.row().set("x", 21)?;
    /// let outputs = monitor.step(&row)?;
    /// assert_eq!(outputs.by_name("double"), Some(Sample::Value(Value::Int(42))));
    /// assert_eq!(outputs.by_name("x"), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn by_name(&self, name: &str) -> Option<Sample> {
        (self.spec.outputs.iter())
            .find(|&&s| self.spec.stream(s).name == name)
            .map(|&s| self.state.raw(s))
    }

    /// The name of output `i`.
    pub fn name(&self, i: usize) -> &'a str {
        let spec = self.spec;
        &spec.stream(spec.outputs[i]).name
    }

    /// Every printed output as `(name, sample)`, in print order.
    ///
    /// ```
    /// use vigil::{Monitor, Sample, Spec, Value};
    ///
    /// let spec = Spec::parse("t.dsrv", "in x: Int\nout a: Int\nout b: Bool\na = x + 1\nb = x > 0")?;
    /// let mut monitor = Monitor::builder(&spec).build();
    /// let row = monitor.row().set("x", 1)?;
    /// let outputs = monitor.step(&row)?;
    /// let named: Vec<(&str, Sample)> = outputs.named().collect();
    /// assert_eq!(
    ///     named,
    ///     [("a", Sample::Value(Value::Int(2))), ("b", Sample::Value(Value::Bool(true)))]
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn named(&self) -> impl Iterator<Item = (&'a str, Sample)> + 'a {
        let (spec, state) = (self.spec, self.state);
        (spec.outputs.iter()).map(move |&s| (spec.stream(s).name.as_str(), state.raw(s)))
    }

    /// Output `i` if it holds an Int at this step; `None` when it is NoVal,
    /// ⊥ or another kind of value. Unlike [`Outputs::get`], no `Sample` is
    /// made: the typed per-row entry ([`Monitor::step_scalars`]) reads its
    /// outputs with it.
    #[inline(always)]
    pub fn int(&self, i: usize) -> Option<i64> {
        self.lane_tagged(i, tag::I64).map(|lane| lane as i64)
    }

    /// Output `i` if it holds a Float (see [`Outputs::int`]).
    #[inline(always)]
    pub fn float(&self, i: usize) -> Option<f64> {
        self.lane_tagged(i, tag::F64).map(f64::from_bits)
    }

    /// Output `i` if it holds a Bool (see [`Outputs::int`]).
    #[inline(always)]
    pub fn bool(&self, i: usize) -> Option<bool> {
        self.lane_tagged(i, tag::B1).map(|lane| lane != 0)
    }

    /// Output `i`'s lane if its tag is `t`.
    #[inline(always)]
    fn lane_tagged(&self, i: usize, t: u8) -> Option<u64> {
        let (tag, lane) = self.state.frame_cell(self.spec.outputs[i]);
        (tag == t).then_some(lane)
    }

    /// Every printed output's sample, in print order.
    pub fn iter(&self) -> impl Iterator<Item = Sample> + '_ {
        self.spec.outputs.iter().map(|&s| self.state.raw(s))
    }

    /// The samples, collected.
    pub fn to_vec(&self) -> Vec<Sample> {
        self.iter().collect()
    }
}

impl fmt::Debug for Outputs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outputs")
            .field("step", &self.step)
            .field("key", &self.key)
            .field("outputs", &self.iter().collect::<Vec<_>>())
            .finish()
    }
}

/// Configures a `Monitor`.
pub struct MonitorBuilder<'a> {
    spec: &'a Spec,
    tier: Tier,
    max_string_bytes: usize,
    /// Rows before `auto` compiles natively (`tier_up_after`).
    tier_up_after: u64,
    /// The native-regions tier's shape (`regions_only`).
    regions: RegionsTier,
    /// The plan and run state of a snapshot to continue (`restore`).
    restored: Option<Restored>,
}

/// A snapshot checked against its plan, waiting for `build`.
struct Restored {
    plan: Arc<Plan>,
    state: crate::canonical::NodeState,
    failed: Option<crate::error::RuntimeError>,
}

impl MonitorBuilder<'_> {
    /// The tier to run (default `Auto`: the fastest available).
    pub fn tier(mut self, tier: Tier) -> Self {
        self.tier = tier;
        self
    }

    /// On [`Tier::Auto`], the rows evaluated on the register interpreter
    /// before the whole-row program is compiled natively, on a background
    /// thread (default [`TIER_UP_ROWS`](crate::TIER_UP_ROWS)); the
    /// run switches to the native code at the first row boundary after it
    /// is ready, with nothing to carry over (every tier keeps its state in
    /// the same place). 0 compiles from the first row on. A short run thus
    /// never waits for Cranelift; [`Monitor::tier_up_now`] waits for it.
    pub fn tier_up_after(mut self, rows: u64) -> Self {
        self.tier_up_after = rows;
        self
    }

    /// On [`Tier::NativeRegions`], every row through the native regions,
    /// even where the plan has a whole-row program (which that tier runs on
    /// the register interpreter, its regions taking the rows it declines):
    /// for the tests of region code.
    #[doc(hidden)]
    pub fn regions_only(mut self) -> Self {
        self.regions = RegionsTier::RegionsOnly;
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

    /// Builds the monitor: plans, fuses and compiles once, here, before any row.
    pub fn build(self) -> Monitor {
        let (mut engine, mut run) = match self.restored {
            None => {
                let plan = Arc::new(Plan::new(self.spec.checked.clone()));
                let engine = Engine::with_regions(plan, self.tier, self.regions);
                let run = engine.new_run();
                (engine, run)
            }
            Some(r) => {
                let engine = Engine::with_regions(r.plan, self.tier, self.regions);
                let mut run = Run::from_state(&engine, r.state);
                run.failed = r.failed.map(Box::new);
                (engine, run)
            }
        };
        run.state.max_string_bytes = self.max_string_bytes;
        engine.set_tier_up_after(self.tier_up_after);
        Monitor {
            engine,
            run,
            inputs: self.spec.inputs.clone(),
            outputs: self.spec.outputs_shared(),
            scratch: Vec::new(),
            frame: (
                vec![0; self.spec.inputs.width()],
                vec![tag::ABSENT; self.spec.inputs.width()],
            ),
        }
    }
}

/// A running monitor: feed it rows, one step each.
///
/// A row has one cell per declared input, in declaration order (`None` =
/// absent, NoVal at that step): a slice, a `Vec`, an array, or a [`Row`]
/// built by name. Every row is checked against the inputs before it runs
/// (see [`Monitor::step`]).
///
/// ```
/// use vigil::{Monitor, Sample, Spec, Value};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let spec = Spec::parse("sum.dsrv", "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x")?;
/// let mut monitor = Monitor::builder(&spec).build();
/// for v in [1, 2, 3] {
///     let row = monitor.row().set("x", v)?;
///     let outputs = monitor.step(&row)?;
///     println!("step {}: total = {}", outputs.step(), outputs.get(0));
/// }
/// assert_eq!(monitor.output("total"), Some(Sample::Value(Value::Int(6))));
/// # Ok(())
/// # }
/// ```
pub struct Monitor {
    engine: Engine,
    run: Run,
    /// The inputs every row is checked against (the spec's, shared).
    inputs: Arc<RowSchema>,
    /// The printed outputs' names, shared with every `OutputBatch`.
    outputs: Arc<[String]>,
    /// A row converted by the input rule (an Int given to a Float input),
    /// reused so that converting rows allocates only once.
    scratch: Vec<Option<Value>>,
    /// The last row of values in frame form (lanes, tags; one per input),
    /// written as it was checked (`RowSchema::check_into`): what the
    /// whole-row kernel reads.
    frame: (Vec<u64>, Vec<u8>),
}

impl Monitor {
    /// Configures a monitor of `spec` (tier, string bound); `build` makes it.
    pub fn builder(spec: &Spec) -> MonitorBuilder<'_> {
        MonitorBuilder {
            spec,
            tier: Tier::Auto,
            max_string_bytes: DEFAULT_MAX_STRING_BYTES,
            tier_up_after: crate::exec::TIER_UP_ROWS,
            regions: RegionsTier::WholeWhereFused,
            restored: None,
        }
    }

    /// The tier actually running (never `Auto`). On `Auto` it may change
    /// between rows: see [`MonitorBuilder::tier_up_after`].
    pub fn tier(&self) -> Tier {
        self.engine.tier
    }

    /// On [`Tier::Auto`], moves the run to native code now if it is to
    /// move: waits for the background compilation (starting it if the run
    /// is not hot yet), so that every later row runs natively. Does nothing
    /// on a pinned tier, or once the switch has happened.
    pub fn tier_up_now(&mut self) {
        self.engine.tier_up_now();
    }

    /// `tier_up_now`, one stage at a time (internal: for tests that switch
    /// at chosen rows).
    #[doc(hidden)]
    pub fn tier_up_one(&mut self) {
        self.engine.tier_up_one();
    }

    /// The plan (internal: for explain and tests).
    #[doc(hidden)]
    pub fn plan(&self) -> &Plan {
        self.engine.plan()
    }

    /// The engine running the rows (internal: for explain and tests).
    #[doc(hidden)]
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The number of cells of a row: the declared inputs.
    pub fn input_count(&self) -> usize {
        self.inputs.width()
    }

    /// The cell of input `name` in a row.
    pub fn input_index(&self, name: &str) -> Option<usize> {
        self.inputs.lookup(name)
    }

    /// The position of output `name` in `step`'s result (`None` when no
    /// printed output has that name). A loop over many rows resolves each
    /// name once, here, and reads by position ([`Outputs::get`], or
    /// [`Outputs::float`] and its kin, which make no `Sample`), instead of
    /// looking the name up at every row ([`Outputs::by_name`]).
    ///
    /// ```
    /// use vigil::time::Time;
    /// use vigil::{Monitor, Sample, Spec, Value};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let spec = Spec::parse("up.dsrv", "in x: Float\nout up: Bool\nout twice: Float\nup = x > 0.0\ntwice = x * 2.0")?;
    /// let mut monitor = Monitor::builder(&spec).build();
    /// let twice = monitor.output_index("twice").ok_or("no output `twice`")?;
    /// assert_eq!(monitor.output_index("x"), None); // an input, not an output
    /// let mut sum = 0.0;
    /// for (ms, x) in [(0, 1.0), (10, -0.5), (20, 2.0)] {
    ///     let outputs = monitor.step_at(Time(ms * 1_000_000), [Some(Value::Float(x))])?;
    ///     if let Sample::Value(Value::Float(v)) = outputs.get(twice) {
    ///         sum += v;
    ///     }
    /// }
    /// assert_eq!(sum, 5.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn output_index(&self, name: &str) -> Option<usize> {
        self.outputs.iter().position(|n| n == name)
    }

    /// The printed outputs' names, in print order.
    pub fn output_names(&self) -> Vec<&str> {
        self.outputs.iter().map(String::as_str).collect()
    }

    /// An empty row of this monitor's inputs, to fill by name. It does not
    /// borrow the monitor (see [`Row`]).
    pub fn row(&self) -> Row {
        Row::new(self.inputs.clone())
    }

    /// The row a JSON object gives, by the JSON-lines reader's rules, for a
    /// service that already holds parsed JSON: a key that is a declared
    /// input assigns it, other keys are ignored, a missing key leaves the
    /// input absent; `null` is Unit, a number written as an integer is an
    /// Int (it must fit in 64 bits), any other number a Float, a Float input
    /// also takes the strings `"NaN"`, `"nan"`, `"inf"` and `"-inf"`, and
    /// an array or object is [`RowError::NotAValue`]. The first offending
    /// key (in the map's order) is the error.
    ///
    /// serde_json has already read the numbers: unless its
    /// `arbitrary_precision` feature is on, it reads `-0` and integers
    /// beyond the range of u64 as floats, and they are Floats here.
    ///
    /// ```
    /// use vigil::{Monitor, Sample, Spec, Value};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let spec = Spec::parse("t.dsrv", "in host: Str\nin temp: Float\nout hot: Bool\nhot = temp > 30.0")?;
    /// let mut monitor = Monitor::builder(&spec).build();
    /// let event: serde_json::Value = serde_json::from_str(r#"{"host": "a", "temp": 31, "unit": "C"}"#)?;
    /// let object = event.as_object().ok_or("not an object")?;
    /// let row = monitor.row_from_json(object)?;
    /// assert_eq!(row.get("temp"), Some(&Value::Float(31.0)));
    /// assert_eq!(monitor.step(&row)?.get(0), Sample::Value(Value::Bool(true)));
    ///
    /// let bad: serde_json::Value = serde_json::from_str(r#"{"temp": [31]}"#)?;
    /// let e = monitor.row_from_json(bad.as_object().ok_or("not an object")?).unwrap_err();
    /// assert_eq!(e.to_string(), "input `temp` is given an array or object, which is not a trace value");
    /// # Ok(())
    /// # }
    /// ```
    pub fn row_from_json(
        &self,
        object: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Row, RowError> {
        json_row(&self.inputs, object)
    }

    /// An empty batch for this monitor's inputs (see [`RowBatch`]).
    pub fn batch(&self) -> RowBatch {
        RowBatch::with_schema(self.inputs.clone())
    }

    /// The current sample of printed output `name` (after the last step);
    /// `None` if `name` is not a printed output (an input or an `aux`
    /// stream: see [`Monitor::stream`]).
    pub fn output(&self, name: &str) -> Option<Sample> {
        let spec = &self.engine.plan().spec;
        let s = spec
            .outputs
            .iter()
            .find(|&&s| spec.stream(s).name == name)?;
        Some(self.run.state.raw((*s).into()))
    }

    /// The current sample of input `name`: its value at the last step, or
    /// NoVal if that row left it absent; `None` if `name` is not an input.
    pub fn input(&self, name: &str) -> Option<Sample> {
        let s = self.engine.plan().spec.inputs[self.inputs.lookup(name)?];
        Some(self.run.state.raw(s.into()))
    }

    /// The current sample of any stream `name`: an input, a printed output
    /// or an `aux` stream; `None` if the specification has no such stream.
    pub fn stream(&self, name: &str) -> Option<Sample> {
        let s = self.engine.plan().spec.stream_by_name(name)?;
        Some(self.run.state.raw(s.into()))
    }

    /// The bytes allocated for offset history (see `NodeState::history_bytes`).
    pub fn history_bytes(&self) -> usize {
        self.run.state.history_bytes()
    }

    /// The number of steps evaluated so far (rejected rows are not steps).
    pub fn steps(&self) -> u64 {
        self.run.state.step
    }

    /// Counters of the run so far.
    pub fn stats(&self) -> Stats {
        Stats::of_run(&self.engine, &self.run)
    }

    /// Compiles the native batch kernels now, if this monitor has them to
    /// compile (native-whole): otherwise the first [`Monitor::run_batch`]
    /// that needs each compiles it, which adds a millisecond or so to that
    /// call. There are two when the spec's kernel tests its inputs' types:
    /// one testing every row's, and one for batches whose columns each hold
    /// one type on every row (as a typed trace's rows do), which tests
    /// none. Nothing else changes; a monitor that never runs batches never
    /// needs them.
    pub fn prepare_batches(&mut self) {
        self.engine.ensure_batch_kernels();
    }

    /// Evaluates many rows held in columns (a [`RowBatch`] of this
    /// monitor's inputs, made by [`Monitor::batch`] or
    /// [`RowBatch::for_spec`]), writing every printed output of every row to
    /// `out` (which also gets the outputs' names and the rows' step
    /// numbers). On the native-whole tier one native call evaluates a run of
    /// rows.
    ///
    /// Errors: a batch made for other inputs is refused
    /// ([`RowError::WrongBatch`]; nothing runs, the monitor goes on); after a
    /// runtime error, `out` holds the rows before it and the monitor is
    /// stopped. The rows themselves were checked when they were pushed.
    ///
    /// ```
    /// use vigil::{Monitor, OutputBatch, Sample, Spec, Value};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let spec = Spec::parse("c.dsrv", "in x: Int\nout z: Int\nz = default(z[1], 0) + x")?;
    /// let mut monitor = Monitor::builder(&spec).build();
    /// let mut rows = monitor.batch();
    /// for v in 1..=100 {
    ///     rows.push_row([Some(Value::Int(v))])?;
    /// }
    /// let mut out = OutputBatch::new();
    /// monitor.run_batch(&rows, &mut out)?;
    /// let z = out.column("z").ok_or("no output `z`")?;
    /// assert_eq!(out.get(99, z), Sample::Value(Value::Int(5050)));
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_batch(&mut self, rows: &RowBatch, out: &mut OutputBatch) -> Result<(), StepError> {
        // A batch's rows have no time: each is its step's, on every tier
        // (a time left from an earlier `step_at` would be every row's on
        // the canonical tier only).
        self.run.state.time = None;
        out.label(&self.outputs, self.steps());
        if let Some(e) = &self.run.failed {
            out.reset(self.outputs.len(), 0);
            return Err((**e).clone().into());
        }
        if !rows.schema().same_as(&self.inputs) {
            out.reset(self.outputs.len(), 0);
            return Err(RowError::WrongBatch {
                batch: rows.schema().show(),
                monitor: self.inputs.show(),
            }
            .into());
        }
        self.engine
            .run_batch(&mut self.run, rows, out)
            .map_err(|e| {
                self.run.failed = Some(Box::new(e.clone()));
                e.into()
            })
    }

    /// Evaluates one row and returns its printed outputs, in print order, as
    /// a view of the monitor's state (with [`Outputs::step`], the step it
    /// evaluated). The row is a slice, `Vec` or array of cells (one per
    /// declared input, `None` = absent) or a [`Row`] built by name.
    ///
    /// The row is checked first, with the trace readers' rule
    /// ([`crate::conform`]): a row of another width, or a value that
    /// does not fit its input's declared type, is [`StepError::Row`]; such a
    /// row is not evaluated, is not a step, and the monitor goes on with the
    /// next row. An Int given to a Float input is converted. A runtime error
    /// ([`StepError::Runtime`]) stops the monitor: every later call returns
    /// that error (whatever the row).
    ///
    /// ```
    /// use vigil::{Monitor, Spec, StepError, Value};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let spec = Spec::parse("y.dsrv", "in x: Int\nout y: Int\ny = x")?;
    /// let mut monitor = Monitor::builder(&spec).build();
    /// let e = monitor.step([Some(Value::Str("oops".into()))]).unwrap_err();
    /// assert!(matches!(e, StepError::Row(_)));
    /// assert_eq!(e.to_string(), "expected Int for input `x`, found Str \"oops\"");
    /// let outputs = monitor.step([Some(Value::Int(7))])?; // the monitor goes on
    /// assert_eq!((outputs.step(), outputs.get(0).to_string()), (0, "Int(7)".to_string()));
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn step(&mut self, row: impl AsRef<[Option<Value>]>) -> Result<Outputs<'_>, StepError> {
        let step = self.step_timed(None, row.as_ref()).map_err(|e| *e)?;
        Ok(self.outputs_at(step))
    }

    /// As [`Monitor::step`], for a row of time `time`: `time()` in the
    /// specification is that time, in seconds (without it, `time()` is the
    /// step index).
    #[inline]
    pub fn step_at(
        &mut self,
        time: crate::time::Time,
        row: impl AsRef<[Option<Value>]>,
    ) -> Result<Outputs<'_>, StepError> {
        let step = self.step_timed(Some(time), row.as_ref()).map_err(|e| *e)?;
        Ok(self.outputs_at(step))
    }

    /// The outputs of step `step`, just evaluated, as a view of the run
    /// state. `step` and `step_at` make them in their caller (they are
    /// inlined there), so that the view is not written to memory by one
    /// function and read back in wider loads by another (a store the load
    /// waited on, about a fifth of a row's time in the STL bench).
    #[inline(always)]
    fn outputs_at(&self, step: u64) -> Outputs<'_> {
        Outputs::new(
            StreamsView::State(&self.run.state),
            &self.engine.plan().spec,
            step,
            None,
        )
    }

    /// The periods of the specification's periodic streams, in nanoseconds
    /// (distinct, in declaration order): what [`Monitor::tick`]'s `due`
    /// is indexed by, and what a [`crate::time::Scheduler`] is made of.
    pub fn periods(&self) -> &[i64] {
        &self.engine.plan().periods
    }

    /// Evaluates a tick at `time`: a step on which the periodic streams of
    /// the periods `due` (indexed as [`Monitor::periods`]) are evaluated,
    /// and every other stream is NoVal (an event stream read there gives
    /// its held value). A [`crate::time::Scheduler`] says which ticks are
    /// due before each row.
    pub fn tick(
        &mut self,
        time: crate::time::Time,
        due: &[bool],
    ) -> Result<Outputs<'_>, StepError> {
        assert_eq!(
            due.len(),
            self.periods().len(),
            "`due` has one flag per period"
        );
        if let Some(e) = &self.run.failed {
            return Err((**e).clone().into());
        }
        self.run.state.time = Some(time);
        let step = self.steps();
        let ran = self.engine.run_tick(&mut self.run, due);
        self.outputs_after(ran, step)
    }

    /// The outputs of step `step` once the engine `ran` it; a runtime error
    /// stops the run.
    #[inline]
    fn outputs_after(
        &mut self,
        ran: Result<(), crate::error::RuntimeError>,
        step: u64,
    ) -> Result<Outputs<'_>, StepError> {
        if let Err(e) = ran {
            self.run.failed = Some(Box::new(e.clone()));
            return Err(e.into());
        }
        let spec = &self.engine.plan().spec;
        Ok(Outputs::new(
            StreamsView::State(&self.run.state),
            spec,
            step,
            None,
        ))
    }

    /// A row of scalar inputs for [`Monitor::step_scalars`], every input
    /// absent.
    pub fn scalar_row(&self) -> ScalarRow {
        ScalarRow::new(self.inputs.clone())
    }

    /// Evaluates one step whose inputs are given as scalars in frame form
    /// (see [`ScalarRow`]): what [`Monitor::step`] does, without checking and
    /// encoding `Value` cells. On the native-whole tier the kernel reads the
    /// row where it is; other tiers, and rows the kernel declines, take it
    /// as cells. A row made by a monitor of other inputs is refused
    /// ([`RowError::WrongRow`]).
    #[inline]
    pub fn step_scalars(&mut self, row: &ScalarRow) -> Result<Outputs<'_>, StepError> {
        self.step_scalars_timed(None, row)
    }

    /// [`Monitor::step_scalars`] at `time`, the row's time, as
    /// [`Monitor::step_at`] gives one.
    #[inline]
    pub fn step_scalars_at(
        &mut self,
        time: crate::time::Time,
        row: &ScalarRow,
    ) -> Result<Outputs<'_>, StepError> {
        self.step_scalars_timed(Some(time), row)
    }

    #[inline]
    pub(crate) fn step_scalars_timed(
        &mut self,
        time: Option<crate::time::Time>,
        row: &ScalarRow,
    ) -> Result<Outputs<'_>, StepError> {
        self.run.state.time = time;
        if let Some(e) = &self.run.failed {
            return Err((**e).clone().into());
        }
        if !row.schema().same_as(&self.inputs) {
            return Err(RowError::WrongRow {
                row: row.schema().show(),
                monitor: self.inputs.show(),
            }
            .into());
        }
        let step = self.steps();
        let ran = self.engine.run_row_scalars(&mut self.run, row.frame());
        self.outputs_after(ran, step)
    }

    /// Evaluates one row of values (`step`, `step_at`) and returns the step
    /// it evaluated. The error is boxed so that the result comes back in two
    /// registers (the caller unboxes it: the same error, by value).
    fn step_timed(
        &mut self,
        time: Option<crate::time::Time>,
        row: &[Option<Value>],
    ) -> Result<u64, Box<StepError>> {
        self.run.state.time = time;
        if let Some(e) = &self.run.failed {
            return Err(Box::new((**e).clone().into()));
        }
        // One pass checks the row and writes its frame form, which the
        // whole-row kernel's short path reads where it lies.
        let checked = match (self.inputs).check_into(row, &mut self.frame.0, &mut self.frame.1) {
            Ok(checked) => checked,
            Err(e) => return Err(Box::new(e.into())),
        };
        let step = self.steps();
        let frame = (&self.frame.0[..], &self.frame.1[..]);
        if !self.engine.run_row_fast(&mut self.run, frame)
            && let Err(e) = self.step_general(row, checked)
        {
            // A runtime error stops the run, as `outputs_after` does.
            self.run.failed = Some(Box::new(e.clone()));
            return Err(Box::new(e.into()));
        }
        Ok(step)
    }

    /// A checked row of values the whole-row kernel's short path did not
    /// complete (or on a tier without one), converted if it must be.
    #[inline(never)]
    fn step_general(
        &mut self,
        row: &[Option<Value>],
        checked: Checked,
    ) -> Result<(), crate::error::RuntimeError> {
        let cells = match checked {
            Checked::AsIs => row,
            Checked::Convert => {
                self.inputs.convert_into(row, &mut self.scratch);
                &self.scratch
            }
        };
        let ran = self.engine.run_row_general(&mut self.run, cells);
        // The converted row's values are not kept past the step.
        self.scratch.clear();
        ran
    }
}

/// The row of `inputs` a JSON object gives (see `Monitor::row_from_json`).
pub(crate) fn json_row(
    inputs: &Arc<RowSchema>,
    object: &serde_json::Map<String, serde_json::Value>,
) -> Result<Row, RowError> {
    let mut row = Row::new(inputs.clone());
    for (key, value) in object {
        // Keys that are not inputs are ignored, as the reader ignores them.
        let Some(i) = inputs.lookup(key) else {
            continue;
        };
        let (name, ty) = (&inputs.names()[i], inputs.types()[i]);
        row.put(i, crate::trace::serde_value(value, ty, name)?);
    }
    Ok(row)
}

/// A batch for `spec`'s inputs (as `Monitor::batch`). It lives here, beside
/// `Spec`, because `batch` sits below the library API.
impl RowBatch {
    /// An empty batch for `spec`'s inputs; every row pushed is checked
    /// against them.
    pub fn for_spec(spec: &Spec) -> RowBatch {
        RowBatch::with_schema(spec.inputs.clone())
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

    /// The run carried over to an edited specification `spec`, at this
    /// step: a snapshot of `spec` to restore on any tier, and what happened
    /// to each stream — the schedule repair of a live definition (`vigil
    /// repl`'s `:def`). A stream `spec` keeps (same declaration, type and
    /// definition, reading streams of unchanged types) keeps its whole
    /// state; any other starts at this step, its own history ⊥, except that
    /// an offset of a kept stream reads that stream's history as far as
    /// this run kept it (see [`Repair`]). A stopped run is refused.
    ///
    /// ```
    /// use vigil::{Monitor, Sample, Spec, Value};
    /// let spec = Spec::parse("s.dsrv", "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x").unwrap();
    /// let mut monitor = Monitor::builder(&spec).build();
    /// for v in [1, 2, 3] {
    ///     monitor.step(&[Some(Value::Int(v))]).unwrap();
    /// }
    /// let edited = Spec::parse("s.dsrv", "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x\nout last: Int\nlast = default(x[1], 0)").unwrap();
    /// let (snapshot, repair) = monitor.repair(&edited).unwrap();
    /// assert_eq!(repair.kept, ["x", "total"]);
    /// let mut monitor = Monitor::builder(&edited).restore(&snapshot).unwrap().build();
    /// monitor.step(&[Some(Value::Int(4))]).unwrap();
    /// assert_eq!(monitor.output("total"), Some(Sample::Value(Value::Int(10))));
    /// // `x[1]` reads the kept input's value of the step before the edit.
    /// assert_eq!(monitor.output("last"), Some(Sample::Value(Value::Int(3))));
    /// ```
    pub fn repair(&self, spec: &Spec) -> Result<(Snapshot, Repair), RepairError> {
        if let Some(e) = &self.run.failed {
            return Err(RepairError::Stopped((**e).clone()));
        }
        let new = Plan::new(spec.checked().clone());
        if new.is_timed() != self.engine.plan().is_timed() {
            return Err(RepairError::Periodic);
        }
        Ok(self.snapshot().repair(self.engine.plan(), &new))
    }

    /// Starts over at step 0 (no history, not stopped), keeping the compiled
    /// code, the tier, the string bound and the statistics counters.
    pub fn reset(&mut self) {
        let max = self.run.state.max_string_bytes;
        self.run = self.engine.new_run();
        self.run.state.max_string_bytes = max;
    }
}
