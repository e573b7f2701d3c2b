//! Frontend hardening (issue 7): deep nesting, huge offsets and history memory, capped
//! diagnostics, spec encodings, every error reported, and literal overflow.

use std::io::{BufRead, BufReader, Write};
use std::process::{Output, Stdio};
use vigil::fusion::FusedPlan;
use vigil::fusion::lower::{lower_region, lower_whole, whole_row_eligible};
use vigil::lang::diag::MAX_REPORTED_ERRORS;
use vigil::lang::{MAX_HISTORY, MAX_NESTING, MAX_OFFSET};
use vigil::plan::Plan;
use vigil::{Monitor, RuntimeError, Sample, Spec, Tier, Value, reference};

fn temp_file(name: &str, contents: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("vigil-front-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, contents).unwrap();
    p
}

/// Runs `vigil check` on a spec file with these contents.
fn vigil_check(name: &str, spec: &[u8]) -> Output {
    let path = temp_file(name, spec);
    crate::support::vigil()
        .arg("check")
        .arg(&path)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The messages of a rejected spec.
fn errors(src: &str) -> Vec<String> {
    match Spec::parse("spec.dsrv", src) {
        Ok(_) => panic!("spec was accepted:\n{src}"),
        Err(d) => d.errors.into_iter().map(|e| e.message).collect(),
    }
}

// ---------------------------------------------------------------------------
// Deep nesting
// ---------------------------------------------------------------------------

const TOO_DEEP: &str = "expression nested too deeply: more than 256 levels";

/// The reproducers: each overflowed the stack (SIGABRT) in
/// `vigil check`. Each is now one located error with exit status 2.
#[test]
fn deep_nesting_reproducers_are_located_errors() {
    assert_eq!(MAX_NESTING, 256, "TOO_DEEP states the bound");
    let decls = "in x: Int\nin b: Bool\nout y: Int\n";
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "parens",
            format!("y = {}x{}\n", "(".repeat(6000), ")".repeat(6000)),
            // The definition is level 1, so the 256th `(` opens level 257:
            // the error is where that level starts.
            ":4:261",
        ),
        (
            "default",
            format!(
                "y = {}x{}\n",
                "default(".repeat(10_000),
                ", 0)".repeat(10_000)
            ),
            ":4:2053",
        ),
        (
            "sum",
            format!("y = x{}\n", " + x".repeat(39_999)),
            // The 256th `+` makes 257 terms.
            ":4:1027",
        ),
        ("neg", format!("y = {}x\n", "-".repeat(100_000)), ":4:261"),
        (
            "if",
            format!("y = {}x\n", "if b then x else ".repeat(100_000)),
            ":4:4343",
        ),
    ];
    for (name, def, at) in cases {
        let out = vigil_check(
            &format!("deep-{name}.dsrv"),
            format!("{decls}{def}").as_bytes(),
        );
        let err = stderr(&out);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{name}: {:?}\n{}",
            out.status,
            &err[..err.len().min(2000)]
        );
        assert!(
            err.starts_with(&format!("error: {TOO_DEEP}\n")),
            "{name}: {err}"
        );
        assert!(
            err.contains(&format!("deep-{name}.dsrv{at}\n")),
            "{name}: {err}"
        );
        assert!(
            err.contains("at most 256 levels are allowed"),
            "{name}: {err}"
        );
        assert!(
            err.len() < 4000,
            "{name}: {} bytes of diagnostics",
            err.len()
        );
    }
}

/// One shape of deep expression: the definition of `y` nested exactly
/// `depth` levels deep.
struct Shape {
    name: &'static str,
    out_type: &'static str,
    def: fn(usize) -> String,
}

