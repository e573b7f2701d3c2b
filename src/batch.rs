//! Batches: rows held in columns for `Monitor::run_batch`, and their outputs.
//!
//! Both use the scalar frame layout (docs/engine.md, "The scalar IR"): per cell a tag byte and a
//! `u64` payload, row-major, so the native batch kernel of the `native-whole`
//! tier reads the inputs and writes the outputs of many rows in one call.
//! Values with no scalar form (Str, Unit) are kept beside as objects.

use crate::canonical::{Objects, decode, scalar_form};
use crate::lang::types::Type;
use crate::row::{Checked, RowError, RowSchema};
use crate::value::{Sample, Value};
use scalar_ir::frame::tag;
use std::fmt;
use std::sync::Arc;

/// Encodes a cell as (tag, payload, object), in `NodeState`'s frame form.
pub(crate) fn encode(v: &Option<Value>) -> (u8, u64, Option<Value>) {
    match v {
        None => (tag::ABSENT, 0, None),
        Some(v) => match scalar_form(v) {
            Some((t, lane)) => (t, lane, None),
            None => (tag::OTHER, 0, Some(v.clone())),
        },
    }
}

/// Input rows in columns: one cell per declared input per row, for
/// `Monitor::run_batch`.
///
/// A batch belongs to a specification's inputs: it is made by
/// `Monitor::batch()` or `RowBatch::for_spec(&spec)`, and every row pushed is
/// checked against those inputs then (width and types, with the Int→Float
/// conversion of every row; see `row::conform`). `run_batch` refuses a batch
/// made for other inputs, so a batch it runs holds only conforming rows.
///
/// ```
/// use vigil::{Monitor, Spec, Value};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let spec = Spec::parse("t.dsrv", "in t: Float\nout hot: Bool\nhot = t > 30.0")?;
/// let monitor = Monitor::builder(&spec).build();
/// let mut rows = monitor.batch();
/// rows.push_row([Some(Value::Int(31))])?; // an Int for a Float input converts
/// rows.push_row(&monitor.row().set("t", 12.5)?)?;
/// assert!(rows.push_row([Some(Value::Bool(true))]).is_err()); // rejected, not pushed
/// assert_eq!(rows.len(), 2);
/// assert_eq!(rows.row(0), [Some(Value::Float(31.0))]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct RowBatch {
    schema: Arc<RowSchema>,
    pub(crate) width: usize,
    pub(crate) rows: usize,
    pub(crate) lanes: Vec<u64>,
    pub(crate) tags: Vec<u8>,
    pub(crate) objects: Objects,
    /// Each column's tags over the rows pushed (empty before the first).
    columns: Vec<ColumnTags>,
}

/// The tags one column of a batch holds: the same on every row, or not.
/// The batch kernel leaves out the input guards of a batch whose guarded
/// columns each hold their guard's tag on every row (`column_tag`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ColumnTags {
    Uniform(u8),
    Mixed,
}

impl RowBatch {
    /// An empty batch for rows of `schema`'s inputs.
    pub(crate) fn with_schema(schema: Arc<RowSchema>) -> RowBatch {
        RowBatch {
            width: schema.width(),
            schema,
            rows: 0,
            lanes: Vec::new(),
            tags: Vec::new(),
            objects: Objects::default(),
            columns: Vec::new(),
        }
    }

    pub(crate) fn schema(&self) -> &RowSchema {
        &self.schema
    }

