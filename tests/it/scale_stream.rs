//! Issue 35, "scale-out reads in parallel", for streams: standard input (or a FIFO) cut into
//! chunks at row boundaries, each worker parsing its own, compared with the single-process
//! run of the same rows byte for byte.

use crate::scale::{SPEC, trace};
use crate::scale_combos::{csv, without_timing};
use crate::support::{Outcome, run_piped, test_dir, vigil, write};
use std::io::{BufRead, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A run's status, output and standard error without the summary's timing line.
fn steady(o: Outcome) -> (Option<i32>, String, String) {
    (o.code, o.out, without_timing(&o.err))
}

/// A stream on standard input is read in chunks by every worker (`--stats` says how many),
/// and the output, the alerts and the summary are the single-process keyed run's byte for
/// byte: JSON lines and CSV (whose quoted fields span lines and hold commas and quotes, so
/// that a chunk may only end where a row does), 2 and 3 workers, a periodic spec, a row the
/// schema rejects (the run stops at it, with its real line, after exactly the rows before
/// it), a row without its key, and `--on-malformed skip`.
#[test]
fn a_stream_read_in_chunks_by_the_workers_gives_the_single_process_output() {
    let dir = test_dir("scale_stream", "chunks");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let periodic = write(
        &dir,
        "beat.dsrv",
        "in host: Str\nin temp: Float\nin ts: Int\nout n: Int\nout beat: Int @ 2s\n\
         n = default(n[1], 0) + 1\nbeat = default(beat[1], 0) + 1\n",
    );
    let noted = write(
        &dir,
        "noted.dsrv",
        "in host: Str\nin temp: Float\nin note: Str\nout n: Int\nout same: Bool\n\
         n = default(n[1], 0) + 1\nsame = note == default(note[1], \"\")\n",
    );
    let jsonl = trace(30_000, 300);
    let mut quoted = String::from("host,temp,note\n");
    for (i, line) in csv(20_000, 40).lines().skip(1).enumerate() {
        let mut cells = line.split(',');
        let (host, temp) = (cells.next().unwrap(), cells.next().unwrap());
        let note = match i % 5 {
            0 => "\"two\nlines, \"\"quoted\"\"\"".to_string(),
            1 => " \"x\" ".to_string(),
            _ => format!("n{}", i % 3),
        };
        quoted.push_str(&format!("{host},{temp},{note}\n"));
    }
    let mut lines: Vec<String> = jsonl.lines().map(String::from).collect();
    lines[21_234] = "{\"host\":\"h1\",\"temp\":\"hot\",\"ts\":7818}".into();
    let bad = lines.join("\n") + "\n";
    lines[21_234] = jsonl.lines().nth(21_234).unwrap().to_string();
    lines[12_345] = "{\"temp\":1.5,\"ts\":10333}".into();
    let keyless = lines.join("\n") + "\n";
    let skip: &[&str] = &["--on-malformed", "skip", "--summary"];
    let cases: [(&str, &str, &str, &[&str]); 7] = [
        (&spec, &jsonl, "2", &["--summary"]),
        (&spec, &jsonl, "3", &[]),
        (&periodic, &jsonl, "2", &[]),
        (&noted, &quoted, "3", &["--format", "csv", "--summary"]),
        (&spec, &bad, "2", &[]),
        (&spec, &keyless, "3", &[]),
        (&spec, &keyless, "2", skip),
    ];
    for (spec, input, workers, extra) in cases {
        let base = [
            &[
                "run", spec, "--input", "-", "--key", "host", "--output", "csv",
            ][..],
            extra,
        ]
        .concat();
        let want = steady(run_piped(&base, input.as_bytes()));
        assert!(
            matches!(want.0, Some(0 | 4)),
            "{extra:?}: {:?} {}",
            want.0,
            want.2
        );
        let scaled = [&base[..], &["--workers", workers, "--stats"]].concat();
        let got = steady(run_piped(&scaled, input.as_bytes()));
        assert_eq!(got.0, want.0, "{extra:?}: {}", got.2);
        assert!(
            got.1 == want.1,
            "{spec} {extra:?} with {workers} workers: not the single-process run's output"
        );
        // (A run stopped by an error prints no stats.)
        if got.0 == Some(0) {
            assert!(
                got.2.contains(&format!("chunks by {workers} workers")),
                "{}",
                got.2
            );
        }
        // The single-process run's messages and summary, among the workers' stats.
        for line in want.2.lines() {
            assert!(
                got.2.contains(line),
                "{extra:?}: `{line}` missing from\n{}",
                got.2
            );
        }
    }
}

/// The rows of a slow stream are written as they arrive, not when a chunk fills or the stream
/// ends: here six rows (two times), then nothing while the test waits for their outputs. (A
/// worker whose reader waited for its first chunk held every other worker's rows back until
/// the stream gave it one.) The same with `--time`, where process 0's feed reads the stream
/// and the source loop takes the rows waiting together before it steps: a row must wait
/// neither for others nor for a row of a later time (the rows of the latest time were held
/// back until one came: a row's timely time was its stamp, complete only once a later stamp
/// came; it is now the row's index in the feed's order).
#[test]
fn rows_of_a_slow_stream_are_written_as_they_arrive_when_scaled() {
    let dir = test_dir("scale_stream", "slow");
    let spec = write(&dir, "spec.dsrv", SPEC);
    for extra in [&[][..], &["--time", "ts"][..]] {
        let args = [
            &[
                "run",
                &spec,
                "--input",
                "-",
                "--key",
                "host",
                "--output",
                "csv",
                "--workers",
                "2",
            ][..],
            extra,
        ]
        .concat();
        let mut child = vigil()
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(trace(6, 3).as_bytes()).unwrap();
        stdin.flush().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    return;
                }
            }
        });
        let start = Instant::now();
        // The header and the six rows.
        let want = 7;
        let mut got = Vec::new();
        while got.len() < want {
            match rx.recv_timeout(Duration::from_secs(20).saturating_sub(start.elapsed())) {
                Ok(line) => got.push(line),
                Err(_) => break,
            }
        }
        drop(stdin);
        let ended = child.wait().unwrap();
        assert_eq!(
            got.len(),
            want,
            "{extra:?}: the header and the rows while the stream stayed open: {got:?}"
        );
        assert!(ended.success());
    }
}
