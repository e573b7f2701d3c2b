//! Consistent time: the cases under `tests/time/` (timestamps, merge order, ties, priorities,
//! clashes, lateness, keyed runs) on every tier, and the merge against a reference definition
//! of its order on random sources.

use proptest::prelude::*;
use std::path::Path;
use vigil::Tier;
use vigil::Value;
use vigil::merge::Merge;
use vigil::time::Time;

/// Every case directory: `spec.dsrv`, its sources, `args` (the run's
/// arguments after the spec), and the expected `expected` (standard
/// output), `stderr` and `status`. Each runs on every tier with the same
/// results.
#[test]
fn time_cases_match_on_every_tier() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/time");
    let mut cases = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        let args: Vec<String> = read("args").split_whitespace().map(String::from).collect();
        let status: i32 = read("status").trim().parse().unwrap();
        for tier in Tier::ALL {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
                .args(["run", "spec.dsrv", "--tier", tier.name()])
                .args(&args)
                .current_dir(&dir)
                .output()
                .unwrap();
            let name = format!("{} on {tier}", dir.display());
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                read("expected"),
                "{name}"
            );
            // A tier that cannot run the spec says which runs instead.
            let stderr: String = String::from_utf8_lossy(&out.stderr)
                .lines()
                .filter(|l| !(l.starts_with("warning: ") && l.ends_with(" instead")))
                .map(|l| format!("{l}\n"))
                .collect();
            assert_eq!(stderr, read("stderr"), "{name}");
            assert_eq!(out.status.code(), Some(status), "{name}");
        }
        // Recorded, the run replays the same on every tier (and checks
        // against its own traces): outputs, errors and status. Warnings
        // about rows (late, skipped) are the live reading's own.
        let log_dir = crate::support::test_dir(
            "time",
            &format!("log-{}", dir.file_name().unwrap().to_string_lossy()),
        );
        let log = log_dir.join("run.log").to_string_lossy().into_owned();
        let recorded = vigil(
            &dir,
            &[
                &["run", "spec.dsrv", "--record", &log][..],
                &args.iter().map(String::as_str).collect::<Vec<_>>()[..],
            ]
            .concat(),
        );
        let replay_args: Vec<&str> = output_args(&args);
        for tier in Tier::ALL {
            let replayed = vigil(
                &dir,
                &[
                    &["replay", "spec.dsrv", &log, "--tier", tier.name()][..],
                    &replay_args[..],
                ]
                .concat(),
            );
            assert_eq!(
                essence(&replayed),
                essence(&recorded),
                "replay of {} on {tier}",
                dir.display()
            );
        }
        let inputs: Vec<&str> = args
            .windows(2)
            .filter(|w| w[0] == "--input")
            .flat_map(|w| ["--input", w[1].as_str()])
            .collect();
        let checked = vigil(
            &dir,
            &[
                &["replay", "spec.dsrv", &log, "--check"][..],
                &inputs[..],
                &replay_args[..],
            ]
            .concat(),
        );
        assert_eq!(
            essence(&checked),
            essence(&recorded),
            "replay --check of {}",
            dir.display()
        );
        cases += 1;
    }
    assert!(cases >= 9, "only {cases} time cases");
}

/// The options of a run that a replay takes too: how outputs are written.
fn output_args(args: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--output" | "--alerts" | "--only" | "--pass" => {
                out.push(args[i].as_str());
                out.push(args[i + 1].as_str());
                i += 2;
            }
            "--quiet" | "--summary" => {
                out.push(args[i].as_str());
                i += 1;
            }
            _ if args[i].starts_with("--") && !matches!(args[i].as_str(), "--fail-on-trigger") => {
                i += 2
            }
            _ => i += 1,
        }
    }
    out
}

/// What a replay must reproduce of a run: its output, its error lines and
/// its status (warnings about rows are the live reading's own).
fn essence(run: &(String, String, Option<i32>)) -> (&str, Vec<&str>, Option<i32>) {
    let errors = run.1.lines().filter(|l| l.starts_with("error")).collect();
    (&run.0, errors, run.2)
}

/// A source: rows of (time, two cells).
type Source = Vec<(i64, [Option<i64>; 2])>;

/// The merged order by its definition: for each distinct time, ascending,
/// the k-th step at that time is made of the k-th row at that time of
/// every source that has one; the first source to set a cell wins.
fn reference(sources: &[Source]) -> Vec<(i64, Vec<Option<Value>>)> {
    let mut times: Vec<i64> = sources.iter().flatten().map(|r| r.0).collect();
    times.sort_unstable();
    times.dedup();
    let mut out = Vec::new();
    for t in times {
        let at: Vec<Vec<&[Option<i64>; 2]>> = sources
            .iter()
            .map(|s| s.iter().filter(|r| r.0 == t).map(|r| &r.1).collect())
            .collect();
        let most = at.iter().map(Vec::len).max().unwrap_or(0);
        for k in 0..most {
            let mut cells = vec![None; 2];
            for rows in &at {
                if let Some(row) = rows.get(k) {
                    for (c, v) in row.iter().enumerate() {
                        if cells[c].is_none() {
                            cells[c] = v.map(Value::Int);
                        }
                    }
                }
            }
            out.push((t, cells));
        }
    }
    out
}

