//! Live transports: MQTT (`mqtt.rs`) and Redis Streams (`redis_streams.rs`), as sources
//! (`vigil run --input URL`, readers of rows) and sinks (`--output URL`, writers of steps).
//!
//! A live source is a [`RowReader`] like a trace file's, so every run reads it the way it reads a
//! file: alone (checkpoints included), or merged with other sources by time. It stamps each row
//! itself ([`RowReader::stamp`]: an MQTT message's arrival, a Redis entry's ID), which a merged
//! run uses when the row has no time field. A live sink is an [`OutputWriter`]. Both keep going
//! when their broker goes away: they reconnect with backoff (`Backoff`), say so through the
//! run's [`Notify`] (the command line prints it on standard error), and the monitor keeps its
//! state.
//!
//! Each transport is a Cargo feature (`mqtt`, `redis`); a build without one still knows its
//! URLs and options, and refuses them with the feature to rebuild with (`Transport`).

// What the transports share (the URL, the options, the backoff) is partly unused in a build
// without one of them; that build is still correct, only smaller.
#![cfg_attr(not(all(feature = "mqtt", feature = "redis")), allow(dead_code))]

#[cfg(feature = "mqtt")]
mod mqtt;
#[cfg(feature = "redis")]
mod redis_streams;

use crate::notice::{Notice, Notify};
use crate::trace::{InputSchema, OutputWriter, RowReader};
#[cfg(feature = "scale")]
use crate::value::Value;
use std::time::Duration;

/// `url` as messages, logs and checkpoints show it: a password in it
/// replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rsplit_once('@') {
        Some((login, address)) if login.contains(':') => {
            let user = login.split_once(':').map_or(login, |(u, _)| u);
            format!("{scheme}://{user}:***@{address}{}", &rest[end..])
        }
        _ => url.to_string(),
    }
}

/// Whether `input` names a live source rather than a file.
pub fn is_url(input: &str) -> bool {
    input.starts_with("mqtt://") || input.starts_with("redis://")
}

/// The transport of a live URL: MQTT (`mqtt://`) or Redis Streams (any
/// other live URL, `redis://`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Mqtt,
    Redis,
}

impl Transport {
    fn of(url: &str) -> Transport {
        if url.starts_with("mqtt://") {
            Transport::Mqtt
        } else {
            Transport::Redis
        }
    }

    /// The Cargo feature that builds it in.
    fn feature(self) -> &'static str {
        match self {
            Transport::Mqtt => "mqtt",
            Transport::Redis => "redis",
        }
    }

    /// Whether this build has it.
    fn built(self) -> bool {
        match self {
            Transport::Mqtt => cfg!(feature = "mqtt"),
            Transport::Redis => cfg!(feature = "redis"),
        }
    }

    /// Refuses `url` if this build lacks its transport.
    fn check(url: &str) -> Result<Transport, String> {
        let transport = Transport::of(url);
        if transport.built() {
            Ok(transport)
        } else {
            Err(format!(
                "`{}`: {}",
                redact(url),
                not_built(transport.feature())
            ))
        }
    }
}

/// Refuses the live URL `url` if this build lacks its transport, naming the
/// Cargo feature to rebuild with.
pub fn check_url(url: &str) -> Result<(), String> {
    Transport::check(url).map(|_| ())
}

/// A broker's address and the path after it:
/// `SCHEME://[USER[:PASSWORD]@]HOST:PORT[/PATH]`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Url {
    /// The user and password, if the URL names them.
    login: Option<(String, String)>,
    host: String,
    port: u16,
    /// What follows the address, without its leading `/` (empty if none).
    path: String,
}

