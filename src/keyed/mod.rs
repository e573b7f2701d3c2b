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
//! ring table, flags and promotion bits — in the key's record of the
//! `table::KeyTable`, a few hundred bytes right after the key itself, so
//! that finding a key and reaching its run is one trip to memory. On the
//! native-whole tier a row runs the whole-row kernel on the packed run in
//! place (`Engine::run_packed_row`). Any other row runs on one working run:
//! a row of another key than the last writes the last key's run back into
//! its record and unpacks its own, so the engine sees a whole `Run`. A key
//! whose history is still filling (its first rows) keeps a whole `Run` of
//! its own.
//!
//! A specification with periodic streams ticks each key on its own scheduler
//! (`Ticks`, [`KeyedMonitor::ticks_before`]): a key's ticks are those a
//! plain run of its rows alone has, made due by its own rows, so no row looks
//! at another key.
//!
//! Live keys may be bounded: when a new key would exceed the bound, the least
//! recently used key is evicted, its state dropped or handed to a callback as
//! a [`Snapshot`] (to store it, say, and [`KeyedMonitor::restore_key`] it
//! when the key comes back). Without a bound no recency is tracked at all, so
//! an unbounded monitor pays nothing for the option.

use crate::canonical::NodeState;
use crate::canonical::pack::PackLayout;
use crate::canonical::scalar_form;
use crate::exec::{Engine, Run};
use crate::lang::ast::ResetPolicy;
use crate::lang::types::Type;
use crate::monitor::{DEFAULT_MAX_STRING_BYTES, Outputs, Spec, Stats, StreamsView, Tier};
use crate::plan::{Plan, Slot};
use crate::row::{Checked, RowError, RowSchema, StepError};
use crate::snapshot::{
    KeyTicks, KeyedEntry, KeyedSnapshot, KeyedSnapshotReader, KeyedWriter, RunEncoder, Snapshot,
    SnapshotError,
};
use crate::time::{GapPolicy, Scheduler, Ticking, Time};
use crate::value::{Key, Sample, Value};
use scalar_ir::frame::tag;
use std::num::NonZeroUsize;
use std::sync::Arc;
use table::{EntryId, KeyTable};
use tier_up::{Built, TierUp, build_engine};

mod table;
mod tier_up;

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
    restored: Option<Restored<'a>>,
    ticking: Option<Ticking>,
    tier_up_after: u64,
}

/// The keyed run a builder continues: a snapshot in memory, or one read
/// key by key.
enum Restored<'a> {
    Snapshot(&'a KeyedSnapshot),
    Reader(KeyedSnapshotReader<'a>),
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
        self.restored = Some(Restored::Snapshot(snapshot));
        self
    }

    /// As [`KeyedMonitorBuilder::restore`], reading the snapshot key by key
    /// as each is restored (see [`KeyedSnapshotReader`]), so that memory is
    /// the monitor's own and never the snapshot's besides: for a snapshot
    /// written by [`KeyedMonitor::write_snapshot`] (or `to_bytes`) to a
    /// file.
    pub fn restore_from(mut self, reader: KeyedSnapshotReader<'a>) -> Self {
        self.restored = Some(Restored::Reader(reader));
        self
    }

    /// The rows `auto` evaluates (over every key) on the canonical tier
    /// before it builds native code for every key on a background thread
    /// (see [`crate::MonitorBuilder::tier_up_after`]; default
    /// [`crate::exec::TIER_UP_ROWS`]). 0 starts the build with the first
    /// row; [`KeyedMonitor::tier_up_now`] waits for it.
    pub fn tier_up_after(mut self, rows: u64) -> Self {
        self.tier_up_after = rows;
        self
    }

    /// The rules every key's ticks follow, for a specification with
    /// periodic streams (see [`KeyedMonitor::ticks_before`]): the origin
    /// (`start`, else each key's first row's time), the gap bound and what
    /// a longer gap does, and the most ticks due before one row. Default:
    /// [`Ticking::default`], with the specification's `on_gap` if it
    /// chooses one.
    pub fn ticking(mut self, ticking: Ticking) -> Self {
        self.ticking = Some(ticking);
        self
    }

    /// Builds the monitor: plans, fuses and compiles once, for every key.
    /// The key must be a declared input ([`RowError::UnknownInput`]); a
    /// snapshot given to `restore` must fit ([`SnapshotError`]).
    pub fn build(self) -> Result<KeyedMonitor, KeyedBuildError> {
        let inputs = self.spec.inputs().clone();
        let key_index = inputs.position(&self.key)?;
        let plan = Arc::new(Plan::new(self.spec.checked().clone()));
        if plan.dynamics > 0 {
            return Err(KeyedBuildError::Dynamic);
        }
        let key_type = plan.spec.stream(plan.spec.inputs[key_index]).ty;
        if matches!(key_type, Type::List | Type::Tuple | Type::Map | Type::Fn) {
            return Err(KeyedBuildError::KeyType(key_type));
        }
        let max = self.max_string_bytes;
        let key_stream = plan.spec.inputs[key_index];
        // `auto` starts on the canonical tier and builds native code for
        // every key once the run is hot (`tier_up`).
        let (tier_up, tier) = match Engine::keyed_tiers_up(&plan, self.tier, Some(key_stream)) {
            true => (
                Some(TierUp::new(
                    plan.clone(),
                    Some(key_stream),
                    self.tier_up_after,
                )),
                Tier::Canonical,
            ),
            false => (None, self.tier),
        };
        let Built { mut engine, layout } = build_engine(plan.clone(), tier, Some(key_stream));
        if tier_up.is_some() {
            engine.set_why("auto: every stream is scalar".to_string());
        }
        let (work, fresh) = working_run(&engine, &layout, max);
        let key_slot = Slot::from(plan.spec.inputs[key_index]);
        let ticking = self.ticking.unwrap_or_else(|| Ticking {
            on_gap: plan.spec.on_gap.unwrap_or(GapPolicy::CatchUp),
            ..Ticking::default()
        });
        let mut monitor = KeyedMonitor {
            ticks: Ticks::new(&plan, ticking),
            engine,
            inputs,
            outputs: self.spec.outputs_shared(),
            key_index,
            key_slot,
            key_name: self.key,
            table: KeyTable::new(layout.len()),
            layout,
            fresh,
            work,
            loaded: None,
            max_keys: self.max_keys,
            eviction: self.eviction,
            rows: 0,
            last_key: None,
            scratch: Vec::new(),
            tier_up,
        };
        match self.restored {
            None => {}
            Some(Restored::Snapshot(snapshot)) => monitor.restore_all(snapshot)?,
            Some(Restored::Reader(reader)) => monitor.restore_stream(reader)?,
        }
        Ok(monitor)
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

/// What restoring keys one at a time keeps: the plan, its fingerprint and
/// encoder, a copy of the working run each kept key is read back into, and
/// the kept run's encoding, compared with the entry's (reused from key to
/// key).
struct Restoring<'p> {
    plan: &'p Plan,
    fp: crate::snapshot::Fingerprint,
    encoder: RunEncoder<'p>,
    kept: Run,
    got: Vec<u8>,
}

/// Why a keyed monitor could not be built: its key is not an input, or the
/// snapshot it was to restore does not fit.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyedBuildError {
    /// The key is not a declared input ([`RowError::UnknownInput`]).
    Key(RowError),
    /// The snapshot to restore does not fit the specification or the key.
    Snapshot(SnapshotError),
    /// The specification uses `dynamic`/`defer`, whose instances a keyed
    /// monitor does not keep per key (yet).
    Dynamic,
    /// The key input is declared with a container or function type.
    KeyType(crate::lang::types::Type),
}

