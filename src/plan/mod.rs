//! The plan (docs/engine.md, "The plan"): dependency graph, deterministic schedule and per-stream node graphs.
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

/// A window in `Plan::windows`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WindowId(pub u32);

impl WindowId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A window of the plan: its node, its shape, and where its words start in
/// the run's window words (`NodeState::windows`).
#[derive(Clone, Debug)]
pub struct WindowPlan {
    pub node: NodeId,
    pub shape: crate::window::Shape,
    pub base: usize,
}

impl WindowPlan {
    /// The window's words in the run's window words.
    pub fn words(&self) -> Range<usize> {
        self.base..self.base + self.shape.words()
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
    /// `window(e, …)`: operand `[e]`; its state is `Plan::windows[id]`.
    Window(WindowId),
    /// `[a, …]`, `Tuple(a, …)`, `Map("k": a, …)` (keys from the expression),
    /// `e.field`: operands held, as for any operator.
    List,
    Tuple,
    Map,
    Field,
    /// `List.append(l, e)` and the other container builtins.
    Method(crate::lang::ast::Method),
    /// A lambda: its operands are the streams (and temporal expressions
    /// over streams) its body reads, captured at each step
    /// (`Plan::lambdas[id]`).
    Lambda(LambdaId),
    /// `f(a, …)`: operands `[f, a, …]`.
    Apply,
    /// `partial(f, a, …)`.
    Partial,
    /// `fix(f)`.
    Fix,
    /// `dynamic(s)`/`defer(s)`: operand `[s]`; its scope is read from the
    /// run state when an instance ticks; its state is the run's
    /// `dynamic[id]`.
    Dynamic(DynamicId),
}

/// A lambda of the plan (`NodeOp::Lambda`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LambdaId(pub u32);

/// A `dynamic`/`defer` of the plan (`NodeOp::Dynamic`), numbering its
/// state in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DynamicId(pub u32);

/// A lambda: its expression and the expressions of its body that the
/// closure captures (the node's operands, in this order).
#[derive(Clone, Debug)]
pub struct LambdaPlan {
    pub expr: ExprId,
    pub captures: Vec<ExprId>,
    /// The captures by expression, each with its position among the
    /// operands (what a call looks a capture up by), shared by every
    /// closure of the lambda.
    pub capture_index: Arc<[(ExprId, u32)]>,
    /// The parameters of lambdas around it in the text (it sits in a
    /// capture of theirs, so it reads none of them): its own are numbered
    /// from here, and a closure's environment starts with as many
    /// placeholders.
    pub outer_params: u32,
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
    /// For offset nodes, the first lane of the node's ring in the ring
    /// table (`NodeState::ring_lanes` and its tags and objects); its length
    /// is the offset. Rings are laid out by increasing length (see
    /// `Plan::layout_rings`).
    pub ring_base: u32,
    /// The operands as slots of the canonical value arena (see
    /// `Plan::node_slot` and `Plan::assign_slots`), unused entries zero.
    pub slots: [Slot; 3],
    /// The slots of operands after the third (containers, calls).
    pub more_slots: Vec<Slot>,
    /// An offset of the stream's own name inside an `if` arm, which reads the
    /// arm (see `Lowering::rebind_self_offsets`). The checker typed it as the
    /// stream, so its signature may not describe its values: fusion leaves
    /// it to the canonical tier.
    pub rebound: bool,
}

/// A slot of the canonical value arena (`NodeState`'s lanes, tags and
/// objects, and a scalar program's environment): first one per stream (a
/// stream's slot is its `StreamId`), then one per node that is not a
/// stream's root, then one per constant (`Plan::assign_slots`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(pub u32);

impl Slot {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<StreamId> for Slot {
    fn from(s: StreamId) -> Slot {
        Slot(s.0)
    }
}

/// The node graph of one defined stream.
#[derive(Clone, Debug)]
pub struct StreamGraph {
    pub nodes: Range<u32>,
    pub root: Operand,
    /// `root` as a slot of the canonical value arena.
    pub root_slot: Slot,
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
    /// Offset nodes, whose rings the tick barrier advances, in ring layout
    /// order (by `ring_base`).
    pub offset_nodes: Vec<NodeId>,
    /// Total number of ring lanes (the sum of all offsets; the parser
    /// bounds it by `lang::MAX_HISTORY`).
    pub ring_len: u32,
    /// The constants operands refer to, in slot order after the nodes.
    pub consts: Vec<Value>,
    /// The arena slot of every node: its own, or for a stream's root node
    /// the stream's slot, so the root's value needs no copy.
    pub node_slots: Vec<Slot>,
    /// The distinct periods of the periodic streams (nanoseconds), in
    /// declaration order; empty for a spec of event streams only.
    pub periods: Vec<i64>,
    /// Each stream's clock, indexed by `StreamId`: 0 for event streams (and
    /// inputs), `1 + k` for the streams of period `periods[k]`. Its nodes,
    /// and the rings they own, run on that clock.
    pub clocks: Vec<u32>,
    /// Every window, in node order, and the total of their words.
    pub windows: Vec<WindowPlan>,
    pub window_words: usize,
    /// Every lambda (`NodeOp::Lambda`), and the number of `dynamic`s.
    pub lambdas: Vec<LambdaPlan>,
    pub dynamics: u32,
}

impl NodeData {
    /// The slot of operand `k`.
    pub fn slot(&self, k: usize) -> Slot {
        match k {
            0..3 => self.slots[k],
            _ => self.more_slots[k - 3],
        }
    }
}

impl Plan {
    pub fn new(spec: Arc<CheckedSpec>) -> Plan {
        let schedule = schedule(&spec);
        let mut b = Lowering {
            spec: &spec,
            nodes: Vec::new(),
            stream: StreamId(0),
            windows: 0,
            lambdas: Vec::new(),
            dynamics: 0,
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
                root_slot: Slot(0),
            });
        }
        let (nodes, lambdas, dynamics) = (b.nodes, b.lambdas, b.dynamics);
        let mut periods: Vec<i64> = Vec::new();
        let clocks = (spec.streams.iter())
            .map(|s| match s.pace {
                crate::lang::check::Pace::Event => 0,
                crate::lang::check::Pace::Periodic(p) => {
                    let k = periods.iter().position(|&q| q == p).unwrap_or_else(|| {
                        periods.push(p);
                        periods.len() - 1
                    });
                    1 + k as u32
                }
            })
            .collect();
        let mut plan = Plan {
            spec,
            schedule,
            nodes,
            graphs,
            offset_nodes: Vec::new(),
            ring_len: 0,
            consts: Vec::new(),
            node_slots: Vec::new(),
            periods,
            clocks,
            windows: Vec::new(),
            window_words: 0,
            lambdas,
            dynamics,
        };
        plan.layout_rings();
        plan.layout_windows();
        plan.assign_slots();
        plan
    }

