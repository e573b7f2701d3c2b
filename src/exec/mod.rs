//! Execution (docs/engine.md, "Tiers" and "Guards, promotion and commit"): tier selection, per-row orchestration, guards, promotion, statistics.
//!
//! An `Engine` runs rows of one plan on one tier:
//!
//! - **canonical**: every stream is evaluated by `NodeState`;
//! - **quickened** / **native-regions**: the schedule runs step by step
//!   through the partition of `fusion::FusedPlan`; each region's program
//!   (interpreted by `scalar_ir::QuickCode`, or compiled by `jit`) preflights
//!   and either computes its streams (or islands) or declines, and a declined
//!   region (or graph step) is evaluated canonically from its start;
//! - **native-whole**: one program computes the whole row (row guard first,
//!   then every stream, node holds and ring pushes); a declined row runs
//!   canonically. The same program's batch kernel runs stretches of rows
//!   held in columns (`run_batch`).
//!
//! Fused programs work on `NodeState`'s own arena and rings (the frame points
//! at them), so a declined range needs no copying to be "synchronised back",
//! and temporal state never lives anywhere else:
//!
//! - **promotion** is the one fallible step: before a program that reads
//!   offset rings first runs, every entry of those rings must hold a defined
//!   value of the ring's scalar type (while rings still hold ⊥, in the first
//!   rows, the program declines and the row runs canonically);
//! - **materialization** is therefore always trivial: when a promoted program
//!   declines, or a canonical row pushes a value it could not read (⊥) into
//!   one of its rings, the canonical tier already holds the state; the
//!   program is demoted and must be promoted again.
//!
//! The tick barrier (offset rings) runs after the last stream (in
//! `NodeState::end_row`, or at the end of the whole-row program), so a row
//! abandoned midway leaves no trace in temporal state.

mod tier;
mod tier_up;
pub use tier::Tier;
use tier_up::TierUp;
pub use tier_up::{TIER_UP_ROWS, TierUpStats};

use crate::canonical::dynamic::{InstanceRun, InstanceTier};
use crate::canonical::{Cells, NodeState};
use crate::error::{ErrorKind, RuntimeError};
use crate::fusion::lower::{LoweredRegion, WholeSplit, lower_region};
use crate::fusion::{Action, FusedPlan, RegionId, Step};
use crate::lang::check::StreamId;
use crate::plan::{NodeOp, Plan, Slot};
use crate::value::Value;
use scalar_ir::frame::{Frame, tag, tag_of};
use scalar_ir::{Exit, QuickCode, TrapKind};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A compiled program of an engine: a fused region, or the whole-row kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KernelId {
    Region(RegionId),
    Whole,
}

/// Why a program declined a row (the row, or the declined range, then runs
/// canonically).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Decline {
    /// The offset history it reads is not promotable (not yet filled, or
    /// holding ⊥ or another representation).
    History,
    /// A trap inside an `if` arm: the canonical tier decides whether it is
    /// an error.
    TrapInArm,
    /// The preflight (or the row guard) found value `reads[read]` of the
    /// program absent, ⊥ or of another type (`seen` is its tag).
    Read { read: u32, seen: u8 },
    /// Value `reads[read]` is absent and has never had a value of its type,
    /// so the hold rule has nothing to read (a trace's first rows, before
    /// every input has come).
    Unheld { read: u32 },
    /// A window over value `reads[read]`, absent this row, entered nothing
    /// and holds no value, so its read is ⊥ (a run repaired onto a new
    /// window over a stream that had values before it).
    EmptyWindow { read: u32 },
}

/// Compiled code of one program: interpreted or native. A clone shares
/// native code (a pointer into code the engines sharing it keep alive) and
/// copies an interpreted program with its own register file.
#[derive(Clone)]
enum Kernel {
    Quick(QuickCode),
    /// A row kernel of `Engine::native`, valid while the engine lives.
    Native(jit::RowFn),
}

impl Kernel {
    /// Runs the program on `frame`.
    ///
    /// # Safety
    /// `frame` must point at lanes and tags sized as the program declares.
    #[inline]
    unsafe fn run(&mut self, frame: &mut Frame) -> Exit {
        match self {
            // SAFETY: forwarded.
            Kernel::Quick(code) => unsafe { code.run_frame(frame) },
            Kernel::Native(f) => {
                // SAFETY: forwarded; the native code outlives every call (it is
                // owned by the same engine and dropped after it).
                let word = unsafe { f(frame) };
                Exit::decode(word).expect("native code returns words Exit::encode produces")
            }
        }
    }
}

/// A program's compiled kernel. Whether it is promoted belongs to each run
/// (`Run::promoted`), since promotion is a fact about one trace's state.
#[derive(Clone)]
struct RegionRuntime {
    lowered: LoweredRegion,
    kernel: Kernel,
    /// The input step from which promotion can succeed: a ring of `n` lanes
    /// holds `n` entries of the trace only from step `n` on.
    ready_at: u64,
}

impl RegionRuntime {
    fn new(lowered: LoweredRegion, kernel: Kernel) -> RegionRuntime {
        let ready_at = lowered
            .rings
            .iter()
            .map(|r| u64::from(r.1))
            .max()
            .unwrap_or(0);
        RegionRuntime {
            lowered,
            kernel,
            ready_at,
        }
    }
}

/// The whole-row kernel (`native-whole`).
#[derive(Clone)]
struct WholeRuntime {
    rt: RegionRuntime,
    /// The native batch kernels of the same schedule, reading inputs from
    /// the batch's columns (`lower_whole` with frame inputs), each compiled
    /// when the first batch that needs it comes (`run_batch`), since a run
    /// row by row never uses them.
    batch: BatchKernels,
    /// The current row in frame form, for the row kernel.
    input_lanes: Vec<u64>,
    input_tags: Vec<u8>,
    /// The kernel's `when`, `init` and `update` nodes: a completed row sets
    /// their flags.
    flag_nodes: Vec<crate::plan::NodeId>,
    /// Which streams the kernel computes; the canonical tier evaluates the
    /// rest (the tail) after it, and stores the inputs it leaves out.
    split: WholeSplit,
}

impl WholeRuntime {
    /// The row's input lanes and tags for the kernel's frame (`n` inputs):
    /// where they lie for a row in frame form, else encoded into the
    /// runtime's input lanes. The kernel stores the inputs to the arena
    /// itself (the same program serves batches).
    #[inline]
    fn inputs(&mut self, row: Cells<'_>, n: usize) -> (*const u64, *const u8) {
        match row {
            Cells::Frame { lanes, tags, .. } if tags.len() == n => (lanes.as_ptr(), tags.as_ptr()),
            // `Value` cells (the common row of `Monitor::step`): the form
            // is matched once, not once per input as `frame_cell` would.
            Cells::Values(cells) => {
                let lanes = self.input_tags[..n].iter_mut().zip(&mut self.input_lanes);
                for (k, (t, lane)) in lanes.enumerate() {
                    (*t, *lane) = crate::canonical::value_cell(cells, k);
                }
                (self.input_lanes.as_ptr(), self.input_tags.as_ptr())
            }
            Cells::Frame { .. } => {
                for (k, (t, lane)) in self.input_tags[..n]
                    .iter_mut()
                    .zip(&mut self.input_lanes)
                    .enumerate()
                {
                    (*t, *lane) = row.frame_cell(k);
                }
                (self.input_lanes.as_ptr(), self.input_tags.as_ptr())
            }
        }
    }
}

/// A promoted whole-row kernel's frame on one run, kept across rows by a
/// `crate::Stepper` (`Engine::fast_row`, `Engine::run_fast_row`): only the
/// step changes from one row to the next.
pub(crate) struct FastRow {
    frame: Frame,
}

/// The whole-row kernel again, lowered onto packed runs
/// (`lower_whole_in` with `WholeEnv::Packed`): a keyed monitor runs it on a
/// key's block in place, so a row of a key whose run is packed and promoted
/// neither unpacks nor packs it (`Engine::run_packed_row`).
#[derive(Clone)]
struct PackedRuntime {
    kernel: jit::RowFn,
    /// Its warm-up form, when the plan has one
    /// (`fusion::lower::warm_up_eligible`): it runs a trace's first rows,
    /// before the rings are full.
    warm: Option<jit::RowFn>,
    /// Every ring (in layout order): base, lanes, the tag of its type.
    rings: Vec<(u32, u32, u8)>,
    /// Where the frame lies in a block, and the block's length in words.
    parts: crate::canonical::pack::FrameParts,
    words: usize,
    /// Keeps the kernel's machine code alive (dropped after `kernel`, which
    /// is a plain pointer into it).
    _code: SharedCode,
}

/// Whether a packed run's owner bytes say the whole-row kernel is promoted
/// and has set the builtin flags.
fn owner_bytes_promoted(
    block: &[u64],
    parts: &crate::canonical::pack::FrameParts,
    whole: usize,
) -> bool {
    use zerocopy::IntoBytes as _;
    let owner = &block.as_bytes()[parts.extra_at + whole..];
    owner[0] != 0 && owner[1] != 0
}

impl PackedRuntime {
    /// Whether every ring entry a trace at `block`'s step has written is a
    /// value of its ring's type: the entries not written yet are exactly
    /// the ⊥ a packed run starts with (`NodeState::fill_rings`), so each
    /// ring's count of entries of another tag must be the number of its
    /// lanes the steps have not reached.
    fn written_rings_hold_values(&self, block: &[u64]) -> bool {
        let step = block[0];
        (0..self.rings.len()).all(|r| {
            let n = u64::from(self.rings[r].1);
            u64::from(self.count(block, r)) == n - step.min(n)
        })
    }

    fn count(&self, block: &[u64], r: usize) -> u32 {
        use zerocopy::IntoBytes as _;
        let at = self.parts.counts_at + 4 * r;
        let mut b = [0; 4];
        b.copy_from_slice(&block.as_bytes()[at..at + 4]);
        u32::from_ne_bytes(b)
    }

    /// After the warm-up form completed the row of `step`: what the tick
    /// barrier does besides the lanes (which the kernel wrote), as
    /// `NodeState::end_row` would — each ring's entry of the step takes its
    /// type's tag, and the ring's count of other tags drops if the entry
    /// had one —, then the step; the flags (every value of the row was
    /// real); and the promotion once no ring has an entry of another tag.
    fn commit_warm_row(&self, block: &mut [u64], step: u64, whole: usize) {
        use zerocopy::IntoBytes as _;
        let mut full = true;
        for (r, &(base, n, want)) in self.rings.iter().enumerate() {
            let k = self.parts.ring_tags_at
                + (u64::from(base) + crate::canonical::ring_entry(step, u64::from(n))) as usize;
            let mut count = self.count(block, r);
            let bytes = block.as_mut_bytes();
            if bytes[k] != want {
                bytes[k] = want;
                count -= 1;
                let at = self.parts.counts_at + 4 * r;
                bytes[at..at + 4].copy_from_slice(&count.to_ne_bytes());
            }
            full &= count == 0;
        }
        block[0] = step + 1;
        let bytes = block.as_mut_bytes();
        bytes[self.parts.flags.clone()].fill(1);
        bytes[self.parts.extra_at + whole + 1] = 1;
        if full {
            bytes[self.parts.extra_at + whole] = 1;
        }
    }
}

/// The whole-row program's batch kernels: one that guards every row's
/// inputs, and one without the input guards (`Program::
/// without_input_guards`) for a batch whose guarded columns each hold
/// their guard's tag on every row (`RowBatch::column_tag`), as a typed
/// trace's rows do. That one reads each row's lanes with no test before
/// them. A program that guards no input has the first only.
#[derive(Clone)]
struct BatchKernels {
    /// What a batch must hold for `typed` (empty: `typed` is not used).
    guards: Vec<scalar_ir::InputGuard>,
    guarded: BatchKernel,
    typed: BatchKernel,
}

/// Which of `BatchKernels` runs a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Guards {
    /// Each row's inputs are tested before it runs.
    Checked,
    /// Every row is known to pass the input guards (the batch's columns).
    Known,
}

impl BatchKernels {
    fn new(program: &scalar_ir::Program, available: bool) -> BatchKernels {
        let kernel = || match available {
            true => BatchKernel::Deferred,
            false => BatchKernel::Unavailable,
        };
        BatchKernels {
            guards: program.input_guards(),
            guarded: kernel(),
            typed: kernel(),
        }
    }

