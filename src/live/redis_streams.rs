//! Redis Streams sources and sinks (the `redis` crate): one entry per row, one entry per step.
//!
//! **Source** (`--input redis://HOST:PORT/STREAM`): entries are read in batches with XREAD
//! (`BLOCK`ing for more at the stream's end, or stopping there with `--drain`), or with
//! XREADGROUP as consumer `--consumer` of `--group` (the group is made if missing; the
//! consumer's own unacknowledged entries are read again first). An entry's fields are inputs,
//! each read by the rule of a CSV cell; other fields are ignored. The entry ID (`ms-seq`) is the
//! row's stamp. The reader's position is the last entry ID it returned: a checkpoint records it
//! and `--resume` reads on after it, so no entry is lost or read twice across a crash. A group
//! acknowledges entries when the run says they are done ([`RowReader::commit`]).
//!
//! **Sink** (`--output redis://HOST:PORT/STREAM`): one entry per step, XADDed in pipelined
//! batches when the run flushes: fields `seq` (the entry's number in the run's output, going on
//! across resumes), `step`, the key in a keyed run, then each output with a value, as the CSV
//! writer writes a cell (⊥ is `null`; a NoVal output is left out). A resumed run (and a run that
//! lost its connection in the middle of a batch) first reads the stream's last `seq` and does not
//! write those entries again: the stream after a SIGKILL and `--resume` is an uninterrupted run's.
//!
//! A lost connection is retried with backoff, the monitor waiting with its state.

use super::{Backoff, Options, Resume, Url};
use crate::notice::Notice;
use crate::time::Time;
use crate::trace::{InputSchema, ObjectRows, OutputWriter, RowReader, TraceError, TraceErrorKind};
use crate::value::{Key, Sample, Value};
use redis::{Client, Connection, RedisError};
use std::collections::VecDeque;
use std::io;
use std::time::Duration;

/// Entries read per request.
const BATCH: usize = 512;

/// How long a blocking read waits at the stream's end before asking again.
const BLOCK_MS: u64 = 1000;

/// How long a consumer sharing its group with others waits at the stream's end before it says
/// it is idle: the rows other consumers took wait that long at most for this one's word that it
/// has none before them.
const SHARE_BLOCK_MS: u64 = 100;

/// What a fetch got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fetched {
    Got,
    /// Nothing more (`--drain`).
    End,
    /// Nothing for now (a consumer sharing its group).
    Idle,
}

/// Steps buffered before the writer sends them without being asked.
const PENDING: usize = 1024;

/// How long a request may take before the connection counts as lost.
const TIMEOUT: Duration = Duration::from_secs(10);

fn client(what: &str, url: &Url) -> Result<Client, String> {
    if url.path.is_empty() {
        return Err(format!(
            "`{what}`: the stream is missing (expected redis://HOST:PORT/STREAM)"
        ));
    }
    let mut info = redis::IntoConnectionInfo::into_connection_info(format!(
        "redis://{}:{}/",
        url.host, url.port
    ))
    .map_err(|e| format!("`{what}`: {e}"))?;
    if let Some((user, password)) = &url.login {
        let mut redis = info.redis_settings().clone();
        if !user.is_empty() {
            redis = redis.set_username(user.clone());
        }
        info = info.set_redis_settings(redis.set_password(password.clone()));
    }
    Client::open(info).map_err(|e| format!("`{what}`: {e}"))
}

fn connect(client: &Client) -> Result<Connection, RedisError> {
    let con = client.get_connection_with_timeout(TIMEOUT)?;
    con.set_read_timeout(Some(TIMEOUT + Duration::from_millis(BLOCK_MS)))?;
    con.set_write_timeout(Some(TIMEOUT))?;
    Ok(con)
}

/// Whether a failed request is worth retrying on a new connection (the
/// server went away) rather than an answer (a wrong type, a bad ID).
fn lost(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
}

/// An entry: its ID and fields (`None`: deleted since it was delivered to
/// this consumer, which a group's history still lists).
#[derive(Debug, PartialEq)]
struct Entry {
    id: String,
    fields: Option<Vec<(String, Vec<u8>)>>,
}

