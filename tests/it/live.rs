//! Live transports against real brokers: a private mosquitto and redis-server per test, on free
//! loopback ports, started and stopped here (`scripts/install-brokers.sh` installs them).
//!
//! Every test compares what vigil does through a broker with `vigil run` over the same rows as a
//! file: MQTT per-input topics and row objects in, per-stream and row topics (and alerts) out, a
//! broker restart in the middle of a run, a live session recorded and replayed; Redis Streams in
//! and out with checkpoints, SIGKILLed at random points and resumed, with XREAD and with a
//! consumer group.

use crate::support::{run_vigil, test_dir, vigil, write};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// How long a step of a test may wait for a broker or for vigil.
const PATIENCE: Duration = Duration::from_secs(60);

/// A broker's program, looked for on `PATH` and in the sbin directories
/// (Debian installs mosquitto in /usr/sbin).
pub(crate) fn program(name: &str) -> PathBuf {
    let path = std::env::var("PATH").unwrap_or_default();
    let dirs = path
        .split(':')
        .map(PathBuf::from)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from));
    for dir in dirs {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "`{name}` is not installed: the live-transport tests run real brokers; run scripts/install-brokers.sh (Debian: apt-get install mosquitto mosquitto-clients redis-server redis-tools)"
    );
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16, up: bool) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() != up {
        assert!(
            start.elapsed() < PATIENCE,
            "port {port} never came {}",
            if up { "up" } else { "down" }
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A broker process of this test, killed when dropped.
pub(crate) struct Broker {
    child: Child,
    pub(crate) port: u16,
    dir: PathBuf,
}

impl Broker {
    pub(crate) fn mosquitto(dir: &Path) -> Broker {
        Broker::mosquitto_on(dir, free_port())
    }

    fn mosquitto_on(dir: &Path, port: u16) -> Broker {
        let conf = write(
            dir,
            "mosquitto.conf",
            // No bound on the messages queued for a slow subscriber:
            // mosquitto drops QoS 1 messages past its default of 1,000 (a
            // debug build on a loaded machine falls that far behind).
            format!(
                "listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\n"
            ),
        );
        Broker::mosquitto_with(dir, port, &conf)
    }

    /// A mosquitto that keeps its sessions across a restart (saved when it
    /// is stopped with SIGTERM).
    fn persistent_mosquitto_on(dir: &Path, port: u16) -> Broker {
        // Started as root, mosquitto drops to its own user, which must be
        // able to write its database.
        let db = dir.join("db");
        std::fs::create_dir_all(&db).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o777)).unwrap();
        let conf = write(
            dir,
            "mosquitto.conf",
            format!(
                "listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\nmax_queued_messages 0\npersistence_location {}/\n",
                db.display()
            ),
        );
        Broker::mosquitto_with(dir, port, &conf)
    }

    fn mosquitto_with(dir: &Path, port: u16, conf: &str) -> Broker {
        let log = std::fs::File::create(dir.join("mosquitto.log")).unwrap();
        let child = Command::new(program("mosquitto"))
            .args(["-c", conf])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        wait_for_port(port, true);
        Broker {
            child,
            port,
            dir: dir.to_path_buf(),
        }
    }

    pub(crate) fn redis(dir: &Path) -> Broker {
        Broker::redis_on(dir, free_port())
    }

    fn redis_on(dir: &Path, port: u16) -> Broker {
        Broker::redis_with(dir, port, &[])
    }

    fn redis_with(dir: &Path, port: u16, extra: &[&str]) -> Broker {
        let child = Command::new(program("redis-server"))
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(extra)
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_port(port, true);
        // The port opens before the server answers commands.
        let password = extra
            .windows(2)
            .find(|w| w[0] == "--requirepass")
            .map(|w| w[1]);
        let login = password.map_or(String::new(), |p| format!(":{p}@"));
        let client = redis::Client::open(format!("redis://{login}127.0.0.1:{port}/")).unwrap();
        let start = Instant::now();
        while client
            .get_connection()
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_err()
        {
            assert!(start.elapsed() < PATIENCE, "redis-server never answered");
            std::thread::sleep(Duration::from_millis(20));
        }
        Broker {
            child,
            port,
            dir: dir.to_path_buf(),
        }
    }

    /// Stops the broker (SIGTERM: it saves what it persists) and waits
    /// until it is gone.
    fn stop(&mut self) {
        let status = Command::new("kill")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let _ = self.child.wait();
        wait_for_port(self.port, false);
    }

    /// Kills the broker (SIGKILL) and waits until its port is closed.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        wait_for_port(self.port, false);
    }

    /// A connection to this redis-server (one without a password).
    pub(crate) fn connection(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    pub(crate) fn url(&self, scheme: &str, path: &str) -> String {
        format!("{scheme}://127.0.0.1:{}/{path}", self.port)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.dir;
    }
}

/// A vigil run in the background: its standard output goes to a file, its
/// standard error lines to a channel.
pub(crate) struct Live {
    pub(crate) child: Child,
    err: Receiver<String>,
    stderr: Vec<String>,
}

