//! Lowering of a verified [`Program`] to quickened code.
//!
//! Registers are SSA value numbers, plus a scratch area above them for parallel
//! moves. Constants are written into their registers once at compile time, which is
//! sound because SSA never writes a value's register twice and the scratch area is
//! disjoint. Superinstructions are chosen by a peephole walk over each block:
//!
//! - `guard_input s, T, r` directly followed by `load_input.T s` becomes
//!   `load_input_guarded`;
//! - `iadd_ck`/`imul_ck` with a constant operand (either side) and `isub_ck` with a
//!   constant right operand use the `_imm` forms; so do `icmp`/`bcmp` with a constant
//!   operand (a constant on the left swaps the condition);
//! - an `icmp`/`bcmp`/`fcmp` whose only use is the `brif` right after it becomes a
//!   compare-and-branch.
//!
//! A pair pass ([`fuse`]) then merges two adjacent instructions into one where no
//! branch lands on the second: an operation and the `store_env` of its result, a
//! `load_env` and the `store_state` of it, two input guards.
//!
//! Branch targets are resolved by emitting twice: the first pass learns where every
//! block and edge stub starts, the second emits with those positions. Both passes run
//! the same deterministic code, so the positions agree.

use super::ops::{Code, IntervalId, Op, Pc, Reg, SinceId, Site, Tag};
use crate::frame::tag_of;
use crate::ir::*;

fn reg(v: Value) -> Reg {
    Reg(v.0)
}

fn swap(c: Cond) -> Cond {
    match c {
        Cond::Lt => Cond::Gt,
        Cond::Le => Cond::Ge,
        Cond::Gt => Cond::Lt,
        Cond::Ge => Cond::Le,
        c => c,
    }
}

fn icmp_op(c: Cond, dst: Reg, a: Reg, b: Reg) -> Op {
    match c {
        Cond::Eq => Op::IcmpEq { dst, a, b },
        Cond::Ne => Op::IcmpNe { dst, a, b },
        Cond::Lt => Op::IcmpLt { dst, a, b },
        Cond::Le => Op::IcmpLe { dst, a, b },
        Cond::Gt => Op::IcmpGt { dst, a, b },
        Cond::Ge => Op::IcmpGe { dst, a, b },
    }
}

fn icmp_imm_op(c: Cond, dst: Reg, a: Reg, imm: i64) -> Op {
    match c {
        Cond::Eq => Op::IcmpEqImm { dst, a, imm },
        Cond::Ne => Op::IcmpNeImm { dst, a, imm },
        Cond::Lt => Op::IcmpLtImm { dst, a, imm },
        Cond::Le => Op::IcmpLeImm { dst, a, imm },
        Cond::Gt => Op::IcmpGtImm { dst, a, imm },
        Cond::Ge => Op::IcmpGeImm { dst, a, imm },
    }
}

fn fcmp_op(c: Cond, dst: Reg, a: Reg, b: Reg) -> Op {
    match c {
        Cond::Eq => Op::FcmpEq { dst, a, b },
        Cond::Ne => Op::FcmpNe { dst, a, b },
        Cond::Lt => Op::FcmpLt { dst, a, b },
        Cond::Le => Op::FcmpLe { dst, a, b },
        Cond::Gt => Op::FcmpGt { dst, a, b },
        Cond::Ge => Op::FcmpGe { dst, a, b },
    }
}

fn br_icmp_op(c: Cond, a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) -> Op {
    match c {
        Cond::Eq => Op::BrIcmpEq {
            a,
            b,
            then_pc,
            else_pc,
        },
        Cond::Ne => Op::BrIcmpNe {
            a,
            b,
            then_pc,
            else_pc,
        },
        Cond::Lt => Op::BrIcmpLt {
            a,
            b,
            then_pc,
            else_pc,
        },
        Cond::Le => Op::BrIcmpLe {
            a,
            b,
            then_pc,
            else_pc,
        },
        Cond::Gt => Op::BrIcmpGt {
            a,
            b,
            then_pc,
            else_pc,
        },
        Cond::Ge => Op::BrIcmpGe {
            a,
            b,
            then_pc,
            else_pc,
        },
    }
}

