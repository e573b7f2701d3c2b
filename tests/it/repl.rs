//! `vigil repl`: script transcripts on every tier, tier switches that keep every bit of state,
//! and a session on a real terminal (a pseudo-terminal from util-linux `script`).

use crate::support::{run_vigil, test_dir, write};
use std::path::Path;
use vigil::Tier;

/// Every transcript under `tests/repl/` (spec.dsrv, session.txt, expected.txt and the expected
/// exit status) gives the same output on every tier.
#[test]
fn transcripts_match_on_every_tier() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/repl");
    let mut cases = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        let (spec, expected) = (read("spec.dsrv"), read("expected.txt"));
        let status: i32 = read("expected_status.txt").trim().parse().unwrap();
        for tier in Tier::ALL {
            // Each run in a directory of its own: a session may write files.
            let work = test_dir(
                "repl",
                &format!("{}-{tier}", dir.file_name().unwrap().to_string_lossy()),
            );
            write(&work, "spec.dsrv", &spec);
            // By a relative path, as diagnostics name it.
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
                .args(["repl", "--tier", tier.name(), "spec.dsrv"])
                .current_dir(&work)
                .stdin(std::fs::File::open(dir.join("session.txt")).unwrap())
                .output()
                .unwrap();
            let got = String::from_utf8_lossy(&out.stdout);
            assert_eq!(got, expected, "{} on {tier}", dir.display());
            assert_eq!(
                out.status.code(),
                Some(status),
                "{} on {tier}",
                dir.display()
            );
            assert!(
                out.stderr.is_empty(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        cases += 1;
    }
    assert!(cases >= 1, "no transcripts under {}", root.display());
}

const SPEC: &str = "in x: Int\nin y: Float\nout a: Int\nout b: Float\nout c: Bool\nout d: Int\n\
a = default(a[1], 0) + x\nb = y * 2.0 + default(b[2], 0.5)\nc = when(x > 5)\n\
d = if c then x - default(x[3], 0) else a\n";

/// A row of the generated trace (some inputs absent).
fn row(i: u64) -> (Option<i64>, Option<f64>) {
    let x = (i % 7 != 3).then_some(((i * 37) % 11) as i64 - 3);
    let y = (i % 5 != 1).then_some(((i * 13) % 9) as f64 * 0.25);
    (x, y)
}

/// Switching tiers in the middle of a run (every tier, at varying points)
/// gives exactly the outputs of one tier from the start.
#[test]
fn tier_switches_keep_every_bit_of_state() {
    let dir = test_dir("repl", "switches");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let tiers: Vec<Tier> = Tier::ALL.into_iter().filter(|t| *t != Tier::Auto).collect();
    let (mut session, mut trace) = (String::new(), String::new());
    let mut switches = 0;
    for i in 0..80u64 {
        // A switch before rows 3, 7, 12, 18, … through every tier.
        if [3, 7, 12, 18, 25, 33, 42, 52, 63, 75].contains(&i) {
            session.push_str(&format!(":tier {}\n", tiers[switches % tiers.len()].name()));
            switches += 1;
        }
        let (x, y) = row(i);
        let mut cells = Vec::new();
        let mut json = Vec::new();
        if let Some(x) = x {
            cells.push(format!("x={x}"));
            json.push(format!("\"x\": {x}"));
        }
        if let Some(y) = y {
            cells.push(format!("y={y:?}"));
            json.push(format!("\"y\": {y:?}"));
        }
        session.push_str(&if cells.is_empty() {
            "-".to_string()
        } else {
            cells.join(" ")
        });
        session.push('\n');
        trace.push_str(&format!("{{{}}}\n", json.join(", ")));
    }
    let trace_path = write(&dir, "t.jsonl", &trace);
    let (code, plain, err) = run_vigil(
        &["run", &spec, "--input", &trace_path, "--tier", "canonical"],
        None,
    );
    assert_eq!((code, err.as_str()), (0, ""));
    let (code, repl, err) = run_vigil(&["repl", "--tier", "canonical", &spec], Some(&session));
    assert_eq!((code, err.as_str()), (0, ""));
    let (steps, tier_lines): (Vec<&str>, Vec<&str>) =
        repl.lines().partition(|l| !l.starts_with("tier: "));
    assert_eq!(tier_lines.len(), switches, "{repl}");
    // Each switch really ran on its tier.
    for t in &tiers {
        assert!(
            tier_lines
                .iter()
                .any(|l| l.starts_with(&format!("tier: {t} ("))),
            "never ran on {t}:\n{repl}"
        );
    }
    assert_eq!(steps, plain.lines().collect::<Vec<_>>());
}

/// On a terminal: the prompt shows the step, a row prints its outputs, and
/// Tab completes a command.
#[test]
fn a_terminal_session_prompts_and_completes() {
    let dir = test_dir("repl", "terminal");
    let spec = write(&dir, "spec.dsrv", "in x: Int\nout y: Int\ny = x + 1\n");
    let bin = env!("CARGO_BIN_EXE_vigil");
    let mut child = std::process::Command::new("script")
        .args(["-qec", &format!("{bin} repl {spec}"), "/dev/null"])
        .env("XDG_DATA_HOME", &dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("util-linux `script` runs (it gives the session a terminal)");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        // A row, a command completed with Tab (`:he` + Tab = `:help`), a
        // definition over two lines, a row, the new stream's name completed
        // (`wo` + Tab = `wow`), leave.
        for keys in [
            "x=41\r",
            ":he\t\r",
            ":def out wow: Int\r",
            "wow = y * 2\r",
            "x=1\r",
            ":drop wo\t\r",
            ":quit\r",
        ] {
            stdin.write_all(keys.as_bytes()).unwrap();
            stdin.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    }
    let out = child.wait_with_output().unwrap();
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(screen.contains("[0]> "), "no prompt:\n{screen}");
    assert!(screen.contains("y[0] = Int(42)"), "no output:\n{screen}");
    assert!(
        screen.contains("[1]> "),
        "the prompt did not move to step 1:\n{screen}"
    );
    assert!(
        screen.contains("this list"),
        "`:he` + Tab did not complete to `:help`:\n{screen}"
    );
    assert!(
        screen.contains("...> "),
        "no continuation prompt:\n{screen}"
    );
    assert!(
        screen.contains("wow[1] = Int(4)"),
        "the defined stream gave no output:\n{screen}"
    );
    assert!(
        screen.contains("wow dropped"),
        "`wo` + Tab did not complete to the defined `wow`:\n{screen}"
    );
    // The history is kept in the data directory.
    assert!(dir.join("vigil/repl_history").exists());
}

/// Issue 35: the REPL ticks a specification's periodic streams. Rows given at times
/// (`@T ROW`) run after the ticks due by then, as `vigil run --time` runs the same rows:
/// the session prints the run's outputs, step for step (each tick's line after its time).
#[test]
fn periodic_sessions_tick_as_vigil_run_does() {
    let dir = test_dir("repl", "periodic-oracle");
    let spec = write(
        &dir,
        "spec.dsrv",
        "in x: Int\nout n: Int @ 1s\nn = default(n[1], 0) + 1\n\
         out s: Int @ 2500ms\ns = default(x, -1)\nout y: Int\ny = x * 2\n",
    );
    let times = [0.0, 0.2, 1.0, 1.9, 4.3, 4.3, 9.05, 12.5];
    let mut trace = String::new();
    let mut session = String::new();
    for (k, t) in times.iter().enumerate() {
        trace.push_str(&format!("{{\"t\": {t}, \"x\": {k}}}\n"));
        session.push_str(&format!("@{t} x={k}\n"));
    }
    let trace = write(&dir, "t.jsonl", &trace);
    let (code, run_out, err) = run_vigil(&["run", &spec, "--input", &trace, "--time", "t"], None);
    assert_eq!(code, 0, "{err}");
    let (code, repl_out, err) = run_vigil(&["repl", &spec], Some(&session));
    assert_eq!(code, 0, "{err}");
    // A tick's line starts with its time; the rest is the run's line.
    let lines: Vec<&str> = (repl_out.lines())
        .map(|l| match l.strip_prefix('@') {
            Some(rest) => rest.split_once(' ').map_or(rest, |(_, line)| line),
            None => l,
        })
        .collect();
    let want: Vec<&str> = run_out.lines().collect();
    assert!(want.len() > 2 * times.len(), "the ticks ran:\n{run_out}");
    assert_eq!(lines, want);
}

/// A trigger's clauses and message expressions are streams the parser
/// writes for it: `:drop` takes them with their trigger (it refused, "read
/// by hot#next, hot#held"), a written one is not dropped alone, and `:def`
/// of a trigger with clauses adds it (it wrote `warm#cond = …` lines that
/// did not parse).
#[test]
fn triggers_with_clauses_are_defined_and_dropped_whole() {
    let dir = crate::support::test_dir("repl", "clauses");
    let spec = crate::support::write(
        &dir,
        "r.dsrv",
        "in x: Int\ntrigger hot: x > 1 \"x {x * 2:.1}\" rising, resolve, every 2s\n",
    );
    let script = "x = 1\nx = 5\n:drop hot#cond\n:drop hot\nx = 7\n\
                  :def trigger warm: x > 3 \"w {x + 1}\" rising\nx = 8\nx = 2\nx = 9\n";
    let (code, out, err) = crate::support::run_vigil(&["repl", &spec], Some(script));
    assert_eq!(code, 0, "{out}\n{err}");
    let all = format!("{out}{err}");
    assert!(all.contains("alert: hot at step 1: x 10.0"), "{all}");
    assert!(
        all.contains("`hot#cond` cannot be dropped: hot reads it"),
        "{all}"
    );
    assert!(all.contains("hot dropped, hot#resolved dropped"), "{all}");
    assert!(all.contains("warm new"), "{all}");
    assert!(all.contains("alert: warm at step 3: w 9"), "{all}");
    assert!(all.contains("alert: warm at step 5: w 10"), "{all}");
}
