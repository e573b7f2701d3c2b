//! Fusion (docs/engine.md, "Fusion"): the partition of the schedule into stream regions and graph steps.
//!
//! Checked scalar signatures decide, once per plan, what fuses:
//!
//! - a **stream region** is a maximal contiguous run (in schedule order) of
//!   *eligible* streams: static (no offsets, no `default`, no stateful
//!   builtin) and scalar (the stream and every node have an i64/f64/b1
//!   signature, and so does every operand). A stream whose graph is a single
//!   `if` over scalar, non-trapping arms joins as an eager select;
//! - any other stream is a **graph step**: its node list (postorder) splits
//!   into **islands** (maximal runs of island nodes: scalar arithmetic,
//!   comparison, logic, math, offset, `default`, `is_defined`) and canonical
//!   runs between them.
//!
//! The islands of one graph step are compiled together into as few programs
//! as the data flow allows: a canonical run that reads no node of the islands
//! before it is hoisted in front of them, so their values stay in registers
//! (in the fusion example of docs/engine.md, `blended` is one program: the `if` runs first, then
//! `[offset, default]` and `[+]` together). A canonical run that does read an
//! island's node ends the program there. `GraphIsland::exports` lists the
//! nodes canonical execution still reads (canonical nodes, the tick barrier
//! feeding an offset ring, later programs) plus the stream's root.

pub mod lower;

use crate::lang::ast::{BinOp, Builtin, UnOp};
use crate::lang::check::{ScalarSignature, StreamId};
use crate::plan::{NodeId, NodeOp, Operand, Plan};
use std::fmt::Write as _;
use std::sync::Arc;

/// A compiled unit of fused code (one `scalar_ir::Program`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionId(pub u32);

impl RegionId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One step of the partitioned schedule.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Eligible streams fused into one region that preflights as a unit.
    StreamRegion {
        members: Vec<StreamId>,
        region: RegionId,
    },
    /// Any other stream: islands and canonical runs, executed as `actions`.
    GraphStep {
        stream: StreamId,
        segments: Vec<Segment>,
        actions: Vec<Action>,
    },
}

