//! Compiling and dropping native plans must not leak: resident memory stays flat over 10,000 plans.

use vigil::{Monitor, Spec, Tier, Value};

/// Resident set size in bytes, from `/proc/self/statm` (Linux).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Resident memory is per process and the other tests of this binary run
/// beside this one, so the measurement runs in a child process that does
/// nothing else: this test re-runs its own binary with `VIGIL_MEMORY_CHILD`.
#[test]
fn ten_thousand_native_plans_do_not_grow_resident_memory() {
    if std::env::var_os("VIGIL_MEMORY_CHILD").is_some() {
        return measure_in_child();
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "memory::ten_thousand_native_plans_do_not_grow_resident_memory",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("VIGIL_MEMORY_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stderr}");
    if let Some(line) = stderr.lines().find(|l| l.starts_with("resident memory:")) {
        eprintln!("{line}");
    }
}

fn measure_in_child() {
    let spec = Spec::parse(
        "leak.dsrv",
        "in x: Int\nin y: Int\nout z: Int\nout s: Int\nz = x + y\ns = default(s[1], 0) + z\n",
    )
    .unwrap();
    let build_and_run = || {
        let mut m = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
        assert_eq!(m.tier(), Tier::NativeWhole);
        m.step(&[Some(Value::Int(1)), Some(Value::Int(2))]).unwrap();
    };
    // Warm up allocator pools and Cranelift's lazily built tables first.
    for _ in 0..200 {
        build_and_run();
    }
    let Some(before) = resident_bytes() else {
        eprintln!("no /proc/self/statm here: resident memory cannot be measured");
        return;
    };
    for _ in 0..10_000 {
        build_and_run();
    }
    let after = resident_bytes().unwrap();
    let growth = after.saturating_sub(before);
    eprintln!("resident memory: {before} -> {after} bytes over 10,000 plans");
    // A leaked module costs at least a page of code per plan (40 MB here).
    assert!(growth < 8 << 20, "resident memory grew by {growth} bytes");
}
