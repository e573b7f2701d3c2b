//! Adaptive tier-up: `auto` starts a run on the canonical tier and moves it to the whole-row program, interpreted and then native, both built on a background thread (a keyed monitor's, in one step: `keyed::tier_up`).
//!
//! Building a fused tier costs time that grows with the spec (lowering the
//! whole-row program and compiling it for the interpreter take ~30 ms for
//! 25,000 streams; Cranelift a further ~200 ms, and 20 ms for 300 streams,
//! when the canonical tier is built in under one), and a run of a few rows
//! never earns it back. So `auto`, where it would pick the whole-row
//! kernel for a plain monitor, builds only the canonical tier and counts
//! rows. Once the run has evaluated `Engine::tier_up_after` rows it is hot:
//! the plan goes to a thread of its own, which lowers the whole-row program
//! and compiles it for the register interpreter (stage 1), then natively
//! (stage 2), publishing each as it is done. The row loop keeps running
//! meanwhile and takes each stage at the first row boundary after it is
//! ready; after stage 2 the engine is exactly the native-whole engine it
//! would have built at the start (no regions: a declined row runs
//! canonically).
//!
//! A switch carries no state over: every tier keeps its state in the run's
//! `NodeState` (a program's frame points at its vectors), the native kernel
//! is the same program as the interpreted one (so a run's promotion holds
//! for it), and the interpreter's register file holds nothing between rows.
//! A `Stepper`'s kept frame stays valid across stage 2 for the same reason
//! (it is the program's frame, and the kernel is read at each call); there
//! is no kept frame before stage 1 (no program to keep it for).

use super::{AUTO_NATIVE_MAX_INSTS, BatchKernels, Engine, Kernel, SharedCode, Tier, shared};
use crate::fusion::lower::{LoweredRegion, WholeEnv, WholeSplit, lower_whole_in};
use crate::plan::Plan;
use scalar_ir::QuickCode;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The rows `auto` evaluates on the canonical tier before it starts building
/// the faster ones (`MonitorBuilder::tier_up_after` changes it). A few
/// hundred rows cost about a millisecond, less than building the smallest
/// fused tier, so a short run is never slower than on the canonical tier,
/// and a long one switches within milliseconds. It is also what spares the
/// `dynamic` instances of a string that changes every row a compilation
/// each.
pub const TIER_UP_ROWS: u64 = 256;

/// An engine's way from the canonical tier to native code: where it is, and
/// the whole-row split the program is built for.
#[derive(Clone)]
pub(super) struct TierUp {
    stage: Stage,
    split: WholeSplit,
}

impl TierUp {
    /// A tier-up of the program of `split`, not started.
    pub(super) fn new(split: WholeSplit) -> TierUp {
        TierUp {
            stage: Stage::Cold,
            split,
        }
    }
}

/// Where a tier-up is.
#[derive(Clone)]
enum Stage {
    /// Counting rows: the build starts once `Engine::stats.rows` reaches
    /// `Engine::tier_up_after`.
    Cold,
    /// Building on a background thread, which fills the stages as it goes
    /// (shared by every engine `Engine::share` made, so each swaps in the
    /// same code).
    Building(Arc<Stages>),
}

/// What the background thread publishes.
#[derive(Default)]
pub(super) struct Stages {
    quick: OnceLock<Result<Quickened, String>>,
    native: OnceLock<NativeStage>,
}

/// Stage 1: the whole-row program, lowered and compiled for the
/// interpreter.
struct Quickened {
    lowered: LoweredRegion,
    code: QuickCode,
    took: Duration,
}

/// Stage 2.
enum NativeStage {
    Ready {
        kernel: jit::RowFn,
        code: SharedCode,
        largest_function: usize,
        took: Duration,
    },
    /// The program is longer than `auto` compiles natively (its
    /// instructions): the run stays on the interpreter.
    TooLong(usize),
    /// Cranelift declined it, or stage 1 failed.
    Failed(String),
}

