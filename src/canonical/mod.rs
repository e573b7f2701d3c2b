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
use crate::plan::{NodeId, NodeOp, Operand, Plan};
use crate::value::{Sample, Value};

/// All state of a run: current values (environment and arena), hold cells,
/// builtin flags and offset rings.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeState {
    /// The number of rows evaluated so far (the current step while a row runs).
    pub step: u64,
    /// Current value of every stream (inputs included), by `StreamId`.
    pub env: Vec<Sample>,
    /// Last non-NoVal value of every stream (NoVal until it has one).
    pub stream_hold: Vec<Sample>,
    /// Current value of every node, by `NodeId`.
    pub value: Vec<Sample>,
    /// Last non-NoVal value of every node.
    pub hold: Vec<Sample>,
    /// The flag of `when`, `init` and `update` nodes.
    pub flag: Vec<bool>,
    /// Offset rings (see the module doc), laid out by `NodeData::ring_base`.
    pub ring: Vec<Sample>,
    /// Errors raised inside each arm of each `if` during the current row,
    /// two per node (`2 * node + arm`); the `if` reports or discards them.
    pending: Vec<Option<Fault>>,
}

/// A borrowed view of a sample (constants are values without a sample).
#[derive(Clone, Copy, Debug)]
enum View<'a> {
    NoVal,
    Deferred,
    Val(&'a Value),
}

