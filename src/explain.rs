//! `vigil explain`: the schedule, the partition, each region's IR and which tier runs what, and why.

use crate::exec::Engine;
use crate::fusion::{Step, describe_node, why_not_eligible};
use crate::monitor::{Monitor, Spec, Tier};
use std::fmt::Write as _;

/// One line per tier (`vigil explain --summary`): the tier a monitor asked
/// for it runs (the same, or the one it falls back to, or for `auto` the one
/// it starts on) and why, in the words `Stats::why` gives.
///
/// ```
/// let spec = vigil::Spec::parse("t.dsrv", "in s: Str\nout e: Str\ne = s")?;
/// let summary = vigil::explain::summary(&spec);
/// assert!(summary.lines().any(|l| l.starts_with("canonical") && l.contains("runs canonical")));
/// assert!(summary.lines().any(|l| l.starts_with("native-whole") && l.contains("instead")));
/// # Ok::<(), vigil::Diagnostics>(())
/// ```
pub fn summary(spec: &Spec) -> String {
    let mut out = String::new();
    for tier in Tier::ALL {
        let monitor = Monitor::builder(spec).tier(tier).build();
        let (ran, why) = (monitor.tier(), monitor.stats().why);
        let runs = match (tier, ran == tier) {
            (_, true) => format!("runs {ran}"),
            (Tier::Auto, false) => format!("runs {ran}"),
            (_, false) => format!("runs {ran} instead"),
        };
        let _ = writeln!(out, "{:<15} {runs}: {why}", tier.name());
    }
    out
}