fn br_icmp_imm_op(c: Cond, a: Reg, imm: i64, then_pc: Pc, else_pc: Pc) -> Op {
    match c {
        Cond::Eq => Op::BrIcmpEqImm {
            a,
            imm,
            then_pc,
            else_pc,
        },
        Cond::Ne => Op::BrIcmpNeImm {
            a,
            imm,
            then_pc,
            else_pc,
        },
        Cond::Lt => Op::BrIcmpLtImm {
            a,
            imm,
            then_pc,
            else_pc,
        },
        Cond::Le => Op::BrIcmpLeImm {
            a,
            imm,
            then_pc,
            else_pc,
        },
        Cond::Gt => Op::BrIcmpGtImm {
            a,
            imm,
            then_pc,
            else_pc,
        },
        Cond::Ge => Op::BrIcmpGeImm {
            a,
            imm,
            then_pc,
            else_pc,
        },
    }
}

fn br_fcmp_op(c: Cond, a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) -> Op {
    match c {
        Cond::Eq => Op::BrFcmpEq {
            a,
            b,
            then_pc,
            else_pc,
        },
        Cond::Ne => Op::BrFcmpNe {
            a,
            b,
            then_pc,
            else_pc,
        },
        Cond::Lt => Op::BrFcmpLt {
            a,
            b,
            then_pc,
            else_pc,
        },
        Cond::Le => Op::BrFcmpLe {
            a,
            b,
            then_pc,
            else_pc,
        },
        Cond::Gt => Op::BrFcmpGt {
            a,
            b,
            then_pc,
            else_pc,
        },
        Cond::Ge => Op::BrFcmpGe {
            a,
            b,
            then_pc,
            else_pc,
        },
    }
}

/// The target of a conditional edge: the block itself, or a stub that first moves
/// the edge's arguments into the block's parameters.
fn edge<'p>(known: &Positions, bc: &'p BlockCall, stubs: &mut Vec<&'p BlockCall>) -> Pc {
    if bc.args.is_empty() {
        Pc(known.blocks.get(bc.block.index()).copied().unwrap_or(0))
    } else {
        stubs.push(bc);
        Pc(known.stubs.get(stubs.len() - 1).copied().unwrap_or(0))
    }
}

struct Emitter<'a> {
    prog: &'a Program,
    /// How many times each value is used as an operand or branch argument.
    uses: Vec<u32>,
    /// The bits of each value defined by a constant instruction.
    consts: Vec<Option<u64>>,
    scratch: u32,
}

/// Positions learned by one emission pass.
#[derive(Default)]
struct Positions {
    blocks: Vec<u32>,
    stubs: Vec<u32>,
}

