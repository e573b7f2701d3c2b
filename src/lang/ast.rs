//! The arena AST of a DSRV specification: expressions and declarations addressed by `u32` ids.

use super::diag::Span;
use super::types::Type;
use std::sync::Arc;

/// An expression in `Ast::exprs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExprId(pub u32);

impl ExprId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Implies,
    Concat,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
            BinOp::Implies => "=>",
            BinOp::Concat => "++",
        }
    }

    pub fn is_arithmetic(self) -> bool {
        matches!(
            self,
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem
        )
    }

    pub fn is_ordering(self) -> bool {
        matches!(self, BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
    }

    pub fn is_logic(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or | BinOp::Implies)
    }
}

/// The builtin functions of DSRV (and vigil's math additions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    Default,
    IsDefined,
    When,
    Init,
    Latch,
    Update,
    Sin,
    Cos,
    Tan,
    Abs,
    Sqrt,
    Min,
    Max,
    Floor,
    Ceil,
    /// `time()`: the current step's time, in seconds.
    Time,
}

impl Builtin {
    pub const ALL: [Builtin; 16] = [
        Builtin::Default,
        Builtin::IsDefined,
        Builtin::When,
        Builtin::Init,
        Builtin::Latch,
        Builtin::Update,
        Builtin::Sin,
        Builtin::Cos,
        Builtin::Tan,
        Builtin::Abs,
        Builtin::Sqrt,
        Builtin::Min,
        Builtin::Max,
        Builtin::Floor,
        Builtin::Ceil,
        Builtin::Time,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Builtin::Default => "default",
            Builtin::IsDefined => "is_defined",
            Builtin::When => "when",
            Builtin::Init => "init",
            Builtin::Latch => "latch",
            Builtin::Update => "update",
            Builtin::Sin => "sin",
            Builtin::Cos => "cos",
            Builtin::Tan => "tan",
            Builtin::Abs => "abs",
            Builtin::Sqrt => "sqrt",
            Builtin::Min => "min",
            Builtin::Max => "max",
            Builtin::Floor => "floor",
            Builtin::Ceil => "ceil",
            Builtin::Time => "time",
        }
    }

    pub fn from_name(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    pub fn arity(self) -> usize {
        match self {
            Builtin::Default
            | Builtin::Init
            | Builtin::Latch
            | Builtin::Update
            | Builtin::Min
            | Builtin::Max => 2,
            Builtin::Time => 0,
            _ => 1,
        }
    }

    /// Builtins that keep state across steps (they make a stream non-static).
    pub fn is_stateful(self) -> bool {
        matches!(
            self,
            Builtin::When | Builtin::Init | Builtin::Latch | Builtin::Update
        )
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(Arc<str>),
    Unit,
    Name(String),
    Unary(UnOp, ExprId),
    Binary(BinOp, ExprId, ExprId),
    If(ExprId, ExprId, ExprId),
    Offset(ExprId, u32),
    Call(Builtin, Vec<ExprId>),
    /// `window(e, 20, max)`, `window(e, 10s, avg)`: an aggregate of `e`'s
    /// recent present values (see `Window`).
    Window(ExprId, Window),
    /// `φ S[lo, hi] ψ` inside `stl(…)`/`stl_rob(…)`: operands φ and ψ, and
    /// a window of size `WindowSize::Since` (aggregate `any` for a verdict,
    /// `max` for a robustness).
    Since(ExprId, ExprId, Window),
    /// `[e, …]`, `List(e, …)`, `List()`.
    List(Vec<ExprId>),
    /// `Tuple(e, …)`.
    Tuple(Vec<ExprId>),
    /// `Map("k": e, …)`, `Struct("k": e, …)`, `{k: e, "k": e}`: keys as
    /// written (the parser refuses duplicates).
    Map(Vec<(Arc<str>, ExprId)>),
    /// `e.name` (a map's entry) or `e.0` (a tuple's or list's element).
    Field(ExprId, Field),
    /// `List.append(l, e)`, `Map.get(m, "k")`, …
    Method(Method, Vec<ExprId>),
    /// `\x: T, y: U -> body`: a function of its parameters, closed over the
    /// streams its body reads.
    Lambda(Vec<Param>, ExprId),
    /// A lambda's parameter, by its position in the environment of the
    /// lambdas around it (outermost lambda's parameters first).
    Param(u32),
    /// `f(a, …)`: a function value applied to arguments.
    Apply(ExprId, Vec<ExprId>),
    /// `partial(f, a, …)`: `f` with its first arguments bound.
    Partial(Vec<ExprId>),
    /// `fix(f)`: the fixed point of `f` (a function of itself).
    Fix(ExprId),
    /// `dynamic(s)`, `eval(s)`, `defer(s)` and their typed and scoped forms.
    Dynamic(Box<Dynamic>, ExprId),
}

/// A lambda's parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: String,
    pub ty: crate::lang::types::Type,
}

