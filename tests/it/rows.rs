//! Rows entering a monitor (issue 8 §1): checked against the input schema on
//! every tier, built by name or from parsed JSON, in batches; step numbers
//! and the accessors of outputs, streams and output batches.

use crate::support::{test_dir, vigil};
use std::error::Error;
use vigil::trace::{self, TraceFormat};
use vigil::{Monitor, OutputBatch, RowBatch, RowError, Sample, Spec, StepError, Tier, Type, Value};

const TIERS: [Tier; 5] = [
    Tier::Canonical,
    Tier::Quickened,
    Tier::NativeRegions,
    Tier::NativeWhole,
    Tier::Auto,
];

fn int(i: i64) -> Option<Value> {
    Some(Value::Int(i))
}

fn sample(v: Value) -> Sample {
    Sample::Value(v)
}

fn row_error(e: StepError) -> RowError {
    match e {
        StepError::Row(e) => e,
        StepError::Runtime(e) => panic!("a runtime error, not a rejected row: {e}"),
    }
}

/// The issue's reproducer: a Str for `in x: Int` was accepted and `y = x`
/// emitted it (on canonical and native-whole alike).
#[test]
fn a_wrong_type_is_rejected_on_every_tier_and_the_monitor_goes_on() {
    let spec = Spec::parse("y.dsrv", "in x: Int\nout y: Int\ny = x").unwrap();
    for tier in TIERS {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        let e = row_error(m.step([Some(Value::Str("oops".into()))]).unwrap_err());
        assert_eq!(
            e,
            RowError::WrongType {
                input: "x".into(),
                expected: Type::Int,
                found: Value::Str("oops".into()),
            },
            "{tier}"
        );
        assert_eq!(
            e.to_string(),
            "expected Int for input `x`, found Str \"oops\""
        );
        assert_eq!(m.steps(), 0, "{tier}: a rejected row is not a step");
        let out = m.step([int(3)]).unwrap();
        assert_eq!(
            (out.step(), out.get(0)),
            (0, sample(Value::Int(3))),
            "{tier}"
        );
        assert_eq!(m.output("y"), Some(sample(Value::Int(3))), "{tier}");
    }
}

/// A rejected row in the middle of a run, after the faster tiers have
/// promoted, changes nothing: the history and the step numbers go on as if
/// it had never been given.
#[test]
fn a_rejected_row_leaves_history_untouched() {
    let spec = Spec::parse(
        "sum.dsrv",
        "in x: Int\nin b: Bool\nout z: Int\nout p: Int\nz = default(z[1], 0) + x\np = default(x[2], -1)",
    )
    .unwrap();
    let want: Vec<(u64, Vec<Sample>)> = (0..20)
        .map(|i: i64| {
            let z = (0..=i).sum::<i64>();
            let p = if i >= 2 { i - 2 } else { -1 };
            (i as u64, vec![sample(Value::Int(z)), sample(Value::Int(p))])
        })
        .collect();
    for tier in TIERS {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        let mut got = Vec::new();
        for i in 0..20 {
            if i % 3 == 2 {
                let bad = [Some(Value::Float(1.5)), Some(Value::Bool(true))];
                assert!(matches!(m.step(bad), Err(StepError::Row(_))), "{tier}");
                let bad = [int(1), Some(Value::Int(0))];
                assert!(matches!(m.step(bad), Err(StepError::Row(_))), "{tier}");
            }
            let out = m.step([int(i), Some(Value::Bool(true))]).unwrap();
            got.push((out.step(), out.to_vec()));
        }
        assert_eq!(got, want, "{tier}");
        assert_eq!(m.stats().rows, 20, "{tier}");
    }
}

#[test]
fn a_row_of_the_wrong_width_is_rejected_on_every_tier() {
    let spec = Spec::parse("y.dsrv", "in x: Int\nout y: Int\ny = x").unwrap();
    for tier in TIERS {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        let empty: [Option<Value>; 0] = [];
        assert_eq!(
            row_error(m.step(empty).unwrap_err()),
            RowError::WrongWidth {
                expected: 1,
                found: 0
            },
            "{tier}"
        );
        let e = row_error(m.step(vec![int(1), int(2)]).unwrap_err());
        assert_eq!(
            e.to_string(),
            "expected a row of 1 cell (one per declared input), found 2"
        );
        assert_eq!(m.steps(), 0);
        assert_eq!(m.step(vec![int(5)]).unwrap().get(0), sample(Value::Int(5)));
    }
}

/// An Int given to a Float input converts, as the trace readers convert it;
/// before, the Int went through and a Float stream emitted an Int.
#[test]
fn an_int_for_a_float_input_converts_on_every_tier() {
    let spec = Spec::parse(
        "u.dsrv",
        "in t: Float\nin s: Str\nout u: Float\nout w: Float\nu = t\nw = t * 2.0",
    )
    .unwrap();
    for tier in TIERS {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        for i in 0..5 {
            let out = m.step([int(i), Some(Value::Str("s".into()))]).unwrap();
            assert_eq!(
                out.to_vec(),
                [
                    sample(Value::Float(i as f64)),
                    sample(Value::Float(2.0 * i as f64))
                ],
                "{tier}"
            );
        }
        assert_eq!(m.input("t"), Some(sample(Value::Float(4.0))), "{tier}");
        let mut rows = m.batch();
        rows.push_row([int(7), None]).unwrap();
        assert_eq!(rows.row(0), [Some(Value::Float(7.0)), None]);
        let mut out = OutputBatch::new();
        m.run_batch(&rows, &mut out).unwrap();
        assert_eq!(out.get(0, 0), sample(Value::Float(7.0)), "{tier}");
    }
}