    /// The kernel for `batch`: the unguarded one if every guarded column
    /// holds the guard's tag on every row.
    fn guards_for(&self, batch: &crate::batch::RowBatch) -> Guards {
        let known = !self.guards.is_empty()
            && (self.guards.iter())
                .all(|g| batch.column_tag(g.slot as usize) == Some(scalar_ir::frame::tag_of(g.ty)));
        match known {
            true => Guards::Known,
            false => Guards::Checked,
        }
    }

    fn get_mut(&mut self, guards: Guards) -> &mut BatchKernel {
        match guards {
            Guards::Checked => &mut self.guarded,
            Guards::Known => &mut self.typed,
        }
    }
}

/// One batch kernel.
#[derive(Clone)]
enum BatchKernel {
    /// Not compiled yet: the first batch compiles it.
    Deferred,
    Ready(jit::BatchKernel),
    /// None: the row kernel is not native, or Cranelift declined the batch
    /// kernel (batches then run row by row).
    Unavailable,
}

/// The state of one trace run by an `Engine`: the canonical run state and
/// which of the engine's programs are promoted on it. An engine's compiled
/// code serves any number of runs (a keyed monitor keeps one per key); all
/// temporal state is in `state`, so a run moves between engines and tiers
/// by its `NodeState` alone (promotion is recomputed, never stored).
#[derive(Clone, Debug)]
pub struct Run {
    pub state: NodeState,
    /// Per region (by `RegionId`), then the whole-row kernel last: whether
    /// its rings were found promotable and have not been demoted since.
    promoted: Promoted,
    /// Whether the whole-row kernel has set the stateful builtins' flags.
    flags_set: bool,
    /// The runtime error that stopped this run, if one did: every later row
    /// reports it again. Boxed, because every key of a keyed monitor
    /// carries a `Run` and almost none of them ever stop.
    pub failed: Option<Box<RuntimeError>>,
}

impl Run {
    /// The owner bytes a packed run of `engine` needs
    /// (`canonical::pack::PackLayout::new`): its promotion bits and whether
    /// the whole-row kernel has set the builtin flags.
    pub fn pack_extra(engine: &Engine) -> usize {
        engine.regions.len() + 2
    }

    /// Packs the run (its state and promotion bits; not `failed`, which the
    /// owner keeps) into `bytes`.
    pub fn pack(&self, l: &crate::canonical::pack::PackLayout, bytes: &mut [u8]) {
        self.state.pack(l, bytes);
        for (i, &p) in self.promoted.iter().enumerate() {
            l.put_extra(bytes, i, u8::from(p));
        }
        l.put_extra(bytes, self.promoted.len(), u8::from(self.flags_set));
    }

    /// Makes this working run the packed one (see `NodeState::unpack`);
    /// `failed` is cleared for the owner to set.
    pub fn unpack(&mut self, l: &crate::canonical::pack::PackLayout, bytes: &[u8]) {
        self.state.unpack(l, bytes);
        let n = self.promoted.len();
        for i in 0..n {
            self.promoted[i] = l.get_extra(bytes, i) != 0;
        }
        self.flags_set = l.get_extra(bytes, n) != 0;
        self.failed = None;
    }

    /// Completes `rows` rows a kernel ran (its rings pushed by the kernel's
    /// own tick barrier): sets the stateful builtins' flags `flag_nodes`
    /// the first time (a kernel row's values are all real, so each `init`,
    /// `when` and `update` has fired), then advances the step. The one
    /// place kernel rows advance the step; canonical rows advance it in
    /// `NodeState::end_row`, and both go through `NodeState::advance`.
    #[inline]
    fn kernel_rows_done(&mut self, rows: u64, flag_nodes: &[crate::plan::NodeId]) {
        if rows == 0 {
            return;
        }
        if !self.flags_set {
            for &n in flag_nodes {
                self.state.flag[n.index()] = true;
            }
            self.flags_set = true;
        }
        self.state.advance(rows);
    }

    /// Wraps a run state (fresh, restored or moved from another engine);
    /// every program starts unpromoted.
    pub fn from_state(engine: &Engine, mut state: NodeState) -> Run {
        // `dynamic` instances run on the tier asked of this engine.
        if !state.dynamic.is_empty() && engine.requested != Tier::Canonical {
            let tier: Arc<dyn InstanceTier> = Arc::new(InstanceEngines(engine.requested));
            for d in &mut state.dynamic {
                d.tier = Some(tier.clone());
            }
        }
        Run {
            state,
            promoted: Promoted::new(engine.regions.len() + 1),
            flags_set: false,
            failed: None,
        }
    }
}

/// Whether each of an engine's programs is promoted on a run: inline for
/// plans of up to `Promoted::INLINE` programs (nearly all), so that checking
/// it costs no memory access of its own. A keyed monitor checks it for
/// another run on almost every row, and a separate allocation per run was a
/// cache miss per row (16% of a keyed native-whole row, profiled).
#[derive(Clone, Debug)]
enum Promoted {
    Inline {
        len: u8,
        bits: [bool; Promoted::INLINE],
    },
    Heap(Box<[bool]>),
}

impl Promoted {
    const INLINE: usize = 22;

    fn new(len: usize) -> Promoted {
        match u8::try_from(len) {
            Ok(l) if len <= Promoted::INLINE => Promoted::Inline {
                len: l,
                bits: [false; Promoted::INLINE],
            },
            _ => Promoted::Heap(vec![false; len].into_boxed_slice()),
        }
    }
}

impl std::ops::Deref for Promoted {
    type Target = [bool];
    #[inline]
    fn deref(&self) -> &[bool] {
        match self {
            Promoted::Inline { len, bits } => &bits[..*len as usize],
            Promoted::Heap(b) => b,
        }
    }
}

impl std::ops::DerefMut for Promoted {
    fn deref_mut(&mut self) -> &mut [bool] {
        match self {
            Promoted::Inline { len, bits } => &mut bits[..*len as usize],
            Promoted::Heap(b) => b,
        }
    }
}

/// Speculation on untyped inputs (`in x`). Nothing reading an untyped input
/// has a scalar signature, so such a spec would run its streams
/// canonically. The engine watches the first rows; once every untyped input
/// has had a value (or after `Speculation::WATCH` rows), it re-signs the
/// plan as if each input whose first value was an Int, Float or Bool always
/// had that representation (`CheckedSpec::speculating`) and rebuilds its
/// programs from it. Their guards already check every value read, so a row
/// that contradicts the speculation declines to the canonical tier like any
/// other row the programs cannot take. If contradicting rows keep coming
/// (`Speculation::GIVE_UP`), the programs are rebuilt from the plan's own
/// signatures and speculation ends.
#[derive(Clone, Debug)]
pub(crate) struct Speculation {
    /// The untyped inputs by position, each with the tag of its first value
    /// seen (`ABSENT` until then; `OTHER` for a Str or Unit value).
    first: Vec<(usize, u8)>,
    phase: Phase,
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Watching the first rows (this many so far).
    Watching { rows: u64 },
    /// The programs are built on speculation since the engine's row count
    /// was `since`; `contradicted` rows since contradicted it.
    Active { since: u64, contradicted: u64 },
    /// Given up after `contradicted` of `rows` rows contradicted it.
    GivenUp { contradicted: u64, rows: u64 },
    /// Not begun: no untyped input's first value was a scalar.
    NotScalar,
}

/// What a row's values tell the engine to do about speculation.
enum SpeculationStep {
    Nothing,
    /// Re-sign the plan under these inputs' representations and rebuild.
    Speculate(Vec<(StreamId, crate::lang::check::ScalarSignature)>),
    /// Rebuild from the plan's own signatures.
    GiveUp,
}

impl Speculation {
    /// Rows watched at most before deciding.
    pub(crate) const WATCH: u64 = 16;
    /// Speculation is given up once this many rows contradicted it, if they
    /// are at least one in `GIVE_UP.1` of the rows since it began.
    pub(crate) const GIVE_UP: (u64, u64) = (64, 16);

    fn new(untyped: Vec<usize>) -> Speculation {
        Speculation {
            first: untyped.into_iter().map(|k| (k, tag::ABSENT)).collect(),
            phase: Phase::Watching { rows: 0 },
        }
    }

    /// Takes in one row, given by the tag of each input (`tag_of(k)`), the
    /// engine having evaluated `done` rows before it. (Rows a batch kernel
    /// completes are not taken in: they are the speculation's by its guards,
    /// and only counted, by `done`.)
    fn observe(&mut self, plan: &Plan, done: u64, tag_of: impl Fn(usize) -> u8) -> SpeculationStep {
        match &mut self.phase {
            Phase::NotScalar | Phase::GivenUp { .. } => SpeculationStep::Nothing,
            Phase::Active {
                since,
                contradicted,
            } => {
                let rows = done + 1 - *since;
                let against = self.first.iter().any(|&(k, want)| {
                    let t = tag_of(k);
                    scalar_signature(want).is_some() && t != tag::ABSENT && t != want
                });
                if against {
                    *contradicted += 1;
                    let (at_least, one_in) = Speculation::GIVE_UP;
                    if *contradicted >= at_least && *contradicted * one_in >= rows {
                        self.phase = Phase::GivenUp {
                            contradicted: *contradicted,
                            rows,
                        };
                        return SpeculationStep::GiveUp;
                    }
                }
                SpeculationStep::Nothing
            }
            Phase::Watching { rows } => {
                *rows += 1;
                for (k, first) in &mut self.first {
                    if *first == tag::ABSENT {
                        *first = tag_of(*k);
                    }
                }
                let all_seen = self.first.iter().all(|&(_, t)| t != tag::ABSENT);
                if !all_seen && *rows < Speculation::WATCH {
                    return SpeculationStep::Nothing;
                }
                let speculated: Vec<_> = self
                    .first
                    .iter()
                    .filter_map(|&(k, t)| Some((plan.spec.inputs[k], scalar_signature(t)?)))
                    .collect();
                if speculated.is_empty() {
                    self.phase = Phase::NotScalar;
                    return SpeculationStep::Nothing;
                }
                self.phase = Phase::Active {
                    since: done,
                    contradicted: 0,
                };
                SpeculationStep::Speculate(speculated)
            }
        }
    }

    /// Whether it still has to see every row. Once it has decided, a row a
    /// whole-row program completes needs no look: it passed the program's
    /// row guard, so it matched every speculated representation (only a
    /// contradicting row counts, and such a row declines).
    fn watching(&self) -> bool {
        matches!(self.phase, Phase::Watching { .. })
    }

    /// What `--stats` says about it, the engine having evaluated `done` rows.
    fn describe(&self, plan: &Plan, done: u64) -> String {
        let name = |k: usize| plan.stream_name(plan.spec.inputs[k]).to_string();
        let guessed: Vec<String> = self
            .first
            .iter()
            .filter_map(|&(k, t)| Some(format!("{} as {}", name(k), scalar_signature(t)?)))
            .collect();
        match self.phase {
            Phase::Watching { rows } => {
                format!("watching the untyped inputs' first values ({rows} rows so far)")
            }
            Phase::Active {
                since,
                contradicted,
            } => format!(
                "speculating {} (guarded): {contradicted} of {} rows since contradicted it (each ran canonically)",
                guessed.join(", "),
                done - since
            ),
            Phase::GivenUp { contradicted, rows } => format!(
                "speculated {}, given up when {contradicted} of {rows} rows had contradicted it; the programs were rebuilt without it",
                guessed.join(", ")
            ),
            Phase::NotScalar => {
                "none: no untyped input's first value was an Int, Float or Bool".to_string()
            }
        }
    }
}

/// The scalar signature of values of frame tag `t`, if it is a scalar's.
fn scalar_signature(t: u8) -> Option<crate::lang::check::ScalarSignature> {
    use crate::lang::check::ScalarSignature as Sig;
    match t {
        tag::I64 => Some(Sig::I64),
        tag::F64 => Some(Sig::F64),
        tag::B1 => Some(Sig::B1),
        _ => None,
    }
}

