//! Source edits for live definitions: a specification's text with declarations added, replaced or removed.
//!
//! `vigil repl`'s `:def` and `:drop` change the specification a session runs. The change is made
//! to the text, so that `:spec` and `:save` show a file the user could have written (comments and
//! layout kept, a replaced declaration in its place), and the result goes through the whole
//! frontend like any file. Only the text is edited here; checking it, and carrying the run's state
//! over to it, are the caller's (`Spec::parse`, `Monitor::repair`).

use super::ast::{Ast, Decl, DeclKind};
use super::check::CheckedSpec;
use super::diag::{Diagnostics, Span};
use super::parser;
use std::fmt;

/// Why an edit was not made (the specification is unchanged).
#[derive(Debug)]
pub enum EditError {
    /// The definitions do not parse (located in their own text).
    Syntax(Diagnostics),
    /// The text declares and defines nothing.
    Empty,
    /// `:drop` of a name the specification does not have.
    NoSuchStream(String),
    /// `:drop` of a stream other streams (or trigger messages) read.
    ReadBy {
        stream: String,
        readers: Vec<String>,
    },
}

impl fmt::Display for EditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EditError::Syntax(d) => write!(f, "{d}"),
            EditError::Empty => write!(
                f,
                "nothing to define (`:def out w: Int = z * 2`, or `:def` then a declaration and a definition)"
            ),
            EditError::NoSuchStream(s) => write!(f, "no stream `{s}`"),
            EditError::ReadBy { stream, readers } => write!(
                f,
                "`{stream}` cannot be dropped: {} read{} it",
                readers.join(", "),
                if readers.len() == 1 { "s" } else { "" }
            ),
        }
    }
}

impl std::error::Error for EditError {}

/// Whether `text`, the definitions typed so far, declares an `out` or `aux`
/// stream without defining it: the REPL then reads another line.
pub fn needs_more(text: &str) -> bool {
    let (ast, errors) = parser::parse_definitions(text);
    errors.is_empty()
        && ast.decls.iter().any(|d| match d {
            Decl::Stream {
                kind: DeclKind::Output | DeclKind::Aux,
                name,
                ..
            } => !ast
                .decls
                .iter()
                .any(|e| matches!(e, Decl::Def { name: n, .. } if n == name)),
            _ => false,
        })
}

/// `source` with the declarations and definitions of `text` in it: each
/// replaces the one of the same name in its place (a declaration replaces
/// a declaration or a trigger, a definition a definition), the others are
/// appended in their order. An input's declaration also removes the old
/// definition of its name. `text` may join a declaration and its definition
/// (`out w: Int = z * 2`); the specification gets them as two lines.
/// Returns the new text and the names `text` declares or defines.
pub fn define(source: &str, text: &str) -> Result<(String, Vec<String>), EditError> {
    let (new, errors) = parser::parse_definitions(text);
    if !errors.is_empty() {
        return Err(EditError::Syntax(Diagnostics {
            file: ":def".into(),
            source: text.to_string(),
            errors,
        }));
    }
    if new.decls.is_empty() {
        return Err(EditError::Empty);
    }
    let old = parse_valid(source);
    let mut edits: Vec<(Span, String)> = Vec::new();
    let mut appended: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let written = (new.decls.iter().zip(&new.decl_spans).zip(&new.generated))
        .filter(|(_, generated)| !**generated)
        .map(|(d, _)| d);
    for (decl, span) in written {
        let (name, piece, replaces) = match decl {
            Decl::Stream { name, .. } | Decl::Trigger { name, .. } => {
                (name, slice(text, *span).to_string(), find_decl(&old, name))
            }
            Decl::Def { name, expr, .. } => {
                // The expression to the end of the definition (its span
                // covers parentheses, the declaration's `=` is before it).
                let body = Span::new(new.expr(*expr).span.start as usize, span.end as usize);
                (
                    name,
                    format!("{name} = {}", slice(text, body)),
                    find_def(&old, name),
                )
            }
        };
        // A name declared (or defined) twice in `text` replaces once; the
        // second is appended, so the checker reports the repetition.
        let unused = |at: &Span, edits: &[(Span, String)]| !edits.iter().any(|(s, _)| s == at);
        match replaces {
            Some(at) if unused(&at, &edits) => edits.push((at, piece)),
            _ => appended.push(piece),
        }
        if let Decl::Stream {
            kind: DeclKind::Input,
            ..
        } = decl
            && let Some(def) = find_def(&old, name)
            && unused(&def, &edits)
        {
            edits.push((def, String::new()));
        }
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    let mut out = apply(source, edits);
    for piece in appended {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&piece);
        out.push('\n');
    }
    Ok((out, names))
}

