//! Rows: the one rule by which a value fits an input, the errors of a row that
//! does not fit, and rows built by input name.
//!
//! Every value entering a monitor passes [`conform`]: the trace readers apply
//! it to each value they read, `Monitor::step` and `RowBatch::push_row` to
//! every cell of every row they are given, and [`Row::set`] to each value it
//! is given. So a monitor never sees a value its specification did not
//! declare, whichever way the value came in, and the readers' messages and
//! the library's errors are the same text.
//!
//! This module sits below the trace readers (which use its rule and quote
//! values with [`describe`]) and below `monitor`; it imports only `value`,
//! `error` and the language's `Type`.

use crate::error::RuntimeError;
use crate::lang::types::Type;
use crate::value::Value;
use scalar_ir::frame::tag;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// The most characters of an offending value or line a diagnostic quotes;
/// longer text is cut there and ends with `…`, so that a 10 MB line gives a
/// readable one-line message.
pub(crate) const EXCERPT_CHARS: usize = 64;

/// `text`, cut to [`EXCERPT_CHARS`] characters (with `…`) if it is longer.
pub(crate) fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A value as shown in diagnostics: its type, then its literal
/// (`Float 2.5`, `Str "a"`, `Unit ()`); a string longer than 64 characters is
/// cut there and ends with `…`.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Int(i) => format!("Int {i}"),
        Value::Float(x) => format!("Float {x:?}"),
        Value::Bool(b) => format!("Bool {b}"),
        Value::Str(s) => match s.char_indices().nth(EXCERPT_CHARS) {
            Some((cut, _)) => format!("Str {:?}…", &s[..cut]),
            None => format!("Str {:?}", &**s),
        },
        Value::Unit => "Unit ()".to_string(),
        other => {
            let text = other.to_string();
            match text.char_indices().nth(EXCERPT_CHARS) {
                Some((cut, _)) => format!("{} {}…", other.type_name(), &text[..cut]),
                None => format!("{} {text}", other.type_name()),
            }
        }
    }
}

/// How a present value fits a declared type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fit {
    /// The value is of the type (or the type is `Any`).
    Exact,
    /// An Int given to a Float input: it is converted.
    IntToFloat,
    /// The value cannot be given to an input of the type.
    Mismatch,
}

fn fit(v: &Value, ty: Type) -> Fit {
    match (ty, v) {
        (Type::Any, _)
        | (Type::Int, Value::Int(_))
        | (Type::Float, Value::Float(_))
        | (Type::Bool, Value::Bool(_))
        | (Type::Str, Value::Str(_))
        | (Type::Unit, Value::Unit)
        | (Type::List, Value::List(_))
        | (Type::Tuple, Value::Tuple(_))
        | (Type::Map, Value::Map(_))
        | (Type::Fn, Value::Func(_)) => Fit::Exact,
        (Type::Float, Value::Int(_)) => Fit::IntToFloat,
        _ => Fit::Mismatch,
    }
}

/// The rule every value entering a monitor passes: `value` given to the input
/// `input` declared with type `ty`. A value of the type is taken as it is, an
/// Int given to a Float input is converted (as the language converts Int to
/// Float; integers beyond 2^53 round to the nearest float), an untyped (`Any`)
/// input takes any value, and anything else is [`RowError::WrongType`]. A
/// value whose containers nest deeper than
/// [`MAX_VALUE_NESTING`](crate::value::MAX_VALUE_NESTING) is
/// [`RowError::TooDeep`], whatever the type.
///
/// ```
/// use vigil::{RowError, Type, Value, conform};
/// assert_eq!(conform(Value::Int(2), Type::Float, "t").unwrap(), Value::Float(2.0));
/// let e = conform(Value::Str("oops".into()), Type::Int, "x").unwrap_err();
/// assert!(matches!(e, RowError::WrongType { .. }));
/// assert_eq!(e.to_string(), "expected Int for input `x`, found Str \"oops\"");
/// ```
pub fn conform(value: Value, ty: Type, input: &str) -> Result<Value, RowError> {
    if value.nests_deeper_than(crate::value::MAX_VALUE_NESTING) {
        return Err(RowError::TooDeep {
            input: input.to_string(),
        });
    }
    match (fit(&value, ty), value) {
        (Fit::IntToFloat, Value::Int(i)) => Ok(Value::Float(i as f64)),
        (Fit::Mismatch, found) => Err(RowError::WrongType {
            input: input.to_string(),
            expected: ty,
            found,
        }),
        (_, v) => Ok(v),
    }
}

