//! Lowering of fused regions to `scalar_ir` programs, with the tables that map their exits back.
//!
//! A region's program first preflights (docs/engine.md, "Fusion" and
//! "Guards, promotion and commit"): one `guard_env` per
//! value it reads from outside itself (an input, an earlier stream, a node of
//! the canonical arena), declining the row unless it is present, defined and
//! of its scalar type. Only then does it compute, in the canonical tier's
//! order (streams in schedule order, nodes in postorder), so the first trap
//! is the error the canonical tier would report first. Results are stored to
//! the arena slots of the streams (and exported nodes) they define. Offsets
//! read their ring lanes; the rings are advanced by the tick barrier, not by
//! the program, and promotion (the engine's check that the rings hold defined
//! values) happens before the program ever runs.
//!
//! Environment slots are the arena slots of `Plan` (streams, then nodes), and
//! state lanes are the ring entries of `NodeState`'s ring table: the program
//! works on the canonical tier's memory directly. A program declares as
//! much state as reaches the end of the last ring it touches, which exists
//! once those rings are full (the table grows as rings fill, shortest
//! first); promotion checks exactly that before the program first runs.

use super::{RegionBody, is_island_node, may_be_noval, operand_sig, scalar_type};
use crate::canonical::ops;
use crate::lang::ast::{BinOp, Builtin, UnOp};
use crate::lang::check::{ScalarSignature, StreamId};
use crate::plan::{NodeId, NodeOp, Operand, Plan, Slot};
use crate::value::Value as V;
use scalar_ir::builder::FunctionBuilder;
use scalar_ir::{BinOp as IBin, CkBinOp, CmpKind, Cond, Decl, Program, Type, UnOp as IUn, Value};
use std::collections::HashMap;

/// Where a trap site is: the node whose checked operation it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    pub node: NodeId,
    pub stream: StreamId,
    /// The operation as the canonical tier names it (`addition`, …).
    pub op: &'static str,
    /// Inside an `if` arm, where the canonical tier may discard the error:
    /// such a trap declines the row instead of reporting it.
    pub in_arm: bool,
}

/// A region lowered to a program.
#[derive(Clone, Debug)]
pub struct LoweredRegion {
    pub program: Program,
    /// The values the preflight checks; decline reason `k` is `reads[k]`.
    pub reads: Vec<(Slot, Type)>,
    /// The decline reasons (indices into `reads`, ascending) of windows
    /// over a value absent this row that read empty: `reads[k]` is the
    /// window's operand, and the row declines because the window's read is
    /// ⊥, not because the operand is absent.
    pub empty_windows: Vec<u32>,
    /// Rings the program reads (base, length, type): promotion checks them.
    pub rings: Vec<(u32, u32, Type)>,
    pub sites: Vec<Site>,
}

/// Lowers one region of `plan`.
pub fn lower_region(plan: &Plan, body: &RegionBody) -> LoweredRegion {
    let mut cx = Lowering::new(plan, 0);
    cx.region = true;
    match body {
        RegionBody::Streams(members) => {
            cx.preflight_streams(members);
            for &s in members {
                let graph = plan.graph(s).expect("members are defined streams");
                for id in graph.node_ids() {
                    cx.lower_node(id);
                    // A node a later canonical row may hold (inside an
                    // eager select's arm) keeps its value in the arena, as
                    // an island exports it.
                    let slot = plan.node_slot(id);
                    if slot != Slot::from(s) && may_be_noval(plan, id) {
                        let ty =
                            scalar_type(plan.node(id).sig).expect("eligible streams are scalar");
                        cx.b.store_env(ty, slot.0, cx.values[&id]);
                    }
                }
                // A member's nodes hold their operands, so they are values;
                // a member that is a bare reference is NoVal where what it
                // names is.
                let v = cx.operand(&graph.root);
                let present = cx.presence(&graph.root);
                let ty = scalar_type(plan.spec.stream(s).sig).expect("eligible streams are scalar");
                cx.store(ty, s.0, present, v);
                cx.streams.insert(s, v);
                if let Some(p) = present {
                    cx.stream_present.insert(s, p);
                }
            }
        }
        RegionBody::Islands { nodes, exports, .. } => {
            cx.preflight_islands(nodes);
            for &id in nodes {
                cx.lower_node(id);
            }
            for &n in exports {
                let ty = scalar_type(plan.node(n).sig).expect("island nodes are scalar");
                cx.b.store_env(ty, plan.node_slot(n).0, cx.values[&n]);
            }
        }
    }
    cx.finish()
}

/// Whether every stream of the schedule can be computed by one scalar
/// program per row (the `native-whole` kernel): every input and stream is
/// scalar, and every node has a scalar lowering (`if` as a select, stateful
/// builtins by their present-value meaning).
#[cfg(any(test, feature = "testing"))]
pub fn whole_row_eligible(plan: &Plan) -> Result<(), String> {
    whole_row_eligible_keyed(plan, None)
}

/// `whole_row_eligible` for a keyed monitor's plan, whose key input `key`
/// the kernel need not read if no stream reads it: its value is the key,
/// constant over a run, kept by the monitor (so a Str key leaves the kernel
/// possible).
pub fn whole_row_eligible_keyed(plan: &Plan, key: Option<StreamId>) -> Result<(), String> {
    let split = whole_row_split(plan, key)?;
    match split.left_out(plan).next() {
        None => Ok(()),
        Some(s) => Err(split.why(s).unwrap_or("not scalar").to_string()),
    }
}

