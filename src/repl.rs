//! A REPL session over one monitor (what `vigil repl` runs): feed it rows one line at a time,
//! see each step's outputs, switch tiers, edit the specification mid-run.
//!
//! A session holds one monitor of one specification. A line is a row (`x=1 y=2.5 s="hi"`, a
//! JSON object, or `-` for a step with every input absent) or a command (`:help` lists them);
//! what it answers is written to the caller's `Write`. Reading the lines is the caller's:
//! `vigil repl` edits them with rustyline at a terminal (history, completion from
//! [`Session::words`]) and reads a script's as they come, its exit status from [`Session::finish`].
//!
//! `:tier T` moves the run to another tier without losing anything: every tier keeps its whole
//! state in the canonical run state, so the session takes a snapshot, builds the monitor for the
//! new tier and restores the snapshot into it — the next step is what a run on that tier from the
//! start would give.
//!
//! Time: a row may carry a time, `@2.5 x=1` (seconds, or RFC 3339 text), which `time()` reads
//! and time windows use. A specification with periodic streams keeps a scheduler whose origin is
//! the first time given: before a row at time T the ticks due by T run, each printed with its
//! time, and `:tick T` runs them up to T with no row. A row without a time is a step at no time
//! (no tick runs). `:snapshot`/`:restore` keep the monitor's run; the scheduler starts again at
//! the next time given after a `:restore` or `:reset`.
//!
//! `:def` and `:drop` edit the specification mid-run (the seed's repaired schedule): the text is
//! edited (`lang::edit`), checked whole, and the run carried over to it (`Monitor::repair`), so
//! every stream the edit does not touch keeps its values, holds, history and builtin state, and
//! the new plan, fusion and compiled code take over at the next step. A `:def` whose `out`/`aux`
//! declarations lack their definitions reads further lines (prompt `...>`) until it is complete or
//! an empty line ends it.
//!
//! ```
//! use vigil::repl::{Ended, Session};
//! use vigil::{Spec, Tier};
//!
//! let text = "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x\n";
//! let mut session = Session::new(Spec::parse("sum.dsrv", text)?, Tier::Canonical);
//! let mut out = Vec::new();
//! for (n, line) in ["x=1", "x=2", ":history total"].into_iter().enumerate() {
//!     assert!(session.line(line, n + 1, &mut out)?);
//! }
//! let answers = String::from_utf8(out)?;
//! // Each row's outputs, then the history of `total`.
//! assert_eq!(answers, "total[0] = Int(1)\ntotal[1] = Int(3)\ntotal[0] = Int(1)\ntotal[1] = Int(3)\n");
//! assert_eq!(session.finish(&mut std::io::sink())?, Ended::Clean);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::lang::edit;
use crate::monitor::{Monitor, Spec, Tier};
use crate::pipeline::sink::escaped;
use crate::row::{Row, excerpt};
use crate::snapshot::Snapshot;
use crate::trace::{self, ReaderOptions};
use crate::value::{Sample, Value};
use std::collections::VecDeque;
use std::io::{self, Write};

/// The values kept per stream for `:history`.
const HISTORY: usize = 1000;

/// The commands, for `:help` and completion.
const COMMANDS: [(&str, &str); 16] = [
    (":help", "this list"),
    (":spec", "print the specification"),
    (
        ":def DECL",
        "add or replace streams: `:def out w: Int = z * 2`, `:def w = z + 1`, `:def in h: Str`",
    ),
    (
        ":drop S",
        "remove stream S (refused while another reads it)",
    ),
    (
        ":explain [S]",
        "schedule, regions, IR and which tier runs what (lines naming S)",
    ),
    (
        ":tier [T]",
        "show the tier, or move the run to tier T (state kept)",
    ),
    (":stats", "the tier's counters"),
    (
        ":history S [N]",
        "the last N values of stream S (default 10)",
    ),
    (
        ":load [-q] TRACE",
        "feed every row of a trace file (-q: a summary only)",
    ),
    (":reset", "start over at step 0 (same spec and tier)"),
    (
        ":tick T",
        "run the periodic streams' ticks due by time T (seconds or RFC 3339), no row",
    ),
    (":save FILE", "write the specification to FILE"),
    (":snapshot FILE", "save the run (binary snapshot)"),
    (":restore FILE", "continue a saved run"),
    (":quit", "leave (also Ctrl-D)"),
    (
        "ROW",
        "x=1 y=2.5 s=\"hi\" | {\"x\": 1} | - (every input absent); `@T ROW` at time T",
    ),
];

