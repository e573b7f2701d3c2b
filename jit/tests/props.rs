//! Differential property tests: random verified programs, random frames; the JIT must
//! leave exactly what the quickened interpreter leaves (exit word, environment lanes
//! and tags, state lanes, bitwise, NaN payloads included), per row and per batch.

mod common;

use common::programs::{self, Seed, arb_frame, arb_inputs, arb_seed};
use common::rows_done;
use proptest::prelude::*;
use scalar_ir::{BatchBuffers, Exit, FrameBuffers, Program, QuickCode};

fn arb_program() -> impl Strategy<Value = (Vec<Seed>, u8)> {
    (prop::collection::vec(arb_seed(), 1..48), any::<u8>())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_programs_jit_equals_quickened(
        (seeds, end) in arb_program(),
        frames in prop::collection::vec(arb_frame(), 1..5),
    ) {
        let prog = programs::program(&seeds, end);
        let mut quick = QuickCode::compile(&prog).expect("generated programs verify");
        let native = jit::compile(&prog).expect("the JIT compiles every verified program");
        for start in &frames {
            common::assert_same(&mut quick, native.main(), &prog, start);
        }
    }

    #[test]
    fn batch_equals_row_loop_equals_quickened_batch(
        (seeds, end) in arb_program(),
        start in arb_frame(),
        rows in prop::collection::vec(arb_inputs(), 0..12),
        out_slots in prop::collection::vec(0..programs::ENV, 0..6),
    ) {
        let prog = programs::program(&seeds, end);
        let mut quick = QuickCode::compile(&prog).expect("generated programs verify");
        let native = jit::compile(&prog).expect("the JIT compiles every verified program");
        let f = native.main();
        let mut batch = BatchBuffers::new(&prog.decl, rows.len(), out_slots.clone());
        for (r, row) in rows.iter().enumerate() {
            for (slot, &v) in row.iter().enumerate() {
                batch.set_input(r, slot, v);
            }
        }

        // Reference 1: the quickened batch loop.
        let mut q_fb = start.clone();
        let mut q_batch = batch.clone();
        let q_exit = quick.run_batch(&mut q_fb, &mut q_batch);

        // Reference 2: the JIT's row kernel, one call per row.
        let (loop_fb, loop_exit, loop_outs) = row_loop(&prog, &start, &batch, |fb| f.run(fb));
        prop_assert_eq!(loop_exit, q_exit);
        prop_assert_eq!(&loop_fb, &q_fb);
        prop_assert_eq!(loop_outs.len(), q_batch.done);

        // The JIT's batch kernel.
        let mut n_fb = start.clone();
        let mut n_batch = batch.clone();
        let n_exit = f.run_batch(&mut n_fb, &mut n_batch);
        prop_assert_eq!(n_exit, q_exit);
        prop_assert_eq!(&n_fb, &q_fb);
        prop_assert_eq!(&n_batch, &q_batch);
        for (r, outs) in loop_outs.iter().enumerate() {
            for (j, &want) in outs.iter().enumerate() {
                prop_assert_eq!(n_batch.output(r, j).encode(), want.encode());
            }
        }

        // The JIT's batch kernel for these outputs, which may keep slots in
        // registers across rows: it leaves exactly the same.
        let known = jit::compile_for_outputs(&prog, &out_slots)
            .expect("the JIT compiles every verified program");
        let mut k_fb = start.clone();
        let mut k_batch = batch.clone();
        let k_exit = known.main().run_batch(&mut k_fb, &mut k_batch);
        prop_assert_eq!(k_exit, q_exit);
        prop_assert_eq!(&k_fb, &q_fb);
        prop_assert_eq!(rows_done(&k_batch), rows_done(&q_batch));
    }
}

proptest! {
    // Most generated programs branch (and are not split): many cases, so
    // that a hundred or so one-block ones are split each run.
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// A one-block program split into chunks of `chunk` instructions (as
    /// a program longer than `jit::MAX_FUNCTION_INSTS` is) leaves what the
    /// interpreter leaves, wherever the chunks begin and end.
    #[test]
    fn random_programs_split_into_chunks_equal_quickened(
        (seeds, end) in arb_program(),
        frames in prop::collection::vec(arb_frame(), 1..5),
        chunk in 1usize..16,
    ) {
        let prog = programs::program(&seeds, end);
        let mut quick = QuickCode::compile(&prog).expect("generated programs verify");
        let mut module = jit::JitModule::new().expect("the host runs Cranelift");
        module.split_at(chunk);
        let h = module.compile_row(&prog).expect("the JIT compiles every verified program");
        let code = module.finalize().expect("finalizes");
        for start in &frames {
            let want = common::run_quick(&mut quick, start);
            let got = common::run_native(code.func(h), start);
            prop_assert_eq!(got, want);
        }
    }
}

