//! Keyed monitors: one compiled plan shared by many runs, one run per value of a key input.
//!
//! A [`KeyedMonitor`] monitors each value of one input (its *key*: `host`,
//! `device`) as a trace of its own. The plan, its fused regions and native
//! code are built once, in one `Engine`; each key owns only a `Run` (its
//! `NodeState`, promotion bits and stop error), created from a fresh state
//! the first time the key is seen. So a key's step count is the number of its
//! own rows, its offsets reach back over its own rows, and a runtime error
//! stops that key alone.
//!
//! This works because every tier keeps all run state in the one `NodeState`
//! (ARCHITECTURE.md, "One home for state"): the engine holds no per-trace
//! state, so handing it another key's run between two rows is all a switch
//! costs.
//!
//! Live keys may be bounded: when a new key would exceed the bound, the least
//! recently used key is evicted, its state dropped or handed to a callback as
//! a [`Snapshot`] (to store it, say, and [`KeyedMonitor::restore_key`] it
//! when the key comes back). Without a bound no recency is tracked at all, so
//! an unbounded monitor pays nothing for the option.

use crate::exec::{Engine, Run};
use crate::monitor::{DEFAULT_MAX_STRING_BYTES, Outputs, Spec, Stats, Tier};
use crate::plan::Plan;
use crate::row::{Checked, RowError, RowSchema, StepError};
use crate::snapshot::{KeyedSnapshot, Snapshot, SnapshotError};
use crate::value::{Key, Sample, Value};
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Arc;

/// What happens to the state of a key evicted by the bound on live keys.
enum Eviction {
    /// It is dropped: the key starts afresh if it comes back.
    Drop,
    /// It is handed to the callback as a snapshot.
    Callback(Box<dyn FnMut(Key, Snapshot) + Send>),
}

/// Configures a [`KeyedMonitor`] (see [`KeyedMonitor::builder`]).
pub struct KeyedMonitorBuilder<'a> {
    spec: &'a Spec,
    key: String,
    tier: Tier,
    max_string_bytes: usize,
    max_keys: Option<NonZeroUsize>,
    eviction: Eviction,
    restored: Option<&'a KeyedSnapshot>,
}

impl<'a> KeyedMonitorBuilder<'a> {
    /// The tier to run (default `Auto`: the fastest available). Every key
    /// runs on it.
    pub fn tier(mut self, tier: Tier) -> Self {
        self.tier = tier;
        self
    }

    /// The longest string a `++` may produce, for every key (see
    /// [`crate::MonitorBuilder::max_string_bytes`]).
    pub fn max_string_bytes(mut self, bytes: usize) -> Self {
        self.max_string_bytes = bytes;
        self
    }

    /// Bounds the live keys: a row of a new key when `n` keys are live first
    /// evicts the least recently used one (a key is used by each of its
    /// rows). Without a bound every key seen stays live.
    pub fn max_keys(mut self, n: NonZeroUsize) -> Self {
        self.max_keys = Some(n);
        self
    }

    /// Hands every evicted key's state to `f` as a [`Snapshot`] instead of
    /// dropping it (only a bound on live keys evicts).
    pub fn on_evict(mut self, f: impl FnMut(Key, Snapshot) + Send + 'static) -> Self {
        self.eviction = Eviction::Callback(Box::new(f));
        self
    }

    /// Continues the keyed run `snapshot` was taken of (every live key, in
    /// its recency order, and the row count), on any tier. Checked by
    /// `build`: a snapshot of another specification or key input is an
    /// error, never misread.
    pub fn restore(mut self, snapshot: &'a KeyedSnapshot) -> Self {
        self.restored = Some(snapshot);
        self
    }

