//! Every operation on every pair of special operands (integers at the edges of i64,
//! floats with signed zeros, infinities, subnormals and NaNs with payloads), with
//! operands as inputs and as constants, compared bitwise with the quickened
//! interpreter and with `scalar_ir::ir::sem`; plus guards, compile-time declines,
//! modules holding several programs, and compile-time measurement.

mod common;

use common::programs::{FLOATS, INTS};
use scalar_ir::ir::sem;
use scalar_ir::*;

fn decl(inputs: u32, env: u32) -> Decl {
    Decl {
        inputs,
        env,
        state: 0,
        sites: 1,
        windows: 0,
    }
}

/// `env0 = op(x, y)` with `x`, `y` guarded inputs of `ty` — or, with `consts`, the
/// given constants in their place (the quickened tier folds those into
/// superinstructions, so both selections must agree with the JIT).
fn binary_program(
    ty: Type,
    consts: Option<(u64, u64)>,
    make: &dyn Fn(&mut FunctionBuilder, Value, Value) -> Value,
    out_ty: Type,
) -> Program {
    let mut fb = FunctionBuilder::new(decl(2, 1));
    let b0 = fb.create_block();
    fb.switch_to_block(b0);
    let operand = |fb: &mut FunctionBuilder, slot: u32, c: Option<u64>| match c {
        Some(bits) => {
            let inst = fb.ins(match ty {
                Type::I64 => InstData::Iconst(bits as i64),
                Type::F64 => InstData::Fconst(bits),
                Type::B1 => InstData::Bconst(bits != 0),
            });
            fb.program().result(inst).unwrap()
        }
        None => {
            fb.guard_input(slot, ty, slot);
            fb.load_input(ty, slot)
        }
    };
    let x = operand(&mut fb, 0, consts.map(|c| c.0));
    let y = operand(&mut fb, 1, consts.map(|c| c.1));
    let r = make(&mut fb, x, y);
    fb.store_env(out_ty, 0, r);
    fb.ret();
    fb.finish()
}

fn values(ty: Type) -> Vec<u64> {
    match ty {
        Type::I64 => INTS
            .iter()
            .map(|&i| i as u64)
            .chain([5, -7i64 as u64])
            .collect(),
        Type::F64 => FLOATS.to_vec(),
        Type::B1 => vec![0, 1],
    }
}

/// Runs `make` on every pair of special values, as inputs and as constants; returns
/// each pair's outcome (exit and env lane bits) after checking that quickened and
/// JIT agree.
fn check_binary(
    ty: Type,
    out_ty: Type,
    make: &dyn Fn(&mut FunctionBuilder, Value, Value) -> Value,
) -> Vec<(u64, u64, Exit, u64)> {
    let vals = values(ty);
    let prog = binary_program(ty, None, make, out_ty);
    let mut quick = QuickCode::compile(&prog).unwrap();
    let native = jit::compile(&prog).unwrap();
    let mut out = Vec::new();
    for &a in &vals {
        for &b in &vals {
            let mut start = FrameBuffers::new(&prog.decl);
            let tag = scalar_ir::frame::tag_of(ty);
            (start.input_tags[0], start.inputs[0]) = (tag, a);
            (start.input_tags[1], start.inputs[1]) = (tag, b);
            common::assert_same(&mut quick, native.main(), &prog, &start);
            let got = common::run_native(native.main(), &start);
            out.push((a, b, got.exit, got.fb.env[0]));
        }
    }
    // The constant-operand forms, on a sample of pairs (one module each).
    for &a in vals.iter().step_by(3) {
        for &b in vals.iter().step_by(2) {
            let prog = binary_program(ty, Some((a, b)), make, out_ty);
            let mut quick = QuickCode::compile(&prog).unwrap();
            let native = jit::compile(&prog).unwrap();
            common::assert_same(
                &mut quick,
                native.main(),
                &prog,
                &FrameBuffers::new(&prog.decl),
            );
        }
    }
    out
}

#[test]
fn non_trapping_binary_ops_match_rust_bitwise() {
    for &op in BinOp::ALL {
        let ty = op.operand_types()[0];
        let rows = check_binary(ty, op.result_type(), &|fb, x, y| fb.binary(op, x, y));
        for (a, b, exit, bits) in rows {
            assert_eq!(exit, Exit::Return);
            let want = sem::binop(op, a, b);
            assert_eq!(bits, want, "{} {a:#x} {b:#x}", op.name());
        }
    }
}

#[test]
fn checked_binary_ops_trap_exactly_like_rust() {
    for &op in CkBinOp::ALL {
        let rows = check_binary(Type::I64, Type::I64, &|fb, x, y| fb.binary_ck(op, x, y, 0));
        for (a, b, exit, bits) in rows {
            match sem::ck_binop(op, a as i64, b as i64) {
                Ok(v) => assert_eq!((exit, bits), (Exit::Return, v as u64)),
                Err(k) => assert_eq!(exit, Exit::Trap(k, 0), "{} {a} {b}", op.name()),
            }
        }
    }
    // The cases the brief names, explicitly.
    let div = |a: i64, b: i64, op: CkBinOp| {
        let prog = binary_program(
            Type::I64,
            None,
            &|fb, x, y| fb.binary_ck(op, x, y, 0),
            Type::I64,
        );
        let native = jit::compile(&prog).unwrap();
        let mut f = FrameBuffers::new(&prog.decl);
        f.set_input(0, Slot::I64(a));
        f.set_input(1, Slot::I64(b));
        native.main().run(&mut f)
    };
    use CkBinOp::{IdivCk, IremCk};
    assert_eq!(div(7, 0, IdivCk), Exit::Trap(TrapKind::DivByZero, 0));
    assert_eq!(div(7, 0, IremCk), Exit::Trap(TrapKind::DivByZero, 0));
    assert_eq!(div(i64::MIN, -1, IdivCk), Exit::Trap(TrapKind::Overflow, 0));
    assert_eq!(div(i64::MIN, -1, IremCk), Exit::Trap(TrapKind::Overflow, 0));
    assert_eq!(div(i64::MIN, 0, IdivCk), Exit::Trap(TrapKind::DivByZero, 0));
    assert_eq!(div(-7, 2, IdivCk), Exit::Return);
}

