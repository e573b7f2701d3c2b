//! The checker (docs/language.md, "Checking"; docs/engine.md, "Scalar signatures"): names, definitions, types, same-step cycles and scalar signatures.
//!
//! It turns an `Ast` into a `CheckedSpec`: a stream arena (`StreamId`) with
//! each stream's kind, declared and inferred type and `ScalarSignature`, plus
//! side tables keyed by `ExprId` (resolved stream of each name, type and
//! signature of each expression). Every error of a spec is collected.

use super::ast::*;
use super::diag::{Diagnostic, LineIndex, Span, short};
use super::types::Type;
use std::collections::HashMap;
use std::fmt;

/// A stream (input, output or aux) in `CheckedSpec::streams`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u32);

impl StreamId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The representation every value of a stream or node is guaranteed to have
/// (docs/engine.md, "Scalar signatures"). It is not the type: a Float-typed node may carry Ints, and
/// then its signature is `NotScalar`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarSignature {
    I64,
    F64,
    B1,
    NotScalar,
}

impl fmt::Display for ScalarSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScalarSignature::I64 => "i64",
            ScalarSignature::F64 => "f64",
            ScalarSignature::B1 => "b1",
            ScalarSignature::NotScalar => "none",
        })
    }
}

#[derive(Clone, Debug)]
pub struct StreamData {
    pub name: String,
    pub kind: DeclKind,
    /// When the stream is evaluated: declared (`out p: Bool @ 1s`) or
    /// inferred (see `Checker::infer_pace`).
    pub pace: Pace,
    pub declared: Option<Type>,
    /// The declared type, else the inferred one.
    pub ty: Type,
    pub def: Option<ExprId>,
    pub decl_span: Span,
    pub sig: ScalarSignature,
}

/// When a stream is evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pace {
    /// At every input step (a row of the trace); on a tick it is NoVal.
    Event,
    /// At every tick of this period (nanoseconds): the steps the scheduler
    /// adds at the origin's time plus each multiple of the period. On an
    /// input step it is NoVal, and its offsets count its own ticks.
    Periodic(i64),
}

/// A specification that passed every check.
#[derive(Clone, Debug)]
pub struct CheckedSpec {
    pub file: String,
    pub source: String,
    pub ast: Ast,
    pub streams: Vec<StreamData>,
    /// For every `ExprKind::Name`, the stream it refers to.
    pub expr_stream: Vec<Option<StreamId>>,
    pub expr_type: Vec<Type>,
    pub expr_sig: Vec<ScalarSignature>,
    /// Input streams in declaration order (the columns of a row).
    pub inputs: Vec<StreamId>,
    /// Output streams in print order: the order in which each name is first
    /// mentioned in the spec text.
    pub outputs: Vec<StreamId>,
    /// Defined streams in declaration order.
    pub defined: Vec<StreamId>,
    /// The `trigger` declarations, in declaration order.
    pub triggers: Vec<TriggerSpec>,
    /// The scheduler's policies the specification chooses (`@ 1s, on_gap
    /// skip, on_reset once`); the command line's flags override them.
    pub on_gap: Option<GapPolicy>,
    pub on_reset: Option<ResetPolicy>,
    /// The streams each `dynamic`/`defer` expression may read, by its
    /// `ExprId` (sorted): its `{x, y}`, or by default every input and every
    /// defined stream that does not read its owner at the same step (those
    /// are scheduled before the owner).
    pub dynamic_scopes: Vec<(ExprId, Vec<StreamId>)>,
}

impl CheckedSpec {
    /// Whether some stream is periodic (`@ period`): such a run has ticks.
    pub fn has_periodic_streams(&self) -> bool {
        (self.streams.iter()).any(|s| matches!(s.pace, Pace::Periodic(_)))
    }

    /// The scope of `dynamic` expression `e`.
    pub fn dynamic_scope(&self, e: ExprId) -> &[StreamId] {
        match self.dynamic_scopes.binary_search_by_key(&e, |(d, _)| *d) {
            Ok(k) => &self.dynamic_scopes[k].1,
            Err(_) => &[],
        }
    }
}

/// A checked `trigger`: its Bool stream and its message template.
#[derive(Clone, Debug, PartialEq)]
pub struct TriggerSpec {
    pub stream: StreamId,
    pub name: String,
    /// For a trigger with `resolve`: whether this is its firing alert or
    /// its resolved one (`N#resolved`, which alerts under the name `N`).
    pub state: Option<AlertState>,
    /// For a trigger with `every`: the stream of the firings held back
    /// before each alert (`N#suppressed`).
    pub suppressed: Option<StreamId>,
    /// The labels its alerts carry (`severity critical`, `label team =
    /// "ops"`), in the order written.
    pub labels: Vec<(String, String)>,
    pub message: Vec<Piece>,
    /// The streams the message names, each once, in order of first mention
    /// (an alert's `values`).
    pub values: Vec<StreamId>,
}

/// Which alert of a trigger with `resolve` a trigger stream gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertState {
    /// The condition holds (or began to hold, with `rising`).
    Firing,
    /// The condition held at the step before and does not now.
    Resolved,
}

/// A piece of a trigger's message: text, or a stream's value at the step.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    Text(String),
    /// A stream's value, written as the placeholder's format says.
    Stream(StreamId, crate::lang::message::Format),
}

impl CheckedSpec {
    pub fn stream(&self, id: StreamId) -> &StreamData {
        &self.streams[id.index()]
    }

    /// The inputs declared without a type (`in x`), by position: they take
    /// any value, so nothing reading them has a scalar signature unless the
    /// engine speculates one (`speculating`).
    pub fn untyped_inputs(&self) -> Vec<usize> {
        (self.inputs.iter().enumerate())
            .filter(|(_, s)| self.stream(**s).ty == Type::Any)
            .map(|(k, _)| k)
            .collect()
    }

    /// This specification re-signed as if each input of `speculated` had the
    /// representation given (docs/engine.md, "Scalar signatures", with those inputs' signatures
    /// assumed): the signatures then hold only on rows whose values of those
    /// inputs have it, which the fused programs guard. Types, nodes and
    /// everything else are unchanged. (A node whose operands then have
    /// representations its operation does not take — `!x` or `if x` with
    /// `x` an Int — is not fused: `fusion::is_island_node` and the `if`
    /// rules check operands.)
    pub fn speculating(&self, speculated: &[(StreamId, ScalarSignature)]) -> CheckedSpec {
        let mut spec = self.clone();
        let pass = Signatures {
            ast: &self.ast,
            expr_stream: &self.expr_stream,
        };
        spec.expr_sig = pass.run(&mut spec.streams, speculated);
        spec
    }

    pub fn stream_by_name(&self, name: &str) -> Option<StreamId> {
        self.streams
            .iter()
            .position(|s| s.name == name)
            .map(|i| StreamId(i as u32))
    }

    pub fn stream_ids(&self) -> impl Iterator<Item = StreamId> + '_ {
        (0..self.streams.len() as u32).map(StreamId)
    }
}

