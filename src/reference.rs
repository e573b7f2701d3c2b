//! The reference evaluator (docs/engine.md, "The canonical interpreter"): a small, slow, obviously-right
//! denotational semantics of DSRV, used only to check the tiers.
//!
//! Every expression denotes a *history*: one `Sample` per step of the trace.
//! Each operator is a causal function from its operands' histories to its own
//! history, written here as "the value of the result at step `s`", computed
//! from the operands' values at steps `t <= s` (and, for an offset, from its
//! own value at `s - 1`). Values are memoised per `(expression, step)`, so a
//! recursive definition through an offset (`z = default(z[1], 0) + x`) is
//! well-founded: it only ever asks for earlier steps.
//!
//! This module shares no structure with the canonical step machine: no node
//! graphs, no rings, no hold cells, no flags. It reuses only the pointwise
//! value operations of `canonical::ops`, which define what each operator
//! computes on present values, and the schedule order of `plan::Plan`, which
//! decides which stream reports an error when several fail at one step.

use crate::canonical::ops;
use crate::error::{ErrorKind, Fault, RuntimeError};
use crate::lang::ast::{Aggregate, Builtin, ExprId, ExprKind, Window, WindowSize};
use crate::lang::check::{CheckedSpec, StreamId};
use crate::plan::Plan;
use crate::value::{Sample, Value};
use crate::window;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Evaluates `spec` over `trace` (one row per step, one cell per declared
/// input in declaration order, `None` = absent).
///
/// Returns the samples of the printed outputs (print order) of every step
/// before the first runtime error, and that error, if any. A runtime error
/// at step `s` is reported for the first stream in schedule order whose
/// definition raises at `s` (outside any `if` arm, or in a selected one);
/// within a definition, for the first raising sub-expression in postorder.
pub fn evaluate(
    spec: &CheckedSpec,
    trace: &[Vec<Option<Value>>],
) -> (Vec<Vec<Sample>>, Option<RuntimeError>) {
    evaluate_samples(spec, &samples_of(trace), None)
}

/// A trace's cells as samples (`None`: NoVal).
fn samples_of(trace: &[Vec<Option<Value>>]) -> Vec<Vec<Sample>> {
    (trace.iter())
        .map(|row| {
            (row.iter())
                .map(|c| c.clone().map_or(Sample::NoVal, Sample::Value))
                .collect()
        })
        .collect()
}

/// As `evaluate`, for rows of the given times (one per row): what an STL
/// operator's interval reads (`WindowSize::Interval`). Only the intervals
/// read these times; `time()` and time windows read a step's index, as in
/// `evaluate`, so a test of them with times compares with `evaluate`'s
/// rows of one second each.
pub fn evaluate_timed(
    spec: &CheckedSpec,
    trace: &[Vec<Option<Value>>],
    times: &[crate::time::Time],
) -> (Vec<Vec<Sample>>, Option<RuntimeError>) {
    assert_eq!(times.len(), trace.len(), "a time per row");
    evaluate_samples(spec, &samples_of(trace), Some(times))
}

/// As `evaluate`, with the inputs as samples (a `dynamic` instance's inputs
/// are held streams, which may be ⊥).
fn evaluate_samples(
    spec: &CheckedSpec,
    trace: &[Vec<Sample>],
    times: Option<&[crate::time::Time]>,
) -> (Vec<Vec<Sample>>, Option<RuntimeError>) {
    let shared = Arc::new(spec.clone());
    let schedule = Plan::new(shared.clone()).schedule;
    let mut r = Reference {
        spec,
        shared,
        trace,
        times,
        rebound: self_offsets_in_arms(spec),
        own: HashMap::new(),
        fault: HashMap::new(),
        busy: HashSet::new(),
    };
    let mut in_body = vec![false; spec.ast.exprs.len()];
    for (i, x) in spec.ast.exprs.iter().enumerate() {
        if let ExprKind::Lambda(_, body) = &x.kind {
            let captured: HashSet<ExprId> = captures(spec, ExprId(i as u32)).into_iter().collect();
            let mut stack = vec![*body];
            while let Some(y) = stack.pop() {
                if !captured.contains(&y) {
                    in_body[y.index()] = true;
                    stack.extend(spec.ast.children(y));
                }
            }
        }
    }
    let mut outputs = Vec::with_capacity(trace.len());
    for s in 0..trace.len() {
        for &id in &schedule {
            let def = spec.stream(id).def.expect("scheduled streams are defined");
            if let Some(fault) = r.fault(def, s) {
                return (outputs, Some(fault.at(&spec.stream(id).name, s as u64)));
            }
        }
        outputs.push(spec.outputs.iter().map(|&o| r.stream(o, s)).collect());
        // Not needed for the meaning, only for the stack: evaluate every
        // expression now, so later steps find earlier ones memoised instead
        // of recursing back through the whole trace (lambda bodies run only
        // when called).
        for (e, inside) in in_body.iter().enumerate() {
            if !inside {
                r.sample(ExprId(e as u32), s);
            }
        }
    }
    (outputs, None)
}

/// The Trustworthiness Checker's name binding inside `if` arms: in the
/// definition of `z`, inside an arm of an `if`, the name `z` under an
/// offset (`z[n]`) denotes the innermost such arm, not the stream. So there
/// `z[n]` is the arm's value `n` steps earlier. Returns, for every such
/// offset, the arm it reads.
fn self_offsets_in_arms(spec: &CheckedSpec) -> HashMap<ExprId, ExprId> {
    let mut rebound = HashMap::new();
    for (i, stream) in spec.streams.iter().enumerate() {
        let Some(def) = stream.def else { continue };
        let me = StreamId(i as u32);
        // An `if` inside a lambda's body is not an arm of the definition
        // (the body is a function, evaluated when called); an offset the
        // body captures still belongs to an arm around the lambda.
        let mut stack = vec![(def, None::<ExprId>, false)];
        while let Some((e, arm, in_body)) = stack.pop() {
            match &spec.ast.expr(e).kind {
                ExprKind::If(c, a, b) if !in_body => {
                    stack.extend([
                        (*c, arm, false),
                        (*a, Some(*a), false),
                        (*b, Some(*b), false),
                    ]);
                }
                ExprKind::Lambda(_, body) => stack.push((*body, arm, true)),
                ExprKind::Offset(a, n)
                    if *n > 0 && names(spec, *a) == Some(me) && arm.is_some() =>
                {
                    rebound.insert(e, arm.expect("checked above"));
                }
                _ => stack.extend(spec.ast.children(e).into_iter().map(|c| (c, arm, in_body))),
            }
        }
    }
    rebound
}

/// The stream `e` names, looking through zero offsets (`x[0]` is `x`).
fn names(spec: &CheckedSpec, e: ExprId) -> Option<StreamId> {
    match &spec.ast.expr(e).kind {
        ExprKind::Name(_) => spec.expr_stream[e.index()],
        ExprKind::Offset(a, 0) => names(spec, *a),
        _ => None,
    }
}

/// The evaluator's memo tables. Three functions of `(expression, step)`:
///
/// - `own`: what the operator computes at the step from its operands'
///   histories (`Err` = it raises a runtime error itself);
/// - `sample`: the expression's history, as its readers see it: `own`, or
///   NoVal where it raised (that matters only inside an `if` arm whose
///   error is discarded; anywhere else the run stops);
/// - `fault`: the first runtime error raised at the step inside the
///   expression (children before parents, left to right) that no `if` has
///   resolved: it belongs to the innermost enclosing `if` arm, else to the
///   stream's definition.
///
/// An offset's value at `s` reads its operand at `s - n` only, but its
/// operand is still evaluated at `s` (its errors are errors of step `s`):
/// `fault` follows the operand at `s`, `sample` does not. So recursion
/// through an offset's compound operand (`z = default((z + x)[1], 0)`) is
/// well-founded.
struct Reference<'a> {
    spec: &'a CheckedSpec,
    /// The spec again, shared by the closures the evaluation makes.
    shared: Arc<CheckedSpec>,
    trace: &'a [Vec<Sample>],
    /// The rows' times, if given (`evaluate_timed`); else a step's time is
    /// its index in seconds.
    times: Option<&'a [crate::time::Time]>,
    /// Offsets whose operand is not what the text says (see
    /// `self_offsets_in_arms`): offset expression -> the arm it reads.
    rebound: HashMap<ExprId, ExprId>,
    own: HashMap<(ExprId, usize), Result<Sample, Fault>>,
    fault: HashMap<(ExprId, usize), Option<Fault>>,
    /// `own` computations in progress, to fail loudly on an ill-founded
    /// definition instead of overflowing the stack.
    busy: HashSet<(ExprId, usize)>,
}

