//! The plan (DESIGN §3): dependency graph, deterministic schedule and per-stream node graphs.
//!
//! Every defined stream is lowered to a graph of nodes in postorder. Node ids
//! index one arena shared by all streams, and each stream's nodes form a
//! contiguous range of it, so per-node state (`canonical::NodeState`) is a set
//! of flat vectors. A node's operands are other nodes, stream references (read
//! from environment slots) or constants; references and constants are not
//! nodes, so a bare reference `y = x` has no node at all, only a root operand.

use crate::lang::ast::{BinOp, Builtin, ExprId, ExprKind, UnOp};
use crate::lang::check::{CheckedSpec, ScalarSignature, StreamId, same_step_deps};
use crate::value::Value;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;
use std::sync::Arc;

/// A node in `Plan::nodes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a node reads one operand from.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    Node(NodeId),
    Stream(StreamId),
    Const(Value),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeOp {
    Unary(UnOp),
    Binary(BinOp),
    /// `if c then a else b`: operands `[c, a, b]`.
    If,
    /// `e[n]` with `n >= 1` (`e[0]` is `e` and makes no node).
    Offset(u32),
    Call(Builtin),
}

/// Which arm of which `if` a node is evaluated for (the innermost one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Branch {
    pub if_node: NodeId,
    /// 0 for `then`, 1 for `else`.
    pub arm: u8,
}

#[derive(Clone, Debug)]
pub struct NodeData {
    pub op: NodeOp,
    pub args: Vec<Operand>,
    pub expr: ExprId,
    pub stream: StreamId,
    pub sig: ScalarSignature,
    /// The innermost `if` arm containing this node: a runtime error raised
    /// here is only reported if that arm is selected.
    pub branch: Option<Branch>,
    /// For offset nodes, the first slot of the node's ring in
    /// `NodeState::ring` (its length is the offset).
    pub ring_base: u32,
    /// The operands as slots of the canonical value arena (see
    /// `Plan::slot`), unused entries zero.
    pub slots: [u32; 3],
    /// An offset of the stream's own name inside an `if` arm, which reads the
    /// arm (see `Lowering::rebind_self_offsets`). The checker typed it as the
    /// stream, so its signature may not describe its values: fusion leaves
    /// it to the canonical tier.
    pub rebound: bool,
}

/// The node graph of one defined stream.
#[derive(Clone, Debug)]
pub struct StreamGraph {
    pub nodes: Range<u32>,
    pub root: Operand,
    /// `root` as a slot of the canonical value arena.
    pub root_slot: u32,
}

impl StreamGraph {
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + use<> {
        self.nodes.clone().map(NodeId)
    }
}

/// A checked specification lowered for execution.
#[derive(Clone, Debug)]
pub struct Plan {
    pub spec: Arc<CheckedSpec>,
    /// Defined streams in evaluation order.
    pub schedule: Vec<StreamId>,
    pub nodes: Vec<NodeData>,
    /// Indexed by `StreamId`; `None` for inputs.
    pub graphs: Vec<Option<StreamGraph>>,
    /// Offset nodes, whose rings the tick barrier advances.
    pub offset_nodes: Vec<NodeId>,
    /// Total number of ring slots.
    pub ring_len: u32,
    /// The constants operands refer to, in slot order after the nodes.
    pub consts: Vec<Value>,
    /// The arena slot of every node: its own, or for a stream's root node
    /// the stream's slot, so the root's value needs no copy.
    pub node_slots: Vec<u32>,
}

impl Plan {
    pub fn new(spec: Arc<CheckedSpec>) -> Plan {
        let schedule = schedule(&spec);
        let mut b = Lowering {
            spec: &spec,
            nodes: Vec::new(),
            ring_len: 0,
            stream: StreamId(0),
        };
        let mut graphs = vec![None; spec.streams.len()];
        for id in spec.stream_ids() {
            let Some(def) = spec.stream(id).def else {
                continue;
            };
            b.stream = id;
            let start = b.nodes.len() as u32;
            let root = b.lower(def);
            graphs[id.index()] = Some(StreamGraph {
                nodes: start..b.nodes.len() as u32,
                root,
                root_slot: 0,
            });
        }
        let ring_len = b.ring_len;
        let nodes = b.nodes;
        let offset_nodes = (0..nodes.len() as u32)
            .map(NodeId)
            .filter(|n| matches!(nodes[n.index()].op, NodeOp::Offset(_)))
            .collect();
        let mut plan = Plan {
            spec,
            schedule,
            nodes,
            graphs,
            offset_nodes,
            ring_len,
            consts: Vec::new(),
            node_slots: Vec::new(),
        };
        plan.assign_slots();
        plan
    }

    /// Lays out the canonical value arena: one slot per stream, then one per
    /// node, then one per constant operand. A node's operands become plain
    /// slot indices, so the interpreter reads every operand the same way.
    fn assign_slots(&mut self) {
        let (streams, nodes) = (self.spec.streams.len() as u32, self.nodes.len() as u32);
        let mut node_slots: Vec<u32> = (0..nodes).map(|n| streams + n).collect();
        for (s, g) in self.graphs.iter().enumerate() {
            if let Some(StreamGraph {
                root: Operand::Node(n),
                ..
            }) = g
            {
                node_slots[n.index()] = s as u32;
            }
        }
        let mut consts: Vec<Value> = Vec::new();
        let mut slot = |op: &Operand| match op {
            Operand::Stream(s) => s.0,
            Operand::Node(n) => node_slots[n.index()],
            Operand::Const(v) => {
                consts.push(v.clone());
                streams + nodes + consts.len() as u32 - 1
            }
        };
        for n in &mut self.nodes {
            for (i, a) in n.args.iter().enumerate() {
                n.slots[i] = slot(a);
            }
        }
        for g in self.graphs.iter_mut().flatten() {
            g.root_slot = slot(&g.root);
        }
        self.consts = consts;
        self.node_slots = node_slots;
    }

