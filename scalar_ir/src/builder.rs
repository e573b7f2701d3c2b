//! An ergonomic builder for programs, used by tests and by the lowering of fused regions.
//!
//! The builder appends to a current block. A block enters the layout the first time
//! the builder switches to it, so the layout order is the order in which blocks are
//! filled; the first block switched to becomes the entry block.

use crate::ir::*;

/// Builds a [`Program`] instruction by instruction.
#[derive(Debug)]
pub struct FunctionBuilder {
    prog: Program,
    current: Option<Block>,
}

macro_rules! binops {
    ($($method:ident => $op:ident),* $(,)?) => {
        $(
            #[doc = concat!("Appends `", stringify!($method), "` and returns its result.")]
            pub fn $method(&mut self, a: Value, b: Value) -> Value {
                self.value(InstData::Binary { op: BinOp::$op, args: [a, b] })
            }
        )*
    };
}

macro_rules! unops {
    ($($method:ident => $op:ident),* $(,)?) => {
        $(
            #[doc = concat!("Appends `", stringify!($method), "` and returns its result.")]
            pub fn $method(&mut self, a: Value) -> Value {
                self.value(InstData::Unary { op: UnOp::$op, arg: a })
            }
        )*
    };
}

macro_rules! ck_binops {
    ($($method:ident => $op:ident),* $(,)?) => {
        $(
            #[doc = concat!("Appends `", stringify!($method), "` with a trap site and returns its result.")]
            pub fn $method(&mut self, a: Value, b: Value, site: u32) -> Value {
                self.value(InstData::BinaryCk { op: CkBinOp::$op, args: [a, b], site })
            }
        )*
    };
}

impl FunctionBuilder {
    /// Starts an empty program with the given frame sizes.
    pub fn new(decl: Decl) -> FunctionBuilder {
        FunctionBuilder {
            prog: Program::new(decl),
            current: None,
        }
    }

    /// Creates a block; it enters the layout when first switched to.
    pub fn create_block(&mut self) -> Block {
        self.prog.create_block()
    }

    /// Appends a typed parameter to `block`.
    pub fn append_block_param(&mut self, block: Block, ty: Type) -> Value {
        self.prog.append_block_param(block, ty)
    }

    /// Makes `block` the block that instructions are appended to.
    pub fn switch_to_block(&mut self, block: Block) {
        if !self.prog.layout.blocks.contains(&block) {
            self.prog.append_block(block);
        }
        self.current = Some(block);
    }

    /// The block instructions are appended to.
    pub fn current_block(&self) -> Option<Block> {
        self.current
    }

    /// The program built so far (for inspection).
    pub fn program(&self) -> &Program {
        &self.prog
    }

    /// Appends arbitrary instruction data to the current block.
    ///
    /// # Panics
    /// Panics if no block has been switched to: that is a bug in the caller.
    pub fn ins(&mut self, data: InstData) -> Inst {
        let block = self
            .current
            .expect("FunctionBuilder: switch_to_block before appending instructions");
        let inst = self.prog.make_inst(data);
        self.prog.append_inst(block, inst);
        inst
    }

    fn value(&mut self, data: InstData) -> Value {
        let inst = self.ins(data);
        self.prog
            .result(inst)
            .expect("instruction kinds used here always have a result")
    }

    /// Finishes building and returns the program (unverified).
    pub fn finish(self) -> Program {
        self.prog
    }

    /// Appends `iconst`.
    pub fn iconst(&mut self, v: i64) -> Value {
        self.value(InstData::Iconst(v))
    }

    /// Appends `fconst` with the exact bits of `v`.
    pub fn fconst(&mut self, v: f64) -> Value {
        self.value(InstData::Fconst(v.to_bits()))
    }

    /// Appends `bconst`.
    pub fn bconst(&mut self, v: bool) -> Value {
        self.value(InstData::Bconst(v))
    }

    /// Appends `guard_input slot, ty, reason`.
    pub fn guard_input(&mut self, slot: u32, ty: Type, reason: u32) -> Inst {
        self.ins(InstData::GuardInput { slot, ty, reason })
    }

    /// Appends `guard_env slot, ty, reason`.
    pub fn guard_env(&mut self, slot: u32, ty: Type, reason: u32) -> Inst {
        self.ins(InstData::GuardEnv { slot, ty, reason })
    }

    /// Appends `guard_held slot, ty, reason`.
    pub fn guard_held(&mut self, slot: u32, ty: Type, reason: u32) -> Inst {
        self.ins(InstData::GuardHeld { slot, ty, reason })
    }

    /// Appends `guard_input_held slot, env, ty, reason`.
    pub fn guard_input_held(&mut self, slot: u32, env: u32, ty: Type, reason: u32) -> Inst {
        self.ins(InstData::GuardInputHeld {
            slot,
            env,
            ty,
            reason,
        })
    }

