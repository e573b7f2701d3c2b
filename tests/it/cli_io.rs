//! Issue 7, CLI side: closed pipes end every subcommand quietly, and exit statuses follow
//! docs/cli.md (1 usage or I/O error, 2 spec errors, 3 runtime error, 4 malformed trace) with no
//! invented positions.

use crate::support::{TestDir, bash, test_dir, vigil, write};
use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

fn dir(test: &str) -> TestDir {
    test_dir("io", test)
}

/// The write end of a pipe whose read end is already closed: every write to it fails with
/// EPIPE, deterministically (no race with a reader that exits).
fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Stdio::from(writer)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs vigil with standard output closed; returns the status and standard error.
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let out = vigil()
        .args(args)
        .stdin(Stdio::null())
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (out.status.code(), text(&out.stderr))
}

/// Runs vigil with standard error closed; returns the status and standard output.
fn with_closed_stderr(args: &[&str]) -> (Option<i32>, String) {
    let out = vigil()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(closed_pipe())
        .output()
        .unwrap();
    (out.status.code(), text(&out.stdout))
}

fn run(args: &[&str]) -> Output {
    vigil().args(args).stdin(Stdio::null()).output().unwrap()
}

const INC: &str = "in x: Int\nout y: Int\nout z: Str\ny = x + 1\nz = \"v\"\n";

/// A trace long enough that its output does not fit in a pipe's buffer.
fn long_trace(d: &Path) -> String {
    let mut csv = String::from("x\n");
    for i in 0..50_000 {
        csv.push_str(&format!("{i}\n"));
    }
    write(d, "long.csv", csv)
}

/// Issue 7 §2: `explain | head -1` and `run --output csv | head -1` used to exit 101 (a
/// panic in `print!`) or 1 ("cannot write output: Broken pipe"). A closed standard output
/// ends every subcommand and output format quietly with status 0.
#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let d = dir("stdout");
    let spec = write(&d, "inc.dsrv", INC);
    let trace = long_trace(&d);
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["explain", &spec],
        vec!["explain", &spec, "--tier", "canonical"],
        vec!["tiers"],
        vec!["--help"],
        vec!["--version"],
        vec!["run", "--help"],
    ];
    for output in ["text", "csv", "jsonl"] {
        commands.push(vec!["run", &spec, "--input", &trace, "--output", output]);
        commands.push(vec![
            "run", &spec, "--input", &trace, "--output", output, "--stats",
        ]);
    }
    for args in commands {
        let (code, err) = with_closed_stdout(&args);
        assert_eq!((code, err.as_str()), (Some(0), ""), "{args:?}");
    }
}

/// The same through a pipe on standard input (the streamed path), for every format.
#[test]
fn a_closed_stdout_ends_a_streamed_run_quietly() {
    let d = dir("stream");
    let spec = write(&d, "inc.dsrv", INC);
    let mut rows = Vec::new();
    for i in 0..50_000 {
        writeln!(rows, "{{\"x\": {i}}}").unwrap();
    }
    for output in ["text", "csv", "jsonl"] {
        let mut child = vigil()
            .args(["run", &spec, "--input", "-", "--output", output])
            .stdin(Stdio::piped())
            .stdout(closed_pipe())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let rows = rows.clone();
        // vigil stops reading at the first failed write; the writer must not block the test.
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&rows);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert_eq!(
            (out.status.code(), text(&out.stderr).as_str()),
            (Some(0), ""),
            "{output}"
        );
    }
}

/// A real `| head -1`, as a user types it: the first line arrives, and vigil's status (seen
/// through `PIPESTATUS`) is 0 for every output format.
#[test]
fn piping_into_head_exits_zero() {
    let d = dir("head");
    let spec = write(&d, "inc.dsrv", INC);
    let trace = long_trace(&d);
    let bin = env!("CARGO_BIN_EXE_vigil");
    for (output, first) in [
        ("text", "y[0] = Int(1)"),
        ("csv", "step,y,z"),
        ("jsonl", "{\"step\":0,\"y\":1,\"z\":\"v\"}"),
    ] {
        let script = format!(
            "'{bin}' run '{spec}' --input '{trace}' --output {output} | head -1; echo \"status ${{PIPESTATUS[0]}}\""
        );
        let out = bash(&script);
        assert_eq!(
            text(&out.stdout),
            format!("{first}\nstatus 0\n"),
            "{output}"
        );
        assert_eq!(text(&out.stderr), "", "{output}");
    }
    let script = format!(
        "'{bin}' explain '{spec}' | head -1 >/dev/null; echo \"status ${{PIPESTATUS[0]}}\""
    );
    let out = bash(&script);
    assert_eq!(
        (text(&out.stdout).as_str(), text(&out.stderr).as_str()),
        ("status 0\n", "")
    );
}

