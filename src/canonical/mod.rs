//! The canonical arena interpreter (DESIGN §3): the reference tier every other tier must equal.
//!
//! Per row it evaluates each stream of the schedule node by node over
//! dynamic `Value`s, reading operands from the arena and writing results
//! back; the root's value is published to the stream's environment slot.
//! After the last stream the tick barrier advances the offset rings. All
//! temporal state lives in one `NodeState`.
//!
//! Offset rings store *effective* values: the ring of `e[n]` holds, for each
//! of the last `n` steps, `e`'s value if it was present, else the entry
//! before it (⊥ before the first step). Then `e[n]` at step `s` is simply
//! the entry for step `s - n`, which is exactly "the value `e` had `n` steps
//! earlier; if that was NoVal, the last value the offset emitted". The entry
//! for step `t` lives in slot `t % n`, so the read of step `s` and the write
//! of the barrier touch the same slot.

pub mod ops;

use crate::error::{Fault, RuntimeError};
use crate::lang::ast::Builtin;
use crate::lang::check::StreamId;
use crate::plan::{NodeId, NodeOp, Plan};
use crate::value::{Sample, Value};
use scalar_ir::frame::tag;

/// All state of a run: the value arena (streams, nodes and constants),
/// builtin flags and offset rings.
///
/// Every slot of the arena (`Plan::slot`) is kept in the scalar frame
/// layout of `scalar_ir::frame`: a tag byte and a `u64` payload lane, plus an
/// object for values the scalar tiers cannot represent (Str, Unit), so that
/// fused and native code read and write this very memory (their frame's
/// environment is the arena, their state is the rings) and no value is ever
/// copied between tiers. A slot's tag is its raw value this step (`ABSENT` is
/// NoVal); while it is NoVal, `held_tags` keeps the tag of its last value,
/// whose payload is still in the lane, which is the hold rule's cell.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeState {
    /// The number of rows evaluated so far (the current step while a row runs).
    pub step: u64,
    /// Raw tag of every slot.
    pub tags: Vec<u8>,
    /// Tag of the held value of every slot whose raw tag is `ABSENT`.
    pub held_tags: Vec<u8>,
    /// Payload of every slot (current or held value).
    pub lanes: Vec<u64>,
    /// The value of every slot tagged `OTHER`.
    pub objects: Vec<Option<Value>>,
    /// The flag of `when`, `init` and `update` nodes, by `NodeId`.
    pub flag: Vec<bool>,
    /// Offset rings (see the module doc), laid out by `NodeData::ring_base`,
    /// in the same tag/lane/object form.
    pub ring_tags: Vec<u8>,
    pub ring_lanes: Vec<u64>,
    pub ring_objects: Vec<Option<Value>>,
    /// Errors raised inside each arm of each `if` during the current row,
    /// two per node (`2 * node + arm`); the `if` reports or discards them.
    pending: Vec<Option<Fault>>,
    /// The longest string a `++` may produce (see `ops::binary_bounded`).
    pub max_string_bytes: usize,
}

/// Rebuilds a sample from its frame form (tag, payload, and the object of a
/// cell tagged `OTHER`). Batches use the same form.
#[inline]
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

/// The tag and payload of a value with a scalar form; `None` for values
/// kept as objects (Str, Unit), which are tagged `OTHER`.
#[inline]
pub(crate) fn scalar_form(v: &Value) -> Option<(u8, u64)> {
    match v {
        Value::Int(i) => Some((tag::I64, *i as u64)),
        Value::Float(f) => Some((tag::F64, f.to_bits())),
        Value::Bool(b) => Some((tag::B1, *b as u64)),
        _ => None,
    }
}

impl NodeState {
    pub fn new(plan: &Plan) -> NodeState {
        let n = plan.slot_count();
        let rings = plan.ring_len as usize;
        let mut st = NodeState {
            step: 0,
            tags: vec![tag::ABSENT; n],
            held_tags: vec![tag::ABSENT; n],
            lanes: vec![0; n],
            objects: vec![None; n],
            flag: vec![false; plan.nodes.len()],
            ring_tags: vec![tag::DEFERRED; rings],
            ring_lanes: vec![0; rings],
            ring_objects: vec![None; rings],
            pending: vec![None; 2 * plan.nodes.len()],
            max_string_bytes: ops::DEFAULT_MAX_STRING_BYTES,
        };
        let consts_from = n - plan.consts.len();
        for (i, c) in plan.consts.iter().enumerate() {
            st.write((consts_from + i) as u32, Sample::Value(c.clone()));
        }
        st
    }

    /// The raw value of a slot: NoVal unless it has a value this step.
    #[inline]
    pub fn raw(&self, slot: u32) -> Sample {
        let i = slot as usize;
        decode(self.tags[i], self.lanes[i], self.objects[i].as_ref())
    }

    /// Whether a slot is NoVal at this step.
    #[inline]
    fn is_noval(&self, slot: u32) -> bool {
        self.tags[slot as usize] == tag::ABSENT
    }

