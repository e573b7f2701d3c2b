//! Trace I/O: readers for the `.input`, CSV and JSON-lines trace formats and
//! writers for the `text`, `csv` and `jsonl` output formats.
//!
//! Readers yield one row per step; a row has one cell per declared input (in
//! declaration order): `Some(value)` when the row assigns the input, `None`
//! when it is absent (NoVal). Files are memory-mapped; `-` reads standard
//! input line by line so that a monitor can sit in an endless pipe.

use crate::lang::types::Type;
use crate::value::{Sample, Value};
use std::fmt;

/// The declared inputs of a specification, in declaration order.
#[derive(Clone, Debug, Default)]
pub struct InputSchema {
    pub names: Vec<String>,
    pub types: Vec<Type>,
}

/// The trace formats `vigil run --format` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// The Trustworthiness Checker's `.input` format (`0: x = 1` blocks).
    Tc,
    Csv,
    Jsonl,
}

/// The output formats `vigil run --output` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Csv,
    Jsonl,
}

/// A malformed trace: where, and what is wrong. Rendered as
/// `<file>:<line>:<col>: <message>` (lines and columns count from 1).
#[derive(Clone, Debug, PartialEq)]
pub struct TraceError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

impl std::error::Error for TraceError {}

/// A source of rows.
pub trait RowReader {
    /// Fills `row` (one cell per declared input, already sized by the caller)
    /// with the next step's inputs. Returns `Ok(false)` at the end of the
    /// trace. After an error the reader must not be used again.
    fn next_row(&mut self, row: &mut [Option<Value>]) -> Result<bool, TraceError>;

    /// Warnings found while reading (for example a declared input missing
    /// from a CSV header). The CLI prints them on standard error.
    fn take_warnings(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// A sink for the outputs of each step.
pub trait OutputWriter {
    /// Writes the printed outputs of one step; `samples` is aligned with the
    /// output names given when the writer was made.
    fn write_step(&mut self, step: u64, samples: &[Sample]) -> std::io::Result<()>;
    fn flush(&mut self) -> std::io::Result<()>;
}
