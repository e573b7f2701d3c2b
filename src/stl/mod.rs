//! Signal Temporal Logic properties, as the Trustworthiness Checker monitors them
//! (`--language mstlo`): a file of named formulas (`safe: G[0,2](x > 3)`) over timed signals,
//! evaluated under one of four semantics with the checker's own choices of when each verdict is
//! given (docs/language.md, "STL properties").
//!
//! [`StlSpec::parse`] reads a property file; an [`StlMonitor`] runs its properties over samples
//! ([`StlSample`]), one step (the samples of one time, or of one block of an `.input` trace) at
//! a time, and returns the verdicts each step makes possible. The verdicts are the checker's
//! (its `mstlo` 0.1.1 engine's) value for value and in the same order: every shared
//! conformance case passes (`tests/it/stl.rs`), and a property test compares the two on
//! generated formulas and signals.
//!
//! [`StlRun`] runs them on the DSRV plan instead (`plan.rs`), on any tier, where that is
//! exact — the delayed semantics, a trace on one regular grid, but for a few `U`s — and on
//! the evaluator (`ops.rs`) otherwise, with the same verdicts either way.

mod domain;
mod ops;
mod parse;
mod plan;
mod sync;
mod timed;
mod verdicts;

pub use domain::Interval;
pub use parse::MAX_BOUND_SECONDS;
pub use plan::{MAX_PLAN_STEPS, StlPlan, StlRun};
pub use timed::{
    Lockstep, checker_value, column_samples, column_samples_into, millis, row_samples,
    row_samples_into, timed_value, verdict_value,
};
pub use verdicts::{VerdictForm, VerdictWriter};

use crate::lang::diag::{Diagnostics, Span};
use domain::Domain;
use ops::{Mode, Node, Sample};
use std::fmt;
use std::time::Duration;
use sync::Synchronizer;

/// A signal of a property file, numbered in order of first mention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SignalId(pub(crate) u32);

/// A variable (`$threshold`) of a property file, numbered in order of first mention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct VarId(pub(crate) u32);

/// A formula of the spec's arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FormulaId(pub(crate) u32);

/// A comparison of a signal with a threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cmp {
    Gt,
    Lt,
    Ge,
    Le,
}

/// A comparison's threshold: a number, or a variable given when the monitor is made.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Threshold {
    Const(f64),
    Var(VarId),
}

/// A temporal operator's interval `[start, end]`, relative to the time evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub start: Duration,
    pub end: Duration,
}

/// A formula node.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Formula {
    True,
    False,
    Compare {
        signal: SignalId,
        cmp: Cmp,
        threshold: Threshold,
    },
    Not(FormulaId),
    And(FormulaId, FormulaId),
    Or(FormulaId, FormulaId),
    Implies(FormulaId, FormulaId),
    Eventually(Window, FormulaId),
    Globally(Window, FormulaId),
    Until(Window, FormulaId, FormulaId),
}

impl Formula {
    pub(crate) fn children(&self) -> impl Iterator<Item = FormulaId> {
        let (a, b) = match *self {
            Formula::True | Formula::False | Formula::Compare { .. } => (None, None),
            Formula::Not(f) | Formula::Eventually(_, f) | Formula::Globally(_, f) => {
                (Some(f), None)
            }
            Formula::And(l, r)
            | Formula::Or(l, r)
            | Formula::Implies(l, r)
            | Formula::Until(_, l, r) => (Some(l), Some(r)),
        };
        a.into_iter().chain(b)
    }
}

/// A named property of the file.
#[derive(Clone, Debug)]
pub(crate) struct Property {
    pub name: String,
    pub root: FormulaId,
}

/// A parsed STL property file.
#[derive(Clone, Debug)]
pub struct StlSpec {
    file: String,
    source: String,
    /// In name order (the order the checker runs and prints them in).
    pub(crate) properties: Vec<Property>,
    pub(crate) formulas: Vec<(Formula, Span)>,
    /// Each formula's height (a comparison is 1), bounded by `lang::MAX_NESTING`.
    pub(crate) heights: Vec<usize>,
    pub(crate) signals: Vec<String>,
    pub(crate) vars: Vec<String>,
}

