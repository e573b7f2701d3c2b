//! Execution (DESIGN §5): tier selection, per-row orchestration, guards, promotion, statistics.
//!
//! An `Engine` runs rows of one plan on one tier. On the canonical tier every
//! stream is evaluated by `NodeState`. On the quickened tier the schedule runs
//! step by step through the partition of `fusion::FusedPlan`: each region's
//! program preflights and either computes its streams (or islands) or
//! declines, and a declined region (or graph step) is evaluated canonically
//! from its start. Fused programs work on `NodeState`'s own arena and rings
//! (the frame points at them), so a declined range needs no copying to be
//! "synchronised back", and temporal state never lives anywhere else:
//!
//! - **promotion** is the one fallible step: before a region that reads
//!   offset rings first runs, every entry of those rings must hold a defined
//!   value of the ring's scalar type (while rings still hold ⊥, in the first
//!   rows, the region declines and the row runs canonically);
//! - **materialization** is therefore always trivial: when a promoted region
//!   declines, or the barrier pushes a value the region could not read (⊥)
//!   into one of its rings, the canonical tier already holds the state; the
//!   region is demoted and must be promoted again.
//!
//! The tick barrier (offset rings) is shared by both tiers and runs after the
//! last stream, so a row abandoned midway leaves no trace in temporal state.

pub mod explain;

use crate::canonical::NodeState;
use crate::error::{ErrorKind, RuntimeError};
use crate::fusion::lower::{LoweredRegion, lower_region};
use crate::fusion::{Action, FusedPlan, RegionId, Step};
use crate::plan::Plan;
use crate::value::Value;
use scalar_ir::frame::{Frame, tag, tag_of};
use scalar_ir::{Exit, QuickCode, TrapKind};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Decline reason of a region whose rings are not yet promotable.
const HISTORY_NOT_FILLED: u32 = u32::MAX;
/// Decline reason of a trap inside an `if` arm (the canonical tier decides
/// whether it is an error).
const TRAP_IN_ARM: u32 = u32::MAX - 1;

/// A region's compiled program and its run-time bookkeeping.
struct RegionRuntime {
    lowered: LoweredRegion,
    code: QuickCode,
    promoted: bool,
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
    /// Region runs declined, by (region, reason, tag seen).
    pub declines: BTreeMap<(u32, u32, u8), u64>,
    pub promotions: u64,
    pub materializations: u64,
    pub plan_time: Duration,
    pub lowering_time: Duration,
}

/// Runs rows of one plan on one tier.
pub struct Engine {
    plan: Arc<Plan>,
    fused: Option<Arc<FusedPlan>>,
    regions: Vec<RegionRuntime>,
    pub state: NodeState,
    pub stats: ExecStats,
}

impl Engine {
    /// An engine for the canonical tier.
    pub fn canonical(plan: Arc<Plan>) -> Engine {
        Engine {
            state: NodeState::new(&plan),
            plan,
            fused: None,
            regions: Vec::new(),
            stats: ExecStats::default(),
        }
    }

    /// An engine for the quickened tier: partitions, lowers and compiles
    /// every region once, here, never per row.
    pub fn quickened(plan: Arc<Plan>) -> Engine {
        let t0 = Instant::now();
        let fused = Arc::new(FusedPlan::new(plan.clone()));
        let t1 = Instant::now();
        let regions = fused
            .regions
            .iter()
            .map(|body| {
                let lowered = lower_region(&plan, body);
                let code = QuickCode::compile(&lowered.program).unwrap_or_else(|e| {
                    panic!("engine bug: a lowered region does not verify: {e}")
                });
                RegionRuntime {
                    lowered,
                    code,
                    promoted: false,
                }
            })
            .collect();
        let mut stats = ExecStats {
            plan_time: t1 - t0,
            lowering_time: t1.elapsed(),
            ..ExecStats::default()
        };
        stats.plan_time = t1 - t0;
        Engine {
            state: NodeState::new(&plan),
            plan,
            fused: Some(fused),
            regions,
            stats,
        }
    }

    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    pub fn fused(&self) -> Option<&Arc<FusedPlan>> {
        self.fused.as_ref()
    }

    /// Evaluates one row.
    pub fn run_row(&mut self, row: &[Option<Value>]) -> Result<(), RuntimeError> {
        let plan = self.plan.clone();
        self.state.begin_row(&plan, row);
        match self.fused.clone() {
            None => {
                for &s in &plan.schedule {
                    self.state.eval_stream(&plan, s)?;
                }
                self.stats.canonical_streams += plan.schedule.len() as u64;
            }
            Some(fused) => {
                for step in &fused.steps {
                    self.run_step(&plan, step)?;
                }
            }
        }
        self.state.end_row(&plan);
        self.check_promoted_rings();
        self.stats.rows += 1;
        Ok(())
    }