/// Runs a batch as a loop of single-row runs (the definition of a batch).
fn row_loop(
    prog: &Program,
    start: &FrameBuffers,
    batch: &BatchBuffers,
    mut run: impl FnMut(&mut FrameBuffers) -> Exit,
) -> (FrameBuffers, Exit, Vec<Vec<scalar_ir::Slot>>) {
    let mut fb = start.clone();
    let mut outs = Vec::new();
    for r in 0..batch.rows {
        for slot in 0..prog.decl.inputs as usize {
            fb.set_input(slot, batch.input_at(r, slot));
        }
        let exit = run(&mut fb);
        if exit != Exit::Return {
            fb.inputs = start.inputs.clone();
            fb.input_tags = start.input_tags.clone();
            return (fb, exit, outs);
        }
        outs.push(
            batch
                .out_slots
                .iter()
                .map(|&s| fb.env(s as usize))
                .collect(),
        );
        fb.step = fb.step.wrapping_add(1);
    }
    fb.inputs = start.inputs.clone();
    fb.input_tags = start.input_tags.clone();
    fb.status = 0;
    (fb, Exit::Return, outs)
}

/// The batch kernel for known outputs must really carry slots and rings of
/// one lane in registers, and its batches must stop midway (declines and
/// traps) with them carried, or the comparison above passes on the generic
/// kernel alone.
#[test]
fn carried_batches_are_generated_and_stop_midway() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut carrying, mut stopped) = (0, 0);
    let (mut ringing, mut ring_stopped) = (0, 0);
    let (mut sharing_slots, mut sharing_rings, mut sharing_inputs) = (0, 0, 0);
    for _ in 0..2000 {
        let (seeds, end) = arb_program().new_tree(&mut runner).unwrap().current();
        let start = arb_frame().new_tree(&mut runner).unwrap().current();
        let rows = prop::collection::vec(arb_inputs(), 2..12)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let prog = programs::program(&seeds, end);
        let (slots, rings) = (jit::carried_slots(&prog), jit::carried_rings(&prog));
        if slots.is_empty() && rings.is_empty() {
            continue;
        }
        carrying += usize::from(!slots.is_empty());
        ringing += usize::from(!rings.is_empty());
        let shares = jit::carried_sharing(&prog, &slots, &rings);
        sharing_slots += usize::from(shares.iter().any(|s| matches!(s, jit::Share::Slot(_))));
        sharing_rings += usize::from(shares.iter().any(|s| matches!(s, jit::Share::Ring(_))));
        sharing_inputs += usize::from(shares.iter().any(|s| matches!(s, jit::Share::Input(_))));
        let mut batch = BatchBuffers::new(&prog.decl, rows.len(), vec![0]);
        for (r, row) in rows.iter().enumerate() {
            for (slot, &v) in row.iter().enumerate() {
                // The last row's inputs are absent: a guard there declines.
                let v = if r + 1 == rows.len() {
                    scalar_ir::Slot::Absent
                } else {
                    v
                };
                batch.set_input(r, slot, v);
            }
        }
        let mut quick = QuickCode::compile(&prog).unwrap();
        let (mut q_fb, mut q_batch) = (start.clone(), batch.clone());
        let q_exit = quick.run_batch(&mut q_fb, &mut q_batch);
        // Slots carried in registers, and (none allowed there) lanes stored
        // with tags left for the exit.
        for in_registers in [usize::MAX, 0] {
            let mut m = jit::JitModule::new().unwrap();
            m.compile_for_outputs_carrying(&prog, &[0], in_registers)
                .unwrap();
            let known = m.finalize().unwrap();
            let (mut fb, mut batch) = (start.clone(), batch.clone());
            let exit = known.main().run_batch(&mut fb, &mut batch);
            assert_eq!(
                (exit, &fb, rows_done(&batch)),
                (q_exit, &q_fb, rows_done(&q_batch))
            );
            if exit != Exit::Return && batch.done > 0 {
                stopped += usize::from(!slots.is_empty());
                ring_stopped += usize::from(!rings.is_empty());
            }
        }
    }
    eprintln!(
        "{carrying} programs carry slots, {stopped} batches stopped after a row; \
         {ringing} carry rings, {ring_stopped} stopped; \
         {sharing_slots} share a slot's register, {sharing_rings} a ring's, \
         {sharing_inputs} keep a slot in the input batch"
    );
    assert!(
        carrying > 100 && stopped > 20 && ringing > 15 && ring_stopped > 5 && sharing_inputs > 20,
        "{carrying} carrying, {stopped} stopped; {ringing} carrying rings, {ring_stopped} stopped"
    );
}