fn text(v: &redis::Value) -> Option<String> {
    match v {
        redis::Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// The entries of an XREAD/XREADGROUP reply for one stream (RESP2 arrays
/// or RESP3 maps; nil when nothing came).
fn entries(reply: redis::Value) -> Result<Vec<Entry>, String> {
    let bad = || "an XREAD reply of an unexpected shape".to_string();
    let streams = match reply {
        redis::Value::Nil => return Ok(Vec::new()),
        redis::Value::Array(streams) => streams
            .into_iter()
            .map(|s| match s {
                redis::Value::Array(mut kv) if kv.len() == 2 => Ok(kv.remove(1)),
                _ => Err(bad()),
            })
            .collect::<Result<Vec<_>, _>>()?,
        redis::Value::Map(streams) => streams.into_iter().map(|(_, v)| v).collect(),
        _ => return Err(bad()),
    };
    let mut out = Vec::new();
    for stream in streams {
        let redis::Value::Array(items) = stream else {
            return Err(bad());
        };
        for item in items {
            let redis::Value::Array(parts) = item else {
                return Err(bad());
            };
            let mut parts = parts.into_iter();
            let id = parts.next().as_ref().and_then(text).ok_or_else(bad)?;
            // An entry deleted since it was delivered has no fields.
            let fields = match parts.next() {
                Some(redis::Value::Array(fv)) => Some(
                    fv.chunks(2)
                        .filter_map(|pair| match pair {
                            [f, redis::Value::BulkString(v)] => Some((text(f)?, v.clone())),
                            [f, v] => Some((text(f)?, text(v)?.into_bytes())),
                            _ => None,
                        })
                        .collect(),
                ),
                Some(redis::Value::Map(fv)) => Some(
                    fv.into_iter()
                        .filter_map(|(f, v)| Some((text(&f)?, text(&v)?.into_bytes())))
                        .collect(),
                ),
                _ => None,
            };
            out.push(Entry { id, fields });
        }
    }
    Ok(out)
}

/// An entry ID's time: its milliseconds, and its sequence number as the
/// nanoseconds within (IDs of one millisecond stay in order up to 10⁶).
fn id_time(id: &str) -> Option<Time> {
    let (ms, seq) = id.split_once('-')?;
    let ms: i64 = ms.parse().ok()?;
    let seq: i64 = seq.parse().ok()?;
    Some(Time(
        ms.checked_mul(1_000_000)?.checked_add(seq.min(999_999))?,
    ))
}

/// A consumer group's reading.
struct Group {
    name: String,
    consumer: String,
    /// Reading the consumer's own unacknowledged entries (after the
    /// position), before new ones.
    history: bool,
    /// Entries returned and not yet acknowledged.
    unacked: Vec<String>,
    /// Acknowledge as soon as read (a run that cannot say when it is done).
    on_read: bool,
}

/// `--input redis://…`.
struct EntryReader {
    what: String,
    client: Client,
    con: Option<Connection>,
    stream: String,
    /// The last entry ID fetched (where the next read starts).
    fetched: String,
    /// The last entry ID returned.
    token: Option<String>,
    group: Option<Group>,
    buffered: VecDeque<Entry>,
    drain: bool,
    rows: ObjectRows,
    number: usize,
    stamp: Option<Time>,
    after_error: bool,
    backoff: Backoff,
    /// Whether a fetch that got nothing says so (`Fetched::Idle`) instead of waiting on: a
    /// consumer sharing its group with others ([`super::Consumer`]).
    idle_returns: bool,
}

pub fn open_input(
    what: &str,
    url: &Url,
    schema: &InputSchema,
    options: &Options,
    resume: &Resume,
) -> Result<Box<dyn RowReader>, String> {
    Ok(Box::new(open_entries(what, url, schema, options, resume)?))
}

/// The reader of `--input redis://…`.
fn open_entries(
    what: &str,
    url: &Url,
    schema: &InputSchema,
    options: &Options,
    resume: &Resume,
) -> Result<EntryReader, String> {
    let client = client(what, url)?;
    let mut con = connect(&client).map_err(|e| format!("--input {what}: cannot connect: {e}"))?;
    let start = resume.token.clone().unwrap_or_else(|| "0-0".to_string());
    let group = match &options.group {
        None => None,
        Some((name, consumer)) => {
            make_group(&mut con, &url.path, name)
                .map_err(|e| format!("--input {what}: cannot make group `{name}`: {e}"))?;
            Some(Group {
                name: name.clone(),
                consumer: consumer.clone(),
                history: true,
                unacked: Vec::new(),
                on_read: options.ack_on_read,
            })
        }
    };
    Ok(EntryReader {
        what: what.to_string(),
        client,
        con: Some(con),
        stream: url.path.clone(),
        fetched: start,
        token: resume.token.clone(),
        group,
        buffered: VecDeque::new(),
        drain: options.drain,
        rows: ObjectRows::new(what, schema),
        number: 0,
        stamp: None,
        after_error: false,
        backoff: Backoff::new(options.notify.clone()),
        idle_returns: false,
    })
}

/// `count` consumers of `--group`, `CONSUMER-0` … `CONSUMER-{count-1}`, sharing the stream's
/// entries: each is delivered other entries, and each entry once (see [`super::Consumer`]). A
/// consumer acknowledges its entries as it reads them.
#[cfg(feature = "scale")]
pub(crate) fn open_consumers(
    what: &str,
    url: &Url,
    schema: &InputSchema,
    options: &Options,
    count: usize,
) -> Result<Vec<Box<dyn super::Consumer>>, String> {
    let Some((group, consumer)) = &options.group else {
        return Err(format!(
            "--input {what}: consumers need a group (--group, --consumer)"
        ));
    };
    let mut consumers: Vec<Box<dyn super::Consumer>> = Vec::with_capacity(count);
    for i in 0..count {
        let mut mine = options.clone();
        mine.group = Some((group.clone(), format!("{consumer}-{i}")));
        mine.ack_on_read = true;
        let mut entries = open_entries(what, url, schema, &mine, &Resume::default())?;
        entries.idle_returns = true;
        consumers.push(Box::new(entries));
    }
    Ok(consumers)
}

/// The last entry ID a consumer group has delivered, from an XINFO GROUPS reply (RESP2 arrays
/// of fields and values, or RESP3 maps).
#[cfg(feature = "scale")]
fn last_delivered(reply: &redis::Value, group: &str) -> Option<String> {
    let redis::Value::Array(groups) = reply else {
        return None;
    };
    groups.iter().find_map(|g| {
        let pairs: Vec<(Option<String>, &redis::Value)> = match g {
            redis::Value::Array(kv) => kv
                .chunks(2)
                .filter_map(|p| match p {
                    [k, v] => Some((text(k), v)),
                    _ => None,
                })
                .collect(),
            redis::Value::Map(kv) => kv.iter().map(|(k, v)| (text(k), v)).collect(),
            _ => return None,
        };
        let field = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k.as_deref() == Some(name))
                .and_then(|(_, v)| text(v))
        };
        (field("name").as_deref() == Some(group)).then(|| field("last-delivered-id"))?
    })
}

