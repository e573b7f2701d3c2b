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

/// Issue 37: `rising` fires where the condition becomes true, `resolve`
/// adds a `resolved` alert where it stops holding, and `every D` fires at
/// most once per `D` while it holds, reporting the firings it held back —
/// the same on every tier, per key in a keyed run.
#[test]
fn alerting_clauses_fire_on_edges_resolve_and_hold_back_repeats() {
    let dir = test_dir("triggers", "clauses");
    let spec = write(
        &dir,
        "edge.dsrv",
        "in host: Str\nin x: Int\ntrigger hot: x > 10 \"x is {x}\" rising, resolve\n\
         trigger warm: x > 5 \"x is {x}\" every 3s\n",
    );
    let rows =
        "t,host,x\n0,a,1\n1,a,12\n2,a,13\n3,a,14\n4,a,2\n5,a,15\n6,a,7\n7,a,8\n8,a,9\n9,a,9\n";
    let trace = write(&dir, "edge.csv", rows);
    let want = [
        r#"{"step":1,"time":1,"trigger":"hot","state":"firing","message":"x is 12","values":{"x":12}}"#,
        r#"{"step":1,"time":1,"trigger":"warm","suppressed":0,"message":"x is 12","values":{"x":12}}"#,
        r#"{"step":4,"time":4,"trigger":"hot","state":"resolved","message":"x is 2","values":{"x":2}}"#,
        r#"{"step":5,"time":5,"trigger":"hot","state":"firing","message":"x is 15","values":{"x":15}}"#,
        r#"{"step":5,"time":5,"trigger":"warm","suppressed":2,"message":"x is 15","values":{"x":15}}"#,
        r#"{"step":6,"time":6,"trigger":"hot","state":"resolved","message":"x is 7","values":{"x":7}}"#,
        r#"{"step":8,"time":8,"trigger":"warm","suppressed":2,"message":"x is 9","values":{"x":9}}"#,
    ];
    for tier in ["canonical", "quickened", "native-regions", "native-whole"] {
        let alerts = dir
            .join(format!("{tier}.jsonl"))
            .to_string_lossy()
            .into_owned();
        let args = [
            "run", &spec, "--input", &trace, "--time", "t", "--tier", tier, "--alerts", &alerts,
            "--output", "csv",
        ];
        let (code, _, err) = crate::support::run_vigil(&args, None);
        assert_eq!(code, 0, "{tier}: {err}");
        let got = std::fs::read_to_string(&alerts).unwrap();
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "{tier}");
    }
    // Keyed: the same rows under two keys, interleaved, alert per key.
    let mut keyed = String::from("t,host,x\n");
    for line in rows.lines().skip(1) {
        keyed.push_str(&format!("{line}\n{}\n", line.replacen(",a,", ",b,", 1)));
    }
    let trace = write(&dir, "keyed.csv", &keyed);
    let alerts = dir.join("keyed.jsonl").to_string_lossy().into_owned();
    let args = [
        "run", &spec, "--input", &trace, "--time", "t", "--key", "host", "--alerts", &alerts,
        "--output", "csv",
    ];
    let (code, _, err) = crate::support::run_vigil(&args, None);
    assert_eq!(code, 0, "{err}");
    let got = std::fs::read_to_string(&alerts).unwrap();
    for host in ["a", "b"] {
        let of_host: Vec<String> = (got.lines())
            .filter(|l| l.contains(&format!("\"host\":\"{host}\"")))
            .map(|l| l.replace(&format!("\"host\":\"{host}\","), ""))
            .collect();
        assert_eq!(of_host, want, "host {host}");
    }
    // Readable lines say the state and what was held back.
    let (_, _, err) = crate::support::run_vigil(
        &[
            "run",
            &spec,
            "--input",
            &write(&dir, "a.csv", rows),
            "--time",
            "t",
        ],
        None,
    );
    assert!(
        err.contains("alert: hot resolved at step 4: x is 2"),
        "{err}"
    );
    assert!(
        err.contains("alert: warm at step 5: x is 15 (2 held back)"),
        "{err}"
    );
}

