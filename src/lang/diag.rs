//! Diagnostics: located error messages and their rendering with a caret under the span.

use std::fmt::Write as _;

/// A byte range `start..end` in the specification source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// One error found in a specification.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    /// Lowercase message without the `error:` prefix.
    pub message: String,
    pub span: Span,
    pub hint: Option<String>,
}

impl Diagnostic {
    pub fn new(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            message: message.into(),
            span,
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }
}

/// All errors of one specification, with the source they refer to so they
/// can be rendered.
#[derive(Clone, Debug)]
pub struct Diagnostics {
    pub file: String,
    pub source: String,
    pub errors: Vec<Diagnostic>,
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..floor_char_boundary(source, offset)];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl Diagnostics {
    /// Renders every error as
    ///
    /// ```text
    /// error: <message>
    ///   --> file:line:col
    ///    |
    ///  3 | z = x + y
    ///    |     ^
    ///    = hint: <hint>
    /// ```
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (i, d) in self.errors.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            render_one(&mut out, &self.file, &self.source, d);
        }
        out
    }
}

fn render_one(out: &mut String, file: &str, source: &str, d: &Diagnostic) {
    let start = floor_char_boundary(source, (d.span.start as usize).min(source.len()));
    let (line, col) = line_col(source, start);
    let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = source[start..]
        .find('\n')
        .map_or(source.len(), |i| start + i);
    let text = source[line_start..line_end].trim_end_matches('\r');
    let end = floor_char_boundary(source, (d.span.end as usize).clamp(start, line_end));
    let width = source[start..end].chars().count().max(1);
    let gutter = line.to_string().len();
    let pad = " ".repeat(gutter);
    let _ = writeln!(out, "error: {}", d.message);
    let _ = writeln!(out, "{pad}--> {file}:{line}:{col}");
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{line} | {text}");
    let indent: String = source[line_start..start]
        .chars()
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    let _ = writeln!(out, "{pad} | {indent}{}", "^".repeat(width));
    if let Some(h) = &d.hint {
        let _ = writeln!(out, "{pad} = hint: {h}");
    }
}
