//! Replay logs (`vigil run --record LOG`, `vigil replay SPEC LOG`): the merged, stamped sequence
//! of a run, written as a feed gives it ([`LogWriter`]) and read back as the same events
//! ([`LogReader`]), so that a replay evaluates exactly the steps the run evaluated.
//!
//! A log is JSON lines. The first line is the header:
//!
//! ```text
//! {"vigil_log":1,"fingerprint":"…","sources":["a.jsonl","b.csv"],"fields":["temp","beat","ts"],
//!  "time":"ts","unit":"s","form":"number","key":null,"start":null,"max_gap":null,
//!  "on_gap":"catch-up","max_ticks":1000000,"on_reset":"cancel","lateness":0,"clock":"data"}
//! ```
//!
//! (`vigil_log` is the format version; `fingerprint` the specification's, as snapshots carry it;
//! `fields` the cells of every source row: the declared inputs, then undeclared `--pass` fields,
//! then the time field if it is not an input; `time`, `unit` and `form` how times were read and
//! are written (`number` or `rfc3339`); `key` the key input of a keyed run; `lateness` the
//! re-stamping bound and `start`, `max_gap`, `on_gap`, `max_ticks`, `on_reset` the scheduler's options (times
//! in nanoseconds), so that `--check` reads and ticks as the recorded run did.) Then one line
//! per step, in order:
//!
//! ```text
//! {"t":3000000000,"r":[{"s":0,"q":1,"c":{"temp":31.0}},{"s":1,"q":2,"late":2900000000,"c":{"beat":true}}]}
//! ```
//!
//! `t` is the step's time in nanoseconds; `r` the source rows merged into it, by priority: `s`
//! the source, `q` the row's position in it, `late` the row's own time when it was re-stamped,
//! and `c` its present cells by field name (an Int is a JSON integer, a finite Float a JSON
//! number with a fraction or an exponent, a Str a string, a Bool a boolean, Unit `null`, any
//! other Float `{"f":"inf"}`, `{"f":"-inf"}` or `{"f":"NaN:0x<16 hex digits>"}`, so every value
//! reads back bit for bit). A tick of periodic streams is a line of its own,
//! `{"t":3000000000,"tick":[0]}` (the indices of the periods due, in the specification's order of
//! periods). A run that stopped on an error of its traces ends its log with
//! `{"stop":"a.jsonl:3:1: …","status":4}`, so that its replay stops the same way. A replay re-merges each step from its rows and takes the ticks as logged, so it
//! evaluates exactly the steps of the run it was recorded from.
//!
//! A scaled run whose workers read a file in parts writes its log in parts, one per reader,
//! beside a manifest at the `--record` path; [`LogReader::open`] of the manifest merges them
//! back into one log's events (see `log/parts.rs`).

use crate::merge::{Contribution, Stamp, Step};
use crate::time::{Time, TimeForm, TimeUnit};
use crate::trace::too_deep;
use crate::value::{MAX_VALUE_NESTING, Value};
use serde::Deserialize;
use serde_json::{Map, Value as Json, json};
use std::io::{self, Write};

mod parts;

pub use parts::cut_part;

/// What a log line is: a merged step of rows, or a tick of the periods
/// flagged (indexed as `Plan::periods`).
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A merged step of rows.
    Rows(Step),
    /// A tick at a time, with the periods due then.
    Tick(Time, Vec<bool>),
    /// The run stopped on an error of its traces (message, exit status).
    Stop(String, u8),
    /// A source joined the run (a connection to a `tcp://` input).
    Source(String),
    /// Every source reached a time reset: a new epoch begins.
    Reset,
}

impl Event {
    /// The event as the evaluation stage takes it (`None` for a stop).
    pub fn into_feed(self) -> Option<crate::pipeline::Event> {
        Some(match self {
            Event::Rows(step) => crate::pipeline::Event::Rows(step),
            Event::Tick(t, due) => crate::pipeline::Event::Tick(t, due),
            Event::Reset => crate::pipeline::Event::Reset,
            Event::Source(name) => crate::pipeline::Event::Source(name),
            Event::Stop(..) => return None,
        })
    }
}