impl StlSpec {
    /// Parses a property file: `name: formula` per line, `#` comments (the grammar is in
    /// docs/language.md, "STL properties"). `file` names it in diagnostics.
    pub fn parse(file: &str, source: &str) -> Result<StlSpec, Diagnostics> {
        parse::parse_file(file, source)
    }

    /// [`StlSpec::parse`] of a file's bytes: bytes that are not UTF-8 are a located diagnostic,
    /// as [`crate::Spec::parse_bytes`] makes for a specification.
    pub fn parse_bytes(file: &str, bytes: &[u8]) -> Result<StlSpec, Diagnostics> {
        match std::str::from_utf8(bytes) {
            Ok(source) => parse::parse_file(file, source),
            Err(e) => Err(parse::not_utf8(file, bytes, &e)),
        }
    }

    /// The file's name, as given to [`StlSpec::parse`].
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The file's text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The properties' names, in name order (the order of the verdicts and the output).
    pub fn properties(&self) -> impl ExactSizeIterator<Item = &str> {
        self.properties.iter().map(|p| p.name.as_str())
    }

    /// The signals the properties read, in order of first mention.
    pub fn signals(&self) -> &[String] {
        &self.signals
    }

    /// A signal by name.
    pub fn signal(&self, name: &str) -> Option<SignalId> {
        self.signals
            .iter()
            .position(|s| s == name)
            .map(|i| SignalId(i as u32))
    }

    /// The variables (`$name`) the properties read, in order of first mention.
    pub fn variables(&self) -> &[String] {
        &self.vars
    }

    /// How far past a time the samples must reach before a property's verdict for it is final
    /// under the delayed semantics: the sum of its nested intervals' ends.
    pub fn horizon(&self, property: usize) -> Duration {
        self.horizon_of(self.properties[property].root)
    }

    /// A property's formula, as text (fully parenthesised).
    pub fn formula_text(&self, property: usize) -> String {
        self.show(self.properties[property].root)
    }

