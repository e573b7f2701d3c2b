//! Keyed monitors of specifications with periodic streams: every key's outputs, rows and ticks,
//! are exactly those of a plain monitor's run over that key's rows alone under the same tick
//! rules (origin, gaps, `max_ticks`), on every tier, through eviction, snapshots and restores,
//! and through `vigil run --key`.

use crate::props::{case_strategy, generate_keyable_spec, generate_trace};
use proptest::strategy::{Strategy, ValueTree};
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use vigil::time::{GapPolicy, Scheduler, Ticking, Time};
use vigil::{
    Key, KeyedMonitor, KeyedSnapshot, KeyedSnapshotReader, Monitor, RowError, Sample, Snapshot,
    SnapshotError, Spec, StepError, Tier, Value,
};

/// One step of a key's run: its step number, its time (ns) and whether it
/// was a tick, and its printed outputs; or the end of the key's run, with
/// why.
#[derive(Clone, Debug, PartialEq)]
enum Ev {
    Step(u64, i64, bool, Vec<Sample>),
    Stop(String),
}

/// A row of the trace: its time (ns) and cells.
type Row = (i64, Vec<Option<Value>>);

const SPEC: &str = "in host: Str\n\
                    in v: Int\n\
                    aux n: Int\n\
                    n = default(n[1], 0) + 1\n\
                    out beat: Int @ 2s\n\
                    beat = n - default(n[2], 0)\n\
                    out slow: Int @ 3500ms\n\
                    slow = default(slow[1], 0) + default(v, 0)\n\
                    out tm: Float @ 2s\n\
                    tm = time()\n\
                    out sum: Int\n\
                    sum = v + default(v[1], 0)\n";

/// The run `vigil run --time` makes of `rows` with a plain monitor (the
/// oracle: `cli/timed.rs`'s rule, `Ticking::schedule` then every tick up to
/// the row's time, then the row); a runtime error or too many ticks ends it.
fn plain_run(spec: &Spec, tier: Tier, rules: Ticking, rows: &[Row]) -> Vec<Ev> {
    let mut m = Monitor::builder(spec).tier(tier).build();
    let mut sched = Scheduler::new(m.periods());
    let mut last = None;
    let mut out = Vec::new();
    for (t, row) in rows {
        let t = Time(*t);
        if let Err(due) = rules.schedule(&mut sched, last, t) {
            out.push(Ev::Stop(format!("{due} ticks")));
            return out;
        }
        last = Some(t);
        while let Some((at, due)) = sched.next_until(t) {
            match m.tick(at, &due) {
                Ok(o) => out.push(Ev::Step(o.step(), at.0, true, o.iter().collect())),
                Err(e) => {
                    out.push(Ev::Stop(e.to_string()));
                    return out;
                }
            }
        }
        match m.step_at(t, row) {
            Ok(o) => out.push(Ev::Step(o.step(), t.0, false, o.iter().collect())),
            Err(e) => {
                out.push(Ev::Stop(e.to_string()));
                return out;
            }
        }
    }
    out
}

/// The rows of `key` (the cell `key_at`) in `rows`.
fn rows_of(rows: &[Row], key_at: usize, key: &Value) -> Vec<Row> {
    (rows.iter())
        .filter(|(_, r)| r[key_at].as_ref() == Some(key))
        .cloned()
        .collect()
}

