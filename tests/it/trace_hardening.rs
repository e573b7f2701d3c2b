//! Issue 7, trace side: malformed, truncated, streamed and extreme traces through the real
//! `vigil` binary — every complete earlier row's outputs written, then a located error and
//! exit status 4; never a lost row, a signal, or a hang.

use crate::support::{Outcome, TestDir, bash, finish, mkfifo, run_within, test_dir, vigil, write};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

fn dir(test: &str) -> TestDir {
    test_dir("th", test)
}

fn run(args: &[&str]) -> Outcome {
    run_within(args, Duration::from_secs(60))
}

fn run_stdin(args: &[&str], input: &[u8]) -> Outcome {
    crate::support::run_piped(args, input)
}

const INC: &str = "in x: Int\nout y: Int\ny = x + 1\n";

/// Issue 7 §1: the finished block before a malformed header line (and the gap rows before a
/// header with a valid step number) used to be dropped. Each variant prints the outputs of
/// exactly the rows of a well-formed prefix of the trace, then fails with exit 4 and a
/// located message; through a file (batched) and through a pipe (streamed).
#[test]
fn input_lookahead_keeps_every_finished_row() {
    let d = dir("lookahead");
    let spec = write(&d, "inc.dsrv", INC);
    let cases: [(&str, &str, &str); 8] = [
        // (the trace, its well-formed prefix, the error after `file:`)
        (
            "0: x = 1\n1: x = 2\n2: x = abc\n",
            "0: x = 1\n1: x = 2\n",
            "3:8: invalid value `abc`",
        ),
        (
            "0: x = 1\n1: x = 2\n1: x = 3\n",
            "0: x = 1\n1: x = 2\n",
            "3:1: step 1 repeats step 1: step numbers must increase",
        ),
        (
            "0: x = 1\n1: x = 2\n0: x = 3\n",
            "0: x = 1\n1: x = 2\n",
            "3:1: step 0 goes back from step 1: step numbers must increase",
        ),
        (
            "0: x = 1\n1: x = 2\n2 x = 3\n",
            "0: x = 1\n1: x = 2\n",
            "3:3: expected `:` after step number 2",
        ),
        (
            "0: x = 1\n1: x = 2\n-2: x = 3\n",
            "0: x = 1\n1: x = 2\n",
            "3:1: step numbers cannot be negative",
        ),
        (
            "0: x = 1\n1: x = 2\n18446744073709551616: x = 3\n",
            "0: x = 1\n1: x = 2\n",
            "3:1: step number `18446744073709551616` is too large (the largest is 18446744073709551615)",
        ),
        (
            "0: x = 1\n5: x = abc\n",
            "0: x = 1\n4:\n",
            "2:8: invalid value `abc`",
        ),
        (
            "0: x = 1\n   x = 2\n",
            "",
            "2:4: input `x` is assigned twice in this step",
        ),
    ];
    for (i, (trace, prefix, message)) in cases.into_iter().enumerate() {
        let good = write(&d, &format!("good{i}.input"), prefix);
        let expected = run(&["run", &spec, "--input", &good]);
        assert_eq!(expected.code, Some(0), "{expected:?}");
        if !prefix.is_empty() {
            assert!(!expected.out.is_empty());
        }
        let bad = write(&d, &format!("bad{i}.input"), trace);
        let got = run(&["run", &spec, "--input", &bad]);
        assert_eq!(got.code, Some(4), "{trace:?}: {got:?}");
        assert_eq!(got.out, expected.out, "{trace:?}");
        assert_eq!(got.err, format!("error: {bad}:{message}\n"), "{trace:?}");
        let piped = run_stdin(
            &["run", &spec, "--input", "-", "--format", "tc"],
            trace.as_bytes(),
        );
        assert_eq!(piped.code, Some(4), "{trace:?}: {piped:?}");
        assert_eq!(piped.out, expected.out, "{trace:?}");
        assert_eq!(
            piped.err,
            format!("error: <stdin>:{message}\n"),
            "{trace:?}"
        );
    }
}

