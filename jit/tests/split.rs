//! Programs longer than one native function holds (`jit::MAX_FUNCTION_INSTS`):
//! the row kernel is compiled as chunks called in order, no function holds more
//! than the bound, and every exit (a guard in the first chunk, an overflow in a
//! late one, a return) leaves exactly what the quickened interpreter leaves.

mod common;

use common::{run_native, run_quick};
use scalar_ir::frame::tag;
use scalar_ir::*;

/// A whole-row program of `n` streams, as lowering makes one: two guarded
/// inputs, then per stream a checked add chained to the stream before, a
/// select on a comparison made once at the start (its flag crosses every
/// chunk), a ring read and push, and an Int and a Float store.
fn long_program(n: u32) -> Program {
    let mut fb = FunctionBuilder::new(Decl {
        inputs: 2,
        env: 2 * n,
        state: n,
        sites: n,
        windows: 0,
    });
    let b0 = fb.create_block();
    fb.switch_to_block(b0);
    fb.guard_input(0, Type::I64, 0);
    fb.guard_input(1, Type::F64, 1);
    let x = fb.load_input(Type::I64, 0);
    let f = fb.load_input(Type::F64, 1);
    let zero = fb.iconst(0);
    let negative = fb.icmp(Cond::Lt, x, zero);
    let mut acc = zero;
    for i in 0..n {
        let prev = fb.ring_load(Type::I64, i, 1);
        let s = fb.iadd_ck(acc, x, i);
        let v = fb.select(Type::I64, negative, prev, s);
        fb.store_env(Type::I64, i, v);
        let k = fb.fconst(f64::from(i) + 0.5);
        let g = fb.binary(BinOp::Fmul, f, k);
        fb.store_env(Type::F64, n + i, g);
        fb.ring_store(Type::I64, i, 1, s);
        acc = s;
    }
    fb.ret();
    fb.finish()
}

fn frame(prog: &Program, x: (u8, u64), f: (u8, f64)) -> FrameBuffers {
    let mut fb = FrameBuffers::new(&prog.decl);
    fb.input_tags[0] = x.0;
    fb.inputs[0] = x.1;
    fb.input_tags[1] = f.0;
    fb.inputs[1] = f.1.to_bits();
    for (k, lane) in fb.state.iter_mut().enumerate() {
        *lane = k as u64 * 7;
    }
    fb.step = 3;
    fb
}

#[test]
fn a_long_program_is_compiled_in_bounded_chunks_that_agree_with_the_interpreter() {
    let n = 3_000;
    let prog = long_program(n);
    let insts: usize = prog.layout.insts.iter().map(Vec::len).sum();
    assert!(insts > 4 * jit::MAX_FUNCTION_INSTS, "{insts} instructions");
    assert!(!jit::fits_one_function(&prog));
    assert!(jit::row_kernel_chunks(&prog) >= 4);

    let mut module = jit::JitModule::new().expect("host supported");
    let h = module.compile_row(&prog).expect("compiles");
    let code = module.finalize().expect("finalizes");
    assert!(
        code.largest_function() <= jit::MAX_FUNCTION_INSTS,
        "a function of {} instructions",
        code.largest_function()
    );
    let f = code.func(h);
    assert!(f.batch_kernel().is_none());

    let mut quick = QuickCode::compile(&prog).expect("verifies");
    // Overflow at stream 2,500 or so: in the last chunks.
    let big = (i64::MAX / 2_500) as u64;
    let starts = [
        frame(&prog, (tag::I64, 5), (tag::F64, 1.25)),
        frame(&prog, (tag::I64, (-3i64) as u64), (tag::F64, f64::NAN)),
        frame(&prog, (tag::I64, big), (tag::F64, -0.0)),
        frame(&prog, (tag::F64, 5), (tag::F64, 1.0)),
        frame(&prog, (tag::I64, 5), (tag::ABSENT, 1.0)),
    ];
    let mut exits = Vec::new();
    for start in &starts {
        let want = run_quick(&mut quick, start);
        let got = run_native(f, start);
        assert_eq!(got, want, "the split row kernel differs from quickened");
        exits.push(want.exit);
    }
    assert_eq!(exits[0], Exit::Return);
    assert_eq!(exits[1], Exit::Return);
    assert!(matches!(exits[2], Exit::Trap(TrapKind::Overflow, s) if s > 2_000));
    assert_eq!(exits[3], Exit::Decline(0));
    assert_eq!(exits[4], Exit::Decline(1));

    // A batch kernel holds the whole program in one loop: declined.
    assert!(matches!(
        jit::compile(&prog),
        Err(jit::CompileError::Unsupported(_))
    ));
}