/// When a run moved up (`Stats::tier_up`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TierUpStats {
    /// The rows evaluated canonically before the first row on the
    /// interpreted whole-row program.
    pub quickened_at_row: u64,
    /// The rows evaluated before the first row on native code, if the run
    /// got there.
    pub native_at_row: Option<u64>,
    /// Lowering and compiling for the interpreter, on the background thread.
    pub lowering_time: Duration,
    /// Cranelift's time on the background thread.
    pub compile_time: Duration,
    /// Whether the run moved from the canonical tier to its last one in
    /// one switch (a keyed monitor, whose every key moves to the engine
    /// built whole on the background thread; `quickened_at_row` is then
    /// that switch's row too).
    pub in_one_switch: bool,
}

/// Fills whatever stage its thread leaves empty, so that an engine waiting
/// for it (`tier_up_now`) never waits forever: the thread's panic (an
/// engine bug, reported on standard error by the panic hook) leaves the
/// run where it is.
struct Unfilled(Arc<Stages>);

impl Drop for Unfilled {
    fn drop(&mut self) {
        let why = "the compiling thread stopped (an engine bug)";
        let _ = self.0.quick.set(Err(why.to_string()));
        let _ = self.0.native.set(NativeStage::Failed(why.to_string()));
    }
}

/// The background thread's work: stage 1, then stage 2.
fn build(stages: &Stages, plan: &Plan, split: &WholeSplit) {
    let t0 = Instant::now();
    let lowered = lower_whole_in(plan, WholeEnv::Arena, false, split);
    let code = QuickCode::compile(&lowered.program)
        .unwrap_or_else(|e| panic!("engine bug: a lowered program does not verify: {e}"));
    let insts: usize = lowered.program.layout.insts.iter().map(Vec::len).sum();
    // The program is cloned for stage 2 only when there is one, before
    // stage 1 hands it over.
    let program = (insts <= AUTO_NATIVE_MAX_INSTS).then(|| lowered.program.clone());
    let _ = stages.quick.set(Ok(Quickened {
        lowered,
        code,
        took: t0.elapsed(),
    }));
    let Some(program) = program else {
        let _ = stages.native.set(NativeStage::TooLong(insts));
        return;
    };
    let t1 = Instant::now();
    let compiled = jit::JitModule::new()
        .map_err(|e| format!("no JIT module: {e}"))
        .and_then(|mut module| {
            let handle = module.compile_row(&program).map_err(|e| e.to_string())?;
            let code = module.finalize().map_err(|e| format!("finalize: {e}"))?;
            Ok((code.func(handle).row_fn(), code))
        });
    let _ = stages.native.set(match compiled {
        Ok((kernel, code)) => NativeStage::Ready {
            kernel,
            largest_function: code.largest_function(),
            code: shared(code),
            took: t1.elapsed(),
        },
        Err(e) => NativeStage::Failed(e),
    });
}

impl Engine {
    /// Whether `auto` starts a keyed monitor of `plan` keyed by `key` on the
    /// canonical tier and moves every key to native code built on a
    /// background thread (`keyed::tier_up`): where it would build the
    /// whole-row kernel at once (every stream scalar, no periods, Cranelift
    /// here). The packed layout of the keys' runs depends on the engine's
    /// regions, so the engine is built whole on that thread, and the
    /// monitor converts every key's run at the switch.
    pub fn keyed_tiers_up(plan: &Plan, requested: Tier, key: Option<crate::lang::check::StreamId>) -> bool {
        requested == Tier::Auto
            && !plan.is_timed()
            && jit::available().is_ok()
            && crate::fusion::lower::whole_row_eligible_keyed(plan, key)
                .and_then(|()| crate::fusion::lower::whole_row_split(plan, key))
                .is_ok()
    }

    /// Replaces why the tier was picked (a keyed monitor's engine on the
    /// canonical tier until its own tier-up).
    pub(crate) fn set_why(&mut self, why: String) {
        self.why = why;
    }

    /// Makes this engine (built on a background thread) the one that
    /// replaces `old` after `at_row` rows: its counters carry `old`'s over,
    /// and its stats say when the switch happened and what the build took.
    pub(crate) fn take_over_from(&mut self, old: &Engine, at_row: u64) {
        let (lowering_time, compile_time) = (self.stats.lowering_time, self.stats.compile_time);
        self.stats.absorb(&old.stats);
        self.stats.tier_up = Some(TierUpStats {
            quickened_at_row: at_row,
            native_at_row: Some(at_row),
            lowering_time,
            compile_time,
            in_one_switch: true,
        });
    }

