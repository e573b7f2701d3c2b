//! The DSRV lexer: source text to tokens with byte spans; comments are skipped.

use super::diag::{Diagnostic, Span, short, show_char};

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    /// An integer literal that fits in i64.
    Int(i64),
    /// An integer literal too large for i64, kept as text so that
    /// `-9223372036854775808` can still be written.
    BigInt(String),
    Float(f64),
    Str(String),
    KwIn,
    KwOut,
    KwAux,
    KwTrigger,
    KwIf,
    KwThen,
    KwElse,
    KwTrue,
    KwFalse,
    Colon,
    Assign,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Lt,
    Comma,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Bang,
    AndAnd,
    OrOr,
    Implies,
    EqEq,
    NotEq,
    Le,
    Gt,
    Ge,
    Concat,
    /// `@`, before a periodic stream's period.
    At,
    /// `\`, before a lambda's parameters.
    Backslash,
    /// `->`, before a lambda's body.
    Arrow,
    /// `.`, in `List.append` and `e.field`.
    Dot,
    LBrace,
    RBrace,
    Eof,
}

impl Tok {
    /// How the token is named in "expected …, found …" messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(n) => format!("name `{}`", short(n)),
            Tok::Int(i) => format!("integer `{i}`"),
            Tok::BigInt(s) => format!("integer `{}`", short(s)),
            Tok::Float(f) => format!("float `{f:?}`"),
            Tok::Str(_) => "string literal".into(),
            Tok::Eof => "end of file".into(),
            other => format!("`{}`", other.text()),
        }
    }

    fn text(&self) -> &'static str {
        match self {
            Tok::KwIn => "in",
            Tok::KwOut => "out",
            Tok::KwAux => "aux",
            Tok::KwTrigger => "trigger",
            Tok::KwIf => "if",
            Tok::KwThen => "then",
            Tok::KwElse => "else",
            Tok::KwTrue => "true",
            Tok::KwFalse => "false",
            Tok::Colon => ":",
            Tok::Assign => "=",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::Lt => "<",
            Tok::Comma => ",",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::Bang => "!",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            Tok::Implies => "=>",
            Tok::EqEq => "==",
            Tok::NotEq => "!=",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::Concat => "++",
            Tok::At => "@",
            Tok::Backslash => "\\",
            Tok::Arrow => "->",
            Tok::Dot => ".",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            _ => "?",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// Splits `src` into tokens, ending with `Eof`. Lexical errors are collected
/// and lexing goes on, so that one bad character does not hide later errors.
pub fn lex(src: &str) -> (Vec<Token>, Vec<Diagnostic>) {
    let bytes = src.as_bytes();
    let mut toks = Vec::new();
    let mut errs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'(' && bytes.get(i + 1) == Some(&b'*') {
            match src[i + 2..].find("*)") {
                Some(end) => i = i + 2 + end + 2,
                None => {
                    errs.push(
                        Diagnostic::new(Span::new(i, i + 2), "unterminated block comment")
                            .with_hint("close it with `*)`"),
                    );
                    i = bytes.len();
                }
            }
            continue;
        }
        let simple = |t: Tok, len: usize| (t, len);
        let two = bytes.get(i + 1).copied();
        let punct = match (c, two) {
            (b'&', Some(b'&')) => Some(simple(Tok::AndAnd, 2)),
            (b'|', Some(b'|')) => Some(simple(Tok::OrOr, 2)),
            (b'=', Some(b'>')) => Some(simple(Tok::Implies, 2)),
            (b'=', Some(b'=')) => Some(simple(Tok::EqEq, 2)),
            (b'!', Some(b'=')) => Some(simple(Tok::NotEq, 2)),
            (b'<', Some(b'=')) => Some(simple(Tok::Le, 2)),
            (b'>', Some(b'=')) => Some(simple(Tok::Ge, 2)),
            (b'+', Some(b'+')) => Some(simple(Tok::Concat, 2)),
            (b'-', Some(b'>')) => Some(simple(Tok::Arrow, 2)),
            (b'=', _) => Some(simple(Tok::Assign, 1)),
            (b'!', _) => Some(simple(Tok::Bang, 1)),
            (b'<', _) => Some(simple(Tok::Lt, 1)),
            (b'>', _) => Some(simple(Tok::Gt, 1)),
            (b'+', _) => Some(simple(Tok::Plus, 1)),
            (b'-', _) => Some(simple(Tok::Minus, 1)),
            (b'*', _) => Some(simple(Tok::Star, 1)),
            (b'/', _) => Some(simple(Tok::Slash, 1)),
            (b'%', _) => Some(simple(Tok::Percent, 1)),
            (b':', _) => Some(simple(Tok::Colon, 1)),
            (b'(', _) => Some(simple(Tok::LParen, 1)),
            (b')', _) => Some(simple(Tok::RParen, 1)),
            (b'[', _) => Some(simple(Tok::LBracket, 1)),
            (b']', _) => Some(simple(Tok::RBracket, 1)),
            (b',', _) => Some(simple(Tok::Comma, 1)),
            (b'@', _) => Some(simple(Tok::At, 1)),
            (b'\\', _) => Some(simple(Tok::Backslash, 1)),
            (b'.', _) => Some(simple(Tok::Dot, 1)),
            (b'{', _) => Some(simple(Tok::LBrace, 1)),
            (b'}', _) => Some(simple(Tok::RBrace, 1)),
            _ => None,
        };
        if let Some((tok, len)) = punct {
            i += len;
            toks.push(Token {
                tok,
                span: Span::new(start, i),
            });
            continue;
        }
        if c.is_ascii_digit() {
            let (tok, end, err) = lex_number(src, i);
            if let Some(e) = err {
                errs.push(e);
            }
            i = end;
            toks.push(Token {
                tok,
                span: Span::new(start, i),
            });
            continue;
        }
        if c == b'"' {
            let (tok, end, err) = lex_string(src, i);
            if let Some(e) = err {
                errs.push(e);
            }
            i = end;
            toks.push(Token {
                tok,
                span: Span::new(start, i),
            });
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &src[start..i];
            let tok = match word {
                "in" => Tok::KwIn,
                "out" => Tok::KwOut,
                "aux" | "var" => Tok::KwAux,
                "trigger" => Tok::KwTrigger,
                "if" => Tok::KwIf,
                "then" => Tok::KwThen,
                "else" => Tok::KwElse,
                "true" => Tok::KwTrue,
                "false" => Tok::KwFalse,
                _ => Tok::Ident(word.to_string()),
            };
            toks.push(Token {
                tok,
                span: Span::new(start, i),
            });
            continue;
        }
        // An unknown character: report it once and skip it whole (it may be
        // a multi-byte character).
        let ch = src[i..].chars().next().unwrap_or('?');
        let len = ch.len_utf8();
        errs.push(Diagnostic::new(
            Span::new(i, i + len),
            format!("unexpected character `{}`", show_char(ch)),
        ));
        i += len;
    }
    toks.push(Token {
        tok: Tok::Eof,
        span: Span::new(src.len(), src.len()),
    });
    (toks, errs)
}

