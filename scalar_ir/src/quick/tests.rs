//! Unit tests for the quickened interpreter: opcode semantics against Rust, superinstruction
//! selection, the disassembly, block-parameter moves, and a differential property test.

use super::*;
use crate::builder::FunctionBuilder;
use crate::frame::{Slot, tag};
use crate::ir::*;
use expect_test::expect;
use proptest::prelude::*;

fn decl(inputs: u32, env: u32, state: u32, sites: u32) -> Decl {
    Decl {
        inputs,
        env,
        state,
        sites,
        windows: 0,
    }
}

fn slot_of(ty: Type, bits: u64) -> Slot {
    Slot::decode(crate::frame::tag_of(ty), bits)
}

/// Runs `op` on two inputs, both as registers and (for integers) with the second as a
/// constant, and checks that both selections agree. Returns the exit and the env lane.
fn run_bin(
    make: impl Fn(&mut FunctionBuilder, Value, Value) -> Value,
    ty_in: Type,
    ty_out: Type,
    a: u64,
    b: u64,
) -> (Exit, u64) {
    let mut results = Vec::new();
    for const_rhs in [false, true] {
        let mut fb = FunctionBuilder::new(decl(2, 1, 0, 1));
        let b0 = fb.create_block();
        fb.switch_to_block(b0);
        fb.guard_input(0, ty_in, 1);
        let x = fb.load_input(ty_in, 0);
        let y = if const_rhs {
            match ty_in {
                Type::I64 => fb.iconst(b as i64),
                Type::F64 => fb.fconst(f64::from_bits(b)),
                Type::B1 => fb.bconst(b != 0),
            }
        } else {
            fb.guard_input(1, ty_in, 2);
            fb.load_input(ty_in, 1)
        };
        let z = make(&mut fb, x, y);
        fb.store_env(ty_out, 0, z);
        fb.ret();
        let prog = fb.finish();
        let mut code = QuickCode::compile(&prog).expect("test program verifies");
        let mut frame = FrameBuffers::new(&prog.decl);
        frame.set_input(0, slot_of(ty_in, a));
        frame.set_input(1, slot_of(ty_in, b));
        frame.env_tags[0] = tag::ABSENT;
        let exit = code.run(&mut frame);
        assert_eq!(frame.exit(), Some(exit));
        if exit == Exit::Return {
            assert_eq!(frame.env_tags[0], crate::frame::tag_of(ty_out));
        } else {
            assert_eq!(frame.env_tags[0], tag::ABSENT, "no store happens on a trap");
        }
        results.push((exit, frame.env[0]));
    }
    assert_eq!(
        results[0], results[1],
        "register and constant forms disagree"
    );
    results[0]
}

const INTS: &[i64] = &[
    0,
    1,
    -1,
    2,
    -7,
    7,
    3,
    i64::MIN,
    i64::MAX,
    i64::MIN + 1,
    1 << 32,
];
const FLOATS: &[f64] = &[
    0.0,
    -0.0,
    1.5,
    -2.25,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e308,
    f64::MIN_POSITIVE,
    3.0,
];

#[test]
fn checked_binops_match_rust() {
    for &op in CkBinOp::ALL {
        for &a in INTS {
            for &b in INTS {
                let (exit, out) = run_bin(
                    |fb, x, y| fb.binary_ck(op, x, y, 0),
                    Type::I64,
                    Type::I64,
                    a as u64,
                    b as u64,
                );
                let want = match op {
                    CkBinOp::IaddCk => a.checked_add(b).ok_or(TrapKind::Overflow),
                    CkBinOp::IsubCk => a.checked_sub(b).ok_or(TrapKind::Overflow),
                    CkBinOp::ImulCk => a.checked_mul(b).ok_or(TrapKind::Overflow),
                    CkBinOp::IdivCk if b == 0 => Err(TrapKind::DivByZero),
                    CkBinOp::IremCk if b == 0 => Err(TrapKind::DivByZero),
                    CkBinOp::IdivCk => a.checked_div(b).ok_or(TrapKind::Overflow),
                    CkBinOp::IremCk => a.checked_rem(b).ok_or(TrapKind::Overflow),
                };
                match want {
                    Ok(v) => assert_eq!((exit, out as i64), (Exit::Return, v), "{op:?} {a} {b}"),
                    Err(k) => assert_eq!(exit, Exit::Trap(k, 0), "{op:?} {a} {b}"),
                }
            }
        }
    }
}

