//! Triggers: alerts from the library on every tier, `vigil run --alerts/--fail-on-trigger`, and
//! a real pipe in which each alert must arrive before the next row is written.

use crate::support::{test_dir, vigil, write};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;
use vigil::{Monitor, Sample, Spec, Tier, Value};

const SPEC: &str = "in host: Str\nin temp: Float\nout hot: Bool\nhot = temp > 30.0\n\
trigger too_hot: hot \"temperature {temp} on {host}\"\ntrigger temp < 0.0 \"freezing: {temp}\"\n";

#[test]
fn alerts_name_the_trigger_render_the_message_and_carry_the_values() {
    let spec = Spec::parse("t.dsrv", SPEC).unwrap();
    assert_eq!(spec.trigger_names(), ["too_hot", "trigger_1"]);
    // Triggers are not printed outputs.
    assert_eq!(spec.output_names(), ["hot"]);
    for tier in Tier::ALL {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        let row = m.row().set("host", "a").unwrap().set("temp", 31.5).unwrap();
        let outputs = m.step(&row).unwrap();
        let alerts: Vec<_> = outputs.alerts().collect();
        assert_eq!(alerts.len(), 1, "{tier}");
        assert_eq!((alerts[0].trigger(), alerts[0].step()), ("too_hot", 0));
        assert_eq!(alerts[0].message(), "temperature 31.5 on a");
        assert_eq!(
            alerts[0].values(),
            [
                ("temp", Sample::Value(Value::Float(31.5))),
                ("host", Sample::Value(Value::Str("a".into())))
            ]
        );
        let row = m.row().set("temp", -2.0).unwrap();
        let outputs = m.step(&row).unwrap();
        let alerts: Vec<_> = outputs.alerts().map(|a| a.into_message()).collect();
        assert_eq!(alerts, ["freezing: -2.0"], "{tier}");
        assert_eq!(m.stream("too_hot"), Some(Sample::Value(Value::Bool(false))));
    }
}

/// Runs vigil with `args`; returns status, stdout, stderr.
fn run(args: &[&str]) -> (i32, String, String) {
    crate::support::run_vigil(args, None)
}

fn setup(test: &str) -> (crate::support::TestDir, String, String) {
    let dir = test_dir("triggers", test);
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(
        &dir,
        "t.jsonl",
        "{\"host\": \"a\", \"temp\": 31}\n{\"host\": \"b\", \"temp\": -1}\n{\"host\": \"a\", \"temp\": 20}\n",
    );
    (dir, spec, input)
}

