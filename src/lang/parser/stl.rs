//! STL formulas inside a specification: `stl(φ)` (a Bool verdict) and `stl_rob(φ)` (a Float robustness), parsed into ordinary nodes and interval windows.
//!
//! Grammar of φ (docs/language.md, "STL inside a specification"), loosest
//! binding first:
//!
//! ```text
//! formula := or (("=>" | "->") formula)?           (right-associative)
//! or      := and ("||" and)*
//! and     := unary ("&&" unary)*
//! unary   := ("!" | ("G" | "F") "[" BOUND "," BOUND "]")* prim
//! prim    := "(" formula ")" | "true" | "false" | term (CMP term)?
//! term    := an arithmetic expression (DSRV's `add` level)
//! ```
//!
//! A formula compiles to the plan's own nodes: `G`/`F` are interval
//! windows (`WindowSize::Interval`; `all`/`any` for `stl`, `min`/`max` for
//! `stl_rob`), `S` a since (`ExprKind::Since`, `WindowSize::Since`), the
//! boolean layer DSRV's operators for `stl` and, for
//! `stl_rob`, the robustness arithmetic: `a > b` is `a - b` (as Floats),
//! `a < b` is `b - a`, `!` negation, `&&` `min`, `||` `max`, `φ => ψ`
//! `max(-φ, ψ)`, `true` +inf and `false` -inf. A `(` starts a formula
//! unless what follows its `)` continues a term (`(x + 1) * 2 > 3`).

use super::{PResult, Parser, short};
use crate::lang::MAX_WINDOW_VALUES;
use crate::lang::ast::*;
use crate::lang::diag::{Diagnostic, Span};
use crate::lang::lexer::Tok;

/// The samples an STL operator keeps at most unless `stl(φ, N)` says.
pub const STL_DEFAULT_SAMPLES: u32 = 256;
/// The most samples `stl(φ, N)` may ask an operator to keep.
pub const STL_MAX_SAMPLES: i64 = 1_000_000;

const HINT: &str = "a temporal operator reads `G[0, 2s](x > 3)`, `F[500ms, 1s](y < 0)` or `x > 0 S[0, 2s] y > 1`: a past interval from its near to its far end, each a duration (units ns, us, ms, s, min, h) or 0";

/// The formula being parsed: which `stl` form, and the interval windows
/// built so far (their bound is set once `stl(φ, N)` has been read).
pub(super) struct StlMode {
    robustness: bool,
    windows: Vec<ExprId>,
}

/// A prefix operator of a formula, as read before its operand.
#[derive(Clone, Copy)]
enum Prefix {
    /// `!`.
    Not,
    /// `G[lo, hi]` or `F[lo, hi]`, as the aggregate of its interval window.
    Temporal { agg: Aggregate, lo_ns: i64, hi_ns: i64 },
}

/// The DSRV precedence level of `+`/`-`: a formula's terms.
const TERM_LEVEL: usize = 6;