/// After a runtime error the monitor is stopped: every call returns that
/// error, whatever the row.
#[test]
fn a_stopped_monitor_reports_its_runtime_error_before_checking_rows() {
    let spec = Spec::parse("d.dsrv", "in x: Int\nout y: Int\ny = 10 / x").unwrap();
    let mut m = Monitor::builder(&spec).build();
    let e = m.step([int(0)]).unwrap_err();
    assert!(matches!(e, StepError::Runtime(_)), "{e}");
    assert!(e.source().is_some_and(|s| s.to_string() == e.to_string()));
    let again = m.step([Some(Value::Str("oops".into()))]).unwrap_err();
    assert_eq!(again, e);
}

#[test]
fn rows_are_built_by_name() -> Result<(), Box<dyn Error>> {
    let spec = Spec::parse(
        "hot.dsrv",
        "in host: Str\nin temp: Float\nin on: Bool\nout hot: Bool\nhot = on && temp > 25.0",
    )?;
    let mut monitor = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
    // The row holds no borrow of the monitor: build, then step.
    let row = monitor
        .row()
        .set("temp", 27.5)?
        .set("host", "a")?
        .set("on", true)?;
    assert_eq!(monitor.step(&row)?.get(0), sample(Value::Bool(true)));
    let e = monitor.row().set("pressure", 1.0).unwrap_err();
    assert_eq!(
        e,
        RowError::UnknownInput {
            name: "pressure".into()
        }
    );
    assert_eq!(e.to_string(), "`pressure` is not a declared input");
    // An output is not an input either.
    assert!(monitor.row().set("hot", true).is_err());
    let e = monitor.row().set("temp", "warm").unwrap_err();
    assert_eq!(
        e.to_string(),
        "expected Float for input `temp`, found Str \"warm\""
    );
    // A row reused from step to step.
    let mut row = spec.row();
    for (t, hot) in [(20, false), (30, true)] {
        row.assign("temp", t)?;
        row.assign("on", true)?;
        assert_eq!(monitor.step(&row)?.get(0), sample(Value::Bool(hot)));
    }
    row.unset("on")?;
    row.clear();
    assert_eq!(row.cells(), [None, None, None]);
    assert_eq!(row.input_names(), ["host", "temp", "on"]);
    // Every `Into<Value>` a user has at hand.
    let text: std::sync::Arc<str> = "b".into();
    for v in [
        Value::from("a"),
        Value::from(String::from("a")),
        text.into(),
    ] {
        spec.row().set("host", v)?;
    }
    Ok(())
}

/// A row and an error travel between threads (a reader thread builds rows
/// for a worker that owns the monitor).
#[test]
fn rows_and_errors_are_send() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<vigil::Row>();
    send_sync::<RowError>();
    send_sync::<StepError>();
    send_sync::<RowBatch>();
    send_sync::<OutputBatch>();
    let spec = Spec::parse("x.dsrv", "in x: Int\nout y: Int\ny = x + 1").unwrap();
    let row = spec.row().set("x", 41).unwrap();
    let row = std::thread::spawn(move || row).join().unwrap();
    let mut m = Monitor::builder(&spec).build();
    assert_eq!(m.step(&row).unwrap().get(0), sample(Value::Int(42)));
}

