//! Scale-out on timely: 1, 2 and 4 workers and 2 processes of 2 give the single-threaded keyed
//! run's output in the documented order; a killed process ends the run with an error, and a
//! restart with `--resume` continues from the last complete checkpoint without loss or repetition.

use crate::support::{test_dir, vigil, write};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};
use vigil::pipeline::checkpoint::Checkpoint;
use vigil::pipeline::checkpoint::barrier::{self, Part, Shard};
use vigil::trace::{OutputFormat, TraceFormat};

/// A spec with history per key (offsets, a count window), a Str stream and
/// a trigger, so that every part of a keyed run crosses the exchange.
pub(crate) const SPEC: &str = "\
in host: Str
in temp: Float
in ts: Int
out n: Int
out hot: Bool
out avg: Float
out delta: Float
out label: Str
n = default(n[1], 0) + 1
hot = temp > 38.0
avg = window(temp, 5, avg)
delta = temp - default(temp[1], temp)
label = if hot then host ++ \"!\" else host
trigger burning: hot && default(hot[1], false) \"{host} hot twice: {temp}\"
";

/// A generated trace: `rows` rows over `keys` hosts (a fixed pseudo-random
/// sequence), three rows per time unit of `ts`.
pub(crate) fn trace(rows: usize, keys: u64) -> String {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut text = String::with_capacity(rows * 48);
    for i in 0..rows {
        let host = next() % keys;
        let temp = (next() % 3000) as f64 / 100.0 + 10.0;
        text.push_str(&format!(
            "{{\"host\":\"h{host}\",\"temp\":{temp},\"ts\":{}}}\n",
            i / 3
        ));
    }
    text
}

/// Runs vigil to completion; panics if it takes longer than two minutes.
pub(crate) fn run(args: &[&str]) -> Output {
    let child = vigil()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait(child, Duration::from_secs(120))
}

