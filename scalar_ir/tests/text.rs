//! Text form: every instruction round-trips, printing is stable, parse errors are located.

use expect_test::expect;
use scalar_ir::*;

/// A program that uses every instruction kind at least once.
fn every_instruction() -> Program {
    let mut b = FunctionBuilder::new(Decl {
        inputs: 2,
        env: 2,
        state: 4,
        sites: 3,
        windows: 0,
    });
    let entry = b.create_block();
    let then_b = b.create_block();
    let join = b.create_block();
    let p = b.append_block_param(join, Type::F64);
    b.switch_to_block(entry);
    b.guard_input(0, Type::I64, 1);
    b.guard_env(1, Type::F64, 2);
    let x = b.load_input(Type::I64, 0);
    let e = b.load_env(Type::F64, 1);
    let c1 = b.iconst(-9_223_372_036_854_775_808);
    let f1 = b.fconst(f64::from_bits(0xfff8_0000_0000_0042));
    let f2 = b.fconst(1e-310);
    let t = b.bconst(true);
    let mut ints = vec![x, c1];
    for op in CkBinOp::ALL {
        let v = b.binary_ck(*op, x, c1, 0);
        ints.push(v);
    }
    let n = b.ineg_ck(x, 1);
    let a = b.iabs_ck(n, 2);
    let m = b.imin(a, x);
    let _ = b.imax(m, x);
    let mut fl = e;
    for op in BinOp::ALL {
        if op.operand_types()[0] == Type::F64 {
            fl = b.binary(*op, fl, f2);
        }
    }
    for op in UnOp::ALL {
        match op.operand_types()[0] {
            Type::F64 => fl = b.unary(*op, fl),
            Type::I64 => {
                let cvt = b.unary(*op, x);
                fl = b.fadd(fl, cvt);
            }
            Type::B1 => {
                let _ = b.unary(*op, t);
            }
        }
    }
    let bb = b.band(t, t);
    let bo = b.bor(bb, t);
    let bx = b.bxor(bo, t);
    for cond in Cond::ALL {
        let _ = b.icmp(cond, x, c1);
        let _ = b.fcmp(cond, fl, f1);
        let _ = b.bcmp(cond, bx, t);
    }
    let s = b.select(Type::F64, bx, fl, f1);
    let st = b.load_state(Type::B1, 0);
    b.store_state(Type::B1, 0, st);
    let r = b.ring_load(Type::F64, 1, 3);
    b.ring_store(Type::F64, 1, 3, r);
    b.store_env(Type::F64, 0, s);
    b.brif(bx, then_b, &[], join, &[s]);
    b.switch_to_block(then_b);
    b.jump(join, &[f1]);
    b.switch_to_block(join);
    let z = b.fcmp(Cond::Eq, p, p);
    let exit1 = b.create_block();
    let exit2 = b.create_block();
    b.brif(z, exit1, &[], exit2, &[]);
    b.switch_to_block(exit1);
    b.decline(7);
    b.switch_to_block(exit2);
    let _ = b.iconst(0);
    b.trap(TrapKind::DivByZero, 2);
    b.finish()
}

#[test]
fn every_instruction_round_trips() {
    let p = every_instruction();
    verify(&p).unwrap_or_else(|e| panic!("{e}\n{}", print(&p)));
    let text = print(&p);
    let q = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(q == p, "round trip differs:\n{text}\n{}", print(&q));
    assert_eq!(print(&q), text);
    // Every mnemonic appears in the text.
    for op in BinOp::ALL {
        assert!(text.contains(&format!(" {} ", op.name())), "{}", op.name());
    }
    for op in UnOp::ALL {
        assert!(text.contains(&format!(" {} ", op.name())), "{}", op.name());
    }
    assert!(text.contains("nan(0xfff8000000000042)"));
    assert!(text.contains("1e-310"));
}

