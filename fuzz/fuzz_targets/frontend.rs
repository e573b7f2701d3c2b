//! Fuzz target: the spec frontend (parse, check, plan) on arbitrary text. Every
//! input ends in diagnostics that render, or in a spec that plans and explains.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vigil::{Monitor, Spec, Tier};

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    match Spec::parse("fuzz.dsrv", source) {
        Err(d) => {
            assert!(!d.errors.is_empty(), "rejected without a diagnostic");
            for e in &d.errors {
                assert!(e.span.start <= e.span.end && e.span.end as usize <= source.len());
            }
            let _ = d.render();
        }
        Ok(spec) => {
            // Planning (and fusion, for the quickened tier) runs on build.
            let _ = Monitor::builder(&spec).tier(Tier::Quickened).build();
            let _ = vigil::explain::explain(&spec, Tier::Quickened);
        }
    }
});