/// Waits for `child` (reading its output as it comes, so that a full pipe
/// never blocks it); kills it and panics after `limit`.
pub(crate) fn wait(child: Child, limit: Duration) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output().unwrap()));
    match rx.recv_timeout(limit) {
        Ok(out) => out,
        Err(_) => {
            // SAFETY: `kill` only sends a signal to the child's pid.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let out = rx.recv().unwrap();
            panic!(
                "vigil did not finish within {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

pub(crate) fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// Two free loopback ports, as a hostfile for two processes.
pub(crate) fn hostfile(dir: &Path) -> String {
    let ports: Vec<u16> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect::<Vec<_>>()
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    write(
        dir,
        "hosts",
        format!("127.0.0.1:{}\n127.0.0.1:{}\n", ports[0], ports[1]),
    )
}

/// The single-threaded keyed run's outputs and alerts (the reference).
fn single(dir: &Path, spec: &str, input: &str, extra: &[&str]) -> (String, String) {
    let out = dir.join("single.out").to_str().unwrap().to_string();
    let alerts = dir.join("single.alerts").to_str().unwrap().to_string();
    let mut args = vec![
        "run",
        spec,
        "--input",
        input,
        "--key",
        "host",
        "--output-file",
        &out,
        "--alerts",
        &alerts,
    ];
    args.extend(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (read(&out), read(&alerts))
}

#[test]
fn workers_in_one_process_give_the_single_threaded_output() {
    let dir = test_dir("scale", "workers");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "trace.jsonl", trace(100_000, 1_000));
    let (want, want_alerts) = single(&dir, &spec, &input, &[]);
    assert!(want.lines().count() >= 500_000 && !want_alerts.is_empty());
    for workers in ["1", "2", "4"] {
        let out = dir.join(format!("w{workers}.out"));
        let alerts = dir.join(format!("w{workers}.alerts"));
        let o = run(&[
            "run",
            &spec,
            "--input",
            &input,
            "--key",
            "host",
            "--workers",
            workers,
            "--output-file",
            out.to_str().unwrap(),
            "--alerts",
            alerts.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // Without --time a row's time is its position: the order (time,
        // key, position) is the trace's, so the output is byte-identical.
        assert!(
            std::fs::read_to_string(&out).unwrap() == want,
            "{workers} workers: the output differs from the single-threaded run"
        );
        assert!(std::fs::read_to_string(&alerts).unwrap() == want_alerts);
    }
}

/// Issue 35: the library's `ScaledRun` is the run `--workers` is. An embedder's run of three
/// workers over a `Feed` of the trace writes the single-process `vigil run --key` output and
/// alerts byte for byte, and counts what it read and fired.
#[test]
fn the_librarys_scaled_run_gives_the_single_process_output() {
    use std::sync::{Arc, Mutex};
    use vigil::pipeline::{Feed, FeedOptions, GapPolicy, Malformed, ResetPolicy};
    use vigil::scale::ScaledRun;

    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    let dir = test_dir("scale", "library");
    let spec_path = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "trace.jsonl", trace(20_000, 200));
    let (want, want_alerts) = single(&dir, &spec_path, &input, &["--output", "csv"]);
    assert!(!want_alerts.is_empty(), "the trace must fire the trigger");

    let spec = vigil::Spec::parse("spec.dsrv", SPEC).unwrap();
    let schema = spec.input_schema();
    let opened = vigil::trace::open_trace(
        &input,
        TraceFormat::Jsonl,
        &schema,
        vigil::trace::ReaderOptions::default(),
    )
    .unwrap();
    let options = FeedOptions {
        names: schema.names.clone(),
        time_cell: None,
        unit: vigil::time::TimeUnit::Seconds,
        lateness: 0,
        separate: true,
        malformed: Malformed::Stop,
        idle_timeout: None,
        periods: vec![],
        start: None,
        max_gap: None,
        on_gap: GapPolicy::CatchUp,
        max_ticks: 1000,
        on_reset: ResetPolicy::Cancel,
        positions: true,
        wall_clock: false,
    };
    let mut feed = Feed::new(options, vigil::notice::ignore());
    feed.add_reader(input.clone(), opened.reader, TraceFormat::Jsonl);
    let monitor = vigil::KeyedMonitor::builder(&spec, "host").build().unwrap();
    let (out, alerts) = (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
    );
    let finished = ScaledRun::new(&spec, monitor, 3, feed)
        .unwrap()
        .output(OutputFormat::Csv, Box::new(Shared(out.clone())))
        .alerts(Box::new(Shared(alerts.clone())))
        .stats()
        .run()
        .unwrap();
    let got = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    let got_alerts = String::from_utf8(alerts.lock().unwrap().clone()).unwrap();
    if got != want {
        let at = got.lines().zip(want.lines()).position(|(g, w)| g != w);
        let line = |t: &str, i: Option<usize>| i.and_then(|i| t.lines().nth(i).map(String::from));
        panic!(
            "the library's scaled run differs from `vigil run --key` at line {at:?}: {:?} against {:?}",
            line(&got, at),
            line(&want, at)
        );
    }
    assert_eq!(got_alerts, want_alerts);
    assert_eq!((finished.read.rows, finished.read.skipped), (20_000, 0));
    assert_eq!(finished.steps, 20_000);
    assert_eq!(finished.fired, want_alerts.lines().count() as u64);
    assert!(!finished.key_stopped);
    assert_eq!(finished.workers.len(), 3);
    let rows: u64 = finished.workers.iter().map(|w| w.stats.rows).sum();
    assert_eq!(rows, 20_000);
    let keys: usize = finished.workers.iter().map(|w| w.keys).sum();
    assert_eq!(keys, 200);
}

/// Issue 35: `--max-keys` works with `--workers`, bounding each worker's live keys. One
/// worker under a bound that evicts (20 keys, 7 live) gives the single-process run's output
/// byte for byte, evicted keys starting afresh as there; two workers under a bound that
/// never bites give it too. (It was refused.)
#[test]
fn max_keys_bounds_each_workers_keys() {
    let dir = test_dir("scale", "max_keys");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "trace.jsonl", trace(3_000, 20));
    let scaled = |workers: &str, bound: &str, name: &str| {
        let out = dir.join(name);
        let file = out.to_str().unwrap();
        let args = [
            "--max-keys",
            bound,
            "--workers",
            workers,
            "--output-file",
            file,
        ];
        let o = keyed(&spec, &input, &args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        read(file)
    };
    let (evicting, _) = single(&dir, &spec, &input, &["--max-keys", "7"]);
    let (unbounded, _) = single(&dir, &spec, &input, &[]);
    // The bound bites: a key's count starts again after an eviction.
    assert!(evicting != unbounded);
    assert!(
        scaled("1", "7", "w1.out") == evicting,
        "one worker, evicting"
    );
    assert!(
        scaled("2", "20", "w2.out") == unbounded,
        "two workers, a bound that never bites"
    );
}

/// Issue 35: `--stats` works with `--workers`: each worker's counters (its rows are those
/// routed to it) and live keys, then the process's totals, which are the single-process
/// run's rows and keys. (It was refused.)
#[test]
fn stats_of_a_scaled_run_are_each_workers() {
    let dir = test_dir("scale", "stats");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "trace.jsonl", trace(3_000, 20));
    let out = dir.join("out");
    let o = scaled(
        &spec,
        &input,
        &["--stats", "--output-file", out.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    let rows: Vec<u64> = (err.lines())
        .filter_map(|l| l.strip_prefix("rows: ")?.parse().ok())
        .collect();
    assert!(
        err.contains("worker 0 of 2:\ntier: ") && err.contains("worker 1 of 2:\ntier: "),
        "{err}"
    );
    assert_eq!(rows.len(), 2, "{err}");
    assert!(rows.iter().all(|&r| r > 0), "both workers had rows: {err}");
    assert!(
        err.contains("process 0: 3000 rows, 20 keys live over 2 workers"),
        "{err}"
    );
    assert_eq!(rows.iter().sum::<u64>(), 3_000);
}

/// Issue 35: `--pass` works with `--workers`: the passed fields (a declared input and an
/// undeclared one) travel with each row to its worker and are printed in its output line
/// and alert lines, byte for byte as the single-process run prints them. (It was refused.)
#[test]
fn passed_fields_travel_with_scaled_rows() {
    let dir = test_dir("scale", "pass");
    let spec = write(&dir, "spec.dsrv", SPEC);
    // The generated trace with an undeclared field `dc` on every row.
    let text: String = (trace(3_000, 20).lines())
        .enumerate()
        .map(|(i, l)| format!("{},\"dc\":\"eu-{}\"}}\n", &l[..l.len() - 1], i % 3))
        .collect();
    let input = write(&dir, "trace.jsonl", &text);
    let pass = ["--pass", "dc,temp", "--output", "csv"];
    let (want, want_alerts) = single(&dir, &spec, &input, &pass);
    assert!(
        want.contains("\"eu-1\"") && want_alerts.contains("\"dc\":\"eu-"),
        "{want_alerts}"
    );
    let (out, alerts) = (dir.join("w.out"), dir.join("w.alerts"));
    let files = [
        "--output-file",
        out.to_str().unwrap(),
        "--alerts",
        alerts.to_str().unwrap(),
    ];
    let o = scaled(&spec, &input, &[&files[..], &pass[..]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(read(out.to_str().unwrap()) == want, "the outputs differ");
    assert!(
        read(alerts.to_str().unwrap()) == want_alerts,
        "the alerts differ"
    );
}

/// Issue 35: `--summary` works with `--workers`: rows read, steps, malformed rows skipped,
/// the tier and each trigger's firings (first and last, in output order) are the
/// single-process run's. (It was refused.)
#[test]
fn a_scaled_summary_is_the_single_process_summary() {
    let dir = test_dir("scale", "summary");
    let spec = write(&dir, "spec.dsrv", SPEC);
    // A malformed line among the rows, skipped by the policy.
    let mut text = trace(3_000, 20);
    text.insert_str(text.find('\n').unwrap() + 1, "{not json\n");
    let input = write(&dir, "trace.jsonl", &text);
    let summary = |extra: &[&str]| {
        let common = [
            "--summary",
            "--on-malformed",
            "skip",
            "--output-file",
            "/dev/null",
        ];
        let o = keyed(
            &spec,
            &input,
            &[&common[..], &["--alerts", "/dev/null"], extra].concat(),
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // Every line but the last, the time and rate.
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let lines: Vec<String> = err.lines().map(str::to_string).collect();
        lines[..lines.len() - 1].to_vec()
    };
    let want = summary(&[]);
    assert!(
        want[0] == "summary: 3001 rows read, 3000 steps evaluated, 1 malformed row skipped",
        "{want:?}"
    );
    assert!(
        want.iter()
            .any(|l| l.starts_with("summary: trigger burning: ") && l.contains("first at step")),
        "{want:?}"
    );
    assert_eq!(summary(&["--workers", "2"]), want);
}

/// A periodic specification (a heartbeat per host) and a trace of 2,000 rows of 17 hosts with
/// times that repeat and jump, in `dir`.
fn heartbeats(dir: &Path) -> (String, String) {
    let spec = write(
        dir,
        "spec.dsrv",
        "in host: Str\nin beat: Bool\naux beats: Int\nbeats = default(beats[1], 0) + 1\nout missing: Bool @ 1s\nmissing = beats == default(beats[1], 0)\n",
    );
    let mut text = String::from("host,beat,ts\n");
    let mut t = 0;
    for i in 0..2_000u64 {
        t += (i * 7919) % 3;
        text.push_str(&format!("h{},true,{t}\n", (i * 31) % 17));
    }
    (spec, write(dir, "trace.csv", &text))
}

/// A scaled run whose single-process run merges its sources (`--time`, a periodic spec) says
/// what the merge did, and counts its keys' ticks as ticks, as that run's summary does. It
/// counted the ticks as steps evaluated (47,378 steps for 3,000 rows) and had no "sources
/// merged" line.
#[test]
fn a_scaled_summary_of_a_merged_periodic_run_is_the_single_process_summary() {
    let dir = test_dir("scale", "summary_periodic");
    let (spec, input) = heartbeats(&dir);
    let summary = |extra: &[&str]| {
        let common = ["--time", "ts", "--summary", "--output-file", "/dev/null"];
        let o = keyed(&spec, &input, &[&common[..], extra].concat());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // The rate aside.
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let lines: Vec<String> = err
            .lines()
            .filter(|l| !l.ends_with("rows/s"))
            .map(str::to_string)
            .collect();
        lines
    };
    let want = summary(&[]);
    assert_eq!(
        want[0], "summary: 2000 rows read, 2000 steps evaluated, 0 malformed rows skipped",
        "{want:?}"
    );
    assert!(
        want.iter().any(|l| l
            .starts_with("summary: 1 sources merged; 0 clashes; 0 late rows re-stamped; ")
            && !l.ends_with("; 0 ticks")),
        "{want:?}"
    );
    assert_eq!(summary(&["--workers", "2"]), want);
}

/// With `--time`, a scaled run's output is the single-process run's, in its
/// order (the merge's stamps: time, then position). Regression test: the
/// rows of one time were sorted by key, so the output differed from the
/// single-process run's whenever a time had rows of several keys.
#[test]
fn timed_rows_come_out_in_the_single_process_order() {
    let dir = test_dir("scale", "timed");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "trace.jsonl", trace(30_000, 300));
    let (want, _) = single(&dir, &spec, &input, &["--time", "ts", "--output", "csv"]);
    for workers in ["1", "3"] {
        let o = run(&[
            "run",
            &spec,
            "--input",
            &input,
            "--key",
            "host",
            "--time",
            "ts",
            "--output",
            "csv",
            "--workers",
            workers,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            String::from_utf8(o.stdout).unwrap() == want,
            "{workers} workers: not the single-process output"
        );
    }
}

/// Regression: two timed inputs read in parallel, where input b's first round of rows spans
/// its first row (time 1) and rows far past every time of input a. The round travelled at its
/// first row's time and the worker evaluating it kept that time held while the later rows
/// waited for input a's reader, so the run's frontier stayed at 1; input a's reader, its rows
/// never complete, stopped at its limit of rounds in flight, and the run waited for ever (it
/// wrote nothing). The run now ends with the single-process output.
#[test]
fn a_round_of_rows_waiting_on_another_reader_does_not_hold_the_run_back() {
    let dir = test_dir("scale", "straddle");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let a: String = (0..20_000)
        .map(|i| {
            format!(
                "{{\"host\":\"h{}\",\"temp\":40.5,\"ts\":{}}}\n",
                i % 5,
                2 * i + 2
            )
        })
        .collect();
    let b: String = std::iter::once("{\"host\":\"g0\",\"temp\":40.5,\"ts\":1}\n".to_string())
        .chain((0..3_000).map(|i| {
            format!(
                "{{\"host\":\"g{}\",\"temp\":40.5,\"ts\":{}}}\n",
                i % 5,
                1_000_000 + i
            )
        }))
        .collect();
    let a = write(&dir, "a.jsonl", a);
    let b = write(&dir, "b.jsonl", b);
    let args = |extra: &'static [&'static str]| {
        let mut args = vec![
            "run", &spec, "--input", &a, "--input", &b, "--time", "ts", "--key", "host",
            "--output", "csv",
        ];
        args.extend_from_slice(extra);
        args
    };
    let want = run(&args(&[]));
    assert!(
        want.status.success(),
        "{}",
        String::from_utf8_lossy(&want.stderr)
    );
    let got = run(&args(&["--workers", "2", "--stats"]));
    let err = String::from_utf8_lossy(&got.stderr);
    assert!(got.status.success(), "{err}");
    assert!(
        err.contains("2 inputs read in parallel by 2 workers"),
        "{err}"
    );
    assert!(got.stdout == want.stdout, "not the single-process output");
}

/// Starts process `index` of a two-process run of two workers each.
pub(crate) fn process(index: usize, hosts: &str, args: &[&str]) -> Child {
    process_in(None, index, hosts, args)
}

/// `process`, run in `cwd` when given (a relative `--input` is then that directory's file).
fn process_in(cwd: Option<&Path>, index: usize, hosts: &str, args: &[&str]) -> Child {
    let i = index.to_string();
    let mut command = vigil();
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    command
        .args(args)
        .args([
            "--workers",
            "2",
            "--processes",
            "2",
            "--process",
            &i,
            "--hostfile",
            hosts,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs both processes of a two-process run to a successful end.
fn run_two(hosts: &str, args: &[&str]) -> (Output, Output) {
    let p1 = process(1, hosts, args);
    let p0 = process(0, hosts, args);
    let (o0, o1) = (
        wait(p0, Duration::from_secs(120)),
        wait(p1, Duration::from_secs(120)),
    );
    for o in [&o0, &o1] {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    (o0, o1)
}

#[test]
fn two_processes_of_two_workers_give_the_single_threaded_output() {
    let dir = test_dir("scale", "processes");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "trace.jsonl", trace(100_000, 1_000));
    let (want, want_alerts) = single(&dir, &spec, &input, &[]);
    let hosts = hostfile(&dir);
    let out = dir.join("p.out").to_str().unwrap().to_string();
    let alerts = dir.join("p.alerts").to_str().unwrap().to_string();
    let args = [
        "run",
        &spec,
        "--input",
        &input,
        "--key",
        "host",
        "--output-file",
        &out,
        "--alerts",
        &alerts,
    ];
    let (o0, o1) = run_two(&hosts, &args);
    // Process 0 writes everything; nothing of timely's set-up is printed.
    assert!(o0.stdout.is_empty() && o1.stdout.is_empty());
    assert!(read(&out) == want, "two processes: the output differs");
    assert!(read(&alerts) == want_alerts);
}

/// Issue 35: with `--input-on-every-process` every process's workers read their share of the
/// file in parts (process 0's alone did): the output, the alerts and the summary's counts are
/// the single-process run's; a malformed row in a part another process reads stops the run
/// there, as one process does (process 0 writes every row before it and no row after, and
/// says the error); and a process whose file differs is refused in the handshake.
#[test]
fn every_process_reads_its_share_of_a_file_it_holds() {
    let dir = test_dir("scale", "processes_share");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "trace.jsonl", trace(100_000, 1_000));
    let (want, want_alerts) = single(&dir, &spec, &input, &[]);
    let hosts = hostfile(&dir);
    let out = dir.join("p.out").to_str().unwrap().to_string();
    let alerts = dir.join("p.alerts").to_str().unwrap().to_string();
    let log = dir.join("run.log").to_str().unwrap().to_string();
    let args = [
        "run",
        &spec,
        "--input",
        &input,
        "--key",
        "host",
        "--output-file",
        &out,
        "--alerts",
        &alerts,
        "--input-on-every-process",
        "--summary",
        "--stats",
        "--record",
        &log,
    ];
    let (o0, o1) = run_two(&hosts, &args);
    assert!(
        read(&out) == want,
        "two processes reading parts: the output differs"
    );
    // Every worker of both processes wrote its part of the log (here in one directory).
    for w in 0..4 {
        let part = read(&format!("{log}.w{w}"));
        assert!(part.lines().count() > 1000, "part {w} holds few rows");
    }
    let replayed = run(&["replay", &spec, &log]);
    assert!(replayed.stdout == want.as_bytes(), "the replay differs");
    assert!(read(&alerts) == want_alerts);
    let (err0, err1) = (
        String::from_utf8_lossy(&o0.stderr),
        String::from_utf8_lossy(&o1.stderr),
    );
    assert!(
        err1.contains("parts by the run's 4 workers, 2 of them here"),
        "process 1 read nothing: {err1}"
    );
    assert!(
        err0.contains("summary: 100000 rows read, 100000 steps evaluated"),
        "{err0}"
    );
    // A malformed row near the end: in a part of process 1's when the parts are dealt
    // round-robin over 4 workers (the file is split into about 32 parts).
    let lines: Vec<&str> = want.lines().collect();
    assert!(lines.len() > 1000);
    let text = std::fs::read_to_string(&input).unwrap();
    let mut rows: Vec<&str> = text.lines().collect();
    let bad_at = rows.len() - 2_000;
    rows[bad_at] = "{\"host\": oops}";
    let bad = write(&dir, "bad.jsonl", &(rows.join("\n") + "\n"));
    let plain = [
        "run", &spec, "--input", &bad, "--key", "host", "--output", "csv",
    ];
    let one = run(&plain);
    assert_eq!(one.status.code(), Some(4));
    let bad_out = dir.join("bad.out").to_str().unwrap().to_string();
    let scaled = [
        "run",
        &spec,
        "--input",
        &bad,
        "--key",
        "host",
        "--output",
        "csv",
        "--output-file",
        &bad_out,
        "--input-on-every-process",
        "--record",
        &log,
    ];
    let p1 = process(1, &hosts, &scaled);
    let p0 = process(0, &hosts, &scaled);
    let (o0, o1) = (
        wait(p0, Duration::from_secs(120)),
        wait(p1, Duration::from_secs(120)),
    );
    assert_eq!(
        o0.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o0.stderr)
    );
    assert!(
        read(&bad_out).as_bytes() == one.stdout,
        "the rows before the malformed one, and none after"
    );
    let said = String::from_utf8_lossy(&o0.stderr);
    let located = format!("bad.jsonl:{}:", bad_at + 1);
    assert!(said.contains(&located), "{said}");
    // Process 1's worker read that row: its stop reached process 0 through the dataflow.
    let said1 = String::from_utf8_lossy(&o1.stderr);
    assert!(
        said1.contains(&located),
        "process 0 read the bad row itself: {said1}"
    );
    // The log's replay stops where the run stopped, with its message and status: the stop is
    // in process 1's part, the rows after it other workers read ahead are not replayed.
    let replayed = run(&["replay", &spec, &log, "--output", "csv"]);
    assert_eq!(replayed.status.code(), Some(4));
    assert!(
        replayed.stdout == one.stdout,
        "the replay of a stopped run differs"
    );
    assert!(String::from_utf8_lossy(&replayed.stderr).contains(&located));
    // A process holding another file at the same (relative) path is refused before anything
    // is read: each process runs in a directory of its own.
    let differs = [
        "run",
        &spec,
        "--input",
        "trace.jsonl",
        "--key",
        "host",
        "--quiet",
        "--input-on-every-process",
    ];
    let started = |index: usize, rows: usize| {
        let cwd = dir.join(format!("p{index}"));
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(cwd.join("trace.jsonl"), trace(rows, 3)).unwrap();
        process_in(Some(&cwd), index, &hosts, &differs)
    };
    let p1 = started(1, 60);
    let p0 = started(0, 50);
    let (o0, o1) = (
        wait(p0, Duration::from_secs(120)),
        wait(p1, Duration::from_secs(120)),
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o0.stderr),
        String::from_utf8_lossy(&o1.stderr)
    );
    assert!(!o0.status.success() && !o1.status.success(), "{said}");
    assert!(said.contains("the input on every process"), "{said}");
}

/// `--summary` of a run of two processes counts every process's steps and ticks, as the
/// single-process summary does. It counted process 0's workers' only (process 1's went
/// nowhere: a worker's counts reached its own process alone), so about half the steps.
#[test]
fn a_summary_of_two_processes_counts_both_processes_steps_and_ticks() {
    let dir = test_dir("scale", "processes_summary");
    let (spec, input) = heartbeats(&dir);
    let args = [
        "run",
        &spec,
        "--input",
        &input,
        "--key",
        "host",
        "--time",
        "ts",
        "--summary",
        "--output-file",
        "/dev/null",
    ];
    // The summary's lines but its rate.
    let summary = |o: &Output| -> Vec<String> {
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        (err.lines())
            .filter(|l| l.starts_with("summary:") && !l.ends_with("rows/s"))
            .map(str::to_string)
            .collect()
    };
    let want = summary(&run(&args));
    assert_eq!(
        want[0], "summary: 2000 rows read, 2000 steps evaluated, 0 malformed rows skipped",
        "{want:?}"
    );
    assert!(
        want.iter()
            .any(|l| l.contains("sources merged") && !l.ends_with("; 0 ticks"))
    );
    let (o0, _) = run_two(&hostfile(&dir), &args);
    assert_eq!(summary(&o0), want);
    // `--stats`: process 0 has every worker's counters, and says the run's totals.
    let stats = [&args[..], &["--stats"]].concat();
    let (o0, o1) = run_two(&hostfile(&dir), &stats);
    let (err0, err1) = (
        String::from_utf8_lossy(&o0.stderr),
        String::from_utf8_lossy(&o1.stderr),
    );
    for w in 0..4 {
        assert!(err0.contains(&format!("worker {w} of 4:")), "{err0}");
    }
    assert!(
        err0.contains("the run: ") && err0.contains("live over 4 workers"),
        "{err0}"
    );
    assert!(
        err1.contains("process 1: its workers' counters are in process 0's --stats"),
        "{err1}"
    );
}

/// The newest complete checkpoint's directory in `dir`, if one is complete.
pub(crate) fn complete_checkpoint(dir: &Path) -> Option<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("commit.ck").exists())
        .max()
}

#[test]
fn a_killed_process_ends_the_run_and_resume_continues_exactly() {
    killed_process_resumes("kill", SPEC, &[], "2000");
}

/// Issue 35: the same under the wall clock (its checkpoints were refused when scaled). With
/// `--time` and an idle timeout longer than the run the rows keep their own times, so the run
/// is deterministic: every key ticks on the run's ticks, and the resumed two processes give
/// the single-process output.
#[test]
fn a_killed_process_under_the_wall_clock_resumes_exactly() {
    let spec = format!("{SPEC}out beat: Int @ 10s\nbeat = default(beat[1], 0) + 1\n");
    let extra = ["--time", "ts", "--clock", "wall", "--idle-timeout", "600"];
    // A checkpoint every 300 s of the trace's time: about every 900 rows.
    killed_process_resumes("kill_wall", &spec, &extra, "300");
}

/// Two processes over a FIFO with checkpoints (`--checkpoint-every every`), process 1 killed
/// past the second checkpoint, both resumed over the whole trace: the output is the
/// single-process run's (with `extra`).
fn killed_process_resumes(test: &str, spec: &str, extra: &[&str], every: &str) {
    let dir = test_dir("scale", test);
    let spec = write(&dir, "spec.dsrv", spec);
    let text = trace(40_000, 400);
    let input = write(&dir, "trace.jsonl", &text);
    let (want, _) = single(&dir, &spec, &input, extra);
    let hosts = hostfile(&dir);
    let ck = dir.join("ck").to_str().unwrap().to_string();
    let out = dir.join("p.out").to_str().unwrap().to_string();
    // Process 0 reads a FIFO the test feeds, so that the run is surely in
    // the middle of the trace when process 1 is killed.
    let fifo = dir.join("live.jsonl");
    crate::support::mkfifo(&fifo);
    let fifo = fifo.to_str().unwrap().to_string();
    let common = |input: &str| -> Vec<String> {
        [
            "run",
            &spec,
            "--input",
            input,
            "--format",
            "jsonl",
            "--key",
            "host",
            "--output-file",
            &out,
        ]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
    };
    let mut first: Vec<String> = common(&fifo);
    first.extend(["--checkpoint", &ck, "--checkpoint-every", every].map(String::from));
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let mut p1 = process(1, &hosts, &first);
    let p0 = process(0, &hosts, &first);
    let mut feeder = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let half: String = text
        .lines()
        .take(10_000)
        .map(|l| format!("{l}\n"))
        .collect();
    std::io::Write::write_all(&mut feeder, half.as_bytes()).unwrap();
    // Wait for a checkpoint past the first one to be complete.
    let start = Instant::now();
    let mut first_taken = None;
    let taken = loop {
        if let Some(c) = complete_checkpoint(Path::new(&ck)) {
            match &first_taken {
                None => first_taken = Some(c),
                Some(f) if *f != c => break c,
                Some(_) => {}
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no checkpoint completed"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // SIGKILL process 1: process 0 ends with an error (the FIFO still open:
    // it must not hang waiting for rows).
    p1.kill().unwrap();
    let _ = p1.wait();
    let o0 = wait(p0, Duration::from_secs(60));
    drop(feeder);
    assert!(!o0.status.success());
    let stderr = String::from_utf8_lossy(&o0.stderr);
    assert!(
        stderr.contains("the computation failed in process 0") && stderr.contains("--resume"),
        "{stderr}"
    );
    assert!(complete_checkpoint(Path::new(&ck)).is_some_and(|c| c >= taken));
    // Both restart from the checkpoint, over the whole trace, kept as a regular file at the
    // FIFO's path: the resume drops the rows the checkpoint had taken of the stream, as a
    // single-process resume does.
    std::fs::remove_file(&fifo).unwrap();
    std::fs::copy(&input, &fifo).unwrap();
    let mut again: Vec<String> = common(&fifo);
    again.extend(["--checkpoint", &ck, "--resume", &ck].map(String::from));
    let again: Vec<&str> = again.iter().map(String::as_str).collect();
    run_two(&hosts, &again);
    assert!(
        read(&out) == want,
        "the resumed output differs from an uninterrupted run"
    );
}

/// `vigil run SPEC --input INPUT --key host --workers 2` and `extra`.
/// A regression test: a peer killed while process 0 streams rows to it once made process 0
/// abort (`panic in a destructor during cleanup`, no report) instead of failing. Timely's
/// destructors, run while a worker unwound from the lost connection, flushed what they held
/// into the poisoned queues and panicked again. The kill lands at a different point of the
/// stream in each round; every round must end with the run's report and its rows so far.
#[test]
fn a_peer_killed_while_rows_stream_ends_the_run_with_its_report() {
    let dir = test_dir("scale", "killstream");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let text = trace(60_000, 400);
    let input = write(&dir, "trace.jsonl", &text);
    let (want, _) = single(&dir, &spec, &input, &[]);
    let mut landed = 0;
    for round in 0..6u64 {
        let hosts = hostfile(&dir);
        let out = dir.join(format!("p{round}.out"));
        let fifo = dir.join(format!("live{round}.jsonl"));
        crate::support::mkfifo(&fifo);
        let (out, fifo) = (out.to_str().unwrap(), fifo.to_str().unwrap());
        let args = [
            "run",
            &spec,
            "--input",
            fifo,
            "--format",
            "jsonl",
            "--key",
            "host",
            "--output-file",
            out,
        ];
        let mut p1 = process(1, &hosts, &args);
        let p0 = process(0, &hosts, &args);
        // The rows go in as fast as process 0 takes them, from a thread that stops at the
        // first failed write (process 0 gone).
        let feeder = {
            let (fifo, text) = (fifo.to_string(), text.clone());
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
                for chunk in text.as_bytes().chunks(4096) {
                    if std::io::Write::write_all(&mut f, chunk).is_err() {
                        return;
                    }
                }
            })
        };
        let start = Instant::now();
        while std::fs::metadata(out).map_or(0, |m| m.len()) == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no row was written"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(round * 23));
        p1.kill().unwrap();
        let _ = p1.wait();
        let o0 = wait(p0, Duration::from_secs(60));
        feeder.join().unwrap();
        let stderr = String::from_utf8_lossy(&o0.stderr);
        if o0.status.success() {
            // The stream ended before the kill landed: nothing to see in this round.
            assert_eq!(read(out), want);
            continue;
        }
        landed += 1;
        assert_eq!(o0.status.code(), Some(1), "round {round}: {stderr}");
        assert!(
            stderr.contains("the computation failed in process 0") && !stderr.contains("panic"),
            "round {round}: {stderr}"
        );
        let got = read(out);
        assert!(
            want.starts_with(&got) && (got.is_empty() || got.ends_with('\n')),
            "round {round}: the rows written are not whole rows of the uninterrupted run"
        );
    }
    // Most kills land while the rows stream (the test means nothing otherwise).
    assert!(landed >= 4, "only {landed} of 6 kills landed mid-stream");
}

/// A scaled run that checkpoints reads its file in parts of lines, a whole fraction of
/// `--checkpoint-every`, the reader of each part a barrier falls at sending it at its start. SIGKILLs after a checkpoint and resumes
/// give the uninterrupted single-process output and alerts, each resume reading only the
/// parts after its checkpoint, and a replay log in parts (each cut back to the checkpoint
/// when resumed) that replays to them. (Such a run was read by process 0's feed alone.)
#[test]
fn a_checkpointed_run_reads_its_file_in_parts_and_resumes_exactly() {
    let dir = test_dir("scale", "ck_parts");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let rows = 150_000;
    let input = write(&dir, "trace.jsonl", trace(rows, 300));
    let (want, want_alerts) = single(&dir, &spec, &input, &[]);
    let ck = dir.join("ck").to_str().unwrap().to_string();
    let out = dir.join("p.out").to_str().unwrap().to_string();
    let alerts = dir.join("p.alerts").to_str().unwrap().to_string();
    let log = dir.join("run.log").to_str().unwrap().to_string();
    let args = |resume: bool, record: bool| -> Vec<String> {
        let mut a: Vec<String> = [
            "run",
            &spec,
            "--input",
            &input,
            "--key",
            "host",
            "--workers",
            "2",
            "--output-file",
            &out,
            "--alerts",
            &alerts,
            "--checkpoint",
            &ck,
            // (Parts of a fraction of the period, 9,375 lines, a barrier every 4: the
            // readers then have parts enough to take turns.)
            "--checkpoint-every",
            "40000",
            "--stats",
        ]
        .map(String::from)
        .to_vec();
        if record {
            a.extend(["--record".to_string(), log.clone()]);
        }
        if resume {
            a.extend(["--resume".to_string(), ck.clone()]);
        }
        a
    };
    let (mut landed, mut resumed) = (0, false);
    let done = loop {
        let a = args(resumed, true);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let mut child = crate::support::vigil()
            .args(&a)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Killed once a checkpoint later than the one it started from is complete.
        let before = complete_checkpoint(Path::new(&ck));
        let start = Instant::now();
        let mut killed = false;
        while child.try_wait().unwrap().is_none() {
            let now = complete_checkpoint(Path::new(&ck));
            if landed < 3 && now.is_some() && now != before {
                child.kill().unwrap();
                killed = true;
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(120), "the run hangs");
            std::thread::sleep(Duration::from_millis(5));
        }
        let o = child.wait_with_output().unwrap();
        if killed && !o.status.success() {
            landed += 1;
            resumed = true;
            continue;
        }
        break o;
    };
    let said = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{said}");
    assert!(landed >= 2, "only {landed} kills landed before the end");
    assert!(
        said.contains("the trace read in"),
        "not read in parts: {said}"
    );
    // The last resume read the rows after its checkpoint only.
    let read_rows: usize = said
        .split("process 0: ")
        .nth(2)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no row count in {said}"));
    assert!(read_rows < rows, "{said}");
    assert!(read(&out) == want, "the resumed output differs");
    assert!(read(&alerts) == want_alerts, "the resumed alerts differ");
    let replayed = run(&["replay", &spec, &log]);
    assert!(
        replayed.stdout == want.as_bytes(),
        "the log's replay differs"
    );
    // A resume that would drop the log is refused.
    let a = args(true, false);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let refused = run(&a);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("it was taken with --record"), "{said}");
}

fn scaled(spec: &str, input: &str, extra: &[&str]) -> Output {
    keyed(spec, input, &[&["--workers", "2"], extra].concat())
}

/// `vigil run SPEC --input INPUT --key host` and `extra`.
fn keyed(spec: &str, input: &str, extra: &[&str]) -> Output {
    let mut args = vec!["run", spec, "--input", input, "--key", "host"];
    args.extend(extra);
    run(&args)
}

#[test]
fn errors_in_a_scaled_run_are_reported_after_the_rows_before_them() {
    let dir = test_dir("scale", "errors");
    let spec = write(
        &dir,
        "spec.dsrv",
        "in host: Str\nin x: Int\nout q: Int\nq = 100 / x\n",
    );
    // A malformed row stops the run (status 4) after the rows before it; a
    // division by zero stops its key only (status 3).
    let input = write(
        &dir,
        "t.jsonl",
        "{\"host\":\"a\",\"x\":5}\n{\"host\":\"b\",\"x\":0}\n{\"host\":\"a\",\"x\":2}\n{\"host\":\"b\",\"x\":4}\n",
    );
    let o = scaled(&spec, &input, &[]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "q{host=a}[0] = Int(20)\nq{host=a}[1] = Int(50)\n"
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("(host=b); its later rows are not evaluated"),
        "{stderr}"
    );
    let bad = write(
        &dir,
        "bad.jsonl",
        "{\"host\":\"a\",\"x\":5}\n{\"x\":1}\n{\"host\":\"a\",\"x\":2}\n",
    );
    let o = scaled(&spec, &bad, &[]);
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "q{host=a}[0] = Int(20)\n"
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("bad.jsonl:2:1: the key input `host` is absent"),
        "{stderr}"
    );
    // --on-malformed warn drops the row with the single-process warning.
    let o = scaled(&spec, &bad, &["--on-malformed", "warn"]);
    assert_eq!(o.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.starts_with(&format!(
            "warning: {bad}:2:1: the key input `host` is absent"
        )),
        "{stderr}"
    );
    // --fail-on-trigger counts the firings the writer wrote.
    let trig = write(
        &dir,
        "trig.dsrv",
        "in host: Str\nin x: Int\nout big: Bool\nbig = x > 3\ntrigger big \"{host} is big\"\n",
    );
    let o = scaled(&trig, &input, &["--quiet", "--fail-on-trigger"]);
    assert_eq!(o.status.code(), Some(5));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.ends_with("error: 2 trigger firings (--fail-on-trigger)\n"),
        "{stderr}"
    );
    // Without --key a scaled run is refused.
    let o = run(&["run", &spec, "--input", &input, "--workers", "2"]);
    assert_eq!(o.status.code(), Some(1));
}

/// The library's fragment inside a user's own timely computation: two
/// worker threads, rows sent by worker 0, each key's outputs exactly those
/// of one `KeyedMonitor` over the same rows.
#[test]
fn the_fragment_embeds_in_a_users_timely_dataflow() {
    use std::sync::{Arc, Mutex};
    use timely::dataflow::InputHandle;
    use timely::dataflow::operators::generic::operator::Operator;
    use vigil::scale::{Evaluated, Event, StampedRow, key_cmp, keyed_monitors};
    use vigil::{KeyedMonitor, Sample, Spec, Value};

    let spec = Spec::parse("spec.dsrv", SPEC).unwrap();
    let rows: Vec<Vec<Option<Value>>> = trace(5_000, 50)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            vec![
                Some(Value::from(v["host"].as_str().unwrap())),
                Some(Value::Float(v["temp"].as_f64().unwrap())),
                Some(Value::Int(v["ts"].as_i64().unwrap())),
            ]
        })
        .collect();
    // The reference: one monitor, every row in order.
    let mut single = KeyedMonitor::builder(&spec, "host").build().unwrap();
    let mut want: Vec<(Value, u64, Vec<Sample>)> = rows
        .iter()
        .map(|r| {
            let o = single.step(r).unwrap();
            (o.key().unwrap().value().clone(), o.step(), o.to_vec())
        })
        .collect();

    type Seen = Vec<(Value, u64, Vec<Sample>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let shared = Arc::new((spec, rows));
    {
        let seen = Arc::clone(&seen);
        let shared = Arc::clone(&shared);
        timely::execute(timely::Config::process(2), move |worker| {
            let (spec, rows) = &*shared;
            let mut input =
                InputHandle::<u64, timely::container::CapacityContainerBuilder<Vec<Event>>>::new();
            let seen = Arc::clone(&seen);
            worker.dataflow(|scope| {
                let events = timely::dataflow::operators::Input::input_from(&scope, &mut input);
                let key_index = 0;
                let outputs = keyed_monitors(
                    events,
                    key_index,
                    |_worker| KeyedMonitor::builder(spec, "host").build().unwrap(),
                    |_time, _worker, _monitor| {},
                    |evaluated, out: &mut Vec<(Value, u64, Vec<Sample>)>| {
                        if let Evaluated::Row { row, result, .. } = evaluated {
                            let o = result.unwrap();
                            out.push((row.cells[0].clone().unwrap(), o.step(), o.to_vec()));
                        }
                    },
                );
                outputs.sink(
                    timely::dataflow::channels::pact::Pipeline,
                    "Collect",
                    move |(input, _)| {
                        input.for_each(|_, data| seen.lock().unwrap().append(data));
                    },
                );
            });
            if worker.index() == 0 {
                for (i, r) in rows.iter().enumerate() {
                    // Ten rows per timestamp: a time completes when the
                    // input moves past it.
                    let t = (i / 10) as u64;
                    input.advance_to(t);
                    input.send(Event::Row(StampedRow::new(t, i as u64, None, r.clone())));
                }
            }
        })
        .unwrap();
    }
    let mut seen = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(seen.len(), want.len());
    // Per key, in step order: the same outputs.
    want.sort_by(|a, b| key_cmp(&a.0, &b.0).then(a.1.cmp(&b.1)));
    seen.sort_by(|a, b| key_cmp(&a.0, &b.0).then(a.1.cmp(&b.1)));
    assert!(
        seen == want,
        "the fragment's outputs differ from one KeyedMonitor's"
    );
}

#[test]
fn unordered_output_has_the_same_lines_and_timed_checkpoints_resume() {
    let dir = test_dir("scale", "unordered");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "trace.jsonl", trace(20_000, 200));
    let (want, _) = single(&dir, &spec, &input, &[]);
    let o = run(&[
        "run",
        &spec,
        "--input",
        &input,
        "--key",
        "host",
        "--workers",
        "2",
        "--unordered",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let sorted = |text: &str| {
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        lines.join("\n")
    };
    assert_eq!(sorted(&String::from_utf8(o.stdout).unwrap()), sorted(&want));
    // --unordered cannot checkpoint: there is no one output to measure.
    let o = run(&[
        "run",
        &spec,
        "--input",
        &input,
        "--key",
        "host",
        "--workers",
        "2",
        "--unordered",
        "--checkpoint",
        "ck",
    ]);
    assert_eq!(o.status.code(), Some(1));

    // With --time, --checkpoint-every counts time units (here 1,000 s of
    // `ts`, three rows a second): a run, then a resume from its last
    // checkpoint, writes the uninterrupted output.
    let (want, _) = single(&dir, &spec, &input, &["--time", "ts", "--output", "csv"]);
    let ck = dir.join("ck").to_str().unwrap().to_string();
    let out = dir.join("timed.csv").to_str().unwrap().to_string();
    let args = [
        "run",
        &spec,
        "--input",
        &input,
        "--key",
        "host",
        "--time",
        "ts",
        "--output",
        "csv",
        "--workers",
        "2",
        "--output-file",
        &out,
        "--checkpoint",
        &ck,
        "--checkpoint-every",
        "1000",
    ];
    // A stale checkpoint of a later time, left by an earlier run, is
    // cleared by a fresh run (a resume would otherwise pick it).
    let stale = Path::new(&ck).join("ck-18000000000000000000");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("commit.ck"), "stale").unwrap();
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(read(&out) == want);
    assert!(!stale.exists());
    let last = complete_checkpoint(Path::new(&ck)).expect("a checkpoint is complete");
    // Issue 35: every file of a scaled run's checkpoint is in the checkpoint
    // format of a single-process run, read by the same library call.
    let commit = last.join("commit.ck");
    let record = Checkpoint::read(commit.to_str().unwrap()).unwrap();
    let Some(Shard {
        barrier,
        part: Part::Commit(committed),
    }) = record.shard().cloned()
    else {
        panic!("not a commit record: {:?}", record.shard());
    };
    assert_eq!((barrier.workers, barrier.key.as_str()), (2, "host"));
    for w in 0..2 {
        let file = barrier::worker_file(&last, w);
        let worker = Checkpoint::read(file.to_str().unwrap()).unwrap();
        let part = worker.shard().map(|s| (&s.barrier, &s.part));
        assert_eq!(part, Some((&barrier, &Part::Worker(w))));
        // Nor does a single-process run take one worker's part for its own.
        let err = worker.check_plain(&input, TraceFormat::Csv).unwrap_err();
        assert!(
            err.contains("part of a checkpoint of a run on 2 workers"),
            "{err}"
        );
    }
    // Cut the output short, as a crash after the checkpoint would leave it.
    let len = std::fs::metadata(&out).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&out)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let mut resume = args.to_vec();
    resume.extend(["--resume", &ck]);
    let o = run(&resume);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(read(&out) == want, "the resumed timed output differs");
    // The commit record says where process 0's source stood, as a single-process checkpoint
    // does: the resume reopens the file there.
    assert_eq!(record.sources(), 1);
    let at = record.at(0);
    assert!(
        at.rows > 0 && at.at.position.is_some_and(|p| p.offset > 0),
        "{at:?}"
    );
    // Nor can another trace at its path: one early row changed.
    let text = read(&input);
    let refused_if_changed = |message: &str| {
        std::fs::write(&input, text.replacen("\"temp\":", "\"temp\":1", 1)).unwrap();
        let o = run(&resume);
        std::fs::write(&input, &text).unwrap();
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(message), "{err}");
    };
    refused_if_changed("differs from the trace the checkpoint was taken on");
    // A commit record an earlier vigil wrote has no positions: its resume reads the trace
    // again from its start, skips the rows before the barrier and checks their digest.
    barrier::write_commit(
        &last,
        "spec",
        OutputFormat::Csv,
        &barrier,
        committed.clone(),
        None,
    )
    .unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&out)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let o = run(&resume);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        read(&out) == want,
        "the resumed output of an older record differs"
    );
    refused_if_changed("differs from the one the checkpoint was taken on");
    // Another worker count cannot resume it.
    let mut other = resume.clone();
    let w = other.iter().position(|a| *a == "--workers").unwrap();
    other[w + 1] = "3";
    let o = run(&other);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("it was taken by 2 workers, and this run has 3"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Issue 35: keys are routed by a hash fixed by its specification and
    // named in the checkpoint; one routed by another is refused, as is a
    // checkpoint of the format that routed by `std`'s `DefaultHasher`.
    assert_eq!(barrier.route_hash, "xxh3-64/vigil-value-1");
    let other_hash = barrier::Barrier {
        route_hash: "siphash-1-3/std".into(),
        ..barrier.clone()
    };
    barrier::write_commit(
        &last,
        "spec",
        OutputFormat::Csv,
        &other_hash,
        committed,
        None,
    )
    .unwrap();
    let o = run(&resume);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("its keys were routed to the workers by `siphash-1-3/std`, and this vigil routes by `xxh3-64/vigil-value-1`"),
        "{err}"
    );
    // The format before it: a JSON `COMPLETE` record beside `.snap` files.
    std::fs::remove_file(&commit).unwrap();
    std::fs::write(last.join("COMPLETE"), "{\"vigil_scale_checkpoint\":1}").unwrap();
    let o = run(&resume);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("was written by an earlier vigil, in a format this one does not read"),
        "{err}"
    );
}

