//! The quickened opcode table: one line per opcode, from which one macro derives the
//! `Opcode` enum, the `Op` instruction enum, the encoder helpers on [`Code`], the
//! disassembler and the dispatch loop.
//!
//! Keeping all four in one table means an opcode cannot be added to the dispatch
//! loop without also being encodable and disassemblable, and the semantics of each
//! opcode is written exactly once, beside its operand shape.

use super::FrameRef;
use crate::frame::Exit;
use crate::ir::{TrapKind, Type};
use std::fmt::{self, Write};
use std::ops::{Index, IndexMut};

/// A register index into the register file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reg(pub u32);

/// An index into the code, the target of a branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pc(pub u32);

/// A trap site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Site(pub u32);

/// A slot tag that a guard requires or a store writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tag(pub u8);

/// How one operand is shown by the disassembler.
trait Operand {
    fn show(&self, out: &mut String);
    /// The operand as a branch target, if it is one (only [`Pc`] is).
    fn pc_mut(&mut self) -> Option<&mut Pc> {
        None
    }
}

impl Operand for Reg {
    fn show(&self, out: &mut String) {
        let _ = write!(out, "r{}", self.0);
    }
}
impl Operand for Pc {
    fn show(&self, out: &mut String) {
        let _ = write!(out, "@{}", self.0);
    }
    fn pc_mut(&mut self) -> Option<&mut Pc> {
        Some(self)
    }
}
impl Operand for Site {
    fn show(&self, out: &mut String) {
        let _ = write!(out, "site{}", self.0);
    }
}
impl Operand for Tag {
    fn show(&self, out: &mut String) {
        let name = match self.0 {
            crate::frame::tag::I64 => Type::I64.name(),
            crate::frame::tag::F64 => Type::F64.name(),
            crate::frame::tag::B1 => Type::B1.name(),
            _ => "?",
        };
        out.push_str(name);
    }
}
/// An interval window of the code's table ([`Code::intervals`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IntervalId(pub u32);

impl Operand for IntervalId {
    fn show(&self, out: &mut String) {
        let _ = write!(out, "iv{}", self.0);
    }
}

/// A since of the code's table ([`Code::sinces`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SinceId(pub u32);

impl Operand for SinceId {
    fn show(&self, out: &mut String) {
        let _ = write!(out, "sn{}", self.0);
    }
}

impl Operand for crate::window::CountWindow {
    fn show(&self, out: &mut String) {
        let _ = write!(out, "{:#x}", self.encode());
    }
}

