//! A keyed monitor's adaptive tier-up: `auto` starts every key on the canonical tier and moves them all to native code built on a background thread.
//!
//! A keyed monitor on the native-whole tier compiles its whole-row kernel
//! twice (over the arena, and onto the keys' packed runs) and the regions
//! that run each key's first rows: on a spec of 10,000 streams that took
//! ~0.5 s before the first row, where the canonical tier builds in
//! ~0.05 s. So `auto`, where it would build that engine
//! (`Engine::keyed_tiers_up`), builds a canonical engine and counts rows;
//! once the monitor has evaluated `after` rows the plan goes to a thread of
//! its own, which builds the engine `auto` would have built at the start
//! (`build_engine`) with the layout of packed runs it implies. The rows keep
//! running canonically meanwhile, and the first row boundary after the build
//! is done switches (`KeyedMonitor::switch_to`).
//!
//! The switch converts every key's run. The layout of a packed run depends
//! on the engine (one owner byte per program's promotion bit), so each
//! record is unpacked from the canonical layout and packed into the new
//! one (`KeyTable::relayout`); what a packed run keeps is the run's whole
//! state as far as any later row can tell (ARCHITECTURE.md, "A packed run is
//! a run"), the same under both layouts, so the conversion is exact. Every
//! program starts unpromoted on the new engine, as on a run restored from a
//! snapshot: a key's next row promotes it (or declines, and runs
//! canonically) exactly as it would on a monitor built native from the
//! start. Only the rows before the switch create keys, so the conversion is
//! over at most `after` keys, unless a snapshot restored more.
//!
//! Monitors made by `KeyedMonitor::share` (the workers of a scaled run)
//! share one build: the first to be hot starts it, and each takes its own
//! share of the built engine (`Engine::share`) at its own row boundary.

use crate::canonical::pack::PackLayout;
use crate::exec::{Engine, Run, Tier};
use crate::lang::check::StreamId;
use crate::plan::Plan;
use std::sync::{Arc, Once, OnceLock};

/// A keyed monitor's tier-up to come: the rows it waits for, and the build
/// it shares with the monitors shared from it.
#[derive(Clone)]
pub(super) struct TierUp {
    /// Rows evaluated (over every key) before the build starts.
    pub(super) after: u64,
    build: Arc<Build>,
}

/// The build of one keyed plan's engine, started once.
struct Build {
    plan: Arc<Plan>,
    key: Option<StreamId>,
    started: Once,
    /// What the thread built, or why there is nothing (the run then stays
    /// canonical).
    built: OnceLock<Result<Built, String>>,
}

/// The engine `auto` builds for a keyed monitor, and its runs' layout.
pub(super) struct Built {
    pub(super) engine: Engine,
    pub(super) layout: PackLayout,
}

/// Fills the build if its thread stops without doing so (an engine bug,
/// reported on standard error by the panic hook): a monitor waiting for it
/// (`KeyedMonitor::tier_up_now`) never waits forever, and the run stays
/// canonical.
struct Unfilled(Arc<Build>);

impl Drop for Unfilled {
    fn drop(&mut self) {
        let why = "the compiling thread stopped (an engine bug)";
        let _ = self.0.built.set(Err(why.to_string()));
    }
}

/// The engine a keyed monitor of `plan` runs on `tier` (with the regions
/// that run each key's first rows) and the layout of its packed runs, with
/// the whole-row kernel compiled onto that layout.
pub(super) fn build_engine(plan: Arc<Plan>, tier: Tier, key: Option<StreamId>) -> Built {
    let mut engine = Engine::new_keyed(plan.clone(), tier, key);
    // Every key's first rows (its history filling) are rows the whole-row
    // kernel declines: they run the native regions.
    engine.add_decline_regions();
    let layout = PackLayout::new(&plan, Run::pack_extra(&engine));
    engine.compile_packed(&layout);
    Built { engine, layout }
}

impl TierUp {
    /// A tier-up of the keyed monitor of `plan` keyed by `key`, starting
    /// after `after` rows.
    pub(super) fn new(plan: Arc<Plan>, key: Option<StreamId>, after: u64) -> TierUp {
        TierUp {
            after,
            build: Arc::new(Build {
                plan,
                key,
                started: Once::new(),
                built: OnceLock::new(),
            }),
        }
    }

    /// Starts the build on a thread of its own, unless it has started.
    pub(super) fn start(&self) {
        self.build.started.call_once(|| {
            let build = self.build.clone();
            let spawned = std::thread::Builder::new()
                .name("vigil-jit".to_string())
                .spawn(move || {
                    // Made on the thread, so that a thread never spawned
                    // leaves the build to the error below.
                    let unfilled = Unfilled(build);
                    let b = &unfilled.0;
                    let built = build_engine(b.plan.clone(), Tier::Auto, b.key);
                    // The monitors may be gone (the run ended first): the
                    // engine is then dropped with the build.
                    let _ = b.built.set(Ok(built));
                });
            if let Err(e) = spawned {
                let _ = (self.build.built).set(Err(format!("no thread to build it on: {e}")));
            }
        });
    }

    /// The build, if it is done.
    pub(super) fn ready(&self) -> Option<&Result<Built, String>> {
        self.build.built.get()
    }

    /// The build, waiting for it (started here if it has not).
    pub(super) fn wait(&self) -> &Result<Built, String> {
        self.start();
        self.build.built.wait()
    }

    /// Why the canonical tier runs now, for `Stats::why`.
    pub(super) fn describe(&self, why: &str) -> String {
        match self.build.built.get() {
            _ if !self.build.started.is_completed() => format!(
                "{why}; canonical until the run is hot ({} rows), then native-whole, built on a \
                 background thread, for every key",
                self.after
            ),
            None => format!("{why}; canonical while native-whole is built on a background thread"),
            Some(Ok(_)) => format!("{why}; canonical until the next row, then native-whole"),
            Some(Err(e)) => format!("{why}; native-whole was not built ({e})"),
        }
    }
}
