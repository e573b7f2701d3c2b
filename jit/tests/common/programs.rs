//! A generator of random verified programs for differential tests: arithmetic (checked
//! and not), floats, comparisons, selects, guards, environment and state access, rings,
//! diamonds (one arm may trap or decline) and bounded loops with block parameters.
//!
//! A program is lowered deterministically from a list of [`Seed`]s: each seed picks an
//! instruction kind and its operands among the values already in scope, by index
//! modulo the number of values of the needed type. Values defined inside a diamond
//! arm or a loop body leave scope at its end, so every program satisfies dominance.

#![allow(dead_code)]

use proptest::prelude::*;
use scalar_ir::*;

pub const INPUTS: u32 = 3;
pub const ENV: u32 = 4;
pub const STATE: u32 = 6;

/// One generation decision.
#[derive(Clone, Debug)]
pub struct Seed {
    pub kind: u8,
    pub a: u32,
    pub b: u32,
    pub c: u32,
    pub imm: u64,
}

pub fn arb_seed() -> impl Strategy<Value = Seed> {
    (
        any::<u8>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
    )
        .prop_map(|(kind, a, b, c, imm)| Seed { kind, a, b, c, imm })
}

pub const INTS: [i64; 11] = [
    0,
    1,
    -1,
    2,
    -2,
    3,
    7,
    i64::MIN,
    i64::MAX,
    i64::MIN + 1,
    1 << 32,
];

pub const FLOATS: [u64; 18] = [
    0x0000_0000_0000_0000, // 0.0
    0x8000_0000_0000_0000, // -0.0
    0x3ff0_0000_0000_0000, // 1.0
    0xbff8_0000_0000_0000, // -1.5
    0x4004_0000_0000_0000, // 2.5
    0x7e37_e43c_8800_759c, // 1e300
    0x81a5_6e1f_c2f8_f359, // -1e-300
    0x0000_0000_0000_0001, // smallest subnormal
    0x7ff0_0000_0000_0000, // inf
    0xfff0_0000_0000_0000, // -inf
    0x7ff8_0000_0000_0000, // canonical NaN
    0x7ff8_0000_0000_0123, // NaN with a payload
    0xfff8_0000_0000_0000, // negative NaN
    0x7ff0_0000_0000_0001, // signalling NaN
    0x7fef_ffff_ffff_ffff, // f64::MAX
    0x4009_21fb_5444_2d18, // pi
    0x4341_c379_37e0_8000, // 1e16
    0xc3e0_0000_0000_0000, // -2^63
];

/// An interesting integer, or `imm` itself.
pub fn int_of(imm: u64) -> i64 {
    let k = (imm >> 56) as usize;
    if k < INTS.len() * 12 {
        INTS[k % INTS.len()]
    } else {
        imm as i64
    }
}

/// The bits of an interesting float, or `imm` itself.
pub fn float_of(imm: u64) -> u64 {
    let k = (imm >> 56) as usize;
    if k < FLOATS.len() * 12 {
        FLOATS[k % FLOATS.len()]
    } else {
        imm
    }
}

const TYPES: [Type; 3] = [Type::I64, Type::F64, Type::B1];

fn ti(ty: Type) -> usize {
    match ty {
        Type::I64 => 0,
        Type::F64 => 1,
        Type::B1 => 2,
    }
}

/// The type slot `slot` usually carries: i64, f64, b1, i64, …; one time in eight
/// (by `pick`) another type.
pub fn natural(slot: usize, pick: u64) -> Type {
    if pick.is_multiple_of(8) {
        TYPES[(pick / 8 % 3) as usize]
    } else {
        TYPES[slot % 3]
    }
}

/// A random slot value, usually of type `natural(slot, _)`.
pub fn arb_slot_for(slot: usize) -> impl Strategy<Value = Slot> {
    prop_oneof![
        8 => any::<u64>().prop_map(move |x| match TYPES[slot % 3] {
            Type::I64 => Slot::I64(int_of(x)),
            Type::F64 => Slot::F64(f64::from_bits(float_of(x))),
            Type::B1 => Slot::B1(x % 2 == 1),
        }),
        2 => arb_slot(),
    ]
}

/// A random row of inputs, usually of their natural types.
pub fn arb_inputs() -> impl Strategy<Value = Vec<Slot>> {
    (0..INPUTS as usize).map(arb_slot_for).collect::<Vec<_>>()
}

struct Gen<'s> {
    fb: FunctionBuilder,
    pools: [Vec<Value>; 3],
    sites: u32,
    seeds: &'s [Seed],
    pos: usize,
    depth: u32,
    /// The last value pushed to a ring, with its type.
    last_push: Option<(Type, Value)>,
}