/// The JSON helper and the JSON-lines reader follow one rule: on each line
/// below, the reader's error is the helper's, at a location.
#[test]
fn json_objects_become_rows_by_the_readers_rules() {
    let spec = Spec::parse(
        "j.dsrv",
        "in x: Int\nin f: Float\nin s: Str\nin u: Unit\nin a\nout y: Int\ny = default(x, 0)",
    )
    .unwrap();
    let m = Monitor::builder(&spec).build();
    let object = |text: &str| {
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        v.as_object().unwrap().clone()
    };
    let row = m
        .row_from_json(&object(
            r#"{"x": 3, "f": 2, "s": "t", "u": null, "a": 1.5, "extra": [1]}"#,
        ))
        .unwrap();
    assert_eq!(
        row.cells(),
        [
            int(3),
            Some(Value::Float(2.0)),
            Some(Value::Str("t".into())),
            Some(Value::Unit),
            Some(Value::Float(1.5)),
        ]
    );
    let row = spec
        .row_from_json(&object(r#"{"f": "-inf", "a": "NaN"}"#))
        .unwrap();
    assert_eq!(row.get("f"), Some(&Value::Float(f64::NEG_INFINITY)));
    assert_eq!(row.get("a"), Some(&Value::Str("NaN".into())));
    assert_eq!(row.get("x"), None);

    // Values the reader rejects, and how the helper rejects them.
    type Kind = fn(&RowError) -> bool;
    let cases: [(&str, Kind); 5] = [
        (r#"{"x": "1"}"#, |e| {
            matches!(
                e,
                RowError::WrongType {
                    expected: Type::Int,
                    ..
                }
            )
        }),
        (r#"{"x": 2.5}"#, |e| {
            matches!(
                e,
                RowError::WrongType {
                    found: Value::Float(_),
                    ..
                }
            )
        }),
        (
            r#"{"s": {"k": 1}}"#,
            |e| matches!(e, RowError::NotAValue { input } if input == "s"),
        ),
        (
            r#"{"x": 9223372036854775808}"#,
            |e| matches!(e, RowError::InvalidNumber { input, .. } if input == "x"),
        ),
        (r#"{"u": false}"#, |e| {
            matches!(
                e,
                RowError::WrongType {
                    expected: Type::Unit,
                    ..
                }
            )
        }),
    ];
    for (line, kind) in cases {
        let helper = m.row_from_json(&object(line)).unwrap_err();
        assert!(kind(&helper), "{line}: {helper:?}");
        let mut reader = trace::reader_from_bytes(
            "t.jsonl",
            line.as_bytes().to_vec(),
            TraceFormat::Jsonl,
            &spec.input_schema(),
        )
        .unwrap();
        let mut cells = vec![None; 5];
        let read = reader.next_row(&mut cells).unwrap_err();
        assert_eq!(read.message, helper.to_string(), "{line}");
    }
    assert_eq!(
        m.row_from_json(&object(r#"{"x": 9223372036854775808}"#))
            .unwrap_err()
            .to_string(),
        "integer `9223372036854775808` does not fit in Int (64 bits)"
    );
}

#[test]
fn batches_check_rows_when_pushed_and_refuse_other_specs() {
    let spec = Spec::parse("y.dsrv", "in x: Int\nout y: Int\ny = x").unwrap();
    for tier in TIERS {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        let mut rows = RowBatch::for_spec(&spec);
        rows.push_row([int(1)]).unwrap();
        let e = rows
            .push_row([Some(Value::Str("oops".into()))])
            .unwrap_err();
        assert!(matches!(e, RowError::WrongType { .. }), "{e}");
        assert!(matches!(
            rows.push_row([int(1), int(2)]),
            Err(RowError::WrongWidth { .. })
        ));
        rows.push_row(m.row().set("x", 2).unwrap()).unwrap();
        assert_eq!(rows.len(), 2, "rejected rows are not pushed");
        assert_eq!((rows.row(0), rows.row(1)), (vec![int(1)], vec![int(2)]));
        let mut out = OutputBatch::new();
        m.run_batch(&rows, &mut out).unwrap();
        assert_eq!(out.len(), 2);

        // A batch of another specification's inputs is refused, and the
        // monitor goes on.
        let other = Spec::parse("o.dsrv", "in x: Float\nout y: Float\ny = x").unwrap();
        let mut foreign = RowBatch::for_spec(&other);
        foreign.push_row([Some(Value::Float(0.5))]).unwrap();
        let e = row_error(m.run_batch(&foreign, &mut out).unwrap_err());
        assert_eq!(
            e.to_string(),
            "the batch was made for the inputs (x: Float), but the monitor's inputs are (x: Int)"
        );
        assert!(out.is_empty());
        assert_eq!(m.steps(), 2);
        // The same inputs parsed again are the same inputs.
        let again = Spec::parse("y2.dsrv", "in x: Int\nout y: Int\ny = x * 2").unwrap();
        let mut same = RowBatch::for_spec(&again);
        same.push_row(again.row().set("x", 5).unwrap()).unwrap();
        m.run_batch(&same, &mut out).unwrap();
        assert_eq!(out.get(0, 0), sample(Value::Int(5)), "{tier}");
        assert_eq!(out.first_step(), 2);
    }
}

#[test]
fn outputs_and_streams_are_looked_up_by_kind() {
    let spec = Spec::parse(
        "k.dsrv",
        "in x: Int\naux a: Int\nout z: Int\na = x * 10\nz = a + 1",
    )
    .unwrap();
    let mut m = Monitor::builder(&spec).build();
    assert_eq!(m.step([int(2)]).unwrap().step(), 0);
    let out = m.step([int(3)]).unwrap();
    assert_eq!((out.step(), out.get(0)), (1, sample(Value::Int(31))));
    assert_eq!(m.output("z"), Some(sample(Value::Int(31))));
    assert_eq!(m.output("a"), None, "an aux stream is not an output");
    assert_eq!(m.output("x"), None, "an input is not an output");
    assert_eq!(m.stream("a"), Some(sample(Value::Int(30))));
    assert_eq!(m.stream("z"), Some(sample(Value::Int(31))));
    assert_eq!(m.stream("x"), Some(sample(Value::Int(3))));
    assert_eq!(m.stream("nope"), None);
    assert_eq!(m.input("x"), Some(sample(Value::Int(3))));
    assert_eq!(m.input("a"), None);
    m.step([None]).unwrap();
    assert_eq!(m.input("x"), Some(Sample::NoVal), "absent at the last step");
}

#[test]
fn output_batches_have_names_columns_rows_and_steps() {
    let spec = Spec::parse(
        "c.dsrv",
        "in x: Int\nin s: Str\nout z: Int\nout t: Str\nz = default(z[1], 0) + x\nt = s",
    )
    .unwrap();
    for tier in TIERS {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        let mut out = OutputBatch::new();
        assert_eq!((out.width(), out.len()), (0, 0));
        let mut rows = m.batch();
        let mut first = Vec::new();
        for chunk in 0..3 {
            rows.clear();
            for i in 0..4 {
                rows.push_row([int(i), Some(Value::Str(format!("s{i}").into()))])
                    .unwrap();
            }
            m.run_batch(&rows, &mut out).unwrap();
            first.push(out.first_step());
            assert_eq!(out.width(), 2);
            assert_eq!(out.names(), ["z", "t"]);
            assert_eq!((out.column("t"), out.column("x")), (Some(1), None));
            let t = out.column("t").unwrap();
            let steps: Vec<u64> = out.rows().map(|r| r.step()).collect();
            assert_eq!(steps, (0..4).map(|i| 4 * chunk + i).collect::<Vec<_>>());
            let last = out.row(3);
            assert_eq!(last.len(), 2);
            assert_eq!(last.get(t), sample(Value::Str("s3".into())));
            assert_eq!(
                last.get(0),
                sample(Value::Int(6 * (chunk as i64 + 1))),
                "{tier}"
            );
            assert_eq!(last.iter().count(), 2);
        }
        assert_eq!(first, [0, 4, 8], "{tier}");
    }
}

/// `Diagnostics` is an error whose text is what `vigil check` prints.
#[test]
fn diagnostics_display_as_the_cli_prints_them() {
    let source = "in x: Int\nout y: Int\ny = x + zz\nout w: Bool\nw = 1";
    let dir = test_dir("rows", "diagnostics");
    let path = dir.join("bad.dsrv");
    std::fs::write(&path, source).unwrap();
    let path = path.to_str().unwrap();
    let out = vigil().args(["check", path]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let load = || -> Result<Spec, Box<dyn Error>> { Ok(Spec::parse(path, source)?) };
    let e = load().unwrap_err();
    assert_eq!(format!("{e}\n"), String::from_utf8(out.stderr).unwrap());
    assert!(e.to_string().ends_with("due to 2 previous errors"), "{e}");
}

/// The whole-row program's batch kernel is compiled when the first batch
/// comes, not before (a run row by row never uses it), and then runs the
/// batches: a monitor stepped row by row compiles less, and its first batch
/// adds the compile time and runs on the kernel.
#[test]
fn the_batch_kernel_is_compiled_by_the_first_batch() {
    let spec = Spec::parse(
        "b.dsrv",
        "in x: Int\nout s: Int\ns = default(s[1], 0) + x\n",
    )
    .unwrap();
    let mut m = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
    let before = m.stats().compile_time;
    for x in 0..3 {
        m.step([int(x)]).unwrap();
    }
    assert_eq!(
        m.stats().compile_time,
        before,
        "stepping rows compiled something"
    );
    let mut rows = m.batch();
    for x in 0..100 {
        rows.push_row(&[int(x)]).unwrap();
    }
    let mut out = vigil::OutputBatch::new();
    m.run_batch(&rows, &mut out).unwrap();
    let stats = m.stats();
    assert!(stats.compile_time > before, "{stats}");
    // Every batch row ran on the kernel (the three stepped rows too).
    assert_eq!(stats.whole_rows, 102, "{stats}");
    assert_eq!(
        out.rows().last().map(|r| r.to_vec()),
        Some(vec![sample(Value::Int(4953))])
    );
}

/// A batch whose columns each hold their input's type on every row runs on
/// the batch kernel that tests no row's inputs; a batch with an absent
/// cell, or a column of one other tag (every cell absent), runs on the one
/// that tests each row, and declines at that row. The outputs are the
/// canonical tier's, row by row, through all of it.
#[test]
fn typed_batches_run_without_input_tests_and_others_with() {
    let spec = Spec::parse(
        "t.dsrv",
        "in x: Int\nin f: Float\nout s: Int\nout g: Float\n\
         s = default(s[1], 0) + x\ng = default(g[1], 0.0) + f\n",
    )
    .unwrap();
    let mut batched = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
    let mut canonical = Monitor::builder(&spec).tier(Tier::Canonical).build();
    let mut run = |rows: &[[Option<Value>; 2]]| {
        let mut batch = batched.batch();
        for row in rows {
            batch.push_row(row).unwrap();
        }
        let mut out = OutputBatch::new();
        batched.run_batch(&batch, &mut out).unwrap();
        for (r, row) in rows.iter().enumerate() {
            let want = canonical.step(row).unwrap().to_vec();
            assert_eq!(out.row(r).to_vec(), want, "row {r}");
        }
        let stats = batched.stats();
        (stats.batch_rows, stats.typed_batch_rows)
    };
    // Ints for the Float input convert: its column holds Floats.
    let typed: Vec<_> = (0..100).map(|i| [int(i), int(i % 3)]).collect();
    // The first row (before the rings are full) runs alone; the kernel
    // takes the rest.
    assert_eq!(run(&typed), (99, 99));
    let mut gap = typed.clone();
    gap[40][1] = None;
    // The kernel declines row 40 (it runs canonically), and takes the rows
    // after it once its rings hold their types again.
    let (all, untested) = run(&gap);
    assert_eq!(untested, 99, "a batch with an absent cell ran untested");
    assert!(all > 99 + 90, "{all}");
    let absent: Vec<_> = (0..50).map(|i| [int(i), None]).collect();
    let (_, untested) = run(&absent);
    assert_eq!(untested, 99, "a column of absent cells ran untested");
    let (_, untested) = run(&typed);
    assert!(untested > 99 + 90, "{untested}");
}

/// `Monitor::prepare_batches` compiles the batch kernel ahead of the first
/// batch; one `OutputBatch` reused over batches of any sizes holds exactly
/// each batch's rows (its cells are not cleared between batches: a longer
/// batch's stale cells must never show), on every tier.
#[test]
fn a_reused_output_batch_holds_each_batchs_rows_only() {
    let spec = Spec::parse(
        "b.dsrv",
        "in x: Int\nout s: Int\nout half: Int\ns = default(s[1], 0) + x\nhalf = x / 2\n",
    )
    .unwrap();
    let mut m = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
    let before = m.stats().compile_time;
    m.prepare_batches();
    assert!(m.stats().compile_time > before, "nothing was compiled");
    let compiled = m.stats().compile_time;
    for tier in TIERS {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        let mut reference = Monitor::builder(&spec).tier(Tier::Canonical).build();
        let mut out = vigil::OutputBatch::new();
        let mut x = 0;
        for size in [9, 3, 0, 5, 1] {
            let mut rows = m.batch();
            let mut want = Vec::new();
            for _ in 0..size {
                x += 1;
                rows.push_row([int(x)]).unwrap();
                want.push(reference.step([int(x)]).unwrap().to_vec());
            }
            m.run_batch(&rows, &mut out).unwrap();
            let got: Vec<Vec<Sample>> = out.rows().map(|r| r.to_vec()).collect();
            assert_eq!(got, want, "{tier}, a batch of {size}");
        }
    }
    let mut rows = m.batch();
    rows.push_row([int(1)]).unwrap();
    m.run_batch(&rows, &mut vigil::OutputBatch::new()).unwrap();
    assert_eq!(
        m.stats().compile_time,
        compiled,
        "the first batch compiled again"
    );
}

/// A row that contradicts a speculated input runs canonically with the
/// values it has, and an `if` arm that cannot fault on the speculated
/// representation can there (`Int % Int` by zero, where the speculated
/// Floats give NaN): the arm is NoVal and the `if` reads its held value,
/// which the fused code must have kept. Regression test: native-regions
/// printed nothing for `s` at step 2 (its eager select stored no arm).
#[test]
fn a_contradicting_row_holds_the_arms_fused_code_computed() {
    let spec = Spec::parse(
        "s.dsrv",
        "in i\nout s: Int\ns = if i == 0 then i else i % i",
    )
    .unwrap();
    let rows = [
        Some(Value::Float(0.1)),
        Some(Value::Float(-7.0)),
        int(0),
        Some(Value::Float(1.0)),
    ];
    let mut canonical = Monitor::builder(&spec).tier(Tier::Canonical).build();
    let expected: Vec<_> = rows
        .iter()
        .map(|r| canonical.step([r.clone()]).unwrap().to_vec())
        .collect();
    assert_eq!(expected[2], [Sample::Value(Value::Int(0))]);
    for tier in TIERS {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        for (k, r) in rows.iter().enumerate() {
            assert_eq!(
                m.step([r.clone()]).unwrap().to_vec(),
                expected[k],
                "{tier}, row {k}"
            );
        }
    }
}

/// An untyped input given to `Monitor::step_scalars` reaches the streams
/// that read it on native-whole while the engine is still watching the
/// untyped inputs (before speculation, they are in the kernel's tail):
/// regression test for a scalar row whose tail inputs were read as NoVal.
#[test]
fn scalar_rows_feed_untyped_inputs_in_the_tail() {
    let src = "in x\nin z\nin y: Int\nout b\nout c: Int\nb = x\nc = default(c[1], 0) + y";
    let spec = Spec::parse("s.dsrv", src).unwrap();
    for tier in TIERS {
        let mut plain = Monitor::builder(&spec).tier(tier).build();
        let mut typed = Monitor::builder(&spec).tier(tier).build();
        let mut row = typed.scalar_row();
        let (x, y) = (row.input("x").unwrap(), row.input("y").unwrap());
        // `z` stays absent, so speculation keeps watching for 16 rows.
        for i in 0..8 {
            row.set_int(x, i * 3).unwrap();
            row.set_int(y, i).unwrap();
            let expected = plain.step([int(i * 3), None, int(i)]).unwrap().to_vec();
            let got = typed.step_scalars(&row).unwrap().to_vec();
            assert_eq!(got, expected, "{tier}, row {i}");
            assert_eq!(got[0], Sample::Value(Value::Int(i * 3)), "{tier}, row {i}");
        }
    }
}

/// `Monitor::step_scalars` computes what `Monitor::step` does, on every
/// tier: rows with absent inputs (which the whole-row kernel declines),
/// Ints given to a Float input, a runtime error at the same step; a row of
/// another spec and a value of the wrong type are refused without a step.
/// On native-whole the kernel runs the complete rows (its coverage guard).
/// The typed reads of the outputs (`Outputs::int`, `float`, `bool`) agree
/// with their samples.
#[test]
fn scalar_rows_step_as_value_rows_do() {
    let src = "in x: Int\nin f: Float\nin b: Bool\nout acc: Int\nout g: Float\nout pick: Int\n\
               acc = default(acc[1], 0) + x\ng = f * 2.0\npick = if b then acc / x else 0";
    let spec = Spec::parse("s.dsrv", src).unwrap();
    // Row i: x = i - 40 (zero at row 40: `acc / x` divides by zero there
    // when b), f every third row absent, b alternating.
    let cells = |i: i64| -> [Option<Value>; 3] {
        [
            if i % 7 == 3 { None } else { int(i - 40) },
            (i % 3 != 0).then_some(Value::Int(i)),
            Some(Value::Bool(i % 2 == 0)),
        ]
    };
    for tier in TIERS {
        let mut plain = Monitor::builder(&spec).tier(tier).build();
        let mut typed = Monitor::builder(&spec).tier(tier).build();
        let mut row = typed.scalar_row();
        let (x, f, b) = (
            row.input("x").unwrap(),
            row.input("f").unwrap(),
            row.input("b").unwrap(),
        );
        for i in 0..60 {
            let c = cells(i);
            match &c[0] {
                Some(Value::Int(v)) => row.set_int(x, *v).unwrap(),
                _ => row.unset(x),
            }
            match &c[1] {
                Some(Value::Int(v)) => row.set_int(f, *v).unwrap(),
                _ => row.unset(f),
            }
            row.set_bool(b, i % 2 == 0).unwrap();
            let expected = plain.step(c).map(|o| o.to_vec()).map_err(|e| e.to_string());
            let got = typed
                .step_scalars(&row)
                .map(|o| {
                    // The typed reads agree with the samples.
                    for k in 0..o.len() {
                        let (int, float, boolean) = match o.get(k) {
                            Sample::Value(Value::Int(v)) => (Some(v), None, None),
                            Sample::Value(Value::Float(v)) => (None, Some(v), None),
                            Sample::Value(Value::Bool(v)) => (None, None, Some(v)),
                            _ => (None, None, None),
                        };
                        assert_eq!((o.int(k), o.float(k), o.bool(k)), (int, float, boolean));
                    }
                    o.to_vec()
                })
                .map_err(|e| e.to_string());
            assert_eq!(got, expected, "{tier}, row {i}");
            if expected.is_err() {
                break;
            }
        }
        assert_eq!(typed.steps(), plain.steps(), "{tier}");
        if typed.tier() == Tier::NativeWhole {
            let s = typed.stats();
            assert!(s.whole_rows > 20, "{tier}: the kernel ran ({s:?})");
        }
    }
    let m = Monitor::builder(&spec).build();
    let mut row = m.scalar_row();
    assert_eq!(
        row.set_bool(0, true).unwrap_err().to_string(),
        "expected Int for input `x`, found Bool true"
    );
    assert_eq!(
        row.input("nope").unwrap_err().to_string(),
        "`nope` is not a declared input"
    );
    let other = Spec::parse("o.dsrv", "in x: Int\nout y: Int\ny = x").unwrap();
    let mut m = Monitor::builder(&other).build();
    let e = row_error(m.step_scalars(&row).unwrap_err());
    assert!(matches!(e, RowError::WrongRow { .. }), "{e}");
    assert_eq!(m.steps(), 0);
}

/// A `Stepper` steps as `Monitor::step_scalars` does, on every tier: the
/// rows of `scalar_rows_step_as_value_rows_do` (absent inputs, which the
/// kernel declines, an Int given to a Float input, a division by zero at
/// row 40), with the same outputs and error, the error again on every later
/// step, and the monitor's steps and counters as after `step_scalars`. On
/// native-whole the complete rows after a promoting row run on the kept
/// frame (9 of these 50: a declined row, and the row that promotes the
/// kernel again, take the general path).
#[test]
fn a_stepper_steps_as_scalar_rows_do() {
    let src = "in x: Int\nin f: Float\nin b: Bool\nout acc: Int\nout g: Float\nout pick: Int\n\
               acc = default(acc[1], 0) + x\ng = f * 2.0\npick = if b then acc / x else 0";
    let spec = Spec::parse("s.dsrv", src).unwrap();
    for tier in TIERS {
        let mut typed = Monitor::builder(&spec).tier(tier).build();
        let mut stepped = Monitor::builder(&spec).tier(tier).build();
        let mut row = typed.scalar_row();
        let mut stepper = stepped.stepper();
        let (x, f, b) = (
            stepper.input("x").unwrap(),
            stepper.input("f").unwrap(),
            stepper.input("b").unwrap(),
        );
        for i in 0..50 {
            if i % 7 == 3 {
                row.unset(x);
                stepper.unset(x);
            } else {
                row.set_int(x, i - 40).unwrap();
                stepper.set_int(x, i - 40).unwrap();
            }
            if i % 3 == 0 {
                row.unset(f);
                stepper.unset(f);
            } else {
                row.set_int(f, i).unwrap();
                stepper.set_int(f, i).unwrap();
            }
            row.set_bool(b, i % 2 == 0).unwrap();
            stepper.set_bool(b, i % 2 == 0).unwrap();
            let expected = (typed.step_scalars(&row))
                .map(|o| (o.step(), o.to_vec()))
                .map_err(|e| e.to_string());
            let got = (stepper.step())
                .map(|o| (o.step(), o.to_vec()))
                .map_err(|e| e.to_string());
            assert_eq!(got, expected, "{tier}, row {i}");
            if i == 40 {
                assert!(got.is_err(), "{tier}: row 40 divides by zero");
            }
        }
        let fast = stepper.fast_rows();
        drop(stepper);
        assert_eq!(stepped.steps(), typed.steps(), "{tier}");
        let (a, b) = (stepped.stats(), typed.stats());
        assert_eq!((a.rows, a.whole_rows), (b.rows, b.whole_rows), "{tier}");
        if stepped.tier() == Tier::NativeWhole {
            assert!(fast >= 9, "{tier}: {fast} rows on the kept frame");
        }
    }
    // A value of the wrong type is refused without a step.
    let mut m = Monitor::builder(&spec).build();
    let mut stepper = m.stepper();
    assert_eq!(
        stepper.set_bool(0, true).unwrap_err().to_string(),
        "expected Int for input `x`, found Bool true"
    );
    drop(stepper);
    assert_eq!(m.steps(), 0);
}

/// A stepper's input set from a `Value` cell takes what its typed setter
/// takes (an Int for a Float input, converted), `None` makes it absent, and
/// a Str is refused with the row left as it was.
#[test]
fn a_stepper_is_set_from_value_cells() {
    let spec = Spec::parse(
        "s.dsrv",
        "in x: Int\nin f: Float\nout s: Float\ns = f + 1.0\nout y: Int\ny = x",
    )
    .unwrap();
    let mut m = Monitor::builder(&spec).build();
    let mut stepper = m.stepper();
    stepper.set(0, Some(&Value::Int(4))).unwrap();
    stepper.set(1, Some(&Value::Int(2))).unwrap();
    assert_eq!(
        stepper.step().unwrap().to_vec(),
        [
            Sample::Value(Value::Float(3.0)),
            Sample::Value(Value::Int(4))
        ]
    );
    let refused = stepper.set(1, Some(&Value::Str("two".into()))).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "expected Float for input `f`, found Str \"two\""
    );
    assert!(stepper.set(0, Some(&Value::Float(1.5))).is_err());
    stepper.set(0, None).unwrap();
    // `f` kept its 2.0 (the refused cell changed nothing); `x` is absent,
    // so `y` is NoVal, which no typed read gives.
    let out = stepper.step().unwrap();
    assert_eq!(out.float(0), Some(3.0));
    assert_eq!(out.int(1), None);
}

/// The typed reads of an output give its value only when it holds one of
/// that kind: ⊥ (an offset before the first step), NoVal (an absent input)
/// and a value of another kind are `None`, on every tier and on a keyed
/// monitor's packed runs.
#[test]
fn typed_output_reads_give_present_values_of_their_kind() {
    let src = "in k: Int\nin x: Int\nin f: Float\nout p: Int\nout g: Float\nout c: Bool\n\
               p = x[1]\ng = f\nc = x > 0";
    let spec = Spec::parse("s.dsrv", src).unwrap();
    let rows = [
        [int(1), int(4), Some(Value::Float(0.5))],
        [int(1), int(-3), None],
        [int(1), int(2), Some(Value::Float(1.5))],
    ];
    // (p, g, c) read as (int, float, bool), and p and g read as bool.
    type Reads = (
        Option<i64>,
        Option<f64>,
        Option<bool>,
        Option<bool>,
        Option<bool>,
    );
    let expected: [Reads; 3] = [
        (None, Some(0.5), Some(true), None, None),
        (Some(4), None, Some(false), None, None),
        (Some(-3), Some(1.5), Some(true), None, None),
    ];
    let reads = |o: &vigil::Outputs<'_>| -> Reads {
        (o.int(0), o.float(1), o.bool(2), o.bool(0), o.bool(1))
    };
    for tier in TIERS {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        for (row, want) in rows.iter().zip(expected) {
            assert_eq!(reads(&m.step(row).unwrap()), want, "{tier}");
        }
        let mut keyed = vigil::KeyedMonitor::builder(&spec, "k")
            .tier(tier)
            .build()
            .unwrap();
        for (row, want) in rows.iter().zip(expected) {
            assert_eq!(reads(&keyed.step(row).unwrap()), want, "keyed, {tier}");
        }
    }
}