impl std::fmt::Display for KeyedBuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyedBuildError::Key(e) => write!(f, "cannot key the monitor: {e}"),
            KeyedBuildError::Snapshot(e) => e.fmt(f),
            KeyedBuildError::Dynamic => write!(
                f,
                "cannot key the monitor: the specification uses `dynamic` or `defer`, whose instances a keyed monitor does not keep per key yet"
            ),
            KeyedBuildError::KeyType(t) => write!(
                f,
                "cannot key the monitor: the key input is declared {t}; a key is an Int, Float, Bool, Str or Unit"
            ),
        }
    }
}

impl std::error::Error for KeyedBuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyedBuildError::Key(e) => Some(e),
            KeyedBuildError::Snapshot(e) => Some(e),
            KeyedBuildError::Dynamic | KeyedBuildError::KeyType(_) => None,
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
    key_slot: Slot,
    key_name: String,
    /// Every live key: its record (header and packed run), whole run if
    /// its history is still filling, and recency. Recency is maintained
    /// only when live keys are bounded (`touch`); otherwise the order is
    /// the order keys were first seen.
    table: KeyTable,
    /// Where a packed run's parts lie in its words.
    layout: PackLayout,
    /// A new key's packed run (the working run at step 0, with its rings
    /// full of ⊥): copied into each new key's record.
    fresh: Vec<u64>,
    /// The working run packed keys are evaluated in (its ring table has its
    /// full length), and the key whose run it holds with its block, if any:
    /// that block is stale until `write_back`.
    work: Run,
    loaded: Option<EntryId>,
    max_keys: Option<NonZeroUsize>,
    eviction: Eviction,
    /// Rows evaluated over every key (rejected rows are not counted).
    rows: u64,
    /// The key of the last row evaluated (what `Outputs::key` returns).
    last_key: Option<Key>,
    /// A row converted by the input rule (see `Monitor`).
    scratch: Vec<Option<Value>>,
    /// The keys' ticks, for a specification with periodic streams.
    ticks: Ticks,
    /// `auto`'s move of every key to native code, while it is to come.
    tier_up: Option<TierUp>,
}

/// What a keyed monitor of a specification with periodic streams keeps to
/// tick each key: the rules, and the ticks being drawn. Each key's own
/// scheduler and last row's time are words of its record
/// (`PackLayout::ticks`): they move, are evicted and are snapshotted with
/// its run.
///
/// A key's ticks are made due only by a row of that key (`ticks_before`),
/// as a plain run's by its own rows: the ticks a key's trace evaluates
/// between two of its rows depend on the later row's time (a gap longer
/// than `max_gap` is skipped, more than `max_ticks` is an error), and a
/// trace evaluates no tick after its last row. So no row looks at another
/// key's ticks, and a row costs nothing per key.
struct Ticks {
    /// Whether the plan has periods at all (else nothing here is used).
    timed: bool,
    rules: Ticking,
    /// What a row's index stands for (ns) in a run whose rows have no
    /// time (`KeyedMonitor::ticks_before_row`).
    index_unit: i64,
    /// A scheduler of the plan's periods, into which a key's words are
    /// read to work on them, and the periods a tick drawn is due for.
    sched: Scheduler,
    due: Vec<bool>,
    /// The key whose ticks are being drawn, up to which time
    /// (`ticks_before`, then `next_tick`).
    drawing: Option<(EntryId, Time)>,
    /// The ticks a time reset fires once (`ResetPolicy::Once`): each key's
    /// at its last row's time, every period due.
    once: std::collections::VecDeque<(EntryId, Time)>,
    /// The keys whose ticks up to a time [`KeyedMonitor::advance_to`] made
    /// due, each drawn in turn after `once`.
    /// (Keys, not records: a row stepped before they are drawn may evict
    /// some.)
    sweep: std::collections::VecDeque<(Key, Time)>,
    /// Each key's place in a scaled run's order of keys, kept by the worker that holds the
    /// key ([`KeyedMonitor::note_place`]): its first row's position in the feed's order, or,
    /// under a bound on live keys, its last row's. A worker puts a sweep's ticks in the
    /// single-process order by it; a checkpoint keeps it beside the keys' snapshot. `None`
    /// where the run has no sweeps ([`KeyedMonitor::keep_places`]): nothing is noted then.
    places: Option<std::collections::HashMap<Key, u64>>,
}

impl Ticks {
    fn new(plan: &Plan, rules: Ticking) -> Ticks {
        Ticks {
            timed: plan.is_timed(),
            rules,
            index_unit: crate::time::TimeUnit::Seconds.nanos(),
            sched: Scheduler::new(&plan.periods),
            due: vec![false; plan.periods.len()],
            drawing: None,
            once: Default::default(),
            sweep: Default::default(),
            places: Default::default(),
        }
    }

    /// Reads a key's tick words into `sched`; returns its last row's time.
    fn read(&mut self, words: &[u64]) -> Option<Time> {
        let mut next = [None; 8];
        let mut spill = Vec::new();
        let n = self.due.len();
        let next: &mut [Option<i64>] = match n <= next.len() {
            true => &mut next[..n],
            false => {
                spill.resize(n, None);
                &mut spill
            }
        };
        for (k, slot) in next.iter_mut().enumerate() {
            *slot = (words[2 + 2 * k] != 0).then_some(words[3 + 2 * k] as i64);
        }
        self.sched.set_next_ticks(next);
        (words[0] != 0).then_some(Time(words[1] as i64))
    }

    /// Writes `sched` and `last` into a key's tick words.
    fn write(&self, words: &mut [u64], last: Option<Time>) {
        words[0] = u64::from(last.is_some());
        words[1] = last.map_or(0, |t| t.0 as u64);
        for (k, next) in self.sched.next_ticks().iter().enumerate() {
            words[2 + 2 * k] = u64::from(next.is_some());
            words[3 + 2 * k] = next.unwrap_or(0) as u64;
        }
    }
}

// The eviction callback is `Send`, so the monitor is too; this fails to
// compile if a field ever stops being `Send`.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<KeyedMonitor>();
};

impl KeyedMonitor {
    /// Restores every key of `snapshot` (into a monitor that has none) and
    /// its row count, keeping the most recent keys within the bound (see
    /// [`KeyedMonitorBuilder::restore`]).
    fn restore_all(&mut self, snapshot: &KeyedSnapshot) -> Result<(), KeyedBuildError> {
        let plan = self.engine.plan().clone();
        let mut r = self.restoring(&plan, snapshot.fingerprint(), snapshot.key_input())?;
        self.table.reserve(snapshot.len());
        let mut given = Vec::new();
        for entry in snapshot.entries() {
            given.clear();
            entry.encode(&mut given);
            self.restore_entry(&mut r, entry, &given)?;
        }
        self.restored(snapshot.rows());
        Ok(())
    }