impl Reference<'_> {
    /// A stream's history at step `s`. Inputs: the row's value, else NoVal.
    /// Defined streams: their definition's value (never held).
    fn stream(&mut self, id: StreamId, s: usize) -> Sample {
        match self.spec.stream(id).def {
            Some(def) => self.sample(def, s),
            None => {
                let col = self.spec.inputs.iter().position(|&i| i == id);
                col.and_then(|c| self.trace[s].get(c).cloned())
                    .unwrap_or(Sample::NoVal)
            }
        }
    }

    /// `e`'s history at step `s` (its raw, unheld value).
    fn sample(&mut self, e: ExprId, s: usize) -> Sample {
        let spec = self.spec;
        match &spec.ast.expr(e).kind {
            ExprKind::Int(i) => Sample::Value(Value::Int(*i)),
            ExprKind::Float(f) => Sample::Value(Value::Float(*f)),
            ExprKind::Bool(b) => Sample::Value(Value::Bool(*b)),
            ExprKind::Str(x) => Sample::Value(Value::Str(x.clone())),
            ExprKind::Unit => Sample::Value(Value::Unit),
            // A reference is the stream's history, not held.
            ExprKind::Name(_) => self.stream(spec.expr_stream[e.index()].expect("resolved"), s),
            // `e[0]` is `e`.
            ExprKind::Offset(a, 0) => self.sample(*a, s),
            _ => self.own(e, s).unwrap_or(Sample::NoVal),
        }
    }

    /// The first unresolved runtime error raised inside `e` at step `s`.
    fn fault(&mut self, e: ExprId, s: usize) -> Option<Fault> {
        if let Some(f) = self.fault.get(&(e, s)) {
            return f.clone();
        }
        let spec = self.spec;
        let f = match &spec.ast.expr(e).kind {
            // Constants cannot fail; a stream's own errors are reported for
            // that stream, not for its readers.
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Bool(_)
            | ExprKind::Str(_)
            | ExprKind::Unit
            | ExprKind::Name(_) => None,
            ExprKind::Offset(a, 0) => self.fault(*a, s),
            // The condition's errors pass on; the arms' errors are resolved
            // by the `if` itself (see `eval_if`), except a `dynamic`'s own,
            // which no `if` discards (the instance has no history past a
            // step it could not finish).
            ExprKind::If(c, a, b) => {
                let (a, b) = (*a, *b);
                self.fault(*c, s)
                    .or_else(|| self.dynamic_fault(a, s))
                    .or_else(|| self.dynamic_fault(b, s))
                    .or_else(|| self.own(e, s).err())
            }
            // A lambda's body runs when it is called; what it reads of the
            // streams is evaluated with the stream, at every step.
            ExprKind::Lambda(..) => {
                let mut first = None;
                for x in captures(spec, e) {
                    let f = self.fault(x, s);
                    first = first.or(f);
                }
                first.or_else(|| self.own(e, s).err())
            }
            // Every operand is evaluated at every step (no short-circuit),
            // children before the parent.
            _ => {
                let mut first = None;
                for child in spec.ast.children(e) {
                    let f = self.fault(child, s);
                    first = first.or(f);
                }
                first.or_else(|| self.own(e, s).err())
            }
        };
        self.fault.insert((e, s), f.clone());
        f
    }

    /// The hold rule: `e` at step `t`, or if that is NoVal the last
    /// non-NoVal value `e` had at an earlier step (possibly ⊥); NoVal if it
    /// never had one.
    fn held(&mut self, e: ExprId, t: usize) -> Sample {
        (0..=t)
            .rev()
            .map(|u| self.sample(e, u))
            .find(|v| !v.is_noval())
            .unwrap_or(Sample::NoVal)
    }

    /// Whether `pred` holds of `f(e, u)` at some step `u <= t`.
    fn ever(
        &mut self,
        e: ExprId,
        t: usize,
        f: fn(&mut Self, ExprId, usize) -> Sample,
        pred: fn(&Sample) -> bool,
    ) -> bool {
        (0..=t).any(|u| pred(&f(self, e, u)))
    }

    /// What operator `e` computes at step `s` (memoised).
    fn own(&mut self, e: ExprId, s: usize) -> Result<Sample, Fault> {
        if let Some(r) = self.own.get(&(e, s)) {
            return r.clone();
        }
        assert!(
            self.busy.insert((e, s)),
            "ill-founded definition: expression {e:?} at step {s} depends on itself \
             (through the errors of an offset operand inside an `if` arm)"
        );
        let r = self.apply(e, s);
        self.busy.remove(&(e, s));
        self.own.insert((e, s), r.clone());
        r
    }

    fn apply(&mut self, e: ExprId, s: usize) -> Result<Sample, Fault> {
        match &self.spec.ast.expr(e).kind {
            ExprKind::Unary(op, a) => pointwise(&[self.held(*a, s)], |v| ops::unary(*op, v[0])),
            ExprKind::Binary(op, a, b) => {
                let args = [self.held(*a, s), self.held(*b, s)];
                pointwise(&args, |v| ops::binary(*op, v[0], v[1]))
            }
            // `e[n]`: ⊥ for the first n steps, then `e` at `s - n`; if that was
            // NoVal, the offset's own value at `s - 1` (the last one it emitted).
            ExprKind::Offset(a, n) => {
                let a = self.rebound.get(&e).unwrap_or(a);
                let n = *n as usize;
                if s < n {
                    return Ok(Sample::Deferred);
                }
                Ok(match self.sample(*a, s - n) {
                    Sample::NoVal => self.sample(e, s - 1),
                    v => v,
                })
            }
            ExprKind::If(c, a, b) => self.eval_if(*c, *a, *b, s),
            ExprKind::Call(f, args) => self.call(*f, args, s),
            ExprKind::Window(a, w) => self.window(*a, *w, s),
            ExprKind::Since(a, b, w) => Ok(self.since(*a, *b, *w, s)),
            ExprKind::Lambda(..) => {
                let mut raw = HashMap::new();
                let mut held = HashMap::new();
                for x in captures(self.spec, e) {
                    raw.insert(x, self.sample(x, s));
                    held.insert(x, self.held(x, s));
                }
                // Parameters of lambdas around it (it sits in one's capture,
                // reading none of theirs) keep their numbers: placeholders.
                let around = (self.spec.streams.iter())
                    .filter_map(|st| st.def)
                    .find_map(|d| self.spec.ast.params_around(d, e))
                    .expect("a lambda is inside a definition");
                Ok(Sample::Value(Value::Func(Arc::new(RefClosure {
                    spec: self.shared.clone(),
                    lambda: e,
                    env: vec![Value::Unit; around as usize],
                    raw: Arc::new(raw),
                    held: Arc::new(held),
                    bound: Vec::new(),
                }))))
            }
            ExprKind::Dynamic(form, source) => {
                let form = (**form).clone();
                self.dynamic(e, &form, *source, s)
            }
            // Containers and calls hold every operand, as operators do.
            kind @ (ExprKind::List(_)
            | ExprKind::Tuple(_)
            | ExprKind::Map(_)
            | ExprKind::Field(..)
            | ExprKind::Method(..)
            | ExprKind::Apply(..)
            | ExprKind::Partial(_)
            | ExprKind::Fix(_)) => {
                let kind = kind.clone();
                let held: Vec<Sample> = (self.spec.ast.children(e).into_iter())
                    .map(|c| self.held(c, s))
                    .collect();
                combine(&kind, held, true)
            }
            _ => unreachable!("leaves and names are not operators"),
        }
    }

    /// A window at step `s`, recomputed from `a`'s whole history: the
    /// present values (not NoVal, not ⊥) it had, the last `n` of them or
    /// those of the last panes, aggregated from scratch.
    fn window(&mut self, a: ExprId, w: Window, s: usize) -> Result<Sample, Fault> {
        let elem = window::elem_of(self.spec.expr_type[a.index()]);
        let float = elem == window::Elem::Float;
        let mut values: Vec<(usize, Value)> = Vec::new();
        for t in 0..=s {
            if let Sample::Value(v) = self.sample(a, t) {
                let v = match v {
                    Value::Int(i) if float => Value::Float(i as f64),
                    v => v,
                };
                values.push((t, v));
            }
        }
        match w.size {
            WindowSize::Interval { lo_ns, hi_ns, .. } => {
                Ok(self.interval(w.agg, &values, s, lo_ns, hi_ns))
            }
            WindowSize::Since { .. } => unreachable!("a since is `ExprKind::Since`"),
            WindowSize::Count(n) => {
                if w.agg.is_spread() {
                    let all: Vec<Value> = values.into_iter().map(|(_, v)| v).collect();
                    return Ok(sliding_spread(w.agg, &all, n as usize));
                }
                let from = values.len().saturating_sub(n as usize);
                let held: Vec<Value> = values.drain(from..).map(|(_, v)| v).collect();
                aggregate(w.agg, &held, elem)
            }
            // The reference's rows carry no time: a step's time is its index.
            WindowSize::Time { pane_ns, panes } => {
                let time = |t: usize| window::time_at(None, t as u64).0;
                let pane = |t: usize| window::pane_of(time(t), pane_ns);
                let now = pane(s);
                let held: Vec<(usize, Value)> = (values.into_iter())
                    .filter(|&(t, _)| pane(t) > now - i64::from(panes))
                    .collect();
                if !window::combines_panes(w.agg) {
                    let held: Vec<Value> = held.into_iter().map(|(_, v)| v).collect();
                    return aggregate(w.agg, &held, elem);
                }
                if w.agg == Aggregate::First {
                    return Ok(match held.first() {
                        Some((_, v)) => Sample::Value(v.clone()),
                        None => Sample::Deferred,
                    });
                }
                // The panes' samples, oldest pane first.
                let mut by_pane: Vec<Vec<(i64, f64)>> = Vec::new();
                let mut last_pane = None;
                for (t, v) in &held {
                    if last_pane != Some(pane(*t)) {
                        by_pane.push(Vec::new());
                        last_pane = Some(pane(*t));
                    }
                    by_pane
                        .last_mut()
                        .expect("pushed")
                        .push((time(*t), as_f64(v)));
                }
                Ok(pane_aggregate(w.agg, &by_pane))
            }
        }
    }

    /// An STL operator's interval at step `s`, by a scan: the window's time
    /// at step `t` is the latest row time up to it (time never goes back),
    /// and it holds the present values (not NaN) of the steps whose time
    /// lies in `[now - hi, now - lo]`: `min`/`all` of them for `G`,
    /// `max`/`any` for `F` (of equal values the latest), and for none the
    /// empty interval's verdict: `G` true or +inf, `F` false or -inf. (The
    /// canonical tier's bound on the samples kept is not modelled: the
    /// tests keep below it.)
    fn interval(
        &self,
        agg: Aggregate,
        values: &[(usize, Value)],
        s: usize,
        lo: i64,
        hi: i64,
    ) -> Sample {
        let clock = |t: usize| {
            (0..=t)
                .map(|k| match self.times {
                    Some(times) => times[k].0,
                    None => window::time_at(None, k as u64).0,
                })
                .max()
                .expect("a step")
        };
        let now = clock(s);
        let min = matches!(agg, Aggregate::Min | Aggregate::All);
        let mut best: Option<Value> = None;
        for (t, v) in values {
            let at = clock(*t);
            if at < now.saturating_sub(hi) || at > now.saturating_sub(lo) {
                continue;
            }
            if matches!(v, Value::Float(f) if f.is_nan()) {
                continue;
            }
            let take = match (&best, v) {
                (None, _) => true,
                (Some(Value::Float(b)), Value::Float(x)) => {
                    if min {
                        x <= b
                    } else {
                        x >= b
                    }
                }
                (Some(Value::Bool(b)), Value::Bool(x)) => {
                    if min {
                        x <= b
                    } else {
                        x >= b
                    }
                }
                (b, x) => unreachable!("an interval of {b:?} and {x:?}"),
            };
            if take {
                best = Some(v.clone());
            }
        }
        Sample::Value(match (best, agg) {
            (Some(v), _) => v,
            (None, Aggregate::All) => Value::Bool(true),
            (None, Aggregate::Any) => Value::Bool(false),
            (None, Aggregate::Min) => Value::Float(f64::INFINITY),
            (None, _) => Value::Float(f64::NEG_INFINITY),
        })
    }

    /// An operand's samples up to step `s` as numbers (a Bool as 0 or 1),
    /// by step: none where it is NoVal, ⊥ or a NaN.
    fn samples_of(&mut self, a: ExprId, s: usize) -> Vec<Option<f64>> {
        (0..=s)
            .map(|t| match self.sample(a, t) {
                Sample::Value(Value::Float(f)) if !f.is_nan() => Some(f),
                Sample::Value(Value::Int(i)) => Some(i as f64),
                Sample::Value(Value::Bool(b)) => Some(f64::from(u8::from(b))),
                _ => None,
            })
            .collect()
    }

    /// `φ S[lo, hi] ψ` at step `s`, by its definition: over ψ's samples at
    /// steps whose time (the latest row time up to it) lies in `[now - hi,
    /// now - lo]`, the maximum of the minimum of that sample and φ's
    /// samples at the later steps up to `s`; false (-inf) for none. (The
    /// canonical tier's bound on the samples kept is not modelled.)
    fn since(&mut self, a: ExprId, b: ExprId, w: Window, s: usize) -> Sample {
        let WindowSize::Since { lo_ns, hi_ns, .. } = w.size else {
            unreachable!("a since's window is a since's interval")
        };
        let (phi, psi) = (self.samples_of(a, s), self.samples_of(b, s));
        let mut clock = Vec::with_capacity(s + 1);
        for k in 0..=s {
            let t = match self.times {
                Some(times) => times[k].0,
                None => window::time_at(None, k as u64).0,
            };
            clock.push(clock.last().map_or(t, |&c: &i64| c.max(t)));
        }
        let now = clock[s];
        // Of equal values the latest is taken (φ's over ψ's, a later
        // candidate over an earlier), as the canonical tier's deques keep
        // them, so that a robustness of 0 has the same sign.
        let mut best = f64::NEG_INFINITY;
        for (j, y) in psi.iter().enumerate() {
            let Some(mut v) = *y else { continue };
            if clock[j] < now.saturating_sub(hi_ns) || clock[j] > now.saturating_sub(lo_ns) {
                continue;
            }
            for &x in phi[j + 1..].iter().flatten() {
                if x <= v {
                    v = x;
                }
            }
            if v >= best {
                best = v;
            }
        }
        Sample::Value(match w.agg {
            Aggregate::Any => Value::Bool(best > 0.0),
            _ => Value::Float(best),
        })
    }

    fn call(&mut self, f: Builtin, args: &[ExprId], s: usize) -> Result<Sample, Fault> {
        let is_val = |v: &Sample| matches!(v, Sample::Value(_));
        let present = |v: &Sample| !v.is_noval();
        Ok(match f {
            // Held `e` unless it is ⊥, then `d`'s current unheld value.
            Builtin::Default => match self.held(args[0], s) {
                Sample::Deferred => self.sample(args[1], s),
                e => e,
            },
            // Held `e` is not ⊥ (so true while `e` never had a value).
            Builtin::IsDefined => {
                Sample::Value(Value::Bool(self.held(args[0], s) != Sample::Deferred))
            }
            // False until held `e` first is a real value, then true forever.
            Builtin::When => Sample::Value(Value::Bool(self.ever(args[0], s, Self::held, is_val))),
            // Raw `d` while raw `e` has never been present (⊥ counts as
            // present); from then on raw `e`, NoVal included.
            Builtin::Init => {
                if self.ever(args[0], s, Self::sample, present) {
                    self.sample(args[0], s)
                } else {
                    self.sample(args[1], s)
                }
            }
            // NoVal where raw `t` is NoVal, else held `e`.
            Builtin::Latch => match self.sample(args[1], s) {
                Sample::NoVal => Sample::NoVal,
                _ => self.held(args[0], s),
            },
            // Held `a` until held `b` first is a real value, then held `b`.
            Builtin::Update => {
                if self.ever(args[1], s, Self::held, is_val) {
                    self.held(args[1], s)
                } else {
                    self.held(args[0], s)
                }
            }
            // The step index: the reference evaluator's rows carry no time.
            Builtin::Time => Sample::Value(Value::Float(s as f64)),
            // Math builtins are pointwise over held operands.
            math => {
                let held: Vec<Sample> = args.iter().map(|&a| self.held(a, s)).collect();
                return pointwise(&held, |v| ops::math(math, v));
            }
        })
    }

    /// `if c then a else b` at step `s`. Errors raised at `s` inside an arm are
    /// this `if`'s own error when held `c` selects that arm, else discarded.
    /// Then: NoVal if held `c`, `a` or `b` is NoVal; ⊥ if `c` is ⊥; the
    /// selected arm's held value if `c` is a Bool; else an invalid operand.
    fn eval_if(&mut self, c: ExprId, a: ExprId, b: ExprId, s: usize) -> Result<Sample, Fault> {
        let (hc, ha, hb) = (self.held(c, s), self.held(a, s), self.held(b, s));
        let selected_fault = match hc {
            Sample::Value(Value::Bool(true)) => self.fault(a, s),
            Sample::Value(Value::Bool(false)) => self.fault(b, s),
            _ => None,
        };
        if let Some(f) = selected_fault {
            return Err(f);
        }
        if [&hc, &ha, &hb].iter().any(|v| v.is_noval()) {
            return Ok(Sample::NoVal);
        }
        match hc {
            Sample::Deferred => Ok(Sample::Deferred),
            Sample::Value(Value::Bool(true)) => Ok(ha),
            Sample::Value(Value::Bool(false)) => Ok(hb),
            Sample::Value(other) => Err(Fault {
                kind: ErrorKind::InvalidOperand,
                op: "if",
                detail: Some(format!("condition {other}")),
            }),
            Sample::NoVal => unreachable!("checked above"),
        }
    }
}