impl Url {
    /// Parses `text`, which must start with `scheme://`; a missing port is
    /// `default_port`.
    fn parse(text: &str, scheme: &str, default_port: u16) -> Result<Url, String> {
        let bad = |why: &str| {
            let text = redact(text);
            format!("`{text}`: {why} (expected {scheme}://HOST:PORT[/…])")
        };
        let rest = text
            .strip_prefix(scheme)
            .and_then(|r| r.strip_prefix("://"))
            .ok_or_else(|| bad("not a URL of this kind"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (login, authority) = match authority.rsplit_once('@') {
            Some((login, address)) => {
                let (user, password) = login.split_once(':').unwrap_or((login, ""));
                (Some((user.to_string(), password.to_string())), address)
            }
            None => (None, authority),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>()
                    .map_err(|_| bad(&format!("`{p}` is not a port")))?,
            ),
            None => (authority, default_port),
        };
        if host.is_empty() {
            return Err(bad("the host is missing"));
        }
        Ok(Url {
            login,
            host: host.to_string(),
            port,
            path: path.to_string(),
        })
    }
}

/// The options of a run that live endpoints read (the command line's
/// `--qos`, `--mqtt-rows`, … of the same names).
#[derive(Clone)]
pub struct Options {
    /// The MQTT quality of service, 0 to 2.
    pub qos: u8,
    /// An MQTT topic whose messages are whole rows (JSON objects).
    pub mqtt_rows: Option<String>,
    /// An MQTT topic to publish whole output rows to.
    pub mqtt_output_rows: Option<String>,
    /// The MQTT topic of each input (`input=topic,…`).
    pub mqtt_topics: Option<String>,
    /// `--time`'s field, and its cell in the schema.
    pub time: Option<(String, usize)>,
    /// A Redis consumer group and consumer name.
    pub group: Option<(String, String)>,
    /// An MQTT shared subscription's group: an MQTT source subscribes to
    /// `$share/GROUP/FILTER` instead of `FILTER`, as one member of the group, and the broker
    /// gives each message to one member.
    pub share: Option<String>,
    /// Whether a Redis source ends at the stream's end instead of waiting.
    pub drain: bool,
    /// `--key`'s input (a keyed run's MQTT topics name the key).
    pub key: Option<String>,
    /// A Redis group acknowledges entries as soon as they are read (a run
    /// that does not say when rows are done, [`RowReader::commit`]).
    pub ack_on_read: bool,
    /// Where the transports' notices go (a lost broker, a reconnect).
    pub notify: Notify,
}

impl Options {
    /// The options of a run that sets none: QoS 1, no topics of whole rows
    /// or per input, no time field, key or consumer group, a Redis source
    /// waiting at the stream's end, notices to `notify`.
    pub fn new(notify: Notify) -> Options {
        Options {
            qos: 1,
            mqtt_rows: None,
            mqtt_output_rows: None,
            mqtt_topics: None,
            time: None,
            group: None,
            share: None,
            drain: false,
            key: None,
            ack_on_read: false,
            notify,
        }
    }
}

/// The message refusing what a build without Cargo feature `feature` lacks.
pub(crate) fn not_built(feature: &str) -> String {
    format!(
        "this vigil was built without the `{feature}` feature; rebuild with `--features {feature}`"
    )
}

/// The checkpointed position of a resumed run's live input and output.
#[derive(Clone, Debug, Default)]
pub struct Resume {
    /// The last entry the checkpointed run consumed.
    pub token: Option<String>,
    /// The entries it had written to the output stream.
    pub written: Option<u64>,
}

/// One reader of a live source, and its name in messages.
pub struct Source {
    /// The source's name (the redacted URL, and its topic when an input
    /// is read as a source per topic).
    pub name: String,
    /// Its rows.
    pub reader: Box<dyn RowReader>,
}

/// Opens the live source `input` for rows of `schema`: its readers (one,
/// or one per topic where the options make an MQTT input several sources).
pub fn open_input(
    input: &str,
    schema: &InputSchema,
    options: &Options,
    resume: &Resume,
) -> Result<Vec<Source>, String> {
    match Transport::check(input)? {
        #[cfg(feature = "mqtt")]
        Transport::Mqtt => {
            let url = Url::parse(input, "mqtt", 1883)?;
            mqtt::open_input(&redact(input), &url, schema, options)
        }
        #[cfg(feature = "redis")]
        Transport::Redis => {
            let url = Url::parse(input, "redis", 6379)?;
            let shown = redact(input);
            let reader = redis_streams::open_input(&shown, &url, schema, options, resume)?;
            Ok(vec![Source {
                name: shown,
                reader,
            }])
        }
        // `check` has refused a transport this build lacks.
        #[cfg(not(all(feature = "mqtt", feature = "redis")))]
        missing => {
            let _ = (schema, options, resume);
            Err(not_built(missing.feature()))
        }
    }
}

/// One of several consumers sharing a live source, each delivered other rows (a Redis
/// consumer group's consumers): the rows of them all, by their stamps (`RowReader::stamp`),
/// are the source's in its order, and each consumer's come in that order.
#[cfg(feature = "scale")]
pub(crate) trait Consumer: RowReader + Send {
    /// The next row into `row` (its stamp is then `stamp()`), or word that none came for a
    /// short while, or that none will (`--drain`, at the stream's end).
    fn poll(&mut self, row: &mut [Option<Value>]) -> Result<Polled, crate::trace::TraceError>;

    /// A stamp every row delivered to any of the consumers from now on comes after (the
    /// group's last delivered entry's), if one was delivered.
    fn delivered(&mut self) -> Result<Option<crate::time::Time>, crate::trace::TraceError>;
}

/// What a [`Consumer`]'s poll got.
#[cfg(feature = "scale")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Polled {
    /// A row.
    Row,
    /// Nothing for now.
    Idle,
    /// Nothing more.
    End,
}