/// Counters of one engine (printed by `vigil run --stats`).
#[derive(Clone, Debug, Default)]
pub struct ExecStats {
    pub rows: u64,
    /// Streams evaluated by the canonical tier (all of them on that tier;
    /// on a fused tier, the members of declined regions and graph steps).
    pub canonical_streams: u64,
    /// Region runs that completed on the fused tier.
    pub region_runs: u64,
    /// Rows completed by the whole-row kernel.
    pub whole_rows: u64,
    /// Of those, rows completed by a batch kernel, and of these, by the one
    /// without input guards (`BatchKernels`).
    pub batch_rows: u64,
    pub typed_batch_rows: u64,
    /// Of the whole-row kernel's rows, rows completed on a packed run in place (`run_packed_row`),
    /// and of these, rows of the warm-up form.
    pub packed_rows: u64,
    pub warm_rows: u64,
    /// Rows (or ranges) declined, by program and reason; declines for
    /// history not yet promotable are counted apart, in `history_declines`.
    pub declines: BTreeMap<(KernelId, Decline), u64>,
    /// `Decline::History` counts by program (regions by id, the whole-row
    /// kernel last): a keyed monitor's every key starts with such rows, and
    /// a map update for each was a visible part of them.
    pub history_declines: Vec<u64>,
    pub promotions: u64,
    pub materializations: u64,
    pub plan_time: Duration,
    pub lowering_time: Duration,
    /// Cranelift compile time of the plan's native code.
    pub compile_time: Duration,
    /// Programs the JIT could not compile (they stay on the quickened tier).
    pub compile_declines: Vec<String>,
    /// The most scalar IR instructions compiled into one native function
    /// (`jit::NativeCode::largest_function`): a row kernel's program longer
    /// than `jit::MAX_FUNCTION_INSTS` is compiled in chunks of at most that.
    pub largest_function: usize,
    /// When `auto` moved the run from the interpreter to native code.
    pub tier_up: Option<TierUpStats>,
}

impl ExecStats {
    /// Carries the counters of an engine this one replaces (rebuilt for
    /// speculation) over: rows and evaluations, promotions and build
    /// times. Declines are by program, and the programs are new: they start
    /// over.
    fn absorb(&mut self, old: &ExecStats) {
        self.rows += old.rows;
        self.canonical_streams += old.canonical_streams;
        self.region_runs += old.region_runs;
        self.whole_rows += old.whole_rows;
        self.batch_rows += old.batch_rows;
        self.typed_batch_rows += old.typed_batch_rows;
        self.promotions += old.promotions;
        self.materializations += old.materializations;
        self.plan_time += old.plan_time;
        self.lowering_time += old.lowering_time;
        self.compile_time += old.compile_time;
        self.largest_function = self.largest_function.max(old.largest_function);
        self.tier_up = self.tier_up.or(old.tier_up);
    }
}

/// Runs rows of one plan on one tier.
pub struct Engine {
    plan: Arc<Plan>,
    /// The plan whose signatures decide fusion and lowering: `plan` itself,
    /// or `plan` re-signed under speculated representations of its untyped
    /// inputs (same nodes, slots and rings; see `Speculation`).
    signed: Arc<Plan>,
    /// The tier asked for (`tier` is the one running).
    requested: Tier,
    /// Speculation on untyped inputs, for a plan that has any (not for a
    /// keyed monitor's engine, whose packed layout follows the signatures).
    speculation: Option<Speculation>,
    fused: Option<Arc<FusedPlan>>,
    regions: Vec<RegionRuntime>,
    whole: Option<WholeRuntime>,
    /// The whole-row kernel on packed runs, once a keyed monitor asked for
    /// it (`compile_packed`).
    packed: Option<PackedRuntime>,
    pub stats: ExecStats,
    /// The tier actually running, and why it was picked (`describe_tier`
    /// adds the tier-up to come or done).
    pub tier: Tier,
    pub why: String,
    /// `auto`'s native kernel still to come (`tier_up`): the whole-row
    /// program runs interpreted until it is compiled.
    tier_up: Option<TierUp>,
    /// The rows a run evaluates before `tier_up` starts (`TIER_UP_ROWS`).
    tier_up_after: u64,
    /// The native-regions tier's shape.
    regions_tier: RegionsTier,
    /// Keeps the machine code of every native kernel above alive (one
    /// module per compilation), shared with the engines `share` made.
    /// Declared last so it is dropped after them; the last owner's drop
    /// frees the code.
    native: Vec<SharedCode>,
}

/// What the native-regions tier runs on a plan that also has a whole-row
/// program (docs/engine.md, "Tiers").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionsTier {
    /// The whole-row program on the register interpreter, the native
    /// regions for the rows it declines: one interpreter entry a row costs
    /// less than a native call per region with the canonical tier between
    /// them, so this is never slower than the quickened tier.
    WholeWhereFused,
    /// Every row through the native regions, the canonical tier between
    /// them: for the tests of region code, which would otherwise meet it
    /// only on declined rows and plans without a whole-row program.
    RegionsOnly,
}

/// The tier `dynamic` instances run on (`canonical::dynamic::InstanceTier`):
/// each new string's plan gets an engine of its own, fused, lowered and (on
/// the native tiers) compiled when the string arrives, and dropped with the
/// instance (its native code with it).
#[derive(Debug)]
struct InstanceEngines(Tier);

impl InstanceTier for InstanceEngines {
    fn prepare(&self, plan: Arc<Plan>, max_string_bytes: usize) -> Box<dyn InstanceRun> {
        let engine = Engine::new(plan, self.0);
        let mut run = engine.new_run();
        run.state.max_string_bytes = max_string_bytes;
        Box::new(InstanceEngine { engine, run })
    }
}

/// A `dynamic` instance on an engine of its own.
struct InstanceEngine {
    engine: Engine,
    run: Run,
}

impl fmt::Debug for InstanceEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InstanceEngine({})", self.engine.tier)
    }
}

impl InstanceRun for InstanceEngine {
    fn step(&mut self, inputs: &[crate::value::Sample]) -> Result<(), RuntimeError> {
        use crate::value::Sample;
        if inputs.iter().all(|s| !matches!(s, Sample::Deferred)) {
            let row: Vec<Option<Value>> = inputs.iter().map(|s| s.value().cloned()).collect();
            return self.engine.run_row(&mut self.run, &row);
        }
        // A row has no ⊥ inputs: a step reading a stream that is ⊥ runs on
        // the canonical tier (as a declined row does).
        let engine = &mut self.engine;
        let row: Vec<Option<Value>> = inputs.iter().map(|s| s.value().cloned()).collect();
        let st = &mut self.run.state;
        st.begin_row(&engine.plan, Cells::Values(&row));
        for (k, s) in inputs.iter().enumerate() {
            if matches!(s, Sample::Deferred) {
                st.write(Slot::from(engine.plan.spec.inputs[k]), Sample::Deferred);
            }
        }
        for &s in &engine.plan.schedule {
            st.eval_stream(&engine.plan, s)?;
        }
        st.end_row(&engine.plan);
        engine.stats.canonical_streams += engine.plan.schedule.len() as u64;
        engine.check_promoted_rings(&mut self.run);
        engine.stats.rows += 1;
        Ok(())
    }

    fn state(&self) -> &NodeState {
        &self.run.state
    }

    fn tier(&self) -> &'static str {
        self.engine.tier.name()
    }

    fn box_clone(&self) -> Box<dyn InstanceRun> {
        Box::new(InstanceEngine {
            engine: self.engine.share(),
            run: self.run.clone(),
        })
    }
}

/// The longest whole-row program (in scalar IR instructions) that `auto`
/// compiles natively; a longer one runs quickened. Cranelift compiles
/// 75,000 (a loaded 2-core machine) to 290,000 (a quiet one) instructions a
/// second, linearly since a long program is compiled in chunks of
/// `jit::MAX_FUNCTION_INSTS`, where lowering and the quickened tier's
/// compilation take a small part of that: the bound keeps the native start
/// of `auto` within about half a second on a quiet machine and two on a
/// loaded one. An independent stream `s = x + 1` is 3 instructions, so the
/// bound is about 43,000 of them; an accumulator `s = default(s[1], 0) + x`
/// is 7 (about 18,000).
pub const AUTO_NATIVE_MAX_INSTS: usize = 131_072;

/// The most instructions of a keyed monitor's regions (which run each key's
/// first rows, its history filling) that `auto` compiles natively; past it
/// they run on the register interpreter. Cranelift compiles a region's few
/// instructions at a cost of its own per function (about 0.3 ms), so this
/// keeps their compile within tens of milliseconds: a spec of a few hundred
/// streams.
pub const AUTO_NATIVE_DECLINE_INSTS: usize = 8_192;

/// How an engine's regions are compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RegionCode {
    Quickened,
    Native,
    /// Natively while their instructions are at most this many, else
    /// quickened.
    NativeUpTo(usize),
}

/// Native code kept alive by every engine that runs it. Nothing reaches the
/// code through it once compiled (kernels are plain function pointers into
/// it); the `Mutex` only lets the owners live on several threads, as
/// `NativeCode` (a Cranelift module) is `Send` but not `Sync`.
type SharedCode = Arc<std::sync::Mutex<jit::NativeCode>>;

fn shared(code: jit::NativeCode) -> SharedCode {
    Arc::new(std::sync::Mutex::new(code))
}

impl Engine {
    /// An engine for `requested` (docs/engine.md, "Tiers"): `auto` picks native-whole where
    /// every stream is scalar, else native regions (with the quickened tier
    /// for what the JIT declines), else the quickened tier when Cranelift
    /// cannot run here. Fusion, lowering and compilation happen here, once.
    pub fn new(plan: Arc<Plan>, requested: Tier) -> Engine {
        Engine::with_regions(plan, requested, RegionsTier::WholeWhereFused)
    }

    /// `Engine::new`, with the native-regions tier's shape chosen: the
    /// tests of region code run every row through the regions.
    pub fn with_regions(plan: Arc<Plan>, requested: Tier, regions: RegionsTier) -> Engine {
        let untyped = plan.spec.untyped_inputs();
        let mut engine = Engine::build(plan.clone(), plan, requested, None, regions);
        if !untyped.is_empty() && (engine.tier != Tier::Canonical || engine.tiering_up()) {
            engine.speculation = Some(Speculation::new(untyped));
        }
        engine
    }

    /// `Engine::new` for a keyed monitor keyed by input `key`: the
    /// whole-row kernel leaves the key out when no stream reads it (the
    /// monitor keeps its slot), so a Str key does not rule the kernel out.
    pub fn new_keyed(plan: Arc<Plan>, requested: Tier, key: Option<StreamId>) -> Engine {
        Engine::build(plan.clone(), plan, requested, key, RegionsTier::WholeWhereFused)
    }

