//! `vigil run`'s operator controls: `--only`, `--quiet`, `--pass`, `--on-malformed`,
//! `--summary`, the progress bar (never without a terminal), the tier fallback line and
//! `--strict-tier`, `vigil completions` and the exit statuses in `--help`.

use crate::support::{test_dir, write};
use std::process::Stdio;

const SPEC: &str = "in host: Str\nin temp: Float\nin region: Str\nout hot: Bool\nout avg: Float\n\
out n: Int\navg = temp\nhot = temp > 30.0\nn = default(n[1], 0) + 1\n\
trigger too_hot: hot \"temperature {temp} on {host}\"\n";

/// Every stream scalar: native-whole can run it.
const SCALAR: &str = "in x: Int\nout z: Int\nout w: Int\nz = x + 1\nw = x * 2\n";

/// Two good rows around two malformed ones (a bad value, a line that is not JSON).
const JSONL: &str = "{\"host\": \"a\", \"temp\": 31, \"region\": \"eu\"}\n\
{\"host\": \"b\", \"temp\": \"x\"}\nnot json\n{\"host\": \"a\", \"temp\": 20}\n";

/// Runs vigil (see `support::run_vigil`).
fn run(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    crate::support::run_vigil(args, stdin)
}

/// The spec and a JSON-lines trace of good rows only, in a test's own directory.
fn setup(test: &str) -> (crate::support::TestDir, String, String) {
    let dir = test_dir("operator", test);
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(
        &dir,
        "t.jsonl",
        "{\"host\": \"a\", \"temp\": 31, \"region\": \"eu\"}\n{\"host\": \"b\", \"temp\": 10}\n",
    );
    (dir, spec, input)
}

#[test]
fn only_prints_the_chosen_outputs_in_print_order_in_every_format() {
    let (dir, spec, input) = setup("only");
    let (code, out, _) = run(&["run", &spec, "--input", &input, "--only", "n,hot"], None);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "hot[0] = Bool(true)\nn[0] = Int(1)\nhot[1] = Bool(false)\nn[1] = Int(2)\n"
    );
    let (code, out, _) = run(
        &[
            "run", &spec, "--input", &input, "--only", "avg", "--output", "csv",
        ],
        None,
    );
    assert_eq!(code, 0);
    assert_eq!(out, "step,avg\n0,31.0\n1,10.0\n");
    let (code, out, _) = run(
        &[
            "run", &spec, "--input", &input, "--only", "avg", "--output", "jsonl",
        ],
        None,
    );
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "{\"step\":0,\"avg\":31.0}\n{\"step\":1,\"avg\":10.0}\n"
    );
    let (code, out, _) = run(
        &[
            "run", &spec, "--input", &input, "--only", "n", "--key", "host", "--output", "csv",
        ],
        None,
    );
    assert_eq!(code, 0);
    assert_eq!(out, "step,host,n\n0,\"a\",1\n0,\"b\",1\n");
    // A regular file of a spec without triggers runs in batches: the same columns.
    let scalar = write(&dir, "scalar.dsrv", SCALAR);
    let csv = write(&dir, "x.csv", "x\n1\n2\n");
    let (code, out, _) = run(
        &[
            "run", &scalar, "--input", &csv, "--only", "w", "--output", "csv",
        ],
        None,
    );
    assert_eq!(code, 0);
    assert_eq!(out, "step,w\n0,2\n1,4\n");
}

#[test]
fn an_unknown_only_name_is_a_usage_error_listing_the_outputs() {
    let (_dir, spec, input) = setup("only-unknown");
    let (code, out, err) = run(
        &["run", &spec, "--input", &input, "--only", "avg,temp"],
        None,
    );
    assert_eq!(code, 1);
    assert_eq!(out, "");
    assert!(
        err.contains("--only: `temp` is not an output of")
            && err.contains("(its outputs: hot, avg, n)"),
        "{err}"
    );
}