    fn horizon_of(&self, f: FormulaId) -> Duration {
        let own = match self.formula(f) {
            Formula::Eventually(w, _) | Formula::Globally(w, _) | Formula::Until(w, _, _) => w.end,
            _ => Duration::ZERO,
        };
        own + self
            .formula(f)
            .children()
            .map(|c| self.horizon_of(c))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// What `vigil explain` says of the file: per property its formula as parsed, its
    /// signals, its horizon and what its run keeps (the memory bound).
    pub fn explain(&self) -> String {
        let mut out = String::new();
        for (i, p) in self.properties.iter().enumerate() {
            let signals: Vec<&str> = self
                .signals_of(p.root)
                .iter()
                .map(|s| self.signals[s.0 as usize].as_str())
                .collect();
            let horizon = self.horizon(i).as_secs_f64();
            out.push_str(&format!("property {}: {}\n", p.name, self.show(p.root)));
            let synced = if signals.len() > 1 {
                " (synchronized, --mstlo-synchronization)"
            } else {
                ""
            };
            let signals = if signals.is_empty() {
                "none (a verdict at every sample)".to_string()
            } else {
                signals.join(", ")
            };
            out.push_str(&format!("  signals: {signals}{synced}\n"));
            out.push_str(&format!(
                "  horizon: {horizon} s (a delayed verdict for time t once the samples reach t + {horizon} s)\n"
            ));
            let mut kept = Vec::new();
            self.kept(p.root, &mut kept);
            if kept.is_empty() {
                out.push_str("  state: none (no temporal operator)\n");
            } else {
                out.push_str(
                    "  state (bounded by the samples within each span while every signal keeps being sampled):\n",
                );
                for line in kept {
                    out.push_str(&format!("    {line}\n"));
                }
            }
        }
        out.push_str(&plan::explain(self));
        out
    }

    /// What each temporal operator under `f` keeps: the span of samples of its horizon.
    fn kept(&self, f: FormulaId, out: &mut Vec<String>) {
        let secs = |d: Duration| d.as_secs_f64();
        let what = match self.formula(f) {
            Formula::Eventually(..) => "F: a monotonic deque of its operand's values",
            Formula::Globally(..) => "G: a monotonic deque of its operand's values",
            Formula::Until(..) => "U: both operands' values",
            _ => "",
        };
        if let Formula::Eventually(w, _) | Formula::Globally(w, _) | Formula::Until(w, _, _) =
            self.formula(f)
        {
            out.push(format!(
                "[{},{}] {what} and its pending times, over the last {} s of samples",
                secs(w.start),
                secs(w.end),
                secs(self.horizon_of(f))
            ));
        }
        for c in self.formula(f).children() {
            self.kept(c, out);
        }
    }

    pub(crate) fn formula(&self, f: FormulaId) -> &Formula {
        &self.formulas[f.0 as usize].0
    }

    /// The signals a formula reads, in id order.
    pub(crate) fn signals_of(&self, f: FormulaId) -> Vec<SignalId> {
        let mut out = Vec::new();
        self.collect_signals(f, &mut out);
        out.sort();
        out.dedup();
        out
    }

    fn collect_signals(&self, f: FormulaId, out: &mut Vec<SignalId>) {
        if let Formula::Compare { signal, .. } = self.formula(f) {
            out.push(*signal);
        }
        for c in self.formula(f).children() {
            self.collect_signals(c, out);
        }
    }

    /// A formula as text, fully parenthesised (`((x > 1 && y < 2) || z > 3)`).
    pub(crate) fn show(&self, f: FormulaId) -> String {
        let secs = |d: Duration| d.as_secs_f64();
        let w = |w: &Window| format!("[{},{}]", secs(w.start), secs(w.end));
        match self.formula(f) {
            Formula::True => "true".into(),
            Formula::False => "false".into(),
            Formula::Compare {
                signal,
                cmp,
                threshold,
            } => {
                let op = match cmp {
                    Cmp::Gt => ">",
                    Cmp::Lt => "<",
                    Cmp::Ge => ">=",
                    Cmp::Le => "<=",
                };
                let t = match threshold {
                    Threshold::Const(c) => c.to_string(),
                    Threshold::Var(v) => format!("${}", self.vars[v.0 as usize]),
                };
                format!("{} {op} {t}", self.signals[signal.0 as usize])
            }
            Formula::Not(a) => format!("!({})", self.show(*a)),
            Formula::And(a, b) => format!("({} && {})", self.show(*a), self.show(*b)),
            Formula::Or(a, b) => format!("({} || {})", self.show(*a), self.show(*b)),
            Formula::Implies(a, b) => format!("({} -> {})", self.show(*a), self.show(*b)),
            Formula::Eventually(win, a) => format!("F{}({})", w(win), self.show(*a)),
            Formula::Globally(win, a) => format!("G{}({})", w(win), self.show(*a)),
            Formula::Until(win, a, b) => {
                format!("({} U{} {})", self.show(*a), w(win), self.show(*b))
            }
        }
    }
}

/// How verdicts are computed and when they are given (the checker's `--semantics`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Semantics {
    /// Robustness (a Float: how far from violation), once the formula's horizon has passed.
    #[default]
    DelayedQuantitative,
    /// A Boolean verdict, once the horizon has passed.
    DelayedQualitative,
    /// A Boolean verdict as soon as it is decided (a `false` in a `G` window, a `true` in an
    /// `F` window), else once the horizon has passed.
    EagerQualitative,
    /// A robustness interval (`lower`, `upper`) at once, narrowed as samples arrive and final
    /// once its horizon has passed.
    RobustnessInterval,
}

impl Semantics {
    /// Every semantics, in the checker's order.
    pub const ALL: [Semantics; 4] = [
        Semantics::DelayedQuantitative,
        Semantics::DelayedQualitative,
        Semantics::EagerQualitative,
        Semantics::RobustnessInterval,
    ];

    /// The checker's name of it (`delayed-quantitative`, …).
    pub fn name(self) -> &'static str {
        match self {
            Semantics::DelayedQuantitative => "delayed-quantitative",
            Semantics::DelayedQualitative => "delayed-qualitative",
            Semantics::EagerQualitative => "eager-qualitative",
            Semantics::RobustnessInterval => "robustness-interval",
        }
    }

    /// The semantics of a name (`delayed-quantitative`, …).
    pub fn from_name(name: &str) -> Option<Semantics> {
        Semantics::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// How a formula over several signals sees a signal between its samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Synchronization {
    /// Not at all: each formula node sees its own signals' samples only.
    None,
    /// The last value, at every time another signal was sampled (the checker's default).
    #[default]
    ZeroOrderHold,
    /// The value interpolated linearly between the samples around that time.
    Linear,
}