/// Checks a parsed specification; returns every error found.
pub fn check(file: &str, source: &str, ast: Ast) -> Result<CheckedSpec, Vec<Diagnostic>> {
    let mut cx = Checker {
        ast: &ast,
        source,
        errors: Vec::new(),
        streams: Vec::new(),
        by_name: HashMap::new(),
        expr_stream: vec![None; ast.exprs.len()],
        params: std::cell::RefCell::new(Vec::new()),
        lines: None,
        on_gap: None,
        on_reset: None,
    };
    cx.collect_streams();
    cx.resolve_names();
    cx.infer_pace();
    // Types are inferred even after name errors (an unresolved name has no
    // type and causes no further error), so that every error is reported.
    let expr_type = cx.infer_types();
    // Cycles only need resolved names (an unresolved one is no edge), so
    // they are reported beside name and type errors: every error at once.
    let dynamic_scopes = cx.dynamic_scopes();
    cx.check_cycles(&dynamic_scopes);
    cx.check_functions();
    let triggers = cx.triggers();
    if !cx.errors.is_empty() {
        return Err(sorted(cx.errors));
    }
    let expr_sig = cx.signatures();
    let Checker {
        streams,
        expr_stream,
        on_gap,
        on_reset,
        ..
    } = cx;
    let inputs = ids_where(&streams, |s| s.kind == DeclKind::Input);
    let defined = ids_where(&streams, |s| s.def.is_some());
    // Outputs in order of first mention; looked up by name, so this stays
    // linear in the number of mentions.
    let output_ids: HashMap<&str, StreamId> = streams
        .iter()
        .enumerate()
        .filter(|(_, s)| s.kind == DeclKind::Output)
        .map(|(i, s)| (s.name.as_str(), StreamId(i as u32)))
        .collect();
    let mut listed = vec![false; streams.len()];
    let mut outputs: Vec<StreamId> = Vec::new();
    for (name, _) in &ast.mentions {
        if let Some(&id) = output_ids.get(name.as_str())
            && !std::mem::replace(&mut listed[id.index()], true)
        {
            outputs.push(id);
        }
    }
    Ok(CheckedSpec {
        file: file.to_string(),
        source: source.to_string(),
        ast,
        streams,
        expr_stream,
        expr_type,
        expr_sig,
        inputs,
        outputs,
        defined,
        triggers,
        on_gap: on_gap.map(|(p, _)| p),
        on_reset: on_reset.map(|(p, _)| p),
        dynamic_scopes,
    })
}

fn ids_where(streams: &[StreamData], f: impl Fn(&StreamData) -> bool) -> Vec<StreamId> {
    (0..streams.len())
        .filter(|&i| f(&streams[i]))
        .map(|i| StreamId(i as u32))
        .collect()
}

fn sorted(mut errors: Vec<Diagnostic>) -> Vec<Diagnostic> {
    errors.sort_by_key(|d| d.span.start);
    errors
}

struct Checker<'a> {
    ast: &'a Ast,
    source: &'a str,
    errors: Vec<Diagnostic>,
    streams: Vec<StreamData>,
    by_name: HashMap<String, StreamId>,
    expr_stream: Vec<Option<StreamId>>,
    /// The types of the parameters of the lambdas being inferred,
    /// outermost first (`ExprKind::Param` indexes it).
    params: std::cell::RefCell<Vec<Type>>,
    /// Built on the first error that names a line.
    lines: Option<LineIndex>,
    /// The scheduler policies chosen so far, where they were chosen.
    on_gap: Option<(GapPolicy, Span)>,
    on_reset: Option<(ResetPolicy, Span)>,
}

fn kind_word(kind: DeclKind) -> &'static str {
    match kind {
        DeclKind::Input => "input",
        DeclKind::Output => "output",
        DeclKind::Aux => "aux stream",
        DeclKind::Trigger => "trigger",
    }
}

/// `kind_word` with its article (`an input`, `a trigger`).
fn kind_with_article(kind: DeclKind) -> String {
    let word = kind_word(kind);
    let article = if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {word}")
}