#[test]
fn comparisons_match_rust_including_nan() {
    for kind in [CmpKind::Icmp, CmpKind::Fcmp, CmpKind::Bcmp] {
        for cond in Cond::ALL {
            let ty = kind.operand_type();
            let rows = check_binary(ty, Type::B1, &|fb, x, y| fb.cmp(kind, cond, x, y));
            for (a, b, exit, bits) in rows {
                let want = match kind {
                    CmpKind::Fcmp => cond.eval(f64::from_bits(a), f64::from_bits(b)),
                    _ => cond.eval(a as i64, b as i64),
                };
                assert_eq!(
                    (exit, bits),
                    (Exit::Return, want as u64),
                    "{kind:?} {cond:?} {a:#x} {b:#x}"
                );
            }
        }
    }
}

#[test]
fn select_picks_by_a_comparison_and_by_a_lane() {
    for ty in [Type::I64, Type::F64, Type::B1] {
        let rows = check_binary(ty, ty, &|fb, x, y| {
            let z = fb.iconst(0);
            let c = fb.cmp(CmpKind::Icmp, Cond::Lt, z, z);
            let s = fb.select(ty, c, x, y);
            let t = fb.bconst(true);
            fb.select(ty, t, s, x)
        });
        for (_, b, exit, bits) in rows {
            assert_eq!((exit, bits), (Exit::Return, b));
        }
    }
}

#[test]
fn unary_ops_match_rust_bitwise() {
    for &op in UnOp::ALL {
        let ty = op.operand_types()[0];
        let rows = check_binary(ty, op.result_type(), &|fb, x, _| fb.unary(op, x));
        for (a, _, exit, bits) in rows {
            assert_eq!(
                (exit, bits),
                (Exit::Return, sem::unop(op, a)),
                "{} {a:#x}",
                op.name()
            );
        }
    }
    for op in CkUnOp::ALL {
        let rows = check_binary(Type::I64, Type::I64, &|fb, x, _| match op {
            CkUnOp::InegCk => fb.ineg_ck(x, 0),
            CkUnOp::IabsCk => fb.iabs_ck(x, 0),
        });
        for (a, _, exit, bits) in rows {
            match sem::ck_unop(*op, a as i64) {
                Ok(v) => assert_eq!((exit, bits), (Exit::Return, v as u64)),
                Err(k) => assert_eq!(exit, Exit::Trap(k, 0)),
            }
        }
    }
}

#[test]
fn guards_decline_on_every_other_tag() {
    let prog = scalar_ir::parse(
        "program inputs=1 env=2 state=0 sites=0
block0:
    guard_input 0, f64, 4
    guard_env 1, b1, 5
    v0 = load_input.f64 0
    store_env.f64 0, v0
    return
",
    )
    .unwrap();
    let mut quick = QuickCode::compile(&prog).unwrap();
    let native = jit::compile(&prog).unwrap();
    let slots = [
        Slot::Absent,
        Slot::Deferred,
        Slot::I64(1),
        Slot::F64(2.0),
        Slot::B1(true),
        Slot::Other,
    ];
    for x in slots {
        for e in slots {
            let mut start = FrameBuffers::new(&prog.decl);
            start.set_input(0, x);
            start.set_env(1, e);
            common::assert_same(&mut quick, native.main(), &prog, &start);
            let want = match (x, e) {
                (Slot::F64(_), Slot::B1(_)) => Exit::Return,
                (Slot::F64(_), _) => Exit::Decline(5),
                _ => Exit::Decline(4),
            };
            assert_eq!(common::run_native(native.main(), &start).exit, want);
        }
    }
}

#[test]
fn frames_beyond_32_bit_offsets_are_declined_not_truncated() {
    // Slot 2^28 is 2 GiB into the lane array, past a Cranelift load's 32-bit offset.
    let big = 1u32 << 28;
    let mut fb = FunctionBuilder::new(Decl {
        inputs: big + 1,
        env: 1,
        state: 0,
        sites: 0,
        windows: 0,
    });
    let b0 = fb.create_block();
    fb.switch_to_block(b0);
    let v = fb.load_input(Type::I64, big);
    fb.store_env(Type::I64, 0, v);
    fb.ret();
    let prog = fb.finish();
    assert!(verify(&prog).is_ok());
    match jit::compile(&prog) {
        Err(jit::CompileError::Unsupported(msg)) => assert!(msg.contains("offset"), "{msg}"),
        other => panic!("expected an unsupported decline, got {other:?}"),
    }
    // A decline leaves the module usable for other programs.
    let mut m = jit::JitModule::new().unwrap();
    assert!(matches!(
        m.compile(&prog),
        Err(jit::CompileError::Unsupported(_))
    ));
    let ok = scalar_ir::parse("program inputs=0 env=1 state=0 sites=0\nblock0:\n    v0 = iconst 3\n    store_env.i64 0, v0\n    return\n").unwrap();
    let h = m.compile(&ok).unwrap();
    let code = m.finalize().unwrap();
    let mut f = FrameBuffers::new(&ok.decl);
    assert_eq!(code.func(h).run(&mut f), Exit::Return);
    assert_eq!(f.env(0), Slot::I64(3));
}