impl Gen<'_> {
    fn next(&mut self) -> Option<Seed> {
        let s = self.seeds.get(self.pos).cloned();
        self.pos += 1;
        s
    }

    fn pick(&self, ty: Type, idx: u64) -> Value {
        let p = &self.pools[ti(ty)];
        p[(idx % p.len() as u64) as usize]
    }

    fn push(&mut self, v: Value) {
        let ty = self.fb.program().value_type(v).expect("typed value");
        self.pools[ti(ty)].push(v);
        // Every fourth value is stored as soon as it is made, as a whole-row
        // program stores its nodes: the quickened tier merges such pairs into
        // superinstructions, which the comparisons must reach. (The slot
        // comes from the value's number, so the seeds still mean what they did.)
        if v.index() % 4 == 1 {
            self.fb.store_env(ty, (v.index() as u32 / 4) % ENV, v);
        }
    }

    fn site(&mut self) -> u32 {
        self.sites += 1;
        self.sites - 1
    }

    fn scope(&self) -> [usize; 3] {
        [
            self.pools[0].len(),
            self.pools[1].len(),
            self.pools[2].len(),
        ]
    }

    fn restore(&mut self, s: [usize; 3]) {
        for (p, n) in self.pools.iter_mut().zip(s) {
            p.truncate(n);
        }
    }

    fn fconst_bits(&mut self, bits: u64) -> Value {
        let inst = self.fb.ins(InstData::Fconst(bits));
        self.fb.program().result(inst).expect("fconst has a result")
    }

    /// Lowers up to `n` seeds into the current block (which stays current).
    fn steps(&mut self, n: usize) {
        for _ in 0..n {
            let Some(s) = self.next() else { return };
            self.step(s);
        }
    }

    fn step(&mut self, s: Seed) {
        let (a, b, c, imm) = (s.a as u64, s.b as u64, s.c as u64, s.imm);
        match s.kind % 16 {
            0 => {
                let v = self.fb.iconst(int_of(imm));
                self.push(v);
            }
            1 => {
                let v = self.fconst_bits(float_of(imm));
                self.push(v);
            }
            2 => {
                let op = BinOp::ALL[(a % BinOp::ALL.len() as u64) as usize];
                let tys = op.operand_types();
                let (x, y) = (self.pick(tys[0], b), self.pick(tys[1], c));
                let v = self.fb.binary(op, x, y);
                self.push(v);
            }
            3 => {
                let op = UnOp::ALL[(a % UnOp::ALL.len() as u64) as usize];
                let x = self.pick(op.operand_types()[0], b);
                let v = self.fb.unary(op, x);
                self.push(v);
            }
            4 | 5 => {
                let op = CkBinOp::ALL[(a % CkBinOp::ALL.len() as u64) as usize];
                let (x, y) = (self.pick(Type::I64, b), self.pick(Type::I64, c));
                let site = self.site();
                let v = self.fb.binary_ck(op, x, y, site);
                self.push(v);
            }
            6 => {
                let x = self.pick(Type::I64, b);
                let site = self.site();
                let v = if a % 2 == 0 {
                    self.fb.ineg_ck(x, site)
                } else {
                    self.fb.iabs_ck(x, site)
                };
                self.push(v);
            }
            7 => {
                let kind = [CmpKind::Icmp, CmpKind::Fcmp, CmpKind::Bcmp][(a % 3) as usize];
                let cond = Cond::ALL[(b % 6) as usize];
                let ty = kind.operand_type();
                let (x, y) = (self.pick(ty, c), self.pick(ty, imm));
                let v = self.fb.cmp(kind, cond, x, y);
                self.push(v);
            }
            8 => {
                let ty = TYPES[(a % 3) as usize];
                let cv = self.pick(Type::B1, b);
                let (x, y) = (self.pick(ty, c), self.pick(ty, imm));
                let v = self.fb.select(ty, cv, x, y);
                self.push(v);
            }
            9 => {
                let ty = TYPES[(a % 3) as usize];
                let lane = (b % STATE as u64) as u32;
                if c % 2 == 0 {
                    let v = self.fb.load_state(ty, lane);
                    self.push(v);
                } else {
                    let v = self.pick(ty, imm);
                    self.fb.store_state(ty, lane, v);
                }
            }
            10 => {
                let ty = TYPES[(a % 3) as usize];
                let len = 1 + (b % 4) as u32;
                let base = (c % (STATE - len + 1) as u64) as u32;
                if imm % 2 == 0 {
                    let v = self.fb.ring_load(ty, base, len);
                    self.push(v);
                } else {
                    let v = self.pick(ty, imm >> 1);
                    self.fb.ring_store(ty, base, len, v);
                    // (At the top level only: a value of an arm does not
                    // reach the program's end.)
                    if self.depth == 0 {
                        self.last_push = Some((ty, v));
                    }
                }
            }
            11 => {
                let slot = (b % ENV as u64) as u32;
                let ty = natural(slot as usize, a);
                match c % 3 {
                    0 => {
                        self.fb.guard_env(slot, ty, 100 + slot);
                        let v = self.fb.load_env(ty, slot);
                        self.push(v);
                    }
                    1 => {
                        let v = self.fb.load_env(ty, slot);
                        // Sometimes straight into a state lane, as a whole-row
                        // program pushes a stream's ring from its slot.
                        if imm % 2 == 0 {
                            self.fb.store_state(ty, (imm / 2 % STATE as u64) as u32, v);
                        }
                        self.push(v);
                    }
                    _ => {
                        let v = self.pick(ty, imm);
                        self.fb.store_env(ty, slot, v);
                    }
                }
            }
            12 => {
                // Mostly the slot's natural type (which `arb_frame` favours), so that
                // most guards pass and the code after them runs.
                let slot = (b % INPUTS as u64) as u32;
                let ty = natural(slot as usize, a);
                self.fb.guard_input(slot, ty, 200 + slot);
                // Sometimes a second guard, as a whole-row program checks
                // every input before it loads any.
                if imm % 4 == 0 {
                    let other = (slot + 1) % INPUTS;
                    self.fb
                        .guard_input(other, natural(other as usize, imm / 4), 200 + other);
                }
                let v = self.fb.load_input(ty, slot);
                self.push(v);
            }
            13 if self.depth < 2 => self.diamond(s),
            14 if self.depth < 2 => self.counted_loop(s),
            _ => {
                let v = self.fb.iconst(int_of(imm));
                self.push(v);
            }
        }
    }

    /// `brif c, then, else`; both arms compute, the then arm may instead trap or
    /// decline; the join block takes one parameter.
    fn diamond(&mut self, s: Seed) {
        let ty = TYPES[(s.a % 3) as usize];
        let cond = self.pick(Type::B1, s.b as u64);
        let (t, e, j) = (
            self.fb.create_block(),
            self.fb.create_block(),
            self.fb.create_block(),
        );
        let param = self.fb.append_block_param(j, ty);
        self.fb.brif(cond, t, &[], e, &[]);
        self.depth += 1;
        let scope = self.scope();
        self.fb.switch_to_block(t);
        self.steps(1 + (s.c % 4) as usize);
        match s.imm % 8 {
            0 => {
                let site = self.site();
                let kind = if s.imm.is_multiple_of(16) {
                    TrapKind::Overflow
                } else {
                    TrapKind::DivByZero
                };
                self.fb.trap(kind, site);
            }
            1 => {
                self.fb.decline(300 + (s.imm % 5) as u32);
            }
            _ => {
                let v = self.pick(ty, s.imm >> 3);
                self.fb.jump(j, &[v]);
            }
        }
        self.restore(scope);
        self.fb.switch_to_block(e);
        self.steps(1 + ((s.c >> 8) % 4) as usize);
        let v = self.pick(ty, s.imm >> 13);
        self.fb.jump(j, &[v]);
        self.restore(scope);
        self.depth -= 1;
        self.fb.switch_to_block(j);
        self.push(param);
    }

    /// `for i in (0..=clamp(x, 0, 6)).rev()` accumulating a checked sum, with the
    /// induction variable and accumulator as block parameters and the exit edge
    /// passing an argument (which exercises edge moves).
    fn counted_loop(&mut self, s: Seed) {
        let x = self.pick(Type::I64, s.a as u64);
        let acc0 = self.pick(Type::I64, s.b as u64);
        let (zero, six) = (self.fb.iconst(0), self.fb.iconst(6));
        let lo = self.fb.imax(x, zero);
        let n = self.fb.imin(lo, six);
        let (head, body, exit) = (
            self.fb.create_block(),
            self.fb.create_block(),
            self.fb.create_block(),
        );
        let i = self.fb.append_block_param(head, Type::I64);
        let acc = self.fb.append_block_param(head, Type::I64);
        let out = self.fb.append_block_param(exit, Type::I64);
        self.fb.jump(head, &[n, acc0]);
        self.fb.switch_to_block(head);
        let done = self.fb.icmp(Cond::Le, i, zero);
        self.fb.brif(done, exit, &[acc], body, &[]);
        self.depth += 1;
        let scope = self.scope();
        self.fb.switch_to_block(body);
        self.pools[0].push(i);
        self.pools[0].push(acc);
        self.steps(1 + (s.c % 3) as usize);
        let add = self.pick(Type::I64, s.imm);
        let site = self.site();
        let acc2 = self.fb.binary_ck(CkBinOp::IaddCk, acc, add, site);
        let one = self.fb.iconst(1);
        let site = self.site();
        let i2 = self.fb.binary_ck(CkBinOp::IsubCk, i, one, site);
        self.fb.jump(head, &[i2, acc2]);
        self.restore(scope);
        self.depth -= 1;
        self.fb.switch_to_block(exit);
        self.push(out);
    }
}