impl From<crate::pipeline::Event> for Event {
    fn from(e: crate::pipeline::Event) -> Event {
        match e {
            crate::pipeline::Event::Rows(step) => Event::Rows(step),
            crate::pipeline::Event::Tick(t, due) => Event::Tick(t, due),
            crate::pipeline::Event::Reset => Event::Reset,
            crate::pipeline::Event::Source(name) => Event::Source(name),
        }
    }
}

/// The log format version this vigil writes and reads.
pub const LOG_VERSION: u64 = 1;

/// A log's first line.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The specification's fingerprint (a replay of another is refused).
    pub fingerprint: String,
    /// The sources' names, in the order of their indices.
    pub sources: Vec<String>,
    /// The cells of every row: the declared inputs, then undeclared
    /// `--pass` fields, then the time field if it is not an input.
    pub fields: Vec<String>,
    /// The time field, if rows carry their time.
    pub time: Option<String>,
    /// The unit of numeric times.
    pub unit: TimeUnit,
    /// How times were read and are written.
    pub form: TimeForm,
    /// The key input of a keyed run.
    pub key: Option<String>,
    /// The scheduler's options: the ticks' origin and the gap rule (ns).
    pub start: Option<Time>,
    /// The longest gap ticked through (ns).
    pub max_gap: Option<i64>,
    /// What a longer gap does (`--on-gap`).
    pub on_gap: String,
    /// The most ticks due at once.
    pub max_ticks: u64,
    /// What a time reset does to the ticks (`--on-reset`).
    pub on_reset: String,
    /// The lateness bound rows were re-stamped within (ns).
    pub lateness: i64,
    /// Whether the run's time followed the wall clock (`--clock wall`):
    /// its stamps and ticks are in the log, and a replay takes them from
    /// there.
    pub wall_clock: bool,
}

/// Writes a log.
pub struct LogWriter {
    out: io::BufWriter<std::fs::File>,
    fields: Vec<String>,
}

impl LogWriter {
    /// A log a resumed run goes on writing: `file`, cut back to the length
    /// its checkpoint recorded (its header is there already).
    pub fn continued(file: std::fs::File, fields: Vec<String>) -> LogWriter {
        LogWriter {
            out: io::BufWriter::new(file),
            fields,
        }
    }

    /// Flushes and syncs the log, and gives its length (for a checkpoint).
    pub fn synced_len(&mut self) -> io::Result<u64> {
        self.flush()?;
        Ok(self.out.get_ref().metadata()?.len())
    }

    /// A new log at `path` (created, or emptied), its header `h` written.
    pub fn create(path: &str, h: &Header) -> io::Result<LogWriter> {
        LogWriter::create_with(path, h, Map::new())
    }

    /// A new log at `path` whose header is `h` with `extra` entries (a part's or a manifest's).
    fn create_with(path: &str, h: &Header, extra: Map<String, Json>) -> io::Result<LogWriter> {
        let mut out = io::BufWriter::new(std::fs::File::create(path)?);
        let mut header = header_json(h);
        header.extend(extra);
        writeln!(out, "{}", Json::Object(header))?;
        Ok(LogWriter {
            out,
            fields: h.fields.clone(),
        })
    }

    /// Worker `worker`'s part of a scaled run's log (`parts`): its header is `h` with
    /// `"part": worker`, and its lines [`LogWriter::write_part_row`] and
    /// [`LogWriter::write_part_stop`].
    pub fn create_part(path: &str, h: &Header, worker: usize) -> io::Result<LogWriter> {
        LogWriter::create_with(path, h, Map::from_iter([("part".into(), json!(worker))]))
    }

    /// The log a scaled run that read in parallel leaves at its `--record` path: the header
    /// `h` with `"parts"`, the file names of the workers' parts (beside it), and no steps. A
    /// replay of it merges the parts (see `parts`).
    pub fn write_manifest(path: &str, h: &Header, parts: &[String]) -> io::Result<()> {
        let extra = Map::from_iter([("parts".into(), json!(parts))]);
        LogWriter::create_with(path, h, extra)?.flush()
    }

