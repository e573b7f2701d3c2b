//! One failing program per verifier invariant, each rejected with the expected message.

use scalar_ir::*;

fn errors(prog: &Program) -> String {
    match verify(prog) {
        Ok(()) => panic!("program verified:\n{}", print(prog)),
        Err(e) => e.to_string(),
    }
}

fn rejects(text: &str, expected: &str) {
    let prog = parse(text).unwrap_or_else(|e| panic!("test program does not parse: {e}"));
    let msg = errors(&prog);
    assert!(msg.contains(expected), "expected `{expected}` in:\n{msg}");
}

fn ok_program() -> Program {
    parse(
        "program inputs=1 env=1 state=0 sites=1
block0:
    v0 = load_input.i64 0
    v1 = iconst 1
    v2 = iadd_ck v0, v1, site0
    store_env.i64 0, v2
    return
",
    )
    .expect("parses")
}

#[test]
fn valid_program_verifies() {
    assert_eq!(verify(&ok_program()), Ok(()));
}

#[test]
fn inv1_empty_layout() {
    let p = Program::new(Decl::default());
    assert_eq!(
        errors(&p),
        "program: invariant 1: the program has no entry block"
    );
}

#[test]
fn inv1_block_twice_in_layout() {
    let mut p = ok_program();
    p.layout.blocks.push(Block(0));
    assert_eq!(
        errors(&p),
        "block0: invariant 1: block0 appears twice in the layout"
    );
}

#[test]
fn inv2_instruction_in_two_blocks() {
    let mut p = ok_program();
    let b1 = p.create_block();
    p.append_block(b1);
    let ret = p.layout.insts[0][4];
    p.append_inst(b1, ret);
    assert_eq!(
        errors(&p),
        "block1, inst4 `return`: invariant 2: inst4 is already placed in block0"
    );
}

#[test]
fn inv3_missing_terminator() {
    rejects(
        "program inputs=0 env=0 state=0 sites=0
block0:
    v0 = iconst 1
",
        "block0, inst0 `v0 = iconst 1`: invariant 3: block0 does not end with a terminator",
    );
}

#[test]
fn inv3_terminator_before_end() {
    rejects(
        "program inputs=0 env=0 state=0 sites=0
block0:
    return
    decline 1
",
        "block0, inst0 `return`: invariant 3: terminator before the end of the block",
    );
}

#[test]
fn inv3_empty_block() {
    rejects(
        "program inputs=0 env=0 state=0 sites=0
block0:
    jump block1
block1:
",
        "block1: invariant 3: block1 is empty",
    );
}

#[test]
fn inv4_entry_params() {
    rejects(
        "program inputs=0 env=0 state=0 sites=0
block0(v0: i64):
    return
",
        "block0: invariant 4: the entry block has parameters",
    );
}

#[test]
fn inv5_branch_to_entry() {
    rejects(
        "program inputs=0 env=0 state=0 sites=0
block0:
    jump block1
block1:
    jump block0
",
        "block1, inst1 `jump block0`: invariant 5: branch to the entry block block0",
    );
}

#[test]
fn inv6_argument_count() {
    rejects(
        "program inputs=0 env=0 state=0 sites=0
block0:
    jump block1
block1(v0: i64):
    return
",
        "block0, inst0 `jump block1`: invariant 6: block1 takes 1 arguments but the branch passes 0",
    );
}

#[test]
fn inv6_argument_type() {
    rejects(
        "program inputs=0 env=0 state=0 sites=0
block0:
    v0 = fconst 1.0
    jump block1(v0)
block1(v1: i64):
    return
",
        "invariant 6: argument 0 to block1 is v0 of type f64, but parameter v1 has type i64",
    );
}

#[test]
fn inv6_target_not_in_layout() {
    let mut p = ok_program();
    let b1 = p.create_block();
    let last = p.layout.insts[0].pop().expect("has a return");
    let _ = last;
    let j = p.make_inst(InstData::Jump {
        dest: BlockCall {
            block: b1,
            args: vec![],
        },
    });
    p.append_inst(Block(0), j);
    assert!(errors(&p).contains("invariant 6: branch to block1, which is not in the layout"));
}

#[test]
fn inv6_target_outside_layout_with_bogus_contents_does_not_panic() {
    let mut p = ok_program();
    let b1 = p.create_block();
    // The detached block holds an instruction number that does not exist.
    p.layout.insts[b1.index()].push(Inst(1000));
    p.layout.insts[0].pop();
    let j = p.make_inst(InstData::Jump {
        dest: BlockCall {
            block: b1,
            args: vec![],
        },
    });
    p.append_inst(Block(0), j);
    assert!(errors(&p).contains("invariant 6: branch to block1, which is not in the layout"));
}

#[test]
fn inv7_undefined_operand() {
    let mut p = ok_program();
    // Detach the constant from the layout: its result is no longer defined.
    p.layout.insts[0].remove(1);
    assert_eq!(
        errors(&p),
        "block0, inst2 `v2 = iadd_ck v0, v1, site0`: invariant 7: v1 is not defined by any laid-out instruction or block"
    );
}

#[test]
fn inv7_value_out_of_table() {
    let mut p = ok_program();
    if let InstData::StoreEnv { arg, .. } = &mut p.insts[3] {
        *arg = Value(99);
    }
    assert!(errors(&p).contains("invariant 7: v99 does not exist"));
}

