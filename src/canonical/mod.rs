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

/// All state of a run: current values (streams and nodes, in one arena),
/// freshness flags, builtin flags and offset rings.
///
/// The value arena has one slot per stream, per node and per constant
/// operand (`Plan::slot`). A slot holds the last non-NoVal value it had (its
/// *held* value, NoVal until it has one) and a freshness flag saying whether
/// it has a value at the current step; so the raw value is the slot where
/// fresh, else NoVal. One slot serves both the hold rule and plain reads, and
/// publishing a value writes it once.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeState {
    /// The number of rows evaluated so far (the current step while a row runs).
    pub step: u64,
    /// Held value of every slot.
    pub slots: Vec<Sample>,
    /// Whether each slot has a value at the current step.
    pub fresh: Vec<bool>,
    /// The flag of `when`, `init` and `update` nodes, by `NodeId`.
    pub flag: Vec<bool>,
    /// Offset rings (see the module doc), laid out by `NodeData::ring_base`.
    pub ring: Vec<Sample>,
    /// Errors raised inside each arm of each `if` during the current row,
    /// two per node (`2 * node + arm`); the `if` reports or discards them.
    pending: Vec<Option<Fault>>,
}

/// A borrowed view of a sample.
#[derive(Clone, Copy, Debug)]
enum View<'a> {
    NoVal,
    Deferred,
    Val(&'a Value),
}

impl<'a> View<'a> {
    #[inline]
    fn of(s: &'a Sample) -> View<'a> {
        match s {
            Sample::NoVal => View::NoVal,
            Sample::Deferred => View::Deferred,
            Sample::Value(v) => View::Val(v),
        }
    }

    fn to_sample(self) -> Sample {
        match self {
            View::NoVal => Sample::NoVal,
            View::Deferred => Sample::Deferred,
            View::Val(v) => Sample::Value(v.clone()),
        }
    }
}

impl NodeState {
    pub fn new(plan: &Plan) -> NodeState {
        let n = plan.slot_count();
        let consts_from = n - plan.consts.len();
        let mut slots = vec![Sample::NoVal; n];
        let mut fresh = vec![false; n];
        for (i, c) in plan.consts.iter().enumerate() {
            slots[consts_from + i] = Sample::Value(c.clone());
            fresh[consts_from + i] = true;
        }
        NodeState {
            step: 0,
            slots,
            fresh,
            flag: vec![false; plan.nodes.len()],
            ring: vec![Sample::Deferred; plan.ring_len as usize],
            pending: vec![None; 2 * plan.nodes.len()],
        }
    }

    /// The raw value of a slot: NoVal unless it has a value this step.
    #[inline]
    fn raw(&self, slot: u32) -> View<'_> {
        let i = slot as usize;
        if self.fresh[i] {
            View::of(&self.slots[i])
        } else {
            View::NoVal
        }
    }

