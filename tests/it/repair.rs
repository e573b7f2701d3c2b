//! Live definitions (schedule repair): a run carried over to an edited specification at a random
//! step keeps every stream the edit does not reach exactly, on every tier.
//!
//! Specs and traces come from the generators of `props.rs`. An edit adds a stream (the
//! definition of an existing one, under a new name), redefines a stream (with the definition of
//! another of the same type) or drops a stream nothing reads. The edited run, on each tier, must
//! equal the edited run on the canonical tier bit for bit (runtime errors included), and every
//! stream that neither is the edited one nor reads it (at any offset, through any chain) must
//! give exactly the values of the unedited run.

use crate::props::{case_strategy, generate_spec, generate_trace, runtime};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use std::collections::BTreeSet;
use vigil::lang::ast::Decl;
use vigil::lang::edit;
use vigil::{Monitor, RuntimeError, Sample, Spec, Tier, Value};

const TIERS: [Tier; 4] = [
    Tier::Canonical,
    Tier::Quickened,
    Tier::NativeRegions,
    Tier::NativeWhole,
];

/// The values of the named streams after every step (`None`: the stream
/// does not exist at that step), and the runtime error that ended the run.
type Run = (Vec<Vec<Option<Sample>>>, Option<RuntimeError>);

/// Runs `trace` on `tier`: `a` before step `at`, then `b` carried over from
/// `a`'s run (when `b` is given).
fn run(
    a: &Spec,
    b: Option<&Spec>,
    at: usize,
    trace: &[Vec<Option<Value>>],
    tier: Tier,
    names: &[String],
) -> Run {
    let mut monitor = Monitor::builder(a).tier(tier).build();
    let mut out = Vec::new();
    for (r, row) in trace.iter().enumerate() {
        let mut row = row.clone();
        if let (Some(b), true) = (b, r >= at) {
            if r == at {
                let (snapshot, _) = monitor.repair(b).expect("the run is not stopped");
                monitor = Monitor::builder(b)
                    .tier(tier)
                    .restore(&snapshot)
                    .expect("a repaired snapshot restores")
                    .build();
            }
            // `b`'s inputs by name (an edit never adds one here, so the
            // row is the same values in `b`'s input order).
            row = b
                .input_names()
                .iter()
                .map(|n| a.input_names().iter().position(|m| m == n))
                .map(|i| i.and_then(|i| trace[r][i].clone()))
                .collect();
        }
        if let Err(e) = monitor.step(&row) {
            return (out, Some(runtime(e)));
        }
        out.push(names.iter().map(|n| monitor.stream(n)).collect());
    }
    (out, None)
}

/// Every stream's definition text and the names it mentions.
fn definitions(spec: &Spec) -> Vec<(String, String, BTreeSet<String>)> {
    let c = spec.checked();
    let ast = &c.ast;
    ast.decls
        .iter()
        .zip(&ast.decl_spans)
        .filter_map(|(d, span)| match d {
            Decl::Def { name, expr, .. } => {
                let start = ast.expr(*expr).span.start as usize;
                let text = c.source[start..span.end as usize].to_string();
                let reads = (ast.names(*expr).into_iter())
                    .map(|(_, n)| n.to_string())
                    .collect();
                Some((name.clone(), text, reads))
            }
            _ => None,
        })
        .collect()
}

