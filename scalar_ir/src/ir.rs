//! Core IR data structures: typed SSA values, instructions in an arena, blocks with
//! typed parameters, and a layout that orders blocks and instructions separately.
//!
//! Instruction data never records where an instruction sits; the [`Layout`] does.
//! This mirrors Cranelift so that passes can reorder code without touching the
//! instruction arena, and so that the JIT can lower the same structures directly.

use std::fmt;

/// The scalar types a value can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// A two's-complement 64-bit integer.
    I64,
    /// An IEEE 754 binary64 float.
    F64,
    /// A boolean, stored in a lane as 0 or 1.
    B1,
}

impl Type {
    /// The text-form name of the type.
    pub fn name(self) -> &'static str {
        match self {
            Type::I64 => "i64",
            Type::F64 => "f64",
            Type::B1 => "b1",
        }
    }

    /// Parses a type name as printed by [`Type::name`].
    pub fn from_name(s: &str) -> Option<Type> {
        match s {
            "i64" => Some(Type::I64),
            "f64" => Some(Type::F64),
            "b1" => Some(Type::B1),
            _ => None,
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

macro_rules! entity {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $name {
            /// The arena index of this entity.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity!(
    /// An SSA value: an instruction result or a block parameter.
    Value,
    "v"
);
entity!(
    /// An instruction in the program's instruction arena.
    Inst,
    "inst"
);
entity!(
    /// A basic block.
    Block,
    "block"
);

/// A comparison condition shared by `icmp`, `fcmp` and `bcmp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cond {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cond {
    /// Every condition, in text-form order.
    pub const ALL: [Cond; 6] = [Cond::Eq, Cond::Ne, Cond::Lt, Cond::Le, Cond::Gt, Cond::Ge];

    /// The text-form suffix of the condition.
    pub fn name(self) -> &'static str {
        match self {
            Cond::Eq => "eq",
            Cond::Ne => "ne",
            Cond::Lt => "lt",
            Cond::Le => "le",
            Cond::Gt => "gt",
            Cond::Ge => "ge",
        }
    }

    /// Evaluates the condition with Rust's `PartialOrd` semantics, so that floats
    /// compare as IEEE does (every ordered comparison with NaN is false, `ne` true).
    pub fn eval<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Cond::Eq => a == b,
            Cond::Ne => a != b,
            Cond::Lt => a < b,
            Cond::Le => a <= b,
            Cond::Gt => a > b,
            Cond::Ge => a >= b,
        }
    }
}

/// Which kind of trap a checked instruction or an explicit `trap` raises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrapKind {
    /// Integer overflow (including `i64::MIN / -1` and `i64::MIN % -1`).
    Overflow,
    /// Integer division or remainder by zero.
    DivByZero,
    /// An interval window that has had to keep more samples than its
    /// capacity (`interval`, `since`).
    WindowFull,
}

impl TrapKind {
    /// The text-form name of the trap kind.
    pub fn name(self) -> &'static str {
        match self {
            TrapKind::Overflow => "overflow",
            TrapKind::DivByZero => "div_by_zero",
            TrapKind::WindowFull => "window_full",
        }
    }
}

/// The type family a comparison operates on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpKind {
    Icmp,
    Fcmp,
    Bcmp,
}

impl CmpKind {
    /// The operand type of the comparison family.
    pub fn operand_type(self) -> Type {
        match self {
            CmpKind::Icmp => Type::I64,
            CmpKind::Fcmp => Type::F64,
            CmpKind::Bcmp => Type::B1,
        }
    }

    /// The mnemonic prefix (`icmp`, `fcmp`, `bcmp`).
    pub fn name(self) -> &'static str {
        match self {
            CmpKind::Icmp => "icmp",
            CmpKind::Fcmp => "fcmp",
            CmpKind::Bcmp => "bcmp",
        }
    }
}