impl Live {
    pub(crate) fn start(args: &[&str], out: &Path) -> Live {
        let mut child = vigil()
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(out).unwrap())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, err) = channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Live {
            child,
            err,
            stderr: Vec::new(),
        }
    }

    /// Waits for a line of standard error containing `needle`.
    fn wait_for(&mut self, needle: &str) {
        let start = Instant::now();
        loop {
            let left = PATIENCE.saturating_sub(start.elapsed());
            match self.err.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(needle);
                    self.stderr.push(line);
                    if found {
                        return;
                    }
                }
                Err(_) => panic!(
                    "vigil never said `{needle}`; it said:\n{}",
                    self.stderr.join("\n")
                ),
            }
        }
    }

    /// Waits for a line of standard error containing `needle`, as `wait_for` does, but
    /// says `false` instead of failing when the run ends (its standard error closes) first.
    pub(crate) fn said(&mut self, needle: &str) -> bool {
        let start = Instant::now();
        while start.elapsed() < PATIENCE {
            match self.err.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    let found = line.contains(needle);
                    self.stderr.push(line);
                    if found {
                        return true;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return false,
            }
        }
        false
    }

    /// Waits for the run to end; its status and standard error.
    pub(crate) fn finish(mut self) -> (i32, String) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.stderr.extend(self.err.iter());
                return (status.code().unwrap_or(-1), self.stderr.join("\n"));
            }
            if start.elapsed() > PATIENCE {
                let _ = self.child.kill();
                self.stderr.extend(self.err.try_iter());
                panic!("vigil did not finish; it said:\n{}", self.stderr.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Live {
    /// A test that fails while its run is going leaves no vigil behind (a live source's run
    /// would wait for rows for ever).
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Publishes each line of `lines` as one message on `topic` (QoS 1), then,
/// with `end`, an empty message, which ends the topic for vigil; returns
/// once the broker has acknowledged every one. (`mosquitto_pub -l` can
/// leave its last lines unsent when its input ends.)
pub(crate) fn publish(port: u16, topic: &str, lines: &str, end: bool) {
    use rumqttc::{Client, Event, MqttOptions, Packet, QoS};
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = format!("test-{}-{n}", std::process::id());
    let (client, mut connection) = Client::new(MqttOptions::new(id, "127.0.0.1", port), 64);
    let mut messages: Vec<Vec<u8>> = lines.lines().map(|l| l.as_bytes().to_vec()).collect();
    if end {
        messages.push(Vec::new());
    }
    let count = messages.len();
    let topic = topic.to_string();
    let publisher = std::thread::spawn(move || {
        for m in messages {
            client
                .publish(topic.clone(), QoS::AtLeastOnce, false, m)
                .unwrap();
        }
        client
    });
    let mut acked = 0;
    let start = Instant::now();
    while acked < count {
        assert!(
            start.elapsed() < PATIENCE,
            "the broker acknowledged {acked} of {count}"
        );
        match connection.recv_timeout(Duration::from_secs(1)) {
            Ok(Ok(Event::Incoming(Packet::PubAck(_)))) => acked += 1,
            Ok(Ok(_)) | Err(_) => {}
            Ok(Err(e)) => panic!("publishing to port {port}: {e}"),
        }
    }
    let client = publisher.join().unwrap();
    let _ = client.disconnect();
}

/// A subscriber (rumqttc) of a topic filter, subscribed once made: the
/// messages it gets, as `topic payload` lines, in a channel. With an id,
/// its session is one the broker keeps while it is away.
struct Subscriber {
    lines: Receiver<String>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn subscribe(port: u16, filter: &str, session: Option<&str>) -> Subscriber {
    use rumqttc::{Client, Event, MqttOptions, Packet, QoS};
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = session.map_or_else(|| format!("sub-{}-{n}", std::process::id()), str::to_string);
    let mut options = MqttOptions::new(id, "127.0.0.1", port);
    options.set_clean_session(session.is_none());
    let (client, mut connection) = Client::new(options, 10);
    client.subscribe(filter, QoS::AtLeastOnce).unwrap();
    let (tx, lines) = channel();
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < PATIENCE, "no subscription to {filter}");
        match connection.recv_timeout(Duration::from_secs(1)) {
            Ok(Ok(Event::Incoming(Packet::SubAck(_)))) => break,
            Ok(Ok(Event::Incoming(Packet::Publish(p)))) => {
                let _ = tx.send(format!(
                    "{} {}",
                    p.topic,
                    String::from_utf8_lossy(&p.payload)
                ));
            }
            Ok(Err(e)) => panic!("subscribing to {filter}: {e}"),
            _ => {}
        }
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let thread = std::thread::spawn(move || {
        let _client = client;
        while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
            match connection.recv_timeout(Duration::from_millis(100)) {
                Ok(Ok(Event::Incoming(Packet::Publish(p)))) => {
                    let line = format!("{} {}", p.topic, String::from_utf8_lossy(&p.payload));
                    if tx.send(line).is_err() {
                        return;
                    }
                }
                // The broker away (a test restarting it): try again.
                Ok(Err(_)) => std::thread::sleep(Duration::from_millis(50)),
                _ => {}
            }
        }
    });
    Subscriber {
        lines,
        stop,
        thread: Some(thread),
    }
}

impl Subscriber {
    /// The next `count` messages (failing the test if they do not come).
    fn take(&self, count: usize) -> Vec<String> {
        let start = Instant::now();
        let mut got = Vec::new();
        while got.len() < count {
            let left = PATIENCE.saturating_sub(start.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(line) => got.push(line),
                Err(_) => panic!("{} of {count} messages came: {got:?}", got.len()),
            }
        }
        got
    }

    /// The messages that came so far.
    fn so_far(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }
}

impl Drop for Subscriber {
    /// Disconnects (and, with a kept session, lets the broker queue what
    /// comes next), once no message can reach it any more.
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

const SPEC: &str = "\
in x: Int
in y: Int
out total: Int
out both: Int
out hot: Bool
total = default(total[1], 0) + x
both = x + y
hot = total > 100
trigger crossed: total > 100 && default(total[1], 0) <= 100 \"total crossed 100 at {total}\"
";

/// `n` rows of a generated trace with times (`t`), `y` absent from every
/// third row, as JSON lines.
fn trace(n: usize) -> Vec<(u64, i64, Option<i64>)> {
    (0..n)
        .map(|i| {
            let x = (i as i64 * 7) % 11 - 3;
            let y = (i % 3 != 2).then_some(i as i64 % 5);
            (i as u64 * 10, x, y)
        })
        .collect()
}

fn jsonl(rows: &[(u64, i64, Option<i64>)], time: bool) -> String {
    rows.iter()
        .map(|(t, x, y)| {
            let t = if time {
                format!("\"t\":{t},")
            } else {
                String::new()
            };
            match y {
                Some(y) => format!("{{{t}\"x\":{x},\"y\":{y}}}\n"),
                None => format!("{{{t}\"x\":{x}}}\n"),
            }
        })
        .collect()
}

/// `vigil replay` of `log` (recorded with `spec`) as JSON lines.
fn replayed(spec: &str, log: &Path) -> String {
    let (code, out, err) = run_vigil(
        &["replay", spec, log.to_str().unwrap(), "--output", "jsonl"],
        None,
    );
    assert_eq!(code, 0, "{err}");
    out
}

/// `vigil run` over `trace` as a file, with `extra` options: standard output.
fn file_run(spec: &str, trace: &str, extra: &[&str]) -> String {
    let mut args = vec!["run", spec, "--input", trace];
    args.extend_from_slice(extra);
    let (code, out, err) = run_vigil(&args, None);
    assert_eq!(code, 0, "{err}");
    out
}

#[test]
fn mqtt_topics_per_input_give_a_files_outputs_and_a_replayable_log() {
    let dir = test_dir("live", "mqtt_topics");
    let broker = Broker::mosquitto(&dir);
    let spec = write(&dir, "spec.dsrv", SPEC);
    let rows = trace(120);
    let file = write(&dir, "trace.jsonl", jsonl(&rows, true));
    let expected = file_run(&spec, &file, &["--time", "t", "--output", "jsonl"]);
    let log = dir.join("session.log");
    let out = dir.join("out.jsonl");
    let input = broker.url("mqtt", "plant");
    let mut live = Live::start(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--time",
            "t",
            "--output",
            "jsonl",
            "--record",
            log.to_str().unwrap(),
        ],
        &out,
    );
    live.wait_for("subscribed to");
    // Each input's values on its own topic, stamped by the publisher.
    let xs: String = rows
        .iter()
        .map(|(t, x, _)| format!("{{\"t\":{t},\"value\":{x}}}\n"))
        .collect();
    let ys: String = rows
        .iter()
        .filter_map(|(t, _, y)| y.map(|y| format!("{{\"t\":{t},\"value\":{y}}}\n")))
        .collect();
    publish(broker.port, "plant/y", &ys, true);
    publish(broker.port, "plant/x", &xs, true);
    let (code, err) = live.finish();
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), expected, "{err}");
    // The recorded session replays to the same outputs, without a broker.
    assert_eq!(replayed(&spec, &log), expected);
}