#[cfg(feature = "scale")]
impl super::Consumer for EntryReader {
    fn poll(&mut self, row: &mut [Option<Value>]) -> Result<super::Polled, TraceError> {
        if self.buffered.is_empty() {
            match self.fetch()? {
                Fetched::Got => {}
                Fetched::End => return Ok(super::Polled::End),
                Fetched::Idle => return Ok(super::Polled::Idle),
            }
        }
        match self.next_row(row)? {
            true => Ok(super::Polled::Row),
            false => Ok(super::Polled::End),
        }
    }

    fn delivered(&mut self) -> Result<Option<Time>, TraceError> {
        let Some(g) = &self.group else {
            return Ok(None);
        };
        loop {
            let con = reconnected(&mut self.con, &self.client, &mut self.backoff, &self.what);
            let reply: Result<redis::Value, RedisError> = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(&self.stream)
                .query(con);
            match reply {
                Ok(reply) => return Ok(last_delivered(&reply, &g.name).and_then(|id| id_time(&id))),
                Err(e) if lost(&e) => {
                    self.con = None;
                    self.backoff.failed(&self.what, &e);
                }
                Err(e) => return Err(self.io_error(e.to_string())),
            }
        }
    }
}

/// The connection `con`, made again (waiting with `backoff`, which says so) while it is lost.
fn reconnected<'a>(
    con: &'a mut Option<Connection>,
    client: &Client,
    backoff: &mut Backoff,
    what: &str,
) -> &'a mut Connection {
    while con.is_none() {
        match connect(client) {
            Ok(c) => {
                backoff.connected(what);
                *con = Some(c);
            }
            Err(e) => backoff.failed(what, &e),
        }
    }
    con.as_mut().expect("connected above")
}

