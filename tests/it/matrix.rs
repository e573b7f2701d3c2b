//! The combination matrix (issue 35, part 2): every pair of the features below runs on a
//! generated trace and is compared byte for byte with a reference run, or is refused by vigil
//! with a clear message (exit status 1) listed in [`REFUSED`].
//!
//! Each [`Feature`] edits a run description ([`Run`]: the specification, the trace, the
//! options, the transports, the orchestration); a pair composes two edits, and [`run_pair`]
//! runs the result and its reference: the plain single-threaded run of the same pair with
//! files instead of brokers, no kill, no workers or processes, on `--tier canonical` (the tested
//! run uses the default `auto`). One Redis and one MQTT broker serve the whole matrix, each pair
//! under stream and topic names of its own.
//!
//! To rerun some pairs: `VIGIL_TEST_SEED=… VIGIL_MATRIX_PAIRS=kill:record,key:window cargo
//! test --test it matrix -- --nocapture`; a failing pair's files stay in its directory, and
//! its commands are printed.

use crate::checkpoints::Rng;
use crate::live::{Broker, Live, entries, publish};
use crate::scale::{complete_checkpoint, hostfile};
use crate::support::{test_dir, vigil, write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The features, each a small edit of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Feature {
    /// `--key host`.
    Key,
    /// `--time t`, the trace split over two `--input` sources (JSON lines and CSV).
    Time2,
    /// A periodic stream counting its ticks.
    Periodic,
    /// A count window and a time window.
    Window,
    /// A trigger, and `--alerts FILE` (compared too).
    Alerts,
    /// `--checkpoint`, SIGKILL at random points, `--resume`.
    Kill,
    /// `--record LOG`; `vigil replay` of the log prints the same outputs.
    Record,
    /// `--workers 2` (implies `--key`).
    Workers2,
    /// Two processes of one worker each (implies `--key`).
    Processes2,
    /// The trace XADDed to Redis streams, read with `--input redis://…`.
    RedisSrc,
    /// The trace published to MQTT topics, read with `--input mqtt://…`.
    MqttSrc,
    /// `--output redis://…`: the entries are the reference's outputs.
    RedisSink,
    /// `--pass dc`, a field the specification does not declare.
    Pass,
    /// `--summary --stats`: the same outputs, and a summary.
    Summary,
    /// `--on-malformed skip` with malformed rows injected; the reference has none.
    Skip,
}

use Feature::*;

const FEATURES: [Feature; 15] = [
    Key, Time2, Periodic, Window, Alerts, Kill, Record, Workers2, Processes2, RedisSrc, MqttSrc,
    RedisSink, Pass, Summary, Skip,
];

/// The pairs vigil refuses, with a part of its message (exit status 1). A pair listed here
/// that runs, and a pair not listed that is refused, both fail the test.
const REFUSED: &[(Feature, Feature, &str)] = &[];

/// The pairs that are not meaningful, with the reason; they are not run.
const MEANINGLESS: &[(Feature, Feature, &str)] = &[(
    Kill,
    MqttSrc,
    "MQTT keeps no history: the messages published while the run is down are lost (docs/operations.md, \
     Live sources: a resumed MQTT source has the state it recorded and the messages from then on)",
)];

/// Pairs that fail today (product bugs, reported with a reproduction), with a part of the
/// symptom: they must keep failing this way until fixed, then leave this table.
const KNOWN_FAILURES: &[(Feature, Feature, &str)] = &[];

/// Rows in a trace.
const ROWS: usize = 3_000;
/// Rows in a trace of a pair with `kill`: enough for checkpoints every [`CHECKPOINT_EVERY`]
/// rows to let most kills land before the end.
const KILL_ROWS: usize = 20_000;
const CHECKPOINT_EVERY: &str = "100";

/// The base specification: an accumulator, a Str stream (the tail of native-whole).
const BASE: &str = "in host: Str\nin x: Int\nout total: Int\nout lbl: Str\n\
total = default(total[1], 0) + x\nlbl = if x > 5 then host ++ \"!\" else host\n";

/// Where a source's rows come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    File,
    Redis,
    Mqtt,
}

/// How the tested run is spread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spread {
    Single,
    Workers2,
    /// Two processes of this many workers each.
    Processes2 {
        workers: &'static str,
    },
}