#[test]
fn unverified_programs_are_rejected() {
    let mut prog = scalar_ir::parse("program inputs=0 env=1 state=0 sites=0\nblock0:\n    v0 = iconst 3\n    store_env.i64 0, v0\n    return\n").unwrap();
    prog.decl.env = 0;
    assert!(matches!(
        jit::compile(&prog),
        Err(jit::CompileError::Verify(_))
    ));
}

#[test]
fn one_module_holds_several_programs() {
    let texts = [
        "program inputs=1 env=1 state=0 sites=1\nblock0:\n    v0 = load_input.i64 0\n    v1 = iconst 10\n    v2 = iadd_ck v0, v1, site0\n    store_env.i64 0, v2\n    return\n",
        "program inputs=1 env=1 state=0 sites=0\nblock0:\n    v0 = load_input.f64 0\n    v1 = fsin v0\n    store_env.f64 0, v1\n    return\n",
        "program inputs=1 env=1 state=1 sites=0\nblock0:\n    v0 = load_state.i64 0\n    store_env.i64 0, v0\n    decline 3\n",
    ];
    let progs: Vec<Program> = texts.iter().map(|t| scalar_ir::parse(t).unwrap()).collect();
    let mut m = jit::JitModule::new().unwrap();
    let handles: Vec<_> = progs.iter().map(|p| m.compile(p).unwrap()).collect();
    assert_eq!(m.len(), 3);
    let before = m.compile_time();
    let code = m.finalize().unwrap();
    assert!(code.compile_time() >= before && before.as_nanos() > 0);
    let mut f = FrameBuffers::new(&progs[0].decl);
    f.set_input(0, Slot::I64(5));
    assert_eq!(code.func(handles[0]).run(&mut f), Exit::Return);
    assert_eq!(f.env(0), Slot::I64(15));
    let mut f = FrameBuffers::new(&progs[1].decl);
    f.set_input(0, Slot::F64(1.0));
    assert_eq!(code.func(handles[1]).run(&mut f), Exit::Return);
    assert_eq!(f.env(0), Slot::F64(1.0f64.sin()));
    let mut f = FrameBuffers::new(&progs[2].decl);
    f.state[0] = 9;
    assert_eq!(code.func(handles[2]).run(&mut f), Exit::Decline(3));
    assert_eq!(f.status, Exit::Decline(3).encode());
    assert_eq!(f.env(0), Slot::I64(9));
}

#[test]
fn raw_frame_call_matches_safe_call() {
    let prog = scalar_ir::parse(
        "program inputs=1 env=1 state=0 sites=1\nblock0:\n    guard_input 0, i64, 2\n    v0 = load_input.i64 0\n    v1 = imul_ck v0, v0, site0\n    store_env.i64 0, v1\n    return\n",
    )
    .unwrap();
    let code = jit::compile(&prog).unwrap();
    let f = code.main();
    let mut fb = FrameBuffers::new(&prog.decl);
    fb.set_input(0, Slot::I64(1 << 33));
    let mut frame = fb.frame();
    // SAFETY: the frame points into buffers sized for the program.
    let word = unsafe { f.run_frame(&mut frame) };
    assert_eq!(word, Exit::Trap(TrapKind::Overflow, 0).encode());
    assert_eq!(frame.status, word);
}

#[test]
fn hundred_stream_program_matches_quickened() {
    let prog = common::hundred::hundred_streams();
    let mut quick = QuickCode::compile(&prog).unwrap();
    let code = jit::compile(&prog).unwrap();
    let mut start = FrameBuffers::new(&prog.decl);
    for (k, x) in [5i64, -3, i64::MAX / 50, 0].into_iter().enumerate() {
        for i in 0..100 {
            start.set_input(i, Slot::I64(x + i as i64));
        }
        start.step = k as u64;
        common::assert_same(&mut quick, code.main(), &prog, &start);
        start = common::run_quick(&mut quick, &start).fb;
    }
    start.set_input(42, Slot::Absent);
    common::assert_same(&mut quick, code.main(), &prog, &start);
}

/// A program compiled for rows only has no batch kernel, and its row kernel
/// runs as the full compilation's does, beside it in one module.
#[test]
fn row_only_programs_have_no_batch_kernel() {
    let text = "program inputs=0 env=1 state=0 sites=0\nblock0:\n    v0 = iconst 5\n    store_env.i64 0, v0\n    return\n";
    let prog = scalar_ir::parse(text).unwrap();
    let mut m = jit::JitModule::new().unwrap();
    let row = m.compile_row(&prog).unwrap();
    let both = m.compile(&prog).unwrap();
    let code = m.finalize().unwrap();
    assert!(code.func(row).batch_kernel().is_none());
    assert!(code.func(both).batch_kernel().is_some());
    for h in [row, both] {
        let mut f = FrameBuffers::new(&prog.decl);
        assert_eq!(code.func(h).run(&mut f), Exit::Return);
        assert_eq!(f.env(0), Slot::I64(5));
    }
}

