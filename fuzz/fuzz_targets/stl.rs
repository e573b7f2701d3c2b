//! Fuzz target: STL properties (parse, then run under every semantics and synchronization) on
//! arbitrary text and samples. Every input ends in diagnostics that render, or in runs whose
//! verdicts have finite times, never in a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use vigil::stl::{Semantics, StlMonitor, StlSample, StlSpec, Synchronization};

/// Samples at most: the robustness-interval semantics costs the window squared per sample.
const MAX_SAMPLES: usize = 64;

fuzz_target!(|data: &[u8]| {
    // The properties, then `\n%%\n`, then samples of three bytes each: the signal (by
    // index), the time step in milliseconds, the value (a quarter of a signed byte).
    let split = data.windows(4).position(|w| w == b"\n%%\n");
    let (text, samples) = match split {
        Some(i) => (&data[..i], &data[i + 4..]),
        None => (data, &[][..]),
    };
    let Ok(source) = std::str::from_utf8(text) else {
        return;
    };
    let spec = match StlSpec::parse("fuzz.mstlo", source) {
        Err(d) => {
            assert!(!d.errors.is_empty(), "rejected without a diagnostic");
            for e in &d.errors {
                assert!(e.span.start <= e.span.end && e.span.end as usize <= source.len());
            }
            let _ = d.render();
            return;
        }
        Ok(spec) => spec,
    };
    let _ = spec.explain();
    let signals: Vec<_> = (spec.signals().iter())
        .filter_map(|s| spec.signal(s))
        .collect();
    let vars: Vec<(String, f64)> = spec.variables().iter().map(|v| (v.clone(), 1.0)).collect();
    for semantics in Semantics::ALL {
        for sync in Synchronization::ALL {
            let mut monitor = StlMonitor::new(&spec, semantics, sync, &vars)
                .expect("every variable has a value");
            if signals.is_empty() {
                continue;
            }
            let mut time = Duration::ZERO;
            for chunk in samples.chunks_exact(3).take(MAX_SAMPLES) {
                time += Duration::from_millis(u64::from(chunk[1]));
                let mut step = [StlSample {
                    signal: signals[usize::from(chunk[0]) % signals.len()],
                    time,
                    value: f64::from(chunk[2] as i8) / 4.0,
                }];
                for e in monitor.step(&mut step) {
                    assert!(e.property < spec.properties().len());
                }
            }
            let _ = monitor.take_warnings();
        }
    }
});
