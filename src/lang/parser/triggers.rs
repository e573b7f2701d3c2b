//! Triggers: the declaration `trigger [NAME:] COND "MESSAGE" [CLAUSES]`, its message's
//! placeholders that are expressions, and its alerting clauses (`rising`, `resolve`,
//! `every D`, `severity`, `label`), which the parser writes as streams of the specification.

use super::{PResult, Parser, short};
use crate::lang::ast::*;
use crate::lang::diag::{Diagnostic, Span};
use crate::lang::lexer::{Tok, lex};
use crate::lang::types::Type;

impl Parser {
    /// `trigger [name:] cond "message"` (after the keyword).
    pub(super) fn trigger(&mut self, keyword: Span) -> PResult<()> {
        let named = matches!(self.peek(), Tok::Ident(_)) && self.peek_at(1) == &Tok::Colon;
        let (name, name_span) = if named {
            let n = self.name("a trigger name")?;
            self.advance();
            n
        } else {
            self.triggers += 1;
            (format!("trigger_{}", self.triggers), keyword)
        };
        let cond = self.sub_expr()?;
        let t = self.bump();
        let Tok::Str(message) = t.tok else {
            return Err(Box::new(
                Diagnostic::new(
                    t.span,
                    format!(
                        "expected the trigger's message (a string literal), found {}",
                        t.tok.describe()
                    ),
                )
                .with_hint("a trigger reads `trigger too_hot: temp > 30.0 \"temperature {temp}\"`"),
            ));
        };
        let message = self.message_exprs(&message, t.span, keyword)?;
        let (policy, labels) = self.alerting(&name)?;
        if !self.at_decl_start() {
            return Err(Box::new(
                Diagnostic::new(
                    self.span(),
                    format!(
                        "unexpected {} after the message of trigger `{}`",
                        self.peek().describe(),
                        short(&name)
                    ),
                )
                .with_hint(
                    "after its message a trigger may say `rising`, `resolve` and `every DURATION`, `severity NAME` and `label NAME = \"TEXT\"`, separated by commas",
                ),
            ));
        }
        let (cond, resolved) = self.desugar_alerting(&name, cond, policy, keyword);
        // The expressions written for the clauses are a few levels deep at
        // most (the condition they wrap is a stream's name in them).
        let made = self.ast.exprs.len();
        self.heights.resize(made, 4);
        self.push_decl(
            Decl::Trigger {
                name: name.clone(),
                name_span,
                cond,
                message: message.clone(),
                message_span: t.span,
                labels: labels.clone(),
            },
            keyword,
        );
        if let Some(resolved) = resolved {
            self.push_generated(
                Decl::Trigger {
                    name: format!("{name}{RESOLVED}"),
                    name_span,
                    cond: resolved,
                    message,
                    message_span: t.span,
                    labels,
                },
                keyword,
            );
        }
        Ok(())
    }