/// A row of the generated trace; `x: None` is a malformed row (`"x": "oops"`).
#[derive(Clone, Debug)]
struct Row {
    t: u64,
    host: u64,
    x: Option<u64>,
    dc: u64,
}

/// A run description, edited by the features.
#[derive(Clone, Debug)]
struct Run {
    spec: String,
    /// The rows of each source (one, or two with `time2`), malformed ones included.
    sources: Vec<Vec<Row>>,
    /// Options of both runs.
    args: Vec<String>,
    /// Options of the tested run only.
    tested: Vec<String>,
    transport: Transport,
    redis_sink: bool,
    alerts: bool,
    record: bool,
    kill: bool,
    summary: bool,
    spread: Spread,
}

impl Feature {
    fn name(self) -> &'static str {
        match self {
            Key => "key",
            Time2 => "time2",
            Periodic => "periodic",
            Window => "window",
            Alerts => "alerts",
            Kill => "kill",
            Record => "record",
            Workers2 => "workers2",
            Processes2 => "processes2",
            RedisSrc => "redis_src",
            MqttSrc => "mqtt_src",
            RedisSink => "redis_sink",
            Pass => "pass",
            Summary => "summary",
            Skip => "skip",
        }
    }

    /// This feature's edit of `run`.
    fn edit(self, run: &mut Run, rng: &mut Rng) {
        let args = |run: &mut Run, a: &[&str]| run.args.extend(a.iter().map(|s| s.to_string()));
        let tested = |run: &mut Run, a: &[&str]| run.tested.extend(a.iter().map(|s| s.to_string()));
        match self {
            Key => {
                if !run.args.iter().any(|a| a == "--key") {
                    args(run, &["--key", "host"]);
                }
            }
            Time2 => {
                args(run, &["--time", "t"]);
                let rows = std::mem::take(&mut run.sources[0]);
                let (a, b): (Vec<Row>, Vec<Row>) =
                    rows.into_iter().partition(|_| rng.below(2) == 0);
                run.sources = vec![a, b];
            }
            Periodic => run
                .spec
                .push_str("out beat: Int @ 5s\nbeat = default(beat[1], 0) + 1\n"),
            Window => run.spec.push_str(
                "out wsum: Int\nout wavg: Float\nwsum = window(x, 10, sum)\n\
                 wavg = default(window(x, 10s, avg), 0.0)\n",
            ),
            Alerts => {
                run.spec
                    .push_str("trigger big: x > 7 \"x is {x} on {host}\"\n");
                run.alerts = true;
            }
            Kill => {
                run.kill = true;
                tested(run, &["--checkpoint-every", CHECKPOINT_EVERY]);
            }
            Record => run.record = true,
            Workers2 => {
                Key.edit(run, rng);
                run.spread = match run.spread {
                    Spread::Processes2 { .. } => Spread::Processes2 { workers: "2" },
                    _ => Spread::Workers2,
                };
            }
            Processes2 => {
                Key.edit(run, rng);
                let workers = match run.spread {
                    Spread::Workers2 => "2",
                    _ => "1",
                };
                run.spread = Spread::Processes2 { workers };
            }
            RedisSrc => run.transport = Transport::Redis,
            // With `redis_src` too, the later edit wins: one trace has one transport.
            MqttSrc => run.transport = Transport::Mqtt,
            RedisSink => run.redis_sink = true,
            Pass => args(run, &["--pass", "dc"]),
            Summary => {
                run.summary = true;
                tested(run, &["--summary", "--stats"]);
            }
            Skip => {
                tested(run, &["--on-malformed", "skip"]);
                // A few malformed rows, each at the time of the row it precedes.
                for source in &mut run.sources {
                    for _ in 0..3 {
                        let at = rng.below(source.len() as u64) as usize;
                        let mut bad = source[at].clone();
                        bad.x = None;
                        source.insert(at, bad);
                    }
                }
            }
        }
    }
}

/// A generated trace: `t` rising by 0 to 2 s, ten hosts, `x` in 0..10, an undeclared `dc`.
fn rows(rng: &mut Rng, count: usize) -> Vec<Row> {
    let mut t = 0;
    (0..count)
        .map(|_| {
            t += rng.below(3);
            Row {
                t,
                host: rng.below(10),
                x: Some(rng.below(10)),
                dc: rng.below(3),
            }
        })
        .collect()
}

