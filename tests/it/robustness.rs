//! No input of any kind makes vigil panic: arbitrary specs and traces give located errors.

use proptest::prelude::*;
use vigil::trace::{InputSchema, TraceFormat, reader_from_bytes};
use vigil::{Monitor, Spec, Tier, Value};

const SPEC: &str = "in x: Int\nin y\nin f: Float\nin b: Bool\nin s: Str\nout z: Int\nout w\naux a: Bool\n\
z = default(z[1], 0) + x * 2\nw = if b then y else (x + 1)[2]\na = f > 1.5 && !(s == \"q\")\n";

/// Fragments that, spliced into a valid spec, exercise every diagnostic path.
const FRAGMENTS: [&str; 16] = [
    "(",
    ")",
    "[",
    "]",
    "if",
    "then",
    "else",
    "99999999999999999999",
    "\"",
    "(*",
    "//",
    "==",
    "default(",
    "out",
    "in q: Strng",
    "z",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary text: the frontend returns diagnostics or a spec, never panics.
    #[test]
    fn any_text_parses_or_is_diagnosed(src in "\\PC{0,200}") {
        if let Err(d) = Spec::parse("fuzz.dsrv", &src) {
            prop_assert!(!d.errors.is_empty());
            let _ = d.render();
        }
    }

    /// A valid spec with fragments spliced in at random places.
    #[test]
    fn mutated_specs_are_diagnosed(cuts in prop::collection::vec((0usize..SPEC.len(), 0usize..FRAGMENTS.len()), 1..4)) {
        let mut src = SPEC.to_string();
        for (at, f) in cuts {
            let at = (0..=at.min(src.len())).rev().find(|&i| src.is_char_boundary(i)).unwrap_or(0);
            src.insert_str(at, FRAGMENTS[f]);
        }
        if let Err(d) = Spec::parse("fuzz.dsrv", &src) {
            let _ = d.render();
        }
    }

    /// Arbitrary bytes as a trace in every format: rows or a located error,
    /// and every tier evaluates whatever rows come out.
    #[test]
    fn any_trace_reads_or_is_diagnosed(bytes in prop::collection::vec(any::<u8>(), 0..300), fmt in 0..3usize) {
        let spec = Spec::parse("spec.dsrv", SPEC).unwrap();
        let format = [TraceFormat::Tc, TraceFormat::Csv, TraceFormat::Jsonl][fmt];
        let schema: InputSchema = spec.input_schema();
        let Ok(mut reader) = reader_from_bytes("fuzz", bytes, format, &schema) else { return Ok(()) };
        let mut monitor = Monitor::builder(&spec).tier(Tier::Quickened).build();
        let mut row: Vec<Option<Value>> = vec![None; monitor.input_count()];
        for _ in 0..100 {
            match reader.next_row(&mut row) {
                Ok(true) => { let _ = monitor.step(&row); }
                Ok(false) => break,
                Err(e) => { prop_assert!(e.line >= 1 && e.col >= 1); break; }
            }
        }
    }
}