impl Parser {
    /// `stl(φ)`, `stl(φ, N)`, `stl_rob(φ)`, `stl_rob(φ, N)` (at the name).
    pub(super) fn stl(&mut self) -> PResult<ExprId> {
        let robustness = matches!(self.peek(), Tok::Ident(n) if n == "stl_rob");
        let name_span = self.advance();
        if self.stl.is_some() {
            return Err(Box::new(Diagnostic::new(
                name_span,
                "`stl` inside an STL formula: a formula's terms are arithmetic",
            )));
        }
        self.expect(Tok::LParen, "`(`")?;
        self.stl = Some(StlMode {
            robustness,
            windows: Vec::new(),
        });
        let formula = self.formula();
        let mode = self.stl.take().expect("set above");
        let formula = formula?;
        let cap = if self.eat(&Tok::Comma) {
            let t = self.bump();
            match t.tok {
                Tok::Int(n) if (1..=STL_MAX_SAMPLES).contains(&n) => n as u32,
                other => {
                    return Err(Box::new(
                        Diagnostic::new(
                            t.span,
                            format!(
                                "expected the most samples an operator keeps (1 to {STL_MAX_SAMPLES}), found {}",
                                other.describe()
                            ),
                        )
                        .with_hint("for example `stl(G[0, 10s](x > 0), 20000)`"),
                    ));
                }
            }
        } else {
            STL_DEFAULT_SAMPLES
        };
        let end = self.expect(Tok::RParen, "`,` or `)`")?;
        for &w in &mode.windows {
            match &mut self.ast.exprs[w.index()].kind {
                ExprKind::Window(_, window) => {
                    if let WindowSize::Interval { cap: c, .. } = &mut window.size {
                        *c = cap;
                    }
                    // Each sample is a time and a value, in one of two rings.
                    self.window_values += 4 * u64::from(cap);
                }
                ExprKind::Since(_, _, window) => {
                    if let WindowSize::Since { cap: c, .. } = &mut window.size {
                        *c = cap;
                    }
                    // Three rings: pending (time, step, ψ), φ's (step, φ)
                    // and the candidates' (time, value).
                    self.window_values += 7 * u64::from(cap);
                }
                _ => unreachable!("an STL operator is a window or a since"),
            }
        }
        if self.window_values > MAX_WINDOW_VALUES {
            return Err(Box::new(
                Diagnostic::new(
                    name_span.to(end),
                    format!("the specification's windows exceed {MAX_WINDOW_VALUES} values kept in all"),
                )
                .with_hint("a `G`/`F` keeps 4 words per sample of its bound, an `S` 7: lower `N` in `stl(φ, N)`"),
            ));
        }
        self.parenthesise(formula, name_span, end)?;
        Ok(formula)
    }

    fn robustness(&self) -> bool {
        self.stl.as_ref().is_some_and(|m| m.robustness)
    }

    /// A formula one nesting level deeper (the formula parser's recursion
    /// goes through here, so it is bounded as `sub_expr`'s is).
    fn formula(&mut self) -> PResult<ExprId> {
        if self.nesting >= crate::lang::MAX_NESTING {
            return Err(super::too_deep(self.span()));
        }
        self.nesting += 1;
        let e = self.f_implies();
        self.nesting -= 1;
        e
    }

    fn f_implies(&mut self) -> PResult<ExprId> {
        let lhs = self.f_or()?;
        if !matches!(self.peek(), Tok::Implies | Tok::Arrow) {
            return Ok(lhs);
        }
        let at = self.advance();
        let rhs = self.formula()?;
        let span = self.ast.expr(lhs).span.to(self.ast.expr(rhs).span);
        if !self.robustness() {
            return self.push(ExprKind::Binary(BinOp::Implies, lhs, rhs), span, at);
        }
        let neg = self.push(ExprKind::Unary(UnOp::Neg, lhs), self.ast.expr(lhs).span, at)?;
        self.push(ExprKind::Call(Builtin::Max, vec![neg, rhs]), span, at)
    }

    fn f_or(&mut self) -> PResult<ExprId> {
        let mut lhs = self.f_and()?;
        while self.peek() == &Tok::OrOr {
            let at = self.advance();
            let rhs = self.f_and()?;
            lhs = self.junction(BinOp::Or, lhs, rhs, at)?;
        }
        Ok(lhs)
    }

    fn f_and(&mut self) -> PResult<ExprId> {
        let mut lhs = self.f_since()?;
        while self.peek() == &Tok::AndAnd {
            let at = self.advance();
            let rhs = self.f_since()?;
            lhs = self.junction(BinOp::And, lhs, rhs, at)?;
        }
        Ok(lhs)
    }