impl Operand for u32 {
    fn show(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}
impl Operand for i64 {
    fn show(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}

/// The register file: one `u64` lane per register.
///
/// It is private to this crate on purpose: its `Index` skips the bounds check,
/// which is sound only because every register file is built by
/// [`QuickCode::compile`](super::QuickCode::compile) with `nregs` lanes for code
/// whose registers are all below `nregs`. A public register file would let safe
/// code index it out of bounds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Regs(Vec<u64>);

impl Regs {
    /// A zeroed register file with `n` lanes.
    pub(crate) fn zeroed(n: u32) -> Regs {
        Regs(vec![0; n as usize])
    }
}

// Register indices come from the compiler, which sizes the register file to
// cover every register it hands out, so the dispatch loop skips the bounds
// checks (they are kept in debug builds).
impl Index<Reg> for Regs {
    type Output = u64;
    #[inline(always)]
    fn index(&self, r: Reg) -> &u64 {
        debug_assert!((r.0 as usize) < self.0.len());
        // SAFETY: see above; every `Reg` in compiled code is < `nregs`.
        unsafe { self.0.get_unchecked(r.0 as usize) }
    }
}

impl IndexMut<Reg> for Regs {
    #[inline(always)]
    fn index_mut(&mut self, r: Reg) -> &mut u64 {
        debug_assert!((r.0 as usize) < self.0.len());
        // SAFETY: see above.
        unsafe { self.0.get_unchecked_mut(r.0 as usize) }
    }
}

// Frame slots and lanes come from verified programs (the verifier checks every
// slot and lane against the program's declared sizes) and the frames are sized
// from the same declarations, so the dispatch loop reads and writes them
// without bounds checks (kept in debug builds).
#[inline(always)]
fn ld<T: Copy>(s: &[T], i: usize) -> T {
    debug_assert!(i < s.len());
    // SAFETY: see above.
    unsafe { *s.get_unchecked(i) }
}

#[inline(always)]
fn st<T>(s: &mut [T], i: usize, v: T) {
    debug_assert!(i < s.len());
    // SAFETY: see above.
    unsafe { *s.get_unchecked_mut(i) = v }
}

/// Stores a lane and its tag into an environment slot (`store_env`'s body,
/// shared with the superinstructions that end in it).
#[inline(always)]
fn put(fr: &mut FrameRef<'_>, slot: u32, v: u64, tag: Tag) {
    st(fr.env, slot as usize, v);
    st(fr.env_tags, slot as usize, tag.0);
}

const ABSENT: u8 = crate::frame::tag::ABSENT;

/// The tag of environment `slot` under the hold rule: its tag, or while it
/// is NoVal the tag of its last value.
#[inline(always)]
fn held_tag(fr: &FrameRef<'_>, slot: u32) -> u8 {
    match ld(fr.env_tags, slot as usize) {
        ABSENT => ld(fr.held_tags, slot as usize),
        t => t,
    }
}

#[inline(always)]
fn f(x: u64) -> f64 {
    f64::from_bits(x)
}
#[inline(always)]
fn fb(x: f64) -> u64 {
    x.to_bits()
}
#[inline(always)]
fn i(x: u64) -> i64 {
    x as i64
}
#[inline(always)]
fn bit(x: bool) -> u64 {
    x as u64
}

/// Unwraps a checked result or leaves with an overflow trap at `site`.
macro_rules! ck {
    ($e:expr, $site:expr) => {
        match $e {
            Some(v) => v as u64,
            None => return Exit::Trap(TrapKind::Overflow, $site.0),
        }
    };
}

/// Checked division or remainder: a zero divisor traps first, then overflow.
macro_rules! ckdiv {
    ($a:expr, $b:expr, $m:ident, $site:expr) => {{
        let (x, y) = ($a, $b);
        if y == 0 {
            return Exit::Trap(TrapKind::DivByZero, $site.0);
        }
        ck!(x.$m(y), $site)
    }};
}

macro_rules! define_ops {
    (
        ctx($r:ident, $fr:ident, $pc:ident, $code:ident);
        $( $method:ident $Name:ident ( $($field:ident : $fty:ty),* ) => $body:block )*
    ) => {
        /// The opcode of a quickened instruction, without operands.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Opcode { $($Name),* }

        impl Opcode {
            /// The disassembler's name for the opcode.
            pub fn mnemonic(self) -> &'static str {
                match self { $(Opcode::$Name => stringify!($method)),* }
            }
        }

        /// A quickened instruction with its operands.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Op { $($Name { $($field: $fty),* }),* }

        impl Op {
            /// The opcode of this instruction.
            pub fn opcode(&self) -> Opcode {
                match self { $(Op::$Name { .. } => Opcode::$Name),* }
            }

            /// Appends the instruction's disassembly to `out`.
            pub fn disasm_into(&self, out: &mut String) {
                match self {
                    $(Op::$Name { $($field),* } => {
                        out.push_str(stringify!($method));
                        let mut _first = true;
                        $(
                            out.push_str(if _first { " " } else { ", " });
                            _first = false;
                            Operand::show($field, out);
                        )*
                    })*
                }
            }
        }

        impl Op {
            /// Calls `f` on every branch target of the instruction.
            pub fn for_each_target(&mut self, mut f: impl FnMut(&mut Pc)) {
                match self {
                    $(Op::$Name { $($field),* } => {
                        $( if let Some(pc) = Operand::pc_mut($field) { f(pc); } )*
                    })*
                }
            }
        }

        impl fmt::Display for Op {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut s = String::new();
                self.disasm_into(&mut s);
                f.write_str(&s)
            }
        }

        /// Encoder helpers: one method per opcode, appending it and returning its pc.
        impl Code {
            $(
                #[doc = concat!("Appends `", stringify!($method), "`.")]
                #[allow(clippy::too_many_arguments)]
                pub fn $method(&mut self, $($field: $fty),*) -> Pc {
                    self.push(Op::$Name { $($field),* })
                }
            )*
        }

