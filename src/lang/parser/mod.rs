//! The DSRV parser: tokens to the arena AST, with error recovery at declaration boundaries.
//!
//! Grammar, lowest to highest precedence (docs/language.md, "Expressions"):
//!
//! ```text
//! spec   := decl*
//! decl   := ("in" | "out" | "aux" | "var") NAME (":" TYPE)?  |  NAME "=" expr
//!         |  "trigger" (NAME ":")? expr STRING (clause ("," clause)*)?   (triggers.rs)
//! clause := "rising" | "resolve" | "every" DURATION | "severity" NAME | "label" NAME "=" STRING
//! expr   := "if" expr "then" expr "else" expr  |  concat
//! concat := implies ("++" implies)*            (left)
//! implies:= or ("=>" or)*                      (left)
//! or     := and ("||" and)*
//! and    := eq ("&&" eq)*
//! eq     := cmp (("==" | "!=") cmp)*
//! cmp    := add (("<" | "<=" | ">" | ">=") add)*
//! add    := mul (("+" | "-") mul)*
//! mul    := unary (("*" | "/" | "%") unary)*
//! unary  := ("-" | "!") unary | postfix
//! postfix:= atom ("[" INT "]")*                (atom: literal, name or parenthesised)
//! atom   := INT | FLOAT | "true" | "false" | STRING | "()" | NAME | "(" expr ")" | NAME "(" args ")"
//! ```

mod stl;
mod triggers;


use super::ast::*;
use super::diag::{Diagnostic, Span, short};
use super::lexer::{Tok, Token, lex};
use super::types::Type;
use super::{
    MAX_HISTORY, MAX_NESTING, MAX_OFFSET, MAX_WINDOW_COUNT, MAX_WINDOW_PANES,
    MAX_PERCENTILE_PANES, MAX_WINDOW_PANES_TOTAL, MAX_WINDOW_VALUES, PERCENTILE_PANE_WEIGHT,
};

/// Parses a whole specification. Returns the AST (possibly partial) and every
/// lexical and syntax error found.
///
/// No expression deeper than `MAX_NESTING` levels is built (see
/// `Parser::nested` and `Parser::push`), and the parser's own recursion
/// stops at that bound, so every later pass may recurse over expressions.
pub fn parse(src: &str) -> (Ast, Vec<Diagnostic>) {
    parse_with(src, false)
}

/// As `parse`, also accepting a declaration that carries its definition,
/// `out w: Int = z * 2` (`vigil repl`'s `:def`): it yields the declaration
/// and a definition of the same name, as if written on two lines.
pub fn parse_definitions(src: &str) -> (Ast, Vec<Diagnostic>) {
    parse_with(src, true)
}

fn parse_with(src: &str, combined: bool) -> (Ast, Vec<Diagnostic>) {
    let (tokens, mut errors) = lex(src);
    let mut p = Parser {
        toks: tokens,
        message_streams: Default::default(),
        pos: 0,
        ast: Ast::default(),
        errors: Vec::new(),
        heights: Vec::new(),
        nesting: 0,
        history: 0,
        window_values: 0,
        window_panes: 0,
        triggers: 0,
        params: Vec::new(),
        stl: None,
        src: src.to_string(),
        combined,
    };
    p.ast.mentions = p
        .toks
        .iter()
        .filter_map(|t| match &t.tok {
            Tok::Ident(n) => Some((n.clone(), t.span)),
            _ => None,
        })
        .collect();
    p.spec();
    errors.append(&mut p.errors);
    errors.sort_by_key(|d| d.span.start);
    (p.ast, errors)
}

struct Parser {
    /// Whether a declaration may carry its definition (`parse_definitions`).
    combined: bool,
    /// The source text (`t.1.0` lexes its indices as a float, read back).
    src: String,
    /// The values all count windows so far keep, and the panes of all time
    /// windows: a window's state is allocated with the run, so the spec's
    /// total is bounded (`lang::MAX_WINDOW_VALUES`, `MAX_WINDOW_PANES_TOTAL`).
    window_values: u64,
    window_panes: u64,
    toks: Vec<Token>,
    /// The message placeholders' expressions declared as aux streams so far
    /// (each once, by its text).
    message_streams: std::collections::HashSet<String>,
    pos: usize,
    ast: Ast,
    errors: Vec<Diagnostic>,
    /// The nesting height of every expression built (see `push`): 1 for an
    /// atom, one more than its deepest operand for an operator, one more
    /// than the inner expression for each pair of parentheses around it.
    heights: Vec<u32>,
    /// How many nested expressions the parser is inside (its recursion).
    nesting: usize,
    /// The sum of the offsets parsed so far: the history entries the plan
    /// will keep (see `MAX_HISTORY`).
    history: u64,
    /// Unnamed triggers so far (the N of `trigger_N`).
    triggers: usize,
    /// The parameters of the lambdas being parsed, outermost first: a name
    /// among them is a `Param`, not a stream.
    params: Vec<String>,
    /// The STL formula being parsed, if any (`stl(…)`, `stl.rs`).
    stl: Option<stl::StlMode>,
}

/// A parse result. The error is boxed so that every `PResult` the
/// recursive functions hold is two words: their stack frames stay small
/// (see `Parser::sub_expr`).
type PResult<T> = Result<T, Box<Diagnostic>>;

/// The error for an expression nested deeper than `MAX_NESTING`.
fn too_deep(span: Span) -> Box<Diagnostic> {
    Box::new(
        Diagnostic::new(
            span,
            format!("expression nested too deeply: more than {MAX_NESTING} levels"),
        )
        .with_hint(format!(
            "at most {MAX_NESTING} levels are allowed (each operator, `if`, call, offset and pair of \
             parentheses is one); split the expression into auxiliary streams, e.g. `aux part = …`"
        )),
    )
}