    /// Lays out the offset rings in one table, shortest first (ties in node
    /// order). Every ring starts filling at step 0 and holds one entry per
    /// step until it is full, so rings fill in exactly this order: the rings
    /// already full are always a prefix of the table. `NodeState` keeps
    /// that prefix in the frame layout (where fused code reads it) and a
    /// ring still filling in a buffer of its own, so history memory grows
    /// with the steps seen, not with the offsets.
    fn layout_rings(&mut self) {
        let mut offsets: Vec<(u32, NodeId)> = (0..self.nodes.len() as u32)
            .map(NodeId)
            .filter_map(|id| match self.nodes[id.index()].op {
                NodeOp::Offset(n) => Some((n, id)),
                _ => None,
            })
            .collect();
        offsets.sort();
        let mut base: u32 = 0;
        for &(n, id) in &offsets {
            self.nodes[id.index()].ring_base = base;
            base = base
                .checked_add(n)
                .expect("the parser bounds the sum of all offsets by MAX_HISTORY");
        }
        self.ring_len = base;
        self.offset_nodes = offsets.into_iter().map(|(_, id)| id).collect();
    }

    /// Lays out every window's words one after another, in node order.
    fn layout_windows(&mut self) {
        let mut base = 0;
        for (k, n) in self.nodes.iter().enumerate() {
            let NodeOp::Window(id) = n.op else {
                continue;
            };
            debug_assert_eq!(id.index(), self.windows.len());
            let (elem, window) = match self.spec.ast.expr(n.expr).kind {
                ExprKind::Window(operand, window) => (
                    crate::window::elem_of(self.spec.expr_type[operand.index()]),
                    window,
                ),
                // A since's values are Bools (`stl`) or Floats (`stl_rob`).
                ExprKind::Since(_, _, window) => match window.agg {
                    crate::lang::ast::Aggregate::Any => (crate::window::Elem::Bool, window),
                    _ => (crate::window::Elem::Float, window),
                },
                _ => unreachable!("a window node lowers a window expression"),
            };
            let shape = crate::window::Shape { window, elem };
            self.windows.push(WindowPlan {
                node: NodeId(k as u32),
                shape,
                base,
            });
            base += shape.words();
        }
        self.window_words = base;
    }