/// `compile_rows` generates code on several threads for many programs: each
/// kernel runs as its program says (a program that calls a helper among
/// them, so relocations cross threads too), and a program that does not
/// verify fails alone.
#[test]
fn programs_compiled_together_run_as_each_alone() {
    let constant = |k: i64| {
        scalar_ir::parse(&format!(
            "program inputs=0 env=1 state=0 sites=0\nblock0:\n    v0 = iconst {k}\n    store_env.i64 0, v0\n    return\n"
        ))
        .unwrap()
    };
    let bad = Program {
        decl: decl(0, 0),
        ..constant(0)
    };
    let mut progs: Vec<Program> = (0..200).map(constant).collect();
    progs[7] = bad;
    let floor = "program inputs=0 env=1 state=0 sites=0\nblock0:\n    v0 = fconst 2.5\n    v1 = ffloor v0\n    store_env.f64 0, v1\n    return\n";
    progs[150] = scalar_ir::parse(floor).unwrap();
    let refs: Vec<&Program> = progs.iter().collect();
    let mut m = jit::JitModule::new().unwrap();
    let handles = m.compile_rows(&refs);
    assert!(matches!(handles[7], Err(jit::CompileError::Verify(_))));
    let code = m.finalize().unwrap();
    for (k, h) in handles.iter().enumerate() {
        if k == 7 {
            continue;
        }
        let h = *h.as_ref().unwrap();
        let mut f = FrameBuffers::new(&progs[k].decl);
        assert_eq!(code.func(h).run(&mut f), Exit::Return, "program {k}");
        let expected = if k == 150 {
            Slot::F64(2.0)
        } else {
            Slot::I64(k as i64)
        };
        assert_eq!(f.env(0), expected, "program {k}");
    }
}

/// The `window` instruction: its text round-trips, and the JIT, the
/// quickened interpreter and `scalar_ir::window` itself compute the same
/// results and leave the same window words, row after row (a sum that
/// overflows traps at its site; a repeated step enters nothing).
#[test]
fn window_instructions_agree_with_the_state_machine() {
    use scalar_ir::window::{Elem, Read};
    for shape in window_shapes() {
        let [ty, out] = window_types(shape);
        let words = shape.words();
        let WindowRig {
            code,
            h,
            mut quick,
            mut a,
            mut b,
        } = window_rig(
            shape,
            1,
            &format!(
                "guard_input 0, {ty}, 0\nv0 = load_input.{ty} 0\nv1 = window.{out} 1, {:#x}, v0, site0\nstore_env.{out} 0, v1",
                shape.encode()
            ),
        );
        let mut reference = vec![0u64; words];
        let values: [u64; 6] = match shape.elem {
            Elem::Int => [i64::MAX as u64, 1, (-5i64) as u64, 7, 7, 0],
            Elem::Float => [0.1, f64::NAN, -0.0, 2.5, f64::INFINITY, 1e300].map(f64::to_bits),
            _ => [1, 1, 0, 1, 1, 1],
        };
        for (step, &bits) in values.iter().chain(&values[..1]).enumerate() {
            // The last row repeats step 5: its value does not enter.
            let step = step.min(5) as u64;
            let slot = elem_slot(shape.elem, bits);
            for f in [&mut a, &mut b] {
                f.set_input(0, slot);
                f.step = step;
            }
            let want = shape.step(&mut reference, step, bits);
            let (ea, eb) = (code.func(h).run(&mut a), quick.run(&mut b));
            assert_eq!(ea, eb, "{shape:?} step {step}");
            match want {
                Read::Overflow => assert_eq!(ea, Exit::Trap(TrapKind::Overflow, 0)),
                Read::Bits(r) => {
                    assert_eq!(ea, Exit::Return);
                    assert_eq!(a.env[0], r, "{shape:?} step {step}");
                    assert_eq!(b.env[0], r, "{shape:?} step {step}");
                }
                Read::Empty => unreachable!("a window that took a value is not empty"),
            }
            assert_eq!(a.windows[1..], reference[..], "{shape:?} step {step}");
            assert_eq!(b.windows[1..], reference[..], "{shape:?} step {step}");
            assert_eq!(a.windows[0], 0, "word 0 is not the window's");
        }
    }
}

/// Count windows of each element type and of aggregates whose empty read
/// is a value (`sum`, `all`) and ⊥ (`max`, `avg`).
fn window_shapes() -> [scalar_ir::window::CountWindow; 4] {
    use scalar_ir::window::{Agg, CountWindow, Elem};
    [
        CountWindow {
            n: 3,
            agg: Agg::Sum,
            elem: Elem::Int,
        },
        CountWindow {
            n: 2,
            agg: Agg::Max,
            elem: Elem::Float,
        },
        CountWindow {
            n: 4,
            agg: Agg::Avg,
            elem: Elem::Float,
        },
        CountWindow {
            n: 2,
            agg: Agg::All,
            elem: Elem::Bool,
        },
    ]
}

/// The IR type names of a count window's values and result.
fn window_types(shape: scalar_ir::window::CountWindow) -> [&'static str; 2] {
    use scalar_ir::window::Elem;
    [
        shape.elem,
        scalar_ir::window::result_elem(shape.agg, shape.elem),
    ]
    .map(|e| match e {
        Elem::Int => "i64",
        Elem::Float => "f64",
        _ => "b1",
    })
}

/// A window element's bits as an input slot.
fn elem_slot(elem: scalar_ir::window::Elem, bits: u64) -> Slot {
    match elem {
        scalar_ir::window::Elem::Int => Slot::I64(bits as i64),
        scalar_ir::window::Elem::Float => Slot::F64(f64::from_bits(bits)),
        _ => Slot::B1(bits != 0),
    }
}