/// What `.` reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Field {
    Name(Arc<str>),
    Index(u32),
}

/// The form of a `dynamic`/`eval`/`defer`.
#[derive(Clone, Debug, PartialEq)]
pub struct Dynamic {
    /// `defer`: the first string is kept for the rest of the run.
    pub defer: bool,
    /// `dynamic(s: T)`: the type the received expression must have.
    pub ty: Option<crate::lang::types::Type>,
    /// `dynamic(s, {x, y})`: the only streams the received expression may
    /// read, with their spans.
    pub scope: Option<Vec<(String, crate::lang::diag::Span)>>,
}

macro_rules! methods {
    ($($variant:ident => $name:literal, $arity:literal;)*) => {
        /// A builtin of the containers, called as `List.append(l, e)`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Method {
            $($variant,)*
        }

        impl Method {
            pub const ALL: &[Method] = &[$(Method::$variant,)*];

            /// Its name as written (`List.append`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Method::$variant => $name,)*
                }
            }

            /// How many arguments it takes.
            pub fn arity(self) -> usize {
                match self {
                    $(Method::$variant => $arity,)*
                }
            }
        }
    };
}

methods! {
    ListGet => "List.get", 2;
    ListConcat => "List.concat", 2;
    ListAppend => "List.append", 2;
    ListHead => "List.head", 1;
    ListTail => "List.tail", 1;
    ListLen => "List.len", 1;
    ListMap => "List.map", 2;
    ListFilter => "List.filter", 2;
    ListFold => "List.fold", 3;
    MapGet => "Map.get", 2;
    MapInsert => "Map.insert", 3;
    MapRemove => "Map.remove", 2;
    MapHasKey => "Map.has_key", 2;
}

impl Method {
    /// The method named `name` (`List.append`).
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.iter().copied().find(|m| m.name() == name)
    }
}

/// A sliding window: which values of its operand it holds, and what it
/// computes of them (`window(x, 20, max)`, `window(lat, 10s, avg, 1s)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    pub size: WindowSize,
    pub agg: Aggregate,
}

/// How far back a window reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WindowSize {
    /// The last `n` present values (`n >= 1`).
    Count(u32),
    /// The values whose time lies in the last `panes` panes of `pane_ns`
    /// nanoseconds each (the duration is `panes * pane_ns`).
    Time { pane_ns: i64, panes: u32 },
    /// A past-time STL operator's interval (`G[lo, hi]`, `F[lo, hi]` inside
    /// `stl(...)`, docs/language.md "STL inside a specification"): at time
    /// `t` the samples whose time lies in `[t - hi_ns, t - lo_ns]`, of which
    /// it keeps at most `cap` (a monotonic deque and the samples not yet
    /// `lo_ns` old). Its aggregate is `all`/`any` (Bool) or `min`/`max`
    /// (robustness).
    Interval { lo_ns: i64, hi_ns: i64, cap: u32 },
    /// A past-time STL since's interval (`φ S[lo, hi] ψ` inside `stl(...)`):
    /// at time `t`, ψ's samples whose time lies in `[t - hi_ns, t - lo_ns]`
    /// followed by φ's, keeping at most `cap` entries in each of its rings
    /// (`scalar_ir::window::SinceWindow`). Its aggregate is `any` (Bool) or
    /// `max` (robustness).
    Since { lo_ns: i64, hi_ns: i64, cap: u32 },
}

/// What a window computes of the values it holds: the state machine's own
/// aggregate (`scalar_ir::window`), which also spells its names.
pub use scalar_ir::window::Agg as Aggregate;