    /// As `restore_all`, decoding each key as it is restored.
    fn restore_stream(&mut self, mut reader: KeyedSnapshotReader) -> Result<(), KeyedBuildError> {
        let plan = self.engine.plan().clone();
        let mut r = self.restoring(&plan, reader.fingerprint(), reader.key_input())?;
        self.table.reserve(reader.len());
        while let Some(entry) = reader.next_entry()? {
            self.restore_entry(&mut r, &entry, reader.last_bytes())?;
        }
        self.restored(reader.rows());
        Ok(())
    }

    /// Starts restoring a keyed snapshot of `fingerprint` keyed by
    /// `key_input` (checked against this monitor's) into this monitor.
    fn restoring<'p>(
        &self,
        plan: &'p Plan,
        fingerprint: crate::snapshot::Fingerprint,
        key_input: &str,
    ) -> Result<Restoring<'p>, KeyedBuildError> {
        let fp = crate::snapshot::check_keyed_head(plan, fingerprint, key_input, &self.key_name)?;
        Ok(Restoring {
            plan,
            fp,
            encoder: RunEncoder::new(plan),
            kept: self.work.clone(),
            got: Vec::new(),
        })
    }

    /// Restores one key's entry (whose encoding is `given`): checks it,
    /// makes its run and keeps it packed, and refuses it if the packed run
    /// lost any of it.
    fn restore_entry(
        &mut self,
        r: &mut Restoring<'_>,
        entry: &KeyedEntry,
        given: &[u8],
    ) -> Result<(), KeyedBuildError> {
        let key = entry.key()?;
        if self.table.find(key.value()).is_some() {
            return Err(SnapshotError::Inconsistent(format!("the key {key} appears twice")).into());
        }
        let run = self.run_of(r, &key, entry)?;
        let id = self.table.insert(key);
        self.keep(id, run);
        self.set_key_ticks(id, entry.ticks());
        // A keyed run keeps only what later rows can read (see
        // `canonical::pack`), and a keyed snapshot holds no more; a
        // snapshot claiming more was not taken by a keyed monitor, and
        // restoring it would silently drop part of it. What was kept is
        // encoded as a snapshot would hold it and compared with the entry's
        // bytes: equal bytes are equal runs, the one case of a real
        // snapshot.
        self.canonical_into(&mut r.kept, id);
        r.got.clear();
        let (key, kept) = (self.table.key(id), &r.kept);
        let ticks = self.key_ticks(id);
        let encoded = (r.encoder).encode_entry(
            key,
            &kept.state,
            kept.failed.as_deref(),
            ticks.as_ref(),
            &mut r.got,
        );
        if encoded.is_ok() && r.got == given {
            return Ok(());
        }
        // The bytes differ: compare the snapshots of the run as restored and
        // as kept, which names the part lost (the bytes may also differ for
        // a run whose restoring normalises it, which loses nothing).
        let key = self.table.key(id).clone();
        let given = Snapshot::capture_with(r.plan, &self.run_of(r, &key, entry)?, r.fp)
            .with_ticks(entry.ticks().cloned());
        let kept = Snapshot::capture_with(r.plan, &r.kept, r.fp).with_ticks(self.key_ticks(id));
        match given.lost_in(&kept, r.plan) {
            None => Ok(()),
            Some(part) => Err(KeyedBuildError::Snapshot(SnapshotError::Inconsistent(
                format!("key {key}: {part} holds state no keyed run keeps"),
            ))),
        }
    }

    /// The run an entry restores, for this monitor's engine and string
    /// bound.
    fn run_of(
        &self,
        r: &Restoring<'_>,
        key: &Key,
        entry: &KeyedEntry,
    ) -> Result<Run, SnapshotError> {
        let (mut state, failed) = entry.restore(key, r.plan, r.fp)?;
        state.max_string_bytes = self.work.state.max_string_bytes;
        let mut run = Run::from_state(&self.engine, state);
        run.failed = failed.map(Box::new);
        Ok(run)
    }

    /// Ends a restore: the row count, and the most recent keys within the
    /// bound (a snapshot with more keys than the bound keeps those).
    fn restored(&mut self, rows: u64) {
        self.rows = rows;
        self.evict_to(self.max_keys.map_or(usize::MAX, NonZeroUsize::get));
    }

    /// A new monitor of the same specification, key, tier and bounds, with
    /// no keys yet, that runs this one's compiled code: nothing is planned,
    /// lowered or compiled again. It is for another thread's keys (each
    /// worker of `vigil run --workers` has one); it shares no state with
    /// this monitor. Its evicted keys are dropped (an `on_evict` callback
    /// stays this monitor's).
    pub fn share(&self) -> KeyedMonitor {
        let engine = self.engine.share();
        let mut work = Run::from_state(&engine, NodeState::with_full_rings(engine.plan()));
        work.state.max_string_bytes = self.work.state.max_string_bytes;
        KeyedMonitor {
            // One build for every monitor shared (see `tier_up`).
            tier_up: self.tier_up.clone(),
            engine,
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
            key_index: self.key_index,
            key_slot: self.key_slot,
            key_name: self.key_name.clone(),
            table: KeyTable::new(self.layout.len()),
            layout: self.layout.clone(),
            fresh: self.fresh.clone(),
            work,
            loaded: None,
            max_keys: self.max_keys,
            eviction: Eviction::Drop,
            rows: 0,
            last_key: None,
            scratch: Vec::new(),
            ticks: Ticks {
                index_unit: self.ticks.index_unit,
                ..Ticks::new(self.engine.plan(), self.ticks.rules)
            },
        }
    }

    /// [`KeyedMonitor::share`], continuing the keyed run `snapshot` was
    /// taken of (checked as [`KeyedMonitorBuilder::restore`] checks it).
    pub fn share_restored(
        &self,
        snapshot: &KeyedSnapshot,
    ) -> Result<KeyedMonitor, KeyedBuildError> {
        let mut monitor = self.share();
        monitor.restore_all(snapshot)?;
        Ok(monitor)
    }

    /// [`KeyedMonitor::share_restored`], reading the snapshot key by key
    /// (see [`KeyedMonitorBuilder::restore_from`]).
    pub fn share_restored_from(
        &self,
        reader: KeyedSnapshotReader,
    ) -> Result<KeyedMonitor, KeyedBuildError> {
        let mut monitor = self.share();
        monitor.restore_stream(reader)?;
        Ok(monitor)
    }

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
            ticking: None,
            tier_up_after: crate::exec::TIER_UP_ROWS,
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

    /// The key of the last row or tick evaluated (or tried: a runtime
    /// error names no key), if there was one.
    pub fn last_key(&self) -> Option<&Key> {
        self.last_key.as_ref()
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
    ///
    /// For a specification with periodic streams, the key's ticks due
    /// before the row are evaluated first, as [`KeyedMonitor::ticks_before`]
    /// makes them due, if `ticks_before` and [`KeyedMonitor::next_tick`]
    /// have not: their outputs are then not returned (call those two to see
    /// them).
    pub fn step_at(
        &mut self,
        time: crate::time::Time,
        row: impl AsRef<[Option<Value>]>,
    ) -> Result<Outputs<'_>, StepError> {
        let row = row.as_ref();
        if self.ticks.timed {
            self.ticks_before_id(time, row)?;
            while self.pending_tick().is_some() {}
        }
        self.step_timed(Some(time), row)
    }

    /// Keeps each key's place from now on ([`KeyedMonitor::note_place`]): a scaled run whose
    /// keys tick all at once (a time reset's `once` ticks, `--clock wall`) orders their ticks
    /// by it. Other runs note nothing.
    #[cfg(feature = "scale")]
    pub(crate) fn keep_places(&mut self) {
        self.ticks.places.get_or_insert_default();
    }

    /// Notes a row of `key` at position `seq` in a scaled run's feed, for the order of keys
    /// of a sweep's ticks ([`KeyedMonitor::place`]): the first row's, or under a bound on
    /// live keys the last row's. Nothing is noted unless the places are kept.
    #[cfg(feature = "scale")]
    pub(crate) fn note_place(&mut self, key: &Value, seq: u64) {
        let Some(places) = &mut self.ticks.places else {
            return;
        };
        match self.max_keys {
            Some(_) => _ = places.insert(Key::from(key.clone()), seq),
            None => _ = places.entry(Key::from(key.clone())).or_insert(seq),
        }
    }

    /// The place [`KeyedMonitor::note_place`] noted for `key` (0 if none was).
    pub(crate) fn place(&self, key: &Key) -> u64 {
        (self.ticks.places.as_ref())
            .and_then(|p| p.get(key).copied())
            .unwrap_or(0)
    }

    /// Every key's noted place (for a checkpoint), where the places are kept.
    #[cfg(feature = "scale")]
    pub(crate) fn places(&self) -> Option<impl Iterator<Item = (&Key, u64)>> {
        (self.ticks.places.as_ref()).map(|p| p.iter().map(|(k, &v)| (k, v)))
    }

    /// Keeps the places given (a resumed run's, from its checkpoint).
    #[cfg(feature = "scale")]
    pub(crate) fn set_places(&mut self, places: impl IntoIterator<Item = (Key, u64)>) {
        self.ticks.places = Some(places.into_iter().collect());
    }

    /// The periods of the specification's periodic streams, in nanoseconds
    /// (as [`crate::Monitor::periods`]); empty for a specification without.
    pub fn periods(&self) -> &[i64] {
        &self.engine.plan().periods
    }

    /// The rules every key's ticks follow (see
    /// [`KeyedMonitorBuilder::ticking`]).
    pub fn ticking(&self) -> Ticking {
        self.ticks.rules
    }

    /// Sets the rules every key's ticks follow from now on (as
    /// [`KeyedMonitorBuilder::ticking`]; for a monitor built elsewhere,
    /// before its first row).
    pub fn set_ticking(&mut self, ticking: Ticking) {
        self.ticks.rules = ticking;
    }

    /// Sets what a row's index stands for, in nanoseconds, in a run whose
    /// rows carry no time (a second unless set): the time
    /// [`KeyedMonitor::ticks_before_row`] gives such a row, as `vigil run --key`
    /// without `--time` stamps a key's row with its index in `--time-unit`.
    pub fn set_index_unit(&mut self, nanos: i64) {
        self.ticks.index_unit = nanos;
    }

    /// [`KeyedMonitor::ticks_before`] for a row that carries its time
    /// (`time`) or not: without one, the row stands at its index among its
    /// key's rows (in the index unit, up to the end of time), as in a run of
    /// the key's rows alone. A row without its key has no ticks (`step`
    /// rejects it).
    pub fn ticks_before_row(
        &mut self,
        time: Option<Time>,
        row: &[Option<Value>],
    ) -> Result<(), StepError> {
        let at = match time {
            Some(t) => t,
            None => {
                let Some(Some(value)) = row.get(self.key_index) else {
                    return Ok(());
                };
                let n = self.input_steps(&Key::from(value.clone())).unwrap_or(0);
                let n = i64::try_from(n).unwrap_or(i64::MAX);
                Time(n.saturating_mul(self.ticks.index_unit))
            }
        };
        self.ticks_before(at, row)
    }

    /// The rows `key` has evaluated (its input steps: its ticks are steps
    /// too, and not counted here); `None` if it is not live. A keyed run
    /// without times stamps a key's row with this index, as a plain run of
    /// the key's rows alone would.
    pub fn input_steps(&self, key: &Key) -> Option<u64> {
        let id = self.table.find(key.value())?;
        Some(match self.loaded == Some(id) {
            true => self.work.state.ring_step(),
            false => self.layout.input_steps(self.table.block(id)),
        })
    }

    /// For a specification with periodic streams, makes the ticks of the
    /// key of `row` due before that row, at `time`, the ticks
    /// [`KeyedMonitor::next_tick`] gives next; then
    /// [`KeyedMonitor::step_at`] evaluates the row.
    ///
    /// Each key ticks as a plain [`crate::Monitor`] of its rows alone does
    /// in `vigil run` with the same [`Ticking`] rules: its ticks start at
    /// `start`, else at its first row's time; before each of its rows,
    /// every tick at or before the row's time comes first (ticks sort before
    /// rows of their time); a gap since the key's last row longer than
    /// `max_gap` under [`GapPolicy::Skip`] fires one tick per period, at
    /// its last tick in the gap; and no tick follows the key's last row. So
    /// a key's ticks are made due by its own rows only (another key's rows
    /// never touch it: a row costs nothing per key), and every key's outputs
    /// are those of a plain run of its rows.
    ///
    /// The row is checked as `step_at` checks it (a rejected row changes
    /// nothing); more than `max_ticks` due is
    /// [`RowError::TooManyTicks`], changing nothing; a key stopped by a
    /// runtime error returns that error and has no more ticks. Without
    /// periodic streams this does nothing.
    pub fn ticks_before(
        &mut self,
        time: Time,
        row: impl AsRef<[Option<Value>]>,
    ) -> Result<(), StepError> {
        if self.ticks.timed {
            self.ticks_before_id(time, row.as_ref())?;
        }
        Ok(())
    }

    /// The next tick [`KeyedMonitor::ticks_before`] (or a time reset,
    /// [`KeyedMonitor::reset_ticks`]) made due, evaluated: its outputs, with
    /// [`Outputs::key`] the key and [`Outputs::step`] the key's step (a tick
    /// is a step of its key's run; it is not a row, and
    /// [`KeyedMonitor::rows`] does not count it). `None` once none is left.
    /// A runtime error stops the key, as a row's does.
    pub fn next_tick(&mut self) -> Option<Result<Outputs<'_>, StepError>> {
        self.next_placed_tick().map(|(_, tick)| tick)
    }

    /// [`KeyedMonitor::next_tick`], with its key's place ([`KeyedMonitor::place`]).
    pub(crate) fn next_placed_tick(&mut self) -> Option<(u64, Result<Outputs<'_>, StepError>)> {
        let step = self.pending_tick()?;
        let place = self.last_key.as_ref().map_or(0, |k| self.place(k));
        Some((place, self.tick_outputs(step)))
    }

    /// The outputs of the tick `pending_tick` evaluated (its step), or its error.
    fn tick_outputs(&self, step: Result<u64, StepError>) -> Result<Outputs<'_>, StepError> {
        step.map(|step| {
            let key = self.last_key.as_ref().expect("tick_key names the key");
            Outputs::new(
                StreamsView::State(&self.work.state),
                &self.engine.plan().spec,
                step,
                Some(key),
            )
        })
    }

    /// A time reset (a trace's reset marker: time starts again), for a
    /// specification with periodic streams: every live key's ticks start
    /// again at its next row (at `start`, else at that row's time), as a
    /// plain run's scheduler does. With [`ResetPolicy::Once`], each live key
    /// that had a row since the last reset first ticks once, every period
    /// due, at its last row's time: those ticks are the next
    /// [`KeyedMonitor::next_tick`] gives, keys in the order they were first
    /// seen (least recently used first, under a bound). Every live key is
    /// visited: a reset costs one step per key.
    pub fn reset_ticks(&mut self, policy: ResetPolicy) {
        if !self.ticks.timed {
            return;
        }
        self.ticks.drawing = None;
        let ids: Vec<EntryId> = self.table.iter().rev().collect();
        for id in ids {
            let words = self.layout.ticks_mut(self.table.words_mut(id));
            let last = self.ticks.read(words);
            if policy == ResetPolicy::Once
                && let Some(t) = last
            {
                self.ticks.once.push_back((id, t));
            }
            self.ticks.sched.stop();
            self.ticks.write(words, None);
        }
    }

    /// `ticks_before` of a timed plan; returns the key's record.
    fn ticks_before_id(&mut self, time: Time, row: &[Option<Value>]) -> Result<EntryId, StepError> {
        self.ticks.drawing = None;
        let mut converted = std::mem::take(&mut self.scratch);
        let found = self.find_or_insert(row, &mut converted, Some(time));
        converted.clear();
        self.scratch = converted;
        let id = found?;
        if let Some(e) = self.stop_error(id) {
            return Err(e.into());
        }
        let words = self.layout.ticks(self.table.words(id));
        let last = self.ticks.read(words);
        let rules = self.ticks.rules;
        if let Err(due) = rules.schedule(&mut self.ticks.sched, last, time) {
            return Err(RowError::TooManyTicks {
                key: self.table.key(id).to_string(),
                due,
                max: rules.max_ticks,
            }
            .into());
        }
        let words = self.layout.ticks_mut(self.table.words_mut(id));
        self.ticks.write(words, Some(time));
        self.ticks.drawing = Some((id, time));
        Ok(id)
    }

    /// Checks `row` by the input rule (converted into `converted` when the
    /// rule converts it) and finds its key: the cells to run, and the key.
    fn checked<'r>(
        &self,
        row: &'r [Option<Value>],
        converted: &'r mut Vec<Option<Value>>,
    ) -> Result<(&'r [Option<Value>], &'r Value), StepError> {
        let cells = match self.inputs.check(row)? {
            Checked::AsIs => row,
            Checked::Convert => {
                self.inputs.convert_into(row, converted);
                &converted[..]
            }
        };
        match &cells[self.key_index] {
            Some(value) => Ok((cells, value)),
            None => Err(RowError::MissingKey {
                input: self.key_name.clone(),
            }
            .into()),
        }
    }

    /// Finds the record of `row`'s key, checking the row first; a new key's
    /// record is made only if `max_ticks` lets its first ticks be due at
    /// `time` (a rejected row changes nothing).
    fn find_or_insert(
        &mut self,
        row: &[Option<Value>],
        converted: &mut Vec<Option<Value>>,
        time: Option<Time>,
    ) -> Result<EntryId, StepError> {
        let (_, value) = self.checked(row, converted)?;
        if let Some(id) = self.table.find(value) {
            return Ok(id);
        }
        if let Some(t) = time {
            let rules = self.ticks.rules;
            self.ticks.sched.stop();
            if let Err(due) = rules.schedule(&mut self.ticks.sched, None, t) {
                return Err(RowError::TooManyTicks {
                    key: Key::from(value.clone()).to_string(),
                    due,
                    max: rules.max_ticks,
                }
                .into());
            }
        }
        Ok(self.insert_key(value))
    }

    /// The error that stopped record `id`'s run, if one did.
    fn stop_error(&self, id: EntryId) -> Option<crate::error::RuntimeError> {
        match self.loaded == Some(id) {
            true => self.work.failed.as_deref().cloned(),
            false => self.table.side(id)?.failed.as_deref().cloned(),
        }
    }

    /// Evaluates the next tick due: a time reset's first, then those of the
    /// key `ticks_before` scheduled; `None` when none is left.
    fn pending_tick(&mut self) -> Option<Result<u64, StepError>> {
        if let Some((id, t)) = self.ticks.once.pop_front() {
            self.ticks.due.fill(true);
            return Some(self.tick_key(id, t));
        }
        loop {
            if let Some((id, _)) = self.ticks.drawing
                && let Some(tick) = self.draw_tick(id)
            {
                return Some(tick);
            }
            let (key, until) = self.ticks.sweep.pop_front()?;
            if let Some(id) = self.table.find(key.value()) {
                self.sweep_key(id, until);
            }
        }
    }

    /// Makes key `id`'s ticks up to `until` the ones drawn next (an
    /// [`KeyedMonitor::advance_to`]): its ticks from its origin on, as a row
    /// at `until` would make them due, except that more than `max_ticks`
    /// fire once per period (as over a gap under `on_gap skip`), and the key's
    /// last row stays its last row. A stopped key has none.
    fn sweep_key(&mut self, id: EntryId, until: Time) {
        if self.stop_error(id).is_some() {
            return;
        }
        let words = self.layout.ticks(self.table.words(id));
        let last = self.ticks.read(words);
        if !self.ticks.sched.started() {
            return;
        }
        let rules = self.ticks.rules;
        if rules.schedule(&mut self.ticks.sched, last, until).is_err() {
            self.ticks.sched.skip_to(until);
        }
        let words = self.layout.ticks_mut(self.table.words_mut(id));
        self.ticks.write(words, last);
        self.ticks.drawing = Some((id, until));
    }

    /// Makes the ticks of every live key up to `time` due, the ones
    /// [`KeyedMonitor::next_tick`] gives next, key by key (least recently
    /// used first): a run whose time follows the wall clock ticks every key
    /// while the sources are silent, where otherwise a key's ticks follow
    /// its own rows only. A key ticks from its origin (`start`, else its
    /// first row's time); it costs one visit per live key.
    pub fn advance_to(&mut self, time: Time) {
        if !self.ticks.timed {
            return;
        }
        let keys: Vec<Key> = (self.table.iter().rev())
            .map(|id| self.table.key(id).clone())
            .collect();
        self.ticks.sweep.extend(keys.into_iter().map(|k| (k, time)));
    }

    /// Draws the next tick due of record `id` (`ticks.drawing`) and
    /// evaluates it; `None` when none is left.
    fn draw_tick(&mut self, id: EntryId) -> Option<Result<u64, StepError>> {
        let (_, until) = self.ticks.drawing?;
        let words = self.layout.ticks(self.table.words(id));
        let last = self.ticks.read(words);
        let Some(t) = self.ticks.sched.next_due(until, &mut self.ticks.due) else {
            self.ticks.drawing = None;
            return None;
        };
        let words = self.layout.ticks_mut(self.table.words_mut(id));
        self.ticks.write(words, last);
        Some(self.tick_key(id, t))
    }

    /// Evaluates a tick at `t` of the periods `ticks.due` on record `id`'s
    /// run; returns the step it was.
    fn tick_key(&mut self, id: EntryId, t: Time) -> Result<u64, StepError> {
        let key = self.table.key(id);
        match &mut self.last_key {
            Some(last) => last.assign(key.value()),
            None => self.last_key = Some(key.clone()),
        }
        self.load(id);
        let run = &mut self.work;
        if let Some(e) = &run.failed {
            return Err((**e).clone().into());
        }
        let step = run.state.step;
        run.state.time = Some(t);
        if let Err(e) = self.engine.run_tick(run, &self.ticks.due) {
            run.failed = Some(Box::new(e.clone()));
            return Err(e.into());
        }
        Ok(step)
    }

    fn step_timed(
        &mut self,
        time: Option<crate::time::Time>,
        row: &[Option<Value>],
    ) -> Result<Outputs<'_>, StepError> {
        // The converted row is the monitor's reused buffer, taken out for the
        // step so that it does not borrow the monitor.
        let mut converted = std::mem::take(&mut self.scratch);
        let result = self.step_row(row, time, &mut converted);
        converted.clear();
        self.scratch = converted;
        let (step, in_place) = result?;
        let key = self.last_key.as_ref().expect("step_row names the key");
        let view = match in_place {
            Some(id) => StreamsView::Packed {
                words: self.table.words(id),
                layout: &self.layout,
                key: (self.key_slot, key),
            },
            None => StreamsView::State(&self.work.state),
        };
        Ok(Outputs::new(
            view,
            &self.engine.plan().spec,
            step,
            Some(key),
        ))
    }

    /// Evaluates one row (see `step`); returns the step it evaluated, and
    /// the record whose packed run a kernel evaluated it in place, if one
    /// did (the outputs are there), else they are in the working run.
    fn step_row(
        &mut self,
        row: &[Option<Value>],
        time: Option<crate::time::Time>,
        converted: &mut Vec<Option<Value>>,
    ) -> Result<(u64, Option<EntryId>), StepError> {
        if self.tier_up.is_some() {
            self.poll_tier_up();
        }
        let (cells, value) = self.checked(row, converted)?;
        // The key is kept as the last row's (for `Outputs::key`) before the
        // row runs (a runtime error names no key), made only when it changes.
        match &mut self.last_key {
            Some(last) => last.assign(value),
            None => self.last_key = Some(Key::from(value.clone())),
        }
        let id = match self.table.find(value) {
            Some(id) => {
                // Recency is kept only under a bound (see the field's doc).
                if self.max_keys.is_some() {
                    self.table.touch(id);
                }
                id
            }
            None => self.insert_key(value),
        };
        // The lookup brought the record's first line; ask for the rest now,
        // so that the kernel does not wait for each in turn.
        self.table.prefetch(id);
        // The whole-row kernel on packed runs runs on the key's record in
        // place: no unpacking, no packing. The run must be current, so the
        // working run is written back first; only then does the record show
        // a stop error the working run held. A run with anything beside its
        // record (objects, a stop error) is not offered to it.
        self.write_back();
        if self.table.side(id).is_none() {
            let words = self.table.words_mut(id);
            // The step is the packed run's first word.
            let step = words[0];
            if self.engine.run_packed_row(words, cells, time) {
                self.rows += 1;
                return Ok((step, Some(id)));
            }
        }
        self.load(id);
        let run = &mut self.work;
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
        Ok((step, None))
    }

    /// Makes the record of a new key `value` (evicting the least recently
    /// used key first if live keys are at their bound): a fresh run.
    fn insert_key(&mut self, value: &Value) -> EntryId {
        let key = Key::from(value.clone());
        let live = self.max_keys.map_or(usize::MAX, |n| n.get() - 1);
        self.evict_to(live);
        let id = self.table.insert(key);
        let words = self.table.words_mut(id);
        words.copy_from_slice(&self.fresh);
        // The key input holds the key from the key's first row on (the
        // whole-row kernel may leave it out: it is the key; a Str or Unit
        // key's object is put back on unpacking).
        let (t, lane) = scalar_form(value).unwrap_or((tag::OTHER, 0));
        self.layout.set_stream(words, self.key_slot, t, lane);
        id
    }

    /// The ticks of record `id`'s key as a snapshot holds them: `None` for a
    /// plan without periods, or a key that never had a row since its run
    /// began or time was reset (its words are all zero).
    fn key_ticks(&self, id: EntryId) -> Option<KeyTicks> {
        if !self.ticks.timed {
            return None;
        }
        let words = self.layout.ticks(self.table.words(id));
        if words.iter().all(|&w| w == 0) {
            return None;
        }
        let next: Vec<Option<i64>> = (0..self.ticks.due.len())
            .map(|k| (words[2 + 2 * k] != 0).then_some(words[3 + 2 * k] as i64))
            .collect();
        let mut scheduler = self.ticks.sched.clone();
        scheduler.set_next_ticks(&next);
        Some(KeyTicks {
            scheduler,
            last: (words[0] != 0).then_some(words[1] as i64),
        })
    }

    /// Makes `ticks` (a snapshot's) the ticks of record `id`'s key; `None`:
    /// not started, no row yet.
    fn set_key_ticks(&mut self, id: EntryId, ticks: Option<&KeyTicks>) {
        if !self.ticks.timed {
            return;
        }
        let last = match ticks {
            None => {
                self.ticks.sched.stop();
                None
            }
            Some(t) => {
                self.ticks.sched.set_next_ticks(t.scheduler.next_ticks());
                t.last.map(Time)
            }
        };
        let words = self.layout.ticks_mut(self.table.words_mut(id));
        self.ticks.write(words, last);
    }

    /// Keeps `run` as the run of the key of record `id` (just inserted, or
    /// restored): packed in the record, its rings filled with ⊥ first if
    /// they are still filling (`NodeState::fill_rings`).
    fn keep(&mut self, id: EntryId, mut run: Run) {
        run.state.fill_rings();
        self.pack(id, &run);
    }

    /// Packs `run` into record `id` (and its side, if it needs one).
    fn pack(&mut self, id: EntryId, run: &Run) {
        pack_record(&mut self.table, id, run, &self.layout, self.key_slot);
    }

    /// Writes the working run back into the record of the key it holds, if
    /// any (in place, found by number: a row of another key looks up
    /// nothing for it).
    fn write_back(&mut self) {
        if let Some(id) = self.loaded.take() {
            pack_record(&mut self.table, id, &self.work, &self.layout, self.key_slot);
        }
    }

    /// Loads record `id`'s packed run into the working run.
    fn load(&mut self, id: EntryId) {
        if self.loaded == Some(id) {
            return;
        }
        self.write_back();
        unpack_into(
            &mut self.work,
            &self.layout,
            self.table.block(id),
            self.table.side(id),
            self.key_slot,
            self.table.key(id),
        );
        self.loaded = Some(id);
    }

    /// Forgets record `id`'s key.
    fn forget(&mut self, id: EntryId) {
        if self.loaded == Some(id) {
            self.loaded = None;
        }
        if self.ticks.drawing.is_some_and(|(d, _)| d == id) {
            self.ticks.drawing = None;
        }
        self.ticks.once.retain(|&(o, _)| o != id);
        let key = self.table.remove(id);
        // A key forgotten has no place either (a bound on live keys bounds them too).
        if let Some(places) = &mut self.ticks.places {
            places.remove(&key);
        }
    }

    /// Calls `f` with `key`'s run as it stands; `None` if the key is not
    /// live. A packed run not loaded is unpacked into a copy of the working
    /// run (reads of one key are rare; rows never come here).
    fn with_run<R>(&self, key: &Key, f: impl FnOnce(&Run) -> R) -> Option<R> {
        let id = self.table.find(key.value())?;
        let mut run = self.work.clone();
        self.canonical_into(&mut run, id);
        Some(f(&run))
    }

    /// Puts record `id`'s packed run, as packing leaves it, into `run` (a
    /// copy of the working run). For the loaded key that is the working run
    /// packed afresh, so that what is read of a key (a snapshot above all)
    /// is the same whether or not its run happens to be loaded: packing
    /// keeps of the node slots only the cells later rows read.
    fn canonical_into(&self, run: &mut Run, id: EntryId) {
        let key = self.table.key(id);
        if self.loaded == Some(id) {
            let mut fresh = vec![0u8; self.layout.len()];
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
            let (block, side) = (self.table.block(id), self.table.side(id));
            unpack_into(run, &self.layout, block, side, self.key_slot, key);
        }
    }

    /// Evicts least recently used keys until at most `live` remain, handing
    /// each to the eviction callback if there is one.
    fn evict_to(&mut self, live: usize) {
        while self.table.len() > live {
            let Some(id) = self.table.oldest() else {
                break;
            };
            if let Eviction::Callback(_) = &self.eviction {
                let key = self.table.key(id).clone();
                let snapshot = self
                    .snapshot_key(&key)
                    .expect("the least recently used key is live");
                if let Eviction::Callback(f) = &mut self.eviction {
                    f(key, snapshot);
                }
            }
            self.forget(id);
        }
    }

    /// The number of live keys.
    pub fn key_count(&self) -> usize {
        self.table.len()
    }

    /// The live keys, most recently used first when live keys are bounded,
    /// else in the order they were first seen, latest first.
    pub fn keys(&self) -> impl Iterator<Item = &Key> + '_ {
        self.table.iter().map(|id| self.table.key(id))
    }

    /// Whether `key` is live.
    pub fn contains(&self, key: &Key) -> bool {
        self.table.find(key.value()).is_some()
    }

    /// The number of rows `key` has evaluated; `None` if it is not live.
    pub fn steps(&self, key: &Key) -> Option<u64> {
        let id = self.table.find(key.value())?;
        Some(match self.loaded == Some(id) {
            true => self.work.state.step,
            false => self.layout.step(self.table.block(id)),
        })
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
        self.with_run(key, |run| run.state.raw((*s).into()))
    }

    /// The current sample of any stream `name` (input, output or `aux`) of
    /// `key`; `None` if the key is not live or there is no such stream.
    pub fn stream(&self, key: &Key, name: &str) -> Option<Sample> {
        let s = self.engine.plan().spec.stream_by_name(name)?;
        self.with_run(key, |run| run.state.raw(s.into()))
    }

    /// The bytes allocated for `key`'s offset history (see
    /// [`crate::Monitor::history_bytes`]); `None` if it is not live.
    pub fn history_bytes(&self, key: &Key) -> Option<usize> {
        self.with_run(key, |run| run.state.history_bytes())
    }

    /// Counters of every key's rows so far (one engine runs them all).
    pub fn stats(&self) -> Stats {
        let mut stats = Stats::of(&self.engine);
        if let Some(up) = &self.tier_up {
            stats.why = up.describe(&stats.why);
        }
        stats
    }

    /// Moves every key to the tier `auto` builds in the background now,
    /// waiting for the build (started here if the run is not hot yet): for
    /// a caller that wants every later row on it, and for tests that switch
    /// at a chosen row. Nothing happens on a monitor with no tier-up to
    /// come.
    pub fn tier_up_now(&mut self) {
        let Some(up) = self.tier_up.take() else {
            return;
        };
        match up.wait() {
            Ok(built) => self.switch_to(built),
            Err(e) => self.give_up_tier_up(e),
        }
    }

    /// Starts the build once the run is hot, and switches once it is done.
    /// Called at row boundaries while a tier-up is to come; out of line, so
    /// that a row of a monitor with none pays one test.
    #[cold]
    #[inline(never)]
    fn poll_tier_up(&mut self) {
        let Some(up) = self.tier_up.take() else {
            return;
        };
        if self.rows < up.after {
            self.tier_up = Some(up);
            return;
        }
        up.start();
        match up.ready() {
            None => self.tier_up = Some(up),
            Some(Ok(built)) => self.switch_to(built),
            Some(Err(e)) => self.give_up_tier_up(e),
        }
    }

    /// Ends the tier-up with every key where it is, saying why.
    fn give_up_tier_up(&mut self, why: &str) {
        let why = format!(
            "{}; native-whole was not built ({why})",
            self.engine.describe_tier()
        );
        self.engine.set_why(why);
    }

    /// Moves every key to `built`'s engine (a share of it) at this row
    /// boundary: each key's packed run is converted to the engine's layout
    /// (see `tier_up`), the working run and a new key's run are the
    /// engine's, and the engine's counters carry the rows run so far.
    fn switch_to(&mut self, built: &Built) {
        self.write_back();
        let mut engine = built.engine.share();
        engine.take_over_from(&self.engine, self.rows);
        let max = self.work.state.max_string_bytes;
        let (mut work, fresh) = working_run(&engine, &built.layout, max);
        let (old, new, key_slot) = (&self.layout, &built.layout, self.key_slot);
        let (table, from) = (&mut self.table, &mut self.work);
        table.relayout(new.len(), |key, block, side, into| {
            unpack_into(from, old, block, side, key_slot, key);
            // The state moves over; the new engine's programs start
            // unpromoted, its flags unset (`work` is the engine's fresh run).
            std::mem::swap(&mut work.state, &mut from.state);
            work.failed = from.failed.take();
            let side = pack_into(&work, new, key_slot, into);
            std::mem::swap(&mut work.state, &mut from.state);
            side
        });
        self.engine = engine;
        self.layout = built.layout.clone();
        self.fresh = fresh;
        self.work = work;
        self.work.failed = None;
        self.loaded = None;
    }

    /// A snapshot of `key`'s run; `None` if it is not live. It restores as
    /// a plain [`crate::Monitor`] of that key's trace, or with
    /// [`KeyedMonitor::restore_key`].
    pub fn snapshot_key(&self, key: &Key) -> Option<Snapshot> {
        let id = self.table.find(key.value())?;
        let ticks = self.key_ticks(id);
        self.with_run(key, |run| {
            Snapshot::capture(self.engine.plan(), run).with_ticks(ticks)
        })
    }

    /// Removes `key`, returning a snapshot of its run (a later row of the
    /// key starts it afresh).
    pub fn remove(&mut self, key: &Key) -> Option<Snapshot> {
        let snapshot = self.snapshot_key(key)?;
        let id = self.table.find(key.value())?;
        self.forget(id);
        Some(snapshot)
    }

    /// Makes `snapshot` the run of `key` (replacing any live run of it, and
    /// as its most recent use), for a key whose state was evicted or
    /// removed and is back. A snapshot of another specification is an
    /// error. With live keys bounded, this may evict another key.
    pub fn restore_key(&mut self, key: Key, snapshot: &Snapshot) -> Result<(), SnapshotError> {
        let (mut state, failed) = snapshot.restore_state(self.engine.plan())?;
        state.max_string_bytes = self.work.state.max_string_bytes;
        let mut run = Run::from_state(&self.engine, state);
        run.failed = failed.map(Box::new);
        if let Some(id) = self.table.find(key.value()) {
            self.forget(id);
        }
        self.evict_to(self.max_keys.map_or(usize::MAX, |n| n.get() - 1));
        let id = self.table.insert(key);
        self.keep(id, run);
        self.set_key_ticks(id, snapshot.key_ticks());
        Ok(())
    }

    /// Writes the binary form of [`KeyedMonitor::snapshot`] (the bytes of
    /// its `to_bytes`) into `out` one key at a time, from the packed runs,
    /// so that memory stays the monitor's own whatever the number of keys:
    /// what a checkpoint of a keyed run writes to its file.
    /// [`KeyedSnapshotReader`] reads it back key by key. The header's length
    /// and checksum are known only at the end: they are written over the
    /// header's place with a seek, and `out` is left at the snapshot's end.
    ///
    /// A key's run holding a function value cannot be snapshotted (no
    /// restore could give it back): that is an error of kind
    /// [`std::io::ErrorKind::InvalidData`], and what was written is not a
    /// snapshot.
    pub fn write_snapshot<W: std::io::Write + std::io::Seek + ?Sized>(
        &self,
        out: &mut W,
    ) -> std::io::Result<()> {
        let encoder = RunEncoder::new(self.engine.plan());
        let mut w = KeyedWriter::start(
            out,
            encoder.fingerprint(),
            &self.key_name,
            self.rows,
            self.table.len(),
        )?;
        // One copy of the working run serves every packed key.
        let mut tmp = self.work.clone();
        for id in self.table.iter().rev() {
            self.canonical_into(&mut tmp, id);
            w.entry(
                &encoder,
                self.table.key(id),
                &tmp.state,
                tmp.failed.as_deref(),
                self.key_ticks(id).as_ref(),
            )?;
        }
        w.finish()
    }

    /// A snapshot of every live key (least recently used first) and the row
    /// count: [`KeyedMonitorBuilder::restore`] continues it. It holds every
    /// key's run in memory; [`KeyedMonitor::write_snapshot`] writes the same
    /// bytes key by key.
    pub fn snapshot(&self) -> KeyedSnapshot {
        let plan = self.engine.plan();
        let fp = crate::snapshot::fingerprint(plan);
        // One copy of the working run serves every packed key.
        let mut tmp = self.work.clone();
        let keys = self
            .table
            .iter()
            .rev()
            .map(|id| {
                self.canonical_into(&mut tmp, id);
                (
                    self.table.key(id).clone(),
                    Snapshot::capture_with(plan, &tmp, fp).with_ticks(self.key_ticks(id)),
                )
            })
            .collect();
        KeyedSnapshot::from_parts(plan, &self.key_name, self.rows, keys)
    }

    /// The plan every key runs (for tests of the snapshot encoding).
    #[cfg(test)]
    pub(crate) fn engine_plan(&self) -> Arc<Plan> {
        self.engine.plan().clone()
    }

    /// `key`'s run state and stop error as a snapshot reads them (for tests
    /// of the snapshot encoding).
    #[cfg(test)]
    pub(crate) fn run_state(
        &self,
        key: &Key,
    ) -> Option<(NodeState, Option<crate::error::RuntimeError>)> {
        self.with_run(key, |run| {
            (run.state.clone(), run.failed.as_deref().cloned())
        })
    }

    /// Drops every key and the row count, keeping the compiled code.
    pub fn reset(&mut self) {
        self.table.clear();
        self.loaded = None;
        self.rows = 0;
        self.last_key = None;
    }
}

