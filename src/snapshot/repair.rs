//! Schedule repair: the run state of one specification carried over to an edited one, stream by stream.
//!
//! A live definition (`vigil repl`'s `:def`, or `Monitor::repair` from a library) replaces the
//! specification mid-run. The new plan has its own schedule, nodes, slots and ring layout, so the
//! state is moved as plain data: from a [`Snapshot`] of the old run to a snapshot of the new
//! specification at the same step, which any tier then restores (promotion is recomputed).
//!
//! What moves, by stream name:
//! - A stream is **kept** when the edited specification has it with the same kind of declaration
//!   (input or defined), the same type, the same definition (compared as expressions, not text)
//!   and every stream its definition names of the same type as before. A kept stream keeps its
//!   value and held value, its nodes' values and held values, its builtins' flags and its offset
//!   rings exactly, so its outputs go on as if nothing had changed (as long as what it reads
//!   does).
//! - Any other stream **starts** at the repair's step `d`: it has never had a value, its
//!   stateful builtins are fresh, and its offsets read ⊥ before `d` — except an offset of a kept
//!   stream by name (`x[3]` with `x` kept), whose ring is filled with `x`'s real history as far
//!   as the old run kept it: the entry of step `d - 1` is `x`'s value then (its slot), older
//!   entries come from the longest ring over `x` the old plan had, and entries older than that
//!   are ⊥.

use super::{Body, Cell, Slot, Snapshot, fingerprint, stored_slots};
use crate::error::RuntimeError;
use crate::lang::ast::{Ast, ExprId, ExprKind};
use crate::lang::check::{CheckedSpec, StreamId};
use crate::plan::{NodeId, NodeOp, Operand, Plan};
use std::fmt;

/// What a repair did with each stream of the edited specification, and
/// which streams it dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    /// The step at which the edited specification takes over.
    pub step: u64,
    /// The streams whose whole state was carried over, in declaration order.
    pub kept: Vec<String>,
    /// The streams that start at `step`, with the reason, in declaration order.
    pub started: Vec<Started>,
    /// The old specification's streams the edited one does not have.
    pub dropped: Vec<String>,
}

/// A stream whose history begins at the repair's step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    /// The stream's name.
    pub stream: String,
    /// Why it does not keep its state.
    pub why: Why,
}

/// Why a stream starts afresh.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// The old specification had no stream of that name.
    New,
    /// Its declaration (kind or type) or its definition changed.
    Redefined,
    /// It reads a stream whose type changed (its kept values would be of
    /// the old type).
    Reads(String),
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::New => write!(f, "new"),
            Why::Redefined => write!(f, "redefined"),
            Why::Reads(s) => write!(f, "reads `{s}`, whose type changed"),
        }
    }
}

/// Why a run cannot be carried over to an edited specification.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RepairError {
    /// The run was stopped by this runtime error; it stays stopped until a
    /// reset.
    Stopped(RuntimeError),
    /// Exactly one of the specifications has periodic streams: the edit
    /// adds the first or removes the last, which would move every ring
    /// between step and clock indexing (not carried over yet).
    Periodic,
}

impl fmt::Display for RepairError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RepairError::Stopped(e) => write!(
                f,
                "the run is stopped ({e}); a stopped run is not carried over — reset it first"
            ),
            RepairError::Periodic => write!(
                f,
                "an edit that adds the first periodic stream, or removes the last, cannot carry the run over yet (edits between two specifications with periodic streams can)"
            ),
        }
    }
}

impl std::error::Error for RepairError {}

/// The old counterpart of every stream of the new plan that is kept.
struct Correspondence {
    /// Indexed by the new `StreamId`.
    old: Vec<Option<StreamId>>,
}