impl<'a> View<'a> {
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
        let streams = plan.spec.streams.len();
        let nodes = plan.nodes.len();
        NodeState {
            step: 0,
            env: vec![Sample::NoVal; streams],
            stream_hold: vec![Sample::NoVal; streams],
            value: vec![Sample::NoVal; nodes],
            hold: vec![Sample::NoVal; nodes],
            flag: vec![false; nodes],
            ring: vec![Sample::Deferred; plan.ring_len as usize],
            pending: vec![None; 2 * nodes],
        }
    }

    fn raw<'a>(&'a self, op: &'a Operand) -> View<'a> {
        match op {
            Operand::Node(n) => View::of(&self.value[n.index()]),
            Operand::Stream(s) => View::of(&self.env[s.index()]),
            Operand::Const(v) => View::Val(v),
        }
    }

    /// The operand under the hold rule: NoVal is replaced by the operand's
    /// last non-NoVal value (NoVal if it never had one).
    fn held<'a>(&'a self, op: &'a Operand) -> View<'a> {
        match self.raw(op) {
            View::NoVal => match op {
                Operand::Node(n) => View::of(&self.hold[n.index()]),
                Operand::Stream(s) => View::of(&self.stream_hold[s.index()]),
                Operand::Const(_) => View::NoVal,
            },
            v => v,
        }
    }

    /// Starts a row: publishes the inputs (one cell per declared input).
    pub fn begin_row(&mut self, plan: &Plan, row: &[Option<Value>]) {
        for (i, &s) in plan.spec.inputs.iter().enumerate() {
            let sample = match row.get(i) {
                Some(Some(v)) => Sample::Value(v.clone()),
                _ => Sample::NoVal,
            };
            self.publish(s.index(), sample);
        }
    }

    fn publish(&mut self, stream: usize, sample: Sample) {
        if !sample.is_noval() {
            self.stream_hold[stream] = sample.clone();
        }
        self.env[stream] = sample;
    }

    /// Evaluates one stream: its nodes in postorder, then publishes the root.
    pub fn eval_stream(
        &mut self,
        plan: &Plan,
        s: crate::lang::check::StreamId,
    ) -> Result<(), RuntimeError> {
        let Some(graph) = plan.graph(s) else {
            return Ok(());
        };
        for id in graph.node_ids() {
            self.eval_node(plan, id)?;
        }
        let root = self.raw(&graph.root).to_sample();
        self.publish(s.index(), root);
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
        if !sample.is_noval() {
            self.hold[id.index()] = sample.clone();
        }
        self.value[id.index()] = sample;
        Ok(())
    }

    fn compute(&mut self, plan: &Plan, id: NodeId) -> Result<Sample, Fault> {
        let node = plan.node(id);
        let args = &node.args;
        match node.op {
            NodeOp::Unary(op) => pointwise(&[self.held(&args[0])], |v| ops::unary(op, v[0])),
            NodeOp::Binary(op) => pointwise(&[self.held(&args[0]), self.held(&args[1])], |v| {
                ops::binary(op, v[0], v[1])
            }),
            NodeOp::Offset(n) => {
                let slot = node.ring_base as u64 + self.step % n as u64;
                Ok(self.ring[slot as usize].clone())
            }
            NodeOp::If => self.compute_if(id, args),
            NodeOp::Call(f) => match f {
                Builtin::Default => Ok(match self.held(&args[0]) {
                    View::Deferred => self.raw(&args[1]).to_sample(),
                    e => e.to_sample(),
                }),
                Builtin::IsDefined => Ok(Sample::Value(Value::Bool(!matches!(
                    self.held(&args[0]),
                    View::Deferred
                )))),
                Builtin::When => {
                    let fired = matches!(self.held(&args[0]), View::Val(_));
                    let flag = &mut self.flag[id.index()];
                    *flag |= fired;
                    Ok(Sample::Value(Value::Bool(*flag)))
                }
                Builtin::Init => match self.raw(&args[0]) {
                    View::NoVal if !self.flag[id.index()] => Ok(self.raw(&args[1]).to_sample()),
                    e => {
                        let present = !matches!(e, View::NoVal);
                        let out = e.to_sample();
                        self.flag[id.index()] |= present;
                        Ok(out)
                    }
                },
                Builtin::Latch => Ok(match self.raw(&args[1]) {
                    View::NoVal => Sample::NoVal,
                    _ => self.held(&args[0]).to_sample(),
                }),
                Builtin::Update => {
                    let b = self.held(&args[1]);
                    let fired = matches!(b, View::Val(_));
                    let out = if fired || self.flag[id.index()] {
                        b.to_sample()
                    } else {
                        self.held(&args[0]).to_sample()
                    };
                    self.flag[id.index()] |= fired;
                    Ok(out)
                }
                math if args.len() == 1 => {
                    pointwise(&[self.held(&args[0])], |v| ops::math(math, v))
                }
                math => pointwise(&[self.held(&args[0]), self.held(&args[1])], |v| {
                    ops::math(math, v)
                }),
            },
        }
    }

    fn compute_if(&mut self, id: NodeId, args: &[Operand]) -> Result<Sample, Fault> {
        let then_fault = self.pending[2 * id.index()].take();
        let else_fault = self.pending[2 * id.index() + 1].take();
        let c = self.held(&args[0]);
        if let View::Val(Value::Bool(b)) = c {
            // An error of the selected arm is this `if`'s error; one of the
            // other arm is discarded (DESIGN §2.1).
            if let Some(f) = if *b { then_fault } else { else_fault } {
                return Err(f);
            }
        }
        let (a, b) = (self.held(&args[1]), self.held(&args[2]));
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
            match self.raw(&node.args[0]) {
                View::NoVal => {
                    let prev = (base + (self.step + n - 1) % n) as usize;
                    self.ring[slot] = self.ring[prev].clone();
                }
                v => self.ring[slot] = v.to_sample(),
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
fn pointwise(
    args: &[View],
    f: impl FnOnce(&[&Value]) -> Result<Value, Fault>,
) -> Result<Sample, Fault> {
    let mut vals: [&Value; 2] = [&Value::Unit, &Value::Unit];
    let mut deferred = false;
    for (i, a) in args.iter().enumerate() {
        match a {
            View::NoVal => return Ok(Sample::NoVal),
            View::Deferred => deferred = true,
            View::Val(v) => vals[i] = v,
        }
    }
    if deferred {
        return Ok(Sample::Deferred);
    }
    f(&vals[..args.len()]).map(Sample::Value)
}