    /// The slot under the hold rule: its last non-NoVal value (NoVal if it
    /// never had one).
    #[inline]
    pub fn held(&self, slot: u32) -> Sample {
        let i = slot as usize;
        let t = match self.tags[i] {
            tag::ABSENT => self.held_tags[i],
            t => t,
        };
        decode(t, self.lanes[i], self.objects[i].as_ref())
    }

    /// The current (raw) value of stream `s`.
    pub fn stream_sample(&self, s: StreamId) -> Sample {
        self.raw(s.0)
    }

    /// Stores a sample in a slot. NoVal only marks the slot absent for this
    /// step, remembering the held value's tag (its payload stays in place).
    #[inline]
    pub fn write(&mut self, slot: u32, sample: Sample) {
        let i = slot as usize;
        match sample {
            Sample::NoVal => {
                if self.tags[i] != tag::ABSENT {
                    self.held_tags[i] = self.tags[i];
                    self.tags[i] = tag::ABSENT;
                }
            }
            Sample::Deferred => self.tags[i] = tag::DEFERRED,
            Sample::Value(v) => match scalar_form(&v) {
                Some((t, lane)) => {
                    self.tags[i] = t;
                    self.lanes[i] = lane;
                }
                None => {
                    self.tags[i] = tag::OTHER;
                    self.objects[i] = Some(v);
                }
            },
        }
    }

    /// Starts a row: publishes the inputs (one cell per declared input).
    pub fn begin_row(&mut self, plan: &Plan, row: &[Option<Value>]) {
        for (i, &s) in plan.spec.inputs.iter().enumerate() {
            match row.get(i) {
                Some(Some(v)) => self.write_value(s.0, v),
                _ => self.write(s.0, Sample::NoVal),
            }
        }
    }

    /// Stores a present value in a slot, straight into its frame form (no
    /// intermediate `Sample`: this is the per-input cost of every row).
    #[inline]
    pub fn write_value(&mut self, slot: u32, v: &Value) {
        let i = slot as usize;
        match scalar_form(v) {
            Some((t, lane)) => {
                self.tags[i] = t;
                self.lanes[i] = lane;
            }
            None => {
                self.tags[i] = tag::OTHER;
                self.objects[i] = Some(v.clone());
            }
        }
    }

    /// Evaluates one stream: its nodes in postorder, then publishes the root.
    pub fn eval_stream(&mut self, plan: &Plan, s: StreamId) -> Result<(), RuntimeError> {
        let Some(graph) = plan.graph(s) else {
            return Ok(());
        };
        for id in graph.node_ids() {
            self.eval_node(plan, id)?;
        }
        self.publish_root(plan, s);
        Ok(())
    }

    /// Publishes a stream's root: a root node already wrote the stream's
    /// slot; a reference or constant root is copied into it.
    pub fn publish_root(&mut self, plan: &Plan, s: StreamId) {
        if let Some(graph) = plan.graph(s)
            && !matches!(graph.root, crate::plan::Operand::Node(_))
        {
            let v = self.raw(graph.root_slot);
            self.write(s.0, v);
        }
    }

    /// Evaluates one node and stores its value. A fault inside an `if` arm is
    /// parked for that `if` to report or discard; the node is NoVal.
    pub fn eval_node(&mut self, plan: &Plan, id: NodeId) -> Result<(), RuntimeError> {
        let node = plan.node(id);
        let sample = match self.compute(plan, id) {
            Ok(s) => s,
            Err(fault) => match node.branch {
                Some(b) => {
                    let slot = &mut self.pending[2 * b.if_node.index() + b.arm as usize];
                    if slot.is_none() {
                        *slot = Some(fault);
                    }
                    Sample::NoVal
                }
                None => return Err(fault.at(plan.stream_name(node.stream), self.step)),
            },
        };
        self.write(plan.node_slot(id), sample);
        Ok(())
    }

