//! The DSRV frontend: lexer, parser, arena AST, diagnostics and checker.

pub mod ast;
pub mod check;
pub mod diag;
pub mod lexer;
pub mod parser;
pub mod types;

use diag::Diagnostics;

/// Parses and checks a specification: the frontend in one call. `file` names
/// the source in diagnostics.
pub fn parse_and_check(file: &str, source: &str) -> Result<check::CheckedSpec, Diagnostics> {
    let (ast, mut errors) = parser::parse(source);
    let fail = |errors| Diagnostics {
        file: file.to_string(),
        source: source.to_string(),
        errors,
    };
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