macro_rules! op_enum {
    ($(#[$m:meta])* $name:ident { $($var:ident = $mn:literal : ($($arg:ident),*) -> $res:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($var),* }

        impl $name {
            /// Every operation of this family.
            pub const ALL: &'static [$name] = &[$($name::$var),*];

            /// The text mnemonic.
            pub fn name(self) -> &'static str {
                match self { $($name::$var => $mn),* }
            }

            /// The operand types, in order.
            pub fn operand_types(self) -> &'static [Type] {
                match self { $($name::$var => &[$(Type::$arg),*]),* }
            }

            /// The result type.
            pub fn result_type(self) -> Type {
                match self { $($name::$var => Type::$res),* }
            }

            /// Looks an operation up by its mnemonic.
            pub fn from_name(s: &str) -> Option<$name> {
                match s { $($mn => Some($name::$var),)* _ => None }
            }
        }
    };
}

op_enum!(
    /// Two-operand instructions that cannot trap.
    BinOp {
        Imin = "imin": (I64, I64) -> I64,
        Imax = "imax": (I64, I64) -> I64,
        Fadd = "fadd": (F64, F64) -> F64,
        Fsub = "fsub": (F64, F64) -> F64,
        Fmul = "fmul": (F64, F64) -> F64,
        Fdiv = "fdiv": (F64, F64) -> F64,
        Frem = "frem": (F64, F64) -> F64,
        Fmin = "fmin": (F64, F64) -> F64,
        Fmax = "fmax": (F64, F64) -> F64,
        Band = "band": (B1, B1) -> B1,
        Bor = "bor": (B1, B1) -> B1,
        Bxor = "bxor": (B1, B1) -> B1,
    }
);

op_enum!(
    /// One-operand instructions that cannot trap.
    UnOp {
        Fneg = "fneg": (F64) -> F64,
        Fabs = "fabs": (F64) -> F64,
        Fsqrt = "fsqrt": (F64) -> F64,
        Ffloor = "ffloor": (F64) -> F64,
        Fceil = "fceil": (F64) -> F64,
        Fsin = "fsin": (F64) -> F64,
        Fcos = "fcos": (F64) -> F64,
        Ftan = "ftan": (F64) -> F64,
        FcvtFromI64 = "fcvt_from_i64": (I64) -> F64,
        Bnot = "bnot": (B1) -> B1,
    }
);

op_enum!(
    /// Checked integer instructions of two operands; each carries a trap site.
    CkBinOp {
        IaddCk = "iadd_ck": (I64, I64) -> I64,
        IsubCk = "isub_ck": (I64, I64) -> I64,
        ImulCk = "imul_ck": (I64, I64) -> I64,
        IdivCk = "idiv_ck": (I64, I64) -> I64,
        IremCk = "irem_ck": (I64, I64) -> I64,
    }
);

op_enum!(
    /// Checked integer instructions of one operand; each carries a trap site.
    CkUnOp {
        InegCk = "ineg_ck": (I64) -> I64,
        IabsCk = "iabs_ck": (I64) -> I64,
    }
);

/// Rust reference semantics of the non-trapping binary operations on lane bits.
/// The interpreter and the tests both use these so there is one definition.
pub mod sem {
    use super::{BinOp, CkBinOp, CkUnOp, TrapKind, UnOp};

    /// Evaluates a non-trapping binary operation on lane bits.
    pub fn binop(op: BinOp, a: u64, b: u64) -> u64 {
        let (fa, fb) = (f64::from_bits(a), f64::from_bits(b));
        match op {
            BinOp::Imin => (a as i64).min(b as i64) as u64,
            BinOp::Imax => (a as i64).max(b as i64) as u64,
            BinOp::Fadd => (fa + fb).to_bits(),
            BinOp::Fsub => (fa - fb).to_bits(),
            BinOp::Fmul => (fa * fb).to_bits(),
            BinOp::Fdiv => (fa / fb).to_bits(),
            BinOp::Frem => (fa % fb).to_bits(),
            BinOp::Fmin => fa.min(fb).to_bits(),
            BinOp::Fmax => fa.max(fb).to_bits(),
            BinOp::Band => a & b,
            BinOp::Bor => a | b,
            BinOp::Bxor => a ^ b,
        }
    }

