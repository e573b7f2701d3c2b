//! A scaled run's replay log in parts: when its workers read the trace in parallel, each
//! reader writes the rows it read to a part of its own (`LOG.w<k>` beside the `--record` path
//! `LOG`), and `LOG` is a manifest naming them. A replay merges the parts back into the run's
//! one order of rows.
//!
//! A part's header is the run's with `"part": k`; each line is a row at its place `o` in the
//! run's order (the timely time its reader gave it: part `p`'s row `i` is `p << 32 | i`), or
//! the stop of a run its reader stopped (`{"o":…,"stop":…,"status":…}`). A row of one of
//! several inputs carries the feed's stamp besides (its input `s`, its position `q` among that
//! input's rows and its step's time `t`: input `s`'s `k`-th row is at `k·S + s`, position `k`,
//! time `k` units), which the merge keeps. The manifest's
//! header is the run's with `"parts"`, the parts' file names, and it has no lines. Merging
//! takes the least place of all the parts' next lines each time (a heap of them); the `n`-th row so taken is
//! the step a single-process run reads `n`-th, at position `n` and time `n` units (an untimed
//! run's stamps), and the first stop ends the log: rows placed after it were read ahead by
//! other workers, and the run wrote none of them.

use super::{Json, Map, parse_line};
use crate::time::TimeUnit;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, BufRead};
use std::path::Path;

/// A log file's lines.
type Lines = io::Lines<io::BufReader<std::fs::File>>;
/// A log line, read.
type Object = Map<String, Json>;

/// A log file's lines after its header, and the header as a JSON object (its format version
/// checked).
pub(super) fn open_header(path: &str) -> Result<(Lines, Object), String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read `{path}`: {e}"))?;
    let mut lines = io::BufReader::new(file).lines();
    let first = match lines.next() {
        Some(Ok(l)) => l,
        Some(Err(e)) => return Err(format!("cannot read `{path}`: {e}")),
        None => return Err(format!("`{path}` is empty: not a vigil replay log")),
    };
    let bad = |m: &str| format!("{path}:1: {m}");
    let h: Map<String, Json> =
        serde_json::from_str(&first).map_err(|_| bad("not a vigil replay log"))?;
    match h.get("vigil_log").and_then(Json::as_u64) {
        None => Err(bad("not a vigil replay log")),
        Some(super::LOG_VERSION) => Ok((lines, h)),
        Some(v) => Err(bad(&format!(
            "log format version {v} is not supported (this vigil reads version {})",
            super::LOG_VERSION
        ))),
    }
}

