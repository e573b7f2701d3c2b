//! MQTT sources and sinks (rumqttc): topics per stream or one topic of row objects.
//!
//! **Source.** By default each declared input subscribes to `PREFIX/NAME` (a `--mqtt-topics`
//! file maps other topics, or topic filters, to inputs) and a message's payload is the input's
//! value as JSON, read by the JSON-lines rule; with `--mqtt-rows TOPIC` one topic carries row
//! objects, read as JSON lines are. An empty message ends its topic, and the source ends when
//! all its topics have. Each message is stamped when it arrives; with `--time F`, a row object's
//! field `F`, or a per-input payload `{"F": time, "value": v}`, is its time instead. Without
//! `--time`, one reader takes every topic's messages in arrival order; with it, each topic is a
//! source of its own (publishers' clocks, not arrival, order them), merged by time.
//!
//! One thread per connection drives rumqttc's event loop. It subscribes again after every
//! reconnect (a restarted broker forgets subscriptions); messages published while vigil was
//! away are the broker's to keep or drop (QoS, sessions), and none is invented.
//!
//! With `--group G` (`Options::share`) the source subscribes to `$share/G/FILTER`, one member
//! of a shared subscription; `open_members` gives a scaled run one member per worker, their
//! arrivals stamped from one clock.
//!
//! **Sink.** Each step's output values go to `PREFIX/NAME` (`PREFIX/NAME/KEY` in a keyed run),
//! or one row object per step to `PREFIX/TOPIC` with `--mqtt-output-rows`; alerts to
//! `PREFIX/alerts`.
//! Publications queue while the broker is away and go out when it is back (those the broker had
//! not acknowledged when it went are sent again, even to a restarted broker that forgot the
//! session: at least once at QoS 1 and 2); the queue is bounded, so a long outage holds the
//! monitor back rather than filling memory.

use super::{Arrivals, Backoff, Options, Url};
use crate::notice::{Notice, Notify};
use crate::time::Time;
use crate::trace::{
    InputSchema, ObjectRows, OutputFormat, OutputWriter, RowReader, TraceError, TraceErrorKind,
};
use crate::value::{Key, Sample, Value};
use rumqttc::{Client, Connection, Event, MqttOptions, Outgoing, Packet, QoS};
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Messages queued for the monitor per source (the event loop waits when
/// the monitor is this far behind).
const QUEUED: usize = 4096;

/// Publications queued for the broker.
const OUTGOING: usize = 4096;

/// How long opening waits for the broker's first answer.
const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// How long a finished run waits for its last publications to leave.
const DRAIN_WAIT: Duration = Duration::from_secs(10);

fn qos(level: u8) -> QoS {
    match level {
        0 => QoS::AtMostOnce,
        1 => QoS::AtLeastOnce,
        _ => QoS::ExactlyOnce,
    }
}

/// `PREFIX/name`, or `name` without a prefix.
fn topic(prefix: &str, name: &str) -> String {
    match prefix.trim_end_matches('/') {
        "" => name.to_string(),
        p => format!("{p}/{name}"),
    }
}

/// A key as one topic level: `%`, `/`, `+`, `#` and NUL percent-encoded,
/// so that any key value makes a valid topic of exactly one level.
fn topic_level(key: &str) -> String {
    let mut level = String::with_capacity(key.len());
    for c in key.chars() {
        match c {
            '%' | '/' | '+' | '#' | '\0' => level.push_str(&format!("%{:02X}", c as u32)),
            c => level.push(c),
        }
    }
    level
}

/// The largest message vigil sends or takes (the client refuses larger ones
/// and brokers' limits are lower anyway).
const MAX_MESSAGE: usize = 16 << 20;

/// A client id no other run shares.
fn client_id(role: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("vigil-{}-{role}-{n}", std::process::id())
}

fn connection(url: &Url, role: &str, cap: usize, level: QoS) -> (Client, Connection) {
    let mut options = MqttOptions::new(client_id(role), url.host.clone(), url.port);
    options.set_keep_alive(Duration::from_secs(10));
    if let Some((user, password)) = &url.login {
        options.set_credentials(user.clone(), password.clone());
    }
    // Rows can be large (containers); the broker bounds them anyway.
    options.set_max_packet_size(MAX_MESSAGE, MAX_MESSAGE);
    // Publications awaiting the broker's acknowledgement: MQTT 3.1.1 does
    // not negotiate it, and mosquitto drops a client with more than its
    // `max_inflight_messages` (20 by default) QoS 2 publications unreleased.
    if level == QoS::ExactlyOnce {
        options.set_inflight(20);
    }
    Client::new(options, cap)
}

/// What the topics of a source carry.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Carries {
    /// Row objects.
    Rows,
    /// The values of one input.
    Input(String),
}