/// Why a row (or one value of it) was rejected. A rejected row is not
/// evaluated and does not stop the monitor: the next row is evaluated as if
/// the rejected one had never been given.
///
/// The messages are the trace readers' messages for the same fault (without
/// a location, which a row built in memory does not have).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RowError {
    /// A row with another number of cells than the specification has inputs.
    WrongWidth {
        /// The number of declared inputs.
        expected: usize,
        /// The number of cells given.
        found: usize,
    },
    /// A value that does not fit its input's declared type (see [`conform`]).
    WrongType {
        /// The input's name.
        input: String,
        /// The input's declared type.
        expected: Type,
        /// The value given.
        found: Value,
    },
    /// A name given to a row builder that is not a declared input.
    UnknownInput {
        /// The name given.
        name: String,
    },
    /// A JSON array or object given to an input (`Monitor::row_from_json`):
    /// it is not a value of the language.
    NotAValue {
        /// The input's name.
        input: String,
    },
    /// A JSON number that is not a value: an integer beyond the range of
    /// Int (`does not fit in Int (64 bits)`), or a number too large for
    /// Float (`does not fit in Float (64 bits)`), as the JSON-lines reader
    /// reports it.
    InvalidNumber {
        /// The input's name.
        input: String,
        /// The reader's message, quoting the number.
        message: String,
    },
    /// A value whose containers nest deeper than
    /// [`MAX_VALUE_NESTING`](crate::value::MAX_VALUE_NESTING).
    TooDeep {
        /// The input's name.
        input: String,
    },
    /// A row given to a keyed monitor with its key input absent: it names
    /// no key, so no run can take it.
    MissingKey {
        /// The key input's name.
        input: String,
    },
    /// A `ScalarRow` made for other inputs than the monitor's (another
    /// specification's monitor made it).
    WrongRow {
        /// The row's inputs, as `name: Type, …`.
        row: String,
        /// The monitor's inputs, as `name: Type, …`.
        monitor: String,
    },
    /// A `RowBatch` made for other inputs than the monitor's (another
    /// specification's batch).
    WrongBatch {
        /// The batch's inputs, as `name: Type, …`.
        batch: String,
        /// The monitor's inputs, as `name: Type, …`.
        monitor: String,
    },
    /// More ticks of a keyed monitor's key are due before its row than the
    /// bound allows (`Ticking::max_ticks`): a jump in time that would run
    /// (nearly) for ever. Nothing is evaluated.
    TooManyTicks {
        /// The key, as it displays.
        key: String,
        /// The ticks due.
        due: u128,
        /// The bound.
        max: u64,
    },
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowError::WrongWidth { expected, found } => {
                let s = if *expected == 1 { "" } else { "s" };
                write!(
                    f,
                    "expected a row of {expected} cell{s} (one per declared input), found {found}"
                )
            }
            RowError::WrongType {
                input,
                expected,
                found,
            } => write!(
                f,
                "expected {expected} for input `{input}`, found {}",
                describe(found)
            ),
            RowError::UnknownInput { name } => {
                write!(f, "`{}` is not a declared input", excerpt(name))
            }
            RowError::NotAValue { input } => write!(
                f,
                "input `{input}` is given an array or object, which is not a trace value"
            ),
            RowError::InvalidNumber { message, .. } => f.write_str(message),
            RowError::TooDeep { input } => write!(
                f,
                "the value of input `{input}` nests containers more than {} deep, the limit for values",
                crate::value::MAX_VALUE_NESTING
            ),
            RowError::MissingKey { input } => write!(
                f,
                "the key input `{input}` is absent: a keyed monitor's row must give its key"
            ),
            RowError::WrongRow { row, monitor } => write!(
                f,
                "the row was made for the inputs ({row}), but the monitor's inputs are ({monitor})"
            ),
            RowError::WrongBatch { batch, monitor } => write!(
                f,
                "the batch was made for the inputs ({batch}), but the monitor's inputs are ({monitor})"
            ),
            RowError::TooManyTicks { key, due, max } => write!(
                f,
                "{due} ticks of key {key} are due before its row, more than the bound of {max} (a jump in time? a gap bound with skipping fires one tick per period over the gap)"
            ),
        }
    }
}

impl std::error::Error for RowError {}