    fn run_step(&mut self, plan: &Plan, step: &Step) -> Result<(), RuntimeError> {
        match step {
            Step::StreamRegion { members, region } => {
                if !self.run_region(*region)? {
                    for &s in members {
                        self.state.eval_stream(plan, s)?;
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
                                self.state.eval_node(plan, n)?;
                            }
                        }
                        Action::Region(r) => {
                            if !self.run_region(*r)? {
                                // The declined range runs canonically from the
                                // stream's start; re-evaluating the canonical
                                // nodes already run this row is idempotent.
                                self.stats.canonical_streams += 1;
                                return self.state.eval_stream(plan, *stream);
                            }
                        }
                    }
                }
                if !actions.iter().any(|a| matches!(a, Action::Region(_))) {
                    self.stats.canonical_streams += 1;
                }
                self.state.publish_root(plan, *stream);
            }
        }
        Ok(())
    }

    /// Runs one region's program on the arena. `Ok(false)`: it declined and
    /// the caller evaluates its range canonically.
    fn run_region(&mut self, r: RegionId) -> Result<bool, RuntimeError> {
        let rt = &mut self.regions[r.index()];
        if !rt.promoted {
            let st = &self.state;
            let ok = rt.lowered.rings.iter().all(|&(base, len, ty)| {
                st.ring_tags[base as usize..(base + len) as usize]
                    .iter()
                    .all(|&t| t == tag_of(ty))
            });
            if !ok {
                *self
                    .stats
                    .declines
                    .entry((r.0, HISTORY_NOT_FILLED, 0))
                    .or_default() += 1;
                return Ok(false);
            }
            rt.promoted = true;
            if !rt.lowered.rings.is_empty() {
                self.stats.promotions += 1;
            }
        }
        let st = &mut self.state;
        let mut frame = Frame {
            inputs: std::ptr::NonNull::dangling().as_ptr(),
            input_tags: std::ptr::NonNull::dangling().as_ptr(),
            env: st.lanes.as_mut_ptr(),
            env_tags: st.tags.as_mut_ptr(),
            state: st.ring_lanes.as_mut_ptr(),
            step: st.step,
            status: 0,
        };
        // SAFETY: the program declares `env = plan.slot_count()` and
        // `state = plan.ring_len`, exactly the lengths of these vectors, and
        // nothing else touches them during the call.
        let exit = unsafe { rt.code.run_frame(&mut frame) };
        match exit {
            Exit::Return => {
                self.stats.region_runs += 1;
                Ok(true)
            }
            Exit::Decline(k) => {
                let slot = rt.lowered.reads[k as usize].0;
                let seen = self.state.tags[slot as usize];
                *self.stats.declines.entry((r.0, k, seen)).or_default() += 1;
                self.demote(r);
                Ok(false)
            }
            Exit::Trap(kind, site) => {
                let site = &rt.lowered.sites[site as usize];
                if site.in_arm {
                    *self
                        .stats
                        .declines
                        .entry((r.0, TRAP_IN_ARM, 0))
                        .or_default() += 1;
                    self.demote(r);
                    return Ok(false);
                }
                let kind = match kind {
                    TrapKind::Overflow => ErrorKind::IntegerOverflow,
                    TrapKind::DivByZero => ErrorKind::DivisionByZero,
                };
                Err(RuntimeError {
                    kind,
                    op: site.op,
                    detail: None,
                    stream: self.plan.stream_name(site.stream).to_string(),
                    step: self.state.step,
                })
            }
        }
    }

    /// A promoted region hands its state back to the canonical tier.
    fn demote(&mut self, r: RegionId) {
        let rt = &mut self.regions[r.index()];
        if rt.promoted && !rt.lowered.rings.is_empty() {
            rt.promoted = false;
            self.stats.materializations += 1;
        }
    }

    /// After the barrier: a ring that received a value its readers cannot
    /// take (⊥, or another representation) demotes them.
    fn check_promoted_rings(&mut self) {
        let step = self.state.step - 1;
        let mut demote = Vec::new();
        for (i, rt) in self.regions.iter().enumerate() {
            if rt.promoted {
                let bad = rt.lowered.rings.iter().any(|&(base, len, ty)| {
                    let k = (base as u64 + step % len as u64) as usize;
                    self.state.ring_tags[k] != tag_of(ty)
                });
                if bad {
                    demote.push(RegionId(i as u32));
                }
            }
        }
        for r in demote {
            self.demote(r);
        }
    }

    /// Describes the decline counters for `--stats`.
    pub fn describe_declines(&self) -> Vec<(String, u64)> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for (&(r, reason, seen), &n) in &self.stats.declines {
            let what = match reason {
                HISTORY_NOT_FILLED => {
                    "offset history not yet filled (promotion failed)".to_string()
                }
                TRAP_IN_ARM => "trap inside an if arm (the canonical tier decides)".to_string(),
                k => {
                    let (slot, ty) = self.regions[r as usize].lowered.reads[k as usize];
                    let state = match seen {
                        tag::ABSENT => "absent".to_string(),
                        tag::DEFERRED => "deferred".to_string(),
                        _ => format!("not {ty}"),
                    };
                    format!("`{}` {state}", self.slot_name(slot))
                }
            };
            *out.entry(format!("r{r}: {what}")).or_default() += n;
        }
        out.into_iter().collect()
    }

    /// The name of an arena slot: a stream, or a node of a stream.
    pub fn slot_name(&self, slot: u32) -> String {
        let plan = &self.plan;
        let streams = plan.spec.streams.len() as u32;
        if slot < streams {
            plan.stream_name(crate::lang::check::StreamId(slot))
                .to_string()
        } else {
            let n = plan.node_slots.iter().position(|&s| s == slot).unwrap_or(0);
            let node = plan.node(crate::plan::NodeId(n as u32));
            format!("{} (node n{n})", plan.stream_name(node.stream))
        }
    }

    /// The lowered regions (for `explain`).
    pub fn lowered(&self) -> impl Iterator<Item = &LoweredRegion> {
        self.regions.iter().map(|r| &r.lowered)
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
