//! Scale-out combined with the run's other features, each compared with the single-process run:
//! a replay log (`--record`) kept exactly once across SIGKILL and `--resume`, and a `tcp://`
//! listener's connections as sources.

use crate::checkpoints::Rng;
use crate::scale::{SPEC, complete_checkpoint, read, run, trace};
use crate::support::{test_dir, vigil, write};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The scale SPEC's inputs with a count per key and a periodic stream counting its ticks.
const BEAT: &str = "in host: Str\nin temp: Float\nin ts: Int\nout n: Int\nout beat: Int @ 2s\n\
                    n = default(n[1], 0) + 1\nbeat = default(beat[1], 0) + 1\n";

/// Runs `args` (with `--resume CK` after the first round), killing the run
/// with SIGKILL a while after a checkpoint newer than the last one completes,
/// up to `kills` times; returns how many kills landed before the end.
fn kill_and_resume(args: &[&str], ck: &str, kills: usize, rng: &mut Rng) -> usize {
    let mut landed = 0;
    for round in 0..=kills {
        let mut all = args.to_vec();
        if round > 0 {
            all.extend(["--resume", ck]);
        }
        let mut child = vigil()
            .args(&all)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if round < kills {
            let before = complete_checkpoint(Path::new(ck));
            let start = Instant::now();
            while complete_checkpoint(Path::new(ck)) == before
                && child.try_wait().unwrap().is_none()
            {
                assert!(start.elapsed() < Duration::from_secs(120), "no checkpoint");
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(Duration::from_millis(rng.below(120)));
            if child.try_wait().unwrap().is_none() {
                child.kill().unwrap();
                child.wait().unwrap();
                landed += 1;
                continue;
            }
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return landed;
    }
    unreachable!("the last round runs to the end")
}

/// Issue 35: `--record` with `--checkpoint`/`--resume` in a scaled run (it
/// was refused). The log's length is recorded at each barrier and the log
/// cut back to it on resume, so after kills the output, the alerts and the
/// log are the uninterrupted run's byte for byte, the log replays to the
/// output, and the output is the single-process keyed run's.
#[test]
fn a_scaled_replay_log_is_kept_exactly_once_across_kills() {
    let mut rng = Rng::new();
    let dir = test_dir("scale_combos", "record_kill");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "trace.jsonl", trace(30_000, 60));
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let files = |tag: &str| {
        [
            path(&format!("{tag}.out")),
            path(&format!("{tag}.alerts")),
            path(&format!("{tag}.log")),
        ]
    };
    let base = [
        "run", &spec, "--input", &input, "--key", "host", "--time", "ts", "--output", "csv",
    ];
    let args = |f: &[String; 3], ck: &str| -> Vec<String> {
        let mut a: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        for (flag, v) in [
            ("--workers", "2"),
            ("--output-file", &f[0]),
            ("--alerts", &f[1]),
            ("--record", &f[2]),
            ("--checkpoint", ck),
            ("--checkpoint-every", "40"),
        ] {
            a.extend([flag.to_string(), v.to_string()]);
        }
        a
    };
    let single = run(&[&base[..], &["--output-file", &path("single.out")]].concat());
    assert!(
        single.status.success(),
        "{}",
        String::from_utf8_lossy(&single.stderr)
    );
    let want = read(&path("single.out"));

    let reference = files("ref");
    let ck_ref = path("ck_ref");
    let a = args(&reference, &ck_ref);
    let o = run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(read(&reference[0]) == want, "not the single-process output");

    let killed = files("killed");
    let ck = path("ck");
    let a = args(&killed, &ck);
    let landed = kill_and_resume(
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
        &ck,
        3,
        &mut rng,
    );
    eprintln!("{landed} of 3 kills landed before the end");
    assert!(landed >= 1, "no kill landed before the end");
    for (got, want) in killed.iter().zip(&reference) {
        assert!(
            read(got) == read(want),
            "`{got}` differs from the uninterrupted run's"
        );
    }
    let replayed = run(&["replay", &spec, &killed[2], "--output", "csv"]);
    assert!(
        replayed.status.success(),
        "{}",
        String::from_utf8_lossy(&replayed.stderr)
    );
    assert!(
        String::from_utf8(replayed.stdout).unwrap() == want,
        "the log does not replay to the output"
    );
}

/// A resume must keep the log as the checkpoint was taken: with `--record`
/// given to a checkpoint taken without it, or left out from one taken with
/// it, it is refused with the reason.
#[test]
fn a_scaled_resume_refuses_a_log_that_does_not_fit_its_checkpoint() {
    let dir = test_dir("scale_combos", "record_fit");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "trace.jsonl", trace(3_000, 20));
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (ck, log, out) = (path("ck"), path("log"), path("out"));
    let base = [
        "run",
        &spec,
        "--input",
        &input,
        "--key",
        "host",
        "--time",
        "ts",
        "--workers",
        "2",
        "--output-file",
        &out,
        "--checkpoint",
        &ck,
        "--checkpoint-every",
        "100",
    ];
    let o = run(&base);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&[&base[..], &["--resume", &ck, "--record", &log]].concat());
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("taken without --record"), "{err}");
    let o = run(&[&base[..], &["--record", &log]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&[&base[..], &["--resume", &ck]].concat());
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("taken with --record"), "{err}");
}