/// Why `Monitor::step` or `Monitor::run_batch` evaluated nothing (or not
/// every row): a rejected row, which leaves the monitor running, or a
/// runtime error, which stops it.
///
/// It displays as the error it holds, and `source()` returns that error.
#[derive(Clone, Debug, PartialEq)]
pub enum StepError {
    /// The row (or batch) was rejected before evaluation; the monitor goes on.
    Row(RowError),
    /// The specification failed at a step; the monitor is stopped.
    Runtime(RuntimeError),
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepError::Row(e) => e.fmt(f),
            StepError::Runtime(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for StepError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StepError::Row(e) => Some(e),
            StepError::Runtime(e) => Some(e),
        }
    }
}

impl From<RowError> for StepError {
    fn from(e: RowError) -> StepError {
        StepError::Row(e)
    }
}

impl From<RuntimeError> for StepError {
    fn from(e: RuntimeError) -> StepError {
        StepError::Runtime(e)
    }
}

/// The declared inputs of a specification, in declaration order, with a
/// name index: what rows are checked against. One is built per `Spec` and
/// shared (by `Arc`) by its monitors, batches and rows.
#[derive(Debug, PartialEq)]
pub(crate) struct RowSchema {
    names: Vec<String>,
    types: Vec<Type>,
    /// Per input, the kinds of value (bit `Value::kind`) `fit` finds
    /// `Exact` for its type: a row's cells are checked against it with one
    /// test each, the cost every value row pays on every tier.
    exact: Vec<u16>,
    index: HashMap<String, usize>,
}

/// The kinds of value (bits indexed by `Value::kind`) that `fit` takes as
/// they are for an input of type `ty`.
fn exact_kinds(ty: Type) -> u16 {
    let kind = |v: Value| 1u16 << v.kind();
    match ty {
        Type::Any => u16::MAX,
        Type::Int => kind(Value::Int(0)),
        Type::Float => kind(Value::Float(0.0)),
        Type::Bool => kind(Value::Bool(false)),
        Type::Str => kind(Value::Str("".into())),
        Type::Unit => kind(Value::Unit),
        Type::List => kind(Value::list(Vec::new())),
        Type::Tuple => kind(Value::tuple(Vec::new())),
        Type::Map => kind(Value::Map(Default::default())),
        // A function value cannot be made without a closure; its kind is
        // the variant after `Map` (the table test checks it).
        Type::Fn => 1 << 8,
    }
}

/// What checking a row found: whether it can run as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Checked {
    /// Every cell fits its input exactly.
    AsIs,
    /// Some Int cell is given to a Float input and must be converted first
    /// (`RowSchema::convert_into`).
    Convert,
}

impl RowSchema {
    pub(crate) fn new(names: Vec<String>, types: Vec<Type>) -> RowSchema {
        assert_eq!(names.len(), types.len(), "one type per input");
        let index = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        let exact = types.iter().map(|&ty| exact_kinds(ty)).collect();
        RowSchema {
            names,
            types,
            exact,
            index,
        }
    }

    pub(crate) fn width(&self) -> usize {
        self.types.len()
    }

    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    pub(crate) fn types(&self) -> &[Type] {
        &self.types
    }