/// Sources of rows with non-decreasing times (small steps, so ties are
/// frequent).
fn sources() -> impl Strategy<Value = Vec<Source>> {
    let row = (
        0..3i64,
        proptest::option::of(0..100i64),
        proptest::option::of(0..100i64),
    );
    proptest::collection::vec(proptest::collection::vec(row, 0..12), 1..4).prop_map(|ss| {
        ss.into_iter()
            .map(|rows| {
                let mut t = 0;
                rows.into_iter()
                    .map(|(dt, a, b)| {
                        t += dt;
                        (t, [a, b])
                    })
                    .collect()
            })
            .collect()
    })
}

proptest! {
    /// The merge gives the reference order, whatever order the sources
    /// deliver in (the merge asks; `pick` decides which of several waiting
    /// sources is served when more than one could be).
    #[test]
    fn the_merge_is_the_reference_order(ss in sources(), order in proptest::collection::vec(0..4usize, 64)) {
        let mut m = Merge::new(ss.len(), 2, 0);
        let mut next = vec![0usize; ss.len()];
        let mut got = Vec::new();
        let mut k = 0;
        loop {
            // Push ahead sometimes, so the merge meets queues of every depth.
            let s = order[k % order.len()] % ss.len();
            k += 1;
            if k % 3 == 0 && next[s] < ss[s].len() {
                let (t, cells) = &ss[s][next[s]];
                m.push(s, Time(*t), cells.iter().map(|v| v.map(Value::Int)).collect()).unwrap();
                next[s] += 1;
                if next[s] == ss[s].len() {
                    m.end(s);
                }
                continue;
            }
            if let Some(step) = m.pop() {
                got.push((step.time.0, step.cells));
                continue;
            }
            let Some(s) = m.wants() else { break };
            match ss[s].get(next[s]) {
                Some((t, cells)) => {
                    m.push(s, Time(*t), cells.iter().map(|v| v.map(Value::Int)).collect()).unwrap();
                    next[s] += 1;
                }
                None => m.end(s),
            }
            if next[s] == ss[s].len() {
                m.end(s);
            }
        }
        prop_assert!(m.is_done());
        prop_assert_eq!(got, reference(&ss));
    }
}

/// A generated trace as a JSON-lines source with a time field `t`: times
/// from `times` (non-decreasing), cells of `row` (non-finite floats left
/// out: JSON has no literal for them).
fn jsonl_source(names: &[String], rows: &[Vec<Option<Value>>], times: &[i64]) -> String {
    let mut out = String::new();
    for (row, t) in rows.iter().zip(times) {
        let mut fields = vec![format!("\"t\": {t}")];
        for (n, v) in names.iter().zip(row) {
            let text = match v {
                Some(Value::Int(i)) => i.to_string(),
                Some(Value::Float(f)) if f.is_finite() => format!("{f:?}"),
                Some(Value::Bool(b)) => b.to_string(),
                _ => continue,
            };
            fields.push(format!("\"{n}\": {text}"));
        }
        out.push_str(&format!("{{{}}}\n", fields.join(", ")));
    }
    out
}

/// Runs `vigil` in `dir`: standard output, standard error, status.
fn vigil(dir: &Path, args: &[&str]) -> (String, String, Option<i32>) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let stderr: String = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !(l.starts_with("warning: ") && l.ends_with(" instead")))
        .map(|l| format!("{l}\n"))
        .collect();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
        out.status.code(),
    )
}

/// Random specs over two random timed sources: a run recorded on one tier
/// and replayed on every tier gives the same outputs, warnings, errors and
/// status; `replay --check` against the same sources agrees too.
#[test]
fn replays_reproduce_recorded_runs_on_every_tier() {
    use crate::props::{case_strategy, generate_spec, generate_trace};
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (
        case_strategy(),
        proptest::collection::vec(0..3i64, 80),
        0..4usize,
    );
    let (mut cases, mut errors, mut merged) = (0, 0, 0);
    for case in 0..40 {
        let ((spec_data, len, trace_data), gaps, first) =
            strategy.new_tree(&mut runner).unwrap().current();
        let g = generate_spec(&spec_data, true);
        let Ok(spec) = vigil::Spec::parse("gen.dsrv", &g.source) else {
            continue;
        };
        let names: Vec<String> = spec.input_names().iter().map(|s| s.to_string()).collect();
        let trace = generate_trace(&g.inputs, len.max(2), &trace_data, 2);
        // Split the rows between two sources, with times that often tie.
        let (mut a, mut b, mut ta, mut tb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut t0, mut t1) = (0, 0);
        for (i, row) in trace.iter().enumerate() {
            if (i + first) % 3 == 0 {
                t1 += gaps[i % gaps.len()];
                b.push(row.clone());
                tb.push(t1);
            } else {
                t0 += gaps[(i * 7) % gaps.len()];
                a.push(row.clone());
                ta.push(t0);
            }
        }
        merged += usize::from(ta.iter().any(|t| tb.contains(t)));
        let dir = crate::support::test_dir("time", &format!("replay-{case}"));
        crate::support::write(&dir, "gen.dsrv", &g.source);
        crate::support::write(&dir, "a.jsonl", jsonl_source(&names, &a, &ta));
        crate::support::write(&dir, "b.jsonl", jsonl_source(&names, &b, &tb));
        let tiers: Vec<Tier> = Tier::ALL.into_iter().collect();
        let recorded_on = tiers[case % tiers.len()];
        let run = [
            "run", "gen.dsrv", "--input", "a.jsonl", "--input", "b.jsonl", "--time", "t",
        ];
        let recorded = vigil(
            &dir,
            &[
                &run[..],
                &[
                    "--output",
                    "jsonl",
                    "--record",
                    "run.log",
                    "--tier",
                    recorded_on.name(),
                ],
            ]
            .concat(),
        );
        errors += usize::from(recorded.2 == Some(3));
        for tier in &tiers {
            let replayed = vigil(
                &dir,
                &[
                    "replay",
                    "gen.dsrv",
                    "run.log",
                    "--output",
                    "jsonl",
                    "--tier",
                    tier.name(),
                ],
            );
            assert_eq!(
                replayed, recorded,
                "replay on {tier} of a run recorded on {recorded_on}\n{}",
                g.source
            );
        }
        let checked = vigil(
            &dir,
            &[
                "replay", "gen.dsrv", "run.log", "--check", "--input", "a.jsonl", "--input",
                "b.jsonl", "--output", "jsonl",
            ],
        );
        assert_eq!(checked, recorded, "replay --check\n{}", g.source);
        cases += 1;
    }
    assert!(
        cases >= 25 && merged >= 10,
        "{cases} cases, {merged} with merged steps"
    );
    eprintln!(
        "replays: {cases} cases, {errors} ending in a runtime error, {merged} with merged steps"
    );
}