/// Makes a FIFO with the system's `mkfifo`.
/// Issue 7 §1: a FIFO used to be batched 4096 rows at a time. A writer sends one row at a
/// time and waits for that row's output before sending the next.
#[test]
fn a_fifo_streams_row_by_row() {
    let d = dir("fifo");
    let spec = write(
        &d,
        "sum.dsrv",
        "in x: Int\nout s: Int\ns = default(s[1], 0) + x\n",
    );
    for (name, format, rows) in [
        ("trace.csv", "csv", ["x", "1", "2", "10"].as_slice()),
        (
            "trace.jsonl",
            "jsonl",
            ["{\"x\": 1}", "{\"x\": 2}", "{\"x\": 10}"].as_slice(),
        ),
        (
            "trace.input",
            "tc",
            ["0: x = 1", "1: x = 2", "2: x = 10"].as_slice(),
        ),
    ] {
        let fifo = d.join(name);
        mkfifo(&fifo);
        let mut child = vigil()
            .args([
                "run",
                &spec,
                "--input",
                fifo.to_str().unwrap(),
                "--format",
                format,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Lines of vigil's output arrive on a channel, so that every wait has a deadline.
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        // Opening a FIFO for writing blocks until vigil opens it for reading.
        let (tx, opened) = mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(std::fs::OpenOptions::new().write(true).open(&path).unwrap());
        });
        let deadline = Duration::from_secs(20);
        let mut writer = opened.recv_timeout(deadline).expect("vigil opens the FIFO");
        // A `.input` block is complete when the next header arrives, so its output lags one
        // line behind; the other formats answer each row.
        let lag = usize::from(format == "tc");
        let expected = [1, 3, 13];
        let skip = usize::from(format == "csv");
        for (i, row) in rows.iter().enumerate() {
            writeln!(writer, "{row}").unwrap();
            writer.flush().unwrap();
            let Some(step) = (i + 1).checked_sub(skip + lag + 1) else {
                continue;
            };
            let line = match lines.recv_timeout(deadline) {
                Ok(line) => line,
                Err(_) => {
                    child.kill().unwrap();
                    panic!("{format}: no output for step {step} while the writer waits");
                }
            };
            assert_eq!(
                line,
                format!("s[{step}] = Int({})", expected[step]),
                "{format}"
            );
        }
        // At the end of the input the last `.input` block is complete too.
        drop(writer);
        let mut rest = Vec::new();
        loop {
            match lines.recv_timeout(deadline) {
                Ok(line) => rest.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    child.kill().unwrap();
                    panic!("{format}: vigil did not end after its input ended");
                }
            }
        }
        let want: &[&str] = if format == "tc" {
            &["s[2] = Int(13)"]
        } else {
            &[]
        };
        assert_eq!(rest, want, "{format}");
        let status = child.wait().unwrap();
        assert!(status.success(), "{format}: {status:?}");
    }
}