fn json_line(r: &Row) -> String {
    let x = r.x.map_or("\"oops\"".to_string(), |x| x.to_string());
    format!(
        "{{\"t\":{},\"host\":\"h{}\",\"x\":{x},\"dc\":\"eu-{}\"}}\n",
        r.t, r.host, r.dc
    )
}

fn csv_line(r: &Row) -> String {
    let x = r.x.map_or("oops".to_string(), |x| x.to_string());
    format!("{},h{},{x},eu-{}\n", r.t, r.host, r.dc)
}

/// Source `i` as a file: JSON lines for the first, CSV for the second.
fn file_text(i: usize, rows: &[Row]) -> (String, String) {
    match i {
        0 => (
            "src0.jsonl".into(),
            rows.iter().map(json_line).collect::<String>(),
        ),
        _ => (
            "src1.csv".into(),
            std::iter::once("t,host,x,dc\n".to_string())
                .chain(rows.iter().map(csv_line))
                .collect(),
        ),
    }
}

/// What a pair came to.
#[derive(Debug)]
enum Outcome {
    /// Equal to the reference; a note (how many kills landed).
    Equal(String),
    Refused(String),
    Failed(String),
}

/// The brokers of the whole matrix.
struct Brokers {
    redis: Broker,
    mqtt: Broker,
}

/// One pair's files and names.
struct Pair {
    name: String,
    dir: crate::support::TestDir,
    spec: String,
    /// The commands run, for a failure's report.
    commands: Vec<String>,
}

