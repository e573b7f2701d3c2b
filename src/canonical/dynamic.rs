//! `dynamic`/`eval`/`defer`: a Str stream's value parsed as an expression at run time, run as a monitor of its own.
//!
//! Semantics (the Trustworthiness Checker's dataflow runtime): the source is
//! held; before its first value the result is NoVal, and while it is ⊥ the
//! result is ⊥ (a running instance still steps). A string different from
//! the running one starts a fresh instance, whose history starts at that
//! step (offsets in it are ⊥ until it has run long enough); the same string
//! keeps the running instance. `defer` keeps the first string for the rest
//! of the run. An instance reads the held values of the streams of its
//! scope (`CheckedSpec::dynamic_scope`), and its result is held: a NoVal
//! result repeats the instance's last one. A string that does not parse or
//! check is a runtime error naming the string.
//!
//! An instance is a specification of its own (`in` declarations for the
//! scope's streams the string names, typed as the checker typed them, and
//! one output), planned and run on a `NodeState`, or on the engine's tier
//! through [`InstanceTier`]. Only the running instance
//! of each `dynamic` is kept, so memory is bounded by the specification,
//! whatever strings arrive.

use super::NodeState;
use crate::error::{ErrorKind, Fault};
use crate::lang::check::StreamId;
use crate::plan::{Plan, Slot};
use crate::value::{Sample, Value};
use std::sync::Arc;

/// A faster tier for `dynamic` instances: the engine of the run that holds
/// them gives one (`exec::Engine`), so that a received expression runs as
/// its own plan is fused, interpreted or compiled, the first time its string
/// is seen. Without one, instances run on the canonical tier.
pub trait InstanceTier: std::fmt::Debug + Send + Sync {
    /// Builds the runner of an instance's plan (fusion, lowering and, on the
    /// native tiers, Cranelift compilation happen here).
    fn prepare(&self, plan: Arc<Plan>, max_string_bytes: usize) -> Box<dyn InstanceRun>;
}

/// An instance running on a tier of its own (see [`InstanceTier`]).
pub trait InstanceRun: std::fmt::Debug + Send {
    /// Runs one step: `inputs` are the instance's inputs (held samples of
    /// the outer streams).
    fn step(&mut self, inputs: &[Sample]) -> Result<(), crate::error::RuntimeError>;
    /// The instance's run state (its output is read from it).
    fn state(&self) -> &NodeState;
    /// The tier it runs on.
    fn tier(&self) -> &'static str;
    /// A copy running the same code from the same state.
    fn box_clone(&self) -> Box<dyn InstanceRun>;
}

/// Totals of a run's `dynamic` instances (for `--stats` and `explain`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(into = "DynStatsWire", try_from = "DynStatsWire")]
pub struct DynStats {
    /// Instances started (one per new string).
    pub started: u64,
    /// Instances running now.
    pub live: u64,
    /// The tier the last instance runs on.
    // (Travels by name, through `DynStatsWire`; skipped here so that the
    // derive does not tie a deserializer's input to `'static`.)
    #[serde(skip)]
    pub tier: &'static str,
    /// Time spent building instances (parsing, checking, planning and,
    /// on a faster tier, fusing and compiling).
    pub build_time: std::time::Duration,
}

/// `DynStats` as it travels (a scaled run's workers send their counters to
/// process 0): the tier by its name, read back as the tier of that name (a
/// name no tier has is an error, not a new string leaked for the program's
/// life).
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct DynStatsWire {
    started: u64,
    live: u64,
    tier: String,
    build_time: std::time::Duration,
}

impl From<DynStats> for DynStatsWire {
    fn from(s: DynStats) -> DynStatsWire {
        DynStatsWire {
            started: s.started,
            live: s.live,
            tier: s.tier.to_string(),
            build_time: s.build_time,
        }
    }
}

impl TryFrom<DynStatsWire> for DynStats {
    type Error = String;

