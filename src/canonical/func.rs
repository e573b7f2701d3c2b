//! Containers and functions on the canonical tier: the container builtins, closures and the evaluation of lambda bodies.
//!
//! A lambda node makes a [`Closure`]: the lambda's body (an expression of the
//! checked spec) and the samples of what the body captures (the streams it
//! reads and its offsets, windows and stateful builtins over streams, all
//! evaluated by the stream's graph at the step: `plan::LambdaPlan`), both as
//! they are and held: a call site reads them held, a container builtin as
//! they are. A call evaluates the body over its parameters and those
//! captures, with the hold rule's outcome for operands (NoVal before ⊥
//! before a value). In a body,
//! `if` evaluates only the branch it selects (so that `fix` can recurse),
//! and nothing keeps history (the checker refuses history of parameters).

use crate::error::{ErrorKind, Fault};
use crate::lang::ast::{Builtin, ExprId, ExprKind, Field, Method};
use crate::lang::check::CheckedSpec;
use crate::value::{Function, MapEntries, Sample, Value};
use std::cell::Cell;
use std::fmt;
use std::sync::Arc;

/// The operation names of the faults raised here (a snapshot's stopping
/// error names one of them, or a method's name).
pub const OPS: &[&str] = &[
    "application",
    "field access",
    "dynamic",
    "defer",
    "partial",
    "fix",
    "List",
    "Tuple",
    "Map",
];

/// How deep function calls may nest (`fix` recursion, or closures calling
/// closures): a runtime error beyond, never an exhausted stack.
pub const MAX_CALL_DEPTH: u32 = 100;

/// The stack a body's evaluation leaves free: below it, evaluation stops
/// with the same runtime error as `MAX_CALL_DEPTH`. The call bound is what
/// a specification meets (the same on every thread); this is the safety
/// net for bodies nested deep inside deep calls on a small stack.
const STACK_RESERVE: usize = 256 * 1024;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// The body of one lambda and where its captures are.
#[derive(Debug)]
pub struct LambdaCode {
    pub spec: Arc<CheckedSpec>,
    /// Each capture's expression and its index among the captured samples,
    /// by expression (`plan::LambdaPlan::capture_index`).
    pub captures: Arc<[(ExprId, u32)]>,
    pub max_string_bytes: usize,
}

impl LambdaCode {
    fn capture(&self, e: ExprId) -> Option<usize> {
        let k = self.captures.binary_search_by_key(&e, |(x, _)| *x).ok()?;
        Some(self.captures[k].1 as usize)
    }
}

/// A lambda's value: its code, the parameters of the lambdas around it,
/// the captured samples and the arguments bound by `partial`.
pub struct Closure {
    pub code: Arc<LambdaCode>,
    pub lambda: ExprId,
    pub env: Arc<[Value]>,
    pub captures: Arc<[Sample]>,
    /// The captures held (the hold rule's values): what a call site reads.
    pub held: Arc<[Sample]>,
    pub bound: Vec<Value>,
}

impl fmt::Debug for Closure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Closure({})", self.source())
    }
}

impl Closure {
    fn run(&self, args: &[Value], at_site: bool) -> Result<Sample, Fault> {
        let ExprKind::Lambda(_, body) = &self.code.spec.ast.expr(self.lambda).kind else {
            unreachable!("a closure is of a lambda")
        };
        let mut env: Vec<Value> = self.env.to_vec();
        env.extend(self.bound.iter().cloned());
        env.extend(args.iter().cloned());
        let cx = Body {
            code: &self.code,
            env: &env,
            captures: &self.captures,
            held: &self.held,
            at_site,
        };
        deeper(|| cx.eval(*body))
    }

    fn params(&self) -> usize {
        match &self.code.spec.ast.expr(self.lambda).kind {
            ExprKind::Lambda(params, _) => params.len(),
            _ => unreachable!("a closure is of a lambda"),
        }
    }
}

/// Runs `f` one call deeper, or fails past `MAX_CALL_DEPTH`. The depth
/// is restored however `f` ends (a panic caught above must not leave the
/// thread's later calls deeper).
fn deeper<T>(f: impl FnOnce() -> Result<T, Fault>) -> Result<T, Fault> {
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(self.0));
        }
    }
    let depth = DEPTH.with(|d| d.get());
    if depth >= MAX_CALL_DEPTH {
        return Err(Fault::new(ErrorKind::RecursionTooDeep, "application"));
    }
    let _restore = Restore(depth);
    DEPTH.with(|d| d.set(depth + 1));
    f()
}

