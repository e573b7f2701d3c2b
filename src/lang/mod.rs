//! The DSRV frontend: lexer, parser, arena AST, diagnostics and checker.

pub mod ast;
pub mod check;
pub mod diag;
// The REPL session's `:def` and `:drop` (`crate::repl`).
pub mod edit;
pub mod lexer;
pub mod message;
pub mod parser;

pub mod types;

use diag::{Diagnostic, Diagnostics, Span};

/// The deepest an expression may nest: each operator, `if`, function call,
/// offset and pair of parentheses is one level (`x` is 1, `(x + 1)` is 3).
/// The parser rejects a deeper expression with a located error and never
/// recurses deeper itself, so every later pass (checker, plan, fusion,
/// lowering, the reference evaluator) may recurse over an expression: the
/// integration test `frontend_hardening` runs each of them at this depth on
/// a 2 MiB thread stack in a debug build.
pub const MAX_NESTING: usize = 256;

/// The largest offset `e[n]` (steps of history one offset keeps).
pub const MAX_OFFSET: u32 = 10_000_000;

/// The longest count window `window(e, n, agg)`: like an offset, it keeps
/// up to `n` values (and `min`/`max` a deque of as many positions).
pub const MAX_WINDOW_COUNT: i64 = 10_000_000;

/// The most panes a time window is split into: each pane keeps a partial
/// aggregate (for a Float `sum` or `avg`, an exact accumulator of 72 words).
pub const MAX_WINDOW_PANES: i64 = 10_000;

/// The most values all count windows of a specification keep together, and
/// the most panes of all its time windows: window state is allocated with
/// the run (at most about 1.6 GB and 58 MB), not as rows arrive.
pub const MAX_WINDOW_VALUES: u64 = 100_000_000;
pub const MAX_WINDOW_PANES_TOTAL: u64 = 100_000;

/// The most panes of a time window's percentile (`p50`…`p99`): each pane
/// keeps a DDSketch of up to about 10 KB (`window::sketch::MAX_BYTES`); one
/// counts as [`PERCENTILE_PANE_WEIGHT`] panes toward `MAX_WINDOW_PANES_TOTAL`.
/// Without a granularity such a window has at most 10 panes.
pub const MAX_PERCENTILE_PANES: i64 = 100;
pub const PERCENTILE_PANE_WEIGHT: u64 = 16;

/// The largest sum of all offsets of a specification: the plan lays every
/// offset's history out in one table addressed by 32-bit lane numbers.
pub const MAX_HISTORY: u64 = u32::MAX as u64;

/// The UTF-8 encoding of U+FEFF, which some editors write at the start of a
/// UTF-8 file (a byte-order mark); it is not part of the specification.
const BOM: &str = "\u{feff}";

/// Parses and checks a specification: the frontend in one call. `file` names
/// the source in diagnostics. A leading byte-order mark is ignored.
pub fn parse_and_check(file: &str, source: &str) -> Result<check::CheckedSpec, Diagnostics> {
    let source = source.strip_prefix(BOM).unwrap_or(source);
    let fail = |errors| Diagnostics {
        file: file.to_string(),
        source: source.to_string(),
        errors,
    };
    if u32::try_from(source.len()).is_err() {
        // Spans are 32-bit byte offsets.
        return Err(fail(vec![Diagnostic::new(
            Span::new(0, 0),
            format!(
                "the specification is {} bytes long; at most {} bytes are supported",
                source.len(),
                u32::MAX
            ),
        )]));
    }
    let (ast, mut errors) = parser::parse(source);
    if !errors.is_empty() {
        // Name and type errors of a partial AST would be noise after a
        // syntax error, except for ones in fully parsed declarations, which
        // the checker reports once the syntax is fixed.
        return Err(fail(errors));
    }
    check::check(file, source, ast).map_err(|mut e| {
        errors.append(&mut e);
        fail(errors)
    })
}

/// As `parse_and_check`, from the bytes of a file: the specification must be
/// UTF-8 (after an optional byte-order mark). Invalid UTF-8 is one located
/// error at the first invalid byte; the diagnostics' source is the text
/// with invalid bytes replaced by U+FFFD, so the error renders with its line.
pub fn parse_and_check_bytes(file: &str, bytes: &[u8]) -> Result<check::CheckedSpec, Diagnostics> {
    let bytes = bytes.strip_prefix(BOM.as_bytes()).unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(source) => parse_and_check(file, source),
        Err(e) => {
            let at = e.valid_up_to();
            let len = e.error_len().unwrap_or(bytes.len() - at);
            let shown: Vec<String> = bytes[at..at + len]
                .iter()
                .map(|b| format!("0x{b:02X}"))
                .collect();
            let what = if e.error_len().is_some() {
                format!("invalid byte {}", shown.join(" "))
            } else {
                format!("incomplete character {} at the end", shown.join(" "))
            };
            Err(Diagnostics {
                file: file.to_string(),
                source: String::from_utf8_lossy(bytes).into_owned(),
                errors: vec![
                    Diagnostic::new(
                        Span::new(at, at + 1),
                        format!("the specification is not valid UTF-8: {what}"),
                    )
                    .with_hint("save the specification as UTF-8"),
                ],
            })
        }
    }
}