/// Makes the FIFOs `f1` and `f2` and starts `vigil run SPEC --time t
/// --output jsonl EXTRA… --input f1 --input f2` on them, its outputs piped:
/// the caller opens the FIFOs for writing after.
fn run_on_fifos(
    spec: &str,
    extra: &[&str],
    f1: &std::path::Path,
    f2: &std::path::Path,
) -> std::process::Child {
    for f in [f1, f2] {
        crate::support::mkfifo(f);
    }
    std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["run", spec, "--time", "t", "--output", "jsonl"])
        .args(extra)
        .arg("--input")
        .arg(f1)
        .arg("--input")
        .arg(f2)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Two live sources (FIFOs written by this test): without `--idle-timeout`
/// the merge waits for both; with it, a silent one stops holding the steps
/// back, and its late row is re-stamped to the last step's time.
#[test]
fn a_silent_live_source_goes_idle() {
    use std::io::Write as _;
    use std::time::Duration;
    let dir = crate::support::test_dir("time", "live");
    let spec = crate::support::write(
        &dir,
        "live.dsrv",
        "in a: Int\nin b: Int\nout s: Int\ns = a + default(b, 0)\n",
    );
    let (f1, f2) = (dir.join("f1"), dir.join("f2"));
    let child = run_on_fifos(&spec, &["--idle-timeout", "0.3"], &f1, &f2);
    let mut a = std::fs::OpenOptions::new().write(true).open(&f1).unwrap();
    let mut b = std::fs::OpenOptions::new().write(true).open(&f2).unwrap();
    for t in 1..=3 {
        writeln!(a, "{{\"t\": {t}, \"a\": {t}}}").unwrap();
        a.flush().unwrap();
    }
    // `b` silent for well over the idle timeout, then late.
    std::thread::sleep(Duration::from_millis(1200));
    writeln!(b, "{{\"t\": 2, \"b\": 10}}").unwrap();
    writeln!(b, "{{\"t\": 4, \"b\": 20}}").unwrap();
    b.flush().unwrap();
    // `a` is idle too by now, so `b`'s rows make steps of their own; `a`'s
    // next row, well after them, is a step of its own at the same time.
    std::thread::sleep(Duration::from_millis(600));
    writeln!(a, "{{\"t\": 4, \"a\": 4}}").unwrap();
    drop((a, b));
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        // `s` is NoVal while `b` never had a value (`default` does not
        // replace NoVal), then `a` is held at the steps `b` alone makes.
        "{\"step\":0,\"time\":1}\n{\"step\":1,\"time\":2}\n{\"step\":2,\"time\":3}\n\
         {\"step\":3,\"time\":3,\"s\":13}\n{\"step\":4,\"time\":4,\"s\":23}\n\
         {\"step\":5,\"time\":4,\"s\":24}\n"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("a late row (time 2) is re-stamped to 3"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(0));
}

/// Live sources keep the reader vigil opened first: writers that write as
/// soon as their FIFOs are open never find them without a reader.
/// Regression test: each FIFO was opened, then closed and opened again on
/// its reading thread, and a write in between failed with a broken pipe
/// (the race the idle-source test above lost once under load; here many
/// writes follow the opens at once, to fall into it).
#[test]
fn live_sources_are_read_by_the_reader_first_opened() {
    use std::io::Write as _;
    let dir = crate::support::test_dir("time", "live_first_open");
    let spec = crate::support::write(
        &dir,
        "live.dsrv",
        "in a: Int\nin b: Int\nout s: Int\ns = a + default(b, 0)\n",
    );
    for round in 0..5 {
        let (f1, f2) = (
            dir.join(format!("f1_{round}")),
            dir.join(format!("f2_{round}")),
        );
        let child = run_on_fifos(&spec, &[], &f1, &f2);
        // A run that never ends fails the test instead of hanging it (and
        // one that ended is never signalled: its pid may be another's).
        let pid = child.id().to_string();
        let ended = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watched = ended.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(30));
            if !watched.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid])
                    .status();
            }
        });
        let mut a = std::fs::OpenOptions::new().write(true).open(&f1).unwrap();
        let mut b = std::fs::OpenOptions::new().write(true).open(&f2).unwrap();
        for t in 1..=300 {
            let row = format!("{{\"t\": {t}, \"a\": {t}}}\n");
            a.write_all(row.as_bytes())
                .unwrap_or_else(|e| panic!("round {round}, row {t}: {e}"));
        }
        writeln!(b, "{{\"t\": 1, \"b\": 10}}").unwrap();
        drop((a, b));
        let out = child.wait_with_output().unwrap();
        ended.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.lines().count(), 300, "round {round}");
        assert!(
            stdout.lines().last().unwrap().contains("\"s\":310"),
            "{stdout}"
        );
    }
}

