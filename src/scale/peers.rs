//! The processes of a scaled run (`--processes`), below timely: connecting them (quietly, within
//! `--connect-timeout`), the handshake in which they check that they run the same job, and the
//! heartbeats by which a peer that stopped running (`kill -STOP`, a hung machine, a cut network)
//! is noticed within `--peer-timeout`.
//!
//! Two processes hold two connections: timely's data connection, handed to timely's networking
//! once the handshake has passed, and a control connection that stays vigil's (the handshake on
//! it, then heartbeats). Timely itself notices a peer that is gone (its connection closes), but
//! not one that is still there and does nothing: its connection stays open, and every other
//! process would wait for its progress for ever.

use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The connection a dialling process opens, by the word it sends after its index.
const DATA: u64 = 0;
const CONTROL: u64 = 1;

/// The first bytes of a job description on the wire, so that a stranger's bytes are not read
/// as one, and the most bytes a description may have (a few hundred in practice).
const JOB_MAGIC: [u8; 8] = *b"VIGILJOB";
const MAX_JOB_BYTES: u64 = 1 << 20;

/// One thing every process of a run must agree on: what it is (`what`, by which two
/// descriptions are matched), its value, and how a message shows it (`` `--output csv` ``).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Term {
    /// What it is (`--output`): two jobs' terms are matched by it.
    pub what: String,
    /// Its value, compared.
    pub value: String,
    /// How a message shows it (`` `--output csv` ``).
    pub shown: String,
}

impl Term {
    /// A term whose message shows it as it is compared.
    pub fn new(what: &str, value: impl Into<String>, shown: impl Into<String>) -> Term {
        Term {
            what: what.into(),
            value: value.into(),
            shown: shown.into(),
        }
    }
}

/// What a message says of each difference between this process's job (`mine`, process `me`)
/// and a peer's (`theirs`, process `peer`): `process 1 runs `--output text`, process 0
/// `--output csv``. When the versions differ nothing else is compared, since another version
/// may describe its job otherwise.
pub fn differences(me: usize, mine: &[Term], peer: usize, theirs: &[Term]) -> Vec<String> {
    let mut found = Vec::new();
    for m in mine {
        let t = theirs.iter().find(|t| t.what == m.what);
        if t.is_none_or(|t| t.value != m.value) {
            let shown = t.map_or("a job this vigil cannot read", |t| t.shown.as_str());
            found.push(format!(
                "process {peer} runs {shown}, process {me} {}",
                m.shown
            ));
            if m.what == "version" {
                break;
            }
        }
    }
    found
}

/// How long to wait: for the peers to connect (and hand over their jobs), and for a word from
/// a running peer before it counts as stopped.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// For every peer to connect and hand over its job.
    pub connect: Duration,
    /// For a word from a running peer, before it counts as stopped.
    pub peer: Duration,
}

/// What a process does when a peer has been silent for longer than `--peer-timeout`: it is
/// called once, from a thread of the watchdog, with the peer's index and the silence.
pub type OnSilent = Arc<dyn Fn(usize, Duration) + Send + Sync>;

/// This process's connections: timely's, by process (none at its own index).
pub struct Connected {
    pub data: Vec<Option<TcpStream>>,
}