    /// `new_keyed`, fusing and lowering by the signatures of `signed` (the
    /// plan, or its re-signing under speculation).
    fn build(
        plan: Arc<Plan>,
        signed: Arc<Plan>,
        requested: Tier,
        key: Option<StreamId>,
        regions: RegionsTier,
    ) -> Engine {
        let whole_row_regions = regions == RegionsTier::WholeWhereFused;
        // A keyed monitor runs the kernel on packed runs in place, so its
        // kernel must compute every stream (no tail).
        let whole_ok = match key {
            Some(_) => crate::fusion::lower::whole_row_eligible_keyed(&signed, key)
                .and_then(|()| crate::fusion::lower::whole_row_split(&signed, key)),
            None => crate::fusion::lower::whole_row_split(&signed, None),
        };
        let jit_ok = jit::available().map_err(|e| e.to_string());
        let (tier, why) = match (
            requested,
            whole_ok.as_ref().map(|split| describe_split(&plan, split)),
            &jit_ok,
        ) {
            // Periodic streams: the fused programs run the event streams on
            // input steps; ticks, and the periodic streams, are canonical.
            // (`whole_row_eligible` refuses every timed plan.)
            (Tier::NativeWhole | Tier::Auto, _, Ok(())) if plan.is_timed() => (
                Tier::NativeRegions,
                format!(
                    "{requested} requested; a spec with periodic streams has no whole-row kernel: native regions for the event streams on input steps, the canonical tier for ticks"
                ),
            ),
            (Tier::Canonical, ..) => (Tier::Canonical, "requested".to_string()),
            (Tier::Quickened, Ok(split), _) => (
                Tier::Quickened,
                format!(
                    "requested; the whole-row program on the register interpreter, its regions for the rows it declines{split}"
                ),
            ),
            (Tier::Quickened, Err(_), _) => (Tier::Quickened, "requested".to_string()),
            (Tier::NativeRegions | Tier::NativeWhole | Tier::Auto, _, Err(e)) => (
                Tier::Quickened,
                format!("{requested} requested, but Cranelift cannot run here: {e}"),
            ),
            (Tier::NativeRegions, Ok(split), _) if whole_row_regions => (
                Tier::NativeRegions,
                format!(
                    "requested; the whole-row program on the register interpreter (cheaper than \
                     calling each region), native regions for the rows it declines{split}"
                ),
            ),
            (Tier::NativeRegions, ..) => (Tier::NativeRegions, "requested".to_string()),
            (Tier::NativeWhole, Ok(split), _) => (Tier::NativeWhole, format!("requested{split}")),
            (Tier::NativeWhole, Err(e), _) => (
                Tier::NativeRegions,
                format!("native-whole requested, but not every stream is scalar ({e})"),
            ),
            (Tier::Auto, Ok(split), _) if split.is_empty() => (
                Tier::NativeWhole,
                "auto: every stream is scalar".to_string(),
            ),
            (Tier::Auto, Ok(split), _) => (Tier::NativeWhole, format!("auto{split}")),
            (Tier::Auto, Err(e), _) => (
                Tier::NativeRegions,
                format!(
                    "auto: native-whole unavailable ({e}); native regions, quickened where declined"
                ),
            ),
        };
        let mut engine = Engine {
            plan: plan.clone(),
            signed,
            requested,
            speculation: None,
            fused: None,
            regions: Vec::new(),
            whole: None,
            packed: None,
            stats: ExecStats::default(),
            tier,
            why,
            tier_up: None,
            tier_up_after: TIER_UP_ROWS,
            regions_tier: regions,
            native: Vec::new(),
        };
        // A plain monitor on auto starts on the canonical tier and builds
        // the faster ones on a thread of its own once the run is hot
        // (`tier_up`). A keyed one builds now, and compiles the whole-row
        // program natively only up to a length (`AUTO_NATIVE_MAX_INSTS`):
        // compile time grows with it, and past it the quickened tier, which
        // builds in a fraction of the time, runs it.
        let mut lowered = None;
        let mut too_long = false;
        if let (true, Ok(split)) = (Engine::tiers_up(requested, tier, key.is_some()), &whole_ok) {
            engine.tier = Tier::Canonical;
            engine.tier_up = Some(TierUp::new(split.clone()));
        } else if let (Tier::Auto, Tier::NativeWhole, Ok(split)) = (requested, tier, &whole_ok) {
            let whole = engine.lower_whole(split);
            let insts: usize = whole.program.layout.insts.iter().map(Vec::len).sum();
            if insts > AUTO_NATIVE_MAX_INSTS {
                too_long = true;
                engine.tier = Tier::Quickened;
                engine.why = format!(
                    "auto: the whole-row program has {insts} instructions, more than auto \
                     compiles natively ({AUTO_NATIVE_MAX_INSTS}), so it runs on the register \
                     interpreter, which builds sooner, and the rows it declines canonically; \
                     --tier native-whole compiles it"
                );
            }
            lowered = Some(whole);
        }
        match engine.tier {
            Tier::Canonical | Tier::Auto => {}
            // The quickened tier runs the whole-row program where there is
            // one: one interpreter entry per row instead of one per region,
            // and no canonical `if` or tick barrier between them. Its
            // regions take the rows the program declines.
            Tier::Quickened => {
                // Not for a program too long to compile: its thousands of
                // regions would cost as long to build as Cranelift, and the
                // few rows the program declines (a history filling) run
                // canonically, as on native-whole.
                if !too_long {
                    engine.build_regions(RegionCode::Quickened);
                }
                if let Ok(split) = whole_ok {
                    engine.build_whole(split, lowered, false);
                }
            }
            // Where the plan has a whole-row program, region calls cost
            // more than they save: each is a call with a preflight, and the
            // canonical tier runs the row between them (begin, rings, end),
            // which the whole-row program does inside itself. So this tier
            // runs that program on the register interpreter, as the
            // quickened tier does, and its native regions take the rows it
            // declines (docs/engine.md, "Tiers").
            Tier::NativeRegions => {
                engine.build_regions(RegionCode::Native);
                if let (true, Ok(split)) = (whole_row_regions, whole_ok) {
                    engine.build_whole(split, lowered, false);
                }
            }
            Tier::NativeWhole => engine.build_whole(
                whole_ok.expect("native-whole is chosen with a split"),
                lowered,
                true,
            ),
        }
        engine.stats.history_declines = vec![0; engine.regions.len() + 1];
        engine
    }

    /// Partitions, lowers and compiles every region as `code` says; returns
    /// their instructions.
    fn build_regions(&mut self, code: RegionCode) -> usize {
        let plan = self.signed.clone();
        let t0 = Instant::now();
        let fused = Arc::new(FusedPlan::new(plan.clone()));
        self.stats.plan_time += t0.elapsed();
        let t1 = Instant::now();
        let compiled_before = self.stats.compile_time;
        let lowered: Vec<LoweredRegion> = fused
            .regions
            .iter()
            .map(|body| lower_region(&plan, body))
            .collect();
        let insts: usize = lowered
            .iter()
            .map(|l| l.program.layout.insts.iter().map(Vec::len).sum::<usize>())
            .sum();
        let native = match code {
            RegionCode::Quickened => false,
            RegionCode::Native => true,
            RegionCode::NativeUpTo(most) => insts <= most,
        };
        let kernels = self.compile(&lowered, native);
        self.stats.lowering_time += t1.elapsed() - (self.stats.compile_time - compiled_before);
        self.regions = lowered
            .into_iter()
            .zip(kernels)
            .map(|(lowered, kernel)| RegionRuntime::new(lowered, kernel))
            .collect();
        self.fused = Some(fused);
        insts
    }

    /// Lowers the whole row (the kernel's part of `split`) to one program.
    /// One program serves rows and batches: it reads the inputs from its
    /// frame's input lanes (the current row, or a batch's columns).
    fn lower_whole(&mut self, split: &WholeSplit) -> LoweredRegion {
        let t1 = Instant::now();
        let lowered = crate::fusion::lower::lower_whole_in(
            &self.signed,
            crate::fusion::lower::WholeEnv::Arena,
            false,
            split,
        );
        self.stats.lowering_time += t1.elapsed();
        lowered
    }

    /// Compiles the whole-row program (`lowered`, or else lowered here
    /// from the kernel's part of `split`), natively if asked.
    fn build_whole(&mut self, split: WholeSplit, lowered: Option<LoweredRegion>, native: bool) {
        let lowered = lowered.unwrap_or_else(|| self.lower_whole(&split));
        let t1 = Instant::now();
        let compiled_before = self.stats.compile_time;
        // The batch kernel waits for the first batch (`ensure_batch_kernel`).
        let kernel = self
            .compile(std::slice::from_ref(&lowered), native)
            .remove(0);
        self.install_whole(split, lowered, kernel);
        self.stats.lowering_time += t1.elapsed() - (self.stats.compile_time - compiled_before);
    }

    /// Makes `kernel`, compiled from `lowered`, the whole-row kernel.
    fn install_whole(&mut self, split: WholeSplit, lowered: LoweredRegion, kernel: Kernel) {
        let plan = &self.signed;
        // The batch kernel runs many rows in one call, with no way to run
        // a tail between them.
        let native = matches!(kernel, Kernel::Native(_));
        // Nor has a program too long for one Cranelift function
        // (`jit::fits_one_function`): its row kernel calls it in chunks,
        // and its batches run row by row on that.
        let batch = BatchKernels::new(
            &lowered.program,
            native && !split.has_tail() && jit::fits_one_function(&lowered.program),
        );
        let flag_nodes = (0..plan.nodes.len() as u32)
            .map(crate::plan::NodeId)
            .filter(|&n| {
                split.kernel_nodes[n.index()]
                    && matches!(
                        plan.node(n).op,
                        crate::plan::NodeOp::Call(
                            crate::lang::ast::Builtin::When
                                | crate::lang::ast::Builtin::Init
                                | crate::lang::ast::Builtin::Update
                        )
                    )
            })
            .collect();
        self.whole = Some(WholeRuntime {
            rt: RegionRuntime::new(lowered, kernel),
            batch,
            // One lane more than the inputs: the step, for the warm-up form
            // of the kernel on packed runs.
            input_lanes: vec![0; plan.spec.inputs.len() + 1],
            input_tags: vec![0; plan.spec.inputs.len() + 1],
            flag_nodes,
            split,
        });
    }

    /// Compiles programs to row kernels: quickened, or native with the
    /// quickened tier for any program the JIT declines (no batch kernels:
    /// regions run row by row, and the whole-row program's batch kernel
    /// waits for the first batch, `ensure_batch_kernel`).
    /// Every program is verified before it can run (both compilers verify).
    fn compile(&mut self, programs: &[LoweredRegion], native: bool) -> Vec<Kernel> {
        let quick = |l: &LoweredRegion| {
            let code = QuickCode::compile(&l.program)
                .unwrap_or_else(|e| panic!("engine bug: a lowered program does not verify: {e}"));
            Kernel::Quick(code)
        };
        if !native {
            return programs.iter().map(quick).collect();
        }
        let t0 = Instant::now();
        let mut module = match jit::JitModule::new() {
            Ok(m) => m,
            Err(e) => {
                self.stats
                    .compile_declines
                    .push(format!("no JIT module: {e}"));
                return programs.iter().map(quick).collect();
            }
        };
        let progs: Vec<&scalar_ir::Program> = programs.iter().map(|l| &l.program).collect();
        let handles: Vec<Option<jit::FuncHandle>> = module
            .compile_rows(&progs)
            .into_iter()
            .enumerate()
            .map(|(i, compiled)| match compiled {
                Ok(h) => Some(h),
                Err(e) => {
                    self.stats
                        .compile_declines
                        .push(format!("program {i}: {e}"));
                    None
                }
            })
            .collect();
        let code = match module.finalize() {
            Ok(code) => code,
            Err(e) => {
                self.stats.compile_declines.push(format!("finalize: {e}"));
                return programs.iter().map(quick).collect();
            }
        };
        let kernels = programs
            .iter()
            .zip(&handles)
            .map(|(l, h)| match h {
                Some(h) => Kernel::Native(code.func(*h).row_fn()),
                None => quick(l),
            })
            .collect();
        self.stats.compile_time += t0.elapsed();
        self.note_largest(&code);
        self.native.push(shared(code));
        kernels
    }

    /// Records the largest function of newly compiled `code`.
    fn note_largest(&mut self, code: &jit::NativeCode) {
        self.stats.largest_function = self.stats.largest_function.max(code.largest_function());
    }

    /// An engine running the same compiled code as this one (its native
    /// code shared, not compiled again; interpreted programs copied), with
    /// counters of its own: for another thread's runs of the same plan.
    /// Build times are this engine's (the code was built once for both).
    pub fn share(&self) -> Engine {
        let mut stats = ExecStats {
            plan_time: self.stats.plan_time,
            lowering_time: self.stats.lowering_time,
            compile_time: self.stats.compile_time,
            compile_declines: self.stats.compile_declines.clone(),
            largest_function: self.stats.largest_function,
            ..ExecStats::default()
        };
        stats.history_declines = vec![0; self.regions.len() + 1];
        Engine {
            plan: self.plan.clone(),
            signed: self.signed.clone(),
            requested: self.requested,
            speculation: self.speculation.clone(),
            fused: self.fused.clone(),
            regions: self.regions.clone(),
            whole: self.whole.clone(),
            packed: self.packed.clone(),
            stats,
            tier: self.tier,
            why: self.why.clone(),
            tier_up: self.tier_up.clone(),
            tier_up_after: self.tier_up_after,
            regions_tier: self.regions_tier,
            native: self.native.clone(),
        }
    }

    #[inline]
    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    /// Also builds the native regions of the plan on the native-whole tier,
    /// so that a row the whole-row kernel declines runs its regions rather
    /// than every stream canonically: a keyed monitor, whose every key
    /// starts with rows the kernel cannot take (its history filling), asks
    /// for this before making any run (the runs' promotion bits cover the
    /// regions too).
    pub fn add_decline_regions(&mut self) {
        if self.tier == Tier::NativeWhole && self.fused.is_none() {
            // `auto` compiles them natively only while that is cheap: they
            // run a key's first rows only (its history filling), and on a
            // spec of thousands of regions Cranelift took seconds for them
            // (10,000 accumulators: 3.6 s of a 3.6 s native compile, where
            // the canonical tier builds in 0.15 s).
            let code = match self.requested {
                Tier::Auto => RegionCode::NativeUpTo(AUTO_NATIVE_DECLINE_INSTS),
                _ => RegionCode::Native,
            };
            let insts = self.build_regions(code);
            if let RegionCode::NativeUpTo(most) = code
                && insts > most
            {
                self.why = format!(
                    "{}; the regions for keys' first rows have {insts} instructions, more than \
                     auto compiles natively for them ({most}), so they run on the register \
                     interpreter",
                    self.why
                );
            }
            // The whole-row kernel's count stays last.
            let whole = self.stats.history_declines.pop().unwrap_or(0);
            self.stats.history_declines = vec![0; self.regions.len()];
            self.stats.history_declines.push(whole);
        }
    }

