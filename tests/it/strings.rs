//! The string bound: a `++` result longer than `--max-string-bytes` (16 MiB by
//! default) is a runtime error on every tier, after the outputs of earlier steps.

use vigil::ErrorKind;
use vigil::{DEFAULT_MAX_STRING_BYTES, Monitor, Spec, StepError, Tier, Value};

/// Doubles a string every step: 4 bytes at step 0, 4·2^k bytes at step k.
const DOUBLING: &str =
    "in x: Int\nout s: Str\ns = default(s[1], \"ab\") ++ default(s[1], \"ab\")\n";

#[test]
fn exponential_string_is_a_runtime_error_on_every_tier() {
    let spec = Spec::parse("double.dsrv", DOUBLING).unwrap();
    // 4·2^22 bytes is exactly 16 MiB, the default bound; step 23 exceeds it.
    assert_eq!(4 << 22, DEFAULT_MAX_STRING_BYTES);
    for tier in Tier::ALL {
        let mut monitor = Monitor::builder(&spec).tier(tier).build();
        let mut failed = None;
        for step in 0..40u64 {
            match monitor.step(&[Some(Value::Int(1))]) {
                Ok(out) => {
                    let Some(Value::Str(s)) = out.get(0).value().cloned() else {
                        panic!("step {step}: not a string");
                    };
                    assert_eq!(s.len(), 4 << step);
                }
                Err(StepError::Runtime(e)) => {
                    failed = Some(e);
                    break;
                }
                Err(e) => panic!("{tier}: the row was rejected: {e}"),
            }
        }
        let e = failed.unwrap_or_else(|| panic!("{tier}: no error"));
        assert_eq!(
            (e.kind, e.step, e.stream.as_str()),
            (ErrorKind::StringTooLong, 23, "s")
        );
        assert_eq!(
            e.to_string(),
            "string too long in concatenation: the result would have 33554432 bytes, \
             over the limit of 16777216 (stream `s`, step 23)"
        );
    }
}

#[test]
fn cli_bound_is_settable_and_keeps_earlier_outputs() {
    let dir = std::env::temp_dir().join(format!("vigil-strings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("double.dsrv");
    std::fs::write(&spec, DOUBLING).unwrap();
    let trace = dir.join("t.jsonl");
    std::fs::write(&trace, "{\"x\": 1}\n".repeat(20)).unwrap();
    let out = crate::support::vigil()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--input",
            trace.to_str().unwrap(),
        ])
        .args(["--max-string-bytes", "1000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    // Steps 0..=7 have 4..=512 bytes; step 8 would have 1024.
    assert_eq!(stdout.lines().count(), 8);
    assert!(stdout.starts_with("s[0] = Str(\"abab\")\n"));
    assert_eq!(
        stderr.trim_end(),
        "error: string too long in concatenation: the result would have 1024 bytes, \
         over the limit of 1000 (stream `s`, step 8)"
    );
}
