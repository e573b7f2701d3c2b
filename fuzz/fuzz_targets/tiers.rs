//! Fuzz target: tier differential. An input is a specification and a trace
//! (split by `vigil_fuzz::split`); every tier, and the native-whole batch path,
//! must produce exactly the canonical tier's outputs and error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vigil::trace::reader_from_bytes;
use vigil::{Monitor, OutputBatch, Sample, Spec, StepError, Tier, Value};

/// At most this many rows per input, so each run stays fast.
const MAX_ROWS: usize = 64;

/// A sample as comparable text; floats by their bits, so NaN payloads count.
fn key(s: &Sample) -> String {
    match s {
        Sample::Value(Value::Float(f)) => format!("Float({:#x})", f.to_bits()),
        other => format!("{other:?}"),
    }
}

/// Runs `rows` row by row on `tier`: each step's outputs, then the error.
fn run_rows(spec: &Spec, tier: Tier, rows: &[Vec<Option<Value>>]) -> (Vec<String>, String) {
    let mut monitor = Monitor::builder(spec).tier(tier).build();
    let mut out = Vec::new();
    for row in rows {
        match monitor.step(row) {
            Ok(o) => out.push(o.iter().map(|s| key(&s)).collect::<Vec<_>>().join(" ")),
            // The reader checks values with the monitor's rule: it never
            // hands over a row the monitor rejects.
            Err(StepError::Row(e)) => panic!("a row of the reader was rejected: {e}"),
            Err(e) => return (out, e.to_string()),
        }
    }
    (out, String::new())
}

/// Runs `rows` as one batch on `tier`.
fn run_batch(spec: &Spec, tier: Tier, rows: &[Vec<Option<Value>>]) -> (Vec<String>, String) {
    let mut monitor = Monitor::builder(spec).tier(tier).build();
    let mut batch = monitor.batch();
    for row in rows {
        batch.push_row(row).expect("a row of the reader fits the inputs");
    }
    let mut out = OutputBatch::new();
    let err = match monitor.run_batch(&batch, &mut out) {
        Ok(()) => String::new(),
        Err(e) => e.to_string(),
    };
    let lines = out
        .rows()
        .map(|r| r.iter().map(|s| key(&s)).collect::<Vec<_>>().join(" "))
        .collect();
    (lines, err)
}

fuzz_target!(|data: &[u8]| {
    let Some((source, format, trace)) = vigil_fuzz::split(data) else {
        return;
    };
    let Ok(spec) = Spec::parse("fuzz.dsrv", source) else {
        return;
    };
    let Ok(mut reader) = reader_from_bytes("fuzz", trace.to_vec(), format, &spec.input_schema())
    else {
        return;
    };
    let mut rows = Vec::new();
    let mut row = vec![None; spec.input_names().len()];
    while rows.len() < MAX_ROWS && matches!(reader.next_row(&mut row), Ok(true)) {
        rows.push(row.clone());
    }
    let want = run_rows(&spec, Tier::Canonical, &rows);
    for tier in [Tier::Quickened, Tier::NativeRegions, Tier::NativeWhole, Tier::Auto] {
        assert_eq!(run_rows(&spec, tier, &rows), want, "tier {tier} differs");
    }
    assert_eq!(run_batch(&spec, Tier::NativeWhole, &rows), want, "native-whole batch differs");
});