    /// Whether `auto` starts this engine on the canonical tier and tiers up
    /// (it picked the whole-row kernel for a plain, unkeyed monitor, and
    /// Cranelift runs here). A keyed engine on `auto` builds at once: a
    /// keyed monitor tiers up by building the whole engine on a thread of
    /// its own (`keyed_tiers_up`), since the layout of its packed runs
    /// depends on the engine.
    pub(super) fn tiers_up(requested: Tier, tier: Tier, keyed: bool) -> bool {
        requested == Tier::Auto && tier == Tier::NativeWhole && !keyed
    }

    /// Rows evaluated canonically before building the faster tiers (see
    /// `TIER_UP_ROWS`); 0 starts at the next row.
    pub fn set_tier_up_after(&mut self, rows: u64) {
        self.tier_up_after = rows;
    }

    /// Whether a faster tier is still to come (`Tier::Auto`, before native
    /// code, or before the build gave up).
    pub fn tiering_up(&self) -> bool {
        self.tier_up.is_some()
    }

    /// Moves the engine to its last tier now, waiting for the build (started
    /// here if the run is not hot yet): for a caller that wants every later
    /// row on it, for `explain`, and for tests that switch at a chosen row.
    pub fn tier_up_now(&mut self) {
        while self.tiering_up() {
            self.tier_up_one();
        }
    }

    /// Moves the engine up one stage now (to the interpreted whole-row
    /// program, or from it to native code), waiting for the build (started
    /// here if the run is not hot yet): for tests that switch at chosen
    /// rows.
    pub fn tier_up_one(&mut self) {
        let Some(up) = &self.tier_up else { return };
        let stages = match &up.stage {
            Stage::Cold => {
                self.start_building();
                match &self.tier_up {
                    Some(TierUp {
                        stage: Stage::Building(stages),
                        ..
                    }) => stages.clone(),
                    _ => return,
                }
            }
            Stage::Building(stages) => stages.clone(),
        };
        match self.whole.is_none() {
            true => drop(stages.quick.wait()),
            false => drop(stages.native.wait()),
        }
        self.poll_tier_up();
    }

    /// Starts the build once the run is hot, and takes the next stage once it
    /// is ready (one a call). Called at row boundaries (every path of a row and of a batch
    /// asks first) while `tier_up` is set; out of line, so that the rows of
    /// an engine with nothing to come pay one test.
    #[cold]
    #[inline(never)]
    pub(super) fn poll_tier_up(&mut self) {
        let Some(up) = &self.tier_up else { return };
        let stages = match &up.stage {
            Stage::Cold if self.stats.rows >= self.tier_up_after => return self.start_building(),
            Stage::Cold => return,
            Stage::Building(stages) => stages.clone(),
        };
        if self.whole.is_none() {
            match stages.quick.get() {
                None => {}
                Some(Ok(quick)) => self.take_quickened(quick),
                Some(Err(e)) => self.give_up_tier_up(e),
            }
            return;
        }
        match stages.native.get() {
            None => {}
            Some(NativeStage::Ready {
                kernel,
                code,
                largest_function,
                took,
            }) => self.take_native(*kernel, code, *largest_function, *took),
            Some(NativeStage::TooLong(insts)) => {
                self.why = format!(
                    "{}; the whole-row program has {insts} instructions, more than auto compiles \
                     natively ({AUTO_NATIVE_MAX_INSTS}), so it stays on the register interpreter \
                     (--tier native-whole compiles it)",
                    self.why
                );
                self.tier_up = None;
            }
            Some(NativeStage::Failed(e)) => self.give_up_tier_up(e),
        }
    }

