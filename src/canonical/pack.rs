//! Packed run states: what of a run survives from one row to the next, in one block of bytes.
//!
//! A keyed monitor keeps a run per key and, on most rows, switches to another key's. A whole
//! `NodeState` per key is about a kilobyte in a dozen allocations, and a row of another key
//! then fetches each of them from memory. But most of a `NodeState` does not outlive its row:
//! every node is evaluated at every step before anything reads it, and the hold rule
//! (docs/language.md, "The hold rule") needs few cells across rows — the last value of every stream, of every `latch`
//! and `init` node (their result can be NoVal after a value; so can `default`'s, which reads
//! its fallback unheld), and of every node inside an `if` arm (an error there makes it NoVal
//! for the step). Any other node is NoVal only while
//! one of its held operands has never had a value, so its held value is then "never had one"
//! too. Constants are the plan's.
//!
//! So a packed state holds only (in one block of bytes): the step; tag, held tag and lane of each *persistent* slot
//! (the streams and those cells); the ring table (lanes and tags) and each ring's promotion
//! count; the builtin flags; and a few bytes for the owner (`exec::Run` keeps its promotion
//! bits there). Unpacking into a working state of the same plan writes those back and marks
//! every other node slot as never having had a value, which is the state a run in the same
//! history would have as far as any later row can tell. Values without a scalar form (Str,
//! Unit) have their objects kept beside by the owner (`objects_to_keep`).
//!
//! A timed plan's state also packs its clocks' counts, and leaves room after them for the
//! owner's tick words (a keyed monitor's per-key scheduler, `PackLayout::ticks`), which packing
//! and unpacking never touch.
//!
//! Only a state whose rings are all full packs (a ring still filling has a buffer of its
//! own); the working state has a full ring table from the start (`NodeState::with_full_rings`).

use super::NodeState;
use crate::lang::ast::Builtin;
use crate::lang::check::ScalarSignature;
use crate::plan::{NodeOp, Plan, Slot};
use crate::value::Value;
use scalar_ir::frame::tag;

/// Where each part of a packed state lies in its bytes, for one plan.
#[derive(Clone, Debug)]
pub struct PackLayout {
    /// The persistent slots: every stream's, then the cells'.
    persist: Box<[u32]>,
    /// The node slots (after the streams', before the constants'): on
    /// unpack all are reset to "never had a value", then the cells among
    /// them are written back (one reset of the whole range is cheaper than
    /// one per stretch between cells).
    nodes: std::ops::Range<usize>,
    /// The persistent slots that may hold a value without a scalar form
    /// (their signature is none), and whether any ring may: only these can
    /// have objects to keep.
    objects: Box<[u32]>,
    ring_objects: bool,
    /// The nodes with a builtin flag (`when`, `init`, `update`).
    flags: Box<[u32]>,
    /// The ring table's length (lanes) and the number of rings.
    ring_len: usize,
    rings: usize,
    /// Bytes reserved for the owner.
    extra: usize,
    /// The streams: the first persistent slots, which are also the first
    /// slots of the arena (so their parts copy as slices).
    streams: usize,
    /// Byte offsets, after the step (word 0): the owner's bytes (first, so
    /// that a keyed row reads its promotion bit on the line of the step),
    /// lanes of the persistent slots and of the ring table from the next
    /// word (8 bytes each, in native byte order, as a kernel running on the
    /// block reads and writes them), then tags, held tags, ring tags,
    /// flags, and the rings' counts (4 bytes each).
    lanes_at: usize,
    ring_lanes_at: usize,
    tags_at: usize,
    held_at: usize,
    ring_tags_at: usize,
    flags_at: usize,
    extra_at: usize,
    counts_at: usize,
    /// The windows' words (`NodeState::windows`), whole, from this byte.
    windows_at: usize,
    window_words: usize,
    /// A timed plan's clock counts (`NodeState::clocks`), from this byte
    /// (none for a plan without periods).
    clocks_at: usize,
    clocks: usize,
    /// A timed plan's tick words, after the clocks: the owner's, which
    /// neither packing nor unpacking touches (a keyed monitor keeps each
    /// key's scheduler there, `PackLayout::ticks`).
    ticks_at: usize,
    ticks: usize,
    len: usize,
}

