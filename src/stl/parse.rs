//! The parser of STL property files as the Trustworthiness Checker reads them
//! (`--language mstlo`): one named formula per line, `name: formula`, `#` comments.
//!
//! The formula grammar is the `mstlo` crate's (0.1.1), loosest binding first:
//!
//! ```text
//! implies := or ( ("->" | "implies") implies )?          right-associative
//! or      := and ( ("||" | "or") and )*
//! and     := until ( ("&&" | "and") until )*
//! until   := unary ( ("U" | "until") interval unary )*
//! unary   := "!" unary | "not" unary | ("G" | "globally" | "F" | "eventually") interval "(" implies ")"
//!          | "true" | "false" | SIGNAL (">" | "<" | ">=" | "<=") (NUMBER | "$" NAME) | "(" implies ")"
//! interval:= "[" NUMBER "," NUMBER "]"                      seconds, 0 <= a <= b
//! ```
//!
//! A number is `-?digits(.digits)?` (no exponent). Every error is a located
//! [`Diagnostic`]; the parser recurses at most [`MAX_NESTING`] levels deep, so every later pass
//! may recurse over a formula.

use super::{Cmp, Formula, FormulaId, Property, SignalId, StlSpec, Threshold, VarId, Window};
use crate::lang::MAX_NESTING;
use crate::lang::diag::{Diagnostic, Diagnostics, Span};
use rustc_hash::FxHashMap;
use std::time::Duration;

/// The longest interval bound accepted, in seconds (about 31 years): far beyond any monitoring
/// horizon, and small enough that no sum of bounds and trace times overflows a `Duration`.
pub const MAX_BOUND_SECONDS: f64 = 1e9;

/// The names a file has given so far, looked up by hashing: a file of many properties or
/// signals (a hostile one of a million lines) parses in time linear in its size, where a scan
/// of the names at each mention made it quadratic (a 20,000-line file took 6 s).
#[derive(Default)]
struct Names {
    /// Each property's name, and the line it is defined on.
    properties: FxHashMap<String, usize>,
    signals: FxHashMap<String, SignalId>,
    vars: FxHashMap<String, VarId>,
}

/// The error of a property file that is not UTF-8: at its first bad byte, the file's text
/// shown with invalid bytes replaced (the text before them, which the span counts, is as read).
pub(super) fn not_utf8(file: &str, bytes: &[u8], e: &std::str::Utf8Error) -> Diagnostics {
    let at = e.valid_up_to();
    let len = e.error_len().unwrap_or(bytes.len() - at);
    let shown: Vec<String> = (bytes[at..at + len].iter())
        .map(|b| format!("0x{b:02X}"))
        .collect();
    let what = match e.error_len() {
        Some(_) => format!("invalid byte {}", shown.join(" ")),
        None => format!("incomplete character {} at the end", shown.join(" ")),
    };
    Diagnostics {
        file: file.to_string(),
        source: String::from_utf8_lossy(bytes).into_owned(),
        errors: vec![
            Diagnostic::new(
                Span::new(at, at + 1),
                format!("the property file is not valid UTF-8: {what}"),
            )
            .with_hint("save the property file as UTF-8"),
        ],
    }
}