    /// Appends a row (one cell per declared input, `None` = absent): a
    /// slice, a `Vec`, an array or a built [`Row`](crate::Row). The row is
    /// checked first; a rejected row leaves the batch as it was.
    pub fn push_row(&mut self, row: impl AsRef<[Option<Value>]>) -> Result<(), RowError> {
        let cells = row.as_ref();
        let checked = self.schema.check(cells)?;
        for (k, (cell, &ty)) in cells.iter().zip(self.schema.types()).enumerate() {
            let (t, lane, object) = match (checked, cell) {
                // The one conversion `check` allows: Int to a Float input.
                (Checked::Convert, Some(Value::Int(i))) if ty == Type::Float => {
                    (tag::F64, (*i as f64).to_bits(), None)
                }
                _ => encode(cell),
            };
            self.objects.set(self.lanes.len(), object);
            self.tags.push(t);
            self.lanes.push(lane);
            match self.columns.get_mut(k) {
                None => self.columns.push(ColumnTags::Uniform(t)),
                Some(c) if *c != ColumnTags::Uniform(t) => *c = ColumnTags::Mixed,
                Some(_) => {}
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// Row `r`'s cells in frame form, where they are.
    pub(crate) fn cells(&self, r: usize) -> crate::canonical::Cells<'_> {
        let at = r * self.width;
        crate::canonical::Cells::Frame {
            lanes: &self.lanes[at..at + self.width],
            tags: &self.tags[at..at + self.width],
            objects: Some((&self.objects, at)),
        }
    }

    /// The tag column `k` holds on every row, if it is one tag (`None`
    /// for a column of mixed tags, or an empty batch).
    pub(crate) fn column_tag(&self, k: usize) -> Option<u8> {
        match self.columns.get(k) {
            Some(&ColumnTags::Uniform(t)) => Some(t),
            Some(ColumnTags::Mixed) | None => None,
        }
    }

    /// The number of cells of each row (the specification's inputs).
    pub fn width(&self) -> usize {
        self.width
    }

    /// The number of rows pushed.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Removes every row, keeping the storage (and the inputs).
    pub fn clear(&mut self) {
        self.rows = 0;
        self.lanes.clear();
        self.tags.clear();
        self.objects.clear();
        self.columns.clear();
    }

    /// Row `r` as cells (as conformed when it was pushed).
    pub fn row(&self, r: usize) -> Vec<Option<Value>> {
        let cells = self.cells(r);
        (0..self.width).map(|k| cells.value(k)).collect()
    }
}

/// The printed outputs of a batch: one sample per output per row, with the
/// outputs' names and the step number of each row. Reading a sample or a
/// row allocates nothing (a Str sample shares its string).
///
/// ```
/// use vigil::{Monitor, OutputBatch, Sample, Spec, Value};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let spec = Spec::parse("c.dsrv", "in x: Int\nout z: Int\nout big: Bool\nz = default(z[1], 0) + x\nbig = z > 2")?;
/// let mut monitor = Monitor::builder(&spec).build();
/// let mut rows = monitor.batch();
/// for v in [1, 2, 3] {
///     rows.push_row([Some(Value::Int(v))])?;
/// }
/// let mut out = OutputBatch::new();
/// monitor.run_batch(&rows, &mut out)?;
/// let big = out.column("big").ok_or("no output `big`")?;
/// for row in out.rows() {
///     if row.get(big) == Sample::Value(Value::Bool(true)) {
///         println!("step {}: z = {}", row.step(), row.get(0));
///     }
/// }
/// assert_eq!((out.width(), out.len(), out.first_step()), (2, 3, 0));
/// assert_eq!(out.row(2).step(), 2);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct OutputBatch {
    pub(crate) width: usize,
    /// Rows completed (all of the batch, unless a runtime error stopped it).
    pub(crate) rows: usize,
    pub(crate) lanes: Vec<u64>,
    pub(crate) tags: Vec<u8>,
    pub(crate) objects: Objects,
    /// The printed outputs' names, in print order (shared with the monitor).
    names: Arc<[String]>,
    /// The step number of the batch's first row.
    first_step: u64,
}

impl OutputBatch {
    /// An empty batch, to be filled by `Monitor::run_batch` (which sets its
    /// width, names and step numbers).
    pub fn new() -> OutputBatch {
        OutputBatch::default()
    }

    /// Rows whose outputs are here.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The number of outputs of each row (the printed outputs).
    pub fn width(&self) -> usize {
        self.width
    }