/// Issue 35: a scaled run reads a `tcp://` listener (it was refused): its
/// connections join as sources, and the output is the single-process
/// keyed run's over the same connection. With checkpoints it is refused,
/// as a single-process run refuses it.
#[test]
fn a_scaled_run_reads_a_tcp_listener_as_one_process_does() {
    use std::io::{BufRead, BufReader, Write};
    let dir = test_dir("scale_combos", "tcp");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let text = trace(2_000, 15);
    let outputs: Vec<String> = [&[][..], &["--workers", "2"][..]]
        .iter()
        .map(|extra| {
            let mut child = vigil()
                .args(
                    [
                        &[
                            "run",
                            &spec,
                            "--input",
                            "tcp://127.0.0.1:0",
                            "--time",
                            "ts",
                            "--key",
                            "host",
                            "--output",
                            "csv",
                        ][..],
                        extra,
                    ]
                    .concat(),
                )
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // The listener's address (port 0 asked for any) is on stderr.
            let mut err = BufReader::new(child.stderr.take().unwrap());
            let mut line = String::new();
            let addr = loop {
                line.clear();
                assert!(err.read_line(&mut line).unwrap() > 0, "no listening notice");
                if let Some(at) = line.trim().strip_prefix("vigil: listening on tcp://") {
                    break at.to_string();
                }
            };
            let mut con = std::net::TcpStream::connect(&addr).unwrap();
            // A row of a later time after the trace: a scaled run writes a
            // time's rows once a later time is read (more rows of it may
            // come), and the listener never ends.
            con.write_all(text.as_bytes()).unwrap();
            con.write_all(b"{\"host\":\"end\",\"temp\":1.0,\"ts\":100000}\n")
                .unwrap();
            drop(con);
            // The run listens on: read its output until every row is out.
            let mut out = BufReader::new(child.stdout.take().unwrap());
            let mut got = String::new();
            let start = Instant::now();
            while got.lines().count() < 2_001 {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "rows missing: {got}"
                );
                let mut l = String::new();
                if out.read_line(&mut l).unwrap() == 0 {
                    break;
                }
                got.push_str(&l);
            }
            got = got.lines().take(2_001).map(|l| format!("{l}\n")).collect();
            child.kill().unwrap();
            child.wait().unwrap();
            got
        })
        .collect();
    assert_eq!(outputs[0].lines().count(), 2_001);
    assert!(outputs[1] == outputs[0], "the scaled run's output differs");
    let ck = dir.join("ck");
    let o = run(&[
        "run",
        &spec,
        "--input",
        "tcp://127.0.0.1:0",
        "--time",
        "ts",
        "--key",
        "host",
        "--workers",
        "2",
        "--checkpoint",
        ck.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("tcp:// input") && err.contains("cannot be read again"),
        "{err}"
    );
}

/// `trace(rows, keys)` as CSV (no quotes: a file that splits at line ends).
pub(crate) fn csv(rows: usize, keys: u64) -> String {
    let mut out = String::from("host,temp,ts\n");
    for line in trace(rows, keys).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        out.push_str(&format!(
            "{},{},{}\n",
            v["host"].as_str().unwrap(),
            v["temp"],
            v["ts"]
        ));
    }
    out
}

/// Runs `args` and gives its status, standard output and standard error
/// (without the summary's timing line).
fn outcome(args: &[&str]) -> (Option<i32>, String, String) {
    let o = run(args);
    let err = without_timing(&String::from_utf8_lossy(&o.stderr));
    (o.status.code(), String::from_utf8(o.stdout).unwrap(), err)
}