    /// A row of a part, at its place `o` in the run's order: `{"o":…,"r":[{"s":0,"c":{…}}]}`
    /// (its step's time and its position are the row's index in that order, given on replay).
    pub fn write_part_row(&mut self, o: u64, cells: &[Option<Value>]) -> io::Result<()> {
        let present = self.present(cells);
        writeln!(
            self.out,
            "{}",
            json!({"o": o, "r": [{"s": 0, "c": present}]})
        )
    }

    /// A row of input `source` in a part, at its place `(o, p)` (`p`, the row's position
    /// where rows of one place are several: several timed inputs' stamps), with its position
    /// `q` among that input's rows and its step's time `t` (ns): a scaled run's readers of
    /// several inputs give each row the feed's stamp
    /// (`{"o":…,"p":…,"r":[{"s":…,"q":…,"c":{…}}],"t":…}`, `p` left out where 0), which the
    /// merge keeps.
    pub fn write_part_row_of(
        &mut self,
        (o, p): (u64, u64),
        (source, q): (u32, u64),
        t: i64,
        cells: &[Option<Value>],
    ) -> io::Result<()> {
        let present = self.present(cells);
        let mut line = json!({"o": o, "r": [{"s": source, "q": q, "c": present}], "t": t});
        if p != 0 {
            line["p"] = json!(p);
        }
        writeln!(self.out, "{line}")
    }

    /// A row of a live source read by consumers in a part, at its place `o`, with its step's
    /// time `t` (ns: its entry ID's, or its arrival), which the merge keeps; its position is
    /// its index in the merge (`{"o":…,"r":[{"s":0,"c":{…}}],"t":…}`).
    pub fn write_part_row_at(&mut self, o: u64, t: i64, cells: &[Option<Value>]) -> io::Result<()> {
        let present = self.present(cells);
        writeln!(
            self.out,
            "{}",
            json!({"o": o, "r": [{"s": 0, "c": present}], "t": t})
        )
    }

    /// A row's present cells by field name (`c`).
    fn present(&self, cells: &[Option<Value>]) -> Json {
        Json::Object(
            (self.fields.iter().zip(cells))
                .filter_map(|(f, v)| v.as_ref().map(|v| (f.clone(), encode(v))))
                .collect(),
        )
    }

    /// The end of a run a part's reader stopped at its place `o`: `{"o":…,"stop":…,"status":…}`.
    /// At a place `(o, p)` with a position (see [`LogWriter::write_part_row_of`]), `p` left out
    /// where 0.
    pub fn write_part_stop(
        &mut self,
        (o, p): (u64, u64),
        message: &str,
        status: u8,
    ) -> io::Result<()> {
        let mut line = json!({"o": o, "stop": message, "status": status});
        if p != 0 {
            line["p"] = json!(p);
        }
        writeln!(self.out, "{line}")
    }

    /// Writes a merged step.
    pub fn write_step(&mut self, step: &Step) -> io::Result<()> {
        let rows: Vec<Json> = step
            .rows
            .iter()
            .map(|(c, cells)| {
                let mut row = Map::new();
                row.insert("s".into(), json!(c.stamp.source));
                row.insert("q".into(), json!(c.stamp.seq));
                if let Some(late) = c.late {
                    row.insert("late".into(), json!(late.0));
                }
                row.insert("c".into(), self.present(cells));
                Json::Object(row)
            })
            .collect();
        writeln!(self.out, "{}", json!({"t": step.time.0, "r": rows}))
    }

    /// A tick of the periods `due` at `time`: `{"t":…,"tick":[k, …]}`.
    pub fn write_tick(&mut self, time: Time, due: &[bool]) -> io::Result<()> {
        let ks: Vec<usize> = (due.iter().enumerate())
            .filter(|(_, d)| **d)
            .map(|(k, _)| k)
            .collect();
        writeln!(self.out, "{}", json!({"t": time.0, "tick": ks}))
    }

    /// A time reset every source reached: `{"reset":true}`.
    pub fn write_reset(&mut self) -> io::Result<()> {
        writeln!(self.out, "{}", json!({ "reset": true }))
    }

    /// A source joining the run: `{"source":"tcp://127.0.0.1:50312"}`.
    pub fn write_source(&mut self, name: &str) -> io::Result<()> {
        writeln!(self.out, "{}", json!({ "source": name }))
    }