/// Lowers seeds into a program over `INPUTS`/`ENV`/`STATE`; `end` picks the final
/// terminator (mostly `return`).
pub fn program(seeds: &[Seed], end: u8) -> Program {
    let decl = Decl {
        inputs: INPUTS,
        env: ENV,
        state: STATE,
        sites: 0,
        windows: 0,
    };
    let mut fb = FunctionBuilder::new(decl);
    let entry = fb.create_block();
    fb.switch_to_block(entry);
    // Every pool starts non-empty: one unguarded input load per type (raw lane bits,
    // whatever the tag says) plus a constant.
    let i = fb.load_input(Type::I64, 0);
    let f = fb.load_input(Type::F64, 1);
    let b = fb.load_input(Type::B1, 2);
    let one = fb.iconst(1);
    let half = fb.fconst(0.5);
    let t = fb.bconst(true);
    let mut g = Gen {
        fb,
        pools: [vec![i, one], vec![f, half], vec![b, t]],
        sites: 0,
        seeds,
        pos: 0,
        depth: 0,
        last_push: None,
    };
    g.steps(seeds.len());
    // Publish a value of each type, so results are observable in the environment.
    for (slot, ty) in [Type::I64, Type::F64, Type::B1, Type::I64]
        .into_iter()
        .enumerate()
    {
        let p = &g.pools[ti(ty)];
        let mut v = p[p.len() - 1 - (slot / 3).min(p.len() - 1)];
        // Sometimes the last slot publishes the first's value, or a slot the
        // last ring push of its type, as a whole-row program stores one
        // value as two nodes and a stream's node is its ring's push (a batch
        // kernel then carries them in one register: `carried_sharing`).
        match (end % 4, g.last_push) {
            (2, _) if slot == 3 => v = p[p.len() - 1],
            (3, Some((t, pushed))) if t == ty => v = pushed,
            _ => {}
        }
        g.fb.store_env(ty, slot as u32, v);
    }
    match end % 16 {
        0 => {
            g.fb.decline(7);
        }
        1 => {
            let site = g.site();
            g.fb.trap(TrapKind::Overflow, site);
        }
        _ => {
            g.fb.ret();
        }
    }
    let sites = g.sites;
    let mut prog = g.fb.finish();
    prog.decl.sites = sites.max(1);
    prog
}