    /// The printed outputs' names, in print order: the columns.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The column of output `name`, or `None` if it is not a printed
    /// output. A linear search of the names: look a column up once, then
    /// read rows by index.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The step number of the batch's first row (the monitor's step count
    /// when the batch was run); row `r` is step `first_step() + r`.
    pub fn first_step(&self) -> u64 {
        self.first_step
    }

    /// Output `col` of row `r`.
    pub fn get(&self, r: usize, col: usize) -> Sample {
        assert!(
            r < self.rows && col < self.width,
            "cell ({r}, {col}) outside a batch of {} rows of {} outputs",
            self.rows,
            self.width
        );
        let i = r * self.width + col;
        decode(self.tags[i], self.lanes[i], self.objects.get(i))
    }

    /// Becomes a copy of `other`, reusing this batch's allocations (a
    /// derived `clone_from` would allocate anew).
    pub(crate) fn copy_from(&mut self, other: &OutputBatch) {
        self.width = other.width;
        self.rows = other.rows;
        // Only the rows written: the buffers may be longer (`reset`).
        let cells = other.rows * other.width;
        self.lanes.clear();
        self.lanes.extend_from_slice(&other.lanes[..cells]);
        self.tags.clear();
        self.tags.extend_from_slice(&other.tags[..cells]);
        self.objects.copy_from(&other.objects);
        self.names.clone_from(&other.names);
        self.first_step = other.first_step;
    }

    /// A batch of the given samples, rows of `names.len()` samples from
    /// step `first_step` (for writers' tests).
    #[cfg(test)]
    pub(crate) fn from_samples(
        names: &[&str],
        first_step: u64,
        rows: &[Vec<Sample>],
    ) -> OutputBatch {
        let mut b = OutputBatch {
            width: names.len(),
            names: names.iter().map(|n| n.to_string()).collect(),
            first_step,
            ..OutputBatch::default()
        };
        for row in rows {
            assert_eq!(row.len(), b.width);
            for sample in row {
                let (t, lane, object) = match sample {
                    Sample::NoVal => encode(&None),
                    Sample::Deferred => (tag::DEFERRED, 0, None),
                    Sample::Value(v) => encode(&Some(v.clone())),
                };
                b.objects.set(b.lanes.len(), object);
                b.tags.push(t);
                b.lanes.push(lane);
            }
            b.rows += 1;
        }
        b
    }

    /// Output `col` of row `r` as its frame tag and lane (the lane of an
    /// object tag is meaningless: read it with `get`), for writers that
    /// format scalars without making a `Sample`.
    pub(crate) fn raw(&self, r: usize, col: usize) -> (u8, u64) {
        debug_assert!(r < self.rows && col < self.width);
        let i = r * self.width + col;
        (self.tags[i], self.lanes[i])
    }

    /// Row `r`'s outputs, as a view.
    pub fn row(&self, r: usize) -> OutputRow<'_> {
        assert!(
            r < self.rows,
            "row {r} outside a batch of {} rows",
            self.rows
        );
        OutputRow { batch: self, r }
    }

    /// Every row, in order.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = OutputRow<'_>> + '_ {
        (0..self.rows).map(move |r| OutputRow { batch: self, r })
    }

    /// Names the columns and numbers the rows of the next run.
    pub(crate) fn label(&mut self, names: &Arc<[String]>, first_step: u64) {
        if !Arc::ptr_eq(&self.names, names) {
            self.names = names.clone();
        }
        self.first_step = first_step;
    }

    /// Makes room for `rows` rows of `width` outputs, none written yet. The
    /// cells are not cleared: every row below `rows` (the count written) is
    /// written whole before it is counted, so a stale cell is never read,
    /// and a batch after a batch writes its outputs once, not twice.
    pub(crate) fn reset(&mut self, width: usize, rows: usize) {
        self.width = width;
        self.rows = 0;
        if self.lanes.len() < width * rows {
            self.lanes.resize(width * rows, 0);
            self.tags.resize(width * rows, tag::ABSENT);
        }
        self.objects.clear();
    }
}

/// The outputs of one row of an [`OutputBatch`]: a view, no copy.
#[derive(Clone, Copy)]
pub struct OutputRow<'a> {
    batch: &'a OutputBatch,
    r: usize,
}

