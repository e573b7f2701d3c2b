//! The canonical arena interpreter (docs/engine.md, "The canonical interpreter"): the reference tier every other tier must equal.
//!
//! Per row it evaluates each stream of the schedule node by node over
//! dynamic `Value`s, reading operands from the arena and writing results
//! back; the root's value is published to the stream's environment slot.
//! After the last stream the tick barrier advances the offset rings. All
//! temporal state lives in one `NodeState`.
//!
//! Offset rings store *effective* values: the ring of `e[n]` holds, for each
//! of the last `n` steps, `e`'s value if it was present, else the entry
//! before it (⊥ before the first step). Then `e[n]` at step `s` is simply
//! the entry for step `s - n`, which is exactly "the value `e` had `n` steps
//! earlier; if that was NoVal, the last value the offset emitted". The entry
//! for step `t` lives in slot `t % n`, so the read of step `s` and the write
//! of the barrier touch the same slot.
//!
//! History memory grows with the steps seen: a ring of `e[n]` is *filling*
//! for its first `n` steps (entries `0..step` exist, the entry a read at
//! step `s < n` wants is still the initial ⊥) and lives in a buffer of its
//! own that grows by one entry per step. Once full it moves into the ring
//! table in the frame layout (`ring_tags`, `ring_lanes`, `ring_objects`) at
//! its `NodeData::ring_base`, never to move again. The plan lays rings out
//! shortest first and all rings start at step 0, so the full rings are a
//! prefix of the layout and the table only ever grows at its end. Fused and
//! native code read a ring only after promotion, which needs it full.

pub mod dynamic;
pub mod func;
pub mod ops;
pub mod pack;

use crate::error::{Fault, RuntimeError};
use crate::lang::ast::{BinOp, Builtin, ExprKind};
use crate::lang::check::{ScalarSignature, StreamId};
use crate::plan::{NodeId, NodeOp, Plan, Slot};
use crate::value::{Sample, Value};
use crate::window::Elem;
use scalar_ir::frame::tag;

/// A row's input cells, one per declared input, as the engine is given
/// them: values (`Monitor::step`, a keyed row) or frame form (a batch's row,
/// `Monitor::step_scalars`). Every tier reads a row through this one type,
/// so a batch row reaches the arena as lanes and tags, never decoded into
/// `Value`s and encoded again.
#[derive(Clone, Copy, Debug)]
pub enum Cells<'a> {
    /// `None` is an absent input; a row shorter than the inputs is absent
    /// past its end.
    Values(&'a [Option<Value>]),
    /// One tag and lane per input; cells tagged `OTHER` have their value in
    /// `objects` at `base + k` (none when `objects` is `None`).
    Frame {
        lanes: &'a [u64],
        tags: &'a [u8],
        objects: Option<(&'a Objects, usize)>,
    },
}

impl Cells<'_> {
    /// The frame tag of input `k`.
    pub fn tag(&self, k: usize) -> u8 {
        match self {
            Cells::Values(row) => match row.get(k) {
                Some(Some(v)) => scalar_form(v).map_or(tag::OTHER, |(t, _)| t),
                _ => tag::ABSENT,
            },
            Cells::Frame { tags, .. } => tags.get(k).copied().unwrap_or(tag::ABSENT),
        }
    }

    /// The tag and lane of input `k` (a value with no scalar form is tagged
    /// `OTHER` with lane 0).
    pub fn frame_cell(&self, k: usize) -> (u8, u64) {
        match self {
            Cells::Values(row) => value_cell(row, k),
            Cells::Frame { lanes, tags, .. } => match tags.get(k) {
                Some(&t) => (t, lanes[k]),
                None => (tag::ABSENT, 0),
            },
        }
    }

    /// The row's lanes and tags where they are, for a whole-row kernel's
    /// frame, if the row is in frame form.
    #[inline]
    pub fn frame(&self) -> Option<(&[u64], &[u8])> {
        match self {
            Cells::Values(_) => None,
            Cells::Frame { lanes, tags, .. } => Some((lanes, tags)),
        }
    }

    /// Input `k`'s value, decoded (`RowBatch::row`; the engine writes
    /// cells to the arena with `NodeState::write_input` instead).
    pub fn value(&self, k: usize) -> Option<Value> {
        match self {
            Cells::Values(row) => row.get(k).cloned().flatten(),
            Cells::Frame {
                lanes,
                tags,
                objects,
            } => {
                let t = *tags.get(k)?;
                let object = objects.and_then(|(o, base)| o.get(base + k));
                decode(t, lanes[k], object).value().cloned()
            }
        }
    }
}

/// The values of cells tagged `OTHER` (slots of a `NodeState`, cells of a
/// batch), indexed like the lanes. It grows only to the last index that
/// ever held one, so a run or batch of scalars carries no objects at all,
/// and a run whose only Str is an early input (a keyed monitor's key) a
/// handful: per-key memory depends on it.
#[derive(Clone, Debug, Default)]
pub struct Objects(Vec<Option<Value>>);

impl Objects {
    /// Records the object of cell `i` (the cell about to be pushed, or one
    /// already there).
    pub(crate) fn set(&mut self, i: usize, v: Option<Value>) {
        if v.is_none() && self.0.len() <= i {
            return;
        }
        if self.0.len() <= i {
            // Each new cell is made as `None`, not cloned from one (which
            // `resize` does, a match on the value per cell): a batch with a
            // Str column grows by a row's width of cells at every row.
            self.0.resize_with(i + 1, || None);
        }
        self.0[i] = v;
    }

    /// Becomes a copy of `other`, reusing this one's allocation.
    pub(crate) fn copy_from(&mut self, other: &Objects) {
        self.0.clone_from(&other.0);
    }

    pub(crate) fn get(&self, i: usize) -> Option<&Value> {
        self.0.get(i).and_then(Option::as_ref)
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// How many indices it has room for (the last that held an object, + 1).
    #[cfg(test)]
    pub(crate) fn allocated(&self) -> usize {
        self.0.len()
    }
}

/// Equal when every index holds the same object: how far each grew does not
/// matter.
impl PartialEq for Objects {
    fn eq(&self, other: &Objects) -> bool {
        (0..self.0.len().max(other.0.len())).all(|i| self.get(i) == other.get(i))
    }
}

/// All state of a run: the value arena (streams, nodes and constants),
/// builtin flags and offset rings.
///
/// Every slot of the arena (`Plan::node_slot`, laid out by
/// `Plan::assign_slots`) is kept in the scalar frame
/// layout of `scalar_ir::frame`: a tag byte and a `u64` payload lane, plus an
/// object for values the scalar tiers cannot represent (Str, Unit), so that
/// fused and native code read and write this very memory (their frame's
/// environment is the arena, their state is the rings) and no value is ever
/// copied between tiers. A slot's tag is its raw value this step (`ABSENT` is
/// NoVal); while it is NoVal, `held_tags` keeps the tag of its last value,
/// whose payload is still in the lane, which is the hold rule's cell.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeState {
    /// The number of rows evaluated so far (the current step while a row runs).
    pub step: u64,
    /// The current row's time, when it has one (`Monitor::step_at`); else
    /// `time()` is the step index. Set per row, so never snapshotted.
    pub time: Option<crate::time::Time>,
    /// For a plan with periodic streams: the steps each clock has run
    /// (`Plan::clocks`: input steps, then each period's ticks), and which
    /// clocks run at the current step. Empty otherwise (then every step is
    /// an input step and `step` counts them).
    pub clocks: Vec<u64>,
    pub active: Vec<bool>,
    /// Raw tag of every slot.
    pub tags: Vec<u8>,
    /// Tag of the held value of every slot whose raw tag is `ABSENT`.
    pub held_tags: Vec<u8>,
    /// Payload of every slot (current or held value).
    pub lanes: Vec<u64>,
    /// The value of every slot tagged `OTHER`.
    pub objects: Objects,
    /// The flag of `when`, `init` and `update` nodes, by `NodeId`.
    pub flag: Vec<bool>,
    /// The ring table: every full offset ring (see the module doc), laid
    /// out by `NodeData::ring_base`, in the same tag/lane form. It covers
    /// the rings full so far, a prefix of `Plan::ring_len` lanes.
    pub ring_tags: Vec<u8>,
    pub ring_lanes: Vec<u64>,
    /// The value of every ring entry tagged `OTHER`; allocated (to the
    /// table's length) on the first such entry, so rings of scalars never
    /// pay for it.
    pub ring_objects: Vec<Option<Value>>,
    /// Every ring, in layout order (as `Plan::offset_nodes`).
    rings: Vec<RingInfo>,
    /// The rings still filling, in layout order: those of
    /// `plan.offset_nodes[plan.offset_nodes.len() - filling.len()..]`.
    filling: std::collections::VecDeque<FillingRing>,
    /// Errors raised inside each arm of each `if` during the current row,
    /// two per node (`2 * node + arm`); the `if` reports or discards them.
    pending: Vec<Parked>,
    /// The longest string a `++` may produce (see `ops::binary_bounded`).
    pub max_string_bytes: usize,
    /// Every window's state, laid out by `Plan::windows` (see `crate::window`).
    pub windows: Vec<u64>,
    /// Every `dynamic`'s running instance, by `DynamicId`.
    pub dynamic: Vec<dynamic::DynRun>,
}