        /// The dispatch loop. The compiler guarantees that every register, slot and
        /// lane is in range and that control never runs off the end of the code
        /// (every block ends in a branch or an exit), so indexing never fails.
        #[inline(never)]
        pub(crate) fn execute($code: &Code, $r: &mut Regs, $fr: &mut FrameRef<'_>) -> Exit {
            let ops = &$code.ops[..];
            let mut $pc: usize = 0;
            loop {
                debug_assert!($pc < ops.len());
                // SAFETY: every block of compiled code ends in a jump or an
                // exit whose targets are pcs of the code, so `pc` stays in range.
                // The instruction is matched by reference, so each arm loads
                // only its own operands: a copy of the whole `Op` let the
                // compiler load every operand word before the jump, for every
                // opcode (16 instructions a dispatch instead of 8; the chain
                // scenario's row went from 906 to 832 instructions).
                let op = unsafe { ops.get_unchecked($pc) };
                $pc += 1;
                match op {
                    $(&Op::$Name { $($field),* } => $body)*
                }
            }
        }
    };
}

/// A sequence of quickened instructions plus the constants preloaded into registers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Code {
    pub ops: Vec<Op>,
    /// Registers that hold constants, with their bits; written once at compile time.
    pub consts: Vec<(Reg, u64)>,
    /// Size of the register file.
    pub nregs: u32,
    /// The interval windows the `interval` instructions name ([`IntervalId`]):
    /// kept beside the code so that an instruction stays small.
    pub intervals: Vec<crate::window::IntervalWindow>,
    /// The sinces the `since` instructions name ([`SinceId`]), likewise.
    pub sinces: Vec<crate::window::SinceWindow>,
}

impl Code {
    /// Appends an instruction and returns its pc.
    pub fn push(&mut self, op: Op) -> Pc {
        self.ops.push(op);
        Pc(self.ops.len() as u32 - 1)
    }
}

/// The superinstructions the pair pass makes (the last group of the table),
/// for tests that must see each of them run.
pub const PAIR_OPCODES: [Opcode; 15] = [
    Opcode::GuardInput2,
    Opcode::LoadInputSt,
    Opcode::LoadStateSt,
    Opcode::LoadEnvStoreState,
    Opcode::IaddCkSt,
    Opcode::IaddCkImmSt,
    Opcode::IsubCkSt,
    Opcode::IsubCkImmSt,
    Opcode::ImulCkSt,
    Opcode::ImulCkImmSt,
    Opcode::SelectSt,
    Opcode::FaddSt,
    Opcode::FsubSt,
    Opcode::FmulSt,
    Opcode::FdivSt,
];

/// Disassembles code: the preloaded constants, then one numbered line per instruction.
pub fn disasm(code: &Code) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "regs {}", code.nregs);
    for (r, bits) in &code.consts {
        let _ = writeln!(s, "const r{} = 0x{bits:x}", r.0);
    }
    for (k, iv) in code.intervals.iter().enumerate() {
        let _ = writeln!(
            s,
            "iv{k} = [{}, {}] {:#x}",
            iv.lo_ns,
            iv.hi_ns,
            iv.encode_kind()
        );
    }
    for (k, sn) in code.sinces.iter().enumerate() {
        let _ = writeln!(
            s,
            "sn{k} = [{}, {}] {:#x}",
            sn.lo_ns,
            sn.hi_ns,
            sn.encode_kind()
        );
    }
    for (pc, op) in code.ops.iter().enumerate() {
        let _ = write!(s, "{pc:4}: ");
        op.disasm_into(&mut s);
        s.push('\n');
    }
    s
}