/// `/dev/stdin` on a pipe is a stream too (the decision is the file's type, not its name).
#[test]
fn dev_stdin_on_a_pipe_streams() {
    let d = dir("devstdin");
    let spec = write(&d, "inc.dsrv", INC);
    let mut child = vigil()
        .args(["run", &spec, "--input", "/dev/stdin", "--format", "jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    for x in [5, 6] {
        writeln!(stdin, "{{\"x\": {x}}}").unwrap();
        stdin.flush().unwrap();
        let line = lines.recv_timeout(Duration::from_secs(20));
        if line.is_err() {
            child.kill().unwrap();
        }
        assert_eq!(line.unwrap(), format!("y[{}] = Int({})", x - 5, x + 1));
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// A process substitution `<(…)` is a pipe: it streams, and with no extension it defaults
/// to JSON lines like standard input.
#[test]
fn a_process_substitution_streams_as_json_lines() {
    let d = dir("procsub");
    let spec = write(&d, "inc.dsrv", INC);
    let bin = env!("CARGO_BIN_EXE_vigil");
    let script = format!(
        "'{bin}' run '{spec}' --input <(printf '{{\"x\": 1}}\\n{{\"x\": 5}}\\n'); echo \"status $?\""
    );
    let out = bash(&script);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "y[0] = Int(2)\ny[1] = Int(6)\nstatus 0\n"
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// Standard input redirected from a regular file is a regular file: mapped and batched, with
/// the same results as naming the file.
#[test]
fn stdin_from_a_regular_file_reads_like_the_file() {
    let d = dir("stdinfile");
    let spec = write(&d, "inc.dsrv", INC);
    let trace = write(&d, "t.jsonl", "{\"x\": 1}\n{}\n{\"x\": 3}\n");
    let named = run(&["run", &spec, "--input", &trace]);
    let child = vigil()
        .args(["run", &spec, "--input", "-"])
        .stdin(std::fs::File::open(&trace).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let redirected = finish(child, Duration::from_secs(60));
    assert_eq!(named.code, Some(0), "{named:?}");
    assert_eq!(redirected.code, Some(0), "{redirected:?}");
    assert_eq!(redirected.out, named.out);
    assert_eq!(named.out, "y[0] = Int(2)\ny[1] = Int(2)\ny[2] = Int(4)\n");
}

/// Issue 7 §1: a trace file truncated while vigil reads it used to kill vigil with SIGBUS
/// (exit 135). vigil is paused mid-file — its standard output is a pipe nobody reads yet, so
/// it blocks once the pipe is full, long before the end of a 24 MB trace — then the file is
/// truncated and the pipe drained. vigil ends with exit 4 and a located message, after the
/// outputs of exactly the rows before the line where it noticed the truncation.
#[test]
fn a_trace_truncated_while_read_is_a_located_error() {
    let d = dir("truncate");
    let spec = write(&d, "inc.dsrv", INC);
    let rows = 2_000_000;
    let mut csv = String::with_capacity(rows * 12);
    csv.push_str("x\n");
    for i in 0..rows {
        csv.push_str(&format!("{}\n", 1_000_000 + i));
    }
    let trace = write(&d, "big.csv", &csv);
    for shrink_to in [0u64, 100_000] {
        std::fs::write(&trace, &csv).unwrap();
        let mut child = vigil()
            .args(["run", &spec, "--input", &trace, "--output", "csv"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        assert_eq!(first, "step,y\n");
        let buffered = String::from_utf8(stdout.buffer().to_vec()).unwrap();
        // vigil has mapped the file and is writing outputs; give it time to fill the pipe.
        std::thread::sleep(Duration::from_millis(300));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&trace)
            .unwrap()
            .set_len(shrink_to)
            .unwrap();
        child.stdout = Some(stdout.into_inner());
        let got = finish(child, Duration::from_secs(60));
        assert_eq!(got.code, Some(4), "{:?}", got.err);
        // `error: <file>:<line>:<col>: the trace file was truncated …`
        let rest = got
            .err
            .strip_prefix(&format!("error: {trace}:"))
            .unwrap_or_else(|| panic!("{}", got.err));
        let (line, rest) = rest.split_once(':').unwrap();
        let line: usize = line.parse().unwrap();
        assert!(
            rest.contains(&format!(
                ": the trace file was truncated while it was read (it had {} bytes when opened, {shrink_to} now)\n",
                csv.len()
            )),
            "{}",
            got.err
        );
        assert!(line > 1000 && line < rows / 2, "stopped at line {line}");
        // Row i is on line i + 2: every row before the error line was evaluated, in order,
        // and nothing after it.
        let all = buffered + &got.out;
        let out: Vec<&str> = all.lines().collect();
        assert_eq!(out.len(), line - 2, "outputs of every complete earlier row");
        for (i, l) in out.iter().enumerate() {
            assert_eq!(*l, format!("{i},{}", 1_000_001 + i));
        }
    }
}

/// Issue 7 §3: a one-line trace `18446744073709551615: x = 2` used to spin for ever creating
/// empty rows. A gap over the bound is a located error; `--max-step-gap` moves the bound.
#[test]
fn step_gaps_are_bounded() {
    let d = dir("gap");
    let spec = write(&d, "inc.dsrv", INC);
    let huge = write(&d, "huge.input", "18446744073709551615: x = 2\n");
    let got = run(&["run", &spec, "--input", &huge]);
    assert_eq!(got.code, Some(4), "{got:?}");
    assert_eq!(got.out, "");
    assert_eq!(
        got.err,
        format!(
            "error: {huge}:1:1: step 18446744073709551615 skips 18446744073709551615 empty steps at the start of the trace, more than the bound of 1000000 (raise it with --max-step-gap)\n"
        )
    );
    let gap = write(&d, "gap.input", "0: x = 1\n6: x = 2\n");
    let got = run(&["run", &spec, "--input", &gap, "--max-step-gap", "4"]);
    assert_eq!(got.code, Some(4), "{got:?}");
    assert_eq!(got.out, "y[0] = Int(2)\n");
    assert!(
        got.err.contains(
            "gap.input:2:1: step 6 skips 5 empty steps after step 0, more than the bound of 4"
        ),
        "{}",
        got.err
    );
    let got = run(&["run", &spec, "--input", &gap, "--max-step-gap", "5"]);
    assert_eq!(got.code, Some(0), "{got:?}");
    assert_eq!(got.out.lines().count(), 7);
}

/// Issue 7 §4: `x,s` / `1,"abc` / `2,b` / `3,c` used to become one row silently.
#[test]
fn an_unterminated_csv_quote_is_a_located_error() {
    let d = dir("quote");
    let spec = write(
        &d,
        "s.dsrv",
        "in x: Int\nin s: Str\nout y: Int\ny = x + 1\n",
    );
    let trace = write(&d, "t.csv", "x,s\n0,a\n1,\"abc\n2,b\n3,c\n");
    let got = run(&["run", &spec, "--input", &trace]);
    assert_eq!(got.code, Some(4), "{got:?}");
    assert_eq!(got.out, "y[0] = Int(1)\n");
    assert_eq!(
        got.err,
        format!(
            "error: {trace}:3:3: this quoted field is never closed: the trace ends before its closing `\"`\n"
        )
    );
}

/// Issue 7 §4: a repeated key used to be accepted, the last one winning.
#[test]
fn a_repeated_json_key_is_a_located_error() {
    let d = dir("dupkey");
    let spec = write(&d, "inc.dsrv", INC);
    let trace = write(&d, "t.jsonl", "{\"x\": 1}\n{\"x\":1,\"x\":2}\n");
    let got = run(&["run", &spec, "--input", &trace]);
    assert_eq!(got.code, Some(4), "{got:?}");
    assert_eq!(got.out, "y[0] = Int(2)\n");
    assert_eq!(
        got.err,
        format!(
            "error: {trace}:2:8: key `x` appears twice in this object (input `x` is assigned twice in this step)\n"
        )
    );
}

/// Issue 7 §4: one rule for numbers in every reader — `-0` is Int 0, an integer outside i64
/// and a decimal that overflows f64 are errors located at the value's first character.
#[test]
fn numbers_follow_one_rule_in_every_reader() {
    let d = dir("numbers");
    let spec = write(&d, "inc.dsrv", INC);
    let fspec = write(&d, "f.dsrv", "in f: Float\nout g: Float\ng = f * 2.0\n");
    let zero = [
        ("z.input", "0: x = -0\n"),
        ("z.csv", "x\n-0\n"),
        ("z.jsonl", "{\"x\": -0}\n"),
    ];
    for (name, text) in zero {
        let trace = write(&d, name, text);
        let got = run(&["run", &spec, "--input", &trace]);
        assert_eq!(
            (got.code, got.out.as_str()),
            (Some(0), "y[0] = Int(1)\n"),
            "{name}: {}",
            got.err
        );
    }
    let overflow = [
        (
            "o.input",
            "0: f = 1\n1: f =  1e400\n",
            "2:9",
            "number `1e400` does not fit in Float (64 bits)",
        ),
        (
            "o.csv",
            "f\n1\n1e400\n",
            "3:1",
            "number `1e400` does not fit in Float (64 bits)",
        ),
        (
            "o.jsonl",
            "{\"f\": 1}\n{\"f\":  1e400}\n",
            "2:8",
            "number `1e400` does not fit in Float (64 bits)",
        ),
        (
            "i.input",
            "0: f = 1\n1: f = 9223372036854775808\n",
            "2:8",
            "integer `9223372036854775808` does not fit in Int (64 bits)",
        ),
        (
            "i.csv",
            "f\n1\n9223372036854775808\n",
            "3:1",
            "integer `9223372036854775808` does not fit in Int (64 bits)",
        ),
        (
            "i.jsonl",
            "{\"f\": 1}\n{\"f\": 9223372036854775808}\n",
            "2:7",
            "integer `9223372036854775808` does not fit in Int (64 bits)",
        ),
    ];
    for (name, text, at, message) in overflow {
        let trace = write(&d, name, text);
        let got = run(&["run", &fspec, "--input", &trace]);
        assert_eq!(got.code, Some(4), "{name}: {got:?}");
        assert_eq!(got.out, "g[0] = Float(2.0)\n", "{name}");
        assert_eq!(
            got.err,
            format!("error: {trace}:{at}: {message}\n"),
            "{name}"
        );
    }
}

/// Issue 7 §4: an output named `step` used to collide with the step column.
#[test]
fn an_output_named_step_does_not_collide() {
    let d = dir("stepcol");
    let spec = write(&d, "step.dsrv", "in x: Int\nout step: Int\nstep = x * 10\n");
    let trace = write(&d, "t.jsonl", "{\"x\": 1}\n");
    let got = run(&["run", &spec, "--input", &trace, "--output", "jsonl"]);
    assert_eq!(
        (got.code, got.out.as_str()),
        (Some(0), "{\"_step\":0,\"step\":10}\n")
    );
    let got = run(&["run", &spec, "--input", &trace, "--output", "csv"]);
    assert_eq!(
        (got.code, got.out.as_str()),
        (Some(0), "_step,step\n0,10\n")
    );
}

/// Issue 7 §4: CSV output used to print the empty string like NoVal and the string `null`
/// like ⊥. Read back as a CSV trace, the output gives the values written.
#[test]
fn csv_output_round_trips() {
    let d = dir("roundtrip");
    let spec = write(&d, "echo.dsrv", "in s: Str\nout t: Str\nt = s\n");
    let trace = write(
        &d,
        "t.jsonl",
        "{\"s\": \"\"}\n{}\n{\"s\": \"null\"}\n{\"s\": \"a,\\\"b\\\"\\nc\"}\n{\"s\": \"3\"}\n",
    );
    let got = run(&["run", &spec, "--input", &trace, "--output", "csv"]);
    assert_eq!(got.code, Some(0), "{}", got.err);
    assert_eq!(
        got.out,
        "step,t\n0,\"\"\n1,\n2,\"null\"\n3,\"a,\"\"b\"\"\nc\"\n4,\"3\"\n"
    );
    // Feed it back as a trace of `t` (an untyped input): the same strings come out.
    let again = write(&d, "again.csv", &got.out);
    let spec2 = write(&d, "echo2.dsrv", "in t\nout u\nu = t\n");
    let back = run(&["run", &spec2, "--input", &again]);
    assert_eq!(back.code, Some(0), "{}", back.err);
    assert_eq!(
        back.out,
        "u[0] = Str(\"\")\nu[2] = Str(\"null\")\nu[3] = Str(\"a,\\\"b\\\"\\nc\")\nu[4] = Str(\"3\")\n"
    );
}

/// Issue 7 §4, decided: a blank line in a CSV trace is not a step; errors name real lines.
#[test]
fn csv_blank_lines_are_skipped_and_lines_stay_real() {
    let d = dir("blank");
    let spec = write(&d, "inc.dsrv", INC);
    let trace = write(&d, "t.csv", "x\n1\n\n2\n\nq\n");
    let got = run(&["run", &spec, "--input", &trace]);
    assert_eq!(got.code, Some(4), "{got:?}");
    assert_eq!(got.out, "y[0] = Int(2)\ny[1] = Int(3)\n");
    assert_eq!(
        got.err,
        format!("error: {trace}:6:1: expected Int for input `x`, found Str \"q\"\n")
    );
}

/// Issue 7 §5: a 10 MB trace line is quoted in a bounded excerpt, not in full.
#[test]
fn a_huge_line_is_cut_in_the_message() {
    let d = dir("huge");
    let spec = write(&d, "inc.dsrv", INC);
    let long = "w".repeat(10 << 20);
    for (name, text, at) in [
        (
            "h.input",
            format!("0: x = {long}\n"),
            "1:8: invalid value `",
        ),
        (
            "h.csv",
            format!("x\n{long}\n"),
            "2:1: expected Int for input `x`, found Str \"",
        ),
        (
            "h.jsonl",
            format!("{{\"x\": \"{long}\"}}\n"),
            "1:7: expected Int for input `x`, found Str \"",
        ),
    ] {
        let trace = write(&d, name, text);
        let got = run(&["run", &spec, "--input", &trace]);
        assert_eq!(got.code, Some(4), "{name}");
        assert!(
            got.err.len() < 400,
            "{name}: {} bytes of message",
            got.err.len()
        );
        assert!(
            got.err
                .starts_with(&format!("error: {trace}:{at}{}", "w".repeat(64))),
            "{name}: {}",
            got.err
        );
        assert!(got.err.contains('…'), "{name}: {}", got.err);
    }
}

/// Issue 40: the `.input` reader takes container values as the Trustworthiness Checker
/// writes them (`[1, 2]`, `{"time": 0, "value": 5.0}`) and as the language does
/// (`List(…)`, `Map(…)`), printed as vigil prints any container; a malformed one is a
/// located error after the earlier rows' outputs (exit 4), and text nested a million deep
/// is refused at the bound, through a file and through a pipe alike.
#[test]
fn input_container_values() {
    let d = dir("containers");
    let spec = write(
        &d,
        "echo.dsrv",
        "in l\nin m: Map\nout v\nout w\nv = l\nw = m\n",
    );
    let trace = "0: l = [1, 2]\n1: l = [[1,2], List(\"a\", ())]\n   m = {\"time\": 0, \"value\": 5.0}\n2: m = Map(\"x\": [])\n";
    let want = "v[0] = List([Int(1), Int(2)])\n\
                v[1] = List([List([Int(1), Int(2)]), List([Str(\"a\"), Unit])])\n\
                w[1] = Map({\"time\": Int(0), \"value\": Float(5.0)})\n\
                w[2] = Map({\"x\": List([])})\n";
    let file = write(&d, "t.input", trace);
    let got = run(&["run", &spec, "--input", &file]);
    assert_eq!(
        (got.code, got.out.as_str(), got.err.as_str()),
        (Some(0), want, "")
    );
    let piped = run_stdin(
        &["run", &spec, "--input", "-", "--format", "tc"],
        trace.as_bytes(),
    );
    assert_eq!((piped.code, piped.out.as_str()), (Some(0), want));

    let deep = format!(
        "0: l = 1\n1: l = {}{}\n",
        "[".repeat(1_000_000),
        "]".repeat(1_000_000)
    );
    for (trace, message) in [
        (
            "0: l = 1\n1: l = [1,\n".to_string(),
            "2:8: unclosed `[`: a value must end on its line".to_string(),
        ),
        (
            "0: l = 1\n1: m = [1]\n".to_string(),
            "2:8: expected Map for input `m`, found List List([Int(1)])".to_string(),
        ),
        (
            deep,
            format!(
                "2:{}: the value nests containers more than 256 deep, the limit for values",
                8 + 256
            ),
        ),
    ] {
        let file = write(&d, "bad.input", &trace);
        let got = run(&["run", &spec, "--input", &file]);
        assert_eq!(got.code, Some(4), "{got:?}");
        assert_eq!(got.out, "v[0] = Int(1)\n");
        assert_eq!(got.err, format!("error: {file}:{message}\n"));
        let piped = run_stdin(
            &["run", &spec, "--input", "-", "--format", "tc"],
            trace.as_bytes(),
        );
        assert_eq!(piped.code, Some(4), "{piped:?}");
        assert_eq!(piped.out, "v[0] = Int(1)\n");
        assert_eq!(piped.err, format!("error: <stdin>:{message}\n"));
    }
}