/// A fault raised inside an arm of an `if` during the current row, parked
/// for that `if` to report or discard. Faults are rare, so they are kept in
/// a short list rather than a table over every node (which every run, and
/// so every key of a keyed monitor, would carry).
#[derive(Clone, Debug, PartialEq)]
struct Parked {
    /// `2 * node + arm` of the `if` (its `NodeId`) and the arm.
    at: u32,
    fault: Fault,
}

/// What promotion needs to know of a ring without scanning it.
#[derive(Clone, Debug, PartialEq)]
struct RingInfo {
    base: u32,
    n: u32,
    /// The offset's operand slot: what the barrier pushes.
    operand: u32,
    /// The tag every entry has once the ring is promotable: that of its
    /// scalar signature; `None` for a ring fused code never reads (not
    /// scalar, or an offset rebound to an `if` arm).
    want: Option<u8>,
    /// How many of the ring's entries so far have another tag than `want`.
    bad: u32,
}

impl RingInfo {
    /// Accounts for an entry's tag changing from `old` (`None`: a new
    /// entry) to `new`.
    fn retag(&mut self, old: Option<u8>, new: u8) {
        if let Some(want) = self.want {
            self.bad -= u32::from(old.is_some_and(|o| o != want));
            self.bad += u32::from(new != want);
        }
    }
}

/// A ring in its first `n` steps: the entries of steps `0..len`, in the
/// ring table's form. Its buffers never hold more than `n` entries.
#[derive(Clone, Debug, PartialEq)]
struct FillingRing {
    n: u32,
    base: u32,
    tags: Vec<u8>,
    lanes: Vec<u64>,
    /// As `NodeState::ring_objects`: allocated on the first `OTHER` entry.
    objects: Vec<Option<Value>>,
}

impl FillingRing {
    /// Appends the entry of the next step, growing the buffers
    /// geometrically but never beyond the ring's length.
    fn push(&mut self, t: u8, lane: u64, object: Option<Value>) {
        let len = self.tags.len();
        if len == self.tags.capacity() {
            let more = len.max(4).min(self.n as usize - len);
            self.tags.reserve_exact(more);
            self.lanes.reserve_exact(more);
        }
        self.tags.push(t);
        self.lanes.push(lane);
        if t == tag::OTHER {
            self.objects.resize(len, None);
            self.objects.push(object);
        }
    }

    /// The entry of step `t < len`.
    fn entry(&self, t: usize) -> (u8, u64, Option<Value>) {
        let object = match self.tags[t] {
            tag::OTHER => self.objects.get(t).cloned().flatten(),
            _ => None,
        };
        (self.tags[t], self.lanes[t], object)
    }
}

/// The entry of a ring of `n` entries that holds step (or clock count)
/// `count`: `count % n`, without a division when `n` is a power of two (an
/// offset of 1, the most common, above all). A 64-bit division costs tens
/// of cycles, and every row pushes every ring.
#[inline]
pub(crate) fn ring_entry(count: u64, n: u64) -> u64 {
    match n.is_power_of_two() {
        true => count & (n - 1),
        false => count % n,
    }
}

/// Rebuilds a sample from its frame form (tag, payload, and the object of a
/// cell tagged `OTHER`). Batches use the same form.
#[inline]
pub(crate) fn decode(t: u8, lane: u64, object: Option<&Value>) -> Sample {
    match t {
        tag::ABSENT => Sample::NoVal,
        tag::DEFERRED => Sample::Deferred,
        tag::I64 => Sample::Value(Value::Int(lane as i64)),
        tag::F64 => Sample::Value(Value::Float(f64::from_bits(lane))),
        tag::B1 => Sample::Value(Value::Bool(lane != 0)),
        _ => object.map_or(Sample::NoVal, |v| Sample::Value(v.clone())),
    }
}

/// Cell `k` of a row of `Value` cells in frame form (see
/// [`Cells::frame_cell`]).
#[inline]
pub(crate) fn value_cell(row: &[Option<Value>], k: usize) -> (u8, u64) {
    match row.get(k) {
        Some(Some(v)) => scalar_form(v).unwrap_or((tag::OTHER, 0)),
        _ => (tag::ABSENT, 0),
    }
}

/// The tag and payload of a value with a scalar form; `None` for values
/// kept as objects (Str, Unit), which are tagged `OTHER`.
#[inline]
pub(crate) fn scalar_form(v: &Value) -> Option<(u8, u64)> {
    match v {
        Value::Int(i) => Some((tag::I64, *i as u64)),
        Value::Float(f) => Some((tag::F64, f.to_bits())),
        Value::Bool(b) => Some((tag::B1, *b as u64)),
        _ => None,
    }
}

impl NodeState {
    pub fn new(plan: &Plan) -> NodeState {
        let n = plan.slot_count();
        let rings: Vec<RingInfo> = plan
            .offset_nodes
            .iter()
            .map(|&id| {
                let node = plan.node(id);
                let NodeOp::Offset(n) = node.op else {
                    unreachable!("offset_nodes holds offsets")
                };
                let want = match node.sig {
                    _ if node.rebound => None,
                    ScalarSignature::I64 => Some(tag::I64),
                    ScalarSignature::F64 => Some(tag::F64),
                    ScalarSignature::B1 => Some(tag::B1),
                    ScalarSignature::NotScalar => None,
                };
                RingInfo {
                    base: node.ring_base,
                    n,
                    operand: node.slots[0].index() as u32,
                    want,
                    bad: 0,
                }
            })
            .collect();
        let filling = rings
            .iter()
            .map(|r| FillingRing {
                n: r.n,
                base: r.base,
                tags: Vec::new(),
                lanes: Vec::new(),
                objects: Vec::new(),
            })
            .collect();
        // Input steps, then one clock per period; none without periods.
        let clocks = match plan.is_timed() {
            true => plan.periods.len() + 1,
            false => 0,
        };
        let mut st = NodeState {
            step: 0,
            time: None,
            clocks: vec![0; clocks],
            active: vec![false; clocks],
            tags: vec![tag::ABSENT; n],
            held_tags: vec![tag::ABSENT; n],
            lanes: vec![0; n],
            objects: Objects::default(),
            flag: vec![false; plan.nodes.len()],
            ring_tags: Vec::new(),
            ring_lanes: Vec::new(),
            ring_objects: Vec::new(),
            rings,
            filling,
            pending: Vec::new(),
            max_string_bytes: ops::DEFAULT_MAX_STRING_BYTES,
            windows: vec![0; plan.window_words],
            dynamic: vec![dynamic::DynRun::default(); plan.dynamics as usize],
        };
        let consts_from = n - plan.consts.len();
        for (i, c) in plan.consts.iter().enumerate() {
            st.write(Slot((consts_from + i) as u32), Sample::Value(c.clone()));
        }
        if plan.is_timed() {
            // Clocks advance at their own steps, so rings would not fill in
            // layout order: a timed plan's table has every ring at its full
            // length from the start (entries ⊥), and a read checks its
            // clock's count instead (`eval_node`).
            st.set_rings(full_of_bottom(plan));
        }
        st
    }