/// `spec`'s text without the declaration and definition of `name`, refused
/// while another stream's definition or a trigger's message reads it.
pub fn drop(spec: &CheckedSpec, name: &str) -> Result<String, EditError> {
    let Some(target) = spec.stream_by_name(name) else {
        return Err(EditError::NoSuchStream(name.to_string()));
    };
    let ast = &spec.ast;
    // A stream a trigger's clauses or message wrote is not in the text on
    // its own: it goes with its trigger, and is not dropped alone.
    let generated = |n: &str| {
        (ast.decls.iter().zip(&ast.generated))
            .any(|(d, g)| *g && matches!(d, Decl::Stream { name, .. } | Decl::Trigger { name, .. } if name == n))
    };
    if generated(name) {
        let owner = name.split('#').next().unwrap_or(name).to_string();
        return Err(EditError::ReadBy {
            stream: name.to_string(),
            readers: vec![owner],
        });
    }
    let mine = |n: &str| n.strip_prefix(name).is_some_and(|rest| rest.starts_with('#'));
    let mut readers: Vec<String> = Vec::new();
    for s in spec.stream_ids().filter(|&s| s != target && !mine(&spec.stream(s).name)) {
        let data = spec.stream(s);
        let reads = data
            .def
            .is_some_and(|d| ast.names(d).iter().any(|(_, n)| *n == name))
            || spec
                .triggers
                .iter()
                .any(|t| t.stream == s && t.values.contains(&target));
        if reads {
            readers.push(data.name.clone());
        }
    }
    if !readers.is_empty() {
        return Err(EditError::ReadBy {
            stream: name.to_string(),
            readers,
        });
    }
    let old = parse_valid(&spec.source);
    let edits = [find_decl(&old, name), find_def(&old, name)]
        .into_iter()
        .flatten()
        .map(|span| (span, String::new()))
        .collect();
    Ok(apply(&spec.source, edits))
}

/// The AST of a source that passed the checker, so it parses.
fn parse_valid(source: &str) -> Ast {
    let (ast, errors) = parser::parse(source);
    assert!(
        errors.is_empty(),
        "engine bug: a checked specification does not parse"
    );
    ast
}

fn slice(text: &str, span: Span) -> &str {
    &text[span.start as usize..span.end as usize]
}

/// The span of the declaration (or trigger) of `name`.
fn find_decl(ast: &Ast, name: &str) -> Option<Span> {
    ast.decls.iter().zip(&ast.decl_spans).find_map(|(d, s)| {
        matches!(d, Decl::Stream { name: n, .. } | Decl::Trigger { name: n, .. } if n == name)
            .then_some(*s)
    })
}

/// The span of the definition of `name`.
fn find_def(ast: &Ast, name: &str) -> Option<Span> {
    ast.decls
        .iter()
        .zip(&ast.decl_spans)
        .find_map(|(d, s)| matches!(d, Decl::Def { name: n, .. } if n == name).then_some(*s))
}