/// What the keyed run of `rows` gives each key, through `ticks_before`,
/// `next_tick` and `step_at`. `evict`: live keys bounded to that many, each
/// evicted key's snapshot kept and restored when its next row comes (so the
/// run must be as if nothing was evicted). `every`: a keyed snapshot taken
/// (in memory, and streamed through bytes) before every `every`-th row, and
/// the run continued by a monitor restored from it (on `tiers`, in turn).
/// Also returns the ticks evaluated, and the evictions.
fn keyed_run(
    spec: &Spec,
    key: &str,
    tier: Tier,
    rules: Ticking,
    rows: &[Row],
    evict: Option<usize>,
    every: Option<usize>,
) -> (HashMap<Key, Vec<Ev>>, usize, usize) {
    let evicted: Arc<Mutex<HashMap<Key, Snapshot>>> = Arc::default();
    let build = |tier: Tier, restored: Option<&KeyedSnapshot>| {
        let mut b = KeyedMonitor::builder(spec, key).tier(tier).ticking(rules);
        if let Some(n) = evict {
            let store = evicted.clone();
            b = b
                .max_keys(NonZeroUsize::new(n).unwrap())
                .on_evict(move |k, s| {
                    store.lock().unwrap().insert(k, s);
                });
        }
        if let Some(s) = restored {
            b = b.restore(s);
        }
        b.build().unwrap()
    };
    let mut m = build(tier, None);
    let key_at = spec.input_names().iter().position(|&n| n == key).unwrap();
    let mut out: HashMap<Key, Vec<Ev>> = HashMap::new();
    let mut ended: std::collections::HashSet<Key> = Default::default();
    let (mut ticks, mut evictions) = (0, 0);
    for (i, (t, row)) in rows.iter().enumerate() {
        if let Some(n) = every
            && i % n == n - 1
        {
            let snap = m.snapshot();
            let mut bytes = std::io::Cursor::new(Vec::new());
            m.write_snapshot(&mut bytes).unwrap();
            assert_eq!(bytes.get_ref(), &snap.to_bytes(), "streamed as in memory");
            let next = [Tier::Canonical, Tier::NativeRegions, tier][i % 3];
            m = match i % 2 {
                0 => build(
                    next,
                    Some(&KeyedSnapshot::from_bytes(&snap.to_bytes()).unwrap()),
                ),
                _ => {
                    bytes.set_position(0);
                    let reader = KeyedSnapshotReader::new(&mut bytes).unwrap();
                    let mut b = KeyedMonitor::builder(spec, key)
                        .tier(next)
                        .ticking(rules)
                        .restore_from(reader);
                    if let Some(n) = evict {
                        let store = evicted.clone();
                        b = b
                            .max_keys(NonZeroUsize::new(n).unwrap())
                            .on_evict(move |k, s| {
                                store.lock().unwrap().insert(k, s);
                            });
                    }
                    b.build().unwrap()
                }
            };
            assert_eq!(m.snapshot(), snap, "row {i}: restored as taken");
        }
        let k = Key::new(row[key_at].clone().unwrap());
        if ended.contains(&k) {
            continue;
        }
        // (The store's lock is released before restoring: a restore may
        // evict, and the callback takes the lock.)
        let back = match m.contains(&k) {
            true => None,
            false => evicted.lock().unwrap().remove(&k),
        };
        if let Some(s) = back {
            m.restore_key(k.clone(), &s).unwrap();
            evictions += 1;
        }
        let events = out.entry(k.clone()).or_default();
        match m.ticks_before(Time(*t), row) {
            Ok(()) => {}
            Err(StepError::Row(RowError::TooManyTicks { due, .. })) => {
                events.push(Ev::Stop(format!("{due} ticks")));
                ended.insert(k);
                continue;
            }
            Err(e) => panic!("row {i}: {e}"),
        }
        let mut stopped = false;
        while let Some(o) = m.next_tick() {
            match o {
                // The key's run stops there (its later ticks say so again).
                Err(e) => {
                    if !stopped {
                        events.push(Ev::Stop(e.to_string()));
                    }
                    stopped = true;
                }
                Ok(o) => {
                    assert!(!stopped, "a stopped key ticked");
                    assert_eq!(o.key(), Some(&k), "a row's ticks are its key's");
                    let at = o.time().expect("a tick has its time").0;
                    assert!(at <= *t, "a tick after its row");
                    events.push(Ev::Step(o.step(), at, true, o.iter().collect()));
                    ticks += 1;
                }
            }
        }
        if stopped {
            ended.insert(k);
            continue;
        }
        match m.step_at(Time(*t), row) {
            Ok(o) => events.push(Ev::Step(o.step(), *t, false, o.iter().collect())),
            Err(e) => {
                events.push(Ev::Stop(e.to_string()));
                ended.insert(k);
            }
        }
    }
    (out, ticks, evictions)
}

/// A trace of `n` rows over `keys` hosts: times that stay, step a little,
/// or jump (past `max_gap`, over many periods), from `base`.
fn trace(n: usize, keys: usize, base: i64, seed: u64) -> Vec<Row> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as usize
    };
    let steps_ms = [0, 0, 100, 700, 1_000, 2_000, 2_500, 9_000, 31_000];
    let mut t = base;
    (0..n)
        .map(|i| {
            t += steps_ms[next() % steps_ms.len()] * 1_000_000;
            // Keys come unevenly: key 0 often, the last one rarely.
            let k = (next() % (keys * keys)).isqrt();
            let v = (next() % 5 != 0).then(|| Value::Int(i as i64 % 7 - 3));
            (t, vec![Some(Value::Str(format!("h{k}").into())), v])
        })
        .collect()
}

