//! The DSRV parser: tokens to the arena AST, with error recovery at declaration boundaries.
//!
//! Grammar, lowest to highest precedence (DESIGN §2):
//!
//! ```text
//! spec   := decl*
//! decl   := ("in" | "out" | "aux" | "var") NAME (":" TYPE)?  |  NAME "=" expr
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

use super::ast::*;
use super::diag::{Diagnostic, Span};
use super::lexer::{Tok, Token, lex};
use super::types::Type;

/// Parses a whole specification. Returns the AST (possibly partial) and every
/// lexical and syntax error found.
pub fn parse(src: &str) -> (Ast, Vec<Diagnostic>) {
    let (tokens, mut errors) = lex(src);
    let mut p = Parser {
        toks: tokens,
        pos: 0,
        ast: Ast::default(),
        errors: Vec::new(),
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
    toks: Vec<Token>,
    pos: usize,
    ast: Ast,
    errors: Vec<Diagnostic>,
}

type PResult<T> = Result<T, Diagnostic>;

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

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == tok {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: Tok, what: &str) -> PResult<Span> {
        if self.peek() == &tok {
            Ok(self.bump().span)
        } else {
            Err(Diagnostic::new(
                self.span(),
                format!("expected {what}, found {}", self.peek().describe()),
            ))
        }
    }

    fn at_decl_start(&self) -> bool {
        match self.peek() {
            Tok::KwIn | Tok::KwOut | Tok::KwAux | Tok::Eof => true,
            Tok::Ident(_) => self.peek_at(1) == &Tok::Assign,
            _ => false,
        }
    }

    fn spec(&mut self) {
        while self.peek() != &Tok::Eof {
            let start = self.pos;
            if let Err(d) = self.decl() {
                self.errors.push(d);
                // Skip to the next declaration so later errors are found too.
                if self.pos == start {
                    self.bump();
                }
                while !self.at_decl_start() {
                    self.bump();
                }
            }
        }
    }

    fn decl(&mut self) -> PResult<()> {
        let kind = match self.peek() {
            Tok::KwIn => Some(DeclKind::Input),
            Tok::KwOut => Some(DeclKind::Output),
            Tok::KwAux => Some(DeclKind::Aux),
            _ => None,
        };
        if let Some(kind) = kind {
            self.bump();
            let (name, name_span) = self.name("a stream name")?;
            let ty = if self.eat(&Tok::Colon) {
                let t = self.bump();
                match &t.tok {
                    Tok::Ident(n) => match Type::from_name(n) {
                        Some(ty) => Some((ty, t.span)),
                        None => {
                            return Err(Diagnostic::new(t.span, format!("unknown type `{n}`"))
                                .with_hint("types are Int, Float, Bool, Str, Unit and Any"));
                        }
                    },
                    other => {
                        return Err(Diagnostic::new(
                            t.span,
                            format!("expected a type, found {}", other.describe()),
                        ));
                    }
                }
            } else {
                None
            };
            self.ast.decls.push(Decl::Stream {
                kind,
                name,
                name_span,
                ty,
            });
            return Ok(());
        }
        let (name, name_span) = match self.peek() {
            Tok::Ident(_) => self.name("a definition")?,
            other => {
                return Err(Diagnostic::new(
                    self.span(),
                    format!(
                        "expected a declaration or a definition, found {}",
                        other.describe()
                    ),
                )
                .with_hint(
                    "declarations look like `in x: Int` or `out y`; definitions like `y = x + 1`",
                ));
            }
        };
        self.expect(Tok::Assign, "`=` after the stream name")?;
        let expr = self.expr()?;
        if !self.at_decl_start() {
            return Err(Diagnostic::new(
                self.span(),
                format!(
                    "unexpected {} after the definition of `{name}`",
                    self.peek().describe()
                ),
            )
            .with_hint("an `if` inside an operator must be parenthesised"));
        }
        self.ast.decls.push(Decl::Def {
            name,
            name_span,
            expr,
        });
        Ok(())
    }

    fn name(&mut self, what: &str) -> PResult<(String, Span)> {
        match self.peek().clone() {
            Tok::Ident(n) => {
                let s = self.bump().span;
                Ok((n, s))
            }
            other => Err(Diagnostic::new(
                self.span(),
                format!("expected {what}, found {}", other.describe()),
            )),
        }
    }

    fn expr(&mut self) -> PResult<ExprId> {
        if self.peek() == &Tok::KwIf {
            let start = self.bump().span;
            let c = self.expr()?;
            self.expect(Tok::KwThen, "`then`")?;
            let a = self.expr()?;
            self.expect(Tok::KwElse, "`else`")?;
            let b = self.expr()?;
            let span = start.to(self.ast.expr(b).span);
            return Ok(self.ast.push(ExprKind::If(c, a, b), span));
        }
        self.binary(0)
    }

    /// Precedence climbing over the binary operator levels, all left-associative.
    fn binary(&mut self, level: usize) -> PResult<ExprId> {
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
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut lhs = self.binary(level + 1)?;
        loop {
            let Some(&(_, op)) = LEVELS[level].iter().find(|(t, _)| t == self.peek()) else {
                return Ok(lhs);
            };
            self.bump();
            let rhs = self.binary(level + 1)?;
            let span = self.ast.expr(lhs).span.to(self.ast.expr(rhs).span);
            lhs = self.ast.push(ExprKind::Binary(op, lhs, rhs), span);
        }
    }

    fn unary(&mut self) -> PResult<ExprId> {
        let op = match self.peek() {
            Tok::Minus => UnOp::Neg,
            Tok::Bang => UnOp::Not,
            Tok::KwIf => {
                return Err(Diagnostic::new(
                    self.span(),
                    "`if` must be parenthesised when it is an operand",
                )
                .with_hint("write `(if c then a else b)`"));
            }
            _ => return self.postfix(),
        };
        let start = self.bump().span;
        // `-9223372036854775808` is the one literal that only exists negated.
        if op == UnOp::Neg
            && let Tok::BigInt(text) = self.peek().clone()
            && text == "9223372036854775808"
            && self.peek_at(1) != &Tok::LBracket
        {
            let span = start.to(self.bump().span);
            return Ok(self.ast.push(ExprKind::Int(i64::MIN), span));
        }
        let operand = self.unary()?;
        let span = start.to(self.ast.expr(operand).span);
        Ok(self.ast.push(ExprKind::Unary(op, operand), span))
    }

    fn postfix(&mut self) -> PResult<ExprId> {
        let (mut base, offsettable) = self.atom()?;
        while self.peek() == &Tok::LBracket {
            self.bump();
            if !offsettable {
                return Err(Diagnostic::new(
                    self.ast.expr(base).span,
                    "an offset needs a name, a literal or a parenthesised expression before `[`",
                )
                .with_hint("parenthesise the expression: `(default(x, 0))[1]`"));
            }
            let t = self.bump();
            let n = match t.tok {
                Tok::Int(n) if n >= 0 && n <= u32::MAX as i64 => n as u32,
                Tok::Minus => {
                    return Err(Diagnostic::new(
                        t.span,
                        "negative offsets (future values) are not supported",
                    )
                    .with_hint("offsets look back in time: `x[1]` is the previous value of `x`"));
                }
                other => {
                    return Err(Diagnostic::new(
                        t.span,
                        format!(
                            "expected an offset (an integer literal >= 0), found {}",
                            other.describe()
                        ),
                    ));
                }
            };
            let close = self.expect(Tok::RBracket, "`]`")?;
            let span = self.ast.expr(base).span.to(close);
            base = self.ast.push(ExprKind::Offset(base, n), span);
        }
        Ok(base)
    }

    /// Parses an atom; the flag says whether an offset may follow it.
    fn atom(&mut self) -> PResult<(ExprId, bool)> {
        // A declaration keyword cannot start an expression: leave it for the
        // recovery in `spec` so that the declaration itself is still parsed.
        if matches!(self.peek(), Tok::KwIn | Tok::KwOut | Tok::KwAux | Tok::Eof) {
            return Err(Diagnostic::new(
                self.span(),
                format!("expected an expression, found {}", self.peek().describe()),
            ));
        }
        let t = self.bump();
        let span = t.span;
        let kind = match t.tok {
            Tok::Int(i) => ExprKind::Int(i),
            Tok::BigInt(text) => {
                return Err(Diagnostic::new(
                    span,
                    format!("integer literal `{text}` does not fit in a 64-bit signed integer"),
                )
                .with_hint("Int values range from -9223372036854775808 to 9223372036854775807; write a Float with a dot"));
            }
            Tok::Float(f) => ExprKind::Float(f),
            Tok::KwTrue => ExprKind::Bool(true),
            Tok::KwFalse => ExprKind::Bool(false),
            Tok::Str(s) => ExprKind::Str(s.into()),
            Tok::LParen => {
                if self.peek() == &Tok::RParen {
                    let end = self.bump().span;
                    return Ok((self.ast.push(ExprKind::Unit, span.to(end)), true));
                }
                let inner = self.expr()?;
                let end = self.expect(Tok::RParen, "`)`")?;
                // Keep the parenthesised span so carets cover the parentheses.
                self.ast.exprs[inner.index()].span = span.to(end);
                return Ok((inner, true));
            }
            Tok::Ident(name) => {
                if self.peek() == &Tok::LParen {
                    return self.call(name, span).map(|e| (e, false));
                }
                ExprKind::Name(name)
            }
            other => {
                return Err(Diagnostic::new(
                    span,
                    format!("expected an expression, found {}", other.describe()),
                ));
            }
        };
        Ok((self.ast.push(kind, span), true))
    }

    fn call(&mut self, name: String, name_span: Span) -> PResult<ExprId> {
        let Some(builtin) = Builtin::from_name(&name) else {
            return Err(Diagnostic::new(name_span, format!("unknown function `{name}`"))
                .with_hint("the builtins are default, is_defined, when, init, latch, update, sin, cos, tan, abs, sqrt, min, max, floor and ceil"));
        };
        self.expect(Tok::LParen, "`(`")?;
        let mut args = Vec::new();
        if self.peek() != &Tok::RParen {
            loop {
                args.push(self.expr()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        let end = self.expect(Tok::RParen, "`,` or `)`")?;
        let span = name_span.to(end);
        if args.len() != builtin.arity() {
            let plural = if builtin.arity() == 1 { "" } else { "s" };
            return Err(Diagnostic::new(
                span,
                format!(
                    "`{name}` takes {} argument{plural}, found {}",
                    builtin.arity(),
                    args.len()
                ),
            ));
        }
        Ok(self.ast.push(ExprKind::Call(builtin, args), span))
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
            ExprKind::Call(b, args) => format!(
                "{}({})",
                b.name(),
                args.iter()
                    .map(|a| show(ast, *a))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
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
                "unknown function `foo`",
                "negative offsets (future values) are not supported",
                "integer literal `99999999999999999999` does not fit in a 64-bit signed integer",
            ]
        );
    }
}