impl Emitter<'_> {
    fn int_const(&self, v: Value) -> Option<i64> {
        self.consts[v.index()].map(|b| b as i64)
    }

    /// Emits moves from `args` into `params` as one parallel assignment.
    fn moves(&self, code: &mut Code, args: &[Value], params: &[Value]) {
        let pairs: Vec<(Reg, Reg)> = params
            .iter()
            .zip(args)
            .filter(|(p, a)| p != a)
            .map(|(&p, &a)| (reg(p), reg(a)))
            .collect();
        let overlaps = pairs
            .iter()
            .any(|&(_, src)| pairs.iter().any(|&(dst, _)| dst == src));
        if overlaps {
            // A source is also a destination (a loop rotating its parameters), so go
            // through the scratch area to keep the assignment parallel.
            for (k, &(_, src)) in pairs.iter().enumerate() {
                code.mov(Reg(self.scratch + k as u32), src);
            }
            for (k, &(dst, _)) in pairs.iter().enumerate() {
                code.mov(dst, Reg(self.scratch + k as u32));
            }
        } else {
            for &(dst, src) in &pairs {
                code.mov(dst, src);
            }
        }
    }

    fn emit(&self, known: &Positions) -> (Code, Positions) {
        let p = self.prog;
        let mut code = Code::default();
        let mut pos = Positions {
            blocks: vec![0; p.block_params.len()],
            stubs: Vec::new(),
        };
        let mut stubs: Vec<&BlockCall> = Vec::new();
        let block_pc = |b: Block| Pc(known.blocks.get(b.index()).copied().unwrap_or(0));
        let blocks = &p.layout.blocks;
        for (li, &blk) in blocks.iter().enumerate() {
            pos.blocks[blk.index()] = code.ops.len() as u32;
            let next_block = blocks.get(li + 1).copied();
            let insts = p.layout.block_insts(blk);
            let mut k = 0;
            while k < insts.len() {
                let inst = insts[k];
                let next = insts.get(k + 1).map(|&n| p.inst(n));
                let dst = p.result(inst).map_or(Reg(0), reg);
                match p.inst(inst) {
                    InstData::Iconst(_) | InstData::Fconst(_) | InstData::Bconst(_) => {}
                    &InstData::GuardInput { slot, ty, reason } => match next {
                        Some(&InstData::LoadInput { ty: t2, slot: s2 })
                            if t2 == ty && s2 == slot =>
                        {
                            let ldst = reg(p.result(insts[k + 1]).unwrap_or(Value(0)));
                            code.load_input_guarded(ldst, slot, Tag(tag_of(ty)), reason);
                            k += 1;
                        }
                        _ => {
                            code.guard_input(slot, Tag(tag_of(ty)), reason);
                        }
                    },
                    &InstData::GuardEnv { slot, ty, reason } => match next {
                        Some(&InstData::LoadEnv { ty: t2, slot: s2 }) if t2 == ty && s2 == slot => {
                            let ldst = reg(p.result(insts[k + 1]).unwrap_or(Value(0)));
                            code.load_env_guarded(ldst, slot, Tag(tag_of(ty)), reason);
                            k += 1;
                        }
                        _ => {
                            code.guard_env(slot, Tag(tag_of(ty)), reason);
                        }
                    },
                    &InstData::GuardHeld { slot, ty, reason } => {
                        code.guard_held(slot, Tag(tag_of(ty)), reason);
                    }
                    &InstData::GuardInputHeld {
                        slot,
                        env,
                        ty,
                        reason,
                    } => {
                        code.guard_input_held(slot, env, Tag(tag_of(ty)), reason);
                    }
                    &InstData::TakeInput { ty, slot, env } => {
                        code.take_input(dst, slot, env, Tag(tag_of(ty)));
                    }
                    &InstData::InputPresent { slot } => {
                        code.input_present(dst, slot);
                    }
                    &InstData::EnvPresent { slot } => {
                        code.env_present(dst, slot);
                    }
                    &InstData::StoreEnvP {
                        ty,
                        slot,
                        present,
                        arg,
                    } => {
                        code.store_env_p(slot, reg(present), reg(arg), Tag(tag_of(ty)));
                    }
                    &InstData::Require { cond, reason } => {
                        code.require(reg(cond), reason);
                    }
                    &InstData::LoadInput { slot, .. } => {
                        code.load_input(dst, slot);
                    }
                    &InstData::LoadEnv { slot, .. } => {
                        code.load_env(dst, slot);
                    }
                    &InstData::StoreEnv { ty, slot, arg } => {
                        code.store_env(slot, reg(arg), Tag(tag_of(ty)));
                    }
                    &InstData::LoadState { lane, .. } => {
                        code.load_state(dst, lane);
                    }
                    &InstData::StoreState { lane, arg, .. } => {
                        code.store_state(lane, reg(arg));
                    }
                    // A ring of one entry (`x[1]`, the common case) is a
                    // plain lane: no `step % len` division on the hot path.
                    &InstData::RingLoad { base, len: 1, .. } => {
                        code.load_state(dst, base);
                    }
                    &InstData::RingLoad { base, len, .. } => {
                        code.ring_load(dst, base, len);
                    }
                    &InstData::RingStore {
                        base, len: 1, arg, ..
                    } => {
                        code.store_state(base, reg(arg));
                    }
                    &InstData::RingStore { base, len, arg, .. } => {
                        code.ring_store(base, len, reg(arg));
                    }
                    &InstData::BinaryCk { op, args, site } => {
                        let (a, b, site) = (reg(args[0]), reg(args[1]), Site(site));
                        let (ca, cb) = (self.int_const(args[0]), self.int_const(args[1]));
                        let commutes = matches!(op, CkBinOp::IaddCk | CkBinOp::ImulCk);
                        let imm = match (cb, ca) {
                            (Some(c), _) => Some((a, c)),
                            (None, Some(c)) if commutes => Some((b, c)),
                            _ => None,
                        };
                        match (op, imm) {
                            (CkBinOp::IaddCk, Some((x, c))) => code.iadd_ck_imm(dst, x, c, site),
                            (CkBinOp::ImulCk, Some((x, c))) => code.imul_ck_imm(dst, x, c, site),
                            (CkBinOp::IsubCk, Some((x, c))) if cb.is_some() => {
                                code.isub_ck_imm(dst, x, c, site)
                            }
                            (CkBinOp::IaddCk, _) => code.iadd_ck(dst, a, b, site),
                            (CkBinOp::IsubCk, _) => code.isub_ck(dst, a, b, site),
                            (CkBinOp::ImulCk, _) => code.imul_ck(dst, a, b, site),
                            (CkBinOp::IdivCk, _) => code.idiv_ck(dst, a, b, site),
                            (CkBinOp::IremCk, _) => code.irem_ck(dst, a, b, site),
                        };
                    }
                    &InstData::Window {
                        base,
                        shape,
                        arg,
                        site,
                        entry,
                        ..
                    } => {
                        match entry {
                            Entry::Always => code.window(dst, reg(arg), base, shape, Site(site)),
                            Entry::If { present, reason } => {
                                let p = reg(present);
                                code.window_if(dst, p, reg(arg), base, shape, Site(site), reason)
                            }
                        };
                    }
                    &InstData::Interval {
                        base,
                        shape,
                        present,
                        arg,
                        site,
                        ..
                    } => {
                        let k = match code.intervals.iter().position(|iv| *iv == shape) {
                            Some(k) => k,
                            None => {
                                code.intervals.push(shape);
                                code.intervals.len() - 1
                            }
                        };
                        let k = IntervalId(k as u32);
                        match present {
                            None => code.interval(dst, reg(arg), base, k, Site(site)),
                            Some(p) => code.interval_if(dst, reg(p), reg(arg), base, k, Site(site)),
                        };
                    }
                    &InstData::Since {
                        base,
                        shape,
                        phi_present,
                        phi,
                        psi_present,
                        psi,
                        site,
                        ..
                    } => {
                        let k = match code.sinces.iter().position(|sn| *sn == shape) {
                            Some(k) => k,
                            None => {
                                code.sinces.push(shape);
                                code.sinces.len() - 1
                            }
                        };
                        let (pp, qp) = (reg(phi_present), reg(psi_present));
                        let k = SinceId(k as u32);
                        code.since(dst, pp, reg(phi), qp, reg(psi), base, k, Site(site));
                    }
                    &InstData::UnaryCk { op, arg, site } => {
                        match op {
                            CkUnOp::InegCk => code.ineg_ck(dst, reg(arg), Site(site)),
                            CkUnOp::IabsCk => code.iabs_ck(dst, reg(arg), Site(site)),
                        };
                    }
                    &InstData::Binary { op, args } => {
                        let (a, b) = (reg(args[0]), reg(args[1]));
                        code.push(match op {
                            BinOp::Imin => Op::Imin { dst, a, b },
                            BinOp::Imax => Op::Imax { dst, a, b },
                            BinOp::Fadd => Op::Fadd { dst, a, b },
                            BinOp::Fsub => Op::Fsub { dst, a, b },
                            BinOp::Fmul => Op::Fmul { dst, a, b },
                            BinOp::Fdiv => Op::Fdiv { dst, a, b },
                            BinOp::Frem => Op::Frem { dst, a, b },
                            BinOp::Fmin => Op::Fmin { dst, a, b },
                            BinOp::Fmax => Op::Fmax { dst, a, b },
                            BinOp::Band => Op::Band { dst, a, b },
                            BinOp::Bor => Op::Bor { dst, a, b },
                            BinOp::Bxor => Op::Bxor { dst, a, b },
                        });
                    }
                    &InstData::Unary { op, arg } => {
                        let a = reg(arg);
                        code.push(match op {
                            UnOp::Fneg => Op::Fneg { dst, a },
                            UnOp::Fabs => Op::Fabs { dst, a },
                            UnOp::Fsqrt => Op::Fsqrt { dst, a },
                            UnOp::Ffloor => Op::Ffloor { dst, a },
                            UnOp::Fceil => Op::Fceil { dst, a },
                            UnOp::Fsin => Op::Fsin { dst, a },
                            UnOp::Fcos => Op::Fcos { dst, a },
                            UnOp::Ftan => Op::Ftan { dst, a },
                            UnOp::FcvtFromI64 => Op::FcvtFromI64 { dst, a },
                            UnOp::Bnot => Op::Bnot { dst, a },
                        });
                    }
                    &InstData::Cmp { kind, cond, args } => {
                        let (a, b) = (reg(args[0]), reg(args[1]));
                        let result = p.result(inst);
                        let fused = match next {
                            Some(InstData::Brif {
                                cond: c,
                                then_dest,
                                else_dest,
                            }) if Some(*c) == result && self.uses[c.index()] == 1 => {
                                Some((then_dest, else_dest))
                            }
                            _ => None,
                        };
                        // Integer-lane comparisons may take a constant operand.
                        let imm = if kind == CmpKind::Fcmp {
                            None
                        } else if let Some(c) = self.int_const(args[1]) {
                            Some((cond, a, c))
                        } else {
                            self.int_const(args[0]).map(|c| (swap(cond), b, c))
                        };
                        match fused {
                            Some((t, e)) => {
                                let tp = edge(known, t, &mut stubs);
                                let ep = edge(known, e, &mut stubs);
                                code.push(match (kind, imm) {
                                    (CmpKind::Fcmp, _) => br_fcmp_op(cond, a, b, tp, ep),
                                    (_, Some((cc, x, c))) => br_icmp_imm_op(cc, x, c, tp, ep),
                                    (_, None) => br_icmp_op(cond, a, b, tp, ep),
                                });
                                k += 1;
                            }
                            None => {
                                code.push(match (kind, imm) {
                                    (CmpKind::Fcmp, _) => fcmp_op(cond, dst, a, b),
                                    (_, Some((cc, x, c))) => icmp_imm_op(cc, dst, x, c),
                                    (_, None) => icmp_op(cond, dst, a, b),
                                });
                            }
                        }
                    }
                    &InstData::Select { cond, args, .. } => {
                        code.select(dst, reg(cond), reg(args[0]), reg(args[1]));
                    }
                    InstData::Jump { dest } => {
                        self.moves(&mut code, &dest.args, p.params(dest.block));
                        if Some(dest.block) != next_block {
                            code.jump(block_pc(dest.block));
                        }
                    }
                    InstData::Brif {
                        cond,
                        then_dest,
                        else_dest,
                    } => {
                        let tp = edge(known, then_dest, &mut stubs);
                        let ep = edge(known, else_dest, &mut stubs);
                        code.brif(reg(*cond), tp, ep);
                    }
                    InstData::Return => {
                        code.ret();
                    }
                    &InstData::Decline { reason } => {
                        code.decline(reason);
                    }
                    &InstData::Trap { kind, site } => {
                        match kind {
                            TrapKind::Overflow => code.trap_overflow(Site(site)),
                            TrapKind::DivByZero => code.trap_div_by_zero(Site(site)),
                            TrapKind::WindowFull => code.trap_window_full(Site(site)),
                        };
                    }
                }
                k += 1;
            }
        }
        // Edge stubs: the moves of a conditional edge with arguments, then a jump.
        for bc in stubs {
            pos.stubs.push(code.ops.len() as u32);
            self.moves(&mut code, &bc.args, p.params(bc.block));
            code.jump(block_pc(bc.block));
        }
        (code, pos)
    }
}