#[test]
fn quiet_prints_alerts_only_and_conflicts_with_only() {
    let (_dir, spec, input) = setup("quiet");
    for output in ["text", "csv", "jsonl"] {
        let (code, out, err) = run(
            &[
                "run", &spec, "--input", &input, "--quiet", "--output", output,
            ],
            None,
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "", "{output}: not even a CSV header");
        assert_eq!(err, "alert: too_hot at step 0: temperature 31.0 on a\n");
    }
    let (code, out, _) = run(
        &["run", &spec, "--input", &input, "--quiet", "--alerts", "-"],
        None,
    );
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "{\"step\":0,\"trigger\":\"too_hot\",\"message\":\"temperature 31.0 on a\",\"values\":{\"temp\":31.0,\"host\":\"a\"}}\n"
    );
    let (code, _, err) = run(
        &["run", &spec, "--input", &input, "--quiet", "--only", "n"],
        None,
    );
    assert_eq!(code, 1);
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn pass_copies_declared_inputs_into_rows_and_alerts() {
    let (dir, spec, input) = setup("pass");
    let (code, out, _) = run(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--pass",
            "region,host",
            "--only",
            "n",
            "--output",
            "csv",
        ],
        None,
    );
    assert_eq!(code, 0);
    // An absent input is an empty cell (an omitted member in JSON lines).
    assert_eq!(out, "step,region,host,n\n0,\"eu\",\"a\",1\n1,,\"b\",2\n");
    let alerts = dir.join("alerts.jsonl").to_str().unwrap().to_string();
    let (code, out, _) = run(
        &[
            "run", &spec, "--input", &input, "--pass", "region", "--only", "n", "--output",
            "jsonl", "--alerts", &alerts,
        ],
        None,
    );
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "{\"step\":0,\"region\":\"eu\",\"n\":1}\n{\"step\":1,\"n\":2}\n"
    );
    assert_eq!(
        std::fs::read_to_string(&alerts).unwrap(),
        "{\"step\":0,\"region\":\"eu\",\"trigger\":\"too_hot\",\"message\":\"temperature 31.0 on a\",\"values\":{\"temp\":31.0,\"host\":\"a\"}}\n"
    );
    // The key is in every keyed row already: passing it adds nothing.
    let (code, out, _) = run(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--pass",
            "host,region",
            "--key",
            "host",
            "--only",
            "n",
            "--output",
            "csv",
        ],
        None,
    );
    assert_eq!(code, 0);
    assert_eq!(out, "step,host,region,n\n0,\"a\",\"eu\",1\n0,\"b\",,1\n");
}

#[test]
fn pass_copies_undeclared_fields_in_every_format_and_refuses_text_without_alerts() {
    let (dir, spec, _) = setup("pass-undeclared");
    // `zone` and `dc` are not inputs of the spec: the readers read them as
    // untyped fields beside the inputs, and the monitor never sees them.
    let jsonl = write(
        &dir,
        "z.jsonl",
        "{\"host\": \"a\", \"temp\": 31, \"zone\": \"z1\", \"dc\": 7}\n{\"host\": \"b\", \"temp\": 10, \"zone\": true}\n",
    );
    let csv = write(
        &dir,
        "z.csv",
        "host,temp,region,zone,dc\n\"a\",31,,\"z1\",7\n\"b\",10,,true,\n",
    );
    let tc = write(
        &dir,
        "z.input",
        "0: host = \"a\"\n   temp = 31.0\n   zone = \"z1\"\n   dc = 7\n1: host = \"b\"\n   temp = 10.0\n   zone = true\n",
    );
    for input in [&jsonl, &csv, &tc] {
        let (code, out, err) = run(
            &[
                "run", &spec, "--input", input, "--pass", "zone,dc", "--only", "n", "--output",
                "csv",
            ],
            None,
        );
        // The spec's trigger fires on the first row; nothing else is said.
        assert_eq!(code, 0, "{input}: {err}");
        assert_eq!(
            err, "alert: too_hot at step 0: temperature 31.0 on a\n",
            "{input}"
        );
        assert_eq!(out, "step,zone,dc,n\n0,\"z1\",7,1\n1,true,,2\n", "{input}");
    }
    let (code, out, _) = run(
        &[
            "run", &spec, "--input", &jsonl, "--pass", "dc", "--only", "n", "--output", "jsonl",
        ],
        None,
    );
    assert_eq!(code, 0);
    assert_eq!(out, "{\"step\":0,\"dc\":7,\"n\":1}\n{\"step\":1,\"n\":2}\n");
    let (code, _, err) = run(&["run", &spec, "--input", &jsonl, "--pass", "host"], None);
    assert_eq!(code, 1);
    assert!(err.contains("--pass: nothing would carry"), "{err}");
}