impl PackLayout {
    /// The layout of `plan`'s states, with `extra` bytes for the owner.
    pub fn new(plan: &Plan, extra: usize) -> PackLayout {
        let streams = plan.spec.streams.len() as u32;
        let mut persist: Vec<u32> = (0..streams).collect();
        // The signature of each persistent slot, beside it.
        let mut sigs: Vec<ScalarSignature> = plan.spec.streams.iter().map(|s| s.sig).collect();
        let mut flags = Vec::new();
        for (i, node) in plan.nodes.iter().enumerate() {
            let id = crate::plan::NodeId(i as u32);
            if matches!(
                node.op,
                NodeOp::Call(Builtin::When | Builtin::Init | Builtin::Update)
            ) {
                flags.push(i as u32);
            }
            let slot = plan.node_slot(id).0;
            if slot < streams {
                // A stream's root node: its slot is the stream's.
                continue;
            }
            // `default` reads its fallback unheld (when its first operand
            // is ⊥), so it too can be NoVal after a value; so can a
            // container builtin or a call (a function's body reads the
            // streams it captured as they are, and a list may hold NoVal
            // elements), a field access and a `dynamic`.
            let cell = node.branch.is_some()
                || matches!(
                    node.op,
                    NodeOp::Call(Builtin::Latch | Builtin::Init | Builtin::Default)
                        | NodeOp::Method(_)
                        | NodeOp::Apply
                        | NodeOp::Field
                        | NodeOp::Dynamic(_)
                );
            if cell {
                persist.push(slot);
                sigs.push(node.sig);
            }
        }
        // The operand of an offset of a compound expression is persistent
        // too: a whole-row kernel running on packed runs reloads each ring
        // operand from its slot at the tick barrier (see `fusion::lower`),
        // so the slot must be in the block. Its value outlives the row as
        // the ring's newest entry anyway.
        for &id in &plan.offset_nodes {
            if let Some(crate::plan::Operand::Node(m)) = plan.node(id).args.first() {
                let slot = plan.node_slot(*m).0;
                if slot >= streams && !persist.contains(&slot) {
                    persist.push(slot);
                    sigs.push(plan.node(*m).sig);
                }
            }
        }
        let ring_len = plan.ring_len as usize;
        let rings = plan.offset_nodes.len();
        let p = persist.len();
        let objects: Vec<u32> = persist
            .iter()
            .zip(&sigs)
            .filter(|(_, sig)| **sig == ScalarSignature::NotScalar)
            .map(|(&slot, _)| slot)
            .collect();
        let ring_objects = plan
            .offset_nodes
            .iter()
            .any(|&id| plan.node(id).sig == ScalarSignature::NotScalar || plan.node(id).rebound);
        let nodes = streams as usize..streams as usize + plan.nodes.len();
        let extra_at = 8;
        let lanes_at = (extra_at + extra).next_multiple_of(8);
        let ring_lanes_at = lanes_at + 8 * p;
        let tags_at = ring_lanes_at + 8 * ring_len;
        let held_at = tags_at + p;
        let ring_tags_at = held_at + p;
        let flags_at = ring_tags_at + ring_len;
        let counts_at = flags_at + flags.len();
        // Whole words, so that blocks kept in a buffer of words stay aligned
        // (a kernel's frame points at their lanes).
        let windows_at = (counts_at + 4 * rings).next_multiple_of(8);
        let clocks_at = windows_at + 8 * plan.window_words;
        let (clocks, ticks) = match plan.is_timed() {
            // Every clock's count; a present flag and a time for every
            // period's next tick and for the last row's time.
            true => (plan.periods.len() + 1, 2 * (plan.periods.len() + 1)),
            false => (0, 0),
        };
        let ticks_at = clocks_at + 8 * clocks;
        let len = ticks_at + 8 * ticks;
        PackLayout {
            persist: persist.into(),
            nodes,
            objects: objects.into(),
            ring_objects,
            flags: flags.into(),
            ring_len,
            rings,
            extra,
            streams: streams as usize,
            lanes_at,
            ring_lanes_at,
            tags_at,
            held_at,
            ring_tags_at,
            flags_at,
            extra_at,
            counts_at,
            windows_at,
            window_words: plan.window_words,
            clocks_at,
            clocks,
            ticks_at,
            ticks,
            len,
        }
    }