    /// Compiles the whole-row kernel a second time, onto runs packed with
    /// `layout` (a keyed monitor's), if this engine runs native-whole with
    /// a native kernel; otherwise, or if Cranelift declines it, packed runs
    /// are unpacked for every row as before (`run_packed_row` says no).
    pub fn compile_packed(&mut self, layout: &crate::canonical::pack::PackLayout) {
        use crate::fusion::lower::{WholeEnv, lower_whole_in, warm_up_eligible};
        let Some(w) = &self.whole else { return };
        if !matches!(w.rt.kernel, Kernel::Native(_)) {
            return;
        }
        let split = &w.split;
        assert!(
            !split.has_tail(),
            "engine bug: a keyed monitor's kernel has a tail"
        );
        let index = layout.persist_index(self.plan.slot_count());
        let len = layout.persist_len() as u32;
        let t0 = Instant::now();
        let env = WholeEnv::Packed { index: &index, len };
        let mut programs = vec![lower_whole_in(&self.plan, env, false, split)];
        if warm_up_eligible(&self.plan) {
            programs.push(lower_whole_in(&self.plan, env, true, split));
        }
        let parts = layout.frame_parts();
        let inputs = self.plan.spec.inputs.len();
        // What `run_packed_row`'s frame relies on, once: the block holds every
        // lane the programs declare, and the row lanes every input (and the
        // step, for the warm-up form).
        for (warm, l) in programs.iter().enumerate() {
            let decl = &l.program.decl;
            assert!(
                decl.env as usize <= layout.persist_len()
                    && decl.state as usize <= parts.ring_len
                    && decl.windows as usize <= parts.window_words
                    && decl.inputs as usize == inputs + warm
                    && layout.len().is_multiple_of(8),
                "engine bug: a packed kernel declares more than its block holds"
            );
        }
        let compiled = jit::JitModule::new().and_then(|mut module| {
            let handles = programs
                .iter()
                .map(|l| module.compile_row(&l.program))
                .collect::<Result<Vec<_>, _>>()?;
            let code = module.finalize()?;
            let kernels: Vec<jit::RowFn> = handles.iter().map(|&h| code.func(h).row_fn()).collect();
            Ok((kernels, code))
        });
        match compiled {
            Ok((kernels, code)) => {
                self.note_largest(&code);
                let rings = self
                    .plan
                    .offset_nodes
                    .iter()
                    .map(|&id| {
                        let node = self.plan.node(id);
                        let crate::plan::NodeOp::Offset(n) = node.op else {
                            unreachable!("offset_nodes holds offsets")
                        };
                        let ty = crate::fusion::scalar_type(node.sig)
                            .expect("whole-row plans are scalar");
                        (node.ring_base, n, tag_of(ty))
                    })
                    .collect();
                self.packed = Some(PackedRuntime {
                    kernel: kernels[0],
                    warm: kernels.get(1).copied(),
                    rings,
                    parts,
                    words: layout.len() / 8,
                    _code: shared(code),
                });
            }
            Err(e) => self
                .stats
                .compile_declines
                .push(format!("whole-row kernel on packed runs: {e}")),
        }
        self.stats.compile_time += t0.elapsed();
    }

    /// Evaluates one row on a packed run in place (`block`, packed with the
    /// layout given to `compile_packed`), with the whole-row kernel on
    /// packed runs: the promoted one, or, in a run's first steps, the
    /// warm-up form (`fusion::lower::warm_up_eligible`) if the plan has one
    /// and every ring entry written so far is a value of its ring's type.
    /// Returns whether a kernel completed the row. When none did — there is
    /// no such kernel, the run is not ready for it, or it declined or
    /// trapped — nothing is counted, and the caller must unpack the block
    /// and run the row with `run_row`, which redoes whatever the kernel
    /// stored before it stopped (every slot it stores is evaluated again
    /// before any read) and decides what the row is.
    pub(crate) fn run_packed_row(
        &mut self,
        block: &mut [u64],
        row: &[Option<Value>],
        time: Option<crate::time::Time>,
    ) -> bool {
        let whole = self.whole_index();
        let (Some(p), Some(w)) = (&self.packed, &mut self.whole) else {
            return false;
        };
        assert_eq!(
            block.len(),
            p.words,
            "engine bug: a block of another layout"
        );
        let step = block[0];
        // The run's promotion bit for the whole-row kernel, and whether the
        // kernel has set the builtin flags (`Run::pack`'s owner bytes). A run
        // promoted on `run_row`'s path has had both since its first kernel
        // row there, so the kernel here has no flags to set.
        let promoted = owner_bytes_promoted(block, &p.parts, whole);
        let kernel = match (promoted, p.warm) {
            (true, _) => p.kernel,
            (false, Some(warm)) if step < w.rt.ready_at && p.written_rings_hold_values(block) => {
                warm
            }
            _ => return false,
        };
        // The row in frame form; a value without one (which fails the row
        // guard) is `OTHER`, as its encoding would be. The warm-up form reads
        // the step from the lane after the inputs.
        for ((t, lane), cell) in w.input_tags.iter_mut().zip(&mut w.input_lanes).zip(row) {
            (*t, *lane) = match cell {
                Some(v) => crate::canonical::scalar_form(v).unwrap_or((tag::OTHER, 0)),
                None => (tag::ABSENT, 0),
            };
        }
        let n = self.plan.spec.inputs.len();
        w.input_lanes[n] = step;
        w.input_tags[n] = tag::I64;
        let base = block.as_mut_ptr();
        let mut frame = Frame {
            inputs: w.input_lanes.as_ptr(),
            input_tags: w.input_tags.as_ptr(),
            // SAFETY: each offset lies inside `block` (its length is checked
            // above against the layout the kernel was compiled for, whose
            // parts `frame_parts` gives); the pointers are derived from one
            // exclusive borrow and used only during the call below.
            env: unsafe { base.add(p.parts.lanes_word) },
            // SAFETY: as above (a byte offset inside the block).
            env_tags: unsafe { base.cast::<u8>().add(p.parts.tags_byte) },
            // SAFETY: as above.
            state: unsafe { base.add(p.parts.ring_word) },
            step,
            status: 0,
            // SAFETY: as above (the windows' words end the block).
            windows: unsafe { base.add(p.parts.windows_word) },
            // SAFETY: as above (a byte offset inside the block: the held
            // tags follow the tags, one per persistent slot).
            held_tags: unsafe { base.cast::<u8>().add(p.parts.held_byte) },
            // The row's time, as `frame_on` gives it.
            time: time.map_or(0, |t| t.0),
            timed: u64::from(time.is_some()),
        };
        // SAFETY: the kernels declare as many inputs as the row lanes hold
        // (one more, the step, for the warm-up form), at most the block's
        // persistent slots as environment and at most its ring table as
        // state (`compile_packed` asserted all three); the ring table is
        // whole in a packed run, and the promoted kernel reads only rings
        // found full of values, the warm-up form only entries written so far
        // (checked above); the native code lives as long as the engine.
        let word = unsafe { kernel(&mut frame) };
        if Exit::decode(word) != Some(Exit::Return) {
            return false;
        }
        if promoted {
            // The kernel pushed the rings itself (the tick barrier).
            block[0] = step + 1;
        } else {
            // The warm-up form pushed values over ⊥ or over values: the
            // barrier's bookkeeping (entry tags, per-ring counts), then the
            // flags, which fire on a row whose every value is real, and the
            // promotion once every ring is full of values.
            p.commit_warm_row(block, step, whole);
            self.stats.warm_rows += 1;
        }
        self.stats.rows += 1;
        self.stats.whole_rows += 1;
        self.stats.packed_rows += 1;
        true
    }

    pub fn fused(&self) -> Option<&Arc<FusedPlan>> {
        self.fused.as_ref()
    }

    /// A run at step 0 (every stream NoVal, empty history).
    pub fn new_run(&self) -> Run {
        Run::from_state(self, NodeState::new(&self.plan))
    }

    /// The index of the whole-row kernel in `Run::promoted`.
    fn whole_index(&self) -> usize {
        self.regions.len()
    }

    /// Speculation on untyped inputs, as `--stats` says it (see
    /// `Speculation`), if the plan has any and a fused tier runs.
    pub fn describe_speculation(&self) -> Option<String> {
        (self.speculation.as_ref()).map(|s| s.describe(&self.plan, self.stats.rows))
    }

    /// Takes in a row's input tags for speculation (`Speculation`), and
    /// rebuilds the programs when it begins or is given up. The run stays as
    /// it is (the re-signed plan has the same slots and rings); only its
    /// promotion bits start over.
    #[cold]
    fn speculate(&mut self, run: &mut Run, tag_of: impl Fn(usize) -> u8) {
        let Some(mut spec) = self.speculation.take() else {
            return;
        };
        let signed = match spec.observe(&self.plan, self.stats.rows, tag_of) {
            SpeculationStep::Nothing => None,
            SpeculationStep::Speculate(sigs) => Some(Arc::new(Plan::new(Arc::new(
                self.plan.spec.speculating(&sigs),
            )))),
            SpeculationStep::GiveUp => Some(self.plan.clone()),
        };
        if let Some(signed) = signed {
            debug_assert!(
                signed.slot_count() == self.plan.slot_count()
                    && signed.ring_len == self.plan.ring_len
                    && signed.nodes.len() == self.plan.nodes.len(),
                "engine bug: a re-signed plan is laid out differently"
            );
            let mut fresh = Engine::build(
                self.plan.clone(),
                signed,
                self.requested,
                None,
                self.regions_tier,
            );
            fresh.stats.absorb(&self.stats);
            fresh.tier_up_after = self.tier_up_after;
            *self = fresh;
            run.promoted = Promoted::new(self.regions.len() + 1);
            run.flags_set = false;
        }
        self.speculation = Some(spec);
    }

    /// Evaluates one row given as values (`Monitor::step`, a keyed row).
    pub fn run_row(&mut self, run: &mut Run, row: &[Option<Value>]) -> Result<(), RuntimeError> {
        self.run_cells(run, Cells::Values(row))
    }

    /// The whole-row kernel's short path (`run_whole_fast`) for a row of
    /// values whose frame form the caller wrote as it checked them
    /// (`RowSchema::check_into`: one lane and tag per input, a value with no
    /// scalar form tagged `OTHER`), read where it lies: `true` when the row
    /// is done. Otherwise nothing of the row has run, and it goes to
    /// `run_row_general` as values. The kernel reads the same words it would
    /// have read from the engine's input lanes (`WholeRuntime::inputs`).
    #[inline]
    pub fn run_row_fast(&mut self, run: &mut Run, (lanes, tags): (&[u64], &[u8])) -> bool {
        let inputs = self.plan.spec.inputs.len();
        // The kernel reads one lane and tag per input through the pointers.
        assert!(
            lanes.len() == inputs && tags.len() == inputs,
            "engine bug: a frame row of another width"
        );
        self.run_whole_fast_on(run, |_| (lanes.as_ptr(), tags.as_ptr()))
    }

    /// `run_row` of a row `run_row_fast` did not complete: the general path
    /// at once, without trying the short one again.
    pub fn run_row_general(
        &mut self,
        run: &mut Run,
        row: &[Option<Value>],
    ) -> Result<(), RuntimeError> {
        self.run_cells_general(run, Cells::Values(row))
    }

    /// Evaluates one row given in frame form, one lane and tag per input
    /// (scalars only: `Monitor::step_scalars`). Inlined into the caller, as
    /// `run_cells`' short path is: a promoted whole-row kernel with nothing
    /// around it reads the row's lanes where they lie and completes the row.
    #[inline]
    pub fn run_row_scalars(
        &mut self,
        run: &mut Run,
        (lanes, tags): (&[u64], &[u8]),
    ) -> Result<(), RuntimeError> {
        let inputs = self.plan.spec.inputs.len();
        assert!(
            lanes.len() == inputs && tags.len() == inputs,
            "engine bug: a scalar row of another width"
        );
        self.run_cells(
            run,
            Cells::Frame {
                lanes,
                tags,
                objects: None,
            },
        )
    }