    /// The position of input `name`.
    pub(crate) fn lookup(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// The position of input `name`, or the error naming it.
    pub(crate) fn position(&self, name: &str) -> Result<usize, RowError> {
        self.lookup(name).ok_or_else(|| RowError::UnknownInput {
            name: name.to_string(),
        })
    }

    /// Whether rows of `other` are rows of this schema: the same inputs, in
    /// the same order, with the same types.
    #[inline]
    pub(crate) fn same_as(&self, other: &RowSchema) -> bool {
        std::ptr::eq(self, other) || (self.names == other.names && self.types == other.types)
    }

    /// The inputs as `name: Type, …`, for messages.
    pub(crate) fn show(&self) -> String {
        let parts: Vec<String> = self
            .names
            .iter()
            .zip(&self.types)
            .map(|(n, t)| format!("{}: {t}", excerpt(n)))
            .collect();
        parts.join(", ")
    }

    /// Checks a row against the inputs: its width, and every present value
    /// against its input's type. Allocates nothing unless the row is
    /// rejected.
    #[inline]
    pub(crate) fn check(&self, cells: &[Option<Value>]) -> Result<Checked, RowError> {
        self.check_with(cells, |_, _| {})
    }

    /// `check`, writing in the same pass every cell's frame form (tag and
    /// lane, as `canonical::value_cell` makes it, an Int given to a Float
    /// input already converted) into `lanes` and `tags`, one per input: the
    /// row as the whole-row kernel reads it (`Monitor::step`'s fast path).
    /// On an error they are partly written; nothing is allocated unless the
    /// row is rejected.
    #[inline]
    pub(crate) fn check_into(
        &self,
        cells: &[Option<Value>],
        lanes: &mut [u64],
        tags: &mut [u8],
    ) -> Result<Checked, RowError> {
        assert!(
            lanes.len() == self.width() && tags.len() == self.width(),
            "engine bug: a frame row of another width"
        );
        self.check_with(cells, |i, cell| (tags[i], lanes[i]) = cell)
    }

    /// `check`'s one pass, giving `put` each cell's frame form (by position)
    /// as it goes.
    #[inline(always)]
    fn check_with(
        &self,
        cells: &[Option<Value>],
        mut put: impl FnMut(usize, (u8, u64)),
    ) -> Result<Checked, RowError> {
        if cells.len() != self.types.len() {
            return Err(RowError::WrongWidth {
                expected: self.types.len(),
                found: cells.len(),
            });
        }
        let mut checked = Checked::AsIs;
        for (i, (cell, &exact)) in cells.iter().zip(&self.exact).enumerate() {
            let Some(v) = cell else {
                put(i, (tag::ABSENT, 0));
                continue;
            };
            let cell = if exact & (1 << v.kind()) == 0 {
                checked = self.check_inexact(i, v)?;
                // The only inexact fit is an Int for a Float input, which
                // converts (as `convert_into` converts it).
                match v {
                    Value::Int(n) => (tag::F64, (*n as f64).to_bits()),
                    _ => crate::canonical::scalar_form(v).unwrap_or((tag::OTHER, 0)),
                }
            } else {
                crate::canonical::scalar_form(v).unwrap_or((tag::OTHER, 0))
            };
            put(i, cell);
            // A container may nest only so deep (`conform`'s rule, which
            // readers apply before they build one; a row made in memory is
            // checked here).
            if matches!(v, Value::List(_) | Value::Tuple(_) | Value::Map(_))
                && v.nests_deeper_than(crate::value::MAX_VALUE_NESTING)
            {
                return Err(RowError::TooDeep {
                    input: self.names[i].clone(),
                });
            }
        }
        Ok(checked)
    }

    /// `check` of a cell its input does not take as it is: an Int for a
    /// Float input converts, anything else is refused.
    #[cold]
    fn check_inexact(&self, i: usize, v: &Value) -> Result<Checked, RowError> {
        let ty = self.types[i];
        match fit(v, ty) {
            Fit::IntToFloat => Ok(Checked::Convert),
            Fit::Exact => unreachable!("engine bug: `exact_kinds` disagrees with `fit`"),
            Fit::Mismatch => Err(RowError::WrongType {
                input: self.names[i].clone(),
                expected: ty,
                found: v.clone(),
            }),
        }
    }

    /// Writes the conformed form of a row that `check` accepted into `out`
    /// (cleared first; its capacity is reused, so a monitor converting every
    /// row allocates only for its first).
    pub(crate) fn convert_into(&self, cells: &[Option<Value>], out: &mut Vec<Option<Value>>) {
        out.clear();
        out.extend(cells.iter().zip(&self.types).map(|(cell, &ty)| {
            cell.as_ref().map(|v| match (fit(v, ty), v) {
                (Fit::IntToFloat, Value::Int(i)) => Value::Float(*i as f64),
                _ => v.clone(),
            })
        }));
    }
}

/// One row built by input name: a cell per declared input, each absent until
/// set. Each value is checked (name and type, see [`conform`]) when it is
/// set, so a built row always fits its specification's inputs. A `Row` owns
/// a reference to its specification's inputs, not to the monitor, so it can
/// be built while the monitor is borrowed and sent to another thread.
///
/// ```
/// use vigil::{Monitor, Sample, Spec, Value};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let spec = Spec::parse("hot.dsrv", "in temp: Float\nin host: Str\nout hot: Bool\nhot = temp > 25.0")?;
/// let mut monitor = Monitor::builder(&spec).build();
/// let row = monitor.row().set("temp", 27.5)?.set("host", "a")?;
/// let outputs = monitor.step(&row)?;
/// assert_eq!(outputs.get(0), Sample::Value(Value::Bool(true)));
///
/// // An Int for a Float input converts; a name that is not an input is an error.
/// let row = monitor.row().set("temp", 20)?;
/// assert_eq!(row.get("temp"), Some(&Value::Float(20.0)));
/// assert!(monitor.row().set("pressure", 1.0).is_err());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, PartialEq)]
pub struct Row {
    schema: Arc<RowSchema>,
    cells: Vec<Option<Value>>,
}

impl Row {
    /// A row of `schema`'s inputs, every cell absent.
    pub(crate) fn new(schema: Arc<RowSchema>) -> Row {
        let cells = vec![None; schema.width()];
        Row { schema, cells }
    }

