//! Rows entering a monitor: checked against the input schema, built by name.

use vigil::{Monitor, Sample, Spec, Tier, Value};

const TIERS: [Tier; 5] = [
    Tier::Canonical,
    Tier::Quickened,
    Tier::NativeRegions,
    Tier::NativeWhole,
    Tier::Auto,
];

/// Issue 8 §1: a Str for `in x: Int` was accepted and `y = x` emitted it.
#[test]
fn wrong_types_are_rejected_on_every_tier() {
    let spec = Spec::parse("y.dsrv", "in x: Int\nout y: Int\ny = x").unwrap();
    for tier in TIERS {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        assert!(
            m.step(&[Some(Value::Str("oops".into()))]).is_err(),
            "{tier}"
        );
        assert!(m.step(&[]).is_err(), "{tier}");
        m.step(&[Some(Value::Int(3))]).unwrap();
        assert_eq!(m.output("y"), Some(Sample::Value(Value::Int(3))), "{tier}");
        assert_eq!(m.steps(), 1, "{tier}");
    }
}