impl std::fmt::Display for Window {
    /// The window's arguments after its operand, as written: `20, max` or
    /// `10s, avg, 100ms` (durations in the largest unit that divides them).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.size {
            WindowSize::Count(n) => write!(f, "{n}, {}", self.agg.name()),
            WindowSize::Time { pane_ns, panes } => write!(
                f,
                "{}, {}, {}",
                duration(pane_ns * i64::from(panes)),
                self.agg.name(),
                duration(pane_ns)
            ),
            WindowSize::Interval { lo_ns, hi_ns, cap } | WindowSize::Since { lo_ns, hi_ns, cap } => write!(
                f,
                "[{}, {}], {}, {cap}",
                duration_or_zero(lo_ns),
                duration_or_zero(hi_ns),
                self.agg.name()
            ),
        }
    }
}

/// A duration that may be zero (an STL interval's near end): `0` or as
/// `duration` spells it.
pub fn duration_or_zero(ns: i64) -> String {
    match ns {
        0 => "0".to_string(),
        _ => duration(ns),
    }
}

/// A duration in nanoseconds, spelled in the largest unit that divides it.
pub fn duration(ns: i64) -> String {
    const UNITS: [(i64, &str); 6] = [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "min"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    let (div, unit) = UNITS
        .into_iter()
        .find(|&(d, _)| ns % d == 0)
        .unwrap_or((1, "ns"));
    format!("{}{unit}", ns / div)
}

#[derive(Clone, Debug, PartialEq)]
pub struct ExprData {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeclKind {
    Input,
    Output,
    Aux,
    /// The Bool stream of a `trigger` (not printed; it fires where true).
    Trigger,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Decl {
    /// `in x: T`, `out y`, `aux a: T`.
    Stream {
        kind: DeclKind,
        name: String,
        name_span: Span,
        ty: Option<(Type, Span)>,
        /// `@ 1s`: the stream is periodic, evaluated every so many
        /// nanoseconds of time (see `lang::check::Pace`).
        period: Option<(i64, Span)>,
        /// `@ 1s, on_gap skip, on_reset once`: the scheduler's policies the
        /// spec chooses.
        policies: Vec<(Policy, Span)>,
    },
    /// `y = expr`.
    Def {
        name: String,
        name_span: Span,
        expr: ExprId,
    },
    /// `trigger [name:] cond "message"`: a Bool stream `name` (`trigger_N`,
    /// the N-th trigger, when unnamed) defined by `cond`, with the message
    /// template to render where it is true.
    Trigger {
        name: String,
        name_span: Span,
        cond: ExprId,
        message: String,
        message_span: Span,
        /// Labels its alerts carry (`severity critical`, `label team =
        /// "ops"`), in the order written.
        labels: Vec<(String, String)>,
    },
}

/// A trigger's alerting clauses, after its message: `rising` fires where
/// the condition becomes true, `resolve` adds an alert where it becomes false
/// again, `every D` fires at most once per `D` (nanoseconds) of time while it
/// holds. The parser writes them as streams of the specification
/// (`Parser::desugar_alerting`), so their state is the monitor's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Alerting {
    pub rising: bool,
    pub resolve: bool,
    pub every: Option<i64>,
}

/// The most labels one trigger may carry (`severity` included).
pub const MAX_LABELS: usize = 32;

/// The name suffix of the trigger a `resolve` clause adds to trigger `N`
/// (`N#resolved`, true where `N`'s condition stops holding).
pub const RESOLVED: &str = "#resolved";

/// The name suffix of the aux stream an `every` clause adds to trigger `N`:
/// the firings held back before each of its alerts.
pub const SUPPRESSED: &str = "#suppressed";

/// What the scheduler does at a jump in time longer than `--max-gap`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GapPolicy {
    /// Every tick missed fires.
    CatchUp,
    /// One tick of each period fires.
    Skip,
}

/// What the scheduler does at a time reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetPolicy {
    /// The ticks the jump skips are dropped.
    Cancel,
    /// One tick of every period fires at the reset.
    Once,
}

/// A scheduler policy a periodic stream's declaration chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Gap(GapPolicy),
    Reset(ResetPolicy),
}