impl Reference<'_> {
    /// `dynamic`/`defer` at step `s`, from the definition: the string in
    /// force at `s` (the last string of the held source; for `defer` its
    /// first), the step `a` its instance started (the first of the steps
    /// up to `s` with that string in force), and the instance evaluated from
    /// scratch over steps `a..=s`, reading the held scope streams; its result
    /// held since `a`.
    fn dynamic(
        &mut self,
        e: ExprId,
        form: &crate::lang::ast::Dynamic,
        source: ExprId,
        s: usize,
    ) -> Result<Sample, Fault> {
        let op = if form.defer { "defer" } else { "dynamic" };
        let sources: Vec<Sample> = (0..=s).map(|u| self.held(source, u)).collect();
        for v in &sources {
            if let Sample::Value(other) = v
                && !matches!(other, Value::Str(_))
            {
                return Err(Fault {
                    kind: ErrorKind::InvalidOperand,
                    op,
                    detail: Some(format!("expected a string, got {other}")),
                });
            }
        }
        let string_at = |u: usize| match &sources[u] {
            Sample::Value(Value::Str(t)) => Some(t.clone()),
            _ => None,
        };
        let first = (0..=s).find(|&u| string_at(u).is_some());
        let Some(first) = first else {
            return Ok(sources[s].clone());
        };
        // The string in force at each step from the first: the last one seen
        // (a ⊥ in between keeps it), or for `defer` the first for ever.
        let mut in_force: Vec<Arc<str>> = Vec::new();
        for u in first..=s {
            let t = match (form.defer, string_at(u)) {
                (true, _) | (false, None) => in_force.last().cloned(),
                (false, Some(t)) => Some(t),
            };
            in_force.push(
                t.or_else(|| string_at(first))
                    .expect("a string from `first` on"),
            );
        }
        let now = in_force.last().expect("at least step `first`").clone();
        let start = first
            + (0..in_force.len())
                .rev()
                .take_while(|&k| in_force[k] == now)
                .last()
                .unwrap_or(0);
        let invalid = |why: String| Fault {
            kind: ErrorKind::InvalidDynamic,
            op,
            detail: Some(format!("`{now}`: {why}")),
        };
        // The instance's specification: the scope's streams the string
        // names, typed by their signatures, and one output.
        let (tokens, lex_errors) = crate::lang::lexer::lex(&now);
        if let Some(d) = lex_errors.first() {
            return Err(invalid(d.message.clone()));
        }
        let named: HashSet<&str> = (tokens.iter())
            .filter_map(|t| match &t.tok {
                crate::lang::lexer::Tok::Ident(n) => Some(n.as_str()),
                _ => None,
            })
            .collect();
        // A string running a `dynamic` of its own gives it the whole scope
        // (its default scope is every stream of the instance).
        let nests = named
            .iter()
            .any(|n| matches!(*n, "dynamic" | "eval" | "defer"));
        let scope: Vec<StreamId> = (self.spec.dynamic_scope(e).iter())
            .copied()
            .filter(|&x| nests || named.contains(self.spec.stream(x).name.as_str()))
            .collect();
        let (_, parse_errors) =
            crate::lang::parser::parse_definitions(&format!("__dynamic_result = {now}"));
        if let Some(d) = parse_errors.first() {
            return Err(invalid(d.message.clone()));
        }
        let mut text = String::new();
        for &x in &scope {
            let st = self.spec.stream(x);
            let ty = match st.ty {
                crate::lang::types::Type::Any => String::new(),
                t => format!(": {t}"),
            };
            text.push_str(&format!(
                "in {}{ty}
",
                st.name
            ));
        }
        let declared = form.ty.map(|t| format!(": {t}")).unwrap_or_default();
        text.push_str(&format!(
            "out __dynamic_result{declared}
__dynamic_result = (
{now}
)
"
        ));
        let inner = crate::lang::parse_and_check("<dynamic>", &text).map_err(|d| {
            invalid(
                d.errors
                    .first()
                    .map(|x| x.message.clone())
                    .unwrap_or_default(),
            )
        })?;
        let inputs: Vec<Vec<Sample>> = (start..=s)
            .map(|u| scope.iter().map(|&x| self.held_stream(x, u)).collect())
            .collect();
        let (outs, err) = crate::canonical::dynamic::nested(form.defer, || {
            Ok(evaluate_samples(&inner, &inputs, None))
        })?;
        if let Some(err) = err {
            if crate::canonical::dynamic::is_nesting_fault(err.kind, err.op) {
                return Err(Fault {
                    kind: err.kind,
                    op: err.op,
                    detail: err.detail,
                });
            }
            return Err(Fault {
                kind: err.kind,
                op: err.op,
                detail: Some(match err.detail {
                    Some(d) => format!("{d}, in `{now}`"),
                    None => format!("in `{now}`"),
                }),
            });
        }
        let result = (outs.iter().rev())
            .map(|row| row[0].clone())
            .find(|v| !v.is_noval())
            .unwrap_or(Sample::NoVal);
        if !form.defer && sources[s] == Sample::Deferred {
            return Ok(Sample::Deferred);
        }
        Ok(result)
    }

    /// The first error a `dynamic` inside `e` raises itself at step `s`
    /// (children before parents, left to right).
    fn dynamic_fault(&mut self, e: ExprId, s: usize) -> Option<Fault> {
        let spec = self.spec;
        let mut first = None;
        for child in spec.ast.children(e) {
            if matches!(spec.ast.expr(child).kind, ExprKind::Lambda(..)) {
                continue;
            }
            let f = self.dynamic_fault(child, s);
            first = first.or(f);
        }
        match &spec.ast.expr(e).kind {
            ExprKind::Dynamic(..) => first.or_else(|| self.own(e, s).err()),
            _ => first,
        }
    }

    /// Stream `x` held at step `t`.
    fn held_stream(&mut self, x: StreamId, t: usize) -> Sample {
        (0..=t)
            .rev()
            .map(|u| self.stream(x, u))
            .find(|v| !v.is_noval())
            .unwrap_or(Sample::NoVal)
    }
}