    /// The end of a run stopped by its traces: `{"stop":"…","status":4}`.
    pub fn write_stop(&mut self, message: &str, status: u8) -> io::Result<()> {
        writeln!(self.out, "{}", json!({"stop": message, "status": status}))
    }

    /// Hands what is written to the file (without syncing it).
    pub fn flush_buffer(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Writes out what is buffered and syncs the file (a checkpoint records
    /// its length then).
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_all()
    }
}

/// A log line as a JSON object (its nesting bounded first).
fn parse_line(line: &str) -> Result<Map<String, Json>, String> {
    // A recorded value nests at most `MAX_VALUE_NESTING` containers, each
    // at most two JSON levels here (a tuple or a map is a tagged object),
    // four levels below the line's own: deeper than serde_json's default
    // limit of 128. The line's depth is bounded here instead, so that
    // every log the recorder writes reads back and none recurses deeper.
    if too_deep(line, LOG_LINE_NESTING).is_some() {
        return Err(format!(
            "not a log step: it nests deeper than any value vigil records ({MAX_VALUE_NESTING} containers)"
        ));
    }
    let mut de = serde_json::Deserializer::from_str(line);
    de.disable_recursion_limit();
    Map::<String, Json>::deserialize(&mut de)
        .and_then(|j| de.end().map(|()| j))
        .map_err(|e| format!("not a log step: {e}"))
}

/// A log's header line as a JSON object.
fn header_json(h: &Header) -> Map<String, Json> {
    let header = json!({
        "vigil_log": LOG_VERSION,
        "fingerprint": h.fingerprint,
        "sources": h.sources,
        "fields": h.fields,
        "time": h.time,
        "unit": h.unit.name(),
        "form": match h.form { TimeForm::Number(_) => "number", TimeForm::Rfc3339 => "rfc3339" },
        "key": h.key,
        "start": h.start.map(|t| t.0),
        "max_gap": h.max_gap,
        "on_gap": h.on_gap,
        "max_ticks": h.max_ticks,
        "on_reset": h.on_reset,
        "lateness": h.lateness,
        "clock": if h.wall_clock { "wall" } else { "data" },
    });
    match header {
        Json::Object(map) => map,
        _ => unreachable!("a json! object is an object"),
    }
}

fn encode(v: &Value) -> Json {
    match v {
        Value::Int(i) => json!(i),
        Value::Float(f) if f.is_finite() => {
            Json::Number(serde_json::Number::from_f64(*f).expect("a finite float is a JSON number"))
        }
        Value::Float(f) => {
            let text = if *f == f64::INFINITY {
                "inf".to_string()
            } else if *f == f64::NEG_INFINITY {
                "-inf".to_string()
            } else {
                format!("NaN:0x{:016x}", f.to_bits())
            };
            json!({ "f": text })
        }
        Value::Str(s) => json!(&**s),
        Value::Bool(b) => json!(b),
        Value::Unit => Json::Null,
        // A list is a JSON array; a tuple, a map and a function (its text)
        // are tagged objects, apart from the Float form `{"f": …}`.
        Value::List(items) => Json::Array(items.iter().map(encode).collect()),
        Value::Tuple(items) => json!({ "tuple": items.iter().map(encode).collect::<Vec<_>>() }),
        Value::Map(m) => json!({
            "map": m.iter().map(|(k, x)| (k.to_string(), encode(x))).collect::<serde_json::Map<_, _>>()
        }),
        Value::Func(_) | Value::Marker(_) => json!({ "fn": v.to_string() }),
    }
}

fn decode(j: &Json) -> Option<Value> {
    Some(match j {
        Json::Null => Value::Unit,
        Json::Bool(b) => Value::Bool(*b),
        Json::String(s) => Value::Str(s.as_str().into()),
        Json::Number(n) if n.is_i64() => Value::Int(n.as_i64()?),
        Json::Number(n) => Value::Float(n.as_f64()?),
        Json::Array(items) => Value::list(items.iter().map(decode).collect::<Option<_>>()?),
        Json::Object(o) if o.contains_key("tuple") => {
            let items = o.get("tuple")?.as_array()?;
            Value::tuple(items.iter().map(decode).collect::<Option<_>>()?)
        }
        Json::Object(o) if o.contains_key("map") => Value::Map(std::sync::Arc::new(
            (o.get("map")?.as_object()?.iter())
                .map(|(k, x)| Some((k.as_str().into(), decode(x)?)))
                .collect::<Option<_>>()?,
        )),
        Json::Object(o) => {
            let text = o.get("f")?.as_str()?;
            Value::Float(match text {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => {
                    let hex = text.strip_prefix("NaN:0x")?;
                    let bits = u64::from_str_radix(hex, 16).ok()?;
                    let f = f64::from_bits(bits);
                    if hex.len() != 16 || !f.is_nan() {
                        return None;
                    }
                    f
                }
            })
        }
    })
}

/// How deep a step line of a log may nest: four levels of the line (the
/// step, its rows, a row, its cells), then a value of at most
/// `MAX_VALUE_NESTING` containers, each two levels in the tagged form.
const LOG_LINE_NESTING: usize = 4 + 2 * MAX_VALUE_NESTING;

/// Reads a log, step by step.
pub struct LogReader {
    name: String,
    input: Input,
    line: u64,
    /// Where the line read last is (`path:line`, a part's when merging parts).
    location: String,
    header: Header,
    /// The sources so far: the header's, then those that joined.
    sources: usize,
    /// What the events read so far allow of the next (`Order::check`).
    order: Order,
}

/// Where a log's lines come from: its file, or the parts its manifest names, merged.
enum Input {
    One(io::Lines<io::BufReader<std::fs::File>>),
    Parts(parts::Merge),
}

/// The order a recorded run's events are in, which a replay checks as the
/// live run's merge enforces it, so that a log edited or corrupted into an
/// order no run could give is refused rather than evaluated: within an epoch
/// (from a time reset to the next) times never go back, a source's rows come
/// at increasing positions, at most one of each source in a step and in
/// source order, and a re-stamped row's own time is before its stamp.
#[derive(Debug, Default)]
struct Order {
    /// The time of the last event since the last reset, and its line.
    last: Option<(Time, u64)>,
    /// Each source's last row position, and its line.
    positions: Vec<Option<(u64, u64)>>,
}

impl Order {
    fn reset(&mut self) {
        self.last = None;
    }

