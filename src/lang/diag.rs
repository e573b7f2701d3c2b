//! Diagnostics: located error messages and their rendering with a caret under the span.
//!
//! Rendering is linear in the size of the source plus the output: a
//! `LineIndex` (the byte offset of every line start) is built once per
//! `Diagnostics::render`, each position is found by binary search, at most
//! `MAX_REPORTED_ERRORS` errors are rendered, and each excerpt shows a
//! bounded window of its line, so neither a long line nor many errors can
//! make the output (or the time to produce it) grow with their product.

use std::fmt::Write as _;

/// The most errors `Diagnostics::render` shows; the rest are counted in a
/// final line `and N more errors`.
pub const MAX_REPORTED_ERRORS: usize = 100;

/// The most characters of a quoted name or token (a backtick-quoted part of
/// a message) that rendering shows before cutting it with `…`.
pub const MAX_QUOTED_CHARS: usize = 64;

/// How many bytes of the source line rendering shows on each side of a
/// span's start (the excerpt is cut with `…` beyond that).
const EXCERPT_CONTEXT: usize = 80;

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
///
/// It displays as `vigil check` prints it: every error rendered (see
/// [`Diagnostics::render`]), then a last line ``error: could not check
/// `FILE` due to N previous errors``. It is a `std::error::Error`, so
/// `Spec::parse(..)?` works in a function returning `Box<dyn Error>`.
#[derive(Clone, Debug)]
pub struct Diagnostics {
    /// The specification's file name, as messages name it.
    pub file: String,
    /// The specification's text, which the errors' spans point into.
    pub source: String,
    /// Every error found, in the order of the source.
    pub errors: Vec<Diagnostic>,
}

impl std::fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.errors.len();
        write!(
            f,
            "{}error: could not check `{}` due to {n} previous error{}",
            self.render(),
            self.file,
            if n == 1 { "" } else { "s" }
        )
    }
}

impl std::error::Error for Diagnostics {}

/// The byte offset of every line start of a source, so that a byte offset's
/// line is a binary search instead of a scan from the start of the file.
#[derive(Clone, Debug)]
pub struct LineIndex {
    /// `starts[i]` is the byte offset where line `i + 1` starts; `starts[0]`
    /// is 0.
    starts: Vec<usize>,
}

impl LineIndex {
    /// Indexes `source` in one pass.
    pub fn new(source: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(
            source
                .bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex { starts }
    }

    /// The number of lines (a source without a newline has one).
    pub fn lines(&self) -> usize {
        self.starts.len()
    }

    /// 1-based line of a byte offset (offsets past the end are on the last
    /// line).
    pub fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }

    /// The byte range of 1-based `line`, without its `\n` (or `\r\n`).
    pub fn line_range(&self, source: &str, line: usize) -> std::ops::Range<usize> {
        let start = self.starts[line - 1];
        let end = self.starts.get(line).map_or(source.len(), |&next| next - 1);
        let end = if source.as_bytes()[start..end].ends_with(b"\r") {
            end - 1
        } else {
            end
        };
        start..end
    }

    /// 1-based line and column (in characters) of a byte offset. The
    /// column costs the length of the line's text before the offset.
    pub fn line_col(&self, source: &str, offset: usize) -> (usize, usize) {
        let offset = floor_char_boundary(source, offset.min(source.len()));
        let line = self.line(offset);
        let start = self.starts[line - 1];
        (line, source[start..offset].chars().count() + 1)
    }
}

/// 1-based line and column (in characters) of a byte offset. This scans the
/// source: for more than one position, build a `LineIndex` once.
#[cfg(any(test, feature = "testing"))]
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    LineIndex::new(source).line_col(source, offset)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Whether a character is shown escaped (`\0`, `\u{7f}`, `\u{feff}`):
/// control characters and the invisible formatting characters that would
/// make a line look different from what the lexer sees.
pub(crate) fn is_invisible(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// How a character is shown in diagnostics: itself, or escaped if it is
/// invisible (see `is_invisible`).
pub fn show_char(c: char) -> String {
    if !is_invisible(c) {
        return c.to_string();
    }
    match c {
        '\0' => "\\0".to_string(),
        '\r' => "\\r".to_string(),
        '\n' => "\\n".to_string(),
        c => format!("\\u{{{:x}}}", c as u32),
    }
}

/// A message or hint as shown: invisible characters escaped, and every
/// backtick-quoted part longer than `MAX_QUOTED_CHARS` cut with `…`, so
/// that a megabyte-long name cannot flood the terminal.
pub fn show_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(4 * MAX_QUOTED_CHARS));
    let mut quoted = false;
    let mut quoted_chars = 0;
    for c in text.chars() {
        if c == '`' {
            quoted = !quoted;
            quoted_chars = 0;
            out.push(c);
            continue;
        }
        if quoted {
            quoted_chars += 1;
            if quoted_chars == MAX_QUOTED_CHARS + 1 {
                out.push('…');
            }
            if quoted_chars > MAX_QUOTED_CHARS {
                continue;
            }
        }
        out.push_str(&show_char(c));
    }
    out
}