/// A window test's program, compiled natively and for the interpreter,
/// with a frame for each.
struct WindowRig {
    code: jit::NativeCode,
    h: jit::FuncHandle,
    quick: QuickCode,
    a: FrameBuffers,
    b: FrameBuffers,
}

/// The rig of the one-block program of `inputs` inputs, one output and
/// the words of window `shape` after a first word not its own, whose
/// instructions (one a line) are `body` then `return`; its text round-trips.
fn window_rig(shape: scalar_ir::window::CountWindow, inputs: u32, body: &str) -> WindowRig {
    let mut text = format!(
        "program inputs={inputs} env=1 state=0 sites=1 windows={}\nblock0:\n",
        shape.words() + 1
    );
    for line in body.lines().chain(["return"]) {
        text.push_str(&format!("    {line}\n"));
    }
    let prog = scalar_ir::parse(&text).unwrap();
    assert_eq!(scalar_ir::print(&prog), text);
    let mut m = jit::JitModule::new().unwrap();
    let h = m.compile_row(&prog).unwrap();
    WindowRig {
        code: m.finalize().unwrap(),
        h,
        quick: QuickCode::compile(&prog).unwrap(),
        a: FrameBuffers::new(&prog.decl),
        b: FrameBuffers::new(&prog.decl),
    }
}

/// The `window_if` instruction (a window over a value that may be absent):
/// its text round-trips, and where its presence is false the JIT and the
/// quickened interpreter enter nothing and read the window as it is, as
/// `scalar_ir::window` does; an empty window's read (⊥) declines with the
/// instruction's reason, on both, leaving the words untouched.
#[test]
fn window_if_enters_only_present_values() {
    use scalar_ir::window::{Elem, Read};
    for shape in window_shapes() {
        let [ty, out] = window_types(shape);
        let words = shape.words();
        let rig = window_rig(
            shape,
            2,
            &format!(
                "guard_input 0, {ty}, 0\nguard_input 1, b1, 0\nv0 = load_input.{ty} 0\nv1 = load_input.b1 1\nv2 = window_if.{out} 1, {:#x}, v1, v0, site0, 7\nstore_env.{out} 0, v2",
                shape.encode()
            ),
        );
        let WindowRig {
            code,
            h,
            mut quick,
            mut a,
            mut b,
        } = rig;
        let mut reference = vec![0u64; words];
        let values: [u64; 6] = match shape.elem {
            Elem::Int => [3, 1, (-5i64) as u64, 7, 7, 0],
            Elem::Float => [0.1, f64::NAN, -0.0, 2.5, f64::INFINITY, 1e300].map(f64::to_bits),
            _ => [1, 0, 0, 1, 1, 1],
        };
        // Absent at the first steps (an empty window), then now and then.
        let present = [
            false, false, true, false, true, true, false, false, true, false,
        ];
        let (mut empty_reads, mut held_reads) = (0, 0);
        for (step, &here) in present.iter().enumerate() {
            let bits = values[step % values.len()];
            let slot = elem_slot(shape.elem, bits);
            for f in [&mut a, &mut b] {
                f.set_input(0, slot);
                f.set_input(1, Slot::B1(here));
                f.step = step as u64;
            }
            if here {
                shape.push(&mut reference, step as u64, bits);
            }
            let want = shape.read(&mut reference);
            let (ea, eb) = (code.func(h).run(&mut a), quick.run(&mut b));
            assert_eq!(ea, eb, "{shape:?} step {step}");
            match want {
                Read::Overflow => unreachable!("these sums stay in range"),
                Read::Bits(r) => {
                    assert_eq!(ea, Exit::Return);
                    assert_eq!(a.env[0], r, "{shape:?} step {step}");
                    assert_eq!(b.env[0], r, "{shape:?} step {step}");
                    held_reads += usize::from(!here);
                }
                Read::Empty => {
                    assert_eq!(ea, Exit::Decline(7), "{shape:?} step {step}");
                    empty_reads += 1;
                }
            }
            assert_eq!(a.windows[1..], reference[..], "{shape:?} step {step}");
            assert_eq!(b.windows[1..], reference[..], "{shape:?} step {step}");
        }
        // Both ways of reading without entering happened.
        assert!(held_reads >= 3, "{shape:?}");
        let empty_is_bottom = shape.read(&mut vec![0u64; words]) == Read::Empty;
        assert_eq!(
            empty_reads,
            if empty_is_bottom { 2 } else { 0 },
            "{shape:?}"
        );
    }
}

/// A batch kernel addresses row `r` of its inputs and outputs as `r` times
/// their width, computed in forms that differ by width (`row_times`): every
/// width up to twelve, rows past the first included, gives each row's own
/// values.
#[test]
fn batches_of_every_width_address_their_rows() {
    for width in 1..=12u32 {
        let mut b = FunctionBuilder::new(Decl {
            inputs: width,
            env: width,
            state: 0,
            sites: width,
            windows: 0,
        });
        let b0 = b.create_block();
        b.switch_to_block(b0);
        for i in 0..width {
            b.guard_input(i, Type::I64, i);
            let x = b.load_input(Type::I64, i);
            let k = b.iconst(i64::from(i));
            let v = b.iadd_ck(x, k, i);
            b.store_env(Type::I64, i, v);
        }
        b.ret();
        let prog = b.finish();
        let outputs: Vec<u32> = (0..width).collect();
        let code = jit::compile_for_outputs(&prog, &outputs).unwrap();
        let rows = 5;
        let mut fb = FrameBuffers::new(&prog.decl);
        let mut batch = BatchBuffers::new(&prog.decl, rows, outputs.clone());
        for r in 0..rows {
            for i in 0..width as usize {
                batch.set_input(r, i, Slot::I64(1000 * r as i64 + 10 * i as i64));
            }
        }
        assert_eq!(code.main().run_batch(&mut fb, &mut batch), Exit::Return);
        for r in 0..rows {
            for i in 0..width as usize {
                let want = 1000 * r as i64 + 11 * i as i64;
                assert_eq!(
                    batch.output(r, i),
                    Slot::I64(want),
                    "width {width}, row {r}, output {i}"
                );
            }
        }
    }
}