/// Makes consumer group `name` of `stream` (and the stream) unless it exists.
fn make_group(con: &mut Connection, stream: &str, name: &str) -> Result<(), RedisError> {
    let made: Result<(), RedisError> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg(name)
        .arg("0")
        .arg("MKSTREAM")
        .query(con);
    match made {
        Err(e) if e.code() != Some("BUSYGROUP") => Err(e),
        _ => Ok(()),
    }
}

impl EntryReader {
    /// Reads the next batch into `buffered`: `Fetched::End` at the end (`--drain`), and, for
    /// a consumer sharing its group with others (`idle_returns`), `Fetched::Idle` when nothing
    /// came within a short block.
    fn fetch(&mut self) -> Result<Fetched, TraceError> {
        loop {
            let con = reconnected(&mut self.con, &self.client, &mut self.backoff, &self.what);
            let mut cmd;
            match &self.group {
                Some(g) => {
                    cmd = redis::cmd("XREADGROUP");
                    cmd.arg("GROUP").arg(&g.name).arg(&g.consumer);
                }
                None => cmd = redis::cmd("XREAD"),
            }
            cmd.arg("COUNT").arg(BATCH);
            let history = self.group.as_ref().is_some_and(|g| g.history);
            if !self.drain && !history {
                let block = if self.idle_returns {
                    SHARE_BLOCK_MS
                } else {
                    BLOCK_MS
                };
                cmd.arg("BLOCK").arg(block);
            }
            cmd.arg("STREAMS").arg(&self.stream);
            match &self.group {
                Some(g) if !g.history => cmd.arg(">"),
                _ => cmd.arg(&self.fetched),
            };
            let reply: redis::Value = match cmd.query(con) {
                Ok(r) => r,
                Err(e) if lost(&e) => {
                    self.con = None;
                    self.backoff.failed(&self.what, &e);
                    continue;
                }
                // The group is gone (a server restarted without its data):
                // made again, it reads on from the stream's start.
                Err(e) if e.code() == Some("NOGROUP") && self.group.is_some() => {
                    let name = self.group.as_ref().map_or("", |g| g.name.as_str());
                    (self.backoff.notify)(Notice::GroupRemade {
                        what: self.what.clone(),
                        group: name.to_string(),
                    });
                    make_group(con, &self.stream, name)
                        .map_err(|e| self.io_error(e.to_string()))?;
                    continue;
                }
                Err(e) => return Err(self.io_error(e.to_string())),
            };
            let got = entries(reply).map_err(|m| self.io_error(m))?;
            if got.is_empty() {
                match &mut self.group {
                    // The consumer's history is read: on to new entries.
                    Some(g) if g.history => g.history = false,
                    _ if self.drain => return Ok(Fetched::End),
                    _ if self.idle_returns => return Ok(Fetched::Idle),
                    _ => {}
                }
                continue;
            }
            if let Some(last) = got.last() {
                self.fetched = last.id.clone();
            }
            self.buffered.extend(got);
            return Ok(Fetched::Got);
        }
    }

    fn io_error(&self, message: String) -> TraceError {
        TraceError {
            kind: TraceErrorKind::Io,
            ..self.rows.error(self.number.max(1), message)
        }
    }

    /// Acknowledges the group's entries returned so far.
    fn ack(&mut self) {
        let (Some(g), Some(con)) = (&mut self.group, &mut self.con) else {
            return;
        };
        if g.unacked.is_empty() {
            return;
        }
        let acked: Result<i64, RedisError> = redis::cmd("XACK")
            .arg(&self.stream)
            .arg(&g.name)
            .arg(&g.unacked)
            .query(con);
        // An acknowledgement lost with the connection is repeated with the
        // next; the entries stay pending until then, never lost.
        if acked.is_ok() {
            g.unacked.clear();
        }
    }
}