impl Checker<'_> {
    /// Checks every trigger (its condition is Bool, its message names
    /// streams) and builds its message template.
    fn triggers(&mut self) -> Vec<TriggerSpec> {
        let mut out = Vec::new();
        for decl in &self.ast.decls {
            let Decl::Trigger {
                name,
                message,
                message_span,
                labels,
                ..
            } = decl
            else {
                continue;
            };
            let Some(&stream) = self.by_name.get(name) else {
                continue;
            };
            let s = &self.streams[stream.index()];
            if s.kind != DeclKind::Trigger {
                // Declared twice: already reported.
                continue;
            }
            if !matches!(s.ty, Type::Bool | Type::Any)
                && let Some(def) = s.def
            {
                self.errors.push(
                    Diagnostic::new(
                        self.ast.expr(def).span,
                        format!(
                            "the condition of trigger `{name}` has type {}; it must be Bool",
                            s.ty
                        ),
                    )
                    .with_hint("a trigger fires at every step where its condition is true"),
                );
            }
            if let Some((pieces, values)) = self.template(name, message, *message_span) {
                // A `resolve` clause's trigger alerts under its trigger's
                // name; an `every` clause's count of held-back firings goes
                // with each alert.
                let (shown, state) = match name.strip_suffix(crate::lang::ast::RESOLVED) {
                    Some(base) => (base.to_string(), Some(AlertState::Resolved)),
                    None => {
                        let resolves = format!("{name}{}", crate::lang::ast::RESOLVED);
                        let state = self.by_name.contains_key(&resolves);
                        (name.clone(), state.then_some(AlertState::Firing))
                    }
                };
                let suppressed = (self.by_name)
                    .get(&format!("{shown}{}", crate::lang::ast::SUPPRESSED))
                    .copied()
                    .filter(|_| state != Some(AlertState::Resolved));
                out.push(TriggerSpec {
                    stream,
                    name: shown,
                    state,
                    suppressed,
                    labels: labels.clone(),
                    message: pieces,
                    values,
                });
            }
        }
        out
    }

    /// Parses a trigger's message: `{name}` is the value of stream `name`
    /// at the step, `{{` and `}}` are braces. Errors are located at the
    /// message.
    fn template(
        &mut self,
        trigger: &str,
        text: &str,
        span: Span,
    ) -> Option<(Vec<Piece>, Vec<StreamId>)> {
        let mut pieces = Vec::new();
        let mut values: Vec<StreamId> = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        let fail = |cx: &mut Self, m: String| {
            cx.errors
                .push(Diagnostic::new(span, m).with_hint(
                    "`{name}` inserts a stream's value; write `{{` and `}}` for braces",
                ));
            None
        };
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '}' => {
                    return fail(
                        self,
                        format!("a `}}` without its `{{` in the message of trigger `{trigger}`"),
                    );
                }
                '{' => {
                    let mut name = String::new();
                    let mut closed = false;
                    for c in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        name.push(c);
                    }
                    if !closed {
                        return fail(
                            self,
                            format!(
                                "a `{{` without its `}}` in the message of trigger `{trigger}`"
                            ),
                        );
                    }
                    let (name, format) = crate::lang::message::Format::split(&name);
                    let Some(&id) = self.by_name.get(name.trim()) else {
                        return fail(
                            self,
                            format!(
                                "unknown stream `{}` in the message of trigger `{trigger}`",
                                short(name.trim())
                            ),
                        );
                    };
                    if !literal.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut literal)));
                    }
                    pieces.push(Piece::Stream(id, format));
                    if !values.contains(&id) {
                        values.push(id);
                    }
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Some((pieces, values))
    }

    fn collect_streams(&mut self) {
        for decl in &self.ast.decls {
            // A trigger declares its Bool stream and defines it at once.
            let (kind, name, name_span, ty, def, period) = match decl {
                Decl::Stream {
                    kind,
                    name,
                    name_span,
                    ty,
                    period,
                    policies,
                } => {
                    self.policies(policies);
                    (*kind, name, name_span, *ty, None, *period)
                }
                Decl::Trigger {
                    name,
                    name_span,
                    cond,
                    ..
                } => (DeclKind::Trigger, name, name_span, None, Some(*cond), None),
                Decl::Def { .. } => continue,
            };
            if let (DeclKind::Input, Some((_, span))) = (kind, period) {
                self.errors.push(
                    Diagnostic::new(span, format!("input `{name}` cannot be periodic"))
                        .with_hint("inputs arrive with the rows; declare a periodic `out` stream that reads it"),
                );
            }
            {
                if let Some(&prev) = self.by_name.get(name) {
                    let prev = &self.streams[prev.index()];
                    self.errors.push(
                        Diagnostic::new(*name_span, format!("`{name}` is declared twice"))
                            .with_hint(format!(
                                "it is already declared as {} on line {}",
                                kind_with_article(prev.kind),
                                self.lines
                                    .get_or_insert_with(|| LineIndex::new(self.source))
                                    .line(prev.decl_span.start as usize)
                            )),
                    );
                    continue;
                }
                let id = StreamId(self.streams.len() as u32);
                self.by_name.insert(name.clone(), id);
                self.streams.push(StreamData {
                    name: name.clone(),
                    kind,
                    // Undeclared paces are inferred once names resolve.
                    pace: period.map_or(Pace::Event, |(p, _)| Pace::Periodic(p)),
                    declared: ty.map(|(t, _)| t),
                    ty: ty.map_or(Type::Any, |(t, _)| t),
                    def,
                    decl_span: *name_span,
                    sig: ScalarSignature::NotScalar,
                });
            }
        }
        for decl in &self.ast.decls {
            if let Decl::Def {
                name,
                name_span,
                expr,
            } = decl
            {
                let Some(&id) = self.by_name.get(name) else {
                    self.errors.push(
                        Diagnostic::new(
                            *name_span,
                            format!("`{name}` is defined but never declared"),
                        )
                        .with_hint(format!(
                            "declare it with `out {name}` (printed) or `aux {name}` (not printed)"
                        )),
                    );
                    continue;
                };
                let s = &mut self.streams[id.index()];
                if s.kind == DeclKind::Input {
                    self.errors.push(
                        Diagnostic::new(*name_span, format!("input `{name}` cannot be defined"))
                            .with_hint("inputs take their values from the trace; declare a separate `out` stream"),
                    );
                } else if s.def.is_some() {
                    self.errors.push(Diagnostic::new(
                        *name_span,
                        format!("`{name}` is defined twice"),
                    ));
                } else {
                    s.def = Some(*expr);
                }
            }
        }
        for s in &self.streams {
            if s.kind != DeclKind::Input && s.def.is_none() {
                self.errors.push(
                    Diagnostic::new(
                        s.decl_span,
                        format!("{} `{}` has no definition", kind_word(s.kind), s.name),
                    )
                    .with_hint(format!("define it with `{} = <expression>`", s.name)),
                );
            }
        }
    }

    /// Takes the scheduler policies of one declaration: one choice per
    /// policy in the whole specification.
    fn policies(&mut self, policies: &[(Policy, Span)]) {
        for &(p, span) in policies {
            let clash = match p {
                Policy::Gap(g) => match self.on_gap {
                    Some((prev, _)) if prev != g => true,
                    _ => {
                        self.on_gap = Some((g, span));
                        false
                    }
                },
                Policy::Reset(r) => match self.on_reset {
                    Some((prev, _)) if prev != r => true,
                    _ => {
                        self.on_reset = Some((r, span));
                        false
                    }
                },
            };
            if clash {
                self.errors.push(
                    Diagnostic::new(span, "this policy contradicts one chosen before")
                        .with_hint("the scheduler has one gap policy and one reset policy for the whole specification"),
                );
            }
        }
    }

    /// The pace of every defined stream declared without one: periodic with
    /// period P when every other stream its definition names is periodic
    /// with period P (so `trigger late: missing "…"` over a periodic
    /// `missing` fires at its ticks), else event. A least fixpoint: streams
    /// start undecided, one that names an event stream (or two periods) is
    /// event, and those still undecided at the end (reading only each
    /// other, or nothing but themselves and literals) are event.
    fn infer_pace(&mut self) {
        let declared: Vec<bool> = (self.ast.decls.iter())
            .filter_map(|d| match d {
                Decl::Stream { period, .. } => Some(period.is_some()),
                Decl::Trigger { .. } => Some(false),
                Decl::Def { .. } => None,
            })
            .collect();
        // `declared` follows declaration order, as `streams` does except
        // for repeated names (an error already): then keep it simple.
        if declared.len() != self.streams.len() {
            return;
        }
        let mut pace: Vec<Option<Pace>> = (self.streams.iter().zip(&declared))
            .map(|(s, d)| (*d || s.def.is_none()).then_some(s.pace))
            .collect();
        loop {
            let mut changed = false;
            for i in 0..self.streams.len() {
                let Some(def) = self.streams[i].def else {
                    continue;
                };
                if pace[i].is_some() {
                    continue;
                }
                let reads = (self.ast.names(def).into_iter())
                    .filter_map(|(e, _)| self.expr_stream[e.index()])
                    .filter(|r| r.index() != i);
                let mut found: Option<Pace> = None;
                let mut event = false;
                let mut undecided = false;
                for r in reads {
                    match pace[r.index()] {
                        None => undecided = true,
                        Some(Pace::Event) => event = true,
                        Some(p) if found.is_some_and(|f| f != p) => event = true,
                        Some(p) => found = Some(p),
                    }
                }
                let decided = if event {
                    Some(Pace::Event)
                } else if undecided {
                    None
                } else {
                    Some(found.unwrap_or(Pace::Event))
                };
                if decided.is_some() {
                    pace[i] = decided;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        for (s, p) in self.streams.iter_mut().zip(pace) {
            s.pace = p.unwrap_or(Pace::Event);
        }
    }

    fn resolve_names(&mut self) {
        // A name applied like a function (`foo(1)`) that names no stream is
        // most likely a misspelt builtin.
        let callees: std::collections::HashSet<ExprId> = (self.ast.exprs.iter())
            .filter_map(|e| match &e.kind {
                ExprKind::Apply(f, _) => Some(*f),
                _ => None,
            })
            .collect();
        for (i, e) in self.ast.exprs.iter().enumerate() {
            if let ExprKind::Name(n) = &e.kind {
                match self.by_name.get(n) {
                    Some(&id) => self.expr_stream[i] = Some(id),
                    None if callees.contains(&ExprId(i as u32)) => self.errors.push(
                        Diagnostic::new(e.span, format!("unknown function `{n}`"))
                            .with_hint("the builtins are default, is_defined, when, init, latch, update, sin, cos, tan, abs, sqrt, min, max, floor, ceil, partial, fix, dynamic, eval, defer, List(…), Tuple(…), Map(…), and List.*/Map.* (a stream holding a function is applied the same way)"),
                    ),
                    None => self.errors.push(
                        Diagnostic::new(e.span, format!("unknown stream `{n}`"))
                            .with_hint(format!("declare it, e.g. `in {n}: Int`")),
                    ),
                }
            }
        }
    }

    /// Infers stream and expression types by iterating to a fixpoint over the
    /// streams (recursion through offsets needs it), then reports type errors
    /// in one final pass so that no error is reported from a partial state.
    fn infer_types(&mut self) -> Vec<Type> {
        let n = self.streams.len();
        let mut inferred: Vec<Option<Type>> = self
            .streams
            .iter()
            .map(|s| {
                if s.kind == DeclKind::Input {
                    Some(s.ty)
                } else {
                    None
                }
            })
            .collect();
        let mut table = vec![None; self.ast.exprs.len()];
        let defs: Vec<Option<ExprId>> = self.streams.iter().map(|s| s.def).collect();
        fixpoint(&defs, &mut inferred, |def, current| {
            self.infer(def, current, &mut table, &mut Vec::new())
        });
        let mut errors = Vec::new();
        for i in 0..n {
            let Some(def) = self.streams[i].def else {
                continue;
            };
            let t = self.infer(def, &inferred, &mut table, &mut errors);
            let s = &mut self.streams[i];
            match (s.declared, t) {
                // One numeric rule, as `default`, `if` and the arithmetic
                // operators unify Int with Float: an Int definition fits a
                // stream declared Float (`o: Float = latch(3, a)`), its
                // values staying what they are computed as (`Int(3)`), as
                // the Trustworthiness Checker accepts and prints them.
                (Some(Type::Float), Some(Type::Int)) => {}
                (Some(d), Some(t)) if d != Type::Any && t != Type::Any && d != t => {
                    errors.push(
                        Diagnostic::new(
                            self.ast.expr(def).span,
                            format!(
                                "`{}` is declared {d} but its definition has type {t}",
                                s.name
                            ),
                        )
                        .with_hint(format!("change the declaration to `{t}` or the definition")),
                    );
                }
                (Some(_), _) => {}
                (None, t) => s.ty = t.unwrap_or(Type::Any),
            }
        }
        self.errors.extend(errors);
        table.into_iter().map(|t| t.unwrap_or(Type::Any)).collect()
    }

    /// The type a reference to stream `id` has: declared, else inferred so far.
    fn stream_type(&self, id: StreamId, inferred: &[Option<Type>]) -> Option<Type> {
        self.streams[id.index()].declared.or(inferred[id.index()])
    }

    fn infer(
        &self,
        e: ExprId,
        inferred: &[Option<Type>],
        table: &mut Vec<Option<Type>>,
        errs: &mut Vec<Diagnostic>,
    ) -> Option<Type> {
        let data = self.ast.expr(e);
        let span = data.span;
        let t = match &data.kind {
            ExprKind::Int(_) => Some(Type::Int),
            ExprKind::Float(_) => Some(Type::Float),
            ExprKind::Bool(_) => Some(Type::Bool),
            ExprKind::Str(_) => Some(Type::Str),
            ExprKind::Unit => Some(Type::Unit),
            ExprKind::Name(_) => {
                self.expr_stream[e.index()].and_then(|id| self.stream_type(id, inferred))
            }
            ExprKind::Offset(a, _) => self.infer(*a, inferred, table, errs),
            ExprKind::Unary(op, a) => {
                let ta = self.infer(*a, inferred, table, errs);
                match op {
                    UnOp::Neg => numeric_unary(ta, "-", span, errs),
                    UnOp::Not => {
                        expect_bool(ta, "!", span, errs);
                        Some(Type::Bool)
                    }
                }
            }
            ExprKind::Binary(op, a, b) => {
                let ta = self.infer(*a, inferred, table, errs);
                let tb = self.infer(*b, inferred, table, errs);
                binary_type(*op, ta, tb, span, errs)
            }
            ExprKind::If(c, a, b) => {
                let tc = self.infer(*c, inferred, table, errs);
                expect_bool(tc, "if", self.ast.expr(*c).span, errs);
                let ta = self.infer(*a, inferred, table, errs);
                let tb = self.infer(*b, inferred, table, errs);
                unify(ta, tb, "the branches of `if`", span, errs)
            }
            ExprKind::Call(f, args) => {
                let ts: Vec<Option<Type>> = args
                    .iter()
                    .map(|a| self.infer(*a, inferred, table, errs))
                    .collect();
                builtin_type(*f, &ts, span, errs)
            }
            ExprKind::Window(a, w) => {
                let ta = self.infer(*a, inferred, table, errs);
                window_type(w.agg, ta, self.ast.expr(*a).span, errs)
            }
            // A since's operands are what a `G`/`F` of its form takes:
            // Bools for a verdict (`any`), numbers for a robustness (`max`,
            // as Floats).
            ExprKind::Since(a, b, w) => {
                let ta = self.infer(*a, inferred, table, errs);
                let tb = self.infer(*b, inferred, table, errs);
                let ta = window_type(w.agg, ta, self.ast.expr(*a).span, errs);
                let tb = window_type(w.agg, tb, self.ast.expr(*b).span, errs);
                match w.agg {
                    Aggregate::Any => ta.and(tb).map(|_| Type::Bool),
                    _ => ta.and(tb).map(|_| Type::Float),
                }
            }
            ExprKind::List(items) | ExprKind::Tuple(items) => {
                for &x in items {
                    self.infer(x, inferred, table, errs);
                }
                Some(match data.kind {
                    ExprKind::List(_) => Type::List,
                    _ => Type::Tuple,
                })
            }
            ExprKind::Map(entries) => {
                for &(_, x) in entries {
                    self.infer(x, inferred, table, errs);
                }
                Some(Type::Map)
            }
            ExprKind::Field(a, field) => {
                let ta = self.infer(*a, inferred, table, errs);
                let want: &[Type] = match field {
                    Field::Name(_) => &[Type::Map],
                    Field::Index(_) => &[Type::Tuple, Type::List],
                };
                expect_one_of(ta, want, "`.`", self.ast.expr(*a).span, errs);
                Some(Type::Any)
            }
            ExprKind::Method(m, args) => {
                let ts: Vec<Option<Type>> = args
                    .iter()
                    .map(|a| self.infer(*a, inferred, table, errs))
                    .collect();
                let spans: Vec<Span> = args.iter().map(|a| self.ast.expr(*a).span).collect();
                method_type(*m, &ts, &spans, errs)
            }
            ExprKind::Lambda(params, body) => {
                self.params.borrow_mut().extend(params.iter().map(|p| p.ty));
                self.infer(*body, inferred, table, errs);
                let mut p = self.params.borrow_mut();
                let outer = p.len() - params.len();
                p.truncate(outer);
                Some(Type::Fn)
            }
            ExprKind::Param(k) => self.params.borrow().get(*k as usize).copied(),
            ExprKind::Apply(f, args) => {
                let tf = self.infer(*f, inferred, table, errs);
                expect_one_of(tf, &[Type::Fn], "application", self.ast.expr(*f).span, errs);
                for &a in args {
                    self.infer(a, inferred, table, errs);
                }
                Some(Type::Any)
            }
            ExprKind::Partial(args) => {
                let tf = self.infer(args[0], inferred, table, errs);
                expect_one_of(
                    tf,
                    &[Type::Fn],
                    "`partial`",
                    self.ast.expr(args[0]).span,
                    errs,
                );
                for &a in &args[1..] {
                    self.infer(a, inferred, table, errs);
                }
                Some(Type::Fn)
            }
            ExprKind::Fix(f) => {
                let tf = self.infer(*f, inferred, table, errs);
                expect_one_of(tf, &[Type::Fn], "`fix`", self.ast.expr(*f).span, errs);
                Some(Type::Fn)
            }
            ExprKind::Dynamic(form, s) => {
                let ts = self.infer(*s, inferred, table, errs);
                let what = if form.defer { "`defer`" } else { "`dynamic`" };
                expect_one_of(ts, &[Type::Str], what, self.ast.expr(*s).span, errs);
                Some(form.ty.unwrap_or(Type::Any))
            }
        };
        // An STL formula compares numbers (its robustness is their
        // difference): a term of another type is said once, as such, and
        // is a Float to the operators around it. The parser records the
        // terms in the order it builds them, which is their ids' order.
        let t = match t {
            Some(ty)
                if !ty.is_numeric()
                    && ty != Type::Any
                    && self.ast.stl_terms.binary_search(&e).is_ok() =>
            {
                errs.push(
                    Diagnostic::new(span, format!("an STL formula compares numbers, found {ty}"))
                        .with_hint("compare a number, or take a Bool stream as a formula of its own: `stl(G[0, 1s](door_open))`"),
                );
                Some(Type::Float)
            }
            t => t,
        };
        table[e.index()] = t;
        t
    }

    /// The scope of every `dynamic`/`defer` (see `CheckedSpec::dynamic_scopes`):
    /// named scopes are resolved (an unknown name or the owner itself is an
    /// error); a default scope is every input and every defined stream that
    /// does not read the owner at the same step, taken in declaration order
    /// of the owners, so that adding their edges never makes a cycle.
    fn dynamic_scopes(&mut self) -> Vec<(ExprId, Vec<StreamId>)> {
        let mut scopes: Vec<(ExprId, Vec<StreamId>)> = Vec::new();
        let mut defaults: Vec<(ExprId, StreamId)> = Vec::new();
        for (i, e) in self.ast.exprs.iter().enumerate() {
            let ExprKind::Dynamic(form, _) = &e.kind else {
                continue;
            };
            let id = ExprId(i as u32);
            let Some(owner) = self.owner_of(id) else {
                continue;
            };
            match &form.scope {
                Some(names) => {
                    let mut ids = Vec::new();
                    for (n, span) in names {
                        match self.by_name.get(n) {
                            Some(&s) if s == owner => self.errors.push(
                                Diagnostic::new(*span, format!("`{n}` cannot read itself through `dynamic`"))
                                    .with_hint("read its earlier values with an offset outside the received expression"),
                            ),
                            Some(&s) => ids.push(s),
                            None => self.errors.push(Diagnostic::new(
                                *span,
                                format!("unknown stream `{n}`"),
                            )),
                        }
                    }
                    scopes.push((id, ids));
                }
                None => defaults.push((id, owner)),
            }
        }
        scopes.sort_by_key(|(e, _)| *e);
        // Each default scope becomes same-step dependencies of its owner,
        // which the next owner's dependents must see.
        let mut deps = same_step_deps(self.ast, &self.streams, &self.expr_stream, &scopes);
        for (id, owner) in defaults {
            // The streams reading `owner` at the same step, transitively.
            let mut readers: Vec<Vec<usize>> = vec![Vec::new(); self.streams.len()];
            for (s, ds) in deps.iter().enumerate() {
                for d in ds {
                    readers[d.index()].push(s);
                }
            }
            let mut dependent = vec![false; self.streams.len()];
            let mut stack = vec![owner.index()];
            while let Some(s) = stack.pop() {
                for &r in &readers[s] {
                    if !std::mem::replace(&mut dependent[r], true) {
                        stack.push(r);
                    }
                }
            }
            let scope: Vec<StreamId> = (0..self.streams.len())
                .filter(|&s| s != owner.index() && !dependent[s])
                .filter(|&s| {
                    self.streams[s].kind == DeclKind::Input || self.streams[s].def.is_some()
                })
                .map(|s| StreamId(s as u32))
                .collect();
            let own = &mut deps[owner.index()];
            for &s in &scope {
                if !own.contains(&s) {
                    own.push(s);
                }
            }
            let at = scopes.partition_point(|(e, _)| *e < id);
            scopes.insert(at, (id, scope));
        }
        scopes
    }

    /// The stream whose definition holds expression `e`.
    fn owner_of(&self, e: ExprId) -> Option<StreamId> {
        self.streams
            .iter()
            .position(|s| s.def.is_some_and(|d| self.ast.contains(d, e)))
            .map(|s| StreamId(s as u32))
    }

    /// Lambda bodies keep no history of their parameters: an offset, a
    /// stateful builtin or a window over an expression that reads a
    /// parameter is an error (one over streams only is evaluated with the
    /// stream, and the closure captures its value), and so is a `dynamic`
    /// inside a body (as in the Trustworthiness Checker).
    fn check_functions(&mut self) {
        let defs: Vec<ExprId> = self.streams.iter().filter_map(|s| s.def).collect();
        let mut stack: Vec<(ExprId, u32)> = defs.into_iter().map(|d| (d, 0)).collect();
        while let Some((x, depth)) = stack.pop() {
            let data = self.ast.expr(x);
            let temporal = match &data.kind {
                ExprKind::Lambda(params, body) => {
                    stack.push((*body, depth + params.len() as u32));
                    continue;
                }
                ExprKind::Dynamic(..) if depth > 0 => {
                    self.errors.push(Diagnostic::new(
                        data.span,
                        "`dynamic` and `defer` cannot be used inside a function's body",
                    ));
                    continue;
                }
                ExprKind::Offset(_, n) => *n > 0,
                ExprKind::Call(f, _) => f.is_stateful(),
                ExprKind::Window(..) | ExprKind::Since(..) => true,
                _ => false,
            };
            if temporal && self.ast.reads_params_below(x, depth) {
                self.errors.push(
                    Diagnostic::new(
                        data.span,
                        "a function's body cannot keep the history of its parameters",
                    )
                    .with_hint("offsets, windows and stateful builtins inside a function may read streams only (`x[1]`), whose values the function captures when it is made"),
                );
                continue;
            }
            stack.extend(self.ast.children(x).into_iter().map(|c| (c, depth)));
        }
    }

    /// Reports every same-step cycle (a cycle of offset-0 references).
    fn check_cycles(&mut self, scopes: &[(ExprId, Vec<StreamId>)]) {
        let deps = same_step_deps(self.ast, &self.streams, &self.expr_stream, scopes);
        // 0 = unvisited, 1 = on the DFS stack, 2 = done.
        let mut state = vec![0u8; self.streams.len()];
        let mut reported: Vec<Vec<StreamId>> = Vec::new();
        for root in 0..self.streams.len() {
            if state[root] != 0 {
                continue;
            }
            let mut stack: Vec<(StreamId, usize)> = vec![(StreamId(root as u32), 0)];
            state[root] = 1;
            while let Some(&mut (s, ref mut next)) = stack.last_mut() {
                if let Some(&d) = deps[s.index()].get(*next) {
                    *next += 1;
                    match state[d.index()] {
                        0 => {
                            state[d.index()] = 1;
                            stack.push((d, 0));
                        }
                        1 => {
                            let pos = stack.iter().position(|(x, _)| *x == d).unwrap_or(0);
                            let mut cycle: Vec<StreamId> =
                                stack[pos..].iter().map(|(x, _)| *x).collect();
                            // Rotate so the cycle starts at its first-declared
                            // stream; then it reads in dependency order.
                            let min = cycle
                                .iter()
                                .enumerate()
                                .min_by_key(|(_, x)| **x)
                                .map_or(0, |(i, _)| i);
                            cycle.rotate_left(min);
                            if !reported.contains(&cycle) {
                                reported.push(cycle);
                            }
                        }
                        _ => {}
                    }
                } else {
                    state[s.index()] = 2;
                    stack.pop();
                }
            }
        }
        for cycle in reported {
            // Edges point from a stream to what it reads, so print in
            // reading order: a reads b reads a => `a -> b -> a`.
            let mut names: Vec<&str> = cycle
                .iter()
                .map(|s| self.streams[s.index()].name.as_str())
                .collect();
            names.push(names[0]);
            let first = &self.streams[cycle[0].index()];
            let span = first.def.map_or(first.decl_span, |d| self.ast.expr(d).span);
            self.errors.push(
                Diagnostic::new(span, format!("same-step cycle: {}", names.join(" -> ")))
                    .with_hint("a cycle needs a positive offset on a name in it, e.g. `default(z[1], 0)`; an offset of a compound expression, `(z + x)[1]`, still reads `z` at the current step"),
            );
        }
    }

    /// Computes the scalar signature of every stream as a least fixpoint
    /// (starting from "no values yet"), then of every expression.
    fn signatures(&mut self) -> Vec<ScalarSignature> {
        let pass = Signatures {
            ast: self.ast,
            expr_stream: &self.expr_stream,
        };
        pass.run(&mut self.streams, &[])
    }
}

/// The signature pass (docs/engine.md, "Scalar signatures"), apart from the checker so that a checked
/// specification can be re-signed under speculated input representations
/// (`CheckedSpec::speculating`).
struct Signatures<'a> {
    ast: &'a Ast,
    expr_stream: &'a [Option<StreamId>],
}

impl Signatures<'_> {
    /// Signs every stream of `streams` (their `sig`) and returns every
    /// expression's signature. An input's signature is its type's, unless
    /// `speculated` gives one.
    fn run(
        &self,
        streams: &mut [StreamData],
        speculated: &[(StreamId, ScalarSignature)],
    ) -> Vec<ScalarSignature> {
        let n = streams.len();
        let mut sigs: Vec<Option<ScalarSignature>> = streams
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if s.kind == DeclKind::Input {
                    let given = speculated.iter().find(|(id, _)| id.index() == i);
                    Some(given.map_or(input_sig(s.ty), |&(_, sig)| sig))
                } else {
                    None
                }
            })
            .collect();
        let mut table = vec![None; self.ast.exprs.len()];
        let defs: Vec<Option<ExprId>> = streams.iter().map(|s| s.def).collect();
        fixpoint(&defs, &mut sigs, |def, current| {
            self.sig(def, current, &mut table)
        });
        for i in 0..n {
            if let Some(def) = streams[i].def {
                self.sig(def, &sigs, &mut table);
            }
            streams[i].sig = sigs[i].unwrap_or(ScalarSignature::NotScalar);
        }
        table
            .into_iter()
            .map(|s| s.unwrap_or(ScalarSignature::NotScalar))
            .collect()
    }

    fn sig(
        &self,
        e: ExprId,
        streams: &[Option<ScalarSignature>],
        table: &mut Vec<Option<ScalarSignature>>,
    ) -> Option<ScalarSignature> {
        use ScalarSignature::*;
        let data = self.ast.expr(e);
        let sub = |x: ExprId, table: &mut Vec<Option<ScalarSignature>>| self.sig(x, streams, table);
        let s = match &data.kind {
            ExprKind::Int(_) => Some(I64),
            ExprKind::Float(_) => Some(F64),
            ExprKind::Bool(_) => Some(B1),
            ExprKind::Str(_) | ExprKind::Unit => Some(NotScalar),
            ExprKind::Name(_) => self.expr_stream[e.index()].and_then(|id| streams[id.index()]),
            ExprKind::Offset(a, _) => sub(*a, table),
            ExprKind::Unary(UnOp::Neg, a) => arith_sig(sub(*a, table), Some(I64)),
            ExprKind::Unary(UnOp::Not, a) => {
                sub(*a, table);
                Some(B1)
            }
            ExprKind::Binary(op, a, b) => {
                let (sa, sb) = (sub(*a, table), sub(*b, table));
                match op {
                    _ if op.is_arithmetic() => arith_sig(sa, sb),
                    BinOp::Concat => Some(NotScalar),
                    _ => Some(B1),
                }
            }
            ExprKind::If(c, a, b) => {
                sub(*c, table);
                let (sa, sb) = (sub(*a, table), sub(*b, table));
                join_sig(sa, sb)
            }
            ExprKind::Call(f, args) => {
                let ss: Vec<_> = args.iter().map(|a| sub(*a, table)).collect();
                match f {
                    Builtin::Default | Builtin::Init | Builtin::Update => join_sig(ss[0], ss[1]),
                    Builtin::Latch => ss[0],
                    Builtin::IsDefined | Builtin::When => Some(B1),
                    Builtin::Sin | Builtin::Cos | Builtin::Tan | Builtin::Sqrt => Some(F64),
                    Builtin::Abs | Builtin::Floor | Builtin::Ceil => arith_sig(ss[0], Some(I64)),
                    Builtin::Min | Builtin::Max => arith_sig(ss[0], ss[1]),
                    // A Float, but read from the row's time by the canonical
                    // tier only: no fused program computes it.
                    Builtin::Time => Some(NotScalar),
                }
            }
            // A window's value has one representation, whatever its
            // operand's (a Float window converts the Ints it receives), or
            // is ⊥ (empty): its readers may fuse. The window itself runs on
            // the canonical tier (`fusion::is_island_node`).
            // A since's value is its form's: a verdict or a robustness
            // (its operands are signed for their own nodes).
            ExprKind::Since(a, b, w) => {
                sub(*a, table);
                sub(*b, table);
                match w.agg {
                    Aggregate::Any => Some(B1),
                    _ => Some(F64),
                }
            }
            ExprKind::Window(a, w) => {
                let sa = sub(*a, table);
                match w.agg {
                    Aggregate::Count => Some(I64),
                    Aggregate::Avg | Aggregate::Variance | Aggregate::Stddev => Some(F64),
                    Aggregate::Integral => Some(F64),
                    Aggregate::P50 | Aggregate::P90 | Aggregate::P95 | Aggregate::P99 => Some(F64),
                    Aggregate::Any | Aggregate::All => Some(B1),
                    Aggregate::Sum | Aggregate::Min | Aggregate::Max | Aggregate::Last | Aggregate::First => match sa {
                        Some(NotScalar) => Some(F64),
                        other => other,
                    },
                }
            }
            // Containers, functions and what they give have no scalar
            // representation (docs/engine.md, "Scalar signatures"); their parts are signed for the
            // nodes they lower to.
            ExprKind::Param(_) => Some(NotScalar),
            ExprKind::List(_)
            | ExprKind::Tuple(_)
            | ExprKind::Map(_)
            | ExprKind::Field(..)
            | ExprKind::Method(..)
            | ExprKind::Lambda(..)
            | ExprKind::Apply(..)
            | ExprKind::Partial(_)
            | ExprKind::Fix(_)
            | ExprKind::Dynamic(..) => {
                for c in self.ast.children(e) {
                    sub(c, table);
                }
                Some(NotScalar)
            }
        };
        table[e.index()] = s;
        s
    }
}