/// Connects this process (`me`) to every other one, as timely's own set-up does (a process
/// dials the ones before it, sending its index, and accepts the ones after it) but quietly —
/// timely's prints its retries on standard output, which is the monitor's output here — and
/// within `timeouts.connect`; then checks that every process runs `job`, and starts the
/// heartbeats, whose watchdog calls `on_silent` for a peer silent past `timeouts.peer`.
pub fn connect(
    addresses: &[String],
    me: usize,
    job: &[Term],
    timeouts: Timeouts,
    on_silent: OnSilent,
) -> Result<Connected, String> {
    let start = Instant::now();
    let deadline = start + timeouts.connect;
    let listener = TcpListener::bind(&addresses[me])
        .map_err(|e| format!("process {me} cannot listen on {}: {e}", addresses[me]))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("process {me} cannot listen on {}: {e}", addresses[me]))?;
    let n = addresses.len();
    let mut data: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let mut control: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    for (i, address) in addresses.iter().enumerate().take(me) {
        for channel in [DATA, CONTROL] {
            let mut stream = dial(address, deadline).map_err(|e| {
                format!(
                    "process {me} cannot reach process {i} at {address} (waited {}): {e}; check that process {i} is running with the same --processes and hostfile, and that {address} is reachable from here (--connect-timeout waits longer)",
                    seconds(start.elapsed())
                )
            })?;
            let mut greeting = [0u8; 16];
            greeting[..8].copy_from_slice(&(me as u64).to_be_bytes());
            greeting[8..].copy_from_slice(&channel.to_be_bytes());
            stream
                .set_nodelay(true)
                .and_then(|()| stream.write_all(&greeting))
                .map_err(|e| format!("process {me} cannot greet process {i} at {address}: {e}"))?;
            match channel {
                DATA => data[i] = Some(stream),
                _ => control[i] = Some(stream),
            }
        }
    }
    let complete = |d: &[Option<TcpStream>], c: &[Option<TcpStream>]| {
        (me + 1..n).all(|j| d[j].is_some() && c[j].is_some())
    };
    while !complete(&data, &control) {
        match listener.accept() {
            Ok((mut stream, _)) => {
                let mut greeting = [0u8; 16];
                let greeted = stream
                    .set_nonblocking(false)
                    .and_then(|()| stream.set_read_timeout(Some(Duration::from_secs(10))))
                    .and_then(|()| stream.read_exact(&mut greeting))
                    .and_then(|()| stream.set_read_timeout(None))
                    .and_then(|()| stream.set_nodelay(true));
                let word = |i: usize| {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&greeting[i * 8..i * 8 + 8]);
                    u64::from_be_bytes(w)
                };
                let (index, channel) = (word(0), word(1));
                // A stranger (not a peer's greeting) is dropped.
                let slot = match channel {
                    DATA => &mut data,
                    CONTROL => &mut control,
                    _ => continue,
                };
                if greeted.is_ok()
                    && index > me as u64
                    && index < n as u64
                    && slot[index as usize].is_none()
                {
                    slot[index as usize] = Some(stream);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<usize> = (me + 1..n)
                        .filter(|&j| data[j].is_none() || control[j].is_none())
                        .collect();
                    return Err(not_connected(me, &missing, &addresses[me], start.elapsed()));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(format!(
                    "process {me} cannot accept its peers on {}: {e}",
                    addresses[me]
                ));
            }
        }
    }
    drop(listener);
    handshake(&mut control, me, job, deadline)?;
    watch(control, timeouts.peer, on_silent)?;
    Ok(Connected { data })
}

/// Dials `address` until it answers or `deadline` passes.
fn dial(address: &str, deadline: Instant) -> io::Result<TcpStream> {
    loop {
        match TcpStream::connect(address) {
            Ok(s) => return Ok(s),
            Err(_) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    }
}

/// A duration as a message shows it: `60 s`, `1.5 s`.
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 10.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// The message for peers that did not connect to process `me` (listening on `address`)
/// within `waited`: which ones, and what to check.
pub fn not_connected(me: usize, missing: &[usize], address: &str, waited: Duration) -> String {
    let names: Vec<String> = missing.iter().map(usize::to_string).collect();
    let (who, they, flags) = match names.as_slice() {
        [one] => (format!("process {one}"), "it", format!("--process {one}")),
        [rest @ .., last] => (
            format!("processes {} and {last}", rest.join(", ")),
            "they",
            format!("--process {} or {last}", rest.join(", ")),
        ),
        [] => ("no process".to_string(), "they", String::new()),
    };
    format!(
        "process {me} waited {} for {who} to connect, in vain: check that {they} {} running ({flags}, with the same --processes and hostfile) and can reach this process at {address} (--connect-timeout waits longer)",
        seconds(waited),
        if they == "it" { "is" } else { "are" }
    )
}

/// Sends this process's job to every peer on its control connection, reads each peer's, and
/// refuses the run if any differs. Every description is read before the answer, so that each
/// process sees the same differences (every process refuses) and no connection is closed with
/// a description unread.
fn handshake(
    control: &mut [Option<TcpStream>],
    me: usize,
    job: &[Term],
    deadline: Instant,
) -> Result<(), String> {
    let body = serde_json::to_vec(job).map_err(|e| format!("cannot describe the job: {e}"))?;
    let mut frame = Vec::with_capacity(16 + body.len());
    frame.extend_from_slice(&JOB_MAGIC);
    frame.extend_from_slice(&(body.len() as u64).to_be_bytes());
    frame.extend_from_slice(&body);
    // The peers that connected may still be waiting for others: give them what is left of the
    // connect timeout, and a few seconds more.
    let wait = || deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(5);
    for (peer, stream) in control.iter_mut().enumerate() {
        if let Some(s) = stream {
            s.set_write_timeout(Some(wait()))
                .and_then(|()| s.write_all(&frame))
                .map_err(|e| format!("process {me} cannot send its job to process {peer}: {e}"))?;
        }
    }
    let mut found = Vec::new();
    for (peer, stream) in control.iter_mut().enumerate() {
        let Some(s) = stream else { continue };
        let theirs = read_job(s, wait()).map_err(|e| {
            format!("process {me} did not get process {peer}'s job description: {e}")
        })?;
        found.extend(differences(me, job, peer, &theirs));
    }
    if found.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the processes do not run the same job: {}; start every process with the same specification and options (they may differ only in --process and in what only process 0 uses or what changes no result, such as --input, --output-file, --hostfile and --tier)",
        found.join("; ")
    ))
}