/// What lambda `e`'s body captures, by the reference's reading of the
/// rule: every stream name it reads, and every subexpression with history
/// (an offset, a window, a stateful builtin, `time()`), none of which may
/// read a parameter; nested lambdas' bodies included.
fn captures(spec: &CheckedSpec, e: ExprId) -> Vec<ExprId> {
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        let kind = &spec.ast.expr(x).kind;
        let history = match kind {
            ExprKind::Offset(_, n) => *n > 0,
            ExprKind::Window(..) | ExprKind::Since(..) => true,
            ExprKind::Call(f, _) => f.is_stateful() || *f == Builtin::Time,
            _ => false,
        };
        if matches!(kind, ExprKind::Name(_)) || history {
            out.push(x);
        } else {
            stack.extend(spec.ast.children(x));
        }
    }
    out
}

/// A container, an access or a call on operand samples: NoVal if one is
/// NoVal, else ⊥ if one is ⊥, else the operation (`at_site`: an application
/// is at a call site).
fn combine(kind: &ExprKind, args: Vec<Sample>, at_site: bool) -> Result<Sample, Fault> {
    if args.iter().any(Sample::is_noval) {
        return Ok(Sample::NoVal);
    }
    let Some(v) = args
        .iter()
        .map(|a| a.value().cloned())
        .collect::<Option<Vec<Value>>>()
    else {
        return Ok(Sample::Deferred);
    };
    let one = |x: Value| Ok(Sample::Value(x));
    match kind {
        ExprKind::List(_) => {
            crate::canonical::ops::contain("List", &v)?;
            one(Value::list(v))
        }
        ExprKind::Tuple(_) => {
            crate::canonical::ops::contain("Tuple", &v)?;
            one(Value::Tuple(v.into()))
        }
        ExprKind::Map(entries) => {
            crate::canonical::ops::contain("Map", &v)?;
            one(Value::Map(Arc::new(
                entries.iter().map(|(k, _)| k.clone()).zip(v).collect(),
            )))
        }
        ExprKind::Field(_, f) => containers::field(&v[0], f),
        ExprKind::Method(m, _) => containers::method(*m, &v),
        ExprKind::Apply(..) => containers::apply(&v[0], &v[1..], at_site),
        ExprKind::Partial(_) => containers::partial(&v[0], &v[1..]),
        ExprKind::Fix(_) => match &v[0] {
            Value::Func(f) => one(Value::Func(Arc::new(containers::Fix(f.clone())))),
            other => Err(Fault {
                kind: ErrorKind::InvalidOperand,
                op: "fix",
                detail: Some(other.to_string()),
            }),
        },
        _ => unreachable!("not a container or a call"),
    }
}