/// A run of a graph step's nodes, in postorder.
#[derive(Clone, Debug, PartialEq)]
pub enum Segment {
    Island(GraphIsland),
    Canonical(Vec<NodeId>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct GraphIsland {
    pub nodes: Vec<NodeId>,
    /// The island's nodes whose values are stored to the arena: those
    /// canonical execution still reads, and the stream's root.
    pub exports: Vec<NodeId>,
    /// The region (program) the island is compiled into.
    pub region: RegionId,
}

/// What executing a graph step does, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Evaluate these nodes on the canonical tier.
    Canonical(Vec<NodeId>),
    /// Run the program of this region (one or more islands).
    Region(RegionId),
}

/// What a region computes: the streams of a stream region, or the islands
/// of a graph step (their nodes in postorder).
#[derive(Clone, Debug, PartialEq)]
pub enum RegionBody {
    Streams(Vec<StreamId>),
    Islands {
        stream: StreamId,
        nodes: Vec<NodeId>,
        exports: Vec<NodeId>,
    },
}

/// The partition of a plan.
#[derive(Clone, Debug)]
pub struct FusedPlan {
    pub plan: Arc<Plan>,
    pub steps: Vec<Step>,
    pub regions: Vec<RegionBody>,
}

/// The scalar signature as an IR type, if it is one.
pub fn scalar_type(sig: ScalarSignature) -> Option<scalar_ir::Type> {
    match sig {
        ScalarSignature::I64 => Some(scalar_ir::Type::I64),
        ScalarSignature::F64 => Some(scalar_ir::Type::F64),
        ScalarSignature::B1 => Some(scalar_ir::Type::B1),
        ScalarSignature::NotScalar => None,
    }
}

/// The signature of an operand.
pub fn operand_sig(plan: &Plan, op: &Operand) -> ScalarSignature {
    use crate::value::Value;
    match op {
        Operand::Node(n) => plan.node(*n).sig,
        Operand::Stream(s) => plan.spec.stream(*s).sig,
        Operand::Const(Value::Int(_)) => ScalarSignature::I64,
        Operand::Const(Value::Float(_)) => ScalarSignature::F64,
        Operand::Const(Value::Bool(_)) => ScalarSignature::B1,
        Operand::Const(_) => ScalarSignature::NotScalar,
    }
}

/// Whether the scalar tiers can compute `node` from scalar operands: its
/// signature and every operand's are scalar and the lowering has an
/// instruction sequence for it with the canonical tier's exact result.
pub fn is_island_node(plan: &Plan, id: NodeId) -> bool {
    let node = plan.node(id);
    // A periodic stream's nodes run on its ticks, which the canonical tier
    // evaluates; fused programs run on input steps only.
    if node.rebound || (plan.is_timed() && plan.node_clock(id) != 0) {
        return false;
    }
    let sigs: Vec<ScalarSignature> = node.args.iter().map(|a| operand_sig(plan, a)).collect();
    if scalar_type(node.sig).is_none() || sigs.iter().any(|s| scalar_type(*s).is_none()) {
        return false;
    }
    use ScalarSignature::*;
    let numeric = |s: ScalarSignature| matches!(s, I64 | F64);
    match node.op {
        NodeOp::Binary(op) if op.is_arithmetic() => numeric(sigs[0]) && numeric(sigs[1]),
        // Equal representations, or two numbers: an untyped input
        // speculated as an Int may meet a Bool here (`x == true`), which the
        // canonical tier compares by its own rules; a typed spec never does.
        NodeOp::Binary(BinOp::Eq | BinOp::Ne) => {
            sigs[0] == sigs[1] || (numeric(sigs[0]) && numeric(sigs[1]))
        }
        NodeOp::Binary(op) if op.is_ordering() => {
            (numeric(sigs[0]) && numeric(sigs[1])) || (sigs[0] == B1 && sigs[1] == B1)
        }
        NodeOp::Binary(op) if op.is_logic() => sigs[0] == B1 && sigs[1] == B1,
        NodeOp::Binary(_) => false,
        NodeOp::Unary(UnOp::Neg) => numeric(sigs[0]),
        NodeOp::Unary(UnOp::Not) => sigs[0] == B1,
        NodeOp::Offset(_) => true,
        NodeOp::If => false,
        // Containers, functions and dynamic instances have no scalar
        // signature, so the test above has already refused them.
        NodeOp::List
        | NodeOp::Tuple
        | NodeOp::Map
        | NodeOp::Field
        | NodeOp::Method(_)
        | NodeOp::Lambda(_)
        | NodeOp::Apply
        | NodeOp::Partial
        | NodeOp::Fix
        | NodeOp::Dynamic(_) => false,
        NodeOp::Call(f) => match f {
            Builtin::Default => sigs[0] == node.sig,
            Builtin::IsDefined => true,
            Builtin::Sin | Builtin::Cos | Builtin::Tan => sigs[0] == F64,
            Builtin::Abs | Builtin::Sqrt | Builtin::Floor | Builtin::Ceil => numeric(sigs[0]),
            Builtin::Min | Builtin::Max => numeric(sigs[0]) && numeric(sigs[1]),
            Builtin::When | Builtin::Init | Builtin::Latch | Builtin::Update => false,
            // The row's time is the canonical tier's (`NodeState::time`).
            Builtin::Time => false,
        },
        // A count window over scalars runs in fused code on the run's window
        // words (`scalar_ir::window`, the same state machine as the canonical
        // tier's). Time windows stay canonical (their panes have no shared
        // state machine); a timed plan's steps are not the kernels' ring
        // steps.
        // An STL operator's interval window runs the same way
        // (`scalar_ir::window::IntervalWindow`), at the row's time, which
        // fused code gets from its frame. One inside an `if` arm does not:
        // a read moves an interval's clock, and the canonical tier reads
        // only the selected arm's window, where fused code computes both.
        NodeOp::Window(w) => {
            let shape = plan.windows[w.index()].shape;
            !plan.is_timed()
                && match (shape.count_window(), shape.interval_window()) {
                    (Some(c), _) => scalar_ir::ir::elem_type(c.elem) == scalar_type(sigs[0]),
                    // A since (`scalar_ir::window::SinceWindow`) likewise,
                    // both its operands of its element's type.
                    (None, None) if let Some(sn) = shape.since_window() => {
                        let ty = scalar_ir::ir::elem_type(sn.elem);
                        node.branch.is_none()
                            && sn.is_valid()
                            && ty == scalar_type(sigs[0])
                            && ty == scalar_type(sigs[1])
                    }
                    (None, Some(iv)) => {
                        node.branch.is_none()
                            && iv.is_valid()
                            && scalar_ir::ir::elem_type(iv.elem) == scalar_type(sigs[0])
                    }
                    (None, None) => false,
                }
        }
    }
}

/// Why window node `id` runs on the canonical tier (`None`: it is not a
/// window, or it fuses): what `explain` says of it.
pub fn canonical_window(plan: &Plan, id: NodeId) -> Option<&'static str> {
    let NodeOp::Window(w) = plan.node(id).op else {
        return None;
    };
    if is_island_node(plan, id) {
        return None;
    }
    let size = plan.windows[w.index()].shape.window.size;
    let interval = matches!(size, crate::lang::ast::WindowSize::Interval { .. });
    let since = matches!(size, crate::lang::ast::WindowSize::Since { .. });
    Some(if since && plan.is_timed() {
        "an STL since in a specification with periodic streams"
    } else if since && plan.node(id).branch.is_some() {
        "an STL since inside an `if` arm (a read moves its clock)"
    } else if since {
        "an STL since over values of no one scalar representation"
    } else if interval && plan.is_timed() {
        "an STL operator's interval in a specification with periodic streams"
    } else if interval && plan.node(id).branch.is_some() {
        "an STL operator's interval inside an `if` arm (a read moves its clock)"
    } else if interval {
        "an STL operator's interval over values of no one scalar representation"
    } else if plan.windows[w.index()].shape.count_window().is_none() {
        "a time window (its panes have no fused state machine)"
    } else if plan.is_timed() {
        "a window in a specification with periodic streams"
    } else {
        "a window over values of no one scalar representation"
    })
}

