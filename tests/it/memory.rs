//! Memory: compiling and dropping native plans must not leak (resident memory stays flat over
//! 10,000 plans), and a keyed monitor's key costs a few hundred bytes beyond its history.

use vigil::{Key, KeyedMonitor, Monitor, Spec, Tier, Value};

// The counting allocator the keyed bench uses too (its file has no other
// dependency), so the test and the bench measure alike.
#[path = "../../benches/common/counting.rs"]
mod counting;

use counting::{Counting, live};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

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
/// Runs the test `name` of this binary alone in a child process (with
/// `VIGIL_MEMORY_CHILD` set, so it measures instead of spawning) and returns
/// the child's report line starting with `prefix`. The child must have run
/// exactly that test and reported, so a filter that matches nothing, or a
/// child that skipped the measurement, fails instead of passing vacuously.
fn report_of_child(name: &str, prefix: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
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
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("the child reported no measurement:\n{stderr}"));
    eprintln!("{line}");
    line.to_string()
}

fn in_child() -> bool {
    std::env::var_os("VIGIL_MEMORY_CHILD").is_some()
}

/// Resident memory is per process and the other tests of this binary run
/// beside this one, so the measurement runs in a child process.
#[cfg(target_os = "linux")]
#[test]
fn ten_thousand_native_plans_do_not_grow_resident_memory() {
    const NAME: &str = "memory::ten_thousand_native_plans_do_not_grow_resident_memory";
    if in_child() {
        return measure_in_child();
    }
    let line = report_of_child(NAME, "resident memory:");
    let growth = parse_growth(&line).unwrap_or_else(|| panic!("unreadable report `{line}`"));
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

/// The keyed monitor's figure of merit: a 10-stream spec with offsets up to
/// 3 (Int and Float values, holds and `if`), shared with the keyed bench; the
/// measurement declares a Str key before it.
const TEN_STREAMS: &str = include_str!("../../benches/common/ten_streams.dsrv");

/// Live heap bytes per key of a keyed monitor over 100,000 keys, each past
/// its longest offset, measured in a child process by the counting
/// allocator: at most a few hundred bytes beyond the key's history. The
/// figure (397 bytes, 81 of them history, when this test was written) is
/// the key's packed run (`canonical::pack`: the streams' values and holds,
/// the ring table, counts and flags, about 330 bytes for this spec) and its
/// entry in the key map; a whole run per key was 1,137 bytes, and a table of
/// `if`-arm faults over every node made it 4,848.
#[test]
fn a_key_costs_a_few_hundred_bytes_beyond_its_history() {
    const NAME: &str = "memory::a_key_costs_a_few_hundred_bytes_beyond_its_history";
    if in_child() {
        return measure_keys_in_child();
    }
    let line = report_of_child(NAME, "keyed memory:");
    let words: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let [per_key, history, keys] = words[..] else {
        panic!("unreadable report `{line}`");
    };
    assert_eq!(keys, 100_000, "{line}");
    assert!(history > 0, "{line}");
    assert!(per_key - history <= 400, "{line}");
}

fn measure_keys_in_child() {
    let spec = Spec::parse("ten.dsrv", &format!("in host: Str\n{TEN_STREAMS}")).unwrap();
    let mut m = KeyedMonitor::builder(&spec, "host").build().unwrap();
    let names: Vec<String> = (0..100_000).map(|k| format!("host-{k}")).collect();
    let row = |m: &KeyedMonitor, host: &str, i: i64| {
        m.row()
            .set("host", host)
            .unwrap()
            .set("x", i)
            .unwrap()
            .set("y", i as f64 * 0.5)
            .unwrap()
    };
    // One key first, so that what the monitor allocates once (buffers,
    // the table's first growth) is not charged to the keys.
    let r = row(&m, "warm-up", 1);
    m.step(&r).unwrap();
    // The rows are built before the measurement; their strings are shared
    // with the keys (a key holds its `Arc<str>`, not a copy).
    let rows: Vec<_> = names.iter().map(|n| row(&m, n, 1)).collect();
    let before = live();
    // Four rounds: every key past its longest offset (3).
    for i in 0..4 {
        for r in &rows {
            let mut r = r.clone();
            r.assign("x", i).unwrap();
            m.step(&r).unwrap();
        }
    }
    let after = live();
    let per_key = (after - before) as u64 / names.len() as u64;
    let history = m.history_bytes(&Key::new(names[7].as_str())).unwrap();
    assert_eq!(m.key_count(), names.len() + 1);
    eprintln!(
        "keyed memory: {per_key} bytes per key ({history} of them history) over {} keys",
        names.len()
    );
}

/// A 10,000-value count window and a one-hour time window over 10^7 rows
/// at 1 kHz (2.8 hours of time, so the time window slides for most of the
/// run): resident memory after the first million rows stays flat to the
/// end, as the windows' static bounds promise.
#[cfg(target_os = "linux")]
#[test]
fn long_windows_keep_resident_memory_flat() {
    const NAME: &str = "memory::long_windows_keep_resident_memory_flat";
    if !in_child() {
        let line = report_of_child(NAME, "resident memory:");
        let growth = parse_growth(&line).unwrap_or_else(|| panic!("unreadable report `{line}`"));
        assert!(growth < 1 << 20, "resident memory grew by {growth} bytes");
        return;
    }
    let src = "in x: Int\nout s: Int\nout h: Float\nout n: Int\n\
               s = window(x, 10000, sum)\nh = window(x, 1h, avg)\nn = window(x, 1h, count)\n";
    let spec = Spec::parse("w.dsrv", src).unwrap();
    let mut m = Monitor::builder(&spec).tier(Tier::Auto).build();
    let mut before = 0;
    let mut last = Vec::new();
    for r in 0..10_000_000i64 {
        if r == 1_000_000 {
            before = resident_bytes().expect("statm");
        }
        let row = [Some(Value::Int(r % 1000))];
        last = m
            .step_at(vigil::time::Time(r * 1_000_000), row)
            .unwrap()
            .to_vec();
    }
    let after = resident_bytes().expect("statm");
    // The last row: 10,000 values of 0..999 sum to 10 × 499,500. The hour
    // is 100 panes of 36 s; at 9,999.999 s the current pane is the 278th
    // (from 9,972 s), so the window holds the rows from 6,408 s on.
    assert_eq!(last[0], vigil::Sample::Value(Value::Int(4_995_000)));
    assert_eq!(last[2], vigil::Sample::Value(Value::Int(3_592_000)));
    eprintln!("resident memory: {before} -> {after} bytes over 9,000,000 window rows");
}

/// A trace that sends 100,000 distinct strings to a `dynamic` keeps one
/// instance alive, not 100,000: the live heap (the counting allocator, in a
/// child process) after the last string is within a few KiB of what it was
/// after the first thousand, on the quickened tier (each string is planned,
/// fused and lowered when it arrives); and 2,000 strings on the native-whole
/// tier (each compiled by Cranelift) leave resident memory flat, so the
/// native code of dropped instances is freed.
#[test]
fn distinct_dynamic_strings_keep_one_instance_alive() {
    const NAME: &str = "memory::distinct_dynamic_strings_keep_one_instance_alive";
    if in_child() {
        return measure_dynamic_in_child();
    }
    let line = report_of_child(NAME, "dynamic memory:");
    let words: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let [warm, after, started, live, rss_before, rss_after] = words[..] else {
        panic!("unreadable report `{line}`")
    };
    assert_eq!((started, live), (100_000, 1), "{line}");
    assert!(
        after.saturating_sub(warm) < 16 << 10,
        "live heap grew by {} bytes over 99,000 instances",
        after.saturating_sub(warm)
    );
    assert!(
        rss_after.saturating_sub(rss_before) < 8 << 20,
        "resident memory grew by {} bytes over 2,000 native instances",
        rss_after.saturating_sub(rss_before)
    );
}

fn measure_dynamic_in_child() {
    let spec = Spec::parse("dyn.dsrv", "in x: Int\nin s: Str\nout d\nd = dynamic(s)\n").unwrap();
    let row = |i: u64| {
        vec![
            Some(Value::Int(i as i64)),
            Some(Value::from(format!("x + {i}"))),
        ]
    };
    let mut m = Monitor::builder(&spec).tier(Tier::Quickened).build();
    let mut warm = 0;
    for i in 0..100_000u64 {
        let out = m.step(row(i)).unwrap();
        assert_eq!(
            out.to_vec()[0],
            vigil::Sample::Value(Value::Int(2 * i as i64))
        );
        if i == 999 {
            warm = live();
        }
    }
    let after = live();
    let d = m.stats().dynamic.expect("the spec has a dynamic");
    let mut native = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
    for i in 0..200 {
        native.step(row(i)).unwrap();
    }
    let rss_before = resident_bytes().expect("/proc/self/statm is readable on Linux");
    for i in 200..2_200 {
        native.step(row(i)).unwrap();
    }
    let rss_after = resident_bytes().expect("/proc/self/statm is readable on Linux");
    assert_eq!(native.stats().dynamic.map(|d| d.tier), Some("native-whole"));
    eprintln!(
        "dynamic memory: {warm} -> {after} live bytes, {} started, {} live; resident {rss_before} -> {rss_after}",
        d.started, d.live
    );
}

/// A run from a regular file evaluates rows in batches, and a batch holds
/// every output of each of its rows until they are written: 4,096 rows of a
/// spec of 100,000 outputs held 14 GB. A batch now holds about a million
/// cells whatever the spec's width. Here 2,000 outputs over 4,200 rows:
/// 8.4 million cells, a run that peaked at 165 MB before and at 57 MB now
/// (the debug binary).
#[cfg(target_os = "linux")]
#[test]
fn a_wide_spec_keeps_its_batches_bounded() {
    if crate::support::report_peak_if_child() {
        return;
    }
    const OUTPUTS: usize = 2_000;
    let dir = crate::support::test_dir("memory", "wide-batches");
    let mut spec = String::from("in x: Int\n");
    for i in 0..OUTPUTS {
        spec.push_str(&format!("out s{i}: Int\ns{i} = x + {i}\n"));
    }
    let spec = crate::support::write(&dir, "wide.dsrv", spec);
    let trace: String = std::iter::once("x\n".to_string())
        .chain((0..4_200).map(|i| format!("{i}\n")))
        .collect();
    let input = crate::support::write(&dir, "t.csv", trace);
    let (code, peak) = crate::support::peak_rss(
        "memory::a_wide_spec_keeps_its_batches_bounded",
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--tier",
            "canonical",
            "--output",
            "csv",
        ],
    );
    assert_eq!(code, 0);
    let mb = peak as f64 / (1 << 20) as f64;
    eprintln!("{OUTPUTS} outputs: peak resident memory {mb:.1} MB");
    assert!(mb < 100.0, "peak resident memory {mb:.1} MB");
}