/// The `interval` and `interval_if` instructions (an STL operator's
/// window): their text round-trips, and the JIT's row kernel, its batch
/// kernel and the quickened interpreter compute what
/// `scalar_ir::window::IntervalWindow` does on the same words, row after
/// row: at the frame's time where it has one (`timed`), else at the
/// step's, entering only present values, a repeated step entering nothing;
/// a window past its capacity traps `window_full` at its site on all of
/// them.
#[test]
fn interval_instructions_agree_with_the_state_machine() {
    use scalar_ir::window::{Agg, Elem, IntervalRead, IntervalWindow};
    let shapes = [
        (Agg::Min, Elem::Float, "f64", 0, 2_000_000_000, 4),
        (Agg::Max, Elem::Float, "f64", 500_000_000, 1_500_000_000, 3),
        (Agg::All, Elem::Bool, "b1", 0, 1_000_000_000, 3),
        (Agg::Any, Elem::Bool, "b1", 1_000_000_000, 3_000_000_000, 2),
    ];
    let (mut full, mut returned) = (0, 0);
    for (agg, elem, ty, lo_ns, hi_ns, cap) in shapes {
        let shape = IntervalWindow {
            lo_ns,
            hi_ns,
            cap,
            agg,
            elem,
        };
        let words = shape.words();
        let text = format!(
            "program inputs=2 env=1 state=0 sites=1 windows={}\nblock0:\n    \
             guard_input 0, {ty}, 0\n    guard_input 1, b1, 0\n    \
             v0 = load_input.{ty} 0\n    v1 = load_input.b1 1\n    \
             v2 = interval_if.{ty} 1, {lo_ns}, {hi_ns}, {:#x}, v1, v0, site0\n    \
             store_env.{ty} 0, v2\n    return\n",
            words + 1,
            shape.encode_kind()
        );
        let prog = scalar_ir::parse(&text).unwrap();
        assert_eq!(scalar_ir::print(&prog), text);
        let native = jit::compile(&prog).unwrap();
        let mut quick = QuickCode::compile(&prog).unwrap();
        let value = |k: usize| match elem {
            Elem::Float => [0.5, -1.0, f64::NAN, 3.0, 3.0, -2.5, 7.0, 0.0][k % 8].to_bits(),
            _ => [1, 0, 0, 1, 1, 0, 1, 1][k % 8],
        };
        let slot = |bits: u64| match elem {
            Elem::Float => Slot::F64(f64::from_bits(bits)),
            _ => Slot::B1(bits != 0),
        };
        // Row by row: with the frame's time (milliseconds apart, sometimes
        // standing or going back) on even passes, at the steps' on odd.
        for timed in [true, false] {
            let mut reference = vec![0u64; words];
            let (mut a, mut b) = (FrameBuffers::new(&prog.decl), FrameBuffers::new(&prog.decl));
            let mut time = 0i64;
            for k in 0..24usize {
                let step = k.min(22) as u64;
                time += [300, 0, 700, -200, 450][k % 5] * 1_000_000;
                let here = k % 4 != 2;
                let bits = value(k);
                for f in [&mut a, &mut b] {
                    f.set_input(0, slot(bits));
                    f.set_input(1, Slot::B1(here));
                    f.step = step;
                    (f.time, f.timed) = (time, u64::from(timed));
                }
                let at = if timed {
                    time
                } else {
                    scalar_ir::window::step_time(step)
                };
                let want = shape.step(&mut reference, step, at, bits, here);
                let (ea, eb) = (native.main().run(&mut a), quick.run(&mut b));
                assert_eq!(ea, eb, "{shape:?} row {k}");
                match want {
                    IntervalRead::Full => {
                        assert_eq!(ea, Exit::Trap(TrapKind::WindowFull, 0), "{shape:?} row {k}");
                        full += 1;
                    }
                    IntervalRead::Bits(r) => {
                        assert_eq!(ea, Exit::Return, "{shape:?} row {k}");
                        assert_eq!((a.env[0], b.env[0]), (r, r), "{shape:?} row {k}");
                        returned += 1;
                    }
                }
                assert_eq!(a.windows[1..], reference[..], "{shape:?} row {k}");
                assert_eq!(b.windows[1..], reference[..], "{shape:?} row {k}");
                assert_eq!(a.windows[0], 0, "word 0 is not the window's");
            }
        }
        // A batch: its rows have no time (each its step's), whatever the
        // frame's `timed` says; native and quickened batches and the state
        // machine agree, up to the row that is full, if one is.
        let rows = 12;
        let mut batch = BatchBuffers::new(&prog.decl, rows, vec![0]);
        for r in 0..rows {
            batch.set_input(r, 0, slot(value(r)));
            batch.set_input(r, 1, Slot::B1(r % 3 != 1));
        }
        let mut start = FrameBuffers::new(&prog.decl);
        (start.step, start.time, start.timed) = (5, -7, 1);
        let (mut nf, mut nb) = (start.clone(), batch.clone());
        let (mut qf, mut qb) = (start.clone(), batch.clone());
        let ne = native.main().run_batch(&mut nf, &mut nb);
        let qe = quick.run_batch(&mut qf, &mut qb);
        assert_eq!((ne, &nf, &nb), (qe, &qf, &qb), "{shape:?} batch");
        let mut reference = vec![0u64; words];
        for r in 0..rows {
            let step = 5 + r as u64;
            let at = scalar_ir::window::step_time(step);
            match shape.step(&mut reference, step, at, value(r), r % 3 != 1) {
                IntervalRead::Bits(bits) if r < nb.done => {
                    assert_eq!(nb.output(r, 0), slot(bits), "{shape:?} batch row {r}")
                }
                IntervalRead::Full => {
                    assert_eq!((r, ne), (nb.done, Exit::Trap(TrapKind::WindowFull, 0)));
                    break;
                }
                IntervalRead::Bits(_) => unreachable!("a batch stops only where it is full"),
            }
        }
        assert_eq!(nf.windows[1..], reference[..], "{shape:?} batch");
    }
    assert!(
        full >= 4 && returned >= 100,
        "{full} full, {returned} returned"
    );
}