/// Whether an island node may trap (checked i64 arithmetic).
pub fn may_trap(plan: &Plan, id: NodeId) -> bool {
    let node = plan.node(id);
    let i64_args = node
        .args
        .iter()
        .all(|a| operand_sig(plan, a) == ScalarSignature::I64);
    match node.op {
        NodeOp::Binary(op) => op.is_arithmetic() && i64_args,
        NodeOp::Unary(UnOp::Neg) => i64_args,
        NodeOp::Call(Builtin::Abs) => i64_args,
        // An Int sum leaves 64 bits only if the values in the window do; an
        // interval may be full.
        NodeOp::Window(w) => {
            let shape = plan.windows[w.index()].shape;
            shape.interval_window().is_some()
                || shape.since_window().is_some()
                || (shape.window.agg == crate::lang::ast::Aggregate::Sum
                    && shape.elem == crate::window::Elem::Int)
        }
        _ => false,
    }
}

/// Why a stream is not eligible for a stream region (`None` if it is).
pub fn why_not_eligible(plan: &Plan, s: StreamId) -> Option<String> {
    if is_eligible(plan, s) {
        return None;
    }
    let graph = plan.graph(s)?;
    if plan.clocks[s.index()] != 0 {
        return Some("it is periodic: its ticks run on the canonical tier".to_string());
    }
    if let Some((w, why)) = graph
        .node_ids()
        .find_map(|id| canonical_window(plan, id).map(|why| (id, why)))
    {
        return Some(format!(
            "it has a window that runs on the canonical tier: {} is {why}",
            describe_node(plan, w)
        ));
    }
    if scalar_type(plan.spec.stream(s).sig).is_none() {
        return Some(format!(
            "its values are not of one scalar representation (type {}, signature none)",
            plan.spec.stream(s).ty
        ));
    }
    for id in graph.node_ids() {
        let node = plan.node(id);
        let what = describe_node(plan, id);
        match node.op {
            NodeOp::Offset(_) | NodeOp::Call(Builtin::Default) => {
                return Some(format!("it is temporal ({what})"));
            }
            NodeOp::Call(f) if f.is_stateful() => {
                return Some(format!("it has a stateful builtin ({what})"));
            }
            NodeOp::If => {
                return Some(format!(
                    "it has an `if` that is not an eager select over non-trapping arms ({what})"
                ));
            }
            _ if !is_island_node(plan, id) => {
                return Some(format!("{what} has no scalar lowering"));
            }
            _ => {}
        }
    }
    Some("its root is not scalar".to_string())
}