impl Synchronization {
    /// Every strategy.
    pub const ALL: [Synchronization; 3] = [
        Synchronization::None,
        Synchronization::ZeroOrderHold,
        Synchronization::Linear,
    ];

    /// Its name on the command line (`none`, `zero-order-hold`, `linear`).
    pub fn name(self) -> &'static str {
        match self {
            Synchronization::None => "none",
            Synchronization::ZeroOrderHold => "zero-order-hold",
            Synchronization::Linear => "linear",
        }
    }

    /// The strategy of a name.
    pub fn from_name(name: &str) -> Option<Synchronization> {
        Synchronization::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// A property's verdict for one time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// Robustness (the quantitative semantics).
    Robustness(f64),
    /// Satisfied or not (the qualitative semantics).
    Bool(bool),
    /// The robustness lies in this interval (RoSI).
    Interval(Interval),
}

/// One verdict given by a step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Emitted {
    /// The property's index (in [`StlSpec::properties`]' order).
    pub property: usize,
    /// The time the verdict is for.
    pub time: Duration,
    /// The verdict.
    pub value: Verdict,
}

/// One sample of a signal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StlSample {
    /// The signal.
    pub signal: SignalId,
    /// Its time.
    pub time: Duration,
    /// Its value.
    pub value: f64,
}

/// A monitor cannot be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StlError {
    /// A variable the properties read has no value.
    MissingVariable(String),
    /// A value was given for a name that is not a variable of the properties.
    UnknownVariable(String),
}

impl fmt::Display for StlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StlError::MissingVariable(v) => write!(
                f,
                "the variable `${v}` has no value: give it one (`--mstlo-vars {v}=VALUE`)"
            ),
            StlError::UnknownVariable(v) => {
                write!(f, "`{v}` is not a variable of the properties (no `${v}`)")
            }
        }
    }
}

impl std::error::Error for StlError {}

/// One property's run in one domain: its synchronizer and its operator tree.
#[derive(Clone, Debug)]
struct Run<D> {
    sync: Synchronizer,
    root: Node<D>,
    /// Scratch: the verdicts of one sample.
    given: Vec<ops::Out<D>>,
}

/// The properties' runs, in the semantics' domain.
#[derive(Clone, Debug)]
enum Runs {
    Quantitative(Vec<Run<f64>>),
    Qualitative(Vec<Run<bool>>),
    Interval(Vec<Run<Interval>>),
}

/// A running monitor of an STL property file.
#[derive(Clone, Debug)]
pub struct StlMonitor {
    runs: Runs,
    signal_names: Vec<String>,
    /// The last time of each signal: a sample whose time does not increase is dropped, as the
    /// checker drops it (with a warning).
    last_time: Vec<Option<Duration>>,
    warnings: Vec<String>,
    /// Scratch: the synchronized samples of one sample, and the samples of a step kept.
    synced: Vec<Sample>,
    kept: Vec<Sample>,
}