    /// Hands the plan to a thread of its own.
    fn start_building(&mut self) {
        let Some(up) = &mut self.tier_up else { return };
        let split = up.split.clone();
        let plan = self.signed.clone();
        let stages = Arc::new(Stages::default());
        let unfilled = Unfilled(stages.clone());
        let spawned = std::thread::Builder::new()
            .name("vigil-jit".to_string())
            .spawn(move || {
                // The engine may be gone when a stage is done (the run
                // ended first): it is then dropped with the stages.
                build(&unfilled.0, &plan, &split);
            });
        match spawned {
            Ok(_) => up.stage = Stage::Building(stages),
            // No thread: the run stays where it is.
            Err(e) => self.give_up_tier_up(&format!("no thread to build it on: {e}")),
        }
    }

    /// Stage 1: the interpreted whole-row program takes the next row.
    fn take_quickened(&mut self, quick: &Quickened) {
        let Some(up) = &self.tier_up else { return };
        let split = up.split.clone();
        self.install_whole(
            split,
            quick.lowered.clone(),
            Kernel::Quick(quick.code.clone()),
        );
        self.stats.lowering_time += quick.took;
        self.stats.tier_up = Some(TierUpStats {
            quickened_at_row: self.stats.rows,
            lowering_time: quick.took,
            ..TierUpStats::default()
        });
        self.tier = Tier::Quickened;
    }

    /// Stage 2: the native kernel replaces the interpreted one.
    fn take_native(
        &mut self,
        kernel: jit::RowFn,
        code: &SharedCode,
        largest_function: usize,
        took: Duration,
    ) {
        let Some(w) = &mut self.whole else {
            unreachable!("engine bug: native code before the whole-row program")
        };
        w.rt.kernel = Kernel::Native(kernel);
        // As `build_whole` decides for a kernel compiled at the start.
        w.batch = BatchKernels::new(
            &w.rt.lowered.program,
            !w.split.has_tail() && jit::fits_one_function(&w.rt.lowered.program),
        );
        self.native.push(code.clone());
        self.stats.compile_time += took;
        self.stats.largest_function = self.stats.largest_function.max(largest_function);
        if let Some(up) = &mut self.stats.tier_up {
            up.native_at_row = Some(self.stats.rows);
            up.compile_time = took;
        }
        self.tier = Tier::NativeWhole;
        self.tier_up = None;
    }

    /// Ends the tier-up with the run where it is, saying why.
    fn give_up_tier_up(&mut self, why: &str) {
        self.stats
            .compile_declines
            .push(format!("whole-row program: {why}"));
        self.tier_up = None;
    }

    /// Why the tier running was picked, with the tier-up to come or done.
    pub fn describe_tier(&self) -> String {
        let stage = self.tier_up.as_ref().map(|up| &up.stage);
        match (stage, self.stats.tier_up) {
            (Some(Stage::Cold), _) => format!(
                "{}; canonical until the run is hot ({} rows), then the whole-row program, \
                 interpreted and then native, each built on a background thread",
                self.why, self.tier_up_after
            ),
            (Some(Stage::Building(_)), None) => format!(
                "{}; canonical while the whole-row program is built on a background thread",
                self.why
            ),
            (Some(Stage::Building(_)), Some(up)) => format!(
                "{}; quickened from row {} on, while native code compiles on a background thread",
                self.why,
                up.quickened_at_row + 1
            ),
            // A keyed monitor moves from the canonical tier to the engine
            // built whole on a background thread in one switch.
            (None, Some(up)) if up.in_one_switch => format!(
                "{}; canonical for the first {} rows, then every key moved to this tier (built \
                 on a background thread: lowering {:.1} ms, native compile {:.1} ms)",
                self.why,
                up.quickened_at_row,
                up.lowering_time.as_secs_f64() * 1e3,
                up.compile_time.as_secs_f64() * 1e3
            ),
            (None, Some(up)) => {
                let native = match up.native_at_row {
                    Some(n) => format!(
                        ", native from row {} on (compiled in {:.1} ms)",
                        n + 1,
                        up.compile_time.as_secs_f64() * 1e3
                    ),
                    None => String::new(),
                };
                format!(
                    "{}; canonical for the first rows, quickened from row {} on (built in {:.1} ms \
                     on a background thread){native}",
                    self.why,
                    up.quickened_at_row + 1,
                    up.lowering_time.as_secs_f64() * 1e3
                )
            }
            (None, None) => self.why.clone(),
        }
    }
}