    /// Sets input `name` to `value` and returns the row, for chaining:
    /// `row.set("a", 1)?.set("b", true)?`. Setting an input again replaces
    /// its value. Errors: [`RowError::UnknownInput`] for a name that is not
    /// a declared input, [`RowError::WrongType`] for a value that does not
    /// fit its type.
    pub fn set(mut self, name: &str, value: impl Into<Value>) -> Result<Row, RowError> {
        self.assign(name, value)?;
        Ok(self)
    }

    /// As [`Row::set`], in place (for a row reused from step to step). On an
    /// error the row is unchanged.
    pub fn assign(&mut self, name: &str, value: impl Into<Value>) -> Result<(), RowError> {
        let i = self.position(name)?;
        let value = conform(value.into(), self.schema.types[i], &self.schema.names[i])?;
        self.cells[i] = Some(value);
        Ok(())
    }

    /// Makes input `name` absent (NoVal at the step the row is given to).
    pub fn unset(&mut self, name: &str) -> Result<(), RowError> {
        let i = self.position(name)?;
        self.cells[i] = None;
        Ok(())
    }

    /// Makes every input absent, keeping the row's storage.
    pub fn clear(&mut self) {
        self.cells.fill(None);
    }

    /// The value of input `name`, if it is set (`None` also for a name that
    /// is not an input).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.schema
            .lookup(name)
            .and_then(|i| self.cells[i].as_ref())
    }

    /// The cells, one per declared input in declaration order.
    pub fn cells(&self) -> &[Option<Value>] {
        &self.cells
    }

    /// The names of the inputs, in the order of the cells.
    pub fn input_names(&self) -> &[String] {
        self.schema.names()
    }

    /// Sets cell `i` to a value that already passed [`conform`] for it.
    pub(crate) fn put(&mut self, i: usize, value: Value) {
        self.cells[i] = Some(value);
    }

    fn position(&self, name: &str) -> Result<usize, RowError> {
        self.schema.position(name)
    }
}

/// A row of scalar inputs in frame form — a lane and a tag per input, as
/// the native kernels read them — for [`crate::Monitor::step_scalars`]: the
/// fastest way to give a monitor a row, with no `Value` cells to check and
/// encode at every step. Made by [`crate::Monitor::scalar_row`]; inputs are
/// set by position ([`ScalarRow::input`] finds one by name, once), each
/// setter checking the value against the input's type as [`Row::set`]
/// does (an Int given to a Float input is converted). Str and Unit inputs
/// cannot be set here: they are absent.
///
/// ```
/// use vigil::{Monitor, Sample, Spec, Value};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let spec = Spec::parse("add.dsrv", "in x: Int\nin y: Int\nout z: Int\nz = x + y")?;
/// let mut monitor = Monitor::builder(&spec).build();
/// let mut row = monitor.scalar_row();
/// let (x, y) = (row.input("x")?, row.input("y")?);
/// for i in 0..3 {
///     row.set_int(x, i)?;
///     row.set_int(y, 10)?;
///     let out = monitor.step_scalars(&row)?;
///     assert_eq!(out.get(0), Sample::Value(Value::Int(i + 10)));
///     // The same output read as a typed scalar, with no `Sample` made.
///     assert_eq!(out.int(0), Some(i + 10));
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ScalarRow {
    schema: Arc<RowSchema>,
    lanes: Vec<u64>,
    tags: Vec<u8>,
}

impl ScalarRow {
    /// A row of `schema`'s inputs, every input absent.
    pub(crate) fn new(schema: Arc<RowSchema>) -> ScalarRow {
        let n = schema.width();
        ScalarRow {
            schema,
            lanes: vec![0; n],
            tags: vec![scalar_ir::frame::tag::ABSENT; n],
        }
    }

    /// The position of input `name`, for the setters.
    pub fn input(&self, name: &str) -> Result<usize, RowError> {
        self.schema.position(name)
    }

    /// Stores a lane of tag `t` into input `input` (the setter has checked
    /// that the value fits the input's type).
    #[inline]
    fn store(&mut self, input: usize, (t, lane): (u8, u64)) {
        self.tags[input] = t;
        self.lanes[input] = lane;
    }

