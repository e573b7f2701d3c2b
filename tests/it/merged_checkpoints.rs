//! Checkpoints of merged runs (`--time`, several `--input`s, periodic specifications, `--record`):
//! killed with SIGKILL at random points and resumed, they give exactly the files of an
//! uninterrupted run — outputs, alerts and the replay log, which replays to the same outputs.

use crate::checkpoints::{Rng, killed_and_resumed, uninterrupted};
use crate::support::{test_dir, vigil, write};

/// Sums over two sources, a periodic count, and a trigger (alerts).
const SPEC: &str = "in a: Int\nin b: Int\nout s: Int\nout c: Int @ 5s\n\
s = default(s[1], 0) + default(a, 0) + default(b, 0)\nc = default(c[1], 0) + 1\n\
trigger odd: s % 7 == 3 \"s is {s}\"\n";

/// A CSV source `t,COLUMN` of `rows` rows: times rising by 0 to `step`,
/// now and then a row up to 2 late (within `--lateness 3`), and a time
/// reset (the time field `reset`) at row `reset_at`, after which times
/// start again.
fn source(column: &str, rows: usize, step: u64, reset_at: usize, rng: &mut Rng) -> String {
    let mut out = format!("t,{column}\n");
    let mut t = 0;
    for i in 0..rows {
        if i == reset_at {
            out.push_str("reset,\n");
            t = 0;
        }
        t += rng.below(step + 1);
        let late = if t > 3 && rng.below(50) == 0 {
            rng.below(3)
        } else {
            0
        };
        out.push_str(&format!("{},{}\n", t - late, i % 97));
    }
    out
}

/// Kills the run three times at random checkpoints and resumes it, checks
/// that at least one kill landed mid-run and that the output equals an
/// uninterrupted run's.
fn killed_and_compared(
    dir: &std::path::Path,
    input: &str,
    extra: &[&str],
    stdin: Option<&str>,
    rng: &mut Rng,
) {
    let want = uninterrupted(dir, input, extra, stdin);
    let (got, landed) = killed_and_resumed(dir, input, extra, stdin, 3, rng);
    eprintln!("{landed} of 3 kills landed before the end");
    assert!(landed >= 1, "no kill landed before the end");
    assert!(
        got == want,
        "the resumed output differs from an uninterrupted run's"
    );
}