/// A closed output pipe ends a scaled run quietly (status 0) and stops
/// its reading, even of an endless input.
#[test]
fn a_closed_pipe_ends_a_scaled_run() {
    let dir = test_dir("scale", "pipe");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let bin = env!("CARGO_BIN_EXE_vigil");
    let out = crate::support::bash(&format!(
        "yes '{{\"host\":\"a\",\"temp\":31.0,\"ts\":1}}' | timeout 60 {bin} run {spec} --input - --key host --workers 2 | head -3; echo \"status ${{PIPESTATUS[1]}}\""
    ));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("n{host=a}[0] = Int(1)\n"), "{text}");
    assert!(text.ends_with("status 0\n"), "{text}");
}

/// One evaluated row: its key, its key's step (or the row's position, for a
/// row that raised an error) and its outputs or error.
type Evaluations = Vec<(i64, u64, Result<Vec<vigil::Sample>, String>)>;

/// Runs `rows[from..]` (each `(position, cells)`) through the fragment on
/// two workers, with a barrier before position `barrier`; each worker's
/// monitor is `monitors[w]`. Returns what was evaluated and each worker's
/// snapshot at the barrier.
fn fragment_run(
    monitors: Vec<vigil::KeyedMonitor>,
    rows: Vec<(u64, Vec<Option<vigil::Value>>)>,
    barrier: Option<u64>,
    key_index: usize,
) -> (Evaluations, Vec<Option<vigil::KeyedSnapshot>>) {
    use std::sync::{Arc, Mutex};
    use timely::dataflow::InputHandle;
    use timely::dataflow::operators::generic::operator::Operator;
    use vigil::scale::{Evaluated, Event, StampedRow, keyed_monitors};
    use vigil::{StepError, Value};
    let seen: Arc<Mutex<Evaluations>> = Arc::default();
    let snapshots: Arc<Mutex<Vec<Option<vigil::KeyedSnapshot>>>> =
        Arc::new(Mutex::new(vec![None, None]));
    let monitors = Arc::new(Mutex::new(
        monitors.into_iter().map(Some).collect::<Vec<_>>(),
    ));
    let rows = Arc::new(rows);
    {
        let (seen, snapshots) = (Arc::clone(&seen), Arc::clone(&snapshots));
        timely::execute(timely::Config::process(2), move |worker| {
            let index = worker.index();
            let monitor = monitors.lock().unwrap()[index].take().unwrap();
            let mut input =
                InputHandle::<u64, timely::container::CapacityContainerBuilder<Vec<Event>>>::new();
            let (seen, snapshots) = (Arc::clone(&seen), Arc::clone(&snapshots));
            worker.dataflow(|scope| {
                let events = timely::dataflow::operators::Input::input_from(&scope, &mut input);
                keyed_monitors(
                    events,
                    key_index,
                    move |_| monitor,
                    move |_time, w, m| snapshots.lock().unwrap()[w as usize] = Some(m.snapshot()),
                    move |e, out: &mut Evaluations| {
                        if let Evaluated::Row { row, result } = e {
                            let Some(Value::Int(k)) = row.cells[key_index] else {
                                unreachable!("keys are Ints")
                            };
                            out.push(match result {
                                Ok(o) => (k, o.step(), Ok(o.to_vec())),
                                Err(StepError::Runtime(e)) => (k, row.seq, Err(e.to_string())),
                                Err(StepError::Row(e)) => {
                                    panic!("a generated row was rejected: {e}")
                                }
                            });
                        }
                    },
                )
                .sink(
                    timely::dataflow::channels::pact::Pipeline,
                    "Collect",
                    move |(input, _)| input.for_each(|_, d| seen.lock().unwrap().append(d)),
                );
            });
            if index == 0 {
                for (pos, cells) in rows.iter() {
                    // Two rows per timestamp, so rows of one time are taken
                    // in position order too.
                    let t = pos / 2;
                    if barrier == Some(*pos) {
                        input.advance_to(t);
                        for w in 0..2 {
                            input.send(Event::Barrier {
                                time: t,
                                worker: w,
                                token: 0,
                            });
                        }
                    }
                    input.advance_to(t);
                    input.send(Event::Row(StampedRow::new(t, *pos, None, cells.clone())));
                }
            }
        })
        .unwrap();
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let snapshots = std::mem::take(&mut *snapshots.lock().unwrap());
    (seen, snapshots)
}

/// Generated specs keyed by an appended Int input over generated traces:
/// the fragment on two workers, stopped at a barrier and continued from the
/// workers' snapshots by shared monitors, evaluates every key's rows as one
/// `KeyedMonitor` does (outputs, steps and runtime errors).
#[test]
fn the_fragment_with_a_barrier_and_a_resume_equals_one_keyed_monitor() {
    use crate::props::{case_strategy, generate_keyable_spec, generate_trace};
    use proptest::strategy::{Strategy, ValueTree};
    use vigil::{KeyedMonitor, Spec, StepError, Value};
    let mut runner = proptest::test_runner::TestRunner::default();
    let (mut cases, mut both_halves, mut two_workers_busy, mut errors) = (0, 0, 0, 0);
    for _ in 0..48 {
        let (data, pick) = (case_strategy(), proptest::num::u32::ANY)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let (spec_data, len, trace_data) = data;
        let g = generate_keyable_spec(&spec_data, true);
        let Ok(spec) = Spec::parse("gen.dsrv", &format!("{}in kk: Int\n", g.source)) else {
            continue;
        };
        let mut trace = generate_trace(&g.inputs, len * 4, &trace_data, 2);
        for (r, row) in trace.iter_mut().enumerate() {
            let k = (trace_data.get(r).copied().unwrap_or(r as u32) as i64 + r as i64 / 3) % 8;
            row.push(Some(Value::Int(k)));
        }
        let key_index = trace.first().map_or(0, |r| r.len() - 1);
        cases += 1;
        // The reference: one monitor, every row in order.
        let mut one = KeyedMonitor::builder(&spec, "kk").build().unwrap();
        let mut want: Evaluations = Vec::new();
        for (r, row) in trace.iter().enumerate() {
            let Some(Value::Int(k)) = row[key_index] else {
                unreachable!()
            };
            want.push(match one.step(row) {
                Ok(o) => (k, o.step(), Ok(o.to_vec())),
                Err(StepError::Runtime(e)) => (k, r as u64, Err(e.to_string())),
                Err(StepError::Row(e)) => panic!("{e}"),
            });
        }
        errors += usize::from(want.iter().any(|w| w.2.is_err()));
        // Even: two rows share a timestamp (`fragment_run`), and a barrier
        // at a time comes before every row of it.
        let split = (pick as usize) % (trace.len() + 1) / 2 * 2;
        let rows: Vec<(u64, Vec<Option<Value>>)> = trace
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, r)| (i as u64, r))
            .collect();
        let template = KeyedMonitor::builder(&spec, "kk").build().unwrap();
        let (mut got, _) = fragment_run(
            vec![template.share(), template.share()],
            rows[..split].to_vec(),
            None,
            key_index,
        );
        // The first part ends with a barrier: run it again with the
        // barrier at `split` and the rest of the rows, keeping only the
        // snapshots, then resume from them.
        let (_, at_barrier) = fragment_run(
            vec![template.share(), template.share()],
            rows.clone(),
            Some(split as u64).filter(|&s| (s as usize) < rows.len()),
            key_index,
        );
        let resumed: Vec<KeyedMonitor> = at_barrier
            .iter()
            .map(|s| match s {
                Some(s) => template.share_restored(s).unwrap(),
                None => template.share(),
            })
            .collect();
        let (rest, _) = fragment_run(resumed, rows[split..].to_vec(), None, key_index);
        both_halves += usize::from(!got.is_empty() && !rest.is_empty());
        got.extend(rest);
        let keys_of = |w: usize| {
            want.iter()
                .filter(|e| (vigil::scale::route(&Value::Int(e.0)) % 2) as usize == w)
                .count()
        };
        two_workers_busy += usize::from(keys_of(0) > 0 && keys_of(1) > 0);
        // Runtime errors are reported for every row of a stopped key, by
        // position; outputs by (key, step).
        let sort = |v: &mut Evaluations| v.sort_by_key(|e| (e.0, e.1, e.2.is_err()));
        sort(&mut want);
        sort(&mut got);
        assert!(
            got == want,
            "the fragment differs from one monitor\nspec:\n{}\nsplit {split}",
            g.source
        );
    }
    eprintln!(
        "fragment coverage: {cases} cases, {both_halves} with rows on both sides of the barrier, {two_workers_busy} with both workers busy, {errors} with runtime errors"
    );
    assert!(cases >= 30 && both_halves >= 15 && two_workers_busy >= 15 && errors >= 1);
}