#[test]
fn malformed_rows_stop_by_default_and_are_skipped_with_skip_or_warn() {
    let dir = test_dir("operator", "malformed");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "bad.jsonl", JSONL);
    let (code, out, err) = run(&["run", &spec, "--input", &input, "--only", "n"], None);
    assert_eq!(code, 4);
    assert_eq!(out, "n[0] = Int(1)\n");
    assert!(err.contains("bad.jsonl:2:23: expected Float"), "{err}");
    // Skipped rows are not steps: the good rows are steps 0 and 1, and the status is 0.
    let (code, out, err) = run(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--only",
            "n",
            "--on-malformed",
            "skip",
        ],
        None,
    );
    assert_eq!(code, 0);
    assert_eq!(out, "n[0] = Int(1)\nn[1] = Int(2)\n");
    assert_eq!(err, "alert: too_hot at step 0: temperature 31.0 on a\n");
    let (code, out, err) = run(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--only",
            "n",
            "--on-malformed",
            "warn",
        ],
        None,
    );
    assert_eq!(code, 0);
    assert_eq!(out, "n[0] = Int(1)\nn[1] = Int(2)\n");
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 2, "{err}");
    assert!(
        warnings[0].contains("bad.jsonl:2:23: expected Float for input `temp`"),
        "{err}"
    );
    assert!(
        warnings[1].contains("bad.jsonl:3:1: expected a JSON object"),
        "{err}"
    );
    assert!(
        warnings.iter().all(|w| w.ends_with("; the row is skipped")),
        "{err}"
    );
}