    /// The tags of the ring at `base` with `len` lanes, once it is full and
    /// in the ring table; `None` while it is still filling (then some of its
    /// entries are the initial ⊥).
    pub fn full_ring_tags(&self, base: u32, len: u32) -> Option<&[u8]> {
        self.ring_tags
            .get(base as usize..base as usize + len as usize)
    }

    /// Whether the ring at `base` with `len` lanes is full and every entry
    /// is tagged `want`: what promotion needs. Counted as entries are
    /// written, so it costs no scan of the ring (a ring of ten million
    /// entries is promoted in constant time).
    pub fn ring_promotable(&self, base: u32, len: u32, want: u8) -> bool {
        let i = self.rings.partition_point(|r| r.base < base);
        match self.rings.get(i) {
            Some(r) if r.base == base && r.n == len && r.want == Some(want) => {
                r.bad == 0 && self.full_ring_tags(base, len).is_some()
            }
            // Not a ring of the plan as laid out, or read as another type
            // than its signature: decide by its entries.
            _ => self
                .full_ring_tags(base, len)
                .is_some_and(|tags| tags.iter().all(|&t| t == want)),
        }
    }

    /// The bytes allocated for offset history (the ring table and the
    /// rings still filling): at most about twice the entries the steps so
    /// far have produced, whatever the offsets are.
    pub fn history_bytes(&self) -> usize {
        use std::mem::size_of;
        let entries = |tags: &Vec<u8>, lanes: &Vec<u64>, objects: &Vec<Option<Value>>| {
            tags.capacity() * size_of::<u8>()
                + lanes.capacity() * size_of::<u64>()
                + objects.capacity() * size_of::<Option<Value>>()
        };
        entries(&self.ring_tags, &self.ring_lanes, &self.ring_objects)
            + self.filling.capacity() * size_of::<FillingRing>()
            + self
                .filling
                .iter()
                .map(|f| entries(&f.tags, &f.lanes, &f.objects))
                .sum::<usize>()
    }

    /// The raw value of a slot: NoVal unless it has a value this step.
    #[inline]
    pub fn raw(&self, slot: Slot) -> Sample {
        let i = slot.index();
        decode(self.tags[i], self.lanes[i], self.objects.get(i))
    }

    /// The tag and lane of a slot as they are (`tag::OTHER` for a value
    /// kept as an object), for typed reads that make no `Sample`.
    #[inline(always)]
    pub fn frame_cell(&self, slot: Slot) -> (u8, u64) {
        let i = slot.index();
        (self.tags[i], self.lanes[i])
    }

    /// Whether a slot is NoVal at this step.
    #[inline]
    fn is_noval(&self, slot: Slot) -> bool {
        self.tags[slot.index()] == tag::ABSENT
    }

    /// The slot under the hold rule: its last non-NoVal value (NoVal if it
    /// never had one).
    #[inline]
    pub fn held(&self, slot: Slot) -> Sample {
        let i = slot.index();
        let t = match self.tags[i] {
            tag::ABSENT => self.held_tags[i],
            t => t,
        };
        decode(t, self.lanes[i], self.objects.get(i))
    }

    /// The value a node reads from `slot`: its current (raw) value, except
    /// that at a tick an event stream's is its held value. A periodic stream
    /// reads an event stream's held value, whatever it does with it (a
    /// copy, `init`, `default`'s fallback, a lambda's capture), as it does
    /// through an operator that holds; only presence (a window entering a
    /// value, `latch`'s trigger) still sees that nothing arrived at a tick.
    #[inline]
    fn read(&self, plan: &Plan, slot: Slot) -> Sample {
        match self.tick_reads_held(plan, slot) {
            true => self.held(slot),
            false => self.raw(slot),
        }
    }

    /// Whether this step is a tick of a timed plan (its input clock does not
    /// run): only periodic streams are evaluated.
    #[inline]
    fn at_tick(&self) -> bool {
        self.active.first() == Some(&false)
    }

    /// Whether this step is a tick and `slot` an event stream's (inputs
    /// included): a periodic stream reads its held value.
    #[inline]
    fn tick_reads_held(&self, plan: &Plan, slot: Slot) -> bool {
        self.at_tick()
            && plan.clocks.get(slot.index()).is_some_and(|&c| c == 0)
            && self.tags[slot.index()] == tag::ABSENT
    }

    /// The current (raw) value of stream `s`.
    pub fn stream_sample(&self, s: StreamId) -> Sample {
        self.raw(s.into())
    }

    /// Stores a sample in a slot. NoVal only marks the slot absent for this
    /// step, remembering the held value's tag (its payload stays in place).
    #[inline]
    pub fn write(&mut self, slot: Slot, sample: Sample) {
        let i = slot.index();
        match sample {
            Sample::NoVal => {
                if self.tags[i] != tag::ABSENT {
                    self.held_tags[i] = self.tags[i];
                    self.tags[i] = tag::ABSENT;
                }
            }
            Sample::Deferred => self.tags[i] = tag::DEFERRED,
            Sample::Value(v) => match scalar_form(&v) {
                Some((t, lane)) => {
                    self.tags[i] = t;
                    self.lanes[i] = lane;
                }
                None => {
                    self.tags[i] = tag::OTHER;
                    self.objects.set(i, Some(v));
                }
            },
        }
    }

    /// Starts a tick step of a timed plan: every input NoVal, and only the
    /// clocks of the periods `due` (indexed as `Plan::periods`) run.
    pub fn begin_tick(&mut self, plan: &Plan, due: &[bool]) {
        for &s in &plan.spec.inputs {
            self.write(s.into(), Sample::NoVal);
        }
        self.active[0] = false;
        for (a, d) in self.active[1..].iter_mut().zip(due) {
            *a = *d;
        }
    }

    /// The step count fused programs index event rings by: the input steps
    /// so far (every step, for a plan without periodic streams).
    #[inline]
    pub fn ring_step(&self) -> u64 {
        self.clocks.first().copied().unwrap_or(self.step)
    }

    /// The count of `n`'s clock: the steps before this one on which it ran.
    fn clock_count(&self, plan: &Plan, n: NodeId) -> u64 {
        match plan.is_timed() {
            false => self.step,
            true => self.clocks[plan.node_clock(n)],
        }
    }

    /// Starts a row: publishes the inputs (one cell per declared input).
    #[inline]
    pub fn begin_row(&mut self, plan: &Plan, row: Cells<'_>) {
        if plan.is_timed() {
            self.active.fill(false);
            self.active[0] = true;
        }
        // The cells' form is matched once per row, not once per input.
        match row {
            Cells::Values(cells) => {
                for (k, &s) in plan.spec.inputs.iter().enumerate() {
                    match cells.get(k) {
                        Some(Some(v)) => self.write_value(s.into(), v),
                        _ => self.write(s.into(), Sample::NoVal),
                    }
                }
            }
            Cells::Frame { .. } => {
                for (k, &s) in plan.spec.inputs.iter().enumerate() {
                    self.write_input(s.into(), row, k);
                }
            }
        }
    }

    /// Stores input `k` of `row` in `slot`, as it is: a scalar cell's lane
    /// and tag are copied, an object is cloned, an absent cell is NoVal.
    #[inline]
    pub fn write_input(&mut self, slot: Slot, row: Cells<'_>, k: usize) {
        match row {
            Cells::Values(cells) => match cells.get(k) {
                Some(Some(v)) => self.write_value(slot, v),
                _ => self.write(slot, Sample::NoVal),
            },
            Cells::Frame {
                lanes,
                tags,
                objects,
            } => {
                let i = slot.index();
                match tags.get(k).copied().unwrap_or(tag::ABSENT) {
                    tag::ABSENT => self.write(slot, Sample::NoVal),
                    tag::OTHER => {
                        let v = objects.and_then(|(o, base)| o.get(base + k)).cloned();
                        self.tags[i] = tag::OTHER;
                        self.objects.set(i, v);
                    }
                    t => {
                        self.tags[i] = t;
                        self.lanes[i] = lanes[k];
                    }
                }
            }
        }
    }