#[test]
fn checked_edge_cases() {
    let div = |a: i64, b: i64| {
        run_bin(
            |fb, x, y| fb.idiv_ck(x, y, 0),
            Type::I64,
            Type::I64,
            a as u64,
            b as u64,
        )
    };
    let rem = |a: i64, b: i64| {
        run_bin(
            |fb, x, y| fb.irem_ck(x, y, 0),
            Type::I64,
            Type::I64,
            a as u64,
            b as u64,
        )
    };
    assert_eq!(div(i64::MIN, -1).0, Exit::Trap(TrapKind::Overflow, 0));
    assert_eq!(rem(i64::MIN, -1).0, Exit::Trap(TrapKind::Overflow, 0));
    assert_eq!(div(5, 0).0, Exit::Trap(TrapKind::DivByZero, 0));
    assert_eq!(rem(0, 0).0, Exit::Trap(TrapKind::DivByZero, 0));
    assert_eq!(div(-7, 2), (Exit::Return, (-3i64) as u64));
    assert_eq!(rem(-7, 2), (Exit::Return, (-1i64) as u64));
    assert_eq!(rem(7, -2), (Exit::Return, 1));
}

#[test]
fn checked_unops_match_rust() {
    for &op in CkUnOp::ALL {
        for &a in INTS {
            let (exit, out) = run_bin(
                |fb, x, _| fb.ins_unary_ck(op, x),
                Type::I64,
                Type::I64,
                a as u64,
                0,
            );
            let want = match op {
                CkUnOp::InegCk => a.checked_neg(),
                CkUnOp::IabsCk => a.checked_abs(),
            };
            match want {
                Some(v) => assert_eq!((exit, out as i64), (Exit::Return, v)),
                None => assert_eq!(exit, Exit::Trap(TrapKind::Overflow, 0)),
            }
        }
    }
}

trait UnaryCkExt {
    fn ins_unary_ck(&mut self, op: CkUnOp, a: Value) -> Value;
}

impl UnaryCkExt for FunctionBuilder {
    fn ins_unary_ck(&mut self, op: CkUnOp, a: Value) -> Value {
        match op {
            CkUnOp::InegCk => self.ineg_ck(a, 0),
            CkUnOp::IabsCk => self.iabs_ck(a, 0),
        }
    }
}

fn same_float(got: u64, want: f64) -> bool {
    got == want.to_bits() || (want.is_nan() && f64::from_bits(got).is_nan())
}

