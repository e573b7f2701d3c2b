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
//! Each key's run is kept *packed* once its offset history is full
//! (`canonical::pack`): only what survives from one row to the next — the
//! streams' values and holds, the few node cells the hold rule needs, the
//! ring table, flags and promotion bits — in one block of words, a few
//! hundred bytes. Rows run on one working run: a row of another key than the
//! last writes the last key's run back into its block and unpacks its own,
//! so the engine only ever sees a whole `Run`. A key whose history is still
//! filling (its first rows) keeps a whole `Run` of its own.
//!
//! Live keys may be bounded: when a new key would exceed the bound, the least
//! recently used key is evicted, its state dropped or handed to a callback as
//! a [`Snapshot`] (to store it, say, and [`KeyedMonitor::restore_key`] it
//! when the key comes back). Without a bound no recency is tracked at all, so
//! an unbounded monitor pays nothing for the option.

use crate::canonical::NodeState;
use crate::canonical::pack::PackLayout;
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
        if plan.is_timed() {
            return Err(KeyedBuildError::Periodic);
        }
        let max = self.max_string_bytes;
        let engine = Engine::new(plan.clone(), self.tier);
        let layout = PackLayout::new(&plan, Run::pack_extra(&engine));
        let mut fresh = engine.new_run();
        fresh.state.max_string_bytes = max;
        let mut work = Run::from_state(&engine, NodeState::with_full_rings(&plan));
        work.state.max_string_bytes = max;
        let key_slot = plan.spec.inputs[key_index].0;
        let mut monitor = KeyedMonitor {
            engine,
            inputs,
            outputs: self.spec.outputs_shared(),
            key_index,
            key_slot,
            key_name: self.key,
            runs: LruCache::unbounded(),
            slab: Slab::new(layout.len()),
            layout,
            fresh,
            work,
            loaded: None,
            max_keys: self.max_keys,
            eviction: self.eviction,
            rows: 0,
            last_key: None,
            scratch: Vec::new(),
        };
        if let Some(snapshot) = self.restored {
            for (key, mut state, failed) in snapshot.restore_runs(&plan, &monitor.key_name)? {
                state.max_string_bytes = max;
                let mut run = Run::from_state(&monitor.engine, state);
                run.failed = failed.map(Box::new);
                let kept = monitor.keep(run);
                monitor.runs.put(key, kept);
            }
            monitor.rows = snapshot.rows();
        }
        // A snapshot with more keys than the bound keeps the most recent.
        monitor.evict_to(monitor.max_keys.map_or(usize::MAX, NonZeroUsize::get));
        Ok(monitor)
    }
}

/// How a key's run is kept.
enum Kept {
    /// A whole run: the key's offset history is still filling.
    Whole(Box<Run>),
    /// Packed (see the module documentation): its block of `Slab`. When the
    /// key is the one loaded in the working run, the block is stale until
    /// it is written back.
    Packed(u32),
}

/// The packed runs' bytes: one block of `len` bytes per packed key, all in
/// one buffer, so that a key costs no allocation of its own and a row's
/// write-back finds the last key's block by index rather than by a lookup.
/// What a block cannot hold (`Side`) is kept by block number, in the rare
/// case there is any.
struct Slab {
    len: usize,
    bytes: Vec<u8>,
    free: Vec<u32>,
    sides: std::collections::HashMap<u32, Box<Side>>,
}

impl Slab {
    fn new(len: usize) -> Slab {
        Slab {
            len,
            bytes: Vec::new(),
            free: Vec::new(),
            sides: std::collections::HashMap::new(),
        }
    }

    /// A block for a new packed key.
    fn alloc(&mut self) -> u32 {
        if let Some(b) = self.free.pop() {
            return b;
        }
        let b = self.bytes.len() / self.len.max(1);
        if self.bytes.len() + self.len > self.bytes.capacity() {
            // Grow by an eighth, not double: the slack is memory every key
            // pays for, and growth stays amortised constant.
            self.bytes
                .reserve_exact(self.bytes.capacity() / 8 + 64 * self.len.max(1));
        }
        self.bytes.resize(self.bytes.len() + self.len, 0);
        u32::try_from(b).expect("fewer than 2^32 packed keys")
    }