/// Iterates `eval` over every defined stream's definition until no stream's
/// value changes: the least fixpoint of a monotone analysis that starts from
/// "nothing known yet" (recursion through offsets needs it). The lattices
/// used here have height at most three, so `3n + 3` rounds always suffice.
fn fixpoint<T: PartialEq>(
    defs: &[Option<ExprId>],
    values: &mut [T],
    mut eval: impl FnMut(ExprId, &[T]) -> T,
) {
    for _round in 0..(3 * defs.len() + 3) {
        let mut changed = false;
        for (i, def) in defs.iter().enumerate() {
            let Some(def) = *def else { continue };
            let v = eval(def, values);
            if v != values[i] {
                values[i] = v;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
}

/// The offset-0 references of every stream's definition: the edges of the
/// dependency graph. A name under an offset >= 1 (`b[1]`) is not one. A
/// compound expression under an offset (`(b + 1)[1]`) is evaluated at the
/// current step and its value read `n` steps later, so its references are
/// same-step edges: the reader is scheduled after `b`, and a stream reading
/// itself that way is a cycle (write `b[1] + 1` instead).
pub fn same_step_deps(
    ast: &Ast,
    streams: &[StreamData],
    expr_stream: &[Option<StreamId>],
    dynamic_scopes: &[(ExprId, Vec<StreamId>)],
) -> Vec<Vec<StreamId>> {
    streams
        .iter()
        .map(|s| {
            let mut deps = Vec::new();
            let mut stack: Vec<ExprId> = s.def.into_iter().collect();
            while let Some(e) = stack.pop() {
                match &ast.expr(e).kind {
                    ExprKind::Offset(a, n) if *n > 0 && is_name(ast, *a) => {}
                    // A received expression reads its scope at the step.
                    ExprKind::Dynamic(_, source) => {
                        if let Ok(k) = dynamic_scopes.binary_search_by_key(&e, |(d, _)| *d) {
                            for &id in &dynamic_scopes[k].1 {
                                if !deps.contains(&id) {
                                    deps.push(id);
                                }
                            }
                        }
                        stack.push(*source);
                    }
                    ExprKind::Name(_) => {
                        if let Some(id) = expr_stream[e.index()]
                            && !deps.contains(&id)
                        {
                            deps.push(id);
                        }
                    }
                    _ => stack.extend(ast.children(e).into_iter().rev()),
                }
            }
            deps
        })
        .collect()
}

/// Whether `e` is a name, possibly under zero offsets (`x`, `x[0]`).
fn is_name(ast: &Ast, e: ExprId) -> bool {
    match &ast.expr(e).kind {
        ExprKind::Name(_) => true,
        ExprKind::Offset(a, 0) => is_name(ast, *a),
        _ => false,
    }
}

fn input_sig(t: Type) -> ScalarSignature {
    match t {
        Type::Int => ScalarSignature::I64,
        Type::Float => ScalarSignature::F64,
        Type::Bool => ScalarSignature::B1,
        _ => ScalarSignature::NotScalar,
    }
}

/// i64 ∘ i64 → i64, f64 ∘ numeric → f64; anything else is not scalar. An
/// operand with no values yet leaves the result without values too.
fn arith_sig(a: Option<ScalarSignature>, b: Option<ScalarSignature>) -> Option<ScalarSignature> {
    use ScalarSignature::*;
    match (a, b) {
        (Some(NotScalar | B1), _) | (_, Some(NotScalar | B1)) => Some(NotScalar),
        (None, _) | (_, None) => None,
        (Some(I64), Some(I64)) => Some(I64),
        _ => Some(F64),
    }
}

/// The join of two sides that may each provide the value: equal
/// representations stay, different ones (i64 with f64) are not scalar.
fn join_sig(a: Option<ScalarSignature>, b: Option<ScalarSignature>) -> Option<ScalarSignature> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(x), Some(y)) if x == y => Some(x),
        _ => Some(ScalarSignature::NotScalar),
    }
}