#[test]
fn mqtt_rows_in_and_streams_rows_and_alerts_out() {
    let dir = test_dir("live", "mqtt_rows");
    let broker = Broker::mosquitto(&dir);
    let spec = write(&dir, "spec.dsrv", SPEC);
    let rows = trace(150);
    let lines = jsonl(&rows, false);
    let file = write(&dir, "trace.jsonl", &lines);
    let alerts_file = dir.join("alerts.jsonl");
    let expected = file_run(
        &spec,
        &file,
        &[
            "--output",
            "jsonl",
            "--alerts",
            alerts_file.to_str().unwrap(),
        ],
    );
    let expected_alerts = std::fs::read_to_string(&alerts_file).unwrap();
    assert!(
        !expected_alerts.is_empty(),
        "the trace must fire the trigger"
    );
    // Per-stream topics: every output with a value at every step.
    let per_stream: Vec<String> = expected
        .lines()
        .flat_map(|line| {
            let row: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(line).unwrap();
            ["total", "both", "hot"]
                .into_iter()
                .filter_map(|name| Some(format!("out/{name} {}", row.get(name)?)))
                .collect::<Vec<_>>()
        })
        .collect();
    let alerts: Vec<String> = expected_alerts
        .lines()
        .map(|l| format!("out/alerts {l}"))
        .collect();
    let sub = subscribe(broker.port, "out/#", None);
    let sub_rows = subscribe(broker.port, "rows-out/rows", None);
    let input = broker.url("mqtt", "in");
    let streams = Live::start(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--mqtt-rows",
            "rows",
            "--output",
            &broker.url("mqtt", "out"),
        ],
        &dir.join("streams.out"),
    );
    let mut by_rows = Live::start(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--mqtt-rows",
            "rows",
            "--output",
            &broker.url("mqtt", "rows-out"),
            "--mqtt-output-rows",
            "rows",
            "--qos",
            "2",
        ],
        &dir.join("rows.out"),
    );
    let mut streams = streams;
    streams.wait_for("subscribed to");
    by_rows.wait_for("subscribed to");
    publish(broker.port, "in/rows", &lines, true);
    let (code, err) = streams.finish();
    assert_eq!(code, 0, "{err}");
    let (code, err) = by_rows.finish();
    assert_eq!(code, 0, "{err}");
    let got = sub.take(per_stream.len() + alerts.len());
    let (got_alerts, got_streams): (Vec<String>, Vec<String>) =
        got.into_iter().partition(|l| l.starts_with("out/alerts "));
    assert_eq!(got_streams, per_stream);
    assert_eq!(got_alerts, alerts);
    let got_rows: Vec<String> = (sub_rows.take(rows.len()).into_iter())
        .map(|l| l.strip_prefix("rows-out/rows ").unwrap().to_string())
        .collect();
    assert_eq!(got_rows, expected.lines().collect::<Vec<_>>());
}

#[test]
fn an_mqtt_broker_restart_is_survived_with_state_kept() {
    let dir = test_dir("live", "mqtt_restart");
    let mut broker = Broker::mosquitto(&dir);
    let spec = write(&dir, "spec.dsrv", SPEC);
    let rows = trace(80);
    let file = write(&dir, "trace.jsonl", jsonl(&rows, false));
    let expected = file_run(&spec, &file, &["--output", "csv"]);
    let out = dir.join("out.csv");
    let input = broker.url("mqtt", "in");
    let mut live = Live::start(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--mqtt-rows",
            "rows",
            "--output",
            "csv",
        ],
        &out,
    );
    live.wait_for("subscribed to");
    let (first, second) = rows.split_at(50);
    publish(broker.port, "in/rows", &jsonl(first, false), false);
    // Every row of the first half evaluated (the header and 50 lines).
    let start = Instant::now();
    while std::fs::read_to_string(&out).unwrap().lines().count() < 51 {
        assert!(start.elapsed() < PATIENCE, "the first half never came out");
        std::thread::sleep(Duration::from_millis(20));
    }
    let port = broker.port;
    broker.kill();
    live.wait_for("lost mqtt://");
    let broker = Broker::mosquitto_on(&dir, port);
    live.wait_for("reconnected to mqtt://");
    publish(broker.port, "in/rows", &jsonl(second, false), true);
    let (code, err) = live.finish();
    assert_eq!(code, 0, "{err}");
    // The total goes on from where it was: the state was kept.
    assert_eq!(std::fs::read_to_string(&out).unwrap(), expected);
}

#[test]
fn a_malformed_mqtt_message_is_located_and_skippable() {
    let dir = test_dir("live", "mqtt_malformed");
    let broker = Broker::mosquitto(&dir);
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = broker.url("mqtt", "in");
    let lines = "{\"x\":1}\n{\"x\":\"two\"}\n{\"x\":3}\n";
    // Stopping at it (the default): the rows before it are written.
    let out = dir.join("stop.out");
    let mut live = Live::start(
        &["run", &spec, "--input", &input, "--mqtt-rows", "rows"],
        &out,
    );
    live.wait_for("subscribed to");
    publish(broker.port, "in/rows", lines, false);
    let (code, err) = live.finish();
    assert_eq!(code, 4, "{err}");
    assert!(
        err.contains(&format!("{input}:2:")) && err.contains("expected Int"),
        "{err}"
    );
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains("total[0] = Int(1)")
    );
    // Skipping it: the run goes on.
    let out = dir.join("skip.out");
    let mut live = Live::start(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--mqtt-rows",
            "rows",
            "--on-malformed",
            "skip",
            "--output",
            "csv",
        ],
        &out,
    );
    live.wait_for("subscribed to");
    publish(broker.port, "in/rows", lines, true);
    let (code, err) = live.finish();
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().nth(2), Some("1,4,,false"), "{text}");
}

/// Appends `rows` to Redis stream `stream`, one entry each.
fn xadd(con: &mut redis::Connection, stream: &str, rows: &[(u64, i64, Option<i64>)]) {
    let mut pipe = redis::pipe();
    for (_, x, y) in rows {
        let cmd = pipe.cmd("XADD").arg(stream).arg("*").arg("x").arg(x);
        if let Some(y) = y {
            cmd.arg("y").arg(y);
        }
        cmd.ignore();
    }
    pipe.query::<()>(con).unwrap();
}

/// A stream's entries, without their IDs.
pub(crate) fn entries(con: &mut redis::Connection, stream: &str) -> Vec<Vec<(String, String)>> {
    let reply: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(stream)
        .arg("-")
        .arg("+")
        .query(con)
        .unwrap();
    reply.into_iter().map(|(_, fields)| fields).collect()
}

fn xlen(con: &mut redis::Connection, stream: &str) -> usize {
    redis::cmd("XLEN").arg(stream).query(con).unwrap()
}

/// A run killed (SIGKILL) at random points and resumed from its checkpoint
/// each time writes the stream an uninterrupted run writes.
fn killed_and_resumed(test: &str, group: &[&str], rows: usize, every: &str, kills_wanted: usize) {
    killed_and_resumed_as(test, &[], group, rows, every, kills_wanted);
}