/// A subscription: a topic filter, what it carries and the source (reader)
/// its messages go to.
#[derive(Clone, Debug)]
struct Route {
    filter: String,
    carries: Carries,
    source: usize,
}

/// Reads a `--mqtt-topics` file: `TOPIC INPUT` per line, `#` comments.
fn topic_map(path: &str, schema: &InputSchema) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{path}`: {e}"))?;
    let mut map = Vec::new();
    for (n, line) in text.lines().enumerate() {
        // A comment starts with a `#` word (a filter's `#` is inside one).
        let line = match line.trim_start().starts_with('#') {
            true => "",
            false => line.split_once(" #").map_or(line, |(l, _)| l).trim(),
        };
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(topic), Some(input), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!(
                "{path}:{}: expected `TOPIC INPUT` (a topic or topic filter, then a declared input)",
                n + 1
            ));
        };
        if !rumqttc::valid_filter(topic) {
            return Err(format!("{path}:{}: `{topic}` is not a topic filter", n + 1));
        }
        if !schema.names.iter().any(|i| i == input) {
            return Err(format!(
                "{path}:{}: `{input}` is not a declared input (inputs: {})",
                n + 1,
                schema.names.join(", ")
            ));
        }
        map.push((topic.to_string(), input.to_string()));
    }
    Ok(map)
}

/// The subscriptions of a source and how many readers they feed.
fn routes(url: &Url, schema: &InputSchema, options: &Options) -> Result<Vec<Route>, String> {
    if let Some(rows) = &options.mqtt_rows {
        if options.mqtt_topics.is_some() {
            return Err("--mqtt-rows and --mqtt-topics do not go together: one topic carries whole rows, or topics carry inputs".into());
        }
        return Ok(vec![Route {
            filter: topic(&url.path, rows),
            carries: Carries::Rows,
            source: 0,
        }]);
    }
    let mapped = match &options.mqtt_topics {
        Some(path) => topic_map(path, schema)?,
        None => Vec::new(),
    };
    // Every field of the rows (the declared inputs and `--pass` fields) has
    // a topic: a mapped one, else its own; the time field has none (it
    // comes with each value).
    let declared = schema
        .names
        .iter()
        .enumerate()
        .filter(|(i, _)| options.time.as_ref().is_none_or(|(_, cell)| cell != i))
        .map(|(_, n)| n);
    let mut pairs = mapped.clone();
    for name in declared {
        if !mapped.iter().any(|(_, i)| i == name) {
            pairs.push((topic(&url.path, name), name.clone()));
        }
    }
    let split = options.time.is_some();
    Ok(pairs
        .into_iter()
        .enumerate()
        .map(|(k, (filter, input))| Route {
            filter,
            carries: Carries::Input(input),
            source: if split { k } else { 0 },
        })
        .collect())
}

/// What the event loop hands a reader.
enum Delivery {
    /// A message as a row object's text, and its arrival.
    Row(String, Time),
    /// A message that is not text.
    Bad(String, Time),
    /// Every topic of the source has ended.
    End,
    /// The source cannot go on.
    Failed(String),
}

/// The row object text of a message on a topic carrying `input`: the
/// payload is the value, or, with a time field `time`, an object of it and
/// `value` is the stamped value. A payload that is not exactly one JSON
/// value is refused (pasted into the row, `1, "y": 2` would set another
/// input).
fn input_row(input: &str, payload: &str, time: Option<&str>) -> Result<String, String> {
    serde_json::from_str::<&serde_json::value::RawValue>(payload)
        .map_err(|e| format!("the message is not one JSON value ({e})"))?;
    let key = serde_json::to_string(input).unwrap_or_default();
    if let Some(field) = time
        && let Ok(map) = serde_json::from_str::<
            std::collections::BTreeMap<String, &serde_json::value::RawValue>,
        >(payload)
        && map.len() == 2
        && let (Some(t), Some(v)) = (map.get(field), map.get("value"))
    {
        let field = serde_json::to_string(field).unwrap_or_default();
        return Ok(format!("{{{key}:{},{field}:{}}}", v.get(), t.get()));
    }
    Ok(format!("{{{key}:{payload}}}"))
}