#[test]
fn printed_form_snapshot() {
    let p = parse(
        "program inputs=1 env=1 state=0 sites=1 ; header
block0:
    guard_input 0, i64, 1   ; a guard
    v0 = load_input.i64 0
    v7 = fconst -0.0
    v1 = iconst 2
    v2 = imul_ck v0, v1, site0
    store_env.i64 0, v2
    return
",
    )
    .expect("parses");
    expect![[r#"
        program inputs=1 env=1 state=0 sites=1
        block0:
            guard_input 0, i64, 1
            v0 = load_input.i64 0
            v7 = fconst -0.0
            v1 = iconst 2
            v2 = imul_ck v0, v1, site0
            store_env.i64 0, v2
            return
    "#]]
    .assert_eq(&print(&p));
}

fn parse_err(text: &str) -> String {
    parse(text).expect_err("must not parse").to_string()
}

#[test]
fn parse_errors_are_located() {
    let h = "program inputs=1 env=1 state=1 sites=1\n";
    assert_eq!(
        parse_err(""),
        "1:1: expected `program inputs=N env=N state=N sites=N`"
    );
    assert_eq!(
        parse_err("program inputs=1 env=1 state=1\n"),
        "1:31: missing declaration `sites=N`"
    );
    assert_eq!(
        parse_err("program inputs=x\n"),
        "1:16: expected a count, found `x`"
    );
    assert_eq!(
        parse_err(&format!("{h}    return\n")),
        "2:5: expected a block header before instructions"
    );
    assert_eq!(
        parse_err(&format!("{h}block0:\n    frob v1\n")),
        "3:5: unknown instruction `frob`"
    );
    assert_eq!(
        parse_err(&format!("{h}block0:\n    v0 = iadd_ck v1, v2\n")),
        "3:24: expected `,`"
    );
    assert_eq!(
        parse_err(&format!(
            "{h}block0:\n    store_env.i64 0, v9\n    return\n"
        )),
        "3:22: use of undefined value v9"
    );
    assert_eq!(
        parse_err(&format!("{h}block0:\n    jump block4\n")),
        "3:10: reference to undefined block block4"
    );
    assert_eq!(
        parse_err(&format!(
            "{h}block0:\n    v0 = iconst 1\n    v0 = iconst 2\n"
        )),
        "4:5: value v0 is defined twice"
    );
    assert_eq!(
        parse_err(&format!("{h}block0:\n    v0 = load_input 0\n")),
        "3:10: `load_input` needs a type suffix"
    );
    assert_eq!(
        parse_err(&format!("{h}block0:\n    v0 = load_input.i32 0\n")),
        "3:21: unknown type suffix `i32`"
    );
    assert_eq!(
        parse_err(&format!("{h}block0:\n    v0 = fconst NaN\n")),
        "3:17: expected an f64 literal or `nan(0x…)`, found `NaN`"
    );
    assert_eq!(
        parse_err(&format!("{h}block0:\n    v0 = return\n")),
        "3:5: `return` produces no result"
    );
    assert_eq!(
        parse_err(&format!("{h}block0:\n    iconst 3\n")),
        "3:5: `iconst` needs a result value"
    );
    assert_eq!(
        parse_err(&format!("{h}block0:\n    return extra\n")),
        "3:12: unexpected text after instruction"
    );
    assert_eq!(
        parse_err(&format!("{h}block0:\n    v0 = icmp.lx v1, v1\n")),
        "3:15: unknown condition `lx`"
    );
    assert_eq!(
        parse_err(&format!("{h}block0:\n    trap boom, site0\n")),
        "3:10: unknown trap kind `boom`"
    );
    assert_eq!(
        parse_err(&format!("{h}block0:\n    return\nblock0:\n    return\n")),
        "4:1: block0 is defined twice"
    );
    assert_eq!(
        parse_err(&format!("{h}block0(v0 i64):\n    return\n")),
        "2:11: expected `:`"
    );
    assert_eq!(
        parse_err(&format!(
            "{h}block0:\n    v0 = iconst 99999999999999999999\n"
        )),
        "3:17: expected an i64 literal, found `99999999999999999999`"
    );
}

#[test]
fn garbage_never_panics() {
    // A crude fuzz: every prefix and some mutations of a valid program.
    let text = print(&every_instruction());
    for cut in (0..text.len()).filter(|&i| text.is_char_boundary(i)) {
        let _ = parse(&text[..cut]);
    }
    for (i, c) in text.char_indices().step_by(7) {
        for rep in ["", "(", ",", "v", "é", "-", "0x", " "] {
            let mut t = text.clone();
            t.replace_range(i..i + c.len_utf8(), rep);
            if let Ok(p) = parse(&t) {
                let _ = verify(&p);
            }
        }
    }
}

/// `without_input_guards` drops every `guard_input` from the layout (and
/// nothing else), and `input_guards` lists them in layout order.
#[test]
fn input_guards_are_listed_and_dropped() {
    let text = "program inputs=2 env=2 state=0 sites=1
block0:
    guard_input 0, i64, 0
    guard_env 1, f64, 1
    guard_input 1, f64, 2
    v0 = load_input.i64 0
    store_env.i64 0, v0
    return
";
    let prog = parse(text).expect("the program parses");
    assert_eq!(
        prog.input_guards(),
        [
            InputGuard {
                slot: 0,
                ty: Type::I64
            },
            InputGuard {
                slot: 1,
                ty: Type::F64
            }
        ]
    );
    let bare = prog.without_input_guards();
    verify(&bare).expect("the program without its guards verifies");
    assert!(bare.input_guards().is_empty());
    expect![[r#"
        program inputs=2 env=2 state=0 sites=1
        block0:
            guard_env 1, f64, 1
            v0 = load_input.i64 0
            store_env.i64 0, v0
            return
    "#]]
    .assert_eq(&print(&bare));
}
