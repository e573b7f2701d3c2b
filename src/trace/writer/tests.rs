//! The output writers' tests: every format's lines for every kind of sample, batches against
//! steps, keyed lines appended against written, and write errors.

use super::*;
use crate::batch::OutputBatch;
use std::sync::{Arc, Mutex};

/// A sink the test can inspect after the writer has written into it.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

fn v(x: Value) -> Sample {
    Sample::Value(x)
}

/// Three outputs over three steps covering every kind of sample.
fn run(format: OutputFormat) -> String {
    let sink = Shared::default();
    let names = vec!["z".to_string(), "f".to_string(), "s".to_string()];
    let mut w = make_writer(format, names, Box::new(sink.clone()));
    w.write_step(0, &[v(Value::Int(3)), Sample::Deferred, Sample::NoVal])
        .unwrap();
    w.write_step(
        1,
        &[
            Sample::NoVal,
            v(Value::Float(2.0)),
            v(Value::Str("a, \"b\"".into())),
        ],
    )
    .unwrap();
    w.write_step(
        2,
        &[
            v(Value::Bool(true)),
            v(Value::Float(f64::NAN)),
            v(Value::Unit),
        ],
    )
    .unwrap();
    w.write_step(
        3,
        &[
            Sample::NoVal,
            v(Value::Float(f64::NEG_INFINITY)),
            v(Value::Float(1e16)),
        ],
    )
    .unwrap();
    w.flush().unwrap();
    sink.text()
}

/// `append_keyed` gives every format's keyed lines byte for byte as `write_keyed` writes
/// them (a scaled run's workers format by the one, a single-process run by the other), a
/// CSV writer whose header is still due leaving the lines to `write_keyed`.
#[test]
fn appended_keyed_lines_are_the_written_ones() {
    let keys = [
        Key::new(Value::Str("web-1".into())),
        Key::new(Value::Str("two words".into())),
        Key::new(Value::Int(-3)),
    ];
    for format in [OutputFormat::Text, OutputFormat::Csv, OutputFormat::Jsonl] {
        let names: Vec<String> = ["a", "b", "c", "d"].map(String::from).into();
        let sink = Shared::default();
        let mut written = keyed_writer(format, names.clone(), "host", Box::new(sink.clone()), true);
        let mut appender = keyed_writer(format, names.clone(), "host", Box::new(io::sink()), true);
        let mut appended = Vec::new();
        for (step, samples) in every_kind().iter().enumerate() {
            let key = &keys[step % keys.len()];
            written.write_keyed(step as u64, key, samples).unwrap();
            let step = step as u64;
            assert!(
                appender
                    .append_keyed(step, key, samples, &mut appended)
                    .unwrap()
            );
        }
        written.flush().unwrap();
        assert_eq!(
            String::from_utf8(appended).unwrap(),
            sink.text(),
            "{format:?}"
        );
    }
    let names = vec!["a".to_string()];
    let mut fresh = keyed_writer(
        OutputFormat::Csv,
        names,
        "host",
        Box::new(io::sink()),
        false,
    );
    let mut to = Vec::new();
    let samples = [v(Value::Int(1))];
    assert!(!fresh.append_keyed(0, &keys[0], &samples, &mut to).unwrap());
    assert!(to.is_empty());
}

/// Samples of every kind, four steps of four outputs.
fn every_kind() -> Vec<Vec<Sample>> {
    vec![
        vec![
            v(Value::Int(3)),
            Sample::Deferred,
            Sample::NoVal,
            v(Value::Int(i64::MIN)),
        ],
        vec![
            Sample::NoVal,
            v(Value::Float(2.0)),
            v(Value::Str("a, \"b\"".into())),
            v(Value::Bool(false)),
        ],
        vec![
            v(Value::Bool(true)),
            v(Value::Float(f64::NAN)),
            v(Value::Unit),
            v(Value::Int(-1)),
        ],
        vec![
            Sample::NoVal,
            v(Value::Float(f64::NEG_INFINITY)),
            v(Value::Float(1e16)),
            Sample::NoVal,
        ],
    ]
}

/// What `write_step` writes for `rows` (from step 7), with the
/// columns `columns` of each row.
fn stepwise(format: OutputFormat, rows: &[Vec<Sample>], columns: &[usize]) -> String {
    let sink = Shared::default();
    let names = columns.iter().map(|c| format!("o{c}")).collect();
    let mut w = make_writer(format, names, Box::new(sink.clone()));
    for (i, row) in rows.iter().enumerate() {
        let samples: Vec<Sample> = columns.iter().map(|&c| row[c].clone()).collect();
        w.write_step(7 + i as u64, &samples).unwrap();
    }
    w.flush().unwrap();
    sink.text()
}