    /// Builds the monitor: plans, fuses and compiles once, for every key.
    /// The key must be a declared input ([`RowError::UnknownInput`]); a
    /// snapshot given to `restore` must fit ([`SnapshotError`]).
    pub fn build(self) -> Result<KeyedMonitor, KeyedBuildError> {
        let inputs = self.spec.inputs().clone();
        let key_index = inputs
            .lookup(&self.key)
            .ok_or_else(|| RowError::UnknownInput {
                name: self.key.clone(),
            })?;
        let plan = Arc::new(Plan::new(self.spec.checked().clone()));
        let mut runs = LruCache::unbounded();
        let mut rows = 0;
        let max = self.max_string_bytes;
        let engine = Engine::new(plan.clone(), self.tier);
        if let Some(snapshot) = self.restored {
            for (key, mut state, failed) in snapshot.restore_runs(&plan, &self.key)? {
                state.max_string_bytes = max;
                let mut run = Run::from_state(&engine, state);
                run.failed = failed.map(Box::new);
                runs.put(key, run);
            }
            rows = snapshot.rows();
        }
        let mut fresh = engine.new_run();
        fresh.state.max_string_bytes = max;
        let mut monitor = KeyedMonitor {
            engine,
            inputs,
            outputs: self.spec.outputs_shared(),
            key_index,
            key_name: self.key,
            runs,
            fresh,
            max_keys: self.max_keys,
            eviction: self.eviction,
            rows,
            last_key: None,
            scratch: Vec::new(),
        };
        // A snapshot with more keys than the bound keeps the most recent.
        monitor.evict_to(monitor.max_keys.map_or(usize::MAX, NonZeroUsize::get));
        Ok(monitor)
    }
}

/// Why a keyed monitor could not be built: its key is not an input, or the
/// snapshot it was to restore does not fit.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyedBuildError {
    /// The key is not a declared input ([`RowError::UnknownInput`]).
    Key(RowError),
    /// The snapshot to restore does not fit the specification or the key.
    Snapshot(SnapshotError),
}

impl std::fmt::Display for KeyedBuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyedBuildError::Key(e) => write!(f, "cannot key the monitor: {e}"),
            KeyedBuildError::Snapshot(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for KeyedBuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyedBuildError::Key(e) => Some(e),
            KeyedBuildError::Snapshot(e) => Some(e),
        }
    }
}

impl From<RowError> for KeyedBuildError {
    fn from(e: RowError) -> Self {
        KeyedBuildError::Key(e)
    }
}

impl From<SnapshotError> for KeyedBuildError {
    fn from(e: SnapshotError) -> Self {
        KeyedBuildError::Snapshot(e)
    }
}

/// A monitor of many traces at once, one per value of a key input, sharing
/// one compiled plan: the plan, fused regions and native code are built once,
/// and each key owns only its run state, made when the key is first seen.
///
/// ```
/// use vigil::{Key, KeyedMonitor, Sample, Spec, Value};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let spec = Spec::parse(
///     "hot.dsrv",
///     "in host: Str\nin temp: Float\nout n: Int\nout rising: Bool\n\
///      n = default(n[1], 0) + 1\nrising = temp > default(temp[1], temp)",
/// )?;
/// let mut monitor = KeyedMonitor::builder(&spec, "host").build()?;
/// for (host, temp) in [("a", 20.0), ("b", 30.0), ("a", 21.5), ("b", 29.0)] {
///     let row = monitor.row().set("host", host)?.set("temp", temp)?;
///     let outputs = monitor.step(&row)?;
///     println!("{} step {}: {:?}", host, outputs.step(), outputs.to_vec());
/// }
/// // Each host is its own trace: two rows each, so far.
/// assert_eq!(monitor.steps(&Key::new("a")), Some(2));
/// assert_eq!(monitor.output(&Key::new("a"), "rising"), Some(Sample::Value(Value::Bool(true))));
/// assert_eq!(monitor.output(&Key::new("b"), "rising"), Some(Sample::Value(Value::Bool(false))));
/// # Ok(())
/// # }
/// ```
pub struct KeyedMonitor {
    engine: Engine,
    /// The inputs every row is checked against (the spec's, shared).
    inputs: Arc<RowSchema>,
    /// The printed outputs' names.
    outputs: Arc<[String]>,
    /// The key input's cell in a row, and its name.
    key_index: usize,
    key_name: String,
    /// Every live key's run. Recency is maintained only when live keys are
    /// bounded (`get_mut`); otherwise lookups `peek_mut` and the order is
    /// the order keys were first seen.
    runs: LruCache<Key, Run>,
    /// A run at step 0, cloned for each new key (cheaper than building a
    /// `NodeState` from the plan, and its vectors are allocated to size).
    fresh: Run,
    max_keys: Option<NonZeroUsize>,
    eviction: Eviction,
    /// Rows evaluated over every key (rejected rows are not counted).
    rows: u64,
    /// The key of the last row evaluated (what `Outputs::key` returns).
    last_key: Option<Key>,
    /// A row converted by the input rule (see `Monitor`).
    scratch: Vec<Option<Value>>,
}