impl OutputRow<'_> {
    /// The row's step number.
    pub fn step(&self) -> u64 {
        self.batch.first_step + self.r as u64
    }

    /// Output `col` (see `OutputBatch::column`).
    pub fn get(&self, col: usize) -> Sample {
        self.batch.get(self.r, col)
    }

    /// The number of outputs.
    pub fn len(&self) -> usize {
        self.batch.width
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.batch.width == 0
    }

    /// The outputs, in print order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Sample> + '_ {
        (0..self.batch.width).map(move |c| self.batch.get(self.r, c))
    }

    /// The outputs, collected.
    pub fn to_vec(&self) -> Vec<Sample> {
        self.iter().collect()
    }
}

impl fmt::Debug for OutputRow<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputRow")
            .field("step", &self.step())
            .field("outputs", &self.to_vec())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any3() -> Arc<RowSchema> {
        Arc::new(RowSchema::new(
            vec!["a".into(), "b".into(), "c".into()],
            vec![Type::Any; 3],
        ))
    }

    #[test]
    fn rows_round_trip_with_objects_anywhere() {
        let mut b = RowBatch::with_schema(any3());
        let rows = vec![
            vec![Some(Value::Int(1)), None, Some(Value::Float(f64::NAN))],
            vec![None, Some(Value::Str("a".into())), Some(Value::Bool(true))],
            vec![Some(Value::Unit), Some(Value::Int(-5)), None],
        ];
        for r in &rows {
            b.push_row(r).unwrap();
        }
        assert_eq!(b.len(), 3);
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(&b.row(i), r);
        }
        b.clear();
        assert!(b.is_empty());
        b.push_row([Some(Value::Int(2)), None, None]).unwrap();
        assert_eq!(b.row(0), vec![Some(Value::Int(2)), None, None]);
    }

    /// A column is one tag while every row pushed agrees (a rejected row
    /// changes nothing); `clear` forgets.
    #[test]
    fn column_tags_track_the_rows_pushed() {
        let schema = Arc::new(RowSchema::new(
            vec!["i".into(), "f".into()],
            vec![Type::Int, Type::Float],
        ));
        let mut b = RowBatch::with_schema(schema);
        assert_eq!((b.column_tag(0), b.column_tag(1)), (None, None));
        b.push_row([Some(Value::Int(1)), Some(Value::Int(2))])
            .unwrap();
        b.push_row([Some(Value::Int(3)), Some(Value::Float(0.5))])
            .unwrap();
        // The Int for the Float input is converted, so its tag is a Float's.
        assert_eq!(b.column_tag(0), Some(tag::I64));
        assert_eq!(b.column_tag(1), Some(tag::F64));
        assert!(b.push_row([Some(Value::Bool(true)), None]).is_err());
        assert_eq!(
            b.column_tag(0),
            Some(tag::I64),
            "a rejected row is not counted"
        );
        b.push_row([Some(Value::Int(4)), None]).unwrap();
        assert_eq!((b.column_tag(0), b.column_tag(1)), (Some(tag::I64), None));
        b.push_row([Some(Value::Int(5)), Some(Value::Float(1.0))])
            .unwrap();
        assert_eq!(b.column_tag(1), None, "a mixed column stays mixed");
        b.clear();
        assert_eq!(b.column_tag(0), None);
        b.push_row([None, Some(Value::Float(1.0))]).unwrap();
        assert_eq!(
            (b.column_tag(0), b.column_tag(1)),
            (Some(tag::ABSENT), Some(tag::F64))
        );
    }

    #[test]
    fn objects_are_dense_and_lazy() {
        let mut o = Objects::default();
        o.set(3, None);
        assert_eq!(o.allocated(), 0, "scalars alone allocate no object column");
        o.set(2, Some(Value::Unit));
        o.set(5, None);
        assert_eq!(o.get(2), Some(&Value::Unit));
        assert_eq!(o.get(5), None);
        o.set(2, None);
        assert_eq!(o.get(2), None);
    }
}
