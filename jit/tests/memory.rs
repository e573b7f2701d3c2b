//! Dropping compiled code frees it: compiling and dropping 10,000 small modules must not
//! grow resident memory beyond a small bound. (Dropping a `JITModule` alone would leak
//! every module's code pages, at least 4 KiB each: 40 MB here.)
//!
//! Its own test binary, so no other test's allocations run concurrently.

use scalar_ir::{Exit, FrameBuffers, Slot};

/// Resident set size in bytes, from `/proc/self/statm` (Linux).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[test]
fn ten_thousand_modules_compile_and_free() {
    let prog = scalar_ir::parse(
        "program inputs=2 env=1 state=0 sites=1
block0:
    guard_input 0, i64, 0
    v0 = load_input.i64 0
    guard_input 1, i64, 1
    v1 = load_input.i64 1
    v2 = iadd_ck v0, v1, site0
    store_env.i64 0, v2
    return
",
    )
    .unwrap();
    let round = |i: i64| {
        let code = jit::compile(&prog).expect("compiles");
        let mut f = FrameBuffers::new(&prog.decl);
        f.set_input(0, Slot::I64(i));
        f.set_input(1, Slot::I64(1));
        assert_eq!(code.main().run(&mut f), Exit::Return);
        assert_eq!(f.env(0), Slot::I64(i + 1));
    };
    // Warm up allocator pools and lazily initialised state before measuring.
    for i in 0..500 {
        round(i);
    }
    let Some(before) = resident_bytes() else {
        eprintln!("no /proc/self/statm: skipping the resident-memory check");
        return;
    };
    for i in 0..10_000 {
        round(i);
    }
    let after = resident_bytes().expect("statm readable");
    let growth = after.saturating_sub(before);
    eprintln!("resident before {before} B, after {after} B, growth {growth} B");
    assert!(
        growth < 8 << 20,
        "resident memory grew by {growth} bytes over 10,000 modules"
    );
}