#[test]
fn malformed_csv_records_and_keyless_rows_are_skipped_and_input_traces_refuse_it() {
    let dir = test_dir("operator", "malformed-csv");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let scalar = write(&dir, "scalar.dsrv", SCALAR);
    // A bad cell, a record of the wrong width, and a quoted field spanning lines.
    let csv = write(&dir, "t.csv", "x\n1\nzz\n\"2\nx\"\n3,4\n5\n");
    let (code, out, err) = run(
        &[
            "run",
            &scalar,
            "--input",
            &csv,
            "--only",
            "z",
            "--on-malformed",
            "warn",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "z[0] = Int(2)\nz[1] = Int(6)\n");
    assert!(
        err.contains("t.csv:3:1:") && err.contains("t.csv:4:1:") && err.contains("t.csv:6:"),
        "{err}"
    );
    // With --key, a row without the key is malformed too.
    let keyless = write(
        &dir,
        "k.jsonl",
        "{\"host\": \"a\", \"temp\": 1}\n{\"temp\": 2}\n{\"host\": \"a\", \"temp\": 3}\n",
    );
    let (code, out, err) = run(
        &[
            "run",
            &spec,
            "--input",
            &keyless,
            "--key",
            "host",
            "--only",
            "n",
            "--on-malformed",
            "warn",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "n{host=a}[0] = Int(1)\nn{host=a}[1] = Int(2)\n");
    assert!(
        err.contains("warning: ") && err.contains("k.jsonl:2:1:"),
        "{err}"
    );
    let tc = write(&dir, "t.input", "0: x = 1\n");
    let (code, _, err) = run(
        &["run", &scalar, "--input", &tc, "--on-malformed", "skip"],
        None,
    );
    assert_eq!(code, 1);
    assert!(err.contains("needs a JSON-lines or CSV trace"), "{err}");
}

/// A malformed line between good ones on a real pipe: the run goes on with the right steps.
#[test]
fn a_malformed_line_on_a_pipe_is_skipped_and_the_run_goes_on() {
    let dir = test_dir("operator", "pipe");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let (code, out, err) = run(
        &[
            "run",
            &spec,
            "--input",
            "-",
            "--only",
            "n",
            "--on-malformed",
            "warn",
            "--output",
            "jsonl",
        ],
        Some(JSONL),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "{\"step\":0,\"n\":1}\n{\"step\":1,\"n\":2}\n");
    assert!(err.contains("<stdin>:3:1: expected a JSON object"), "{err}");
}

#[test]
fn the_summary_counts_rows_steps_skips_triggers_and_names_the_tier() {
    let dir = test_dir("operator", "summary");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(
        &dir,
        "bad.jsonl",
        format!("{JSONL}{{\"host\": \"c\", \"temp\": 40}}\n"),
    );
    let (code, _, err) = run(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--quiet",
            "--on-malformed",
            "skip",
            "--summary",
            "--tier",
            "native-regions",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let summary: Vec<&str> = err.lines().filter(|l| l.starts_with("summary:")).collect();
    assert_eq!(summary.len(), 4, "{err}");
    assert_eq!(
        summary[0],
        "summary: 5 rows read, 3 steps evaluated, 2 malformed rows skipped"
    );
    assert!(
        summary[1].starts_with("summary: tier native-regions (requested; "),
        "{err}"
    );
    assert!(summary[1].contains("decline"), "{err}");
    assert_eq!(
        summary[2],
        "summary: trigger too_hot: 2 firings, first at step 0, last at step 2"
    );
    assert!(summary[3].ends_with(" rows/s"), "{err}");
    // --fail-on-trigger prints it too, before its own error line.
    let (code, _, err) = run(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--quiet",
            "--on-malformed",
            "skip",
            "--fail-on-trigger",
        ],
        None,
    );
    assert_eq!(code, 5);
    assert!(err.contains("summary: trigger too_hot: 2 firings"), "{err}");
    assert!(
        err.contains("error: 2 trigger firings (--fail-on-trigger)"),
        "{err}"
    );
    // Without --summary and without a terminal, nothing else reaches stderr (no progress bar).
    let scalar = write(&dir, "scalar.dsrv", SCALAR);
    let mut csv = String::from("x\n");
    for i in 0..20_000 {
        csv.push_str(&format!("{i}\n"));
    }
    let csv = write(&dir, "big.csv", &csv);
    let (code, out, err) = run(&["run", &scalar, "--input", &csv], None);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 40_000);
    assert_eq!(err, "");
}

#[test]
fn an_explicit_tier_that_cannot_run_says_why_and_strict_tier_refuses() {
    let (dir, with_str, input) = setup("tier");
    // Every stream is Str: the whole-row kernel would compute nothing.
    let spec = write(&dir, "str.dsrv", "in host: Str\nout h: Str\nh = host\n");
    let (code, out, err) = run(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--tier",
            "native-whole",
            "--quiet",
        ],
        None,
    );
    assert_eq!(code, 0);
    assert_eq!(out, "");
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.starts_with("warning: native-whole requested, but not every stream is scalar")
            && first.ends_with("; running native-regions instead"),
        "{err}"
    );
    let (code, out, err) = run(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--tier",
            "native-whole",
            "--strict-tier",
        ],
        None,
    );
    assert_eq!(code, 1);
    assert_eq!(out, "");
    assert!(
        err.contains("error: native-whole requested") && err.contains("--strict-tier"),
        "{err}"
    );
    // A tier that runs as asked prints nothing extra: so does native-whole
    // on a spec with Str streams beside scalar ones (they are its tail).
    let (code, _, err) = run(
        &[
            "run",
            &with_str,
            "--input",
            &input,
            "--tier",
            "native-whole",
            "--strict-tier",
            "--quiet",
        ],
        None,
    );
    assert_eq!(code, 0);
    assert!(!err.contains("warning") && !err.contains("error"), "{err}");
    let scalar = write(&dir, "scalar.dsrv", SCALAR);
    let csv = write(&dir, "x.csv", "x\n1\n");
    let (code, _, err) = run(
        &[
            "run",
            &scalar,
            "--input",
            &csv,
            "--tier",
            "native-whole",
            "--strict-tier",
        ],
        None,
    );
    assert_eq!((code, err.as_str()), (0, ""));
}