fn unify(
    a: Option<Type>,
    b: Option<Type>,
    what: &str,
    span: Span,
    errs: &mut Vec<Diagnostic>,
) -> Option<Type> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(x), Some(y)) if x == y => Some(x),
        (Some(Type::Any), _) | (_, Some(Type::Any)) => Some(Type::Any),
        (Some(x), Some(y)) if x.is_numeric() && y.is_numeric() => Some(Type::Float),
        (Some(x), Some(y)) => {
            errs.push(Diagnostic::new(
                span,
                format!("{what} have incompatible types {x} and {y}"),
            ));
            Some(Type::Any)
        }
    }
}

/// Reports `t` unless it is one of `want` (or `Any`, or not known yet).
fn expect_one_of(t: Option<Type>, want: &[Type], op: &str, span: Span, errs: &mut Vec<Diagnostic>) {
    if let Some(t) = t
        && t != Type::Any
        && !want.contains(&t)
    {
        let names: Vec<String> = want.iter().map(|w| w.to_string()).collect();
        errs.push(Diagnostic::new(
            span,
            format!("{op} needs a {}, found {t}", names.join(" or a ")),
        ));
    }
}

/// The type of a container builtin's result, its operands checked.
fn method_type(
    m: Method,
    ts: &[Option<Type>],
    spans: &[Span],
    errs: &mut Vec<Diagnostic>,
) -> Option<Type> {
    use Method::*;
    let what = format!("`{}`", m.name());
    let want = |k: usize, t: Type, errs: &mut Vec<Diagnostic>| {
        expect_one_of(ts[k], &[t], &what, spans[k], errs)
    };
    match m {
        ListGet | ListHead | ListTail | ListLen | ListAppend | ListConcat => {
            want(0, Type::List, errs)
        }
        ListMap | ListFilter => {
            want(0, Type::Fn, errs);
            want(1, Type::List, errs);
        }
        ListFold => {
            want(0, Type::Fn, errs);
            want(2, Type::List, errs);
        }
        MapGet | MapInsert | MapRemove | MapHasKey => {
            want(0, Type::Map, errs);
            want(1, Type::Str, errs);
        }
    }
    match m {
        ListGet => want(1, Type::Int, errs),
        ListConcat => want(1, Type::List, errs),
        _ => {}
    }
    Some(match m {
        ListConcat | ListAppend | ListTail | ListMap | ListFilter => Type::List,
        ListLen => Type::Int,
        MapInsert | MapRemove => Type::Map,
        MapHasKey => Type::Bool,
        ListGet | ListHead | ListFold | MapGet => Type::Any,
    })
}

