//! Shared pieces of vigil's fuzz targets: the spec every trace reader is fuzzed
//! against, and the splitting of one input into a specification and a trace.

use vigil::Spec;
use vigil::trace::{TraceFormat, reader_from_bytes};

/// Inputs of every type (containers too, whose values nest) and one untyped
/// input, so every coercion rule of the readers is reachable.
pub const READER_SPEC: &str = "in x: Int\nin f: Float\nin b: Bool\nin s: Str\nin u: Unit\nin a\n\
in l: List\nin m: Map\nout y: Int\ny = default(x, 0)\n";

/// The separator between a specification and its trace in the `tiers` target's
/// inputs (and in its seed corpus, built from the conformance cases).
pub const SEPARATOR: &[u8] = b"\n%%\n";

/// Reads `bytes` as a trace in `format` against [`READER_SPEC`]'s inputs until the
/// end or the first error. A reader must never panic, and every error it reports
/// must carry a position.
pub fn read_all(bytes: &[u8], format: TraceFormat) {
    let spec = Spec::parse("reader.dsrv", READER_SPEC).expect("the reader spec is valid");
    let schema = spec.input_schema();
    let Ok(mut reader) = reader_from_bytes("fuzz", bytes.to_vec(), format, &schema) else {
        return;
    };
    let mut row = vec![None; schema.names.len()];
    // A trace of n bytes has at most a few rows per byte (plus step gaps, which
    // the reader bounds), so this loop ends; the cap keeps one input fast.
    for _ in 0..100_000 {
        match reader.next_row(&mut row) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                assert!(e.line >= 1 && e.col >= 1, "error without a position: {e}");
                return;
            }
        }
    }
}

/// Splits a `tiers` input into a specification and a trace at the first
/// [`SEPARATOR`]; the byte after the separator picks the trace format.
pub fn split(data: &[u8]) -> Option<(&str, TraceFormat, &[u8])> {
    let at = data.windows(SEPARATOR.len()).position(|w| w == SEPARATOR)?;
    let spec = std::str::from_utf8(&data[..at]).ok()?;
    let rest = &data[at + SEPARATOR.len()..];
    let (format, trace) = match rest.split_first() {
        Some((b'c', t)) => (TraceFormat::Csv, t),
        Some((b'j', t)) => (TraceFormat::Jsonl, t),
        Some((b't', t)) => (TraceFormat::Tc, t),
        _ => (TraceFormat::Tc, rest),
    };
    Some((spec, format, trace))
}