/// A closure of the reference: its lambda, the parameters around it, what
/// its body captured at the step (as it was, and held) and the arguments
/// bound by `partial`.
#[derive(Debug)]
struct RefClosure {
    spec: Arc<CheckedSpec>,
    lambda: ExprId,
    env: Vec<Value>,
    raw: Arc<HashMap<ExprId, Sample>>,
    held: Arc<HashMap<ExprId, Sample>>,
    bound: Vec<Value>,
}

impl RefClosure {
    fn params(&self) -> usize {
        match &self.spec.ast.expr(self.lambda).kind {
            ExprKind::Lambda(p, _) => p.len(),
            _ => unreachable!("a closure of a lambda"),
        }
    }

    fn run(&self, args: &[Value], at_site: bool) -> Result<Sample, Fault> {
        let ExprKind::Lambda(_, body) = &self.spec.ast.expr(self.lambda).kind else {
            unreachable!("a closure of a lambda")
        };
        let mut env = self.env.clone();
        env.extend(self.bound.iter().cloned());
        env.extend(args.iter().cloned());
        containers::nested(|| self.eval(*body, &env, at_site))
    }

    /// The body's value (recursively; the parser bounds its depth).
    fn eval(&self, e: ExprId, env: &[Value], at_site: bool) -> Result<Sample, Fault> {
        let captured = if at_site { &self.held } else { &self.raw };
        if let Some(v) = captured.get(&e) {
            return Ok(v.clone());
        }
        let kind = &self.spec.ast.expr(e).kind;
        let all = |es: &[ExprId]| -> Result<Vec<Sample>, Fault> {
            es.iter().map(|&x| self.eval(x, env, at_site)).collect()
        };
        let pure = |x: Value| Ok(Sample::Value(x));
        match kind {
            ExprKind::Int(i) => pure(Value::Int(*i)),
            ExprKind::Float(f) => pure(Value::Float(*f)),
            ExprKind::Bool(b) => pure(Value::Bool(*b)),
            ExprKind::Str(t) => pure(Value::Str(t.clone())),
            ExprKind::Unit => pure(Value::Unit),
            ExprKind::Param(k) => pure(env[*k as usize].clone()),
            ExprKind::Offset(a, 0) => self.eval(*a, env, at_site),
            ExprKind::Unary(op, a) => pointwise(&all(&[*a])?, |v| ops::unary(*op, v[0])),
            ExprKind::Binary(op, a, b) => {
                pointwise(&all(&[*a, *b])?, |v| ops::binary(*op, v[0], v[1]))
            }
            // Only the selected branch is evaluated.
            ExprKind::If(c, a, b) => match self.eval(*c, env, at_site)? {
                Sample::Value(Value::Bool(true)) => self.eval(*a, env, at_site),
                Sample::Value(Value::Bool(false)) => self.eval(*b, env, at_site),
                Sample::Value(other) => Err(Fault {
                    kind: ErrorKind::InvalidOperand,
                    op: "if",
                    detail: Some(format!("condition {other}")),
                }),
                special => Ok(special),
            },
            ExprKind::Call(Builtin::Default, args) => match self.eval(args[0], env, at_site)? {
                Sample::Deferred => self.eval(args[1], env, at_site),
                v => Ok(v),
            },
            ExprKind::Call(Builtin::IsDefined, args) => Ok(Sample::Value(Value::Bool(
                self.eval(args[0], env, at_site)? != Sample::Deferred,
            ))),
            ExprKind::Call(f, args) => pointwise(&all(args)?, |v| ops::math(*f, v)),
            ExprKind::Lambda(..) => pure(Value::Func(Arc::new(RefClosure {
                spec: self.spec.clone(),
                lambda: e,
                env: env.to_vec(),
                raw: self.raw.clone(),
                held: self.held.clone(),
                bound: Vec::new(),
            }))),
            other => combine(other, all(&self.spec.ast.children(e))?, at_site),
        }
    }
}

impl crate::value::Function for RefClosure {
    fn arity(&self) -> usize {
        self.params() - self.bound.len()
    }

    fn call(&self, args: &[Value]) -> Result<Sample, Fault> {
        self.run(args, false)
    }

    fn call_at_site(&self, args: &[Value]) -> Result<Sample, Fault> {
        self.run(args, true)
    }

    fn bind(self: Arc<Self>, args: Vec<Value>) -> Arc<dyn crate::value::Function> {
        let mut bound = self.bound.clone();
        bound.extend(args);
        Arc::new(RefClosure {
            spec: self.spec.clone(),
            lambda: self.lambda,
            env: self.env.clone(),
            raw: self.raw.clone(),
            held: self.held.clone(),
            bound,
        })
    }

    fn source(&self) -> String {
        let mut names: Vec<String> = (0..self.env.len()).map(|k| format!("p{k}")).collect();
        let text = crate::lang::ast::display(&self.spec.ast, self.lambda, &mut names);
        match self.bound.is_empty() {
            true => text,
            false => {
                let b: Vec<String> = self.bound.iter().map(|v| v.to_string()).collect();
                format!("partial({text}, {})", b.join(", "))
            }
        }
    }
}

/// The container builtins and calls, written apart from the canonical
/// tier's (`canonical::func`) from the definitions of docs/language.md
/// ("Containers, functions and dynamic specifications").
mod containers {
    use super::{ErrorKind, Fault, Sample, Value};
    use crate::lang::ast::{Field, Method};
    use crate::value::{Function, Marker};
    use std::sync::Arc;