    /// Evaluates a non-trapping unary operation on lane bits.
    pub fn unop(op: UnOp, a: u64) -> u64 {
        let fa = f64::from_bits(a);
        match op {
            UnOp::Fneg => (-fa).to_bits(),
            UnOp::Fabs => fa.abs().to_bits(),
            UnOp::Fsqrt => fa.sqrt().to_bits(),
            UnOp::Ffloor => fa.floor().to_bits(),
            UnOp::Fceil => fa.ceil().to_bits(),
            UnOp::Fsin => fa.sin().to_bits(),
            UnOp::Fcos => fa.cos().to_bits(),
            UnOp::Ftan => fa.tan().to_bits(),
            UnOp::FcvtFromI64 => (a as i64 as f64).to_bits(),
            UnOp::Bnot => a ^ 1,
        }
    }

    /// Evaluates a checked binary integer operation exactly as Rust's `checked_*`.
    pub fn ck_binop(op: CkBinOp, a: i64, b: i64) -> Result<i64, TrapKind> {
        let r = match op {
            CkBinOp::IaddCk => a.checked_add(b),
            CkBinOp::IsubCk => a.checked_sub(b),
            CkBinOp::ImulCk => a.checked_mul(b),
            CkBinOp::IdivCk | CkBinOp::IremCk if b == 0 => return Err(TrapKind::DivByZero),
            CkBinOp::IdivCk => a.checked_div(b),
            CkBinOp::IremCk => a.checked_rem(b),
        };
        r.ok_or(TrapKind::Overflow)
    }

    /// Evaluates a checked unary integer operation exactly as Rust's `checked_*`.
    pub fn ck_unop(op: CkUnOp, a: i64) -> Result<i64, TrapKind> {
        match op {
            CkUnOp::InegCk => a.checked_neg(),
            CkUnOp::IabsCk => a.checked_abs(),
        }
        .ok_or(TrapKind::Overflow)
    }
}

/// A branch target together with the arguments passed to its parameters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BlockCall {
    pub block: Block,
    pub args: Vec<Value>,
}