    fn release(&mut self, b: u32) {
        self.free.push(b);
        if !self.sides.is_empty() {
            self.sides.remove(&b);
        }
    }

    fn block(&self, b: u32) -> &[u8] {
        let at = b as usize * self.len;
        &self.bytes[at..at + self.len]
    }

    fn side(&self, b: u32) -> Option<&Side> {
        if self.sides.is_empty() {
            return None;
        }
        self.sides.get(&b).map(|s| &**s)
    }

    /// Packs `run` into block `b` (and its side, if it needs one).
    fn pack(&mut self, b: u32, run: &Run, layout: &PackLayout, key_slot: u32) {
        let at = b as usize * self.len;
        let side = pack_into(run, layout, key_slot, &mut self.bytes[at..at + self.len]);
        match side {
            Some(side) => {
                self.sides.insert(b, side);
            }
            None if !self.sides.is_empty() => {
                self.sides.remove(&b);
            }
            None => {}
        }
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.free.clear();
        self.sides.clear();
    }
}

/// What a packed run keeps beside its words, in the rare case it has any:
/// objects of its persistent slots and ring table (Str and Unit values other
/// than the key) and the error that stopped it.
struct Side {
    objects: Vec<(u32, Value)>,
    ring_objects: Vec<Option<Value>>,
    failed: Option<Box<crate::error::RuntimeError>>,
}

/// Why a keyed monitor could not be built: its key is not an input, or the
/// snapshot it was to restore does not fit.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyedBuildError {
    /// The key is not a declared input ([`RowError::UnknownInput`]).
    Key(RowError),
    /// The snapshot to restore does not fit the specification or the key.
    Snapshot(SnapshotError),
    /// The specification has periodic streams, whose ticks a keyed monitor
    /// does not schedule (yet): each key would need its own.
    Periodic,
}

impl std::fmt::Display for KeyedBuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyedBuildError::Key(e) => write!(f, "cannot key the monitor: {e}"),
            KeyedBuildError::Snapshot(e) => e.fmt(f),
            KeyedBuildError::Periodic => write!(
                f,
                "cannot key the monitor: the specification has periodic streams, which a keyed monitor does not tick yet"
            ),
        }
    }
}