/// A whole-row program whose canonical tail pushes ⊥ into a ring demotes
/// the regions that read that ring, as a canonical row does: a row the
/// program declines later (here `i0` absent) runs those regions only once
/// their rings are promotable again. Regression test: the quickened tier
/// printed `s3 = Int(1)` at step 19, read from a ⊥ entry of `n2`'s ring
/// (found by `snapshots::a_restored_run_continues_exactly` in CI).
#[test]
fn a_tail_pushing_bottom_demotes_the_regions_of_declined_rows() {
    let src = "in i0: Float\nin i1: Bool\nin i2: Int\nvar s0\nout s3\n\
               s0 = i2\ns3 = (if i1 then s3[3] else i2[1])[3]";
    let spec = Spec::parse("s.dsrv", src).unwrap();
    // (i0 present, i1, i2) per row; `None` is an absent input.
    let cells: [(bool, Option<bool>, Option<i64>); 20] = [
        (true, Some(true), Some(3)),
        (true, None, Some(-2)),
        (true, None, Some(3)),
        (true, Some(false), Some(-1)),
        (true, None, Some(-2)),
        (false, Some(true), None),
        (true, Some(true), Some(-2)),
        (true, Some(false), Some(0)),
        (false, Some(false), None),
        (true, Some(false), Some(1)),
        (false, Some(false), Some(3)),
        (true, Some(true), Some(0)),
        (true, Some(false), Some(-2)),
        (true, Some(false), Some(1)),
        (true, Some(false), Some(1)),
        (false, Some(false), Some(1)),
        (true, Some(true), Some(-3)),
        (true, Some(true), Some(-2)),
        (true, Some(true), Some(3)),
        (false, None, Some(0)),
    ];
    let rows: Vec<[Option<Value>; 3]> = cells
        .iter()
        .map(|&(f, b, i)| {
            [
                f.then_some(Value::Float(1.5)),
                b.map(Value::Bool),
                i.and_then(int),
            ]
        })
        .collect();
    let mut canonical = Monitor::builder(&spec).tier(Tier::Canonical).build();
    let expected: Vec<_> = rows
        .iter()
        .map(|r| canonical.step(r.clone()).unwrap().to_vec())
        .collect();
    assert_eq!(expected[19], [Sample::Deferred]);
    for tier in TIERS {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        for (k, r) in rows.iter().enumerate() {
            assert_eq!(
                m.step(r.clone()).unwrap().to_vec(),
                expected[k],
                "{tier}, row {k}"
            );
        }
    }
}