/// The binary operators by precedence level, loosest first; all are
/// left-associative.
const LEVELS: &[&[(Tok, BinOp)]] = &[
    &[(Tok::Concat, BinOp::Concat)],
    &[(Tok::Implies, BinOp::Implies)],
    &[(Tok::OrOr, BinOp::Or)],
    &[(Tok::AndAnd, BinOp::And)],
    &[(Tok::EqEq, BinOp::Eq), (Tok::NotEq, BinOp::Ne)],
    &[
        (Tok::Lt, BinOp::Lt),
        (Tok::Le, BinOp::Le),
        (Tok::Gt, BinOp::Gt),
        (Tok::Ge, BinOp::Ge),
    ],
    &[(Tok::Plus, BinOp::Add), (Tok::Minus, BinOp::Sub)],
    &[
        (Tok::Star, BinOp::Mul),
        (Tok::Slash, BinOp::Div),
        (Tok::Percent, BinOp::Rem),
    ],
];

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)].tok
    }

    fn span(&self) -> Span {
        self.toks[self.pos].span
    }

    /// Moves past the current token (never past `Eof`) and returns its span.
    fn advance(&mut self) -> Span {
        let span = self.span();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        span
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        self.advance();
        t
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == tok {
            self.advance();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: Tok, what: &str) -> PResult<Span> {
        if self.peek() == &tok {
            Ok(self.advance())
        } else {
            Err(self.expected(what))
        }
    }

    fn expected(&self, what: &str) -> Box<Diagnostic> {
        Box::new(Diagnostic::new(
            self.span(),
            format!("expected {what}, found {}", self.peek().describe()),
        ))
    }

    /// Adds an expression to the arena, unless it would nest deeper than
    /// `MAX_NESTING` (a long operator chain `x + x + …`, a prefix chain
    /// `- - x` or an offset chain `x[1][1]…` nests without the parser
    /// recursing): then the error is located at `at`, the operator that
    /// went too deep.
    fn push(&mut self, kind: ExprKind, span: Span, at: Span) -> PResult<ExprId> {
        let height = 1 + match &kind {
            ExprKind::Unary(_, a) | ExprKind::Offset(a, _) | ExprKind::Window(a, _) => {
                self.height(*a)
            }
            ExprKind::Binary(_, a, b) | ExprKind::Since(a, b, _) => {
                self.height(*a).max(self.height(*b))
            }
            ExprKind::If(c, a, b) => self.height(*c).max(self.height(*a)).max(self.height(*b)),
            ExprKind::Call(_, args) => args.iter().map(|&a| self.height(a)).max().unwrap_or(0),
            _ => 0,
        };
        if height as usize > MAX_NESTING {
            return Err(too_deep(at));
        }
        self.heights.push(height);
        Ok(self.ast.push(kind, span))
    }

    fn height(&self, e: ExprId) -> u32 {
        self.heights[e.index()]
    }

    /// Marks `e` as parenthesised: one level deeper.
    fn parenthesise(&mut self, e: ExprId, open: Span, close: Span) -> PResult<()> {
        if self.heights[e.index()] as usize >= MAX_NESTING {
            return Err(too_deep(open));
        }
        self.heights[e.index()] += 1;
        // Keep the parenthesised span so carets cover the parentheses.
        self.ast.exprs[e.index()].span = open.to(close);
        Ok(())
    }

    fn at_decl_start(&self) -> bool {
        match self.peek() {
            Tok::KwIn | Tok::KwOut | Tok::KwAux | Tok::KwTrigger | Tok::Eof => true,
            Tok::Ident(_) => self.peek_at(1) == &Tok::Assign,
            _ => false,
        }
    }

    fn spec(&mut self) {
        while self.peek() != &Tok::Eof {
            let start = self.pos;
            self.nesting = 0;
            if let Err(d) = self.decl() {
                self.errors.push(*d);
                // Skip to the next declaration so later errors are found too.
                if self.pos == start {
                    self.advance();
                }
                while !self.at_decl_start() {
                    self.advance();
                }
            }
        }
    }

    /// Adds a declaration that began at `start` and ended with the last
    /// token consumed.
    fn push_decl(&mut self, decl: Decl, start: Span) {
        let end = self.toks[self.pos.saturating_sub(1)].span;
        self.ast.decls.push(decl);
        self.ast.decl_spans.push(start.to(end));
        self.ast.generated.push(false);
    }

    fn decl(&mut self) -> PResult<()> {
        let start = self.span();
        if self.peek() == &Tok::KwTrigger {
            let keyword = self.advance();
            return self.trigger(keyword);
        }
        let kind = match self.peek() {
            Tok::KwIn => Some(DeclKind::Input),
            Tok::KwOut => Some(DeclKind::Output),
            Tok::KwAux => Some(DeclKind::Aux),
            _ => None,
        };
        if let Some(kind) = kind {
            self.advance();
            let (name, name_span) = self.name("a stream name")?;
            let ty = if self.eat(&Tok::Colon) {
                let at = self.span();
                let ty = self.ty(0)?;
                Some((ty, at.to(self.toks[self.pos.saturating_sub(1)].span)))
            } else {
                None
            };
            let period = match self.peek() {
                Tok::At => {
                    let at = self.advance();
                    Some(self.period(at)?)
                }
                _ => None,
            };
            let mut policies = Vec::new();
            while period.is_some() && self.eat(&Tok::Comma) {
                policies.push(self.policy()?);
            }
            let combined = self.combined && self.peek() == &Tok::Assign;
            self.push_decl(
                Decl::Stream {
                    kind,
                    name: name.clone(),
                    name_span,
                    ty,
                    period,
                    policies,
                },
                start,
            );
            if combined {
                return self.definition(name, name_span);
            }
            return Ok(());
        }
        let (name, name_span) = match self.peek() {
            Tok::Ident(_) => self.name("a definition")?,
            other => {
                return Err(Box::new(
                    Diagnostic::new(
                        self.span(),
                        format!(
                            "expected a declaration or a definition, found {}",
                            other.describe()
                        ),
                    )
                    .with_hint(
                        "declarations look like `in x: Int` or `out y`; definitions like `y = x + 1`",
                    ),
                ));
            }
        };
        self.definition(name, name_span)
    }

    /// The period after `@` (at `at`): a positive number and a unit,
    /// `1s`, `500ms`, `2.5min`; in nanoseconds.
    fn period(&mut self, at: Span) -> PResult<(i64, Span)> {
        let hint = "a period reads `@ 1s`, `@ 500ms`, `@ 2.5min` (units: ns, us, ms, s, min, h)";
        self.duration(at, "period", hint)
    }

    /// A duration (a positive number and a unit) starting at the current
    /// token, for a `what` spanning from `at`; in nanoseconds.
    fn duration(&mut self, at: Span, what: &str, hint: &str) -> PResult<(i64, Span)> {
        // "an interval bound", "a period".
        let a = match what.starts_with(['a', 'e', 'i', 'o', 'u']) {
            true => "an",
            false => "a",
        };
        let t = self.bump();
        let value = match t.tok {
            Tok::Int(i) => i as f64,
            Tok::Float(f) => f,
            other => {
                return Err(Box::new(
                    Diagnostic::new(
                        t.span,
                        format!("expected {a} {what}, found {}", other.describe()),
                    )
                    .with_hint(hint),
                ));
            }
        };
        let u = self.bump();
        let span = at.to(u.span);
        let nanos = match &u.tok {
            Tok::Ident(unit) => match unit.as_str() {
                "ns" => 1.0,
                "us" => 1e3,
                "ms" => 1e6,
                "s" => 1e9,
                "min" => 60e9,
                "h" => 3600e9,
                _ => {
                    return Err(Box::new(
                        Diagnostic::new(u.span, format!("unknown unit `{}`", short(unit)))
                            .with_hint(hint),
                    ));
                }
            },
            other => {
                return Err(Box::new(
                    Diagnostic::new(
                        u.span,
                        format!("expected a unit, found {}", other.describe()),
                    )
                    .with_hint(hint),
                ));
            }
        };
        let ns = (value * nanos).round();
        if !(1.0..=9.2e18).contains(&ns) {
            return Err(Box::new(
                Diagnostic::new(
                    span,
                    format!("{a} {what} must be at least 1ns and at most about 292 years"),
                )
                .with_hint(hint),
            ));
        }
        Ok((ns as i64, span))
    }

    /// A scheduler policy after a period: `on_gap catch_up|skip` or
    /// `on_reset cancel|once`.
    fn policy(&mut self) -> PResult<(Policy, Span)> {
        let hint = "after a period: `, on_gap catch_up`, `, on_gap skip`, `, on_reset cancel` or `, on_reset once`";
        let (key, key_span) = self.name("a scheduler policy (on_gap or on_reset)")?;
        let (value, value_span) = self.name("the policy's choice")?;
        let span = key_span.to(value_span);
        let policy = match (key.as_str(), value.as_str()) {
            ("on_gap", "catch_up") => Policy::Gap(GapPolicy::CatchUp),
            ("on_gap", "skip") => Policy::Gap(GapPolicy::Skip),
            ("on_reset", "cancel") => Policy::Reset(ResetPolicy::Cancel),
            ("on_reset", "once") => Policy::Reset(ResetPolicy::Once),
            _ => {
                return Err(Box::new(
                    Diagnostic::new(
                        span,
                        format!(
                            "unknown scheduler policy `{} {}`",
                            short(&key),
                            short(&value)
                        ),
                    )
                    .with_hint(hint),
                ));
            }
        };
        Ok((policy, span))
    }

    /// `= expr` after the name of the stream it defines.
    fn definition(&mut self, name: String, name_span: Span) -> PResult<()> {
        self.expect(Tok::Assign, "`=` after the stream name")?;
        let expr = self.sub_expr()?;
        if !self.at_decl_start() {
            return Err(Box::new(
                Diagnostic::new(
                    self.span(),
                    format!(
                        "unexpected {} after the definition of `{}`",
                        self.peek().describe(),
                        short(&name)
                    ),
                )
                .with_hint("an `if` inside an operator must be parenthesised"),
            ));
        }
        self.push_decl(
            Decl::Def {
                name,
                name_span,
                expr,
            },
            name_span,
        );
        Ok(())
    }

    fn name(&mut self, what: &str) -> PResult<(String, Span)> {
        match self.peek() {
            Tok::Ident(n) => {
                let n = n.clone();
                Ok((n, self.advance()))
            }
            _ => Err(self.expected(what)),
        }
    }

    // The expression parser. `sub_expr`, `expr`, `if_expr`, `binary`,
    // `unary`, `postfix`, `atom` and `call` are the recursive path: one
    // nesting level of parentheses costs a frame of each of most of them,
    // so they keep few locals and leave messages, leaves, offsets and the
    // building of nodes to helpers, whose frames are gone before the
    // recursion goes deeper. That is what lets every shape reach
    // `MAX_NESTING` on a small stack.

    /// An expression one nesting level deeper than the current one: the only
    /// way the parser recurses, so its recursion is bounded by `MAX_NESTING`.
    fn sub_expr(&mut self) -> PResult<ExprId> {
        if self.nesting >= MAX_NESTING {
            return Err(too_deep(self.span()));
        }
        self.nesting += 1;
        let e = self.expr();
        self.nesting -= 1;
        e
    }

    fn expr(&mut self) -> PResult<ExprId> {
        match self.peek() {
            Tok::KwIf => self.if_expr(),
            Tok::Backslash => self.lambda(),
            _ => self.binary(0),
        }
    }

    /// `\x: T, y: U -> body`; the body extends as far right as it can (as
    /// an `if`'s else branch does).
    #[inline(never)]
    fn lambda(&mut self) -> PResult<ExprId> {
        let start = self.advance();
        let mut params = Vec::new();
        loop {
            let (name, span) = self.name("a parameter name")?;
            if params.iter().any(|p: &Param| p.name == name) {
                return Err(Box::new(Diagnostic::new(
                    span,
                    format!("parameter `{}` is declared twice", short(&name)),
                )));
            }
            self.expect(Tok::Colon, "`:` and the parameter's type")?;
            let ty = self.ty(0)?;
            params.push(Param { name, ty });
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::Arrow, "`,` or `->`")?;
        let outer = self.params.len();
        self.params.extend(params.iter().map(|p| p.name.clone()));
        let body = self.sub_expr();
        self.params.truncate(outer);
        let body = body?;
        let span = start.to(self.ast.expr(body).span);
        self.push(ExprKind::Lambda(params, body), span, start)
    }

    /// A type: a name (`Int`), `List<T>`, `Map<T>`, `Struct<a: T, …>`,
    /// a tuple `(T, U)` or `(T,)`, a function `(T -> U)`. Element types are
    /// checked for syntax only: vigil does not track them.
    fn ty(&mut self, depth: usize) -> PResult<Type> {
        const HINT: &str = "types are Int, Float, Bool, Str, Unit, Any, List<T>, Map<T>, Struct<a: T, …>, tuples (T, U) and functions (T -> U)";
        if depth > 32 {
            return Err(Box::new(Diagnostic::new(
                self.span(),
                "a type nested too deeply",
            )));
        }
        let t = self.bump();
        match t.tok {
            Tok::Ident(n) => {
                let ty = Type::from_name(&n).ok_or_else(|| {
                    Box::new(
                        Diagnostic::new(t.span, format!("unknown type `{}`", short(&n)))
                            .with_hint(HINT),
                    )
                })?;
                if matches!(ty, Type::List | Type::Map) && self.eat(&Tok::Lt) {
                    if n == "Struct" {
                        loop {
                            if self.eat(&Tok::Dot) {
                                self.expect(Tok::Dot, "`...`")?;
                                self.expect(Tok::Dot, "`...`")?;
                            } else {
                                self.name("a field name")?;
                                self.expect(Tok::Colon, "`:` and the field's type")?;
                                self.ty(depth + 1)?;
                            }
                            if !self.eat(&Tok::Comma) {
                                break;
                            }
                        }
                    } else {
                        self.ty(depth + 1)?;
                    }
                    self.expect(Tok::Gt, "`>`")?;
                }
                Ok(ty)
            }
            Tok::LParen => {
                let first = self.ty(depth + 1)?;
                let ty = if self.eat(&Tok::Arrow) {
                    self.ty(depth + 1)?;
                    Type::Fn
                } else if self.eat(&Tok::Comma) {
                    while self.peek() != &Tok::RParen {
                        self.ty(depth + 1)?;
                        if !self.eat(&Tok::Comma) {
                            break;
                        }
                    }
                    Type::Tuple
                } else {
                    first
                };
                self.expect(Tok::RParen, "`)`")?;
                Ok(ty)
            }
            other => Err(Box::new(
                Diagnostic::new(
                    t.span,
                    format!("expected a type, found {}", other.describe()),
                )
                .with_hint(HINT),
            )),
        }
    }

    fn if_expr(&mut self) -> PResult<ExprId> {
        let start = self.advance();
        let c = self.sub_expr()?;
        self.expect(Tok::KwThen, "`then`")?;
        let a = self.sub_expr()?;
        self.expect(Tok::KwElse, "`else`")?;
        let b = self.sub_expr()?;
        let span = start.to(self.ast.expr(b).span);
        self.push(ExprKind::If(c, a, b), span, start)
    }

    /// Precedence climbing: an operand followed by operators of `min_level`
    /// or tighter. A chain of operators of one level is a loop, and each
    /// recursion is for a strictly tighter level, so one nesting level
    /// recurses at most once per precedence level.
    fn binary(&mut self, min_level: usize) -> PResult<ExprId> {
        let mut lhs = self.unary()?;
        while let Some((level, op)) = self.binary_op(min_level) {
            let at = self.advance();
            let rhs = self.binary(level + 1)?;
            lhs = self.push_binary(op, lhs, rhs, at)?;
        }
        Ok(lhs)
    }

    /// The current token as a binary operator of `min_level` or tighter.
    fn binary_op(&self, min_level: usize) -> Option<(usize, BinOp)> {
        let tok = self.peek();
        (min_level..LEVELS.len()).find_map(|level| {
            LEVELS[level]
                .iter()
                .find(|(t, _)| t == tok)
                .map(|&(_, op)| (level, op))
        })
    }

    fn push_binary(&mut self, op: BinOp, lhs: ExprId, rhs: ExprId, at: Span) -> PResult<ExprId> {
        let span = self.ast.expr(lhs).span.to(self.ast.expr(rhs).span);
        self.push(ExprKind::Binary(op, lhs, rhs), span, at)
    }

    /// Prefix operators, then a postfix expression. A prefix chain is a loop,
    /// not a recursion.
    fn unary(&mut self) -> PResult<ExprId> {
        let mut ops: Vec<(UnOp, Span)> = Vec::new();
        let mut e = loop {
            match self.prefix_op()? {
                Some(op) => ops.push((op, self.advance())),
                None => break None,
            }
            // Report a chain too deep where it becomes so (the operand
            // after the operator at the deepest level), as for parentheses.
            if self.nesting + ops.len() > MAX_NESTING {
                return Err(too_deep(self.span()));
            }
            // `-9223372036854775808` is the one literal that only exists
            // negated.
            if let Some((UnOp::Neg, start)) = ops.last().copied()
                && let Some(e) = self.min_int(start)?
            {
                ops.pop();
                break Some(e);
            }
        };
        if e.is_none() {
            e = Some(self.postfix()?);
        }
        let mut e = e.expect("set above");
        while let Some((op, start)) = ops.pop() {
            e = self.push_unary(op, start, e)?;
        }
        Ok(e)
    }

    /// The current token as a prefix operator; an `if` here is an error.
    fn prefix_op(&self) -> PResult<Option<UnOp>> {
        match self.peek() {
            Tok::Minus => Ok(Some(UnOp::Neg)),
            Tok::Bang => Ok(Some(UnOp::Not)),
            Tok::KwIf => Err(Box::new(
                Diagnostic::new(
                    self.span(),
                    "`if` must be parenthesised when it is an operand",
                )
                .with_hint("write `(if c then a else b)`"),
            )),
            Tok::Backslash => Err(Box::new(
                Diagnostic::new(
                    self.span(),
                    "a lambda must be parenthesised when it is an operand",
                )
                .with_hint("write `(\\x: Int -> x + 1)`"),
            )),
            _ => Ok(None),
        }
    }

    /// After a `-` at `start`: the literal `-9223372036854775808`, if that
    /// is what follows (not offset: `-9223372036854775808[1]` would offset
    /// a literal that does not fit).
    fn min_int(&mut self, start: Span) -> PResult<Option<ExprId>> {
        if let Tok::BigInt(text) = self.peek()
            && text == "9223372036854775808"
            && self.peek_at(1) != &Tok::LBracket
        {
            let span = start.to(self.advance());
            return self.push(ExprKind::Int(i64::MIN), span, span).map(Some);
        }
        Ok(None)
    }

    fn push_unary(&mut self, op: UnOp, start: Span, operand: ExprId) -> PResult<ExprId> {
        let span = start.to(self.ast.expr(operand).span);
        self.push(ExprKind::Unary(op, operand), span, start)
    }

    /// An atom, then its offsets `[n]`, applications `(a, …)` and fields
    /// `.name`/`.0`, left to right (each built with `push`, so a long chain
    /// is bounded like any nesting).
    fn postfix(&mut self) -> PResult<ExprId> {
        let mut base = self.atom()?;
        loop {
            let e = self.offsets(base)?;
            match self.peek() {
                Tok::LParen | Tok::Dot => base = (self.suffix(e)?, false),
                _ => return Ok(e),
            }
        }
    }

    /// An application `(a, …)` or a field `.name`/`.0` after `e` (a helper
    /// of `postfix`, whose frame stays small on the recursive path).
    #[inline(never)]
    fn suffix(&mut self, e: ExprId) -> PResult<ExprId> {
        if self.peek() == &Tok::LParen {
            let open = self.advance();
            let args = self.args(Tok::RParen)?;
            let close = self.expect(Tok::RParen, "`,` or `)`")?;
            let span = self.ast.expr(e).span.to(close);
            return self.push(ExprKind::Apply(e, args), span, open);
        }
        let dot = self.advance();
        let t = self.bump();
        let text = self.src.get(t.span.start as usize..t.span.end as usize);
        // `t.1.0`: two indices, which the lexer read as `1.0`.
        if let (Tok::Float(_), Some((a, b))) = (&t.tok, text.and_then(|x| x.split_once('.')))
            && let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>())
        {
            let span = self.ast.expr(e).span.to(t.span);
            let first = self.push(ExprKind::Field(e, Field::Index(a)), span, dot)?;
            return self.push(ExprKind::Field(first, Field::Index(b)), span, dot);
        }
        let field = match t.tok {
            Tok::Ident(n) => Field::Name(n.into()),
            Tok::Int(i) if i >= 0 && i <= i64::from(u32::MAX) => Field::Index(i as u32),
            other => {
                return Err(Box::new(Diagnostic::new(
                    t.span,
                    format!(
                        "expected a field name or an index after `.`, found {}",
                        other.describe()
                    ),
                )));
            }
        };
        let span = self.ast.expr(e).span.to(t.span);
        self.push(ExprKind::Field(e, field), span, dot)
    }

    /// Comma-separated expressions up to (not including) `close`.
    #[inline(never)]
    fn args(&mut self, close: Tok) -> PResult<Vec<ExprId>> {
        let mut args = Vec::new();
        if self.peek() != &close {
            loop {
                args.push(self.sub_expr()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        Ok(args)
    }

    /// Offsets `[n]` after an atom (a loop: their nesting is checked as
    /// they are built).
    fn offsets(&mut self, (mut base, offsettable): (ExprId, bool)) -> PResult<ExprId> {
        while self.peek() == &Tok::LBracket {
            let open = self.advance();
            if !offsettable {
                return Err(Box::new(
                    Diagnostic::new(
                        self.ast.expr(base).span,
                        "an offset needs a name, a literal or a parenthesised expression before `[`",
                    )
                    .with_hint("parenthesise the expression: `(default(x, 0))[1]`"),
                ));
            }
            let t = self.bump();
            let n = match t.tok {
                Tok::Int(n) if n >= 0 => self.offset(n.unsigned_abs(), &t),
                Tok::BigInt(_) => self.offset(u64::MAX, &t),
                Tok::Minus => {
                    return Err(Box::new(
                        Diagnostic::new(
                            t.span,
                            "negative offsets (future values) are not supported",
                        )
                        .with_hint(
                            "offsets look back in time: `x[1]` is the previous value of `x`",
                        ),
                    ));
                }
                other => {
                    return Err(Box::new(Diagnostic::new(
                        t.span,
                        format!(
                            "expected an offset (an integer literal >= 0), found {}",
                            other.describe()
                        ),
                    )));
                }
            };
            let close = self.expect(Tok::RBracket, "`]`")?;
            let span = self.ast.expr(base).span.to(close);
            base = self.push(ExprKind::Offset(base, n), span, open)?;
        }
        Ok(base)
    }

    /// Checks an offset literal against `MAX_OFFSET` and the whole spec's
    /// offsets against `MAX_HISTORY`. A violation is reported and parsing
    /// goes on (with the offset clamped), so later errors are found too.
    fn offset(&mut self, n: u64, t: &Token) -> u32 {
        if n > u64::from(MAX_OFFSET) {
            let text = match &t.tok {
                Tok::BigInt(s) => short(s),
                _ => n.to_string(),
            };
            self.errors.push(
                Diagnostic::new(
                    t.span,
                    format!("offset {text} is larger than the maximum offset, {MAX_OFFSET}"),
                )
                .with_hint(format!(
                    "an offset keeps the last n values of its operand, and vigil keeps at most \
                     {MAX_OFFSET} per offset"
                )),
            );
            return MAX_OFFSET;
        }
        let before = self.history;
        self.history += n;
        if before <= MAX_HISTORY && self.history > MAX_HISTORY {
            self.errors.push(
                Diagnostic::new(
                    t.span,
                    format!(
                        "the offsets of this specification add up to more than {MAX_HISTORY} \
                         steps of history"
                    ),
                )
                .with_hint(
                    "every offset `e[n]` keeps the last n values of `e`; the sum of all offsets is bounded",
                ),
            );
        }
        n as u32
    }

    /// An atom; the flag says whether an offset may follow it.
    fn atom(&mut self) -> PResult<(ExprId, bool)> {
        match self.peek() {
            Tok::LParen if self.peek_at(1) != &Tok::RParen => {
                let open = self.advance();
                let inner = self.sub_expr()?;
                let close = self.expect(Tok::RParen, "`)`")?;
                self.parenthesise(inner, open, close)?;
                Ok((inner, true))
            }
            Tok::Ident(name) if name == "window" && self.peek_at(1) == &Tok::LParen => {
                Ok((self.window()?, false))
            }
            Tok::Ident(name)
                if matches!(name.as_str(), "stl" | "stl_rob")
                    && self.peek_at(1) == &Tok::LParen
                    && !self.is_param(name) =>
            {
                Ok((self.stl()?, false))
            }
            Tok::Ident(name)
                if matches!(name.as_str(), "List" | "Map")
                    && self.peek_at(1) == &Tok::Dot
                    && self.peek_at(3) == &Tok::LParen =>
            {
                Ok((self.method()?, false))
            }
            Tok::Ident(name) if self.peek_at(1) == &Tok::LParen && !self.is_param(name) => {
                match name.as_str() {
                    "List" | "Tuple" | "Map" | "Struct" | "partial" | "fix" | "dynamic"
                    | "eval" | "defer" => Ok((self.form()?, false)),
                    n if Builtin::from_name(n).is_some() => Ok((self.call()?, false)),
                    // A stream holding a function, applied by `postfix`.
                    _ => Ok((self.leaf()?, false)),
                }
            }
            Tok::LBracket | Tok::LBrace => Ok((self.container_literal()?, false)),
            _ => Ok((self.leaf()?, true)),
        }
    }

    /// A literal, `()` or a name.
    fn leaf(&mut self) -> PResult<ExprId> {
        // A declaration keyword cannot start an expression: leave it for the
        // recovery in `spec` so that the declaration itself is still parsed.
        if matches!(
            self.peek(),
            Tok::KwIn | Tok::KwOut | Tok::KwAux | Tok::KwTrigger | Tok::Eof
        ) {
            return Err(self.expected("an expression"));
        }
        let t = self.bump();
        let mut span = t.span;
        let kind = match t.tok {
            Tok::Int(i) => ExprKind::Int(i),
            Tok::BigInt(text) => {
                return Err(Box::new(
                    Diagnostic::new(
                        span,
                        format!(
                            "integer literal `{}` does not fit in Int (64 bits)",
                            short(&text)
                        ),
                    )
                    .with_hint(
                        "Int values range from -9223372036854775808 to 9223372036854775807; \
                         write a Float with a dot",
                    ),
                ));
            }
            Tok::Float(f) => ExprKind::Float(f),
            Tok::KwTrue => ExprKind::Bool(true),
            Tok::KwFalse => ExprKind::Bool(false),
            Tok::Str(s) => ExprKind::Str(s.into()),
            Tok::LParen => {
                span = span.to(self.expect(Tok::RParen, "`)`")?);
                ExprKind::Unit
            }
            Tok::Ident(name) => match self.params.iter().rposition(|p| *p == name) {
                Some(k) => ExprKind::Param(k as u32),
                None => ExprKind::Name(name),
            },
            other => {
                return Err(Box::new(Diagnostic::new(
                    span,
                    format!("expected an expression, found {}", other.describe()),
                )));
            }
        };
        self.push(kind, span, span)
    }

    /// `[e, …]` or `{k: e, …}` (a helper of `atom`).
    #[inline(never)]
    fn container_literal(&mut self) -> PResult<ExprId> {
        let open = self.advance();
        if self.toks[self.pos - 1].tok == Tok::LBracket {
            let items = self.args(Tok::RBracket)?;
            let close = self.expect(Tok::RBracket, "`,` or `]`")?;
            return self.push(ExprKind::List(items), open.to(close), open);
        }
        let entries = self.entries(Tok::RBrace, true)?;
        let close = self.expect(Tok::RBrace, "`,` or `}`")?;
        self.push(ExprKind::Map(entries), open.to(close), open)
    }

    /// Whether `name` is a parameter of a lambda being parsed.
    fn is_param(&self, name: &str) -> bool {
        self.params.iter().any(|p| p == name)
    }

    /// Map entries up to `close`: `"k": e` (and `k: e` in an object
    /// literal), keys unique.
    #[inline(never)]
    fn entries(&mut self, close: Tok, names: bool) -> PResult<Vec<(std::sync::Arc<str>, ExprId)>> {
        let mut entries: Vec<(std::sync::Arc<str>, ExprId)> = Vec::new();
        while self.peek() != &close {
            let t = self.bump();
            let key: std::sync::Arc<str> = match t.tok {
                Tok::Str(s) => s.into(),
                Tok::Ident(n) if names => n.into(),
                other => {
                    return Err(Box::new(Diagnostic::new(
                        t.span,
                        format!(
                            "expected a key (a string{}), found {}",
                            if names { " or a name" } else { "" },
                            other.describe()
                        ),
                    )));
                }
            };
            if entries.iter().any(|(k, _)| *k == key) {
                return Err(Box::new(Diagnostic::new(
                    t.span,
                    format!("key {:?} is given twice", &*key),
                )));
            }
            self.expect(Tok::Colon, "`:` after the key")?;
            entries.push((key, self.sub_expr()?));
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        Ok(entries)
    }

    /// `List.append(l, e)` and the other container builtins.
    #[inline(never)]
    fn method(&mut self) -> PResult<ExprId> {
        let Tok::Ident(owner) = self.peek().clone() else {
            unreachable!("`atom` calls `method` at a name")
        };
        let start = self.advance();
        self.advance();
        let (name, name_span) = self.name("a builtin's name")?;
        let full = format!("{owner}.{name}");
        let method = Method::from_name(&full).ok_or_else(|| {
            let known: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
            Box::new(
                Diagnostic::new(
                    start.to(name_span),
                    format!("unknown function `{}`", short(&full)),
                )
                .with_hint(format!("the container builtins are {}", known.join(", "))),
            )
        })?;
        self.expect(Tok::LParen, "`(`")?;
        let args = self.args(Tok::RParen)?;
        let end = self.expect(Tok::RParen, "`,` or `)`")?;
        let span = start.to(end);
        if args.len() != method.arity() {
            return Err(Box::new(Diagnostic::new(
                span,
                format!(
                    "`{}` takes {} argument{}, found {}",
                    method.name(),
                    method.arity(),
                    if method.arity() == 1 { "" } else { "s" },
                    args.len()
                ),
            )));
        }
        self.push(ExprKind::Method(method, args), span, start)
    }

    /// The forms that are not plain builtins: constructors, `partial`,
    /// `fix` and `dynamic`/`eval`/`defer`.
    #[inline(never)]
    fn form(&mut self) -> PResult<ExprId> {
        let Tok::Ident(name) = self.peek().clone() else {
            unreachable!("`atom` calls `form` at a name")
        };
        let start = self.advance();
        self.expect(Tok::LParen, "`(`")?;
        let kind = match name.as_str() {
            "List" => ExprKind::List(self.args(Tok::RParen)?),
            "Tuple" => ExprKind::Tuple(self.args(Tok::RParen)?),
            "Map" | "Struct" => ExprKind::Map(self.entries(Tok::RParen, false)?),
            "partial" => {
                let args = self.args(Tok::RParen)?;
                if args.is_empty() {
                    return Err(Box::new(Diagnostic::new(
                        start.to(self.span()),
                        "`partial` takes a function and the arguments to bind",
                    )));
                }
                ExprKind::Partial(args)
            }
            "fix" => {
                let args = self.args(Tok::RParen)?;
                let [f] = args[..] else {
                    return Err(Box::new(Diagnostic::new(
                        start.to(self.span()),
                        format!("`fix` takes 1 argument, found {}", args.len()),
                    )));
                };
                ExprKind::Fix(f)
            }
            _ => {
                let source = self.sub_expr()?;
                let ty = if self.eat(&Tok::Colon) {
                    Some(self.ty(0)?)
                } else {
                    None
                };
                let scope = if self.eat(&Tok::Comma) {
                    self.expect(Tok::LBrace, "`{` and the streams the expression may read")?;
                    let mut names: Vec<(String, Span)> = Vec::new();
                    while self.peek() != &Tok::RBrace {
                        let (n, span) = self.name("a stream name")?;
                        if names.iter().any(|(m, _)| *m == n) {
                            return Err(Box::new(Diagnostic::new(
                                span,
                                format!("`{}` is named twice", short(&n)),
                            )));
                        }
                        names.push((n, span));
                        if !self.eat(&Tok::Comma) {
                            break;
                        }
                    }
                    self.expect(Tok::RBrace, "`,` or `}`")?;
                    Some(names)
                } else {
                    None
                };
                let defer = name == "defer";
                ExprKind::Dynamic(Box::new(Dynamic { defer, ty, scope }), source)
            }
        };
        let end = self.expect(Tok::RParen, "`,` or `)`")?;
        self.push(kind, start.to(end), start)
    }

    fn call(&mut self) -> PResult<ExprId> {
        let (builtin, name_span) = self.callee()?;
        let mut args = Vec::new();
        if self.peek() != &Tok::RParen {
            loop {
                args.push(self.sub_expr()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        let end = self.expect(Tok::RParen, "`,` or `)`")?;
        self.push_call(builtin, args, name_span, end)
    }

    /// `window(e, 20, max)`, `window(e, 10s, avg)` or, with the pane
    /// granularity, `window(e, 10s, avg, 1s)`.
    fn window(&mut self) -> PResult<ExprId> {
        const AGGREGATES_HINT: &str = "the aggregates are count, sum, avg, min, max, last, first, any, all, variance, stddev, integral (time windows), p50, p90, p95 and p99";
        const HINT: &str = "a window reads `window(x, 20, max)` (the last 20 values) or `window(x, 10s, avg)` (the last 10 seconds; units ns, us, ms, s, min, h)";
        let name_span = self.advance();
        self.expect(Tok::LParen, "`(`")?;
        let operand = self.sub_expr()?;
        self.expect(Tok::Comma, "`,` and the window's size")?;
        let at = self.span();
        // A count, or a duration in nanoseconds.
        let reach: Result<u32, i64> = match (self.peek(), self.peek_at(1)) {
            (Tok::Int(_) | Tok::Float(_), Tok::Ident(_)) => {
                Err(self.duration(at, "window duration", HINT)?.0)
            }
            (&Tok::Int(n), _) => {
                self.advance();
                if !(1..=MAX_WINDOW_COUNT).contains(&n) {
                    return Err(Box::new(
                        Diagnostic::new(
                            at,
                            format!(
                                "a window's count must be at least 1 and at most {MAX_WINDOW_COUNT}, found {n}"
                            ),
                        )
                        .with_hint(HINT),
                    ));
                }
                Ok(n as u32)
            }
            _ => {
                let found = self.sub_expr()?;
                let span = self.ast.expr(found).span;
                return Err(Box::new(
                    Diagnostic::new(
                        at.to(span),
                        "a window's size must be a literal: a count (`20`) or a duration (`10s`)",
                    )
                    .with_hint(HINT),
                ));
            }
        };
        self.expect(Tok::Comma, "`,` and the window's aggregate")?;
        let t = self.bump();
        let agg = match &t.tok {
            Tok::Ident(name) => Aggregate::from_name(name).ok_or_else(|| {
                Box::new(
                    Diagnostic::new(t.span, format!("unknown aggregate `{}`", short(name)))
                        .with_hint(AGGREGATES_HINT),
                )
            })?,
            other => {
                return Err(Box::new(
                    Diagnostic::new(
                        t.span,
                        format!("expected an aggregate, found {}", other.describe()),
                    )
                    .with_hint(AGGREGATES_HINT),
                ));
            }
        };
        let percentile = agg.quantile().is_some();
        let size = match reach {
            Ok(_) if agg == Aggregate::Integral => {
                return Err(Box::new(
                    Diagnostic::new(
                        t.span,
                        "`integral` needs a time window: it is the area under the samples over time, and a count window holds values without their times",
                    )
                    .with_hint("for example `window(x, 10s, integral)` (value × seconds over the last 10 seconds)"),
                ));
            }
            Ok(n) => {
                if self.peek() == &Tok::Comma {
                    return Err(Box::new(Diagnostic::new(
                        self.span(),
                        "a count window has no granularity (only a time window is split into panes)",
                    )));
                }
                WindowSize::Count(n)
            }
            Err(total) => {
                let pane_ns = if self.eat(&Tok::Comma) {
                    let g_at = self.span();
                    let (g, g_span) = self.duration(g_at, "granularity", HINT)?;
                    // Two faults, each said as it is: a granularity that does
                    // not divide the duration, and one that divides it into
                    // too many panes.
                    if total % g != 0 {
                        return Err(Box::new(
                            Diagnostic::new(
                                g_span,
                                "a window's granularity must divide its duration evenly (the window is made of whole panes)",
                            )
                            .with_hint("for example `window(x, 10s, sum, 2s)` (5 panes) or `window(x, 9s, sum, 3s)` (3 panes)"),
                        ));
                    }
                    if percentile && total / g > MAX_PERCENTILE_PANES {
                        return Err(Box::new(
                            Diagnostic::new(
                                g_span,
                                format!(
                                    "a time window's percentile keeps a sketch per pane: at most {MAX_PERCENTILE_PANES} panes (this granularity makes {})",
                                    total / g
                                ),
                            )
                            .with_hint("a coarser granularity, e.g. `window(x, 1min, p99, 6s)`: 10 panes"),
                        ));
                    }
                    if total / g > MAX_WINDOW_PANES {
                        return Err(Box::new(
                            Diagnostic::new(
                                g_span,
                                format!(
                                    "a window's granularity must divide its duration into at most {MAX_WINDOW_PANES} panes (this one makes {})",
                                    total / g
                                ),
                            )
                            .with_hint("for example `window(x, 1h, avg, 1min)`: 60 panes of a minute"),
                        ));
                    }
                    g
                } else {
                    // At most 100 panes: the largest count up to 100 that
                    // divides the duration (10 for a percentile, whose
                    // panes each keep a sketch).
                    let most = if percentile { 10 } else { 100 };
                    let panes = (1..=most).rev().find(|p| total % p == 0).unwrap_or(1);
                    total / panes
                };
                WindowSize::Time {
                    pane_ns,
                    panes: (total / pane_ns) as u32,
                }
            }
        };
        let end = self.expect(Tok::RParen, "`,` or `)`")?;
        let (total, bound, what) = match size {
            WindowSize::Count(n) => {
                // A percentile keeps its values twice: as they came, and sorted.
                self.window_values += u64::from(n) * if percentile { 2 } else { 1 };
                (
                    self.window_values,
                    MAX_WINDOW_VALUES,
                    "values kept by count windows",
                )
            }
            WindowSize::Interval { .. } | WindowSize::Since { .. } => {
                unreachable!("`window(…)` is a count or a time window")
            }
            WindowSize::Time { panes, .. } => {
                let weight = if percentile { PERCENTILE_PANE_WEIGHT } else { 1 };
                self.window_panes += u64::from(panes) * weight;
                (
                    self.window_panes,
                    MAX_WINDOW_PANES_TOTAL,
                    "panes of time windows",
                )
            }
        };
        if total > bound {
            return Err(Box::new(Diagnostic::new(
                at,
                format!("the specification's windows exceed {bound} {what} in all"),
            ).with_hint("a window's memory is allocated with the run: make the windows shorter or coarser")));
        }
        self.push(
            ExprKind::Window(operand, Window { size, agg }),
            name_span.to(end),
            name_span.to(end),
        )
    }

    /// The function name and `(` of a call.
    fn callee(&mut self) -> PResult<(Builtin, Span)> {
        let Tok::Ident(name) = self.peek() else {
            unreachable!("`atom` calls `call` at a name")
        };
        let Some(builtin) = Builtin::from_name(name) else {
            return Err(Box::new(
                Diagnostic::new(self.span(), format!("unknown function `{}`", short(name)))
                    .with_hint("the builtins are default, is_defined, when, init, latch, update, sin, cos, tan, abs, sqrt, min, max, floor and ceil"),
            ));
        };
        let name_span = self.advance();
        self.expect(Tok::LParen, "`(`")?;
        Ok((builtin, name_span))
    }

    fn push_call(
        &mut self,
        builtin: Builtin,
        args: Vec<ExprId>,
        name_span: Span,
        end: Span,
    ) -> PResult<ExprId> {
        let span = name_span.to(end);
        if args.len() != builtin.arity() {
            let plural = if builtin.arity() == 1 { "" } else { "s" };
            return Err(Box::new(Diagnostic::new(
                span,
                format!(
                    "`{}` takes {} argument{plural}, found {}",
                    builtin.name(),
                    builtin.arity(),
                    args.len()
                ),
            )));
        }
        self.push(ExprKind::Call(builtin, args), span, name_span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prints an expression fully parenthesised, to test precedence.
    fn show(ast: &Ast, id: ExprId) -> String {
        match &ast.expr(id).kind {
            ExprKind::Int(i) => i.to_string(),
            ExprKind::Float(f) => format!("{f:?}"),
            ExprKind::Bool(b) => b.to_string(),
            ExprKind::Str(s) => format!("{s:?}"),
            ExprKind::Unit => "()".into(),
            ExprKind::Name(n) => n.clone(),
            ExprKind::Unary(UnOp::Neg, a) => format!("(-{})", show(ast, *a)),
            ExprKind::Unary(UnOp::Not, a) => format!("(!{})", show(ast, *a)),
            ExprKind::Binary(op, a, b) => {
                format!("({} {} {})", show(ast, *a), op.symbol(), show(ast, *b))
            }
            ExprKind::If(c, a, b) => format!(
                "(if {} then {} else {})",
                show(ast, *c),
                show(ast, *a),
                show(ast, *b)
            ),
            ExprKind::Offset(a, n) => format!("{}[{n}]", show(ast, *a)),
            ExprKind::Window(a, w) => format!("window({}, {w})", show(ast, *a)),
            ExprKind::Since(a, b, w) => format!("since({}, {}, {w})", show(ast, *a), show(ast, *b)),
            ExprKind::Call(b, args) => format!(
                "{}({})",
                b.name(),
                args.iter()
                    .map(|a| show(ast, *a))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => display(ast, id, &mut Vec::new()),
        }
    }

    fn parse_def(src: &str) -> String {
        let (ast, errs) = parse(src);
        assert!(errs.is_empty(), "{errs:?}");
        match &ast.decls[0] {
            Decl::Def { expr, .. } => show(&ast, *expr),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(parse_def("z = 1 + 2 * 3 - 4"), "((1 + (2 * 3)) - 4)");
        assert_eq!(parse_def("z = a => b => c"), "((a => b) => c)");
        assert_eq!(parse_def("z = a || b && c"), "(a || (b && c))");
        assert_eq!(parse_def("z = 1 < 2 == 3 < 4"), "((1 < 2) == (3 < 4))");
        assert_eq!(parse_def("z = a ++ b ++ c"), "((a ++ b) ++ c)");
        assert_eq!(parse_def("z = -x[1]"), "(-x[1])");
        assert_eq!(parse_def("z = !a != b"), "((!a) != b)");
        assert_eq!(parse_def("z = (x + 1)[2]"), "(x + 1)[2]");
        assert_eq!(
            parse_def("z = -9223372036854775808"),
            "-9223372036854775808"
        );
        assert_eq!(
            parse_def("z = if a then b else if c then 1 else 2.5"),
            "(if a then b else (if c then 1 else 2.5))"
        );
        assert_eq!(parse_def("z = default(x[1], ())"), "default(x[1], ())");
    }

    #[test]
    fn too_deep_expressions_stop_the_parser_at_the_bound() {
        // The parser never recurses past `MAX_NESTING`, whatever the input:
        // these parse on a 1 MiB stack into one located error each.
        let cases = [
            format!("y = {}x{}", "(".repeat(6000), ")".repeat(6000)),
            format!(
                "y = {}x{}",
                "default(".repeat(10_000),
                ", 0)".repeat(10_000)
            ),
            format!("y = x{}", " + x".repeat(40_000)),
            format!("y = {}x", "-".repeat(100_000)),
            format!("y = {}x", "if b then x else ".repeat(100_000)),
            format!("y = {}b", "if ".repeat(100_000)),
            format!("y = x{}", "[1]".repeat(100_000)),
        ];
        std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || {
                for src in cases {
                    let (_, errs) = parse(&src);
                    let msgs: Vec<_> = errs.iter().map(|d| d.message.as_str()).collect();
                    assert_eq!(
                        msgs,
                        ["expression nested too deeply: more than 256 levels"],
                        "{}",
                        &src[..40]
                    );
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn declarations_in_any_order() {
        let (ast, errs) = parse("z = x\nin x: Int\nout z\naux a: Float\nvar b");
        assert!(errs.is_empty());
        assert_eq!(ast.decls.len(), 5);
    }

    #[test]
    fn reports_every_syntax_error() {
        let (_, errs) = parse(
            "out y\ny = 1 + if a then 1 else 2\nz = foo(1)\nw = x[-1]\nv = 99999999999999999999",
        );
        let msgs: Vec<_> = errs.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "`if` must be parenthesised when it is an operand",
                "negative offsets (future values) are not supported",
                "integer literal `99999999999999999999` does not fit in Int (64 bits)",
            ]
        );
    }
}