/// How the whole-row kernel divides a plan's streams: those it computes,
/// and the rest (the *tail*: streams that are not scalar, have a node
/// without a scalar lowering, or read such a stream at any offset), which
/// the canonical tier evaluates after the kernel, in schedule order. No
/// kernel stream reads a tail stream, so that order keeps every dependency.
#[derive(Clone, Debug)]
pub struct WholeSplit {
    /// By stream id: whether the kernel computes (or, for an input, reads)
    /// it.
    pub in_kernel: Vec<bool>,
    /// By node id: whether the node belongs to a kernel stream.
    pub kernel_nodes: Vec<bool>,
    /// The scheduled streams left to the canonical tier, in schedule order.
    pub tail: Vec<StreamId>,
    /// The inputs (by position) the kernel does not read because they are
    /// not scalar; the tail reads them. (A keyed monitor's unread key is in
    /// neither list: the monitor keeps its slot.)
    pub tail_inputs: Vec<usize>,
    /// The offset rings (indices into `Plan::offset_nodes`, increasing) of tail
    /// streams: the canonical tier pushes them after the kernel's barrier.
    pub tail_rings: Vec<usize>,
    /// By stream id: why a stream is in the tail.
    why: Vec<Option<String>>,
}

impl WholeSplit {
    /// Whether the kernel leaves anything to the canonical tier: a stream,
    /// or an input to store.
    pub fn has_tail(&self) -> bool {
        !self.tail.is_empty() || !self.tail_inputs.is_empty()
    }

    /// What the kernel leaves to the canonical tier: the inputs it does not
    /// read, then the tail's streams in schedule order.
    pub fn left_out<'a>(&'a self, plan: &'a Plan) -> impl Iterator<Item = StreamId> + 'a {
        let inputs = self.tail_inputs.iter().map(|&k| plan.spec.inputs[k]);
        inputs.chain(self.tail.iter().copied())
    }

    /// Why stream `s` is left to the canonical tier, if it is.
    pub fn why(&self, s: StreamId) -> Option<&str> {
        self.why[s.0 as usize].as_deref()
    }
}

/// Divides `plan` for the whole-row kernel (`WholeSplit`); an error when
/// there is no kernel at all: a timed plan, or no stream the kernel can
/// compute. `key` as in `whole_row_eligible_keyed`.
pub fn whole_row_split(plan: &Plan, key: Option<StreamId>) -> Result<WholeSplit, String> {
    if plan.is_timed() {
        // Its rings advance on several clocks; the kernel pushes every ring
        // every row.
        return Err("periodic streams run on clocks of their own".to_string());
    }
    let key = key.filter(|&k| !reads_stream(plan, k));
    let streams = plan.spec.streams.len();
    let mut why: Vec<Option<String>> = vec![None; streams];
    let mut tail_inputs = Vec::new();
    for (k, &s) in plan.spec.inputs.iter().enumerate() {
        if Some(s) != key && scalar_type(plan.spec.stream(s).sig).is_none() {
            why[s.0 as usize] = Some(format!("`{}` is not scalar", plan.stream_name(s)));
            tail_inputs.push(k);
        }
    }
    if let Some(k) = key {
        why[k.0 as usize] = Some("the key, which the monitor keeps".to_string());
    }
    // First what each stream is on its own.
    for &s in &plan.schedule {
        if scalar_type(plan.spec.stream(s).sig).is_none() {
            why[s.0 as usize] = Some(format!("`{}` is not scalar", plan.stream_name(s)));
            continue;
        }
        let graph = plan.graph(s).expect("scheduled streams are defined");
        for id in graph.node_ids() {
            let node = plan.node(id);
            let sig_of = |k: usize| operand_sig(plan, &node.args[k]);
            let ok = match node.op {
                _ if node.rebound => false,
                NodeOp::If => {
                    sig_of(0) == ScalarSignature::B1
                        && sig_of(1) == node.sig
                        && sig_of(2) == node.sig
                }
                NodeOp::Call(Builtin::When) => true,
                NodeOp::Call(Builtin::Init | Builtin::Latch) => sig_of(0) == node.sig,
                NodeOp::Call(Builtin::Update) => sig_of(1) == node.sig,
                _ => is_island_node(plan, id),
            };
            if !ok || scalar_type(node.sig).is_none() {
                let node = super::describe_node(plan, id);
                why[s.0 as usize] = Some(match super::canonical_window(plan, id) {
                    Some(window) => format!("{node} is {window}"),
                    None => format!("{node} has no scalar lowering"),
                });
                break;
            }
        }
    }
    // Then whatever reads a stream left out is left out too (at any offset:
    // the tail pushes its own rings), until nothing changes.
    let mut changed = true;
    while changed {
        changed = false;
        for &s in &plan.schedule {
            if why[s.0 as usize].is_some() {
                continue;
            }
            let graph = plan.graph(s).expect("scheduled streams are defined");
            let read = graph
                .node_ids()
                .flat_map(|id| plan.node(id).args.iter())
                .chain(std::iter::once(&graph.root))
                .find_map(|a| match a {
                    Operand::Stream(r) if why[r.0 as usize].is_some() => Some(*r),
                    _ => None,
                });
            if let Some(r) = read {
                why[s.0 as usize] = Some(format!(
                    "`{}` reads `{}`, which the kernel does not compute",
                    plan.stream_name(s),
                    plan.stream_name(r)
                ));
                changed = true;
            }
        }
    }
    let in_kernel: Vec<bool> = why.iter().map(Option::is_none).collect();
    if !plan.schedule.iter().any(|s| in_kernel[s.0 as usize]) {
        let first = plan
            .schedule
            .first()
            .and_then(|s| why[s.0 as usize].clone());
        return Err(match first {
            Some(why) => format!("no stream is left for the kernel: {why}"),
            None => "no stream is defined".to_string(),
        });
    }
    let mut kernel_nodes = vec![false; plan.nodes.len()];
    for &s in plan.schedule.iter().filter(|s| in_kernel[s.0 as usize]) {
        for id in plan.graph(s).expect("scheduled").node_ids() {
            kernel_nodes[id.index()] = true;
        }
    }
    let tail = plan
        .schedule
        .iter()
        .copied()
        .filter(|s| !in_kernel[s.0 as usize])
        .collect();
    let tail_rings = plan
        .offset_nodes
        .iter()
        .enumerate()
        .filter(|(_, id)| !kernel_nodes[id.index()])
        .map(|(r, _)| r)
        .collect();
    Ok(WholeSplit {
        in_kernel,
        kernel_nodes,
        tail,
        tail_inputs,
        tail_rings,
        why,
    })
}