/// Reads a file the run wrote, as text.
fn read(dir: &std::path::Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

#[test]
fn merged_runs_resume_where_they_were_killed() {
    let mut rng = Rng::new();
    let dir = test_dir("merged_checkpoints", "kill");
    write(&dir, "spec.dsrv", SPEC);
    let a = write(&dir, "a.csv", source("a", 20_000, 3, 9_000, &mut rng));
    let b = write(&dir, "b.csv", source("b", 20_000, 4, 11_000, &mut rng));
    let alerts = dir.join("alerts").to_string_lossy().into_owned();
    let log = dir.join("log").to_string_lossy().into_owned();
    let extra = [
        "--input",
        &b,
        "--time",
        "t",
        "--lateness",
        "3",
        "--output",
        "csv",
        "--alerts",
        &alerts,
        "--record",
        &log,
        "--checkpoint-every",
        "700",
    ];
    let want = uninterrupted(&dir, &a, &extra, None);
    let (want_alerts, want_log) = (read(&dir, "alerts"), read(&dir, "log"));
    assert!(
        want_alerts.lines().count() > 100 && want.len() > 100_000,
        "the run proves little: {} alerts",
        want_alerts.lines().count()
    );
    let (got, landed) = killed_and_resumed(&dir, &a, &extra, None, 3, &mut rng);
    eprintln!("{landed} of 3 kills landed before the end");
    assert!(landed >= 1, "no kill landed before the end");
    assert!(
        got == want,
        "the resumed output differs from an uninterrupted run's"
    );
    assert!(read(&dir, "alerts") == want_alerts, "the alerts differ");
    assert!(read(&dir, "log") == want_log, "the replay logs differ");
    // The log of the killed and resumed run replays to the same outputs.
    let replayed = vigil()
        .args(["replay", dir.join("spec.dsrv").to_str().unwrap(), &log])
        .args(["--output", "csv"])
        .output()
        .unwrap();
    assert!(replayed.status.success());
    assert!(replayed.stdout == want, "the replayed log's outputs differ");
}

/// An `.input` trace of `rows` steps of input `name`, with a time reset
/// (`// vigil: time reset`, read with the row before it) every `every`
/// rows: the merge's resets are resumed too, whichever side of the
/// checkpoint they fall.
fn tc(name: &str, rows: usize, every: usize, rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut step = 0;
    for i in 0..rows {
        if i > 0 && i % every == 0 {
            out.push_str("// vigil: time reset\n");
            step = 0;
        }
        out.push_str(&format!("{step}: {name} = {}\n", i % 89));
        step += 1 + rng.below(2);
    }
    out
}

#[test]
fn merged_input_traces_with_time_resets_resume_where_they_were_killed() {
    let mut rng = Rng::new();
    let dir = test_dir("merged_checkpoints", "kill-resets");
    write(&dir, "spec.dsrv", SPEC);
    let a = write(&dir, "a.input", tc("a", 16_000, 1_500, &mut rng));
    let b = write(&dir, "b.input", tc("b", 16_000, 1_500, &mut rng));
    let extra = [
        "--input",
        &b,
        "--output",
        "jsonl",
        "--checkpoint-every",
        "450",
    ];
    killed_and_compared(&dir, &a, &extra, None, &mut rng);
}

/// A keyed run merging a stream (standard input, which cannot be
/// repositioned: its rows taken are read again and dropped) with a file.
#[test]
fn merged_keyed_runs_of_a_stream_and_a_file_resume_where_they_were_killed() {
    let mut rng = Rng::new();
    let dir = test_dir("merged_checkpoints", "kill-keyed-stream");
    let spec = "in host: Str\nin a: Int\nin b: Int\nout s: Int\n\
                s = default(s[1], 0) + default(a, 0) + default(b, 0)\n";
    write(&dir, "spec.dsrv", spec);
    let keyed = |column: &str, rng: &mut Rng| {
        let mut out = String::new();
        let mut t = 0;
        for i in 0..6_000 {
            t += rng.below(3);
            out.push_str(&format!(
                "{{\"t\": {t}, \"host\": \"h{}\", \"{column}\": {}}}\n",
                rng.below(40),
                i % 53
            ));
        }
        out
    };
    let a = keyed("a", &mut rng);
    let b = write(&dir, "b.jsonl", keyed("b", &mut rng));
    let extra = [
        "--input",
        &b,
        "--time",
        "t",
        "--key",
        "host",
        "--output",
        "csv",
        "--checkpoint-every",
        "200",
    ];
    killed_and_compared(&dir, "-", &extra, Some(&a), &mut rng);
}

/// A merged run's checkpoint resumes only a merged run with the options
/// that shape its merge and the same sources, in order; and a plain run's
/// only a plain run. Each mismatch says what differs.
#[test]
fn a_merged_checkpoint_must_fit_the_run() {
    let dir = test_dir("merged_checkpoints", "fit");
    write(&dir, "spec.dsrv", SPEC);
    let a = write(&dir, "a.csv", "t,a\n1,1\n2,2\n");
    let b = write(&dir, "b.csv", "t,b\n1,5\n3,6\n");
    let spec = dir.join("spec.dsrv").to_string_lossy().into_owned();
    let ck = dir.join("ck").to_string_lossy().into_owned();
    let run = |args: &[&str]| {
        let out = vigil().arg("run").arg(&spec).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let merged = ["--input", &a, "--input", &b, "--time", "t"];
    let (code, err) = run(&[&merged[..], &["--checkpoint", &ck]].concat());
    assert_eq!(code, Some(0), "{err}");
    let refused = |args: &[&str], message: &str| {
        let (code, err) = run(&[args, &["--resume", &ck]].concat());
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(&format!("cannot resume from `{ck}`: {message}")),
            "{err}"
        );
    };
    refused(
        &[&merged[..], &["--lateness", "2"]].concat(),
        "it was taken with `--time t --time-unit s --lateness - ",
    );
    refused(
        &["--input", &b, "--input", &a, "--time", "t"],
        &format!("its source 1 is `{a}`, and this run's is `{b}`"),
    );
    refused(
        &["--input", &a, "--time", "t"],
        "it was taken on 2 sources, and this run has 1",
    );
    // A plain run's checkpoint, and a plain run given a merged one.
    let plain = dir.join("plain.ck").to_string_lossy().into_owned();
    let counter = write(
        &dir,
        "counter.dsrv",
        "in a: Int\nout s: Int\ns = default(s[1], 0) + a\n",
    );
    let out = vigil()
        .args(["run", &counter, "--input", &a, "--checkpoint", &plain])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = vigil()
        .args(["run", &counter, "--input", &a, "--resume", &ck])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("it was taken on a merged run of 2 sources"),
        "{err}"
    );
    let (code, err) = run(&[&merged[..], &["--resume", &plain]].concat());
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("it was taken on a run of one trace without --time"),
        "{err}"
    );
}