/// Parses a property file. Properties are kept in name order, the order the checker runs and
/// prints them in.
pub(super) fn parse_file(file: &str, source: &str) -> Result<StlSpec, Diagnostics> {
    // A leading byte-order mark is no part of the first name: it is dropped, as a DSRV
    // specification's is (`lang::parse_and_check`), and spans count from after it.
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    if u32::try_from(source.len()).is_err() {
        // Spans are 32-bit byte offsets: past 4 GiB a location would wrap around.
        return Err(Diagnostics {
            file: file.to_string(),
            source: String::new(),
            errors: vec![Diagnostic::new(
                Span::new(0, 0),
                "the property file is larger than 4 GiB",
            )],
        });
    }
    let mut spec = StlSpec {
        file: file.to_string(),
        source: source.to_string(),
        properties: Vec::new(),
        formulas: Vec::new(),
        signals: Vec::new(),
        vars: Vec::new(),
        heights: Vec::new(),
    };
    let mut errors = Vec::new();
    let mut names = Names::default();
    let mut offset = 0;
    for (line_number, raw) in source.split_inclusive('\n').enumerate() {
        let line_start = offset;
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        let content = line.split_once('#').map_or(line, |(before, _)| before);
        if content.trim().is_empty() {
            continue;
        }
        let Some(colon) = content.find(':') else {
            let start = line_start + (content.len() - content.trim_start().len());
            errors.push(
                Diagnostic::new(
                    Span::new(start, line_start + content.trim_end().len()),
                    "a property line is `name: formula`",
                )
                .with_hint("for example `safe: G[0,2](x > 3)`"),
            );
            continue;
        };
        let name_text = &content[..colon];
        let name = name_text.trim();
        let name_start = line_start + (name_text.len() - name_text.trim_start().len());
        let name_span = Span::new(name_start, name_start + name.len());
        if name.is_empty() {
            errors.push(Diagnostic::new(
                Span::new(line_start + colon, line_start + colon + 1),
                "the property has no name before `:`",
            ));
            continue;
        }
        if let Some(first) = names.properties.get(name) {
            errors.push(Diagnostic::new(
                name_span,
                format!("the property `{name}` is defined twice (first on line {first})"),
            ));
            continue;
        }
        let mut parser = Parser {
            text: &content[colon + 1..],
            base: line_start + colon + 1,
            pos: 0,
            depth: 0,
            spec: &mut spec,
            names: &mut names,
        };
        match parser.formula_whole() {
            Ok(root) => {
                names.properties.insert(name.to_string(), line_number + 1);
                spec.properties.push(Property {
                    name: name.to_string(),
                    root,
                })
            }
            Err(d) => errors.push(d),
        }
    }
    if errors.is_empty() && spec.properties.is_empty() {
        errors.push(Diagnostic::new(
            Span::new(0, 0),
            "the property file defines no property",
        ));
    }
    if !errors.is_empty() {
        return Err(Diagnostics {
            file: file.to_string(),
            source: source.to_string(),
            errors,
        });
    }
    spec.properties.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(spec)
}

struct Parser<'a> {
    /// The formula's text (the line after the colon, comment removed).
    text: &'a str,
    /// Where `text` starts in the file.
    base: usize,
    pos: usize,
    /// How many nested calls of `unary` and `primary` are open.
    depth: usize,
    spec: &'a mut StlSpec,
    names: &'a mut Names,
}

type Parsed<T> = Result<T, Diagnostic>;

impl<'a> Parser<'a> {
    fn span(&self, from: usize, to: usize) -> Span {
        Span::new(self.base + from, self.base + to)
    }

    fn error_here(&self, message: impl Into<String>) -> Diagnostic {
        let end = self.pos + self.peek().map_or(0, char::len_utf8);
        Diagnostic::new(self.span(self.pos, end), message)
    }