/// Cuts `text` to at most `MAX_QUOTED_CHARS` characters (with `…`), for
/// names and tokens quoted in messages.
pub fn short(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

impl Diagnostics {
    /// Renders the first `MAX_REPORTED_ERRORS` errors as
    ///
    /// ```text
    /// error: <message>
    ///   --> file:line:col
    ///    |
    ///  3 | z = x + y
    ///    |     ^
    ///    = hint: <hint>
    /// ```
    ///
    /// and then, if there are more, one line `and N more errors`.
    pub fn render(&self) -> String {
        self.render_with(&LineIndex::new(&self.source))
    }

    /// As `render`, with the line index of `self.source` given: every
    /// position is looked up in it, none is found by scanning the source.
    pub fn render_with(&self, index: &LineIndex) -> String {
        let mut out = String::new();
        for (i, d) in self.errors.iter().take(MAX_REPORTED_ERRORS).enumerate() {
            if i > 0 {
                out.push('\n');
            }
            render_one(&mut out, &self.file, &self.source, index, d);
        }
        let more = self.errors.len().saturating_sub(MAX_REPORTED_ERRORS);
        if more > 0 {
            let s = if more == 1 { "" } else { "s" };
            let _ = writeln!(out, "\nand {more} more error{s}");
        }
        out
    }
}

/// Appends the shown form of `source[from..to]` to `out` and returns its
/// width in characters (a tab counts as one and is kept, so that a caret
/// line built with tabs lines up).
fn push_shown(out: &mut String, source: &str, from: usize, to: usize) -> usize {
    let mut width = 0;
    for c in source[from..to].chars() {
        let s = show_char(c);
        width += s.chars().count();
        out.push_str(&s);
    }
    width
}

fn render_one(out: &mut String, file: &str, source: &str, index: &LineIndex, d: &Diagnostic) {
    let start = floor_char_boundary(source, d.span.start as usize);
    let (line, col) = index.line_col(source, start);
    let range = index.line_range(source, line);
    let start = start.clamp(range.start, range.end);
    let end = floor_char_boundary(source, (d.span.end as usize).clamp(start, range.end));
    // The excerpt: the line, or a window of it around the span's start.
    let from = ceil_char_boundary(
        source,
        start.saturating_sub(EXCERPT_CONTEXT).max(range.start),
    );
    let to = floor_char_boundary(source, (start + EXCERPT_CONTEXT).min(range.end));
    let end = end.min(to);
    let mut text = String::new();
    let mut indent = String::new();
    if from > range.start {
        text.push('…');
        indent.push(' ');
    }
    for c in source[from..start].chars() {
        let w = show_char(c).chars().count();
        if c == '\t' {
            indent.push('\t');
        } else {
            indent.extend(std::iter::repeat_n(' ', w));
        }
    }
    push_shown(&mut text, source, from, start);
    let width = push_shown(&mut text, source, start, end).max(1);
    push_shown(&mut text, source, end, to);
    if to < range.end {
        text.push('…');
    }
    let gutter = line.to_string().len();
    let pad = " ".repeat(gutter);
    let _ = writeln!(out, "error: {}", show_text(&d.message));
    let _ = writeln!(out, "{pad}--> {file}:{line}:{col}");
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{line} | {text}");
    let _ = writeln!(out, "{pad} | {indent}{}", "^".repeat(width));
    if let Some(h) = &d.hint {
        let _ = writeln!(out, "{pad} = hint: {}", show_text(h));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_index_finds_lines_and_columns() {
        let src = "ab\ncäd\r\n\nx";
        let ix = LineIndex::new(src);
        assert_eq!(ix.lines(), 4);
        assert_eq!(ix.line_col(src, 0), (1, 1));
        assert_eq!(ix.line_col(src, 2), (1, 3));
        assert_eq!(ix.line_col(src, 3), (2, 1));
        // `ä` is two bytes and one column.
        assert_eq!(ix.line_col(src, 6), (2, 3));
        // A byte inside `ä` is reported at `ä`.
        assert_eq!(ix.line_col(src, 5), (2, 2));
        assert_eq!(ix.line_range(src, 2), 3..7);
        assert_eq!(ix.line_range(src, 3), 9..9);
        assert_eq!(ix.line_col(src, src.len()), (4, 2));
        assert_eq!(ix.line_col(src, 1000), (4, 2));
        assert_eq!(line_col(src, 10), (4, 1));
    }

    #[test]
    fn line_lookup_is_a_search_not_a_scan() {
        // The index holds every line start, so a lookup never looks at the
        // text before the line: this source's text before the last line is
        // not even valid as a position (it is only newlines), and the
        // lookups below touch the index alone.
        let src = "\n".repeat(100_000) + "x";
        let ix = LineIndex::new(&src);
        assert_eq!(ix.lines(), 100_001);
        assert_eq!(ix.line(100_000), 100_001);
        assert_eq!(ix.line(50_000), 50_001);
        assert_eq!(ix.line(0), 1);
    }

    fn diags(source: &str, errors: Vec<Diagnostic>) -> Diagnostics {
        Diagnostics {
            file: "s".into(),
            source: source.into(),
            errors,
        }
    }

    #[test]
    fn at_most_a_hundred_errors_are_rendered() {
        let src = "$".repeat(250);
        let errors = (0..250)
            .map(|i| Diagnostic::new(Span::new(i, i + 1), format!("bad {i}")))
            .collect();
        let out = diags(&src, errors).render();
        assert_eq!(out.matches("error: bad").count(), MAX_REPORTED_ERRORS);
        assert!(out.contains("error: bad 99\n"));
        assert!(!out.contains("error: bad 100\n"));
        assert!(out.ends_with("\nand 150 more errors\n"), "{out}");
        let one_more = (0..101)
            .map(|i| Diagnostic::new(Span::new(i, i + 1), "bad"))
            .collect();
        assert!(
            diags(&src, one_more)
                .render()
                .ends_with("\nand 1 more error\n")
        );
        let exactly = (0..100)
            .map(|i| Diagnostic::new(Span::new(i, i + 1), "bad"))
            .collect();
        assert!(!diags(&src, exactly).render().contains("more error"));
    }

    #[test]
    fn long_lines_are_shown_as_a_window() {
        let src = format!("y = {} + $", "a".repeat(1_000_000));
        let at = src.len() - 1;
        let out = diags(&src, vec![Diagnostic::new(Span::new(at, at + 1), "x")]).render();
        assert!(out.len() < 1000, "{} bytes", out.len());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[1], " --> s:1:1000008");
        assert!(lines[3].starts_with("1 | …aaa"), "{}", lines[3]);
        assert!(lines[3].ends_with("a + $"), "{}", lines[3]);
        // The caret is under the `$`.
        assert_eq!(lines[4].len(), lines[3].chars().count());
        assert!(lines[4].ends_with(" ^"));
    }

    #[test]
    fn long_quoted_names_are_cut() {
        let name = "n".repeat(1_000_000);
        let d = Diagnostic::new(Span::new(0, 1), format!("unknown stream `{name}`"))
            .with_hint(format!("declare it, e.g. `in {name}: Int`"));
        let out = diags("x", vec![d]).render();
        let cut = format!("`{}…`", "n".repeat(MAX_QUOTED_CHARS));
        assert!(
            out.contains(&format!("error: unknown stream {cut}\n")),
            "{out}"
        );
        assert!(out.contains(&format!("e.g. `in {}…`", "n".repeat(MAX_QUOTED_CHARS - 3))));
        assert_eq!(short("abc"), "abc");
        assert_eq!(short(&name).chars().count(), MAX_QUOTED_CHARS + 1);
    }

    #[test]
    fn invisible_characters_are_escaped_and_carets_follow() {
        let src = "y = \0 + \u{feff}$";
        let at = src.find('$').unwrap();
        let out = diags(src, vec![Diagnostic::new(Span::new(at, at + 1), "x")]).render();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[3], "1 | y = \\0 + \\u{feff}$");
        assert_eq!(lines[4], "  |                  ^");
        assert_eq!(
            show_text("unexpected character `\0`"),
            "unexpected character `\\0`"
        );
    }
}