    /// The bytes a packed state takes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Where each persistent slot lies among a packed state's lanes and
    /// tags, by arena slot (`None`: not persistent), for an arena of
    /// `slots` slots.
    pub fn persist_index(&self, slots: usize) -> Vec<Option<u32>> {
        let mut index = vec![None; slots];
        for (j, &slot) in self.persist.iter().enumerate() {
            index[slot as usize] = Some(j as u32);
        }
        index
    }

    /// The number of persistent slots.
    pub fn persist_len(&self) -> usize {
        self.persist.len()
    }

    /// Where a kernel's frame lies in a packed state: the persistent
    /// slots' lanes (from word `lanes`, in `persist_index` order) and tags (from
    /// byte `tags`), the ring table's lanes (from word `ring`, in the
    /// table's order), and the step (word 0).
    pub fn frame_parts(&self) -> FrameParts {
        FrameParts {
            lanes_word: self.lanes_at / 8,
            ring_word: self.ring_lanes_at / 8,
            tags_byte: self.tags_at,
            held_byte: self.held_at,
            ring_len: self.ring_len,
            extra_at: self.extra_at,
            ring_tags_at: self.ring_tags_at,
            counts_at: self.counts_at,
            flags: self.flags_at..self.flags_at + self.flags.len(),
            windows_word: self.windows_at / 8,
            window_words: self.window_words,
        }
    }

    /// Whether a packed state may have objects to keep beside its bytes.
    pub fn may_keep_objects(&self) -> bool {
        !self.objects.is_empty() || self.ring_objects
    }

    /// Stores owner byte `i` (`i < extra`).
    pub fn put_extra(&self, bytes: &mut [u8], i: usize, b: u8) {
        assert!(
            i < self.extra,
            "engine bug: extra byte {i} of {}",
            self.extra
        );
        bytes[self.extra_at + i] = b;
    }

    /// Owner byte `i`.
    pub fn get_extra(&self, bytes: &[u8], i: usize) -> u8 {
        assert!(
            i < self.extra,
            "engine bug: extra byte {i} of {}",
            self.extra
        );
        bytes[self.extra_at + i]
    }

    /// The raw value of stream slot `slot` in a packed state without
    /// objects: the whole-row kernel, after which this is read, runs only on
    /// plans whose streams are all scalar, but for a keyed monitor's key
    /// input, whose value (the key) the caller has.
    #[inline]
    pub fn raw_stream(&self, words: &[u64], slot: Slot) -> crate::value::Sample {
        use zerocopy::IntoBytes as _;
        let i = slot.index();
        debug_assert!(i < self.streams, "engine bug: slot {i} is not a stream");
        let t = words.as_bytes()[self.tags_at + i];
        debug_assert_ne!(t, tag::OTHER, "engine bug: an object in a packed view");
        super::decode(t, words[self.lanes_at / 8 + i], None)
    }

    /// Writes stream slot `slot`'s value (tag and lane) in a packed state
    /// (a keyed monitor's key input, which its kernel may leave out).
    pub fn set_stream(&self, words: &mut [u64], slot: Slot, t: u8, lane: u64) {
        use zerocopy::IntoBytes as _;
        let i = slot.index();
        assert!(i < self.streams, "engine bug: slot {i} is not a stream");
        words[self.lanes_at / 8 + i] = lane;
        words.as_mut_bytes()[self.tags_at + i] = t;
    }

    /// The step of a packed state.
    pub fn step(&self, bytes: &[u8]) -> u64 {
        lane(bytes, 0)
    }

    /// The input steps of a packed state: the count of its first clock
    /// (a timed plan's), else its step.
    pub fn input_steps(&self, bytes: &[u8]) -> u64 {
        match self.clocks {
            0 => lane(bytes, 0),
            _ => lane(bytes, self.clocks_at),
        }
    }

    /// The owner's tick words of a packed state (a timed plan's: two per
    /// period and two more; none otherwise), which packing and unpacking
    /// leave as they are.
    pub fn ticks<'w>(&self, words: &'w [u64]) -> &'w [u64] {
        &words[self.ticks_at / 8..self.ticks_at / 8 + self.ticks]
    }

    /// The owner's tick words, to write (see `ticks`).
    pub fn ticks_mut<'w>(&self, words: &'w mut [u64]) -> &'w mut [u64] {
        &mut words[self.ticks_at / 8..self.ticks_at / 8 + self.ticks]
    }
}