/// Opens an MQTT source: connects, subscribes, and returns once the broker
/// has confirmed the subscriptions (so that whatever is published after
/// this is seen), with one reader per source.
pub fn open_input(
    name: &str,
    url: &Url,
    schema: &InputSchema,
    options: &Options,
) -> Result<Vec<super::Source>, String> {
    let routes = routes(url, schema, options)?;
    let listening = listen(name, url, schema, options, routes, Arc::default())?;
    Ok((listening.readers.into_iter())
        .map(|(name, reader)| super::Source {
            name,
            reader: Box::new(reader),
        })
        .collect())
}

/// A connection's event loop started: its readers (one per source, with their names), and
/// the flag its listener raises while it stamps and queues a message.
struct Listening {
    readers: Vec<(String, MessageReader)>,
    // (Read by a scaled run's members only.)
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    busy: Arc<AtomicBool>,
}

/// Connects and subscribes to `routes` (as a member of `options.share`'s group, if given),
/// stamping arrivals with `arrivals`; returns once the broker confirmed the subscriptions.
fn listen(
    name: &str,
    url: &Url,
    schema: &InputSchema,
    options: &Options,
    routes: Vec<Route>,
    arrivals: Arc<Arrivals>,
) -> Result<Listening, String> {
    let sources = routes.iter().map(|r| r.source).max().map_or(0, |m| m + 1);
    let mut senders = Vec::new();
    let mut readers = Vec::new();
    for s in 0..sources {
        let (tx, rx) = sync_channel(QUEUED);
        senders.push(tx);
        // A source of its own per topic is named after it.
        let source_name = match routes.iter().filter(|r| r.source == s).collect::<Vec<_>>()[..] {
            [only] if sources > 1 => format!("{name} ({})", only.filter),
            _ => name.to_string(),
        };
        let reader = MessageReader {
            rows: ObjectRows::new(&source_name, schema),
            rx,
            next: None,
            number: 0,
            stamp: None,
            after_error: false,
        };
        readers.push((source_name, reader));
    }
    let (client, connection) = connection(url, "in", 64, qos(options.qos));
    let (ready_tx, ready_rx) = sync_channel(1);
    let busy = Arc::new(AtomicBool::new(false));
    let listener = Listener {
        what: name.to_string(),
        client,
        routes,
        share: options.share.clone(),
        senders,
        qos: qos(options.qos),
        time: options.time.as_ref().map(|(f, _)| f.clone()),
        ready: Some(ready_tx),
        notify: options.notify.clone(),
        arrivals,
        busy: Arc::clone(&busy),
    };
    std::thread::spawn(move || listener.run(connection));
    match ready_rx.recv_timeout(CONNECT_WAIT) {
        Ok(Ok(topics)) => {
            (options.notify)(Notice::Subscribed {
                what: name.to_string(),
                topics,
            });
            Ok(Listening { readers, busy })
        }
        Ok(Err(e)) => Err(format!("--input {name}: cannot connect: {e}")),
        Err(_) => Err(format!(
            "--input {name}: the broker did not answer within {} s",
            CONNECT_WAIT.as_secs()
        )),
    }
}

/// The event loop of a source's connection.
struct Listener {
    what: String,
    client: Client,
    routes: Vec<Route>,
    /// The shared subscription's group the routes are subscribed in, if any.
    share: Option<String>,
    senders: Vec<SyncSender<Delivery>>,
    qos: QoS,
    time: Option<String>,
    /// Told once the first subscriptions are confirmed (or the first
    /// connection failed): the topics, or the error.
    ready: Option<SyncSender<Result<String, String>>>,
    notify: Notify,
    /// The stamps of arrivals (shared by a group's members in one process).
    arrivals: Arc<Arrivals>,
    /// Raised while a message is stamped and queued (`Member::delivered` reads it).
    busy: Arc<AtomicBool>,
}

impl Listener {
    /// The filter subscribed to for `route`: a member of a shared subscription's group
    /// subscribes to `$share/GROUP/FILTER`.
    fn subscription(&self, route: &Route) -> String {
        match &self.share {
            Some(group) => format!("$share/{group}/{}", route.filter),
            None => route.filter.clone(),
        }
    }