/// Whether any node or stream root of `plan` reads stream `s`.
pub fn reads_stream(plan: &Plan, s: StreamId) -> bool {
    let is_s = |a: &Operand| matches!(a, Operand::Stream(r) if *r == s);
    plan.nodes.iter().any(|n| n.args.iter().any(is_s))
        || plan
            .schedule
            .iter()
            .any(|&t| plan.graph(t).is_some_and(|g| is_s(&g.root)))
}

/// Where a whole-row program keeps the arena's slots.
#[derive(Clone, Copy, Debug)]
pub enum WholeEnv<'a> {
    /// In the arena: environment slot = arena slot.
    Arena,
    /// In a packed run (`canonical::pack`, a keyed monitor's blocks):
    /// environment slot `index[slot]` of `len`, or, for a slot that is not
    /// persistent (`None`), nowhere at all, since unpacking resets such a
    /// slot and no later row reads it before it is evaluated again.
    Packed { index: &'a [Option<u32>], len: u32 },
}

/// Lowers the whole per-row schedule to one program: a row guard on every
/// input, every stream in schedule order (stored to its slot), then the tick
/// barrier's ring pushes; of a plan with a tail (`WholeSplit`), the kernel's
/// part. Inputs are read from the frame's input lanes (the
/// current row, or a batch kernel's columns) and stored to their arena
/// slots, so one program serves rows and batches.
#[cfg(any(test, feature = "testing"))]
pub fn lower_whole(plan: &Plan) -> LoweredRegion {
    let split = whole_row_split(plan, None).expect("lower_whole needs a whole-row kernel");
    lower_whole_in(plan, WholeEnv::Arena, false, &split)
}

/// Whether the whole-row program has a *warm-up* form (`lower_whole_in`
/// with `warm`): every offset `e[n]` is the first operand of a `default`
/// whose fallback has the default's representation, and nothing else reads
/// it. Then the only ⊥ a row of a trace's first steps can meet is an offset
/// reaching before step 0, which `default` replaces by its fallback: the
/// warm-up form computes `default(e[n], d)` as `step >= n ? e[n] : d`, so it
/// runs from a trace's first row, before its rings are full.
pub fn warm_up_eligible(plan: &Plan) -> bool {
    let mut absorbed = 0;
    for node in &plan.nodes {
        if node.op != NodeOp::Call(Builtin::Default) {
            continue;
        }
        if let Some(Operand::Node(m)) = node.args.first()
            && matches!(plan.node(*m).op, NodeOp::Offset(_))
            && operand_sig(plan, &node.args[1]) == node.sig
            && plan.node(*m).sig == node.sig
        {
            absorbed += 1;
        }
    }
    // Every offset must be read once, by such a default, and by nothing
    // else (another node or a stream's root).
    let offsets = plan.offset_nodes.len();
    let mut reads = vec![0usize; plan.nodes.len()];
    for node in &plan.nodes {
        for a in &node.args {
            if let Operand::Node(m) = a {
                reads[m.index()] += 1;
            }
        }
    }
    for &s in &plan.schedule {
        if let Some(Operand::Node(m)) = plan.graph(s).map(|g| &g.root) {
            reads[m.index()] += 1;
        }
    }
    absorbed == offsets && plan.offset_nodes.iter().all(|o| reads[o.index()] == 1)
}