    /// Lays out the canonical value arena: one slot per stream, then one per
    /// node, then one per constant operand. A node's operands become plain
    /// slot indices, so the interpreter reads every operand the same way.
    fn assign_slots(&mut self) {
        let (streams, nodes) = (self.spec.streams.len() as u32, self.nodes.len() as u32);
        let mut node_slots: Vec<Slot> = (0..nodes).map(|n| Slot(streams + n)).collect();
        for (s, g) in self.graphs.iter().enumerate() {
            if let Some(StreamGraph {
                root: Operand::Node(n),
                ..
            }) = g
            {
                node_slots[n.index()] = Slot(s as u32);
            }
        }
        let mut consts: Vec<Value> = Vec::new();
        let mut slot = |op: &Operand| match op {
            Operand::Stream(s) => Slot::from(*s),
            Operand::Node(n) => node_slots[n.index()],
            Operand::Const(v) => {
                consts.push(v.clone());
                Slot(streams + nodes + consts.len() as u32 - 1)
            }
        };
        for n in &mut self.nodes {
            for (i, a) in n.args.iter().enumerate() {
                match i {
                    0..3 => n.slots[i] = slot(a),
                    _ => n.more_slots.push(slot(a)),
                }
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
    pub fn node_slot(&self, n: NodeId) -> Slot {
        self.node_slots[n.index()]
    }

    pub fn node(&self, id: NodeId) -> &NodeData {
        &self.nodes[id.index()]
    }

    pub fn graph(&self, s: StreamId) -> Option<&StreamGraph> {
        self.graphs[s.index()].as_ref()
    }

    /// The clock node `n` runs on (see `clocks`).
    pub fn node_clock(&self, n: NodeId) -> usize {
        self.clocks[self.node(n).stream.index()] as usize
    }

    /// Whether some stream is periodic.
    pub fn is_timed(&self) -> bool {
        !self.periods.is_empty()
    }

    pub fn stream_name(&self, s: StreamId) -> &str {
        &self.spec.stream(s).name
    }
}

/// A topological order of the defined streams along offset-0 references,
/// ties broken by declaration order. The checker has rejected cycles.
fn schedule(spec: &CheckedSpec) -> Vec<StreamId> {
    let deps = same_step_deps(
        &spec.ast,
        &spec.streams,
        &spec.expr_stream,
        &spec.dynamic_scopes,
    );
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
    stream: StreamId,
    /// Windows lowered so far (their ids are given in node order).
    windows: u32,
    lambdas: Vec<LambdaPlan>,
    dynamics: u32,
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

    /// Lowers expression `e` (recursively: the parser bounds its depth by
    /// `lang::MAX_NESTING`). The recursive functions `lower` and `lower_if`
    /// keep few locals; leaves and node building are helpers, so one level
    /// costs a small frame.
    fn lower(&mut self, e: ExprId) -> Operand {
        if let Some(leaf) = self.leaf(e) {
            return leaf;
        }
        match self.spec.ast.expr(e).kind {
            ExprKind::Offset(a, 0) => self.lower(a),
            ExprKind::If(c, a, b) => self.lower_if(e, c, a, b),
            ExprKind::Lambda(..) => self.lower_lambda(e),
            _ => {
                let children = self.spec.ast.children(e);
                let mut args = Vec::with_capacity(children.len());
                for child in children {
                    args.push(self.lower(child));
                }
                self.node(e, args)
            }
        }
    }

    /// A constant or a stream reference: an operand, not a node.
    fn leaf(&self, e: ExprId) -> Option<Operand> {
        Some(match &self.spec.ast.expr(e).kind {
            ExprKind::Int(i) => Operand::Const(Value::Int(*i)),
            ExprKind::Float(f) => Operand::Const(Value::Float(*f)),
            ExprKind::Bool(b) => Operand::Const(Value::Bool(*b)),
            ExprKind::Str(s) => Operand::Const(Value::Str(s.clone())),
            ExprKind::Unit => Operand::Const(Value::Unit),
            ExprKind::Name(_) => Operand::Stream(
                self.spec.expr_stream[e.index()].expect("names are resolved by the checker"),
            ),
            _ => return None,
        })
    }

    /// A lambda: a node whose operands are what its body captures (see
    /// `captures`), lowered as any expression of the stream.
    fn lower_lambda(&mut self, e: ExprId) -> Operand {
        let mut captures = Vec::new();
        self.captures(e, &mut captures);
        let args = captures.iter().map(|&c| self.lower(c)).collect();
        let mut capture_index: Vec<(ExprId, u32)> = (captures.iter().enumerate())
            .map(|(k, &c)| (c, k as u32))
            .collect();
        capture_index.sort();
        let def = self
            .spec
            .stream(self.stream)
            .def
            .expect("a lowered stream is defined");
        let outer_params = self
            .spec
            .ast
            .params_around(def, e)
            .expect("inside its definition");
        self.lambdas.push(LambdaPlan {
            expr: e,
            captures,
            capture_index: capture_index.into(),
            outer_params,
        });
        self.node(e, args)
    }

    /// The captures of the body of lambda `e`: every stream it reads and
    /// every offset, window or stateful builtin over streams only (the
    /// checker refused them over parameters), outermost first, in body
    /// order; nested lambdas' bodies included.
    fn captures(&self, e: ExprId, out: &mut Vec<ExprId>) {
        let ast = &self.spec.ast;
        let ExprKind::Lambda(_, body) = &ast.expr(e).kind else {
            unreachable!("captures of a lambda")
        };
        let mut stack = vec![*body];
        while let Some(x) = stack.pop() {
            match &ast.expr(x).kind {
                ExprKind::Name(_) => out.push(x),
                ExprKind::Offset(_, n) if *n > 0 => out.push(x),
                ExprKind::Call(f, _) if f.is_stateful() || *f == Builtin::Time => out.push(x),
                ExprKind::Window(..) | ExprKind::Since(..) => out.push(x),
                ExprKind::Lambda(..) => self.captures(x, out),
                _ => stack.extend(ast.children(x).into_iter().rev()),
            }
        }
    }

    fn lower_if(&mut self, e: ExprId, c: ExprId, a: ExprId, b: ExprId) -> Operand {
        let c = self.lower(c);
        let then_start = self.nodes.len();
        let a = self.lower(a);
        let else_start = self.nodes.len();
        let b = self.lower(b);
        self.mark_arms(then_start, else_start, &a, &b);
        self.node(e, vec![c, a, b])
    }

    /// Marks the nodes of an `if`'s arms (`then_start..else_start` and
    /// `else_start..`) as evaluated for that arm; the `if` is the next node.
    fn mark_arms(&mut self, then_start: usize, else_start: usize, a: &Operand, b: &Operand) {
        let end = self.nodes.len();
        let if_node = NodeId(end as u32);
        self.rebind_self_offsets(then_start..else_start, a);
        self.rebind_self_offsets(else_start..end, b);
        for (arm, range) in [(0u8, then_start..else_start), (1, else_start..end)] {
            for n in &mut self.nodes[range] {
                n.branch.get_or_insert(Branch { if_node, arm });
            }
        }
    }

    /// Adds the node of compound expression `e` with its lowered operands.
    fn node(&mut self, e: ExprId, args: Vec<Operand>) -> Operand {
        let op = match &self.spec.ast.expr(e).kind {
            ExprKind::Offset(_, n) => NodeOp::Offset(*n),
            ExprKind::Unary(op, _) => NodeOp::Unary(*op),
            ExprKind::Binary(op, ..) => NodeOp::Binary(*op),
            ExprKind::If(..) => NodeOp::If,
            ExprKind::Call(f, _) => NodeOp::Call(*f),
            ExprKind::Window(..) | ExprKind::Since(..) => {
                self.windows += 1;
                NodeOp::Window(WindowId(self.windows - 1))
            }
            ExprKind::List(_) => NodeOp::List,
            ExprKind::Tuple(_) => NodeOp::Tuple,
            ExprKind::Map(_) => NodeOp::Map,
            ExprKind::Field(..) => NodeOp::Field,
            ExprKind::Method(m, _) => NodeOp::Method(*m),
            ExprKind::Lambda(..) => NodeOp::Lambda(LambdaId(self.lambdas.len() as u32 - 1)),
            ExprKind::Apply(..) => NodeOp::Apply,
            ExprKind::Partial(_) => NodeOp::Partial,
            ExprKind::Fix(_) => NodeOp::Fix,
            ExprKind::Dynamic(..) => {
                self.dynamics += 1;
                NodeOp::Dynamic(DynamicId(self.dynamics - 1))
            }
            other => unreachable!("{other:?} is not a node"),
        };
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(NodeData {
            op,
            args,
            expr: e,
            stream: self.stream,
            sig: self.spec.expr_sig[e.index()],
            branch: None,
            ring_base: 0,
            slots: [Slot(0); 3],
            more_slots: Vec::new(),
            rebound: false,
        });
        Operand::Node(id)
    }
}