    fn run(mut self, mut connection: Connection) {
        let mut backoff = Backoff::new(self.notify.clone());
        let mut ended = vec![false; self.routes.len()];
        loop {
            let event = match connection.recv() {
                Ok(event) => event,
                // Every client handle is gone: the run is over.
                Err(_) => return,
            };
            match event {
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    // A new connection has no subscriptions: make them.
                    let filters = (self.routes.iter())
                        .map(|r| rumqttc::SubscribeFilter::new(self.subscription(r), self.qos));
                    if self.client.try_subscribe_many(filters).is_err() {
                        return;
                    }
                }
                Ok(Event::Incoming(Packet::SubAck(ack))) => {
                    let refused: Vec<String> = (ack.return_codes.iter().zip(&self.routes))
                        .filter(|(c, _)| matches!(c, rumqttc::SubscribeReasonCode::Failure))
                        .map(|(_, r)| self.subscription(r))
                        .collect();
                    if !refused.is_empty() {
                        let why = format!(
                            "the broker refused the subscription to {}",
                            refused.join(", ")
                        );
                        match self.ready.take() {
                            Some(ready) => {
                                let _ = ready.send(Err(why));
                            }
                            None => {
                                for tx in &self.senders {
                                    let _ = tx.send(Delivery::Failed(why.clone()));
                                }
                            }
                        }
                        return;
                    }
                    backoff.connected(&self.what);
                    if let Some(ready) = self.ready.take() {
                        let topics: Vec<String> =
                            self.routes.iter().map(|r| self.subscription(r)).collect();
                        let _ = ready.send(Ok(topics.join(", ")));
                    }
                }
                Ok(Event::Incoming(Packet::Publish(p))) => {
                    // Raised from before the stamp until the message is queued: a member
                    // sees from it whether a message stamped so far may not be queued yet.
                    self.busy.store(true, Ordering::SeqCst);
                    let stamp = self.arrivals.stamp();
                    let open = self.deliver(&p.topic, &p.payload, stamp, &mut ended);
                    self.busy.store(false, Ordering::SeqCst);
                    if !open {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    // The first connection failing is a usage error; a
                    // later loss is waited out.
                    if let Some(ready) = self.ready.take() {
                        let _ = ready.send(Err(e.to_string()));
                        return;
                    }
                    backoff.failed(&self.what, &e);
                }
            }
        }
    }

    /// Hands a message to its source's reader; `false` once no reader is
    /// left to hand messages to.
    fn deliver(&mut self, topic: &str, payload: &[u8], stamp: Time, ended: &mut [bool]) -> bool {
        let Some(r) = self
            .routes
            .iter()
            .position(|r| rumqttc::matches(topic, &r.filter))
        else {
            return true;
        };
        let route = &self.routes[r];
        let tx = &self.senders[route.source];
        if ended[r] {
            return true;
        }
        if payload.is_empty() {
            ended[r] = true;
            let source = route.source;
            let all = self
                .routes
                .iter()
                .zip(ended.iter())
                .filter(|(r, _)| r.source == source)
                .all(|(_, e)| *e);
            if all {
                let _ = tx.send(Delivery::End);
            }
            return self.any_open(ended);
        }
        let delivery = match std::str::from_utf8(payload) {
            Err(_) => Delivery::Bad(format!("the message on `{topic}` is not UTF-8 text"), stamp),
            Ok(text) => match &route.carries {
                Carries::Rows => Delivery::Row(text.to_string(), stamp),
                Carries::Input(input) => match input_row(input, text, self.time.as_deref()) {
                    Ok(row) => Delivery::Row(row, stamp),
                    Err(why) => Delivery::Bad(format!("`{topic}`: {why}"), stamp),
                },
            },
        };
        // A reader gone (its source failed, or the run stopped) takes no
        // more; the others go on.
        if tx.send(delivery).is_err() {
            ended[r] = true;
        }
        self.any_open(ended)
    }

    fn any_open(&self, ended: &[bool]) -> bool {
        ended.iter().any(|e| !e)
    }
}

/// A source's rows, as the event loop delivers them.
struct MessageReader {
    rows: ObjectRows,
    rx: Receiver<Delivery>,
    /// A delivery taken to see whether one was there.
    next: Option<Delivery>,
    /// Messages read (an error's "line").
    number: usize,
    stamp: Option<Time>,
    after_error: bool,
}