/// `count` consumers sharing the live source `input`, or `None` when it cannot be shared: a
/// Redis Stream read by a consumer group (`--group`, `--consumer`), each consumer named
/// `CONSUMER-i`, its rows in the stream's order; or an MQTT source of one reader read by
/// members of a shared subscription (`--group` alone), its rows in the order they reached
/// this process (MQTT keeps no order between a group's members: see `mqtt::open_members`).
#[cfg(feature = "scale")]
pub(crate) fn open_consumers(
    input: &str,
    schema: &InputSchema,
    options: &Options,
    count: usize,
) -> Result<Option<Vec<Box<dyn Consumer>>>, String> {
    match Transport::check(input)? {
        #[cfg(feature = "redis")]
        Transport::Redis if options.group.is_some() => {
            let url = Url::parse(input, "redis", 6379)?;
            let opened =
                redis_streams::open_consumers(&redact(input), &url, schema, options, count)?;
            Ok(Some(opened))
        }
        #[cfg(feature = "mqtt")]
        Transport::Mqtt if options.share.is_some() => {
            let url = Url::parse(input, "mqtt", 1883)?;
            mqtt::open_members(&redact(input), &url, schema, options, count)
        }
        #[allow(unreachable_patterns)]
        _ => {
            let _ = (schema, count);
            Ok(None)
        }
    }
}

/// Opens the live source `input` as one trace, for a run that reads it
/// unmerged: its one reader, streaming.
pub fn open_one(
    input: &str,
    schema: &InputSchema,
    options: &Options,
    resume: &Resume,
) -> Result<crate::trace::OpenTrace, String> {
    let reader = open_input(input, schema, options, resume)?
        .into_iter()
        .next()
        .map(|s| s.reader)
        .ok_or_else(|| format!("`{input}` has no topics"))?;
    Ok(crate::trace::OpenTrace {
        reader,
        streaming: true,
        file: None,
    })
}

/// Opens the live sink `output` for steps with the output columns `names`.
pub fn open_output(
    output: &str,
    names: Vec<String>,
    options: &Options,
    resume: &Resume,
) -> Result<Box<dyn OutputWriter>, String> {
    match Transport::check(output)? {
        #[cfg(feature = "mqtt")]
        Transport::Mqtt => {
            let url = Url::parse(output, "mqtt", 1883)?;
            Ok(Box::new(mqtt::Publisher::open(
                &redact(output),
                &url,
                names,
                options,
            )?))
        }
        #[cfg(feature = "redis")]
        Transport::Redis => {
            let url = Url::parse(output, "redis", 6379)?;
            Ok(Box::new(redis_streams::Appender::open(
                &redact(output),
                &url,
                names,
                options,
                resume,
            )?))
        }
        // `check` has refused a transport this build lacks.
        #[cfg(not(all(feature = "mqtt", feature = "redis")))]
        missing => {
            let _ = (names, options, resume);
            Err(not_built(missing.feature()))
        }
    }
}

/// Where a live sink's alerts go, as a line writer: an MQTT sink publishes
/// them to `PREFIX/alerts`, a Redis Stream sink `STREAM` XADDs them to
/// `STREAM:alerts` (each entry's field `alert` the JSON line).
pub fn alerts_sink(
    output: &str,
    options: &Options,
) -> Result<Box<dyn std::io::Write + Send>, String> {
    match Transport::check(output)? {
        #[cfg(feature = "mqtt")]
        Transport::Mqtt => {
            let url = Url::parse(output, "mqtt", 1883)?;
            Ok(Box::new(mqtt::AlertLines::open(
                &redact(output),
                &url,
                options,
            )?))
        }
        #[cfg(feature = "redis")]
        Transport::Redis => {
            let url = Url::parse(output, "redis", 6379)?;
            Ok(Box::new(redis_streams::AlertLines::open(
                &redact(output),
                &url,
                options,
            )?))
        }
        // `check` has refused a transport this build lacks.
        #[cfg(not(all(feature = "mqtt", feature = "redis")))]
        missing => {
            let _ = options;
            Err(not_built(missing.feature()))
        }
    }
}

/// Waits between attempts to reach a broker: 100 ms, doubling up to 5 s,
/// back to 100 ms once it answers.
struct Backoff {
    next: Duration,
    /// Whether the broker is away (said once per loss).
    lost: bool,
    notify: Notify,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(100);
    const LAST: Duration = Duration::from_secs(5);

    fn new(notify: Notify) -> Backoff {
        Backoff {
            next: Backoff::FIRST,
            lost: false,
            notify,
        }
    }

    /// The broker `what` failed with `error`: says so (the first time of
    /// this loss) and waits before the next attempt.
    fn failed(&mut self, what: &str, error: &dyn std::fmt::Display) {
        if !self.lost {
            (self.notify)(Notice::Lost {
                what: what.to_string(),
                error: error.to_string(),
            });
            self.lost = true;
        }
        std::thread::sleep(self.next);
        self.next = (self.next * 2).min(Backoff::LAST);
    }