    /// Checks an event at `time` on line `line` (a tick, or a step whose
    /// rows are `rows`), and takes it as the last.
    fn check(
        &mut self,
        time: Time,
        line: u64,
        rows: &[(Contribution, Vec<Option<Value>>)],
    ) -> Result<(), String> {
        if let Some((last, at)) = self.last
            && time < last
        {
            return Err(format!(
                "the time goes back: {}ns here, {}ns at line {at}; a log's events are in time order (but across a time reset), as the run that records it merges them",
                time.0, last.0
            ));
        }
        let mut previous: Option<u32> = None;
        for (c, _) in rows {
            let s = c.stamp.source;
            if previous.is_some_and(|p| p >= s) {
                return Err(format!(
                    "the rows of the step are not one per source in source order (source {s} after source {})",
                    previous.unwrap_or(0)
                ));
            }
            previous = Some(s);
            if let Some(late) = c.late
                && late >= time
            {
                return Err(format!(
                    "a row of source {s} re-stamped from {}ns to {}ns: a late row's own time is before its step's",
                    late.0, time.0
                ));
            }
            let slot = s as usize;
            if self.positions.len() <= slot {
                self.positions.resize(slot + 1, None);
            }
            if let Some((q, at)) = self.positions[slot]
                && c.stamp.seq <= q
            {
                return Err(format!(
                    "a row of source {s} at position {} after its row at position {q} (line {at}): a source's rows are in the order it gave them",
                    c.stamp.seq
                ));
            }
            self.positions[slot] = Some((c.stamp.seq, line));
        }
        self.last = Some((time, line));
        Ok(())
    }
}

impl LogReader {
    /// Opens `path` and reads its header: a log, or the manifest of a scaled run's parts
    /// (whose lines are then the parts', merged).
    pub fn open(path: &str) -> Result<LogReader, String> {
        let (lines, h) = parts::open_header(path)?;
        let bad = |m: &str| format!("{path}:1: {m}");
        if let Some(w) = h.get("part") {
            return Err(bad(&format!(
                "this is worker {w}'s part of a scaled run's replay log: replay the log at the run's --record path, which names every part"
            )));
        }
        let header = header_of(&h, &bad)?;
        let input = match h.get("parts") {
            None => Input::One(lines),
            Some(names) => Input::Parts(parts::Merge::open(path, &h, names, header.unit)?),
        };
        Ok(LogReader {
            name: path.to_string(),
            input,
            line: 1,
            location: format!("{path}:1"),
            sources: header.sources.len(),
            header,
            order: Order::default(),
        })
    }
}

/// A header's fields, read from its JSON object (`bad` locates a message).
fn header_of(h: &Map<String, Json>, bad: &dyn Fn(&str) -> String) -> Result<Header, String> {
    let text = |k: &str| h.get(k).and_then(Json::as_str).map(String::from);
    let list = |k: &str| -> Option<Vec<String>> {
        h.get(k)?
            .as_array()?
            .iter()
            .map(|v| v.as_str().map(String::from))
            .collect()
    };
    let unit = text("unit")
        .and_then(|u| TimeUnit::from_name(&u))
        .ok_or_else(|| bad("the header's `unit` is not s, ms, us or ns"))?;
    let form = match text("form").as_deref() {
        Some("number") => TimeForm::Number(unit),
        Some("rfc3339") => TimeForm::Rfc3339,
        _ => return Err(bad("the header's `form` is not number or rfc3339")),
    };
    let header = Header {
        fingerprint: text("fingerprint").ok_or_else(|| bad("the header has no fingerprint"))?,
        sources: list("sources").ok_or_else(|| bad("the header has no `sources`"))?,
        fields: list("fields").ok_or_else(|| bad("the header has no `fields`"))?,
        time: text("time"),
        unit,
        form,
        key: text("key"),
        start: h.get("start").and_then(Json::as_i64).map(Time),
        max_gap: h.get("max_gap").and_then(Json::as_i64),
        on_gap: text("on_gap").unwrap_or_else(|| "catch-up".into()),
        max_ticks: h
            .get("max_ticks")
            .and_then(Json::as_u64)
            .unwrap_or(1_000_000),
        on_reset: text("on_reset").unwrap_or_else(|| "cancel".into()),
        lateness: h.get("lateness").and_then(Json::as_i64).unwrap_or(0),
        wall_clock: match text("clock").as_deref() {
            None | Some("data") => false,
            Some("wall") => true,
            Some(_) => return Err(bad("the header's `clock` is not data or wall")),
        },
    };
    Ok(header)
}

impl LogReader {
    /// The next line as a JSON object, its place in `location`; `None` at the end.
    fn next_line(&mut self) -> Result<Option<Map<String, Json>>, String> {
        match &mut self.input {
            Input::One(lines) => {
                let line = match lines.next() {
                    None => return Ok(None),
                    Some(Err(e)) => return Err(format!("cannot read `{}`: {e}", self.name)),
                    Some(Ok(l)) => l,
                };
                self.line += 1;
                self.location = format!("{}:{}", self.name, self.line);
                parse_line(&line)
                    .map(Some)
                    .map_err(|m| format!("{}: {m}", self.location))
            }
            Input::Parts(merge) => {
                let next = merge.next_line()?;
                if let Some((_, at)) = &next {
                    self.line += 1;
                    self.location.clone_from(at);
                }
                Ok(next.map(|(j, _)| j))
            }
        }
    }