/// One session: a monitor of one specification, and what the lines given it
/// so far have left (see the module doc).
pub struct Session {
    spec: Spec,
    monitor: Monitor,
    tier: Tier,
    /// Every stream's name (inputs, outputs, aux) and the printed outputs',
    /// read once from the specification.
    streams: Vec<String>,
    outputs: Vec<String>,
    /// The last `HISTORY` samples of every stream, indexed as `streams`.
    history: Vec<VecDeque<(u64, Sample)>>,
    /// Whether a row was malformed (script mode's exit status).
    malformed: bool,
    /// The text of a `:def` still missing definitions (more lines follow).
    pending: Option<String>,
    /// The ticks of the periodic streams (none without), and the last time
    /// given (a row's or `:tick`'s), which time never goes back from.
    scheduler: Option<crate::time::Scheduler>,
    now: Option<crate::time::Time>,
}

impl Session {
    /// A session of `spec` on `tier`, at step 0.
    pub fn new(spec: Spec, tier: Tier) -> Session {
        let monitor = Monitor::builder(&spec).tier(tier).build();
        let mut session = Session {
            history: Vec::new(),
            spec,
            monitor,
            tier,
            streams: Vec::new(),
            outputs: Vec::new(),
            malformed: false,
            pending: None,
            scheduler: None,
            now: None,
        };
        session.restart_clock();
        session.read_names();
        session.history = vec![VecDeque::new(); session.streams.len()];
        session
    }

    /// A scheduler of the specification's periods, not started (its origin
    /// is the next time given), and no time yet.
    fn restart_clock(&mut self) {
        let periods = self.monitor.periods();
        self.scheduler = (!periods.is_empty()).then(|| crate::time::Scheduler::new(periods));
        self.now = None;
    }

    /// Moves time to `time`: refused if it goes back; else every tick due
    /// by it runs, each printed with its time.
    fn advance(&mut self, time: crate::time::Time, out: &mut dyn Write) -> io::Result<bool> {
        if let Some(now) = self.now.filter(|&now| time < now) {
            self.malformed = true;
            writeln!(
                out,
                "error: time {} is before the time given last ({}): time does not go back (no step was taken)",
                time.seconds(),
                now.seconds()
            )?;
            return Ok(false);
        }
        self.now = Some(time);
        let Some(mut scheduler) = self.scheduler.take() else {
            return Ok(true);
        };
        if !scheduler.started() {
            scheduler.start(time);
        }
        let mut ran = Ok(true);
        while let Some((at, due)) = scheduler.next_until(time) {
            let shown = self.monitor.tick(at, &due).map(|o| Shown::of(&o));
            ran = self.print(shown, &format!("@{} ", at.seconds()), out);
            if !matches!(ran, Ok(true)) {
                break;
            }
        }
        self.scheduler = Some(scheduler);
        // A tick that stopped the run is printed; the row after it is not
        // refused for it (the monitor reports the stop).
        ran.map(|_| true)
    }

    /// Reads the stream and output names of the specification.
    fn read_names(&mut self) {
        self.streams = (self.spec.checked().streams.iter())
            .map(|s| s.name.clone())
            .collect();
        self.outputs = (self.spec.output_names().into_iter())
            .map(String::from)
            .collect();
    }

    /// The prompt: the step the next row is, or a continuation.
    /// The prompt for the next line: the step, or `...>` inside a `:def`.
    pub fn prompt(&self) -> String {
        match self.pending {
            Some(_) => "...> ".to_string(),
            None => format!("[{}]> ", self.monitor.steps()),
        }
    }

    /// Keeps every stream's sample at `step` (the last one the monitor
    /// evaluated) for `:history`.
    fn record(&mut self, step: u64) {
        for (name, h) in self.streams.iter().zip(&mut self.history) {
            if let Some(sample) = self.monitor.stream(name) {
                if h.len() == HISTORY {
                    h.pop_front();
                }
                h.push_back((step, sample));
            }
        }
    }