    fn try_from(w: DynStatsWire) -> Result<DynStats, String> {
        let tier = match (w.tier.as_str(), crate::exec::Tier::from_name(&w.tier)) {
            // The counters of a run before any instance started.
            ("", _) => "",
            (_, Some(tier)) => tier.name(),
            (_, None) => return Err(format!("no tier `{}`", w.tier)),
        };
        Ok(DynStats {
            started: w.started,
            live: w.live,
            tier,
            build_time: w.build_time,
        })
    }
}

/// The state of one `dynamic` in a run.
#[derive(Clone, Debug, Default)]
pub struct DynRun {
    /// The running instance and its string.
    instance: Option<Box<Instance>>,
    /// The faster tier new instances run on (set by the engine).
    pub tier: Option<Arc<dyn InstanceTier>>,
    /// The time spent building instances, and the tier of the last.
    pub build_time: std::time::Duration,
    pub last_tier: &'static str,
    /// The instance's last result (its hold cell).
    held: Sample,
    /// How many instances this `dynamic` has started (for `--stats`).
    pub started: u64,
    /// The step this `dynamic` last computed, and its result: a row that
    /// runs again (a faster tier's rerun of a row it declined) gets that
    /// result, since an instance steps once per step.
    done: Option<(u64, Sample)>,
}

impl PartialEq for DynRun {
    fn eq(&self, other: &DynRun) -> bool {
        self.held == other.held
            && match (&self.instance, &other.instance) {
                (None, None) => true,
                (Some(a), Some(b)) => a.source == b.source && a.state() == b.state(),
                _ => false,
            }
    }
}

#[derive(Debug)]
struct Instance {
    source: Arc<str>,
    plan: Arc<Plan>,
    exec: Exec,
    /// Each input of the instance (by position) and the outer stream it reads.
    inputs: Vec<StreamId>,
}

/// Where an instance runs.
#[derive(Debug)]
enum Exec {
    Canonical(Box<NodeState>),
    Tier(Box<dyn InstanceRun>),
}

impl Clone for Instance {
    fn clone(&self) -> Instance {
        Instance {
            source: self.source.clone(),
            plan: self.plan.clone(),
            exec: match &self.exec {
                Exec::Canonical(st) => Exec::Canonical(st.clone()),
                Exec::Tier(r) => Exec::Tier(r.box_clone()),
            },
            inputs: self.inputs.clone(),
        }
    }
}

impl Instance {
    fn state(&self) -> &NodeState {
        match &self.exec {
            Exec::Canonical(st) => st,
            Exec::Tier(r) => r.state(),
        }
    }
}

/// The name of an instance's output stream. A string that names it reads
/// the output itself, which the instance's check refuses as a same-step
/// cycle (an invalid dynamic expression).
const RESULT: &str = "__dynamic_result";

impl DynRun {
    /// The running instance's string, plan and state, and the held result
    /// (what a snapshot keeps).
    pub(crate) fn parts(&self) -> Option<(&str, &Plan, &NodeState, &Sample)> {
        let i = self.instance.as_ref()?;
        Some((&i.source, &i.plan, i.state(), &self.held))
    }

    /// This `dynamic`'s part of the run's totals.
    pub fn add_stats(&self, into: &mut DynStats) {
        into.started += self.started;
        into.live += u64::from(self.instance.is_some());
        into.build_time += self.build_time;
        if !self.last_tier.is_empty() {
            into.tier = self.last_tier;
        }
    }