    /// Takes a source that joined the run into account (its rows follow).
    pub fn add_source(&mut self) {
        self.sources += 1;
    }

    /// The log's path, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The log's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Where the step last read is.
    pub fn at(&self) -> String {
        format!("{}:{}", self.name, self.line)
    }

    /// The next event: a step (re-merged from its rows) or a tick (with
    /// one flag per period of `periods`); `None` at the end.
    pub fn next_event(
        &mut self,
        exempt: Option<usize>,
        periods: usize,
    ) -> Result<Option<Event>, String> {
        let Some(j) = self.next_line()? else {
            return Ok(None);
        };
        let location = self.location.clone();
        let bad = |m: &str| format!("{location}: {m}");
        if j.get("reset").is_some() {
            self.order.reset();
            return Ok(Some(Event::Reset));
        }
        if let Some(name) = j.get("source") {
            let name = name.as_str().ok_or_else(|| bad("`source` is not a name"))?;
            return Ok(Some(Event::Source(name.to_string())));
        }
        if let Some(m) = j.get("stop") {
            let message = m.as_str().ok_or_else(|| bad("`stop` is not a message"))?;
            let status = j.get("status").and_then(Json::as_u64).unwrap_or(4);
            return Ok(Some(Event::Stop(message.to_string(), status as u8)));
        }
        let time = Time(
            j.get("t")
                .and_then(Json::as_i64)
                .ok_or_else(|| bad("the step has no time `t`"))?,
        );
        if let Some(ks) = j.get("tick") {
            let mut due = vec![false; periods];
            for k in ks.as_array().ok_or_else(|| bad("`tick` is not a list"))? {
                match k.as_u64() {
                    Some(k) if (k as usize) < periods => due[k as usize] = true,
                    _ => return Err(bad("a tick of a period the specification does not have")),
                }
            }
            self.order
                .check(time, self.line, &[])
                .map_err(|m| bad(&m))?;
            return Ok(Some(Event::Tick(time, due)));
        }
        let rows = j
            .get("r")
            .and_then(Json::as_array)
            .ok_or_else(|| bad("the step has no rows `r`"))?;
        let width = self.header.fields.len();
        let mut out = Vec::new();
        for r in rows {
            let get = |k: &str| r.get(k).and_then(Json::as_u64);
            let (Some(source), Some(seq)) = (get("s"), get("q")) else {
                return Err(bad("a row without its source `s` and position `q`"));
            };
            if source as usize >= self.sources {
                return Err(bad(&format!(
                    "a row of source {source}, which the header does not name"
                )));
            }
            let late = match r.get("late") {
                None => None,
                Some(l) => Some(Time(l.as_i64().ok_or_else(|| bad("`late` is not a time"))?)),
            };
            let mut cells = vec![None; width];
            let c = r
                .get("c")
                .and_then(Json::as_object)
                .ok_or_else(|| bad("a row without its cells `c`"))?;
            for (name, v) in c {
                let Some(k) = self.header.fields.iter().position(|f| f == name) else {
                    return Err(bad(&format!("`{name}` is not a field of the log")));
                };
                let value = decode(v)
                    .ok_or_else(|| bad(&format!("`{name}` has no value of the language")))?;
                if value.nests_deeper_than(MAX_VALUE_NESTING) {
                    return Err(bad(&format!(
                        "`{name}` nests containers more than {MAX_VALUE_NESTING} deep, deeper than any value vigil records"
                    )));
                }
                cells[k] = Some(value);
            }
            let stamp = Stamp {
                time,
                source: source as u32,
                seq,
            };
            out.push((Contribution { stamp, late }, cells));
        }
        self.order
            .check(time, self.line, &out)
            .map_err(|m| bad(&m))?;
        Ok(Some(Event::Rows(Step::of_rows(time, width, out, exempt))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_reads_back_bit_for_bit() {
        let nan = f64::from_bits(0x7ff8_0000_0000_0abc);
        for v in [
            Value::Int(i64::MIN),
            Value::Float(-0.0),
            Value::Float(2.0),
            Value::Float(1e300),
            Value::Float(f64::INFINITY),
            Value::Float(nan),
            Value::Str("é\"x".into()),
            Value::Bool(false),
            Value::Unit,
        ] {
            let text = encode(&v).to_string();
            let back = decode(&serde_json::from_str(&text).unwrap()).unwrap();
            match (&v, &back) {
                (Value::Float(a), Value::Float(b)) => {
                    assert_eq!(a.to_bits(), b.to_bits(), "{text}")
                }
                _ => assert_eq!(v, back, "{text}"),
            }
        }
    }
}