/// A parsed specification. Expressions live in one arena; declarations keep
/// source order.
#[derive(Clone, Debug, Default)]
pub struct Ast {
    pub exprs: Vec<ExprData>,
    pub decls: Vec<Decl>,
    /// The source span of every declaration, indexed as `decls`: from its
    /// first token to its last (a definition's name to its expression's
    /// end). Source edits (`lang::edit`) replace declarations by it.
    pub decl_spans: Vec<Span>,
    /// Indexed as `decls`: whether the parser wrote the declaration for
    /// another one (a trigger's alerting streams and its message's
    /// expressions), so that it is not in the source text on its own: it
    /// comes and goes with the trigger that wrote it (`lang::edit`).
    pub generated: Vec<bool>,
    /// Every name token in source order (name, span): used for the output
    /// order, which is the order of first mention in the spec text.
    pub mentions: Vec<(String, Span)>,
    /// The terms an STL formula compares (`x` and `3` in `stl(G[0, 2s](x >
    /// 3))`): the checker requires each to be a number.
    pub stl_terms: Vec<ExprId>,
}

impl Ast {
    pub fn expr(&self, id: ExprId) -> &ExprData {
        &self.exprs[id.index()]
    }

    pub fn push(&mut self, kind: ExprKind, span: Span) -> ExprId {
        let id = ExprId(self.exprs.len() as u32);
        self.exprs.push(ExprData { kind, span });
        id
    }

    /// Every stream name under `e` (itself included), with the expression
    /// that names it, in evaluation order.
    pub fn names(&self, e: ExprId) -> Vec<(ExprId, &str)> {
        let mut out = Vec::new();
        self.collect_names(e, &mut out);
        out
    }

    fn collect_names<'a>(&'a self, e: ExprId, out: &mut Vec<(ExprId, &'a str)>) {
        if let ExprKind::Name(n) = &self.expr(e).kind {
            out.push((e, n));
        }
        for c in self.children(e) {
            self.collect_names(c, out);
        }
    }

    /// The direct sub-expressions of `id`, in evaluation order.
    /// Whether `e` is `root` or inside it.
    pub fn contains(&self, root: ExprId, e: ExprId) -> bool {
        let mut stack = vec![root];
        while let Some(x) = stack.pop() {
            if x == e {
                return true;
            }
            stack.extend(self.children(x));
        }
        false
    }

    /// How many parameters of lambdas around `e` are in scope there (the
    /// number of the first parameter `e`'s own lambdas bind), within
    /// `root`; `None` if `e` is not inside `root`.
    pub fn params_around(&self, root: ExprId, e: ExprId) -> Option<u32> {
        let mut stack = vec![(root, 0u32)];
        while let Some((x, depth)) = stack.pop() {
            if x == e {
                return Some(depth);
            }
            let inner = match &self.expr(x).kind {
                ExprKind::Lambda(params, _) => depth + params.len() as u32,
                _ => depth,
            };
            stack.extend(self.children(x).into_iter().map(|c| (c, inner)));
        }
        None
    }

    /// Whether `e` reads a parameter numbered below `bound` (one of the
    /// lambdas around `e`, when `bound` of their parameters enclose it:
    /// parameters are numbered outermost first, so those of lambdas inside
    /// `e` are numbered `bound` and up).
    pub fn reads_params_below(&self, e: ExprId, bound: u32) -> bool {
        let mut stack = vec![e];
        while let Some(x) = stack.pop() {
            match &self.expr(x).kind {
                ExprKind::Param(k) if *k < bound => return true,
                _ => stack.extend(self.children(x)),
            }
        }
        false
    }

    pub fn children(&self, id: ExprId) -> Vec<ExprId> {
        match &self.expr(id).kind {
            ExprKind::Unary(_, a) | ExprKind::Offset(a, _) | ExprKind::Window(a, _) => vec![*a],
            ExprKind::Binary(_, a, b) | ExprKind::Since(a, b, _) => vec![*a, *b],
            ExprKind::If(c, a, b) => vec![*c, *a, *b],
            ExprKind::Call(_, args)
            | ExprKind::List(args)
            | ExprKind::Tuple(args)
            | ExprKind::Method(_, args)
            | ExprKind::Partial(args) => args.clone(),
            ExprKind::Map(entries) => entries.iter().map(|(_, e)| *e).collect(),
            ExprKind::Field(a, _) | ExprKind::Lambda(_, a) | ExprKind::Fix(a) => vec![*a],
            ExprKind::Dynamic(_, a) => vec![*a],
            ExprKind::Apply(f, args) => std::iter::once(*f).chain(args.iter().copied()).collect(),
            _ => Vec::new(),
        }
    }
}