/// Lexes `123`, `1.`, `2.5`, `2.5e3`, `1e-3`. A float needs a dot or an
/// exponent; an integer that does not fit i64 becomes `BigInt`.
fn lex_number(src: &str, start: usize) -> (Tok, usize, Option<Diagnostic>) {
    let bytes = src.as_bytes();
    let mut i = start;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let mut is_float = false;
    if i < bytes.len() && bytes[i] == b'.' {
        is_float = true;
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        let mut j = i + 1;
        if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
            j += 1;
        }
        if j < bytes.len() && bytes[j].is_ascii_digit() {
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                j += 1;
            }
            is_float = true;
            i = j;
        }
    }
    let text = &src[start..i];
    if is_float {
        match text.parse::<f64>() {
            // A decimal literal too large for f64 parses as infinity: that
            // is not the number written (underflow to 0 is, rounded).
            Ok(f) if f.is_infinite() => (
                Tok::Float(0.0),
                i,
                Some(
                    Diagnostic::new(
                        Span::new(start, i),
                        format!(
                            "float literal `{}` does not fit in Float (64 bits)",
                            short(text)
                        ),
                    )
                    .with_hint("Float values range up to about 1.8e308"),
                ),
            ),
            Ok(f) => (Tok::Float(f), i, None),
            Err(_) => (
                Tok::Float(0.0),
                i,
                Some(Diagnostic::new(
                    Span::new(start, i),
                    format!("invalid float literal `{text}`"),
                )),
            ),
        }
    } else {
        match text.parse::<i64>() {
            Ok(v) => (Tok::Int(v), i, None),
            Err(_) => (Tok::BigInt(text.to_string()), i, None),
        }
    }
}