/// A small keyed spec and trace, and a hostfile, for the runs that check how
/// two processes start.
fn small_job(dir: &Path) -> (String, String, String) {
    let spec = write(
        dir,
        "spec.dsrv",
        "in host: Str\nin x: Int\nout y: Int\ny = x * 10\n",
    );
    let input = write(
        dir,
        "t.jsonl",
        "{\"host\":\"a\",\"x\":1}\n{\"host\":\"d\",\"x\":4}\n{\"host\":\"a\",\"x\":2}\n",
    );
    (spec, input, hostfile(dir))
}

/// Starts process 1 with `args1` and process 0 with `args0` (two workers
/// each) and waits for both, at most a minute.
fn start_two(hosts: &str, args0: &[&str], args1: &[&str]) -> (Output, Output) {
    let p1 = process(1, hosts, args1);
    let p0 = process(0, hosts, args0);
    (
        wait(p0, Duration::from_secs(60)),
        wait(p1, Duration::from_secs(60)),
    )
}

#[test]
fn processes_that_run_different_jobs_refuse_to_start() {
    let dir = test_dir("scale", "job");
    let (spec, input, hosts) = small_job(&dir);
    let out = write(&dir, "p.out", "kept\n");
    let base = ["run", &spec, "--input", &input, "--key", "host"];
    let mut args0 = base.to_vec();
    args0.extend(["--output", "csv", "--output-file", &out]);
    let mut args1 = base.to_vec();
    args1.extend(["--output-file", &out]);
    // Another output format: each process names the difference, both fail.
    let (o0, o1) = start_two(&hosts, &args0, &args1);
    let (e0, e1) = (
        String::from_utf8_lossy(&o0.stderr),
        String::from_utf8_lossy(&o1.stderr),
    );
    assert_eq!(o0.status.code(), Some(1), "{e0}");
    assert_eq!(o1.status.code(), Some(1), "{e1}");
    assert!(
        e0.contains("process 1 runs `--output text`, process 0 `--output csv`"),
        "{e0}"
    );
    assert!(
        e1.contains("process 0 runs `--output csv`, process 1 `--output text`"),
        "{e1}"
    );
    // Refused before anything is written: the output file is as it was.
    assert!(o0.stdout.is_empty() && o1.stdout.is_empty());
    assert_eq!(read(&out), "kept\n");

    // Another specification (the issue's `y = x * 1000`).
    let other = write(
        &dir,
        "other.dsrv",
        "in host: Str\nin x: Int\nout y: Int\ny = x * 1000\n",
    );
    let hosts = hostfile(&dir);
    let args1 = ["run", &other, "--input", &input, "--key", "host"];
    let (o0, o1) = start_two(&hosts, &base, &args1);
    let (e0, e1) = (
        String::from_utf8_lossy(&o0.stderr),
        String::from_utf8_lossy(&o1.stderr),
    );
    assert_eq!(o0.status.code(), Some(1), "{e0}");
    assert_eq!(o1.status.code(), Some(1), "{e1}");
    assert!(
        e0.contains(&format!("process 1 runs the specification `{other}`"))
            && e0.contains(&format!("process 0 the specification `{spec}`")),
        "{e0}"
    );
    assert!(e1.contains("process 0 runs the specification"), "{e1}");
    assert!(
        o0.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o0.stdout)
    );

    // An option that changes results (--time), and one that does not
    // (--tier): only the first is named.
    let hosts = hostfile(&dir);
    let mut args1 = base.to_vec();
    args1.extend(["--time", "x", "--tier", "canonical"]);
    let (o0, _) = start_two(&hosts, &base, &args1);
    let e0 = String::from_utf8_lossy(&o0.stderr);
    assert!(
        e0.contains("process 1 runs `--time x`, process 0 without `--time`")
            && !e0.contains("canonical"),
        "{e0}"
    );

    // The same job, one process on another tier, runs.
    let hosts = hostfile(&dir);
    let mut args1 = base.to_vec();
    args1.extend(["--tier", "canonical"]);
    let (o0, o1) = start_two(&hosts, &base, &args1);
    assert!(
        o0.status.success(),
        "{}",
        String::from_utf8_lossy(&o0.stderr)
    );
    assert!(
        o1.status.success(),
        "{}",
        String::from_utf8_lossy(&o1.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&o0.stdout),
        "y{host=a}[0] = Int(10)\ny{host=d}[0] = Int(40)\ny{host=a}[1] = Int(20)\n"
    );
}