/// Lowers a program that has already passed the verifier.
pub(crate) fn lower(prog: &Program) -> Code {
    let mut uses = vec![0u32; prog.values.len()];
    let mut consts = vec![None; prog.values.len()];
    let mut max_params = 0;
    for &b in &prog.layout.blocks {
        max_params = max_params.max(prog.params(b).len());
        for &inst in prog.layout.block_insts(b) {
            let data = prog.inst(inst);
            for (v, _) in data.typed_operands() {
                uses[v.index()] += 1;
            }
            for call in data.branch_targets() {
                for v in &call.args {
                    uses[v.index()] += 1;
                }
            }
            let bits = match *data {
                InstData::Iconst(v) => Some(v as u64),
                InstData::Fconst(bits) => Some(bits),
                InstData::Bconst(v) => Some(v as u64),
                _ => None,
            };
            if let (Some(bits), Some(r)) = (bits, prog.result(inst)) {
                consts[r.index()] = Some(bits);
            }
        }
    }
    let e = Emitter {
        prog,
        uses,
        consts,
        scratch: prog.values.len() as u32,
    };
    let (_, first) = e.emit(&Positions::default());
    let (mut code, _) = e.emit(&first);
    code.ops = fuse(code.ops);
    code.nregs = prog.values.len() as u32 + max_params as u32;
    code.consts = e
        .consts
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.map(|bits| (Reg(i as u32), bits)))
        .collect();
    code
}