#[test]
fn alerts_go_to_stderr_by_default_and_as_json_lines_with_alerts() {
    let (dir, spec, input) = setup("sinks");
    let (code, out, err) = run(&["run", &spec, "--input", &input]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "hot[0] = Bool(true)\nhot[1] = Bool(false)\nhot[2] = Bool(false)\n"
    );
    assert_eq!(
        err,
        "alert: too_hot at step 0: temperature 31.0 on a\nalert: trigger_1 at step 1: freezing: -1.0\n"
    );
    let file = dir.join("alerts.jsonl").to_str().unwrap().to_string();
    let (code, out2, err) = run(&[
        "run", &spec, "--input", &input, "--alerts", &file, "--key", "host",
    ]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(out2.starts_with("hot{host=a}[0] = Bool(true)\n"), "{out2}");
    let lines = std::fs::read_to_string(&file).unwrap();
    expect_test::expect![[r#"
        {"step":0,"host":"a","trigger":"too_hot","message":"temperature 31.0 on a","values":{"temp":31.0,"host":"a"}}
        {"step":0,"host":"b","trigger":"trigger_1","message":"freezing: -1.0","values":{"temp":-1.0}}
    "#]]
    .assert_eq(&lines);
    for line in lines.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("each alert is a JSON object");
    }
}

#[test]
fn fail_on_trigger_exits_5_after_a_complete_run() {
    let (dir, spec, input) = setup("fail");
    let (code, out, err) = run(&[
        "run",
        &spec,
        "--input",
        &input,
        "--fail-on-trigger",
        "--output",
        "csv",
    ]);
    assert_eq!(code, 5, "{err}");
    assert_eq!(out, "step,hot\n0,true\n1,false\n2,false\n");
    assert!(
        err.ends_with("error: 2 trigger firings (--fail-on-trigger)\n"),
        "{err}"
    );
    let calm = write(&dir, "calm.jsonl", "{\"host\": \"a\", \"temp\": 20}\n");
    let (code, _, err) = run(&["run", &spec, "--input", &calm, "--fail-on-trigger"]);
    // No alert and no error: only the summary, which --fail-on-trigger always prints.
    assert_eq!(code, 0, "{err}");
    assert!(err.lines().all(|l| l.starts_with("summary: ")), "{err}");
    assert!(
        err.contains("summary: trigger too_hot: no firings\n"),
        "{err}"
    );
    // A malformed trace keeps its own status.
    let bad = write(
        &dir,
        "bad.jsonl",
        "{\"host\": \"a\", \"temp\": 40}\n{\"temp\": \"x\"}\n",
    );
    let (code, _, _) = run(&["run", &spec, "--input", &bad, "--fail-on-trigger"]);
    assert_eq!(code, 4);
}

/// A real pipe: one JSON line at a time into vigil's standard input; the
/// test blocks reading the row's output and alert before writing the next,
/// so a missing flush deadlocks it (the deadline turns that into a failure).
/// (Text outputs: `--alerts -` with CSV or JSON-lines outputs is refused.)
#[test]
fn each_alert_is_flushed_before_the_next_row_arrives() {
    let (_dir, spec, _) = setup("pipe");
    let mut child = vigil()
        .args(["run", &spec, "--input", "-", "--alerts", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let rows = [("a", 35.0, true), ("b", 10.0, false), ("c", -4.5, true)];
    for (i, (host, temp, fires)) in rows.iter().enumerate() {
        writeln!(stdin, "{{\"host\": \"{host}\", \"temp\": {temp}}}").unwrap();
        stdin.flush().unwrap();
        let wait = |what: &str| {
            rx.recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no {what} for row {i} within 30 s: a missing flush"))
        };
        let out = wait("output");
        assert!(out.starts_with(&format!("hot[{i}] = ")), "{out}");
        if *fires {
            let alert = wait("alert");
            assert!(alert.contains("\"trigger\":"), "{alert}");
            assert!(alert.contains(&format!("\"step\":{i}")), "{alert}");
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn trigger_diagnostics_are_located() {
    let dir = test_dir("triggers", "diagnostics");
    let spec = write(
        &dir,
        "bad.dsrv",
        "in x: Int\ntrigger x + 1 \"a {y} b\"\ntrigger t: x > 1 \"open {x\"\n",
    );
    let (code, _, err) = run(&["check", &spec]);
    assert_eq!(code, 2);
    let err = err.replace(&spec, "bad.dsrv");
    expect_test::expect![[r#"
        error: the condition of trigger `trigger_1` has type Int; it must be Bool
         --> bad.dsrv:2:9
          |
        2 | trigger x + 1 "a {y} b"
          |         ^^^^^
          = hint: a trigger fires at every step where its condition is true

        error: unknown stream `y` in the message of trigger `trigger_1`
         --> bad.dsrv:2:15
          |
        2 | trigger x + 1 "a {y} b"
          |               ^^^^^^^^^
          = hint: `{name}` inserts a stream's value; write `{{` and `}}` for braces

        error: a `{` without its `}` in the message of trigger `t`
         --> bad.dsrv:3:18
          |
        3 | trigger t: x > 1 "open {x"
          |                  ^^^^^^^^^
          = hint: `{name}` inserts a stream's value; write `{{` and `}}` for braces
        error: could not check `bad.dsrv` due to 3 previous errors
    "#]]
    .assert_eq(&err);
    let missing = write(
        &dir,
        "missing.dsrv",
        "in x: Int\ntrigger x > 1\nout y: Int\ny = x\n",
    );
    let (code, _, err) = run(&["check", &missing]);
    assert_eq!(code, 2);
    assert!(
        err.contains("expected the trigger's message (a string literal)"),
        "{err}"
    );
}

/// The pipe example of docs/operations.md ("A monitor in a pipe"), as written there: only alert lines, each a JSON object, both kinds.
#[test]
fn the_readmes_pipe_example_prints_alerts_only() {
    let root = env!("CARGO_MANIFEST_DIR");
    let bin = env!("CARGO_BIN_EXE_vigil");
    let out = crate::support::bash(&format!(
        "cd {root} && cat examples/events.jsonl | {bin} run examples/slo.dsrv --input - --key service --quiet --alerts -"
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let triggers: Vec<String> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("an alert line");
            v["trigger"].as_str().expect("a trigger name").to_string()
        })
        .collect();
    assert!(triggers.iter().any(|t| t == "slow"), "{text}");
    assert!(triggers.iter().any(|t| t == "down"), "{text}");
}