/// A random slot value for an input or environment slot.
pub fn arb_slot() -> impl Strategy<Value = Slot> {
    prop_oneof![
        3 => any::<u64>().prop_map(|x| Slot::I64(int_of(x))),
        3 => any::<u64>().prop_map(|x| Slot::F64(f64::from_bits(float_of(x)))),
        2 => any::<bool>().prop_map(Slot::B1),
        1 => Just(Slot::Absent),
        1 => Just(Slot::Deferred),
    ]
}

/// Random raw state lane bits: integers, floats and booleans.
pub fn arb_lane() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>().prop_map(|x| int_of(x) as u64),
        any::<u64>().prop_map(float_of),
        (0u64..2),
    ]
}

/// Random step numbers, including ones near `u64::MAX` (ring addressing wraps there).
pub fn arb_step() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..20, any::<u64>(), (u64::MAX - 8)..=u64::MAX]
}

/// A random starting frame for the generated programs.
pub fn arb_frame() -> impl Strategy<Value = FrameBuffers> {
    (
        arb_inputs(),
        (0..ENV as usize).map(arb_slot_for).collect::<Vec<_>>(),
        prop::collection::vec(arb_lane(), STATE as usize),
        arb_step(),
    )
        .prop_map(|(inputs, env, state, step)| {
            let decl = Decl {
                inputs: INPUTS,
                env: ENV,
                state: STATE,
                sites: 0,
                windows: 0,
            };
            let mut fb = FrameBuffers::new(&decl);
            for (i, s) in inputs.into_iter().enumerate() {
                fb.set_input(i, s);
            }
            for (i, s) in env.into_iter().enumerate() {
                fb.set_env(i, s);
            }
            fb.state = state;
            fb.step = step;
            fb
        })
}