    /// A run of `dynamic` node `node` with an instance of `source` whose
    /// state `state` gives (from a snapshot, checked against the instance's
    /// plan); an error says why not.
    pub(crate) fn restored<E: std::fmt::Display>(
        outer: &Plan,
        node: &crate::plan::NodeData,
        source: &str,
        held: Sample,
        started: u64,
        state: impl FnOnce(&Plan) -> Result<NodeState, E>,
    ) -> Result<DynRun, String> {
        let crate::lang::ast::ExprKind::Dynamic(form, _) = &outer.spec.ast.expr(node.expr).kind
        else {
            unreachable!("a dynamic node lowers a dynamic expression")
        };
        let scope = outer.spec.dynamic_scope(node.expr);
        let source: Arc<str> = source.into();
        let mut i = instance(outer, scope, form.ty, form.defer, &source, usize::MAX, None)
            .map_err(|f| f.detail.unwrap_or_default())?;
        // A restored instance runs on the canonical tier (a new string
        // starts the next on the run's tier).
        i.exec = Exec::Canonical(Box::new(state(&i.plan).map_err(|e| e.to_string())?));
        Ok(DynRun {
            instance: Some(Box::new(i)),
            held,
            started,
            done: None,
            tier: None,
            build_time: std::time::Duration::ZERO,
            last_tier: "canonical",
        })
    }
}

/// A fault of `dynamic` (or `defer`) about string `source`.
fn invalid(defer: bool, source: &str, why: String) -> Fault {
    Fault {
        kind: ErrorKind::InvalidDynamic,
        op: if defer { "defer" } else { "dynamic" },
        detail: Some(format!("`{source}`: {why}")),
    }
}

/// How deep `dynamic` instances may nest (an instance's string running a
/// `dynamic` of its own, and so on): a runtime error beyond, identical on
/// every tier, never an exhausted stack (a string that evaluates itself,
/// `dynamic(s)` with `s = "dynamic(s)"`, nests without end).
pub const MAX_DYNAMIC_NESTING: u32 = 16;

thread_local! {
    /// The instances being stepped on this thread, outermost first: each
    /// nested one is stepped from inside its parent's step.
    static NESTING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `f` (an instance's step) one nesting level deeper, or fails with the
/// nesting fault when that is past [`MAX_DYNAMIC_NESTING`]. The reference
/// evaluator steps its instances through it too, so both count alike.
pub(crate) fn nested<T>(defer: bool, f: impl FnOnce() -> Result<T, Fault>) -> Result<T, Fault> {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            NESTING.with(|n| n.set(n.get() - 1));
        }
    }
    let depth = NESTING.with(|n| {
        n.set(n.get() + 1);
        n.get()
    });
    let _leave = Leave;
    if depth > MAX_DYNAMIC_NESTING {
        return Err(Fault {
            kind: ErrorKind::RecursionTooDeep,
            op: if defer { "defer" } else { "dynamic" },
            detail: Some(format!(
                "instances nest more than {MAX_DYNAMIC_NESTING} deep (a string that runs itself?)"
            )),
        });
    }
    f()
}

/// Whether a string (by the identifiers it names) runs a `dynamic` of its
/// own: that one's default scope is every stream of the instance, so the
/// instance declares its whole scope, not only the streams the string
/// names, as the Trustworthiness Checker's nested instances see the outer
/// streams.
pub(crate) fn nests_dynamic(names: &[&str]) -> bool {
    names
        .iter()
        .any(|n| matches!(*n, "dynamic" | "eval" | "defer"))
}

/// Whether `f` is the nesting fault of [`nested`], which is passed out of
/// every enclosing instance as it is (not once more per level).
pub(crate) fn is_nesting_fault(kind: ErrorKind, op: &str) -> bool {
    kind == ErrorKind::RecursionTooDeep && matches!(op, "dynamic" | "defer")
}

