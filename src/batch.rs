//! Batches: rows held in columns for `Monitor::run_batch`, and their outputs.
//!
//! Both use the scalar frame layout (DESIGN §4): per cell a tag byte and a
//! `u64` payload, row-major, so the native batch kernel of the `native-whole`
//! tier reads the inputs and writes the outputs of many rows in one call.
//! Values with no scalar form (Str, Unit) are kept beside as objects.

use crate::canonical::{decode, scalar_form};
use crate::value::{Sample, Value};
use scalar_ir::frame::tag;

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

/// Input rows in columns: one cell per declared input per row.
#[derive(Clone, Debug, Default)]
pub struct RowBatch {
    pub(crate) width: usize,
    pub(crate) rows: usize,
    pub(crate) lanes: Vec<u64>,
    pub(crate) tags: Vec<u8>,
    pub(crate) objects: Objects,
}

/// The values of cells tagged `OTHER`, indexed like the lanes. Empty until
/// the first such value, so all-scalar batches carry no object column.
#[derive(Clone, Debug, Default)]
pub(crate) struct Objects(Vec<Option<Value>>);

impl Objects {
    /// Records the object of cell `i` (the cell about to be pushed, or one
    /// already there).
    pub(crate) fn set(&mut self, i: usize, v: Option<Value>) {
        if v.is_none() && self.0.len() <= i {
            return;
        }
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        self.0[i] = v;
    }

    pub(crate) fn get(&self, i: usize) -> Option<&Value> {
        self.0.get(i).and_then(Option::as_ref)
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

impl RowBatch {
    /// An empty batch for rows of `width` inputs (`Monitor::input_count`).
    pub fn new(width: usize) -> RowBatch {
        RowBatch {
            width,
            ..RowBatch::default()
        }
    }

    /// Appends a row (one cell per declared input, `None` = absent).
    pub fn push_row(&mut self, row: &[Option<Value>]) {
        for k in 0..self.width {
            let (t, lane, object) = encode(row.get(k).unwrap_or(&None));
            self.objects.set(self.lanes.len(), object);
            self.tags.push(t);
            self.lanes.push(lane);
        }
        self.rows += 1;
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn clear(&mut self) {
        self.rows = 0;
        self.lanes.clear();
        self.tags.clear();
        self.objects.clear();
    }

    /// Row `r` as cells.
    pub fn row(&self, r: usize) -> Vec<Option<Value>> {
        (0..self.width)
            .map(|k| {
                let i = r * self.width + k;
                decode(self.tags[i], self.lanes[i], self.objects.get(i))
                    .value()
                    .cloned()
            })
            .collect()
    }
}

/// The printed outputs of a batch: one sample per output per row.
#[derive(Clone, Debug, Default)]
pub struct OutputBatch {
    pub(crate) width: usize,
    /// Rows completed (all of the batch, unless a runtime error stopped it).
    pub(crate) rows: usize,
    pub(crate) lanes: Vec<u64>,
    pub(crate) tags: Vec<u8>,
    pub(crate) objects: Objects,
}

impl OutputBatch {
    pub fn new() -> OutputBatch {
        OutputBatch::default()
    }

    /// Rows whose outputs are here.
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Output `col` of row `r`.
    pub fn get(&self, r: usize, col: usize) -> Sample {
        let i = r * self.width + col;
        decode(self.tags[i], self.lanes[i], self.objects.get(i))
    }

    /// Row `r`'s outputs.
    pub fn row(&self, r: usize) -> Vec<Sample> {
        (0..self.width).map(|c| self.get(r, c)).collect()
    }

    pub(crate) fn reset(&mut self, width: usize, rows: usize) {
        self.width = width;
        self.rows = 0;
        self.lanes.clear();
        self.lanes.resize(width * rows, 0);
        self.tags.clear();
        self.tags.resize(width * rows, tag::ABSENT);
        self.objects.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_with_objects_anywhere() {
        let mut b = RowBatch::new(3);
        let rows = vec![
            vec![Some(Value::Int(1)), None, Some(Value::Float(f64::NAN))],
            vec![None, Some(Value::Str("a".into())), Some(Value::Bool(true))],
            vec![Some(Value::Unit), Some(Value::Int(-5)), None],
        ];
        for r in &rows {
            b.push_row(r);
        }
        assert_eq!(b.len(), 3);
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(&b.row(i), r);
        }
        b.clear();
        assert!(b.is_empty());
        b.push_row(&[Some(Value::Int(2)), None, None]);
        assert_eq!(b.row(0), vec![Some(Value::Int(2)), None, None]);
    }

    #[test]
    fn objects_are_dense_and_lazy() {
        let mut o = Objects::default();
        o.set(3, None);
        assert!(o.0.is_empty(), "scalars alone allocate no object column");
        o.set(2, Some(Value::Unit));
        o.set(5, None);
        assert_eq!(o.get(2), Some(&Value::Unit));
        assert_eq!(o.get(5), None);
        o.set(2, None);
        assert_eq!(o.get(2), None);
    }
}
