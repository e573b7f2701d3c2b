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
/// The parent requires the child to have run exactly this test and to have
/// reported a measurement, so a filter that matches nothing, or a child that
/// skipped the measurement, fails instead of passing vacuously.
#[cfg(target_os = "linux")]
#[test]
fn ten_thousand_native_plans_do_not_grow_resident_memory() {
    const NAME: &str = "memory::ten_thousand_native_plans_do_not_grow_resident_memory";
    if std::env::var_os("VIGIL_MEMORY_CHILD").is_some() {
        return measure_in_child();
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env("VIGIL_MEMORY_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stderr}");
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "the child did not run exactly this test:\n{stdout}"
    );
    let line = stderr
        .lines()
        .find(|l| l.starts_with("resident memory:"))
        .unwrap_or_else(|| panic!("the child reported no measurement:\n{stderr}"));
    let growth = parse_growth(line).unwrap_or_else(|| panic!("unreadable report `{line}`"));
    eprintln!("{line}");
    assert!(growth < 8 << 20, "resident memory grew by {growth} bytes");
}

/// The growth in bytes from the child's `resident memory: A -> B bytes …` line.
fn parse_growth(line: &str) -> Option<u64> {
    let mut words = line.split_whitespace().skip(2);
    let before: u64 = words.next()?.parse().ok()?;
    let after: u64 = words.nth(1)?.parse().ok()?;
    Some(after.saturating_sub(before))
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
    // Linux always has `/proc/self/statm`; without it this test measures nothing.
    let before = resident_bytes().expect("/proc/self/statm is readable on Linux");
    for _ in 0..10_000 {
        build_and_run();
    }
    let after = resident_bytes().expect("/proc/self/statm is readable on Linux");
    // A leaked module costs at least a page of code per plan (40 MB here); the
    // parent checks the figure.
    eprintln!("resident memory: {before} -> {after} bytes over 10,000 plans");
}

#[test]
fn growth_is_read_from_the_childs_report() {
    assert_eq!(
        parse_growth("resident memory: 100 -> 4196 bytes over 10,000 plans"),
        Some(4096)
    );
    assert_eq!(parse_growth("resident memory: soon"), None);
}