    thread_local! {
        static CALLS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    /// Runs a call one level deeper; past the bound, the runtime error.
    pub(super) fn nested(f: impl FnOnce() -> Result<Sample, Fault>) -> Result<Sample, Fault> {
        struct Restore(u32);
        impl Drop for Restore {
            fn drop(&mut self) {
                CALLS.with(|c| c.set(self.0));
            }
        }
        let depth = CALLS.with(|c| c.get());
        if depth >= crate::canonical::func::MAX_CALL_DEPTH {
            return Err(Fault::new(ErrorKind::RecursionTooDeep, "application"));
        }
        let _restore = Restore(depth);
        CALLS.with(|c| c.set(depth + 1));
        f()
    }

    fn bad(op: &'static str, v: &Value) -> Fault {
        Fault {
            kind: ErrorKind::InvalidOperand,
            op,
            detail: Some(v.to_string()),
        }
    }

    /// `f(args)`: a list's NoVal/⊥ element as an argument is the call's
    /// sample; a wrong count of arguments is an invalid operand.
    pub(super) fn apply(f: &Value, args: &[Value], at_site: bool) -> Result<Sample, Fault> {
        let Value::Func(f) = f else {
            return Err(bad("application", f));
        };
        if args.contains(&Value::Marker(Marker::NoVal)) {
            return Ok(Sample::NoVal);
        }
        if args.contains(&Value::Marker(Marker::Deferred)) {
            return Ok(Sample::Deferred);
        }
        if args.len() != f.arity() {
            return Err(Fault::new(ErrorKind::InvalidOperand, "application"));
        }
        if at_site {
            f.call_at_site(args)
        } else {
            f.call(args)
        }
    }

    pub(super) fn partial(f: &Value, args: &[Value]) -> Result<Sample, Fault> {
        match f {
            Value::Func(g) if args.len() <= g.arity() => {
                Ok(Sample::Value(Value::Func(g.clone().bind(args.to_vec()))))
            }
            other => Err(bad("partial", other)),
        }
    }

    /// `fix(f)`.
    #[derive(Debug)]
    pub(super) struct Fix(pub Arc<dyn Function>);

    impl Function for Fix {
        fn arity(&self) -> usize {
            if self.0.arity() > 1 {
                self.0.arity() - 1
            } else {
                1
            }
        }

        fn call(&self, args: &[Value]) -> Result<Sample, Fault> {
            let me = Value::Func(Arc::new(Fix(self.0.clone())));
            if self.0.arity() > 1 {
                let all: Vec<Value> = std::iter::once(me).chain(args.iter().cloned()).collect();
                return nested(|| self.0.call(&all));
            }
            match nested(|| self.0.call(&[me]))? {
                Sample::Value(g) => apply(&g, args, false),
                special => Ok(special),
            }
        }

        fn bind(self: Arc<Self>, args: Vec<Value>) -> Arc<dyn Function> {
            Arc::new(Bound(self, args))
        }

        fn source(&self) -> String {
            format!("fix({})", self.0.source())
        }
    }

    #[derive(Debug)]
    struct Bound(Arc<dyn Function>, Vec<Value>);

    impl Function for Bound {
        fn arity(&self) -> usize {
            self.0.arity().saturating_sub(self.1.len())
        }

        fn call(&self, args: &[Value]) -> Result<Sample, Fault> {
            let all: Vec<Value> = self.1.iter().chain(args).cloned().collect();
            self.0.call(&all)
        }

        fn call_at_site(&self, args: &[Value]) -> Result<Sample, Fault> {
            let all: Vec<Value> = self.1.iter().chain(args).cloned().collect();
            self.0.call_at_site(&all)
        }

        fn bind(self: Arc<Self>, args: Vec<Value>) -> Arc<dyn Function> {
            let all: Vec<Value> = self.1.iter().cloned().chain(args).collect();
            Arc::new(Bound(self.0.clone(), all))
        }

        fn source(&self) -> String {
            format!("partial({})", self.0.source())
        }
    }

    pub(super) fn field(v: &Value, f: &Field) -> Result<Sample, Fault> {
        let found = match (v, f) {
            (Value::Map(m), Field::Name(k)) => m.get(k).ok_or(ErrorKind::MissingKey),
            (Value::List(xs), Field::Index(i)) => {
                xs.get(*i as usize).ok_or(ErrorKind::IndexOutOfBounds)
            }
            (Value::Tuple(xs), Field::Index(i)) => {
                xs.get(*i as usize).ok_or(ErrorKind::IndexOutOfBounds)
            }
            _ => return Err(bad("field access", v)),
        };
        match found {
            Ok(x) => Ok(element(x)),
            Err(kind) => Err(Fault::new(kind, "field access")),
        }
    }

    /// An element taken out of a list: a marker is its sample.
    fn element(x: &Value) -> Sample {
        match x {
            Value::Marker(Marker::NoVal) => Sample::NoVal,
            Value::Marker(Marker::Deferred) => Sample::Deferred,
            v => Sample::Value(v.clone()),
        }
    }

    pub(super) fn method(m: Method, v: &[Value]) -> Result<Sample, Fault> {
        let op = m.name();
        let list = |x: &Value| match x {
            Value::List(xs) => Ok(xs.to_vec()),
            other => Err(bad(op, other)),
        };
        let map = |x: &Value| match x {
            Value::Map(entries) => Ok((**entries).clone()),
            other => Err(bad(op, other)),
        };
        let key = |x: &Value| match x {
            Value::Str(k) => Ok(k.clone()),
            other => Err(bad(op, other)),
        };
        let done = |x: Value| Ok(Sample::Value(x));
        match m {
            Method::ListGet => {
                let xs = list(&v[0])?;
                let Value::Int(i) = v[1] else {
                    return Err(bad(op, &v[1]));
                };
                if i < 0 || i as u64 >= xs.len() as u64 {
                    return Err(Fault::new(ErrorKind::IndexOutOfBounds, op));
                }
                Ok(element(&xs[i as usize]))
            }
            Method::ListConcat => {
                let mut xs = list(&v[0])?;
                xs.extend(list(&v[1])?);
                done(Value::list(xs))
            }
            Method::ListAppend => {
                let mut xs = list(&v[0])?;
                crate::canonical::ops::contain(op, [&v[1]])?;
                xs.push(v[1].clone());
                done(Value::list(xs))
            }
            Method::ListHead => match list(&v[0])?.first() {
                Some(x) => Ok(element(x)),
                None => Err(Fault::new(ErrorKind::EmptyList, op)),
            },
            Method::ListTail => {
                let xs = list(&v[0])?;
                if xs.is_empty() {
                    return Err(Fault::new(ErrorKind::EmptyList, op));
                }
                done(Value::list(xs[1..].to_vec()))
            }
            Method::ListLen => done(Value::Int(list(&v[0])?.len() as i64)),
            Method::ListMap => {
                let mut out = Vec::new();
                for x in list(&v[1])? {
                    out.push(match apply(&v[0], &[x], false)? {
                        Sample::Value(y) => y,
                        Sample::NoVal => Value::Marker(Marker::NoVal),
                        Sample::Deferred => Value::Marker(Marker::Deferred),
                    });
                }
                crate::canonical::ops::contain(op, &out)?;
                done(Value::list(out))
            }
            Method::ListFilter => {
                let mut out = Vec::new();
                for x in list(&v[1])? {
                    match apply(&v[0], std::slice::from_ref(&x), false)? {
                        Sample::Value(Value::Bool(true)) => out.push(x),
                        Sample::Value(Value::Bool(false)) => {}
                        Sample::Value(other) => return Err(bad(op, &other)),
                        special => return Ok(special),
                    }
                }
                done(Value::list(out))
            }
            Method::ListFold => {
                let mut acc = Sample::Value(v[1].clone());
                for x in list(&v[2])? {
                    let Sample::Value(a) = acc else {
                        return Ok(acc);
                    };
                    acc = apply(&v[0], &[a, x], false)?;
                }
                Ok(match acc {
                    Sample::Value(a) => element(&a),
                    special => special,
                })
            }
            Method::MapGet => {
                let (entries, k) = (map(&v[0])?, key(&v[1])?);
                match entries.get(&k) {
                    Some(x) => done(x.clone()),
                    None => Err(Fault::new(ErrorKind::MissingKey, op)),
                }
            }
            Method::MapInsert => {
                let (mut entries, k) = (map(&v[0])?, key(&v[1])?);
                crate::canonical::ops::contain(op, [&v[2]])?;
                entries.insert(k, v[2].clone());
                done(Value::Map(Arc::new(entries)))
            }
            Method::MapRemove => {
                let (mut entries, k) = (map(&v[0])?, key(&v[1])?);
                entries.remove(&k);
                done(Value::Map(Arc::new(entries)))
            }
            Method::MapHasKey => {
                let (entries, k) = (map(&v[0])?, key(&v[1])?);
                done(Value::Bool(entries.contains_key(&k)))
            }
        }
    }
}

/// A pointwise operator over held operands: NoVal if any is NoVal, else ⊥ if
/// any is ⊥, else the operator on the values (a fault is a runtime error).
fn pointwise(
    args: &[Sample],
    f: impl FnOnce(&[&Value]) -> Result<Value, Fault>,
) -> Result<Sample, Fault> {
    if args.iter().any(Sample::is_noval) {
        return Ok(Sample::NoVal);
    }
    let values: Option<Vec<&Value>> = args.iter().map(Sample::value).collect();
    match values {
        None => Ok(Sample::Deferred),
        Some(v) => f(&v).map(Sample::Value),
    }
}

fn as_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        other => unreachable!("a numeric window holds {other:?}"),
    }
}