/// The rule sets the tests run: origins (each key's first row, on the grid
/// or not, or a start before and after the trace's), gap bounds with each policy, and a tick
/// bound low enough for a jump to exceed it.
fn rule_sets() -> Vec<Ticking> {
    let s = 1_000_000_000;
    vec![
        Ticking::default(),
        Ticking {
            start: Some(Time(0)),
            ..Ticking::default()
        },
        Ticking {
            start: Some(Time(4 * s)),
            max_gap: Some(5 * s),
            on_gap: GapPolicy::Skip,
            ..Ticking::default()
        },
        Ticking {
            max_gap: Some(3 * s),
            on_gap: GapPolicy::CatchUp,
            max_ticks: 12,
            ..Ticking::default()
        },
        Ticking {
            start: Some(Time(-20 * s)),
            max_gap: Some(2 * s),
            on_gap: GapPolicy::Skip,
            max_ticks: 30,
            align: false,
        },
        // Each key's first tick on the grid, at or after its first row (the wall clock's).
        Ticking {
            align: true,
            max_gap: Some(2 * s),
            on_gap: GapPolicy::Skip,
            ..Ticking::default()
        },
    ]
}

/// Asserts that every key's events in `keyed` are the plain run's of its
/// rows; returns how many rows and ticks the plain runs had.
fn assert_per_key(
    spec: &Spec,
    keyed: &HashMap<Key, Vec<Ev>>,
    rows: &[Row],
    rules: Ticking,
    why: &str,
) {
    for (k, got) in keyed {
        let want = plain_run(spec, Tier::Canonical, rules, &rows_of(rows, 0, k.value()));
        assert_eq!(got, &want, "key {k}: {why}");
    }
}

/// The oracle: on a trace of several keys with gaps, ties (rows of one time,
/// of one key and of several) and origins before and after the trace, each
/// key's rows and ticks are a plain run's over its rows alone, on every
/// tier, under every rule set.
#[test]
fn keyed_ticks_are_each_keys_plain_run_on_every_tier() {
    let spec = Spec::parse("hb.dsrv", SPEC).unwrap();
    let (mut ticks, mut stops) = (0, 0);
    for (r, rules) in rule_sets().into_iter().enumerate() {
        let rows = trace(160, 4, 1_000_000_000, r as u64);
        for tier in Tier::ALL {
            let (got, t, _) = keyed_run(&spec, "host", tier, rules, &rows, None, None);
            assert_eq!(got.len(), 4, "every key has rows");
            assert_per_key(&spec, &got, &rows, rules, &format!("{tier}, rules {r}"));
            ticks += t;
            stops += got
                .values()
                .filter(|e| matches!(e.last(), Some(Ev::Stop(_))))
                .count();
        }
    }
    // Not vacuous: ticks ran, and a tick bound stopped some key.
    assert!(ticks > 1_000 && stops > 0, "{ticks} ticks, {stops} stops");
}

/// Keys evicted under a bound and brought back from their snapshots (which
/// carry their ticks), and the whole keyed run snapshotted and restored
/// mid-run (in memory and streamed, onto other tiers): every key's run is
/// the one never evicted or interrupted.
#[test]
fn keyed_ticks_survive_eviction_snapshots_and_restores() {
    let spec = Spec::parse("hb.dsrv", SPEC).unwrap();
    let mut evictions = 0;
    for (r, rules) in rule_sets().into_iter().enumerate() {
        let rows = trace(140, 5, 2_000_000_000, 40 + r as u64);
        // Each restore builds (compiles) a monitor: a few per run.
        for (tier, evict, every) in [
            (Tier::Canonical, Some(2), None),
            (Tier::NativeRegions, Some(1), Some(47)),
            (Tier::Quickened, None, Some(29)),
            (Tier::Auto, Some(3), Some(61)),
        ] {
            let (got, _, e) = keyed_run(&spec, "host", tier, rules, &rows, evict, every);
            assert_per_key(
                &spec,
                &got,
                &rows,
                rules,
                &format!("{tier}, rules {r}, evict {evict:?}, every {every:?}"),
            );
            evictions += e;
        }
    }
    assert!(evictions > 100, "only {evictions} keys came back");
}