/// `killed_and_resumed`, with `both` given to the uninterrupted run and the
/// killed one (`group` to the killed one only).
fn killed_and_resumed_as(
    test: &str,
    both: &[&str],
    group: &[&str],
    rows: usize,
    every: &str,
    kills_wanted: usize,
) {
    let dir = test_dir("live", test);
    let broker = Broker::redis(&dir);
    let mut con = broker.connection();
    let spec = write(&dir, "spec.dsrv", SPEC);
    let rows = trace(rows);
    xadd(&mut con, "in", &rows);
    let input = broker.url("redis", "in");
    let run_to = |output: &str, extra: &[&str]| {
        let mut args = vec![
            "run", &spec, "--input", &input, "--drain", "--output", output,
        ];
        args.extend_from_slice(both);
        args.extend_from_slice(extra);
        args.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    // The uninterrupted run.
    let (code, _, err) = run_vigil(
        &run_to(&broker.url("redis", "ref"), &[])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        None,
    );
    assert_eq!(code, 0, "{err}");
    let reference = entries(&mut con, "ref");
    assert_eq!(reference.len(), rows.len());
    // The same run, killed at random points (once at least this many
    // entries are out) and resumed.
    let ck = dir.join("ck");
    let ck = ck.to_str().unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64 ^ u64::from(std::process::id());
    let mut kills = 0;
    let mut rounds = 0;
    loop {
        rounds += 1;
        assert!(rounds < 20, "the run never finished");
        let mut extra = vec!["--checkpoint", ck, "--checkpoint-every", every];
        extra.extend_from_slice(group);
        if Path::new(ck).exists() {
            extra.extend(["--resume", ck]);
        }
        let args = run_to(&broker.url("redis", "out"), &extra);
        let mut child = vigil()
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if kills < kills_wanted {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let done = xlen(&mut con, "out");
            let target = done + 1 + (seed % 300) as usize;
            let start = Instant::now();
            while xlen(&mut con, "out") < target && child.try_wait().unwrap().is_none() {
                assert!(start.elapsed() < PATIENCE);
                std::thread::sleep(Duration::from_millis(1));
            }
            if child.try_wait().unwrap().is_none() {
                child.kill().unwrap();
                child.wait().unwrap();
                kills += 1;
                continue;
            }
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        break;
    }
    assert!(
        kills >= kills_wanted.min(2),
        "only {kills} kills landed before the end"
    );
    let got = entries(&mut con, "out");
    assert_eq!(got.len(), reference.len(), "entries lost or repeated");
    assert_eq!(got, reference);
}

#[test]
fn redis_sigkill_and_resume_equal_an_uninterrupted_run() {
    killed_and_resumed("redis_kill", &[], 1500, "37", 3);
}

/// Issue 35: a scaled run checkpoints with a Redis source and a Redis sink
/// (it was refused): killed and resumed, it writes the entries of an
/// uninterrupted single-process keyed run, none lost or repeated. The
/// resumed run reads the stream on from the last entry the checkpoint's
/// rows took; the sink does not send again the entries the checkpoint
/// counted, nor those past it already in the stream.
#[test]
fn a_scaled_run_with_redis_in_and_out_resumes_exactly_after_sigkill() {
    killed_and_resumed_as(
        "redis_scaled_kill",
        &["--key", "x"],
        &["--workers", "2"],
        1500,
        "37",
        3,
    );
}

/// As `redis_output_killed_before_its_first_periodic_checkpoint_is_not_repeated`,
/// on two workers: a fresh scaled run to a Redis Stream takes a checkpoint
/// before its first row, so that a run killed before any periodic one
/// resumes (it had said "it holds no complete checkpoint") and sends no
/// entry twice.
#[test]
fn a_scaled_redis_output_killed_before_its_first_periodic_checkpoint_resumes() {
    killed_and_resumed_as(
        "redis_scaled_kill_early",
        &["--key", "x"],
        &["--workers", "2"],
        20000,
        "1000000",
        1,
    );
}

/// Issue 35: a scaled run reading a Redis consumer group checkpoints (it
/// was refused: its resume read the sources again from their start, and a
/// group delivers each entry once). The commit record holds the group's
/// last entry taken, as a single-process checkpoint does; killed and
/// resumed, the run writes the uninterrupted run's entries.
#[test]
fn a_scaled_run_of_a_redis_consumer_group_resumes_exactly_after_sigkill() {
    killed_and_resumed_as(
        "redis_scaled_group_kill",
        &["--key", "x"],
        &["--workers", "2", "--group", "monitors", "--consumer", "m1"],
        1500,
        "37",
        3,
    );
}

#[test]
fn redis_consumer_group_sigkill_and_resume_equal_an_uninterrupted_run() {
    killed_and_resumed(
        "redis_group_kill",
        &["--group", "monitors", "--consumer", "m1"],
        1500,
        "37",
        3,
    );
}

/// Killed after its first entries are out and before any periodic
/// checkpoint: the checkpoint a fresh run writes before its first row lets
/// the resumed run skip them (a fresh start would write them again).
#[test]
fn redis_output_killed_before_its_first_periodic_checkpoint_is_not_repeated() {
    killed_and_resumed("redis_kill_early", &[], 20000, "1000000", 1);
}

#[test]
fn a_malformed_redis_entry_is_located_after_the_rows_before_it() {
    let dir = test_dir("live", "redis_malformed");
    let broker = Broker::redis(&dir);
    let mut con = broker.connection();
    let spec = write(&dir, "spec.dsrv", SPEC);
    xadd(&mut con, "in", &[(0, 1, Some(2)), (0, 5, None)]);
    let bad: String = redis::cmd("XADD")
        .arg("in")
        .arg("*")
        .arg("x")
        .arg("seven")
        .query(&mut con)
        .unwrap();
    let input = broker.url("redis", "in");
    let (code, out, err) = run_vigil(
        &[
            "run", &spec, "--input", &input, "--drain", "--output", "csv",
        ],
        None,
    );
    assert_eq!(code, 4, "{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(
        err.contains(&format!("{input}:3:1: entry {bad}:")) && err.contains("`x`"),
        "{err}"
    );
}

#[test]
fn mqtt_messages_without_times_are_steps_in_arrival_order_with_a_topic_map() {
    let dir = test_dir("live", "mqtt_arrival");
    let broker = Broker::mosquitto(&dir);
    let spec = write(&dir, "spec.dsrv", SPEC);
    let map = write(
        &dir,
        "topics",
        "# devices publish x under their own name\nsensors/+/x x\n",
    );
    let xs: String = (0..40).map(|i| format!("{}\n", i % 9)).collect();
    let ys: String = (0..30).map(|i| format!("{}\n", i % 4)).collect();
    // The same steps as a file: each message a row of its one input.
    let file: String = (xs.lines().map(|v| format!("{{\"x\":{v}}}\n")))
        .chain(ys.lines().map(|v| format!("{{\"y\":{v}}}\n")))
        .collect();
    let file = write(&dir, "trace.jsonl", file);
    let expected = file_run(&spec, &file, &["--output", "jsonl"]);
    let out = dir.join("out.jsonl");
    let input = broker.url("mqtt", "plant");
    let mut live = Live::start(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--mqtt-topics",
            &map,
            "--output",
            "jsonl",
        ],
        &out,
    );
    live.wait_for("subscribed to");
    publish(broker.port, "sensors/dev7/x", &xs, true);
    // Every x arrived before the first y is published.
    let start = Instant::now();
    while std::fs::read_to_string(&out).unwrap().lines().count() < 40 {
        assert!(start.elapsed() < PATIENCE, "the x messages never came out");
        std::thread::sleep(Duration::from_millis(20));
    }
    publish(broker.port, "plant/y", &ys, true);
    let (code, err) = live.finish();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("sensors/+/x, plant/y"), "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), expected);
}

#[test]
fn outputs_published_while_the_broker_restarts_are_delivered() {
    let dir = test_dir("live", "mqtt_output_restart");
    let port = free_port();
    let mut broker = Broker::persistent_mosquitto_on(&dir, port);
    let spec = write(&dir, "spec.dsrv", SPEC);
    let rows = trace(5030);
    let file = write(&dir, "trace.jsonl", jsonl(&rows, false));
    let expected = file_run(&spec, &file, &["--output", "jsonl"]);
    // A subscriber with a session the broker keeps (queued for it while
    // it is away, and across the restart).
    let first = subscribe(port, "out/rows", Some("collector"));
    let mut child = vigil()
        .args([
            "run",
            &spec,
            "--input",
            "-",
            "--output",
            &format!("mqtt://127.0.0.1:{port}/out"),
        ])
        .args(["--mqtt-output-rows", "rows"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    use std::io::Write as _;
    let (a, b) = rows.split_at(30);
    stdin.write_all(jsonl(a, false).as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut got = first.take(30);
    drop(first);
    // The broker stops while vigil publishes the rest: what it had not
    // acknowledged is sent again to the restarted broker, and what vigil
    // evaluates meanwhile waits for it.
    stdin.write_all(jsonl(b, false).as_bytes()).unwrap();
    stdin.flush().unwrap();
    broker.stop();
    std::thread::sleep(Duration::from_millis(500));
    let _broker = Broker::persistent_mosquitto_on(&dir, port);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("reconnected to mqtt://"), "{err}");
    let second = subscribe(port, "out/rows", Some("collector"));
    // At least once: a publication sent again may come twice.
    let start = Instant::now();
    let mut steps: std::collections::BTreeMap<u64, String> = Default::default();
    while steps.len() < rows.len() && start.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(50));
        got.extend(second.so_far());
        for line in &got {
            let payload = line.strip_prefix("out/rows ").unwrap();
            let row: serde_json::Value = serde_json::from_str(payload).unwrap();
            steps.insert(row["step"].as_u64().unwrap(), payload.to_string());
        }
    }
    let steps: Vec<&str> = steps.values().map(String::as_str).collect();
    assert_eq!(steps, expected.lines().collect::<Vec<_>>(), "{err}");
}

#[test]
fn a_keyed_run_publishes_each_keys_streams_under_its_own_topic_level() {
    let dir = test_dir("live", "mqtt_keyed");
    let broker = Broker::mosquitto(&dir);
    let spec = write(
        &dir,
        "spec.dsrv",
        "in host: Str\nin x: Int\nout total: Int\ntotal = default(total[1], 0) + x\n",
    );
    let trace = write(
        &dir,
        "t.jsonl",
        "{\"host\":\"a/b\",\"x\":1}\n{\"host\":\"c+#\",\"x\":5}\n{\"host\":\"a/b\",\"x\":2}\n",
    );
    let sub = subscribe(broker.port, "out/#", None);
    let (code, _, err) = run_vigil(
        &[
            "run",
            &spec,
            "--input",
            &trace,
            "--key",
            "host",
            "--output",
            &broker.url("mqtt", "out"),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        sub.take(3),
        [
            "out/total/a%2Fb 1",
            "out/total/c%2B%23 5",
            "out/total/a%2Fb 3"
        ]
    );
}

/// Issue 35: a scaled run publishes to MQTT (live sinks were refused with
/// `--workers`): each key's streams under its own topic level, in the
/// single-process order, and its alerts to `PREFIX/alerts`.
#[test]
fn a_scaled_run_publishes_to_mqtt_as_one_process_does() {
    let dir = test_dir("live", "mqtt_scaled");
    let broker = Broker::mosquitto(&dir);
    let spec = write(
        &dir,
        "spec.dsrv",
        "in host: Str\nin x: Int\nout total: Int\ntotal = default(total[1], 0) + x\n\
         trigger big: total > 4 \"{host} at {total}\"\n",
    );
    let trace = write(
        &dir,
        "t.jsonl",
        "{\"host\":\"a\",\"x\":1}\n{\"host\":\"b\",\"x\":5}\n{\"host\":\"a\",\"x\":2}\n{\"host\":\"b\",\"x\":1}\n",
    );
    let sub = subscribe(broker.port, "out/#", None);
    let (code, _, err) = run_vigil(
        &[
            "run",
            &spec,
            "--input",
            &trace,
            "--key",
            "host",
            "--workers",
            "2",
            "--output",
            &broker.url("mqtt", "out"),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let got = sub.take(6);
    let outputs: Vec<&String> = got.iter().filter(|l| l.starts_with("out/total/")).collect();
    assert_eq!(
        outputs,
        [
            "out/total/a 1",
            "out/total/b 5",
            "out/total/a 3",
            "out/total/b 6"
        ]
    );
    let alerts: Vec<&String> = got
        .iter()
        .filter(|l| l.starts_with("out/alerts "))
        .collect();
    assert_eq!(alerts.len(), 2, "{got:?}");
    assert!(alerts[0].contains("\"b at 5\""), "{got:?}");
}

#[test]
fn a_transports_options_without_it_are_refused() {
    let dir = test_dir("live", "options");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let trace = write(&dir, "t.jsonl", "{\"x\":1}\n");
    for (flags, message) in [
        (
            &["--mqtt-rows", "r"][..],
            "--mqtt-rows needs an mqtt:// --input",
        ),
        (
            &["--mqtt-output-rows", "r"][..],
            "--mqtt-output-rows needs an mqtt:// --output",
        ),
        (
            &["--qos", "2"][..],
            "--qos needs an mqtt:// --input or --output",
        ),
        (&["--drain"][..], "--drain needs a redis:// --input"),
        (
            &["--group", "g", "--consumer", "c"][..],
            "--group needs a redis:// or mqtt:// --input",
        ),
        (&["--output", "mqtt://127.0.0.1:1/a+b"][..], "no `+` or `#`"),
        (
            &["--output", "redis://127.0.0.1:1"][..],
            "the stream is missing",
        ),
        (&["--output", "ftp://x"][..], "neither an output format"),
    ] {
        let mut args = vec!["run", &spec, "--input", &trace];
        args.extend_from_slice(flags);
        let (code, out, err) = run_vigil(&args, None);
        assert!(code == 1 || code == 2, "{flags:?}: {code} {err}");
        assert!(err.contains(message), "{flags:?}: {err}");
        assert_eq!(out, "", "{flags:?}");
    }
    // A broker that is not there: a clear error, not a wait forever.
    let port = free_port().to_string();
    for url in [
        format!("mqtt://127.0.0.1:{port}/in"),
        format!("redis://127.0.0.1:{port}/in"),
    ] {
        let (code, _, err) = run_vigil(
            &["run", &spec, "--input", &url, "--mqtt-rows", "r"]
                [..if url.starts_with("mqtt") { 6 } else { 4 }],
            None,
        );
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("cannot connect"), "{err}");
    }
    // A Redis consumer group needs its consumer's name (an MQTT group has none), said before
    // any connection is tried.
    let url = format!("redis://127.0.0.1:{port}/in");
    let (code, _, err) = run_vigil(&["run", &spec, "--input", &url, "--group", "g"], None);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--group with a redis:// --input needs --consumer C"),
        "{err}"
    );
}

#[test]
fn a_redis_restart_is_survived_with_state_kept() {
    redis_restart("redis_restart", &[]);
}

/// The restarted server has lost the group too: it is made again.
#[test]
fn a_redis_restart_is_survived_by_a_consumer_group() {
    redis_restart("redis_restart_group", &["--group", "g", "--consumer", "c"]);
}

fn redis_restart(test: &str, extra: &[&str]) {
    let dir = test_dir("live", test);
    let mut broker = Broker::redis(&dir);
    let spec = write(&dir, "spec.dsrv", SPEC);
    let rows = trace(80);
    let file = write(&dir, "trace.jsonl", jsonl(&rows, false));
    let expected = file_run(&spec, &file, &["--output", "csv"]);
    let (first, second) = rows.split_at(50);
    xadd(&mut broker.connection(), "in", first);
    let out = dir.join("out.csv");
    let input = broker.url("redis", "in");
    let mut args = vec!["run", &spec, "--input", &input, "--output", "csv"];
    args.extend_from_slice(extra);
    let mut live = Live::start(&args, &out);
    let wait_lines = |n: usize| {
        let start = Instant::now();
        while std::fs::read_to_string(&out).unwrap().lines().count() < n {
            assert!(start.elapsed() < PATIENCE, "{n} lines never came out");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_lines(51);
    // A restarted server without persistence has an empty stream: new
    // entries get later IDs, and the reader goes on after its last one.
    let port = broker.port;
    broker.kill();
    live.wait_for("lost redis://");
    let broker = Broker::redis_on(&dir, port);
    live.wait_for("reconnected to redis://");
    xadd(&mut broker.connection(), "in", second);
    wait_lines(81);
    let _ = live.child.kill();
    let _ = live.finish();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), expected);
}

#[test]
fn a_redis_source_with_times_merges_records_and_replays_as_a_file() {
    let dir = test_dir("live", "redis_timed");
    let broker = Broker::redis(&dir);
    let mut con = broker.connection();
    let spec = write(&dir, "spec.dsrv", SPEC);
    let rows = trace(100);
    // The xs in the stream, the ys in a file: merged by their times.
    let mut pipe = redis::pipe();
    for (t, x, _) in &rows {
        pipe.cmd("XADD")
            .arg("xs")
            .arg("*")
            .arg("t")
            .arg(t)
            .arg("x")
            .arg(x)
            .ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    let ys: String = (rows.iter())
        .filter_map(|(t, _, y)| y.map(|y| format!("{{\"t\":{t},\"y\":{y}}}\n")))
        .collect();
    let ys = write(&dir, "ys.jsonl", ys);
    let all = write(&dir, "all.jsonl", jsonl(&rows, true));
    let expected = file_run(&spec, &all, &["--time", "t", "--output", "jsonl"]);
    let log = dir.join("session.log");
    let input = broker.url("redis", "xs");
    let (code, out, err) = run_vigil(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--input",
            &ys,
            "--drain",
            "--time",
            "t",
            "--output",
            "jsonl",
            "--record",
            log.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, expected);
    assert_eq!(replayed(&spec, &log), expected);
}

#[test]
fn a_consumers_pending_entries_come_first_and_deleted_ones_are_no_rows() {
    let dir = test_dir("live", "redis_pending");
    let broker = Broker::redis(&dir);
    let mut con = broker.connection();
    let spec = write(&dir, "spec.dsrv", SPEC);
    let rows = trace(30);
    xadd(&mut con, "in", &rows);
    // Consumer m1 was given the first ten entries and acknowledged none;
    // the fourth was deleted since.
    let _: () = redis::cmd("XGROUP")
        .arg(&["CREATE", "in", "g", "0"])
        .query(&mut con)
        .unwrap();
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg(&["GROUP", "g", "m1", "COUNT", "10", "STREAMS", "in", ">"])
        .query(&mut con)
        .unwrap();
    let ids: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(&["in", "-", "+"])
        .query(&mut con)
        .unwrap();
    let _: i64 = redis::cmd("XDEL")
        .arg("in")
        .arg(&ids[3].0)
        .query(&mut con)
        .unwrap();
    let mut kept = rows.clone();
    kept.remove(3);
    let file = write(&dir, "trace.jsonl", jsonl(&kept, false));
    let expected = file_run(&spec, &file, &["--output", "jsonl"]);
    let input = broker.url("redis", "in");
    let (code, out, err) = run_vigil(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--drain",
            "--group",
            "g",
            "--consumer",
            "m1",
            "--output",
            "jsonl",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, expected);
    // Everything it read is acknowledged.
    let pending: Vec<redis::Value> = redis::cmd("XPENDING")
        .arg(&["in", "g"])
        .query(&mut con)
        .unwrap();
    assert_eq!(pending.first(), Some(&redis::Value::Int(0)), "{pending:?}");
}

#[test]
fn brokers_asking_for_passwords_get_them_from_the_url_and_never_show_them() {
    let dir = test_dir("live", "passwords");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let redis = Broker::redis_with(&dir, free_port(), &["--requirepass", "s3cret"]);
    let client = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/", redis.port)).unwrap();
    xadd(&mut client.get_connection().unwrap(), "in", &trace(5));
    let url = |password: &str| format!("redis://:{password}@127.0.0.1:{}/in", redis.port);
    let (code, out, err) = run_vigil(&["run", &spec, "--input", &url("s3cret"), "--drain"], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("total[").count(), 5, "{out}");
    let (code, _, err) = run_vigil(&["run", &spec, "--input", &url("wrong"), "--drain"], None);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot connect") && err.contains(":***@"),
        "{err}"
    );
    assert!(!err.contains("wrong"), "{err}");
    // mosquitto with a password file and no anonymous clients.
    let status = Command::new(program("mosquitto_passwd"))
        .args(["-b", "-c"])
        .arg(dir.join("passwords"))
        .args(["monitor", "pa55"])
        .status()
        .unwrap();
    assert!(status.success());
    use std::os::unix::fs::PermissionsExt as _;
    let readable = std::fs::Permissions::from_mode(0o644);
    std::fs::set_permissions(dir.join("passwords"), readable).unwrap();
    let port = free_port();
    let conf = write(
        &dir,
        "mosquitto.conf",
        format!(
            "listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {}\n",
            dir.join("passwords").display()
        ),
    );
    let _mqtt = Broker::mosquitto_with(&dir, port, &conf);
    let url = |password: &str| format!("mqtt://monitor:{password}@127.0.0.1:{port}/in");
    let (code, _, err) = run_vigil(
        &["run", &spec, "--input", &url("nope"), "--mqtt-rows", "rows"],
        None,
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot connect") && !err.contains("nope"),
        "{err}"
    );
    let out = dir.join("out");
    let mut live = Live::start(
        &["run", &spec, "--input", &url("pa55"), "--mqtt-rows", "rows"],
        &out,
    );
    live.wait_for("subscribed to mqtt://monitor:***@");
    let _ = live.child.kill();
    let (_, err) = live.finish();
    assert!(!err.contains("pa55"), "{err}");
}

/// Issue 35: a live source works with `--workers`: process 0 reads the Redis stream as it
/// reads a file and routes its rows by key, and the output is the single-process keyed
/// run's, byte for byte. (It was refused.) A live sink and checkpoints work scaled too.
#[test]
fn a_redis_source_feeds_a_scaled_keyed_run() {
    let dir = test_dir("live", "redis_scaled");
    let broker = Broker::redis(&dir);
    let mut con = broker.connection();
    let spec = write(
        &dir,
        "spec.dsrv",
        "in host: Str\nin x: Int\nout s: Int\ns = default(s[1], 0) + x\n",
    );
    let mut pipe = redis::pipe();
    for i in 0..2_000 {
        let host = format!("h{}", (i * 7) % 13);
        pipe.cmd("XADD")
            .arg("in")
            .arg("*")
            .arg("host")
            .arg(host)
            .arg("x")
            .arg(i % 17)
            .ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    let input = broker.url("redis", "in");
    let keyed = ["run", &spec, "--input", &input, "--drain", "--key", "host"];
    let (code, want, err) = run_vigil(&keyed, None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(want.lines().count(), 2_000);
    let (code, got, err) = run_vigil(&[&keyed[..], &["--workers", "2"]].concat(), None);
    assert_eq!(code, 0, "{err}");
    assert!(got == want, "the scaled run's output differs");
    // Checkpointed too (it was refused), and resumed after its end.
    let ck = dir.join("ck");
    let checkpointed = [
        &keyed[..],
        &["--workers", "2", "--checkpoint", ck.to_str().unwrap()],
        &["--checkpoint-every", "300"],
    ]
    .concat();
    let (code, got, err) = run_vigil(&checkpointed, None);
    assert_eq!(code, 0, "{err}");
    assert!(got == want, "the checkpointed scaled run's output differs");
    let (code, got, err) = run_vigil(
        &[&checkpointed[..], &["--resume", ck.to_str().unwrap()]].concat(),
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        want.ends_with(&got) && got.lines().count() < 300,
        "a resume after the end evaluates more than the rows after the last checkpoint"
    );
    // A live sink works scaled too (it was refused): the scaled run's
    // entries are the single-process run's.
    for (stream, extra) in [("one", &[][..]), ("two", &["--workers", "2"][..])] {
        let out = broker.url("redis", stream);
        let (code, _, err) = run_vigil(&[&keyed[..], extra, &["--output", &out]].concat(), None);
        assert_eq!(code, 0, "{err}");
    }
    let one = entries(&mut con, "one");
    assert_eq!(one.len(), 2_000);
    assert!(
        entries(&mut con, "two") == one,
        "the scaled run's entries differ"
    );
}

/// Issue 35: a scaled run checkpoints with an MQTT source (it was refused). MQTT keeps no
/// history, so a resumed run has the state its last checkpoint recorded and the messages from
/// then on, numbered on from the checkpoint: its rows' outputs are those a single-process keyed
/// run gives for the same rows after the checkpoint's (the rows between the checkpoint and the
/// end of the first run are not delivered again).
#[test]
fn a_scaled_mqtt_source_resumes_with_its_checkpoints_state() {
    let dir = test_dir("live", "mqtt_scaled_resume");
    let broker = Broker::mosquitto(&dir);
    let spec = write(
        &dir,
        "spec.dsrv",
        "in host: Str\nin x: Int\nout total: Int\ntotal = default(total[1], 0) + x\n",
    );
    let rows: Vec<String> = (0..400)
        .map(|i| format!("{{\"host\":\"h{}\",\"x\":{}}}", i % 7, i % 5))
        .collect();
    let (first, second) = rows.split_at(250);
    let ck = dir.join("ck").to_str().unwrap().to_string();
    let input = broker.url("mqtt", "in");
    let base = [
        "run",
        &spec,
        "--input",
        &input,
        "--key",
        "host",
        "--workers",
        "2",
        "--output",
        "csv",
        "--checkpoint",
        &ck,
        "--checkpoint-every",
        "100",
        "--mqtt-rows",
        "rows",
    ];
    let mut got = Vec::new();
    for (round, part) in [first, second].into_iter().enumerate() {
        let out = dir.join(format!("out{round}"));
        let args = match round {
            0 => base.to_vec(),
            _ => [&base[..], &["--resume", &ck]].concat(),
        };
        let mut live = Live::start(&args, &out);
        live.wait_for("subscribed to");
        publish(broker.port, "in/rows", &part.join("\n"), true);
        let (code, err) = live.finish();
        assert_eq!(code, 0, "round {round}: {err}");
        got.push(std::fs::read_to_string(&out).unwrap());
    }
    // The first run's checkpoint at row 200 is its last complete one.
    let reference = write(
        &dir,
        "ref.jsonl",
        format!("{}\n{}\n", rows[..200].join("\n"), second.join("\n")),
    );
    let (code, want, err) = run_vigil(
        &[
            "run", &spec, "--input", &reference, "--key", "host", "--output", "csv",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let data = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with("step"))
            .map(String::from)
            .collect()
    };
    assert_eq!(data(&got[0]).len(), 250);
    assert_eq!(data(&got[1]), data(&want)[200..]);
}

/// Issue 37: a run writing to a Redis Stream XADDs its alerts to
/// `STREAM:alerts`, each entry's `alert` the JSON line a file of `--alerts`
/// gets (one schema), in one process and scaled.
#[test]
fn a_redis_sink_has_an_alerts_stream() {
    let dir = test_dir("live", "redis_alerts");
    let broker = Broker::redis(&dir);
    let mut con = broker.connection();
    let spec = write(
        &dir,
        "spec.dsrv",
        "in host: Str\nin x: Int\ntrigger big: x > 2 \"{host}: x = {x:>3}\" rising, resolve\n",
    );
    let trace = write(
        &dir,
        "t.jsonl",
        "{\"host\":\"a\",\"x\":1}\n{\"host\":\"a\",\"x\":3}\n{\"host\":\"b\",\"x\":5}\n{\"host\":\"a\",\"x\":1}\n",
    );
    let file = dir.join("alerts.jsonl").to_string_lossy().into_owned();
    for (stream, extra) in [("plain", &[][..]), ("scaled", &["--workers", "2"][..])] {
        let mut args = vec!["run", &spec, "--input", &trace, "--key", "host"];
        args.extend_from_slice(extra);
        let (code, _, err) =
            run_vigil(&[&args[..], &["--alerts", &file, "--quiet"]].concat(), None);
        assert_eq!(code, 0, "{err}");
        let want: Vec<String> = (std::fs::read_to_string(&file).unwrap().lines())
            .map(String::from)
            .collect();
        assert_eq!(want.len(), 3, "{want:?}");
        let url = broker.url("redis", stream);
        let (code, _, err) = run_vigil(&[&args[..], &["--output", &url]].concat(), None);
        assert_eq!(code, 0, "{err}");
        let got: Vec<String> = entries(&mut con, &format!("{stream}:alerts"))
            .into_iter()
            .map(|fields| {
                assert_eq!(fields.len(), 1, "{fields:?}");
                assert_eq!(fields[0].0, "alert");
                fields[0].1.clone()
            })
            .collect();
        assert_eq!(got, want, "{stream}");
    }
}

const KEYED_SPEC: &str = "\
in host: Str
in x: Int
out total: Int
total = default(total[1], 0) + x
trigger high: total > 500 \"{host} reached {total}\"
";

/// Appends `n` keyed rows (`host`, `x`) to Redis stream `stream`, from row `from` on.
fn xadd_keyed(con: &mut redis::Connection, stream: &str, from: usize, n: usize) {
    let mut pipe = redis::pipe();
    for i in from..from + n {
        let host = format!("h{}", i % 37);
        pipe.cmd("XADD")
            .arg(stream)
            .arg("*")
            .arg("host")
            .arg(host)
            .arg("x")
            .arg(i % 11)
            .ignore();
    }
    pipe.query::<()>(con).unwrap();
}

/// Issue 35: a scaled run over a Redis Stream read by a consumer group reads it with one
/// consumer per worker (each delivered other entries), and its output and alerts are the
/// single-process run's, in the stream's order; every entry is acknowledged.
#[test]
fn a_redis_consumer_group_is_read_by_one_consumer_per_worker() {
    let dir = test_dir("live", "redis_group_consumers");
    let broker = Broker::redis(&dir);
    let mut con = broker.connection();
    let spec = write(&dir, "spec.dsrv", KEYED_SPEC);
    xadd_keyed(&mut con, "in", 0, 5000);
    let input = broker.url("redis", "in");
    let run = |group: &str, alerts: &Path, extra: &[&str]| {
        let mut args = vec![
            "run",
            &spec,
            "--input",
            &input,
            "--drain",
            "--key",
            "host",
            "--group",
            group,
            "--consumer",
            "m",
            "--output",
            "csv",
            "--alerts",
            alerts.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = run_vigil(&args, None);
        assert_eq!(code, 0, "{err}");
        (out, std::fs::read_to_string(alerts).unwrap(), err)
    };
    let (reference, ref_alerts, _) = run("single", &dir.join("a1.jsonl"), &[]);
    assert_eq!(reference.lines().count(), 5001, "{reference}");
    assert!(ref_alerts.lines().count() > 10, "{ref_alerts}");
    let (scaled, alerts, err) = run(
        "shared",
        &dir.join("a2.jsonl"),
        &["--workers", "2", "--stats"],
    );
    assert!(
        err.contains("read by 2 consumers of its group, one per worker"),
        "{err}"
    );
    assert_eq!(scaled, reference);
    assert_eq!(alerts, ref_alerts);
    // Recorded, still one consumer per worker (the feed read the group as one consumer): each
    // logs its rows at their entries' places and times, and the log replays to the output.
    let log = dir.join("run.log");
    let log = log.to_str().unwrap();
    let (recorded, _, err) = run(
        "recorded",
        &dir.join("a3.jsonl"),
        &["--workers", "2", "--stats", "--record", log],
    );
    assert!(
        err.contains("read by 2 consumers of its group, one per worker"),
        "{err}"
    );
    assert_eq!(recorded, reference);
    let (code, replayed, err) = run_vigil(&["replay", &spec, log, "--output", "csv"], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(replayed, reference);
    // Each consumer was delivered a share, and acknowledged it.
    let consumers: redis::Value = redis::cmd("XINFO")
        .arg("CONSUMERS")
        .arg("in")
        .arg("shared")
        .query(&mut con)
        .unwrap();
    let shown = format!("{consumers:?}");
    assert!(shown.contains("m-0") && shown.contains("m-1"), "{shown}");
    let pending: (u64, redis::Value, redis::Value, redis::Value) = redis::cmd("XPENDING")
        .arg("in")
        .arg("shared")
        .query(&mut con)
        .unwrap();
    assert_eq!(pending.0, 0, "entries left unacknowledged");
}

/// A scaled run over a live consumer group writes each entry's outputs as it comes: a worker
/// with nothing to read does not hold the others' rows back (its frontier follows the group's
/// last delivered entry).
#[test]
fn a_live_redis_consumer_group_read_by_workers_writes_rows_as_they_come() {
    let dir = test_dir("live", "redis_group_live");
    let broker = Broker::redis(&dir);
    let mut con = broker.connection();
    let spec = write(&dir, "spec.dsrv", KEYED_SPEC);
    let input = broker.url("redis", "in");
    let out = dir.join("out.csv");
    let mut live = Live::start(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--key",
            "host",
            "--group",
            "g",
            "--consumer",
            "m",
            "--output",
            "csv",
            "--workers",
            "2",
        ],
        &out,
    );
    for round in 0..3 {
        // One entry at a time: one consumer gets it, the other has none.
        xadd_keyed(&mut con, "in", round, 1);
        let want = round + 2;
        let start = Instant::now();
        while std::fs::read_to_string(&out).unwrap().lines().count() < want {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "row {round} was not written while the stream stayed open: {:?}",
                std::fs::read_to_string(&out)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    live.child.kill().unwrap();
    live.child.wait().unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        text, "step,host,total\n0,\"h0\",0\n0,\"h1\",1\n0,\"h2\",2\n",
        "{text}"
    );
}

/// Issue 35: an MQTT shared subscription (`--group`) read by one member per worker. The broker
/// gives each message to one member; MQTT keeps no order between members, so the check is
/// one no order decides: every row evaluated exactly once, under its key, and each key's
/// running total (positive values) reaching the key's sum.
#[test]
fn an_mqtt_shared_subscription_is_read_by_one_member_per_worker() {
    let dir = test_dir("live", "mqtt_shared_workers");
    let broker = Broker::mosquitto(&dir);
    let spec = write(&dir, "spec.dsrv", KEYED_SPEC);
    let rows = 3000;
    let hosts = 7;
    let lines: String = (0..rows)
        .map(|i| format!("{{\"host\":\"h{}\",\"x\":{}}}\n", i % hosts, i % 10 + 1))
        .collect();
    let out = dir.join("out.csv");
    let log = dir.join("run.log");
    let log = log.to_str().unwrap();
    let input = broker.url("mqtt", "plant");
    let mut live = Live::start(
        &[
            "run",
            &spec,
            "--input",
            &input,
            "--mqtt-rows",
            "rows",
            "--key",
            "host",
            "--group",
            "g",
            "--workers",
            "2",
            "--output",
            "csv",
            "--stats",
            "--record",
            log,
        ],
        &out,
    );
    live.wait_for("$share/g/plant/rows");
    live.wait_for("$share/g/plant/rows");
    publish(broker.port, "plant/rows", &lines, true);
    let (code, err) = live.finish();
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("read by 2 consumers of its group, one per worker"),
        "{err}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    // Recorded, each member logs its rows at their arrival stamps: the log replays to the
    // run's output, in its order.
    let (code, replayed, err) = run_vigil(&["replay", &spec, log, "--output", "csv"], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(replayed, text);
    let mut got: std::collections::BTreeMap<String, (usize, i64)> = Default::default();
    for line in text.lines().skip(1) {
        let cells: Vec<&str> = line.split(',').collect();
        let entry = got
            .entry(cells[1].trim_matches('"').to_string())
            .or_default();
        entry.0 += 1;
        entry.1 = entry.1.max(cells[2].parse().unwrap());
    }
    let mut want: std::collections::BTreeMap<String, (usize, i64)> = Default::default();
    for i in 0..rows {
        let entry = want.entry(format!("h{}", i % hosts)).or_default();
        entry.0 += 1;
        entry.1 += (i % 10 + 1) as i64;
    }
    assert_eq!(got, want, "{text}");
}

/// Two vigil runs in one shared subscription group share a topic's messages: each is given
/// some, and together every one, once.
#[test]
fn two_runs_in_an_mqtt_shared_subscription_group_share_its_messages() {
    let dir = test_dir("live", "mqtt_shared_runs");
    let broker = Broker::mosquitto(&dir);
    let spec = write(&dir, "spec.dsrv", "in x: Int\nout y: Int\ny = x\n");
    let input = broker.url("mqtt", "plant");
    let outs = [dir.join("a.csv"), dir.join("b.csv")];
    let mut runs: Vec<Live> = outs
        .iter()
        .map(|out| {
            let args = [
                "run", &spec, "--input", &input, "--group", "pair", "--output", "csv",
            ];
            let mut live = Live::start(&args, out);
            live.wait_for("$share/pair/plant/x");
            live
        })
        .collect();
    let values: String = (0..200).map(|i| format!("{i}\n")).collect();
    publish(broker.port, "plant/x", &values, false);
    let read = |out: &Path| -> Vec<i64> {
        let text = std::fs::read_to_string(out).unwrap();
        // `step,y`: a run's steps count its own rows (a line still being written is left out).
        (text.split_inclusive('\n').skip(1))
            .filter(|l| l.ends_with('\n'))
            .map(|l| l.trim_end().split(',').nth(1).unwrap().parse().unwrap())
            .collect()
    };
    let start = Instant::now();
    while outs.iter().map(|o| read(o).len()).sum::<usize>() < 200 {
        assert!(
            start.elapsed() < PATIENCE,
            "the messages never all came out"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for live in &mut runs {
        live.child.kill().unwrap();
        live.child.wait().unwrap();
    }
    let (a, b) = (read(&outs[0]), read(&outs[1]));
    assert!(!a.is_empty() && !b.is_empty(), "a: {a:?}, b: {b:?}");
    let mut all: Vec<i64> = a.into_iter().chain(b).collect();
    all.sort_unstable();
    assert_eq!(all, (0..200).collect::<Vec<_>>());
}