/// The data of one instruction. Results are recorded separately in
/// [`Program::inst_result`], so that the data stays a plain description.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum InstData {
    Iconst(i64),
    /// A float constant kept as its exact bit pattern, so NaN payloads survive
    /// and structural equality is reflexive.
    Fconst(u64),
    Bconst(bool),
    /// Declines with `reason` unless input `slot` carries a value of type `ty`.
    GuardInput {
        slot: u32,
        ty: Type,
        reason: u32,
    },
    /// Declines with `reason` unless environment `slot` carries a value of type `ty`.
    GuardEnv {
        slot: u32,
        ty: Type,
        reason: u32,
    },
    /// Declines with `reason` unless environment `slot`'s held value (its
    /// value, or while it is NoVal the last value it had) is of type `ty`:
    /// the hold rule can read it.
    GuardHeld {
        slot: u32,
        ty: Type,
        reason: u32,
    },
    /// Declines with `reason` unless input `slot` carries a value of type
    /// `ty`, or is absent (NoVal) while environment `env`'s held value is of
    /// type `ty`: the guard of an input the hold rule may read held.
    GuardInputHeld {
        slot: u32,
        env: u32,
        ty: Type,
        reason: u32,
    },
    /// An input under the hold rule, stored to its environment slot: a
    /// present input `slot` is stored to `env` (lane and tag) and is the
    /// result; an absent one marks `env` NoVal holding a `ty` (its lane
    /// untouched) and the result is that held lane. Either way `env`'s held
    /// tag becomes `ty`'s (it is read only while the slot is NoVal).
    TakeInput {
        ty: Type,
        slot: u32,
        env: u32,
    },
    /// Whether input `slot` is present (its tag is not `ABSENT`).
    InputPresent {
        slot: u32,
    },
    /// Whether environment `slot` is present (its tag is not `ABSENT`).
    EnvPresent {
        slot: u32,
    },
    LoadInput {
        ty: Type,
        slot: u32,
    },
    LoadEnv {
        ty: Type,
        slot: u32,
    },
    StoreEnv {
        ty: Type,
        slot: u32,
        arg: Value,
    },
    /// Stores `arg` to environment `slot` with the tag of `ty` where
    /// `present`, else marks the slot NoVal holding a `ty`: its lane takes
    /// `arg` either way (which, where the slot is NoVal, is the held value
    /// the hold rule reads) and its held tag becomes `ty`'s.
    StoreEnvP {
        ty: Type,
        slot: u32,
        present: Value,
        arg: Value,
    },
    /// Declines with `reason` unless `cond` is true.
    Require {
        cond: Value,
        reason: u32,
    },
    LoadState {
        ty: Type,
        lane: u32,
    },
    StoreState {
        ty: Type,
        lane: u32,
        arg: Value,
    },
    /// Reads state lane `base + step % len`.
    RingLoad {
        ty: Type,
        base: u32,
        len: u32,
    },
    /// Writes state lane `base + step % len`.
    RingStore {
        ty: Type,
        base: u32,
        len: u32,
        arg: Value,
    },
    Binary {
        op: BinOp,
        args: [Value; 2],
    },
    Unary {
        op: UnOp,
        arg: Value,
    },
    BinaryCk {
        op: CkBinOp,
        args: [Value; 2],
        site: u32,
    },
    UnaryCk {
        op: CkUnOp,
        arg: Value,
        site: u32,
    },
    Cmp {
        kind: CmpKind,
        cond: Cond,
        args: [Value; 2],
    },
    Select {
        ty: Type,
        cond: Value,
        args: [Value; 2],
    },
    Jump {
        dest: BlockCall,
    },
    Brif {
        cond: Value,
        then_dest: BlockCall,
        else_dest: BlockCall,
    },
    Return,
    Decline {
        reason: u32,
    },
    Trap {
        kind: TrapKind,
        site: u32,
    },
    /// Enters `arg` into the count window `shape` whose state is the window
    /// words from `base` (once per step, and only where `entry` says so),
    /// then reads it (see `window`); traps with `site` where an Int sum
    /// leaves 64 bits.
    Window {
        ty: Type,
        base: u32,
        shape: crate::window::CountWindow,
        arg: Value,
        site: u32,
        entry: Entry,
    },
    /// Enters `arg` into the interval window `shape` whose state is the
    /// window words from `base`, at the row's time (the frame's `time`, or
    /// the step's: see `Frame::timed`), once per step and only where
    /// `present` is true if it is given; then reads it at that time. Traps
    /// `window_full` with `site` once the window has had to keep more than
    /// its capacity.
    Interval {
        ty: Type,
        base: u32,
        shape: crate::window::IntervalWindow,
        present: Option<Value>,
        arg: Value,
        site: u32,
    },
    /// Enters the step's samples of φ (`phi`, where `phi_present`) and ψ
    /// (`psi`, where `psi_present`) into the since `shape` whose state is
    /// the window words from `base`, at the row's time as `Interval` does,
    /// once per step; then reads it at that time. Traps `window_full` with
    /// `site` once a ring has had to keep more than its capacity.
    Since {
        ty: Type,
        base: u32,
        shape: crate::window::SinceWindow,
        phi_present: Value,
        phi: Value,
        psi_present: Value,
        psi: Value,
        site: u32,
    },
}

/// Whether a `window` instruction enters its operand before it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// Always (`window`): the operand is a value at every step, so the
    /// window cannot be empty when it is read.
    Always,
    /// Only where `present` is true (`window_if`): an absent operand enters
    /// nothing and the window is read as it is. A read of an empty window
    /// is ⊥, which no lane holds, so it declines with `reason`.
    If { present: Value, reason: u32 },
}

impl InstData {
    /// Whether the instruction ends a block.
    pub fn is_terminator(&self) -> bool {
        matches!(
            self,
            InstData::Jump { .. }
                | InstData::Brif { .. }
                | InstData::Return
                | InstData::Decline { .. }
                | InstData::Trap { .. }
        )
    }