impl Pair {
    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

fn quoted(args: &[String]) -> String {
    args.iter()
        .map(|a| match a.contains([' ', '"', '{', '}', '!']) {
            true => format!("'{a}'"),
            false => a.clone(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The reference run: files, one thread, canonical tier. Its outputs (CSV), alerts.
fn reference(pair: &mut Pair, run: &Run) -> Result<(String, String), Outcome> {
    let mut args = strings(&["run", &pair.spec]);
    for (i, rows) in run.sources.iter().enumerate() {
        let good: Vec<Row> = rows.iter().filter(|r| r.x.is_some()).cloned().collect();
        let (name, text) = file_text(i, &good);
        args.extend([
            "--input".into(),
            write(&pair.dir, &format!("ref-{name}"), text),
        ]);
    }
    args.extend(run.args.iter().cloned());
    args.extend(strings(&[
        "--tier",
        "canonical",
        "--output",
        "csv",
        "--output-file",
        &pair.path("ref.out"),
    ]));
    if run.alerts {
        args.extend(["--alerts".into(), pair.path("ref.alerts")]);
    }
    pair.commands
        .push(format!("reference: vigil {}", quoted(&args)));
    let out = vigil()
        .args(&args)
        .output()
        .map_err(|e| Outcome::Failed(format!("cannot start vigil: {e}")))?;
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    match out.status.code() {
        Some(0) => {}
        Some(1) => return Err(Outcome::Refused(format!("(the reference) {err}"))),
        code => {
            return Err(Outcome::Failed(format!(
                "the reference run ended with {code:?}: {err}"
            )));
        }
    }
    let read = |name: &str| std::fs::read_to_string(pair.dir.join(name)).unwrap_or_default();
    Ok((read("ref.out"), read("ref.alerts")))
}

/// The tested run's command lines (one per process) for round `resume`.
fn tested_args(
    pair: &Pair,
    run: &Run,
    brokers: &Brokers,
    hosts: &str,
    resume: bool,
) -> Vec<Vec<String>> {
    let mut args = strings(&["run", &pair.spec]);
    for (i, rows) in run.sources.iter().enumerate() {
        let input = match run.transport {
            Transport::File => {
                let (name, text) = file_text(i, rows);
                let path = pair.path(&name);
                if !Path::new(&path).exists() {
                    write(&pair.dir, &name, text);
                }
                path
            }
            Transport::Redis => brokers.redis.url("redis", &format!("{}-src{i}", pair.name)),
            Transport::Mqtt => brokers.mqtt.url("mqtt", &format!("{}-src{i}", pair.name)),
        };
        args.extend(["--input".into(), input]);
    }
    match run.transport {
        Transport::Redis => args.push("--drain".into()),
        Transport::Mqtt => args.extend(strings(&["--mqtt-rows", "rows"])),
        Transport::File => {}
    }
    args.extend(run.args.iter().cloned());
    args.extend(run.tested.iter().cloned());
    if run.redis_sink {
        args.extend([
            "--output".into(),
            brokers.redis.url("redis", &format!("{}-out", pair.name)),
        ]);
    } else {
        args.extend(strings(&[
            "--output",
            "csv",
            "--output-file",
            &pair.path("got.out"),
        ]));
    }
    if run.alerts {
        args.extend(["--alerts".into(), pair.path("got.alerts")]);
    }
    if run.record {
        args.extend(["--record".into(), pair.path("got.log")]);
    }
    if run.kill {
        args.extend(["--checkpoint".into(), pair.path("ck")]);
        if resume {
            args.extend(["--resume".into(), pair.path("ck")]);
        }
    }
    match run.spread {
        Spread::Single => vec![args],
        Spread::Workers2 => vec![[args, strings(&["--workers", "2"])].concat()],
        Spread::Processes2 { workers } => (0..2)
            .map(|i| {
                let p = i.to_string();
                let own = ["--workers", workers, "--processes", "2", "--process", &p];
                [args.clone(), strings(&own), strings(&["--hostfile", hosts])].concat()
            })
            .collect(),
    }
}

/// Feeds the sources to the brokers before the run (Redis keeps them).
fn feed_redis(pair: &Pair, run: &Run, brokers: &Brokers) {
    let mut con = brokers.redis.connection();
    for (i, rows) in run.sources.iter().enumerate() {
        let stream = format!("{}-src{i}", pair.name);
        let mut pipe = redis::pipe();
        pipe.cmd("DEL").arg(&stream).ignore();
        for r in rows {
            let x = r.x.map_or("oops".to_string(), |x| x.to_string());
            pipe.cmd("XADD")
                .arg(&stream)
                .arg("*")
                .arg("t")
                .arg(r.t)
                .arg("host")
                .arg(format!("h{}", r.host))
                .arg("x")
                .arg(x)
                .arg("dc")
                .arg(format!("eu-{}", r.dc))
                .ignore();
        }
        pipe.query::<()>(&mut con).expect("XADD of a source");
    }
}

/// Starts the tested run's processes (process 1 first, then process 0, which reads).
fn start(pair: &mut Pair, commands: &[Vec<String>], round: usize) -> Vec<Live> {
    let mut lives: Vec<Option<Live>> = commands.iter().map(|_| None).collect();
    for (i, args) in commands.iter().enumerate().rev() {
        pair.commands.push(format!(
            "tested (round {round}, process {i}): vigil {}",
            quoted(args)
        ));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        lives[i] = Some(Live::start(
            &args,
            &pair.dir.join(format!("stdout-{round}-{i}")),
        ));
    }
    lives.into_iter().flatten().collect()
}

/// Waits for every process; one that fails makes the others stop within a few seconds.
fn finish_all(mut lives: Vec<Live>) -> Vec<(i32, String)> {
    let start = Instant::now();
    let mut failed_at: Option<Instant> = None;
    loop {
        let mut running = 0;
        for l in &mut lives {
            match l.child.try_wait().expect("try_wait on a vigil process") {
                Some(s) if !s.success() => {
                    failed_at.get_or_insert_with(Instant::now);
                }
                Some(_) => {}
                None => running += 1,
            }
        }
        if running == 0 {
            break;
        }
        let give_up = failed_at.is_some_and(|t| t.elapsed() > Duration::from_secs(5))
            || start.elapsed() > Duration::from_secs(120);
        if give_up {
            for l in &mut lives {
                let _ = l.child.kill();
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    lives.into_iter().map(Live::finish).collect()
}

/// Publishes the MQTT sources once process 0 has subscribed to every one.
fn feed_mqtt(pair: &Pair, run: &Run, brokers: &Brokers, lives: &mut [Live]) {
    // Process 0 reads the sources.
    for _ in &run.sources {
        if !lives[0].said("subscribed to") {
            // It ended first (refused, or failed): its status tells.
            return;
        }
    }
    for (i, rows) in run.sources.iter().enumerate() {
        let lines: String = rows.iter().map(json_line).collect();
        publish(
            brokers.mqtt.port,
            &format!("{}-src{i}/rows", pair.name),
            &lines,
            true,
        );
    }
}

/// The state of the tested run's checkpoint: the file's bytes, or the newest complete
/// checkpoint directory of a scaled run.
fn checkpoint_mark(pair: &Pair, run: &Run) -> Option<Vec<u8>> {
    let ck = pair.dir.join("ck");
    match run.spread {
        Spread::Single => std::fs::read(&ck).ok().filter(|b| !b.is_empty()),
        _ => complete_checkpoint(&ck).map(|p| p.to_string_lossy().into_owned().into_bytes()),
    }
}

/// Runs the tested run (killed and resumed with `kill`); the last round's statuses and
/// standard errors, and how many kills landed before the end.
fn tested(
    pair: &mut Pair,
    run: &Run,
    brokers: &Brokers,
    rng: &mut Rng,
) -> (Vec<(i32, String)>, usize) {
    let hosts = hostfile(&pair.dir);
    if run.transport == Transport::Redis {
        feed_redis(pair, run, brokers);
    }
    if run.redis_sink {
        let _: () = redis::cmd("DEL")
            .arg(format!("{}-out", pair.name))
            .query(&mut brokers.redis.connection())
            .expect("DEL of the output stream");
    }
    let kills = if run.kill { 3 } else { 0 };
    let mut landed = 0;
    for round in 0..=kills {
        let commands = tested_args(pair, run, brokers, &hosts, round > 0);
        let mut lives = start(pair, &commands, round);
        if run.transport == Transport::Mqtt {
            feed_mqtt(pair, run, brokers, &mut lives);
        }
        if round < kills {
            let before = checkpoint_mark(pair, run);
            let started = Instant::now();
            let mut killed = false;
            while started.elapsed() < Duration::from_secs(60) {
                if lives
                    .iter_mut()
                    .any(|l| matches!(l.child.try_wait(), Ok(Some(_))))
                {
                    break;
                }
                let now = checkpoint_mark(pair, run);
                if now.is_some() && now != before {
                    std::thread::sleep(Duration::from_millis(rng.below(40)));
                    let victim = rng.below(lives.len() as u64) as usize;
                    if matches!(lives[victim].child.try_wait(), Ok(None)) {
                        let _ = lives[victim].child.kill();
                        killed = true;
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            let ends = finish_all(lives);
            if killed {
                landed += 1;
                continue;
            }
            return (ends, landed);
        }
        return (finish_all(lives), landed);
    }
    unreachable!("the last round returns")
}

/// The reference's CSV outputs as Redis entries: `seq`, then every non-empty cell.
fn csv_as_entries(csv: &str) -> Vec<Vec<(String, String)>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    lines
        .enumerate()
        .map(|(seq, line)| {
            let mut fields = vec![("seq".to_string(), seq.to_string())];
            for (name, cell) in header.iter().zip(line.split(',')) {
                if cell.is_empty() {
                    continue;
                }
                let cell = cell
                    .strip_prefix('"')
                    .and_then(|c| c.strip_suffix('"'))
                    .map_or(cell.to_string(), |c| c.replace("\"\"", "\""));
                fields.push((name.to_string(), cell));
            }
            fields
        })
        .collect()
}

/// The first line where two texts differ, for a failure's message.
fn first_difference(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    for i in 0..w.len().max(g.len()) {
        if w.get(i) != g.get(i) {
            return format!(
                "line {}: want {:?}, got {:?} ({} lines against {})",
                i + 1,
                w.get(i),
                g.get(i),
                w.len(),
                g.len()
            );
        }
    }
    "the same lines (other bytes)".into()
}

/// Runs `pair` (two features, or one twice) and its reference; what it came to.
fn run_pair(a: Feature, b: Feature, brokers: &Brokers, master: &Rng) -> (Outcome, Vec<String>) {
    let name = format!("{}-{}", a.name(), b.name());
    let salt = FEATURES.iter().position(|&f| f == a).unwrap_or(0) as u64 * 16
        + FEATURES.iter().position(|&f| f == b).unwrap_or(0) as u64;
    let mut rng = master.fork(salt + 1);
    let dir = test_dir("matrix", &name);
    let mut run = Run {
        spec: BASE.to_string(),
        sources: vec![rows(
            &mut rng,
            if a == Kill || b == Kill {
                KILL_ROWS
            } else {
                ROWS
            },
        )],
        args: Vec::new(),
        tested: Vec::new(),
        transport: Transport::File,
        redis_sink: false,
        alerts: false,
        record: false,
        kill: false,
        summary: false,
        spread: Spread::Single,
    };
    a.edit(&mut run, &mut rng);
    if b != a {
        b.edit(&mut run, &mut rng);
    }
    // Without --time a live source's rows are stamped by their arrival (MQTT) or entry ID
    // (Redis), not by their index as a file's are (docs/operations.md, "Live sources"), so the ticks of a
    // periodic stream would follow the wall clock: such a pair runs with --time t.
    if run.spec.contains(" @ ")
        && run.transport != Transport::File
        && !run.args.iter().any(|a| a == "--time")
    {
        run.args.extend(strings(&["--time", "t"]));
    }
    let spec = write(&dir, "spec.dsrv", &run.spec);
    let mut pair = Pair {
        name,
        dir,
        spec,
        commands: Vec::new(),
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        compare(&mut pair, &run, brokers, &mut rng)
    }))
    .unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Outcome::Failed(format!("the test panicked: {what}"))
    });
    (outcome, pair.commands)
}

fn compare(pair: &mut Pair, run: &Run, brokers: &Brokers, rng: &mut Rng) -> Outcome {
    let (want, want_alerts) = match reference(pair, run) {
        Ok(r) => r,
        Err(o) => return o,
    };
    if want.lines().count() < ROWS / 2 {
        return Outcome::Failed(format!(
            "the reference wrote {} lines",
            want.lines().count()
        ));
    }
    let (ends, landed) = tested(pair, run, brokers, rng);
    // Refused: status 1 with an error, before any output.
    if let Some((_, err)) = ends.iter().find(|(code, _)| *code == 1) {
        let wrote = match run.redis_sink {
            true => !entries(
                &mut brokers.redis.connection(),
                &format!("{}-out", pair.name),
            )
            .is_empty(),
            false => std::fs::metadata(pair.dir.join("got.out")).is_ok_and(|m| m.len() > 0),
        };
        return match wrote {
            false => Outcome::Refused(err.clone()),
            true => Outcome::Failed(format!("status 1 after writing outputs: {err}")),
        };
    }
    if let Some((code, err)) = ends.iter().find(|(code, _)| *code != 0) {
        return Outcome::Failed(format!("the tested run ended with status {code}: {err}"));
    }
    // Most kills must land mid-run, or the pair proves little.
    if run.kill && landed < 2 {
        return Outcome::Failed(format!("only {landed} of 3 kills landed before the end"));
    }
    if run.redis_sink {
        let got = entries(
            &mut brokers.redis.connection(),
            &format!("{}-out", pair.name),
        );
        let want = csv_as_entries(&want);
        if got != want {
            let i = (0..want.len().max(got.len()))
                .find(|&i| want.get(i) != got.get(i))
                .unwrap_or(0);
            return Outcome::Failed(format!(
                "the output stream differs: entry {i}: want {:?}, got {:?} ({} entries against {})",
                want.get(i),
                got.get(i),
                want.len(),
                got.len()
            ));
        }
    } else {
        let got = std::fs::read_to_string(pair.dir.join("got.out")).unwrap_or_default();
        if got != want {
            return Outcome::Failed(format!(
                "the outputs differ: {}",
                first_difference(&want, &got)
            ));
        }
    }
    if run.alerts {
        let got = std::fs::read_to_string(pair.dir.join("got.alerts")).unwrap_or_default();
        if want_alerts.is_empty() || got != want_alerts {
            return Outcome::Failed(format!(
                "the alerts differ: {}",
                first_difference(&want_alerts, &got)
            ));
        }
    }
    if run.record {
        let mut args = strings(&[
            "replay",
            &pair.spec,
            &pair.path("got.log"),
            "--output",
            "csv",
        ]);
        args.extend(
            run.args
                .windows(2)
                .filter(|w| w[0] == "--pass")
                .flat_map(|w| w.to_vec()),
        );
        pair.commands
            .push(format!("replay: vigil {}", quoted(&args)));
        let out = match vigil().args(&args).output() {
            Ok(o) => o,
            Err(e) => return Outcome::Failed(format!("cannot start vigil replay: {e}")),
        };
        let got = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || got != want {
            return Outcome::Failed(format!(
                "the replay differs (status {:?}): {}; {}",
                out.status.code(),
                first_difference(&want, &got),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    if run.summary && !ends[0].1.contains("summary: ") {
        return Outcome::Failed(format!("no summary: {}", ends[0].1));
    }
    Outcome::Equal(match run.kill {
        true => format!(", {landed} of 3 kills landed"),
        false => String::new(),
    })
}

fn find(
    table: &[(Feature, Feature, &'static str)],
    a: Feature,
    b: Feature,
) -> Option<&'static str> {
    table
        .iter()
        .find(|(x, y, _)| (*x, *y) == (a, b) || (*x, *y) == (b, a))
        .map(|(_, _, m)| *m)
}

#[test]
fn every_pair_of_features_equals_its_reference_or_is_refused() {
    let master = Rng::new();
    let dir = test_dir("matrix", "brokers");
    let brokers = Brokers {
        redis: Broker::redis(&dir.join("redis").tap_dir()),
        mqtt: Broker::mosquitto(&dir.join("mqtt").tap_dir()),
    };
    let only: Option<Vec<(String, String)>> = std::env::var("VIGIL_MATRIX_PAIRS").ok().map(|s| {
        s.split(',')
            .filter_map(|p| p.split_once(':'))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    });
    let started = Instant::now();
    let mut problems = Vec::new();
    let mut table = Vec::new();
    for (i, &a) in FEATURES.iter().enumerate() {
        // Each feature alone too (a, a): a failing pair then shows whether one of its
        // features fails by itself.
        for &b in &FEATURES[i..] {
            if let Some(only) = &only
                && !only.iter().any(|(x, y)| {
                    (x == a.name() && y == b.name()) || (x == b.name() && y == a.name())
                })
            {
                continue;
            }
            let name = match a == b {
                true => a.name().to_string(),
                false => format!("{} × {}", a.name(), b.name()),
            };
            if let Some(why) = find(MEANINGLESS, a, b) {
                table.push(format!("{name}: not meaningful ({why})"));
                continue;
            }
            let t = Instant::now();
            let (outcome, commands) = run_pair(a, b, &brokers, &master);
            let took = t.elapsed().as_secs_f64();
            let line = match (&outcome, find(REFUSED, a, b), find(KNOWN_FAILURES, a, b)) {
                (Outcome::Equal(note), None, None) => format!("{name}: equal{note}"),
                (Outcome::Refused(err), Some(m), _) if err.contains(m) => {
                    format!("{name}: refused ({m})")
                }
                (Outcome::Failed(s), None, Some(m)) if s.contains(m) => {
                    format!("{name}: known failure ({m})")
                }
                (outcome, refused, known) => {
                    let expected = match (refused, known) {
                        (Some(m), _) => format!("a refusal saying `{m}`"),
                        (_, Some(m)) => format!("the known failure `{m}`"),
                        _ => "equal outputs".to_string(),
                    };
                    problems.push(format!(
                        "{name}: expected {expected}, got {outcome:?}\n  {}",
                        commands.join("\n  ")
                    ));
                    format!("{name}: UNEXPECTED {outcome:?}")
                }
            };
            eprintln!("{line} [{took:.1} s]");
            table.push(line);
        }
    }
    eprintln!(
        "matrix: {} pairs in {:.0} s",
        table.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        problems.is_empty(),
        "{} pairs did not come out as expected:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Makes a directory (for a broker's files) and gives it back.
trait TapDir {
    fn tap_dir(self) -> Self;
}

impl TapDir for PathBuf {
    fn tap_dir(self) -> Self {
        std::fs::create_dir_all(&self).expect("a broker's directory");
        self
    }
}