#[test]
fn float_binops_match_rust() {
    for &op in BinOp::ALL {
        let ty = op.operand_types()[0];
        let samples: Vec<u64> = match ty {
            Type::I64 => INTS.iter().map(|&v| v as u64).collect(),
            Type::F64 => FLOATS.iter().map(|v| v.to_bits()).collect(),
            Type::B1 => vec![0, 1],
        };
        for &a in &samples {
            for &b in &samples {
                let (exit, out) =
                    run_bin(|fb, x, y| fb.binary(op, x, y), ty, op.result_type(), a, b);
                assert_eq!(exit, Exit::Return);
                let (fa, fb_) = (f64::from_bits(a), f64::from_bits(b));
                let (ia, ib) = (a as i64, b as i64);
                let ok = match op {
                    BinOp::Imin => out as i64 == ia.min(ib),
                    BinOp::Imax => out as i64 == ia.max(ib),
                    BinOp::Fadd => same_float(out, fa + fb_),
                    BinOp::Fsub => same_float(out, fa - fb_),
                    BinOp::Fmul => same_float(out, fa * fb_),
                    BinOp::Fdiv => same_float(out, fa / fb_),
                    BinOp::Frem => same_float(out, fa % fb_),
                    BinOp::Fmin => same_float(out, fa.min(fb_)),
                    BinOp::Fmax => same_float(out, fa.max(fb_)),
                    BinOp::Band => out == ((a != 0 && b != 0) as u64),
                    BinOp::Bor => out == ((a != 0 || b != 0) as u64),
                    BinOp::Bxor => out == (((a != 0) ^ (b != 0)) as u64),
                };
                assert!(ok, "{op:?} {a:#x} {b:#x} -> {out:#x}");
            }
        }
    }
    // min/max with one NaN operand return the other operand, as f64::min/max do.
    let min = run_bin(
        |fb, x, y| fb.fmin(x, y),
        Type::F64,
        Type::F64,
        f64::NAN.to_bits(),
        2.0f64.to_bits(),
    );
    assert_eq!(min.1, 2.0f64.to_bits());
    let max = run_bin(
        |fb, x, y| fb.fmax(x, y),
        Type::F64,
        Type::F64,
        1.0f64.to_bits(),
        f64::NAN.to_bits(),
    );
    assert_eq!(max.1, 1.0f64.to_bits());
}

#[test]
fn unops_match_rust() {
    for &op in UnOp::ALL {
        let ty = op.operand_types()[0];
        let samples: Vec<u64> = match ty {
            Type::I64 => INTS.iter().map(|&v| v as u64).collect(),
            Type::F64 => FLOATS.iter().map(|v| v.to_bits()).collect(),
            Type::B1 => vec![0, 1],
        };
        for &a in &samples {
            let (exit, out) = run_bin(|fb, x, _| fb.unary(op, x), ty, op.result_type(), a, a);
            assert_eq!(exit, Exit::Return);
            let fa = f64::from_bits(a);
            let ok = match op {
                UnOp::Fneg => out == (-fa).to_bits(),
                UnOp::Fabs => out == fa.abs().to_bits(),
                UnOp::Fsqrt => same_float(out, fa.sqrt()),
                UnOp::Ffloor => same_float(out, fa.floor()),
                UnOp::Fceil => same_float(out, fa.ceil()),
                UnOp::Fsin => same_float(out, fa.sin()),
                UnOp::Fcos => same_float(out, fa.cos()),
                UnOp::Ftan => same_float(out, fa.tan()),
                UnOp::FcvtFromI64 => out == (a as i64 as f64).to_bits(),
                UnOp::Bnot => out == (a == 0) as u64,
            };
            assert!(ok, "{op:?} {a:#x} -> {out:#x}");
        }
    }
}

#[test]
fn comparisons_match_rust_including_nan() {
    for cond in Cond::ALL {
        for &a in INTS {
            for &b in INTS {
                let (_, out) = run_bin(
                    |fb, x, y| fb.icmp(cond, x, y),
                    Type::I64,
                    Type::B1,
                    a as u64,
                    b as u64,
                );
                assert_eq!(out != 0, cond.eval(a, b), "icmp {cond:?} {a} {b}");
            }
        }
        for &a in FLOATS {
            for &b in FLOATS {
                let (_, out) = run_bin(
                    |fb, x, y| fb.fcmp(cond, x, y),
                    Type::F64,
                    Type::B1,
                    a.to_bits(),
                    b.to_bits(),
                );
                assert_eq!(out != 0, cond.eval(a, b), "fcmp {cond:?} {a} {b}");
            }
        }
        for a in [false, true] {
            for b in [false, true] {
                let (_, out) = run_bin(
                    |fb, x, y| fb.bcmp(cond, x, y),
                    Type::B1,
                    Type::B1,
                    a as u64,
                    b as u64,
                );
                assert_eq!(out != 0, cond.eval(a, b), "bcmp {cond:?} {a} {b}");
            }
        }
    }
    // The IEEE cases spelled out.
    let nan = f64::NAN.to_bits();
    let f = |cond, a, b| run_bin(|fb, x, y| fb.fcmp(cond, x, y), Type::F64, Type::B1, a, b).1;
    assert_eq!(f(Cond::Eq, nan, nan), 0);
    assert_eq!(f(Cond::Ne, nan, nan), 1);
    assert_eq!(f(Cond::Lt, nan, 0), 0);
    assert_eq!(f(Cond::Ge, nan, 0), 0);
    assert_eq!(f(Cond::Eq, 0, (-0.0f64).to_bits()), 1);
}