fn expect_bool(t: Option<Type>, op: &str, span: Span, errs: &mut Vec<Diagnostic>) {
    if let Some(t) = t
        && t != Type::Bool
        && t != Type::Any
    {
        errs.push(Diagnostic::new(
            span,
            format!("`{op}` needs a Bool, found {t}"),
        ));
    }
}

fn numeric_unary(
    t: Option<Type>,
    op: &str,
    span: Span,
    errs: &mut Vec<Diagnostic>,
) -> Option<Type> {
    match t {
        Some(t) if !t.is_numeric() && t != Type::Any => {
            errs.push(Diagnostic::new(
                span,
                format!("`{op}` needs a number, found {t}"),
            ));
            Some(Type::Any)
        }
        t => t,
    }
}

/// Int×Int → Int; a Float operand makes a Float; `Any` with Int stays `Any`.
fn arith_type(
    a: Option<Type>,
    b: Option<Type>,
    op: &str,
    span: Span,
    errs: &mut Vec<Diagnostic>,
) -> Option<Type> {
    for t in [a, b].into_iter().flatten() {
        if !t.is_numeric() && t != Type::Any {
            errs.push(Diagnostic::new(
                span,
                format!("`{op}` needs numbers, found {t}"),
            ));
            return Some(Type::Any);
        }
    }
    match (a, b) {
        (Some(Type::Float), _) | (_, Some(Type::Float)) => Some(Type::Float),
        (None, _) | (_, None) => None,
        (Some(Type::Int), Some(Type::Int)) => Some(Type::Int),
        _ => Some(Type::Any),
    }
}