impl RowReader for EntryReader {
    fn next_row(&mut self, row: &mut [Option<Value>]) -> Result<bool, TraceError> {
        self.after_error = false;
        let (id, fields) = loop {
            // (A consumer polls for rows: an idle fetch here only waits on.)
            if self.buffered.is_empty() && self.fetch()? == Fetched::End {
                return Ok(false);
            }
            let entry = self.buffered.pop_front().expect("fetched a batch");
            self.token = Some(entry.id.clone());
            if let Some(g) = &mut self.group {
                g.unacked.push(entry.id.clone());
                if g.on_read {
                    self.ack();
                }
            }
            // A deleted entry is no row (it is acknowledged with the next).
            if let Some(fields) = entry.fields {
                break (entry.id, fields);
            }
        };
        self.number += 1;
        self.stamp = id_time(&id);
        // The entry is consumed whatever it holds: a malformed one can be
        // skipped (`--on-malformed`).
        self.after_error = true;
        row.fill(None);
        for (field, bytes) in &fields {
            let Some(i) = self.rows.lookup(field) else {
                continue;
            };
            if row[i].is_some() {
                return Err(self.rows.error(
                    self.number,
                    format!("entry {id}: field `{field}` appears twice"),
                ));
            }
            let text = std::str::from_utf8(bytes).map_err(|_| {
                self.rows.error(
                    self.number,
                    format!("entry {id}: field `{field}` is not UTF-8 text"),
                )
            })?;
            let value = self
                .rows
                .cell(i, text, self.number)
                .map_err(|e| TraceError {
                    message: format!("entry {id}: {}", e.message),
                    ..e
                })?;
            row[i] = Some(value);
        }
        self.after_error = false;
        Ok(true)
    }

    fn can_continue(&self) -> bool {
        self.after_error
    }

    fn stamp(&self) -> Option<Time> {
        self.stamp
    }

    fn resume_token(&self) -> Option<String> {
        self.token.clone()
    }

    fn commit(&mut self) {
        self.ack();
    }

    fn row_ready(&mut self) -> bool {
        !self.buffered.is_empty()
    }
}

/// One step's entry waiting to be sent: its number and fields.
struct Pending {
    seq: u64,
    fields: Vec<(String, Vec<u8>)>,
}

/// `--output redis://…`.
pub struct Appender {
    what: String,
    client: Client,
    con: Option<Connection>,
    stream: String,
    names: Vec<String>,
    /// The key input's name (a keyed run).
    key: Option<String>,
    pending: Vec<Pending>,
    /// Entries written so far (the next one's `seq`).
    written: u64,
    /// Entries below this number are in the stream already (a resumed run
    /// evaluating again the rows after its checkpoint): not sent again.
    stored: u64,
    backoff: Backoff,
}

impl Appender {
    pub fn open(
        what: &str,
        url: &Url,
        names: Vec<String>,
        options: &Options,
        resume: &Resume,
    ) -> Result<Appender, String> {
        let client = client(what, url)?;
        let mut con =
            connect(&client).map_err(|e| format!("--output {what}: cannot connect: {e}"))?;
        let written = resume.written.unwrap_or(0);
        let mut stored = written;
        if resume.written.is_some() {
            let last = last_seq(&mut con, &url.path)
                .map_err(|e| format!("--output {what}: cannot read the stream's end: {e}"))?;
            stored = stored.max(last.map_or(0, |s| s + 1));
        }
        Ok(Appender {
            what: what.to_string(),
            client,
            con: Some(con),
            stream: url.path.clone(),
            names,
            key: options.key.clone(),
            pending: Vec::new(),
            written,
            stored,
            backoff: Backoff::new(options.notify.clone()),
        })
    }

    fn push(&mut self, step: u64, key: Option<&Key>, samples: &[Sample]) -> io::Result<()> {
        let seq = self.written;
        self.written += 1;
        if seq < self.stored {
            return Ok(());
        }
        let mut fields = Vec::with_capacity(samples.len() + 3);
        fields.push(("seq".to_string(), seq.to_string().into_bytes()));
        fields.push(("step".to_string(), step.to_string().into_bytes()));
        if let (Some(name), Some(k)) = (&self.key, key) {
            fields.push((name.clone(), crate::trace::cell_text(k.value())));
        }
        for (name, sample) in self.names.iter().zip(samples) {
            match sample {
                Sample::NoVal => {}
                Sample::Deferred => fields.push((name.clone(), b"null".to_vec())),
                Sample::Value(v) => fields.push((name.clone(), crate::trace::cell_text(v))),
            }
        }
        self.pending.push(Pending { seq, fields });
        if self.pending.len() >= PENDING {
            self.send()?;
        }
        Ok(())
    }