// The eviction callback is `Send`, so the monitor is too; this fails to
// compile if a field ever stops being `Send`.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<KeyedMonitor>();
};

impl KeyedMonitor {
    /// Configures a monitor of `spec` keyed by its input `key`.
    pub fn builder<'a>(spec: &'a Spec, key: &str) -> KeyedMonitorBuilder<'a> {
        KeyedMonitorBuilder {
            spec,
            key: key.to_string(),
            tier: Tier::Auto,
            max_string_bytes: DEFAULT_MAX_STRING_BYTES,
            max_keys: None,
            eviction: Eviction::Drop,
            restored: None,
        }
    }

    /// The tier every key runs on (never `Auto`).
    pub fn tier(&self) -> Tier {
        self.engine.tier
    }

    /// The key input's name.
    pub fn key_input(&self) -> &str {
        &self.key_name
    }

    /// The key input's cell in a row.
    pub fn key_index(&self) -> usize {
        self.key_index
    }

    /// An empty row of the inputs, to fill by name (see [`crate::Row`]).
    pub fn row(&self) -> crate::row::Row {
        crate::row::Row::new(self.inputs.clone())
    }

    /// The row a JSON object gives, by the JSON-lines reader's rules (see
    /// [`crate::Monitor::row_from_json`]).
    pub fn row_from_json(
        &self,
        object: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<crate::row::Row, RowError> {
        crate::monitor::json_row(&self.inputs, object)
    }

    /// The printed outputs' names, in print order.
    pub fn output_names(&self) -> Vec<&str> {
        self.outputs.iter().map(String::as_str).collect()
    }

    /// The number of cells of a row: the declared inputs.
    pub fn input_count(&self) -> usize {
        self.inputs.width()
    }

    /// Evaluates one row on the run of its key (the value of the key
    /// input), creating that run at step 0 if the key is new, and returns
    /// the key's printed outputs ([`Outputs::step`] is the key's own step,
    /// [`Outputs::key`] the key).
    ///
    /// The row is checked as [`crate::Monitor::step`] checks it, and its
    /// key must be present ([`RowError::MissingKey`]); a rejected row
    /// changes nothing. A runtime error stops that key only: its later rows
    /// return the same error, and other keys go on.
    pub fn step(&mut self, row: impl AsRef<[Option<Value>]>) -> Result<Outputs<'_>, StepError> {
        let cells = row.as_ref();
        let cells = match self.inputs.check(cells)? {
            Checked::AsIs => cells,
            Checked::Convert => {
                self.inputs.convert_into(cells, &mut self.scratch);
                &self.scratch
            }
        };
        let Some(key) = cells[self.key_index].clone() else {
            self.scratch.clear();
            return Err(RowError::MissingKey {
                input: self.key_name.clone(),
            }
            .into());
        };
        let key = Key::from(key);
        // Recency is kept only under a bound (see the field's doc).
        let found = match self.max_keys {
            None => self.runs.peek_mut(&key).is_some(),
            Some(_) => self.runs.get_mut(&key).is_some(),
        };
        if !found {
            let live = self.max_keys.map_or(usize::MAX, |n| n.get() - 1);
            evict(&mut self.runs, &mut self.eviction, self.engine.plan(), live);
            self.runs.put(key.clone(), self.fresh.clone());
        }
        // The same entry again: its bucket and node are in cache now.
        let run = self
            .runs
            .peek_mut(&key)
            .expect("the key's run was found or just made");
        if let Some(e) = &run.failed {
            self.scratch.clear();
            return Err((**e).clone().into());
        }
        let step = run.state.step;
        let result = self.engine.run_row(run, cells);
        self.scratch.clear();
        if let Err(e) = result {
            run.failed = Some(Box::new(e.clone()));
            return Err(e.into());
        }
        self.rows += 1;
        let key = self.last_key.insert(key);
        Ok(Outputs::new(
            &run.state,
            &self.engine.plan().spec,
            step,
            Some(key),
        ))
    }

    /// Evicts least recently used keys until at most `live` remain.
    fn evict_to(&mut self, live: usize) {
        evict(&mut self.runs, &mut self.eviction, self.engine.plan(), live);
    }

    /// The number of live keys.
    pub fn key_count(&self) -> usize {
        self.runs.len()
    }

    /// The live keys, most recently used first when live keys are bounded,
    /// else in the order they were first seen, latest first.
    pub fn keys(&self) -> impl Iterator<Item = &Key> + '_ {
        self.runs.iter().map(|(k, _)| k)
    }

    /// Whether `key` is live.
    pub fn contains(&self, key: &Key) -> bool {
        self.runs.contains(key)
    }

    /// The number of rows `key` has evaluated; `None` if it is not live.
    pub fn steps(&self, key: &Key) -> Option<u64> {
        self.runs.peek(key).map(|r| r.state.step)
    }

    /// The rows evaluated over every key (evicted and removed keys' rows
    /// included; rejected rows are not rows).
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The current sample of printed output `name` of `key`; `None` if the
    /// key is not live or `name` is not a printed output.
    pub fn output(&self, key: &Key, name: &str) -> Option<Sample> {
        let spec = &self.engine.plan().spec;
        let s = spec
            .outputs
            .iter()
            .find(|&&s| spec.stream(s).name == name)?;
        Some(self.runs.peek(key)?.state.raw(s.0))
    }

    /// The current sample of any stream `name` (input, output or `aux`) of
    /// `key`; `None` if the key is not live or there is no such stream.
    pub fn stream(&self, key: &Key, name: &str) -> Option<Sample> {
        let s = self.engine.plan().spec.stream_by_name(name)?;
        Some(self.runs.peek(key)?.state.raw(s.0))
    }

    /// The bytes allocated for `key`'s offset history (see
    /// [`crate::Monitor::history_bytes`]); `None` if it is not live.
    pub fn history_bytes(&self, key: &Key) -> Option<usize> {
        Some(self.runs.peek(key)?.state.history_bytes())
    }

    /// Counters of every key's rows so far (one engine runs them all).
    pub fn stats(&self) -> Stats {
        Stats::of(&self.engine)
    }

    /// A snapshot of `key`'s run; `None` if it is not live. It restores as
    /// a plain [`crate::Monitor`] of that key's trace, or with
    /// [`KeyedMonitor::restore_key`].
    pub fn snapshot_key(&self, key: &Key) -> Option<Snapshot> {
        let run = self.runs.peek(key)?;
        Some(Snapshot::capture(self.engine.plan(), run))
    }

    /// Removes `key`, returning a snapshot of its run (a later row of the
    /// key starts it afresh).
    pub fn remove(&mut self, key: &Key) -> Option<Snapshot> {
        let run = self.runs.pop(key)?;
        Some(Snapshot::capture(self.engine.plan(), &run))
    }

    /// Makes `snapshot` the run of `key` (replacing any live run of it, and
    /// as its most recent use), for a key whose state was evicted or
    /// removed and is back. A snapshot of another specification is an
    /// error. With live keys bounded, this may evict another key.
    pub fn restore_key(&mut self, key: Key, snapshot: &Snapshot) -> Result<(), SnapshotError> {
        let (mut state, failed) = snapshot.restore_state(self.engine.plan())?;
        state.max_string_bytes = self.fresh.state.max_string_bytes;
        let mut run = Run::from_state(&self.engine, state);
        run.failed = failed.map(Box::new);
        self.runs.pop(&key);
        self.evict_to(self.max_keys.map_or(usize::MAX, |n| n.get() - 1));
        self.runs.put(key, run);
        Ok(())
    }

    /// A snapshot of every live key (least recently used first) and the row
    /// count: [`KeyedMonitorBuilder::restore`] continues it.
    pub fn snapshot(&self) -> KeyedSnapshot {
        KeyedSnapshot::capture(
            self.engine.plan(),
            &self.key_name,
            self.rows,
            self.runs.iter().rev(),
        )
    }

    /// Drops every key and the row count, keeping the compiled code.
    pub fn reset(&mut self) {
        self.runs.clear();
        self.rows = 0;
        self.last_key = None;
    }
}

/// Evicts the least recently used runs of `runs` until at most `live`
/// remain, handing each to the eviction callback if there is one.
fn evict(runs: &mut LruCache<Key, Run>, eviction: &mut Eviction, plan: &Plan, live: usize) {
    while runs.len() > live {
        let Some((key, run)) = runs.pop_lru() else {
            break;
        };
        if let Eviction::Callback(f) = eviction {
            f(key, Snapshot::capture(plan, &run));
        }
    }
}