#[test]
fn completions_and_help_list_values_and_exit_statuses() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = run(&["completions", shell], None);
        assert_eq!(code, 0, "{err}");
        // The flags and the tiers' names are completed.
        assert!(
            out.contains("on-malformed") && out.contains("native-whole"),
            "{shell}: {out}"
        );
    }
    let (code, out, _) = run(&["completions", "tcsh"], None);
    assert_eq!((code, out.as_str()), (1, ""));
    let (code, out, _) = run(&["run", "--help"], None);
    assert_eq!(code, 0);
    for needle in [
        "[possible values: auto, canonical, quickened, native-regions, native-whole]",
        "[possible values: auto, tc, csv, jsonl]",
        "[possible values: text, csv, jsonl]",
        "- warn:",
        "Exit status:",
        "5  a trigger fired",
        "4  malformed trace",
    ] {
        assert!(
            out.contains(needle),
            "`{needle}` missing from --help:\n{out}"
        );
    }
    let (code, out, _) = run(&["--help"], None);
    assert_eq!(code, 0);
    assert!(
        out.contains("completions") && out.contains("Exit status:"),
        "{out}"
    );
}

/// A stream resumed from a checkpoint under `--on-malformed skip` drops the rows the
/// checkpoint consumed without counting the malformed ones among them: no row is lost or
/// repeated in the output file.
#[test]
fn a_resumed_stream_skips_malformed_rows_again_uncounted() {
    let dir = test_dir("operator", "resume");
    let scalar = write(&dir, "scalar.dsrv", SCALAR);
    let ck = dir.join("run.ck").to_str().unwrap().to_string();
    let out = dir.join("out.txt").to_str().unwrap().to_string();
    let common = [
        "run",
        scalar.as_str(),
        "--input",
        "-",
        "--only",
        "z",
        "--on-malformed",
        "skip",
        "--output-file",
        out.as_str(),
    ];
    let mut first = common.to_vec();
    first.extend(["--checkpoint", &ck, "--checkpoint-every", "1"]);
    let (code, _, err) = run(&first, Some("{\"x\": 1}\nbad\n{\"x\": 2}\n"));
    assert_eq!(code, 0, "{err}");
    let mut second = common.to_vec();
    second.extend(["--resume", &ck]);
    let (code, _, err) = run(&second, Some("{\"x\": 1}\nbad\n{\"x\": 2}\n{\"x\": 3}\n"));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "z[0] = Int(2)\nz[1] = Int(3)\nz[2] = Int(4)\n"
    );
}

/// On a real terminal (a pseudo-terminal from util-linux `script`), a file
/// run draws the progress bar on standard error; the same run without one
/// draws nothing (the test above).
#[test]
fn a_file_run_on_a_terminal_draws_the_progress_bar() {
    let dir = test_dir("operator", "terminal");
    let spec = write(&dir, "spec.dsrv", "in x: Int\nout y: Int\ny = x + 1\n");
    let rows: String = (0..200_000).map(|i| format!("{{\"x\": {i}}}\n")).collect();
    let input = write(&dir, "t.jsonl", rows);
    let bin = env!("CARGO_BIN_EXE_vigil");
    let out = std::process::Command::new("script")
        .args([
            "-qec",
            &format!("{bin} run {spec} --input {input} --quiet"),
            "/dev/null",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("util-linux `script` runs (it gives the run a terminal)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(
        screen.contains('%') && screen.contains("rows"),
        "no progress bar:\n{screen}"
    );
}