    /// Sends the pending entries in one pipeline, waiting out a lost
    /// connection (after which entries the stream got are not sent again).
    fn send(&mut self) -> io::Result<()> {
        while !self.pending.is_empty() {
            let con = match &mut self.con {
                Some(c) => c,
                None => match connect(&self.client) {
                    Ok(mut c) => {
                        // The batch may have landed before the connection
                        // went: drop what the stream has.
                        match last_seq(&mut c, &self.stream) {
                            Ok(Some(last)) => self.pending.retain(|p| p.seq > last),
                            Ok(None) => {}
                            Err(e) => {
                                self.backoff.failed(&self.what, &e);
                                continue;
                            }
                        }
                        self.backoff.connected(&self.what);
                        self.con.insert(c)
                    }
                    Err(e) => {
                        self.backoff.failed(&self.what, &e);
                        continue;
                    }
                },
            };
            let mut pipe = redis::pipe();
            for p in &self.pending {
                let cmd = pipe.cmd("XADD").arg(&self.stream).arg("*");
                for (f, v) in &p.fields {
                    cmd.arg(f).arg(v);
                }
                cmd.ignore();
            }
            match pipe.query::<()>(con) {
                Ok(()) => self.pending.clear(),
                Err(e) if lost(&e) => {
                    self.con = None;
                    self.backoff.failed(&self.what, &e);
                }
                Err(e) => {
                    return Err(io::Error::other(format!("{}: {e}", self.what)));
                }
            }
        }
        Ok(())
    }
}

/// Alert lines XADDed to the alerts stream `STREAM:alerts` of a run whose outputs go to Redis
/// stream `STREAM`: one entry per alert, its field `alert` the JSON line (the alert schema's),
/// sent with each flush. At least once, as MQTT's alerts: a resumed run sends again the alerts
/// of the rows it evaluates again.
pub struct AlertLines {
    what: String,
    client: Client,
    con: Option<Connection>,
    stream: String,
    line: Vec<u8>,
    pending: Vec<Vec<u8>>,
    backoff: Backoff,
}

impl AlertLines {
    pub fn open(what: &str, url: &Url, options: &Options) -> Result<AlertLines, String> {
        let client = client(what, url)?;
        let con = connect(&client).map_err(|e| format!("--output {what}: cannot connect: {e}"))?;
        Ok(AlertLines {
            what: format!("{what} (alerts)"),
            client,
            con: Some(con),
            stream: alerts_stream(&url.path),
            line: Vec::new(),
            pending: Vec::new(),
            backoff: Backoff::new(options.notify.clone()),
        })
    }

    /// Sends the pending alerts in one pipeline, waiting out a lost
    /// connection (and sending them again after it: at least once).
    fn send(&mut self) -> io::Result<()> {
        while !self.pending.is_empty() {
            let con = reconnected(&mut self.con, &self.client, &mut self.backoff, &self.what);
            let mut pipe = redis::pipe();
            for line in &self.pending {
                pipe.cmd("XADD")
                    .arg(&self.stream)
                    .arg("*")
                    .arg("alert")
                    .arg(line)
                    .ignore();
            }
            match pipe.query::<()>(con) {
                Ok(()) => self.pending.clear(),
                Err(e) if lost(&e) => {
                    self.con = None;
                    self.backoff.failed(&self.what, &e);
                }
                Err(e) => return Err(io::Error::other(format!("{}: {e}", self.what))),
            }
        }
        Ok(())
    }
}

/// The stream a run writing its outputs to `stream` writes its alerts to.
pub fn alerts_stream(stream: &str) -> String {
    format!("{stream}:alerts")
}