    /// Stores a present value in a slot, straight into its frame form (no
    /// intermediate `Sample`: this is the per-input cost of every row).
    #[inline(always)]
    pub fn write_value(&mut self, slot: Slot, v: &Value) {
        let i = slot.index();
        match scalar_form(v) {
            Some((t, lane)) => {
                self.tags[i] = t;
                self.lanes[i] = lane;
            }
            None => self.write_object(i, v),
        }
    }

    /// `write_value` of a value with no scalar form, out of line.
    #[inline(never)]
    fn write_object(&mut self, i: usize, v: &Value) {
        self.tags[i] = tag::OTHER;
        self.objects.set(i, Some(v.clone()));
    }

    /// Evaluates one stream: its nodes in postorder, then publishes the root.
    pub fn eval_stream(&mut self, plan: &Plan, s: StreamId) -> Result<(), RuntimeError> {
        let Some(graph) = plan.graph(s) else {
            return Ok(());
        };
        // Off its clock, `eval_node` and `publish_root` write NoVal.
        for id in graph.node_ids() {
            self.eval_node(plan, id)?;
        }
        self.publish_graph_root(plan, s, graph);
        Ok(())
    }

    /// Publishes a stream's root: a root node already wrote the stream's
    /// slot; a reference or constant root is copied into it.
    pub fn publish_root(&mut self, plan: &Plan, s: StreamId) {
        if plan.is_timed() && !self.active[plan.clocks[s.index()] as usize] {
            // Not the stream's step (every path, fused or not, comes here).
            self.write(s.into(), Sample::NoVal);
            return;
        }
        if let Some(graph) = plan.graph(s) {
            self.publish_graph_root(plan, s, graph);
        }
    }

    /// `publish_root` of stream `s`, whose graph is `graph`.
    #[inline]
    fn publish_graph_root(&mut self, plan: &Plan, s: StreamId, graph: &crate::plan::StreamGraph) {
        if plan.is_timed() && !self.active[plan.clocks[s.index()] as usize] {
            self.write(s.into(), Sample::NoVal);
            return;
        }
        if !matches!(graph.root, crate::plan::Operand::Node(_)) {
            if self.tick_reads_held(plan, graph.root_slot) {
                // A periodic stream that is an event stream: its held value.
                let held = self.held(graph.root_slot);
                self.write(s.into(), held);
                return;
            }
            self.copy_slot(graph.root_slot, s.into());
        }
    }

    /// `write(to, raw(from))` without the `Sample` between them: a scalar's
    /// lane and tag are copied, an object is cloned, NoVal holds. (A
    /// stream that copies another, the §9 example's `echoed = lbl`, does
    /// this on every row.)
    #[inline]
    fn copy_slot(&mut self, from: Slot, to: Slot) {
        let (f, i) = (from.index(), to.index());
        match self.tags[f] {
            tag::ABSENT => self.write(to, Sample::NoVal),
            tag::OTHER => match self.objects.get(f).cloned() {
                Some(v) => {
                    self.tags[i] = tag::OTHER;
                    self.objects.set(i, Some(v));
                }
                None => self.write(to, Sample::NoVal),
            },
            // ⊥ keeps the lane, as `write(Deferred)` does.
            tag::DEFERRED => self.tags[i] = tag::DEFERRED,
            // A Bool's lane is made 0 or 1, as `scalar_form` makes it.
            tag::B1 => {
                self.tags[i] = tag::B1;
                self.lanes[i] = u64::from(self.lanes[f] != 0);
            }
            t => {
                self.tags[i] = t;
                self.lanes[i] = self.lanes[f];
            }
        }
    }

    /// Evaluates one node and stores its value. A fault inside an `if` arm is
    /// parked for that `if` to report or discard; the node is NoVal.
    #[inline]
    pub fn eval_node(&mut self, plan: &Plan, id: NodeId) -> Result<(), RuntimeError> {
        if plan.is_timed() && !self.active[plan.node_clock(id)] {
            // Not its stream's step: NoVal, holding its last value.
            self.write(plan.node_slot(id), Sample::NoVal);
            return Ok(());
        }
        // Scalars are computed on their lanes (binary operators, offsets,
        // `default`), inlined into the caller's loop; anything else
        // (objects, NoVal results, a fault) goes the general way, out of
        // line, which computes the same value and reports the fault.
        if let Some((t, lane)) = self.scalar_node(plan, id) {
            let i = plan.node_slot(id).index();
            self.tags[i] = t;
            // ⊥ leaves the lane as `write(Deferred)` does.
            if t != tag::DEFERRED {
                self.lanes[i] = lane;
            }
            return Ok(());
        }
        self.eval_node_general(plan, id)
    }

    /// `eval_node` of a node whose value is not computed on scalar lanes.
    #[inline(never)]
    fn eval_node_general(&mut self, plan: &Plan, id: NodeId) -> Result<(), RuntimeError> {
        let node = plan.node(id);
        let sample = match self.compute(plan, id) {
            Ok(s) => s,
            // A `dynamic` instance's error is never discarded: the instance
            // has no history past a step it could not finish.
            Err(fault) if matches!(node.op, NodeOp::Dynamic(_)) => {
                return Err(fault.at(plan.stream_name(node.stream), self.step));
            }
            Err(fault) => match node.branch {
                Some(b) => {
                    // The first fault of an arm is the one it reports.
                    let at = 2 * b.if_node.0 + u32::from(b.arm);
                    if !self.pending.iter().any(|p| p.at == at) {
                        self.pending.push(Parked { at, fault });
                    }
                    Sample::NoVal
                }
                None => return Err(fault.at(plan.stream_name(node.stream), self.step)),
            },
        };
        self.write(plan.node_slot(id), sample);
        Ok(())
    }

    /// The tag of a slot under the hold rule (its lane holds the held
    /// payload while it is NoVal).
    #[inline]
    fn held_tag(&self, slot: Slot) -> u8 {
        let i = slot.index();
        match self.tags[i] {
            tag::ABSENT => self.held_tags[i],
            t => t,
        }
    }

    /// A node's value in frame form when it is computed from scalar lanes
    /// and is a scalar or ⊥: exactly what `compute` then `write` store.
    /// `None` hands the node to `compute`.
    #[inline]
    fn scalar_node(&self, plan: &Plan, id: NodeId) -> Option<(u8, u64)> {
        let node = plan.node(id);
        let scalar_or_deferred = |t: u8| matches!(t, tag::I64 | tag::F64 | tag::B1 | tag::DEFERRED);
        match node.op {
            NodeOp::Binary(op) => self.binary_lanes(op, node.slots),
            NodeOp::Offset(n) => {
                let count = self.clock_count(plan, id);
                if count < u64::from(n) {
                    return Some((tag::DEFERRED, 0));
                }
                let k = (node.ring_base as u64 + ring_entry(count, u64::from(n))) as usize;
                let t = self.ring_tags[k];
                scalar_or_deferred(t).then(|| (t, self.ring_lanes[k]))
            }
            NodeOp::Call(Builtin::Default) => {
                let [a, d, _] = node.slots;
                let (t, from) = match self.held_tag(a) {
                    tag::DEFERRED => (self.tags[d.index()], d),
                    t => (t, a),
                };
                scalar_or_deferred(t).then(|| (t, self.lanes[from.index()]))
            }
            _ => None,
        }
    }