impl Function for Closure {
    fn arity(&self) -> usize {
        self.params() - self.bound.len()
    }

    fn call(&self, args: &[Value]) -> Result<Sample, Fault> {
        self.run(args, false)
    }

    fn call_at_site(&self, args: &[Value]) -> Result<Sample, Fault> {
        self.run(args, true)
    }

    fn bind(self: Arc<Self>, args: Vec<Value>) -> Arc<dyn Function> {
        let mut bound = self.bound.clone();
        bound.extend(args);
        Arc::new(Closure {
            code: self.code.clone(),
            lambda: self.lambda,
            env: self.env.clone(),
            captures: self.captures.clone(),
            held: self.held.clone(),
            bound,
        })
    }

    fn source(&self) -> String {
        let ast = &self.code.spec.ast;
        let mut names: Vec<String> = Vec::new();
        // The enclosing lambdas' parameter names are not kept with the
        // closure; they print by position.
        names.extend((0..self.env.len()).map(|k| format!("p{k}")));
        let text = crate::lang::ast::display(ast, self.lambda, &mut names);
        if self.bound.is_empty() {
            text
        } else {
            let bound: Vec<String> = self.bound.iter().map(|v| v.to_string()).collect();
            format!("partial({text}, {})", bound.join(", "))
        }
    }
}

/// `fix(f)`: calling it calls `f` with itself first (a function of one
/// parameter returning the function to call is applied twice).
#[derive(Debug)]
pub struct Fixed {
    pub f: Arc<dyn Function>,
}

impl Function for Fixed {
    fn arity(&self) -> usize {
        self.f.arity().saturating_sub(1).max(1)
    }

    fn call(&self, args: &[Value]) -> Result<Sample, Fault> {
        let me = Value::Func(Arc::new(Fixed { f: self.f.clone() }));
        if self.f.arity() > 1 {
            let mut all = vec![me];
            all.extend(args.iter().cloned());
            return deeper(|| self.f.call(&all));
        }
        match deeper(|| self.f.call(&[me]))? {
            Sample::Value(Value::Func(g)) => apply(&g, args),
            Sample::Value(other) => Err(invalid("fix", &other)),
            special => Ok(special),
        }
    }

    fn bind(self: Arc<Self>, args: Vec<Value>) -> Arc<dyn Function> {
        Arc::new(Bound { f: self, args })
    }

    fn source(&self) -> String {
        format!("fix({})", self.f.source())
    }
}

/// A function with its first arguments bound (`partial` of a function that
/// is not a closure).
#[derive(Debug)]
struct Bound {
    f: Arc<dyn Function>,
    args: Vec<Value>,
}

impl Function for Bound {
    fn arity(&self) -> usize {
        self.f.arity().saturating_sub(self.args.len())
    }

    fn call(&self, args: &[Value]) -> Result<Sample, Fault> {
        let mut all = self.args.clone();
        all.extend(args.iter().cloned());
        self.f.call(&all)
    }

    fn call_at_site(&self, args: &[Value]) -> Result<Sample, Fault> {
        let mut all = self.args.clone();
        all.extend(args.iter().cloned());
        self.f.call_at_site(&all)
    }

    fn bind(self: Arc<Self>, args: Vec<Value>) -> Arc<dyn Function> {
        let mut all = self.args.clone();
        all.extend(args);
        Arc::new(Bound {
            f: self.f.clone(),
            args: all,
        })
    }

    fn source(&self) -> String {
        let args: Vec<String> = self.args.iter().map(|v| v.to_string()).collect();
        format!("partial({}, {})", self.f.source(), args.join(", "))
    }
}

fn invalid(op: &'static str, v: &Value) -> Fault {
    Fault {
        kind: ErrorKind::InvalidOperand,
        op,
        detail: Some(v.to_string()),
    }
}

/// Calls `f` at a call site (`f(a)`, see `Function::call_at_site`).
pub fn apply_at_site(f: &Arc<dyn Function>, args: &[Value]) -> Result<Sample, Fault> {
    check_arity(f, args)?;
    f.call_at_site(args)
}

fn check_arity(f: &Arc<dyn Function>, args: &[Value]) -> Result<(), Fault> {
    if args.len() != f.arity() {
        return Err(Fault {
            kind: ErrorKind::InvalidOperand,
            op: "application",
            detail: Some(format!(
                "{} takes {} argument(s), given {}",
                f.source(),
                f.arity(),
                args.len()
            )),
        });
    }
    Ok(())
}