    /// Handles line `at` (numbered from 1, for messages), writing what it
    /// answers to `out`; `Ok(false)` ends the session (`:quit`).
    pub fn line(&mut self, line: &str, at: usize, out: &mut dyn Write) -> io::Result<bool> {
        if let Some(mut text) = self.pending.take() {
            if line.trim().is_empty() {
                // An empty line ends the definition as it is; the checker
                // says what is missing.
                self.define(&text, out)?;
            } else {
                text.push('\n');
                text.push_str(line);
                self.define_or_continue(text, out)?;
            }
            return Ok(true);
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with("//") {
            return Ok(true);
        }
        if let Some(command) = line.strip_prefix(':') {
            return self.command(command, out);
        }
        // `@T ROW`: the row at time T, after the ticks due by then.
        let (time, line) = match line.strip_prefix('@') {
            None => (None, line),
            Some(rest) => {
                let (t, row) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                match parse_time(t) {
                    Ok(time) if !row.trim().is_empty() => (Some(time), row.trim()),
                    Ok(_) => {
                        self.malformed = true;
                        writeln!(
                            out,
                            "error: line {at}: a row follows its time: `@{} x=1`, or `@{} -` for a step with every input absent (no step was taken)",
                            excerpt(t),
                            excerpt(t)
                        )?;
                        return Ok(true);
                    }
                    Err(e) => {
                        self.malformed = true;
                        writeln!(out, "error: line {at}: {e} (no step was taken)")?;
                        return Ok(true);
                    }
                }
            }
        };
        match self.parse_row(line) {
            Ok(row) => {
                if let Some(time) = time
                    && !self.advance(time, out)?
                {
                    return Ok(true);
                }
                self.step(&row, time, out)?
            }
            Err(e) => {
                self.malformed = true;
                writeln!(out, "error: line {at}: {e} (no step was taken)")?;
            }
        }
        Ok(true)
    }

    /// A row: `-`, a JSON object, or `name=value` pairs (a value is read as
    /// a trace reader reads an untyped cell, or by the input's type; `"…"`
    /// is a JSON string).
    fn parse_row(&self, line: &str) -> Result<Row, String> {
        if line == "-" {
            return Ok(self.monitor.row());
        }
        if line.starts_with('{') {
            // The object is one level; its values may nest the limit below.
            if trace::too_deep(line, crate::value::MAX_VALUE_NESTING + 1).is_some() {
                return Err(format!(
                    "a value nests arrays or objects more than {} deep, the limit for values",
                    crate::value::MAX_VALUE_NESTING
                ));
            }
            let v: serde_json::Value =
                serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
            let object = v.as_object().ok_or("not a JSON object")?;
            return self
                .monitor
                .row_from_json(object)
                .map_err(|e| e.to_string());
        }
        let mut row = self.monitor.row();
        let schema = self.spec.input_schema();
        for (name, text) in pairs(line)? {
            let Some(i) = schema.names.iter().position(|n| *n == name) else {
                return Err(format!(
                    "`{}` is not an input (inputs: {})",
                    excerpt(&name),
                    schema.names.join(", ")
                ));
            };
            let value = match text {
                Text::Quoted(s) => Value::Str(s.into()),
                Text::Plain(t) => trace::parse_text(&t, schema.types[i], &name)?,
            };
            row.assign(&name, value).map_err(|e| e.to_string())?;
        }
        Ok(row)
    }

    /// Evaluates `row` (at `time`, if it has one) and prints its outputs.
    fn step(
        &mut self,
        row: &Row,
        time: Option<crate::time::Time>,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let result = match time {
            Some(t) => self.monitor.step_at(t, row),
            None => self.monitor.step(row),
        };
        // The outputs borrow the monitor: they are copied out to print.
        let shown = result.map(|o| Shown::of(&o));
        self.print(shown, "", out).map(|_| ())
    }

    /// Prints a step's outputs (each line after `prefix`: a tick's time) and
    /// keeps it for `:history`; `Ok(false)` when the step did not run.
    fn print(
        &mut self,
        shown: Result<Shown, crate::row::StepError>,
        prefix: &str,
        out: &mut dyn Write,
    ) -> io::Result<bool> {
        match shown {
            Ok(shown) => {
                for (name, sample) in self.outputs.iter().zip(&shown.samples) {
                    if !sample.is_noval() {
                        writeln!(out, "{prefix}{name}[{}] = {sample}", shown.step)?;
                    }
                }
                for (trigger, step, message) in &shown.alerts {
                    writeln!(
                        out,
                        "{prefix}alert: {trigger} at step {step}: {}",
                        escaped(message)
                    )?;
                }
                self.record(shown.step);
                Ok(true)
            }
            Err(crate::row::StepError::Row(e)) => {
                self.malformed = true;
                writeln!(out, "error: {e} (no step was taken)")?;
                Ok(false)
            }
            Err(crate::row::StepError::Runtime(e)) => {
                writeln!(
                    out,
                    "{prefix}error: {e}; the run is stopped (`:reset` starts over)"
                )?;
                Ok(false)
            }
        }
    }

    /// Runs a command (without its `:`); `Ok(false)` ends the session.
    fn command(&mut self, command: &str, out: &mut dyn Write) -> io::Result<bool> {
        let mut words = command.split_whitespace();
        let name = words.next().unwrap_or("");
        let args: Vec<&str> = words.collect();
        match (name, args.as_slice()) {
            ("def", _) => {
                let text = command.trim_start().strip_prefix("def").unwrap_or("");
                self.define_or_continue(text.trim().to_string(), out)?;
            }
            ("drop", [s]) => match edit::drop(self.spec.checked(), s) {
                Ok(source) => self.respecify(&source, out)?,
                Err(e) => writeln!(out, "error: {e}")?,
            },
            ("help", _) => {
                for (c, what) in COMMANDS {
                    writeln!(out, "  {c:<18} {what}")?;
                }
            }
            ("spec", _) => write!(out, "{}", ensure_newline(&self.spec.checked().source))?,
            ("explain", []) => write!(out, "{}", crate::explain::explain(&self.spec, self.tier))?,
            ("explain", [s]) => {
                if !self.streams.iter().any(|x| x == s) {
                    writeln!(out, "error: no stream `{}`", excerpt(s))?;
                    return Ok(true);
                }
                // The lines of the explanation that name the stream.
                let text = crate::explain::explain(&self.spec, self.tier);
                for line in text.lines().filter(|l| names_word(l, s)) {
                    writeln!(out, "{line}")?;
                }
            }
            ("tier", []) => writeln!(
                out,
                "tier: {} ({})",
                self.monitor.tier(),
                self.monitor.stats().why
            )?,
            ("tier", [t]) => match Tier::from_name(t) {
                Some(tier) => self.switch(tier, out)?,
                None => {
                    let names: Vec<&str> = Tier::ALL.iter().map(|t| t.name()).collect();
                    writeln!(
                        out,
                        "error: unknown tier `{}` (tiers: {})",
                        excerpt(t),
                        names.join(", ")
                    )?;
                }
            },
            ("stats", _) => write!(out, "{}", self.monitor.stats())?,
            ("history", [s, rest @ ..]) if rest.len() <= 1 => {
                let n: usize = match rest.first().map(|n| n.parse()) {
                    None => 10,
                    Some(Ok(n)) => n,
                    Some(Err(_)) => {
                        writeln!(out, "error: `{}` is not a count", excerpt(rest[0]))?;
                        return Ok(true);
                    }
                };
                let Some(k) = self.streams.iter().position(|x| x == s) else {
                    writeln!(out, "error: no stream `{s}`")?;
                    return Ok(true);
                };
                let h = &self.history[k];
                for (step, sample) in h.iter().skip(h.len().saturating_sub(n)) {
                    writeln!(out, "{s}[{step}] = {sample}")?;
                }
            }
            ("load", [path]) => self.load(path, false, out)?,
            ("load", ["-q", path]) => self.load(path, true, out)?,
            ("tick", [t]) => match parse_time(t) {
                Ok(time) => {
                    if self.scheduler.is_none() {
                        writeln!(
                            out,
                            "note: the specification has no periodic streams: no tick runs"
                        )?;
                    }
                    if self.advance(time, out)? {
                        writeln!(out, "time: {}", time.seconds())?;
                    }
                }
                Err(e) => writeln!(out, "error: {e}")?,
            },
            ("reset", []) => {
                self.monitor.reset();
                self.restart_clock();
                self.history.iter_mut().for_each(VecDeque::clear);
                writeln!(out, "reset: step 0")?;
            }
            ("save", [path]) => match std::fs::write(path, &self.spec.checked().source) {
                Ok(()) => writeln!(out, "saved the specification to {path}")?,
                Err(e) => writeln!(out, "error: cannot write `{path}`: {e}")?,
            },
            ("snapshot", [path]) => {
                match std::fs::write(path, self.monitor.snapshot().to_bytes()) {
                    Ok(()) => writeln!(
                        out,
                        "saved the run at step {} to {path}",
                        self.monitor.steps()
                    )?,
                    Err(e) => writeln!(out, "error: cannot write `{path}`: {e}")?,
                }
            }
            ("restore", [path]) => {
                let restored = std::fs::read(path)
                    .map_err(|e| format!("cannot read `{path}`: {e}"))
                    .and_then(|b| Snapshot::from_bytes(&b).map_err(|e| e.to_string()))
                    .and_then(|s| {
                        Ok(Monitor::builder(&self.spec)
                            .tier(self.tier)
                            .restore(&s)
                            .map_err(|e| e.to_string())?
                            .build())
                    });
                match restored {
                    Ok(m) => {
                        self.monitor = m;
                        self.restart_clock();
                        self.history.iter_mut().for_each(VecDeque::clear);
                        // The snapshot holds the values of its last step:
                        // `:history` shows them, as after that step.
                        if let Some(last) = self.monitor.steps().checked_sub(1) {
                            self.record(last);
                        }
                        writeln!(
                            out,
                            "restored: the next row is step {}",
                            self.monitor.steps()
                        )?;
                    }
                    Err(e) => writeln!(out, "error: {e}")?,
                }
            }
            ("quit" | "q" | "exit", _) => return Ok(false),
            _ => writeln!(
                out,
                "error: unknown command `:{}` (`:help` lists them)",
                excerpt(command)
            )?,
        }
        Ok(true)
    }

    /// Applies `text` as a `:def`, or keeps it for the next line while it
    /// declares streams it does not define yet.
    fn define_or_continue(&mut self, text: String, out: &mut dyn Write) -> io::Result<()> {
        if text.is_empty() || edit::needs_more(&text) {
            self.pending = Some(text);
            return Ok(());
        }
        self.define(&text, out)
    }

    /// `:def`: the specification with `text`'s declarations in it.
    fn define(&mut self, text: &str, out: &mut dyn Write) -> io::Result<()> {
        match edit::define(&self.spec.checked().source, text) {
            Ok((source, _)) => self.respecify(&source, out),
            // Diagnostics carry their own `error:` lines.
            Err(edit::EditError::Syntax(d)) => writeln!(out, "{d}\nthe specification is unchanged"),
            Err(e) => writeln!(out, "error: {e}\nthe specification is unchanged"),
        }
    }

    /// Replaces the specification by `source` if it passes the checker, and
    /// carries the run over to it (the repaired schedule): the monitor of the
    /// new plan, on the session's tier, continues at the same step.
    fn respecify(&mut self, source: &str, out: &mut dyn Write) -> io::Result<()> {
        let file = self.spec.checked().file.clone();
        let spec = match Spec::parse(&file, source) {
            Ok(spec) => spec,
            Err(mut d) => {
                // The lines are those of the edited text, not of the file.
                d.file = format!("{file} (edited)");
                return writeln!(out, "{d}\nthe specification is unchanged");
            }
        };
        let (snapshot, repair) = match self.monitor.repair(&spec) {
            Ok(r) => r,
            Err(e) => return writeln!(out, "error: {e}\nthe specification is unchanged"),
        };
        let monitor = match Monitor::builder(&spec).tier(self.tier).restore(&snapshot) {
            Ok(b) => b.build(),
            Err(e) => panic!("engine bug: a repaired snapshot does not restore: {e}"),
        };
        // `:history` keeps what it showed of the kept streams.
        let mut kept: Vec<(String, VecDeque<(u64, Sample)>)> = Vec::new();
        for (name, h) in self.streams.iter().zip(&mut self.history) {
            if repair.kept.contains(name) {
                kept.push((name.clone(), std::mem::take(h)));
            }
        }
        let tier_before = self.monitor.tier();
        self.spec = spec;
        self.monitor = monitor;
        // The ticks go on: kept periods keep their next tick, a new one
        // ticks first one period after the time given last.
        let periods = self.monitor.periods().to_vec();
        self.scheduler = match &self.scheduler {
            _ if periods.is_empty() => None,
            Some(old) => Some(crate::time::Scheduler::carried(&periods, old, self.now)),
            None => Some(crate::time::Scheduler::new(&periods)),
        };
        self.read_names();
        self.history = (self.streams.iter())
            .map(|n| {
                kept.iter_mut()
                    .find(|(k, _)| k == n)
                    .map(|(_, h)| std::mem::take(h))
                    .unwrap_or_default()
            })
            .collect();
        let mut parts: Vec<String> = (repair.started.iter())
            .map(|s| format!("{} {}", s.stream, s.why))
            .collect();
        parts.extend(repair.dropped.iter().map(|s| format!("{s} dropped")));
        writeln!(
            out,
            "repaired at step {}: {}; {} stream{} kept",
            repair.step,
            if parts.is_empty() {
                "nothing changed".to_string()
            } else {
                parts.join(", ")
            },
            repair.kept.len(),
            if repair.kept.len() == 1 { "" } else { "s" }
        )?;
        // The tier the new plan runs on, when it is not the one before (a
        // non-scalar stream added under native-whole, or `auto` choosing).
        if self.monitor.tier() != tier_before {
            writeln!(
                out,
                "tier: {} ({})",
                self.monitor.tier(),
                self.monitor.stats().why
            )?;
        }
        Ok(())
    }

    /// Moves the run to `tier`: snapshot, new monitor, restore.
    fn switch(&mut self, tier: Tier, out: &mut dyn Write) -> io::Result<()> {
        let snapshot = self.monitor.snapshot();
        match Monitor::builder(&self.spec).tier(tier).restore(&snapshot) {
            Ok(builder) => {
                self.monitor = builder.build();
                self.tier = tier;
                writeln!(
                    out,
                    "tier: {} ({}); the run goes on at step {}",
                    self.monitor.tier(),
                    self.monitor.stats().why,
                    self.monitor.steps()
                )
            }
            Err(e) => writeln!(out, "error: {e}"),
        }
    }

    /// Feeds every row of a trace file.
    fn load(&mut self, path: &str, quiet: bool, out: &mut dyn Write) -> io::Result<()> {
        let Some(format) = trace::format_from_path(path) else {
            return writeln!(
                out,
                "error: cannot tell the format of `{path}` (.input, .csv, .jsonl)"
            );
        };
        let opened = match trace::open_trace(
            path,
            format,
            &self.spec.input_schema(),
            ReaderOptions::default(),
        ) {
            Ok(o) => o,
            Err(e) => return writeln!(out, "error: {e}"),
        };
        let mut reader = opened.reader;
        let mut cells = vec![None; self.monitor.input_count()];
        let (first, mut rows) = (self.monitor.steps(), 0u64);
        let mut sink = io::sink();
        loop {
            match reader.next_row(&mut cells) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    writeln!(out, "error: {e}")?;
                    break;
                }
            }
            let mut row = self.monitor.row();
            for (name, cell) in self.spec.input_names().iter().zip(&cells) {
                if let Some(v) = cell {
                    let _ = row.assign(name, v.clone());
                }
            }
            let target: &mut dyn Write = if quiet { &mut sink } else { &mut *out };
            self.step(&row, None, target)?;
            rows += 1;
        }
        if quiet {
            writeln!(
                out,
                "loaded {rows} rows from {path}: steps {first}..{}",
                self.monitor.steps()
            )?;
        }
        Ok(())
    }
}

