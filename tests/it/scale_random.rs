//! Scaled runs over random inputs against the single-process run, byte for byte: one to three
//! files, with `--time` or without, each with its own pattern of times (steady, bursts of one
//! time, jumps far ahead, late rows, an empty file, now and then a malformed row or a row
//! without its key),
//! read in parallel by 2 and 3 workers (one input without `--time` also from standard input and
//! by two processes reading their parts). Every run must end, with the single-process output,
//! error and status. (A round of rows spanning a jump once held
//! the run's frontier back for ever: `scale::a_round_of_rows_waiting_on_another_reader_…`.)
//!
//! `VIGIL_SCALE_CASES` sets the number of cases (default 12; a third of them with a bad row in
//! their first input, half of those skipped), `VIGIL_TEST_SEED` the seed.

use crate::checkpoints::Rng;
use crate::scale::{SPEC, hostfile, process, run, wait};
use crate::support::{run_piped, test_dir, write};
use std::time::Duration;

/// One input's rows: `rows` rows over `hosts` hosts, its times from `start` on, each moving by
/// a few units, by none (a burst of one time), or far ahead, how often depends on the input
/// (`jumps` in a hundred rows): a dense input beside a sparse one makes one reader's round of
/// rows span many of the other's.
fn input(rng: &mut Rng, rows: u64, hosts: u64) -> String {
    let jumps = [0, 1, 5, 30][rng.below(4) as usize];
    let mut ts = rng.below(1_000);
    let mut text = String::new();
    for _ in 0..rows {
        let roll = rng.below(100);
        ts += if roll < jumps {
            rng.below(1_000_000)
        } else if roll < jumps + 35 {
            0
        } else {
            rng.below(4)
        };
        // Now and then a row a little late (within `--lateness 3`).
        let t = match rng.below(200) {
            0 => ts.saturating_sub(rng.below(4)),
            _ => ts,
        };
        let temp = 35.0 + rng.below(800) as f64 / 100.0;
        let host = rng.below(hosts);
        text.push_str(&format!(
            "{{\"host\":\"h{host}\",\"temp\":{temp},\"ts\":{t}}}\n"
        ));
    }
    text
}

#[test]
fn scaled_runs_over_random_inputs_give_the_single_process_output() {
    let cases: u64 = std::env::var("VIGIL_SCALE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let mut rng = Rng::new();
    let dir = test_dir("scale_random", "inputs");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let (mut parallel, mut several_timed, mut stopped, mut several_ways) = (0, 0, 0, 0);
    for case in 0..cases {
        // Every fourth case one input without a time field, every fourth from the second on
        // several with one, so the coverage asserted below does not rest on chance.
        let count = match case % 4 {
            0 => 1,
            1 => 2 + rng.below(2),
            _ => 1 + rng.below(3),
        };
        let hosts = 1 + rng.below(40);
        let timed = match case % 4 {
            0 => false,
            1 => true,
            _ => rng.below(3) > 0,
        };
        let paths: Vec<String> = (0..count)
            .map(|i| {
                // An empty input now and then.
                let bad = i == 0 && case % 3 == 1;
                let rows = match rng.below(8) {
                    0 if !bad => 0,
                    // Past a reader's limit of rounds in flight (8 of 1,024 rows) now and then.
                    _ => 1 + rng.below(16_000),
                };
                let mut text = input(&mut rng, rows, hosts);
                // A malformed row, or one without its key, now and then: the run stops (or
                // skips it) where the single-process run does.
                if bad {
                    let at = text.match_indices('\n').nth(rng.below(rows) as usize);
                    let at = at.map_or(0, |(i, _)| i + 1);
                    let bad = ["{\"host\":\"h1\",\"temp\":\n", "{\"temp\":36.5,\"ts\":0}\n"];
                    text.insert_str(at, bad[rng.below(2) as usize]);
                }
                write(&dir, &format!("c{case}-{i}.jsonl"), text)
            })
            .collect();
        let mut args = vec!["run", &spec, "--key", "host", "--output", "csv"];
        for p in &paths {
            args.extend(["--input", p]);
        }
        if timed {
            args.extend(["--time", "ts", "--lateness", "3"]);
        }
        if case % 6 == 4 {
            args.extend(["--on-malformed", "skip"]);
        }
        let want = run(&args);
        stopped += usize::from(!want.status.success());
        for workers in ["2", "3"] {
            let got = run(&[&args[..], &["--workers", workers, "--stats"]].concat());
            let err = String::from_utf8_lossy(&got.stderr);
            let what = format!("case {case}: {count} inputs, timed {timed}, {workers} workers");
            assert_eq!(got.status.code(), want.status.code(), "{what}: {err}");
            assert!(
                got.stdout == want.stdout,
                "{what}: not the single-process output"
            );
            // The error that stopped the run is the single-process run's.
            let said = |e: &[u8]| -> Vec<String> {
                let e = String::from_utf8_lossy(e);
                (e.lines())
                    .filter(|l| l.starts_with("error"))
                    .map(str::to_string)
                    .collect()
            };
            assert_eq!(said(&got.stderr), said(&want.stderr), "{what}");
            if err.contains("in parallel") || err.contains(" parts by ") {
                parallel += 1;
                several_timed += usize::from(timed && count > 1);
            }
        }
        // One input without a time field is also read from standard input in chunks, and by
        // two processes each reading their parts of it.
        if count == 1 && !timed {
            let text = std::fs::read(&paths[0]).unwrap();
            let mut piped = args.clone();
            let at = piped.iter().position(|a| *a == paths[0].as_str()).unwrap();
            piped[at] = "-";
            let got = run_piped(&[&piped[..], &["--workers", "2"]].concat(), &text);
            let what = format!("case {case}: standard input, 2 workers");
            assert_eq!(got.code, want.status.code(), "{what}: {}", got.err);
            assert!(
                got.out.as_bytes() == want.stdout,
                "{what}: not the single-process output"
            );
            let hosts = hostfile(&dir);
            let every = [&args[..], &["--input-on-every-process"]].concat();
            let p1 = process(1, &hosts, &every);
            let p0 = process(0, &hosts, &every);
            let (o0, o1) = (
                wait(p0, Duration::from_secs(120)),
                wait(p1, Duration::from_secs(120)),
            );
            let what = format!("case {case}: 2 processes reading their parts");
            let err = String::from_utf8_lossy(&o0.stderr);
            assert_eq!(o0.status.code(), want.status.code(), "{what}: {err}");
            assert!(
                o0.stdout == want.stdout,
                "{what}: not the single-process output"
            );
            let _ = o1;
            several_ways += 1;
        }
    }
    // The cases must reach the parallel readers, timed inputs among them, or the test would
    // pass without trying them.
    eprintln!(
        "{parallel} runs read in parallel, {several_timed} of several timed inputs; {stopped} cases stopped; {several_ways} also from standard input and by two processes"
    );
    if cases >= 12 {
        assert!(
            parallel >= cases as usize / 2,
            "only {parallel} runs read in parallel"
        );
        assert!(
            several_timed >= 1,
            "no run read several timed inputs in parallel"
        );
        assert!(stopped >= 1, "no case stopped at a bad row");
        assert!(
            several_ways >= 1,
            "no case read from standard input or by two processes"
        );
    }
}