impl RowReader for MessageReader {
    fn next_row(&mut self, row: &mut [Option<Value>]) -> Result<bool, TraceError> {
        let delivery = match self.next.take() {
            Some(d) => d,
            None => self.rx.recv().unwrap_or(Delivery::End),
        };
        self.after_error = false;
        match delivery {
            Delivery::End => Ok(false),
            Delivery::Failed(message) => Err(TraceError {
                kind: TraceErrorKind::Io,
                ..self.rows.error(self.number.max(1), message)
            }),
            Delivery::Bad(message, stamp) => {
                self.number += 1;
                self.stamp = Some(stamp);
                self.after_error = true;
                Err(self.rows.error(self.number, message))
            }
            Delivery::Row(text, stamp) => {
                self.number += 1;
                self.stamp = Some(stamp);
                self.after_error = true;
                self.rows.read(&text, self.number, row)?;
                self.after_error = false;
                Ok(true)
            }
        }
    }

    fn can_continue(&self) -> bool {
        self.after_error
    }

    fn stamp(&self) -> Option<Time> {
        self.stamp
    }

    fn row_ready(&mut self) -> bool {
        if self.next.is_none() {
            self.next = self.rx.try_recv().ok();
        }
        self.next.is_some()
    }
}

/// How long a member of a shared subscription waits for a message before it says it has none
/// for now: the other members' rows wait on its frontier no longer than this.
#[cfg(feature = "scale")]
const MEMBER_WAIT: Duration = Duration::from_millis(20);

/// `count` members of a shared subscription (`options.share`) in this process, one per
/// worker, or `None` where the source is several readers (a topic per input with `--time`):
/// the feed reads those.
///
/// The broker gives each message to one member; MQTT keeps no order between the members, so
/// the rows are taken in the order they reached this process: every member's listener stamps
/// its arrivals from one clock ([`Arrivals`]), and the run orders the rows by their stamps.
/// A publisher's messages that the broker gives to different members can then change places
/// when they arrive within a few microseconds of each other; a key's rows keep their order
/// where the broker gives each publisher's messages to one member (EMQX's `hash_clientid`
/// and `hash_topic` strategies) and the key is the publisher's. An empty message ends the
/// source for every member here: each ends once it has been idle for [`MEMBER_WAIT`] after
/// it, so the messages the broker gave the others before it are still taken.
#[cfg(feature = "scale")]
pub(crate) fn open_members(
    name: &str,
    url: &Url,
    schema: &InputSchema,
    options: &Options,
    count: usize,
) -> Result<Option<Vec<Box<dyn super::Consumer>>>, String> {
    let routes = routes(url, schema, options)?;
    if routes.iter().any(|r| r.source != 0) {
        return Ok(None);
    }
    let arrivals = Arc::new(Arrivals::default());
    let ended = Arc::new(AtomicBool::new(false));
    let mut members: Vec<Box<dyn super::Consumer>> = Vec::with_capacity(count);
    for _ in 0..count {
        let listening = listen(
            name,
            url,
            schema,
            options,
            routes.clone(),
            Arc::clone(&arrivals),
        )?;
        let Some((_, reader)) = listening.readers.into_iter().next() else {
            return Ok(None);
        };
        members.push(Box::new(Member {
            reader,
            arrivals: Arc::clone(&arrivals),
            busy: listening.busy,
            ended: Arc::clone(&ended),
        }));
    }
    Ok(Some(members))
}

/// A member of a shared subscription read by one worker (`open_members`).
#[cfg(feature = "scale")]
struct Member {
    reader: MessageReader,
    /// The clock its listener and the other members' stamp arrivals with.
    arrivals: Arc<Arrivals>,
    /// Raised while its listener stamps and queues a message.
    busy: Arc<AtomicBool>,
    /// Raised by the member given the empty message that ends the source.
    ended: Arc<AtomicBool>,
}

#[cfg(feature = "scale")]
impl RowReader for Member {
    fn next_row(&mut self, row: &mut [Option<Value>]) -> Result<bool, TraceError> {
        self.reader.next_row(row)
    }

    fn can_continue(&self) -> bool {
        self.reader.can_continue()
    }

    fn stamp(&self) -> Option<Time> {
        self.reader.stamp()
    }

    fn row_ready(&mut self) -> bool {
        self.reader.row_ready()
    }
}