/// Issue 7 §2: `check … 2>&1 | head -1` on a spec with many errors used to panic in
/// `eprint!`. A closed standard error loses the messages, not the status: 2 for a faulty
/// spec, 4 for a malformed trace, 3 for a runtime error, 0 for warnings and statistics.
#[test]
fn a_closed_stderr_keeps_the_status() {
    let d = dir("stderr");
    let mut bad = String::from("in x: Int\nout y: Int\ny = x\n");
    for i in 0..200 {
        bad.push_str(&format!("out e{i}: Int\ne{i} = q{i} + true\n"));
    }
    let bad = write(&d, "bad.dsrv", bad);
    let (code, out) = with_closed_stderr(&["check", &bad]);
    assert_eq!((code, out.as_str()), (Some(2), ""));
    let (code, _) = with_closed_stderr(&["run", &bad, "--input", "-"]);
    assert_eq!(code, Some(2));

    let spec = write(
        &d,
        "div.dsrv",
        "in x: Int\nin w: Int\nout y: Int\ny = 10 / x\n",
    );
    let malformed = write(&d, "m.csv", "x,w\n1,1\nq,1\n");
    let (code, out) = with_closed_stderr(&["run", &spec, "--input", &malformed]);
    assert_eq!((code, out.as_str()), (Some(4), "y[0] = Int(10)\n"));
    let zero = write(&d, "z.csv", "x,w\n1,1\n0,1\n");
    let (code, out) = with_closed_stderr(&["run", &spec, "--input", &zero]);
    assert_eq!((code, out.as_str()), (Some(3), "y[0] = Int(10)\n"));
    // A declared input missing from the header is a warning on standard error.
    let warned = write(&d, "w.csv", "x\n1\n");
    let (code, out) = with_closed_stderr(&["run", &spec, "--input", &warned, "--stats"]);
    assert_eq!((code, out.as_str()), (Some(0), "y[0] = Int(10)\n"));
    // A usage error with standard error closed is still a usage error.
    let (code, _) = with_closed_stderr(&["run", &spec]);
    assert_eq!(code, Some(1));
}

/// Issue 7 §5: clap's usage errors used to exit 2, the status of a faulty specification.
#[test]
fn usage_errors_exit_1_and_help_exits_0() {
    let d = dir("usage");
    let spec = write(&d, "inc.dsrv", INC);
    for args in [
        vec![],
        vec!["bogus"],
        vec!["run", spec.as_str()],
        vec!["run", spec.as_str(), "--input", "t.csv", "--tier", "warp"],
        vec![
            "run",
            spec.as_str(),
            "--input",
            "t.csv",
            "--max-step-gap",
            "-1",
        ],
        vec!["check"],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(text(&out.stderr).contains("error"), "{args:?}");
        assert_eq!(text(&out.stdout), "", "{args:?}");
    }
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["help"],
        vec!["--version"],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(!out.stdout.is_empty(), "{args:?}");
        assert_eq!(text(&out.stderr), "", "{args:?}");
    }
    let out = run(&["run", "--help"]);
    assert!(text(&out.stdout).contains("--max-step-gap <N>"));
}

/// Issue 7 §5: a missing trace used to exit 4 with an invented `:1:1` position. Files that
/// cannot be opened or read are I/O errors (status 1) named without a position.
#[test]
fn unreadable_files_exit_1_without_a_position() {
    let d = dir("missing");
    let spec = write(&d, "inc.dsrv", INC);
    let out = run(&["run", &spec, "--input", "/nonexistent/t.csv"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: /nonexistent/t.csv: cannot open the trace: No such file or directory (os error 2)\n"
    );
    let folder = d.join("folder.csv");
    std::fs::create_dir_all(&folder).unwrap();
    let folder = folder.to_str().unwrap();
    let out = run(&["run", &spec, "--input", folder]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("error: {folder}: cannot read the trace: it is a directory\n")
    );
    let out = run(&["check", "/nonexistent/s.dsrv"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: cannot read specification `/nonexistent/s.dsrv`: No such file or directory (os error 2)\n"
    );
    let noext = write(&d, "trace", "x\n1\n");
    let out = run(&["run", &spec, "--input", &noext]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot tell the format"));
}

/// A specification that is not UTF-8 is a faulty specification (status 2), located at its
/// first invalid byte.
#[test]
fn a_spec_that_is_not_utf8_is_located() {
    let d = dir("utf8");
    let spec = write(&d, "bad.dsrv", b"in x: Int\nout y: Int\ny = x + \"\xe9\"\n");
    let out = run(&["check", &spec]);
    assert_eq!(out.status.code(), Some(2));
    // The diagnostic of the spec frontend (`Spec::parse_bytes`), like every other spec error.
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: the specification is not valid UTF-8: invalid byte 0xE9\n --> {spec}:3:10\n  |\n\
             3 | y = x + \"\u{fffd}\"\n  |          ^\n  = hint: save the specification as UTF-8\n\
             error: could not check `{spec}` due to 1 previous error\n"
        )
    );
}