/// The `_st` superinstruction of `$a` followed by a store of its result
/// (`$src`, to environment slot `$env` with tag `$tag`): one line per
/// operation, naming the operands it carries over.
macro_rules! then_store {
    ($a:expr, $src:expr, $env:expr, $tag:expr; $($Op:ident => $OpSt:ident { $($f:ident),* };)*) => {
        match $a {
            $(Op::$Op { dst, $($f),* } if dst == $src => Some(Op::$OpSt { dst, $($f,)* env: $env, tag: $tag }),)*
            _ => None,
        }
    };
}

/// The superinstruction that runs `a` and then `b`, if there is one.
fn pair(a: Op, b: Op) -> Option<Op> {
    match (a, b) {
        (
            Op::GuardInput { slot, tag, reason },
            Op::GuardInput {
                slot: slot2,
                tag: tag2,
                reason: reason2,
            },
        ) => Some(Op::GuardInput2 {
            slot,
            tag,
            reason,
            slot2,
            tag2,
            reason2,
        }),
        (Op::LoadEnv { dst, slot }, Op::StoreState { lane, src }) if src == dst => {
            Some(Op::LoadEnvStoreState { dst, slot, lane })
        }
        // An operation followed by the store of its own result.
        (
            a,
            Op::StoreEnv {
                slot: env,
                src,
                tag,
            },
        ) => then_store! { a, src, env, tag;
            LoadInput => LoadInputSt { slot };
            LoadState => LoadStateSt { lane };
            IaddCk => IaddCkSt { a, b, site };
            IaddCkImm => IaddCkImmSt { a, imm, site };
            IsubCk => IsubCkSt { a, b, site };
            IsubCkImm => IsubCkImmSt { a, imm, site };
            ImulCk => ImulCkSt { a, b, site };
            ImulCkImm => ImulCkImmSt { a, imm, site };
            Select => SelectSt { c, a, b };
            Fadd => FaddSt { a, b };
            Fsub => FsubSt { a, b };
            Fmul => FmulSt { a, b };
            Fdiv => FdivSt { a, b };
        },
        _ => None,
    }
}