/// `lower_whole`, keeping the slots as `env` says; with `warm`, in the
/// warm-up form (`warm_up_eligible`), which reads the step from one more
/// input lane after the inputs. Only the streams `split` puts in the kernel
/// are computed, and only their rings pushed; an input outside it (one that
/// is not scalar, or a keyed monitor's unread key, whose slot the monitor
/// keeps) is neither guarded, read nor stored. Decline reason `k` is
/// `reads[k]` (the guarded inputs in order).
pub fn lower_whole_in(
    plan: &Plan,
    env: WholeEnv<'_>,
    warm: bool,
    split: &WholeSplit,
) -> LoweredRegion {
    let kept = |s: StreamId| split.in_kernel[s.0 as usize];
    let (env_len, index) = match env {
        WholeEnv::Arena => (plan.slot_count() as u32, None),
        WholeEnv::Packed { index, len } => (len, Some(index)),
    };
    // The environment slot of arena slot `slot`, if it is kept.
    let place = |slot: Slot| match index {
        None => Some(slot.0),
        Some(index) => index[slot.index()],
    };
    let inputs = plan.spec.inputs.len() as u32;
    let mut cx = Lowering::with_env(plan, inputs + u32::from(warm), env_len);
    cx.place = index;
    // The row guard comes first, before anything is loaded or stored: each
    // input is present with its type, or absent with a held value of its
    // type (the hold rule then reads that), and each hold cell the program
    // reads back or keeps has had a value (see `hold_cells`).
    for (k, &s) in plan.spec.inputs.iter().enumerate() {
        if !kept(s) {
            continue;
        }
        let ty = scalar_type(plan.spec.stream(s).sig).expect("checked by whole_row_split");
        let at = place(s.into()).expect("streams are persistent");
        cx.b.guard_input_held(k as u32, at, ty, cx.reads.len() as u32);
        cx.reads.push((s.into(), ty));
        cx.inputs.insert(s, k as u32);
    }
    for (slot, ty) in hold_cells(plan, split, warm) {
        let at = place(slot).expect("hold cells are persistent (`may_be_noval`)");
        cx.b.guard_held(at, ty, cx.reads.len() as u32);
        cx.reads.push((slot, ty));
    }
    if warm {
        cx.step = Some(cx.b.load_input(Type::I64, inputs));
    }
    for (k, &s) in plan.spec.inputs.iter().enumerate() {
        if !kept(s) {
            continue;
        }
        let ty = scalar_type(plan.spec.stream(s).sig).expect("checked by whole_row_split");
        let at = place(s.into()).expect("streams are persistent");
        let v = cx.b.take_input(ty, k as u32, at);
        cx.streams.insert(s, v);
    }
    let kernel_nodes = || {
        plan.nodes
            .iter()
            .zip(&split.kernel_nodes)
            .filter_map(|(node, &k)| k.then_some(node))
    };
    for node in kernel_nodes() {
        if let NodeOp::Offset(n) = node.op {
            let ty = scalar_type(node.sig).expect("checked by whole_row_split");
            cx.rings.push((node.ring_base, n, ty));
        }
    }
    for &s in plan.schedule.iter().filter(|&&s| kept(s)) {
        let graph = plan.graph(s).expect("scheduled streams are defined");
        for id in graph.node_ids() {
            cx.lower_node(id);
            // Every node's value goes to its slot: a canonical row after
            // this one holds nodes that are NoVal there (the root's slot is
            // the stream's, stored below).
            let slot = plan.node_slot(id);
            if slot != Slot::from(s)
                && let Some(at) = place(slot)
            {
                let ty = scalar_type(plan.node(id).sig).expect("checked by whole_row_split");
                let present = cx.node_present.get(&id).copied();
                cx.store(ty, at, present, cx.values[&id]);
            }
        }
        let v = cx.operand(&graph.root);
        let present = cx.presence(&graph.root);
        let ty = scalar_type(plan.spec.stream(s).sig).expect("checked by whole_row_split");
        cx.store(ty, place(s.into()).expect("streams are persistent"), present, v);
        cx.streams.insert(s, v);
        if let Some(p) = present {
            cx.stream_present.insert(s, p);
        }
    }
    // The tick barrier: every ring takes its operand's value of this row.
    // The value is reloaded from the operand's slot, where it was stored
    // above, rather than kept in its SSA value: holding every ring operand
    // live from its stream to the end of the row made the register
    // allocator spill thousands of values, and compile time quadratic in the
    // number of streams. (A packed run keeps every ring operand's slot.)
    for node in kernel_nodes() {
        if let NodeOp::Offset(n) = node.op {
            let ty = scalar_type(node.sig).expect("checked by whole_row_split");
            let slot = match &node.args[0] {
                Operand::Stream(s) => Some(Slot::from(*s)),
                Operand::Node(m) => Some(plan.node_slot(*m)),
                Operand::Const(_) => None,
            };
            let v = match slot {
                Some(slot) => cx.b.load_env(
                    ty,
                    place(slot).expect("ring operands are persistent (PackLayout)"),
                ),
                None => cx.operand(&node.args[0]),
            };
            cx.touch_ring(node.ring_base, n);
            cx.b.ring_store(ty, node.ring_base, n, v);
        }
    }
    cx.finish()
}

/// Whether a kernel value may be NoVal on a row the whole-row program
/// runs (its guards passed): an input, and what passes an operand's NoVal
/// on — a bare reference, `init` (raw `e`), `latch` (raw `t`), and in the
/// warm-up form a `default` whose fallback may be NoVal. Every other node
/// holds its operands, which the guards make values, so it is a value.
fn noval_operand(plan: &Plan, op: &Operand, warm: bool) -> bool {
    match op {
        Operand::Const(_) => false,
        Operand::Stream(s) => match plan.graph(*s) {
            None => true,
            Some(g) => noval_operand(plan, &g.root, warm),
        },
        Operand::Node(n) => noval_node(plan, *n, warm),
    }
}

fn noval_node(plan: &Plan, id: NodeId, warm: bool) -> bool {
    let node = plan.node(id);
    match node.op {
        NodeOp::Call(Builtin::Init) => noval_operand(plan, &node.args[0], warm),
        NodeOp::Call(Builtin::Latch) => noval_operand(plan, &node.args[1], warm),
        NodeOp::Call(Builtin::Default) if warm => {
            matches!(&node.args[0], Operand::Node(m) if matches!(plan.node(*m).op, NodeOp::Offset(_)))
                && noval_operand(plan, &node.args[1], warm)
        }
        _ => false,
    }
}