/// Whether a node may be NoVal on a canonical row after fused code computed
/// it: then a reader holding it needs its last value in the arena, so fused
/// code must store it even if no canonical node reads it directly. Offsets
/// and constants never are; a node inside an `if` arm is (the canonical
/// tier makes it NoVal when it faults; even one that cannot fault on the
/// representations its signature names can on a row that contradicts a
/// speculated input's, which runs canonically with the values it has);
/// `default` may pass on a NoVal fallback; stateful builtins are canonical;
/// otherwise a node is NoVal only through an operand that may be.
pub fn may_be_noval(plan: &Plan, id: NodeId) -> bool {
    let node = plan.node(id);
    let operand = |op: &Operand| match op {
        Operand::Node(m) => may_be_noval(plan, *m),
        Operand::Stream(_) | Operand::Const(_) => false,
    };
    match node.op {
        NodeOp::Offset(_) => false,
        NodeOp::Call(Builtin::IsDefined | Builtin::When) => false,
        NodeOp::Call(Builtin::Default) => {
            operand(&node.args[0])
                || matches!(node.args[1], Operand::Stream(_))
                || operand(&node.args[1])
        }
        NodeOp::Call(Builtin::Init | Builtin::Latch | Builtin::Update) | NodeOp::If => true,
        // A function's body reads what it captured as it is, a list may
        // hold NoVal elements, and a `dynamic` holds its instance's result.
        NodeOp::Method(_) | NodeOp::Apply | NodeOp::Field | NodeOp::Dynamic(_) => true,
        _ => node.branch.is_some() || node.args.iter().any(operand),
    }
}

/// Whether a stream may join a stream region.
fn is_eligible(plan: &Plan, s: StreamId) -> bool {
    let Some(graph) = plan.graph(s) else {
        return false;
    };
    if plan.clocks[s.index()] != 0 {
        return false;
    }
    if scalar_type(plan.spec.stream(s).sig).is_none()
        || scalar_type(operand_sig(plan, &graph.root)).is_none()
    {
        return false;
    }
    let is_static = |id: NodeId| {
        !matches!(
            plan.node(id).op,
            NodeOp::Offset(_)
                | NodeOp::Call(Builtin::Default)
                | NodeOp::Call(Builtin::When | Builtin::Init | Builtin::Latch | Builtin::Update)
        )
    };
    let ids: Vec<NodeId> = graph.node_ids().collect();
    if !ids.iter().all(|&id| is_static(id)) {
        return false;
    }
    if let Operand::Node(root) = graph.root
        && plan.node(root).op == NodeOp::If
    {
        // An eager select: both arms are computed, so they must not trap.
        let arms_ok = ids.iter().filter(|&&id| id != root).all(|&id| {
            is_island_node(plan, id) && !(plan.node(id).branch.is_some() && may_trap(plan, id))
        });
        let args = &plan.node(root).args;
        // The condition is a Bool (an untyped input speculated as a number
        // may stand there: the canonical tier rejects that at run time).
        let args_ok = operand_sig(plan, &args[0]) == ScalarSignature::B1
            && args
                .iter()
                .all(|a| scalar_type(operand_sig(plan, a)).is_some());
        return arms_ok && args_ok && scalar_type(plan.node(root).sig).is_some();
    }
    ids.iter().all(|&id| is_island_node(plan, id))
}

impl FusedPlan {
    /// Partitions the schedule of `plan` (docs/engine.md, "Fusion").
    pub fn new(plan: Arc<Plan>) -> FusedPlan {
        let mut steps = Vec::new();
        let mut regions = Vec::new();
        let mut run: Vec<StreamId> = Vec::new();
        let flush =
            |run: &mut Vec<StreamId>, steps: &mut Vec<Step>, regions: &mut Vec<RegionBody>| {
                if !run.is_empty() {
                    let region = RegionId(regions.len() as u32);
                    regions.push(RegionBody::Streams(run.clone()));
                    steps.push(Step::StreamRegion {
                        members: std::mem::take(run),
                        region,
                    });
                }
            };
        for &s in &plan.schedule {
            if is_eligible(&plan, s) {
                run.push(s);
                continue;
            }
            flush(&mut run, &mut steps, &mut regions);
            steps.push(graph_step(&plan, s, &mut regions));
        }
        flush(&mut run, &mut steps, &mut regions);
        FusedPlan {
            plan,
            steps,
            regions,
        }
    }

