//! Consistent time: the cases under `tests/time/` (timestamps, merge order, ties, priorities,
//! clashes, lateness, keyed runs) on every tier, and the merge against a reference definition
//! of its order on random sources.

use proptest::prelude::*;
use std::path::Path;
use vigil::Tier;
use vigil::Value;
use vigil::merge::Merge;
use vigil::time::Time;

/// Every case directory: `spec.dsrv`, its sources, `args` (the run's
/// arguments after the spec), and the expected `expected` (standard
/// output), `stderr` and `status`. Each runs on every tier with the same
/// results.
#[test]
fn time_cases_match_on_every_tier() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/time");
    let mut cases = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        let args: Vec<String> = read("args").split_whitespace().map(String::from).collect();
        let status: i32 = read("status").trim().parse().unwrap();
        for tier in Tier::ALL {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
                .args(["run", "spec.dsrv", "--tier", tier.name()])
                .args(&args)
                .current_dir(&dir)
                .output()
                .unwrap();
            let name = format!("{} on {tier}", dir.display());
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                read("expected"),
                "{name}"
            );
            // A tier that cannot run the spec says which runs instead.
            let stderr: String = String::from_utf8_lossy(&out.stderr)
                .lines()
                .filter(|l| !(l.starts_with("warning: ") && l.ends_with(" instead")))
                .map(|l| format!("{l}\n"))
                .collect();
            assert_eq!(stderr, read("stderr"), "{name}");
            assert_eq!(out.status.code(), Some(status), "{name}");
        }
        cases += 1;
    }
    assert!(cases >= 9, "only {cases} time cases");
}

/// A source: rows of (time, two cells).
type Source = Vec<(i64, [Option<i64>; 2])>;

/// The merged order by its definition: for each distinct time, ascending,
/// the k-th step at that time is made of the k-th row at that time of
/// every source that has one; the first source to set a cell wins.
fn reference(sources: &[Source]) -> Vec<(i64, Vec<Option<Value>>)> {
    let mut times: Vec<i64> = sources.iter().flatten().map(|r| r.0).collect();
    times.sort_unstable();
    times.dedup();
    let mut out = Vec::new();
    for t in times {
        let at: Vec<Vec<&[Option<i64>; 2]>> = sources
            .iter()
            .map(|s| s.iter().filter(|r| r.0 == t).map(|r| &r.1).collect())
            .collect();
        let most = at.iter().map(Vec::len).max().unwrap_or(0);
        for k in 0..most {
            let mut cells = vec![None; 2];
            for rows in &at {
                if let Some(row) = rows.get(k) {
                    for (c, v) in row.iter().enumerate() {
                        if cells[c].is_none() {
                            cells[c] = v.map(Value::Int);
                        }
                    }
                }
            }
            out.push((t, cells));
        }
    }
    out
}

/// Sources of rows with non-decreasing times (small steps, so ties are
/// frequent).
fn sources() -> impl Strategy<Value = Vec<Source>> {
    let row = (
        0..3i64,
        proptest::option::of(0..100i64),
        proptest::option::of(0..100i64),
    );
    proptest::collection::vec(proptest::collection::vec(row, 0..12), 1..4).prop_map(|ss| {
        ss.into_iter()
            .map(|rows| {
                let mut t = 0;
                rows.into_iter()
                    .map(|(dt, a, b)| {
                        t += dt;
                        (t, [a, b])
                    })
                    .collect()
            })
            .collect()
    })
}

proptest! {
    /// The merge gives the reference order, whatever order the sources
    /// deliver in (the merge asks; `pick` decides which of several waiting
    /// sources is served when more than one could be).
    #[test]
    fn the_merge_is_the_reference_order(ss in sources(), order in proptest::collection::vec(0..4usize, 64)) {
        let mut m = Merge::new(ss.len(), 2, 0);
        let mut next = vec![0usize; ss.len()];
        let mut got = Vec::new();
        let mut k = 0;
        loop {
            // Push ahead sometimes, so the merge meets queues of every depth.
            let s = order[k % order.len()] % ss.len();
            k += 1;
            if k % 3 == 0 && next[s] < ss[s].len() {
                let (t, cells) = &ss[s][next[s]];
                m.push(s, Time(*t), cells.iter().map(|v| v.map(Value::Int)).collect()).unwrap();
                next[s] += 1;
                if next[s] == ss[s].len() {
                    m.end(s);
                }
                continue;
            }
            if let Some(step) = m.pop() {
                got.push((step.time.0, step.cells));
                continue;
            }
            let Some(s) = m.wants() else { break };
            match ss[s].get(next[s]) {
                Some((t, cells)) => {
                    m.push(s, Time(*t), cells.iter().map(|v| v.map(Value::Int)).collect()).unwrap();
                    next[s] += 1;
                }
                None => m.end(s),
            }
            if next[s] == ss[s].len() {
                m.end(s);
            }
        }
        prop_assert!(m.is_done());
        prop_assert_eq!(got, reference(&ss));
    }
}