    /// The number of slots of the canonical value arena.
    pub fn slot_count(&self) -> usize {
        self.spec.streams.len() + self.nodes.len() + self.consts.len()
    }

    /// The arena slot of node `n`.
    pub fn node_slot(&self, n: NodeId) -> u32 {
        self.node_slots[n.index()]
    }

    pub fn node(&self, id: NodeId) -> &NodeData {
        &self.nodes[id.index()]
    }

    pub fn graph(&self, s: StreamId) -> Option<&StreamGraph> {
        self.graphs[s.index()].as_ref()
    }

    pub fn stream_name(&self, s: StreamId) -> &str {
        &self.spec.stream(s).name
    }
}

/// A topological order of the defined streams along offset-0 references,
/// ties broken by declaration order. The checker has rejected cycles.
fn schedule(spec: &CheckedSpec) -> Vec<StreamId> {
    let deps = same_step_deps(&spec.ast, &spec.streams, &spec.expr_stream);
    let n = spec.streams.len();
    let defined = |s: StreamId| spec.stream(s).def.is_some();
    let mut indegree = vec![0usize; n];
    let mut readers: Vec<Vec<StreamId>> = vec![Vec::new(); n];
    for s in spec.stream_ids().filter(|&s| defined(s)) {
        for &d in &deps[s.index()] {
            if defined(d) {
                indegree[s.index()] += 1;
                readers[d.index()].push(s);
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<StreamId>> = spec
        .stream_ids()
        .filter(|&s| defined(s) && indegree[s.index()] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::new();
    while let Some(Reverse(s)) = ready.pop() {
        order.push(s);
        for &r in &readers[s.index()] {
            indegree[r.index()] -= 1;
            if indegree[r.index()] == 0 {
                ready.push(Reverse(r));
            }
        }
    }
    order
}

struct Lowering<'a> {
    spec: &'a CheckedSpec,
    nodes: Vec<NodeData>,
    ring_len: u32,
    stream: StreamId,
}

impl Lowering<'_> {
    /// The Trustworthiness Checker binds a stream's name, inside an arm of an
    /// `if` in that stream's own definition, to the arm itself: there
    /// `z[n]` is the arm's value `n` steps earlier, not `z`'s. vigil
    /// reproduces this so that both tools agree (the conformance cases pin
    /// it); it applies to offsets of the stream's name in the innermost arm.
    fn rebind_self_offsets(&mut self, range: Range<usize>, arm: &Operand) {
        let me = Operand::Stream(self.stream);
        for n in &mut self.nodes[range] {
            if matches!(n.op, NodeOp::Offset(_)) && n.args[0] == me {
                n.args[0] = arm.clone();
                n.rebound = true;
            }
        }
    }

    fn lower(&mut self, e: ExprId) -> Operand {
        let kind = &self.spec.ast.expr(e).kind;
        let (op, args) = match kind {
            ExprKind::Int(i) => return Operand::Const(Value::Int(*i)),
            ExprKind::Float(f) => return Operand::Const(Value::Float(*f)),
            ExprKind::Bool(b) => return Operand::Const(Value::Bool(*b)),
            ExprKind::Str(s) => return Operand::Const(Value::Str(s.clone())),
            ExprKind::Unit => return Operand::Const(Value::Unit),
            ExprKind::Name(_) => {
                let s =
                    self.spec.expr_stream[e.index()].expect("names are resolved by the checker");
                return Operand::Stream(s);
            }
            ExprKind::Offset(a, 0) => return self.lower(*a),
            ExprKind::Offset(a, n) => (NodeOp::Offset(*n), vec![self.lower(*a)]),
            ExprKind::Unary(op, a) => (NodeOp::Unary(*op), vec![self.lower(*a)]),
            ExprKind::Binary(op, a, b) => {
                let a = self.lower(*a);
                (NodeOp::Binary(*op), vec![a, self.lower(*b)])
            }
            ExprKind::If(c, a, b) => {
                let c = self.lower(*c);
                let then_start = self.nodes.len();
                let a = self.lower(*a);
                let else_start = self.nodes.len();
                let b = self.lower(*b);
                let end = self.nodes.len();
                let if_node = NodeId(end as u32);
                self.rebind_self_offsets(then_start..else_start, &a);
                self.rebind_self_offsets(else_start..end, &b);
                for (arm, range) in [(0u8, then_start..else_start), (1, else_start..end)] {
                    for n in &mut self.nodes[range] {
                        n.branch.get_or_insert(Branch { if_node, arm });
                    }
                }
                (NodeOp::If, vec![c, a, b])
            }
            ExprKind::Call(f, args) => {
                let args = args.clone();
                (
                    NodeOp::Call(*f),
                    args.iter().map(|a| self.lower(*a)).collect(),
                )
            }
        };
        let ring_base = self.ring_len;
        if let NodeOp::Offset(n) = op {
            self.ring_len += n;
        }
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(NodeData {
            op,
            args,
            expr: e,
            stream: self.stream,
            sig: self.spec.expr_sig[e.index()],
            branch: None,
            ring_base,
            slots: [0; 3],
            rebound: false,
        });
        Operand::Node(id)
    }
}