/// Lexes a double-quoted string with the escapes `\"`, `\\`, `\n`, `\t`.
fn lex_string(src: &str, start: usize) -> (Tok, usize, Option<Diagnostic>) {
    let mut out = String::new();
    let mut chars = src[start + 1..].char_indices();
    while let Some((off, ch)) = chars.next() {
        let pos = start + 1 + off;
        match ch {
            '"' => return (Tok::Str(out), pos + 1, None),
            '\n' => break,
            '\\' => match chars.next() {
                Some((_, '"')) => out.push('"'),
                Some((_, '\\')) => out.push('\\'),
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((o2, other)) => {
                    let end = start + 1 + o2 + other.len_utf8();
                    return (
                        Tok::Str(out),
                        end,
                        Some(Diagnostic::new(
                            Span::new(pos, end),
                            format!("unknown escape `\\{other}` in string literal"),
                        )),
                    );
                }
                None => break,
            },
            c => out.push(c),
        }
    }
    let end = src[start..].find('\n').map_or(src.len(), |i| start + i);
    (
        Tok::Str(out),
        end,
        Some(
            Diagnostic::new(Span::new(start, start + 1), "unterminated string literal")
                .with_hint("close the string with `\"` on the same line"),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        let (t, e) = lex(src);
        assert!(e.is_empty(), "{e:?}");
        t.into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn lexes_operators_and_comments() {
        assert_eq!(
            toks("a => b // c\n(* x *) != ++ <= 1. 2.5e3 3"),
            vec![
                Tok::Ident("a".into()),
                Tok::Implies,
                Tok::Ident("b".into()),
                Tok::NotEq,
                Tok::Concat,
                Tok::Le,
                Tok::Float(1.0),
                Tok::Float(2500.0),
                Tok::Int(3),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn big_integers_are_kept_as_text() {
        assert_eq!(
            toks("9223372036854775808")[0],
            Tok::BigInt("9223372036854775808".into())
        );
    }

    #[test]
    fn float_literals_that_overflow_are_errors() {
        let (t, e) = lex("1e400 1e-400 1.7976931348623157e308");
        let msgs: Vec<_> = e.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            msgs,
            ["float literal `1e400` does not fit in Float (64 bits)"]
        );
        assert_eq!(e[0].span, Span::new(0, 5));
        assert_eq!(t[1].tok, Tok::Float(0.0));
        assert_eq!(t[2].tok, Tok::Float(f64::MAX));
    }

    #[test]
    fn reports_bad_characters_and_unterminated_things() {
        let (_, e) = lex("a = $ \0 \"abc\n(* open");
        let msgs: Vec<_> = e.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "unexpected character `$`",
                "unexpected character `\\0`",
                "unterminated string literal",
                "unterminated block comment"
            ]
        );
    }
}
