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
                // The readers check values with the monitor's own rule, so
                // the monitor never rejects a row they return.
                Ok(true) => {
                    let step = monitor.step(&row);
                    prop_assert!(!matches!(step, Err(vigil::StepError::Row(_))), "{:?}", step.err());
                }
                Ok(false) => break,
                Err(e) => { prop_assert!(e.line >= 1 && e.col >= 1); break; }
            }
        }
    }
}

/// Whole declarations, valid wherever a line starts (most of them).
const LINES: [&str; 8] = [
    "aux q: Int\nq = x * 3\n",
    "out r\nr = y[1]\n",
    "out t: Float\nt = f / 0.0\n",
    "out u: Bool\nu = b || is_defined(x[2])\n",
    "out v: Int\nv = default(v[1], 0) + x % 2\n",
    "out w2\nw2 = latch(s ++ \"!\", b)\n",
    "out k: Int\nk = if b then x / (x - 1) else 0\n",
    "out z\n",
];

/// A trace for the mutated specs, in JSON lines (keys a mutation made
/// undeclared are ignored; a value a mutation made ill-typed is a trace error).
const MUTATION_TRACE: &str = "{\"x\": 1, \"y\": 2, \"f\": 2.5, \"b\": true, \"s\": \"q\"}\n\
{\"x\": 3, \"b\": false, \"s\": \"r\"}\n{\"y\": 7, \"f\": 0.5}\n\
{\"x\": 9223372036854775807, \"y\": 1, \"f\": 1.0, \"b\": true, \"s\": \"q\"}\n";

/// Runs `spec` over [`MUTATION_TRACE`] on `tier`: the text of every step's
/// outputs, then the runtime or trace error that ended the run, if any.
fn run_mutation(spec: &Spec, tier: Tier) -> String {
    use vigil::trace::{OutputFormat, make_writer};
    let buf = crate::support::SharedBuf::default();
    let mut monitor = Monitor::builder(spec).tier(tier).build();
    let names = monitor
        .output_names()
        .into_iter()
        .map(String::from)
        .collect();
    let mut writer = make_writer(OutputFormat::Text, names, Box::new(buf.clone()));
    let mut end = String::new();
    match reader_from_bytes(
        "t.jsonl",
        MUTATION_TRACE.into(),
        TraceFormat::Jsonl,
        &spec.input_schema(),
    ) {
        Err(e) => end = format!("trace error: {e}"),
        Ok(mut reader) => {
            let mut row = vec![None; monitor.input_count()];
            loop {
                match reader.next_row(&mut row) {
                    Ok(true) => match monitor.step(&row) {
                        Ok(out) => writer.write_step(out.step(), &out.to_vec()).unwrap(),
                        Err(e) => {
                            end = format!("runtime error: {e}");
                            break;
                        }
                    },
                    Ok(false) => break,
                    Err(e) => {
                        end = format!("trace error: {e}");
                        break;
                    }
                }
            }
        }
    }
    writer.flush().unwrap();
    drop(writer);
    buf.text() + &end
}

/// A valid spec with fragments spliced in at random places: every diagnostic
/// is located inside the source and renders with its position; every spec
/// that is accepted runs identically on every tier. The counts at the end
/// guard against a generator that only ever produces one of the two outcomes.
#[test]
fn mutated_specs_are_diagnosed_or_agree_on_every_tier() {
    use proptest::test_runner::{Config, TestRunner};
    let (diagnosed, accepted) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let mut runner = TestRunner::new(Config::with_cases(384));
    // Half of the cuts snap to a line start and insert a whole declaration, so
    // that a good share of the mutants are valid specs that run.
    let strategy = prop::collection::vec(
        (
            0usize..SPEC.len(),
            0usize..FRAGMENTS.len(),
            0usize..LINES.len(),
            any::<bool>(),
        ),
        1..4,
    );
    runner
        .run(&strategy, |cuts| {
            let mut src = SPEC.to_string();
            for (at, f, l, whole_line) in cuts {
                let at = (0..=at.min(src.len()))
                    .rev()
                    .find(|&i| src.is_char_boundary(i))
                    .unwrap_or(0);
                if whole_line {
                    let line_start = src[..at].rfind('\n').map_or(0, |i| i + 1);
                    src.insert_str(line_start, LINES[l]);
                } else {
                    src.insert_str(at, FRAGMENTS[f]);
                }
            }
            match Spec::parse("fuzz.dsrv", &src) {
                Err(d) => {
                    diagnosed.set(diagnosed.get() + 1);
                    prop_assert!(!d.errors.is_empty());
                    let text = d.render();
                    for e in &d.errors {
                        prop_assert!(
                            e.span.start <= e.span.end && e.span.end as usize <= src.len(),
                            "span {:?} outside a {}-byte source",
                            e.span,
                            src.len()
                        );
                    }
                    prop_assert!(
                        text.contains("error: ") && text.contains("fuzz.dsrv:"),
                        "diagnostics not rendered with a location:\n{text}"
                    );
                }
                Ok(spec) => {
                    accepted.set(accepted.get() + 1);
                    let want = run_mutation(&spec, Tier::Canonical);
                    for tier in Tier::ALL {
                        prop_assert_eq!(
                            &run_mutation(&spec, tier),
                            &want,
                            "tier {} on\n{}",
                            tier,
                            src
                        );
                    }
                }
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let (diagnosed, accepted) = (diagnosed.get(), accepted.get());
    assert!(
        diagnosed >= 50 && accepted >= 50,
        "the mutations produced {diagnosed} diagnosed and {accepted} accepted specs"
    );
    eprintln!("mutated specs: {diagnosed} diagnosed, {accepted} accepted and run on every tier");
}