#[cfg(feature = "scale")]
impl super::Consumer for Member {
    fn poll(&mut self, row: &mut [Option<Value>]) -> Result<super::Polled, TraceError> {
        if self.reader.next.is_none() {
            match self.reader.rx.recv_timeout(MEMBER_WAIT) {
                Ok(delivery) => self.reader.next = Some(delivery),
                Err(RecvTimeoutError::Timeout) if self.ended.load(Ordering::SeqCst) => {
                    return Ok(super::Polled::End);
                }
                Err(RecvTimeoutError::Timeout) => return Ok(super::Polled::Idle),
                // The listener is gone (it said why first, if it failed).
                Err(RecvTimeoutError::Disconnected) => return Ok(super::Polled::End),
            }
        }
        match self.reader.next_row(row)? {
            true => Ok(super::Polled::Row),
            false => {
                self.ended.store(true, Ordering::SeqCst);
                Ok(super::Polled::End)
            }
        }
    }

    /// The latest stamp given, where no message of this member stamped at or before it can
    /// still come: its listener is not between stamping and queuing one (read after the
    /// stamp, so a message stamped before it is queued by then), and its queue is empty.
    fn delivered(&mut self) -> Result<Option<Time>, TraceError> {
        let latest = self.arrivals.latest();
        if self.busy.load(Ordering::SeqCst) || self.reader.row_ready() {
            return Ok(None);
        }
        Ok(Some(latest))
    }
}

/// A connection publishing, shared by the outputs and alerts of a run; on
/// drop it sends what is queued and disconnects.
struct Sink {
    what: String,
    notify: Notify,
    client: Client,
    qos: QoS,
    done: Receiver<()>,
    /// Publications handed to the client, and those the broker has taken
    /// (acknowledged at QoS 1, completed at QoS 2, written at QoS 0),
    /// counted by the event loop: a run ends once they are equal.
    published: u64,
    completed: Arc<std::sync::atomic::AtomicU64>,
}

impl Sink {
    fn open(what: &str, url: &Url, level: u8, notify: &Notify) -> Result<Sink, String> {
        let (client, mut connection) = connection(url, "out", OUTGOING, qos(level));
        let (ready_tx, ready_rx) = sync_channel::<Result<(), String>>(1);
        let (done_tx, done) = sync_channel(1);
        let name = what.to_string();
        let completed = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let taken = completed.clone();
        let lost = notify.clone();
        let level = qos(level);
        std::thread::spawn(move || {
            let count = || {
                taken.fetch_add(1, std::sync::atomic::Ordering::Release);
            };
            let mut backoff = Backoff::new(lost);
            let mut ready = Some(ready_tx);
            let mut leaving = false;
            // Publications not yet acknowledged when the connection went:
            // a new session (a restarted broker) would drop them, so they
            // are kept here and queued again once connected.
            let mut undelivered = Vec::new();
            loop {
                match connection.recv() {
                    Err(_) => break,
                    Ok(Ok(Event::Incoming(Packet::ConnAck(_)))) => {
                        let pending = &mut connection.eventloop.pending;
                        pending.retain(|r| !matches!(r, rumqttc::Request::Publish(_)));
                        pending.extend(undelivered.drain(..));
                        backoff.connected(&name);
                        if let Some(r) = ready.take() {
                            let _ = r.send(Ok(()));
                        }
                    }
                    // The last request: what was queued before it is out;
                    // keep polling until the broker closes the connection.
                    Ok(Ok(Event::Outgoing(Outgoing::Disconnect))) => leaving = true,
                    Ok(Ok(Event::Incoming(Packet::PubAck(_)))) if level == QoS::AtLeastOnce => {
                        count()
                    }
                    Ok(Ok(Event::Incoming(Packet::PubComp(_)))) if level == QoS::ExactlyOnce => {
                        count()
                    }
                    Ok(Ok(Event::Outgoing(Outgoing::Publish(_)))) if level == QoS::AtMostOnce => {
                        count()
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(_)) if leaving => break,
                    Ok(Err(e)) => {
                        if let Some(r) = ready.take() {
                            let _ = r.send(Err(e.to_string()));
                            break;
                        }
                        let pending = std::mem::take(&mut connection.eventloop.pending);
                        let (publications, rest): (Vec<_>, Vec<_>) = (pending.into_iter())
                            .partition(|r| matches!(r, rumqttc::Request::Publish(_)));
                        undelivered.extend(publications);
                        connection.eventloop.pending.extend(rest);
                        backoff.failed(&name, &e);
                    }
                }
            }
            let _ = done_tx.send(());
        });
        match ready_rx.recv_timeout(CONNECT_WAIT) {
            Ok(Ok(())) => Ok(Sink {
                what: what.to_string(),
                notify: notify.clone(),
                client,
                qos: level,
                done,
                published: 0,
                completed,
            }),
            Ok(Err(e)) => Err(format!("--output {what}: cannot connect: {e}")),
            Err(_) => Err(format!(
                "--output {what}: the broker did not answer within {} s",
                CONNECT_WAIT.as_secs()
            )),
        }
    }