/// A key's snapshot carries its scheduler and last row's time (what a
/// caller storing an evicted key gets back), in binary and JSON; a plain
/// monitor's has none; a key's ticks of other periods are refused.
#[test]
fn a_keys_snapshot_carries_its_ticks() {
    let spec = Spec::parse("hb.dsrv", SPEC).unwrap();
    let mut m = KeyedMonitor::builder(&spec, "host").build().unwrap();
    let s = 1_000_000_000;
    for t in [3 * s, 8 * s] {
        m.step_at(Time(t), [Some(Value::Str("a".into())), Some(Value::Int(1))])
            .unwrap();
    }
    let snap = m.snapshot_key(&Key::new(Value::Str("a".into()))).unwrap();
    let (sched, last) = snap.scheduler().expect("a key's ticks");
    assert_eq!(last, Some(Time(8 * s)));
    assert_eq!(sched.periods(), m.periods());
    // From 3 s: 2 s ticks at 3, 5, 7 (next 9); 3.5 s ticks at 3, 6.5 (next 10).
    assert_eq!(sched.next_ticks(), [Some(9 * s), Some(10 * s)]);
    for copy in [
        Snapshot::from_bytes(&snap.to_bytes()).unwrap(),
        Snapshot::from_json(&snap.to_json()).unwrap(),
    ] {
        assert_eq!(copy, snap);
    }
    let mut plain = Monitor::builder(&spec).build();
    plain
        .step_at(Time(0), [Some(Value::Str("a".into())), None])
        .unwrap();
    assert!(
        plain.snapshot().scheduler().is_none(),
        "a plain run's ticks are its caller's"
    );
    // Restored as a key: the same ticks go on (the next row at 12 s ticks
    // at 9 and 11 for 2 s, at 10 for 3.5 s).
    let mut other = KeyedMonitor::builder(&spec, "host").build().unwrap();
    let k = Key::new(Value::Str("a".into()));
    other.restore_key(k.clone(), &snap).unwrap();
    let row = [Some(Value::Str("a".into())), Some(Value::Int(2))];
    other.ticks_before(Time(12 * s), row.clone()).unwrap();
    let mut at = Vec::new();
    while let Some(o) = other.next_tick() {
        at.push(o.unwrap().time().unwrap().0 / s);
    }
    assert_eq!(at, [9, 10, 11]);
    // A snapshot of another specification's periods is refused.
    let other_spec = Spec::parse("hb.dsrv", &SPEC.replace("@ 2s", "@ 4s")).unwrap();
    let mut third = KeyedMonitor::builder(&other_spec, "host").build().unwrap();
    assert!(matches!(
        third.restore_key(k, &snap),
        Err(SnapshotError::OtherSpec { .. })
    ));
}

/// A keyed snapshot of the format before keys carried their ticks (1) is
/// refused by version, saying which this vigil reads.
#[test]
fn keyed_snapshots_of_the_previous_format_are_refused() {
    let spec = Spec::parse("hb.dsrv", SPEC).unwrap();
    let mut m = KeyedMonitor::builder(&spec, "host").build().unwrap();
    m.step_at(Time(0), [Some(Value::Str("a".into())), Some(Value::Int(1))])
        .unwrap();
    let mut bytes = m.snapshot().to_bytes();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    let e = KeyedSnapshot::from_bytes(&bytes).unwrap_err();
    assert_eq!(
        e,
        SnapshotError::Version {
            found: 1,
            supported: vigil::KEYED_FORMAT_VERSION
        }
    );
    assert!(e.to_string().contains("version 1 is not supported"), "{e}");
}