impl std::error::Error for KeyedBuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyedBuildError::Key(e) => Some(e),
            KeyedBuildError::Snapshot(e) => Some(e),
            KeyedBuildError::Periodic => None,
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
    /// The key input's cell in a row, its slot in the arena, and its name.
    key_index: usize,
    key_slot: u32,
    key_name: String,
    /// Every live key's run. Recency is maintained only when live keys are
    /// bounded (`get_mut`); otherwise lookups `peek_mut` and the order is
    /// the order keys were first seen.
    runs: LruCache<Key, Kept>,
    /// Where a packed run's parts lie in its words.
    layout: PackLayout,
    /// A run at step 0, cloned for each new key (cheaper than building a
    /// `NodeState` from the plan, and its vectors are allocated to size).
    fresh: Run,
    /// The packed keys' blocks.
    slab: Slab,
    /// The working run packed keys are evaluated in (its ring table has its
    /// full length), and the key whose run it holds with its block, if any:
    /// that block is stale until `write_back`.
    work: Run,
    loaded: Option<(Key, u32)>,
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
        self.step_timed(None, row.as_ref())
    }

    /// As [`KeyedMonitor::step`], for a row of time `time` (what `time()`
    /// gives, in seconds; without it, `time()` is the key's step index).
    pub fn step_at(
        &mut self,
        time: crate::time::Time,
        row: impl AsRef<[Option<Value>]>,
    ) -> Result<Outputs<'_>, StepError> {
        self.step_timed(Some(time.seconds()), row.as_ref())
    }

    fn step_timed(
        &mut self,
        time: Option<f64>,
        row: &[Option<Value>],
    ) -> Result<Outputs<'_>, StepError> {
        // The converted row is the monitor's reused buffer, taken out for the
        // step so that it does not borrow the monitor.
        let mut converted = std::mem::take(&mut self.scratch);
        let result = self.step_row(row, time, &mut converted);
        converted.clear();
        self.scratch = converted;
        let (step, key, whole) = result?;
        let state = match whole.then(|| self.runs.peek(&key)).flatten() {
            Some(Kept::Whole(run)) => &run.state,
            _ => &self.work.state,
        };
        let key = self.last_key.insert(key);
        Ok(Outputs::new(
            state,
            &self.engine.plan().spec,
            step,
            Some(key),
        ))
    }

    /// Evaluates one row (see `step`); returns the step it evaluated, its
    /// key, and whether the key's run is whole (else the working run holds
    /// the outputs).
    fn step_row(
        &mut self,
        row: &[Option<Value>],
        time: Option<f64>,
        converted: &mut Vec<Option<Value>>,
    ) -> Result<(u64, Key, bool), StepError> {
        let cells = match self.inputs.check(row)? {
            Checked::AsIs => row,
            Checked::Convert => {
                self.inputs.convert_into(row, converted);
                &converted[..]
            }
        };
        let Some(key) = cells[self.key_index].clone() else {
            return Err(RowError::MissingKey {
                input: self.key_name.clone(),
            }
            .into());
        };
        let key = Key::from(key);
        // Recency is kept only under a bound (see the field's doc).
        let entry = match self.max_keys {
            None => self.runs.peek_mut(&key),
            Some(_) => self.runs.get_mut(&key),
        };
        let packed = match entry {
            Some(Kept::Whole(_)) => None,
            Some(Kept::Packed(b)) => Some(*b),
            None => {
                let live = self.max_keys.map_or(usize::MAX, |n| n.get() - 1);
                self.evict_to(live);
                let kept = self.keep(self.fresh.clone());
                let packed = match kept {
                    Kept::Packed(b) => Some(b),
                    Kept::Whole(_) => None,
                };
                self.runs.put(key.clone(), kept);
                packed
            }
        };
        let whole = packed.is_none();
        if let Some(b) = packed {
            self.load(&key, b);
        }
        // A packed key runs in the working run: only a whole one needs its
        // entry again.
        let run = match whole.then(|| self.runs.peek_mut(&key)).flatten() {
            Some(Kept::Whole(run)) => &mut **run,
            _ => &mut self.work,
        };
        if let Some(e) = &run.failed {
            return Err((**e).clone().into());
        }
        let step = run.state.step;
        run.state.time = time;
        if let Err(e) = self.engine.run_row(run, cells) {
            run.failed = Some(Box::new(e.clone()));
            return Err(e.into());
        }
        self.rows += 1;
        // A key whose history has just filled moves into the working run
        // (its rings now have the table's full length) and is packed from
        // then on.
        if whole && run.state.packs() {
            // In place: the entry keeps its position and recency.
            let b = self.slab.alloc();
            let entry = self.runs.peek_mut(&key).expect("the key is live");
            let Kept::Whole(mut whole) = std::mem::replace(entry, Kept::Packed(b)) else {
                unreachable!("the key's run is whole")
            };
            self.write_back();
            // The old working run goes with the box.
            std::mem::swap(&mut self.work, &mut *whole);
            self.loaded = Some((key.clone(), b));
            return Ok((step, key, false));
        }
        Ok((step, key, whole))
    }

    /// How a run is kept: packed if its history is full, else whole.
    fn keep(&mut self, run: Run) -> Kept {
        if !run.state.packs() {
            return Kept::Whole(Box::new(run));
        }
        let b = self.slab.alloc();
        self.slab.pack(b, &run, &self.layout, self.key_slot);
        Kept::Packed(b)
    }

    /// Writes the working run back into the block of the key it holds, if
    /// any (in place, found by index: a row of another key allocates and
    /// looks up nothing for it).
    fn write_back(&mut self) {
        if let Some((_, b)) = self.loaded.take() {
            self.slab.pack(b, &self.work, &self.layout, self.key_slot);
        }
    }

    /// Loads `key`'s packed run (block `b`) into the working run.
    fn load(&mut self, key: &Key, b: u32) {
        if self.loaded.as_ref().is_some_and(|(k, _)| k == key) {
            return;
        }
        self.write_back();
        let block = self.slab.block(b);
        unpack_into(
            &mut self.work,
            &self.layout,
            block,
            self.slab.side(b),
            self.key_slot,
            key,
        );
        self.loaded = Some((key.clone(), b));
    }

    /// Whether `key` is the one loaded in the working run.
    fn is_loaded(&self, key: &Key) -> bool {
        self.loaded.as_ref().is_some_and(|(k, _)| k == key)
    }

    /// Forgets `key`'s run: its block goes back to the slab.
    fn forget(&mut self, key: &Key) {
        if self.is_loaded(key) {
            self.loaded = None;
        }
        if let Some(Kept::Packed(b)) = self.runs.pop(key) {
            self.slab.release(b);
        }
    }

    /// Calls `f` with `key`'s run as it stands; `None` if the key is not
    /// live. A packed run not loaded is unpacked into a copy of the working
    /// run (reads of one key are rare; rows never come here).
    fn with_run<R>(&self, key: &Key, f: impl FnOnce(&Run) -> R) -> Option<R> {
        match self.runs.peek(key)? {
            Kept::Whole(run) => Some(f(run)),
            Kept::Packed(b) => {
                let mut run = self.work.clone();
                self.canonical_into(&mut run, key, *b);
                Some(f(&run))
            }
        }
    }

    /// Puts `key`'s packed run, as packing leaves it, into `run` (a copy of
    /// the working run). For the loaded key that is the working run packed
    /// afresh, so that what is read of a key (a snapshot above all) is the
    /// same whether or not its run happens to be loaded: packing keeps of
    /// the node slots only the cells later rows read.
    fn canonical_into(&self, run: &mut Run, key: &Key, b: u32) {
        if self.is_loaded(key) {
            let mut fresh = vec![0; self.layout.len()];
            let side = pack_into(&self.work, &self.layout, self.key_slot, &mut fresh);
            unpack_into(
                run,
                &self.layout,
                &fresh,
                side.as_deref(),
                self.key_slot,
                key,
            );
        } else {
            let (block, side) = (self.slab.block(b), self.slab.side(b));
            unpack_into(run, &self.layout, block, side, self.key_slot, key);
        }
    }

    /// Evicts least recently used keys until at most `live` remain, handing
    /// each to the eviction callback if there is one.
    fn evict_to(&mut self, live: usize) {
        while self.runs.len() > live {
            let Some((key, _)) = self.runs.peek_lru() else {
                break;
            };
            let key = key.clone();
            if let Eviction::Callback(_) = &self.eviction {
                let snapshot = self
                    .snapshot_key(&key)
                    .expect("the least recently used key is live");
                if let Eviction::Callback(f) = &mut self.eviction {
                    f(key.clone(), snapshot);
                }
            }
            self.forget(&key);
        }
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
        match self.runs.peek(key)? {
            Kept::Whole(run) => Some(run.state.step),
            Kept::Packed(_) if self.is_loaded(key) => Some(self.work.state.step),
            Kept::Packed(b) => Some(self.layout.step(self.slab.block(*b))),
        }
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
        self.with_run(key, |run| run.state.raw(s.0))
    }

    /// The current sample of any stream `name` (input, output or `aux`) of
    /// `key`; `None` if the key is not live or there is no such stream.
    pub fn stream(&self, key: &Key, name: &str) -> Option<Sample> {
        let s = self.engine.plan().spec.stream_by_name(name)?;
        self.with_run(key, |run| run.state.raw(s.0))
    }

    /// The bytes allocated for `key`'s offset history (see
    /// [`crate::Monitor::history_bytes`]); `None` if it is not live.
    pub fn history_bytes(&self, key: &Key) -> Option<usize> {
        self.with_run(key, |run| run.state.history_bytes())
    }

    /// Counters of every key's rows so far (one engine runs them all).
    pub fn stats(&self) -> Stats {
        Stats::of(&self.engine)
    }

    /// A snapshot of `key`'s run; `None` if it is not live. It restores as
    /// a plain [`crate::Monitor`] of that key's trace, or with
    /// [`KeyedMonitor::restore_key`].
    pub fn snapshot_key(&self, key: &Key) -> Option<Snapshot> {
        self.with_run(key, |run| Snapshot::capture(self.engine.plan(), run))
    }

    /// Removes `key`, returning a snapshot of its run (a later row of the
    /// key starts it afresh).
    pub fn remove(&mut self, key: &Key) -> Option<Snapshot> {
        let snapshot = self.snapshot_key(key)?;
        self.forget(key);
        Some(snapshot)
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
        self.forget(&key);
        self.evict_to(self.max_keys.map_or(usize::MAX, |n| n.get() - 1));
        let kept = self.keep(run);
        self.runs.put(key, kept);
        Ok(())
    }

    /// A snapshot of every live key (least recently used first) and the row
    /// count: [`KeyedMonitorBuilder::restore`] continues it.
    pub fn snapshot(&self) -> KeyedSnapshot {
        let plan = self.engine.plan();
        let fp = crate::snapshot::fingerprint(plan);
        // One copy of the working run serves every packed key.
        let mut tmp = self.work.clone();
        let keys = self
            .runs
            .iter()
            .rev()
            .map(|(key, kept)| {
                let run = match kept {
                    Kept::Whole(run) => run,
                    Kept::Packed(b) => {
                        self.canonical_into(&mut tmp, key, *b);
                        &tmp
                    }
                };
                (key.clone(), Snapshot::capture_with(plan, run, fp))
            })
            .collect();
        KeyedSnapshot::from_parts(plan, &self.key_name, self.rows, keys)
    }

    /// Drops every key and the row count, keeping the compiled code.
    pub fn reset(&mut self) {
        self.runs.clear();
        self.slab.clear();
        self.loaded = None;
        self.rows = 0;
        self.last_key = None;
    }
}