define_ops! {
    ctx(r, fr, pc, code);
    // Register moves (block parameters) and exits.
    mov Mov(dst: Reg, src: Reg) => { r[dst] = r[src]; }
    ret Ret() => { return Exit::Return; }
    decline Decline(reason: u32) => { return Exit::Decline(reason); }
    trap_overflow TrapOverflow(site: Site) => { return Exit::Trap(TrapKind::Overflow, site.0); }
    trap_div_by_zero TrapDivByZero(site: Site) => { return Exit::Trap(TrapKind::DivByZero, site.0); }
    trap_window_full TrapWindowFull(site: Site) => { return Exit::Trap(TrapKind::WindowFull, site.0); }
    // Control flow.
    jump Jump(target: Pc) => { pc = target.0 as usize; }
    brif Brif(c: Reg, then_pc: Pc, else_pc: Pc) => { pc = if r[c] != 0 { then_pc.0 } else { else_pc.0 } as usize; }
    // Frame access. Lanes are untyped u64, so loads need no type specialisation.
    guard_input GuardInput(slot: u32, tag: Tag, reason: u32) => { if ld(fr.input_tags, slot as usize) != tag.0 { return Exit::Decline(reason); } }
    guard_env GuardEnv(slot: u32, tag: Tag, reason: u32) => { if ld(fr.env_tags, slot as usize) != tag.0 { return Exit::Decline(reason); } }
    // Presence (the hold rule): a NoVal slot keeps its last value's tag in
    // `held_tags` and its payload in its lane.
    guard_held GuardHeld(slot: u32, tag: Tag, reason: u32) => { if held_tag(fr, slot) != tag.0 { return Exit::Decline(reason); } }
    guard_input_held GuardInputHeld(slot: u32, env: u32, tag: Tag, reason: u32) => {
        let t = ld(fr.input_tags, slot as usize);
        if t != tag.0 && (t != ABSENT || held_tag(fr, env) != tag.0) { return Exit::Decline(reason); }
    }
    take_input TakeInput(dst: Reg, slot: u32, env: u32, tag: Tag) => {
        if ld(fr.input_tags, slot as usize) != ABSENT {
            let v = ld(fr.inputs, slot as usize);
            r[dst] = v;
            put(fr, env, v, tag);
        } else {
            r[dst] = ld(fr.env, env as usize);
            st(fr.env_tags, env as usize, ABSENT);
        }
        st(fr.held_tags, env as usize, tag.0);
    }
    input_present InputPresent(dst: Reg, slot: u32) => { r[dst] = bit(ld(fr.input_tags, slot as usize) != ABSENT); }
    env_present EnvPresent(dst: Reg, slot: u32) => { r[dst] = bit(ld(fr.env_tags, slot as usize) != ABSENT); }
    store_env_p StoreEnvP(slot: u32, present: Reg, src: Reg, tag: Tag) => {
        st(fr.env, slot as usize, r[src]);
        st(fr.env_tags, slot as usize, if r[present] != 0 { tag.0 } else { ABSENT });
        st(fr.held_tags, slot as usize, tag.0);
    }
    require Require(c: Reg, reason: u32) => { if r[c] == 0 { return Exit::Decline(reason); } }
    load_input LoadInput(dst: Reg, slot: u32) => { r[dst] = ld(fr.inputs, slot as usize); }
    load_input_guarded LoadInputGuarded(dst: Reg, slot: u32, tag: Tag, reason: u32) => { if ld(fr.input_tags, slot as usize) != tag.0 { return Exit::Decline(reason); } r[dst] = ld(fr.inputs, slot as usize); }
    load_env LoadEnv(dst: Reg, slot: u32) => { r[dst] = ld(fr.env, slot as usize); }
    load_env_guarded LoadEnvGuarded(dst: Reg, slot: u32, tag: Tag, reason: u32) => { if ld(fr.env_tags, slot as usize) != tag.0 { return Exit::Decline(reason); } r[dst] = ld(fr.env, slot as usize); }
    store_env StoreEnv(slot: u32, src: Reg, tag: Tag) => { put(fr, slot, r[src], tag); }
    load_state LoadState(dst: Reg, lane: u32) => { r[dst] = ld(fr.state, lane as usize); }
    store_state StoreState(lane: u32, src: Reg) => { st(fr.state, lane as usize, r[src]); }
    ring_load RingLoad(dst: Reg, base: u32, len: u32) => { r[dst] = ld(fr.state, (base as u64 + fr.step % len as u64) as usize); }
    ring_store RingStore(base: u32, len: u32, src: Reg) => { st(fr.state, (base as u64 + fr.step % len as u64) as usize, r[src]); }
    // A count window: push the step's value, then read (see `window`); the
    // verifier put its words inside the declared `windows`.
    window Window(dst: Reg, src: Reg, base: u32, shape: crate::window::CountWindow, site: Site) => {
        let at = base as usize;
        match shape.step(&mut fr.windows[at..at + shape.words()], fr.step, r[src]) {
            crate::window::Read::Bits(b) => r[dst] = b,
            crate::window::Read::Overflow => return Exit::Trap(TrapKind::Overflow, site.0),
            // A window that has just taken a value is not empty.
            crate::window::Read::Empty => r[dst] = 0,
        }
    }
    // A count window entering the step's value only where it is present;
    // an empty window's read is ⊥, which declines.
    window_if WindowIf(dst: Reg, p: Reg, src: Reg, base: u32, shape: crate::window::CountWindow, site: Site, reason: u32) => {
        let at = base as usize;
        let words = &mut fr.windows[at..at + shape.words()];
        if r[p] != 0 {
            shape.push(words, fr.step, r[src]);
        }
        match shape.read(words) {
            crate::window::Read::Bits(b) => r[dst] = b,
            crate::window::Read::Overflow => return Exit::Trap(TrapKind::Overflow, site.0),
            crate::window::Read::Empty => return Exit::Decline(reason),
        }
    }
    // An STL operator's interval window: push the step's value at the row's
    // time (only where it is present, for `interval_if`), then read; the
    // verifier put its words inside the declared `windows`, and the compiler
    // its shape in the code's table.
    interval Interval(dst: Reg, src: Reg, base: u32, shape: IntervalId, site: Site) => {
        let iv = &code.intervals[shape.0 as usize];
        let at = base as usize;
        let (step, time) = (fr.step, fr.time());
        match iv.step(&mut fr.windows[at..at + iv.words()], step, time, r[src], true) {
            crate::window::IntervalRead::Bits(b) => r[dst] = b,
            crate::window::IntervalRead::Full => return Exit::Trap(TrapKind::WindowFull, site.0),
        }
    }
    interval_if IntervalIf(dst: Reg, p: Reg, src: Reg, base: u32, shape: IntervalId, site: Site) => {
        let iv = &code.intervals[shape.0 as usize];
        let at = base as usize;
        let (step, time) = (fr.step, fr.time());
        match iv.step(&mut fr.windows[at..at + iv.words()], step, time, r[src], r[p] != 0) {
            crate::window::IntervalRead::Bits(b) => r[dst] = b,
            crate::window::IntervalRead::Full => return Exit::Trap(TrapKind::WindowFull, site.0),
        }
    }
    // An STL since: push the step's samples of φ and ψ (each where it is
    // present) at the row's time, then read; the verifier put its words
    // inside the declared `windows`, and the compiler its shape in the
    // code's table.
    since Since(dst: Reg, pp: Reg, phi: Reg, qp: Reg, psi: Reg, base: u32, shape: SinceId, site: Site) => {
        let sn = &code.sinces[shape.0 as usize];
        let at = base as usize;
        let (step, time) = (fr.step, fr.time());
        let (phi, psi) = ((r[pp] != 0).then_some(r[phi]), (r[qp] != 0).then_some(r[psi]));
        match sn.step(&mut fr.windows[at..at + sn.words()], step, time, phi, psi) {
            crate::window::IntervalRead::Bits(b) => r[dst] = b,
            crate::window::IntervalRead::Full => return Exit::Trap(TrapKind::WindowFull, site.0),
        }
    }
    // Checked integer arithmetic, exactly Rust's checked_* (zero divisors first).
    iadd_ck IaddCk(dst: Reg, a: Reg, b: Reg, site: Site) => { r[dst] = ck!(i(r[a]).checked_add(i(r[b])), site); }
    iadd_ck_imm IaddCkImm(dst: Reg, a: Reg, imm: i64, site: Site) => { r[dst] = ck!(i(r[a]).checked_add(imm), site); }
    isub_ck IsubCk(dst: Reg, a: Reg, b: Reg, site: Site) => { r[dst] = ck!(i(r[a]).checked_sub(i(r[b])), site); }
    isub_ck_imm IsubCkImm(dst: Reg, a: Reg, imm: i64, site: Site) => { r[dst] = ck!(i(r[a]).checked_sub(imm), site); }
    imul_ck ImulCk(dst: Reg, a: Reg, b: Reg, site: Site) => { r[dst] = ck!(i(r[a]).checked_mul(i(r[b])), site); }
    imul_ck_imm ImulCkImm(dst: Reg, a: Reg, imm: i64, site: Site) => { r[dst] = ck!(i(r[a]).checked_mul(imm), site); }
    idiv_ck IdivCk(dst: Reg, a: Reg, b: Reg, site: Site) => { r[dst] = ckdiv!(i(r[a]), i(r[b]), checked_div, site); }
    irem_ck IremCk(dst: Reg, a: Reg, b: Reg, site: Site) => { r[dst] = ckdiv!(i(r[a]), i(r[b]), checked_rem, site); }
    ineg_ck InegCk(dst: Reg, a: Reg, site: Site) => { r[dst] = ck!(i(r[a]).checked_neg(), site); }
    iabs_ck IabsCk(dst: Reg, a: Reg, site: Site) => { r[dst] = ck!(i(r[a]).checked_abs(), site); }
    imin Imin(dst: Reg, a: Reg, b: Reg) => { r[dst] = i(r[a]).min(i(r[b])) as u64; }
    imax Imax(dst: Reg, a: Reg, b: Reg) => { r[dst] = i(r[a]).max(i(r[b])) as u64; }
    // Float arithmetic with Rust's f64 semantics.
    fadd Fadd(dst: Reg, a: Reg, b: Reg) => { r[dst] = fb(f(r[a]) + f(r[b])); }
    fsub Fsub(dst: Reg, a: Reg, b: Reg) => { r[dst] = fb(f(r[a]) - f(r[b])); }
    fmul Fmul(dst: Reg, a: Reg, b: Reg) => { r[dst] = fb(f(r[a]) * f(r[b])); }
    fdiv Fdiv(dst: Reg, a: Reg, b: Reg) => { r[dst] = fb(f(r[a]) / f(r[b])); }
    frem Frem(dst: Reg, a: Reg, b: Reg) => { r[dst] = fb(f(r[a]) % f(r[b])); }
    fmin Fmin(dst: Reg, a: Reg, b: Reg) => { r[dst] = fb(f(r[a]).min(f(r[b]))); }
    fmax Fmax(dst: Reg, a: Reg, b: Reg) => { r[dst] = fb(f(r[a]).max(f(r[b]))); }
    fneg Fneg(dst: Reg, a: Reg) => { r[dst] = fb(-f(r[a])); }
    fabs Fabs(dst: Reg, a: Reg) => { r[dst] = fb(f(r[a]).abs()); }
    fsqrt Fsqrt(dst: Reg, a: Reg) => { r[dst] = fb(f(r[a]).sqrt()); }
    ffloor Ffloor(dst: Reg, a: Reg) => { r[dst] = fb(f(r[a]).floor()); }
    fceil Fceil(dst: Reg, a: Reg) => { r[dst] = fb(f(r[a]).ceil()); }
    fsin Fsin(dst: Reg, a: Reg) => { r[dst] = fb(f(r[a]).sin()); }
    fcos Fcos(dst: Reg, a: Reg) => { r[dst] = fb(f(r[a]).cos()); }
    ftan Ftan(dst: Reg, a: Reg) => { r[dst] = fb(f(r[a]).tan()); }
    fcvt_from_i64 FcvtFromI64(dst: Reg, a: Reg) => { r[dst] = fb(i(r[a]) as f64); }
    // Booleans are 0/1 lanes.
    band Band(dst: Reg, a: Reg, b: Reg) => { r[dst] = r[a] & r[b]; }
    bor Bor(dst: Reg, a: Reg, b: Reg) => { r[dst] = r[a] | r[b]; }
    bxor Bxor(dst: Reg, a: Reg, b: Reg) => { r[dst] = r[a] ^ r[b]; }
    bnot Bnot(dst: Reg, a: Reg) => { r[dst] = r[a] ^ 1; }
    select Select(dst: Reg, c: Reg, a: Reg, b: Reg) => { r[dst] = if r[c] != 0 { r[a] } else { r[b] }; }
    // Integer comparisons (also used for b1, whose 0/1 lanes order as false < true).
    icmp_eq IcmpEq(dst: Reg, a: Reg, b: Reg) => { r[dst] = bit(i(r[a]) == i(r[b])); }
    icmp_ne IcmpNe(dst: Reg, a: Reg, b: Reg) => { r[dst] = bit(i(r[a]) != i(r[b])); }
    icmp_lt IcmpLt(dst: Reg, a: Reg, b: Reg) => { r[dst] = bit(i(r[a]) < i(r[b])); }
    icmp_le IcmpLe(dst: Reg, a: Reg, b: Reg) => { r[dst] = bit(i(r[a]) <= i(r[b])); }
    icmp_gt IcmpGt(dst: Reg, a: Reg, b: Reg) => { r[dst] = bit(i(r[a]) > i(r[b])); }
    icmp_ge IcmpGe(dst: Reg, a: Reg, b: Reg) => { r[dst] = bit(i(r[a]) >= i(r[b])); }
    icmp_eq_imm IcmpEqImm(dst: Reg, a: Reg, imm: i64) => { r[dst] = bit(i(r[a]) == imm); }
    icmp_ne_imm IcmpNeImm(dst: Reg, a: Reg, imm: i64) => { r[dst] = bit(i(r[a]) != imm); }
    icmp_lt_imm IcmpLtImm(dst: Reg, a: Reg, imm: i64) => { r[dst] = bit(i(r[a]) < imm); }
    icmp_le_imm IcmpLeImm(dst: Reg, a: Reg, imm: i64) => { r[dst] = bit(i(r[a]) <= imm); }
    icmp_gt_imm IcmpGtImm(dst: Reg, a: Reg, imm: i64) => { r[dst] = bit(i(r[a]) > imm); }
    icmp_ge_imm IcmpGeImm(dst: Reg, a: Reg, imm: i64) => { r[dst] = bit(i(r[a]) >= imm); }
    // IEEE float comparisons: ordered ones are false on NaN, `ne` is true.
    fcmp_eq FcmpEq(dst: Reg, a: Reg, b: Reg) => { r[dst] = bit(f(r[a]) == f(r[b])); }
    fcmp_ne FcmpNe(dst: Reg, a: Reg, b: Reg) => { r[dst] = bit(f(r[a]) != f(r[b])); }
    fcmp_lt FcmpLt(dst: Reg, a: Reg, b: Reg) => { r[dst] = bit(f(r[a]) < f(r[b])); }
    fcmp_le FcmpLe(dst: Reg, a: Reg, b: Reg) => { r[dst] = bit(f(r[a]) <= f(r[b])); }
    fcmp_gt FcmpGt(dst: Reg, a: Reg, b: Reg) => { r[dst] = bit(f(r[a]) > f(r[b])); }
    fcmp_ge FcmpGe(dst: Reg, a: Reg, b: Reg) => { r[dst] = bit(f(r[a]) >= f(r[b])); }
    // Compare-and-branch superinstructions.
    br_icmp_eq BrIcmpEq(a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) => { pc = if i(r[a]) == i(r[b]) { then_pc.0 } else { else_pc.0 } as usize; }
    br_icmp_ne BrIcmpNe(a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) => { pc = if i(r[a]) != i(r[b]) { then_pc.0 } else { else_pc.0 } as usize; }
    br_icmp_lt BrIcmpLt(a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) => { pc = if i(r[a]) < i(r[b]) { then_pc.0 } else { else_pc.0 } as usize; }
    br_icmp_le BrIcmpLe(a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) => { pc = if i(r[a]) <= i(r[b]) { then_pc.0 } else { else_pc.0 } as usize; }
    br_icmp_gt BrIcmpGt(a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) => { pc = if i(r[a]) > i(r[b]) { then_pc.0 } else { else_pc.0 } as usize; }
    br_icmp_ge BrIcmpGe(a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) => { pc = if i(r[a]) >= i(r[b]) { then_pc.0 } else { else_pc.0 } as usize; }
    br_icmp_eq_imm BrIcmpEqImm(a: Reg, imm: i64, then_pc: Pc, else_pc: Pc) => { pc = if i(r[a]) == imm { then_pc.0 } else { else_pc.0 } as usize; }
    br_icmp_ne_imm BrIcmpNeImm(a: Reg, imm: i64, then_pc: Pc, else_pc: Pc) => { pc = if i(r[a]) != imm { then_pc.0 } else { else_pc.0 } as usize; }
    br_icmp_lt_imm BrIcmpLtImm(a: Reg, imm: i64, then_pc: Pc, else_pc: Pc) => { pc = if i(r[a]) < imm { then_pc.0 } else { else_pc.0 } as usize; }
    br_icmp_le_imm BrIcmpLeImm(a: Reg, imm: i64, then_pc: Pc, else_pc: Pc) => { pc = if i(r[a]) <= imm { then_pc.0 } else { else_pc.0 } as usize; }
    br_icmp_gt_imm BrIcmpGtImm(a: Reg, imm: i64, then_pc: Pc, else_pc: Pc) => { pc = if i(r[a]) > imm { then_pc.0 } else { else_pc.0 } as usize; }
    br_icmp_ge_imm BrIcmpGeImm(a: Reg, imm: i64, then_pc: Pc, else_pc: Pc) => { pc = if i(r[a]) >= imm { then_pc.0 } else { else_pc.0 } as usize; }
    br_fcmp_eq BrFcmpEq(a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) => { pc = if f(r[a]) == f(r[b]) { then_pc.0 } else { else_pc.0 } as usize; }
    br_fcmp_ne BrFcmpNe(a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) => { pc = if f(r[a]) != f(r[b]) { then_pc.0 } else { else_pc.0 } as usize; }
    br_fcmp_lt BrFcmpLt(a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) => { pc = if f(r[a]) < f(r[b]) { then_pc.0 } else { else_pc.0 } as usize; }
    br_fcmp_le BrFcmpLe(a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) => { pc = if f(r[a]) <= f(r[b]) { then_pc.0 } else { else_pc.0 } as usize; }
    br_fcmp_gt BrFcmpGt(a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) => { pc = if f(r[a]) > f(r[b]) { then_pc.0 } else { else_pc.0 } as usize; }
    br_fcmp_ge BrFcmpGe(a: Reg, b: Reg, then_pc: Pc, else_pc: Pc) => { pc = if f(r[a]) >= f(r[b]) { then_pc.0 } else { else_pc.0 } as usize; }
    // Superinstructions made by the pair pass (`compile::fuse`): an
    // instruction and the one after it, when no branch lands between them.
    // The whole-row program stores almost every value right after computing
    // it (a later canonical row may hold it), so the `_st` forms end in the
    // `store_env` of the result; each body is its two instructions' bodies.
    guard_input2 GuardInput2(slot: u32, tag: Tag, reason: u32, slot2: u32, tag2: Tag, reason2: u32) => {
        if ld(fr.input_tags, slot as usize) != tag.0 { return Exit::Decline(reason); }
        if ld(fr.input_tags, slot2 as usize) != tag2.0 { return Exit::Decline(reason2); }
    }
    load_input_st LoadInputSt(dst: Reg, slot: u32, env: u32, tag: Tag) => { let v = ld(fr.inputs, slot as usize); r[dst] = v; put(fr, env, v, tag); }
    load_state_st LoadStateSt(dst: Reg, lane: u32, env: u32, tag: Tag) => { let v = ld(fr.state, lane as usize); r[dst] = v; put(fr, env, v, tag); }
    load_env_store_state LoadEnvStoreState(dst: Reg, slot: u32, lane: u32) => { let v = ld(fr.env, slot as usize); r[dst] = v; st(fr.state, lane as usize, v); }
    iadd_ck_st IaddCkSt(dst: Reg, a: Reg, b: Reg, site: Site, env: u32, tag: Tag) => { let v = ck!(i(r[a]).checked_add(i(r[b])), site); r[dst] = v; put(fr, env, v, tag); }
    iadd_ck_imm_st IaddCkImmSt(dst: Reg, a: Reg, imm: i64, site: Site, env: u32, tag: Tag) => { let v = ck!(i(r[a]).checked_add(imm), site); r[dst] = v; put(fr, env, v, tag); }
    isub_ck_st IsubCkSt(dst: Reg, a: Reg, b: Reg, site: Site, env: u32, tag: Tag) => { let v = ck!(i(r[a]).checked_sub(i(r[b])), site); r[dst] = v; put(fr, env, v, tag); }
    isub_ck_imm_st IsubCkImmSt(dst: Reg, a: Reg, imm: i64, site: Site, env: u32, tag: Tag) => { let v = ck!(i(r[a]).checked_sub(imm), site); r[dst] = v; put(fr, env, v, tag); }
    imul_ck_st ImulCkSt(dst: Reg, a: Reg, b: Reg, site: Site, env: u32, tag: Tag) => { let v = ck!(i(r[a]).checked_mul(i(r[b])), site); r[dst] = v; put(fr, env, v, tag); }
    imul_ck_imm_st ImulCkImmSt(dst: Reg, a: Reg, imm: i64, site: Site, env: u32, tag: Tag) => { let v = ck!(i(r[a]).checked_mul(imm), site); r[dst] = v; put(fr, env, v, tag); }
    select_st SelectSt(dst: Reg, c: Reg, a: Reg, b: Reg, env: u32, tag: Tag) => { let v = if r[c] != 0 { r[a] } else { r[b] }; r[dst] = v; put(fr, env, v, tag); }
    fadd_st FaddSt(dst: Reg, a: Reg, b: Reg, env: u32, tag: Tag) => { let v = fb(f(r[a]) + f(r[b])); r[dst] = v; put(fr, env, v, tag); }
    fsub_st FsubSt(dst: Reg, a: Reg, b: Reg, env: u32, tag: Tag) => { let v = fb(f(r[a]) - f(r[b])); r[dst] = v; put(fr, env, v, tag); }
    fmul_st FmulSt(dst: Reg, a: Reg, b: Reg, env: u32, tag: Tag) => { let v = fb(f(r[a]) * f(r[b])); r[dst] = v; put(fr, env, v, tag); }
    fdiv_st FdivSt(dst: Reg, a: Reg, b: Reg, env: u32, tag: Tag) => { let v = fb(f(r[a]) / f(r[b])); r[dst] = v; put(fr, env, v, tag); }
}
