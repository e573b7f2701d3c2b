//! A program the size of a 100-stream specification, shared by the compile-time
//! benchmark and the test that checks it against the quickened tier.

use scalar_ir::*;

/// A program the size of a 100-stream specification: per stream a guarded input, a
/// checked add chaining it to the previous stream, a comparison feeding a select, a
/// one-step ring (an offset), and an environment store.
pub fn hundred_streams() -> Program {
    let n = 100u32;
    let mut fb = FunctionBuilder::new(Decl {
        inputs: n,
        env: n,
        state: n,
        sites: n,
        windows: 0,
    });
    let b0 = fb.create_block();
    fb.switch_to_block(b0);
    let mut acc = fb.iconst(0);
    let zero = fb.iconst(0);
    for i in 0..n {
        fb.guard_input(i, Type::I64, i);
        let x = fb.load_input(Type::I64, i);
        let prev = fb.ring_load(Type::I64, i, 1);
        fb.ring_store(Type::I64, i, 1, x);
        let s = fb.iadd_ck(acc, x, i);
        let neg = fb.icmp(Cond::Lt, s, zero);
        let v = fb.select(Type::I64, neg, prev, s);
        fb.store_env(Type::I64, i, v);
        acc = s;
    }
    fb.ret();
    fb.finish()
}