/// Explains how `spec` runs on `tier`.
pub fn explain(spec: &Spec, tier: Tier) -> String {
    let mut monitor = Monitor::builder(spec).tier(tier).build();
    // `auto` moves a hot run up (`exec::TIER_UP_ROWS`): the explanation is
    // of the tier it moves to, with the reason given before any row.
    let why = monitor.stats().why;
    monitor.tier_up_now();
    let engine = monitor.engine();
    let plan = engine.plan();
    let mut out = String::new();
    let names: Vec<&str> = plan.schedule.iter().map(|&s| plan.stream_name(s)).collect();
    let _ = writeln!(out, "schedule: {}", names.join(", "));
    let _ = writeln!(out, "\nsignatures:");
    for &s in &plan.schedule {
        let data = plan.spec.stream(s);
        let _ = writeln!(out, "  {}: {} ({})", data.name, data.sig, data.ty);
    }
    if plan.is_timed() {
        // Only specs with periodic streams print this, so the explanation
        // of every other spec is as it was.
        let _ = writeln!(out, "\npacing (ticks sort before the rows of their time):");
        for &s in &plan.schedule {
            let data = plan.spec.stream(s);
            let pace = match data.pace {
                crate::lang::check::Pace::Event => "every input row".to_string(),
                crate::lang::check::Pace::Periodic(p) => format!("every {}", period(p)),
            };
            let _ = writeln!(out, "  {}: {pace}", data.name);
        }
    }
    let _ = writeln!(out, "\nnodes:");
    for &s in &plan.schedule {
        if let Some(g) = plan.graph(s) {
            let nodes: Vec<String> = g.node_ids().map(|n| describe_node(plan, n)).collect();
            if !nodes.is_empty() {
                let _ = writeln!(out, "  {}: {}", plan.stream_name(s), nodes.join("; "));
            }
        }
    }
    if !plan.windows.is_empty() {
        // Only specs with windows print this.
        let _ = writeln!(
            out,
            "\nwindows (state in the run, {} bytes in all; count windows and STL intervals and sinces over scalars fuse, time windows run on the canonical tier):",
            plan.window_words * 8
        );
        for w in &plan.windows {
            let _ = writeln!(
                out,
                "  {}: {}{}",
                describe_node(plan, w.node),
                w.shape.describe(),
                window_edge(plan, w)
            );
        }
    }
    if plan.dynamics > 0 {
        // Only specs with `dynamic`/`defer` print this.
        let on = match tier {
            Tier::Canonical => "the canonical tier".to_string(),
            t => format!(
                "an engine of their own on the {t} tier (fused, and compiled on the native tiers, when the string arrives)"
            ),
        };
        let _ = writeln!(
            out,
            "
dynamic (each new string is parsed, checked and planned as an instance of its own, run on {on}; one instance per `dynamic` is kept, dropped when the next string starts one):"
        );
        for (k, node) in plan.nodes.iter().enumerate() {
            if let crate::plan::NodeOp::Dynamic(_) = node.op {
                let scope: Vec<&str> = (plan.spec.dynamic_scope(node.expr).iter())
                    .map(|&s| plan.stream_name(s))
                    .collect();
                let _ = writeln!(
                    out,
                    "  {}: reads {}",
                    describe_node(plan, crate::plan::NodeId(k as u32)),
                    if scope.is_empty() {
                        "no stream".to_string()
                    } else {
                        scope.join(", ")
                    }
                );
            }
        }
    }
    let _ = writeln!(out, "\ntier: {} ({why})", monitor.tier());
    let untyped = plan.spec.untyped_inputs();
    if !untyped.is_empty() && monitor.tier() != crate::Tier::Canonical {
        let names: Vec<String> = untyped
            .iter()
            .map(|&k| format!("`{}`", plan.stream_name(plan.spec.inputs[k])))
            .collect();
        let _ = writeln!(
            out,
            "\nspeculation: the untyped inputs {} have no scalar signature, so nothing reading them \
             is fused below. On the first rows the engine watches them; once each has had a value \
             (or after {watch} rows) it rebuilds its programs as if each always had the representation \
             of its first value (Int, Float or Bool), guarded: a row that contradicts it runs \
             canonically, and once {at_least} rows and at least one in {one_in} since have, the programs are \
             rebuilt without it. `vigil run --stats` says what was speculated and how it went.",
            names.join(", "),
            watch = crate::exec::Speculation::WATCH,
            at_least = crate::exec::Speculation::GIVE_UP.0,
            one_in = crate::exec::Speculation::GIVE_UP.1,
        );
    }
    let native = monitor.tier() == Tier::NativeWhole;
    if let Some(whole) = engine.whole_lowered() {
        let (how, declined) = match native {
            true => ("native program", "canonically"),
            false if engine.fused().is_none() => ("interpreted (quickened) program", "canonically"),
            false => (
                "interpreted (quickened) program",
                "on the regions of the partition below and canonically",
            ),
        };
        let _ = writeln!(
            out,
            "\nthe whole row is one {how}: it checks every input (the row guard) \
             before computing anything, computes every stream in schedule order, stores every \
             node (a later canonical row may hold it) and pushes the offset rings; a row it \
             declines runs {declined}, and it resumes once its rings are promoted again"
        );
        if let Some(split) = engine.whole_split().filter(|s| s.has_tail()) {
            let _ = writeln!(
                out,
                "\nthe kernel leaves to the canonical tier, which takes them after it in \
                 schedule order on every row the kernel completes (so rows run one at a time: \
                 there is no batch kernel):"
            );
            for s in split.left_out(plan) {
                let why = split.why(s).unwrap_or("not scalar");
                let _ = writeln!(out, "  {}: {why}", plan.stream_name(s));
            }
        }
        let chunks = jit::row_kernel_chunks(&whole.program);
        if native && chunks > 0 {
            let _ = writeln!(
                out,
                "\nthe program is longer than one native function holds ({max} instructions): \
                 it is compiled as {chunks} functions of at most {max} instructions, called in \
                 order on each row, so that build time grows with the spec and not faster; it \
                 has no batch kernel (batches run row by row)",
                max = jit::MAX_FUNCTION_INSTS,
            );
        }
        let _ = writeln!(out, "\nwhole-row program:");
        out.push_str(&scalar_ir::print(&whole.program));
        if native {
            return out;
        }
    }
    let Some(fused) = engine.fused() else {
        let _ = writeln!(out, "every stream runs on the canonical tier");
        return out;
    };
    let _ = writeln!(out, "\npartition ({} steps):", fused.steps.len());
    out.push_str(&fused.describe());
    let _ = writeln!(out, "\nwhat runs each step:");
    for (i, step) in fused.steps.iter().enumerate() {
        let _ = writeln!(out, "({}) {}", i + 1, step_tiers(engine, step));
    }
    for (r, lowered) in engine.lowered().enumerate() {
        let reads: Vec<String> = lowered
            .reads
            .iter()
            .map(|&(slot, ty)| format!("{} {ty}", engine.slot_name(slot)))
            .collect();
        let _ = writeln!(out, "\nregion r{r}: preflight [{}]", reads.join(", "));
        if !lowered.rings.is_empty() {
            let rings: Vec<String> = lowered
                .rings
                .iter()
                .map(|(base, len, ty)| format!("lanes {base}..{} {ty}", base + len))
                .collect();
            let _ = writeln!(out, "  rings (promoted once defined): {}", rings.join(", "));
        }
        out.push_str(&scalar_ir::print(&lowered.program));
    }
    out
}

