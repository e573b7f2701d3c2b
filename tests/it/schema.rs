//! The JSON Schemas in `schemas/` describe what `vigil run --output jsonl` and `--alerts` write:
//! real output of every value kind (keyed, with passed fields, an output named `step`) validates,
//! and lines that break the format do not.

use crate::support::{test_dir, vigil, write};
use serde_json::Value as Json;

fn schema(name: &str) -> jsonschema::Validator {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let schema: Json = serde_json::from_str(&text).unwrap();
    jsonschema::meta::validate(&schema)
        .unwrap_or_else(|e| panic!("{name} is not a valid schema: {e}"));
    jsonschema::validator_for(&schema).unwrap()
}

/// Runs vigil with `args`; returns its standard output, which must be a success.
fn run(args: &[&str]) -> String {
    let out = vigil().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn check_lines(v: &jsonschema::Validator, text: &str, at_least: usize) {
    let mut n = 0;
    for line in text.lines() {
        let json: Json = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        if let Err(e) = v.validate(&json) {
            panic!("{line} does not fit the schema: {e}");
        }
        n += 1;
    }
    assert!(n >= at_least, "only {n} lines checked:\n{text}");
}

const SPEC: &str = "in host: Str\nin x: Int\nin f: Float\nout step: Int\nout q: Float\nout b: Bool\n\
out s: Str\nout u: Unit\nout d: Int\nstep = x + 1\nq = f / 2.0\nb = x > 1\ns = host ++ \"!\"\nu = ()\n\
d = x[1]\ntrigger hot: x > 1 \"{host}: x = {x}, q = {q}, d = {d}\"\n";

const TRACE: &str = "{\"host\": \"a\", \"x\": 1, \"f\": 1.5}\n{\"host\": \"b\", \"x\": 2, \"f\": -0.0}\n\
{\"host\": \"a\", \"x\": 3, \"f\": \"NaN\"}\n{\"host\": \"b\", \"x\": 4, \"f\": \"inf\"}\n{\"host\": \"a\", \"x\": 5}\n";

#[test]
fn real_rows_and_alerts_fit_the_schemas() {
    let dir = test_dir("schema", "real");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "t.jsonl", TRACE);
    let rows = schema("output-row.schema.json");
    let alerts = schema("alert.schema.json");
    // Plain, keyed, and keyed with a passed field; an output is named `step`, so the step
    // column is `_step`.
    let plain = run(&["run", &spec, "--input", &input, "--output", "jsonl"]);
    assert!(plain.starts_with("{\"_step\":0,"), "{plain}");
    for kind in ["null", "NaN", "inf", "-0.0", "\"()\""] {
        assert!(plain.contains(kind), "the output has no {kind}:\n{plain}");
    }
    check_lines(&rows, &plain, 5);
    let keyed = run(&[
        "run", &spec, "--input", &input, "--output", "jsonl", "--key", "host", "--pass", "x",
    ]);
    check_lines(&rows, &keyed, 5);
    let file = dir.join("alerts.jsonl");
    let path = file.to_str().unwrap();
    run(&[
        "run", &spec, "--input", &input, "--quiet", "--key", "host", "--alerts", path,
    ]);
    check_lines(&alerts, &std::fs::read_to_string(&file).unwrap(), 4);
    // Alerting clauses add `state` and `suppressed`.
    let clauses = SPEC.replace(
        "d = {d}\"\n",
        "d = {d}\" rising, resolve, severity page\ntrigger warm: x > 1 \"{x}\" every 2s, label team = \"ops\"\n",
    );
    assert_ne!(clauses, SPEC);
    let spec = write(&dir, "clauses.dsrv", &clauses);
    run(&["run", &spec, "--input", &input, "--quiet", "--alerts", path]);
    let lines = std::fs::read_to_string(&file).unwrap();
    assert!(lines.contains("\"state\":\"firing\"") && lines.contains("\"suppressed\":"));
    assert!(
        lines.contains("\"labels\":{\"severity\":\"page\"}"),
        "{lines}"
    );
    assert!(lines.contains("\"labels\":{\"team\":\"ops\"}"), "{lines}");
    check_lines(&alerts, &lines, 2);
}

/// Lists, tuples, maps and a list's NoVal element (`null`) in JSON lines
/// fit the row schema too: the containers example, and a `List.map` over an
/// absent input.
#[test]
fn container_rows_fit_the_schema() {
    let root = env!("CARGO_MANIFEST_DIR");
    let rows = schema("output-row.schema.json");
    let example = run(&[
        "run",
        &format!("{root}/examples/containers.dsrv"),
        "--input",
        &format!("{root}/examples/containers.input"),
        "--output",
        "jsonl",
    ]);
    assert!(example.contains("\"history\":[1,2]"), "{example}");
    assert!(
        example.contains("\"m\":{\"count\":1,\"last\":1}"),
        "{example}"
    );
    check_lines(&rows, &example, 4);
    let dir = test_dir("schema", "containers");
    let spec = write(
        &dir,
        "spec.dsrv",
        "in x: Int\nin y: Int\nout l\nout t\nl = List.map(\\v: Int -> v - y, [x, x])\nt = Tuple(x, [y])\n",
    );
    let input = write(&dir, "t.jsonl", "{\"x\": 1, \"y\": 2}\n{\"x\": 3}\n");
    let out = run(&["run", &spec, "--input", &input, "--output", "jsonl"]);
    assert!(out.contains("\"l\":[null,null]"), "{out}");
    assert!(out.contains("\"t\":[3,[2]]"), "{out}");
    check_lines(&rows, &out, 2);
}

#[test]
fn lines_that_break_the_format_do_not_fit() {
    let rows = schema("output-row.schema.json");
    let alerts = schema("alert.schema.json");
    for bad in [
        "{}",
        "{\"z\": 3}",
        "{\"step\": -1, \"z\": 3}",
        "{\"step\": 1.5}",
    ] {
        let json: Json = serde_json::from_str(bad).unwrap();
        assert!(!rows.is_valid(&json), "the row schema takes {bad}");
    }
    for bad in [
        "{\"step\": 0, \"trigger\": \"t\", \"values\": {}}",
        "{\"step\": 0, \"trigger\": \"\", \"message\": \"m\", \"values\": {}}",
        "{\"step\": 0, \"trigger\": \"t\", \"state\": \"on\", \"message\": \"m\", \"values\": {}}",
        "{\"step\": 0, \"trigger\": \"t\", \"suppressed\": -1, \"message\": \"m\", \"values\": {}}",
        "{\"step\": 0, \"trigger\": \"t\", \"labels\": {\"team\": 1}, \"message\": \"m\", \"values\": {}}",
    ] {
        let json: Json = serde_json::from_str(bad).unwrap();
        assert!(!alerts.is_valid(&json), "the alert schema takes {bad}");
    }
}