/// How a session's run stands when its lines end: a script's exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Every line was taken (some may have been commands that failed).
    Clean,
    /// A line was not a row (a malformed row is skipped, no step taken).
    Malformed,
    /// The monitor stopped on a runtime error.
    Stopped,
}

impl Session {
    /// The line a terminal session opens with: the file and the tier.
    pub fn banner(&self) -> String {
        format!(
            "vigil repl: {} on {} — `:help` for commands, Ctrl-D to leave",
            self.spec.checked().file,
            self.monitor.tier()
        )
    }

    /// Line `at` could not be read as text (not UTF-8 from byte
    /// `valid_up_to + 1`): said, and skipped as a malformed row is.
    pub fn undecodable(
        &mut self,
        at: usize,
        valid_up_to: usize,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        self.malformed = true;
        writeln!(
            out,
            "error: line {at}: not valid UTF-8 (at byte {}); the line is skipped",
            valid_up_to + 1
        )
    }

    /// The lines have ended: a `:def` still reading its definitions is
    /// applied as it is (the checker says what is missing), and how the run
    /// stands is returned.
    pub fn finish(&mut self, out: &mut dyn Write) -> io::Result<Ended> {
        if let Some(text) = self.pending.take() {
            self.define(&text, out)?;
        }
        Ok(if self.monitor.snapshot().is_stopped() {
            Ended::Stopped
        } else if self.malformed {
            Ended::Malformed
        } else {
            Ended::Clean
        })
    }

