//! The DSRV frontend: lexer, parser, arena AST, diagnostics and checker.

pub mod types;