/// The hold cells of `split`'s kernel whose held value the whole-row
/// program reads back or passes on where they are NoVal (a `latch`'s, a
/// stream that is a bare reference, an `init`'s): the row guard requires
/// each to have had a value of its type, which it has whenever the hold
/// rule makes the program's result a value (a run repaired onto a new
/// stream may hold none yet; such a row runs canonically).
fn hold_cells(plan: &Plan, split: &WholeSplit, warm: bool) -> Vec<(Slot, Type)> {
    let mut cells = Vec::new();
    for &s in plan.schedule.iter().filter(|s| split.in_kernel[s.0 as usize]) {
        let graph = plan.graph(s).expect("scheduled streams are defined");
        for id in graph.node_ids() {
            let node = plan.node(id);
            let cell = matches!(node.op, NodeOp::Call(Builtin::Latch | Builtin::Init))
                && noval_node(plan, id, warm);
            if cell && plan.node_slot(id) != Slot::from(s) {
                let ty = scalar_type(node.sig).expect("checked by whole_row_split");
                cells.push((plan.node_slot(id), ty));
            }
        }
        if noval_operand(plan, &graph.root, warm) && !is_warm_default(plan, &graph.root, warm) {
            let ty = scalar_type(plan.spec.stream(s).sig).expect("checked by whole_row_split");
            cells.push((s.into(), ty));
        }
    }
    cells
}

/// Whether `op` is, in the warm-up form, a `default` over an offset: its
/// held value is its fallback's until the offset fills, and a value after.
fn is_warm_default(plan: &Plan, op: &Operand, warm: bool) -> bool {
    warm && matches!(op, Operand::Node(n) if plan.node(*n).op == NodeOp::Call(Builtin::Default))
}

struct Lowering<'a> {
    plan: &'a Plan,
    b: FunctionBuilder,
    /// SSA value of every lowered node.
    values: HashMap<NodeId, Value>,
    /// SSA value of every stream computed earlier in this region.
    streams: HashMap<StreamId, Value>,
    /// SSA value of every slot loaded by the preflight.
    external: HashMap<Slot, Value>,
    reads: Vec<(Slot, Type)>,
    empty_windows: Vec<u32>,
    rings: Vec<(u32, u32, Type)>,
    sites: Vec<Site>,
    /// The end of the last ring lane a ring load or store touches.
    state_len: u32,
    /// In a whole-row program's warm-up form, the step (see
    /// `warm_up_eligible`).
    step: Option<Value>,
    /// A whole-row program's inputs, by position: their presence is
    /// `input_present` of it.
    inputs: HashMap<StreamId, u32>,
    /// Presence (`b1`) of every value computed so far that may be NoVal
    /// this row; a value not here is present. Payloads (`values`,
    /// `streams`) are always the held value, which the hold rule reads.
    node_present: HashMap<NodeId, Value>,
    stream_present: HashMap<StreamId, Value>,
    /// Where a whole-row program over a packed run keeps each arena slot
    /// (`WholeEnv::Packed`); `None`: the arena itself.
    place: Option<&'a [Option<u32>]>,
    /// A region's program: what it reads from outside is present as its
    /// slot's tag says (`env_present`).
    region: bool,
}