fn binary_type(
    op: BinOp,
    a: Option<Type>,
    b: Option<Type>,
    span: Span,
    errs: &mut Vec<Diagnostic>,
) -> Option<Type> {
    let sym = op.symbol();
    match op {
        _ if op.is_arithmetic() => arith_type(a, b, sym, span, errs),
        BinOp::Eq | BinOp::Ne => Some(Type::Bool),
        _ if op.is_ordering() => {
            if let (Some(x), Some(y)) = (a, b) {
                let ok = x == Type::Any
                    || y == Type::Any
                    || (x.is_numeric() && y.is_numeric())
                    || (x == y && matches!(x, Type::Bool | Type::Str));
                if !ok {
                    errs.push(
                        Diagnostic::new(span, format!("`{sym}` cannot order {x} and {y}"))
                            .with_hint("ordering is defined on numbers, on Bools and on Strs"),
                    );
                }
            }
            Some(Type::Bool)
        }
        BinOp::Concat => {
            for t in [a, b].into_iter().flatten() {
                if t != Type::Str && t != Type::Any {
                    errs.push(Diagnostic::new(
                        span,
                        format!("`++` needs Str operands, found {t}"),
                    ));
                    break;
                }
            }
            Some(Type::Str)
        }
        _ => {
            for t in [a, b].into_iter().flatten() {
                if t != Type::Bool && t != Type::Any {
                    errs.push(Diagnostic::new(
                        span,
                        format!("`{sym}` needs Bool operands, found {t}"),
                    ));
                    break;
                }
            }
            Some(Type::Bool)
        }
    }
}