/// `source` with each span replaced by its text. A span replaced by nothing
/// takes its line with it (and a comment after it) when nothing else is on
/// that line.
fn apply(source: &str, mut edits: Vec<(Span, String)>) -> String {
    edits.sort_by_key(|(s, _)| std::cmp::Reverse(s.start));
    let mut out = source.to_string();
    for (span, text) in edits {
        let (mut start, mut end) = (span.start as usize, span.end as usize);
        if text.is_empty() {
            let line_start = out[..start].rfind('\n').map_or(0, |i| i + 1);
            let line_end = out[end..].find('\n').map_or(out.len(), |i| end + i);
            let blank = |s: &str| s.chars().all(|c| c == ' ' || c == '\t' || c == '\r');
            // A comment after the declaration on its line goes with it.
            let rest = out[end..line_end].trim_start();
            if blank(&out[line_start..start]) && (blank(rest) || rest.starts_with("//")) {
                start = line_start;
                end = (line_end + 1).min(out.len());
            }
        }
        out.replace_range(start..end, &text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::parse_and_check;

    const SPEC: &str =
        "// a counter\nin x: Int\nout z: Int\nz = x + 1 // next\nout y: Int\ny = z * 2\n";

    #[test]
    fn a_new_stream_is_appended_in_two_lines() {
        let (text, names) = define(SPEC, "out w: Int = z * 3").unwrap();
        assert_eq!(text, format!("{SPEC}out w: Int\nw = z * 3\n"));
        assert_eq!(names, ["w"]);
        parse_and_check("t", &text).unwrap();
    }

    #[test]
    fn a_redefinition_replaces_in_place_and_keeps_comments() {
        let (text, _) = define(SPEC, "z = (x - 1)").unwrap();
        assert_eq!(
            text,
            "// a counter\nin x: Int\nout z: Int\nz = (x - 1) // next\nout y: Int\ny = z * 2\n"
        );
        let (text, _) = define(SPEC, "out z: Float\nz = 1.5").unwrap();
        assert!(text.contains("out z: Float\nz = 1.5 // next\n"), "{text}");
    }

    #[test]
    fn an_input_declaration_removes_the_old_definition() {
        let (text, _) = define(SPEC, "in z: Int").unwrap();
        assert_eq!(
            text,
            "// a counter\nin x: Int\nin z: Int\nout y: Int\ny = z * 2\n"
        );
    }

    #[test]
    fn drop_removes_both_lines_and_is_refused_while_read() {
        let spec = parse_and_check("t", SPEC).unwrap();
        let text = drop(&spec, "y").unwrap();
        assert_eq!(
            text,
            "// a counter\nin x: Int\nout z: Int\nz = x + 1 // next\n"
        );
        let err = drop(&spec, "z").unwrap_err();
        assert_eq!(err.to_string(), "`z` cannot be dropped: y reads it");
        assert!(matches!(drop(&spec, "q"), Err(EditError::NoSuchStream(_))));
    }

    #[test]
    fn drop_is_refused_while_a_trigger_message_names_the_stream() {
        let spec = parse_and_check(
            "t",
            "in x: Int\nout z: Int\nz = x\ntrigger hot: x > 3 \"z is {z}\"\n",
        )
        .unwrap();
        let err = drop(&spec, "z").unwrap_err();
        assert_eq!(err.to_string(), "`z` cannot be dropped: hot reads it");
    }

    #[test]
    fn a_name_repeated_in_the_text_is_left_to_the_checker() {
        // Regression: both declarations replaced the same span of the old
        // text, and the second ran past the end of the edited one (a panic).
        let source = "in x: Int\nz = x\nout z: Int";
        for text in ["in z: Int\nout z: Int", "in z: Int\nz = 1\nz = 2"] {
            let (edited, _) = define(source, text).unwrap();
            let err = parse_and_check("t", &edited).unwrap_err().to_string();
            assert!(err.contains("error:"), "{text}: {err}");
        }
    }

    proptest::proptest! {
        /// Any mix of declarations and definitions, repeated or clashing,
        /// against sources with and without a final newline, is an edit or
        /// an error, never a panic; an edit that checks can be dropped from.
        #[test]
        fn edits_never_panic(
            picks in proptest::collection::vec(0..9usize, 1..6),
            which in 0..3usize,
            name in 0..3usize,
        ) {
            const PIECES: [&str; 9] = [
                "in z: Int", "out z: Int", "z = 1", "out w = z", "aux z: Bool",
                "trigger t: x > 1 \"m {x}\"", "y = x", "in y: Float", "out q: Int = x * 2",
            ];
            let sources = [SPEC, "in x: Int\nz = x\nout z: Int", "in x: Int\nout y: Int\ny = x"];
            let text: Vec<&str> = picks.iter().map(|&p| PIECES[p]).collect();
            let source = sources[which];
            if let Ok((edited, _)) = define(source, &text.join("\n"))
                && let Ok(spec) = parse_and_check("t", &edited)
            {
                let _ = drop(&spec, ["x", "y", "z"][name]);
            }
        }
    }

    #[test]
    fn an_incomplete_definition_asks_for_more() {
        assert!(needs_more("out w: Int"));
        assert!(!needs_more("out w: Int = z"));
        assert!(!needs_more("out w: Int\nw = z"));
        assert!(!needs_more("in h: Str"));
        // A syntax error is reported, not continued.
        assert!(!needs_more("out w: Int = "));
    }

    #[test]
    fn syntax_errors_are_located_in_the_typed_text() {
        let err = define(SPEC, "out w: Int = z *").unwrap_err();
        let shown = err.to_string();
        assert!(shown.contains(":def:1:"), "{shown}");
        assert!(matches!(define(SPEC, "  "), Err(EditError::Empty)));
    }
}