#[test]
fn select_and_guards() {
    let mut fb = FunctionBuilder::new(decl(2, 2, 0, 0));
    let b0 = fb.create_block();
    fb.switch_to_block(b0);
    fb.guard_input(0, Type::B1, 7);
    let c = fb.load_input(Type::B1, 0);
    fb.guard_env(0, Type::F64, 8);
    let x = fb.load_env(Type::F64, 0);
    let y = fb.fconst(-1.0);
    let s = fb.select(Type::F64, c, x, y);
    fb.store_env(Type::F64, 1, s);
    fb.ret();
    let prog = fb.finish();
    let mut code = QuickCode::compile(&prog).unwrap();
    let mut f = FrameBuffers::new(&prog.decl);
    assert_eq!(code.run(&mut f), Exit::Decline(7));
    f.set_input(0, Slot::I64(1));
    assert_eq!(code.run(&mut f), Exit::Decline(7), "wrong type declines");
    f.set_input(0, Slot::B1(true));
    assert_eq!(code.run(&mut f), Exit::Decline(8));
    f.set_env(0, Slot::F64(4.5));
    assert_eq!(code.run(&mut f), Exit::Return);
    assert_eq!(f.env(1), Slot::F64(4.5));
    f.set_input(0, Slot::B1(false));
    assert_eq!(code.run(&mut f), Exit::Return);
    assert_eq!(f.env(1), Slot::F64(-1.0));
}

/// `sum = 1 + 2 + … + n` by a loop whose parameters (a, b) swap on every iteration,
/// which exercises parallel moves through the scratch registers.
fn loop_program_swapping() -> Program {
    let mut fb = FunctionBuilder::new(decl(1, 1, 0, 2));
    let entry = fb.create_block();
    let head = fb.create_block();
    let body = fb.create_block();
    let exit = fb.create_block();
    let i = fb.append_block_param(head, Type::I64);
    let a = fb.append_block_param(head, Type::I64);
    let b = fb.append_block_param(head, Type::I64);
    let result = fb.append_block_param(exit, Type::I64);
    fb.switch_to_block(entry);
    fb.guard_input(0, Type::I64, 0);
    let n = fb.load_input(Type::I64, 0);
    let zero = fb.iconst(0);
    let one = fb.iconst(1);
    fb.jump(head, &[n, zero, zero]);
    fb.switch_to_block(head);
    let more = fb.icmp(Cond::Gt, i, zero);
    let total = fb.iadd_ck(a, b, 0);
    fb.brif(more, body, &[], exit, &[total]);
    fb.switch_to_block(body);
    let b2 = fb.iadd_ck(b, i, 0);
    let i2 = fb.isub_ck(i, one, 1);
    // Swap: the new `a` is the old `b` plus i, the new `b` is the old `a`.
    fb.jump(head, &[i2, b2, a]);
    fb.switch_to_block(exit);
    fb.store_env(Type::I64, 0, result);
    fb.ret();
    fb.finish()
}

#[test]
fn loops_with_block_params() {
    let prog = loop_program_swapping();
    let mut code = QuickCode::compile(&prog).unwrap();
    let mut f = FrameBuffers::new(&prog.decl);
    for n in [0i64, 1, 2, 5, 100] {
        f.set_input(0, Slot::I64(n));
        assert_eq!(code.run(&mut f), Exit::Return);
        assert_eq!(f.env(0), Slot::I64(n * (n + 1) / 2), "n = {n}");
    }
    f.set_input(0, Slot::I64(i64::MAX));
    assert_eq!(code.run(&mut f), Exit::Trap(TrapKind::Overflow, 0));
}