/// `write_batch`, which the text writer implements on the lanes, writes
/// what `write_step` does, for every kind of sample and a selection of
/// the columns, in every format; so does the write-behind writer, given
/// batches and steps mixed.
#[test]
fn batches_are_written_as_steps_are() {
    let rows = every_kind();
    let batch = OutputBatch::from_samples(&["o0", "o1", "o2", "o3"], 7, &rows);
    for columns in [vec![0, 1, 2, 3], vec![3, 0], vec![]] {
        for format in [OutputFormat::Text, OutputFormat::Csv, OutputFormat::Jsonl] {
            let expected = stepwise(format, &rows, &columns);
            let names: Vec<String> = columns.iter().map(|c| format!("o{c}")).collect();
            let sink = Shared::default();
            let mut w = make_writer(format, names.clone(), Box::new(sink.clone()));
            w.write_batch(&batch, &columns).unwrap();
            w.flush().unwrap();
            assert_eq!(sink.text(), expected, "{format:?} {columns:?}");

            // Behind: the batch, then the same rows again as steps,
            // then the batch again.
            let sink = Shared::default();
            let inner = make_writer(format, names, Box::new(sink.clone()));
            let mut w = super::super::WriteBehind::spawn(inner);
            w.write_batch(&batch, &columns).unwrap();
            for (i, row) in rows.iter().enumerate() {
                let samples: Vec<Sample> = columns.iter().map(|&c| row[c].clone()).collect();
                w.write_step(7 + i as u64, &samples).unwrap();
            }
            w.write_batch(&batch, &columns).unwrap();
            w.flush().unwrap();
            let once = stepwise(format, &rows, &columns);
            let body = match format {
                // The header comes once.
                OutputFormat::Csv => once.split_once('\n').map_or("", |(_, b)| b).to_string(),
                _ => once.clone(),
            };
            assert_eq!(
                sink.text(),
                format!("{once}{body}{body}"),
                "behind {format:?} {columns:?}"
            );
        }
    }
}