    /// The error of a value that does not fit input `input`'s type.
    #[cold]
    fn refuse(&self, input: usize, found: Value) -> RowError {
        RowError::WrongType {
            input: self.schema.names()[input].clone(),
            expected: self.schema.types()[input],
            found,
        }
    }

    /// Sets input `input` (a position) to an Int, converted for a Float
    /// input. On an error (a Bool, Str or Unit input) the row is unchanged.
    ///
    /// # Panics
    ///
    /// If `input` is not the position of an input (as indexing a slice
    /// past its end does).
    #[inline(always)]
    pub fn set_int(&mut self, input: usize, value: i64) -> Result<(), RowError> {
        let ty = self.schema.types()[input];
        match ty {
            Type::Int | Type::Any => self.store(input, (tag::I64, value as u64)),
            Type::Float => self.store(input, (tag::F64, (value as f64).to_bits())),
            _ => return Err(self.refuse(input, Value::Int(value))),
        }
        Ok(())
    }

    /// Sets input `input` to a Float (see [`ScalarRow::set_int`]).
    #[inline(always)]
    pub fn set_float(&mut self, input: usize, value: f64) -> Result<(), RowError> {
        let ty = self.schema.types()[input];
        match ty {
            Type::Float | Type::Any => self.store(input, (tag::F64, value.to_bits())),
            _ => return Err(self.refuse(input, Value::Float(value))),
        }
        Ok(())
    }

    /// Sets input `input` to a Bool (see [`ScalarRow::set_int`]).
    #[inline(always)]
    pub fn set_bool(&mut self, input: usize, value: bool) -> Result<(), RowError> {
        let ty = self.schema.types()[input];
        match ty {
            Type::Bool | Type::Any => self.store(input, (tag::B1, u64::from(value))),
            _ => return Err(self.refuse(input, Value::Bool(value))),
        }
        Ok(())
    }

    /// Makes input `input` absent (NoVal at the step the row is given to).
    pub fn unset(&mut self, input: usize) {
        self.tags[input] = tag::ABSENT;
        self.lanes[input] = 0;
    }

    /// Sets input `input` from a cell of a row of `Value`s: a scalar by its
    /// setter, `None` by [`ScalarRow::unset`]. A Str or Unit value, which a
    /// scalar row cannot hold, is refused as a value the input does not
    /// take ([`RowError::WrongType`]), and the row is unchanged.
    pub fn set(&mut self, input: usize, cell: Option<&Value>) -> Result<(), RowError> {
        match cell {
            Some(&Value::Int(v)) => self.set_int(input, v),
            Some(&Value::Float(v)) => self.set_float(input, v),
            Some(&Value::Bool(v)) => self.set_bool(input, v),
            Some(other) => Err(self.refuse(input, other.clone())),
            None => {
                self.unset(input);
                Ok(())
            }
        }
    }

    /// Makes every input absent.
    pub fn clear(&mut self) {
        self.tags.fill(tag::ABSENT);
        self.lanes.fill(0);
    }

    /// The schema the row was made for.
    pub(crate) fn schema(&self) -> &RowSchema {
        &self.schema
    }

    /// The lanes and tags, one per input.
    pub(crate) fn frame(&self) -> (&[u64], &[u8]) {
        (&self.lanes, &self.tags)
    }
}

impl AsRef<[Option<Value>]> for Row {
    fn as_ref(&self) -> &[Option<Value>] {
        &self.cells
    }
}