    fn publish(&mut self, topic: String, payload: Vec<u8>) -> io::Result<()> {
        // The client would fail the connection on it, and send it again
        // after every reconnect: refused here, once.
        if payload.len() + topic.len() + 16 > MAX_MESSAGE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: a message of {} bytes for `{topic}` is larger than MQTT's {MAX_MESSAGE}-byte limit here",
                    self.what,
                    payload.len()
                ),
            ));
        }
        self.published += 1;
        self.client
            .publish(topic, self.qos, false, payload)
            .map_err(|e| io::Error::new(io::ErrorKind::BrokenPipe, format!("{}: {e}", self.what)))
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // A disconnect sent before the last publications are acknowledged
        // (a QoS 2 one before its release) would lose them.
        let start = std::time::Instant::now();
        let taken = || self.completed.load(std::sync::atomic::Ordering::Acquire);
        while taken() < self.published && start.elapsed() < DRAIN_WAIT {
            std::thread::sleep(Duration::from_millis(2));
        }
        let all = taken() >= self.published;
        if self.client.disconnect().is_err() {
            return;
        }
        match self.done.recv_timeout(Duration::from_secs(1)) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) if all => {}
            _ => (self.notify)(Notice::Undelivered {
                what: self.what.clone(),
                seconds: DRAIN_WAIT.as_secs(),
            }),
        }
    }
}

/// A buffer a row writer writes into, taken after each step.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .map(|mut b| std::mem::take(&mut *b))
            .unwrap_or_default()
    }
}

/// `--output mqtt://…`: each step published.
pub struct Publisher {
    sink: Sink,
    /// The output columns, and their topics.
    topics: Vec<String>,
    /// `--mqtt-rows`: the row writer, its buffer and topic.
    rows: Option<(Box<dyn OutputWriter>, Buffer, String)>,
}

impl Publisher {
    pub fn open(
        what: &str,
        url: &Url,
        names: Vec<String>,
        options: &Options,
    ) -> Result<Publisher, String> {
        if !rumqttc::valid_topic(&url.path) {
            return Err(format!(
                "--output {what}: `{}` cannot start a topic to publish to (no `+` or `#`)",
                url.path
            ));
        }
        let sink = Sink::open(what, url, options.qos, &options.notify)?;
        let topics = names.iter().map(|n| topic(&url.path, n)).collect();
        let rows = options.mqtt_output_rows.as_ref().map(|t| {
            let buffer = Buffer::default();
            let out = Box::new(buffer.clone());
            let writer = match &options.key {
                Some(k) => crate::trace::keyed_writer(OutputFormat::Jsonl, names, k, out, false),
                None => crate::trace::make_writer(OutputFormat::Jsonl, names, out),
            };
            (writer, buffer, topic(&url.path, t))
        });
        Ok(Publisher { sink, topics, rows })
    }

    fn publish(&mut self, step: u64, key: Option<&Key>, samples: &[Sample]) -> io::Result<()> {
        if let Some((writer, buffer, topic)) = &mut self.rows {
            match key {
                Some(k) => writer.write_keyed(step, k, samples)?,
                None => writer.write_step(step, samples)?,
            }
            writer.flush()?;
            let mut line = buffer.take();
            line.pop();
            return self.sink.publish(topic.clone(), line);
        }
        for (topic, sample) in self.topics.iter().zip(samples) {
            let payload = match sample {
                Sample::NoVal => continue,
                Sample::Deferred => b"null".to_vec(),
                Sample::Value(v) => crate::trace::json_text(v),
            };
            let topic = match key {
                Some(k) => {
                    let text = crate::trace::cell_text(k.value());
                    format!("{topic}/{}", topic_level(&String::from_utf8_lossy(&text)))
                }
                None => topic.clone(),
            };
            self.sink.publish(topic, payload)?;
        }
        Ok(())
    }
}