    /// `φ S[a, b] ψ`, binding tighter than `&&` and looser than the
    /// prefixes (as `U` in the `mstlo` grammar), left-associative: `φ S ψ
    /// S χ` is `(φ S ψ) S χ`. A `U[a, b]` here is refused: a
    /// specification reads formulas in the past.
    fn f_since(&mut self) -> PResult<ExprId> {
        let mut lhs = self.f_unary()?;
        loop {
            match self.peek() {
                Tok::Ident(n) if n == "S" && self.peek_at(1) == &Tok::LBracket => {}
                Tok::Ident(n) if n == "U" && matches!(self.peek_at(1), Tok::LBracket | Tok::LParen) => {
                    return Err(Box::new(
                        Diagnostic::new(
                            self.span(),
                            "`U` (until) reads the future, and a specification's formula reads the past: use since, `φ S[a, b] ψ`",
                        )
                        .with_hint("`φ S[a, b] ψ` holds at t iff ψ held at some sample in [t - b, t - a] and φ at every sample after it"),
                    ));
                }
                Tok::Ident(n) if n == "S" && self.peek_at(1) == &Tok::LParen => {
                    return Err(Box::new(
                        Diagnostic::new(self.span(), "`S` needs a bounded interval: `φ S[0, 2s] ψ`")
                            .with_hint(HINT),
                    ));
                }
                _ => return Ok(lhs),
            }
            let at = self.advance();
            let (lo_ns, hi_ns) = self.interval()?;
            let rhs = self.f_unary()?;
            let span = self.ast.expr(lhs).span.to(self.ast.expr(rhs).span);
            let agg = match self.robustness() {
                false => Aggregate::Any,
                true => Aggregate::Max,
            };
            let size = WindowSize::Since {
                lo_ns,
                hi_ns,
                cap: STL_DEFAULT_SAMPLES,
            };
            lhs = self.push(ExprKind::Since(lhs, rhs, Window { size, agg }), span, at)?;
            if let Some(mode) = self.stl.as_mut() {
                mode.windows.push(lhs);
            }
        }
    }

    /// `&&` or `||`: DSRV's, or the robustness's minimum or maximum.
    fn junction(&mut self, op: BinOp, lhs: ExprId, rhs: ExprId, at: Span) -> PResult<ExprId> {
        let span = self.ast.expr(lhs).span.to(self.ast.expr(rhs).span);
        if !self.robustness() {
            return self.push(ExprKind::Binary(op, lhs, rhs), span, at);
        }
        let f = match op {
            BinOp::And => Builtin::Min,
            _ => Builtin::Max,
        };
        self.push(ExprKind::Call(f, vec![lhs, rhs]), span, at)
    }

    /// Prefix operators (`!`, `G[a, b]`, `F[a, b]`), then a primary
    /// formula. A chain of them is a loop, bounded as DSRV's prefixes are.
    fn f_unary(&mut self) -> PResult<ExprId> {
        let mut ops: Vec<(Prefix, Span)> = Vec::new();
        loop {
            match self.peek() {
                Tok::Bang => ops.push((Prefix::Not, self.advance())),
                Tok::Ident(n)
                    if matches!(n.as_str(), "G" | "F") && self.peek_at(1) == &Tok::LBracket =>
                {
                    let globally = n == "G";
                    let at = self.advance();
                    let (lo_ns, hi_ns) = self.interval()?;
                    let agg = match (globally, self.robustness()) {
                        (true, false) => Aggregate::All,
                        (false, false) => Aggregate::Any,
                        (true, true) => Aggregate::Min,
                        (false, true) => Aggregate::Max,
                    };
                    ops.push((Prefix::Temporal { agg, lo_ns, hi_ns }, at));
                }
                Tok::Ident(n)
                    if matches!(n.as_str(), "G" | "F" | "U" | "S")
                        && self.peek_at(1) == &Tok::LParen =>
                {
                    return Err(Box::new(
                        Diagnostic::new(
                            self.span(),
                            format!("`{n}` needs a bounded interval: `{n}[0, 2s](…)`"),
                        )
                        .with_hint(HINT),
                    ));
                }
                _ => break,
            }
            if self.nesting + ops.len() > crate::lang::MAX_NESTING {
                return Err(super::too_deep(self.span()));
            }
        }
        let mut e = self.f_prim()?;
        while let Some((op, at)) = ops.pop() {
            let span = at.to(self.ast.expr(e).span);
            e = match op {
                Prefix::Not if self.robustness() => {
                    self.push(ExprKind::Unary(UnOp::Neg, e), span, at)?
                }
                Prefix::Not => self.push(ExprKind::Unary(UnOp::Not, e), span, at)?,
                Prefix::Temporal { agg, lo_ns, hi_ns } => {
                    let size = WindowSize::Interval {
                        lo_ns,
                        hi_ns,
                        cap: STL_DEFAULT_SAMPLES,
                    };
                    let w = self.push(ExprKind::Window(e, Window { size, agg }), span, at)?;
                    if let Some(mode) = self.stl.as_mut() {
                        mode.windows.push(w);
                    }
                    w
                }
            };
        }
        Ok(e)
    }