/// `Row { temp: Some(Float(27.5)), host: None }`.
impl fmt::Debug for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Row");
        for (name, cell) in self.schema.names.iter().zip(&self.cells) {
            s.field(name, cell);
        }
        s.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Arc<RowSchema> {
        Arc::new(RowSchema::new(
            vec!["i".into(), "f".into(), "s".into(), "a".into()],
            vec![Type::Int, Type::Float, Type::Str, Type::Any],
        ))
    }

    #[test]
    fn int_converts_to_float_and_nothing_else_converts() {
        let wrong = |v, t, n| conform(v, t, n).unwrap_err().to_string();
        assert_eq!(
            conform(Value::Int(2), Type::Float, "x"),
            Ok(Value::Float(2.0))
        );
        assert_eq!(
            wrong(Value::Float(2.5), Type::Int, "x"),
            "expected Int for input `x`, found Float 2.5"
        );
        assert_eq!(
            wrong(Value::Str("a".into()), Type::Int, "x"),
            "expected Int for input `x`, found Str \"a\""
        );
        assert_eq!(
            wrong(Value::Int(1), Type::Bool, "b"),
            "expected Bool for input `b`, found Int 1"
        );
        assert!(conform(Value::Unit, Type::Str, "s").is_err());
        assert!(conform(Value::Bool(true), Type::Unit, "u").is_err());
    }

    #[test]
    fn any_takes_values_as_they_are() {
        for v in [
            Value::Int(1),
            Value::Float(1.5),
            Value::Str("s".into()),
            Value::Unit,
        ] {
            assert_eq!(conform(v.clone(), Type::Any, "a"), Ok(v));
        }
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let long = "é".repeat(10_000);
        let e = conform(Value::Str(long.as_str().into()), Type::Int, "x").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "expected Int for input `x`, found Str {:?}…",
                "é".repeat(64)
            )
        );
        assert_eq!(excerpt("short"), "short");
        assert_eq!(excerpt(&"a".repeat(65)), format!("{}…", "a".repeat(64)));
        assert_eq!(excerpt(&"a".repeat(64)), "a".repeat(64));
        let e = RowError::UnknownInput {
            name: "n".repeat(1000),
        };
        assert!(e.to_string().len() < 100, "{e}");
    }

    #[test]
    fn the_table_of_exact_kinds_agrees_with_fit() {
        let values = [
            Value::Int(1),
            Value::Float(1.0),
            Value::Bool(true),
            Value::Str("s".into()),
            Value::Unit,
            Value::list(vec![Value::Int(1)]),
            Value::tuple(vec![Value::Int(1)]),
            Value::Map(Default::default()),
            Value::Marker(crate::value::Marker::NoVal),
            Value::Marker(crate::value::Marker::Deferred),
        ];
        let types = [
            Type::Int,
            Type::Float,
            Type::Bool,
            Type::Str,
            Type::Unit,
            Type::Any,
            Type::List,
            Type::Tuple,
            Type::Map,
            Type::Fn,
        ];
        for ty in types {
            for v in &values {
                assert_eq!(
                    exact_kinds(ty) & (1 << v.kind()) != 0,
                    fit(v, ty) == Fit::Exact,
                    "{v:?} given to {ty:?}"
                );
            }
        }
        // The function kind has no value to test with here: its bit is
        // `Fn`'s alone.
        assert_eq!(exact_kinds(Type::Fn), 1 << 8);
        for ty in types {
            assert!(ty == Type::Fn || ty == Type::Any || exact_kinds(ty) & (1 << 8) == 0);
        }
    }

    #[test]
    fn checking_finds_width_types_and_conversions() {
        let s = schema();
        let int = Some(Value::Int(1));
        let float = Some(Value::Float(1.0));
        let text = Some(Value::Str("t".into()));
        assert_eq!(
            s.check(&[int.clone(), float.clone(), text.clone(), None]),
            Ok(Checked::AsIs)
        );
        assert_eq!(s.check(&[None, None, None, None]), Ok(Checked::AsIs));
        assert_eq!(
            s.check(&[None, int.clone(), None, text.clone()]),
            Ok(Checked::Convert)
        );
        assert_eq!(
            s.check(&[None, None, None]),
            Err(RowError::WrongWidth {
                expected: 4,
                found: 3
            })
        );
        assert_eq!(
            s.check(&[None, None, int.clone(), None]),
            Err(RowError::WrongType {
                input: "s".into(),
                expected: Type::Str,
                found: Value::Int(1),
            })
        );
        let mut out = Vec::new();
        s.convert_into(&[int.clone(), int.clone(), None, int.clone()], &mut out);
        assert_eq!(out, [int.clone(), float, None, int]);
    }

    /// `check_into` finds what `check` finds, and writes the frame form of
    /// the row `convert_into` makes (what the canonical tier would read).
    #[test]
    fn checking_into_a_frame_writes_the_converted_rows_cells() {
        let s = schema();
        let rows = [
            vec![
                Some(Value::Int(3)),
                Some(Value::Int(4)),
                None,
                Some(Value::Unit),
            ],
            vec![
                None,
                Some(Value::Float(0.5)),
                Some(Value::Str("t".into())),
                None,
            ],
            vec![Some(Value::Int(-1)), None, None, Some(Value::Bool(true))],
            vec![None, None, Some(Value::Int(1)), None],
            vec![None, None],
        ];
        let (mut lanes, mut tags) = ([7u64; 4], [9u8; 4]);
        let mut converted = Vec::new();
        for row in &rows {
            let found = s.check_into(row, &mut lanes, &mut tags);
            assert_eq!(found, s.check(row), "{row:?}");
            if found.is_err() {
                continue;
            }
            s.convert_into(row, &mut converted);
            for k in 0..4 {
                let want = crate::canonical::value_cell(&converted, k);
                assert_eq!((tags[k], lanes[k]), want, "{row:?}, cell {k}");
            }
        }
    }

    #[test]
    fn rows_are_set_by_name_and_checked() {
        let row = Row::new(schema())
            .set("i", 3)
            .unwrap()
            .set("f", 4)
            .unwrap()
            .set("s", "x")
            .unwrap();
        assert_eq!(
            row.cells(),
            [
                Some(Value::Int(3)),
                Some(Value::Float(4.0)),
                Some(Value::Str("x".into())),
                None
            ]
        );
        assert_eq!(
            format!("{row:?}"),
            "Row { i: Some(Int(3)), f: Some(Float(4.0)), s: Some(Str(\"x\")), a: None }"
        );
        let mut row = row;
        assert_eq!(
            row.assign("nope", 1),
            Err(RowError::UnknownInput {
                name: "nope".into()
            })
        );
        let before = row.clone();
        assert!(row.assign("i", "x").is_err());
        assert_eq!(row, before, "a rejected value changes nothing");
        row.assign("a", Value::Unit).unwrap();
        row.unset("i").unwrap();
        assert_eq!(row.get("i"), None);
        assert_eq!(row.get("a"), Some(&Value::Unit));
        row.clear();
        assert!(row.cells().iter().all(Option::is_none));
        assert_eq!(row.input_names(), ["i", "f", "s", "a"]);
    }

    /// Counts the allocations of the current thread, so that a test can
    /// check that a piece of code allocates nothing (other tests running
    /// beside it on other threads do not count).
    struct Counting;

    thread_local! {
        static ALLOCATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    // SAFETY: every call is forwarded unchanged to the system allocator; the
    // counter is a const-initialised thread-local without a destructor, whose
    // access never allocates.
    unsafe impl std::alloc::GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
            // SAFETY: the caller's contract is passed on as it is.
            unsafe { std::alloc::System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
            // SAFETY: as above.
            unsafe { std::alloc::System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
            // SAFETY: as above.
            unsafe { std::alloc::System.realloc(ptr, layout, size) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: Counting = Counting;

    fn allocations(f: impl FnOnce()) -> u64 {
        let before = ALLOCATIONS.with(|n| n.get());
        f();
        ALLOCATIONS.with(|n| n.get()) - before
    }

    /// The per-row cost: checking a conforming row allocates nothing, and
    /// converting one reuses the scratch row's storage.
    #[test]
    fn checking_and_converting_rows_allocate_nothing() {
        let s = schema();
        let row = [
            Some(Value::Int(1)),
            Some(Value::Float(1.0)),
            Some(Value::Str("t".into())),
            Some(Value::Unit),
        ];
        let ints = [
            Some(Value::Int(1)),
            Some(Value::Int(2)),
            Some(Value::Str("t".into())),
            None,
        ];
        let mut out = Vec::new();
        s.convert_into(&ints, &mut out);
        let (mut lanes, mut tags) = ([0u64; 4], [0u8; 4]);
        let n = allocations(|| {
            for _ in 0..100 {
                assert_eq!(s.check(&row), Ok(Checked::AsIs));
                assert_eq!(s.check(&ints), Ok(Checked::Convert));
                assert_eq!(
                    s.check_into(&ints, &mut lanes, &mut tags),
                    Ok(Checked::Convert)
                );
                s.convert_into(&ints, &mut out);
            }
        });
        assert_eq!(n, 0);
        // The counter does count (so the test above can fail): a rejected
        // row's error names its input.
        let wrong = [None, None, Some(Value::Int(1)), None];
        assert!(allocations(|| drop(s.check(&wrong))) > 0);
    }

    #[test]
    fn step_errors_show_and_chain_their_cause() {
        use std::error::Error;
        let e = StepError::from(RowError::WrongWidth {
            expected: 1,
            found: 2,
        });
        assert_eq!(
            e.to_string(),
            "expected a row of 1 cell (one per declared input), found 2"
        );
        assert_eq!(e.source().unwrap().to_string(), e.to_string());
        assert!(e.source().unwrap().downcast_ref::<RowError>().is_some());
    }
}