    /// The type of the result, or `None` for instructions without a result.
    pub fn result_type(&self) -> Option<Type> {
        Some(match self {
            InstData::Iconst(_) => Type::I64,
            InstData::Fconst(_) => Type::F64,
            InstData::Bconst(_) => Type::B1,
            InstData::LoadInput { ty, .. }
            | InstData::TakeInput { ty, .. }
            | InstData::LoadEnv { ty, .. }
            | InstData::LoadState { ty, .. }
            | InstData::RingLoad { ty, .. }
            | InstData::Window { ty, .. }
            | InstData::Interval { ty, .. }
            | InstData::Since { ty, .. }
            | InstData::Select { ty, .. } => *ty,
            InstData::Binary { op, .. } => op.result_type(),
            InstData::Unary { op, .. } => op.result_type(),
            InstData::BinaryCk { op, .. } => op.result_type(),
            InstData::UnaryCk { op, .. } => op.result_type(),
            InstData::Cmp { .. } | InstData::InputPresent { .. } | InstData::EnvPresent { .. } => {
                Type::B1
            }
            _ => return None,
        })
    }

    /// The non-branch-argument operands paired with the type each must have.
    pub fn typed_operands(&self) -> Vec<(Value, Type)> {
        match self {
            InstData::StoreEnv { ty, arg, .. }
            | InstData::StoreState { ty, arg, .. }
            | InstData::RingStore { ty, arg, .. } => vec![(*arg, *ty)],
            InstData::StoreEnvP {
                ty, present, arg, ..
            } => vec![(*present, Type::B1), (*arg, *ty)],
            InstData::Require { cond, .. } => vec![(*cond, Type::B1)],
            InstData::Binary { op, args } => zip_types(args, op.operand_types()),
            InstData::BinaryCk { op, args, .. } => zip_types(args, op.operand_types()),
            InstData::Unary { op, arg } => vec![(*arg, op.operand_types()[0])],
            InstData::UnaryCk { op, arg, .. } => vec![(*arg, op.operand_types()[0])],
            InstData::Cmp { kind, args, .. } => {
                vec![
                    (args[0], kind.operand_type()),
                    (args[1], kind.operand_type()),
                ]
            }
            InstData::Select { ty, cond, args } => {
                vec![(*cond, Type::B1), (args[0], *ty), (args[1], *ty)]
            }
            InstData::Brif { cond, .. } => vec![(*cond, Type::B1)],
            InstData::Window {
                shape, arg, entry, ..
            } => {
                let mut ops = match elem_type(shape.elem) {
                    Some(t) => vec![(*arg, t)],
                    None => Vec::new(),
                };
                if let Entry::If { present, .. } = entry {
                    ops.push((*present, Type::B1));
                }
                ops
            }
            InstData::Interval {
                shape,
                present,
                arg,
                ..
            } => {
                let mut ops = match elem_type(shape.elem) {
                    Some(t) => vec![(*arg, t)],
                    None => Vec::new(),
                };
                if let Some(p) = present {
                    ops.push((*p, Type::B1));
                }
                ops
            }
            InstData::Since {
                shape,
                phi_present,
                phi,
                psi_present,
                psi,
                ..
            } => {
                let mut ops = vec![(*phi_present, Type::B1), (*psi_present, Type::B1)];
                if let Some(t) = elem_type(shape.elem) {
                    ops.extend([(*phi, t), (*psi, t)]);
                }
                ops
            }
            _ => Vec::new(),
        }
    }

    /// The branch targets of a terminator, in order.
    pub fn branch_targets(&self) -> Vec<&BlockCall> {
        match self {
            InstData::Jump { dest } => vec![dest],
            InstData::Brif {
                then_dest,
                else_dest,
                ..
            } => vec![then_dest, else_dest],
            _ => Vec::new(),
        }
    }

    /// The trap site the instruction names, if any.
    pub fn trap_site(&self) -> Option<u32> {
        match self {
            InstData::BinaryCk { site, .. }
            | InstData::UnaryCk { site, .. }
            | InstData::Window { site, .. }
            | InstData::Interval { site, .. }
            | InstData::Since { site, .. }
            | InstData::Trap { site, .. } => Some(*site),
            _ => None,
        }
    }
}