/// `Monitor::step` checks a row and writes its frame form in one pass,
/// which the whole-row kernel reads where it lies (issue 39): every row
/// (present, absent, converted, rejected, failing) steps on native-whole
/// as on the canonical tier, with the same outputs, times and errors, and
/// a row after a rejected one is read whole (the rejected row's cells,
/// partly written, are not read).
#[test]
fn value_rows_on_the_kernels_short_path_step_as_on_the_canonical_tier() {
    use vigil::time::Time;
    let spec = Spec::parse(
        "short.dsrv",
        "in x: Float\nin n: Int\nin s: Str\nout y: Float\nout z: Int\ny = x * 2.0\nz = 100 / n",
    )
    .unwrap();
    let f = |v: f64| Some(Value::Float(v));
    let text = |t: &str| Some(Value::Str(t.into()));
    let mut rows: Vec<Vec<Option<Value>>> = Vec::new();
    for i in 0..40 {
        rows.push(match i % 8 {
            0 => vec![f(i as f64 * 0.5), int(i + 1), text("a")],
            1 => vec![int(i), int(4), None],
            2 => vec![None, int(2), None],
            3 => vec![text("bad"), int(1), None],
            4 => vec![f(1.0), text("bad"), None],
            5 => vec![f(2.5)],
            6 => vec![f(-3.0), None, text("b")],
            _ => vec![f(i as f64), int(-7), None],
        });
    }
    rows.push(vec![f(1.0), int(0), None]);
    rows.push(vec![f(1.0), int(1), None]);
    let run = |tier: Tier| {
        let mut m = Monitor::builder(&spec).tier(tier).build();
        let results: Vec<_> = (rows.iter().enumerate())
            .map(|(i, row)| {
                let out = m.step_at(Time(i as i64 * 1_000_000), row)?;
                Ok::<_, StepError>((out.step(), out.time(), out.to_vec()))
            })
            .collect();
        (results, m.stats().whole_rows)
    };
    let (canonical, _) = run(Tier::Canonical);
    let (native, whole_rows) = run(Tier::NativeWhole);
    assert_eq!(native, canonical);
    // The rows the kernel completed: the first of each eight, the two
    // after it (a converted Int; an absent `x`) and the last, each with `n`
    // present and not 0.
    assert!(whole_rows >= 15, "{whole_rows}");
    let errors = canonical.iter().filter(|r| r.is_err()).count();
    assert_eq!(errors, 3 * 5 + 2, "{canonical:?}");
    assert!(matches!(canonical[40], Err(StepError::Runtime(_))));
    assert_eq!(canonical[41], canonical[40]);
}