const SHAPES: &[Shape] = &[
    Shape {
        name: "parentheses",
        out_type: "Int",
        def: |d| format!("{}x{}", "(".repeat(d - 1), ")".repeat(d - 1)),
    },
    Shape {
        name: "nested default",
        out_type: "Int",
        def: |d| format!("{}x{}", "default(".repeat(d - 1), ", 0)".repeat(d - 1)),
    },
    Shape {
        name: "nested calls (second argument)",
        out_type: "Int",
        def: |d| format!("{}x{}", "min(x, ".repeat(d - 1), ")".repeat(d - 1)),
    },
    Shape {
        name: "long binary chain",
        out_type: "Int",
        def: |d| {
            let mut s = "x".to_string();
            for i in 1..d {
                s.push_str(if i % 2 == 1 { " + x" } else { " - 1" });
            }
            s
        },
    },
    Shape {
        name: "prefix minus",
        out_type: "Int",
        def: |d| format!("{}x", "-".repeat(d - 1)),
    },
    Shape {
        name: "prefix not",
        out_type: "Bool",
        def: |d| format!("{}b", "!".repeat(d - 1)),
    },
    Shape {
        name: "if in else arms",
        out_type: "Int",
        def: |d| format!("{}x", "if b then x else ".repeat(d - 1)),
    },
    Shape {
        name: "if in conditions",
        out_type: "Bool",
        def: |d| {
            format!(
                "{}b{}",
                "if ".repeat(d - 1),
                " then b else false".repeat(d - 1)
            )
        },
    },
    Shape {
        name: "offset chain",
        out_type: "Int",
        def: |d| format!("default(x{}, 0)", "[1]".repeat(d - 2)),
    },
    Shape {
        name: "nested lists",
        out_type: "Int",
        def: |d| format!("List.len({}x{})", "[".repeat(d - 2), "]".repeat(d - 2)),
    },
    Shape {
        name: "STL temporal operators (interval windows in interval windows)",
        out_type: "Bool",
        def: |d| format!("stl({}b)", "G[0, 1s] ".repeat(d - 2)),
    },
    Shape {
        name: "STL parenthesised formulas (the formula parser's recursion)",
        out_type: "Bool",
        def: |d| {
            let extra = if (d - 3) % 2 == 1 { "!" } else { "" };
            let k = (d - 3) / 2;
            format!("stl({extra}{}x > 0{})", "!(".repeat(k), ")".repeat(k))
        },
    },
    Shape {
        name: "a lambda's body (evaluated by the closure, shown by explain)",
        out_type: "Int",
        def: |d| {
            format!(
                "(\\v: Int -> {}v + x{})(x)",
                "if b then v else (".repeat((d - 3) / 2),
                ")".repeat((d - 3) / 2)
            )
        },
    },
];

fn shape_spec(shape: &Shape, depth: usize) -> String {
    format!(
        "in x: Int\nin b: Bool\nout y: {}\ny = {}\n",
        shape.out_type,
        (shape.def)(depth)
    )
}

fn deep_trace() -> Vec<Vec<Option<Value>>> {
    (0..6)
        .map(|i| {
            let x = (i != 3).then_some(Value::Int(i + 1));
            vec![x, Some(Value::Bool(i % 2 == 0))]
        })
        .collect()
}

type Run = (Vec<Vec<Sample>>, Option<RuntimeError>);

fn run_tier(spec: &Spec, trace: &[Vec<Option<Value>>], tier: Tier) -> (Run, Monitor) {
    let mut monitor = Monitor::builder(spec).tier(tier).build();
    let mut outputs = Vec::new();
    for row in trace {
        match monitor.step(row) {
            Ok(samples) => outputs.push(samples.to_vec()),
            Err(vigil::StepError::Runtime(e)) => return ((outputs, Some(e)), monitor),
            Err(e) => panic!("a generated row was rejected: {e}"),
        }
    }
    ((outputs, None), monitor)
}

fn run_tier_batch(spec: &Spec, trace: &[Vec<Option<Value>>], tier: Tier, chunk: usize) -> Run {
    let mut monitor = Monitor::builder(spec).tier(tier).build();
    let mut outputs = Vec::new();
    for rows in trace.chunks(chunk) {
        let mut batch = monitor.batch();
        for row in rows {
            batch
                .push_row(row)
                .expect("generated rows fit their inputs");
        }
        let mut out = vigil::OutputBatch::new();
        let result = monitor.run_batch(&batch, &mut out);
        outputs.extend(out.rows().map(|r| r.to_vec()));
        match result {
            Ok(()) => {}
            Err(vigil::StepError::Runtime(e)) => return (outputs, Some(e)),
            Err(e) => panic!("a generated batch was rejected: {e}"),
        }
    }
    (outputs, None)
}