/// The scalar type of a window element (none for `Other`, which no
/// `window` instruction takes).
pub fn elem_type(elem: crate::window::Elem) -> Option<Type> {
    match elem {
        crate::window::Elem::Int => Some(Type::I64),
        crate::window::Elem::Float => Some(Type::F64),
        crate::window::Elem::Bool => Some(Type::B1),
        crate::window::Elem::Other => None,
    }
}

fn zip_types(args: &[Value; 2], tys: &[Type]) -> Vec<(Value, Type)> {
    vec![(args[0], tys[0]), (args[1], tys[1])]
}

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueDef {
    /// The result of an instruction.
    Result(Inst),
    /// Parameter number `n` of a block.
    Param(Block, u32),
    /// A number reserved by the parser for a value the text never defined.
    /// Any use of it is rejected by the verifier.
    Reserved,
}

/// The type and definition of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ValueData {
    pub ty: Type,
    pub def: ValueDef,
}

/// The frame sizes a program declares; every slot, lane and site it uses is below these.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Decl {
    /// Number of input slots.
    pub inputs: u32,
    /// Number of environment slots.
    pub env: u32,
    /// Number of state lanes.
    pub state: u32,
    /// Number of trap sites.
    pub sites: u32,
    /// Number of window words (`Frame::windows`) the program's `window`
    /// instructions reach.
    pub windows: u32,
}

/// Order of blocks and of instructions within each block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// Blocks in program order; the first one is the entry block.
    pub blocks: Vec<Block>,
    /// Instructions of each block, indexed by block number.
    pub insts: Vec<Vec<Inst>>,
}

impl Layout {
    /// The entry block, if the layout holds any block.
    pub fn entry(&self) -> Option<Block> {
        self.blocks.first().copied()
    }

    /// The instructions of `block` in order.
    pub fn block_insts(&self, block: Block) -> &[Inst] {
        self.insts.get(block.index()).map_or(&[], |v| v.as_slice())
    }
}

/// A scalar IR program: one function over one frame.
#[derive(Clone, Debug, Default)]
pub struct Program {
    /// Declared frame sizes.
    pub decl: Decl,
    /// Instruction arena.
    pub insts: Vec<InstData>,
    /// The result value of each instruction, parallel to `insts`.
    pub inst_result: Vec<Option<Value>>,
    /// Value table.
    pub values: Vec<ValueData>,
    /// Parameters of each block, indexed by block number.
    pub block_params: Vec<Vec<Value>>,
    /// Block and instruction order.
    pub layout: Layout,
}

impl Program {
    /// Creates an empty program with the given frame sizes.
    pub fn new(decl: Decl) -> Program {
        Program {
            decl,
            ..Program::default()
        }
    }

    /// Allocates a new block, not yet in the layout.
    pub fn create_block(&mut self) -> Block {
        let b = Block(self.block_params.len() as u32);
        self.block_params.push(Vec::new());
        self.layout.insts.push(Vec::new());
        b
    }

    /// Appends a typed parameter to `block`.
    pub fn append_block_param(&mut self, block: Block, ty: Type) -> Value {
        let n = self.block_params[block.index()].len() as u32;
        let v = self.make_value(ty, ValueDef::Param(block, n));
        self.block_params[block.index()].push(v);
        v
    }

    /// Adds a value to the value table.
    pub fn make_value(&mut self, ty: Type, def: ValueDef) -> Value {
        let v = Value(self.values.len() as u32);
        self.values.push(ValueData { ty, def });
        v
    }

    /// Adds an instruction to the arena (not to the layout) and creates its result.
    pub fn make_inst(&mut self, data: InstData) -> Inst {
        let inst = Inst(self.insts.len() as u32);
        let result = data
            .result_type()
            .map(|ty| self.make_value(ty, ValueDef::Result(inst)));
        self.insts.push(data);
        self.inst_result.push(result);
        inst
    }

    /// The data of an instruction.
    pub fn inst(&self, inst: Inst) -> &InstData {
        &self.insts[inst.index()]
    }

    /// The result of an instruction, if it has one.
    pub fn result(&self, inst: Inst) -> Option<Value> {
        self.inst_result.get(inst.index()).copied().flatten()
    }

