//! Snapshot tests of `explain` output: the fusion example's partition must be exactly as
//! documented (docs/engine.md, "The fusion example").

use expect_test::expect;
use vigil::fusion::FusedPlan;
use vigil::plan::Plan;
use vigil::{Spec, Tier};

fn fusion_example() -> Spec {
    Spec::parse("fusion.dsrv", include_str!("../../examples/fusion.dsrv")).unwrap()
}

/// The fusion example: six steps; blended's `+` reads the default from a register
/// (same program) and the `if` from the arena; only the root is exported.
#[test]
fn design_example_partitions_into_six_steps() {
    let spec = fusion_example();
    let fused = FusedPlan::new(std::sync::Arc::new(Plan::new(spec.checked().clone())));
    expect![[r#"
        (1) stream region r0 {scaled, offset, merged}
        (2) graph step blended: 2 islands
              island [n3: blended[1], n4: default(n3, Int(0))] in r1, exports []
              canonical run [n5: if flag then merged else scaled]
              island [n6: n4 + n5] in r1, exports [n6: n4 + n5]
              executes: canonical [n5: if flag then merged else scaled]; run r1
        (3) stream region r2 {delta, ratio}
        (4) graph step total: one island
              island [n9: total[1], n10: default(n9, Int(0)), n11: n10 + ratio] in r3, exports [n11: n10 + ratio]
              executes: run r3
        (5) graph step echoed: no island
        (6) stream region r4 {level, alert}
    "#]]
    .assert_eq(&fused.describe());
}

#[test]
fn explain_names_tiers_and_prints_region_ir() {
    let text = vigil::explain::explain(&fusion_example(), Tier::Quickened);
    expect![[r#"
        (5) echoed: canonical, because its values are not of one scalar representation (type Str, signature none)
    "#]]
    .assert_eq(&(text.lines().find(|l| l.starts_with("(5) echoed:")).unwrap().to_string() + "\n"));
    let r1 = &text[text.find("region r1:").unwrap()..text.find("region r2:").unwrap()];
    expect![[r#"
        region r1: preflight [blended (node n5) i64]
          rings (promoted once defined): lanes 0..1 i64
        program inputs=0 env=34 state=1 sites=1
        block0:
            guard_held 19, i64, 0
            v0 = load_env.i64 19
            v1 = ring_load.i64 0, 1
            v2 = iadd_ck v1, v0, site0
            store_env.i64 7, v2
            return

    "#]]
    .assert_eq(r1);
}

/// On native-regions, `explain` names the code that really runs each region:
/// it used to say "quickened" for regions Cranelift compiled.
#[test]
fn explain_on_native_regions_says_native() {
    let what_runs = |tier| {
        let text = vigil::explain::explain(&fusion_example(), tier);
        let start = text.find("what runs each step:").unwrap();
        let end = text[start..].find("\nregion r0:").unwrap() + start;
        text[start..end].to_string()
    };
    expect![[r#"
        what runs each step:
        (1) {scaled, offset, merged}: native region r0 on every row whose preflight passes; canonical on the others
        (2) blended: graph step because it is temporal (n3: blended[1]); islands native in r1 once their rings are promoted, canonical runs and declined rows canonical
        (3) {delta, ratio}: native region r2 on every row whose preflight passes; canonical on the others
        (4) total: graph step because it is temporal (n9: total[1]); islands native in r3 once their rings are promoted, canonical runs and declined rows canonical
        (5) echoed: canonical, because its values are not of one scalar representation (type Str, signature none)
        (6) {level, alert}: native region r4 on every row whose preflight passes; canonical on the others
    "#]]
    .assert_eq(&what_runs(Tier::NativeRegions));
    assert!(what_runs(Tier::Quickened).contains("quickened region r0"));
}

/// The whole-row program's tick barrier reloads each ring operand from its
/// arena slot instead of keeping the SSA value live to the end of the row
/// (which made Cranelift's compile time quadratic in the number of streams).
#[test]
fn whole_row_barrier_reloads_ring_operands() {
    let spec = Spec::parse(
        "acc.dsrv",
        "in x: Int\nout s: Int\nout t: Int\ns = default(s[1], 0) + x\nt = s[2] * 2\n",
    )
    .unwrap();
    let text = vigil::explain::explain(&spec, Tier::NativeWhole);
    let program = &text[text.find("whole-row program:").unwrap()..];
    expect![[r#"
        whole-row program:
        program inputs=1 env=10 state=3 sites=2
        block0:
            guard_input_held 0, 0, i64, 0
            v0 = take_input.i64 0, 0
            v1 = ring_load.i64 0, 1
            store_env.i64 3, v1
            store_env.i64 4, v1
            v2 = iadd_ck v1, v0, site0
            store_env.i64 1, v2
            v3 = ring_load.i64 1, 2
            store_env.i64 6, v3
            v4 = iconst 2
            v5 = imul_ck v3, v4, site1
            store_env.i64 2, v5
            v6 = load_env.i64 1
            ring_store.i64 0, 1, v6
            v7 = load_env.i64 1
            ring_store.i64 1, 2, v7
            return
    "#]]
    .assert_eq(program);
}

/// On native-whole the fusion example runs its Str stream (and the Str
/// input) as the kernel's tail, and `explain` says so and why.
#[test]
fn explain_lists_the_whole_row_kernels_tail() {
    let text = vigil::explain::explain(&fusion_example(), Tier::NativeWhole);
    let start = text.find("tier:").unwrap();
    let end = text.find("whole-row program:").unwrap();
    expect![[r#"
        tier: native-whole (requested; the canonical tier takes `lbl`, `echoed` after the kernel (`lbl` is not scalar))

        the whole row is one native program: it checks every input (the row guard) before computing anything, computes every stream in schedule order, stores every node (a later canonical row may hold it) and pushes the offset rings; a row it declines runs canonically, and it resumes once its rings are promoted again

        the kernel leaves to the canonical tier, which takes them after it in schedule order on every row the kernel completes (so rows run one at a time: there is no batch kernel):
          lbl: `lbl` is not scalar
          echoed: `echoed` is not scalar

    "#]]
    .assert_eq(&text[start..end]);
}

/// Untyped inputs: `explain` (before any row) says how they are speculated
/// on; after rows, the stats say what was speculated, and the programs then
/// running fuse what reads them.
#[test]
fn untyped_inputs_are_speculated_and_the_stats_say_so() {
    let spec = Spec::parse(
        "u.dsrv",
        "in x\nin y\nout s: Int\nout t\ns = default(s[1], 0) + x\nt = x * 2 + y\n",
    )
    .unwrap();
    let text = vigil::explain::explain(&spec, Tier::Auto);
    let line = text
        .lines()
        .find(|l| l.starts_with("speculation:"))
        .unwrap();
    expect![[r#"
        speculation: the untyped inputs `x`, `y` have no scalar signature, so nothing reading them is fused below. On the first rows the engine watches them; once each has had a value (or after 16 rows) it rebuilds its programs as if each always had the representation of its first value (Int, Float or Bool), guarded: a row that contradicts it runs canonically, and once 64 rows and at least one in 16 since have, the programs are rebuilt without it. `vigil run --stats` says what was speculated and how it went.
    "#]]
    .assert_eq(&format!("{line}\n"));
    let mut m = vigil::Monitor::builder(&spec).tier(Tier::Auto).build();
    let row = |x: vigil::Value, y: vigil::Value| vec![Some(x), Some(y)];
    use vigil::Value::{Float, Int};
    for i in 0..100 {
        // The first row starts the speculation (the programs are rebuilt);
        // the run then moves up to native code at once, not after
        // `TIER_UP_ROWS`.
        if i == 1 {
            m.tier_up_now();
        }
        m.step(row(Int(i), Int(i % 7))).unwrap();
    }
    // A Float `y` contradicts the speculation: that row runs canonically.
    let out = m.step(row(Int(100), Float(0.5))).unwrap().to_vec();
    assert_eq!(out[1], vigil::Sample::Value(Float(200.5)));
    let stats = m.stats();
    assert_eq!(stats.tier, Tier::NativeWhole, "{}", stats.why);
    assert!(stats.whole_rows >= 98, "{stats}");
    expect![[r#"
        speculating x as i64, y as i64 (guarded): 1 of 101 rows since contradicted it (each ran canonically)
    "#]]
    .assert_eq(&format!("{}\n", stats.speculation.unwrap()));
    // Rows that keep contradicting it end it: the programs are rebuilt from
    // the spec's own signatures (nothing reading `x` or `y` is fused).
    for i in 0..64 {
        m.step(row(Float(i as f64), Int(1))).unwrap();
    }
    let stats = m.stats();
    assert_eq!(stats.tier, Tier::NativeRegions, "{}", stats.why);
    expect![[r#"
        speculated x as i64, y as i64, given up when 64 of 164 rows had contradicted it; the programs were rebuilt without it
    "#]]
    .assert_eq(&format!("{}\n", stats.speculation.unwrap()));
}

/// A spec of windows: each window's memory bound and cost, the fused count
/// windows' `window` instructions in the whole-row program, and the time
/// window left to the canonical tail (and why).
#[test]
fn explain_prints_window_bounds_and_fused_windows() {
    let src = "in x: Int\nin f: Float\nout s: Int\nout m: Float\nout n: Int\n\
               s = window(x, 100, sum)\nm = window(f, 10, max)\nn = window(x, 10s, count)\n";
    let spec = Spec::parse("w.dsrv", src).unwrap();
    let text = vigil::explain::explain(&spec, Tier::NativeWhole);
    let at = text.find("\nwindows").expect("a windows section");
    let end = text.find("\nthe whole row").expect("a whole-row section");
    let program = text
        .find("whole-row program:")
        .expect("the whole-row program");
    let program_end = text[program..]
        .find("\n\n")
        .map_or(text.len(), |e| program + e);
    expect![[r#"

        windows (state in the run, 2672 bytes in all; count windows and STL intervals and sinces over scalars fuse, time windows run on the canonical tier):
          n0: window(x, 100, sum): count window of 100: 100 values and a running total, 832 bytes, O(1) per step
          n1: window(f, 10, max): count window of 10: 10 values and the extremes of 10 suffixes, 192 bytes, amortised O(1) per step
          n2: window(x, 10s, count, 100ms): time window of 10s: 100 panes of 100ms, 1648 bytes, O(1) per step; read at rows: (t - T, t], its far edge rounded to a pane of 100ms

        tier: native-whole (requested; the canonical tier takes `n` after the kernel (n2: window(x, 10s, count, 100ms) is a time window (its panes have no fused state machine)))

        whole-row program:
        program inputs=2 env=8 state=0 sites=2 windows=334
        block0:
            guard_input_held 0, 0, i64, 0
            guard_input_held 1, 1, f64, 1
            v0 = take_input.i64 0, 0
            v1 = take_input.f64 1, 1
            v2 = input_present 0
            v3 = window_if.i64 0, 0x100000064, v2, v0, site0, 2
            store_env.i64 2, v3
            v4 = input_present 1
            v5 = window_if.f64 104, 0x1040000000a, v4, v1, site1, 3
            store_env.f64 3, v5
            return
    "#]]
    .assert_eq(&format!("{}\n{}", &text[at..end], &text[program..program_end]));
}

/// STL inside a specification: each interval's bound, and the intervals
/// fused into the whole-row program as `interval` instructions (at the
/// row's time, from the frame), nothing left to the canonical tier.
#[test]
fn explain_prints_stl_intervals_fused() {
    let src = "in x: Float\nin y: Int\nout q: Bool\nout r: Float\n\
               q = stl(G[0, 2s](x > 3) && F[1s, 3s](y < 2))\nr = stl_rob(G[0, 2s](x > 3), 16)\n";
    let spec = Spec::parse("stl.dsrv", src).unwrap();
    let text = vigil::explain::explain(&spec, Tier::NativeWhole);
    let at = text.find("\nwindows").expect("a windows section");
    let end = text.find("\nthe whole row").expect("a whole-row section");
    let program = text
        .find("whole-row program:")
        .expect("the whole-row program");
    let program_end = text[program..]
        .find("\n\n")
        .map_or(text.len(), |e| program + e);
    expect![[r#"

        windows (state in the run, 17088 bytes in all; count windows and STL intervals and sinces over scalars fuse, time windows run on the canonical tier):
          n1: window(n0, [0, 2s], all, 256): STL interval [0, 2s]: a monotonic deque of samples, at most 256 samples, 8256 bytes, amortised O(1) per sample
          n3: window(n2, [1s, 3s], any, 256): STL interval [1s, 3s]: a monotonic deque and the samples not yet 1s old, at most 256 samples, 8256 bytes, amortised O(1) per sample
          n8: window(n7, [0, 2s], min, 16): STL interval [0, 2s]: a monotonic deque of samples, at most 16 samples, 576 bytes, amortised O(1) per sample

        tier: native-whole (requested)

        whole-row program:
        program inputs=2 env=18 state=0 sites=3 windows=2136
        block0:
            guard_input_held 0, 0, f64, 0
            guard_input_held 1, 1, i64, 1
            v0 = take_input.f64 0, 0
            v1 = take_input.i64 1, 1
            v2 = iconst 3
            v3 = fcvt_from_i64 v2
            v4 = fcmp.gt v0, v3
            store_env.b1 4, v4
            v5 = interval.b1 0, 0, 2000000000, 0x20700000100, v4, site0
            store_env.b1 5, v5
            v6 = iconst 2
            v7 = icmp.lt v1, v6
            store_env.b1 6, v7
            v8 = interval.b1 1032, 1000000000, 3000000000, 0x20600000100, v7, site1
            store_env.b1 7, v8
            v9 = band v5, v8
            store_env.b1 2, v9
            v10 = fconst 1.0
            v11 = fmul v0, v10
            store_env.f64 9, v11
            v12 = iconst 3
            v13 = fconst 1.0
            v14 = fcvt_from_i64 v12
            v15 = fmul v14, v13
            store_env.f64 10, v15
            v16 = fsub v11, v15
            store_env.f64 11, v16
            v17 = interval.f64 2064, 0, 2000000000, 0x10300000010, v16, site2
            store_env.f64 3, v17
            return
    "#]]
    .assert_eq(&format!("{}\n{}", &text[at..end], &text[program..program_end]));
}

/// Where an STL interval stays on the canonical tier, `explain` says why:
/// in a specification with periodic streams (whose steps are not the
/// kernels'), and inside an `if` arm (a read moves the interval's clock,
/// and fused code computes both arms).
#[test]
fn explain_says_why_an_interval_stays_canonical() {
    let periodic = Spec::parse(
        "p.dsrv",
        "in x: Float\nout q: Bool\nout c: Int @ 1s\nq = stl(G[0, 2s](x > 3))\nc = 1\n",
    )
    .unwrap();
    let text = vigil::explain::explain(&periodic, Tier::NativeRegions);
    assert!(
        text.contains(
            "n1: window(n0, [0, 2s], all, 256) is an STL operator's interval in a \
             specification with periodic streams"
        ),
        "{text}"
    );
    let arm = Spec::parse(
        "a.dsrv",
        "in x: Float\nout z: Bool\nz = if x > 0 then stl(F[0, 1s](x > 1)) else false\n",
    )
    .unwrap();
    let text = vigil::explain::explain(&arm, Tier::NativeWhole);
    assert!(
        text.contains(
            "n2: window(n1, [0, 1s], any, 256) is an STL operator's interval inside an `if` \
             arm (a read moves its clock)"
        ),
        "{text}"
    );
}

/// Where an STL since stays on the canonical tier, `explain` says why, as
/// for an interval: with periodic streams, and inside an `if` arm.
#[test]
fn explain_says_why_a_since_stays_canonical() {
    let periodic = Spec::parse(
        "p.dsrv",
        "in x: Float\nout q: Bool\nout c: Int @ 1s\nq = stl(x > 0 S[0, 2s] x > 3)\nc = 1\n",
    )
    .unwrap();
    let text = vigil::explain::explain(&periodic, Tier::NativeRegions);
    assert!(
        text.contains(
            "n2: since(n0, n1, [0, 2s], any, 256) is an STL since in a specification with \
             periodic streams"
        ),
        "{text}"
    );
    let arm = Spec::parse(
        "a.dsrv",
        "in x: Float\nout z: Bool\nz = if x > 0 then stl(x > 1 S[0, 1s] x > 2) else false\n",
    )
    .unwrap();
    let text = vigil::explain::explain(&arm, Tier::NativeWhole);
    assert!(
        text.contains(
            "n3: since(n1, n2, [0, 1s], any, 256) is an STL since inside an `if` arm (a read \
             moves its clock)"
        ),
        "{text}"
    );
}

/// The aggregates of issue 37 §4: each window's memory bound and cost, and
/// which run where (count windows fuse, Welford's state and the sorted
/// values being words of the run; time windows run canonically).
#[test]
fn explain_prints_the_bounds_of_spread_percentile_and_integral_windows() {
    let src = "in x: Int\nin f: Float\nout v: Float\nout p: Float\nout a: Float\n\
               out s: Float\nout i: Float\nout q: Float\n\
               v = window(f, 50, variance)\np = window(x, 20, p99)\na = window(f, 8, first)\n\
               s = window(f, 1min, stddev)\ni = window(f, 10s, integral, 1s)\nq = window(x, 1min, p95)\n";
    let spec = Spec::parse("w.dsrv", src).unwrap();
    let text = vigil::explain::explain(&spec, Tier::NativeWhole);
    let at = text.find("\nwindows").expect("a windows section");
    let end = text.find("\nthe whole row").expect("a whole-row section");
    expect![[r#"

        windows (state in the run, 120136 bytes in all; count windows and STL intervals and sinces over scalars fuse, time windows run on the canonical tier):
          n0: window(f, 50, variance): count window of 50: 50 values and Welford's mean and sum of squares, 440 bytes, amortised O(1) per step (recomputed every N values)
          n1: window(x, 20, p99): count window of 20: 20 values and the same 20 sorted (exact), 344 bytes, O(N) per step (a sorted insertion and removal)
          n2: window(f, 8, first): count window of 8: 8 values, 80 bytes, O(1) per step
          n3: window(f, 1min, stddev, 600ms): time window of 1min: 100 panes of 600ms, 4048 bytes, O(100) per read; read at rows: (t - T, t], its far edge rounded to a pane of 600ms
          n4: window(f, 10s, integral, 1s): time window of 10s: 10 panes of 1s, 608 bytes, O(10) per read; read at rows: (t - T, t], its far edge rounded to a pane of 1s
          n5: window(x, 1min, p95, 6s): time window of 1min: 10 panes of 6s, 114616 bytes, a DDSketch per pane and one of the closed panes merged (1% relative error, at most 512 bins per sign), O(bins) per value and per read, O(10 panes × bins) when a new pane starts; read at rows: (t - T, t], its far edge rounded to a pane of 6s

        tier: native-whole (requested; the canonical tier takes `s`, `i`, `q` after the kernel (n3: window(f, 1min, stddev, 600ms) is a time window (its panes have no fused state machine)))
    "#]]
    .assert_eq(&text[at..end]);
}

/// Containers, a lambda and a `dynamic`: their nodes, the `dynamic` section
/// (each scope, where instances run) and the canonical steps that hold them
/// while the scalar stream beside them fuses.
#[test]
fn explain_shows_containers_lambdas_and_dynamic_scopes() {
    let spec = Spec::parse(
        "c.dsrv",
        "in x: Int\nin s: Str\nout l\nout y: Int\nout d\n\
         l = List.map(\\v: Int -> v + x[1], [x])\ny = x * 2\nd = dynamic(s, {x, y})\n",
    )
    .unwrap();
    let text = vigil::explain::explain(&spec, Tier::Quickened);
    let from = |start: &str, end: &str| {
        let a = text.find(start).unwrap();
        text[a..a + text[a..].find(end).unwrap()].to_string()
    };
    expect![[r#"
        nodes:
          l: n0: x[1]; n1: lambda capturing (n0); n2: [x]; n3: List.map(n1, n2)
          y: n4: x * Int(2)
          d: n5: dynamic(s)

    "#]]
    .assert_eq(&from("nodes:", "dynamic ("));
    expect![[r#"
        dynamic (each new string is parsed, checked and planned as an instance of its own, run on an engine of their own on the quickened tier (fused, and compiled on the native tiers, when the string arrives); one instance per `dynamic` is kept, dropped when the next string starts one):
          n5: dynamic(s): reads x, y

    "#]]
    .assert_eq(&from("dynamic (", "tier:"));
}

/// `vigil explain --summary`: one line per tier, naming the tier a run asked
/// for it runs and why (here every tier runs as asked; native-whole leaves the
/// Str stream to its tail).
#[test]
fn explain_summary_is_one_line_per_tier() {
    let (status, out, err) = crate::support::run_vigil(
        &[
            "explain",
            "--summary",
            concat!(env!("CARGO_MANIFEST_DIR"), "/examples/fusion.dsrv"),
        ],
        None,
    );
    assert_eq!(status, 0, "{err}");
    assert_eq!(out.lines().count(), Tier::ALL.len(), "{out}");
    for (line, tier) in out.lines().zip(Tier::ALL) {
        assert!(line.starts_with(tier.name()), "{line}");
        assert!(line.contains(" runs "), "{line}");
    }
    // A spec of Str streams only: native-whole has nothing to compile.
    let spec = Spec::parse("s.dsrv", "in s: Str\nout e: Str\ne = s").unwrap();
    let summary = vigil::explain::summary(&spec);
    let whole = summary
        .lines()
        .find(|l| l.starts_with("native-whole"))
        .unwrap();
    assert!(whole.contains("runs native-regions instead: "), "{whole}");
}

/// STL since inside a specification: its bound and memory, and the since
/// fused into the whole-row program as a `since` instruction (each operand
/// with its presence), nothing left to the canonical tier.
#[test]
fn explain_prints_an_stl_since_fused() {
    let src = "in x: Float\nin b: Bool\nout q: Bool\nout r: Float\n\
               q = stl(b S[500ms, 2s] x > 3)\nr = stl_rob(x > 0 S[0, 1s] x > 2, 16)\n";
    let spec = Spec::parse("stl.dsrv", src).unwrap();
    let text = vigil::explain::explain(&spec, Tier::NativeWhole);
    let at = text.find("\nwindows").expect("a windows section");
    let end = text.find("\nthe whole row").expect("a whole-row section");
    let program = text
        .find("whole-row program:")
        .expect("the whole-row program");
    let program_end = text[program..]
        .find("\n\n")
        .map_or(text.len(), |e| program + e);
    expect![[r#"

        windows (state in the run, 15392 bytes in all; count windows and STL intervals and sinces over scalars fuse, time windows run on the canonical tier):
          n1: since(b, n0, [500ms, 2s], any, 256): STL since [500ms, 2s]: a monotonic deque of ψ's samples, each lowered by φ's after it, and those not yet 500ms old with a deque of φ's minima, at most 256 samples per ring, 14416 bytes, amortised O(1) per sample
          n8: since(n4, n7, [0, 1s], max, 16): STL since [0, 1s]: a monotonic deque of ψ's samples, each lowered by φ's after it, at most 16 samples per ring, 976 bytes, amortised O(1) per sample

        tier: native-whole (requested)

        whole-row program:
        program inputs=2 env=20 state=0 sites=2 windows=1924
        block0:
            guard_input_held 0, 0, f64, 0
            guard_input_held 1, 1, b1, 1
            v0 = take_input.f64 0, 0
            v1 = take_input.b1 1, 1
            v2 = iconst 3
            v3 = fcvt_from_i64 v2
            v4 = fcmp.gt v0, v3
            store_env.b1 4, v4
            v5 = input_present 1
            v6 = bconst true
            v7 = since.b1 0, 500000000, 2000000000, 0x20600000100, v5, v1, v6, v4, site0
            store_env.b1 2, v7
            v8 = fconst 1.0
            v9 = fmul v0, v8
            store_env.f64 6, v9
            v10 = iconst 0
            v11 = fconst 1.0
            v12 = fcvt_from_i64 v10
            v13 = fmul v12, v11
            store_env.f64 7, v13
            v14 = fsub v9, v13
            store_env.f64 8, v14
            v15 = fconst 1.0
            v16 = fmul v0, v15
            store_env.f64 9, v16
            v17 = iconst 2
            v18 = fconst 1.0
            v19 = fcvt_from_i64 v17
            v20 = fmul v19, v18
            store_env.f64 10, v20
            v21 = fsub v16, v20
            store_env.f64 11, v21
            v22 = bconst true
            v23 = bconst true
            v24 = since.f64 1802, 0, 1000000000, 0x10400000010, v22, v14, v23, v21, site1
            store_env.f64 3, v24
            return
    "#]]
    .assert_eq(&format!("{}\n{}", &text[at..end], &text[program..program_end]));
}