    /// Appends `take_input.ty slot, env`: input `slot` under the hold rule,
    /// stored to (or held in) environment slot `env`.
    pub fn take_input(&mut self, ty: Type, slot: u32, env: u32) -> Value {
        self.value(InstData::TakeInput { ty, slot, env })
    }

    /// Appends `input_present slot`.
    pub fn input_present(&mut self, slot: u32) -> Value {
        self.value(InstData::InputPresent { slot })
    }

    /// Appends `env_present slot`.
    pub fn env_present(&mut self, slot: u32) -> Value {
        self.value(InstData::EnvPresent { slot })
    }

    /// Appends `store_env_p.ty slot, present, v`: `v` stored present or, where
    /// `present` is false, held (the slot NoVal).
    pub fn store_env_p(&mut self, ty: Type, slot: u32, present: Value, v: Value) -> Inst {
        self.ins(InstData::StoreEnvP {
            ty,
            slot,
            present,
            arg: v,
        })
    }

    /// Appends `require cond, reason`.
    pub fn require(&mut self, cond: Value, reason: u32) -> Inst {
        self.ins(InstData::Require { cond, reason })
    }

    /// Appends `load_input.ty slot`.
    pub fn load_input(&mut self, ty: Type, slot: u32) -> Value {
        self.value(InstData::LoadInput { ty, slot })
    }

    /// Appends `load_env.ty slot`.
    pub fn load_env(&mut self, ty: Type, slot: u32) -> Value {
        self.value(InstData::LoadEnv { ty, slot })
    }

    /// Appends `store_env.ty slot, v`, which also sets the slot's tag to `ty`.
    pub fn store_env(&mut self, ty: Type, slot: u32, v: Value) -> Inst {
        self.ins(InstData::StoreEnv { ty, slot, arg: v })
    }

    /// Appends `load_state.ty lane`.
    pub fn load_state(&mut self, ty: Type, lane: u32) -> Value {
        self.value(InstData::LoadState { ty, lane })
    }

    /// Appends `store_state.ty lane, v`.
    pub fn store_state(&mut self, ty: Type, lane: u32, v: Value) -> Inst {
        self.ins(InstData::StoreState { ty, lane, arg: v })
    }

    /// Appends `window.ty base, shape, arg, site`: the count window of
    /// `shape` at window word `base` takes `arg` and is read.
    pub fn window(
        &mut self,
        base: u32,
        shape: crate::window::CountWindow,
        arg: Value,
        site: u32,
    ) -> Value {
        self.window_entering(base, shape, arg, site, Entry::Always)
    }

    /// Appends `window_if.ty base, shape, present, arg, site, reason`: the
    /// count window of `shape` at window word `base` takes `arg` where
    /// `present` is true and is read; an empty window declines with
    /// `reason`.
    pub fn window_if(
        &mut self,
        base: u32,
        shape: crate::window::CountWindow,
        present: Value,
        arg: Value,
        site: u32,
        reason: u32,
    ) -> Value {
        self.window_entering(base, shape, arg, site, Entry::If { present, reason })
    }

    fn window_entering(
        &mut self,
        base: u32,
        shape: crate::window::CountWindow,
        arg: Value,
        site: u32,
        entry: Entry,
    ) -> Value {
        let ty = crate::ir::elem_type(crate::window::result_elem(shape.agg, shape.elem))
            .expect("a window's result is a scalar");
        self.value(InstData::Window {
            ty,
            base,
            shape,
            arg,
            site,
            entry,
        })
    }

    /// Appends `interval.ty base, lo, hi, kind, arg, site` (or, with
    /// `present`, `interval_if.ty …, present, arg, site`): the interval
    /// window `shape` at window word `base` takes `arg` at the row's time
    /// (where `present` is true) and is read.
    pub fn interval(
        &mut self,
        base: u32,
        shape: crate::window::IntervalWindow,
        present: Option<Value>,
        arg: Value,
        site: u32,
    ) -> Value {
        let ty = crate::ir::elem_type(shape.elem).expect("an interval's values are scalars");
        self.value(InstData::Interval {
            ty,
            base,
            shape,
            present,
            arg,
            site,
        })
    }

    /// Appends `since.ty base, lo, hi, kind, pφ, φ, pψ, ψ, site`: the since
    /// `shape` at window word `base` takes φ and ψ at the row's time where
    /// their presences are true, and is read. `samples` are φ's and ψ's,
    /// each a presence and a value.
    pub fn since(
        &mut self,
        base: u32,
        shape: crate::window::SinceWindow,
        samples: [(Value, Value); 2],
        site: u32,
    ) -> Value {
        let ty = crate::ir::elem_type(shape.elem).expect("a since's values are scalars");
        let [(phi_present, phi), (psi_present, psi)] = samples;
        self.value(InstData::Since {
            ty,
            base,
            shape,
            phi_present,
            phi,
            psi_present,
            psi,
            site,
        })
    }