#[test]
fn a_stopped_peer_ends_the_run_after_the_peer_timeout() {
    let dir = test_dir("scale", "stopped");
    let (spec, _, hosts) = small_job(&dir);
    let ck = dir.join("ck").to_str().unwrap().to_string();
    let out = dir.join("p.out").to_str().unwrap().to_string();
    // Process 0 reads a FIFO the test keeps open, so that the run is alive
    // (and idle: an idle run is not a stopped one) when process 1 stops.
    let fifo = dir.join("live.jsonl");
    crate::support::mkfifo(&fifo);
    let fifo = fifo.to_str().unwrap().to_string();
    let args = [
        "run",
        &spec,
        "--input",
        &fifo,
        "--key",
        "host",
        "--output-file",
        &out,
        "--checkpoint",
        &ck,
        "--peer-timeout",
        "1",
    ];
    let mut p1 = process(1, &hosts, &args);
    let p0 = process(0, &hosts, &args);
    // Opened without blocking, so that a process 0 that never opens it (one
    // that refused to start) fails the test instead of hanging it.
    let opening = Instant::now();
    let mut feeder = loop {
        use std::os::unix::fs::OpenOptionsExt;
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
        {
            Ok(f) => break f,
            Err(e) if opening.elapsed() < Duration::from_secs(60) => {
                assert_eq!(e.raw_os_error(), Some(libc::ENXIO), "{e}");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("process 0 did not open its input: {e}"),
        }
    };
    std::io::Write::write_all(&mut feeder, b"{\"host\":\"a\",\"x\":1}\n").unwrap();
    // The run is going once the row's output is written; then it idles for
    // longer than the peer timeout before process 1 is stopped.
    let start = Instant::now();
    while std::fs::read_to_string(&out).unwrap_or_default().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the first row was not written"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: `kill` only sends a signal to the child's pid.
    unsafe { libc::kill(p1.id() as i32, libc::SIGSTOP) };
    let stopped = Instant::now();
    let o0 = wait(p0, Duration::from_secs(30));
    let took = stopped.elapsed();
    // SAFETY: as above.
    unsafe { libc::kill(p1.id() as i32, libc::SIGCONT) };
    drop(feeder);
    let stderr = String::from_utf8_lossy(&o0.stderr);
    assert_eq!(o0.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .contains("the computation failed in process 0: process 1 sent no heartbeat for 1.0 s")
            && stderr.contains("--peer-timeout")
            && stderr.contains(&format!("--resume {ck}")),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(10), "noticed after {took:?}");
    assert_eq!(read(&out), "y{host=a}[0] = Int(10)\n");
    // Process 1, running again, finds process 0 gone and ends too.
    let p1_done = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        p1.try_wait().unwrap().is_some()
    });
    if !p1_done {
        let _ = p1.kill();
    }
    let o1 = p1.wait_with_output().unwrap();
    assert!(p1_done, "process 1 did not end once process 0 was gone");
    assert!(!o1.status.success());
}

