//! A telemetry pipeline: JSON events for many hosts, one keyed monitor, alerts, checkpoints.
//!
//!     cargo run --example telemetry -- --checkpoint /tmp/telemetry.ck < examples/telemetry.jsonl
//!
//! A reader thread parses each line of standard input as JSON and turns it into a row with the
//! JSON-lines reader's rules (`Spec::row_from_json`: extra fields such as `unit` are ignored);
//! it sends the rows over a channel to a worker that owns a `KeyedMonitor` keyed by `host`, so
//! each host is monitored as a trace of its own while all hosts share one compiled plan. The
//! worker prints an alert for every step where a host's `alarm` output is true.
//!
//! With `--checkpoint FILE` the worker saves every live host's state every `--every N` events
//! (default 20) and at the end, atomically (a temporary file renamed over FILE). Run again with
//! the same FILE and the same input, it resumes: it restores the hosts' state, skips the events
//! the checkpoint had consumed, and goes on, so a killed pipeline loses and repeats nothing.
//! A malformed line is reported with its line number and skipped; the pipeline goes on.

use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use vigil::{Key, KeyedMonitor, KeyedSnapshot, Row, Sample, Spec, Value};

/// What the reader thread sends the worker.
enum Event {
    /// A row built from line `line` of the input.
    Row { line: u64, row: Row },
    /// A line that is not an event (bad JSON, a wrong-typed field).
    Bad { line: u64, message: String },
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (checkpoint, every) = options()?;
    let spec = Spec::parse("telemetry.dsrv", include_str!("telemetry.dsrv"))?;

    // Resume from the checkpoint if there is one: the hosts' state and the
    // number of input lines it had consumed.
    let (mut monitor, done) = match checkpoint.as_deref().map(load).transpose()? {
        Some(Some((lines, snapshot))) => {
            let monitor = KeyedMonitor::builder(&spec, "host")
                .restore(&snapshot)
                .build()?;
            eprintln!(
                "resumed: {} hosts, {lines} events already processed",
                monitor.key_count()
            );
            (monitor, lines)
        }
        _ => (KeyedMonitor::builder(&spec, "host").build()?, 0),
    };

    // The reader thread: parse, build rows, send. It owns its own copy of
    // the spec (a `Spec` is cheap to clone and `Send`).
    let (tx, rx) = mpsc::sync_channel::<Event>(1024);
    let reader_spec = spec.clone();
    let reader = std::thread::spawn(move || -> io::Result<()> {
        for (i, line) in io::stdin().lock().lines().enumerate() {
            let line_no = i as u64 + 1;
            let text = line?;
            if line_no <= done || text.trim().is_empty() {
                continue;
            }
            let event = match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(serde_json::Value::Object(object)) => match reader_spec.row_from_json(&object) {
                    Ok(row) => Event::Row { line: line_no, row },
                    Err(e) => Event::Bad {
                        line: line_no,
                        message: e.to_string(),
                    },
                },
                Ok(_) => Event::Bad {
                    line: line_no,
                    message: "not a JSON object".to_string(),
                },
                Err(e) => Event::Bad {
                    line: line_no,
                    message: e.to_string(),
                },
            };
            if tx.send(event).is_err() {
                break; // The worker is gone.
            }
        }
        Ok(())
    });

    // The worker: this thread.
    let alarm = monitor
        .output_names()
        .iter()
        .position(|n| *n == "alarm")
        .ok_or("the spec has no `alarm` output")?;
    let mut out = io::stdout().lock();
    let mut consumed = done;
    let mut since = 0;
    for event in rx {
        match event {
            Event::Bad { line, message } => {
                eprintln!("line {line}: skipped: {message}");
                consumed = line;
            }
            Event::Row { line, row } => match monitor.step(&row) {
                Ok(outputs) => {
                    let alarm = outputs.get(alarm) == Sample::Value(Value::Bool(true));
                    if alarm {
                        let host = outputs.key().map_or(String::new(), Key::to_string);
                        let temp = row.get("temp").map_or(String::new(), Value::to_string);
                        writeln!(
                            out,
                            "ALERT {host}: hot for 3 readings in a row (its reading {}, {temp})",
                            outputs.step()
                        )?;
                    }
                    consumed = line;
                }
                // A row without a host, or a host whose run stopped.
                Err(e) => {
                    eprintln!("line {line}: {e}");
                    consumed = line;
                }
            },
        }
        since += 1;
        if let Some(path) = &checkpoint
            && since >= every
        {
            out.flush()?;
            save(path, consumed, &monitor.snapshot())?;
            since = 0;
        }
    }
    reader.join().map_err(|_| "the reader thread panicked")??;
    out.flush()?;
    if let Some(path) = &checkpoint {
        save(path, consumed, &monitor.snapshot())?;
    }
    eprintln!(
        "{} hosts monitored, {} events",
        monitor.key_count(),
        consumed
    );
    Ok(())
}

/// `--checkpoint FILE` and `--every N` from the command line.
fn options() -> Result<(Option<PathBuf>, u64), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (mut checkpoint, mut every) = (None, 20);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--checkpoint" => {
                checkpoint = Some(PathBuf::from(args.next().ok_or("--checkpoint FILE")?))
            }
            "--every" => every = args.next().ok_or("--every N")?.parse()?,
            other => return Err(format!("unknown argument `{other}`").into()),
        }
    }
    Ok((checkpoint, every))
}

/// The checkpoint file: the number of input lines consumed (u64,
/// little-endian), then the keyed snapshot in its binary form. `None` if
/// there is no checkpoint yet.
fn load(path: &Path) -> Result<Option<(u64, KeyedSnapshot)>, Box<dyn std::error::Error>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let (lines, snapshot) = bytes
        .split_first_chunk::<8>()
        .ok_or("the checkpoint is truncated")?;
    Ok(Some((
        u64::from_le_bytes(*lines),
        KeyedSnapshot::from_bytes(snapshot)?,
    )))
}

/// Writes the checkpoint atomically: a crash leaves the old one or the new.
fn save(path: &Path, lines: u64, snapshot: &KeyedSnapshot) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&lines.to_le_bytes())?;
    f.write_all(&snapshot.to_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}
