//! Lowering of fused regions to `scalar_ir` programs, with the tables that map their exits back.
//!
//! A region's program first preflights (DESIGN §4–5): one `guard_env` per
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
//! state lanes are the ring entries of `NodeState`: the program works on the
//! canonical tier's memory directly.

use super::{RegionBody, is_island_node, operand_sig, scalar_type};
use crate::canonical::ops;
use crate::lang::ast::{BinOp, Builtin, UnOp};
use crate::lang::check::{ScalarSignature, StreamId};
use crate::plan::{NodeId, NodeOp, Operand, Plan};
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
    pub reads: Vec<(u32, Type)>,
    /// Rings the program reads (base, length, type): promotion checks them.
    pub rings: Vec<(u32, u32, Type)>,
    pub sites: Vec<Site>,
}

/// Lowers one region of `plan`.
pub fn lower_region(plan: &Plan, body: &RegionBody) -> LoweredRegion {
    let decl = Decl {
        inputs: 0,
        env: plan.slot_count() as u32,
        state: plan.ring_len,
        sites: 0,
    };
    let mut cx = Lowering {
        plan,
        b: FunctionBuilder::new(decl),
        values: HashMap::new(),
        streams: HashMap::new(),
        external: HashMap::new(),
        reads: Vec::new(),
        rings: Vec::new(),
        sites: Vec::new(),
    };
    let entry = cx.b.create_block();
    cx.b.switch_to_block(entry);
    match body {
        RegionBody::Streams(members) => {
            cx.preflight_streams(members);
            for &s in members {
                let graph = plan.graph(s).expect("members are defined streams");
                for id in graph.node_ids() {
                    cx.lower_node(id);
                }
                let v = cx.operand(&graph.root);
                let ty = scalar_type(plan.spec.stream(s).sig).expect("eligible streams are scalar");
                cx.b.store_env(ty, s.0, v);
                cx.streams.insert(s, v);
            }
        }
        RegionBody::Islands { nodes, exports, .. } => {
            cx.preflight_islands(nodes);
            for &id in nodes {
                cx.lower_node(id);
            }
            for &n in exports {
                let ty = scalar_type(plan.node(n).sig).expect("island nodes are scalar");
                cx.b.store_env(ty, plan.node_slot(n), cx.values[&n]);
            }
        }
    }
    cx.b.ret();
    let sites = cx.sites;
    let mut program = cx.b.finish();
    program.decl.sites = sites.len() as u32;
    LoweredRegion {
        program,
        reads: cx.reads,
        rings: cx.rings,
        sites,
    }
}

struct Lowering<'a> {
    plan: &'a Plan,
    b: FunctionBuilder,
    /// SSA value of every lowered node.
    values: HashMap<NodeId, Value>,
    /// SSA value of every stream computed earlier in this region.
    streams: HashMap<StreamId, Value>,
    /// SSA value of every slot loaded by the preflight.
    external: HashMap<u32, Value>,
    reads: Vec<(u32, Type)>,
    rings: Vec<(u32, u32, Type)>,
    sites: Vec<Site>,
}

impl Lowering<'_> {
    /// Guards and loads one outside value (once per slot).
    fn read(&mut self, slot: u32, sig: ScalarSignature) {
        if self.external.contains_key(&slot) {
            return;
        }
        let ty = scalar_type(sig).expect("fused operands are scalar");
        let reason = self.reads.len() as u32;
        self.reads.push((slot, ty));
        self.b.guard_env(slot, ty, reason);
        let v = self.b.load_env(ty, slot);
        self.external.insert(slot, v);
    }

    fn preflight_streams(&mut self, members: &[StreamId]) {
        let plan = self.plan;
        for (i, &s) in members.iter().enumerate() {
            let graph = plan.graph(s).expect("members are defined streams");
            let mut operands: Vec<&Operand> = graph
                .node_ids()
                .flat_map(|id| &plan.node(id).args)
                .collect();
            operands.push(&graph.root);
            for op in operands {
                if let Operand::Stream(r) = op
                    && !members[..i].contains(r)
                {
                    self.read(r.0, plan.spec.stream(*r).sig);
                }
            }
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
                    Operand::Stream(r) => self.read(r.0, plan.spec.stream(*r).sig),
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
                None => self.external[&s.0],
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
        debug_assert!(is_island_node(plan, id) || node.op == NodeOp::If);
        let sigs: Vec<ScalarSignature> = node.args.iter().map(|a| operand_sig(plan, a)).collect();
        // Offsets read their ring, `default` and `is_defined` need no operand
        // value beyond the first; every other operand is needed.
        let args: Vec<Value> = match node.op {
            NodeOp::Offset(_) => Vec::new(),
            NodeOp::Call(Builtin::Default | Builtin::IsDefined) => {
                let a = node.args[0].clone();
                vec![self.operand(&a)]
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
                self.b.ring_load(ty, node.ring_base, n)
            }
            NodeOp::If => {
                let ty = scalar_type(node.sig).expect("eager selects are scalar");
                self.b.select(ty, args[0], args[1], args[2])
            }
            NodeOp::Call(f) => match f {
                Builtin::Default => args[0],
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
                Builtin::When | Builtin::Init | Builtin::Latch | Builtin::Update => {
                    unreachable!("stateful builtins are canonical nodes")
                }
            },
        };
        self.values.insert(id, v);
    }
}