/// Calls `f` with `args`, which must be as many as it takes. An argument
/// that is a list's NoVal or ⊥ element makes the call that sample, without
/// calling (as for an argument that is NoVal or ⊥).
pub fn apply(f: &Arc<dyn Function>, args: &[Value]) -> Result<Sample, Fault> {
    let markers = args.iter().filter_map(|a| match a {
        Value::Marker(m) => Some(*m),
        _ => None,
    });
    if let Some(m) = markers.min_by_key(|m| *m != crate::value::Marker::NoVal) {
        return Ok(m.into());
    }
    check_arity(f, args)?;
    f.call(args)
}

/// The function of a value, or an invalid-operand fault of `op`.
fn function<'a>(op: &'static str, v: &'a Value) -> Result<&'a Arc<dyn Function>, Fault> {
    match v {
        Value::Func(f) => Ok(f),
        other => Err(invalid(op, other)),
    }
}

/// The outcome of operands under the hold rule: NoVal if any is NoVal, else
/// ⊥ if any is ⊥, else their values.
pub fn present(samples: Vec<Sample>) -> Result<Vec<Value>, Sample> {
    let mut out = Vec::with_capacity(samples.len());
    let mut deferred = false;
    for s in samples {
        match s {
            Sample::NoVal => return Err(Sample::NoVal),
            Sample::Deferred => deferred = true,
            Sample::Value(v) => out.push(v),
        }
    }
    if deferred {
        Err(Sample::Deferred)
    } else {
        Ok(out)
    }
}

/// `partial(f, a, …)`.
pub fn partial(args: Vec<Value>) -> Result<Value, Fault> {
    let mut args = args.into_iter();
    let f = args.next().expect("the parser requires a function");
    let f = function("partial", &f)?.clone();
    let bound: Vec<Value> = args.collect();
    if bound.len() > f.arity() {
        return Err(Fault {
            kind: ErrorKind::InvalidOperand,
            op: "partial",
            detail: Some(format!(
                "{} takes {} argument(s), given {}",
                f.source(),
                f.arity(),
                bound.len()
            )),
        });
    }
    Ok(Value::Func(f.bind(bound)))
}

/// `f(a, …)` on present values, at a call site.
pub fn call(args: &[Value]) -> Result<Sample, Fault> {
    apply_at_site(function("application", &args[0])?, &args[1..])
}

/// `e.field` / `e.0` (a list's NoVal or ⊥ element is that sample).
pub fn field(v: &Value, field: &Field) -> Result<Sample, Fault> {
    field_value(v, field).map(Value::into_sample)
}

fn field_value(v: &Value, field: &Field) -> Result<Value, Fault> {
    match (v, field) {
        (Value::Map(m), Field::Name(k)) => m.get(k).cloned().ok_or_else(|| Fault {
            kind: ErrorKind::MissingKey,
            op: "field access",
            detail: Some(format!("{:?}", &**k)),
        }),
        (Value::Tuple(_) | Value::List(_), Field::Index(i)) => {
            let (found, len) = match v {
                Value::List(items) => (items.get(*i as usize), items.len()),
                Value::Tuple(items) => (items.get(*i as usize), items.len()),
                _ => unreachable!("matched a list or a tuple"),
            };
            found.cloned().ok_or_else(|| Fault {
                kind: ErrorKind::IndexOutOfBounds,
                op: "field access",
                detail: Some(format!("index {i}, length {len}")),
            })
        }
        (other, _) => Err(invalid("field access", other)),
    }
}

/// A map of `keys` to `values`.
pub fn map_of(keys: impl Iterator<Item = Arc<str>>, values: Vec<Value>) -> Value {
    Value::Map(Arc::new(keys.zip(values).collect::<MapEntries>()))
}