impl Snapshot {
    /// This snapshot of a run of `old`, carried over to `new` at the same
    /// step (see the module doc), with what happened to each stream. The
    /// caller refuses a stopped run first.
    pub(crate) fn repair(&self, old: &Plan, new: &Plan) -> (Snapshot, Repair) {
        let (map, repair) = correspond(&old.spec, &new.spec, self.body.step);
        let b = &self.body;
        let step = b.step;
        let mut slots = vec![Slot::NoVal; stored_slots(new)];
        let mut flags = Vec::new();
        // The old node at the same position of a kept stream's graph.
        let old_node = |n: NodeId| -> Option<NodeId> {
            let data = new.node(n);
            let o = map.old[data.stream.index()]?;
            let (ng, og) = (new.graph(data.stream)?, old.graph(o)?);
            Some(NodeId(og.nodes.start + (n.0 - ng.nodes.start)))
        };
        for s in new.spec.stream_ids() {
            let Some(o) = map.old[s.index()] else {
                continue;
            };
            slots[s.index()] = b.slots[o.index()].clone();
            let Some(g) = new.graph(s) else { continue };
            // Lowering is a function of the expression (and the stream's
            // name, for self offsets in `if` arms), so equal definitions
            // have graphs of the same nodes in the same order.
            let og = old.graph(o).expect("a kept defined stream was defined");
            assert_eq!(
                g.nodes.len(),
                og.nodes.len(),
                "engine bug: equal definitions lowered to different graphs"
            );
            for n in g.node_ids() {
                let on = old_node(n).expect("a kept stream's nodes correspond");
                slots[new.node_slot(n).index()] = b.slots[old.node_slot(on).index()].clone();
                if b.flags.binary_search(&on.0).is_ok() {
                    flags.push(n.0);
                }
            }
        }
        flags.sort_unstable();
        let mut old_ring = vec![None; old.nodes.len()];
        for (r, &id) in old.offset_nodes.iter().enumerate() {
            old_ring[id.index()] = Some(r);
        }
        let rings = new
            .offset_nodes
            .iter()
            .map(|&id| {
                let NodeOp::Offset(n) = new.node(id).op else {
                    unreachable!("offset_nodes holds offsets")
                };
                if let Some(r) = old_node(id).and_then(|on| old_ring[on.index()]) {
                    return b.rings[r].clone();
                }
                // A timed plan's rings are full from the start and indexed
                // by their clocks: a new one starts all ⊥ (its history on
                // that clock was never kept).
                if new.is_timed() {
                    return vec![Cell::Deferred; n as usize];
                }
                let want = step.min(u64::from(n));
                match &new.node(id).args[0] {
                    Operand::Stream(t) if map.old[t.index()].is_some() => {
                        let o = map.old[t.index()].expect("checked by the guard");
                        history_of(old, b, o, step, n, want)
                    }
                    _ => vec![Cell::Deferred; want as usize],
                }
            })
            .collect();
        // A window of a kept stream keeps its state; any other starts empty
        // (its stream is new or changed, and its history was never kept).
        let mut windows = vec![0; new.window_words];
        for w in &new.windows {
            let kept = old_node(w.node).and_then(|on| old.windows.iter().find(|o| o.node == on));
            if let Some(o) = kept.filter(|o| o.shape == w.shape)
                && let Some(words) = b.windows.get(o.words())
            {
                windows[w.words()].copy_from_slice(words);
            }
        }
        let snapshot = Snapshot {
            body: Body {
                vigil_snapshot: b.vigil_snapshot,
                fingerprint: fingerprint(new),
                step,
                slots,
                flags,
                rings,
                stopped: None,
                windows,
                // A `dynamic` starts afresh at its next string: an edited
                // specification's instances are not carried over.
                dynamic: vec![None; new.dynamics as usize],
                clocks: carried_clocks(old, new, &b.clocks),
                // A repair is of a plain monitor's run, whose ticks are its
                // caller's.
                ticks: None,
            },
        };
        (snapshot, repair)
    }
}

/// The entries of a new ring of length `n` over the old stream `o`, lane by
/// lane (`want = min(step, n)` of them): the entry of step `t` is at lane
/// `t % n`.
/// The clocks of `new` from `old`'s: the input steps, then each of `new`'s
/// periods as `old` counted it (0 for a period `old` did not have). A kept
/// stream keeps its pace (`correspond`), so its rings keep their clock.
/// Empty for a plan without periods (the caller refuses an edit that adds
/// the first or removes the last).
fn carried_clocks(old: &Plan, new: &Plan, clocks: &[u64]) -> Vec<u64> {
    if !new.is_timed() {
        return Vec::new();
    }
    let mut carried = vec![clocks.first().copied().unwrap_or(0)];
    for p in &new.periods {
        let k = old.periods.iter().position(|q| q == p);
        carried.push(k.and_then(|k| clocks.get(k + 1)).copied().unwrap_or(0));
    }
    carried
}