/// Builds the instance of `source` for a `dynamic` whose scope is `scope`
/// in `outer`.
fn instance(
    outer: &Plan,
    scope: &[StreamId],
    ty: Option<crate::lang::types::Type>,
    defer: bool,
    source: &Arc<str>,
    max_string_bytes: usize,
    tier: Option<&Arc<dyn InstanceTier>>,
) -> Result<Instance, Fault> {
    // The received text must be one expression: parsed alone first, so that
    // it cannot close the definition it is put in and declare more.
    let (tokens, lex_errors) = crate::lang::lexer::lex(source);
    let (_, parse_errors) = crate::lang::parser::parse_definitions(&format!("{RESULT} = {source}"));
    if let Some(e) = lex_errors.first().or(parse_errors.first()) {
        return Err(invalid(defer, source, e.message.clone()));
    }
    let names: Vec<&str> = tokens
        .iter()
        .filter_map(|t| match &t.tok {
            crate::lang::lexer::Tok::Ident(n) => Some(n.as_str()),
            _ => None,
        })
        .collect();
    let nests = nests_dynamic(&names);
    let mut inputs: Vec<StreamId> = Vec::new();
    let mut text = String::new();
    for &s in scope {
        let name = outer.stream_name(s);
        if nests || names.contains(&name) {
            inputs.push(s);
            // Typed as the checker typed the stream (not by its signature,
            // which a tier speculating on untyped inputs re-signs), so the
            // string checks the same way on every tier.
            let ty = match outer.spec.stream(s).ty {
                crate::lang::types::Type::Any => String::new(),
                t => format!(": {t}"),
            };
            text.push_str(&format!("in {name}{ty}\n"));
        }
    }
    let declared = ty.map(|t| format!(": {t}")).unwrap_or_default();
    text.push_str(&format!(
        "out {RESULT}{declared}\n{RESULT} = (\n{source}\n)\n"
    ));
    let spec = crate::lang::parse_and_check("<dynamic>", &text).map_err(|d| {
        let why = d
            .errors
            .first()
            .map(|e| e.message.clone())
            .unwrap_or_default();
        invalid(defer, source, why)
    })?;
    let plan = Arc::new(Plan::new(Arc::new(spec)));
    let exec = match tier {
        Some(t) => Exec::Tier(t.prepare(plan.clone(), max_string_bytes)),
        None => {
            let mut state = NodeState::new(&plan);
            state.max_string_bytes = max_string_bytes;
            Exec::Canonical(Box::new(state))
        }
    };
    Ok(Instance {
        source: source.clone(),
        plan,
        exec,
        inputs,
    })
}

impl Instance {
    /// Runs one step with the outer run's held values of the inputs.
    fn step(&mut self, outer: &NodeState) -> Result<Sample, Fault> {
        let inner = &self.plan;
        let result: Result<(), crate::error::RuntimeError> = match &mut self.exec {
            Exec::Canonical(state) => {
                state.max_string_bytes = outer.max_string_bytes;
                for (k, &s) in self.inputs.iter().enumerate() {
                    let slot = Slot::from(inner.spec.inputs[k]);
                    state.write(slot, outer.held(Slot::from(s)));
                }
                let r = (inner.schedule.iter()).try_for_each(|&s| state.eval_stream(inner, s));
                if r.is_ok() {
                    state.end_row(inner);
                }
                r
            }
            Exec::Tier(run) => {
                let row: Vec<Sample> = (self.inputs.iter())
                    .map(|&s| outer.held(Slot::from(s)))
                    .collect();
                run.step(&row)
            }
        };
        if let Err(e) = result {
            if is_nesting_fault(e.kind, e.op) {
                return Err(Fault {
                    kind: e.kind,
                    op: e.op,
                    detail: e.detail,
                });
            }
            return Err(Fault {
                kind: e.kind,
                op: e.op,
                detail: Some(match e.detail {
                    Some(d) => format!("{d}, in `{}`", self.source),
                    None => format!("in `{}`", self.source),
                }),
            });
        }
        // The output was written by the step, and stays until the next.
        let out = inner.spec.outputs[0];
        Ok(self.state().raw(Slot::from(out)))
    }
}

