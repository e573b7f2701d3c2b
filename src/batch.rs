//! Batches: rows held in columns for `Monitor::run_batch`, and their outputs.
//!
//! Both use the scalar frame layout (DESIGN §4): per cell a tag byte and a
//! `u64` payload, row-major, so the native batch kernel of the `native-whole`
//! tier reads the inputs and writes the outputs of many rows in one call.
//! Values with no scalar form (Str, Unit) are kept beside as objects.

use crate::value::{Sample, Value};
use scalar_ir::frame::tag;

/// Encodes a sample as (tag, payload, object).
pub(crate) fn encode(v: &Option<Value>) -> (u8, u64, Option<Value>) {
    match v {
        None => (tag::ABSENT, 0, None),
        Some(Value::Int(i)) => (tag::I64, *i as u64, None),
        Some(Value::Float(f)) => (tag::F64, f.to_bits(), None),
        Some(Value::Bool(b)) => (tag::B1, *b as u64, None),
        Some(other) => (tag::OTHER, 0, Some(other.clone())),
    }
}

/// Decodes a cell back to a sample.
pub(crate) fn decode(t: u8, lane: u64, object: Option<&Value>) -> Sample {
    match t {
        tag::ABSENT => Sample::NoVal,
        tag::DEFERRED => Sample::Deferred,
        tag::I64 => Sample::Value(Value::Int(lane as i64)),
        tag::F64 => Sample::Value(Value::Float(f64::from_bits(lane))),
        tag::B1 => Sample::Value(Value::Bool(lane != 0)),
        _ => object.map_or(Sample::NoVal, |v| Sample::Value(v.clone())),
    }
}

/// Input rows in columns: one cell per declared input per row.
#[derive(Clone, Debug, Default)]
pub struct RowBatch {
    pub(crate) width: usize,
    pub(crate) rows: usize,
    pub(crate) lanes: Vec<u64>,
    pub(crate) tags: Vec<u8>,
    pub(crate) objects: Vec<(usize, Value)>,
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
            if let Some(v) = object {
                self.objects.push((self.lanes.len(), v));
            }
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
                let object = self.objects.iter().find(|(j, _)| *j == i).map(|(_, v)| v);
                decode(self.tags[i], self.lanes[i], object).value().cloned()
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
    pub(crate) objects: Vec<(usize, Value)>,
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
        let object = self.objects.iter().find(|(j, _)| *j == i).map(|(_, v)| v);
        decode(self.tags[i], self.lanes[i], object)
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