impl io::Write for AlertLines {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        for &b in bytes {
            if b == b'\n' {
                let line = std::mem::take(&mut self.line);
                self.pending.push(line);
                if self.pending.len() >= PENDING {
                    self.send()?;
                }
            } else {
                self.line.push(b);
            }
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

impl Drop for AlertLines {
    fn drop(&mut self) {
        // What is pending goes out with the run's end (a lost broker is
        // said and waited for, as with every flush).
        let _ = self.send();
    }
}

/// The `seq` field of the stream's last entry, if it has one.
fn last_seq(con: &mut Connection, stream: &str) -> Result<Option<u64>, RedisError> {
    let reply: redis::Value = redis::cmd("XREVRANGE")
        .arg(stream)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query(con)?;
    // XREVRANGE's reply is a list of entries, as one stream of XREAD's.
    let wrapped = redis::Value::Array(vec![redis::Value::Array(vec![redis::Value::Nil, reply])]);
    let last = entries(wrapped).ok().and_then(|mut e| e.pop());
    Ok(last.and_then(|e| {
        e.fields?
            .iter()
            .find(|(f, _)| f == "seq")
            .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse().ok())
    }))
}

impl OutputWriter for Appender {
    fn write_step(&mut self, step: u64, samples: &[Sample]) -> io::Result<()> {
        self.push(step, None, samples)
    }

    fn write_keyed(&mut self, step: u64, key: &Key, samples: &[Sample]) -> io::Result<()> {
        self.push(step, Some(key), samples)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }

    fn entries_written(&self) -> Option<u64> {
        Some(self.written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value as V;

    fn bulk(s: &str) -> V {
        V::BulkString(s.as_bytes().to_vec())
    }

    #[cfg(feature = "scale")]
    #[test]
    fn a_groups_last_delivered_entry_is_read_in_either_protocol() {
        let group = |name: &str, last: &str| {
            vec![
                (bulk("name"), bulk(name)),
                (bulk("consumers"), V::Int(2)),
                (bulk("last-delivered-id"), bulk(last)),
            ]
        };
        let resp2 = V::Array(
            [group("a", "1-1"), group("b", "7-3")]
                .into_iter()
                .map(|g| V::Array(g.into_iter().flat_map(|(k, v)| [k, v]).collect()))
                .collect(),
        );
        let resp3 = V::Array(vec![V::Map(group("a", "1-1")), V::Map(group("b", "7-3"))]);
        for reply in [resp2, resp3] {
            assert_eq!(last_delivered(&reply, "b").as_deref(), Some("7-3"));
            assert_eq!(last_delivered(&reply, "a").as_deref(), Some("1-1"));
            assert_eq!(last_delivered(&reply, "c"), None);
        }
        assert_eq!(last_delivered(&V::Nil, "a"), None);
    }

    #[test]
    fn replies_give_entries_in_either_protocol() {
        let entry = |id: &str, kv: &[&str]| {
            V::Array(vec![
                bulk(id),
                V::Array(kv.iter().map(|s| bulk(s)).collect()),
            ])
        };
        let items = V::Array(vec![
            entry("1-0", &["x", "1"]),
            entry("2-5", &["x", "2", "y", "a"]),
        ]);
        let want = vec![
            Entry {
                id: "1-0".into(),
                fields: Some(vec![("x".into(), b"1".to_vec())]),
            },
            Entry {
                id: "2-5".into(),
                fields: Some(vec![
                    ("x".into(), b"2".to_vec()),
                    ("y".into(), b"a".to_vec()),
                ]),
            },
        ];
        let resp2 = V::Array(vec![V::Array(vec![bulk("s"), items.clone()])]);
        assert_eq!(entries(resp2).unwrap(), want);
        let resp3 = V::Map(vec![(bulk("s"), items)]);
        assert_eq!(entries(resp3).unwrap(), want);
        assert_eq!(entries(V::Nil).unwrap(), vec![]);
        // A deleted entry in a consumer's history has no fields.
        let gone = V::Array(vec![V::Array(vec![
            bulk("s"),
            V::Array(vec![V::Array(vec![bulk("3-0"), V::Nil])]),
        ])]);
        assert_eq!(entries(gone).unwrap()[0].fields, None);
        assert!(entries(V::Int(3)).is_err());
    }

    #[test]
    fn entry_ids_are_times_in_order() {
        assert_eq!(
            id_time("1700000000000-0"),
            Some(Time(1_700_000_000_000_000_000))
        );
        assert!(id_time("5-1") > id_time("5-0"));
        assert!(id_time("6-0") > id_time("5-999999999"));
        assert_eq!(id_time("x-1"), None);
        assert_eq!(id_time("12"), None);
    }
}