/// Where a kernel's frame lies in a packed state (`PackLayout::frame_parts`).
#[derive(Clone, Debug)]
pub struct FrameParts {
    /// The word of the first persistent slot's lane.
    pub lanes_word: usize,
    /// The word of the ring table's first lane.
    pub ring_word: usize,
    /// The byte of the first persistent slot's tag, and of its held tag.
    pub tags_byte: usize,
    pub held_byte: usize,
    /// The ring table's lanes.
    pub ring_len: usize,
    /// The byte of the owner's first byte.
    pub extra_at: usize,
    /// The byte of the first ring entry's tag, of the first ring's count
    /// (4 bytes each), and the builtin flags' bytes.
    pub ring_tags_at: usize,
    pub counts_at: usize,
    pub flags: std::ops::Range<usize>,
    /// The word of the first window word, and how many there are.
    pub windows_word: usize,
    pub window_words: usize,
}

/// The u64 at byte `at`.
fn lane(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(b)
}

fn put_lane(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

impl NodeState {
    /// A fresh state whose ring table already has its full length (every
    /// entry ⊥): the working state packed states are unpacked into.
    pub fn with_full_rings(plan: &Plan) -> NodeState {
        let mut st = NodeState::new(plan);
        // A timed plan's state has its full table from the start.
        if !plan.is_timed() {
            st.set_rings(super::full_of_bottom(plan));
        }
        st
    }

    /// Whether every ring is full, so that the state packs.
    pub fn packs(&self) -> bool {
        self.filling.is_empty()
    }

    /// Packs the state into `bytes` (of `l.len()`; the owner's bytes are
    /// left as they are).
    pub fn pack(&self, l: &PackLayout, bytes: &mut [u8]) {
        debug_assert!(
            self.packs(),
            "engine bug: packing a state whose rings are filling"
        );
        let (p, s) = (l.persist.len(), l.streams);
        put_lane(bytes, 0, self.step);
        let (lanes, rest) = bytes[l.lanes_at..].split_at_mut(8 * p);
        for (dst, src) in lanes.chunks_exact_mut(8).zip(&self.lanes[..s]) {
            dst.copy_from_slice(&src.to_ne_bytes());
        }
        for (j, &slot) in l.persist.iter().enumerate().take(p).skip(s) {
            put_lane(lanes, 8 * j, self.lanes[slot as usize]);
        }
        for (dst, src) in rest[..8 * l.ring_len]
            .chunks_exact_mut(8)
            .zip(self.ring_lanes.iter())
        {
            dst.copy_from_slice(&src.to_ne_bytes());
        }
        bytes[l.tags_at..l.tags_at + s].copy_from_slice(&self.tags[..s]);
        bytes[l.held_at..l.held_at + s].copy_from_slice(&self.held_tags[..s]);
        for (j, &slot) in l.persist.iter().enumerate().take(p).skip(s) {
            bytes[l.tags_at + j] = self.tags[slot as usize];
            bytes[l.held_at + j] = self.held_tags[slot as usize];
        }
        bytes[l.ring_tags_at..l.ring_tags_at + l.ring_len].copy_from_slice(&self.ring_tags);
        for (f, &n) in l.flags.iter().enumerate() {
            bytes[l.flags_at + f] = u8::from(self.flag[n as usize]);
        }
        for (r, info) in self.rings.iter().enumerate() {
            let at = l.counts_at + 4 * r;
            bytes[at..at + 4].copy_from_slice(&info.bad.to_ne_bytes());
        }
        let windows = &mut bytes[l.windows_at..l.windows_at + 8 * l.window_words];
        for (dst, src) in windows.chunks_exact_mut(8).zip(&self.windows) {
            dst.copy_from_slice(&src.to_ne_bytes());
        }
        let clocks = &mut bytes[l.clocks_at..l.clocks_at + 8 * l.clocks];
        for (dst, src) in clocks.chunks_exact_mut(8).zip(&self.clocks) {
            dst.copy_from_slice(&src.to_ne_bytes());
        }
    }

    /// Makes this working state (of the same plan, with full rings) the
    /// packed one: its persistent slots, rings, counts and flags, every
    /// other node slot never having had a value, no `if`-arm fault parked,
    /// and no ring objects (the owner puts back the objects it kept).
    pub fn unpack(&mut self, l: &PackLayout, bytes: &[u8]) {
        debug_assert_eq!(
            self.ring_lanes.len(),
            l.ring_len,
            "engine bug: a short working table"
        );
        let (p, s) = (l.persist.len(), l.streams);
        self.step = lane(bytes, 0);
        // The streams' parts are slices of the arena and of the bytes; the
        // cells' are one by one.
        let lanes = &bytes[l.lanes_at..l.lanes_at + 8 * p];
        for (dst, src) in self.lanes[..s].iter_mut().zip(lanes.chunks_exact(8)) {
            *dst = u64::from_ne_bytes(src.try_into().expect("8 bytes"));
        }
        self.tags[l.nodes.clone()].fill(tag::ABSENT);
        self.held_tags[l.nodes.clone()].fill(tag::ABSENT);
        for (j, &slot) in l.persist.iter().enumerate().take(p).skip(s) {
            let slot = slot as usize;
            self.lanes[slot] = lane(lanes, 8 * j);
            self.tags[slot] = bytes[l.tags_at + j];
            self.held_tags[slot] = bytes[l.held_at + j];
        }
        self.tags[..s].copy_from_slice(&bytes[l.tags_at..l.tags_at + s]);
        self.held_tags[..s].copy_from_slice(&bytes[l.held_at..l.held_at + s]);
        let ring = &bytes[l.ring_lanes_at..l.ring_lanes_at + 8 * l.ring_len];
        for (dst, src) in self.ring_lanes.iter_mut().zip(ring.chunks_exact(8)) {
            *dst = u64::from_ne_bytes(src.try_into().expect("8 bytes"));
        }
        self.ring_tags
            .copy_from_slice(&bytes[l.ring_tags_at..l.ring_tags_at + l.ring_len]);
        if !self.ring_objects.is_empty() {
            self.ring_objects.clear();
        }
        for (f, &n) in l.flags.iter().enumerate() {
            self.flag[n as usize] = bytes[l.flags_at + f] != 0;
        }
        for r in 0..l.rings {
            let at = l.counts_at + 4 * r;
            let mut b = [0; 4];
            b.copy_from_slice(&bytes[at..at + 4]);
            self.rings[r].bad = u32::from_ne_bytes(b);
        }
        let windows = &bytes[l.windows_at..l.windows_at + 8 * l.window_words];
        for (dst, src) in self.windows.iter_mut().zip(windows.chunks_exact(8)) {
            *dst = u64::from_ne_bytes(src.try_into().expect("8 bytes"));
        }
        let clocks = &bytes[l.clocks_at..l.clocks_at + 8 * l.clocks];
        for (dst, src) in self.clocks.iter_mut().zip(clocks.chunks_exact(8)) {
            *dst = u64::from_ne_bytes(src.try_into().expect("8 bytes"));
        }
        self.pending.clear();
    }

    /// The objects a packed state must keep beside its bytes: those of the
    /// persistent slots holding (or holding as their held value) a value
    /// without a scalar form, other than slot `skip` (a keyed monitor's key
    /// input, whose value is the key), and the ring table's objects.
    pub fn objects_to_keep(
        &self,
        l: &PackLayout,
        skip: Option<Slot>,
    ) -> (Vec<(u32, Value)>, Vec<Option<Value>>) {
        let mut kept = Vec::new();
        for &slot in l.objects.iter() {
            let s = slot as usize;
            let other = self.tags[s] == tag::OTHER
                || (self.tags[s] == tag::ABSENT && self.held_tags[s] == tag::OTHER);
            if other
                && Some(Slot(slot)) != skip
                && let Some(v) = self.objects.get(s)
            {
                kept.push((slot, v.clone()));
            }
        }
        let ring = if l.ring_objects {
            self.ring_objects.clone()
        } else {
            Vec::new()
        };
        (kept, ring)
    }

    /// Puts back kept objects (see `objects_to_keep`).
    pub fn restore_objects(&mut self, slots: &[(u32, Value)], ring: &[Option<Value>]) {
        for (slot, v) in slots {
            self.objects.set(*slot as usize, Some(v.clone()));
        }
        self.ring_objects.clear();
        self.ring_objects.extend_from_slice(ring);
    }

    /// Sets the object of one slot (a keyed monitor's key input).
    pub fn set_object(&mut self, slot: Slot, v: &Value) {
        self.objects.set(slot.index(), Some(v.clone()));
    }
}