#[test]
fn a_peer_that_never_connects_is_named_with_what_to_check() {
    let dir = test_dir("scale", "absent");
    let (spec, input, hosts) = small_job(&dir);
    let p0 = process(
        0,
        &hosts,
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--key",
            "host",
            "--connect-timeout",
            "0.5",
        ],
    );
    let o0 = wait(p0, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&o0.stderr);
    assert_eq!(o0.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("process 0 waited 0.5 s for process 1 to connect, in vain: check that it is running (--process 1, with the same --processes and hostfile)")
            && stderr.contains("--connect-timeout"),
        "{stderr}"
    );
}

#[test]
fn worker_and_process_counts_are_bounded_with_a_reason() {
    let dir = test_dir("scale", "bounds");
    let (spec, input, _) = small_job(&dir);
    let cases: [(&[&str], &str); 5] = [
        (&["--workers", "0"], "a run needs at least one worker"),
        (&["--workers", "257"], "at most 256 workers per process"),
        (
            &["--processes", "0", "--process", "0"],
            "a run needs at least one process",
        ),
        (
            &["--processes", "257", "--process", "0"],
            "at most 256 processes",
        ),
        (
            &["--workers", "64", "--processes", "17", "--process", "0"],
            "17 processes of 64 workers make 1088 workers, and a run has at most 1024",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["run", &spec, "--input", &input, "--key", "host"];
        args.extend(extra);
        let o = run(&args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {stderr}");
        assert!(stderr.contains(want), "{extra:?}: {stderr}");
        assert!(!stderr.contains("non-zero type"), "{stderr}");
    }
    // `--max-keys 0` says what is wrong and what to do, not clap's words.
    let o = run(&[
        "run",
        &spec,
        "--input",
        &input,
        "--key",
        "host",
        "--max-keys",
        "0",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("keeps at least one key live")
            && stderr.contains("leave --max-keys out")
            && !stderr.contains("non-zero type"),
        "{stderr}"
    );
}

/// Issue 35: a scaled run reads several `--input`s, merged by `--time` with
/// `--lateness` as a single-process run merges them (it was refused: one
/// trace only, no lateness), and gives the single-process output byte for
/// byte; its checkpoints resume over the same inputs.
#[test]
fn several_inputs_merge_by_time_as_a_single_process_run() {
    let dir = test_dir("scale", "several_inputs");
    let spec = write(&dir, "spec.dsrv", SPEC);
    // Two traces of one clock, every 7th row of the second one time unit
    // late (re-stamped within --lateness 1).
    let text = trace(12_000, 50);
    let (mut a, mut b) = (String::new(), String::new());
    for (i, line) in text.lines().enumerate() {
        match i % 2 {
            0 => a.push_str(&format!("{line}\n")),
            _ if i % 7 == 1 && i > 10 => {
                let late = line.replace("\"ts\":", "\"late\":");
                let ts: i64 = line
                    .rsplit(':')
                    .next()
                    .unwrap()
                    .trim_end_matches('}')
                    .parse()
                    .unwrap();
                b.push_str(&format!(
                    "{},\"ts\":{}}}\n",
                    &late[..late.len() - 1],
                    ts - 1
                ));
            }
            _ => b.push_str(&format!("{line}\n")),
        }
    }
    let a = write(&dir, "a.jsonl", a);
    let b = write(&dir, "b.jsonl", b);
    let base = [
        "run",
        &spec,
        "--input",
        &a,
        "--input",
        &b,
        "--key",
        "host",
        "--time",
        "ts",
        "--lateness",
        "1",
        "--output",
        "csv",
    ];
    let single = run(&base);
    assert!(
        single.status.success(),
        "{}",
        String::from_utf8_lossy(&single.stderr)
    );
    let want = String::from_utf8(single.stdout).unwrap();
    assert!(
        String::from_utf8_lossy(&single.stderr).contains("re-stamped"),
        "the trace has no late row"
    );
    for workers in ["1", "3"] {
        let o = run(&[&base[..], &["--workers", workers]].concat());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            String::from_utf8(o.stdout).unwrap() == want,
            "{workers} workers: not the single-process output"
        );
    }
    // Checkpointed, then resumed from the last complete checkpoint with the
    // output cut back as a crash would leave it.
    let ck = dir.join("ck").to_str().unwrap().to_string();
    let out = dir.join("out.csv").to_str().unwrap().to_string();
    let args = [
        &base[..],
        &[
            "--workers",
            "2",
            "--output-file",
            &out,
            "--checkpoint",
            &ck,
            "--checkpoint-every",
            "500",
        ],
    ]
    .concat();
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(read(&out) == want);
    let len = std::fs::metadata(&out).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&out)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let o = run(&[&args[..], &["--resume", &ck]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(read(&out) == want, "the resumed output differs");
}

/// Issue 35: `--record` works with `--workers` (it was refused): process 0
/// logs the feed's steps, and `vigil replay` of the log gives the scaled
/// run's output byte for byte.
#[test]
fn a_scaled_run_records_a_log_that_replays_to_its_output() {
    let dir = test_dir("scale", "record");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "trace.jsonl", trace(6_000, 40));
    let log = dir.join("run.log").to_str().unwrap().to_string();
    let o = run(&[
        "run",
        &spec,
        "--input",
        &input,
        "--key",
        "host",
        "--time",
        "ts",
        "--output",
        "csv",
        "--workers",
        "2",
        "--record",
        &log,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let replayed = run(&["replay", &spec, &log, "--output", "csv"]);
    assert!(
        replayed.status.success(),
        "{}",
        String::from_utf8_lossy(&replayed.stderr)
    );
    assert!(!o.stdout.is_empty());
    assert!(
        replayed.stdout == o.stdout,
        "the replay differs from the scaled run"
    );
}

/// A scaled run that reads a file in parts (or a stream in chunks) records one log per
/// reader beside a manifest at the `--record` path, and reads in parallel while it does; the
/// manifest replays (and `--check`s) to the run's output. A part alone, or a manifest whose
/// part is missing, is refused with what to do.
#[test]
fn a_scaled_run_reading_in_parallel_records_a_log_per_reader() {
    let dir = test_dir("scale", "record_parts");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let text = trace(60_000, 40);
    let input = write(&dir, "trace.jsonl", &text);
    let (want, _) = single(&dir, &spec, &input, &[]);
    let log = dir.join("run.log").to_str().unwrap().to_string();
    let out = dir.join("run.out").to_str().unwrap().to_string();
    for (input, stdin, read_as) in [
        (input.as_str(), None, "the trace read in"),
        ("-", Some(text.as_str()), "the stream read in"),
    ] {
        let args = [
            "run",
            &spec,
            "--input",
            input,
            "--format",
            "jsonl",
            "--key",
            "host",
            "--workers",
            "2",
            "--record",
            &log,
            "--stats",
            // (To a file: a pipe would fill while the test still writes the input.)
            "--output-file",
            &out,
        ];
        let (status, _, said) = crate::support::run_vigil(&args, stdin);
        assert_eq!(status, 0, "{said}");
        assert!(said.contains(read_as), "not read in parallel: {said}");
        assert!(read(&out) == want, "{input}: the output differs");
        for w in 0..2 {
            assert!(read(&format!("{log}.w{w}")).lines().count() > 100);
        }
        let replayed = run(&["replay", &spec, &log]);
        assert!(replayed.status.success());
        assert!(
            replayed.stdout == want.as_bytes(),
            "{input}: the replay differs"
        );
        if stdin.is_none() {
            let checked = run(&["replay", &spec, &log, "--check", "--input", input]);
            let said = String::from_utf8_lossy(&checked.stderr);
            assert!(checked.status.success(), "{said}");
        }
    }
    let part = run(&["replay", &spec, &format!("{log}.w1")]);
    assert_eq!(part.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&part.stderr)
            .contains("worker 1's part of a scaled run's replay log")
    );
    std::fs::remove_file(format!("{log}.w1")).unwrap();
    let missing = run(&["replay", &spec, &log]);
    assert_eq!(missing.status.code(), Some(1));
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(
        said.contains("run.log.w1") && said.contains("gather them"),
        "{said}"
    );
}

/// Regression: a scaled run of a trace whose format its name does not tell
/// said so twice, then an empty `error: ` line (the parallel plan and the
/// feed's set-up each printed it, the second handing on an empty message).
#[test]
fn a_trace_of_unknown_format_is_said_once_when_scaled() {
    let dir = crate::support::test_dir("scale", "unknown_format");
    let spec = crate::support::write(&dir, "k.dsrv", "in x: Int\nin h: Str\nout t: Int\nt = x\n");
    let trace = crate::support::write(&dir, "rows.txt", "x,h\n1,a\n");
    for extra in [&[][..], &["--checkpoint", "ck"][..]] {
        let ck = dir.join("ck");
        let ck = ck.to_str().unwrap();
        let extra: Vec<&str> = extra
            .iter()
            .map(|a| if *a == "ck" { ck } else { a })
            .collect();
        let mut args = vec![
            "run",
            &spec,
            "--input",
            &trace,
            "--key",
            "h",
            "--workers",
            "2",
        ];
        args.extend(&extra);
        let (status, out, err) = crate::support::run_vigil(&args, None);
        assert_eq!(status, 1, "{err}");
        assert_eq!(out, "");
        assert_eq!(
            err,
            format!(
                "error: cannot tell the format of `{trace}` from its extension; pass --format tc|csv|jsonl\n"
            ),
            "{extra:?}"
        );
    }
}