impl StlMonitor {
    /// A monitor of `spec`'s properties under `semantics`, with `vars` the values of its
    /// variables (`$name`).
    pub fn new(
        spec: &StlSpec,
        semantics: Semantics,
        sync: Synchronization,
        vars: &[(String, f64)],
    ) -> Result<StlMonitor, StlError> {
        let mut values = vec![None; spec.vars.len()];
        for (name, v) in vars {
            let i = spec
                .vars
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| StlError::UnknownVariable(name.clone()))?;
            values[i] = Some(*v);
        }
        let runs = match semantics {
            Semantics::DelayedQuantitative => {
                Runs::Quantitative(runs(spec, Mode::Delayed, sync, &values)?)
            }
            Semantics::DelayedQualitative => {
                Runs::Qualitative(runs(spec, Mode::Delayed, sync, &values)?)
            }
            Semantics::EagerQualitative => {
                Runs::Qualitative(runs(spec, Mode::Eager, sync, &values)?)
            }
            Semantics::RobustnessInterval => Runs::Interval(runs(spec, Mode::Rosi, sync, &values)?),
        };
        Ok(StlMonitor {
            runs,
            signal_names: spec.signals.clone(),
            last_time: vec![None; spec.signals.len()],
            warnings: Vec::new(),
            synced: Vec::new(),
            kept: Vec::new(),
        })
    }

    /// Runs one step: `samples` (in any order) are sorted by time, then by signal name, and
    /// each property takes them in turn. Returns the verdicts given, property by property, each
    /// property's in the order it gave them (one per time per sample, the last refinement).
    pub fn step(&mut self, samples: &mut [StlSample]) -> Vec<Emitted> {
        let names = &self.signal_names;
        samples.sort_by(|a, b| {
            a.time
                .cmp(&b.time)
                .then_with(|| names[a.signal.0 as usize].cmp(&names[b.signal.0 as usize]))
        });
        let mut kept = std::mem::take(&mut self.kept);
        kept.clear();
        for s in samples.iter() {
            let last = &mut self.last_time[s.signal.0 as usize];
            if last.is_some_and(|l| s.time <= l) {
                self.warnings.push(format!(
                    "a sample of `{}` at {} ms is ignored: its time is not after the last one ({} ms)",
                    names[s.signal.0 as usize],
                    s.time.as_millis(),
                    last.map_or(0, |l| l.as_millis())
                ));
                continue;
            }
            *last = Some(s.time);
            kept.push(Sample {
                signal: s.signal,
                time: s.time,
                value: s.value,
            });
        }
        let mut out = Vec::new();
        match &mut self.runs {
            Runs::Quantitative(r) => {
                step_all(r, &kept, &mut self.synced, &mut out, Verdict::Robustness)
            }
            Runs::Qualitative(r) => step_all(r, &kept, &mut self.synced, &mut out, Verdict::Bool),
            Runs::Interval(r) => step_all(r, &kept, &mut self.synced, &mut out, Verdict::Interval),
        }
        self.kept = kept;
        out
    }

    /// The warnings since the last call (samples dropped), taken.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// How many verdicts and times the monitor holds now: its memory, which the properties'
    /// horizons bound (the samples one horizon spans, per temporal operator).
    pub fn held(&self) -> usize {
        fn sum<D: Domain>(r: &[Run<D>]) -> usize {
            r.iter().map(|r| r.root.held() + r.sync.held()).sum()
        }
        match &self.runs {
            Runs::Quantitative(r) => sum(r),
            Runs::Qualitative(r) => sum(r),
            Runs::Interval(r) => sum(r),
        }
    }
}

fn runs<D: Domain>(
    spec: &StlSpec,
    mode: Mode,
    sync: Synchronization,
    vars: &[Option<f64>],
) -> Result<Vec<Run<D>>, StlError> {
    spec.properties
        .iter()
        .map(|p| {
            let root =
                ops::build(spec, p.root, mode, vars).map_err(|m| StlError::MissingVariable(m.0))?;
            // A formula over one signal (or none) needs no synchronization.
            let strategy = if spec.signals_of(p.root).len() <= 1 {
                Synchronization::None
            } else {
                sync
            };
            Ok(Run {
                sync: Synchronizer::new(strategy),
                root,
                given: Vec::new(),
            })
        })
        .collect()
}

fn step_all<D: Domain>(
    runs: &mut [Run<D>],
    samples: &[Sample],
    synced: &mut Vec<Sample>,
    out: &mut Vec<Emitted>,
    wrap: fn(D) -> Verdict,
) {
    for (property, run) in runs.iter_mut().enumerate() {
        let given = &mut run.given;
        for &s in samples {
            synced.clear();
            run.sync.push(s, synced);
            given.clear();
            for s in synced.iter() {
                run.root.update(s, given);
            }
            // One verdict per time per sample, in time order: a refinement given twice keeps
            // the last (the stable sort keeps the order of equal times).
            if given.len() > 1 {
                given.sort_by_key(|v| v.0);
                given.reverse();
                given.dedup_by_key(|v| v.0);
                given.reverse();
            }
            out.extend(given.iter().map(|&(time, v)| Emitted {
                property,
                time,
                value: wrap(v),
            }));
        }
    }
}