#[test]
fn rings_address_by_step() {
    // out = x[2] with a ring of length 2: read the oldest entry, then overwrite it.
    let prog = crate::text::parse(
        "program inputs=1 env=1 state=2 sites=0
block0:
    v0 = load_input.i64 0
    v1 = ring_load.i64 0, 2
    store_env.i64 0, v1
    ring_store.i64 0, 2, v0
    return
",
    )
    .unwrap();
    let mut code = QuickCode::compile(&prog).unwrap();
    let mut f = FrameBuffers::new(&prog.decl);
    let mut seen = Vec::new();
    for step in 0..6u64 {
        f.step = step;
        f.set_input(0, Slot::I64(10 + step as i64));
        assert_eq!(code.run(&mut f), Exit::Return);
        seen.push(f.env(0));
    }
    let want: Vec<Slot> = [0, 0, 10, 11, 12, 13]
        .iter()
        .map(|&v| Slot::I64(v))
        .collect();
    assert_eq!(seen, want);
}

#[test]
fn batch_matches_a_per_row_loop() {
    // A running sum in state, a ring x[1], and a guard that declines on absent input,
    // so the batch stops at row 4; out = sum + x[1].
    let prog = crate::text::parse(
        "program inputs=2 env=2 state=2 sites=1
block0:
    guard_input 1, i64, 9
    v0 = load_input.i64 1
    v1 = load_state.i64 0
    v2 = iadd_ck v1, v0, site0
    store_state.i64 0, v2
    v3 = ring_load.i64 1, 1
    ring_store.i64 1, 1, v0
    v4 = iadd_ck v2, v3, site0
    store_env.i64 1, v4
    return
",
    )
    .unwrap();
    let rows = 6;
    let mut batch = BatchBuffers::new(&prog.decl, rows, vec![1, 0]);
    for r in 0..rows {
        let x = if r == 4 {
            Slot::Absent
        } else {
            Slot::I64(r as i64 * 3)
        };
        batch.set_input(r, 1, x);
    }
    let start = |fb: &mut FrameBuffers| {
        fb.step = 7;
        fb.set_env(0, Slot::F64(0.5));
    };
    // Reference: the per-row loop on one set of buffers.
    let mut code = QuickCode::compile(&prog).unwrap();
    let mut want = FrameBuffers::new(&prog.decl);
    start(&mut want);
    let mut want_out = Vec::new();
    let mut want_exit = Exit::Return;
    for r in 0..rows {
        want.set_input(1, batch.input_at(r, 1));
        want_exit = code.run(&mut want);
        if want_exit != Exit::Return {
            break;
        }
        want_out.push((want.env(1), want.env(0)));
        want.step += 1;
    }
    assert_eq!(want_exit, Exit::Decline(9));
    assert_eq!(want_out.len(), 4);

    let mut fb = FrameBuffers::new(&prog.decl);
    start(&mut fb);
    let exit = code.run_batch(&mut fb, &mut batch);
    assert_eq!(exit, want_exit);
    assert_eq!(batch.done, 4);
    let got: Vec<_> = (0..4)
        .map(|r| (batch.output(r, 0), batch.output(r, 1)))
        .collect();
    assert_eq!(got, want_out);
    assert_eq!(
        (&fb.env, &fb.env_tags, &fb.state),
        (&want.env, &want.env_tags, &want.state)
    );
    assert_eq!((fb.step, fb.status), (want.step, want.status));

    // The raw-frame loop agrees with the safe one.
    let mut fb2 = FrameBuffers::new(&prog.decl);
    start(&mut fb2);
    let mut batch2 = batch.clone();
    batch2.out_lanes.fill(0);
    batch2.out_tags.fill(0);
    let mut bf = batch2.frame(&mut fb2);
    // SAFETY: the frame was built from buffers that fit the program.
    let exit2 = unsafe { code.run_batch_frame(&mut bf) };
    batch2.finish(&bf, &mut fb2);
    assert_eq!(exit2, exit);
    assert_eq!(batch2, batch);
    assert_eq!(fb2, fb);

    // An empty batch returns and changes nothing.
    let mut empty = BatchBuffers::new(&prog.decl, 0, vec![]);
    assert_eq!(code.run_batch(&mut fb, &mut empty), Exit::Return);
    assert_eq!(fb.step, want.step);
}