    /// Evaluates one row, however it is given: every path of a row (values,
    /// scalars, a batch's row the batch kernel did not take) comes here.
    /// The whole-row kernel reads a row in frame form where it is, and one
    /// given as values from the engine's input lanes; the regions and the
    /// canonical tier take it as it is (`NodeState::write_input`).
    /// The short path (`run_whole_fast`) is inlined into the callers; the
    /// rest is out of line.
    #[inline]
    fn run_cells(&mut self, run: &mut Run, row: Cells<'_>) -> Result<(), RuntimeError> {
        if self.run_whole_fast(run, row) {
            return Ok(());
        }
        self.run_cells_general(run, row)
    }

    /// `run_cells` for a row the short path did not complete.
    #[inline(never)]
    fn run_cells_general(&mut self, run: &mut Run, row: Cells<'_>) -> Result<(), RuntimeError> {
        if self.tier_up.is_some() {
            self.poll_tier_up();
        }
        if self.speculation.is_some() {
            self.speculate(run, |k| row.tag(k));
        }
        if let Some(w) = self.whole.as_mut() {
            let inputs = w.inputs(row, self.plan.spec.inputs.len());
            if self.run_whole(run, inputs, row)? {
                return Ok(());
            }
        }
        self.run_row_fused(run, row)
    }

    /// The common row of a whole-row program, kept short: a promoted kernel
    /// with no tail, not watching untyped inputs, completes the row. `false` when the
    /// row is not that case, or the kernel stopped (declined or trapped):
    /// then the row starts again on the general path, which runs the kernel
    /// again and handles its exit (the kernel stores nothing a rerun does
    /// not store again, and pushes its rings only once the row is done).
    #[inline]
    fn run_whole_fast(&mut self, run: &mut Run, row: Cells<'_>) -> bool {
        let n = self.plan.spec.inputs.len();
        self.run_whole_fast_on(run, |w| w.inputs(row, n))
    }

    /// `run_whole_fast` with the row's input lanes and tags given by
    /// `inputs` (called only once the row is known to take the short path;
    /// what it returns points at one lane and tag per input, alive for the
    /// call).
    #[inline(always)]
    fn run_whole_fast_on(
        &mut self,
        run: &mut Run,
        inputs: impl FnOnce(&mut WholeRuntime) -> (*const u64, *const u8),
    ) -> bool {
        if self.tier_up.is_some() {
            self.poll_tier_up();
        }
        let whole = self.regions.len();
        let Some(w) = self.whole.as_mut() else {
            return false;
        };
        let watching = self.speculation.as_ref().is_some_and(Speculation::watching);
        if !run.promoted[whole] || w.split.has_tail() || watching {
            return false;
        }
        let inputs = inputs(w);
        let returned = match &mut w.rt.kernel {
            &mut Kernel::Native(f) => {
                call_native(f, &w.rt, &mut run.state, inputs) == Exit::Return.encode()
            }
            Kernel::Quick(code) => {
                let mut frame = frame_on(&w.rt.lowered.program.decl, &mut run.state, inputs);
                // SAFETY: as in `call_native`: the frame covers what the
                // program declares (checked by `frame_on`), the row lanes
                // hold every input, and promotion found its rings full.
                unsafe { code.run_frame(&mut frame) == Exit::Return }
            }
        };
        if returned {
            whole_row_done(&mut self.stats, run, &w.flag_nodes);
        }
        returned
    }

    /// The frame of a row that `run_fast_row` can complete on the promoted
    /// whole-row kernel, for rows of `lanes.len()` inputs: `None` unless the
    /// kernel is promoted on `run`, has no tail, and speculation is not
    /// watching the inputs (then every row takes the general path).
    /// A `crate::Stepper` makes one after every row the general path ran,
    /// since that row may have moved the run state's vectors.
    pub(crate) fn fast_row(&self, run: &mut Run, lanes: &[u64], tags: &[u8]) -> Option<FastRow> {
        let w = self.whole.as_ref()?;
        let inputs = self.plan.spec.inputs.len();
        let watching = self.speculation.as_ref().is_some_and(Speculation::watching);
        if !run.promoted[self.regions.len()]
            || w.split.has_tail()
            || watching
            || run.failed.is_some()
            || lanes.len() != inputs
            || tags.len() != inputs
        {
            return None;
        }
        // The state's pointers are taken from a mutable borrow, as
        // `frame_on` takes them: the kernel writes through them.
        let frame = frame_on(
            &w.rt.lowered.program.decl,
            &mut run.state,
            (lanes.as_ptr(), tags.as_ptr()),
        );
        Some(FastRow { frame })
    }

    /// Runs one row on the frame `fast_row` made: `true` when the kernel
    /// completed it (the step advanced, as `run_whole_fast` does), `false`
    /// when it declined or trapped, and the row must take the general path
    /// (which runs the kernel again: a stopped kernel stores nothing a rerun
    /// does not store again, and pushes its rings only once the row is done).
    ///
    /// # Safety
    /// `fast` was made by this engine's `fast_row` for `run`, and since then
    /// nothing but this function has touched `run` (so its state's vectors
    /// have not moved or shrunk, the kernel is still promoted and the run has
    /// not failed); `lanes` and `tags` are as long as the lanes and tags
    /// `fast` was made for. `time` is the row's time (`None`: its step's, in
    /// seconds), as `Monitor::step_at` gives one.
    ///
    /// Always inlined into the stepper's step: a call of its own was a sixth of a small
    /// specification's step on the whole-row kernel (the STL plan's `G`), its arguments and
    /// registers saved around it.
    #[inline(always)]
    pub(crate) unsafe fn run_fast_row(
        &mut self,
        run: &mut Run,
        fast: &mut FastRow,
        (lanes, tags): (&[u64], &[u8]),
        time: Option<crate::time::Time>,
    ) -> bool {
        // The swap keeps `fast` valid: it is the program's frame, and the
        // kernel is read below.
        if self.tier_up.is_some() {
            self.poll_tier_up();
        }
        let Some(w) = self.whole.as_mut() else {
            unreachable!("engine bug: a fast row of an engine without a whole-row kernel")
        };
        let frame = &mut fast.frame;
        // The row's pointers are taken afresh from the borrow of this call:
        // the row was written since the last (the stepper's setters).
        frame.inputs = lanes.as_ptr();
        frame.input_tags = tags.as_ptr();
        frame.step = run.state.ring_step();
        frame.status = 0;
        // The row's time, for the kernel's intervals and for whatever reads
        // the state's after it, as `frame_on` and `Monitor::step_at` set them
        // (a plain field: no vector of the state moves).
        run.state.time = time;
        frame.time = time.map_or(0, |t| t.0);
        frame.timed = u64::from(time.is_some());
        let returned = match &mut w.rt.kernel {
            // SAFETY: the frame covers what the program declares (checked
            // by `fast_row`, and the caller promises the state has not
            // changed since), the input lanes hold every input, and
            // promotion found its rings full; the native code is owned by
            // the engine, which outlives the call.
            &mut Kernel::Native(f) => unsafe { f(frame) == Exit::Return.encode() },
            // SAFETY: as above.
            Kernel::Quick(code) => unsafe { code.run_frame(frame) == Exit::Return },
        };
        if returned {
            whole_row_done(&mut self.stats, run, &w.flag_nodes);
        }
        returned
    }

    /// Evaluates one row on the regions and canonically (not the whole-row
    /// kernel).
    fn run_row_fused(&mut self, run: &mut Run, row: Cells<'_>) -> Result<(), RuntimeError> {
        run.state.begin_row(&self.plan, row);
        // The compiled parts are borrowed apart from the counters, so the
        // partition is read in place while the regions run.
        let Engine {
            fused,
            regions,
            stats,
            plan,
            ..
        } = self;
        match fused {
            None => {
                for &s in &plan.schedule {
                    run.state.eval_stream(plan, s)?;
                }
                stats.canonical_streams += plan.schedule.len() as u64;
            }
            Some(fused) => {
                let mut on = Regions {
                    regions,
                    stats,
                    plan,
                };
                for step in &fused.steps {
                    on.run_step(run, &fused.plan, step)?;
                }
            }
        }
        run.state.end_row(&self.plan);
        self.check_promoted_rings(run);
        self.stats.rows += 1;
        Ok(())
    }

    /// Evaluates a tick step of a timed plan: the streams of the periods
    /// `due` (indexed as `Plan::periods`); every other stream is NoVal.
    pub fn run_tick(&mut self, run: &mut Run, due: &[bool]) -> Result<(), RuntimeError> {
        assert!(
            self.plan.is_timed(),
            "engine bug: a tick of a plan without periods"
        );
        run.state.begin_tick(&self.plan, due);
        for &s in &self.plan.schedule {
            run.state.eval_stream(&self.plan, s)?;
        }
        self.stats.canonical_streams += self.plan.schedule.len() as u64;
        run.state.end_row(&self.plan);
        self.stats.rows += 1;
        Ok(())
    }
}

/// The region programs of an engine with its counters, borrowed apart from
/// the partition that says when each runs (`Engine::run_row_fused`).
struct Regions<'e> {
    regions: &'e mut [RegionRuntime],
    stats: &'e mut ExecStats,
    plan: &'e Plan,
}

impl Regions<'_> {
    fn run_step(&mut self, run: &mut Run, plan: &Plan, step: &Step) -> Result<(), RuntimeError> {
        match step {
            Step::StreamRegion { members, region } => {
                if !self.run_region(run, *region)? {
                    for &s in members {
                        run.state.eval_stream(plan, s)?;
                    }
                    self.stats.canonical_streams += members.len() as u64;
                }
            }
            Step::GraphStep {
                stream, actions, ..
            } => {
                for action in actions {
                    match action {
                        Action::Canonical(nodes) => {
                            for &n in nodes {
                                if run.state.eval_node(plan, n).is_err() {
                                    // A canonical run may come before the
                                    // islands of a program it does not read
                                    // (`fusion::graph_step`), so its error
                                    // may not be the stream's first: the
                                    // stream runs again from its start, in
                                    // node order (re-evaluating is
                                    // idempotent), and reports that one.
                                    return run.state.eval_stream(plan, *stream);
                                }
                            }
                        }
                        Action::Region(r) => {
                            if !self.run_region(run, *r)? {
                                // The declined range runs canonically from the
                                // stream's start; re-evaluating the canonical
                                // nodes already run this row is idempotent.
                                self.stats.canonical_streams += 1;
                                return run.state.eval_stream(plan, *stream);
                            }
                        }
                    }
                }
                if !actions.iter().any(|a| matches!(a, Action::Region(_))) {
                    self.stats.canonical_streams += 1;
                }
                run.state.publish_root(plan, *stream);
            }
        }
        Ok(())
    }

    /// Runs one region's program on the arena. `Ok(false)`: it declined and
    /// the caller evaluates its range canonically.
    fn run_region(&mut self, run: &mut Run, r: RegionId) -> Result<bool, RuntimeError> {
        let rt = &mut self.regions[r.index()];
        let no_inputs: (*const u64, *const u8) = (
            std::ptr::NonNull::dangling().as_ptr(),
            std::ptr::NonNull::dangling().as_ptr(),
        );
        let result = run_kernel(
            rt,
            &mut run.promoted[r.index()],
            KernelId::Region(r),
            &mut run.state,
            self.stats,
            self.plan,
            no_inputs,
        );
        if matches!(result, Ok(true)) {
            self.stats.region_runs += 1;
        }
        result
    }
}