/// `changed` and every stream that reads it, directly or through others.
fn reached(defs: &[(String, String, BTreeSet<String>)], changed: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::from([changed.to_string()]);
    loop {
        let before = out.len();
        for (name, _, reads) in defs {
            if reads.iter().any(|r| out.contains(r)) {
                out.insert(name.clone());
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

#[derive(Default, Debug)]
struct Coverage {
    cases: usize,
    added: usize,
    redefined: usize,
    dropped: usize,
    /// Edits after every offset ring was full.
    late: usize,
    /// Cases where some stream was compared with the unedited run.
    compared: usize,
}

#[test]
fn live_definitions_keep_unchanged_streams_on_every_tier() {
    let mut runner = TestRunner::deterministic();
    let strategy = (case_strategy(), 0..1000u32, 0..1000u32, 0..1000u32);
    let mut cov = Coverage::default();
    for _ in 0..160 {
        let ((spec_data, len, trace_data), kind, pick, other) =
            strategy.new_tree(&mut runner).unwrap().current();
        let g = generate_spec(&spec_data, true);
        let Ok(a) = Spec::parse("gen.dsrv", &g.source) else {
            continue;
        };
        let trace = generate_trace(&g.inputs, len.max(4), &trace_data, (kind % 3) as usize);
        let at = pick as usize % trace.len();
        let defs = definitions(&a);
        let c = a.checked();
        let (text, changed) = match kind % 3 {
            0 => {
                let (_, def, _) = &defs[other as usize % defs.len()];
                let text = edit::define(&c.source, &format!("out added = {def}"));
                (text.map(|(t, _)| t), None)
            }
            1 => {
                let (name, _, _) = &defs[other as usize % defs.len()];
                let ty = c.stream(c.stream_by_name(name).unwrap()).ty;
                let same: Vec<_> = (defs.iter())
                    .filter(|(n, _, _)| c.stream(c.stream_by_name(n).unwrap()).ty == ty)
                    .collect();
                let (_, def, _) = same[pick as usize % same.len()];
                let text = edit::define(&c.source, &format!("{name} = {def}"));
                (text.map(|(t, _)| t), Some(name.clone()))
            }
            _ => {
                let (name, _, _) = &defs[other as usize % defs.len()];
                (edit::drop(c, name), Some(name.clone()))
            }
        };
        // A drop of a stream others read, or a redefinition making a cycle,
        // is refused; the property is about the edits that are made.
        let Ok(text) = text else {
            continue;
        };
        let Ok(b) = Spec::parse("gen.dsrv", &text) else {
            continue;
        };
        let mut names: Vec<String> = (c.streams.iter()).map(|s| s.name.clone()).collect();
        let new: Vec<String> = (b.checked().streams.iter())
            .map(|s| s.name.clone())
            .filter(|n| !names.contains(n))
            .collect();
        names.extend(new);
        let plain = run(&a, None, 0, &trace, Tier::Canonical, &names);
        if plain.1.as_ref().is_some_and(|e| e.step < at as u64) {
            continue; // a stopped run is not carried over
        }
        let edited = run(&a, Some(&b), at, &trace, Tier::Canonical, &names);
        for tier in &TIERS[1..] {
            let got = run(&a, Some(&b), at, &trace, *tier, &names);
            assert_eq!(
                got, edited,
                "{tier} != canonical after the edit at step {at}\n--- before\n{}--- after\n{text}",
                g.source
            );
        }
        let reach = match &changed {
            Some(s) if kind % 3 == 1 => reached(&defs, s),
            Some(s) => BTreeSet::from([s.clone()]),
            None => BTreeSet::new(),
        };
        let steps = plain.0.len().min(edited.0.len());
        for (k, name) in names.iter().enumerate() {
            if reach.contains(name) || c.stream_by_name(name).is_none() {
                continue;
            }
            for step in 0..steps {
                assert_eq!(
                    edited.0[step][k], plain.0[step][k],
                    "`{name}` changed at step {step} by an edit at step {at} it does not read\n--- before\n{}--- after\n{text}",
                    g.source
                );
            }
            cov.compared += usize::from(steps > at);
        }
        // Without a runtime error, both runs see every row.
        if plain.1.is_none() && edited.1.is_none() {
            assert_eq!(plain.0.len(), edited.0.len());
        }
        cov.cases += 1;
        match kind % 3 {
            0 => cov.added += 1,
            1 => cov.redefined += 1,
            _ => cov.dropped += 1,
        }
        cov.late += usize::from(at >= crate::snapshots::max_offset(&g.source));
    }
    eprintln!("live definitions: {cov:?}");
    assert!(cov.cases >= 80, "{cov:?}");
    assert!(
        cov.added >= 20 && cov.redefined >= 20 && cov.dropped >= 10,
        "{cov:?}"
    );
    assert!(cov.late >= 30 && cov.compared >= 60, "{cov:?}");
}

fn int(i: i64) -> Option<Sample> {
    Some(Sample::Value(Value::Int(i)))
}

/// What a repaired run reads, exactly: a kept stream's history as far as the
/// old run kept it (its longest ring, then its slot for the last step), ⊥
/// before that and for a new stream's own offsets, fresh builtin state.
#[test]
fn a_new_stream_reads_the_history_the_old_run_kept() {
    let a = Spec::parse(
        "a.dsrv",
        "in x: Int\nout a: Int\na = default(x[2], 0)\nout seen: Bool\nseen = when(x > 4)\n",
    )
    .unwrap();
    let b = Spec::parse(
        "b.dsrv",
        "in x: Int\nout a: Int\na = default(x[2], 0)\nout seen: Bool\nseen = when(x > 4)\n\
         out far: Int\nfar = default(x[3], -1)\nout own: Int\nown = default(own[1], 100) + 1\n\
         out fresh: Bool\nfresh = when(x[3])\n",
    )
    .unwrap();
    for tier in TIERS {
        let mut m = Monitor::builder(&a).tier(tier).build();
        for v in 1..=6 {
            m.step([Some(Value::Int(v))]).unwrap();
        }
        let (snapshot, repair) = m.repair(&b).unwrap();
        assert_eq!(repair.step, 6);
        assert_eq!(repair.kept, ["x", "a", "seen"]);
        let started: Vec<String> = (repair.started.iter())
            .map(|s| format!("{} {}", s.stream, s.why))
            .collect();
        assert_eq!(started, ["far new", "own new", "fresh new"]);
        let mut m = Monitor::builder(&b)
            .tier(tier)
            .restore(&snapshot)
            .unwrap()
            .build();
        let mut far = Vec::new();
        for v in [7, 1, 1, 1] {
            m.step([Some(Value::Int(v))]).unwrap();
            far.push(m.output("far"));
            if v == 7 {
                // `own[1]` is ⊥ at the new stream's first step.
                assert_eq!(m.output("own"), int(101), "{tier}");
                // The kept `when` had fired; the new one fires on its own.
                assert_eq!(m.output("seen"), Some(Sample::Value(Value::Bool(true))));
                assert_eq!(m.output("fresh"), Some(Sample::Value(Value::Bool(false))));
            }
        }
        // Steps 6..9 read x at step 3 (older than the old ring `x[2]`
        // reached: ⊥), 4 (that ring), 5 (x's slot) and 6 (pushed since).
        assert_eq!(far, [int(-1), int(5), int(6), int(7)], "{tier}");
        assert_eq!(m.output("own"), int(104), "{tier}");
    }
}

/// A stopped run is not carried over (it stays stopped until a reset).
#[test]
fn a_stopped_run_is_not_repaired() {
    let a = Spec::parse("a.dsrv", "in x: Int\nout y: Int\ny = x + 1\n").unwrap();
    let mut m = Monitor::builder(&a).build();
    assert!(m.step([Some(Value::Int(i64::MAX))]).is_err());
    let err = m.repair(&a).unwrap_err();
    assert!(err.to_string().contains("reset it first"), "{err}");
}

/// Issue 35: a specification with periodic streams is edited mid-run. Adding an event
/// stream carries the run over with its clocks: every kept stream, periodic ones included,
/// continues exactly as in the unedited run (same rows, same ticks, every step), and the
/// new stream computes from the next row. Adding a period carries the others' clocks; an
/// edit removing the last periodic stream is refused with the reason.
#[test]
fn periodic_specifications_are_edited_mid_run() {
    use vigil::time::{Scheduler, Time};
    let src = "in x: Int\naux n: Int\nn = default(n[1], 0) + 1\n\
               out seen: Int @ 1s\nseen = n - default(n[2], 0)\n\
               out slow: Int @ 2500ms\nslow = default(slow[1], 0) + x\n";
    let spec = Spec::parse("p.dsrv", src).unwrap();
    let times: Vec<i64> = [
        0, 300, 900, 1_100, 2_000, 4_400, 4_500, 7_900, 9_999, 12_000,
    ]
    .iter()
    .map(|ms| ms * 1_000_000)
    .collect();
    // Rows `from..to` after the ticks due by each; every step's outputs by name.
    type Steps = Vec<Vec<(String, Sample)>>;
    let run = |m: &mut Monitor, sched: &mut Scheduler, from: usize, to: usize| -> Steps {
        let mut out = Vec::new();
        for (k, &t) in times.iter().enumerate().take(to).skip(from) {
            if !sched.started() {
                sched.start(Time(t));
            }
            // A step's outputs by name.
            let named = |m: &Monitor, o: Vec<Sample>| -> Vec<(String, Sample)> {
                m.output_names()
                    .iter()
                    .map(|n| n.to_string())
                    .zip(o)
                    .collect()
            };
            while let Some((at, due)) = sched.next_until(Time(t)) {
                let o = m.tick(at, &due).unwrap().to_vec();
                out.push(named(m, o));
            }
            let row = [Some(Value::Int(k as i64 * 3 - 7))];
            let o = m.step_at(Time(t), row).unwrap().to_vec();
            out.push(named(m, o));
        }
        out
    };
    let mut plain = Monitor::builder(&spec).build();
    let mut plain_sched = Scheduler::new(plain.periods());
    let want = run(&mut plain, &mut plain_sched, 0, times.len());
    for tier in [Tier::Canonical, Tier::NativeRegions] {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        let mut sched = Scheduler::new(m.periods());
        let mut got = run(&mut m, &mut sched, 0, 5);
        let edited = Spec::parse("p.dsrv", &format!("{src}out z: Int\nz = x * 2\n")).unwrap();
        let (snapshot, repair) = m.repair(&edited).unwrap();
        let started: Vec<&str> = repair.started.iter().map(|s| s.stream.as_str()).collect();
        assert_eq!(started, ["z"], "{tier}");
        let mut m = Monitor::builder(&edited)
            .tier(tier)
            .restore(&snapshot)
            .unwrap()
            .build();
        got.extend(run(&mut m, &mut sched, 5, times.len()));
        // The kept streams are the unedited run's at every step; `z` is
        // `2x` on every row after the edit (16 on the first, x = 8).
        assert_eq!(got.len(), want.len(), "{tier}");
        for (step, (g, w)) in got.iter().zip(&want).enumerate() {
            for (name, sample) in w {
                let kept = g.iter().find(|(n, _)| n == name).map(|(_, s)| s);
                assert_eq!(kept, Some(sample), "{tier}: `{name}` at step {step}");
            }
        }
        assert!(
            got.iter()
                .flatten()
                .any(|(n, s)| n == "z" && *s == Sample::Value(Value::Int(16)))
        );
    }
    // A new period: the others keep their clocks, and the run goes on.
    let mut m = Monitor::builder(&spec).build();
    let mut sched = Scheduler::new(m.periods());
    run(&mut m, &mut sched, 0, 5);
    let edited = Spec::parse(
        "p.dsrv",
        &format!("{src}out fast: Int @ 200ms\nfast = n + 0\n"),
    )
    .unwrap();
    let (snapshot, _) = m.repair(&edited).unwrap();
    let mut m = Monitor::builder(&edited)
        .restore(&snapshot)
        .unwrap()
        .build();
    let mut sched = Scheduler::carried(m.periods(), &sched, Some(Time(times[4])));
    let rest = run(&mut m, &mut sched, 5, times.len());
    assert!(
        rest.iter()
            .flatten()
            .any(|(n, s)| n == "fast" && matches!(s, Sample::Value(_))),
        "{rest:?}"
    );
    // Removing every periodic stream is refused, saying why.
    let untimed = Spec::parse("p.dsrv", "in x: Int\nout last: Int\nlast = x\n").unwrap();
    let e = m.repair(&untimed).unwrap_err().to_string();
    assert!(
        e.contains("removes the last, cannot carry the run over yet"),
        "{e}"
    );
}