    /// `[a, b]` after `G` or `F`: the bounds in nanoseconds.
    fn interval(&mut self) -> PResult<(i64, i64)> {
        self.expect(Tok::LBracket, "`[`")?;
        let (lo, lo_span) = self.bound()?;
        self.expect(Tok::Comma, "`,` and the interval's far end")?;
        let (hi, hi_span) = self.bound()?;
        self.expect(Tok::RBracket, "`]`")?;
        if lo > hi {
            return Err(Box::new(
                Diagnostic::new(
                    lo_span.to(hi_span),
                    format!(
                        "a reversed interval: its near end {} is after its far end {}",
                        duration_or_zero(lo),
                        duration_or_zero(hi)
                    ),
                )
                .with_hint(HINT),
            ));
        }
        Ok((lo, hi))
    }

    /// An interval's bound: `0`, or a duration.
    fn bound(&mut self) -> PResult<(i64, Span)> {
        let at = self.span();
        match (self.peek().clone(), self.peek_at(1).clone()) {
            (Tok::Int(0), next) if !matches!(next, Tok::Ident(_)) => {
                self.advance();
                Ok((0, at))
            }
            (Tok::Int(0), Tok::Ident(_)) => {
                // `0s`: zero in any unit (`duration` takes positive ones).
                self.advance();
                let u = self.bump();
                match &u.tok {
                    Tok::Ident(unit) if matches!(unit.as_str(), "ns" | "us" | "ms" | "s" | "min" | "h") => {
                        Ok((0, at.to(u.span)))
                    }
                    Tok::Ident(unit) => Err(Box::new(
                        Diagnostic::new(u.span, format!("unknown unit `{}`", short(unit))).with_hint(HINT),
                    )),
                    _ => unreachable!("matched an identifier"),
                }
            }
            (Tok::Int(_) | Tok::Float(_), Tok::Ident(_)) => self.duration(at, "interval bound", HINT),
            (Tok::Int(_) | Tok::Float(_), _) => Err(Box::new(
                Diagnostic::new(at, "an STL interval's bound needs a time unit: `2s`, `500ms`")
                    .with_hint(HINT),
            )),
            (Tok::Ident(n), _) if matches!(n.as_str(), "inf" | "infinity") => Err(Box::new(
                Diagnostic::new(
                    at,
                    "an unbounded interval: an operator keeps the samples of its interval, so both ends are durations",
                )
                .with_hint(HINT),
            )),
            (other, _) => Err(Box::new(
                Diagnostic::new(at, format!("expected an interval bound, found {}", other.describe()))
                    .with_hint(HINT),
            )),
        }
    }