/// Packs `run` into `bytes` and returns what it keeps beside (see `Side`),
/// if anything: nearly always nothing, so nothing is allocated.
fn pack_into(run: &Run, layout: &PackLayout, key_slot: u32, bytes: &mut [u8]) -> Option<Box<Side>> {
    run.pack(layout, bytes);
    if !layout.may_keep_objects() && run.failed.is_none() {
        return None;
    }
    let (objects, ring_objects) = run.state.objects_to_keep(layout, Some(key_slot));
    (!objects.is_empty() || !ring_objects.is_empty() || run.failed.is_some()).then(|| {
        Box::new(Side {
            objects,
            ring_objects,
            failed: run.failed.clone(),
        })
    })
}

/// Unpacks a packed run into `work` and puts back what it kept beside: its
/// objects (the key input's is the key itself) and its stop error.
fn unpack_into(
    work: &mut Run,
    layout: &PackLayout,
    bytes: &[u8],
    side: Option<&Side>,
    key_slot: u32,
    key: &Key,
) {
    work.unpack(layout, bytes);
    // A Str or Unit key is the key input's object (an Int, Float or Bool
    // key is in its lane).
    if matches!(key.value(), Value::Str(_) | Value::Unit) {
        work.state.set_object(key_slot, key.value());
    }
    if let Some(side) = side {
        work.state
            .restore_objects(&side.objects, &side.ring_objects);
        work.failed = side.failed.clone();
    }
}