impl Engine {
    /// Evaluates the rows of `batch`, writing every printed output of every
    /// row to `out`. On the native-whole tier, runs of promoted rows go
    /// through the batch kernel, one native call for many rows; the row that
    /// stops it (a decline or a trap) and any row before promotion run
    /// through `run_row`. On a runtime error, `out` holds the rows before it.
    pub fn run_batch(
        &mut self,
        run: &mut Run,
        batch: &crate::batch::RowBatch,
        out: &mut crate::batch::OutputBatch,
    ) -> Result<(), RuntimeError> {
        if self.tier_up.is_some() {
            self.poll_tier_up();
        }
        let plan = self.plan.clone();
        let outputs: Vec<u32> = plan.spec.outputs.iter().map(|s| s.0).collect();
        let width = outputs.len();
        out.reset(width, batch.rows);
        // The batch kernel this batch's columns call for, decided (and
        // compiled if need be) once: none when it cannot run (the plan has
        // no batch kernel, or Cranelift declined it), and then every row
        // runs alone without asking again.
        let kernel = self.batch_kernel_for(batch);
        let mut r = 0;
        while r < batch.rows {
            if let Some(guards) = kernel
                && let Some(done) = self.try_batch_kernel(run, batch, r, guards, &outputs, out)
            {
                r += done;
                out.rows = r;
                if r == batch.rows {
                    break;
                }
            }
            // The row that stopped the kernel, or one the kernel cannot take
            // yet, runs alone.
            self.run_cells(run, batch.cells(r))?;
            let at = r * width;
            let st = &run.state;
            let cells = (out.tags[at..at + width].iter_mut()).zip(&mut out.lanes[at..at + width]);
            for (c, ((t, lane), &slot)) in cells.zip(&outputs).enumerate() {
                (*t, *lane) = st.frame_cell(Slot(slot));
                if *t == tag::OTHER {
                    out.objects
                        .set(at + c, st.objects.get(slot as usize).cloned());
                }
            }
            r += 1;
            out.rows = r;
        }
        Ok(())
    }

    /// Which batch kernel runs `batch` (`BatchKernels::guards_for`),
    /// compiled now if it waits for its first batch; `None` when there is
    /// none to run.
    fn batch_kernel_for(&mut self, batch: &crate::batch::RowBatch) -> Option<Guards> {
        let guards = self.whole.as_ref()?.batch.guards_for(batch);
        self.ensure_batch_kernel(guards);
        let w = self.whole.as_mut()?;
        matches!(w.batch.get_mut(guards), BatchKernel::Ready(_)).then_some(guards)
    }

    /// Compiles every batch kernel the whole-row program may use (see
    /// `BatchKernels`) that waits for its first batch.
    pub fn ensure_batch_kernels(&mut self) {
        self.ensure_batch_kernel(Guards::Checked);
        if self
            .whole
            .as_ref()
            .is_some_and(|w| !w.batch.guards.is_empty())
        {
            self.ensure_batch_kernel(Guards::Known);
        }
    }

    /// Compiles one of the whole-row program's batch kernels, once, if it
    /// waits for its first batch (a module of its own, freed with the
    /// engine).
    fn ensure_batch_kernel(&mut self, guards: Guards) {
        let Some(w) = self.whole.as_mut() else { return };
        if !matches!(w.batch.get_mut(guards), BatchKernel::Deferred) {
            return;
        }
        let t0 = Instant::now();
        let unguarded;
        let program = match guards {
            Guards::Checked => &w.rt.lowered.program,
            Guards::Known => {
                unguarded = w.rt.lowered.program.without_input_guards();
                &unguarded
            }
        };
        // Compiled for the outputs `run_batch` asks for, so that the kernel
        // may keep what it stores in registers across rows.
        let outputs: Vec<u32> = self.plan.spec.outputs.iter().map(|s| s.0).collect();
        let compiled = jit::JitModule::new().and_then(|mut module| {
            let h = module.compile_for_outputs(program, &outputs)?;
            let code = module.finalize()?;
            Ok((code.func(h).batch_kernel(), code))
        });
        *w.batch.get_mut(guards) = match compiled {
            Ok((Some(f), code)) => {
                self.stats.largest_function =
                    self.stats.largest_function.max(code.largest_function());
                self.native.push(shared(code));
                BatchKernel::Ready(f)
            }
            Ok((None, _)) => unreachable!("`compile` makes the batch kernel"),
            Err(e) => {
                self.stats
                    .compile_declines
                    .push(format!("batch kernel: {e}"));
                BatchKernel::Unavailable
            }
        };
        self.stats.compile_time += t0.elapsed();
    }

    /// Runs the batch kernel from row `start`, if there is one and its state
    /// is promoted; returns how many rows it completed.
    fn try_batch_kernel(
        &mut self,
        run: &mut Run,
        batch: &crate::batch::RowBatch,
        start: usize,
        guards: Guards,
        outputs: &[u32],
        out: &mut crate::batch::OutputBatch,
    ) -> Option<usize> {
        let whole = self.whole_index();
        let w = self.whole.as_mut()?;
        let BatchKernel::Ready(kernel) = w.batch.get_mut(guards) else {
            return None;
        };
        if batch.width != self.plan.spec.inputs.len()
            || !promote(&w.rt, &mut run.promoted[whole], &run.state, &mut self.stats)
        {
            return None;
        }
        let st = &mut run.state;
        assert_frame_fits(st, &w.rt.lowered.program.decl);
        let width = outputs.len();
        let mut bf = scalar_ir::frame::BatchFrame {
            frame: Frame {
                inputs: std::ptr::NonNull::dangling().as_ptr(),
                input_tags: std::ptr::NonNull::dangling().as_ptr(),
                env: st.lanes.as_mut_ptr(),
                env_tags: st.tags.as_mut_ptr(),
                state: st.ring_lanes.as_mut_ptr(),
                step: st.step,
                status: 0,
                windows: st.windows.as_mut_ptr(),
                held_tags: st.held_tags.as_mut_ptr(),
                // A batch's rows have no time (`Monitor::run_batch`): each
                // reads its step's.
                time: 0,
                timed: 0,
            },
            rows: (batch.rows - start) as u64,
            in_lanes: batch.lanes[start * batch.width..].as_ptr(),
            in_tags: batch.tags[start * batch.width..].as_ptr(),
            in_stride: batch.width as u64,
            out_lanes: out.lanes[start * width..].as_mut_ptr(),
            out_tags: out.tags[start * width..].as_mut_ptr(),
            out_slots: outputs.as_ptr(),
            n_out: width as u64,
            done: 0,
        };
        // SAFETY: the batch program declares `inputs` = the batch's width,
        // `env` = the arena vectors' length and `state` = `plan.ring_len`,
        // the ring vectors' length once promotion found every ring full; the input
        // and output slices cover the remaining rows; output slots are arena
        // slots, and exactly those the kernel was compiled for (`outputs`
        // above and in `ensure_batch_kernel` are both the plan's outputs);
        // a kernel without input guards runs only a batch whose guarded
        // columns hold their guards' tags on every row (`guards_for`).
        // The native code lives as long as the engine.
        unsafe { kernel.run(&mut bf) };
        let done = bf.done as usize;
        assert_eq!(
            bf.frame.step,
            st.step + done as u64,
            "engine bug: the batch kernel's step is not its rows"
        );
        run.kernel_rows_done(done as u64, &w.flag_nodes);
        self.stats.whole_rows += done as u64;
        self.stats.batch_rows += done as u64;
        if guards == Guards::Known {
            self.stats.typed_batch_rows += done as u64;
        }
        self.stats.rows += done as u64;
        Some(done)
    }

    /// Runs the whole-row kernel on a row in frame form: `inputs` points at
    /// one lane and one tag per input of the plan (`row`'s); then the tail,
    /// if the kernel leaves one, canonically, with the tail's inputs from
    /// `row`. `Ok(true)`: the row is done.
    /// `Ok(false)`: the kernel declined, is demoted (a canonical row may
    /// push ⊥ into a ring, so it promotes afresh), and the row runs on the
    /// regions and canonically.
    fn run_whole(
        &mut self,
        run: &mut Run,
        inputs: (*const u64, *const u8),
        row: Cells<'_>,
    ) -> Result<bool, RuntimeError> {
        let whole = self.whole_index();
        let w = self
            .whole
            .as_mut()
            .expect("run_whole needs a whole-row kernel");
        let result = run_kernel(
            &mut w.rt,
            &mut run.promoted[whole],
            KernelId::Whole,
            &mut run.state,
            &mut self.stats,
            &self.plan,
            inputs,
        );
        let has_tail = w.split.has_tail();
        // Only a tail that pushes rings can push a ⊥ a region reads.
        let tail_pushes = !w.split.tail_rings.is_empty();
        let result = match result {
            Ok(true) if has_tail => {
                run_tail(&self.plan, &w.split, &mut run.state, row, None).map(|n| {
                    self.stats.canonical_streams += n;
                    true
                })
            }
            Err(e) if has_tail => {
                Err(
                    run_tail(&self.plan, &w.split, &mut run.state, row, Some(&e))
                        .err()
                        .unwrap_or(e),
                )
            }
            other => other,
        };
        match result {
            Ok(true) => {
                run.kernel_rows_done(1, &w.flag_nodes);
                self.stats.whole_rows += 1;
                self.stats.rows += 1;
                // The tail is canonical: it may push ⊥ into a ring that a
                // promoted region of the declined rows reads, which must then
                // be demoted as after any canonical row. A tail that pushes
                // no ring (the §9 example's Str copy) leaves every ring as
                // the kernel pushed it: scalars of its readers' types.
                if tail_pushes {
                    self.check_promoted_rings(run);
                }
            }
            Ok(false) => run.promoted[whole] = false,
            Err(_) => {}
        }
        result
    }

    /// After the barrier: a ring that received a value its readers cannot
    /// take (⊥, or another representation) demotes them.
    #[inline]
    fn check_promoted_rings(&mut self, run: &mut Run) {
        if !self.regions.is_empty() {
            self.check_promoted_region_rings(run);
        }
    }

    /// `check_promoted_rings` of an engine with regions.
    #[inline(never)]
    fn check_promoted_region_rings(&mut self, run: &mut Run) {
        let step = run.state.step - 1;
        for (rt, promoted) in self.regions.iter().zip(run.promoted.iter_mut()) {
            if *promoted {
                let bad = rt.lowered.rings.iter().any(|&(base, len, ty)| {
                    let k =
                        (base as u64 + crate::canonical::ring_entry(step, u64::from(len))) as usize;
                    run.state.ring_tags[k] != tag_of(ty)
                });
                if bad {
                    *promoted = false;
                    self.stats.materializations += 1;
                }
            }
        }
    }

    /// Describes the decline counters for `--stats`.
    pub fn describe_declines(&self) -> Vec<(String, u64)> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        let history = self.stats.history_declines.iter().enumerate();
        let history = history.filter(|(_, n)| **n > 0).map(|(i, &n)| {
            let kernel = match i < self.regions.len() {
                true => KernelId::Region(RegionId(i as u32)),
                false => KernelId::Whole,
            };
            ((kernel, Decline::History), n)
        });
        let counted = self.stats.declines.iter().map(|(&k, &n)| (k, n));
        for ((kernel, why), n) in counted.chain(history) {
            let what = match why {
                Decline::History => "offset history not yet filled (promotion failed)".to_string(),
                Decline::TrapInArm => {
                    "trap inside an if arm (the canonical tier decides)".to_string()
                }
                Decline::Read { read, .. }
                | Decline::Unheld { read }
                | Decline::EmptyWindow { read } => {
                    let lowered = match kernel {
                        KernelId::Whole => {
                            &self.whole.as_ref().expect("a whole-row kernel").rt.lowered
                        }
                        KernelId::Region(r) => &self.regions[r.index()].lowered,
                    };
                    let (slot, ty) = lowered.reads[read as usize];
                    let state = match why {
                        Decline::Unheld { .. } => "absent, never had a value".to_string(),
                        Decline::EmptyWindow { .. } => {
                            "absent, its window empty (a read of ⊥)".to_string()
                        }
                        Decline::Read {
                            seen: tag::ABSENT, ..
                        } => "absent".to_string(),
                        Decline::Read {
                            seen: tag::DEFERRED,
                            ..
                        } => "deferred".to_string(),
                        _ => format!("not {ty}"),
                    };
                    format!("`{}` {state}", self.slot_name(slot))
                }
            };
            let who = match kernel {
                KernelId::Whole => "row".to_string(),
                KernelId::Region(r) => format!("r{}", r.0),
            };
            *out.entry(format!("{who}: {what}")).or_default() += n;
        }
        out.into_iter().collect()
    }

    /// The name of an arena slot: a stream, or a node of a stream.
    pub fn slot_name(&self, slot: Slot) -> String {
        let plan = &self.plan;
        let streams = plan.spec.streams.len() as u32;
        if slot.0 < streams {
            plan.stream_name(crate::lang::check::StreamId(slot.0))
                .to_string()
        } else {
            let n = plan.node_slots.iter().position(|&s| s == slot).unwrap_or(0);
            let node = plan.node(crate::plan::NodeId(n as u32));
            format!("{} (node n{n})", plan.stream_name(node.stream))
        }
    }

    /// The whole-row program, on the native-whole tier (for `explain`).
    pub fn whole_lowered(&self) -> Option<&LoweredRegion> {
        self.whole.as_ref().map(|w| &w.rt.lowered)
    }

    /// How the whole-row kernel divides the plan (for `explain`), on the
    /// native-whole tier.
    pub fn whole_split(&self) -> Option<&WholeSplit> {
        self.whole.as_ref().map(|w| &w.split)
    }

    /// Which code runs region `r` (for `explain`): `native` when Cranelift
    /// compiled it, `quickened` otherwise (the quickened tier, or a region the
    /// JIT declined).
    pub fn region_backend(&self, r: usize) -> &'static str {
        match self.regions.get(r).map(|rt| &rt.kernel) {
            Some(Kernel::Native(_)) => "native",
            _ => "quickened",
        }
    }

    /// The lowered regions (for `explain`).
    pub fn lowered(&self) -> impl Iterator<Item = &LoweredRegion> {
        self.regions.iter().map(|r| &r.lowered)
    }
}

