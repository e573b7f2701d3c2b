//! Runtime errors: a specification's fault at a step, as a value (never a panic).

use std::fmt;

/// What kind of fault a runtime error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// An Int operation whose result does not fit in 64 bits.
    IntegerOverflow,
    /// Int division or remainder by zero.
    DivisionByZero,
    /// An operation applied to values it is not defined for (an untyped
    /// input carrying a value of the wrong type, for example).
    InvalidOperand,
    /// A string result longer than the monitor's bound (`--max-string-bytes`).
    StringTooLong,
    /// A list index outside the list (`List.get`, `.0`).
    IndexOutOfBounds,
    /// A map key that is not in the map (`Map.get`, `.field`).
    MissingKey,
    /// `List.head` or `List.tail` of an empty list.
    EmptyList,
    /// A `dynamic`/`defer` string that does not parse or check.
    InvalidDynamic,
    /// Function application nested deeper than the bound (`fix`), or
    /// `dynamic` instances nested deeper than theirs.
    RecursionTooDeep,
    /// A container built with containers nested deeper than
    /// [`MAX_VALUE_NESTING`](crate::value::MAX_VALUE_NESTING) inside it.
    ValueTooDeep,
    /// An STL operator's interval holding more samples than its bound.
    WindowFull,
}

impl ErrorKind {
    /// The kind as the error message names it (`integer overflow`, …).
    pub fn describe(self) -> &'static str {
        match self {
            ErrorKind::IntegerOverflow => "integer overflow",
            ErrorKind::DivisionByZero => "integer division by zero",
            ErrorKind::InvalidOperand => "invalid operand",
            ErrorKind::StringTooLong => "string too long",
            ErrorKind::IndexOutOfBounds => "index out of bounds",
            ErrorKind::MissingKey => "missing key",
            ErrorKind::EmptyList => "empty list",
            ErrorKind::InvalidDynamic => "invalid dynamic expression",
            ErrorKind::RecursionTooDeep => "recursion too deep",
            ErrorKind::ValueTooDeep => "value nested too deep",
            ErrorKind::WindowFull => "window full",
        }
    }
}

/// A fault raised by one operation, before it is attributed to a stream
/// and a step.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    /// What went wrong.
    pub kind: ErrorKind,
    /// The operation, as a noun: `addition`, `division`, `remainder`, …
    pub op: &'static str,
    /// For invalid operands, the offending values.
    pub detail: Option<String>,
}

impl Fault {
    /// A fault of `kind` raised by operation `op`.
    pub fn new(kind: ErrorKind, op: &'static str) -> Fault {
        Fault {
            kind,
            op,
            detail: None,
        }
    }

    /// Attributes the fault to the stream and step where it happened.
    pub fn at(self, stream: &str, step: u64) -> RuntimeError {
        RuntimeError {
            kind: self.kind,
            op: self.op,
            detail: self.detail,
            stream: stream.to_string(),
            step,
        }
    }
}

/// A runtime error: what went wrong, in which stream, at which step. Every
/// tier reports the same one for the same specification and trace.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// The operation that failed, as a noun: `addition`, `division`, …
    pub op: &'static str,
    /// For invalid operands, the offending values.
    pub detail: Option<String>,
    /// The stream whose definition raised it.
    pub stream: String,
    /// The step (0-based) at which it was raised.
    pub step: u64,
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in {}", self.kind.describe(), self.op)?;
        if let Some(d) = &self.detail {
            write!(f, ": {d}")?;
        }
        write!(f, " (stream `{}`, step {})", self.stream, self.step)
    }
}

impl std::error::Error for RuntimeError {}
