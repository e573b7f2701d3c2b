//! Tests of the `vigil` binary: exit statuses, error messages, streaming through a pipe.

use crate::support::{test_dir, vigil, write};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

fn temp_file(name: &str, contents: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("vigil-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, contents).unwrap();
    p
}

fn run(args: &[&str]) -> (i32, String, String) {
    crate::support::run_vigil(args, None)
}

const ADD: &str = "in x: Int\nin y: Int\nout z: Int\nz = x / y\n";

#[test]
fn runs_and_exits_zero() {
    let spec = temp_file("add.dsrv", ADD);
    let trace = temp_file("ok.csv", "x,y\n4,2\n9,3\n");
    let (code, out, err) = run(&[
        "run",
        spec.to_str().unwrap(),
        "--input",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "z[0] = Int(2)\nz[1] = Int(3)\n", "")
    );
}

#[test]
fn runtime_error_keeps_earlier_outputs_and_exits_3() {
    let spec = temp_file("div.dsrv", ADD);
    let trace = temp_file("div.csv", "x,y\n4,2\n1,0\n5,5\n");
    let (code, out, err) = run(&[
        "run",
        spec.to_str().unwrap(),
        "--input",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(code, 3);
    assert_eq!(out, "z[0] = Int(2)\n");
    assert_eq!(
        err,
        "error: integer division by zero in division (stream `z`, step 1)\n"
    );
}

#[test]
fn malformed_trace_keeps_earlier_outputs_and_exits_4() {
    let spec = temp_file("bad.dsrv", ADD);
    let trace = temp_file("bad.csv", "x,y\n4,2\n1,zz\n");
    let (code, out, err) = run(&[
        "run",
        spec.to_str().unwrap(),
        "--input",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(code, 4);
    assert_eq!(out, "z[0] = Int(2)\n");
    assert!(
        err.starts_with("error: ") && err.contains("bad.csv:3:"),
        "{err}"
    );
}

#[test]
fn bad_spec_exits_2_with_located_errors() {
    let spec = temp_file("broken.dsrv", "in x: Int\nout z: Int\nz = x + q\n");
    let (code, out, err) = run(&["check", spec.to_str().unwrap()]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.contains("error: unknown stream `q`") && err.contains("broken.dsrv:3:9"),
        "{err}"
    );
    let (code, _, _) = run(&["run", spec.to_str().unwrap(), "--input", "-"]);
    assert_eq!(code, 2);
}

#[test]
fn missing_files_are_reported() {
    // An unreadable file is an I/O error (status 1), not a faulty spec or trace.
    let (code, _, err) = run(&["check", "/nonexistent/spec.dsrv"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read specification"), "{err}");
    let spec = temp_file("ok.dsrv", ADD);
    let (code, _, err) = run(&[
        "run",
        spec.to_str().unwrap(),
        "--input",
        "/nonexistent/t.csv",
    ]);
    assert_eq!(code, 1, "{err}");
}

/// With `--input -`, each row's outputs appear before the next row is
/// written: vigil works inside an endless pipe.
#[test]
fn streams_row_by_row_from_stdin() {
    let spec = temp_file(
        "sum.dsrv",
        "in x: Int\nout s: Int\ns = default(s[1], 0) + x\n",
    );
    let mut child = vigil()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--input",
            "-",
            "--format",
            "jsonl",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    for (i, (x, want)) in [(1, 1), (2, 3), (10, 13)].into_iter().enumerate() {
        writeln!(stdin, "{{\"x\": {x}, \"extra\": \"ignored\"}}").unwrap();
        stdin.flush().unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, format!("s[{i}] = Int({want})\n"));
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// On a long trace with every input present, every row after the warm-up
/// rows runs on the fused tier: the only declines are the first rows of the
/// temporal regions or of the whole-row program (history not yet filled).
/// The quickened tier runs the whole-row program, interpreted, and its
/// regions on the row it declines; so does native-regions, with its regions
/// native (one interpreter entry a row costs less than a call per region).
#[test]
fn stats_show_every_row_after_warm_up_on_the_fused_tier() {
    let spec = temp_file("chain.dsrv", include_str!("../../examples/chain.dsrv"));
    let mut csv = String::from("x,y,flag\n");
    for i in 0..1000 {
        csv.push_str(&format!("{},{},{}\n", i % 41 - 20, i % 37 - 18, i % 3 == 0));
    }
    let trace = temp_file("chain.csv", &csv);
    for (tier, executed) in [
        (
            "quickened",
            "quickened: 999 rows executed by the whole-row program\n  regions of declined rows: 3 region runs executed",
        ),
        (
            "native-regions",
            "native-regions: 999 rows executed by the whole-row program\n  native regions of declined rows: 3 region runs executed",
        ),
        (
            "native-whole",
            "native-whole: 999 rows executed by the whole-row kernel",
        ),
    ] {
        let (code, out, err) = run(&[
            "run",
            spec.to_str().unwrap(),
            "--input",
            trace.to_str().unwrap(),
            "--tier",
            tier,
            "--stats",
        ]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out.lines().count(), 9 * 1000);
        assert!(err.contains(&format!("tier: {tier} (requested")), "{err}");
        assert!(err.contains(executed), "{err}");
        let declined = match tier {
            "native-whole" => "declined: 1\n",
            // The program's first row, then the first row of each of the
            // two temporal regions, which runs it.
            _ => "declined: 3\n",
        };
        assert!(err.contains(declined), "{err}");
        assert!(err.contains("offset history not yet filled"), "{err}");
    }
}

/// `vigil bench`: every tier timed on one trace after its outputs are
/// checked against the canonical tier's; JSON and an SVG chart on request;
/// a malformed trace is a located error.
#[test]
fn bench_times_every_tier_after_checking_their_outputs() {
    let dir = test_dir("cli", "bench");
    let svg = dir.join("bench.svg").to_string_lossy().into_owned();
    let root = env!("CARGO_MANIFEST_DIR");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args([
            "bench",
            "examples/fusion.dsrv",
            "--input",
            "examples/fusion.input",
        ])
        .args(["--repeat", "2", "--json", "--svg", &svg])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["identical"], true);
    assert_eq!(v["rows"], 6);
    // What was run, where and when.
    assert_eq!(
        (&v["spec"], &v["repeat"], &v["small_sample"]),
        (
            &serde_json::json!("fusion.dsrv"),
            &serde_json::json!(2),
            &serde_json::json!(true)
        )
    );
    assert_eq!(v["vigil_version"], env!("CARGO_PKG_VERSION"));
    assert!(v["date"].as_str().unwrap().ends_with(" UTC"), "{v}");
    assert!(v["machine"]["threads"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(v["machine"]["arch"], std::env::consts::ARCH);
    // Six rows are too few to say much: a warning says so.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warning: only 6 rows were timed"), "{err}");
    let tiers = v["tiers"].as_array().unwrap();
    let names: Vec<&str> = tiers
        .iter()
        .map(|t| t["requested"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = vigil::Tier::ALL
        .iter()
        .filter(|t| **t != vigil::Tier::Auto)
        .map(|t| t.name())
        .collect();
    assert_eq!(names, expected);
    for t in tiers {
        assert_eq!(t["per_row_ns"].as_array().unwrap().len(), 2);
        assert!(t["per_row_median_ns"].as_f64().unwrap() > 0.0, "{t}");
        assert!(t["batch_median_ns"].as_f64().unwrap() > 0.0, "{t}");
        // The example's trace has Str values, which a stepper cannot take.
        assert!(t["stepper_ns"].is_null(), "{t}");
    }
    // A trace of scalars is also timed through a stepper on every tier,
    // after its outputs are checked too.
    let sum = write(
        &dir,
        "sum.dsrv",
        "in x: Int\nout s: Int\ns = default(s[1], 0) + x\n",
    );
    let xs: String = (0..50).map(|i| format!("{{\"x\": {i}}}\n")).collect();
    let xs = write(&dir, "xs.jsonl", &xs);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["bench", &sum, "--input", &xs, "--repeat", "2", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for t in v["tiers"].as_array().unwrap() {
        assert_eq!(t["stepper_ns"].as_array().unwrap().len(), 2, "{t}");
        assert!(t["stepper_median_ns"].as_f64().unwrap() > 0.0, "{t}");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["bench", &sum, "--input", &xs, "--repeat", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("stepper ns"), "{text}");
    assert!(!text.contains("stepper: not timed"), "{text}");
    // The table (and its notes) fits 100 columns; `--wide` adds the spreads and rows/s.
    for line in text.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    let wide = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["bench", &sum, "--input", &xs, "--repeat", "1", "--wide"])
        .output()
        .unwrap();
    let wide = String::from_utf8_lossy(&wide.stdout);
    assert!(
        wide.contains("stepper ns (min-max)") && wide.contains("rows/s"),
        "{wide}"
    );
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(
        drawn.starts_with("<svg")
            && drawn.contains("native-whole")
            && drawn.contains("vigil bench: fusion.dsrv")
            && drawn.contains("6 rows × 2 repetitions")
            && drawn.contains("log scale"),
        "{drawn}"
    );
    // The table names a tier that fell back, and why (every stream of
    // this spec is Str: the whole-row kernel would compute nothing).
    let strs = write(&dir, "strs.dsrv", "in lbl: Str\nout e: Str\ne = lbl\n");
    let strs_in = write(&dir, "strs.jsonl", "{\"lbl\": \"a\"}\n{\"lbl\": \"b\"}\n");
    let table = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["bench", &strs, "--input", &strs_in])
        .args(["--repeat", "1", "--tiers", "canonical,native-whole"])
        .current_dir(root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("outputs identical on every tier"), "{text}");
    assert!(text.contains("native-whole*"), "{text}");
    assert!(text.contains("native-whole→native-regions: "), "{text}");
    assert!(text.contains("stepper: not timed"), "{text}");
    // Regression: a spec without printed outputs panicked (the timed loop
    // read output 0 of every step).
    let quiet = write(&dir, "aux.dsrv", "in t: Int\naux a: Int\na = t + 1\n");
    let rows = write(&dir, "rows.jsonl", "{\"t\": 1}\n{\"t\": 2}\n");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["bench", &quiet, "--input", &rows, "--repeat", "1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .starts_with("2 rows × 1 repetitions of aux.dsrv, outputs identical")
    );
    // A malformed trace: a located error, nothing timed.
    let bad = write(&dir, "bad.jsonl", "{\"t\": 1}\n{oops\n");
    let spec = write(&dir, "s.dsrv", "in t: Int\nout u: Int\nu = t\n");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["bench", &spec, "--input", &bad])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.jsonl:2:"));
}