/// The container builtins on present values.
pub fn method(m: Method, args: &[Value]) -> Result<Sample, Fault> {
    use Method::*;
    let op = m.name();
    let bad = |v: &Value| invalid(op, v);
    let list = |v: &Value| match v {
        Value::List(items) => Ok(items.clone()),
        other => Err(bad(other)),
    };
    let map = |v: &Value| match v {
        Value::Map(entries) => Ok(entries.clone()),
        other => Err(bad(other)),
    };
    let key = |v: &Value| match v {
        Value::Str(s) => Ok(s.clone()),
        other => Err(bad(other)),
    };
    let empty = || Fault::new(ErrorKind::EmptyList, op);
    let v = match m {
        ListGet => {
            let items = list(&args[0])?;
            let Value::Int(i) = args[1] else {
                return Err(bad(&args[1]));
            };
            let found = usize::try_from(i).ok().and_then(|k| items.get(k));
            let v = found.cloned().ok_or_else(|| Fault {
                kind: ErrorKind::IndexOutOfBounds,
                op,
                detail: Some(format!("index {i}, length {}", items.len())),
            })?;
            return Ok(v.into_sample());
        }
        ListConcat => {
            let (a, b) = (list(&args[0])?, list(&args[1])?);
            Value::List(a.concat(&b))
        }
        ListAppend => {
            let a = list(&args[0])?;
            super::ops::contain(op, [&args[1]])?;
            // Shares `a`'s elements: accumulating costs O(1) a step.
            Value::List(a.appended(args[1].clone()))
        }
        ListHead => {
            return Ok(list(&args[0])?
                .first()
                .cloned()
                .ok_or_else(empty)?
                .into_sample());
        }
        ListTail => {
            let items = list(&args[0])?;
            if items.is_empty() {
                return Err(empty());
            }
            Value::List(items.tail())
        }
        ListLen => Value::Int(list(&args[0])?.len() as i64),
        ListMap | ListFilter => {
            let f = function(op, &args[0])?;
            let items = list(&args[1])?;
            let mut out = Vec::with_capacity(items.len());
            for x in items.iter() {
                let r = match apply(f, std::slice::from_ref(x))? {
                    Sample::Value(r) => r,
                    // `List.map` keeps an element's NoVal or ⊥ in the list.
                    Sample::NoVal if m == ListMap => Value::Marker(crate::value::Marker::NoVal),
                    Sample::Deferred if m == ListMap => {
                        Value::Marker(crate::value::Marker::Deferred)
                    }
                    special => return Ok(special),
                };
                match (m, r) {
                    (ListMap, r) => out.push(r),
                    (_, Value::Bool(true)) => out.push(x.clone()),
                    (_, Value::Bool(false)) => {}
                    (_, other) => return Err(bad(&other)),
                }
            }
            if m == ListMap {
                super::ops::contain(op, &out)?;
            }
            Value::list(out)
        }
        ListFold => {
            let f = function(op, &args[0])?;
            let items = list(&args[2])?;
            let mut acc = args[1].clone();
            for x in items.iter() {
                acc = match apply(f, &[acc, x.clone()])? {
                    Sample::Value(r) => r,
                    special => return Ok(special),
                };
            }
            return Ok(acc.into_sample());
        }
        MapGet => {
            let (entries, k) = (map(&args[0])?, key(&args[1])?);
            entries.get(&k).cloned().ok_or_else(|| Fault {
                kind: ErrorKind::MissingKey,
                op,
                detail: Some(format!("{:?}", &*k)),
            })?
        }
        MapInsert => {
            let (entries, k) = (map(&args[0])?, key(&args[1])?);
            super::ops::contain(op, [&args[2]])?;
            let mut entries = (*entries).clone();
            entries.insert(k, args[2].clone());
            Value::Map(Arc::new(entries))
        }
        MapRemove => {
            let (entries, k) = (map(&args[0])?, key(&args[1])?);
            let mut entries = (*entries).clone();
            entries.remove(&k);
            Value::Map(Arc::new(entries))
        }
        MapHasKey => {
            let (entries, k) = (map(&args[0])?, key(&args[1])?);
            Value::Bool(entries.contains_key(&k))
        }
    };
    Ok(Sample::Value(v))
}

/// A body's evaluation: parameters (outermost lambda's first) and captures.
struct Body<'a> {
    code: &'a Arc<LambdaCode>,
    env: &'a [Value],
    captures: &'a Arc<[Sample]>,
    held: &'a Arc<[Sample]>,
    /// Whether the call is at a call site (reading `held`).
    at_site: bool,
}