/// Evaluates the tail of a whole-row kernel's row canonically (see
/// `WholeSplit`): its inputs from `row`, its streams in schedule order,
/// then its rings (the kernel pushed its own). Returns how many streams it
/// evaluated. After a kernel trap (`trapped`), only the tail streams
/// scheduled before the trapping stream run, and their first error, if
/// any, is the row's: every tier reports the first error in schedule order.
fn run_tail(
    plan: &Plan,
    split: &WholeSplit,
    st: &mut NodeState,
    row: Cells<'_>,
    trapped: Option<&RuntimeError>,
) -> Result<u64, RuntimeError> {
    for &k in &split.tail_inputs {
        st.write_input(plan.spec.inputs[k].into(), row, k);
    }
    let before = trapped.map(|e| {
        let s = plan
            .spec
            .stream_by_name(&e.stream)
            .expect("a kernel's trap names a stream of its plan");
        plan.schedule
            .iter()
            .position(|&t| t == s)
            .unwrap_or(usize::MAX)
    });
    let mut ran = 0;
    for &s in &split.tail {
        if let Some(at) = before
            && plan.schedule.iter().position(|&t| t == s) > Some(at)
        {
            break;
        }
        st.eval_stream(plan, s)?;
        ran += 1;
    }
    if trapped.is_none() {
        st.end_tail_row(plan, &split.tail_rings);
    }
    Ok(ran)
}

/// How the engine's reason for native-whole ends: nothing when the kernel
/// computes every stream, else which streams the canonical tier evaluates
/// after it, and why the first is left out.
fn describe_split(plan: &Plan, split: &WholeSplit) -> String {
    let left: Vec<StreamId> = split.left_out(plan).collect();
    let Some(&first) = left.first() else {
        return String::new();
    };
    let names: Vec<String> = left
        .iter()
        .map(|&s| format!("`{}`", plan.stream_name(s)))
        .collect();
    format!(
        "; the canonical tier takes {} after the kernel ({})",
        names.join(", "),
        split.why(first).unwrap_or("not scalar")
    )
}

/// Checks, before native code gets raw pointers into the run state, that
/// the arena and the ring table are as long as the program declares. Promotion
/// guarantees it (a promoted program's rings are full, and full rings are a
/// prefix of the table); this one comparison per call turns a broken guarantee
/// into an engine-bug panic instead of an out-of-bounds access.
#[inline]
fn assert_frame_fits(st: &NodeState, decl: &scalar_ir::Decl) {
    assert!(
        st.lanes.len() >= decl.env as usize
            && st.tags.len() >= decl.env as usize
            && st.held_tags.len() >= decl.env as usize
            && st.ring_lanes.len() >= decl.state as usize
            && st.windows.len() >= decl.windows as usize,
        "engine bug: a program declares more state than the run state holds"
    );
}

/// Promotes (if needed) and runs one kernel on the arena, mapping its
/// exit: `Ok(true)` completed, `Ok(false)` declined, `Err` a trap the
/// canonical tier would report.
#[inline]
fn run_kernel(
    rt: &mut RegionRuntime,
    promoted: &mut bool,
    id: KernelId,
    st: &mut NodeState,
    stats: &mut ExecStats,
    plan: &Plan,
    inputs: (*const u64, *const u8),
) -> Result<bool, RuntimeError> {
    // The hot case, a promoted native kernel completing its row, is kept
    // apart from the rest: promotion and the interpreter
    // (`promote_and_run`), exits other than a return (`kernel_exit`).
    if *promoted && let Kernel::Native(f) = rt.kernel {
        let word = call_native(f, rt, st, inputs);
        if word == Exit::Return.encode() {
            return Ok(true);
        }
        let exit = Exit::decode(word).expect("native code returns words Exit::encode produces");
        return kernel_exit(rt, promoted, id, st, stats, plan, inputs.1, exit);
    }
    promote_and_run(rt, promoted, id, st, stats, plan, inputs)
}

/// Completes a row the whole-row kernel ran to its end (the short paths:
/// `Engine::run_whole_fast`, `Engine::run_fast_row`).
#[inline]
fn whole_row_done(stats: &mut ExecStats, run: &mut Run, flag_nodes: &[crate::plan::NodeId]) {
    run.kernel_rows_done(1, flag_nodes);
    stats.whole_rows += 1;
    stats.rows += 1;
}

/// Calls a native kernel on the arena and returns its exit word.
#[inline]
fn call_native(
    f: jit::RowFn,
    rt: &RegionRuntime,
    st: &mut NodeState,
    inputs: (*const u64, *const u8),
) -> u64 {
    let mut frame = frame_on(&rt.lowered.program.decl, st, inputs);
    // SAFETY: the programs declare `env = plan.slot_count()`, the arena
    // vectors' length (checked just above), and `state` = the end of their
    // last ring, which promotion found in the ring table (its vectors hold
    // every full ring, and rings fill in layout order), and as many input
    // lanes as `inputs` points at (none for regions, which read inputs from
    // the arena; the row for the whole-row kernel); nothing else touches
    // them during the call. The native code is owned by the engine, which
    // outlives the call.
    unsafe { f(&mut frame) }
}

/// The frame of a kernel's call on the arena (after checking that the
/// arena holds what the program declares; see `call_native`).
#[inline]
fn frame_on(
    decl: &scalar_ir::Decl,
    st: &mut NodeState,
    (inputs, input_tags): (*const u64, *const u8),
) -> Frame {
    assert_frame_fits(st, decl);
    Frame {
        inputs,
        input_tags,
        env: st.lanes.as_mut_ptr(),
        env_tags: st.tags.as_mut_ptr(),
        state: st.ring_lanes.as_mut_ptr(),
        step: st.ring_step(),
        status: 0,
        windows: st.windows.as_mut_ptr(),
        held_tags: st.held_tags.as_mut_ptr(),
        // An interval reads the row's time, as the canonical tier does
        // (`window::time_at`: the row's, else the step's).
        time: st.time.map_or(0, |t| t.0),
        timed: u64::from(st.time.is_some()),
    }
}

/// `run_kernel` for every case but a promoted native kernel: promotion,
/// then the kernel (the interpreter's every row).
#[inline]
fn promote_and_run(
    rt: &mut RegionRuntime,
    promoted: &mut bool,
    id: KernelId,
    st: &mut NodeState,
    stats: &mut ExecStats,
    plan: &Plan,
    (inputs, input_tags): (*const u64, *const u8),
) -> Result<bool, RuntimeError> {
    if !promote(rt, promoted, st, stats) {
        let i = match id {
            KernelId::Region(r) => r.index(),
            KernelId::Whole => stats.history_declines.len() - 1,
        };
        stats.history_declines[i] += 1;
        return Ok(false);
    }
    let exit = match &mut rt.kernel {
        // Regions read inputs from the arena: the interpreter runs on the
        // state's vectors directly.
        Kernel::Quick(code) if code.decl().inputs == 0 => {
            let at = st.ring_step();
            code.run_slices(
                &mut st.lanes,
                &mut st.tags,
                &mut st.held_tags,
                &mut st.ring_lanes,
                &mut st.windows,
                at,
                st.time.map(|t| t.0),
            )
        }
        kernel => {
            let mut frame = frame_on(&rt.lowered.program.decl, st, (inputs, input_tags));
            // SAFETY: as in `call_native`: the frame covers what the
            // program declares, and nothing else touches it during the
            // call.
            unsafe { kernel.run(&mut frame) }
        }
    };
    kernel_exit(rt, promoted, id, st, stats, plan, input_tags, exit)
}

/// Maps a kernel's exit: `Ok(true)` completed, `Ok(false)` declined (and
/// demoted), `Err` a trap the canonical tier would report.
#[allow(clippy::too_many_arguments)]
fn kernel_exit(
    rt: &mut RegionRuntime,
    promoted: &mut bool,
    id: KernelId,
    st: &mut NodeState,
    stats: &mut ExecStats,
    plan: &Plan,
    input_tags: *const u8,
    exit: Exit,
) -> Result<bool, RuntimeError> {
    match exit {
        Exit::Return => Ok(true),
        Exit::Decline(k) => {
            let (slot, ty) = rt.lowered.reads[k as usize];
            // The whole-row kernel reads its inputs from its input lanes.
            let input = match id {
                KernelId::Whole => plan.spec.inputs.iter().position(|&s| Slot::from(s) == slot),
                KernelId::Region(_) => None,
            };
            let seen = match input {
                // SAFETY: `input_tags` covers every input.
                Some(i) => unsafe { *input_tags.add(i) },
                None => st.tags[slot.index()],
            };
            // An absent value declines only when the hold rule has nothing
            // to read: it never had a value of its type.
            let held = match st.tags[slot.index()] {
                tag::ABSENT => st.held_tags[slot.index()],
                t => t,
            };
            let why = if rt.lowered.empty_windows.binary_search(&k).is_ok() {
                Decline::EmptyWindow { read: k }
            } else if seen == tag::ABSENT && held != scalar_ir::frame::tag_of(ty) {
                Decline::Unheld { read: k }
            } else {
                Decline::Read { read: k, seen }
            };
            *stats.declines.entry((id, why)).or_default() += 1;
            demote(rt, promoted, stats);
            Ok(false)
        }
        Exit::Trap(kind, site) => {
            let site = &rt.lowered.sites[site as usize];
            if site.in_arm {
                *stats.declines.entry((id, Decline::TrapInArm)).or_default() += 1;
                demote(rt, promoted, stats);
                return Ok(false);
            }
            let (kind, detail) = match kind {
                TrapKind::Overflow => (ErrorKind::IntegerOverflow, None),
                TrapKind::DivByZero => (ErrorKind::DivisionByZero, None),
                // The canonical tier's error for a full interval, word for
                // word (`window::interval::full_fault`).
                TrapKind::WindowFull => {
                    let cap = match plan.node(site.node).op {
                        NodeOp::Window(w) => {
                            let shape = plan.windows[w.index()].shape;
                            match (shape.interval_window(), shape.since_window()) {
                                (Some(iv), _) => iv.cap,
                                (_, Some(since)) => since.cap,
                                _ => 0,
                            }
                        }
                        _ => 0,
                    };
                    let fault = crate::window::interval::full_fault(cap);
                    (fault.kind, fault.detail)
                }
            };
            Err(RuntimeError {
                kind,
                op: site.op,
                detail,
                stream: plan.stream_name(site.stream).to_string(),
                step: st.step,
            })
        }
    }
}

/// Promotion: a kernel that reads rings runs only once every entry of
/// them holds a defined value of its type. Returns whether it is promoted.
fn promote(rt: &RegionRuntime, promoted: &mut bool, st: &NodeState, stats: &mut ExecStats) -> bool {
    if *promoted {
        return true;
    }
    // Before its rings can be full, no promotion is tried (every key of a
    // keyed monitor starts with such rows).
    if st.ring_step() < rt.ready_at {
        return false;
    }
    let ok = rt
        .lowered
        .rings
        .iter()
        .all(|&(base, len, ty)| st.ring_promotable(base, len, tag_of(ty)));
    if ok {
        *promoted = true;
        if !rt.lowered.rings.is_empty() {
            stats.promotions += 1;
        }
    }
    ok
}

/// A promoted kernel hands its state back to the canonical tier (it is
/// already there: materialization has nothing to copy).
fn demote(rt: &RegionRuntime, promoted: &mut bool, stats: &mut ExecStats) {
    if *promoted && !rt.lowered.rings.is_empty() {
        *promoted = false;
        stats.materializations += 1;
    }
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("regions", &self.regions.len())
            .field("stats", &self.stats)
            .finish()
    }
}