#[test]
fn text_output_is_the_trustworthiness_checkers() {
    expect_test::expect![[r#"
        z[0] = Int(3)
        f[0] = Deferred
        f[1] = Float(2.0)
        s[1] = Str("a, \"b\"")
        z[2] = Bool(true)
        f[2] = Float(NaN)
        s[2] = Unit
        f[3] = Float(-inf)
        s[3] = Float(1e16)
    "#]]
    .assert_eq(&run(OutputFormat::Text));
}

#[test]
fn keyed_output_names_the_key_in_every_format() {
    let mut all = String::new();
    for format in [OutputFormat::Text, OutputFormat::Csv, OutputFormat::Jsonl] {
        let sink = Shared::default();
        let names = vec!["z".to_string(), "s".to_string()];
        // An output named `step` is not needed to push the step column
        // aside: a key input named `step` does it too.
        let mut w = keyed_writer(format, names, "step", Box::new(sink.clone()), false);
        w.write_keyed(0, &Key::new("a"), &[v(Value::Int(3)), Sample::NoVal])
            .unwrap();
        w.write_keyed(
            4,
            &Key::new("two words"),
            &[Sample::Deferred, v(Value::Unit)],
        )
        .unwrap();
        w.write_keyed(
            1,
            &Key::new(7),
            &[v(Value::Bool(true)), v(Value::Str("x".into()))],
        )
        .unwrap();
        w.flush().unwrap();
        all.push_str(&sink.text());
    }
    expect_test::expect![[r#"
        z{step=a}[0] = Int(3)
        z{step="two words"}[4] = Deferred
        s{step="two words"}[4] = Unit
        z{step=7}[1] = Bool(true)
        s{step=7}[1] = Str("x")
        _step,step,z,s
        0,"a",3,
        4,"two words",null,()
        1,7,true,"x"
        {"_step":0,"step":"a","z":3}
        {"_step":4,"step":"two words","z":null,"s":"()"}
        {"_step":1,"step":7,"z":true,"s":"x"}
    "#]]
    .assert_eq(&all);
}

#[test]
fn csv_output() {
    expect_test::expect![[r#"
        step,z,f,s
        0,3,null,
        1,,2.0,"a, ""b"""
        2,true,NaN,()
        3,,-inf,1e16
    "#]]
    .assert_eq(&run(OutputFormat::Csv));
}

#[test]
fn jsonl_output() {
    expect_test::expect![[r#"
        {"step":0,"z":3,"f":null}
        {"step":1,"f":2.0,"s":"a, \"b\""}
        {"step":2,"z":true,"f":"NaN","s":"()"}
        {"step":3,"f":"-inf","s":1e16}
    "#]]
    .assert_eq(&run(OutputFormat::Jsonl));
}

/// Issue 7: values that used to print alike in CSV (the empty string and
/// NoVal, the string `null` and ⊥) differ, and every value reads back
/// as itself through the CSV reader.
#[test]
fn csv_output_is_lossless_and_reads_back() {
    use crate::lang::types::Type;
    use crate::trace::{InputSchema, TraceFormat, reader_from_bytes};
    let s = |t: &str| v(Value::Str(t.into()));
    let steps = [
        vec![s(""), Sample::NoVal, s("null"), Sample::Deferred],
        vec![s("3"), v(Value::Int(3)), s("()"), v(Value::Unit)],
        vec![
            s("NaN"),
            v(Value::Float(f64::NAN)),
            s("true"),
            v(Value::Bool(true)),
        ],
        vec![
            s("a,\"b\"\r\nc"),
            v(Value::Float(-0.0)),
            s(" "),
            v(Value::Float(1e300)),
        ],
    ];
    let names: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
    let sink = Shared::default();
    let mut w = make_writer(OutputFormat::Csv, names.clone(), Box::new(sink.clone()));
    for (i, samples) in steps.iter().enumerate() {
        w.write_step(i as u64, samples).unwrap();
    }
    w.flush().unwrap();
    expect_test::expect![[r#"
        step,a,b,c,d
        0,"",,"null",null
        1,"3",3,"()",()
        2,"NaN",NaN,"true",true
        3,"a,""b""
        c",-0.0," ",1e300
    "#]]
    .assert_eq(&sink.text().replace("\r\n", "\n"));
    // Read back with every column untyped (and ⊥, which is not a trace
    // value, left out): each value is the one written.
    let schema = InputSchema {
        names: names.clone(),
        types: vec![Type::Any; 4],
    };
    let text = sink.text().replace(",null\n", ",\n");
    let mut r = reader_from_bytes("out.csv", text.into_bytes(), TraceFormat::Csv, &schema).unwrap();
    let mut row = vec![None; 4];
    for samples in &steps {
        assert!(r.next_row(&mut row).unwrap());
        let want: Vec<Option<Value>> = samples
            .iter()
            .map(|s| match s {
                Sample::Value(x) => Some(x.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(row.len(), want.len());
        for (got, want) in row.iter().zip(&want) {
            match (got, want) {
                (Some(Value::Float(a)), Some(Value::Float(b))) if a.is_nan() => {
                    assert!(b.is_nan())
                }
                _ => assert_eq!(got, want),
            }
        }
    }
    assert!(!r.next_row(&mut row).unwrap());
}

/// Issue 7: an output named `step` used to share its column with the
/// step number (`{"step":0,"step":10}`).
#[test]
fn the_step_column_never_collides_with_an_output() {
    assert_eq!(step_column(&["x".to_string()]), "step");
    assert_eq!(step_column(&["step".to_string()]), "_step");
    assert_eq!(
        step_column(&["_step".to_string(), "step".to_string()]),
        "__step"
    );
    let names = vec!["step".to_string(), "_step".to_string()];
    for (format, want) in [
        (OutputFormat::Csv, "__step,step,_step\n7,10,11\n"),
        (
            OutputFormat::Jsonl,
            "{\"__step\":7,\"step\":10,\"_step\":11}\n",
        ),
    ] {
        let sink = Shared::default();
        let mut w = make_writer(format, names.clone(), Box::new(sink.clone()));
        w.write_step(7, &[v(Value::Int(10)), v(Value::Int(11))])
            .unwrap();
        w.flush().unwrap();
        assert_eq!(sink.text(), want, "{format:?}");
    }
}

/// The kind of a write error survives (the `csv` crate used to turn a
/// closed pipe into an opaque error).
#[test]
fn write_errors_keep_their_kind() {
    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
    }
    for format in [OutputFormat::Text, OutputFormat::Csv, OutputFormat::Jsonl] {
        let mut w = make_writer(format, vec!["y".into()], Box::new(Closed));
        let _ = w.write_step(0, &[v(Value::Int(1))]);
        let e = w.flush().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe, "{format:?}");
    }
}

#[test]
fn jsonl_lines_are_valid_json() {
    for line in run(OutputFormat::Jsonl).lines() {
        let parsed: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(parsed.is_object(), "{line}");
    }
}

#[test]
fn csv_header_is_written_for_an_empty_trace() {
    let sink = Shared::default();
    let mut w = make_writer(OutputFormat::Csv, vec!["y".into()], Box::new(sink.clone()));
    w.flush().unwrap();
    w.flush().unwrap();
    assert_eq!(sink.text(), "step,y\n");
}

#[test]
fn output_is_buffered_until_flush() {
    for format in [OutputFormat::Text, OutputFormat::Csv, OutputFormat::Jsonl] {
        let sink = Shared::default();
        let mut w = make_writer(format, vec!["y".into()], Box::new(sink.clone()));
        w.write_step(0, &[v(Value::Int(1))]).unwrap();
        assert_eq!(sink.text(), "", "{format:?}");
        w.flush().unwrap();
        assert!(sink.text().ends_with('\n'), "{format:?}");
    }
}

#[test]
fn jsonl_keys_are_escaped() {
    let sink = Shared::default();
    let mut w = make_writer(
        OutputFormat::Jsonl,
        vec!["a\"b".into()],
        Box::new(sink.clone()),
    );
    w.write_step(7, &[v(Value::Int(-1))]).unwrap();
    w.flush().unwrap();
    assert_eq!(sink.text(), "{\"step\":7,\"a\\\"b\":-1}\n");
}