    /// `a op b` for operands held as Int, Float or Bool scalars, as the
    /// frame form of its value: what `ops::binary_bounded` gives for them
    /// (the same functions for arithmetic, IEEE comparisons for Floats).
    /// `None` for other operands, other operators (Float equality, mixed
    /// Int and Float) and faults, which the general path handles.
    #[inline]
    fn binary_lanes(&self, op: BinOp, [a, b, _]: [Slot; 3]) -> Option<(u8, u64)> {
        let (x, y) = (self.lanes[a.index()], self.lanes[b.index()]);
        let bit = |v: bool| Some((tag::B1, u64::from(v)));
        match (self.held_tag(a), self.held_tag(b)) {
            (tag::I64, tag::I64) => {
                let (x, y) = (x as i64, y as i64);
                match op {
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => {
                        ops::int_arith(op, x, y).ok().map(|v| (tag::I64, v as u64))
                    }
                    BinOp::Eq => bit(x == y),
                    BinOp::Ne => bit(x != y),
                    BinOp::Lt => bit(x < y),
                    BinOp::Le => bit(x <= y),
                    BinOp::Gt => bit(x > y),
                    BinOp::Ge => bit(x >= y),
                    _ => None,
                }
            }
            (tag::F64, tag::F64) => {
                let (x, y) = (f64::from_bits(x), f64::from_bits(y));
                match op {
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => {
                        Some((tag::F64, ops::float_arith(op, x, y).to_bits()))
                    }
                    BinOp::Lt => bit(x < y),
                    BinOp::Le => bit(x <= y),
                    BinOp::Gt => bit(x > y),
                    BinOp::Ge => bit(x >= y),
                    _ => None,
                }
            }
            (tag::B1, tag::B1) => {
                let (x, y) = (x != 0, y != 0);
                match op {
                    BinOp::And => bit(x && y),
                    BinOp::Or => bit(x || y),
                    BinOp::Implies => bit(!x || y),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn compute(&mut self, plan: &Plan, id: NodeId) -> Result<Sample, Fault> {
        let node = plan.node(id);
        let [a0, a1, a2] = node.slots;
        match node.op {
            NodeOp::Binary(op) => {
                let max = self.max_string_bytes;
                pointwise2(self.held(a0), self.held(a1), |x, y| {
                    ops::binary_bounded(op, x, y, max)
                })
            }
            NodeOp::Unary(op) => pointwise1(self.held(a0), |x| ops::unary(op, x)),
            // While the ring fills (`step < n`), the entry of step
            // `step - n` is the initial ⊥.
            NodeOp::Offset(n) if self.clock_count(plan, id) < u64::from(n) => Ok(Sample::Deferred),
            NodeOp::Offset(n) => {
                let count = self.clock_count(plan, id);
                let k = (node.ring_base as u64 + ring_entry(count, u64::from(n))) as usize;
                Ok(decode(
                    self.ring_tags[k],
                    self.ring_lanes[k],
                    self.ring_objects.get(k).and_then(Option::as_ref),
                ))
            }
            NodeOp::If => self.compute_if(id, [a0, a1, a2]),
            NodeOp::Dynamic(k) => dynamic::compute(self, plan, node, k.0 as usize),
            NodeOp::Lambda(k) => {
                let lambda = &plan.lambdas[k.0 as usize];
                // Captured as they are at the step, not held: a body reading
                // an absent input is NoVal (as in the Trustworthiness
                // Checker, whose `List.map` then keeps NoVal elements).
                let captures: Vec<Sample> = (0..node.args.len())
                    .map(|i| self.read(plan, node.slot(i)))
                    .collect();
                let held: Vec<Sample> = (0..node.args.len())
                    .map(|i| self.held(node.slot(i)))
                    .collect();
                let code = func::LambdaCode {
                    spec: plan.spec.clone(),
                    captures: lambda.capture_index.clone(),
                    max_string_bytes: self.max_string_bytes,
                };
                Ok(Sample::Value(Value::Func(std::sync::Arc::new(
                    func::Closure {
                        code: std::sync::Arc::new(code),
                        lambda: lambda.expr,
                        env: vec![Value::Unit; lambda.outer_params as usize].into(),
                        captures: captures.into(),
                        held: held.into(),
                        bound: Vec::new(),
                    },
                ))))
            }
            NodeOp::List
            | NodeOp::Tuple
            | NodeOp::Map
            | NodeOp::Field
            | NodeOp::Method(_)
            | NodeOp::Apply
            | NodeOp::Partial
            | NodeOp::Fix => {
                let held: Vec<Sample> = (0..node.args.len())
                    .map(|i| self.held(node.slot(i)))
                    .collect();
                let values = match func::present(held) {
                    Ok(v) => v,
                    Err(special) => return Ok(special),
                };
                let ast = &plan.spec.ast;
                let v = match (node.op, &ast.expr(node.expr).kind) {
                    (NodeOp::List, _) => {
                        ops::contain("List", &values)?;
                        Value::list(values)
                    }
                    (NodeOp::Tuple, _) => {
                        ops::contain("Tuple", &values)?;
                        Value::tuple(values)
                    }
                    (NodeOp::Map, ExprKind::Map(entries)) => {
                        ops::contain("Map", &values)?;
                        func::map_of(entries.iter().map(|(k, _)| k.clone()), values)
                    }
                    (NodeOp::Field, ExprKind::Field(_, f)) => return func::field(&values[0], f),
                    (NodeOp::Method(m), _) => return func::method(m, &values),
                    (NodeOp::Apply, _) => return func::call(&values),
                    (NodeOp::Partial, _) => func::partial(values)?,
                    (NodeOp::Fix, _) => match &values[0] {
                        Value::Func(f) => {
                            Value::Func(std::sync::Arc::new(func::Fixed { f: f.clone() }))
                        }
                        other => {
                            return Err(Fault {
                                kind: crate::error::ErrorKind::InvalidOperand,
                                op: "fix",
                                detail: Some(other.to_string()),
                            });
                        }
                    },
                    _ => unreachable!("a container node lowers its expression"),
                };
                Ok(Sample::Value(v))
            }
            NodeOp::Window(k) => {
                let w = &plan.windows[k.index()];
                match w.shape.since_window() {
                    Some(_) => self.push_since(w, a0, a1),
                    None => self.push_window(w, a0),
                }
                let time = crate::window::time_at(self.time, self.step);
                match self.at_tick() {
                    // At a tick the rows of its time come after it: the
                    // window it reads is the last T before it, [t - T, t),
                    // so that a row exactly on a tick is seen by T/P ticks.
                    true => w.shape.read_at_tick(&mut self.windows[w.words()], time),
                    false => w.shape.read(&mut self.windows[w.words()], time),
                }
            }
            NodeOp::Call(f) => match f {
                Builtin::Default => Ok(match self.held(a0) {
                    Sample::Deferred => self.read(plan, a1),
                    e => e,
                }),
                Builtin::IsDefined => Ok(Sample::Value(Value::Bool(!matches!(
                    self.held(a0),
                    Sample::Deferred
                )))),
                Builtin::When => {
                    let fired = matches!(self.held(a0), Sample::Value(_));
                    let flag = &mut self.flag[id.index()];
                    *flag |= fired;
                    Ok(Sample::Value(Value::Bool(*flag)))
                }
                Builtin::Init => match self.read(plan, a0) {
                    Sample::NoVal if !self.flag[id.index()] => Ok(self.read(plan, a1)),
                    e => {
                        self.flag[id.index()] |= !e.is_noval();
                        Ok(e)
                    }
                },
                Builtin::Latch => Ok(match self.is_noval(a1) {
                    true => Sample::NoVal,
                    false => self.held(a0),
                }),
                Builtin::Update => {
                    let b = self.held(a1);
                    let fired = matches!(b, Sample::Value(_));
                    let out = if fired || self.flag[id.index()] {
                        b
                    } else {
                        self.held(a0)
                    };
                    self.flag[id.index()] |= fired;
                    Ok(out)
                }
                Builtin::Time => Ok(Sample::Value(Value::Float(
                    self.time.map_or(self.step as f64, |t| t.seconds()),
                ))),
                math if node.args.len() == 1 => {
                    pointwise1(self.held(a0), |x| ops::math(math, &[x]))
                }
                math => pointwise2(self.held(a0), self.held(a1), |x, y| {
                    ops::math(math, &[x, y])
                }),
            },
        }
    }

    /// Takes the fault parked for an `if` arm (`2 * node + arm`), if any.
    fn take_parked(&mut self, at: u32) -> Option<Fault> {
        let i = self.pending.iter().position(|p| p.at == at)?;
        Some(self.pending.swap_remove(i).fault)
    }

    fn compute_if(&mut self, id: NodeId, [c, a, b]: [Slot; 3]) -> Result<Sample, Fault> {
        let then_fault = self.take_parked(2 * id.0);
        let else_fault = self.take_parked(2 * id.0 + 1);
        let c = self.held(c);
        if let Sample::Value(Value::Bool(b)) = c {
            // An error of the selected arm is this `if`'s error; one of the
            // other arm is discarded (docs/language.md, "if").
            if let Some(f) = if b { then_fault } else { else_fault } {
                return Err(f);
            }
        }
        let (a, b) = (self.held(a), self.held(b));
        if c.is_noval() || a.is_noval() || b.is_noval() {
            return Ok(Sample::NoVal);
        }
        match c {
            Sample::Deferred => Ok(Sample::Deferred),
            Sample::Value(Value::Bool(true)) => Ok(a),
            Sample::Value(Value::Bool(false)) => Ok(b),
            Sample::Value(other) => Err(Fault {
                kind: crate::error::ErrorKind::InvalidOperand,
                op: "if",
                detail: Some(format!("condition {other}")),
            }),
            Sample::NoVal => Ok(Sample::NoVal),
        }
    }

    /// Advances full ring `r` (an index into `Plan::offset_nodes`) with its
    /// operand's value of this row, or, if that is NoVal, the entry before.
    /// (The step is not advanced: the caller does it for every ring.)
    #[inline]
    pub fn push_full_ring(&mut self, r: usize) {
        // The ring's length, base and operand are the plan's, kept beside
        // its counters so the barrier does not look up the offset's node.
        let RingInfo {
            n, base, operand, ..
        } = self.rings[r];
        let (n, base, operand) = (u64::from(n), u64::from(base), operand as usize);
        let k = (base + ring_entry(self.step, n)) as usize;
        let old = self.ring_tags[k];
        if !self.push_present(k, operand) {
            // The operand is NoVal: the entry repeats the one before it.
            let prev = (base + ring_entry(self.step + n - 1, n)) as usize;
            self.ring_tags[k] = self.ring_tags[prev];
            self.ring_lanes[k] = self.ring_lanes[prev];
            if self.ring_tags[prev] == tag::OTHER {
                let v = self.ring_objects.get(prev).cloned().flatten();
                self.set_ring_object(k, v);
            }
        }
        self.rings[r].retag(Some(old), self.ring_tags[k]);
    }

    /// The tick barrier: advances every offset ring with this row's values,
    /// moves the rings this completes into the ring table, then moves to
    /// the next step.
    #[inline]
    pub fn end_row(&mut self, plan: &Plan) {
        self.settle_windows(plan);
        if plan.is_timed() {
            return self.end_timed_step(plan);
        }
        let full = plan.offset_nodes.len() - self.filling.len();
        for r in 0..full {
            self.push_full_ring(r);
        }
        self.push_filling_rings(plan);
        self.advance(1);
    }

    /// Enters the operand's value of this step (if it has one) into window
    /// `w`, once: the window's node does so before reading it, and the end
    /// of the row for a window whose node did not run (off its clock).
    fn push_window(&mut self, w: &crate::plan::WindowPlan, operand: Slot) {
        let bits = match self.window_bits(w, operand) {
            Some(bits) => bits,
            None => return,
        };
        let time = crate::window::time_at(self.time, self.step);
        w.shape
            .push(&mut self.windows[w.words()], self.step, time, bits);
    }

    /// Enters the step's samples of φ and ψ (those they have) into since
    /// `w`, once: as `push_window` does for a window's operand.
    fn push_since(&mut self, w: &crate::plan::WindowPlan, phi: Slot, psi: Slot) {
        let (phi, psi) = (self.window_bits(w, phi), self.window_bits(w, psi));
        let time = crate::window::time_at(self.time, self.step);
        w.shape
            .since_push(&mut self.windows[w.words()], self.step, time, phi, psi);
    }

    /// An operand's value this step as bits in the window's element
    /// representation, or `None` where it has none (NoVal or ⊥).
    fn window_bits(&self, w: &crate::plan::WindowPlan, operand: Slot) -> Option<u64> {
        Some(match self.raw(operand) {
            Sample::Value(v) => match (w.shape.elem, v) {
                (Elem::Int, Value::Int(i)) => i as u64,
                (Elem::Float, Value::Float(f)) => f.to_bits(),
                (Elem::Float, Value::Int(i)) => (i as f64).to_bits(),
                (Elem::Bool, Value::Bool(b)) => u64::from(b),
                (Elem::Other, _) => 0,
                (elem, v) => unreachable!("engine bug: a {v:?} in a window of {elem:?}"),
            },
            // NoVal and ⊥ are not values: the window holds present values.
            Sample::NoVal | Sample::Deferred => return None,
        })
    }

    /// Enters every window's value of this row that its node has not.
    fn settle_windows(&mut self, plan: &Plan) {
        for w in &plan.windows {
            let slots = &plan.node(w.node).slots;
            match w.shape.since_window() {
                Some(_) => self.push_since(w, slots[0], slots[1]),
                None => self.push_window(w, slots[0]),
            }
        }
    }

    /// Moves on by `rows` steps whose rings are pushed: the one place the
    /// step advances (`end_row` for canonical rows; `exec::Run` for rows a
    /// kernel ran, which pushes its rings itself).
    #[inline]
    pub fn advance(&mut self, rows: u64) {
        self.step += rows;
    }

    /// The tick barrier of a whole-row kernel's tail (`fusion::lower::
    /// WholeSplit`): its full rings `tail_rings` (the kernel pushed the
    /// others) and every ring still filling, all of which are the tail's
    /// (the kernel runs once its own rings are full). The caller advances
    /// the step.
    pub fn end_tail_row(&mut self, plan: &Plan, tail_rings: &[usize]) {
        self.settle_windows(plan);
        let full = plan.offset_nodes.len() - self.filling.len();
        for &r in tail_rings.iter().take_while(|&&r| r < full) {
            self.push_full_ring(r);
        }
        self.push_filling_rings(plan);
    }

    /// Pushes this row's value (or the entry before) onto every ring still
    /// filling, and moves those it completes into the ring table.
    #[inline]
    fn push_filling_rings(&mut self, plan: &Plan) {
        // Once every ring is full (or a spec has none) there is nothing to
        // do: the common row, kept to one test in the caller.
        if !self.filling.is_empty() {
            self.push_filling_rings_now(plan);
        }
    }

    /// `push_filling_rings` while some ring is filling.
    #[inline(never)]
    fn push_filling_rings_now(&mut self, plan: &Plan) {
        let full = plan.offset_nodes.len() - self.filling.len();
        let filling_rings = self.rings[full..].iter_mut();
        for ((f, &id), info) in self
            .filling
            .iter_mut()
            .zip(&plan.offset_nodes[full..])
            .zip(filling_rings)
        {
            let operand = plan.node(id).slots[0].index();
            let (t, lane, object) = if self.tags[operand] != tag::ABSENT {
                let object = match self.tags[operand] {
                    tag::OTHER => self.objects.get(operand).cloned(),
                    _ => None,
                };
                (self.tags[operand], self.lanes[operand], object)
            } else {
                match f.tags.len() {
                    0 => (tag::DEFERRED, 0, None),
                    len => f.entry(len - 1),
                }
            };
            info.retag(None, t);
            f.push(t, lane, object);
        }
        while self
            .filling
            .front()
            .is_some_and(|f| f.tags.len() == f.n as usize)
        {
            let f = self.filling.pop_front().expect("checked above");
            assert_eq!(
                f.base as usize,
                self.ring_tags.len(),
                "engine bug: rings fill in layout order"
            );
            self.ring_tags.extend_from_slice(&f.tags);
            self.ring_lanes.extend_from_slice(&f.lanes);
            if !f.objects.is_empty() {
                let at = f.base as usize;
                self.ring_objects.resize(at, None);
                self.ring_objects.extend(f.objects);
                self.ring_objects.resize(at + f.n as usize, None);
            }
            if self.filling.is_empty() {
                // Every ring is full: the table has its final length and
                // never grows or moves again, so what its growth
                // over-allocated is given back (a keyed monitor keeps one
                // table per key). No frame points at the table between rows.
                self.filling = std::collections::VecDeque::new();
                self.ring_tags.shrink_to_fit();
                self.ring_lanes.shrink_to_fit();
                self.ring_objects.shrink_to_fit();
            }
        }
    }

    /// Writes slot `operand`'s value this step into ring table entry `k`;
    /// `false` (and nothing written) when it is NoVal.
    fn push_present(&mut self, k: usize, operand: usize) -> bool {
        let t = self.tags[operand];
        if t == tag::ABSENT {
            return false;
        }
        self.ring_tags[k] = t;
        self.ring_lanes[k] = self.lanes[operand];
        if t == tag::OTHER {
            let v = self.objects.get(operand).cloned();
            self.set_ring_object(k, v);
        }
        true
    }

    /// The tick barrier of a timed plan: only the rings of the clocks that
    /// ran advance, each at its own count (every ring is in the table).
    fn end_timed_step(&mut self, plan: &Plan) {
        for (r, &id) in plan.offset_nodes.iter().enumerate() {
            let c = plan.node_clock(id);
            if !self.active[c] {
                continue;
            }
            let node = plan.node(id);
            let NodeOp::Offset(n) = node.op else { continue };
            let (n, base, count) = (n as u64, node.ring_base as u64, self.clocks[c]);
            let k = (base + ring_entry(count, n)) as usize;
            let operand = node.slots[0].index();
            let old = self.ring_tags[k];
            if !self.push_present(k, operand) {
                // NoVal: the entry is the operand's held value (⊥ if it
                // never had one). On one clock that is the entry before it;
                // across clocks (a periodic stream's offset of an event
                // stream) the operand may have changed between two of this
                // ring's steps, and the held value is what it had by now.
                let held = self.held_tags[operand];
                if held == tag::ABSENT {
                    self.ring_tags[k] = tag::DEFERRED;
                    self.ring_lanes[k] = 0;
                } else {
                    self.ring_tags[k] = held;
                    self.ring_lanes[k] = self.lanes[operand];
                    if held == tag::OTHER {
                        let v = self.objects.get(operand).cloned();
                        self.set_ring_object(k, v);
                    }
                }
            }
            self.rings[r].retag(Some(old), self.ring_tags[k]);
        }
        for (count, active) in self.clocks.iter_mut().zip(&self.active) {
            *count += u64::from(*active);
        }
        self.advance(1);
    }

    /// Stores the object of ring table entry `k` (tagged `OTHER`),
    /// allocating the objects to the table's length on first use.
    fn set_ring_object(&mut self, k: usize, v: Option<Value>) {
        if self.ring_objects.len() < self.ring_tags.len() {
            self.ring_objects.resize(self.ring_tags.len(), None);
        }
        self.ring_objects[k] = v;
    }

    /// Evaluates one whole row on the canonical tier.
    pub fn run_row(&mut self, plan: &Plan, row: &[Option<Value>]) -> Result<(), RuntimeError> {
        self.begin_row(plan, Cells::Values(row));
        for &s in &plan.schedule {
            self.eval_stream(plan, s)?;
        }
        self.end_row(plan);
        Ok(())
    }
}

/// Every ring of `plan` at its full length, every entry ⊥.
pub(crate) fn full_of_bottom(plan: &Plan) -> Vec<Vec<Sample>> {
    plan.offset_nodes
        .iter()
        .map(|&id| match plan.node(id).op {
            NodeOp::Offset(n) => vec![Sample::Deferred; n as usize],
            _ => unreachable!("offset_nodes holds offsets"),
        })
        .collect()
}

/// Snapshots (`crate::snapshot`): the offset history as plain entries, and
/// back. Slots need nothing here: `raw`, `held` and `write` read and rebuild
/// them.
impl NodeState {
    /// The entries of ring `r` (in layout order, as `Plan::offset_nodes`),
    /// lane by lane: `min(step, n)` of them, since a ring gains one entry
    /// per step until it is full. Entries are never NoVal.
    ///
    /// A state whose rings were filled with ⊥ ahead of time (`fill_rings`)
    /// has full rings in its first `n` steps; only the entries of steps
    /// seen are history (lanes `0..step`, in step order as a ring filling
    /// has them), so they are all it shows. (A plan with periodic streams
    /// has full rings from the start, on clocks of their own: all shown.)
    pub(crate) fn ring_entries(&self, r: usize) -> Vec<Sample> {
        (0..self.ring_entry_count(r))
            .map(|k| self.ring_entry(r, k))
            .collect()
    }

    /// How many entries `ring_entries(r)` shows, without making them.
    pub(crate) fn ring_entry_count(&self, r: usize) -> usize {
        let full = self.rings.len() - self.filling.len();
        if r < full {
            let info = &self.rings[r];
            match self.clocks.is_empty() {
                true => (info.n as u64).min(self.step) as usize,
                false => info.n as usize,
            }
        } else {
            self.filling[r - full].tags.len()
        }
    }

    /// Entry `k` of `ring_entries(r)`, made alone: a snapshot written key by
    /// key reads the entries one at a time instead of collecting each ring.
    pub(crate) fn ring_entry(&self, r: usize, k: usize) -> Sample {
        let (tag, lane, object) = self.ring_entry_parts(r, k);
        decode(tag, lane, object)
    }

    /// Entry `k` of `ring_entries(r)` in frame form (tag, lane, and the
    /// object of an entry tagged `OTHER`), which `decode` makes a sample of.
    pub(crate) fn ring_entry_parts(&self, r: usize, k: usize) -> (u8, u64, Option<&Value>) {
        let full = self.rings.len() - self.filling.len();
        if r < full {
            let at = self.rings[r].base as usize + k;
            let object = self.ring_objects.get(at).and_then(Option::as_ref);
            (self.ring_tags[at], self.ring_lanes[at], object)
        } else {
            let f = &self.filling[r - full];
            let object = match f.tags[k] {
                tag::OTHER => f.objects.get(k).and_then(Option::as_ref),
                _ => None,
            };
            (f.tags[k], f.lanes[k], object)
        }
    }

    /// Makes every ring still filling full, its missing entries ⊥ (at the
    /// lanes of the steps not seen yet, which the barrier overwrites as
    /// they come): as far as any row can tell the same history, since the
    /// entry an offset reads before its ring is full is ⊥ either way, but in
    /// the ring table, so that the state packs (a keyed monitor's keys are
    /// packed from their first row). `ring_entries` still shows only the
    /// entries of the steps seen. Only for a plan without periodic streams
    /// (whose rings are full from the start anyway).
    pub(crate) fn fill_rings(&mut self) {
        if self.packs() {
            return;
        }
        let rings = (0..self.rings.len())
            .map(|r| {
                let mut entries = self.ring_entries(r);
                entries.resize(self.rings[r].n as usize, Sample::Deferred);
                entries
            })
            .collect();
        self.clear_rings();
        self.set_rings(rings);
    }

    /// Empties the offset history, for `set_rings` to replace it.
    pub(crate) fn clear_rings(&mut self) {
        self.ring_tags.clear();
        self.ring_lanes.clear();
        self.ring_objects.clear();
        self.filling.clear();
    }

    /// Replaces the offset history of a state at step `self.step` that has
    /// none yet (a fresh one) by `rings`, one entry list per ring in layout
    /// order, as `ring_entries` gives them. The caller has checked every
    /// length (ring `r` has `min(step, n)` entries) and that no entry is
    /// NoVal; the per-ring counts promotion reads are recomputed here.
    pub(crate) fn set_rings(&mut self, rings: Vec<Vec<Sample>>) {
        assert!(
            rings.len() == self.rings.len() && self.ring_tags.is_empty(),
            "engine bug: rings restored into a state that has history, or of another plan"
        );
        let form = |s: Sample| match s {
            Sample::Deferred => (tag::DEFERRED, 0, None),
            Sample::Value(v) => match scalar_form(&v) {
                Some((t, lane)) => (t, lane, None),
                None => (tag::OTHER, 0, Some(v)),
            },
            Sample::NoVal => panic!("engine bug: a NoVal ring entry to restore"),
        };
        self.filling.clear();
        for (info, entries) in self.rings.iter_mut().zip(rings) {
            info.bad = 0;
            let mut f = FillingRing {
                n: info.n,
                base: info.base,
                tags: Vec::new(),
                lanes: Vec::new(),
                objects: Vec::new(),
            };
            for e in entries {
                let (t, lane, object) = form(e);
                info.retag(None, t);
                f.push(t, lane, object);
            }
            if f.tags.len() < f.n as usize {
                self.filling.push_back(f);
                continue;
            }
            assert!(
                self.filling.is_empty() && f.base as usize == self.ring_tags.len(),
                "engine bug: restored rings are full in layout order"
            );
            self.ring_tags.extend_from_slice(&f.tags);
            self.ring_lanes.extend_from_slice(&f.lanes);
            if !f.objects.is_empty() {
                let at = f.base as usize;
                self.ring_objects.resize(at, None);
                self.ring_objects.extend(f.objects);
                self.ring_objects.resize(at + f.n as usize, None);
            }
        }
    }
}

/// Applies a pointwise operator to held operands: NoVal if any is NoVal,
/// else ⊥ if any is ⊥, else the operator on the values.
#[inline]
fn pointwise2(
    a: Sample,
    b: Sample,
    f: impl FnOnce(&Value, &Value) -> Result<Value, Fault>,
) -> Result<Sample, Fault> {
    match (a, b) {
        (Sample::Value(x), Sample::Value(y)) => f(&x, &y).map(Sample::Value),
        (Sample::NoVal, _) | (_, Sample::NoVal) => Ok(Sample::NoVal),
        _ => Ok(Sample::Deferred),
    }
}

#[inline]
fn pointwise1(a: Sample, f: impl FnOnce(&Value) -> Result<Value, Fault>) -> Result<Sample, Fault> {
    match a {
        Sample::Value(x) => f(&x).map(Sample::Value),
        Sample::NoVal => Ok(Sample::NoVal),
        Sample::Deferred => Ok(Sample::Deferred),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::parse_and_check;
    use std::sync::Arc;

    /// `ring_entry` is `count % n` for every length, powers of two (taken
    /// by a mask) or not, at any count.
    #[test]
    fn ring_entries_are_the_step_modulo_the_length() {
        for n in 1..=70u64 {
            for count in (0..300).chain([u64::MAX - 300..=u64::MAX].into_iter().flatten()) {
                assert_eq!(ring_entry(count, n), count % n, "{count} % {n}");
            }
        }
    }

    fn plan(src: &str) -> Plan {
        Plan::new(Arc::new(parse_and_check("t", src).expect("valid spec")))
    }

    /// `copy_slot` leaves the state exactly as `write(to, raw(from))` does,
    /// for every kind of sample in `from` and every prior state of `to`
    /// (a value, NoVal holding a value, ⊥, never written).
    #[test]
    fn copying_a_slot_is_writing_what_it_reads() {
        let p = plan("in a: Str\nin b: Str\nout c: Str\nc = a");
        let (from, to): (Slot, Slot) = (p.spec.inputs[0].into(), p.spec.inputs[1].into());
        let samples = || {
            [
                Sample::Value(Value::Int(-7)),
                Sample::Value(Value::Float(f64::from_bits(0x7ff8_0000_0000_0001))),
                Sample::Value(Value::Bool(true)),
                Sample::Value(Value::Bool(false)),
                Sample::Value(Value::Str("s".into())),
                Sample::Deferred,
                Sample::NoVal,
            ]
        };
        let mut cases = 0;
        for prior in samples() {
            for sample in samples() {
                for hold in [false, true] {
                    let mut a = NodeState::new(&p);
                    a.write(to, prior.clone());
                    a.write(from, sample.clone());
                    if hold {
                        // `from` NoVal after a value: its lane and held tag
                        // stay, and NoVal is what is read.
                        a.write(from, Sample::NoVal);
                    }
                    let mut b = a.clone();
                    a.copy_slot(from, to);
                    let v = b.raw(from);
                    b.write(to, v);
                    assert_eq!(a, b, "{prior:?} then {sample:?} (held: {hold})");
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 98);
    }

    /// A Bool lane that is not 0 or 1 (as native code may leave one) is
    /// copied as the Bool it decodes to.
    #[test]
    fn a_copied_bool_lane_is_zero_or_one() {
        let p = plan("in a: Bool\nin b: Bool\nout c: Bool\nc = a");
        let (from, to): (Slot, Slot) = (p.spec.inputs[0].into(), p.spec.inputs[1].into());
        let mut a = NodeState::new(&p);
        a.tags[from.index()] = tag::B1;
        a.lanes[from.index()] = 0x100;
        a.copy_slot(from, to);
        assert_eq!(a.frame_cell(to), (tag::B1, 1));
    }

    #[test]
    fn per_run_memory_is_slots_and_history_only() {
        // A keyed monitor keeps one of these per key: objects only up to the
        // one slot holding a Str, no table of `if`-arm faults, and no
        // filling buffers or growth slack once every ring is full.
        let p = plan(
            "in host: Str\nin x: Int\nout y: Int\nout z: Int\n\
             y = if x > 0 then 10 / x else 0\nz = default(x[3], 0)",
        );
        let mut st = NodeState::new(&p);
        for i in 0..5 {
            st.run_row(&p, &[Some(Value::Str("a".into())), Some(Value::Int(i))])
                .unwrap();
        }
        let host = p.spec.inputs[0].0 as usize;
        assert_eq!(st.objects.allocated(), host + 1);
        assert!(
            st.pending.is_empty(),
            "a parked fault (10 / 0 at step 0) is taken by its `if`"
        );
        assert_eq!(st.filling.capacity(), 0);
        assert_eq!((st.ring_tags.capacity(), st.ring_lanes.capacity()), (3, 3));
    }

    #[test]
    fn rings_move_into_the_table_in_layout_order_once_full() {
        // Declared longest first: the layout puts the shortest first.
        let p = plan("in x: Int\nout y: Int\ny = default(x[5], 0) + default(x[2], 0)");
        let bases: Vec<(u32, u32)> = p
            .offset_nodes
            .iter()
            .map(|&n| match p.node(n).op {
                NodeOp::Offset(len) => (p.node(n).ring_base, len),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(bases, [(0, 2), (2, 5)]);
        let mut st = NodeState::new(&p);
        let mut table_len = Vec::new();
        for i in 0..6 {
            st.run_row(&p, &[Some(Value::Int(i))]).unwrap();
            table_len.push(st.ring_tags.len());
        }
        assert_eq!(table_len, [0, 2, 2, 2, 7, 7]);
        assert!(st.ring_promotable(0, 2, tag::I64));
        assert!(st.ring_promotable(2, 5, tag::I64));
        assert!(!st.ring_promotable(2, 5, tag::F64));
    }

    #[test]
    fn promotion_counts_entries_that_are_not_of_the_ring_type() {
        let p = plan("in x: Int\nout y: Int\ny = default(x[3], 0)");
        let mut st = NodeState::new(&p);
        // An absent first value leaves the initial ⊥ in the entry of step 0.
        st.run_row(&p, &[None]).unwrap();
        for i in 1..3 {
            st.run_row(&p, &[Some(Value::Int(i))]).unwrap();
        }
        assert_eq!(
            st.full_ring_tags(0, 3),
            Some(&[tag::DEFERRED, tag::I64, tag::I64][..])
        );
        assert!(!st.ring_promotable(0, 3, tag::I64));
        // Step 3 overwrites the entry of step 0.
        st.run_row(&p, &[Some(Value::Int(3))]).unwrap();
        assert!(st.ring_promotable(0, 3, tag::I64));
    }

    #[test]
    fn filling_rings_hold_only_the_steps_seen() {
        let p = plan("in s: Str\nout y: Str\ny = default(s[1000000], \"-\")");
        let mut st = NodeState::new(&p);
        let before = st.history_bytes();
        for i in 0..3 {
            st.run_row(&p, &[Some(Value::Str(format!("v{i}").into()))])
                .unwrap();
        }
        assert!(st.history_bytes() - before < 512, "{}", st.history_bytes());
        assert_eq!(st.filling[0].entry(2).2, Some(Value::Str("v2".into())));
        // Absent: the entry repeats the one before it, object included.
        st.run_row(&p, &[None]).unwrap();
        assert_eq!(st.filling[0].entry(3).2, Some(Value::Str("v2".into())));
    }
}