/// Too many ticks due before a key's row: the row is rejected, naming the
/// key and the count, and nothing changes (a new key is not made; a live
/// one keeps its ticks); other keys go on.
#[test]
fn too_many_ticks_reject_the_row_and_change_nothing() {
    let spec = Spec::parse("hb.dsrv", SPEC).unwrap();
    let s = 1_000_000_000;
    let rules = Ticking {
        start: Some(Time(0)),
        max_ticks: 10,
        ..Ticking::default()
    };
    let mut m = KeyedMonitor::builder(&spec, "host")
        .ticking(rules)
        .build()
        .unwrap();
    let row = |h: &str| [Some(Value::Str(h.into())), Some(Value::Int(1))];
    // A new key whose first row is 100 s after the origin: 51 + 29 ticks.
    let e = m.ticks_before(Time(100 * s), row("far")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("80 ticks of key far are due before its row"),
        "{e}"
    );
    assert!(!m.contains(&Key::new(Value::Str("far".into()))));
    assert!(m.step_at(Time(100 * s), row("far")).is_err());
    m.step_at(Time(5 * s), row("near")).unwrap();
    let near = Key::new(Value::Str("near".into()));
    let before = m.snapshot_key(&near).unwrap();
    assert!(m.ticks_before(Time(60 * s), row("near")).is_err());
    assert_eq!(m.snapshot_key(&near).unwrap(), before, "nothing changed");
    assert!(m.next_tick().is_none());
    m.step_at(Time(9 * s), row("near")).unwrap();
}

/// A time reset starts every key's ticks again at its next row; with
/// `ResetPolicy::Once`, each key that had a row first ticks once at its
/// last row's time, every period due.
#[test]
fn a_time_reset_restarts_every_keys_ticks() {
    use vigil::lang::ast::ResetPolicy;
    let spec = Spec::parse("hb.dsrv", SPEC).unwrap();
    let s = 1_000_000_000;
    let row = |h: &str| [Some(Value::Str(h.into())), Some(Value::Int(1))];
    let mut m = KeyedMonitor::builder(&spec, "host").build().unwrap();
    m.step_at(Time(3 * s), row("a")).unwrap();
    m.step_at(Time(4 * s), row("b")).unwrap();
    m.reset_ticks(ResetPolicy::Once);
    let mut once = Vec::new();
    while let Some(o) = m.next_tick() {
        let o = o.unwrap();
        once.push((o.key().unwrap().to_string(), o.time().unwrap().0 / s));
    }
    assert_eq!(once, [("a".to_string(), 3), ("b".to_string(), 4)]);
    // After the reset, a's ticks start at its next row's time (1 s), not
    // at 5 s: the first tick is at 1 s, before the row.
    m.ticks_before(Time(s), row("a")).unwrap();
    let first = m.next_tick().unwrap().unwrap().time().unwrap();
    assert_eq!(first, Time(s));
    m.reset_ticks(ResetPolicy::Cancel);
    assert!(m.next_tick().is_none(), "cancel fires nothing");
}