fn step_tiers(engine: &Engine, step: &Step) -> String {
    let plan = engine.plan();
    match step {
        Step::StreamRegion { members, region } => {
            let names: Vec<&str> = members.iter().map(|&s| plan.stream_name(s)).collect();
            format!(
                "{{{}}}: {} region r{} on every row whose preflight passes; canonical on the others",
                names.join(", "),
                engine.region_backend(region.0 as usize),
                region.0
            )
        }
        Step::GraphStep {
            stream, segments, ..
        } => {
            let name = plan.stream_name(*stream);
            let why = why_not_eligible(plan, *stream).unwrap_or_default();
            let ids: std::collections::BTreeSet<u32> = segments
                .iter()
                .filter_map(|s| match s {
                    crate::fusion::Segment::Island(i) => Some(i.region.0),
                    _ => None,
                })
                .collect();
            let regions: Vec<String> = ids.iter().map(|r| format!("r{r}")).collect();
            let backend = ids
                .iter()
                .next()
                .map_or("quickened", |&r| engine.region_backend(r as usize));
            if regions.is_empty() {
                format!("{name}: canonical, because {why}")
            } else {
                format!(
                    "{name}: graph step because {why}; islands {backend} in {} once their rings are promoted, canonical runs and declined rows canonical",
                    regions.join(", ")
                )
            }
        }
    }
}

/// A period in the largest unit that divides it (`1s`, `500ms`).
fn period(ns: i64) -> String {
    for (n, unit) in [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "min"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
    ] {
        if ns % n == 0 {
            return format!("{}{unit}", ns / n);
        }
    }
    format!("{ns}ns")
}

/// What a time window holds when it is read, and whether exactly: read at
/// the rows of an event stream it holds `(t - T, t]`, its far edge rounded
/// to a pane; read at the ticks of a periodic stream, `[t - T, t)` (the rows
/// of a tick's time come after it), exact when every tick falls on the
/// panes' grid.
fn window_edge(plan: &crate::plan::Plan, w: &crate::plan::WindowPlan) -> String {
    let crate::lang::ast::WindowSize::Time { pane_ns, .. } = w.shape.window.size else {
        return String::new();
    };
    let g = crate::lang::ast::duration(pane_ns);
    match plan.node_clock(w.node) {
        0 => format!("; read at rows: (t - T, t], its far edge rounded to a pane of {g}"),
        clock => {
            let period = plan.periods[clock - 1];
            let p = crate::lang::ast::duration(period);
            match period % pane_ns {
                0 => format!(
                    "; read at ticks every {p}: [t - T, t), exact (its panes of {g} are laid from its first tick)"
                ),
                _ => format!(
                    "; read at ticks every {p}: [t - T, t), its far edge rounded to a pane of {g} ({p} is not a multiple of it; a granularity that divides {p} makes it exact)"
                ),
            }
        }
    }
}