/// A part of a log a resumed run goes on writing: the file at `path`, cut back to its header
/// and its lines placed before `before` (the resumed barrier's time: the lines after it were
/// read ahead of the checkpoint, or torn by the kill), opened to append.
pub fn cut_part(path: &str, before: u64) -> Result<std::fs::File, String> {
    let failed = |e: io::Error| format!("cannot resume the replay log's part `{path}`: {e}");
    let file = std::fs::File::open(path).map_err(failed)?;
    let mut lines = io::BufReader::new(file);
    let mut line = String::new();
    let mut keep = 0u64;
    let mut first = true;
    loop {
        line.clear();
        let n = lines.read_line(&mut line).map_err(failed)?;
        if n == 0 || !line.ends_with('\n') {
            break;
        }
        if !first {
            let o = parse_line(line.trim_end())
                .ok()
                .and_then(|j| j.get("o").and_then(Json::as_u64));
            match o {
                Some(o) if o < before => {}
                _ => break,
            }
        }
        first = false;
        keep += n as u64;
    }
    if first {
        return Err(format!(
            "cannot resume the replay log's part `{path}`: it has no header"
        ));
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(failed)?;
    file.set_len(keep).map_err(failed)?;
    io::Seek::seek(&mut file, io::SeekFrom::End(0)).map_err(failed)?;
    Ok(file)
}

/// The parts of a log, merged into the run's order.
pub(super) struct Merge {
    parts: Vec<Part>,
    /// The place of each part's next line, least first (a part whose lines have ended has
    /// none here).
    queue: BinaryHeap<Reverse<(Place, usize)>>,
    /// Rows taken so far: the next row's position and time (in units).
    index: u64,
    unit: TimeUnit,
    /// A stop was taken: the log ends.
    stopped: bool,
}

/// One part: its lines and the next one, read ahead.
struct Part {
    name: String,
    lines: Lines,
    line: u64,
    /// The next line, without its place, and where it is (`path:line`).
    next: Option<(Object, String)>,
    /// The place of the last line read, and its position.
    last: Option<(u64, u64)>,
}

impl Part {
    /// Reads the next line ahead; gives its place, or `None` at the part's end.
    fn read_ahead(&mut self) -> Result<Option<Place>, String> {
        let text = match self.lines.next() {
            None => return Ok(None),
            Some(Err(e)) => return Err(format!("cannot read `{}`: {e}", self.name)),
            Some(Ok(l)) => l,
        };
        self.line += 1;
        let at = format!("{}:{}", self.name, self.line);
        let mut j = parse_line(&text).map_err(|m| format!("{at}: {m}"))?;
        let Some(o) = j.remove("o").as_ref().and_then(Json::as_u64) else {
            return Err(format!(
                "{at}: a line of a part without its place `o` in the run's order"
            ));
        };
        // A place with a position (several timed inputs' rows share their times).
        let p = match j.remove("p") {
            None => 0,
            Some(p) => p
                .as_u64()
                .ok_or_else(|| format!("{at}: the position `p` is not a number"))?,
        };
        if let Some(last) = self.last
            && (o, p) <= last
        {
            return Err(format!(
                "{at}: the place {o} (position {p}) is not after the part's last ({}, position {}): a part's rows are in the order its reader read them",
                last.0, last.1
            ));
        }
        self.last = Some((o, p));
        let kind = match j.contains_key("stop") {
            true => Kind::Stop,
            false => Kind::Row,
        };
        self.next = Some((j, at));
        Ok(Some(Place { o, p, kind }))
    }
}

/// Where a line of a part goes in the merge: its place and position, and at one of them a
/// stop before a row. A reader of several inputs stops the run right after an input's row
/// (where the feed read the bad row after it), which is the place of another input's next row:
/// the run wrote none from there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    o: u64,
    p: u64,
    kind: Kind,
}

/// What a line of a part is (a stop sorts first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Stop,
    Row,
}

impl Merge {
    /// The parts the manifest at `path` (its header `h`) names in `names`, each opened beside
    /// it and checked to be a part of the same run.
    pub(super) fn open(
        path: &str,
        h: &Map<String, Json>,
        names: &Json,
        unit: TimeUnit,
    ) -> Result<Merge, String> {
        let names: Vec<&str> = match names.as_array() {
            Some(list) if !list.is_empty() => list
                .iter()
                .map(Json::as_str)
                .collect::<Option<_>>()
                .ok_or_else(|| format!("{path}:1: the header's `parts` are not file names"))?,
            _ => return Err(format!("{path}:1: the header's `parts` name no part")),
        };
        let dir = Path::new(path).parent().unwrap_or(Path::new(""));
        let mut run = h.clone();
        run.remove("parts");
        let mut parts = Vec::with_capacity(names.len());
        for (k, name) in names.iter().enumerate() {
            let part = dir.join(name);
            let part = part.to_string_lossy().into_owned();
            let (lines, mut ph) = open_header(&part).map_err(|e| {
                format!(
                    "{e} (a part of the replay log `{path}`: each process of a scaled run writes its workers' parts beside its own --record path; gather them beside this one)"
                )
            })?;
            if ph.remove("part").and_then(|w| w.as_u64()) != Some(k as u64) || ph != run {
                return Err(format!(
                    "`{part}` is not part {k} of the replay log `{path}`: its header is another run's"
                ));
            }
            parts.push(Part {
                name: part,
                lines,
                line: 1,
                next: None,
                last: None,
            });
        }
        let mut queue = BinaryHeap::with_capacity(parts.len());
        for (k, part) in parts.iter_mut().enumerate() {
            queue.extend(part.read_ahead()?.map(|p| Reverse((p, k))));
        }
        Ok(Merge {
            parts,
            queue,
            index: 0,
            unit,
            stopped: false,
        })
    }