    /// The type of a value; `None` if the value is not in the table.
    pub fn value_type(&self, v: Value) -> Option<Type> {
        self.values.get(v.index()).map(|d| d.ty)
    }

    /// The parameters of a block.
    pub fn params(&self, block: Block) -> &[Value] {
        self.block_params
            .get(block.index())
            .map_or(&[], |v| v.as_slice())
    }

    /// Places `block` at the end of the layout.
    pub fn append_block(&mut self, block: Block) {
        self.layout.blocks.push(block);
    }

    /// Places `inst` at the end of `block`.
    pub fn append_inst(&mut self, block: Block, inst: Inst) {
        self.layout.insts[block.index()].push(inst);
    }

    /// The entry block.
    pub fn entry(&self) -> Option<Block> {
        self.layout.entry()
    }

    /// Every input the program guards, with the type its guard requires,
    /// in layout order (a slot guarded twice is named twice).
    pub fn input_guards(&self) -> Vec<InputGuard> {
        (self.layout.blocks.iter())
            .flat_map(|&b| self.layout.block_insts(b))
            .filter_map(|&i| match *self.inst(i) {
                InstData::GuardInput { slot, ty, .. }
                | InstData::GuardInputHeld { slot, ty, .. } => Some(InputGuard { slot, ty }),
                _ => None,
            })
            .collect()
    }

    /// This program without its input guards, for inputs known to pass
    /// them: a batch whose guarded columns hold the guards' types on every
    /// row. On such inputs it runs exactly as the program does (a passing
    /// guard does nothing); on others it reads lanes as types they are not.
    /// The guards leave the layout only; the arena keeps them. Every input
    /// being present, `take_input` becomes the `load_input` and `store_env`
    /// it then is, and `input_present` the constant `true`.
    pub fn without_input_guards(&self) -> Program {
        let mut p = self.clone();
        for b in 0..p.layout.insts.len() {
            let old = std::mem::take(&mut p.layout.insts[b]);
            let mut insts = Vec::with_capacity(old.len());
            for i in old {
                match *self.inst(i) {
                    InstData::GuardInput { .. } | InstData::GuardInputHeld { .. } => {}
                    InstData::TakeInput { ty, slot, env } => {
                        p.insts[i.index()] = InstData::LoadInput { ty, slot };
                        let arg = p.result(i).expect("take_input has a result");
                        let store = p.make_inst(InstData::StoreEnv { ty, slot: env, arg });
                        insts.push(i);
                        insts.push(store);
                    }
                    InstData::InputPresent { .. } => {
                        p.insts[i.index()] = InstData::Bconst(true);
                        insts.push(i);
                    }
                    _ => insts.push(i),
                }
            }
            p.layout.insts[b] = insts;
        }
        p
    }
}

/// One `guard_input`'s demand: input `slot` holds a `ty` (its tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputGuard {
    pub slot: u32,
    pub ty: Type,
}

/// Structural equality: the same declarations, the same blocks (by number, with the
/// same parameters) in the same order, and at each layout position the same
/// instruction data and result. Instruction numbers and anything outside the layout
/// are not compared, because the text form does not show them.
impl PartialEq for Program {
    fn eq(&self, other: &Program) -> bool {
        if self.decl != other.decl || self.layout.blocks != other.layout.blocks {
            return false;
        }
        let typed = |p: &Program, v: Value| (v, p.value_type(v));
        self.layout.blocks.iter().all(|&b| {
            let (pa, pb) = (self.params(b), other.params(b));
            let (ia, ib) = (self.layout.block_insts(b), other.layout.block_insts(b));
            pa.len() == pb.len()
                && pa
                    .iter()
                    .zip(pb)
                    .all(|(&x, &y)| typed(self, x) == typed(other, y))
                && ia.len() == ib.len()
                && ia.iter().zip(ib).all(|(&x, &y)| {
                    self.inst(x) == other.inst(y)
                        && self.result(x).map(|v| typed(self, v))
                            == other.result(y).map(|v| typed(other, v))
                })
        })
    }
}