    fn compute(&mut self, plan: &Plan, id: NodeId) -> Result<Sample, Fault> {
        let node = plan.node(id);
        let [a0, a1, a2] = node.slots;
        match node.op {
            NodeOp::Binary(op) => {
                let max = self.max_string_bytes;
                pointwise2(self.held(a0), self.held(a1), |x, y| {
                    ops::binary_bounded(op, x, y, max)
                })
            }
            NodeOp::Unary(op) => pointwise1(self.held(a0), |x| ops::unary(op, x)),
            NodeOp::Offset(n) => {
                let k = (node.ring_base as u64 + self.step % n as u64) as usize;
                Ok(decode(
                    self.ring_tags[k],
                    self.ring_lanes[k],
                    self.ring_objects[k].as_ref(),
                ))
            }
            NodeOp::If => self.compute_if(id, [a0, a1, a2]),
            NodeOp::Call(f) => match f {
                Builtin::Default => Ok(match self.held(a0) {
                    Sample::Deferred => self.raw(a1),
                    e => e,
                }),
                Builtin::IsDefined => Ok(Sample::Value(Value::Bool(!matches!(
                    self.held(a0),
                    Sample::Deferred
                )))),
                Builtin::When => {
                    let fired = matches!(self.held(a0), Sample::Value(_));
                    let flag = &mut self.flag[id.index()];
                    *flag |= fired;
                    Ok(Sample::Value(Value::Bool(*flag)))
                }
                Builtin::Init => match self.raw(a0) {
                    Sample::NoVal if !self.flag[id.index()] => Ok(self.raw(a1)),
                    e => {
                        self.flag[id.index()] |= !e.is_noval();
                        Ok(e)
                    }
                },
                Builtin::Latch => Ok(match self.is_noval(a1) {
                    true => Sample::NoVal,
                    false => self.held(a0),
                }),
                Builtin::Update => {
                    let b = self.held(a1);
                    let fired = matches!(b, Sample::Value(_));
                    let out = if fired || self.flag[id.index()] {
                        b
                    } else {
                        self.held(a0)
                    };
                    self.flag[id.index()] |= fired;
                    Ok(out)
                }
                math if node.args.len() == 1 => {
                    pointwise1(self.held(a0), |x| ops::math(math, &[x]))
                }
                math => pointwise2(self.held(a0), self.held(a1), |x, y| {
                    ops::math(math, &[x, y])
                }),
            },
        }
    }

    fn compute_if(&mut self, id: NodeId, [c, a, b]: [u32; 3]) -> Result<Sample, Fault> {
        let then_fault = self.pending[2 * id.index()].take();
        let else_fault = self.pending[2 * id.index() + 1].take();
        let c = self.held(c);
        if let Sample::Value(Value::Bool(b)) = c {
            // An error of the selected arm is this `if`'s error; one of the
            // other arm is discarded (DESIGN §2.1).
            if let Some(f) = if b { then_fault } else { else_fault } {
                return Err(f);
            }
        }
        let (a, b) = (self.held(a), self.held(b));
        if c.is_noval() || a.is_noval() || b.is_noval() {
            return Ok(Sample::NoVal);
        }
        match c {
            Sample::Deferred => Ok(Sample::Deferred),
            Sample::Value(Value::Bool(true)) => Ok(a),
            Sample::Value(Value::Bool(false)) => Ok(b),
            Sample::Value(other) => Err(Fault {
                kind: crate::error::ErrorKind::InvalidOperand,
                op: "if",
                detail: Some(format!("condition {other}")),
            }),
            Sample::NoVal => Ok(Sample::NoVal),
        }
    }

    /// The tick barrier: advances every offset ring with this row's values,
    /// then moves to the next step.
    pub fn end_row(&mut self, plan: &Plan) {
        for &id in &plan.offset_nodes {
            let node = plan.node(id);
            let NodeOp::Offset(n) = node.op else { continue };
            let (n, base) = (n as u64, node.ring_base as u64);
            let k = (base + self.step % n) as usize;
            let operand = node.slots[0] as usize;
            if self.tags[operand] != tag::ABSENT {
                self.ring_tags[k] = self.tags[operand];
                self.ring_lanes[k] = self.lanes[operand];
                if self.tags[operand] == tag::OTHER {
                    self.ring_objects[k] = self.objects[operand].clone();
                }
            } else {
                // The operand is NoVal: the entry repeats the one before it.
                let prev = (base + (self.step + n - 1) % n) as usize;
                self.ring_tags[k] = self.ring_tags[prev];
                self.ring_lanes[k] = self.ring_lanes[prev];
                if self.ring_tags[prev] == tag::OTHER {
                    self.ring_objects[k] = self.ring_objects[prev].clone();
                }
            }
        }
        self.step += 1;
    }

    /// Evaluates one whole row on the canonical tier.
    pub fn run_row(&mut self, plan: &Plan, row: &[Option<Value>]) -> Result<(), RuntimeError> {
        self.begin_row(plan, row);
        for &s in &plan.schedule {
            self.eval_stream(plan, s)?;
        }
        self.end_row(plan);
        Ok(())
    }
}

/// Applies a pointwise operator to held operands: NoVal if any is NoVal,
/// else ⊥ if any is ⊥, else the operator on the values.
#[inline]
fn pointwise2(
    a: Sample,
    b: Sample,
    f: impl FnOnce(&Value, &Value) -> Result<Value, Fault>,
) -> Result<Sample, Fault> {
    match (a, b) {
        (Sample::Value(x), Sample::Value(y)) => f(&x, &y).map(Sample::Value),
        (Sample::NoVal, _) | (_, Sample::NoVal) => Ok(Sample::NoVal),
        _ => Ok(Sample::Deferred),
    }
}

#[inline]
fn pointwise1(a: Sample, f: impl FnOnce(&Value) -> Result<Value, Fault>) -> Result<Sample, Fault> {
    match a {
        Sample::Value(x) => f(&x).map(Sample::Value),
        Sample::NoVal => Ok(Sample::NoVal),
        Sample::Deferred => Ok(Sample::Deferred),
    }
}