/// Standard error without the summary's timing line, which differs from run to run.
pub(crate) fn without_timing(err: &str) -> String {
    err.lines()
        .filter(|l| !l.ends_with("rows/s"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Issue 35, "scale-out reads in parallel": a regular file without `--time`
/// is read in parts by process 0's workers (`--stats` says how many), and
/// the output, the alerts and the summary are the single-process keyed
/// run's byte for byte: JSON lines and CSV, 2 and 3 workers, a periodic
/// spec (each key's ticks at its rows' indices), and a CSV file holding
/// quotes, which is read whole (a quoted field may span lines).
#[test]
fn a_file_read_in_parts_by_the_workers_gives_the_single_process_output() {
    let dir = test_dir("scale_combos", "parts");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let periodic = write(&dir, "beat.dsrv", BEAT);
    let jsonl = write(&dir, "t.jsonl", trace(40_000, 300));
    let csv_file = write(&dir, "t.csv", csv(40_000, 300));
    let quoted = write(&dir, "q.csv", csv(3_000, 20).replacen("h1,", "\"h1\",", 1));
    // (A periodic run's summary counts ticks as steps scaled, and has a
    // line of the merge single-process: it is left out there.)
    let summary = ["--summary"];
    let cases: [(&str, &str, &str, bool, &[&str]); 5] = [
        (&spec, &jsonl, "2", true, &summary),
        (&spec, &jsonl, "3", true, &summary),
        (&spec, &csv_file, "2", true, &summary),
        (&periodic, &jsonl, "2", true, &[]),
        (&spec, &quoted, "2", false, &summary),
    ];
    for (spec, input, workers, split, extra) in cases {
        let base = [
            &[
                "run", spec, "--input", input, "--key", "host", "--output", "csv",
            ][..],
            extra,
        ]
        .concat();
        let want = outcome(&base);
        assert_eq!(want.0, Some(0), "{}", want.2);
        let got = outcome(&[&base[..], &["--workers", workers]].concat());
        assert!(
            got == want,
            "{input} with {workers} workers: not the single-process run's output\n{}",
            got.2
        );
        let stats = outcome(&[&base[..], &["--workers", workers, "--stats"]].concat());
        assert_eq!(
            stats.2.contains(&format!("parts by {workers} workers")),
            split,
            "{input}: {}",
            stats.2
        );
    }
}

/// A malformed row or a row without its key in a later part stops a run
/// read in parts as it stops the single-process run: the same status and
/// message, and the outputs of exactly the rows before it (rows of later
/// parts, read already by other workers, are not written); with
/// `--on-malformed skip` both are skipped and counted as one process counts
/// them.
#[test]
fn a_bad_row_in_a_part_stops_or_is_skipped_as_in_one_process() {
    let dir = test_dir("scale_combos", "parts_errors");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let text = trace(40_000, 300);
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let bad = write(&dir, "bad.jsonl", {
        let mut l = lines.clone();
        l[23_456] = "{\"host\":\"h1\",\"temp\":\"hot\",\"ts\":7818}".into();
        l.join("\n") + "\n"
    });
    lines[31_000] = "{\"temp\":1.5,\"ts\":10333}".into();
    lines[12_345] = "{\"host\":\"h1\",\"temp\":[1],\"ts\":4115}".into();
    let keyless = write(&dir, "keyless.jsonl", lines.join("\n") + "\n");
    for (input, extra) in [
        (&bad, &[][..]),
        (&keyless, &[][..]),
        (&keyless, &["--on-malformed", "skip", "--summary"][..]),
    ] {
        let base = [
            &[
                "run", &spec, "--input", input, "--key", "host", "--output", "csv",
            ][..],
            extra,
        ]
        .concat();
        let want = outcome(&base);
        let got = outcome(&[&base[..], &["--workers", "3"]].concat());
        assert!(
            got.0 == want.0 && got.1 == want.1,
            "{input} {extra:?}: {}",
            got.2
        );
        let mut e = (
            want.2.lines().collect::<Vec<_>>(),
            got.2.lines().collect::<Vec<_>>(),
        );
        // Alerts on standard error and the readers' words may interleave
        // otherwise; the lines are the same.
        e.0.sort_unstable();
        e.1.sort_unstable();
        assert_eq!(e.0, e.1, "{input} {extra:?}");
    }
}

/// Parts larger than what a reader may have in flight (here about 12,000 rows each): a batch
/// that ran from the end of one part into the worker's next part held the output back at the
/// first part's time, while the other worker waited for its own rows to complete, for ever (the
/// run hung at the end of the first part). A batch now holds rows of one part.
#[test]
fn parts_larger_than_a_readers_window_do_not_stall_the_run() {
    let dir = test_dir("scale_combos", "parts_window");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "t.jsonl", trace(240_000, 500));
    let base = [
        "run", &spec, "--input", &input, "--key", "host", "--output", "csv",
    ];
    let want = outcome(&base);
    assert_eq!(want.0, Some(0), "{}", want.2);
    let got = outcome(&[&base[..], &["--workers", "2", "--stats"]].concat());
    assert!(got.2.contains("parts by 2 workers"), "{}", got.2);
    assert!(got.1 == want.1, "not the single-process output");
}

/// Issue 35: several `--input`s of a scaled run without `--time` are read in parallel, each by
/// one of process 0's workers, and the output is the single-process run's byte for byte: with
/// inputs of different lengths, more inputs than workers and fewer, a malformed row that stops
/// the run (in the first input, a middle one, one whose neighbour has ended) or is skipped, and
/// a row without its key. The single-process run stops after the rows it merged before it read
/// the bad one, which the readers reproduce.
#[test]
fn several_inputs_are_read_in_parallel_and_give_the_single_process_output() {
    let dir = test_dir("scale_combos", "inputs");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let lens = [9_000, 4_000, 7_000];
    let texts: Vec<String> = (0..3).map(|i| trace(lens[i], 40 + 10 * i as u64)).collect();
    let good: Vec<String> = (0..3)
        .map(|i| write(&dir, &format!("in{i}.jsonl"), texts[i].clone()))
        .collect();
    // `text` with line `at` (0-based) replaced by `line`.
    let edit = |name: &str, i: usize, at: usize, line: &str| {
        let mut l: Vec<&str> = texts[i].lines().collect();
        l[at] = line;
        write(&dir, name, l.join("\n") + "\n")
    };
    let bad_type = "{\"host\":\"h1\",\"temp\":\"hot\",\"ts\":7}";
    let no_key = "{\"temp\":1.5,\"ts\":7}";
    let mid = edit("mid.jsonl", 1, 2_500, bad_type);
    let first = edit("first.jsonl", 0, 0, bad_type);
    // Past the end of the 4,000-row input: its neighbour has ended.
    let late = edit("late.jsonl", 2, 6_000, bad_type);
    let keyless = edit("keyless.jsonl", 2, 3_333, no_key);
    let cases: Vec<(Vec<&str>, &[&str])> = vec![
        (vec![&good[0], &good[1], &good[2]], &[]),
        (vec![&good[1], &good[0]], &["--summary"]),
        (vec![&good[0], &mid, &good[2]], &[]),
        (vec![&good[0], &mid, &good[2]], &["--on-malformed", "warn"]),
        (vec![&first, &good[1], &good[2]], &[]),
        (vec![&good[1], &late, &good[0]], &[]),
        (vec![&good[1], &good[0], &keyless], &[]),
        (
            vec![&good[1], &good[0], &keyless],
            &["--on-malformed", "skip"],
        ),
    ];
    for (inputs, extra) in &cases {
        let mut base = vec!["run", &spec, "--key", "host", "--output", "csv"];
        for i in inputs {
            base.extend(["--input", i]);
        }
        base.extend(*extra);
        let want = outcome(&base);
        for workers in ["2", "4"] {
            let got = outcome(&[&base[..], &["--workers", workers, "--stats"]].concat());
            // `--stats` is printed at a run's end (a stopped run says its error instead).
            assert!(
                got.0 != Some(0)
                    || got.2.contains(&format!(
                        "{} inputs read in parallel by {workers} workers",
                        inputs.len()
                    )),
                "{inputs:?}: {}",
                got.2
            );
            assert!(
                got.0 == want.0 && got.1 == want.1,
                "{inputs:?} {extra:?} on {workers} workers: {} against {}",
                got.2,
                want.2
            );
            // The errors, warnings and summary are the single-process run's (the summary's
            // rate and the workers' counters aside).
            let said = |e: &str| -> Vec<String> {
                let mut l: Vec<String> = e
                    .lines()
                    .filter(|l| {
                        ["error", "warning", "summary"]
                            .iter()
                            .any(|w| l.starts_with(w))
                    })
                    .map(String::from)
                    .collect();
                l.sort_unstable();
                l
            };
            assert_eq!(said(&got.2), said(&want.2), "{inputs:?} {extra:?}");
        }
        // Recorded, still read in parallel (the feed read them): each worker logs its inputs'
        // rows with the feed's stamps, and the log replays to the single-process output and
        // exit status, its stop too.
        let log = dir.join("inputs.log");
        let log = log.to_str().unwrap();
        let got = outcome(&[&base[..], &["--workers", "2", "--stats", "--record", log]].concat());
        assert!(
            got.0 == want.0 && got.1 == want.1,
            "{inputs:?} {extra:?}, recorded: {}",
            got.2
        );
        assert!(
            got.0 != Some(0) || got.2.contains("inputs read in parallel by 2 workers"),
            "{inputs:?} {extra:?}, recorded: {}",
            got.2
        );
        let replayed = outcome(&["replay", &spec, log, "--output", "csv"]);
        assert!(
            replayed.0 == want.0 && replayed.1 == want.1,
            "{inputs:?} {extra:?}, replayed: {}",
            replayed.2
        );
    }
    // A periodic spec ticks on the rows' stamps (each input's row index): the log keeps the
    // feed's, so its replay ticks as the run did.
    let beat = write(&dir, "beat.dsrv", BEAT);
    let log = dir.join("beat.log");
    let log = log.to_str().unwrap();
    let base = [
        "run", &beat, "--key", "host", "--output", "csv", "--input", &good[0], "--input", &good[1],
    ];
    let want = outcome(&base);
    let got = outcome(&[&base[..], &["--workers", "2", "--record", log]].concat());
    assert!(got == want, "periodic, recorded: {}", got.2);
    let replayed = outcome(&["replay", &beat, log, "--output", "csv"]);
    assert!(replayed.1 == want.1, "periodic, replayed: {}", replayed.2);
}

/// `count` rows of JSON lines for the scale SPEC with a time field `ts` that mostly rises, every
/// 41st row one behind (a late row within `--lateness 2`), from a seed of its own.
fn timed_trace(seed: u64, count: usize) -> String {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut text, mut ts) = (String::new(), 0u64);
    for i in 0..count {
        ts += next() % 3;
        let t = if i % 41 == 20 {
            ts.saturating_sub(1)
        } else {
            ts
        };
        let temp = 35.0 + (next() % 800) as f64 / 100.0;
        text.push_str(&format!(
            "{{\"host\":\"h{}\",\"temp\":{temp},\"ts\":{t}}}\n",
            next() % 37
        ));
    }
    text
}

/// Issue 35: several `--input`s with `--time` are read in parallel, each by one of process 0's
/// workers through a feed of its own (a late row's re-stamping depends only on its own input),
/// and the output is the single-process run's byte for byte: rows of one time from several
/// inputs, late rows, a row too late for `--lateness`, a malformed row, a row without its key,
/// two inputs that each stop the run (the earlier in the merge's order is the run's error), on
/// 2 and 3 workers. Inputs whose times are written differently are read through process 0's
/// feed, which writes every time as the first it read.
#[test]
fn several_timed_inputs_are_read_in_parallel_and_give_the_single_process_output() {
    let dir = test_dir("scale_combos", "timed_inputs");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let texts: Vec<String> = (0..3)
        .map(|i| timed_trace(7 + i, [3_000, 2_000, 2_500][i as usize]))
        .collect();
    let good: Vec<String> = (0..3)
        .map(|i| write(&dir, &format!("in{i}.jsonl"), texts[i].clone()))
        .collect();
    let edit = |name: &str, i: usize, at: usize, line: &str| {
        let mut l: Vec<&str> = texts[i].lines().collect();
        l[at] = line;
        write(&dir, name, l.join("\n") + "\n")
    };
    let too_late = edit(
        "too_late.jsonl",
        0,
        1_500,
        "{\"host\":\"h1\",\"temp\":36.0,\"ts\":1}",
    );
    let bad_type = edit(
        "bad.jsonl",
        1,
        1_200,
        "{\"host\":\"h1\",\"temp\":\"hot\",\"ts\":99999}",
    );
    let keyless = edit("keyless.jsonl", 2, 700, "{\"temp\":36.0,\"ts\":99999}");
    let dates = write(
        &dir,
        "dates.jsonl",
        "{\"host\":\"h1\",\"temp\":36.0,\"ts\":\"1970-01-01T00:00:01Z\"}\n",
    );
    let dates2 = write(
        &dir,
        "dates2.jsonl",
        "{\"host\":\"h2\",\"temp\":37.0,\"ts\":\"1970-01-01T00:00:01Z\"}\n\
         {\"host\":\"h1\",\"temp\":38.5,\"ts\":\"1970-01-01T00:00:03Z\"}\n",
    );
    // Inputs whose times are written in different ways go through the feed (each way's rows
    // would learn it apart); all dates, or all numbers, are read in parallel.
    let mixed = |inputs: &[&str]| {
        let dated = |i: &&str| *i == dates || *i == dates2;
        inputs.iter().any(dated) && !inputs.iter().all(dated)
    };
    let cases: Vec<(Vec<&str>, &[&str])> = vec![
        (vec![&good[0], &good[1], &good[2]], &["--summary"]),
        (vec![&too_late, &good[1], &good[2]], &[]),
        (vec![&good[0], &bad_type, &good[2]], &[]),
        (
            vec![&good[0], &bad_type, &good[2]],
            &["--on-malformed", "warn"],
        ),
        (vec![&good[0], &good[1], &keyless], &[]),
        (vec![&good[2], &keyless, &bad_type, &too_late], &[]),
        (vec![&good[0], &dates], &[]),
        (vec![&dates2, &dates], &[]),
    ];
    for (inputs, extra) in &cases {
        let mut base = vec![
            "run",
            &spec,
            "--key",
            "host",
            "--time",
            "ts",
            "--lateness",
            "2",
            "--output",
            "csv",
        ];
        for i in inputs {
            base.extend(["--input", i]);
        }
        base.extend(*extra);
        let want = outcome(&base);
        for workers in ["2", "3"] {
            let got = outcome(&[&base[..], &["--workers", workers, "--stats"]].concat());
            // `--stats` is printed at a run's end (a stopped run says its error instead).
            if got.0 == Some(0) {
                let parallel = got.2.contains("inputs read in parallel");
                assert_eq!(parallel, !mixed(inputs), "{inputs:?}: {}", got.2);
            }
            assert!(
                got.0 == want.0 && got.1 == want.1,
                "{inputs:?} {extra:?} on {workers} workers: {} against {}",
                got.2,
                want.2
            );
            // The errors, the dropped rows' warnings and the summary are the single-process
            // run's; of the late rows, as many are said.
            let said = |e: &str| -> (Vec<String>, usize) {
                let mut l: Vec<String> = e
                    .lines()
                    .filter(|l| {
                        ["error", "warning", "summary"]
                            .iter()
                            .any(|w| l.starts_with(w))
                    })
                    .filter(|l| !l.contains("a late row"))
                    .map(String::from)
                    .collect();
                l.sort_unstable();
                (l, e.lines().filter(|l| l.contains("a late row")).count())
            };
            assert_eq!(said(&got.2), said(&want.2), "{inputs:?} {extra:?}");
        }
        // Recorded, still read in parallel (the feed read them): each worker logs its inputs'
        // rows at their stamps and positions (its header saying how times are written, dates
        // too), and the log replays to the single-process output and exit status, its stop
        // too.
        let log = dir.join("timed.log");
        let log = log.to_str().unwrap();
        let got = outcome(&[&base[..], &["--workers", "2", "--stats", "--record", log]].concat());
        assert!(
            got.0 == want.0 && got.1 == want.1,
            "{inputs:?} {extra:?}, recorded: {}",
            got.2
        );
        if got.0 == Some(0) {
            let parallel = got.2.contains("inputs read in parallel");
            assert_eq!(parallel, !mixed(inputs), "{}", got.2);
        }
        let replayed = outcome(&["replay", &spec, log, "--output", "csv"]);
        assert!(
            replayed.0 == want.0 && replayed.1 == want.1,
            "{inputs:?} {extra:?}, replayed: {}",
            replayed.2
        );
    }
    // Times written as dates, the time field not an input: the recorded parts say so in
    // their header, so the replay writes dates too (a part's header said numbers).
    let plain = write(
        &dir,
        "plain.dsrv",
        "in host: Str\nin temp: Float\nout n: Int\nn = default(n[1], 0) + 1\n",
    );
    let log = dir.join("dates.log");
    let log = log.to_str().unwrap();
    let base = [
        "run", &plain, "--key", "host", "--time", "ts", "--output", "csv", "--input", &dates2,
        "--input", &dates,
    ];
    let want = outcome(&base);
    assert!(want.1.contains("1970-01-01T00:00:03Z"), "{}", want.1);
    let got = outcome(&[&base[..], &["--workers", "2", "--stats", "--record", log]].concat());
    assert!(got.2.contains("inputs read in parallel"), "{}", got.2);
    assert!(
        got.0 == want.0 && got.1 == want.1,
        "dates, recorded: {}",
        got.2
    );
    let replayed = outcome(&["replay", &plain, log, "--output", "csv"]);
    assert!(replayed.1 == want.1, "dates, replayed: {}", replayed.1);
}

/// A scaled run's replay log records the exit status its run stopped with, as a single-process
/// run's does: the logs of a run stopped by a malformed row are the same byte for byte, and a
/// replay of either stops with status 4. (The move of the scaled run into the library wrote the
/// stop's kind as its enum's index, 0, instead of the status, 4, until this test.)
#[test]
fn a_scaled_replay_log_records_the_status_the_run_stopped_with() {
    let dir = test_dir("scale_combos", "record_stop");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let mut lines: Vec<String> = trace(2_000, 40).lines().map(String::from).collect();
    lines[1_234] = "{\"host\":\"h1\",\"temp\":\"hot\",\"ts\":411}".into();
    let input = write(&dir, "t.jsonl", lines.join("\n") + "\n");
    let log = |name: &str, extra: &[&str]| {
        let path = dir.join(name).to_str().unwrap().to_string();
        let args = [
            &[
                "run", &spec, "--input", &input, "--key", "host", "--time", "ts",
            ][..],
            &["--output-file", "/dev/null", "--record", &path],
            extra,
        ]
        .concat();
        let o = run(&args);
        assert_eq!(
            o.status.code(),
            Some(4),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        path
    };
    let single = log("single.log", &[]);
    let scaled = log("scaled.log", &["--workers", "2"]);
    let text = |p: &str| std::fs::read_to_string(p).unwrap();
    let last = text(&single).lines().last().map(String::from);
    assert!(
        last.as_deref()
            .is_some_and(|l| l.starts_with("{\"status\":4,")),
        "{last:?}"
    );
    assert_eq!(text(&scaled).lines().last(), text(&single).lines().last());
    assert!(
        text(&scaled) == text(&single),
        "the scaled run's log differs from the single-process run's"
    );
    let replay = run(&["replay", &spec, &scaled, "--output", "csv"]);
    assert_eq!(
        replay.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
}

/// Issue 35: time resets in a scaled run (it stopped at one). A reset goes to every worker at
/// its place in the rows, and each key's ticks start again at its next row, as in one process:
/// a periodic spec's and a plain spec's outputs are the single-process keyed run's, on 2 and 3
/// workers; checkpoints counted across the reset resume, after kills, to the same output. The
/// `once` policy with periodic streams is refused with its reason (`cancel` is the default).
#[test]
fn time_resets_in_a_scaled_run_give_the_single_process_output() {
    let dir = test_dir("scale_combos", "resets");
    let periodic = write(&dir, "beat.dsrv", BEAT);
    let plain = write(&dir, "spec.dsrv", SPEC);
    // Two epochs of the time field `at` (the input `ts`'s value): times 0…1,999 s, a reset,
    // then times from 100 s again.
    let timed = |rows: usize, from: u64| -> String {
        trace(rows, 40)
            .lines()
            .map(|l| {
                let (head, ts) = l.rsplit_once("\"ts\":").unwrap();
                let t: u64 = ts.trim_end_matches('}').parse().unwrap();
                format!("{head}\"ts\":{t},\"at\":{}}}\n", t + from)
            })
            .collect()
    };
    let input = write(
        &dir,
        "t.jsonl",
        format!(
            "{}{{\"at\":\"reset\"}}\n{}",
            timed(6_000, 0),
            timed(3_000, 100)
        ),
    );
    for spec in [&periodic, &plain] {
        let base = [
            "run", spec, "--input", &input, "--time", "at", "--key", "host", "--output", "csv",
        ];
        let want = outcome(&base);
        assert_eq!(want.0, Some(0), "{}", want.2);
        assert!(want.1.lines().count() > 9_000, "{}", want.2);
        for workers in ["2", "3"] {
            let got = outcome(&[&base[..], &["--workers", workers]].concat());
            assert!(
                got == want,
                "{spec} with {workers} workers: not the single-process run's output\n{}",
                got.2
            );
        }
    }
    // Checkpoints before and after the reset, killed and resumed.
    let out = dir.join("out.csv");
    let ck = dir.join("ck");
    let (out, ck) = (out.to_str().unwrap(), ck.to_str().unwrap());
    let base = [
        "run", &periodic, "--input", &input, "--time", "at", "--key", "host", "--output", "csv",
    ];
    let killed = [
        "--workers",
        "2",
        "--output-file",
        out,
        "--checkpoint",
        ck,
        "--checkpoint-every",
        "50",
    ];
    let mut rng = Rng::new();
    let landed = kill_and_resume(&[&base[..], &killed].concat(), ck, 3, &mut rng);
    assert!(landed >= 1, "no kill landed before the end");
    assert_eq!(read(out), outcome(&base).1, "resumed across the reset");
    // The same with `once` ticks: a resumed worker reads its keys' places back, so its ticks
    // at the reset keep the single-process order of keys.
    let once_base = [&base[..], &["--on-reset", "once"]].concat();
    let _ = std::fs::remove_dir_all(ck);
    let _ = std::fs::remove_file(out);
    let landed = kill_and_resume(&[&once_base[..], &killed].concat(), ck, 3, &mut rng);
    assert!(landed >= 1, "no kill landed before the end");
    assert_eq!(
        read(out),
        outcome(&once_base).1,
        "resumed across the reset, once"
    );
    // `once` (it was refused): each key's ticks due at the reset fire once, every worker's
    // keys in the single-process order (least recently used first), before the barrier and
    // the row of the reset's place.
    let once = [&base[..], &["--on-reset", "once"]].concat();
    let want = outcome(&once);
    assert_eq!(want.0, Some(0), "{}", want.2);
    for workers in ["2", "3"] {
        let got = outcome(&[&once[..], &["--workers", workers]].concat());
        assert!(
            got == want,
            "once, {workers} workers: not the single-process output\n{}",
            got.2
        );
    }
    // A scaled run's replay log has the reset (it had not: its replay refused the time going
    // back), and replays to the run's output.
    let log = dir.join("once.log");
    let log = log.to_str().unwrap();
    let got = outcome(&[&once[..], &["--workers", "2", "--record", log]].concat());
    assert!(
        got == want,
        "once, recorded: not the single-process output\n{}",
        got.2
    );
    let replayed = outcome(&["replay", &periodic, log, "--output", "csv"]);
    assert_eq!(replayed.0, Some(0), "{}", replayed.2);
    assert!(
        replayed.1 == want.1,
        "the log does not replay to the output"
    );
}

/// A resumed scaled run numbers its rows on from its checkpoint with `--time` too. They were
/// numbered from 0 again, so the resumed run's checkpoints had earlier times than the one it
/// resumed from: a second resume took that older one for the newest, cutting back output a
/// later checkpoint had committed, and a run killed again and again made no progress.
#[test]
fn a_resumed_timed_run_checkpoints_past_the_checkpoint_it_resumed_from() {
    let dir = test_dir("scale_combos", "resume_numbering");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "t.jsonl", trace(200_000, 400));
    let (out, ck) = (dir.join("out.csv"), dir.join("ck"));
    let (out, ck) = (out.to_str().unwrap(), ck.to_str().unwrap());
    let args = [
        "run",
        &spec,
        "--input",
        &input,
        "--time",
        "ts",
        "--key",
        "host",
        "--output",
        "csv",
        "--workers",
        "2",
        "--output-file",
        out,
        "--checkpoint",
        ck,
        "--checkpoint-every",
        "2000",
    ];
    let complete = || -> Vec<std::path::PathBuf> {
        let Ok(entries) = std::fs::read_dir(ck) else {
            return Vec::new();
        };
        let mut all: Vec<_> = (entries.flatten())
            .map(|e| e.path())
            .filter(|p| p.join("commit.ck").exists())
            .collect();
        all.sort();
        all
    };
    // The time of a checkpoint's barrier (`ck-TIME`), a row's index.
    let time = |p: &std::path::Path| -> u64 {
        let name = p.file_name().unwrap().to_str().unwrap();
        name.trim_start_matches("ck-").parse().unwrap()
    };
    // Runs until `done` says of the complete checkpoints, then kills the run.
    let run_until = |extra: &[&str], done: &dyn Fn(&[std::path::PathBuf]) -> bool| {
        let mut child = vigil()
            .args(args)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while !done(&complete()) {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the run ended before the checkpoint looked for"
            );
            assert!(start.elapsed() < Duration::from_secs(120), "no checkpoint");
            std::thread::sleep(Duration::from_millis(2));
        }
        child.kill().unwrap();
        child.wait().unwrap();
    };
    // A checkpoint every 6,000 rows: the first run is killed past its tenth.
    run_until(&[], &|all| all.last().is_some_and(|p| time(p) >= 60_000));
    let first = complete();
    // The resumed run's first checkpoint is past the one it resumed from.
    run_until(&["--resume", ck], &|all| {
        all.iter().any(|p| !first.contains(p))
    });
    let newest = complete().pop().unwrap();
    assert!(
        !first.contains(&newest),
        "the resumed run's checkpoint is older than the one it resumed from: {:?}",
        complete()
    );
    let o = vigil().args(args).args(["--resume", ck]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = outcome(&args[..10]);
    assert_eq!(read(out), want.1, "resumed twice");
}

/// Issue 35: a scaled run under the wall clock checkpoints and resumes (it was refused). With
/// `--time` and an idle timeout the rows keep their own times and the clock never goes on by
/// itself over a file, so the run is deterministic: every key ticks on the run's ticks, and
/// killed three times and resumed, the run gives the single-process output.
#[test]
fn a_scaled_run_under_the_wall_clock_resumes_after_kills() {
    let dir = test_dir("scale_combos", "wall_kill");
    let spec = write(&dir, "beat.dsrv", BEAT);
    let input = write(&dir, "t.jsonl", trace(9_000, 20));
    let (out, ck) = (dir.join("out.csv"), dir.join("ck"));
    let (out, ck) = (out.to_str().unwrap(), ck.to_str().unwrap());
    let base = [
        "run",
        &spec,
        "--input",
        &input,
        "--time",
        "ts",
        "--key",
        "host",
        "--output",
        "csv",
        "--clock",
        "wall",
        "--idle-timeout",
        "600",
    ];
    let want = outcome(&base);
    assert_eq!(want.0, Some(0), "{}", want.2);
    // Every key ticks on the run's ticks, not only on its own rows.
    let plain = outcome(&base[..10]);
    assert_ne!(want.1, plain.1, "the wall clock changed nothing");
    let killed = [
        "--workers",
        "2",
        "--output-file",
        out,
        "--checkpoint",
        ck,
        "--checkpoint-every",
        "20",
    ];
    let mut rng = Rng::new();
    let landed = kill_and_resume(&[&base[..], &killed].concat(), ck, 3, &mut rng);
    assert!(landed >= 1, "no kill landed before the end");
    assert!(
        read(out) == want.1,
        "resumed: not the single-process output"
    );
}

/// A scaled run with `--time` and `--record` over standard input writes every row, and its log
/// replays to them. How the inputs write their times was read from their first rows for the
/// log's header, standard input's too, which took those rows from the run: it stopped at once
/// (`expected a JSON object`, found in 26dd9df's review). Only regular files are read so now.
#[test]
fn a_recorded_timed_run_over_standard_input_loses_no_row() {
    let dir = test_dir("scale_combos", "stdin_record");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let text = trace(3_000, 40);
    let input = write(&dir, "t.jsonl", &text);
    let log = dir.join("run.log");
    let log = log.to_str().unwrap();
    let want = outcome(&[
        "run", &spec, "--input", &input, "--time", "ts", "--key", "host", "--output", "csv",
    ]);
    assert_eq!(want.0, Some(0), "{}", want.2);
    let o = crate::support::run_piped(
        &[
            "run",
            &spec,
            "--input",
            "-",
            "--format",
            "jsonl",
            "--time",
            "ts",
            "--key",
            "host",
            "--output",
            "csv",
            "--workers",
            "2",
            "--record",
            log,
        ],
        text.as_bytes(),
    );
    assert_eq!(o.code, Some(0), "{}", o.err);
    assert!(o.out == want.1, "{}", o.err);
    let replayed = outcome(&["replay", &spec, log, "--output", "csv"]);
    assert!(replayed.1 == want.1, "replayed: {}", replayed.2);
}