/// A clause said twice, or a re-alert interval that is not a duration, is
/// a located error; anything else after a message says what may follow.
#[test]
fn alerting_clauses_are_checked_where_they_are_written() {
    let dir = test_dir("triggers", "clause-errors");
    for (text, says) in [
        (
            "in x: Int\ntrigger x > 1 \"m\" rising, rising\n",
            "says `rising` twice",
        ),
        (
            "in x: Int\ntrigger x > 1 \"m\" every 5 weeks\n",
            "unknown unit `weeks`",
        ),
        (
            "in x: Int\ntrigger x > 1 \"m\" often\n",
            "`rising`, `resolve` and `every DURATION`",
        ),
        (
            "in x: Int\ntrigger x > 1 \"m\" severity 3\n",
            "expected a name after `severity`",
        ),
        (
            "in x: Int\ntrigger x > 1 \"m\" label team = ops\n",
            "expected the text of label `team`",
        ),
    ] {
        let spec = write(&dir, "bad.dsrv", text);
        let (code, _, err) = crate::support::run_vigil(&["check", &spec], None);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(err.contains(says), "{text}: {err}");
        assert!(err.contains("bad.dsrv:2:"), "{err}");
    }
}

/// Issue 37: a placeholder formats its value (`{avg:.1}`, `{n:>5}`,
/// `{ratio:.1%}`, `{x:!n/a}`) and may be any expression over the streams
/// (an aux stream of the specification, so every tier agrees), reported in
/// the alert's values under its text.
#[test]
fn messages_format_values_and_show_expressions() {
    let dir = test_dir("triggers", "formats");
    let spec = write(
        &dir,
        "msg.dsrv",
        "in lat: Float\nin host: Str\nout avg: Float\navg = default(avg[1], lat) * 0.9 + lat * 0.1\n\
         trigger slow: avg > 200.0 \"{host:>6}|{avg:.1} ms|{avg / 1000.0:.2} s|{lat / avg:.1%}|{lat[1]:.0!none}\"\n",
    );
    let trace = write(
        &dir,
        "t.csv",
        "lat,host\n289.82500000000005,web-1\n300,web-22\n",
    );
    let want = [
        r#"{"step":0,"trigger":"slow","message":" web-1|289.8 ms|0.29 s|100.0%|none","values":{"host":"web-1","avg":289.82500000000005,"avg / 1000.0":0.28982500000000005,"lat / avg":1.0,"lat[1]":null}}"#,
        r#"{"step":1,"trigger":"slow","message":"web-22|290.8 ms|0.29 s|103.1%|290","values":{"host":"web-22","avg":290.84250000000003,"avg / 1000.0":0.2908425,"lat / avg":1.0314861136181952,"lat[1]":289.82500000000005}}"#,
    ];
    for tier in ["canonical", "quickened", "native-regions", "native-whole"] {
        let alerts = dir
            .join(format!("{tier}.jsonl"))
            .to_string_lossy()
            .into_owned();
        let args = [
            "run", &spec, "--input", &trace, "--tier", tier, "--alerts", &alerts, "--quiet",
        ];
        let (code, _, err) = crate::support::run_vigil(&args, None);
        assert_eq!(code, 0, "{tier}: {err}");
        let got = std::fs::read_to_string(&alerts).unwrap();
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "{tier}");
    }
    // A placeholder that is not an expression, or a format that is not one,
    // is a located error.
    for (text, says) in [
        (
            "in x: Int\ntrigger x > 1 \"{x +}\"\n",
            "in the message's placeholder `{x +}`",
        ),
        (
            "in x: Int\ntrigger x > 1 \"{x:.q}\"\n",
            "in the message's placeholder `{x:.q}`",
        ),
    ] {
        let spec = write(&dir, "bad.dsrv", text);
        let (code, _, err) = crate::support::run_vigil(&["check", &spec], None);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(err.contains(says), "{text}: {err}");
    }
}