    /// The next line of the run, as a plain log would have it, and where it is in its part;
    /// `None` at the end.
    pub(super) fn next_line(&mut self) -> Result<Option<(Object, String)>, String> {
        if self.stopped {
            return Ok(None);
        }
        let Some(Reverse((_, k))) = self.queue.pop() else {
            return Ok(None);
        };
        let part = &mut self.parts[k];
        let (mut j, at) = part.next.take().expect("a queued part has a next line");
        self.queue
            .extend(part.read_ahead()?.map(|p| Reverse((p, k))));
        if j.contains_key("stop") {
            self.stopped = true;
            return Ok(Some((j, at)));
        }
        match j
            .get_mut("r")
            .and_then(Json::as_array_mut)
            .map(Vec::as_mut_slice)
        {
            Some([Json::Object(row)]) => {
                row.entry("q").or_insert(Json::from(self.index));
            }
            _ => return Err(format!("{at}: a line of a part holds one row `r`")),
        }
        if !j.contains_key("t") {
            let time = i64::try_from(self.index)
                .ok()
                .and_then(|i| i.checked_mul(self.unit.nanos()))
                .ok_or_else(|| format!("{at}: the row's index is out of the time range"))?;
            j.insert("t".into(), Json::from(time));
        }
        self.index += 1;
        Ok(Some((j, at)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Event, Header, LogReader, LogWriter};
    use super::cut_part;
    use crate::time::{TimeForm, TimeUnit};
    use crate::value::Value;

    fn header() -> Header {
        Header {
            fingerprint: "f".into(),
            sources: vec!["t.jsonl".into()],
            fields: vec!["x".into()],
            time: None,
            unit: TimeUnit::Millis,
            form: TimeForm::Number(TimeUnit::Millis),
            key: Some("x".into()),
            start: None,
            max_gap: None,
            on_gap: "catch-up".into(),
            max_ticks: 10,
            on_reset: "cancel".into(),
            lateness: 0,
            wall_clock: false,
        }
    }

    /// Writes a manifest at `dir/log` and a part per list of (place, row value or stop).
    fn write(dir: &std::path::Path, parts: &[&[(u64, Option<i64>)]]) -> String {
        let log = dir.join("log").to_str().unwrap().to_string();
        let names: Vec<String> = (0..parts.len()).map(|w| format!("log.w{w}")).collect();
        LogWriter::write_manifest(&log, &header(), &names).unwrap();
        for (w, lines) in parts.iter().enumerate() {
            let path = format!("{log}.w{w}");
            let mut part = LogWriter::create_part(&path, &header(), w).unwrap();
            for (o, x) in lines.iter() {
                match x {
                    Some(x) => part.write_part_row(*o, &[Some(Value::Int(*x))]).unwrap(),
                    None => part.write_part_stop((*o, 0), "bad row", 4).unwrap(),
                }
            }
            part.flush().unwrap();
        }
        log
    }

    /// A fresh directory for one test (removed at its end unless it failed).
    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("vigil-logparts-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn events(log: &str) -> Result<Vec<Event>, String> {
        let mut r = LogReader::open(log)?;
        let mut all = Vec::new();
        while let Some(e) = r.next_event(None, 0)? {
            all.push(e);
        }
        Ok(all)
    }

    #[test]
    fn parts_merge_in_place_order_and_end_at_the_first_stop() {
        let dir = dir("merge");
        let a = 1u64 << 32;
        let log = write(
            &dir,
            &[
                &[
                    (0, Some(10)),
                    (1, Some(11)),
                    (2 * a, Some(30)),
                    (2 * a + 1, None),
                ],
                &[(a, Some(20)), (3 * a, Some(40))],
            ],
        );
        let got = events(&log).unwrap();
        let rows: Vec<(i64, u64, Option<Value>)> = (got.iter())
            .filter_map(|e| match e {
                Event::Rows(step) => {
                    let (c, cells) = &step.rows[0];
                    Some((step.time.0, c.stamp.seq, cells[0].clone()))
                }
                _ => None,
            })
            .collect();
        // Rows by place, numbered from 0 and a unit (a millisecond) apart; the row placed
        // after the stop (part 1's at 3·2^32) is not replayed.
        let ms = 1_000_000;
        assert_eq!(
            rows,
            vec![
                (0, 0, Some(Value::Int(10))),
                (ms, 1, Some(Value::Int(11))),
                (2 * ms, 2, Some(Value::Int(20))),
                (3 * ms, 3, Some(Value::Int(30))),
            ]
        );
        assert_eq!(got.last(), Some(&Event::Stop("bad row".into(), 4)));
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A stop at the place of another part's row comes first: a reader of several inputs
    /// stops the run right after one input's row, at the place of another's next row, which
    /// the run did not write. (The row came first, by part, and a replay wrote one row more.)
    #[test]
    fn a_stop_goes_before_a_row_at_its_place() {
        let dir = dir("tie");
        let log = write(
            &dir,
            &[&[(0, Some(10)), (2, Some(12))], &[(1, Some(11)), (2, None)]],
        );
        let got = events(&log).unwrap();
        let rows: Vec<Option<Value>> = (got.iter())
            .filter_map(|e| match e {
                Event::Rows(step) => Some(step.rows[0].1[0].clone()),
                _ => None,
            })
            .collect();
        assert_eq!(rows, vec![Some(Value::Int(10)), Some(Value::Int(11))]);
        assert_eq!(got.last(), Some(&Event::Stop("bad row".into(), 4)));
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A row of several inputs keeps the feed's stamp its reader logged (its input, its
    /// position among that input's rows, its time), where a part's row of one input is given
    /// its index in the merge.
    #[test]
    fn a_row_of_several_inputs_keeps_its_stamp() {
        let dir = dir("stamp");
        let log = dir.join("log").to_str().unwrap().to_string();
        let mut h = header();
        h.sources.push("u.jsonl".into());
        LogWriter::write_manifest(&log, &h, &["log.w0".to_string()]).unwrap();
        let mut w = LogWriter::create_part(&format!("{log}.w0"), &h, 0).unwrap();
        w.write_part_row_of((0, 0), (0, 0), 0, &[Some(Value::Int(10))])
            .unwrap();
        w.write_part_row_of((1, 0), (1, 0), 0, &[Some(Value::Int(20))])
            .unwrap();
        w.write_part_row_of((2, 0), (0, 1), 5_000_000, &[Some(Value::Int(11))])
            .unwrap();
        w.flush().unwrap();
        let stamps: Vec<(i64, u32, u64)> = (events(&log).unwrap().iter())
            .filter_map(|e| match e {
                Event::Rows(step) => {
                    let c = &step.rows[0].0;
                    Some((step.time.0, c.stamp.source, c.stamp.seq))
                }
                _ => None,
            })
            .collect();
        assert_eq!(stamps, vec![(0, 0, 0), (0, 1, 0), (5_000_000, 0, 1)]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_resumed_part_is_cut_back_to_its_lines_before_the_barrier() {
        let dir = dir("cut");
        let log = write(&dir, &[&[(1, Some(10)), (5, Some(11)), (9, Some(12))]]);
        let part = format!("{log}.w0");
        // A kill tore the last line.
        let mut text = std::fs::read_to_string(&part).unwrap();
        text.push_str("{\"o\":12,\"r\":[{\"s\"");
        std::fs::write(&part, &text).unwrap();
        let kept: Vec<&str> = text.lines().take(3).collect();
        drop(cut_part(&part, 6).unwrap());
        assert_eq!(
            std::fs::read_to_string(&part).unwrap(),
            kept.join("\n") + "\n"
        );
        // Appended to, the part merges on.
        let mut w = LogWriter::continued(cut_part(&part, 6).unwrap(), vec!["x".into()]);
        w.write_part_row(7, &[Some(Value::Int(13))]).unwrap();
        w.flush().unwrap();
        let rows = events(&log).unwrap().len();
        assert_eq!(rows, 3);
        std::fs::write(&part, "").unwrap();
        assert!(cut_part(&part, 6).unwrap_err().contains("no header"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_part_out_of_order_or_missing_or_alone_is_refused() {
        let dir = dir("refused");
        let log = write(&dir, &[&[(5, Some(1)), (5, Some(2))], &[]]);
        let e = events(&log).unwrap_err();
        assert!(e.contains("log.w0:3:") && e.contains("not after"), "{e}");
        let e = events(&format!("{log}.w1")).unwrap_err();
        assert!(e.contains("worker 1's part"), "{e}");
        std::fs::remove_file(format!("{log}.w1")).unwrap();
        let e = events(&log).unwrap_err();
        assert!(e.contains("log.w1") && e.contains("gather them"), "{e}");
        // A part of another run (its header differs) is refused too.
        let mut other = header();
        other.fingerprint = "g".into();
        LogWriter::create_part(&format!("{log}.w1"), &other, 1)
            .unwrap()
            .flush()
            .unwrap();
        let e = events(&log).unwrap_err();
        assert!(e.contains("is not part 1"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