fn history_of(old: &Plan, b: &Body, o: StreamId, step: u64, n: u32, want: u64) -> Vec<Cell> {
    // The longest old ring whose operand is `o` itself.
    let source = old
        .offset_nodes
        .iter()
        .enumerate()
        .filter(|(_, id)| old.node(**id).args[0] == Operand::Stream(o))
        .filter_map(|(r, id)| match old.node(*id).op {
            NodeOp::Offset(m) => Some((m, r)),
            _ => None,
        })
        .max();
    let last = match &b.slots[o.index()] {
        Slot::Now(c) | Slot::Held(c) => c.clone(),
        Slot::NoVal => Cell::Deferred,
    };
    let n = u64::from(n);
    (0..want)
        .map(|lane| {
            // The step in [step - want, step) whose lane this is.
            let first = step - want;
            let t = first + (lane + n - first % n) % n;
            if t + 1 == step {
                return last.clone();
            }
            match source {
                Some((m, r)) if t + step.min(u64::from(m)) >= step => {
                    b.rings[r][(t % u64::from(m)) as usize].clone()
                }
                _ => Cell::Deferred,
            }
        })
        .collect()
}

/// Which streams of `new` are kept, and the report.
fn correspond(old: &CheckedSpec, new: &CheckedSpec, step: u64) -> (Correspondence, Repair) {
    let same_type = |name: &str| {
        let n = new.stream_by_name(name).map(|s| new.stream(s).ty);
        let o = old.stream_by_name(name).map(|s| old.stream(s).ty);
        n.is_some() && n == o
    };
    let mut map = Correspondence {
        old: vec![None; new.streams.len()],
    };
    let mut repair = Repair {
        step,
        kept: Vec::new(),
        started: Vec::new(),
        dropped: old
            .streams
            .iter()
            .filter(|s| new.stream_by_name(&s.name).is_none())
            .map(|s| s.name.clone())
            .collect(),
    };
    for s in new.stream_ids() {
        let data = new.stream(s);
        let why = match old.stream_by_name(&data.name) {
            None => Some(Why::New),
            Some(o) => {
                let od = old.stream(o);
                match (od.def, data.def) {
                    // Another pace is another clock: its history is not
                    // this stream's.
                    _ if od.ty != data.ty || od.pace != data.pace => Some(Why::Redefined),
                    (None, None) => None,
                    (Some(a), Some(b)) if same_expr(&old.ast, a, &new.ast, b) => {
                        (new.ast.names(b).into_iter())
                            .find(|(_, n)| !same_type(n))
                            .map(|(_, n)| Why::Reads(n.to_string()))
                    }
                    _ => Some(Why::Redefined),
                }
            }
        };
        match why {
            None => {
                map.old[s.index()] = old.stream_by_name(&data.name);
                repair.kept.push(data.name.clone());
            }
            Some(why) => repair.started.push(Started {
                stream: data.name.clone(),
                why,
            }),
        }
    }
    (map, repair)
}

/// Whether two expressions (of two specifications) are the same tree.
fn same_expr(a_ast: &Ast, a: ExprId, b_ast: &Ast, b: ExprId) -> bool {
    use ExprKind as K;
    let (ka, kb) = (&a_ast.expr(a).kind, &b_ast.expr(b).kind);
    let here = match (ka, kb) {
        // Floats by their bits: `0.0` and `-0.0` differ.
        (K::Float(x), K::Float(y)) => x.to_bits() == y.to_bits(),
        (K::Unary(x, _), K::Unary(y, _)) => x == y,
        (K::Binary(x, ..), K::Binary(y, ..)) => x == y,
        (K::If(..), K::If(..)) => true,
        (K::Offset(_, x), K::Offset(_, y)) => x == y,
        (K::Call(x, xs), K::Call(y, ys)) => x == y && xs.len() == ys.len(),
        (x, y) => x == y,
    };
    let (ca, cb) = (a_ast.children(a), b_ast.children(b));
    here && ca.len() == cb.len()
        && ca
            .into_iter()
            .zip(cb)
            .all(|(x, y)| same_expr(a_ast, x, b_ast, y))
}
