//! `vigil run --clock wall`: periodic streams tick on the wall clock while the sources are
//! silent (issue 37), with arrival stamps or with the rows' own times, recorded so that
//! `vigil replay` reproduces the run; real processes, real pipes and real time.

use crate::support::{test_dir, vigil, write};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// A heartbeat: how many rows came in the last 300 ms, every 100 ms.
const HEARTBEAT: &str = "in x: Int\nout beats: Int @ 100ms\nbeats = default(window(x, 300ms, count), 0)\n\
                         trigger beats == 0 \"no heartbeat\"\n";

/// The CSV lines `vigil replay` writes of `log` (which must replay).
fn replayed_csv(spec: &str, log: &str) -> Vec<String> {
    let o = vigil()
        .args(["replay", spec, log, "--output", "csv"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (String::from_utf8(o.stdout).unwrap().lines())
        .map(String::from)
        .collect()
}

/// Starts `vigil` with `args`, its standard input a pipe the test writes,
/// and its standard output's lines sent to the receiver as they come.
fn start(args: &[&str]) -> (Child, Receiver<String>) {
    let mut child = vigil()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// The lines that came within `wait`.
fn lines_within(rx: &Receiver<String>, wait: Duration) -> Vec<String> {
    let until = std::time::Instant::now() + wait;
    let mut lines = Vec::new();
    while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) => lines.push(l),
            Err(_) => break,
        }
    }
    lines
}

/// The ticks among output lines `step,time,beats`: those with a value.
fn ticks(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| !l.ends_with(',') && !l.starts_with("step"))
        .cloned()
        .collect()
}