/// The value of `dynamic` node `id` (its `DynamicId` is `k`) at this step.
pub(super) fn compute(
    st: &mut NodeState,
    plan: &Plan,
    node: &crate::plan::NodeData,
    k: usize,
) -> Result<Sample, Fault> {
    let crate::lang::ast::ExprKind::Dynamic(form, _) = &plan.spec.ast.expr(node.expr).kind else {
        unreachable!("a dynamic node lowers a dynamic expression")
    };
    if let Some((at, v)) = &st.dynamic[k].done
        && *at == st.step
    {
        return Ok(v.clone());
    }
    let mut run = std::mem::take(&mut st.dynamic[k]);
    let out = step(st, plan, node, &mut run, form.defer, form.ty);
    if let Ok(v) = &out {
        run.done = Some((st.step, v.clone()));
    }
    st.dynamic[k] = run;
    out
}

fn step(
    st: &NodeState,
    plan: &Plan,
    node: &crate::plan::NodeData,
    run: &mut DynRun,
    defer: bool,
    ty: Option<crate::lang::types::Type>,
) -> Result<Sample, Fault> {
    let source = st.held(node.slots[0]);
    let keep = match (&source, &run.instance) {
        // `defer` keeps its first string whatever comes.
        (_, Some(_)) if defer => true,
        (Sample::Value(Value::Str(s)), Some(i)) => *s == i.source,
        (Sample::Value(Value::Str(_)), None) => false,
        (Sample::Value(other), _) => {
            return Err(Fault {
                kind: ErrorKind::InvalidOperand,
                op: if defer { "defer" } else { "dynamic" },
                detail: Some(format!("expected a string, got {other}")),
            });
        }
        // NoVal only before the first string (the source is held).
        (Sample::NoVal, _) => return Ok(Sample::NoVal),
        (Sample::Deferred, Some(_)) => true,
        (Sample::Deferred, None) => return Ok(Sample::Deferred),
    };
    if !keep {
        let Sample::Value(Value::Str(s)) = &source else {
            unreachable!("a new instance starts from a string")
        };
        let scope = plan.spec.dynamic_scope(node.expr);
        // The running instance is dropped first: memory holds one per
        // `dynamic`, whatever strings arrive.
        run.instance = None;
        let started = std::time::Instant::now();
        let new = instance(
            plan,
            scope,
            ty,
            defer,
            s,
            st.max_string_bytes,
            run.tier.as_ref(),
        )?;
        run.build_time += started.elapsed();
        run.last_tier = match &new.exec {
            Exec::Canonical(_) => "canonical",
            Exec::Tier(r) => r.tier(),
        };
        run.instance = Some(Box::new(new));
        run.held = Sample::NoVal;
        run.started += 1;
    }
    let instance = run.instance.as_mut().expect("set above");
    let v = nested(defer, || instance.step(st))?;
    if !v.is_noval() {
        run.held = v;
    }
    // ⊥ from the source (after activation): the instance stepped, the
    // result is ⊥.
    if matches!(source, Sample::Deferred) && !defer {
        return Ok(Sample::Deferred);
    }
    Ok(run.held.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scaled run's workers send their counters to process 0 (`--stats`):
    /// they come back as they left, the tier by name, and a tier no vigil
    /// has is refused rather than leaked as a new string.
    #[test]
    fn dyn_stats_travel_with_their_tier_by_name() {
        let stats = DynStats {
            started: 3,
            live: 1,
            tier: crate::exec::Tier::NativeWhole.name(),
            build_time: std::time::Duration::from_micros(1500),
        };
        let text = serde_json::to_string(&stats).unwrap();
        assert_eq!(serde_json::from_str::<DynStats>(&text).unwrap(), stats);
        let fresh = DynStats::default();
        let text = serde_json::to_string(&fresh).unwrap();
        assert_eq!(serde_json::from_str::<DynStats>(&text).unwrap(), fresh);
        let bad = text.replace("\"tier\":\"\"", "\"tier\":\"warp\"");
        let e = serde_json::from_str::<DynStats>(&bad).unwrap_err();
        assert!(e.to_string().contains("no tier `warp`"), "{e}");
    }
}