impl<'a> Lowering<'a> {
    /// Starts a program over `plan`'s arena and rings, with `inputs` input
    /// lanes, positioned in its entry block.
    fn new(plan: &'a Plan, inputs: u32) -> Lowering<'a> {
        Lowering::with_env(plan, inputs, plan.slot_count() as u32)
    }

    /// As `new`, with `env` environment slots.
    fn with_env(plan: &'a Plan, inputs: u32, env: u32) -> Lowering<'a> {
        let decl = Decl {
            inputs,
            env,
            state: plan.ring_len,
            sites: 0,
            windows: u32::try_from(plan.window_words).expect("window words fit u32 lanes"),
        };
        let mut b = FunctionBuilder::new(decl);
        let entry = b.create_block();
        b.switch_to_block(entry);
        Lowering {
            plan,
            b,
            values: HashMap::new(),
            streams: HashMap::new(),
            external: HashMap::new(),
            reads: Vec::new(),
            empty_windows: Vec::new(),
            rings: Vec::new(),
            sites: Vec::new(),
            state_len: 0,
            step: None,
            inputs: HashMap::new(),
            node_present: HashMap::new(),
            stream_present: HashMap::new(),
            place: None,
            region: false,
        }
    }

    /// The environment slot of arena slot `slot` (see `WholeEnv`).
    fn place_of(&self, slot: Slot) -> Option<u32> {
        match self.place {
            None => Some(slot.0),
            Some(index) => index[slot.index()],
        }
    }

    /// The presence of an operand this row: `None` where it is surely
    /// present. An input's is read from its tag when first asked for.
    fn presence(&mut self, op: &Operand) -> Option<Value> {
        match op {
            Operand::Const(_) => None,
            Operand::Node(n) => {
                if let Some(p) = self.node_present.get(n) {
                    return Some(*p);
                }
                if !self.region || self.values.contains_key(n) {
                    return None;
                }
                let p = self.b.env_present(self.plan.node_slot(*n).0);
                self.node_present.insert(*n, p);
                Some(p)
            }
            Operand::Stream(s) => {
                if let Some(p) = self.stream_present.get(s) {
                    return Some(*p);
                }
                let p = match self.inputs.get(s) {
                    Some(&k) => self.b.input_present(k),
                    None if self.region && !self.streams.contains_key(s) => {
                        self.b.env_present(s.0)
                    }
                    None => return None,
                };
                self.stream_present.insert(*s, p);
                Some(p)
            }
        }
    }

    /// Stores `v` to environment slot `at`: present, or as `present` says.
    fn store(&mut self, ty: Type, at: u32, present: Option<Value>, v: Value) {
        match present {
            None => self.b.store_env(ty, at, v),
            Some(p) => self.b.store_env_p(ty, at, p, v),
        };
    }

    /// Records that the program touches the ring at `base` with `n` lanes.
    fn touch_ring(&mut self, base: u32, n: u32) {
        self.state_len = self.state_len.max(base + n);
    }

    /// Ends the program with `return` and packages it with its tables.
    /// Its state is the ring table up to the end of the last ring it
    /// touches: that much of the table exists once those rings are full
    /// (rings fill in layout order), which promotion checks before it runs.
    fn finish(mut self) -> LoweredRegion {
        self.b.ret();
        let mut program = self.b.finish();
        program.decl.sites = self.sites.len() as u32;
        program.decl.state = self.state_len;
        LoweredRegion {
            program,
            reads: self.reads,
            empty_windows: self.empty_windows,
            rings: self.rings,
            sites: self.sites,
        }
    }

    /// Guards and loads one outside value (once per slot).
    fn read(&mut self, slot: Slot, sig: ScalarSignature) {
        if self.external.contains_key(&slot) {
            return;
        }
        let ty = scalar_type(sig).expect("fused operands are scalar");
        let reason = self.reads.len() as u32;
        self.reads.push((slot, ty));
        // The hold rule reads an operand's last value where it is NoVal:
        // its lane, once the slot has had a value of its type.
        self.b.guard_held(slot.0, ty, reason);
        let v = self.b.load_env(ty, slot.0);
        self.external.insert(slot, v);
    }

    fn preflight_streams(&mut self, members: &[StreamId]) {
        let plan = self.plan;
        // The members before the current one, as a set: a region can hold
        // thousands of streams, and scanning them for every operand made
        // lowering quadratic in the region's size.
        let mut earlier = std::collections::HashSet::with_capacity(members.len());
        for &s in members {
            let graph = plan.graph(s).expect("members are defined streams");
            let mut operands: Vec<&Operand> = graph
                .node_ids()
                .flat_map(|id| &plan.node(id).args)
                .collect();
            operands.push(&graph.root);
            for op in operands {
                if let Operand::Stream(r) = op
                    && !earlier.contains(r)
                {
                    self.read((*r).into(), plan.spec.stream(*r).sig);
                }
            }
            earlier.insert(s);
        }
    }

    fn preflight_islands(&mut self, nodes: &[NodeId]) {
        let plan = self.plan;
        for &id in nodes {
            let node = plan.node(id);
            if let NodeOp::Offset(n) = node.op {
                let ty = scalar_type(node.sig).expect("island nodes are scalar");
                self.rings.push((node.ring_base, n, ty));
                continue;
            }
            // `default(e, d)` takes `e`, which the preflight makes defined,
            // so an outside `d` is never read.
            let used = if node.op == NodeOp::Call(Builtin::Default) {
                1
            } else {
                node.args.len()
            };
            for op in &node.args[..used] {
                match op {
                    Operand::Stream(r) => self.read((*r).into(), plan.spec.stream(*r).sig),
                    Operand::Node(m) if !nodes.contains(m) => {
                        self.read(plan.node_slot(*m), plan.node(*m).sig)
                    }
                    _ => {}
                }
            }
        }
    }

    /// The SSA value of an operand and its signature.
    fn operand(&mut self, op: &Operand) -> Value {
        match op {
            Operand::Node(n) => match self.values.get(n) {
                Some(v) => *v,
                None => self.external[&self.plan.node_slot(*n)],
            },
            Operand::Stream(s) => match self.streams.get(s) {
                Some(v) => *v,
                None => self.external[&Slot::from(*s)],
            },
            Operand::Const(V::Int(i)) => self.b.iconst(*i),
            Operand::Const(V::Float(f)) => self.b.fconst(*f),
            Operand::Const(V::Bool(b)) => self.b.bconst(*b),
            Operand::Const(other) => unreachable!("non-scalar constant {other} in a fused region"),
        }
    }

    fn site(&mut self, id: NodeId, op: &'static str) -> u32 {
        let node = self.plan.node(id);
        self.sites.push(Site {
            node: id,
            stream: node.stream,
            op,
            in_arm: node.branch.is_some(),
        });
        self.sites.len() as u32 - 1
    }

    fn as_f64(&mut self, v: Value, sig: ScalarSignature) -> Value {
        if sig == ScalarSignature::I64 {
            self.b.unary(IUn::FcvtFromI64, v)
        } else {
            v
        }
    }

    fn lower_node(&mut self, id: NodeId) {
        use ScalarSignature::*;
        let plan = self.plan;
        let node = plan.node(id);
        let sigs: Vec<ScalarSignature> = node.args.iter().map(|a| operand_sig(plan, a)).collect();
        // Offsets read their ring, `default` and `is_defined` need no operand
        // value beyond the first; every other operand is needed.
        let args: Vec<Value> = match node.op {
            NodeOp::Offset(_) => Vec::new(),
            NodeOp::Call(
                Builtin::Default | Builtin::IsDefined | Builtin::Init | Builtin::Latch,
            ) => {
                let a = node.args[0].clone();
                vec![self.operand(&a)]
            }
            NodeOp::Call(Builtin::When) => Vec::new(),
            NodeOp::Call(Builtin::Update) => {
                let b = node.args[1].clone();
                vec![self.operand(&b)]
            }
            _ => node.args.clone().iter().map(|a| self.operand(a)).collect(),
        };
        let v = match node.op {
            NodeOp::Binary(op) if op.is_arithmetic() => {
                if sigs[0] == I64 && sigs[1] == I64 {
                    let ck = match op {
                        BinOp::Add => CkBinOp::IaddCk,
                        BinOp::Sub => CkBinOp::IsubCk,
                        BinOp::Mul => CkBinOp::ImulCk,
                        BinOp::Div => CkBinOp::IdivCk,
                        _ => CkBinOp::IremCk,
                    };
                    let site = self.site(id, ops::op_name(op));
                    self.b.binary_ck(ck, args[0], args[1], site)
                } else {
                    let (a, b) = (self.as_f64(args[0], sigs[0]), self.as_f64(args[1], sigs[1]));
                    let f = match op {
                        BinOp::Add => IBin::Fadd,
                        BinOp::Sub => IBin::Fsub,
                        BinOp::Mul => IBin::Fmul,
                        BinOp::Div => IBin::Fdiv,
                        _ => IBin::Frem,
                    };
                    self.b.binary(f, a, b)
                }
            }
            NodeOp::Binary(op @ (BinOp::Eq | BinOp::Ne)) if sigs[0] != sigs[1] => {
                // Structural equality never coerces: different
                // representations are never equal.
                self.b.bconst(op == BinOp::Ne)
            }
            NodeOp::Binary(op) if op.is_ordering() || matches!(op, BinOp::Eq | BinOp::Ne) => {
                let cond = match op {
                    BinOp::Eq => Cond::Eq,
                    BinOp::Ne => Cond::Ne,
                    BinOp::Lt => Cond::Lt,
                    BinOp::Le => Cond::Le,
                    BinOp::Gt => Cond::Gt,
                    _ => Cond::Ge,
                };
                match (sigs[0], sigs[1]) {
                    (I64, I64) => self.b.cmp(CmpKind::Icmp, cond, args[0], args[1]),
                    (B1, B1) => self.b.cmp(CmpKind::Bcmp, cond, args[0], args[1]),
                    _ => {
                        let (a, b) = (self.as_f64(args[0], sigs[0]), self.as_f64(args[1], sigs[1]));
                        self.b.cmp(CmpKind::Fcmp, cond, a, b)
                    }
                }
            }
            NodeOp::Binary(BinOp::And) => self.b.binary(IBin::Band, args[0], args[1]),
            NodeOp::Binary(BinOp::Or) => self.b.binary(IBin::Bor, args[0], args[1]),
            NodeOp::Binary(BinOp::Implies) => {
                let not_a = self.b.unary(IUn::Bnot, args[0]);
                self.b.binary(IBin::Bor, not_a, args[1])
            }
            NodeOp::Binary(_) => unreachable!("not an island operator"),
            NodeOp::Unary(UnOp::Neg) if sigs[0] == I64 => {
                let site = self.site(id, "negation");
                self.b.ineg_ck(args[0], site)
            }
            NodeOp::Unary(UnOp::Neg) => self.b.unary(IUn::Fneg, args[0]),
            NodeOp::Unary(UnOp::Not) => self.b.unary(IUn::Bnot, args[0]),
            NodeOp::Offset(n) => {
                let ty = scalar_type(node.sig).expect("island nodes are scalar");
                self.touch_ring(node.ring_base, n);
                self.b.ring_load(ty, node.ring_base, n)
            }
            NodeOp::Window(w) if plan.windows[w.index()].shape.since_window().is_some() => {
                let window = &plan.windows[w.index()];
                let shape = window
                    .shape
                    .since_window()
                    .expect("matched a since above");
                let site = self.site(id, "STL operator");
                let base = u32::try_from(window.base).expect("window words fit u32 lanes");
                // A since takes each operand's sample only where it is
                // present, as an interval does; its read is never ⊥.
                let mut samples = [(args[0], args[0]); 2];
                for (k, sample) in samples.iter_mut().enumerate() {
                    let present = match self.presence(&node.args[k].clone()) {
                        Some(p) => p,
                        None => self.b.bconst(true),
                    };
                    *sample = (present, args[k]);
                }
                self.b.since(base, shape, samples, site)
            }
            NodeOp::Window(w) if plan.windows[w.index()].shape.count_window().is_none() => {
                let window = &plan.windows[w.index()];
                let shape = window
                    .shape
                    .interval_window()
                    .expect("fused windows are count or interval windows (`is_island_node`)");
                let site = self.site(id, "STL operator");
                let base = u32::try_from(window.base).expect("window words fit u32 lanes");
                // An interval takes only present values, as a count window
                // does, and is read either way: its read is never ⊥ (an
                // empty interval's verdict is G's true or F's false).
                let present = self.presence(&node.args[0].clone());
                self.b.interval(base, shape, present, args[0], site)
            }
            NodeOp::Window(w) => {
                let window = &plan.windows[w.index()];
                let shape = window
                    .shape
                    .count_window()
                    .expect("fused windows are count windows (`is_island_node`)");
                let site = self.site(id, "window sum");
                let base = u32::try_from(window.base).expect("window words fit u32 lanes");
                // A window takes only present values: one whose operand is
                // NoVal this row enters nothing and is read as it is, as
                // the canonical tier does. Its read is then ⊥ only if it
                // has never taken a value (a run repaired onto it), which
                // declines the row.
                let operand = node.args[0].clone();
                match self.presence(&operand) {
                    Some(p) => {
                        let slot = match operand {
                            Operand::Stream(s) => Slot::from(s),
                            Operand::Node(m) => plan.node_slot(m),
                            Operand::Const(_) => unreachable!("a constant is present"),
                        };
                        let ty = scalar_type(operand_sig(plan, &operand))
                            .expect("island nodes are scalar");
                        let reason = self.reads.len() as u32;
                        self.reads.push((slot, ty));
                        self.empty_windows.push(reason);
                        self.b.window_if(base, shape, p, args[0], site, reason)
                    }
                    None => self.b.window(base, shape, args[0], site),
                }
            }
            NodeOp::List
            | NodeOp::Tuple
            | NodeOp::Map
            | NodeOp::Field
            | NodeOp::Method(_)
            | NodeOp::Lambda(_)
            | NodeOp::Apply
            | NodeOp::Partial
            | NodeOp::Fix
            | NodeOp::Dynamic(_) => unreachable!("containers and functions are never fused"),
            NodeOp::If => {
                let ty = scalar_type(node.sig).expect("eager selects are scalar");
                self.b.select(ty, args[0], args[1], args[2])
            }
            NodeOp::Call(f) => match f {
                Builtin::Time => unreachable!("`time()` is never fused (not scalar)"),
                Builtin::Default => match (self.step, &node.args[0]) {
                    // Warm-up form: before step `n`, `e[n]` is ⊥ and the
                    // default is its fallback (`warm_up_eligible`).
                    (Some(step), Operand::Node(m))
                        if matches!(plan.node(*m).op, NodeOp::Offset(_)) =>
                    {
                        let NodeOp::Offset(n) = plan.node(*m).op else {
                            unreachable!("matched above")
                        };
                        let ty = scalar_type(node.sig).expect("island nodes are scalar");
                        let d = node.args[1].clone();
                        let fallback = self.operand(&d);
                        let n = self.b.iconst(i64::from(n));
                        let filled = self.b.cmp(CmpKind::Icmp, Cond::Ge, step, n);
                        // Before the offset fills, the default is its
                        // fallback as it is: NoVal where that is.
                        if let Some(p) = self.presence(&d) {
                            let p = self.b.binary(IBin::Bor, filled, p);
                            self.node_present.insert(id, p);
                        }
                        self.b.select(ty, filled, args[0], fallback)
                    }
                    _ => args[0],
                },
                Builtin::IsDefined => self.b.bconst(true),
                Builtin::Sin => self.b.unary(IUn::Fsin, args[0]),
                Builtin::Cos => self.b.unary(IUn::Fcos, args[0]),
                Builtin::Tan => self.b.unary(IUn::Ftan, args[0]),
                Builtin::Abs if sigs[0] == I64 => {
                    let site = self.site(id, "abs");
                    self.b.iabs_ck(args[0], site)
                }
                Builtin::Abs => self.b.unary(IUn::Fabs, args[0]),
                Builtin::Sqrt => {
                    let a = self.as_f64(args[0], sigs[0]);
                    self.b.unary(IUn::Fsqrt, a)
                }
                Builtin::Floor | Builtin::Ceil if sigs[0] == I64 => args[0],
                Builtin::Floor => self.b.unary(IUn::Ffloor, args[0]),
                Builtin::Ceil => self.b.unary(IUn::Fceil, args[0]),
                Builtin::Min | Builtin::Max if sigs[0] == I64 && sigs[1] == I64 => {
                    let op = if f == Builtin::Min {
                        IBin::Imin
                    } else {
                        IBin::Imax
                    };
                    self.b.binary(op, args[0], args[1])
                }
                Builtin::Min | Builtin::Max => {
                    let (a, b) = (self.as_f64(args[0], sigs[0]), self.as_f64(args[1], sigs[1]));
                    let op = if f == Builtin::Min {
                        IBin::Fmin
                    } else {
                        IBin::Fmax
                    };
                    self.b.binary(op, a, b)
                }
                // Only whole-row programs compute stateful builtins, and they
                // run only when every value is present and defined: then
                // `when` has fired, `init` and `latch` pass their first
                // operand, `update` its second (the engine sets the flags).
                //
                // With absent inputs: `init` is raw `e`, NoVal where `e` is
                // (its held value is `e`'s, since it has passed `e` on
                // ever since `e` first came); `latch` is NoVal where raw `t`
                // is, keeping its own last value (its lane), else held `e`.
                Builtin::When => self.b.bconst(true),
                Builtin::Init => {
                    let e = node.args[0].clone();
                    if let Some(p) = self.presence(&e) {
                        self.node_present.insert(id, p);
                    }
                    args[0]
                }
                Builtin::Latch => {
                    let t = node.args[1].clone();
                    match self.presence(&t) {
                        None => args[0],
                        Some(p) => {
                            let ty = scalar_type(node.sig).expect("island nodes are scalar");
                            let at = self
                                .place_of(plan.node_slot(id))
                                .expect("a latch is a hold cell, kept (`may_be_noval`)");
                            let held = self.b.load_env(ty, at);
                            self.node_present.insert(id, p);
                            self.b.select(ty, p, args[0], held)
                        }
                    }
                }
                Builtin::Update => args[0],
            },
        };
        self.values.insert(id, v);
    }
}