/// Every recursive pass, at the deepest nesting the parser accepts, on a
/// 2 MiB stack (the default of a test thread) in the build under test:
/// parser, checker, plan, fusion and lowering, the reference evaluator,
/// `explain`, and every tier (canonical, quickened, native regions, native
/// whole, row by row and in batches), which must agree with the reference.
#[test]
fn every_pass_runs_at_the_maximum_nesting_on_a_2_mib_stack() {
    for shape in SHAPES {
        let src = shape_spec(shape, MAX_NESTING);
        std::thread::Builder::new()
            .name(shape.name.to_string())
            .stack_size(2 << 20)
            .spawn(move || all_passes(&src))
            .unwrap()
            .join()
            .unwrap_or_else(|_| panic!("{}: a pass failed at depth {MAX_NESTING}", shape.name));
    }
}

fn all_passes(src: &str) {
    let spec = Spec::parse("deep.dsrv", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let plan = std::sync::Arc::new(Plan::new(spec.checked().clone()));
    let fused = FusedPlan::new(plan.clone());
    for body in &fused.regions {
        lower_region(&plan, body);
    }
    if whole_row_eligible(&plan).is_ok() {
        lower_whole(&plan);
    }
    let trace = deep_trace();
    let expected = reference::evaluate(spec.checked(), &trace);
    assert_eq!(expected.1, None, "{src}");
    assert_eq!(expected.0.len(), trace.len());
    for tier in [
        Tier::Canonical,
        Tier::Quickened,
        Tier::NativeRegions,
        Tier::NativeWhole,
    ] {
        let (run, _) = run_tier(&spec, &trace, tier);
        assert_eq!(
            run, expected,
            "{tier} disagrees with the reference on\n{src}"
        );
        let batched = run_tier_batch(&spec, &trace, tier, 4);
        assert_eq!(batched, expected, "{tier} (batches) disagrees on\n{src}");
        vigil::explain::explain(&spec, tier);
    }
}

/// One level more than the bound is rejected, for every shape, at the
/// token that goes too deep.
#[test]
fn one_level_too_deep_is_rejected_for_every_shape() {
    for shape in SHAPES {
        assert!(
            Spec::parse("ok.dsrv", &shape_spec(shape, MAX_NESTING)).is_ok(),
            "{}",
            shape.name
        );
        let src = shape_spec(shape, MAX_NESTING + 1);
        assert_eq!(errors(&src), [TOO_DEEP], "{}", shape.name);
    }
}

/// Nesting is counted per definition: a long computation split into
/// auxiliary streams (the hint's advice) is accepted.
#[test]
fn deep_computations_split_into_streams_are_accepted() {
    let mut src = String::from("in x: Int\nout y: Int\naux a0: Int\na0 = x\n");
    for i in 1..50 {
        src.push_str(&format!(
            "aux a{i}: Int\na{i} = {}a{}{}\n",
            "(".repeat(100),
            i - 1,
            " + 1)".repeat(100)
        ));
    }
    src.push_str("y = a49\n");
    let spec = Spec::parse("split.dsrv", &src).unwrap_or_else(|d| panic!("{}", d.render()));
    let trace = vec![vec![Some(Value::Int(1))]];
    let ((out, err), _) = run_tier(&spec, &trace, Tier::Auto);
    assert_eq!(err, None);
    assert_eq!(out, [[Sample::Value(Value::Int(1 + 49 * 100))]]);
}

// ---------------------------------------------------------------------------
// Huge offsets and history memory
// ---------------------------------------------------------------------------

#[test]
fn offsets_above_the_maximum_are_located_errors() {
    assert_eq!(MAX_OFFSET, 10_000_000);
    let out = vigil_check(
        "huge-offset.dsrv",
        b"in x: Int\nout y: Int\ny = default(x[1000000000], 0)\n",
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: offset 1000000000 is larger than the maximum offset, 10000000\n"),
        "{err}"
    );
    assert!(err.contains("huge-offset.dsrv:3:15\n"), "{err}");
    assert_eq!(
        errors("in x: Int\nout y: Int\ny = x[99999999999999999999999]"),
        ["offset 99999999999999999999999 is larger than the maximum offset, 10000000"]
    );
    assert_eq!(
        errors("in x: Int\nout y: Int\ny = x[10000001]"),
        ["offset 10000001 is larger than the maximum offset, 10000000"]
    );
    assert!(
        Spec::parse(
            "max.dsrv",
            "in x: Int\nout y: Int\ny = default(x[10000000], 0)"
        )
        .is_ok()
    );
    // Every too-large offset is reported, beside other errors.
    assert_eq!(
        errors("in x: Int\nout y: Int\nout z: Int\ny = x[20000000]\nz = x[30000000] +\n"),
        [
            "offset 20000000 is larger than the maximum offset, 10000000",
            "offset 30000000 is larger than the maximum offset, 10000000",
            "expected an expression, found end of file",
        ]
    );
}

#[test]
fn the_sum_of_all_offsets_is_bounded() {
    let n = (MAX_HISTORY / u64::from(MAX_OFFSET) + 1) as usize;
    let terms: Vec<String> = (0..n)
        .map(|_| format!("default(x[{MAX_OFFSET}], 0)"))
        .collect();
    // Split into streams so that no expression nests too deeply.
    let mut src = String::from("in x: Int\nout y: Int\ny = x\n");
    for (i, chunk) in terms.chunks(100).enumerate() {
        src.push_str(&format!("aux a{i}: Int\na{i} = {}\n", chunk.join(" + ")));
    }
    let msgs = errors(&src);
    assert_eq!(
        msgs,
        [format!(
            "the offsets of this specification add up to more than {MAX_HISTORY} steps of history"
        )]
    );
    // One offset fewer fits.
    let fits = src.replacen(&format!("default(x[{MAX_OFFSET}], 0) + "), "", 1);
    assert!(Spec::parse("fits.dsrv", &fits).is_ok());
}

/// History memory grows with the rows seen, not with the offsets: after two
/// rows a spec with maximal offsets holds a few entries per ring, and it
/// grows by a few bytes per ring per row until the ring is full. Measured
/// through the state's allocated capacity, on every tier.
#[test]
fn history_memory_grows_with_the_rows_seen() {
    let src = format!(
        "in x: Int\nin s: Str\nout y: Int\nout t: Str\n\
         y = default(x[{MAX_OFFSET}], 0) + default(x[{MAX_OFFSET}], 1) + default(x[3], 2)\n\
         t = default(s[{MAX_OFFSET}], \"none\")\n"
    );
    let spec = Spec::parse("mem.dsrv", &src).unwrap();
    for tier in [
        Tier::Canonical,
        Tier::Quickened,
        Tier::NativeRegions,
        Tier::Auto,
    ] {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        let row = [Some(Value::Int(7)), Some(Value::Str("abc".into()))];
        m.step(&row).unwrap();
        m.step(&row).unwrap();
        let two = m.history_bytes();
        assert!(two < 2048, "{tier}: {two} bytes of history after 2 rows");
        for _ in 2..10_000 {
            m.step(&row).unwrap();
        }
        let many = m.history_bytes();
        // Four rings fill: at least the 9 bytes of tag and lane per entry,
        // at most about twice that plus the objects of the Str ring.
        assert!(
            many >= 4 * 10_000 * 9,
            "{tier}: {many} bytes after 10,000 rows"
        );
        assert!(
            many <= 4 * 2 * 10_000 * 9 + 2 * 10_000 * 24 + 4096,
            "{tier}: {many} bytes after 10,000 rows"
        );
    }
}

/// Resident memory of a real `vigil run` with two maximal offsets over a
/// two-row trace. Before history grew with the rows, such a spec allocated
/// (and touched) hundreds of megabytes at start; the issue's `x[100000000]`
/// took 2.4 GB. The run reads its trace from a pipe that stays open, so the
/// process is alive (and measurable) after it printed both rows.
#[test]
fn resident_memory_of_a_run_with_maximal_offsets_stays_small() {
    let spec = temp_file(
        "rss.dsrv",
        format!(
            "in x: Int\nin s: Str\nout y: Int\naux t: Str\n\
             y = default(x[{MAX_OFFSET}], 0) + x\nt = default(s[{MAX_OFFSET}], \"none\")\n"
        )
        .as_bytes(),
    );
    for tier in ["canonical", "auto"] {
        let mut child = crate::support::vigil()
            .args([
                "run",
                spec.to_str().unwrap(),
                "--input",
                "-",
                "--format",
                "csv",
                "--tier",
                tier,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        writeln!(stdin, "x,s\n1,a\n2,b").unwrap();
        stdin.flush().unwrap();
        let mut lines = Vec::new();
        for _ in 0..2 {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            lines.push(line);
        }
        assert_eq!(lines, ["y[0] = Int(1)\n", "y[1] = Int(2)\n"], "{tier}");
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
            .expect("this test needs /proc (Linux) to measure resident memory");
        drop(stdin);
        let peak_kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/<pid>/status");
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{tier}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("{tier}: peak resident memory {peak_kb} kB");
        // Either offset's full history costs over 90 MB.
        assert!(
            peak_kb < 64 * 1024,
            "{tier}: peak resident memory {peak_kb} kB"
        );
    }
}

/// A trace long enough to fill rings of tens of thousands of entries, with
/// absent values around the boundaries, on every tier: each equals the
/// canonical tier, and the native tiers do run fused code once promoted.
#[test]
fn tiers_agree_on_large_offsets() {
    let src = "in x: Int\nin f: Float\nout a: Int\nout b: Float\nout c: Int\nout d: Bool\n\
               a = default(x[70000], -1) + default(x[70000], 5) * default(x[3], 0)\n\
               b = default(f[65536], 0.5) + f\n\
               c = default(a[1], 0) + default(x[100000], 7)\n\
               d = default((x > 3)[69999], false)\n";
    let spec = Spec::parse("big.dsrv", src).unwrap();
    let rows = 120_000usize;
    let trace: Vec<Vec<Option<Value>>> = (0..rows)
        .map(|i| {
            // Absent values early on (so ⊥ entries must rotate out before
            // promotion) and around the moments rings fill.
            let absent = i < 5 || (69_995..70_005).contains(&i) || i % 9_973 == 0;
            let x = (!absent).then_some(Value::Int((i % 1000) as i64));
            let f = (i % 7 != 0).then_some(Value::Float(i as f64 / 8.0));
            vec![x, f]
        })
        .collect();
    let ((canon, canon_err), _) = run_tier(&spec, &trace, Tier::Canonical);
    assert_eq!(canon_err, None);
    assert_eq!(canon.len(), rows);
    for tier in [Tier::Quickened, Tier::NativeRegions, Tier::NativeWhole] {
        let ((out, err), m) = run_tier(&spec, &trace, tier);
        assert_eq!(err, None, "{tier}");
        if let Some(step) = (0..rows).find(|&s| out[s] != canon[s]) {
            panic!(
                "{tier} differs at step {step}: {:?} != {:?}",
                out[step], canon[step]
            );
        }
        let stats = m.stats();
        assert!(stats.promotions > 0, "{tier}: never promoted\n{stats}");
        assert!(
            stats.region_runs + stats.whole_rows > 0,
            "{tier}: no fused run\n{stats}"
        );
        let batched = run_tier_batch(&spec, &trace, tier, 4096);
        assert!(
            batched.0 == canon && batched.1.is_none(),
            "{tier} (batches) differs"
        );
    }
}

/// Rings of different lengths (equal ones too) and of Str values, against
/// the reference evaluator, on every tier.
#[test]
fn rings_of_every_length_agree_with_the_reference() {
    let src = "in x: Int\nin s: Str\nout a: Int\nout b: Str\nout c: Int\n\
               a = default(x[300], 0) + default(x[1], 0) + default(x[300], 1) + default(x[17], 2)\n\
               b = default(s[250], \"-\") ++ default(s[2], \"+\")\n\
               c = default(c[299], 3) + default(a[1], 0)\n";
    let spec = Spec::parse("rings.dsrv", src).unwrap();
    let trace: Vec<Vec<Option<Value>>> = (0..700)
        .map(|i: i64| {
            let x = (i % 13 != 5 && !(298..303).contains(&i)).then_some(Value::Int(i % 50));
            let s = (i % 4 != 1).then(|| Value::Str(format!("s{}", i % 3).into()));
            vec![x, s]
        })
        .collect();
    let expected = reference::evaluate(spec.checked(), &trace);
    assert_eq!(expected.1, None);
    for tier in Tier::ALL {
        let (run, _) = run_tier(&spec, &trace, tier);
        assert!(run == expected, "{tier} disagrees with the reference");
        assert!(
            run_tier_batch(&spec, &trace, tier, 64) == expected,
            "{tier} (batches)"
        );
    }
}

// ---------------------------------------------------------------------------
// Diagnostics: capped and linear
// ---------------------------------------------------------------------------

#[test]
fn at_most_a_hundred_errors_are_shown() {
    assert_eq!(MAX_REPORTED_ERRORS, 100);
    let out = vigil_check("many.dsrv", "$\n".repeat(250).as_bytes());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        err.matches("error: unexpected character `$`").count(),
        100,
        "{err}"
    );
    assert!(err.contains("many.dsrv:100:1\n"));
    assert!(!err.contains("many.dsrv:101:1\n"));
    assert!(err.contains("\nand 150 more errors\n"), "{err}");
    assert!(err.ends_with("due to 250 previous errors\n"), "{err}");
}

/// Rendering looks positions up in a line index built once (not by
/// scanning the source per error) and shows bounded excerpts: a spec of a
/// million bytes of garbage on one line gives a bounded report.
#[test]
fn garbage_specs_give_bounded_reports() {
    let garbage: String = (0..1_000_000u32)
        .map(|i| b"$x=(1]+\"*y,:q"[(i.wrapping_mul(2_654_435_761) >> 28) as usize % 13] as char)
        .collect();
    let d = match Spec::parse("garbage.dsrv", &garbage) {
        Ok(_) => panic!("garbage accepted"),
        Err(d) => d,
    };
    assert!(d.errors.len() > MAX_REPORTED_ERRORS);
    let index = vigil::lang::diag::LineIndex::new(&d.source);
    let out = d.render_with(&index);
    assert_eq!(out, d.render());
    assert!(out.len() < MAX_REPORTED_ERRORS * 600, "{} bytes", out.len());
    assert!(out.ends_with(&format!(
        "\nand {} more errors\n",
        d.errors.len() - MAX_REPORTED_ERRORS
    )));
}

// ---------------------------------------------------------------------------
// Spec encoding
// ---------------------------------------------------------------------------

#[test]
fn a_byte_order_mark_is_ignored() {
    let out = vigil_check(
        "bom.dsrv",
        b"\xEF\xBB\xBFin x: Int\nout y: Int\ny = x + 1\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Positions are those of the text after the mark.
    let d = Spec::parse_bytes("bom.dsrv", b"\xEF\xBB\xBFout y: Int\ny = $\n").unwrap_err();
    assert!(d.render().contains("--> bom.dsrv:2:5\n"), "{}", d.render());
    assert!(Spec::parse("bom.dsrv", "\u{feff}in x: Int\nout y: Int\ny = x").is_ok());
}

#[test]
fn a_nul_byte_is_shown_escaped() {
    let out = vigil_check("nul.dsrv", b"in x: Int\nout y: Int\ny = x \0+ 1\n");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        !out.stderr.contains(&0),
        "a raw NUL in the diagnostics: {err:?}"
    );
    assert!(
        err.starts_with("error: unexpected character `\\0`\n --> "),
        "{err}"
    );
    assert!(err.contains("nul.dsrv:3:7\n"), "{err}");
    assert!(err.contains("3 | y = x \\0+ 1\n  |       ^^\n"), "{err}");
}

#[test]
fn invalid_utf8_is_a_located_error() {
    let d = Spec::parse_bytes(
        "latin1.dsrv",
        b"in x: Int\nout y: Int\ny = \"caf\xE9\" ++ x\n",
    )
    .unwrap_err();
    assert_eq!(d.errors.len(), 1);
    let out = d.render();
    assert!(
        out.starts_with("error: the specification is not valid UTF-8: invalid byte 0xE9\n"),
        "{out}"
    );
    assert!(out.contains("--> latin1.dsrv:3:9\n"), "{out}");
    assert!(out.contains("3 | y = \"caf\u{fffd}\" ++ x\n"), "{out}");
    let d = Spec::parse_bytes("cut.dsrv", b"in x: Int\n\xE2\x82").unwrap_err();
    assert!(
        d.render()
            .contains("incomplete character 0xE2 0x82 at the end"),
        "{}",
        d.render()
    );
    assert!(d.render().contains("--> cut.dsrv:2:1\n"), "{}", d.render());
}

#[test]
fn a_megabyte_token_is_shown_truncated() {
    let name = "a".repeat(1 << 20);
    let out = vigil_check(
        "token.dsrv",
        format!("in x: Int\nout y: Int\ny = x + {name}\n").as_bytes(),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.len() < 2000, "{} bytes of diagnostics", err.len());
    assert!(
        err.starts_with(&format!("error: unknown stream `{}…`\n", "a".repeat(64))),
        "{err}"
    );
    let out = vigil_check(
        "digits.dsrv",
        format!("in x: Int\nout y: Int\ny = x + {}\n", "9".repeat(1 << 20)).as_bytes(),
    );
    let err = stderr(&out);
    assert!(err.len() < 2000, "{} bytes of diagnostics", err.len());
    assert!(err.contains("does not fit in Int (64 bits)"), "{err}");
}

// ---------------------------------------------------------------------------
// Every error is reported; literal overflow
// ---------------------------------------------------------------------------

#[test]
fn cycles_are_reported_beside_type_errors() {
    assert_eq!(
        errors("in x: Int\nout y: Int\nout z: Int\ny = x + true\nz = z + x\n"),
        ["`+` needs numbers, found Bool", "same-step cycle: z -> z"]
    );
    assert_eq!(
        errors("in x: Int\nout y: Int\nout z: Int\ny = w\nz = z + x\n"),
        ["unknown stream `w`", "same-step cycle: z -> z"]
    );
}

#[test]
fn numeric_literals_that_do_not_fit_are_errors() {
    assert_eq!(
        errors("out y: Float\ny = 1e400"),
        ["float literal `1e400` does not fit in Float (64 bits)"]
    );
    assert_eq!(
        errors("out y: Float\ny = 2.5E+309 + 1.0"),
        ["float literal `2.5E+309` does not fit in Float (64 bits)"]
    );
    assert_eq!(
        errors("out y: Int\ny = 9223372036854775808"),
        ["integer literal `9223372036854775808` does not fit in Int (64 bits)"]
    );
    let d = Spec::parse("f.dsrv", "out y: Float\ny = 1e400").unwrap_err();
    assert!(d.render().contains("--> f.dsrv:2:5\n"), "{}", d.render());
    // Underflow rounds (to 0), the largest finite values and the one
    // negative-only literal are fine.
    for ok in ["1e-400", "1.7976931348623157e308", "-9223372036854775808"] {
        let ty = if ok.contains('e') { "Float" } else { "Int" };
        assert!(
            Spec::parse("ok.dsrv", &format!("out y: {ty}\ny = {ok}")).is_ok(),
            "{ok}"
        );
    }
}