    /// Appends `ring_load.ty base, len`.
    pub fn ring_load(&mut self, ty: Type, base: u32, len: u32) -> Value {
        self.value(InstData::RingLoad { ty, base, len })
    }

    /// Appends `ring_store.ty base, len, v`.
    pub fn ring_store(&mut self, ty: Type, base: u32, len: u32, v: Value) -> Inst {
        self.ins(InstData::RingStore {
            ty,
            base,
            len,
            arg: v,
        })
    }

    ck_binops! {
        iadd_ck => IaddCk, isub_ck => IsubCk, imul_ck => ImulCk,
        idiv_ck => IdivCk, irem_ck => IremCk,
    }

    /// Appends `ineg_ck`.
    pub fn ineg_ck(&mut self, a: Value, site: u32) -> Value {
        self.value(InstData::UnaryCk {
            op: CkUnOp::InegCk,
            arg: a,
            site,
        })
    }

    /// Appends `iabs_ck`.
    pub fn iabs_ck(&mut self, a: Value, site: u32) -> Value {
        self.value(InstData::UnaryCk {
            op: CkUnOp::IabsCk,
            arg: a,
            site,
        })
    }

    binops! {
        imin => Imin, imax => Imax,
        fadd => Fadd, fsub => Fsub, fmul => Fmul, fdiv => Fdiv, frem => Frem,
        fmin => Fmin, fmax => Fmax,
        band => Band, bor => Bor, bxor => Bxor,
    }

    unops! {
        fneg => Fneg, fabs => Fabs, fsqrt => Fsqrt, ffloor => Ffloor, fceil => Fceil,
        fsin => Fsin, fcos => Fcos, ftan => Ftan, fcvt_from_i64 => FcvtFromI64, bnot => Bnot,
    }

    /// Appends a binary operation chosen at run time (used by generated programs).
    pub fn binary(&mut self, op: BinOp, a: Value, b: Value) -> Value {
        self.value(InstData::Binary { op, args: [a, b] })
    }

    /// Appends a checked binary operation chosen at run time.
    pub fn binary_ck(&mut self, op: CkBinOp, a: Value, b: Value, site: u32) -> Value {
        self.value(InstData::BinaryCk {
            op,
            args: [a, b],
            site,
        })
    }

    /// Appends a unary operation chosen at run time.
    pub fn unary(&mut self, op: UnOp, a: Value) -> Value {
        self.value(InstData::Unary { op, arg: a })
    }

    /// Appends `icmp.cond a, b`.
    pub fn icmp(&mut self, cond: Cond, a: Value, b: Value) -> Value {
        self.cmp(CmpKind::Icmp, cond, a, b)
    }

    /// Appends `fcmp.cond a, b`.
    pub fn fcmp(&mut self, cond: Cond, a: Value, b: Value) -> Value {
        self.cmp(CmpKind::Fcmp, cond, a, b)
    }

    /// Appends `bcmp.cond a, b`.
    pub fn bcmp(&mut self, cond: Cond, a: Value, b: Value) -> Value {
        self.cmp(CmpKind::Bcmp, cond, a, b)
    }

    /// Appends a comparison of the given family.
    pub fn cmp(&mut self, kind: CmpKind, cond: Cond, a: Value, b: Value) -> Value {
        self.value(InstData::Cmp {
            kind,
            cond,
            args: [a, b],
        })
    }

    /// Appends `select.ty c, a, b`.
    pub fn select(&mut self, ty: Type, c: Value, a: Value, b: Value) -> Value {
        self.value(InstData::Select {
            ty,
            cond: c,
            args: [a, b],
        })
    }

    /// Appends `jump block(args)`.
    pub fn jump(&mut self, block: Block, args: &[Value]) -> Inst {
        self.ins(InstData::Jump {
            dest: BlockCall {
                block,
                args: args.to_vec(),
            },
        })
    }

    /// Appends `brif c, then(then_args), else(else_args)`.
    pub fn brif(
        &mut self,
        c: Value,
        then_block: Block,
        then_args: &[Value],
        else_block: Block,
        else_args: &[Value],
    ) -> Inst {
        self.ins(InstData::Brif {
            cond: c,
            then_dest: BlockCall {
                block: then_block,
                args: then_args.to_vec(),
            },
            else_dest: BlockCall {
                block: else_block,
                args: else_args.to_vec(),
            },
        })
    }

    /// Appends `return`.
    pub fn ret(&mut self) -> Inst {
        self.ins(InstData::Return)
    }

    /// Appends `decline reason`.
    pub fn decline(&mut self, reason: u32) -> Inst {
        self.ins(InstData::Decline { reason })
    }

    /// Appends `trap kind, site`.
    pub fn trap(&mut self, kind: TrapKind, site: u32) -> Inst {
        self.ins(InstData::Trap { kind, site })
    }
}