/// The `since` instruction (an STL since): its text round-trips, and the
/// JIT's row kernel, its batch kernel and the quickened interpreter
/// compute what `scalar_ir::window::SinceWindow` does on the same words,
/// row after row, at the frame's time or the step's, entering each operand
/// only where it is present, a repeated step entering nothing; a since past
/// its capacity traps `window_full` at its site on all of them.
#[test]
fn since_instructions_agree_with_the_state_machine() {
    use scalar_ir::window::{Elem, IntervalRead, SinceWindow};
    let shapes = [
        (Elem::Float, "f64", 0, 2_000_000_000, 4),
        (Elem::Float, "f64", 500_000_000, 1_500_000_000, 3),
        (Elem::Bool, "b1", 0, 1_000_000_000, 3),
        (Elem::Bool, "b1", 1_000_000_000, 3_000_000_000, 2),
    ];
    let (mut full, mut returned) = (0, 0);
    for (elem, ty, lo_ns, hi_ns, cap) in shapes {
        let shape = SinceWindow {
            lo_ns,
            hi_ns,
            cap,
            elem,
        };
        let words = shape.words();
        let text = format!(
            "program inputs=4 env=1 state=0 sites=1 windows={}\nblock0:\n    \
             guard_input 0, {ty}, 0\n    guard_input 1, b1, 0\n    \
             guard_input 2, {ty}, 0\n    guard_input 3, b1, 0\n    \
             v0 = load_input.{ty} 0\n    v1 = load_input.b1 1\n    \
             v2 = load_input.{ty} 2\n    v3 = load_input.b1 3\n    \
             v4 = since.{ty} 1, {lo_ns}, {hi_ns}, {:#x}, v1, v0, v3, v2, site0\n    \
             store_env.{ty} 0, v4\n    return\n",
            words + 1,
            shape.encode_kind()
        );
        let prog = scalar_ir::parse(&text).unwrap();
        assert_eq!(scalar_ir::print(&prog), text);
        let native = jit::compile(&prog).unwrap();
        let mut quick = QuickCode::compile(&prog).unwrap();
        let value = |k: usize| match elem {
            Elem::Float => [0.5, -1.0, f64::NAN, 3.0, 3.0, -2.5, 7.0, 0.0, 2.0][k % 9].to_bits(),
            _ => [1, 0, 1, 1, 1, 0, 1, 1, 0][k % 9],
        };
        let slot = |bits: u64| match elem {
            Elem::Float => Slot::F64(f64::from_bits(bits)),
            _ => Slot::B1(bits != 0),
        };
        for timed in [true, false] {
            let mut reference = vec![0u64; words];
            let (mut a, mut b) = (FrameBuffers::new(&prog.decl), FrameBuffers::new(&prog.decl));
            let mut time = 0i64;
            for k in 0..30usize {
                let step = k.min(28) as u64;
                time += [300, 0, 700, -200, 450][k % 5] * 1_000_000;
                let (phi, psi) = (value(k), value(k * 7 + 3));
                let (phi_here, psi_here) = (k % 4 != 2, k % 3 != 1);
                for f in [&mut a, &mut b] {
                    f.set_input(0, slot(phi));
                    f.set_input(1, Slot::B1(phi_here));
                    f.set_input(2, slot(psi));
                    f.set_input(3, Slot::B1(psi_here));
                    f.step = step;
                    (f.time, f.timed) = (time, u64::from(timed));
                }
                let at = if timed {
                    time
                } else {
                    scalar_ir::window::step_time(step)
                };
                let want = shape.step(
                    &mut reference,
                    step,
                    at,
                    phi_here.then_some(phi),
                    psi_here.then_some(psi),
                );
                let (ea, eb) = (native.main().run(&mut a), quick.run(&mut b));
                assert_eq!(ea, eb, "{shape:?} row {k}");
                match want {
                    IntervalRead::Full => {
                        assert_eq!(ea, Exit::Trap(TrapKind::WindowFull, 0), "{shape:?} row {k}");
                        full += 1;
                    }
                    IntervalRead::Bits(r) => {
                        assert_eq!(ea, Exit::Return, "{shape:?} row {k}");
                        assert_eq!((a.env[0], b.env[0]), (r, r), "{shape:?} row {k}");
                        returned += 1;
                    }
                }
                assert_eq!(a.windows[1..], reference[..], "{shape:?} row {k}");
                assert_eq!(b.windows[1..], reference[..], "{shape:?} row {k}");
                assert_eq!(a.windows[0], 0, "word 0 is not the since's");
            }
        }
        // A batch: its rows have no time (each its step's); native and
        // quickened batches and the state machine agree, up to the row that
        // is full, if one is.
        let rows = 12;
        let mut batch = BatchBuffers::new(&prog.decl, rows, vec![0]);
        for r in 0..rows {
            batch.set_input(r, 0, slot(value(r)));
            batch.set_input(r, 1, Slot::B1(r % 3 != 1));
            batch.set_input(r, 2, slot(value(r + 4)));
            batch.set_input(r, 3, Slot::B1(r % 4 != 0));
        }
        let mut start = FrameBuffers::new(&prog.decl);
        (start.step, start.time, start.timed) = (5, -7, 1);
        let (mut nf, mut nb) = (start.clone(), batch.clone());
        let (mut qf, mut qb) = (start.clone(), batch.clone());
        let ne = native.main().run_batch(&mut nf, &mut nb);
        let qe = quick.run_batch(&mut qf, &mut qb);
        assert_eq!((ne, &nf, &nb), (qe, &qf, &qb), "{shape:?} batch");
        let mut reference = vec![0u64; words];
        for r in 0..rows {
            let step = 5 + r as u64;
            let at = scalar_ir::window::step_time(step);
            let (phi, psi) = (
                (r % 3 != 1).then_some(value(r)),
                (r % 4 != 0).then_some(value(r + 4)),
            );
            match shape.step(&mut reference, step, at, phi, psi) {
                IntervalRead::Bits(bits) if r < nb.done => {
                    assert_eq!(nb.output(r, 0), slot(bits), "{shape:?} batch row {r}")
                }
                IntervalRead::Full => {
                    assert_eq!((r, ne), (nb.done, Exit::Trap(TrapKind::WindowFull, 0)));
                    break;
                }
                IntervalRead::Bits(_) => unreachable!("a batch stops only where it is full"),
            }
        }
        assert_eq!(nf.windows[1..], reference[..], "{shape:?} batch");
    }
    assert!(
        full >= 4 && returned >= 100,
        "{full} full, {returned} returned"
    );
}

