//! Snapshot tests of `explain` output: the DESIGN §9 partition must be exactly as documented.

use expect_test::expect;
use vigil::fusion::FusedPlan;
use vigil::plan::Plan;
use vigil::{Spec, Tier};

fn fusion_example() -> Spec {
    Spec::parse("fusion.dsrv", include_str!("../../examples/fusion.dsrv")).unwrap()
}

/// DESIGN §9: six steps; blended's `+` reads the default from a register
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
    let text = vigil::exec::explain::explain(&fusion_example(), Tier::Quickened);
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
            guard_env 19, i64, 0
            v0 = load_env.i64 19
            v1 = ring_load.i64 0, 1
            v2 = iadd_ck v1, v0, site0
            store_env.i64 7, v2
            return

    "#]]
    .assert_eq(r1);
}