/// Every superinstruction of the quickened pair pass must be made from the
/// random programs, or the comparisons above pass without running it.
#[test]
fn every_pair_superinstruction_is_generated() {
    use proptest::strategy::ValueTree;
    use scalar_ir::quick::{Op, PAIR_OPCODES};
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut seen = [0usize; PAIR_OPCODES.len()];
    for _ in 0..2000 {
        let (seeds, end) = arb_program().new_tree(&mut runner).unwrap().current();
        let prog = programs::program(&seeds, end);
        let quick = QuickCode::compile(&prog).expect("generated programs verify");
        for (k, op) in PAIR_OPCODES.iter().enumerate() {
            seen[k] += usize::from(quick.code().ops.iter().map(Op::opcode).any(|o| o == *op));
        }
    }
    let rare: Vec<_> = (PAIR_OPCODES.iter().zip(seen))
        .filter(|&(_, n)| n < 20)
        .collect();
    assert!(
        rare.is_empty(),
        "made in fewer than 20 of 2,000 programs: {rare:?}"
    );
}

/// A running sum (vigil's `z = default(z[1], 0) + x`) keeps its ring of one
/// lane in a register across a batch, and its slots in the registers they
/// share: stopped by an overflow, by an absent input, or run to its end,
/// from a fresh or a filled ring, the batch leaves the state, environment
/// and outputs the quickened batch leaves.
#[test]
fn a_ring_carried_in_a_register_leaves_what_memory_would() {
    let prog = scalar_ir::parse(
        "program inputs=1 env=4 state=1 sites=1
block0:
    guard_input 0, i64, 0
    v0 = load_input.i64 0
    store_env.i64 0, v0
    v1 = ring_load.i64 0, 1
    store_env.i64 2, v1
    store_env.i64 3, v1
    v2 = iadd_ck v1, v0, site0
    store_env.i64 1, v2
    v3 = load_env.i64 1
    ring_store.i64 0, 1, v3
    return
",
    )
    .expect("the program parses");
    assert_eq!(jit::carried_rings(&prog), vec![(0, scalar_ir::Type::I64)]);
    // Slot 0 (the input `x`) is in the input batch; slots 2 and 3 (`z[1]`
    // as two nodes) share a register, and slot 1 (`z`, read back to be
    // pushed, as a whole-row program does) the ring's.
    let slots = jit::carried_slots(&prog);
    assert_eq!(
        jit::carried_sharing(&prog, &slots, &jit::carried_rings(&prog)),
        [
            jit::Share::Input(0),
            jit::Share::Own,
            jit::Share::Slot(1),
            jit::Share::Ring(0)
        ]
    );
    let known = jit::compile_for_outputs(&prog, &[1, 2]).unwrap();
    let (max, absent) = (Some(i64::MAX), None);
    let batches: [&[Option<i64>]; 4] = [
        &[Some(1), Some(2), Some(3), Some(4)],
        &[Some(1), Some(2), max, Some(4)],
        &[Some(5), Some(6), absent, Some(4)],
        &[max],
    ];
    for rows in batches {
        for ring in [0, 40] {
            let mut start = FrameBuffers::new(&prog.decl);
            start.set_state_i64(0, ring);
            start.step = 7;
            let mut batch = BatchBuffers::new(&prog.decl, rows.len(), vec![1, 2]);
            for (r, x) in rows.iter().enumerate() {
                batch.set_input(
                    r,
                    0,
                    x.map_or(scalar_ir::Slot::Absent, scalar_ir::Slot::I64),
                );
            }
            let mut quick = QuickCode::compile(&prog).unwrap();
            let (mut q_fb, mut q_batch) = (start.clone(), batch.clone());
            let q_exit = quick.run_batch(&mut q_fb, &mut q_batch);
            let (mut fb, mut n_batch) = (start.clone(), batch.clone());
            let exit = known.main().run_batch(&mut fb, &mut n_batch);
            assert_eq!(
                (exit, &fb, rows_done(&n_batch)),
                (q_exit, &q_fb, rows_done(&q_batch)),
                "{rows:?}, ring {ring}"
            );
        }
    }
}