    /// A human-readable description of the partition, as `vigil explain`
    /// prints it.
    pub fn describe(&self) -> String {
        let plan = &self.plan;
        let name = |s: StreamId| plan.stream_name(s).to_string();
        let node = |n: NodeId| describe_node(plan, n);
        let mut out = String::new();
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                Step::StreamRegion { members, region } => {
                    let names: Vec<String> = members.iter().map(|&s| name(s)).collect();
                    let _ = writeln!(
                        out,
                        "({}) stream region r{} {{{}}}",
                        i + 1,
                        region.0,
                        names.join(", ")
                    );
                }
                Step::GraphStep {
                    stream,
                    segments,
                    actions,
                } => {
                    let islands = segments
                        .iter()
                        .filter(|s| matches!(s, Segment::Island(_)))
                        .count();
                    let what = match islands {
                        0 => "no island".to_string(),
                        1 => "one island".to_string(),
                        n => format!("{n} islands"),
                    };
                    let _ = writeln!(out, "({}) graph step {}: {what}", i + 1, name(*stream));
                    for seg in segments {
                        match seg {
                            Segment::Island(isl) => {
                                let nodes: Vec<String> =
                                    isl.nodes.iter().map(|&n| node(n)).collect();
                                let exports: Vec<String> =
                                    isl.exports.iter().map(|&n| node(n)).collect();
                                let _ = writeln!(
                                    out,
                                    "      island [{}] in r{}, exports [{}]",
                                    nodes.join(", "),
                                    isl.region.0,
                                    exports.join(", ")
                                );
                            }
                            Segment::Canonical(nodes) => {
                                let nodes: Vec<String> = nodes.iter().map(|&n| node(n)).collect();
                                let _ = writeln!(out, "      canonical run [{}]", nodes.join(", "));
                            }
                        }
                    }
                    if islands > 0 {
                        let acts: Vec<String> = actions
                            .iter()
                            .map(|a| match a {
                                Action::Canonical(nodes) => {
                                    let nodes: Vec<String> =
                                        nodes.iter().map(|&n| node(n)).collect();
                                    format!("canonical [{}]", nodes.join(", "))
                                }
                                Action::Region(r) => format!("run r{}", r.0),
                            })
                            .collect();
                        let _ = writeln!(out, "      executes: {}", acts.join("; "));
                    }
                }
            }
        }
        out
    }
}

/// A short description of a node: its operator and operands.
pub fn describe_node(plan: &Plan, id: NodeId) -> String {
    let node = plan.node(id);
    let operand = |op: &Operand| match op {
        Operand::Node(n) => format!("n{}", n.0),
        Operand::Stream(s) => plan.stream_name(*s).to_string(),
        Operand::Const(v) => v.to_string(),
    };
    let args: Vec<String> = node.args.iter().map(operand).collect();
    let what = match node.op {
        NodeOp::Binary(op) => format!("{} {} {}", args[0], op.symbol(), args[1]),
        NodeOp::Unary(UnOp::Neg) => format!("-{}", args[0]),
        NodeOp::Unary(UnOp::Not) => format!("!{}", args[0]),
        NodeOp::Offset(n) => format!("{}[{n}]", args[0]),
        NodeOp::If => format!("if {} then {} else {}", args[0], args[1], args[2]),
        NodeOp::Call(f) => format!("{}({})", f.name(), args.join(", ")),
        NodeOp::Window(w) if plan.windows[w.index()].shape.since_window().is_some() => format!(
            "since({}, {}, {})",
            args[0],
            args[1],
            plan.windows[w.index()].shape.window
        ),
        NodeOp::Window(w) => format!(
            "window({}, {})",
            args[0],
            plan.windows[w.index()].shape.window
        ),
        NodeOp::List => format!("[{}]", args.join(", ")),
        NodeOp::Tuple => format!("Tuple({})", args.join(", ")),
        NodeOp::Map => format!("Map({})", args.join(", ")),
        NodeOp::Field => format!("{}.field", args[0]),
        NodeOp::Method(m) => format!("{}({})", m.name(), args.join(", ")),
        NodeOp::Lambda(_) => format!("lambda capturing ({})", args.join(", ")),
        NodeOp::Apply => format!("{}({})", args[0], args[1..].join(", ")),
        NodeOp::Partial => format!("partial({})", args.join(", ")),
        NodeOp::Fix => format!("fix({})", args[0]),
        NodeOp::Dynamic(_) => format!("dynamic({})", args[0]),
    };
    format!("n{}: {what}", id.0)
}