/// The type of a window aggregating values of type `t` (docs/language.md, "Windows"):
/// `count` takes any operand, `sum`, `avg`, `min`, `max`, `variance`,
/// `stddev`, `integral` and the percentiles a number, `last` and `first` a
/// scalar, `any` and `all` a Bool. The operand's type must be
/// known: a window keeps one representation of its values.
fn window_type(
    agg: Aggregate,
    t: Option<Type>,
    span: Span,
    errs: &mut Vec<Diagnostic>,
) -> Option<Type> {
    let name = agg.name();
    let t = t?;
    if t == Type::Any && agg != Aggregate::Count {
        errs.push(
            Diagnostic::new(
                span,
                format!(
                    "the window aggregate `{name}` needs its operand's type, which is not known"
                ),
            )
            .with_hint("declare the stream's type, e.g. `in latency: Float`"),
        );
        return None;
    }
    let fits = match agg {
        Aggregate::Count => true,
        Aggregate::Last | Aggregate::First => matches!(t, Type::Int | Type::Float | Type::Bool),
        Aggregate::Any | Aggregate::All => t == Type::Bool,
        // Every other aggregate computes with numbers.
        _ => matches!(t, Type::Int | Type::Float),
    };
    if !fits {
        let want = match agg {
            Aggregate::Last | Aggregate::First => "an Int, Float or Bool",
            Aggregate::Any | Aggregate::All => "a Bool",
            _ => "an Int or Float",
        };
        errs.push(Diagnostic::new(
            span,
            format!("the window aggregate `{name}` needs {want} operand, found {t}"),
        ));
        return None;
    }
    Some(match agg {
        Aggregate::Count => Type::Int,
        Aggregate::Avg | Aggregate::Variance | Aggregate::Stddev | Aggregate::Integral => {
            Type::Float
        }
        Aggregate::P50 | Aggregate::P90 | Aggregate::P95 | Aggregate::P99 => Type::Float,
        Aggregate::Any | Aggregate::All => Type::Bool,
        Aggregate::Sum | Aggregate::Min | Aggregate::Max | Aggregate::Last | Aggregate::First => t,
    })
}

fn builtin_type(
    f: Builtin,
    ts: &[Option<Type>],
    span: Span,
    errs: &mut Vec<Diagnostic>,
) -> Option<Type> {
    let name = f.name();
    match f {
        Builtin::Default | Builtin::Init | Builtin::Update => unify(
            ts[0],
            ts[1],
            &format!("the arguments of `{name}`"),
            span,
            errs,
        ),
        Builtin::Latch => ts[0],
        Builtin::IsDefined | Builtin::When => Some(Type::Bool),
        Builtin::Sin | Builtin::Cos | Builtin::Tan => {
            match ts[0] {
                Some(Type::Float | Type::Any) | None => {}
                Some(Type::Int) => errs.push(
                    Diagnostic::new(span, format!("`{name}` needs a Float, found Int"))
                        .with_hint("convert the argument to Float, e.g. `x * 1.0`"),
                ),
                Some(t) => errs.push(Diagnostic::new(
                    span,
                    format!("`{name}` needs a Float, found {t}"),
                )),
            }
            Some(Type::Float)
        }
        Builtin::Sqrt => {
            numeric_unary(ts[0], name, span, errs);
            Some(Type::Float)
        }
        Builtin::Abs | Builtin::Floor | Builtin::Ceil => numeric_unary(ts[0], name, span, errs),
        Builtin::Min | Builtin::Max => arith_type(ts[0], ts[1], name, span, errs),
        Builtin::Time => Some(Type::Float),
    }
}