#[test]
fn a_heartbeat_fires_while_the_source_is_silent_and_replays_exactly() {
    let dir = test_dir("wall", "arrival");
    let spec = write(&dir, "hb.dsrv", HEARTBEAT);
    let log = dir.join("hb.log").to_string_lossy().into_owned();
    let alerts = dir.join("alerts.jsonl").to_string_lossy().into_owned();
    let (mut child, rx) = start(&[
        "run", &spec, "--input", "-", "--clock", "wall", "--output", "csv", "--record", &log,
        "--alerts", &alerts,
    ]);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{{\"x\":1}}").unwrap();
    // The first row's line comes, then, while nothing more is written, the
    // ticks go on (every 100 ms) and fall to 0 once 300 ms have passed.
    let silent = lines_within(&rx, Duration::from_millis(1500));
    let during = ticks(&silent);
    assert!(during.len() >= 5, "too few ticks while silent: {silent:?}");
    assert!(
        during.iter().any(|l| l.ends_with(",0")),
        "no tick said the source went silent: {silent:?}"
    );
    // Arrival stamps and ticks are dates, the ticks on multiples of 100 ms
    // (`…:28.1Z`: one digit of a second's fraction at most).
    for l in &during {
        let time = l.split(',').nth(1).unwrap_or_default();
        let seconds = time.rsplit(':').next().unwrap_or_default();
        let fraction = seconds.split_once('.').map_or("", |(_, f)| f);
        assert!(
            time.ends_with("Z\"") && fraction.len() <= "1Z\"".len(),
            "{l}"
        );
    }
    writeln!(stdin, "{{\"x\":2}}").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success());
    let rest = lines_within(&rx, Duration::from_secs(2));
    let mut live = silent.clone();
    live.extend(rest);
    // The log holds every stamp and tick: the replay writes the same lines.
    let replayed = replayed_csv(&spec, &log);
    assert_eq!(replayed, live);
    // Alerts fired while the source was silent went to the alerts file.
    let fired = std::fs::read_to_string(&alerts).unwrap();
    assert!(fired.contains("no heartbeat"), "{fired}");
    // `--check` takes the log's times and ticks (the traces read again
    // cannot arrive at the same times) and checks each source's rows: the
    // same rows replay as the run; another row is a divergence.
    let check = |rows: &str| {
        let mut child = vigil()
            .args([
                "replay", &spec, &log, "--check", "--input", "-", "--output", "csv",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(rows.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let o = check("{\"x\":1}\n{\"x\":2}\n");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let checked: Vec<String> = (String::from_utf8(o.stdout).unwrap().lines())
        .map(String::from)
        .collect();
    assert_eq!(checked, live);
    let o = check("{\"x\":1}\n{\"x\":3}\n");
    assert_eq!(o.status.code(), Some(4));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the traces diverge from the log")
            && err.contains("row 2 of `<stdin>` is not the log's"),
        "{err}"
    );
    let o = check("{\"x\":1}\n{\"x\":2}\n{\"x\":2}\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the log ended; the traces have more rows"),
        "{err}"
    );
}

#[test]
fn event_time_goes_on_with_the_wall_clock_after_the_idle_timeout() {
    let dir = test_dir("wall", "event-time");
    let spec = write(&dir, "hb.dsrv", HEARTBEAT);
    let (mut child, rx) = start(&[
        "run",
        &spec,
        "--input",
        "-",
        "--time",
        "t",
        "--idle-timeout",
        "0.2",
        "--clock",
        "wall",
        "--output",
        "csv",
    ]);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{{\"t\":0,\"x\":1}}").unwrap();
    let silent = lines_within(&rx, Duration::from_millis(1500));
    let during = ticks(&silent);
    // Ticks at 0, then past the idle timeout at 0.1, 0.2, … by the wall
    // clock: the rows' time unit is seconds.
    assert!(during.len() >= 5, "too few ticks while silent: {silent:?}");
    let at = |l: &String| l.split(',').nth(1).map(String::from);
    let times: Vec<String> = during.iter().filter_map(at).collect();
    assert!(times.contains(&"0.3".to_string()), "{silent:?}");
    assert!(during.iter().any(|l| l.ends_with(",0")), "{silent:?}");
    // A row of a time the silence has passed is late: stamped with the
    // time reached, and said.
    writeln!(stdin, "{{\"t\":0.05,\"x\":1}}").unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    // On two workers, each holds some of the keys.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("keys: 0 live"), "{err}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("a late row (time 0.05) is re-stamped"),
        "{err}"
    );
}

#[test]
fn the_wall_clock_is_refused_where_it_cannot_work() {
    let dir = test_dir("wall", "refused");
    let spec = write(&dir, "hb.dsrv", HEARTBEAT);
    let trace = write(&dir, "t.jsonl", "{\"host\":1,\"x\":1}\n");
    // Rows' own times go on with the wall clock only after a silence: how
    // long one is must be said.
    let o = vigil()
        .args([
            "run", &spec, "--input", &trace, "--clock", "wall", "--time", "t",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--clock wall with --time t: give --idle-timeout SECONDS"),
        "{err}"
    );
    let o = vigil()
        .args(["run", &spec, "--input", &trace, "--clock", "sundial"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("[possible values: data, wall]"), "{err}");
}

#[test]
fn every_key_ticks_on_the_wall_clock_so_a_silent_host_is_seen() {
    every_key_ticks_on_the_wall_clock("keyed", &[]);
}

/// A key first seen long into a run under the wall clock ticks from its own first row, on the
/// run's grid, as issue 35 asks ("each key has its own ticks from its own first row, or
/// `--start`"). Its ticks started at the run's start: a host first seen 1.5 s in got 15 ticks
/// before it existed (a heartbeat's "went silent" for each), and with `--max-ticks 5` the run
/// stopped with exit 4 — with the default million and a 100 ms period, any host first seen
/// after 28 hours would stop the run. On one process and on two workers; the log replays to
/// the same output.
#[test]
fn a_key_first_seen_late_ticks_from_its_first_row_on_the_runs_grid() {
    a_key_first_seen_late_ticks_from_its_first_row("late_key", &[]);
    a_key_first_seen_late_ticks_from_its_first_row("late_key_workers", &["--workers", "2"]);
}

fn a_key_first_seen_late_ticks_from_its_first_row(test: &str, extra: &[&str]) {
    let dir = test_dir("wall", test);
    let spec = write(&dir, "hb.dsrv", format!("in host: Str\n{HEARTBEAT}"));
    let log = dir.join("hb.log").to_string_lossy().into_owned();
    let args = [
        "run",
        &spec,
        "--input",
        "-",
        "--key",
        "host",
        "--clock",
        "wall",
        "--output",
        "csv",
        "--max-ticks",
        "5",
        "--record",
        &log,
    ];
    let (mut child, rx) = start(&[&args[..], extra].concat());
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{{\"host\":\"a\",\"x\":1}}").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    writeln!(stdin, "{{\"host\":\"b\",\"x\":1}}").unwrap();
    std::thread::sleep(Duration::from_millis(350));
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let lines = lines_within(&rx, Duration::from_secs(2));
    let time = |l: &String| l.split(',').nth(2).map(String::from).unwrap_or_default();
    // Seconds of the day of an RFC 3339 time (`"2026-12-07T22:18:02.3Z"`).
    let secs = |t: &str| -> f64 {
        let clock = t.trim_matches('"').trim_end_matches('Z');
        let hms = clock.split('T').nth(1).unwrap_or("");
        (hms.split(':').map(|p| p.parse::<f64>().unwrap_or(f64::NAN)))
            .fold(0.0, |acc, p| acc * 60.0 + p)
    };
    for host in ["a", "b"] {
        let of: Vec<&String> = (lines.iter())
            .filter(|l| l.contains(&format!("\"{host}\"")))
            .collect();
        // The row (its periodic output empty) comes first; every tick after it is on the
        // grid (whole tenths of a second: the RFC 3339 time's fraction has one digit).
        assert!(of.first().is_some_and(|l| l.ends_with(',')), "{lines:?}");
        assert!(of.len() >= 3, "too few ticks of {host}: {lines:?}");
        for tick in &of[1..] {
            let t = time(tick);
            let fraction = t.split('.').nth(1).unwrap_or("Z\"");
            assert!(
                fraction.len() <= 3,
                "{host}'s tick {t} is off the grid: {lines:?}"
            );
            let (tick, row) = (secs(&t), secs(&time(of[0])));
            assert!(
                tick > row,
                "{host} ticked at {t}, before its row: {lines:?}"
            );
        }
    }
    assert_eq!(replayed_csv(&spec, &log), lines);
}

/// Issue 35: the same on two workers (it was refused). The feed ticks, and every worker ticks
/// each of its keys at the tick's place, keys in the order they were first seen: the run's log
/// replays (in one process) to the scaled run's output, line for line.
#[test]
fn every_key_ticks_on_the_wall_clock_on_two_workers() {
    every_key_ticks_on_the_wall_clock("keyed_workers", &["--workers", "2", "--stats"]);
}

fn every_key_ticks_on_the_wall_clock(test: &str, extra: &[&str]) {
    let dir = test_dir("wall", test);
    let spec = write(
        &dir,
        "hb.dsrv",
        "in host: Str\nin x: Int\nout beats: Int @ 100ms\n\
         beats = default(window(x, 300ms, count), 0)\ntrigger beats == 0 \"host went silent\"\n",
    );
    let log = dir.join("hb.log").to_string_lossy().into_owned();
    let args = [
        "run", &spec, "--input", "-", "--key", "host", "--clock", "wall", "--output", "csv",
        "--record", &log,
    ];
    let (mut child, rx) = start(&[&args[..], extra].concat());
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{{\"host\":\"a\",\"x\":1}}\n{{\"host\":\"b\",\"x\":1}}\n{{\"host\":\"c\",\"x\":1}}"
    )
    .unwrap();
    // Host a keeps sending; b falls silent and its ticks say so, while the
    // run is still going.
    let mut lines = Vec::new();
    for _ in 0..12 {
        lines.extend(lines_within(&rx, Duration::from_millis(100)));
        writeln!(stdin, "{{\"host\":\"a\",\"x\":1}}").unwrap();
    }
    // A host's ticks after its first row (the ticks before it say 0, how
    // many there are depends on where in a period the run started).
    let ticks_after_first_row = |host: &str| -> Vec<&String> {
        let of_host = |l: &&String| l.contains(&format!("\"{host}\""));
        let first = lines.iter().position(|l| of_host(&l) && l.ends_with(','));
        (lines.iter().skip(first.map_or(lines.len(), |i| i + 1)))
            .filter(|l| of_host(l) && !l.ends_with(','))
            .collect()
    };
    let zeros = |ticks: &[&String]| ticks.iter().filter(|l| l.ends_with(",0")).count();
    let (a, b) = (ticks_after_first_row("a"), ticks_after_first_row("b"));
    assert!(b.len() >= 5, "too few ticks of host b: {lines:?}");
    assert!(zeros(&b) >= 3, "host b's silence was not seen: {lines:?}");
    // Host a sends every 100 ms into a 300 ms window: it is silent only
    // where the machine held the test back, far less often than b.
    assert!(
        zeros(&a) * 2 < zeros(&b),
        "host a fell silent as often as b: {lines:?}"
    );
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    // On two workers, each holds some of the keys.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("keys: 0 live"), "{err}");
    lines.extend(lines_within(&rx, Duration::from_secs(2)));
    // The log has the run's ticks: the replay ticks every key as the run did.
    assert_eq!(replayed_csv(&spec, &log), lines);
}

/// Issue 35: `--clock wall` on two processes of two workers. Process 0's feed ticks while its
/// FIFO is silent and the keys of both processes tick: the run's log replays, in one process,
/// to the same output. Every key ticks on the grid of the shortest period from its own first
/// row, whichever process holds it: process 1 starts 350 ms after process 0, so that an origin
/// taken from each process's start would tick its keys otherwise (the run was refused without
/// `--start`).
#[test]
fn every_key_ticks_on_the_wall_clock_on_two_processes() {
    use crate::scale::{hostfile, process, wait};
    let dir = test_dir("wall", "keyed_processes");
    let spec = write(
        &dir,
        "hb.dsrv",
        "in host: Str\nin x: Int\nout beats: Int @ 100ms\n\
         beats = default(window(x, 300ms, count), 0)\n",
    );
    let fifo = dir.join("in.jsonl");
    crate::support::mkfifo(&fifo);
    let (out, log) = (dir.join("out.csv"), dir.join("run.log"));
    let (fifo, out, log) = (
        fifo.to_str().unwrap(),
        out.to_str().unwrap(),
        log.to_str().unwrap(),
    );
    let base = [
        "run",
        &spec,
        "--input",
        fifo,
        "--format",
        "jsonl",
        "--key",
        "host",
        "--clock",
        "wall",
        "--output",
        "csv",
        "--output-file",
        out,
    ];
    let hosts = hostfile(&dir);
    let args = [&base[..], &["--record", log, "--stats"]].concat();
    let p0 = process(0, &hosts, &args);
    std::thread::sleep(Duration::from_millis(350));
    let p1 = process(1, &hosts, &args);
    let feeder = {
        let fifo = fifo.to_string();
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            for round in 0..3 {
                let hosts = ["a", "b", "c", "d", "e", "f", "g", "h"];
                for host in hosts.iter().take(8 - 2 * round) {
                    writeln!(f, "{{\"host\":\"{host}\",\"x\":1}}").unwrap();
                }
                f.flush().unwrap();
                std::thread::sleep(Duration::from_millis(450));
            }
        })
    };
    let (o0, o1) = (
        wait(p0, Duration::from_secs(60)),
        wait(p1, Duration::from_secs(60)),
    );
    feeder.join().unwrap();
    let err = String::from_utf8_lossy(&o0.stderr);
    assert!(o0.status.success(), "{err}");
    assert!(
        o1.status.success(),
        "{}",
        String::from_utf8_lossy(&o1.stderr)
    );
    let text = std::fs::read_to_string(out).unwrap();
    // Hosts g and h sent only in the first round: their silence is seen while the others send.
    let h_zeros = (text.lines())
        .filter(|l| l.contains("\"h\"") && l.ends_with(",0"))
        .count();
    assert!(h_zeros >= 3, "host h's silence was not seen: {text}");
    // Process 1's workers (2 and 3) hold keys, so their ticks are in the comparison below.
    let keys_of = |w: usize| {
        let part = err.split(&format!("worker {w} of 4:")).nth(1).unwrap_or("");
        let live = part.split("keys: ").nth(1).unwrap_or("");
        live.split(' ').next().and_then(|n| n.parse::<u64>().ok())
    };
    assert!(
        keys_of(2).unwrap_or(0) + keys_of(3).unwrap_or(0) > 0,
        "process 1 held no key: {err}"
    );
    assert_eq!(replayed_csv(&spec, log), text.lines().collect::<Vec<_>>());
}

/// Issue 35: a scaled run under the wall clock writes its keys' ticks while every source is
/// silent, as one process does (they came only with the next row: a sweep's ticks waited at
/// that row's time, so a silent pipe's heartbeats were written when it spoke again), and it
/// checkpoints and resumes (it was refused). Killed with SIGKILL in a silence and resumed after
/// a while, each key's ticks go on from the checkpoint's, those missed while it was down caught
/// up, 100 ms apart with none lost or written twice, and no row is counted twice.
#[test]
fn two_workers_tick_while_the_source_is_silent_and_resume_after_a_kill() {
    use crate::scale::complete_checkpoint;
    let dir = test_dir("wall", "scaled_silence");
    let spec = write(
        &dir,
        "tk.dsrv",
        "in host: Str\nin x: Int\nout n: Int\nout ticks: Int @ 100ms\n\
         n = default(n[1], 0) + x\nticks = default(ticks[1], 0) + 1\n",
    );
    let (ck, out) = (dir.join("ck"), dir.join("out.csv"));
    let (ck_s, out_s) = (ck.to_str().unwrap(), out.to_str().unwrap());
    let args = [
        "run",
        &spec,
        "--input",
        "-",
        "--format",
        "jsonl",
        "--key",
        "host",
        "--clock",
        "wall",
        "--workers",
        "2",
        "--output",
        "csv",
        "--output-file",
        out_s,
        "--checkpoint",
        ck_s,
        "--checkpoint-every",
        "1",
    ];
    let lines = || std::fs::read_to_string(&out).unwrap_or_default();
    // Rows' lines have a count, ticks' a tick count: `step,host,time,n,ticks`.
    let rows_in = |text: &str| text.lines().filter(|l| l.ends_with(',')).count();
    let wait_for_rows = |n: usize| {
        let start = std::time::Instant::now();
        while rows_in(&lines()) < n {
            assert!(start.elapsed() < Duration::from_secs(60), "{}", lines());
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let spawn = |extra: &[&str]| {
        vigil()
            .args(args)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let rows = "{\"host\":\"a\",\"x\":1}\n{\"host\":\"b\",\"x\":1}\n{\"host\":\"c\",\"x\":1}\n";
    let mut first = spawn(&[]);
    let mut stdin = first.stdin.take().unwrap();
    stdin.write_all(rows.as_bytes()).unwrap();
    stdin.flush().unwrap();
    wait_for_rows(3);
    let before = lines().lines().count();
    std::thread::sleep(Duration::from_millis(800));
    let silent = lines().lines().count() - before;
    // Three keys ticking every 100 ms for 800 ms (the machine may hold the run back a little).
    assert!(
        silent >= 9,
        "{silent} lines while the source was silent:\n{}",
        lines()
    );
    assert!(complete_checkpoint(&ck).is_some(), "no checkpoint");
    first.kill().unwrap();
    first.wait().unwrap();
    // Down for a while: its ticks are caught up on resume.
    std::thread::sleep(Duration::from_millis(300));
    let mut second = spawn(&["--resume", ck_s]);
    let mut stdin = second.stdin.take().unwrap();
    // Standard input is given again from its start: the rows the checkpoint took are dropped.
    stdin.write_all(rows.as_bytes()).unwrap();
    stdin.write_all(b"{\"host\":\"a\",\"x\":1}\n").unwrap();
    stdin.flush().unwrap();
    wait_for_rows(4);
    std::thread::sleep(Duration::from_millis(400));
    drop(stdin);
    let o = second.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = lines();
    // The time of day of an RFC 3339 date, in ms.
    let ms = |date: &str| -> u64 {
        let clock = date.trim_matches('"').split('T').nth(1).unwrap();
        let clock = clock.trim_end_matches('Z');
        let mut parts = clock.split(':');
        let (h, m): (u64, u64) = (
            parts.next().unwrap().parse().unwrap(),
            parts.next().unwrap().parse().unwrap(),
        );
        let s: f64 = parts.next().unwrap().parse().unwrap();
        (h * 3600 + m * 60) * 1000 + (s * 1000.0).round() as u64
    };
    for host in ["a", "b", "c"] {
        let quoted = format!("\"{host}\"");
        let of_host: Vec<Vec<&str>> = (text.lines().skip(1))
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|f| f[1] == quoted)
            .collect();
        let counts: Vec<&str> = of_host
            .iter()
            .map(|f| f[3])
            .filter(|n| !n.is_empty())
            .collect();
        let want = if host == "a" {
            vec!["1", "2"]
        } else {
            vec!["1"]
        };
        assert_eq!(counts, want, "host {host}'s rows:\n{text}");
        let ticks: Vec<(u64, u64)> = (of_host.iter())
            .filter(|f| !f[4].is_empty())
            .map(|f| (f[4].parse().unwrap(), ms(f[2])))
            .collect();
        // Hosts a and b tick across the kill; c's row came after the checkpoint, so c ticks
        // only from its row read again.
        let least = if host == "c" { 3 } else { 10 };
        assert!(ticks.len() >= least, "host {host}'s ticks:\n{text}");
        for pair in ticks.windows(2) {
            let ((n0, t0), (n1, t1)) = (pair[0], pair[1]);
            assert!(
                n1 == n0 + 1 && t1 == t0 + 100,
                "host {host}: tick {n0} at {t0} ms, then {n1} at {t1} ms:\n{text}"
            );
        }
    }
}