/// An expression as the Trustworthiness Checker displays a function's
/// body: binary operators parenthesised, parameters by name (`names` holds
/// the parameters around it, outermost first).
pub fn display(ast: &Ast, e: ExprId, names: &mut Vec<String>) -> String {
    let join = |es: &[ExprId], names: &mut Vec<String>| {
        es.iter()
            .map(|&x| display(ast, x, names))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match &ast.expr(e).kind {
        ExprKind::Int(i) => i.to_string(),
        ExprKind::Float(x) => format!("{x:?}"),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Str(s) => format!("{:?}", &**s),
        ExprKind::Unit => "()".to_string(),
        ExprKind::Name(n) => n.clone(),
        ExprKind::Param(k) => names.get(*k as usize).cloned().unwrap_or_default(),
        ExprKind::Unary(op, a) => {
            let sym = match op {
                UnOp::Neg => "-",
                UnOp::Not => "!",
            };
            format!("{sym}{}", display(ast, *a, names))
        }
        ExprKind::Binary(op, a, b) => format!(
            "({} {} {})",
            display(ast, *a, names),
            op.symbol(),
            display(ast, *b, names)
        ),
        ExprKind::If(c, a, b) => format!(
            "if {} then {} else {}",
            display(ast, *c, names),
            display(ast, *a, names),
            display(ast, *b, names)
        ),
        ExprKind::Offset(a, n) => format!("{}[{n}]", display(ast, *a, names)),
        ExprKind::Call(f, args) => format!("{}({})", f.name(), join(args, names)),
        ExprKind::Window(a, w) => match w.size {
            WindowSize::Interval { lo_ns, hi_ns, .. } => {
                let op = match w.agg {
                    Aggregate::All | Aggregate::Min => "G",
                    _ => "F",
                };
                format!(
                    "{op}[{}, {}]({})",
                    duration_or_zero(lo_ns),
                    duration_or_zero(hi_ns),
                    display(ast, *a, names)
                )
            }
            _ => format!("window({}, {w})", display(ast, *a, names)),
        },
        ExprKind::Since(a, b, w) => match w.size {
            WindowSize::Since { lo_ns, hi_ns, .. } => format!(
                "({}) S[{}, {}] ({})",
                display(ast, *a, names),
                duration_or_zero(lo_ns),
                duration_or_zero(hi_ns),
                display(ast, *b, names)
            ),
            _ => unreachable!("a since's window is a since's interval"),
        },
        ExprKind::List(items) => format!("[{}]", join(items, names)),
        ExprKind::Tuple(items) => format!("Tuple({})", join(items, names)),
        ExprKind::Map(entries) => {
            let parts: Vec<String> = entries
                .iter()
                .map(|(k, x)| format!("{:?}: {}", &**k, display(ast, *x, names)))
                .collect();
            format!("Map({})", parts.join(", "))
        }
        ExprKind::Field(a, Field::Name(n)) => format!("{}.{n}", display(ast, *a, names)),
        ExprKind::Field(a, Field::Index(i)) => format!("{}.{i}", display(ast, *a, names)),
        ExprKind::Method(m, args) => format!("{}({})", m.name(), join(args, names)),
        ExprKind::Lambda(params, body) => {
            let outer = names.len();
            names.extend(params.iter().map(|p| p.name.clone()));
            let body = display(ast, *body, names);
            names.truncate(outer);
            let ps: Vec<String> = params
                .iter()
                .map(|p| format!("{}: {}", p.name, p.ty))
                .collect();
            format!("\\{} -> {body}", ps.join(", "))
        }
        ExprKind::Apply(f, args) => format!("{}({})", display(ast, *f, names), join(args, names)),
        ExprKind::Partial(args) => format!("partial({})", join(args, names)),
        ExprKind::Fix(f) => format!("fix({})", display(ast, *f, names)),
        ExprKind::Dynamic(form, s) => {
            let name = if form.defer { "defer" } else { "dynamic" };
            format!("{name}({})", display(ast, *s, names))
        }
    }
}