/// `variance` or `stddev` of a count window of `n` over the present values
/// `all` (oldest first): Welford's updates as each value enters and the one
/// it pushes out leaves, recomputed from the held values by two sums each
/// time the number of values seen is a multiple of `n`, as
/// docs/language.md states (the update formulas are `scalar_ir::window`'s;
/// the bookkeeping is this function's own).
fn sliding_spread(agg: Aggregate, all: &[Value], n: usize) -> Sample {
    use scalar_ir::window::{Read, spread, welford_add, welford_remove};
    let mut held: std::collections::VecDeque<f64> = std::collections::VecDeque::new();
    let mut state = [0f64.to_bits(), 0f64.to_bits(), 0u64];
    for (k, v) in all.iter().enumerate() {
        let x = as_f64(v);
        let finite_held = held.iter().filter(|x| x.is_finite()).count() as u64;
        let mut finite = finite_held;
        if held.len() == n {
            let old = held.pop_front().expect("a full window");
            if welford_remove(&mut state, old, finite) {
                finite -= 1;
            }
        }
        welford_add(&mut state, x, finite);
        held.push_back(x);
        if (k + 1) % n == 0 {
            let finite: Vec<f64> = held.iter().copied().filter(|x| x.is_finite()).collect();
            let (mean, m2) = if finite.is_empty() {
                (0.0, 0.0)
            } else {
                let mean = finite.iter().sum::<f64>() / finite.len() as f64;
                (mean, finite.iter().map(|x| (x - mean) * (x - mean)).sum())
            };
            state[0] = f64::to_bits(mean);
            state[1] = f64::to_bits(m2);
        }
    }
    if held.is_empty() {
        return Sample::Deferred;
    }
    let nonfinite = held.iter().filter(|x| !x.is_finite()).count() as u64;
    match spread(agg, nonfinite, f64::from_bits(state[1]), held.len() as u64) {
        Read::Bits(b) => Sample::Value(Value::Float(f64::from_bits(b))),
        other => unreachable!("a spread reads {other:?}"),
    }
}

/// A time window's `variance`, `stddev`, `integral` or percentile over its
/// panes' samples (time in nanoseconds, value), oldest pane first: each
/// pane's state computed from its samples, then the panes combined by
/// `window`'s formulas (Chan's merge, trapezoids joined; the percentiles'
/// sketches built and merged here with `sketches_ddsketch` directly).
fn pane_aggregate(agg: Aggregate, panes: &[Vec<(i64, f64)>]) -> Sample {
    let float = |f: f64| Sample::Value(Value::Float(f));
    if panes.is_empty() {
        return match agg {
            Aggregate::Integral => float(0.0),
            _ => Sample::Deferred,
        };
    }
    match agg {
        Aggregate::Variance | Aggregate::Stddev => {
            let states: Vec<(u64, [u64; 3])> = panes
                .iter()
                .map(|p| {
                    let mut a = [0f64.to_bits(), 0f64.to_bits(), 0u64];
                    let mut finite = 0;
                    for &(_, x) in p {
                        scalar_ir::window::welford_add(&mut a, x, finite);
                        finite += u64::from(x.is_finite());
                    }
                    (p.len() as u64, a)
                })
                .collect();
            let (n, nonfinite, m2) =
                window::merge_spreads(states.iter().map(|(c, a)| (*c, a.as_slice())));
            match scalar_ir::window::spread(agg, nonfinite, m2, n) {
                scalar_ir::window::Read::Bits(b) => float(f64::from_bits(b)),
                other => unreachable!("a spread reads {other:?}"),
            }
        }
        Aggregate::Integral => {
            let parts: Vec<[u64; 5]> = panes
                .iter()
                .map(|p| {
                    let mut area = 0.0;
                    for pair in p.windows(2) {
                        let ((t0, v0), (t1, v1)) = (pair[0], pair[1]);
                        area += window::trapezoid(t0, v0, t1, v1);
                    }
                    let ((t0, v0), (t1, v1)) = (p[0], p[p.len() - 1]);
                    [
                        t0 as u64,
                        v0.to_bits(),
                        t1 as u64,
                        v1.to_bits(),
                        f64::to_bits(area),
                    ]
                })
                .collect();
            float(window::join_areas(parts.iter().map(|a| a.as_slice())))
        }
        _ => {
            use sketches_ddsketch::DDSketch;
            let config = window::sketch::config();
            let mut all = DDSketch::new(config);
            for p in panes {
                let mut one = DDSketch::new(config);
                for &(_, x) in p.iter().filter(|(_, x)| x.is_finite()) {
                    one.add(x);
                }
                all.merge(&one).expect("one configuration");
            }
            let q = agg.quantile().expect("a percentile");
            float(all.quantile(q).ok().flatten().unwrap_or(f64::NAN))
        }
    }
}

/// An aggregate of the values a window holds (oldest first), computed from
/// scratch; the empty window's results are docs/language.md's ("Windows").
fn aggregate(agg: Aggregate, held: &[Value], elem: window::Elem) -> Result<Sample, Fault> {
    let v = |x: Value| Ok(Sample::Value(x));
    let floats = || {
        held.iter().map(|x| match x {
            Value::Float(f) => *f,
            other => unreachable!("a Float window holds {other:?}"),
        })
    };
    let ints = || {
        held.iter().map(|x| match x {
            Value::Int(i) => i128::from(*i),
            other => unreachable!("an Int window holds {other:?}"),
        })
    };
    let is_int = elem == window::Elem::Int;
    match agg {
        Aggregate::Count => v(Value::Int(held.len() as i64)),
        Aggregate::Any => v(Value::Bool(held.contains(&Value::Bool(true)))),
        Aggregate::All => v(Value::Bool(held.iter().all(|x| *x == Value::Bool(true)))),
        _ if held.is_empty() => match agg {
            Aggregate::Sum if is_int => v(Value::Int(0)),
            Aggregate::Sum => v(Value::Float(0.0)),
            _ => Ok(Sample::Deferred),
        },
        Aggregate::Last => v(held[held.len() - 1].clone()),
        Aggregate::First => v(held[0].clone()),
        Aggregate::P50 | Aggregate::P90 | Aggregate::P95 | Aggregate::P99 => {
            // Exact: the value of rank floor(q (len - 1)) among the non-NaN
            // values in IEEE total order (NaN alone: NaN).
            let mut xs: Vec<&Value> = (held.iter())
                .filter(|x| !matches!(x, Value::Float(f) if f.is_nan()))
                .collect();
            if xs.is_empty() {
                return v(Value::Float(f64::NAN));
            }
            xs.sort_by(|a, b| match (a, b) {
                (Value::Int(a), Value::Int(b)) => a.cmp(b),
                (Value::Float(a), Value::Float(b)) => a.total_cmp(b),
                (a, b) => unreachable!("a window holds {a:?} and {b:?}"),
            });
            let q = agg.quantile().expect("a percentile");
            let rank = ((q * (xs.len() - 1) as f64).floor() as usize).min(xs.len() - 1);
            v(Value::Float(as_f64(xs[rank])))
        }
        Aggregate::Variance | Aggregate::Stddev | Aggregate::Integral => {
            unreachable!("computed over the window's history or panes")
        }
        Aggregate::Sum if is_int => i64::try_from(ints().sum::<i128>())
            .map(|s| Sample::Value(Value::Int(s)))
            .map_err(|_| Fault::new(ErrorKind::IntegerOverflow, "window sum")),
        Aggregate::Sum => v(Value::Float(fsum(floats()))),
        Aggregate::Avg if is_int => v(Value::Float(
            ints().sum::<i128>() as f64 / held.len() as f64,
        )),
        Aggregate::Avg => v(Value::Float(fsum(floats()) / held.len() as f64)),
        Aggregate::Min | Aggregate::Max => {
            let min = agg == Aggregate::Min;
            let mut best: Option<&Value> = None;
            for x in held {
                let wins = match (x, best) {
                    (Value::Float(f), _) if f.is_nan() => false,
                    (_, None) => true,
                    (Value::Int(a), Some(Value::Int(b))) => (a <= b) == min || a == b,
                    (Value::Float(a), Some(Value::Float(b))) => {
                        if min {
                            a <= b
                        } else {
                            a >= b
                        }
                    }
                    (x, Some(b)) => unreachable!("a window holds {x:?} and {b:?}"),
                };
                if wins {
                    best = Some(x);
                }
            }
            v(best.cloned().unwrap_or(Value::Float(f64::NAN)))
        }
    }
}

/// The exact sum of Floats rounded once (Shewchuk's algorithm, as Python's
/// `math.fsum`): NaN with a NaN or both infinities, an infinity with one, and
/// a zero sum is -0.0 only when every value is -0.0 (IEEE addition).
fn fsum(xs: impl Iterator<Item = f64> + Clone) -> f64 {
    let (mut pos_inf, mut neg_inf, mut nan) = (false, false, false);
    let mut all_neg_zero = true;
    let mut partials: Vec<f64> = Vec::new();
    let mut any = false;
    for x in xs {
        any = true;
        all_neg_zero &= x == 0.0 && x.is_sign_negative();
        if x.is_nan() {
            nan = true;
        } else if x.is_infinite() {
            (pos_inf, neg_inf) = (pos_inf || x > 0.0, neg_inf || x < 0.0);
        } else {
            add_partial(&mut partials, x);
        }
    }
    if nan || (pos_inf && neg_inf) {
        return f64::NAN;
    }
    if pos_inf {
        return f64::INFINITY;
    }
    if neg_inf {
        return f64::NEG_INFINITY;
    }
    let total = sum_partials(&partials);
    if total == 0.0 {
        return if any && all_neg_zero { -0.0 } else { 0.0 };
    }
    total
}