/// A replay log is untrusted input: every line of a real log mutated (cut,
/// a byte changed, a value of another type, a line dropped or repeated)
/// gives outputs and a located error or success, never a crash.
#[test]
fn mutated_logs_never_crash_a_replay() {
    let dir = crate::support::test_dir("time", "mutated");
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/time/two_sources");
    for f in ["spec.dsrv", "metrics.jsonl", "beats.csv"] {
        std::fs::copy(case.join(f), dir.join(f)).unwrap();
    }
    let run = [
        "run",
        "spec.dsrv",
        "--input",
        "metrics.jsonl",
        "--input",
        "beats.csv",
        "--time",
        "ts",
        "--record",
        "run.log",
    ];
    assert_eq!(vigil(&dir, &run).2, Some(0));
    let log = std::fs::read_to_string(dir.join("run.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let mut variants: Vec<String> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let with = |l: String| {
            let mut v: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
            v[i] = l;
            v.join("\n") + "\n"
        };
        variants.push(with(line[..line.len() / 2].to_string()));
        variants.push(with(line.replace("20.5", "\"hot\"").replace("true", "17")));
        variants.push(with(
            line.replace("\"s\":1", "\"s\":9")
                .replace("\"q\":0", "\"q\":-1"),
        ));
        variants.push(with(
            line.replace(":1", ":1e400").replace("\"t\":", "\"t\":-"),
        ));
        variants.push(with(line.replace("vigil_log\":1", "vigil_log\":2")));
        let mut dropped: Vec<&str> = lines.clone();
        dropped.remove(i);
        variants.push(dropped.join("\n"));
        let mut twice: Vec<&str> = lines.clone();
        twice.insert(i, line);
        variants.push(twice.join("\n"));
        for b in [0u8, b'{', b'"', 0xff] {
            let mut bytes = line.as_bytes().to_vec();
            let at = (i * 7) % bytes.len().max(1);
            if let Some(x) = bytes.get_mut(at) {
                *x = b;
            }
            variants.push(with(String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    for (k, v) in variants.iter().enumerate() {
        std::fs::write(dir.join("bad.log"), v).unwrap();
        let (_, stderr, status) = vigil(
            &dir,
            &["replay", "spec.dsrv", "bad.log", "--output", "jsonl"],
        );
        assert!(
            matches!(status, Some(0 | 1 | 3 | 4)),
            "variant {k} ended with {status:?}:\n{v}\n{stderr}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("bug in vigil"),
            "variant {k}:\n{v}\n{stderr}"
        );
    }
}

/// A `tcp://` input: connections are sources in accept order, merged by
/// time; the run's log replays it exactly. The test is the client side,
/// over real sockets.
#[test]
fn tcp_connections_are_merged_sources() {
    use std::io::{BufRead as _, Write as _};
    use std::time::Duration;
    let dir = crate::support::test_dir("time", "tcp");
    let spec = crate::support::write(
        &dir,
        "live.dsrv",
        "in a: Int\nin b: Int\nout s: Int\ns = a + b\n",
    );
    let log = dir.join("tcp.log").to_string_lossy().into_owned();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["run", &spec, "--input", "tcp://127.0.0.1:0", "--time", "t"])
        .args([
            "--idle-timeout",
            "0.2",
            "--output",
            "jsonl",
            "--record",
            &log,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let addr = first
        .trim()
        .strip_prefix("vigil: listening on tcp://")
        .unwrap_or_else(|| panic!("no address: {first}"))
        .to_string();
    // Pauses well over the idle timeout, so that which source is idle at
    // each arrival (and so the steps) does not depend on the machine's speed.
    let pause = || std::thread::sleep(Duration::from_millis(500));
    let mut a = std::net::TcpStream::connect(&addr).unwrap();
    pause();
    let mut b = std::net::TcpStream::connect(&addr).unwrap();
    pause();
    a.write_all(b"{\"t\": 1, \"a\": 1, \"b\": 0}\n{\"t\": 2, \"a\": 2}\n")
        .unwrap();
    pause();
    b.write_all(b"{\"t\": 2, \"b\": 10}\n{\"t\": 3, \"b\": 20}\n")
        .unwrap();
    pause();
    pause();
    a.write_all(b"{\"t\": 3, \"a\": 3}\n").unwrap();
    std::thread::sleep(Duration::from_millis(600));
    drop((a, b));
    std::thread::sleep(Duration::from_millis(300));
    // A listening run goes on until it is stopped; every step it made is
    // written already (outputs and log are flushed per step).
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let got = String::from_utf8_lossy(&out.stdout).into_owned();
    // Each arrival finds the other connection idle, so no two rows share a
    // step; none is older than the last step (the watermark), so none is
    // re-stamped.
    assert_eq!(
        got,
        "{\"step\":0,\"time\":1,\"s\":1}\n{\"step\":1,\"time\":2,\"s\":2}\n\
         {\"step\":2,\"time\":2,\"s\":12}\n{\"step\":3,\"time\":3,\"s\":22}\n\
         {\"step\":4,\"time\":3,\"s\":23}\n"
    );
    let (replayed, _, status) = vigil(&dir, &["replay", &spec, &log, "--output", "jsonl"]);
    assert_eq!((replayed.as_str(), status), (got.as_str(), Some(0)));
}

/// A spec with periodic streams runs its event streams fused on input steps
/// (the ticks, and the periodic streams, on the canonical tier): the fused
/// tiers do run, not merely fall back.
#[test]
fn periodic_specs_run_their_event_streams_fused() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (tier, what) in [
        ("quickened", "quickened: "),
        ("native-regions", "native-regions: "),
    ] {
        let (_, stderr, status) = vigil(
            root,
            &[
                "run",
                "examples/heartbeat.dsrv",
                "--input",
                "examples/beats.jsonl",
                "--time",
                "t",
                "--tier",
                tier,
                "--stats",
            ],
        );
        assert_eq!(status, Some(0));
        let runs: u64 = stderr
            .lines()
            .find_map(|l| {
                l.strip_prefix(what)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("no region runs in:\n{stderr}"));
        assert!(runs > 0, "{stderr}");
    }
}

/// Generated specs with one stream made periodic, over a generated timed
/// trace: every tier gives the canonical tier's output and status (the
/// event streams fused on input steps, the ticks canonical).
#[test]
fn periodic_generated_specs_agree_on_every_tier() {
    use crate::props::{case_strategy, generate_spec, generate_trace};
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (
        case_strategy(),
        proptest::collection::vec(0..3i64, 80),
        0..6usize,
        1..4i64,
    );
    let (mut cases, mut ticked) = (0, 0);
    for case in 0..80 {
        let ((spec_data, len, trace_data), gaps, pick, period) =
            strategy.new_tree(&mut runner).unwrap().current();
        let g = generate_spec(&spec_data, true);
        // The declaration of stream `s{pick}`, if it exists, made periodic.
        let name = format!("s{}", pick);
        let source: String = g
            .source
            .lines()
            .map(|l| {
                let decl = l.split_whitespace().nth(1).map(|n| n.trim_end_matches(':'));
                let kind = l.split_whitespace().next();
                if decl == Some(name.as_str()) && matches!(kind, Some("out" | "aux")) {
                    format!("{l} @ {period}s\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        if source == g.source || vigil::Spec::parse("gen.dsrv", &source).is_err() {
            continue;
        }
        let spec = vigil::Spec::parse("gen.dsrv", &source).unwrap();
        let names: Vec<String> = spec.input_names().iter().map(|s| s.to_string()).collect();
        let trace = generate_trace(&g.inputs, len.max(2), &trace_data, 2);
        let mut t = 0;
        let times: Vec<i64> = (0..trace.len())
            .map(|i| {
                t += gaps[i % gaps.len()];
                t
            })
            .collect();
        let dir = crate::support::test_dir("time", &format!("periodic-{case}"));
        crate::support::write(&dir, "gen.dsrv", &source);
        crate::support::write(&dir, "a.jsonl", jsonl_source(&names, &trace, &times));
        let run = |tier: Tier| {
            let out = vigil(
                &dir,
                &[
                    "run",
                    "gen.dsrv",
                    "--input",
                    "a.jsonl",
                    "--time",
                    "t",
                    "--output",
                    "jsonl",
                    "--tier",
                    tier.name(),
                ],
            );
            (out.0, essence_errors(&out.1), out.2)
        };
        let expected = run(Tier::Canonical);
        for tier in Tier::ALL {
            assert_eq!(run(tier), expected, "{tier}\n{source}");
        }
        ticked += usize::from(times.last().is_some_and(|&l| l >= period));
        cases += 1;
    }
    eprintln!("periodic generated specs: {cases} cases, {ticked} with several ticks");
    assert!(
        cases >= 30 && ticked >= 20,
        "{cases} cases, {ticked} with several ticks"
    );
}

/// The error lines of a run's standard error.
fn essence_errors(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.starts_with("error"))
        .map(String::from)
        .collect()
}

/// A replay checks the order the live run's merge enforces: a log whose
/// time goes back (two step lines swapped, on a spec with a time window), or
/// whose rows of one source go back in position, is refused with an error
/// naming the log line, after the outputs of the steps before it; the
/// unedited log replays. Regression test: both replayed with exit 0.
#[test]
fn replays_refuse_logs_out_of_order() {
    let dir = crate::support::test_dir("time", "log_order");
    crate::support::write(
        &dir,
        "spec.dsrv",
        "in x: Float\nout s: Float\ns = default(window(x, 10s, sum), 0.0)\n",
    );
    let rows: String = (1..=4)
        .map(|t| format!("{{\"t\": {t}, \"x\": {t}.5}}\n"))
        .collect();
    crate::support::write(&dir, "a.jsonl", rows);
    let recorded = vigil(
        &dir,
        &[
            "run",
            "spec.dsrv",
            "--input",
            "a.jsonl",
            "--time",
            "t",
            "--output",
            "jsonl",
            "--record",
            "run.log",
        ],
    );
    assert_eq!(recorded.2, Some(0), "{}", recorded.1);
    let log = std::fs::read_to_string(dir.join("run.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 5, "{log}");
    let replay = |name: &str, lines: &[String]| {
        crate::support::write(&dir, name, lines.join("\n") + "\n");
        vigil(&dir, &["replay", "spec.dsrv", name, "--output", "jsonl"])
    };
    let own: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    assert_eq!(replay("same.log", &own), recorded);

    // The steps at 2 s and 3 s swapped: the time goes back at line 4.
    let mut swapped = own.clone();
    swapped.swap(2, 3);
    let (out, stderr, status) = replay("swapped.log", &swapped);
    assert_eq!(status, Some(4), "{stderr}");
    assert!(
        stderr.contains(
            "swapped.log:4: the time goes back: 2000000000ns here, 3000000000ns at line 3"
        ),
        "{stderr}"
    );
    // The steps before it are evaluated and written (the first, then the
    // one at 3 s read in its place).
    assert_eq!(out.lines().count(), 2, "{out}");
    // The live run refuses the same order.
    let mut rows: Vec<String> = (1..=4)
        .map(|t| format!("{{\"t\": {t}, \"x\": {t}.5}}"))
        .collect();
    rows.swap(1, 2);
    crate::support::write(&dir, "b.jsonl", rows.join("\n") + "\n");
    let live = vigil(
        &dir,
        &["run", "spec.dsrv", "--input", "b.jsonl", "--time", "t"],
    );
    assert_eq!(live.2, Some(4), "{}", live.1);

    // The third row given the second one's position.
    let mut repeated = own.clone();
    assert!(repeated[3].contains("\"q\":2"), "{}", repeated[3]);
    repeated[3] = repeated[3].replace("\"q\":2", "\"q\":1");
    let (_, stderr, status) = replay("repeated.log", &repeated);
    assert_eq!(status, Some(4), "{stderr}");
    assert!(
        stderr.contains(
            "repeated.log:4: a row of source 0 at position 1 after its row at position 1 (line 3)"
        ),
        "{stderr}"
    );

    // A re-stamped row whose own time is not before its stamp.
    let mut late = own.clone();
    late[2] = late[2].replace("\"q\":1,", "\"q\":1,\"late\":5000000000,");
    let (_, stderr, status) = replay("late.log", &late);
    assert_eq!(status, Some(4), "{stderr}");
    assert!(
        stderr.contains("late.log:3: a row of source 0 re-stamped"),
        "{stderr}"
    );
}

/// The ticks of a jump in time are made, evaluated and written one at a
/// time: with `@ 1ns`, a gap of 10^8 s and `--max-ticks` at its largest, the
/// outputs of the gap's ticks come out while the resident set stays small
/// (the peak resident set of the child, read from `/proc`, with a generous
/// bound). Regression test: every tick due was queued in memory before the
/// first was evaluated (gigabytes, nothing written); the child is killed
/// as soon as it passes the bound, so the test stays bounded either way.
#[test]
fn the_ticks_of_a_long_gap_stream_in_constant_memory() {
    use std::io::BufRead as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};
    const LINES: u64 = 20_000;
    const BOUND_KB: u64 = 256 * 1024;
    let dir = crate::support::test_dir("time", "tick_stream");
    crate::support::write(
        &dir,
        "spec.dsrv",
        "in x: Int\nout n: Int @ 1ns\nn = default(n[1], 0) + 1\n",
    );
    crate::support::write(
        &dir,
        "a.jsonl",
        "{\"t\": 0, \"x\": 1}\n{\"t\": 100000000, \"x\": 2}\n",
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["run", "spec.dsrv", "--input", "a.jsonl", "--time", "t"])
        .args(["--output", "jsonl", "--max-ticks", &u64::MAX.to_string()])
        .current_dir(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lines = std::sync::Arc::new(AtomicU64::new(0));
    let counted = lines.clone();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if line.is_err() {
                return;
            }
            counted.fetch_add(1, Ordering::Relaxed);
        }
    });
    let status = format!("/proc/{}/status", child.id());
    let kb = |field: &str| -> Option<u64> {
        let text = std::fs::read_to_string(&status).ok()?;
        let line = text.lines().find(|l| l.starts_with(field))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut peak = 0;
    while lines.load(Ordering::Relaxed) < LINES && Instant::now() < deadline {
        peak = kb("VmHWM:").unwrap_or(peak);
        if peak > BOUND_KB {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    peak = kb("VmHWM:").unwrap_or(peak);
    // The gap's ticks go on for years: the run is stopped here.
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    let written = lines.load(Ordering::Relaxed);
    assert!(peak <= BOUND_KB, "the run's resident set reached {peak} kB");
    assert!(written >= LINES, "{written} lines written in two minutes");
}

/// A `tcp://` listener out of file descriptors (`ulimit -n 30`, 40 clients
/// connected) backs off instead of retrying `accept` in a loop: it says so
/// once, spends little CPU while it cannot accept, and accepts again once
/// descriptors are free. Regression test: it spun on failing `accept4`
/// calls (most of a core) and said nothing.
#[test]
fn a_tcp_listener_out_of_descriptors_backs_off() {
    use std::io::{BufRead as _, Write as _};
    use std::time::Duration;
    let dir = crate::support::test_dir("time", "tcp_emfile");
    let spec = crate::support::write(&dir, "s.dsrv", "in a: Int\nout s: Int\ns = a + 1\n");
    let mut child = std::process::Command::new("bash")
        .args(["-c", "ulimit -n 30 && exec \"$@\"", "bash"])
        .arg(env!("CARGO_BIN_EXE_vigil"))
        .args(["run", &spec, "--input", "tcp://127.0.0.1:0", "--time", "t"])
        .args(["--idle-timeout", "0.1", "--output", "jsonl"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A run that never ends is killed here rather than hanging the test.
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    });
    drop(watchdog);
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let addr = first
        .trim()
        .strip_prefix("vigil: listening on tcp://")
        .unwrap_or_else(|| panic!("no address: {first}"))
        .to_string();
    let (tx, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let clients: Vec<std::net::TcpStream> = (0..40)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    let line = said
        .recv_timeout(Duration::from_secs(10))
        .expect("nothing said about the failing accepts");
    assert!(
        line.contains("cannot accept a connection") && line.contains("ulimit -n"),
        "{line}"
    );
    // CPU time (user + system, in clock ticks) over a second of failing.
    let cpu = || -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let before = cpu();
    std::thread::sleep(Duration::from_secs(1));
    let spent = cpu() - before;
    // SAFETY: sysconf reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    assert!(
        spent * 4 < hz,
        "{spent} clock ticks ({hz} a second) of CPU in a second of failing accepts"
    );
    // Once per episode: nothing more was said while it went on.
    assert_eq!(said.try_recv().ok(), None);
    // Descriptors freed, a new client is served.
    drop(clients);
    let mut client = std::net::TcpStream::connect(&addr).unwrap();
    client.write_all(b"{\"t\": 1, \"a\": 41}\n").unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (out_tx, out) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let _ = out_tx.send(line);
    });
    let got = out.recv_timeout(Duration::from_secs(10));
    // It says it accepts again (closing the descriptors of the clients gone
    // races with accepting those still queued, so a short second episode
    // may be said before).
    let again = (0..10).find_map(|_| {
        let line = said.recv_timeout(Duration::from_secs(5)).ok()?;
        Some(line.contains("accepting connections again")).filter(|a| *a)
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(got.as_deref(), Ok("{\"step\":0,\"time\":1,\"s\":42}\n"));
    assert_eq!(again, Some(true), "never said it accepts again");
}

/// `--checkpoint` on a run that cannot be resumed says why, naming what of
/// the command line rules it out: a `tcp://` input, whose connections
/// cannot be read again. (A periodic spec and `--record`, refused before,
/// are checkpointed now: `merged_runs_resume_where_they_were_killed`.)
#[test]
fn checkpoint_refusals_name_the_real_reason() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = crate::support::test_dir("time", "ck_reason");
    let ck = dir.join("x.ck").to_string_lossy().into_owned();
    let (_, stderr, status) = vigil(
        root,
        &[
            "run",
            "examples/counter.dsrv",
            "--input",
            "tcp://127.0.0.1:0",
            "--time",
            "t",
            "--checkpoint",
            &ck,
        ],
    );
    assert_eq!(status, Some(1));
    assert!(
        stderr.contains(
            "--checkpoint and --resume do not work with a tcp:// input (`tcp://127.0.0.1:0`)"
        ),
        "{stderr}"
    );
    assert!(!dir.join("x.ck").exists());
}

/// A `tcp://` input is a listener whatever else is given: without `--time`
/// it is refused with a message naming it and the option it needs.
/// Regression test: it was opened as a file (`No such file or directory`).
#[test]
fn a_tcp_input_without_time_is_refused_as_a_tcp_source() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (_, stderr, status) = vigil(
        root,
        &[
            "run",
            "examples/counter.dsrv",
            "--input",
            "tcp://127.0.0.1:0",
        ],
    );
    assert_eq!(status, Some(1));
    assert!(
        stderr.contains("--input tcp://127.0.0.1:0: a tcp:// input")
            && stderr.contains("--time FIELD"),
        "{stderr}"
    );
}

/// `--start` takes a negative time as it is written (`--start -2`).
/// Regression test: clap took `-2` for a flag and wanted `--start=-2`.
#[test]
fn start_takes_a_negative_time() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (out, stderr, status) = vigil(
        root,
        &[
            "run",
            "examples/heartbeat.dsrv",
            "--input",
            "examples/beats.jsonl",
            "--time",
            "t",
            "--output",
            "jsonl",
            "--start",
            "-2",
        ],
    );
    assert_eq!(status, Some(0), "{stderr}");
    assert!(out.starts_with("{\"step\":0,\"time\":-2}\n"), "{out}");
}

/// `--idle-timeout 0` says the timeout must be positive. Regression test:
/// it said `not a number of seconds`.
#[test]
fn idle_timeout_zero_says_it_must_be_positive() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (_, stderr, status) = vigil(
        root,
        &[
            "run",
            "examples/two_sources.dsrv",
            "--input",
            "examples/metrics.jsonl",
            "--input",
            "examples/beats.jsonl",
            "--time",
            "t",
            "--idle-timeout",
            "0",
        ],
    );
    assert_eq!(status, Some(1));
    assert!(
        stderr.contains("--idle-timeout 0: the timeout must be a positive number of seconds"),
        "{stderr}"
    );
}

/// Issue 35: a specification with periodic streams snapshots and restores (its rings
/// run on clocks of their own, which the snapshot records since format 4), and so does
/// the `Scheduler` that says which ticks are due: a run snapshotted before any step (a
/// row or a tick), restored on another tier, with its scheduler carried over as JSON,
/// continues exactly as the uninterrupted run. It was refused ("not supported yet").
#[test]
fn periodic_runs_snapshot_and_resume_at_any_step() {
    use vigil::time::Scheduler;
    use vigil::{Monitor, Sample, Snapshot, Spec};
    let src = "in x: Int\n\
               aux n: Int\n\
               n = default(n[1], 0) + 1\n\
               out seen: Int @ 1s\n\
               seen = n - default(n[2], 0)\n\
               out slow: Int @ 2500ms\n\
               slow = default(slow[1], 0) + x\n\
               out last: Int\n\
               last = x + default(x[1], 0)\n";
    let spec = Spec::parse("p.dsrv", src).unwrap();
    // Rows at irregular times, with a gap of several periods.
    let times: Vec<i64> = [0, 300, 900, 1_100, 2_000, 2_050, 6_400, 6_500, 7_900, 9_999]
        .iter()
        .map(|ms| ms * 1_000_000)
        .collect();
    /// Before one step: the row whose ticks or self it is, and the monitor's
    /// snapshot (binary and JSON) and the scheduler's (JSON).
    struct Save {
        row: usize,
        bytes: Vec<u8>,
        json: String,
        scheduler: String,
    }
    // Runs the rows from `from` (each after the ticks due by its time), and
    // returns every step's outputs.
    let run = |m: &mut Monitor, sched: &mut Scheduler, from: usize, saves: &mut Vec<Save>| {
        let mut out: Vec<Vec<Sample>> = Vec::new();
        for (row, &t) in times.iter().enumerate().skip(from) {
            if !sched.started() {
                sched.start(Time(t));
            }
            loop {
                let snap = m.snapshot();
                saves.push(Save {
                    row,
                    bytes: snap.to_bytes(),
                    json: snap.to_json(),
                    scheduler: serde_json::to_string(&*sched).unwrap(),
                });
                let Some((at, due)) = sched.next_until(Time(t)) else {
                    break;
                };
                out.push(m.tick(at, &due).unwrap().iter().collect());
            }
            let cells = [Some(Value::Int(row as i64 * 3 - 7))];
            out.push(m.step_at(Time(t), cells).unwrap().iter().collect());
        }
        out
    };
    let mut m = Monitor::builder(&spec).tier(Tier::Canonical).build();
    let mut sched = Scheduler::new(m.periods());
    let mut saves = Vec::new();
    let want = run(&mut m, &mut sched, 0, &mut saves);
    assert_eq!(saves.len(), want.len(), "one save before each step");
    assert!(
        want.len() > times.len() + 5,
        "the ticks ran: {} steps",
        want.len()
    );
    // Resume from every save: the rest of the run is the uninterrupted one's.
    for (k, save) in saves.iter().enumerate() {
        for (tier, snap) in [
            (Tier::Canonical, Snapshot::from_bytes(&save.bytes).unwrap()),
            (
                Tier::NativeRegions,
                Snapshot::from_json(&save.json).unwrap(),
            ),
        ] {
            let mut resumed = Monitor::builder(&spec)
                .tier(tier)
                .restore(&snap)
                .unwrap()
                .build();
            assert_eq!(
                resumed.snapshot().to_json(),
                save.json,
                "save {k} restores as it was"
            );
            let mut sched: Scheduler = serde_json::from_str(&save.scheduler).unwrap();
            let got = run(&mut resumed, &mut sched, save.row, &mut Vec::new());
            assert_eq!(got, want[k..].to_vec(), "resumed before step {k} on {tier}");
        }
    }
    // A scheduler's JSON that could not run is refused, not trusted.
    for bad in [
        r#"{"periods":[0],"next":[null]}"#,
        r#"{"periods":[5],"next":[]}"#,
    ] {
        assert!(serde_json::from_str::<Scheduler>(bad).is_err(), "{bad}");
    }
}

/// A tick's row with `--pass`: its passed columns are empty (a tick has no
/// input row). Regression test: the tick's row was written without them,
/// and the writer's check (one sample per column) panicked (exit 101).
/// Found by the combination matrix (`periodic` × `pass`).
#[test]
fn a_ticks_row_has_empty_passed_columns() {
    let dir = crate::support::test_dir("time", "tick_pass");
    let spec = crate::support::write(
        &dir,
        "p.dsrv",
        "in x: Int\nout beat: Int @ 5s\nbeat = default(beat[1], 0) + 1\n",
    );
    let rows: String = (0..7)
        .map(|i| format!("{{\"x\":{i},\"dc\":\"a\"}}\n"))
        .collect();
    let trace = crate::support::write(&dir, "p.jsonl", rows);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for output in ["csv", "jsonl"] {
        let (stdout, stderr, status) = vigil(
            root,
            &[
                "run", &spec, "--input", &trace, "--output", output, "--pass", "dc",
            ],
        );
        assert_eq!(status, Some(0), "{output}: {stderr}");
        let ticks: Vec<&str> = stdout.lines().filter(|l| l.contains("beat")).collect();
        assert!(!ticks.is_empty(), "{stdout}");
        match output {
            "csv" => assert!(
                stdout.contains("\n0,,1\n") && stdout.contains("\n6,,2\n"),
                "{stdout}"
            ),
            _ => assert!(ticks.iter().all(|l| !l.contains("\"dc\"")), "{stdout}"),
        }
    }
}