/// Splits a non-eligible stream into islands and canonical runs, and decides
/// how the islands are grouped into programs (see the module doc).
fn graph_step(plan: &Plan, s: StreamId, regions: &mut Vec<RegionBody>) -> Step {
    let graph = plan.graph(s).expect("scheduled streams are defined");
    let ids: Vec<NodeId> = graph.node_ids().collect();
    // Segments: maximal runs of island / canonical nodes.
    let mut runs: Vec<(bool, Vec<NodeId>)> = Vec::new();
    for &id in &ids {
        let island = is_island_node(plan, id);
        match runs.last_mut() {
            Some((kind, nodes)) if *kind == island => nodes.push(id),
            _ => runs.push((island, vec![id])),
        }
    }
    // Group islands into programs: a canonical run reading a node of the
    // current program's islands ends the program before it.
    let mut groups: Vec<Vec<usize>> = Vec::new(); // indices into runs of islands per program
    let mut actions_plan: Vec<(Vec<NodeId>, Option<usize>)> = Vec::new(); // (canonical nodes before, group)
    let mut current: Vec<usize> = Vec::new();
    let mut current_nodes: Vec<NodeId> = Vec::new();
    let mut pending: Vec<NodeId> = Vec::new();
    for (i, (island, nodes)) in runs.iter().enumerate() {
        if *island {
            current.push(i);
            current_nodes.extend(nodes);
            continue;
        }
        let reads_current = nodes.iter().any(|&n| {
            plan.node(n)
                .args
                .iter()
                .any(|a| matches!(a, Operand::Node(m) if current_nodes.contains(m)))
        });
        if reads_current {
            groups.push(std::mem::take(&mut current));
            actions_plan.push((std::mem::take(&mut pending), Some(groups.len() - 1)));
            current_nodes.clear();
        }
        pending.extend(nodes);
    }
    if !current.is_empty() {
        groups.push(current);
        actions_plan.push((std::mem::take(&mut pending), Some(groups.len() - 1)));
    } else if !pending.is_empty() {
        actions_plan.push((pending, None));
    }
    // Nodes each program computes, and who reads what.
    let group_nodes: Vec<Vec<NodeId>> = groups
        .iter()
        .map(|g| g.iter().flat_map(|&i| runs[i].1.clone()).collect())
        .collect();
    let region_of_group: Vec<RegionId> = (0..groups.len())
        .map(|g| RegionId((regions.len() + g) as u32))
        .collect();
    let group_of = |n: NodeId| group_nodes.iter().position(|g| g.contains(&n));
    let root = match graph.root {
        Operand::Node(n) => Some(n),
        _ => None,
    };
    // A node is exported if something outside its program reads it: a
    // canonical node, a node of another program, the barrier (offset
    // operand), or the stream (root).
    let exported = |n: NodeId| -> bool {
        if Some(n) == root || may_be_noval(plan, n) {
            return true;
        }
        let g = group_of(n);
        // Node operands never cross streams, so only this stream's nodes can
        // read `n` (scanning the whole plan made fusion quadratic in the spec).
        ids.iter().any(|&rid| {
            let reader = plan.node(rid);
            let reads = reader.args.contains(&Operand::Node(n));
            reads && (matches!(reader.op, NodeOp::Offset(_)) || group_of(rid) != g || g.is_none())
        })
    };
    let mut segments = Vec::new();
    for (i, (island, nodes)) in runs.iter().enumerate() {
        if *island {
            let g = groups
                .iter()
                .position(|g| g.contains(&i))
                .expect("every island is grouped");
            segments.push(Segment::Island(GraphIsland {
                nodes: nodes.clone(),
                exports: nodes.iter().copied().filter(|&n| exported(n)).collect(),
                region: region_of_group[g],
            }));
        } else {
            segments.push(Segment::Canonical(nodes.clone()));
        }
    }
    for nodes in &group_nodes {
        regions.push(RegionBody::Islands {
            stream: s,
            nodes: nodes.clone(),
            exports: nodes.iter().copied().filter(|&n| exported(n)).collect(),
        });
    }
    let mut actions = Vec::new();
    for (before, group) in actions_plan {
        if !before.is_empty() {
            actions.push(Action::Canonical(before));
        }
        if let Some(g) = group {
            actions.push(Action::Region(region_of_group[g]));
        }
    }
    Step::GraphStep {
        stream: s,
        segments,
        actions,
    }
}