    /// The broker answers again.
    fn connected(&mut self, what: &str) {
        if self.lost {
            (self.notify)(Notice::Reconnected {
                what: what.to_string(),
            });
        }
        self.lost = false;
        self.next = Backoff::FIRST;
    }
}

/// Arrival stamps: nanoseconds since the Unix epoch, each later than every stamp given before
/// it (so that no two arrivals share one). The listeners of a shared subscription's members
/// share one, so that the rows of them all have one order, their arrival's.
#[derive(Debug, Default)]
pub(crate) struct Arrivals {
    last: std::sync::atomic::AtomicI64,
}

impl Arrivals {
    /// The stamp of a row arriving now.
    #[cfg_attr(not(feature = "mqtt"), allow(dead_code))]
    pub(crate) fn stamp(&self) -> crate::time::Time {
        use std::sync::atomic::Ordering::SeqCst;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        let after = |last: i64| now.max(last.saturating_add(1));
        // The closure always gives a value, so the update cannot fail.
        let last =
            (self.last.fetch_update(SeqCst, SeqCst, |l| Some(after(l)))).unwrap_or_else(|l| l);
        crate::time::Time(after(last))
    }

    /// The latest stamp given: every later one is after it.
    #[cfg_attr(not(all(feature = "mqtt", feature = "scale")), allow(dead_code))]
    pub(crate) fn latest(&self) -> crate::time::Time {
        crate::time::Time(self.last.load(std::sync::atomic::Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_host_port_and_path() {
        let u = Url::parse("mqtt://127.0.0.1:1884/plant/a", "mqtt", 1883).unwrap();
        assert_eq!(
            u,
            Url {
                login: None,
                host: "127.0.0.1".into(),
                port: 1884,
                path: "plant/a".into()
            }
        );
        let u = Url::parse("redis://localhost/events", "redis", 6379).unwrap();
        assert_eq!((u.port, u.path.as_str()), (6379, "events"));
        let u = Url::parse("mqtt://broker", "mqtt", 1883).unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("broker", 1883, "")
        );
        let u = Url::parse("redis://monitor:s3cret:x@db:7000/s", "redis", 6379).unwrap();
        assert_eq!(
            (u.login, u.host.as_str(), u.port),
            (Some(("monitor".into(), "s3cret:x".into())), "db", 7000)
        );
        for bad in [
            "mqtt://u@:1/x",
            "mqtt://:1883/x",
            "mqtt://h:port/x",
            "mqtt://h:99999",
            "redis://h",
        ] {
            assert!(Url::parse(bad, "mqtt", 1883).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_transport_left_out_is_refused_with_its_feature() {
        let cases = [
            ("mqtt://h:1883/p", cfg!(feature = "mqtt"), "mqtt"),
            ("redis://:s3cret@h/s", cfg!(feature = "redis"), "redis"),
        ];
        for (url, built, feature) in cases {
            match Transport::check(url) {
                Ok(t) => assert!(built && t.feature() == feature, "{url}"),
                Err(e) => {
                    assert!(!built, "{url}: {e}");
                    assert!(
                        e.contains(&format!("rebuild with `--features {feature}`")),
                        "{e}"
                    );
                    assert!(!e.contains("s3cret"), "{e}");
                }
            }
        }
    }

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(redact("redis://:s3cret@db:1/s"), "redis://:***@db:1/s");
        assert_eq!(redact("mqtt://mon:a:b@h/p/q"), "mqtt://mon:***@h/p/q");
        assert_eq!(redact("mqtt://mon@h/p"), "mqtt://mon@h/p");
        assert_eq!(redact("mqtt://h:1/a@b:c"), "mqtt://h:1/a@b:c");
        assert_eq!(redact("events.jsonl"), "events.jsonl");
        let e = Url::parse("mqtt://u:pw@h:port/x", "mqtt", 1883).unwrap_err();
        assert!(!e.contains("pw"), "{e}");
    }

    #[test]
    fn arrivals_always_move_forward() {
        let arrivals = Arrivals::default();
        arrivals
            .last
            .store(i64::MAX - 1, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(arrivals.stamp().0, i64::MAX);
        let arrivals = Arrivals::default();
        let a = arrivals.stamp();
        let b = arrivals.stamp();
        assert!(b > a && a.0 > 0);
        assert_eq!(arrivals.latest(), b);
    }

    /// Listeners on several threads stamping at once never give one stamp twice.
    #[test]
    fn shared_arrivals_are_distinct_across_threads() {
        let arrivals = std::sync::Arc::new(Arrivals::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let arrivals = std::sync::Arc::clone(&arrivals);
                std::thread::spawn(move || {
                    (0..1000).map(|_| arrivals.stamp().0).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<i64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