/// Generated specifications with one stream made periodic, keyed by an
/// added Str input over a generated trace with generated times: every key's
/// outputs are a plain run's of its rows (on a tier of the case's), and the
/// cases do tick several keys (the coverage guard).
#[test]
fn generated_keyed_periodic_runs_equal_per_key_plain_runs() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (
        case_strategy(),
        proptest::collection::vec(0..4i64, 60),
        0..6usize,
        1..4i64,
        0..5usize,
    );
    let (mut cases, mut ticking_keys, mut ticks) = (0, 0, 0);
    for case in 0..120 {
        let ((spec_data, len, trace_data), gaps, pick, period, r) =
            strategy.new_tree(&mut runner).unwrap().current();
        let g = generate_keyable_spec(&spec_data, true);
        let name = format!("s{pick}");
        let body: String = g
            .source
            .lines()
            .map(|l| {
                let decl = l.split_whitespace().nth(1).map(|n| n.trim_end_matches(':'));
                let kind = l.split_whitespace().next();
                if decl == Some(name.as_str()) && matches!(kind, Some("out" | "aux")) {
                    format!("{l} @ {period}s\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        if body == g.source {
            continue;
        }
        // The key is declared first: cell 0.
        let source = format!("in key: Str\n{body}");
        let Ok(spec) = Spec::parse("gen.dsrv", &source) else {
            continue;
        };
        let cells = generate_trace(&g.inputs, len.max(4) * 3, &trace_data, 2);
        let mut t = 0;
        let rows: Vec<Row> = cells
            .into_iter()
            .enumerate()
            .map(|(i, mut row)| {
                t += gaps[i % gaps.len()] * 700_000_000;
                let k = trace_data.get(i).map_or(0, |d| d % 3);
                row.insert(0, Some(Value::Str(format!("k{k}").into())));
                (t, row)
            })
            .collect();
        let rules = rule_sets()[r];
        let tier = Tier::ALL[case % Tier::ALL.len()];
        let (got, n, _) = keyed_run(&spec, "key", tier, rules, &rows, None, None);
        for (k, events) in &got {
            let want = plain_run(&spec, tier, rules, &rows_of(&rows, 0, k.value()));
            assert_eq!(events, &want, "case {case}, key {k}, {tier}\n{source}");
            ticking_keys +=
                usize::from(events.iter().any(|e| matches!(e, Ev::Step(_, _, true, _))));
        }
        ticks += n;
        cases += 1;
    }
    eprintln!(
        "generated keyed periodic runs: {cases} cases, {ticking_keys} keys ticked, {ticks} ticks"
    );
    assert!(
        cases >= 50 && ticking_keys >= 100 && ticks >= 1_000,
        "{cases} cases, {ticking_keys} keys ticked, {ticks} ticks"
    );
}

/// A keyed monitor of many keys with a periodic stream: a row costs the same
/// whatever the number of keys (a key's ticks are made due by its own rows
/// only, so no row looks at the others).
#[test]
fn many_keys_tick_without_a_cost_per_key() {
    let spec = Spec::parse("hb.dsrv", SPEC).unwrap();
    let mut m = KeyedMonitor::builder(&spec, "host")
        .tier(Tier::Canonical)
        .build()
        .unwrap();
    let s = 1_000_000_000;
    let keys = 100_000;
    let row = |k: usize| [Some(Value::Str(format!("{k}").into())), Some(Value::Int(1))];
    let started = std::time::Instant::now();
    // Every key's first row, one time each; then one key again and again.
    for k in 0..keys {
        m.step_at(Time(k as i64), row(k)).unwrap();
    }
    let first = started.elapsed();
    let again = std::time::Instant::now();
    let mut ticks = 0;
    for j in 1..=keys as i64 {
        let at = Time(keys as i64 + j * s);
        m.ticks_before(at, row(7)).unwrap();
        while let Some(o) = m.next_tick() {
            o.unwrap();
            ticks += 1;
        }
        m.step_at(at, row(7)).unwrap();
    }
    assert_eq!(m.key_count(), keys);
    // Key 7's ticks: of 2 s and of 3.5 s, sharing a step every 14 s.
    assert_eq!(ticks, 71_429);
    // Generous: the second loop does the same rows and more ticks; were a
    // row to visit every key it would take 10^10 steps.
    assert!(
        again.elapsed() < first * 20 + std::time::Duration::from_secs(5),
        "{:?} then {:?}",
        first,
        again.elapsed()
    );
}

/// `vigil run --key host --time t` with a periodic specification: each
/// host's lines (rows and ticks, with its key) are `vigil run --time t`'s
/// over that host's rows alone, with the same `--start`, `--max-gap` and
/// `--on-gap`, on every tier; without `--time` a host's rows are stamped
/// with their index among its rows, as its own trace's would be; a time
/// jump past `--max-ticks` ends the run as a plain run's does; and a scaled
/// run refuses the specification, naming the feature.
#[test]
fn vigil_run_key_ticks_each_host_as_its_own_run() {
    use crate::support::{run_vigil, test_dir, write};
    let dir = test_dir("keyed_time", "cli");
    let spec = write(&dir, "hb.dsrv", SPEC);
    // Hosts' rows at strictly increasing times each, sharing times across
    // hosts, with gaps (a plain run of one host merges rows of one time).
    let mut csv = String::from("t,host,v\n");
    let mut per: HashMap<usize, String> = HashMap::new();
    let steps = [0.0, 0.5, 1.0, 2.0, 7.25, 0.5, 13.0, 1.5];
    let mut t = 1.0;
    let mut last: HashMap<usize, f64> = HashMap::new();
    for i in 0..60 {
        t += steps[(i * 5 + i / 7) % steps.len()];
        let h = (i * 7 + i / 3) % 3;
        if last.get(&h) == Some(&t) {
            continue;
        }
        last.insert(h, t);
        let v = if i % 6 == 5 {
            String::new()
        } else {
            (i % 9).to_string()
        };
        let line = format!("{t},h{h},{v}\n");
        csv.push_str(&line);
        per.entry(h)
            .or_insert_with(|| "t,host,v\n".into())
            .push_str(&line);
    }
    let trace = write(&dir, "all.csv", &csv);
    let options: [&[&str]; 3] = [
        &[],
        &["--start", "0"],
        &["--start", "3", "--max-gap", "5", "--on-gap", "skip"],
    ];
    for opts in options {
        // The plain runs, one per host: its lines, without the host column.
        let mut want: HashMap<String, Vec<String>> = HashMap::new();
        for (h, rows) in &per {
            let path = write(&dir, &format!("h{h}.csv"), rows);
            let mut args = vec![
                "run", &spec, "--time", "t", "--input", &path, "--output", "csv",
            ];
            args.extend_from_slice(opts);
            let (code, out, err) = run_vigil(&args, None);
            assert_eq!(code, 0, "{err}");
            want.insert(
                format!("\"h{h}\""),
                out.lines().skip(1).map(String::from).collect(),
            );
        }
        for tier in Tier::ALL {
            let mut args = vec![
                "run",
                &spec,
                "--key",
                "host",
                "--time",
                "t",
                "--input",
                &trace,
                "--output",
                "csv",
                "--tier",
                tier.name(),
            ];
            args.extend_from_slice(opts);
            let (code, out, err) = run_vigil(&args, None);
            assert_eq!(code, 0, "{err}");
            let mut got: HashMap<String, Vec<String>> = HashMap::new();
            for line in out.lines().skip(1) {
                // step,host,time,…: the host's column taken out.
                let mut cells: Vec<&str> = line.split(',').collect();
                let host = cells.remove(1).to_string();
                got.entry(host).or_default().push(cells.join(","));
            }
            assert_eq!(got, want, "{tier} {opts:?}");
            let ticks = got.values().flatten().filter(|l| l.contains(",,")).count();
            assert!(ticks > 30, "{ticks} tick lines");
        }
    }
    // Without --time: a host's rows are 0, 1, 2… seconds of its own trace.
    let (code, keyed, err) = run_vigil(&["run", &spec, "--key", "host", "--input", &trace], None);
    assert_eq!(code, 0, "{err}");
    for (h, rows) in &per {
        let path = write(&dir, &format!("h{h}.csv"), rows);
        let (_, plain, err) =
            run_vigil(&["run", &spec, "--input", &path, "--time-unit", "s"], None);
        assert!(err.is_empty(), "{err}");
        let mine: Vec<String> = (keyed.lines())
            .filter(|l| l.contains(&format!("{{host=h{h}}}")))
            .map(|l| l.replace(&format!("{{host=h{h}}}"), ""))
            .collect();
        assert_eq!(
            mine,
            plain.lines().collect::<Vec<_>>(),
            "h{h} without --time"
        );
    }
    // A jump past --max-ticks ends the run, as it ends a plain run.
    let (code, _, err) = run_vigil(
        &[
            "run",
            &spec,
            "--key",
            "host",
            "--time",
            "t",
            "--input",
            &trace,
            "--max-ticks",
            "3",
        ],
        None,
    );
    // The status of a plain run's jump (a trace error).
    assert_eq!(code, 4, "{err}");
    assert!(
        err.contains("ticks of key h") && err.contains("more than --max-ticks 3"),
        "{err}"
    );
    // Scaled (it was refused): each key's ticks travel with its row, so the
    // output is the single-process run's byte for byte, with and without
    // --time, and with the scheduler's flags (they were refused scaled).
    let timings: [&[&str]; 4] = [
        &["--time", "t"],
        &[],
        &[
            "--time",
            "t",
            "--start",
            "3",
            "--max-gap",
            "5",
            "--on-gap",
            "skip",
        ],
        &["--start", "2", "--max-gap", "4"],
    ];
    for timed in timings {
        let base = [
            &["run", &spec, "--key", "host", "--input", &trace][..],
            timed,
        ]
        .concat();
        let (code, want, err) = run_vigil(&base, None);
        assert_eq!(code, 0, "{err}");
        for workers in ["1", "3"] {
            let (code, got, err) = run_vigil(&[&base[..], &["--workers", workers]].concat(), None);
            assert_eq!(code, 0, "{err}");
            assert!(
                got == want,
                "{workers} workers {timed:?}: not the single-process output"
            );
        }
    }
}