/// Reads a peer's job description, waiting at most `wait` for it.
fn read_job(s: &mut TcpStream, wait: Duration) -> io::Result<Vec<Term>> {
    s.set_read_timeout(Some(wait))?;
    let mut head = [0u8; 16];
    s.read_exact(&mut head)?;
    if head[..8] != JOB_MAGIC {
        return Err(io::Error::other("it sent something else"));
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&head[8..]);
    let len = u64::from_be_bytes(len);
    if len > MAX_JOB_BYTES {
        return Err(io::Error::other(format!("it is {len} bytes long")));
    }
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body)?;
    s.set_read_timeout(None)?;
    serde_json::from_slice(&body).map_err(io::Error::other)
}

/// Starts the heartbeats on the control connections: one thread sends a byte to every peer a
/// few times per `timeout`, and one thread per peer waits for its bytes. A peer that closes
/// its connection has ended (or died, which timely reports): it is no longer watched. A peer
/// silent for `timeout` while its connection is open is stopped: `on_silent` is called.
fn watch(
    control: Vec<Option<TcpStream>>,
    timeout: Duration,
    on_silent: OnSilent,
) -> Result<(), String> {
    let interval = (timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut senders = Vec::new();
    for (peer, stream) in control.into_iter().enumerate() {
        let Some(stream) = stream else { continue };
        let sender = stream
            .try_clone()
            .and_then(|s| s.set_write_timeout(Some(timeout)).map(|()| s))
            .map_err(|e| format!("cannot start the heartbeats: {e}"))?;
        senders.push(sender);
        let on_silent = Arc::clone(&on_silent);
        std::thread::Builder::new()
            .name(format!("vigil-watch-{peer}"))
            .spawn(move || listen(stream, peer, timeout, &*on_silent))
            .map_err(|e| format!("cannot start the heartbeats: {e}"))?;
    }
    std::thread::Builder::new()
        .name("vigil-heartbeat".into())
        .spawn(move || {
            while !senders.is_empty() {
                // A peer that cannot take a byte is gone or stopped; its watcher here, or
                // timely, says which.
                senders.retain_mut(|s| s.write_all(&[0]).is_ok());
                std::thread::sleep(interval);
            }
        })
        .map_err(|e| format!("cannot start the heartbeats: {e}"))?;
    Ok(())
}

/// Waits for `peer`'s heartbeats until it closes its connection or is silent for `timeout`.
fn listen(
    mut stream: TcpStream,
    peer: usize,
    timeout: Duration,
    on_silent: &(dyn Fn(usize, Duration) + Send + Sync),
) {
    if stream.set_read_timeout(Some(timeout)).is_err() {
        return;
    }
    let mut buf = [0u8; 64];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                on_silent(peer, timeout);
                return;
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(output: &str) -> Vec<Term> {
        vec![
            Term::new("version", "vigil 1", "vigil 1"),
            Term::new("--output", output, format!("`--output {output}`")),
            Term::new("--key", "host", "`--key host`"),
        ]
    }

    #[test]
    fn a_difference_names_both_processes_and_both_values() {
        assert!(differences(0, &job("csv"), 1, &job("csv")).is_empty());
        assert_eq!(
            differences(0, &job("csv"), 1, &job("text")),
            ["process 1 runs `--output text`, process 0 `--output csv`"]
        );
        // Another version: only that is said.
        let mut other = job("text");
        other[0] = Term::new("version", "vigil 2", "vigil 2");
        assert_eq!(
            differences(1, &job("csv"), 0, &other),
            ["process 0 runs vigil 2, process 1 vigil 1"]
        );
    }

    #[test]
    fn missing_peers_are_named_in_good_grammar() {
        let one = not_connected(0, &[1], "127.0.0.1:2101", Duration::from_secs(60));
        assert!(
            one.starts_with("process 0 waited 60 s for process 1 to connect, in vain: check that it is running (--process 1,"),
            "{one}"
        );
        let two = not_connected(0, &[1, 2, 3], "h:1", Duration::from_millis(1500));
        assert!(
            two.starts_with("process 0 waited 1.5 s for processes 1, 2 and 3 to connect, in vain: check that they are running (--process 1, 2 or 3,"),
            "{two}"
        );
    }
}