/// Merges adjacent pairs (see [`pair`]), left to right, and renumbers every
/// branch target. A pair is merged only when no branch lands on its second
/// instruction, so every path still runs both halves in order; a merged
/// instruction is not merged again.
fn fuse(ops: Vec<Op>) -> Vec<Op> {
    let mut target = vec![false; ops.len() + 1];
    for op in &ops {
        let mut op = *op;
        op.for_each_target(|pc| target[pc.0 as usize] = true);
    }
    // `new_pc[old]`: where the old instruction's first effect now starts.
    let mut new_pc = vec![0u32; ops.len() + 1];
    let mut out: Vec<Op> = Vec::with_capacity(ops.len());
    let mut k = 0;
    while k < ops.len() {
        new_pc[k] = out.len() as u32;
        match ops.get(k + 1).filter(|_| !target[k + 1]) {
            Some(&next) if let Some(both) = pair(ops[k], next) => {
                new_pc[k + 1] = out.len() as u32;
                out.push(both);
                k += 2;
            }
            _ => {
                out.push(ops[k]);
                k += 1;
            }
        }
    }
    new_pc[ops.len()] = out.len() as u32;
    for op in &mut out {
        op.for_each_target(|pc| pc.0 = new_pc[pc.0 as usize]);
    }
    out
}