/// The verifier refuses a since no STL operator makes (invariant 15):
/// reversed bounds, no capacity, an Int since, or a result of another type
/// than its values'.
#[test]
fn the_verifier_refuses_sinces_no_operator_makes() {
    let ok = scalar_ir::window::SinceWindow {
        lo_ns: 0,
        hi_ns: 1,
        cap: 4,
        elem: scalar_ir::window::Elem::Float,
    };
    let kind = ok.encode_kind();
    let int_kind = scalar_ir::window::CountWindow {
        n: 4,
        agg: scalar_ir::window::Agg::Max,
        elem: scalar_ir::window::Elem::Int,
    }
    .encode();
    let bad = [
        ("f64", format!("2, 1, {kind:#x}"), "f64"),
        ("f64", format!("-1, 1, {kind:#x}"), "f64"),
        ("i64", format!("0, 1, {int_kind:#x}"), "i64"),
        ("f64", format!("0, 1, {kind:#x}"), "b1"),
    ];
    for (arg, shape, out) in bad {
        let text = format!(
            "program inputs=1 env=1 state=0 sites=1 windows=100\nblock0:\n    \
             guard_input 0, {arg}, 0\n    v0 = load_input.{arg} 0\n    v1 = bconst true\n    \
             v2 = since.{out} 0, {shape}, v1, v0, v1, v0, site0\n    store_env.{out} 0, v2\n    return\n"
        );
        let prog = scalar_ir::parse(&text).unwrap();
        let errors = scalar_ir::verify(&prog).unwrap_err();
        assert!(
            errors.0.iter().any(|e| e.invariant == 15),
            "{shape} {out}: {errors}"
        );
    }
    // The well-formed since passes.
    let text = format!(
        "program inputs=1 env=1 state=0 sites=1 windows=100\nblock0:\n    \
         guard_input 0, f64, 0\n    v0 = load_input.f64 0\n    v1 = bconst true\n    \
         v2 = since.f64 0, 0, 1, {kind:#x}, v1, v0, v1, v0, site0\n    store_env.f64 0, v2\n    return\n"
    );
    scalar_ir::verify(&scalar_ir::parse(&text).unwrap()).unwrap();
}

/// The verifier refuses an interval no STL operator makes (invariant 15):
/// reversed bounds, no capacity, a Bool window's `min`, or a result of
/// another type than its values'.
#[test]
fn the_verifier_refuses_intervals_no_operator_makes() {
    let bad = [
        ("f64", "2, 1, 0x10300000004", "f64"),
        ("f64", "-1, 1, 0x10300000004", "f64"),
        ("b1", "0, 1, 0x20300000004", "b1"),
        ("f64", "0, 1, 0x10300000004", "b1"),
    ];
    for (arg, shape, out) in bad {
        let text = format!(
            "program inputs=1 env=1 state=0 sites=1 windows=100\nblock0:\n    \
             guard_input 0, {arg}, 0\n    v0 = load_input.{arg} 0\n    \
             v1 = interval.{out} 0, {shape}, v0, site0\n    store_env.{out} 0, v1\n    return\n"
        );
        let prog = scalar_ir::parse(&text).unwrap();
        let errors = scalar_ir::verify(&prog).unwrap_err();
        assert!(
            errors.0.iter().any(|e| e.invariant == 15),
            "{shape} {out}: {errors}"
        );
    }
}