/// A keyed monitor's working run on `engine` at step 0 (its rings full of
/// ⊥), and that run packed with `layout`: each new key's record is a copy.
fn working_run(engine: &Engine, layout: &PackLayout, max_string_bytes: usize) -> (Run, Vec<u64>) {
    let mut work = Run::from_state(engine, NodeState::with_full_rings(engine.plan()));
    work.state.max_string_bytes = max_string_bytes;
    let mut fresh = vec![0u64; layout.len() / 8];
    work.pack(layout, zerocopy::IntoBytes::as_mut_bytes(&mut fresh[..]));
    (work, fresh)
}

/// Packs `run` into record `id` of `table` (and its side, if it needs one).
fn pack_record(table: &mut KeyTable, id: EntryId, run: &Run, layout: &PackLayout, key_slot: Slot) {
    use zerocopy::IntoBytes as _;
    let side = pack_into(run, layout, key_slot, table.words_mut(id).as_mut_bytes());
    table.set_side(id, side);
}

/// Packs `run` into `bytes` and returns what it keeps beside (see `Side`),
/// if anything: nearly always nothing, so nothing is allocated.
fn pack_into(
    run: &Run,
    layout: &PackLayout,
    key_slot: Slot,
    bytes: &mut [u8],
) -> Option<Box<Side>> {
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
    key_slot: Slot,
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

#[cfg(all(test, feature = "scale"))]
mod tests {
    use super::*;
    use crate::monitor::Spec;

    /// Under a bound on live keys a key's place is its last row's, and an evicted key forgets
    /// its place: the places stay as bounded as the keys.
    #[test]
    fn an_evicted_key_forgets_its_place() {
        let spec = Spec::parse(
            "hb.dsrv",
            "in host: Str\nin x: Int\nout n: Int @ 1s\nn = 1\n",
        )
        .expect("valid");
        let one = NonZeroUsize::new(1).expect("not zero");
        let mut m = (KeyedMonitor::builder(&spec, "host").max_keys(one))
            .build()
            .expect("builds");
        m.keep_places();
        let host = |h: &str| Value::Str(h.into());
        for (i, h) in ["a", "b", "a", "a"].iter().enumerate() {
            m.note_place(&host(h), i as u64);
            m.step([Some(host(h)), Some(Value::Int(1))]).expect("steps");
        }
        assert_eq!(m.places().map(Iterator::count), Some(1));
        assert_eq!(m.place(&Key::from(host("a"))), 3);
        assert_eq!(m.place(&Key::from(host("b"))), 0);
    }
}