impl OutputWriter for Publisher {
    fn write_step(&mut self, step: u64, samples: &[Sample]) -> io::Result<()> {
        self.publish(step, None, samples)
    }

    fn write_keyed(&mut self, step: u64, key: &Key, samples: &[Sample]) -> io::Result<()> {
        self.publish(step, Some(key), samples)
    }

    /// Publications leave as soon as the event loop takes them.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Alert lines published to `PREFIX/alerts`, one message per line.
pub struct AlertLines {
    sink: Sink,
    topic: String,
    line: Vec<u8>,
}

impl AlertLines {
    pub fn open(what: &str, url: &Url, options: &Options) -> Result<AlertLines, String> {
        Ok(AlertLines {
            sink: Sink::open(what, url, options.qos, &options.notify)?,
            topic: topic(&url.path, "alerts"),
            line: Vec::new(),
        })
    }
}

impl Write for AlertLines {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        for &b in bytes {
            if b == b'\n' {
                let line = std::mem::take(&mut self.line);
                self.sink.publish(self.topic.clone(), line)?;
            } else {
                self.line.push(b);
            }
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_an_inputs_value_or_a_stamped_value() {
        let row = |input: &str, payload: &str, time: Option<&str>| {
            input_row(input, payload, time).unwrap()
        };
        assert_eq!(row("x", "3", None), r#"{"x":3}"#);
        assert_eq!(
            row("x", " 3\n", Some("t")),
            r#"{"x": 3
}"#
        );
        assert_eq!(
            row("x", r#"{"t": 7, "value": [1, 2]}"#, Some("t")),
            r#"{"x":[1, 2],"t":7}"#
        );
        // Without the time field an object is the value (a Map input's).
        assert_eq!(
            row("m", r#"{"a": 1, "value": 2}"#, Some("t")),
            r#"{"m":{"a": 1, "value": 2}}"#
        );
        // One value only: nothing after it can reach another input.
        for bad in [r#"1, "y": 2"#, "1 2", "", "{", r#""a"}, {"y": 1"#] {
            let e = input_row("x", bad, None).unwrap_err();
            assert!(e.contains("not one JSON value"), "{bad}: {e}");
        }
    }

    #[test]
    fn any_key_is_one_valid_topic_level() {
        assert_eq!(topic_level("host-7"), "host-7");
        assert_eq!(topic_level("a/b+c#d%e"), "a%2Fb%2Bc%23d%25e");
        for key in ["a/b", "+", "#", "x\0y", "%2F"] {
            let t = topic("out/total", &topic_level(key));
            assert!(
                rumqttc::valid_topic(&t) && t.matches('/').count() == 2,
                "{t}"
            );
        }
    }

    #[test]
    fn topics_take_the_prefix() {
        assert_eq!(topic("", "x"), "x");
        assert_eq!(topic("plant/a/", "x"), "plant/a/x");
    }

    #[test]
    fn a_topic_map_names_declared_inputs() {
        let schema = InputSchema {
            names: vec!["temp".into(), "load".into()],
            types: vec![
                crate::lang::types::Type::Float,
                crate::lang::types::Type::Int,
            ],
        };
        let dir = std::env::temp_dir().join(format!("vigil-topics-{}", std::process::id()));
        std::fs::write(
            &dir,
            "# sensors\nsensors/+/temp temp\n\nhost/load load # cpu\n",
        )
        .unwrap();
        let path = dir.to_str().unwrap();
        assert_eq!(
            topic_map(path, &schema).unwrap(),
            vec![
                ("sensors/+/temp".to_string(), "temp".to_string()),
                ("host/load".to_string(), "load".to_string())
            ]
        );
        std::fs::write(&dir, "a/# temp\n").unwrap();
        assert_eq!(topic_map(path, &schema).unwrap()[0].0, "a/#");
        std::fs::write(&dir, "a/b nope\n").unwrap();
        let e = topic_map(path, &schema).unwrap_err();
        assert!(e.contains(":1: `nope` is not a declared input"), "{e}");
        std::fs::write(&dir, "a/#/b temp\n").unwrap();
        assert!(
            topic_map(path, &schema)
                .unwrap_err()
                .contains("not a topic filter")
        );
        std::fs::write(&dir, "just-one\n").unwrap();
        assert!(
            topic_map(path, &schema)
                .unwrap_err()
                .contains("expected `TOPIC INPUT`")
        );
        std::fs::remove_file(&dir).unwrap();
    }
}