    /// The slot under the hold rule: its last non-NoVal value (NoVal if it
    /// never had one).
    #[inline]
    fn held(&self, slot: u32) -> View<'_> {
        View::of(&self.slots[slot as usize])
    }

    /// The current (raw) value of stream `s`.
    pub fn stream_sample(&self, s: StreamId) -> Sample {
        self.raw(s.0).to_sample()
    }

    /// Whether stream `s` has a value at the current step, and its held value.
    pub fn stream_slot(&self, s: StreamId) -> (bool, &Sample) {
        (self.fresh[s.index()], &self.slots[s.index()])
    }

    /// Starts a row: publishes the inputs (one cell per declared input).
    pub fn begin_row(&mut self, plan: &Plan, row: &[Option<Value>]) {
        for (i, &s) in plan.spec.inputs.iter().enumerate() {
            match row.get(i) {
                Some(Some(v)) => self.write(s.0, Sample::Value(v.clone())),
                _ => self.fresh[s.index()] = false,
            }
        }
    }

    /// Stores a sample in a slot: a value is kept (and held); NoVal only
    /// clears the freshness, so the slot keeps its held value.
    #[inline]
    fn write(&mut self, slot: u32, sample: Sample) {
        let i = slot as usize;
        let fresh = !sample.is_noval();
        self.fresh[i] = fresh;
        if fresh {
            self.slots[i] = sample;
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
        let root = graph.root_slot;
        if root != s.0 {
            if self.fresh[root as usize] {
                let v = self.slots[root as usize].clone();
                self.write(s.0, v);
            } else {
                self.fresh[s.index()] = false;
            }
        }
        Ok(())
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
                pointwise2(self.held(a0), self.held(a1), |x, y| ops::binary(op, x, y))
            }
            NodeOp::Unary(op) => pointwise1(self.held(a0), |x| ops::unary(op, x)),
            NodeOp::Offset(n) => {
                let slot = node.ring_base as u64 + self.step % n as u64;
                Ok(self.ring[slot as usize].clone())
            }
            NodeOp::If => self.compute_if(id, [a0, a1, a2]),
            NodeOp::Call(f) => match f {
                Builtin::Default => Ok(match self.held(a0) {
                    View::Deferred => self.raw(a1).to_sample(),
                    e => e.to_sample(),
                }),
                Builtin::IsDefined => Ok(Sample::Value(Value::Bool(!matches!(
                    self.held(a0),
                    View::Deferred
                )))),
                Builtin::When => {
                    let fired = matches!(self.held(a0), View::Val(_));
                    let flag = &mut self.flag[id.index()];
                    *flag |= fired;
                    Ok(Sample::Value(Value::Bool(*flag)))
                }
                Builtin::Init => match self.raw(a0) {
                    View::NoVal if !self.flag[id.index()] => Ok(self.raw(a1).to_sample()),
                    e => {
                        let present = !matches!(e, View::NoVal);
                        let out = e.to_sample();
                        self.flag[id.index()] |= present;
                        Ok(out)
                    }
                },
                Builtin::Latch => Ok(match self.raw(a1) {
                    View::NoVal => Sample::NoVal,
                    _ => self.held(a0).to_sample(),
                }),
                Builtin::Update => {
                    let b = self.held(a1);
                    let fired = matches!(b, View::Val(_));
                    let out = if fired || self.flag[id.index()] {
                        b.to_sample()
                    } else {
                        self.held(a0).to_sample()
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
        if let View::Val(Value::Bool(b)) = c {
            // An error of the selected arm is this `if`'s error; one of the
            // other arm is discarded (DESIGN §2.1).
            if let Some(f) = if *b { then_fault } else { else_fault } {
                return Err(f);
            }
        }
        let (a, b) = (self.held(a), self.held(b));
        if [c, a, b].iter().any(|v| matches!(v, View::NoVal)) {
            return Ok(Sample::NoVal);
        }
        match c {
            View::Deferred => Ok(Sample::Deferred),
            View::Val(Value::Bool(true)) => Ok(a.to_sample()),
            View::Val(Value::Bool(false)) => Ok(b.to_sample()),
            View::Val(other) => Err(Fault {
                kind: crate::error::ErrorKind::InvalidOperand,
                op: "if",
                detail: Some(format!("condition {other}")),
            }),
            View::NoVal => Ok(Sample::NoVal),
        }
    }

    /// The tick barrier: advances every offset ring with this row's values,
    /// then moves to the next step.
    pub fn end_row(&mut self, plan: &Plan) {
        for &id in &plan.offset_nodes {
            let node = plan.node(id);
            let NodeOp::Offset(n) = node.op else { continue };
            let (n, base) = (n as u64, node.ring_base as u64);
            let slot = (base + self.step % n) as usize;
            let operand = node.slots[0] as usize;
            if self.fresh[operand] {
                self.ring[slot] = self.slots[operand].clone();
            } else {
                let prev = (base + (self.step + n - 1) % n) as usize;
                self.ring[slot] = self.ring[prev].clone();
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
    a: View,
    b: View,
    f: impl FnOnce(&Value, &Value) -> Result<Value, Fault>,
) -> Result<Sample, Fault> {
    match (a, b) {
        (View::Val(x), View::Val(y)) => f(x, y).map(Sample::Value),
        (View::NoVal, _) | (_, View::NoVal) => Ok(Sample::NoVal),
        _ => Ok(Sample::Deferred),
    }
}

#[inline]
fn pointwise1(a: View, f: impl FnOnce(&Value) -> Result<Value, Fault>) -> Result<Sample, Fault> {
    match a {
        View::Val(x) => f(x).map(Sample::Value),
        View::NoVal => Ok(Sample::NoVal),
        View::Deferred => Ok(Sample::Deferred),
    }
}