#[test]
fn raw_frame_runs_like_buffers() {
    let prog = counter_program();
    let mut code = QuickCode::compile(&prog).unwrap();
    let mut f = FrameBuffers::new(&prog.decl);
    for _ in 0..3 {
        let mut frame = f.frame();
        // SAFETY: the frame points into `f`, sized for the program.
        let exit = unsafe { code.run_frame(&mut frame) };
        assert_eq!(exit, Exit::Return);
        assert_eq!(frame.status, 0);
    }
    assert_eq!(f.state_i64(0), 3);
    assert_eq!(f.env(0), Slot::I64(3));
}

/// `count = count[1] + 1` kept in state lane 0 and published to env slot 0.
pub(crate) fn counter_program() -> Program {
    crate::text::parse(
        "program inputs=0 env=1 state=1 sites=1
block0:
    v0 = load_state.i64 0
    v2 = iconst 1
    v1 = iadd_ck v0, v2, site0
    store_state.i64 0, v1
    store_env.i64 0, v1
    return
",
    )
    .expect("the counter program parses")
}

#[test]
fn superinstructions_are_selected() {
    let prog = crate::text::parse(
        "program inputs=2 env=2 state=0 sites=3
block0:
    guard_input 0, i64, 1
    v0 = load_input.i64 0
    v1 = iconst 5
    v2 = iadd_ck v1, v0, site0
    v3 = isub_ck v2, v1, site1
    v4 = imul_ck v3, v1, site2
    v5 = icmp.lt v1, v4
    brif v5, block1, block2
block1:
    store_env.i64 0, v4
    return
block2:
    v6 = load_input.f64 1
    v7 = fcmp.ne v6, v6
    store_env.b1 1, v7
    decline 9
",
    )
    .unwrap();
    let code = QuickCode::compile(&prog).unwrap();
    let opcodes: Vec<Opcode> = code.code().ops.iter().map(Op::opcode).collect();
    assert_eq!(
        opcodes,
        vec![
            Opcode::LoadInputGuarded,
            Opcode::IaddCkImm,
            Opcode::IsubCkImm,
            Opcode::ImulCkImm,
            Opcode::BrIcmpGtImm,
            Opcode::StoreEnv,
            Opcode::Ret,
            Opcode::LoadInput,
            Opcode::FcmpNe,
            Opcode::StoreEnv,
            Opcode::Decline,
        ]
    );
    expect![[r#"
        regs 8
        const r1 = 0x5
           0: load_input_guarded r0, 0, i64, 1
           1: iadd_ck_imm r2, r0, 5, site0
           2: isub_ck_imm r3, r2, 5, site1
           3: imul_ck_imm r4, r3, 5, site2
           4: br_icmp_gt_imm r4, 5, @5, @7
           5: store_env 0, r4, i64
           6: ret
           7: load_input r6, 1
           8: fcmp_ne r7, r6, r6
           9: store_env 1, r7, b1
          10: decline 9
    "#]]
    .assert_eq(&code.disasm());
}

/// The pair pass merges an operation with the store of its result and two
/// guards, but never across a branch target (the loop's header begins with a
/// store of a value made just before it), and it renumbers the branches.
#[test]
fn pairs_merge_except_across_branch_targets() {
    let prog = crate::text::parse(
        "program inputs=2 env=2 state=0 sites=1
block0:
    guard_input 0, i64, 1
    guard_input 1, b1, 2
    v0 = load_input.i64 0
    store_env.i64 1, v0
    v1 = iadd_ck v0, v0, site0
    jump block1
block1:
    store_env.i64 0, v1
    v2 = load_input.b1 1
    brif v2, block1, block2
block2:
    return
",
    )
    .unwrap();
    let mut code = QuickCode::compile(&prog).unwrap();
    expect![[r#"
        regs 3
           0: guard_input2 0, i64, 1, 1, b1, 2
           1: load_input_st r0, 0, 1, i64
           2: iadd_ck r1, r0, r0, site0
           3: store_env 0, r1, i64
           4: load_input r2, 1
           5: brif r2, @3, @6
           6: ret
    "#]]
    .assert_eq(&code.disasm());
    let mut fb = FrameBuffers::new(&prog.decl);
    fb.set_input(0, Slot::I64(3));
    fb.set_input(1, Slot::B1(false));
    assert_eq!(code.run(&mut fb), Exit::Return);
    assert_eq!((fb.env(0), fb.env(1)), (Slot::I64(6), Slot::I64(3)));
    // The second guard of the pair still declines with its own reason.
    fb.set_input(1, Slot::I64(0));
    assert_eq!(code.run(&mut fb), Exit::Decline(2));
}

#[test]
fn disassembly_of_loop_shows_moves() {
    let code = QuickCode::compile(&loop_program_swapping()).unwrap();
    expect![[r#"
        regs 14
        const r5 = 0x0
        const r6 = 0x1
           0: load_input_guarded r4, 0, i64, 0
           1: mov r0, r4
           2: mov r1, r5
           3: mov r2, r5
           4: icmp_gt_imm r7, r0, 0
           5: iadd_ck r8, r1, r2, site0
           6: brif r7, @7, @18
           7: iadd_ck r9, r2, r0, site0
           8: isub_ck_imm r10, r0, 1, site1
           9: mov r11, r10
          10: mov r12, r9
          11: mov r13, r1
          12: mov r0, r11
          13: mov r1, r12
          14: mov r2, r13
          15: jump @4
          16: store_env 0, r3, i64
          17: ret
          18: mov r3, r8
          19: jump @16
    "#]]
    .assert_eq(&code.disasm());
}

#[test]
fn unverified_programs_are_refused() {
    let mut p = counter_program();
    p.layout.insts[0].swap(1, 2);
    match QuickCode::compile(&p) {
        Err(Error::Verify(e)) => assert!(e.to_string().contains("invariant 8"), "{e}"),
        Ok(_) => panic!("a program using a value before its definition compiled"),
    }
}

/// A random integer expression tree over two inputs and constants.
#[derive(Clone, Debug)]
enum Expr {
    X,
    Y,
    Const(i64),
    Bin(CkBinOp, Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
    Abs(Box<Expr>),
    Min(Box<Expr>, Box<Expr>),
    Sel(Cond, Box<Expr>, Box<Expr>, Box<Expr>, Box<Expr>),
}

fn arb_expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        Just(Expr::X),
        Just(Expr::Y),
        prop_oneof![-3i64..=3, Just(i64::MIN), Just(i64::MAX), any::<i64>()].prop_map(Expr::Const),
    ];
    leaf.prop_recursive(5, 40, 4, |inner| {
        let cond = prop::sample::select(Cond::ALL.to_vec());
        let op = prop::sample::select(CkBinOp::ALL.to_vec());
        prop_oneof![
            (op, inner.clone(), inner.clone()).prop_map(|(o, a, b)| Expr::Bin(
                o,
                a.into(),
                b.into()
            )),
            inner.clone().prop_map(|a| Expr::Neg(a.into())),
            inner.clone().prop_map(|a| Expr::Abs(a.into())),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Expr::Min(a.into(), b.into())),
            (cond, inner.clone(), inner.clone(), inner.clone(), inner)
                .prop_map(|(c, a, b, t, e)| Expr::Sel(c, a.into(), b.into(), t.into(), e.into())),
        ]
    })
}

/// Direct Rust evaluation; the first trap in evaluation order wins, as in the IR
/// where operands are computed left to right before the operation.
fn eval(e: &Expr, x: i64, y: i64, sites: &mut u32) -> Result<i64, (TrapKind, u32)> {
    Ok(match e {
        Expr::X => x,
        Expr::Y => y,
        Expr::Const(c) => *c,
        Expr::Bin(op, a, b) => {
            let (a, b) = (eval(a, x, y, sites)?, eval(b, x, y, sites)?);
            let site = *sites;
            *sites += 1;
            sem::ck_binop(*op, a, b).map_err(|k| (k, site))?
        }
        Expr::Neg(a) => {
            let a = eval(a, x, y, sites)?;
            let site = *sites;
            *sites += 1;
            a.checked_neg().ok_or((TrapKind::Overflow, site))?
        }
        Expr::Abs(a) => {
            let a = eval(a, x, y, sites)?;
            let site = *sites;
            *sites += 1;
            a.checked_abs().ok_or((TrapKind::Overflow, site))?
        }
        Expr::Min(a, b) => eval(a, x, y, sites)?.min(eval(b, x, y, sites)?),
        Expr::Sel(c, a, b, t, e) => {
            let (a, b) = (eval(a, x, y, sites)?, eval(b, x, y, sites)?);
            let (t, e) = (eval(t, x, y, sites)?, eval(e, x, y, sites)?);
            if c.eval(a, b) { t } else { e }
        }
    })
}

fn lower(e: &Expr, fb: &mut FunctionBuilder, x: Value, y: Value, sites: &mut u32) -> Value {
    match e {
        Expr::X => x,
        Expr::Y => y,
        Expr::Const(c) => fb.iconst(*c),
        Expr::Bin(op, a, b) => {
            let (a, b) = (lower(a, fb, x, y, sites), lower(b, fb, x, y, sites));
            *sites += 1;
            fb.binary_ck(*op, a, b, *sites - 1)
        }
        Expr::Neg(a) => {
            let a = lower(a, fb, x, y, sites);
            *sites += 1;
            fb.ineg_ck(a, *sites - 1)
        }
        Expr::Abs(a) => {
            let a = lower(a, fb, x, y, sites);
            *sites += 1;
            fb.iabs_ck(a, *sites - 1)
        }
        Expr::Min(a, b) => {
            let (a, b) = (lower(a, fb, x, y, sites), lower(b, fb, x, y, sites));
            fb.imin(a, b)
        }
        Expr::Sel(c, a, b, t, e) => {
            let (a, b) = (lower(a, fb, x, y, sites), lower(b, fb, x, y, sites));
            let (t, e) = (lower(t, fb, x, y, sites), lower(e, fb, x, y, sites));
            let cv = fb.icmp(*c, a, b);
            fb.select(Type::I64, cv, t, e)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn random_expressions_match_rust(e in arb_expr(), x in any::<i64>(), y in prop_oneof![-2i64..=2, any::<i64>()]) {
        let mut fb = FunctionBuilder::new(decl(2, 1, 0, 0));
        let b0 = fb.create_block();
        fb.switch_to_block(b0);
        fb.guard_input(0, Type::I64, 0);
        let xv = fb.load_input(Type::I64, 0);
        fb.guard_input(1, Type::I64, 1);
        let yv = fb.load_input(Type::I64, 1);
        let mut nsites = 0;
        let out = lower(&e, &mut fb, xv, yv, &mut nsites);
        fb.store_env(Type::I64, 0, out);
        fb.ret();
        let mut prog = fb.finish();
        prog.decl.sites = nsites;
        let mut code = QuickCode::compile(&prog).unwrap();
        let mut f = FrameBuffers::new(&prog.decl);
        f.set_input(0, Slot::I64(x));
        f.set_input(1, Slot::I64(y));
        let exit = code.run(&mut f);
        let mut n = 0;
        match eval(&e, x, y, &mut n) {
            Ok(v) => {
                prop_assert_eq!(exit, Exit::Return);
                prop_assert_eq!(f.env(0), Slot::I64(v));
            }
            Err((k, site)) => prop_assert_eq!(exit, Exit::Trap(k, site)),
        }
        // The text form round-trips every generated program.
        let text = crate::text::print(&prog);
        prop_assert_eq!(crate::text::parse(&text).unwrap(), prog);
    }
}