/// Adds `x` to the non-overlapping partials (Shewchuk's grow-expansion).
fn add_partial(partials: &mut Vec<f64>, mut x: f64) {
    let mut i = 0;
    for k in 0..partials.len() {
        let mut y = partials[k];
        if x.abs() < y.abs() {
            std::mem::swap(&mut x, &mut y);
        }
        let hi = x + y;
        // A test oracle need not cover sums past the largest Float of
        // finite values (Python's `fsum` raises there too).
        assert!(hi.is_finite(), "reference fsum: intermediate overflow");
        let lo = y - (hi - x);
        if lo != 0.0 {
            partials[i] = lo;
            i += 1;
        }
        x = hi;
    }
    partials.truncate(i);
    partials.push(x);
}

/// The partials' exact sum, rounded to nearest (ties to even).
fn sum_partials(partials: &[f64]) -> f64 {
    let mut n = partials.len();
    if n == 0 {
        return 0.0;
    }
    n -= 1;
    let mut hi = partials[n];
    let mut lo = 0.0;
    while n > 0 {
        let x = hi;
        n -= 1;
        let y = partials[n];
        hi = x + y;
        let yr = hi - x;
        lo = y - yr;
        if lo != 0.0 {
            break;
        }
    }
    if n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0)) {
        let y = lo * 2.0;
        let x = hi + y;
        let yr = x - hi;
        if y == yr {
            hi = x;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Spec;

    fn run(src: &str, trace: &[&[Option<Value>]]) -> (Vec<Vec<Sample>>, Option<RuntimeError>) {
        let spec = Spec::parse("t.dsrv", src).unwrap_or_else(|d| panic!("{d:?}"));
        let rows: Vec<Vec<Option<Value>>> = trace.iter().map(|r| r.to_vec()).collect();
        evaluate(spec.checked(), &rows)
    }

    fn int(i: i64) -> Option<Value> {
        Some(Value::Int(i))
    }

    fn v(i: i64) -> Sample {
        Sample::Value(Value::Int(i))
    }

    /// One output's history.
    fn column(out: &[Vec<Sample>], i: usize) -> Vec<Sample> {
        out.iter().map(|row| row[i].clone()).collect()
    }

    #[test]
    fn hold_rule() {
        let (out, err) = run(
            "in x: Int\nin y: Int\nout z: Int\nz = x + y",
            &[
                &[int(1), None],
                &[int(2), int(10)],
                &[int(3), None],
                &[None, None],
            ],
        );
        assert_eq!(err, None);
        // y never had a value at step 0; later it is held.
        assert_eq!(column(&out, 0), [Sample::NoVal, v(12), v(13), v(13)]);
    }

    #[test]
    fn bare_reference_is_not_held() {
        let (out, _) = run("in x: Int\nout y: Int\ny = x", &[&[int(1)], &[None]]);
        assert_eq!(column(&out, 0), [v(1), Sample::NoVal]);
    }

    #[test]
    fn offsets_over_gaps() {
        // The conformance case `offset_over_gaps`.
        let (out, _) = run(
            "in x: Int\nout p: Int\nout d: Int\np = x[1]\nd = default(x[1], 99)",
            &[&[None], &[int(1)], &[None], &[int(2)], &[None]],
        );
        let d = Sample::Deferred;
        assert_eq!(column(&out, 0), [d.clone(), d, v(1), v(1), v(2)]);
        assert_eq!(column(&out, 1), [v(99), v(99), v(1), v(1), v(2)]);
    }

    #[test]
    fn recursion_through_an_offset() {
        let (out, _) = run(
            "in x: Int\nout z: Int\nz = default(z[1], 0) + x",
            &[&[int(1)], &[int(2)], &[None], &[int(3)]],
        );
        // At step 2, x is held (2) and z[1] is z at step 1.
        assert_eq!(column(&out, 0), [v(1), v(3), v(5), v(8)]);
    }

    #[test]
    fn if_suppresses_errors_of_the_unselected_arm() {
        let src = "in x: Int\nin d: Int\nout z: Int\nz = if d == 0 then 0 else x / d";
        let (out, err) = run(
            src,
            &[&[int(10), int(2)], &[int(10), int(0)], &[int(9), int(-3)]],
        );
        assert_eq!(err, None);
        assert_eq!(column(&out, 0), [v(5), v(0), v(-3)]);
        // The error of the selected arm is reported.
        let src = "in x: Int\nin d: Int\nout z: Int\nz = if d == 1 then 0 else x / d";
        let (out, err) = run(src, &[&[int(10), int(2)], &[int(10), int(0)]]);
        assert_eq!(out.len(), 1);
        let err = err.unwrap();
        assert_eq!(
            (err.kind, err.stream.as_str(), err.step),
            (ErrorKind::DivisionByZero, "z", 1)
        );
    }

    #[test]
    fn a_discarded_error_is_noval_for_readers_in_the_arm() {
        // At step 1, `x / d` fails in the unselected arm; `+ 1` holds its
        // value of step 0 (5), and the offset sees NoVal at step 1.
        let src = "in x: Int\nin d: Int\nout z: Int\nout w: Int\n\
                   z = if d == 0 then 0 else (x / d) + 1\n\
                   w = if d == 0 then -1 else (x / d)[1]";
        let (out, err) = run(
            src,
            &[
                &[int(10), int(2)],
                &[int(10), int(0)],
                &[int(9), int(3)],
                &[int(8), int(4)],
            ],
        );
        assert_eq!(err, None);
        assert_eq!(column(&out, 0), [v(6), v(0), v(4), v(3)]);
        assert_eq!(column(&out, 1), [Sample::Deferred, v(-1), v(5), v(3)]);
    }

    #[test]
    fn first_error_in_schedule_order() {
        let src = "in x: Int\nout b: Int\nout a: Int\na = x / 0\nb = a + (x % 0)";
        let (out, err) = run(src, &[&[int(1)]]);
        assert!(out.is_empty());
        let err = err.unwrap();
        assert_eq!(
            (err.stream.as_str(), err.op, err.step),
            ("a", "division", 0)
        );
    }

    #[test]
    fn is_defined_and_update_read_held_operands() {
        // `a` is ⊥ at step 0 and NoVal at step 1: held, it is still ⊥.
        let src = "in x: Int\nin t: Int\nout a: Int\nout b: Bool\nout u: Int\n\
                   a = latch(x[1], t)\nb = is_defined(a)\nu = update(7, a)";
        let (out, err) = run(
            src,
            &[&[int(1), int(1)], &[int(2), None], &[int(3), int(1)]],
        );
        assert_eq!(err, None);
        let f = Sample::Value(Value::Bool(false));
        let t = Sample::Value(Value::Bool(true));
        assert_eq!(column(&out, 0), [Sample::Deferred, Sample::NoVal, v(2)]);
        assert_eq!(column(&out, 1), [f.clone(), f, t]);
        assert_eq!(column(&out, 2), [v(7), v(7), v(2)]);
    }

    #[test]
    fn stateful_builtins() {
        // The conformance case `builtins`, on a short trace.
        let src = "in x: Int\nin t: Int\nout isdef: Bool\nout wh: Bool\nout ini: Int\n\
                   out lat: Int\nout upd: Int\n\
                   isdef = is_defined(x[1])\nwh = when(x[1])\nini = init(x, 0)\n\
                   lat = latch(x, t)\nupd = update(0, x[1])";
        let (out, err) = run(
            src,
            &[
                &[None, int(1)],
                &[int(5), None],
                &[None, int(1)],
                &[int(7), int(1)],
            ],
        );
        assert_eq!(err, None);
        let b = |x| Sample::Value(Value::Bool(x));
        assert_eq!(column(&out, 0), [b(false), b(false), b(true), b(true)]);
        assert_eq!(column(&out, 1), [b(false), b(false), b(true), b(true)]);
        assert_eq!(column(&out, 2), [v(0), v(5), Sample::NoVal, v(7)]);
        assert_eq!(column(&out, 3), [Sample::NoVal, Sample::NoVal, v(5), v(7)]);
        assert_eq!(column(&out, 4), [v(0), v(0), v(5), v(5)]);
    }
}