    fn skip_spaces(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    /// Adds a formula to the arena, refusing one taller than `MAX_NESTING` (a chain like
    /// `a && b && …` grows without recursing in the parser, but every later pass recurses).
    fn push(&mut self, f: Formula, from: usize) -> Parsed<FormulaId> {
        let height = 1 + f
            .children()
            .map(|c| self.spec.heights[c.0 as usize])
            .max()
            .unwrap_or(0);
        let span = self.span(from, self.pos);
        if height > MAX_NESTING {
            return Err(Diagnostic::new(
                span,
                format!("the formula nests deeper than {MAX_NESTING} levels"),
            ));
        }
        let id = FormulaId(self.spec.formulas.len() as u32);
        self.spec.formulas.push((f, span));
        self.spec.heights.push(height);
        Ok(id)
    }

    fn formula_whole(&mut self) -> Parsed<FormulaId> {
        self.skip_spaces();
        if self.pos == self.text.len() {
            return Err(self.error_here("the property has no formula after `:`"));
        }
        let f = self.implies()?;
        self.skip_spaces();
        if self.pos < self.text.len() {
            return Err(self.error_here(format!(
                "unexpected `{}` after the formula",
                crate::lang::diag::short(self.rest().trim_end())
            )));
        }
        Ok(f)
    }

    /// Consumes `word` if it is next and not the start of a longer name.
    fn keyword(&mut self, word: &str) -> bool {
        self.skip_spaces();
        let rest = self.rest();
        if rest.starts_with(word)
            && rest[word.len()..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_alphanumeric() && c != '_')
        {
            self.pos += word.len();
            return true;
        }
        false
    }

    fn symbol(&mut self, s: &str) -> bool {
        self.skip_spaces();
        if self.rest().starts_with(s) {
            self.pos += s.len();
            return true;
        }
        false
    }

    fn expect(&mut self, c: char) -> Parsed<()> {
        self.skip_spaces();
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error_here(match self.peek() {
                Some(found) => format!("expected `{c}`, found `{found}`"),
                None => format!("expected `{c}`, found the end of the line"),
            }))
        }
    }

    fn implies(&mut self) -> Parsed<FormulaId> {
        self.enter()?;
        self.skip_spaces();
        let from = self.pos;
        let left = self.or()?;
        let result = if self.symbol("->") || self.keyword("implies") {
            let right = self.implies()?;
            self.push(Formula::Implies(left, right), from)
        } else {
            Ok(left)
        };
        self.depth -= 1;
        result
    }

    fn or(&mut self) -> Parsed<FormulaId> {
        self.skip_spaces();
        let from = self.pos;
        let mut left = self.and()?;
        while self.symbol("||") || self.keyword("or") {
            let right = self.and()?;
            left = self.push(Formula::Or(left, right), from)?;
        }
        Ok(left)
    }

    fn and(&mut self) -> Parsed<FormulaId> {
        self.skip_spaces();
        let from = self.pos;
        let mut left = self.until()?;
        while self.symbol("&&") || self.keyword("and") {
            let right = self.until()?;
            left = self.push(Formula::And(left, right), from)?;
        }
        Ok(left)
    }

    fn until(&mut self) -> Parsed<FormulaId> {
        self.skip_spaces();
        let from = self.pos;
        let mut left = self.unary()?;
        loop {
            self.skip_spaces();
            if self.rest().starts_with("U[") {
                self.pos += 1;
            } else if self.rest().starts_with("until[") {
                self.pos += 5;
            } else {
                break;
            }
            let window = self.interval()?;
            let right = self.unary()?;
            left = self.push(Formula::Until(window, left, right), from)?;
        }
        Ok(left)
    }

    /// Counts one level of recursion, refusing to go past `MAX_NESTING`.
    fn enter(&mut self) -> Parsed<()> {
        if self.depth >= MAX_NESTING {
            return Err(self.error_here(format!(
                "the formula nests deeper than {MAX_NESTING} levels"
            )));
        }
        self.depth += 1;
        Ok(())
    }

    fn unary(&mut self) -> Parsed<FormulaId> {
        self.enter()?;
        let result = self.unary_inner();
        self.depth -= 1;
        result
    }

    fn unary_inner(&mut self) -> Parsed<FormulaId> {
        self.skip_spaces();
        let from = self.pos;
        if self.peek() == Some('!') {
            self.pos += 1;
            let inner = self.unary()?;
            return self.push(Formula::Not(inner), from);
        }
        let Some(word) = self.identifier() else {
            return self.primary();
        };
        match word {
            "not" => {
                let inner = self.unary()?;
                self.push(Formula::Not(inner), from)
            }
            "G" | "globally" | "F" | "eventually" => {
                let window = self.interval()?;
                self.expect('(')?;
                let inner = self.implies()?;
                self.expect(')')?;
                let f = if matches!(word, "G" | "globally") {
                    Formula::Globally(window, inner)
                } else {
                    Formula::Eventually(window, inner)
                };
                self.push(f, from)
            }
            "true" => self.push(Formula::True, from),
            "false" => self.push(Formula::False, from),
            signal => {
                let signal = signal.to_string();
                self.comparison(signal, from)
            }
        }
    }

    fn comparison(&mut self, signal: String, from: usize) -> Parsed<FormulaId> {
        self.skip_spaces();
        let cmp = if self.symbol(">=") {
            Cmp::Ge
        } else if self.symbol("<=") {
            Cmp::Le
        } else if self.symbol(">") {
            Cmp::Gt
        } else if self.symbol("<") {
            Cmp::Lt
        } else {
            let message = match self.peek() {
                Some(c) => format!(
                    "expected a comparison (`>`, `<`, `>=`, `<=`) after the signal `{signal}`, found `{c}`"
                ),
                None => format!(
                    "expected a comparison (`>`, `<`, `>=`, `<=`) after the signal `{signal}`"
                ),
            };
            let d = self.error_here(message);
            return Err(if matches!(self.peek(), Some('=' | '!')) {
                d.with_hint("STL compares a signal with `>`, `<`, `>=` or `<=` only")
            } else {
                d
            });
        };
        self.skip_spaces();
        let threshold = if self.peek() == Some('$') {
            self.pos += 1;
            let Some(name) = self.identifier() else {
                return Err(self.error_here("expected a variable's name after `$`"));
            };
            let name = name.to_string();
            Threshold::Var(self.var_id(&name))
        } else {
            Threshold::Const(self.number()?)
        };
        let signal = self.signal_id(&signal);
        self.push(
            Formula::Compare {
                signal,
                cmp,
                threshold,
            },
            from,
        )
    }

    /// A signal's id, given in order of first mention.
    fn signal_id(&mut self, name: &str) -> SignalId {
        if let Some(&id) = self.names.signals.get(name) {
            return id;
        }
        let id = SignalId(self.spec.signals.len() as u32);
        self.spec.signals.push(name.to_string());
        self.names.signals.insert(name.to_string(), id);
        id
    }

    /// A variable's id, given in order of first mention.
    fn var_id(&mut self, name: &str) -> VarId {
        if let Some(&id) = self.names.vars.get(name) {
            return id;
        }
        let id = VarId(self.spec.vars.len() as u32);
        self.spec.vars.push(name.to_string());
        self.names.vars.insert(name.to_string(), id);
        id
    }

    fn primary(&mut self) -> Parsed<FormulaId> {
        self.skip_spaces();
        if self.peek() == Some('(') {
            self.pos += 1;
            let inner = self.implies()?;
            self.expect(')')?;
            return Ok(inner);
        }
        Err(self.error_here(match self.peek() {
            Some(c) => format!("expected a formula, found `{c}`"),
            None => "expected a formula, found the end of the line".to_string(),
        }))
    }

    /// A name: a letter or `_`, then letters, digits and `_`.
    fn identifier(&mut self) -> Option<&'a str> {
        self.skip_spaces();
        let rest = &self.text[self.pos..];
        let first = rest.chars().next()?;
        if !(first.is_alphabetic() || first == '_') {
            return None;
        }
        let len = rest
            .char_indices()
            .find(|&(_, c)| !(c.is_alphanumeric() || c == '_'))
            .map_or(rest.len(), |(i, _)| i);
        let start = self.pos;
        self.pos += len;
        Some(&self.text[start..start + len])
    }

    fn number(&mut self) -> Parsed<f64> {
        self.skip_spaces();
        let start = self.pos;
        let bytes = self.text.as_bytes();
        let mut end = start;
        if bytes.get(end) == Some(&b'-') {
            end += 1;
        }
        let digits = |mut i: usize| {
            while bytes.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        let int_end = digits(end);
        let mut has_digits = int_end > end;
        end = int_end;
        if bytes.get(end) == Some(&b'.') {
            let frac_end = digits(end + 1);
            has_digits |= frac_end > end + 1;
            end = frac_end;
        }
        if !has_digits {
            return Err(Diagnostic::new(
                self.span(start, start + self.peek().map_or(0, char::len_utf8)),
                "expected a number",
            ));
        }
        self.pos = end;
        self.text[start..end]
            .parse()
            .map_err(|_| Diagnostic::new(self.span(start, end), "this number cannot be read"))
    }

    fn bound(&mut self) -> Parsed<Duration> {
        self.skip_spaces();
        let from = self.pos;
        let v = self.number()?;
        let span = self.span(from, self.pos);
        if v < 0.0 {
            return Err(Diagnostic::new(
                span,
                "an interval bound must not be negative",
            ));
        }
        if v > MAX_BOUND_SECONDS {
            return Err(Diagnostic::new(
                span,
                format!("an interval bound is at most {MAX_BOUND_SECONDS:e} seconds"),
            ));
        }
        Duration::try_from_secs_f64(v)
            .map_err(|_| Diagnostic::new(span, "this interval bound cannot be a time"))
    }

    fn interval(&mut self) -> Parsed<Window> {
        self.skip_spaces();
        let from = self.pos;
        self.expect('[')?;
        let start = self.bound()?;
        self.expect(',')?;
        let end = self.bound()?;
        self.expect(']')?;
        if start > end {
            return Err(Diagnostic::new(
                self.span(from, self.pos),
                format!(
                    "the interval's start ({}) is after its end ({})",
                    start.as_secs_f64(),
                    end.as_secs_f64()
                ),
            ));
        }
        Ok(Window { start, end })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> String {
        let spec = parse_file("p.mstlo", &format!("p: {text}\n")).unwrap();
        spec.show(spec.properties[0].root)
    }

    fn error(text: &str) -> String {
        parse_file("p.mstlo", text).unwrap_err().render()
    }

    #[test]
    fn precedence_is_mstlos() {
        assert_eq!(
            shown("x > 1 && y < 2 || z > 3"),
            "((x > 1 && y < 2) || z > 3)"
        );
        assert_eq!(
            shown("a > 1 -> b > 1 -> c > 1"),
            "(a > 1 -> (b > 1 -> c > 1))"
        );
        assert_eq!(
            shown("x > 1 U[0,2] y < 1 && z > 0"),
            "((x > 1 U[0,2] y < 1) && z > 0)"
        );
        assert_eq!(shown("!(x >= 3)"), "!(x >= 3)");
        assert_eq!(
            shown("G[0, 2.5](F[1,1](x <= $t))"),
            "G[0,2.5](F[1,1](x <= $t))"
        );
        assert_eq!(
            shown("not x > 1 and true or false"),
            "((!(x > 1) && true) || false)"
        );
    }

    #[test]
    fn properties_are_sorted_and_comments_dropped() {
        let spec =
            parse_file("p.mstlo", "b: x > 1 # note\n# only a comment\n\na: y < 2\n").unwrap();
        let names: Vec<_> = spec.properties.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(spec.signals, ["x", "y"]);
    }

    #[test]
    fn errors_are_located() {
        assert!(error("p: G[2,1](x > 3)\n").contains("p.mstlo:1:5"));
        assert!(error("ok: x > 1\nbad x > 1\n").contains("p.mstlo:2:1"));
        assert!(error("p: x == 1\n").contains("found `=`"));
        assert!(error("p: x > 1\np: x > 2\n").contains("defined twice (first on line 1)"));
        assert!(error("p: G[-1,2](x > 1)\n").contains("must not be negative"));
        assert!(error("p: G[0,99999999999](x > 1)\n").contains("at most"));
        assert!(error("p: (x > 1\n").contains("expected `)`"));
        assert!(error("p: x > 1 )\n").contains("unexpected `)`"));
        assert!(error("# nothing\n").contains("defines no property"));
    }

    #[test]
    fn bytes_that_are_not_utf8_are_located() {
        let e = StlSpec::parse_bytes("p.mstlo", b"# fine\np: x \xff> 1\n").unwrap_err();
        assert_eq!(e.errors.len(), 1);
        assert_eq!(
            e.errors[0].message,
            "the property file is not valid UTF-8: invalid byte 0xFF"
        );
        assert!(e.render().contains("p.mstlo:2:6"), "{}", e.render());
        let cut = StlSpec::parse_bytes("p.mstlo", b"p: x > 1 # caf\xc3").unwrap_err();
        assert!(
            cut.errors[0]
                .message
                .contains("incomplete character 0xC3 at the end")
        );
        assert!(StlSpec::parse_bytes("p.mstlo", b"p: x > 1\n").is_ok());
    }

    /// Regression: a byte-order mark (which some editors write) was read as the start of the
    /// first property's name, so that its verdicts were named `\u{feff}p`.
    #[test]
    fn a_leading_byte_order_mark_is_ignored() {
        let spec = parse_file("p.mstlo", "\u{feff}p: x > 1\r\nq: x < 2\r\n").unwrap();
        let names: Vec<_> = spec.properties.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["p", "q"]);
        assert!(error("\u{feff}p: x >\n").contains("p.mstlo:1:7"));
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("p: {}x > 1{}\n", "(".repeat(5000), ")".repeat(5000));
        assert!(error(&deep).contains("nests deeper than"));
        let deep = format!("p: {}x > 1\n", "!".repeat(5000));
        assert!(error(&deep).contains("nests deeper than"));
        let deep = format!("p: x > 1{}\n", " && x > 1".repeat(5000));
        assert!(error(&deep).contains("nests deeper than"));
        let ok = format!("p: {}x > 1{}\n", "(".repeat(100), ")".repeat(100));
        assert!(parse_file("p.mstlo", &ok).is_ok());
    }
}