    /// A parenthesised formula, `true`, `false`, or a comparison of terms
    /// (for `stl`, also a Bool term alone).
    fn f_prim(&mut self) -> PResult<ExprId> {
        match self.peek() {
            Tok::LParen if self.paren_is_formula() => {
                let open = self.advance();
                let inner = self.formula()?;
                let close = self.expect(Tok::RParen, "`)`")?;
                self.parenthesise(inner, open, close)?;
                return Ok(inner);
            }
            Tok::KwTrue | Tok::KwFalse if !self.continues_term(1) => {
                let truth = self.peek() == &Tok::KwTrue;
                let span = self.advance();
                let kind = match (self.robustness(), truth) {
                    (false, b) => ExprKind::Bool(b),
                    (true, true) => ExprKind::Float(f64::INFINITY),
                    (true, false) => ExprKind::Float(f64::NEG_INFINITY),
                };
                return self.push(kind, span, span);
            }
            _ => {}
        }
        let lhs = self.binary(TERM_LEVEL)?;
        let op = match self.peek() {
            Tok::Lt => BinOp::Lt,
            Tok::Le => BinOp::Le,
            Tok::Gt => BinOp::Gt,
            Tok::Ge => BinOp::Ge,
            Tok::EqEq | Tok::NotEq if self.robustness() => {
                let op = if self.peek() == &Tok::EqEq { "==" } else { "!=" };
                return Err(Box::new(
                    Diagnostic::new(
                        self.span(),
                        format!("`{op}` has no robustness: compare with `<`, `<=`, `>` or `>=`"),
                    )
                    .with_hint("`stl(…)` gives a Bool verdict and takes `==`; `stl_rob(…)` measures how far a comparison is from flipping"),
                ));
            }
            Tok::EqEq => BinOp::Eq,
            Tok::NotEq => BinOp::Ne,
            _ if self.robustness() => {
                return Err(Box::new(
                    Diagnostic::new(
                        self.ast.expr(lhs).span,
                        "a robustness formula's atom is a comparison of numbers, `x > 3`",
                    )
                    .with_hint("a Bool stream has no robustness; `stl(…)` takes it as a formula"),
                ));
            }
            // `stl`: a Bool term is a formula (the checker says if not).
            _ => return Ok(lhs),
        };
        let at = self.advance();
        let rhs = self.binary(TERM_LEVEL)?;
        self.ast.stl_terms.extend([lhs, rhs]);
        let span = self.ast.expr(lhs).span.to(self.ast.expr(rhs).span);
        if !self.robustness() {
            return self.push(ExprKind::Binary(op, lhs, rhs), span, at);
        }
        let (a, b) = match op {
            BinOp::Gt | BinOp::Ge => (lhs, rhs),
            _ => (rhs, lhs),
        };
        let (a, b) = (self.as_float(a, at)?, self.as_float(b, at)?);
        self.push(ExprKind::Binary(BinOp::Sub, a, b), span, at)
    }

    /// `e * 1.0`: a term as a Float (an Int converted), so that a
    /// robustness is a Float whatever the signals' types.
    fn as_float(&mut self, e: ExprId, at: Span) -> PResult<ExprId> {
        let span = self.ast.expr(e).span;
        let one = self.push(ExprKind::Float(1.0), span, at)?;
        self.push(ExprKind::Binary(BinOp::Mul, e, one), span, at)
    }

    /// Whether the token `n` ahead continues a term (an arithmetic or
    /// comparison operator, an offset, a field, an application).
    fn continues_term(&self, n: usize) -> bool {
        matches!(
            self.peek_at(n),
            Tok::Lt
                | Tok::Le
                | Tok::Gt
                | Tok::Ge
                | Tok::EqEq
                | Tok::NotEq
                | Tok::Plus
                | Tok::Minus
                | Tok::Star
                | Tok::Slash
                | Tok::Percent
                | Tok::LBracket
                | Tok::Dot
                | Tok::LParen
        )
    }

    /// At a `(`: whether it opens a formula, i.e. what follows its `)` does
    /// not continue a term. (A scan to the matching `)`: formulas nest at
    /// most `MAX_NESTING` deep, so this is linear in the formula per level.)
    fn paren_is_formula(&self) -> bool {
        let mut depth = 0usize;
        let mut n = 0;
        loop {
            match self.peek_at(n) {
                Tok::LParen => depth += 1,
                Tok::RParen => {
                    depth -= 1;
                    if depth == 0 {
                        return !self.continues_term(n + 1);
                    }
                }
                Tok::Eof => return true,
                _ => {}
            }
            n += 1;
        }
    }
}