    /// What completion offers: the commands and the stream names.
    pub fn words(&self) -> Vec<String> {
        let mut words: Vec<String> = (COMMANDS.iter())
            .filter(|(c, _)| c.starts_with(':'))
            .map(|(c, _)| c.split_whitespace().next().unwrap_or(c).to_string())
            .collect();
        words.extend(self.streams.iter().cloned());
        words
    }
}

/// Whether `line` has `word` as a whole word (not inside a longer name).
fn names_word(line: &str, word: &str) -> bool {
    line.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == word)
}

fn ensure_newline(s: &str) -> String {
    if s.ends_with('\n') {
        s.to_string()
    } else {
        format!("{s}\n")
    }
}

/// A value as written in a row.
enum Text {
    Plain(String),
    Quoted(String),
}

/// The `name=value` pairs of a row line; a quoted value is a JSON string
/// (so `s="a b"` and `s="say \"hi\""` work).
fn pairs(line: &str) -> Result<Vec<(String, Text)>, String> {
    let mut out = Vec::new();
    let mut rest = line.trim_start();
    while !rest.is_empty() {
        let eq = rest
            .find('=')
            .ok_or_else(|| format!("expected `name=value`, found `{}`", excerpt(rest)))?;
        let name = rest[..eq].trim().to_string();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(format!(
                "expected `name=value`, found `{}`",
                excerpt(&rest[..eq])
            ));
        }
        // As the trace readers refuse an input assigned twice in a step.
        if out.iter().any(|(n, _): &(String, Text)| *n == name) {
            return Err(format!(
                "input `{}` is given twice in this row",
                excerpt(&name)
            ));
        }
        rest = rest[eq + 1..].trim_start();
        let text = if rest.starts_with('"') {
            // The shortest prefix that is a whole JSON string.
            let mut end = None;
            let mut escaped = false;
            for (i, c) in rest.char_indices().skip(1) {
                match c {
                    '\\' if !escaped => escaped = true,
                    '"' if !escaped => {
                        end = Some(i + 1);
                        break;
                    }
                    _ => escaped = false,
                }
            }
            let end =
                end.ok_or_else(|| format!("an unterminated string after `{}=`", excerpt(&name)))?;
            let s: String = serde_json::from_str(&rest[..end])
                .map_err(|e| format!("the string after `{}=` is not valid: {e}", excerpt(&name)))?;
            rest = &rest[end..];
            Text::Quoted(s)
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let t = rest[..end].to_string();
            rest = &rest[end..];
            Text::Plain(t)
        };
        rest = rest.trim_start();
        out.push((name, text));
    }
    Ok(out)
}

/// A step's outputs and alerts, copied out of the monitor's view.
struct Shown {
    step: u64,
    samples: Vec<Sample>,
    alerts: Vec<(String, u64, String)>,
}

impl Shown {
    fn of(outputs: &crate::monitor::Outputs<'_>) -> Shown {
        Shown {
            step: outputs.step(),
            samples: outputs.iter().collect(),
            alerts: (outputs.alerts())
                .map(|a| (a.trigger().to_string(), a.step(), a.message().to_string()))
                .collect(),
        }
    }
}

/// A time as `@T` and `:tick T` take it: seconds (a number, negative
/// allowed) or RFC 3339 text.
fn parse_time(text: &str) -> Result<crate::time::Time, String> {
    let value = match text.parse::<f64>() {
        Ok(x) => Value::Float(x),
        Err(_) => Value::Str(text.into()),
    };
    crate::time::Time::from_value(&value, crate::time::TimeUnit::Seconds)
        .map(|(t, _)| t)
        .map_err(|_| {
            format!(
                "`{}` is not a time: give seconds (`2.5`) or RFC 3339 text (`2026-12-06T10:00:00Z`)",
                excerpt(text)
            )
        })
}