#[test]
fn inv8_use_before_definition() {
    rejects(
        "program inputs=0 env=1 state=0 sites=0
block0:
    store_env.i64 0, v0
    v0 = iconst 1
    return
",
        "block0, inst0 `store_env.i64 0, v0`: invariant 8: v0 (defined in block0) does not dominate this use",
    );
}

#[test]
fn inv8_definition_in_sibling_branch() {
    rejects(
        "program inputs=0 env=1 state=0 sites=0
block0:
    v0 = bconst true
    brif v0, block1, block2
block1:
    v1 = iconst 1
    jump block3
block2:
    jump block3
block3:
    store_env.i64 0, v1
    return
",
        "block3, inst5 `store_env.i64 0, v1`: invariant 8: v1 (defined in block1) does not dominate this use",
    );
}

#[test]
fn inv9_operand_type() {
    rejects(
        "program inputs=0 env=0 state=0 sites=1
block0:
    v0 = fconst 1.5
    v1 = iadd_ck v0, v0, site0
    return
",
        "invariant 9: v0 has type f64 but i64 is required",
    );
}

#[test]
fn inv9_branch_condition_type() {
    rejects(
        "program inputs=0 env=0 state=0 sites=0
block0:
    v0 = iconst 1
    brif v0, block1, block1
block1:
    return
",
        "block0, inst1 `brif v0, block1, block1`: invariant 9: v0 has type i64 but b1 is required",
    );
}

#[test]
fn inv9_result_type() {
    let mut p = ok_program();
    p.values[1].ty = Type::F64;
    assert!(
        errors(&p).contains("invariant 9: result v1 has type f64 but the instruction produces i64")
    );
}

#[test]
fn inv10_input_slot() {
    rejects(
        "program inputs=1 env=0 state=0 sites=0
block0:
    guard_input 1, i64, 0
    return
",
        "invariant 10: input slot 1 is out of range (the program declares inputs=1)",
    );
}

#[test]
fn inv10_env_slot() {
    rejects(
        "program inputs=0 env=2 state=0 sites=0
block0:
    v0 = load_env.f64 2
    return
",
        "invariant 10: env slot 2 is out of range (the program declares env=2)",
    );
}

#[test]
fn inv10_state_lane() {
    rejects(
        "program inputs=0 env=0 state=1 sites=0
block0:
    v0 = iconst 0
    store_state.i64 1, v0
    return
",
        "invariant 10: state lane 1 is out of range (the program declares state=1)",
    );
}

#[test]
fn inv11_ring_length_zero() {
    rejects(
        "program inputs=0 env=0 state=2 sites=0
block0:
    v0 = ring_load.i64 0, 0
    return
",
        "invariant 11: ring length is 0",
    );
}

#[test]
fn inv11_ring_past_state() {
    rejects(
        "program inputs=0 env=0 state=3 sites=0
block0:
    v0 = iconst 0
    ring_store.i64 2, 2, v0
    return
",
        "invariant 11: ring lanes 2..4 exceed the declared state=3",
    );
}

#[test]
fn inv12_trap_site() {
    rejects(
        "program inputs=0 env=0 state=0 sites=1
block0:
    trap overflow, site1
",
        "block0, inst0 `trap overflow, site1`: invariant 12: trap site 1 is out of range (the program declares sites=1)",
    );
}

#[test]
fn inv13_unreachable_block() {
    rejects(
        "program inputs=0 env=0 state=0 sites=0
block0:
    return
block1:
    return
",
        "block1: invariant 13: block1 is unreachable from the entry block",
    );
}

#[test]
fn inv14_table_consistency() {
    let mut p = ok_program();
    p.values[2].def = ValueDef::Result(Inst(0));
    assert!(errors(&p).contains("invariant 14: result v2 does not record inst2 as its definition"));
}

#[test]
fn all_errors_are_reported() {
    let prog = parse(
        "program inputs=0 env=0 state=0 sites=0
block0(v0: i64):
    trap overflow, site3
block1:
    return
",
    )
    .expect("parses");
    let e = verify(&prog).expect_err("invalid");
    let invariants: Vec<u8> = e.0.iter().map(|e| e.invariant).collect();
    assert_eq!(invariants, vec![4, 13, 12]);
}

#[test]
fn inv16_take_input_without_its_guard() {
    // No guard at all, then a guard of another slot, type or input.
    for guard in [
        "",
        "    guard_input_held 0, 1, i64, 0\n",
        "    guard_input_held 0, 0, f64, 0\n",
        "    guard_input_held 1, 0, i64, 0\n",
    ] {
        rejects(
            &format!(
                "program inputs=2 env=2 state=0 sites=0\nblock0:\n{guard}    v0 = take_input.i64 0, 0\n    return\n"
            ),
            "invariant 16: no `guard_input_held 0, 0, i64` comes before it",
        );
    }
    // A guard in the entry block covers a later block; one after the take does not.
    let ok = parse(
        "program inputs=1 env=1 state=0 sites=0
block0:
    guard_input_held 0, 0, i64, 0
    jump block1
block1:
    v0 = take_input.i64 0, 0
    return
",
    )
    .expect("parses");
    assert_eq!(verify(&ok), Ok(()));
    rejects(
        "program inputs=1 env=1 state=0 sites=0
block0:
    v0 = take_input.i64 0, 0
    guard_input_held 0, 0, i64, 0
    return
",
        "invariant 16",
    );
}