impl Body<'_> {
    fn all(&self, es: &[ExprId]) -> Result<Result<Vec<Value>, Sample>, Fault> {
        let samples = es
            .iter()
            .map(|&e| self.eval(e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(present(samples))
    }

    /// Evaluates `e` (recursively: the parser bounds a body's depth, calls
    /// are bounded by `MAX_CALL_DEPTH`, and the stack left by
    /// `STACK_RESERVE`).
    fn eval(&self, e: ExprId) -> Result<Sample, Fault> {
        if stacker::remaining_stack().is_some_and(|free| free < STACK_RESERVE) {
            return Err(Fault::new(ErrorKind::RecursionTooDeep, "application"));
        }
        if let Some(k) = self.code.capture(e) {
            let from = if self.at_site {
                self.held
            } else {
                self.captures
            };
            return Ok(from[k].clone());
        }
        let ast = &self.code.spec.ast;
        let one = |v: Value| Ok(Sample::Value(v));
        macro_rules! values {
            ($es:expr) => {
                match self.all($es)? {
                    Ok(vs) => vs,
                    Err(special) => return Ok(special),
                }
            };
        }
        match &ast.expr(e).kind {
            ExprKind::Int(i) => one(Value::Int(*i)),
            ExprKind::Float(x) => one(Value::Float(*x)),
            ExprKind::Bool(b) => one(Value::Bool(*b)),
            ExprKind::Str(s) => one(Value::Str(s.clone())),
            ExprKind::Unit => one(Value::Unit),
            ExprKind::Param(k) => one(self.env[*k as usize].clone()),
            ExprKind::Name(_)
            | ExprKind::Window(..)
            | ExprKind::Since(..)
            | ExprKind::Dynamic(..) => {
                unreachable!("captured, or refused by the checker")
            }
            ExprKind::Offset(a, _) => self.eval(*a),
            ExprKind::Unary(op, a) => {
                let v = values!(&[*a]);
                crate::canonical::ops::unary(*op, &v[0]).map(Sample::Value)
            }
            ExprKind::Binary(op, a, b) => {
                let v = values!(&[*a, *b]);
                crate::canonical::ops::binary_bounded(*op, &v[0], &v[1], self.code.max_string_bytes)
                    .map(Sample::Value)
            }
            ExprKind::If(c, a, b) => match self.eval(*c)? {
                Sample::Value(Value::Bool(true)) => self.eval(*a),
                Sample::Value(Value::Bool(false)) => self.eval(*b),
                Sample::Value(other) => Err(Fault {
                    kind: ErrorKind::InvalidOperand,
                    op: "if",
                    detail: Some(format!("condition {other}")),
                }),
                special => Ok(special),
            },
            ExprKind::Call(f, args) => match f {
                Builtin::Default => match self.eval(args[0])? {
                    Sample::Deferred => self.eval(args[1]),
                    s => Ok(s),
                },
                Builtin::IsDefined => Ok(Sample::Value(Value::Bool(!matches!(
                    self.eval(args[0])?,
                    Sample::Deferred
                )))),
                _ => {
                    let v = values!(args);
                    let refs: Vec<&Value> = v.iter().collect();
                    crate::canonical::ops::math(*f, &refs).map(Sample::Value)
                }
            },
            ExprKind::List(items) => {
                let vs = values!(items);
                super::ops::contain("List", &vs)?;
                one(Value::list(vs))
            }
            ExprKind::Tuple(items) => {
                let vs = values!(items);
                super::ops::contain("Tuple", &vs)?;
                one(Value::tuple(vs))
            }
            ExprKind::Map(entries) => {
                let es: Vec<ExprId> = entries.iter().map(|(_, x)| *x).collect();
                let vs = values!(&es);
                super::ops::contain("Map", &vs)?;
                one(map_of(entries.iter().map(|(k, _)| k.clone()), vs))
            }
            ExprKind::Field(a, f) => {
                let v = values!(&[*a]);
                field(&v[0], f)
            }
            ExprKind::Method(m, args) => method(*m, &values!(args)),
            ExprKind::Lambda(..) => one(Value::Func(Arc::new(Closure {
                code: self.code.clone(),
                lambda: e,
                env: self.env.into(),
                captures: self.captures.clone(),
                held: self.held.clone(),
                bound: Vec::new(),
            }))),
            ExprKind::Apply(f, args) => {
                let mut all = vec![*f];
                all.extend(args);
                let vs = values!(&all);
                let f = function("application", &vs[0])?;
                match self.at_site {
                    true => apply_at_site(f, &vs[1..]),
                    false => apply(f, &vs[1..]),
                }
            }
            ExprKind::Partial(args) => partial(values!(args)).map(Sample::Value),
            ExprKind::Fix(f) => {
                let v = values!(&[*f]);
                let f = function("fix", &v[0])?.clone();
                one(Value::Func(Arc::new(Fixed { f })))
            }
        }
    }
}