    /// A trigger's message with every placeholder that is an expression
    /// (`{x * 2:.1}`, not a stream's name) made a stream's name: an aux
    /// stream named by the expression's text, defined by it, declared once
    /// however many messages write it. (See `lang::message` for the
    /// placeholders' format.)
    fn message_exprs(&mut self, message: &str, at: Span, decl: Span) -> PResult<String> {
        let mut out = String::with_capacity(message.len());
        let mut rest = message;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            if let Some(more) = after.strip_prefix('{') {
                out.push_str("{{");
                rest = more;
                continue;
            }
            // An unclosed brace is the checker's to report, with the rest.
            let Some(close) = after.find('}') else {
                out.push_str(&rest[open..]);
                return Ok(out);
            };
            let placeholder = &after[..close];
            let (expr, _) = crate::lang::message::Format::split(placeholder);
            let text = expr.trim();
            let is_name = text.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '#')
                && !text.is_empty()
                && !text.starts_with(|c: char| c.is_ascii_digit());
            if is_name {
                out.push('{');
                out.push_str(placeholder);
                out.push('}');
            } else {
                if !self.message_streams.contains(text) {
                    let e = self.placeholder_expr(text, at)?;
                    self.aux(text, None, e, decl);
                    self.message_streams.insert(text.to_string());
                }
                let spec = &placeholder[expr.len()..];
                out.push('{');
                out.push_str(text);
                out.push_str(spec);
                out.push('}');
            }
            rest = &after[close + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Parses a message placeholder's expression (`text`) into this
    /// specification's arena; its tokens and errors are located at the
    /// message (`at`).
    fn placeholder_expr(&mut self, text: &str, at: Span) -> PResult<ExprId> {
        let (mut toks, errs) = lex(text);
        if let Some(e) = errs.into_iter().next() {
            return Err(Box::new(Diagnostic::new(
                at,
                format!("in the message's placeholder `{{{}}}`: {}", short(text), e.message),
            )));
        }
        for t in &mut toks {
            t.span = at;
        }
        let toks = std::mem::replace(&mut self.toks, toks);
        let pos = std::mem::replace(&mut self.pos, 0);
        let parsed = (self.sub_expr())
            .map_err(|mut d| {
                d.message = format!(
                    "in the message's placeholder `{{{}}}`: {}",
                    short(text),
                    d.message
                );
                d
            })
            .and_then(|e| match self.peek() {
            Tok::Eof => Ok(e),
            other => Err(Box::new(Diagnostic::new(
                at,
                format!(
                    "in the message's placeholder `{{{}}}`: unexpected {} after the expression",
                    short(text),
                    other.describe()
                ),
            ))),
        });
        self.toks = toks;
        self.pos = pos;
        parsed
    }


    /// A trigger's alerting clauses after its message: `rising` (fire when
    /// the condition becomes true), `resolve` (also when it becomes false
    /// again), `every D` (at most one alert per `D` of time while true),
    /// `severity NAME` and `label NAME = "TEXT"` (labels its alerts carry),
    /// separated by commas.
    fn alerting(&mut self, name: &str) -> PResult<(Alerting, Vec<(String, String)>)> {
        let mut policy = Alerting::default();
        let mut labels: Vec<(String, String)> = Vec::new();
        let clause = |p: &Parser| match p.peek() {
            Tok::Ident(w) if p.peek_at(1) != &Tok::Assign => {
                matches!(
                    w.as_str(),
                    "rising" | "resolve" | "every" | "severity" | "label"
                )
            }
            _ => false,
        };
        while clause(self) {
            let t = self.bump();
            let Tok::Ident(word) = t.tok else {
                unreachable!("`clause` saw a word")
            };
            let seen = match word.as_str() {
                "rising" => std::mem::replace(&mut policy.rising, true),
                "resolve" => std::mem::replace(&mut policy.resolve, true),
                "severity" | "label" => {
                    let (label, value) = self.label(&word)?;
                    let seen = labels.iter().any(|(l, _)| *l == label);
                    if !seen && labels.len() == MAX_LABELS {
                        return Err(Box::new(Diagnostic::new(
                            t.span,
                            format!("trigger `{}` has more than {MAX_LABELS} labels", short(name)),
                        )));
                    }
                    labels.push((label, value));
                    seen
                }
                _ => {
                    let hint = "for example `every 5min`: at most one alert per 5 minutes while the condition holds";
                    let (ns, _) = self.duration(t.span, "re-alert interval", hint)?;
                    policy.every.replace(ns).is_some()
                }
            };
            if seen {
                return Err(Box::new(Diagnostic::new(
                    t.span,
                    format!("trigger `{}` says `{word}` twice", short(name)),
                )));
            }
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        Ok((policy, labels))
    }

    /// After `severity`: a name (`critical`), the label `severity`; after
    /// `label`: `NAME = "TEXT"`.
    fn label(&mut self, word: &str) -> PResult<(String, String)> {
        let hint = "for example `severity critical` or `label team = \"ops\"`";
        let t = self.bump();
        let Tok::Ident(first) = t.tok else {
            return Err(Box::new(
                Diagnostic::new(t.span, format!("expected a name after `{word}`")).with_hint(hint),
            ));
        };
        if word == "severity" {
            return Ok(("severity".to_string(), first));
        }
        self.expect(Tok::Assign, "`=` after the label's name")?;
        let v = self.bump();
        match v.tok {
            Tok::Str(text) => Ok((first, text)),
            _ => Err(Box::new(
                Diagnostic::new(v.span, format!("expected the text of label `{}`", short(&first)))
                    .with_hint(hint),
            )),
        }
    }

    /// A trigger's condition under its alerting clauses, as streams of the
    /// specification (so every tier, key and checkpoint carries their
    /// state): aux `N#cond` is the condition; `rising` fires where it is true
    /// and was not at the step before; `every D` keeps `N#next`, the time
    /// from which the next alert may fire, and `N#held`, the firings held
    /// back since the last alert, which the alert reports (`N#suppressed`);
    /// `resolve` is a second trigger, `N#resolved`, true where the
    /// condition was true at the step before and is not now. Returns the
    /// trigger's condition and the resolved one's.
    fn desugar_alerting(
        &mut self,
        name: &str,
        cond: ExprId,
        policy: Alerting,
        at: Span,
    ) -> (ExprId, Option<ExprId>) {
        if policy == Alerting::default() {
            return (cond, None);
        }
        let span = self.ast.expr(cond).span;
        let c = format!("{name}#cond");
        self.aux(&c, Some(Type::Bool), cond, at);
        let e = |ast: &mut Ast, kind: ExprKind| ast.push(kind, span);
        let ast = &mut self.ast;
        let name_of = |ast: &mut Ast, n: &str| ast.push(ExprKind::Name(n.to_string()), span);
        // `default(n[1], fallback)`.
        let before = |ast: &mut Ast, n: &str, fallback: ExprId| {
            let n = ast.push(ExprKind::Name(n.to_string()), span);
            let prev = ast.push(ExprKind::Offset(n, 1), span);
            ast.push(ExprKind::Call(Builtin::Default, vec![prev, fallback]), span)
        };
        let mut fire = name_of(ast, &c);
        if policy.rising {
            let no = e(ast, ExprKind::Bool(false));
            let was = before(ast, &c, no);
            let not_was = e(ast, ExprKind::Unary(UnOp::Not, was));
            fire = e(ast, ExprKind::Binary(BinOp::And, fire, not_was));
        }
        let resolved = policy.resolve.then(|| {
            let now = name_of(ast, &c);
            let not_now = e(ast, ExprKind::Unary(UnOp::Not, now));
            let no = e(ast, ExprKind::Bool(false));
            let was = before(ast, &c, no);
            e(ast, ExprKind::Binary(BinOp::And, not_now, was))
        });
        let Some(every) = policy.every else {
            return (fire, resolved);
        };
        // The firings `every` holds back are counted: `N#want` is where the
        // trigger would fire without it.
        let want = format!("{name}#want");
        self.aux(&want, Some(Type::Bool), fire, at);
        // Offsets of a stream inside an arm of its own `if` are the arm's
        // (as in the Trustworthiness Checker), so each stream's value at the
        // step before is an aux stream of its own: `N#wait`, the time from
        // which the next alert may fire, and `N#suppressed`, the firings
        // held back since the last alert.
        let ast = &mut self.ast;
        let (next, wait) = (format!("{name}#next"), format!("{name}#wait"));
        let time = |ast: &mut Ast| ast.push(ExprKind::Call(Builtin::Time, Vec::new()), span);
        let t = time(ast);
        let wait_expr = before(ast, &next, t);
        self.aux(&wait, Some(Type::Float), wait_expr, at);
        let ast = &mut self.ast;
        let t = time(ast);
        let w = name_of(ast, &wait);
        let due = ast.push(ExprKind::Binary(BinOp::Ge, t, w), span);
        let want_now = name_of(ast, &want);
        let fires = ast.push(ExprKind::Binary(BinOp::And, want_now, due), span);
        // `N#next = if N then time() + D else N#wait`.
        let n = name_of(ast, name);
        let t = time(ast);
        let d = ast.push(ExprKind::Float(every as f64 / 1e9), span);
        let then = ast.push(ExprKind::Binary(BinOp::Add, t, d), span);
        let keep = name_of(ast, &wait);
        let next_expr = ast.push(ExprKind::If(n, then, keep), span);
        self.aux(&next, Some(Type::Float), next_expr, at);
        // `N#held = if N then 0 else if N#want then N#suppressed + 1 else
        // N#suppressed`, and `N#suppressed = default(N#held[1], 0)`.
        let ast = &mut self.ast;
        let (held, suppressed) = (format!("{name}#held"), format!("{name}{SUPPRESSED}"));
        let zero = ast.push(ExprKind::Int(0), span);
        let before_held = before(ast, &held, zero);
        self.aux(&suppressed, Some(Type::Int), before_held, at);
        let ast = &mut self.ast;
        let prev = name_of(ast, &suppressed);
        let one = ast.push(ExprKind::Int(1), span);
        let more = ast.push(ExprKind::Binary(BinOp::Add, prev, one), span);
        let same = name_of(ast, &suppressed);
        let w = name_of(ast, &want);
        let counted = ast.push(ExprKind::If(w, more, same), span);
        let n = name_of(ast, name);
        let zero = ast.push(ExprKind::Int(0), span);
        let held_expr = ast.push(ExprKind::If(n, zero, counted), span);
        self.aux(&held, Some(Type::Int), held_expr, at);
        (fires, resolved)
    }

    /// Declares and defines aux stream `name: ty = expr` (a trigger's
    /// alerting state; a message's expression, its type inferred).
    fn aux(&mut self, name: &str, ty: Option<Type>, expr: ExprId, at: Span) {
        self.push_generated(
            Decl::Stream {
                kind: DeclKind::Aux,
                name: name.to_string(),
                name_span: at,
                ty: ty.map(|t| (t, at)),
                period: None,
                policies: Vec::new(),
            },
            at,
        );
        self.push_generated(
            Decl::Def {
                name: name.to_string(),
                name_span: at,
                expr,
            },
            at,
        );
    }

    /// `push_decl` of a declaration written for another one (see
    /// `Ast::generated`).
    fn push_generated(&mut self, decl: Decl, at: Span) {
        self.push_decl(decl, at);
        if let Some(g) = self.ast.generated.last_mut() {
            *g = true;
        }
    }
}
