//! Writers for the `text`, `csv` and `jsonl` output formats.
//!
//! - `text` is the Trustworthiness Checker's: one line `name[step] = Int(3)`
//!   per printed output and step, in the order of the output names; NoVal is
//!   not printed and ⊥ prints as `Deferred`.
//! - `csv` has a header `step,<names…>` and one row per step: NoVal is an
//!   empty cell, ⊥ is `null`, values are plain literals (`3`, `2.0`, `NaN`,
//!   `true`, raw string text, `()`).
//! - `jsonl` has one object per step, `{"step":0,"z":3}`, keys in the order
//!   of the output names: NoVal keys are omitted, ⊥ is `null`, Unit is the
//!   string `"()"` (so that it differs from ⊥), and non-finite floats are the
//!   strings `"NaN"`, `"inf"` and `"-inf"`, which JSON numbers cannot carry.
//!
//! All writers buffer their output; `flush` pushes it through to the
//! underlying sink, and the CLI calls it after every row on a pipe.

use super::{OutputFormat, OutputWriter};
use crate::value::{Sample, Value};
use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};

/// Makes a writer for `format`. `names` are the printed outputs, in the
/// order the samples passed to `write_step` follow.
pub fn make_writer(
    format: OutputFormat,
    names: Vec<String>,
    out: Box<dyn Write>,
) -> Box<dyn OutputWriter> {
    match format {
        OutputFormat::Text => Box::new(TextWriter {
            names,
            out: BufWriter::new(out),
        }),
        OutputFormat::Csv => Box::new(CsvWriter {
            names,
            // The csv writer keeps its own buffer, so no BufWriter is needed.
            out: csv::Writer::from_writer(out),
            header_written: false,
            cell: String::new(),
        }),
        OutputFormat::Jsonl => Box::new(JsonlWriter {
            // Keys are encoded once; `to_string` of a `&str` cannot fail, and
            // the fallback would still be a valid (if odd) key.
            keys: names
                .iter()
                .map(|n| serde_json::to_string(n).unwrap_or_else(|_| "\"?\"".to_string()))
                .collect(),
            out: BufWriter::new(out),
            line: Vec::new(),
        }),
    }
}

struct TextWriter {
    names: Vec<String>,
    out: BufWriter<Box<dyn Write>>,
}

impl OutputWriter for TextWriter {
    fn write_step(&mut self, step: u64, samples: &[Sample]) -> io::Result<()> {
        debug_assert_eq!(
            samples.len(),
            self.names.len(),
            "one sample per output name"
        );
        // This is the hot path of `vigil run` on large traces (one line per
        // output per step), so lines are assembled as bytes with `itoa`
        // rather than through `fmt`; floats and strings keep `Display`,
        // which gives the Trustworthiness Checker's `{:?}` forms.
        let mut step_buf = itoa::Buffer::new();
        let step = step_buf.format(step).as_bytes();
        let mut num = itoa::Buffer::new();
        for (name, sample) in self.names.iter().zip(samples) {
            let out = &mut self.out;
            match sample {
                Sample::NoVal => continue,
                _ => {
                    out.write_all(name.as_bytes())?;
                    out.write_all(b"[")?;
                    out.write_all(step)?;
                    out.write_all(b"] = ")?;
                }
            }
            match sample {
                Sample::Value(Value::Int(i)) => {
                    out.write_all(b"Int(")?;
                    out.write_all(num.format(*i).as_bytes())?;
                    out.write_all(b")\n")?;
                }
                Sample::Value(Value::Bool(b)) => {
                    out.write_all(if *b {
                        b"Bool(true)\n"
                    } else {
                        b"Bool(false)\n"
                    })?;
                }
                Sample::Deferred => out.write_all(b"Deferred\n")?,
                other => writeln!(out, "{other}")?,
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

struct CsvWriter {
    names: Vec<String>,
    out: csv::Writer<Box<dyn Write>>,
    /// The header is written with the first row (or at the first flush, for
    /// an empty trace) so that making a writer does no I/O.
    header_written: bool,
    cell: String,
}

impl CsvWriter {
    fn write_header(&mut self) -> io::Result<()> {
        if !self.header_written {
            self.header_written = true;
            self.out.write_field("step")?;
            for name in &self.names {
                self.out.write_field(name)?;
            }
            self.out.write_record(None::<&[u8]>)?;
        }
        Ok(())
    }
}

/// A value as a plain literal: the form CSV cells use.
fn write_plain(cell: &mut String, v: &Value) {
    // Writing to a String cannot fail.
    let _ = match v {
        Value::Int(i) => write!(cell, "{i}"),
        Value::Float(x) => write!(cell, "{x:?}"),
        Value::Bool(b) => write!(cell, "{b}"),
        Value::Str(s) => write!(cell, "{s}"),
        Value::Unit => write!(cell, "()"),
    };
}

impl OutputWriter for CsvWriter {
    fn write_step(&mut self, step: u64, samples: &[Sample]) -> io::Result<()> {
        debug_assert_eq!(
            samples.len(),
            self.names.len(),
            "one sample per output name"
        );
        self.write_header()?;
        self.out.write_field(step.to_string())?;
        for sample in samples {
            self.cell.clear();
            match sample {
                Sample::NoVal => {}
                Sample::Deferred => self.cell.push_str("null"),
                Sample::Value(v) => write_plain(&mut self.cell, v),
            }
            self.out.write_field(&self.cell)?;
        }
        self.out.write_record(None::<&[u8]>)?;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_header()?;
        self.out.flush()
    }
}

struct JsonlWriter {
    keys: Vec<String>,
    out: BufWriter<Box<dyn Write>>,
    /// The line being built, reused across steps.
    line: Vec<u8>,
}

impl OutputWriter for JsonlWriter {
    fn write_step(&mut self, step: u64, samples: &[Sample]) -> io::Result<()> {
        debug_assert_eq!(samples.len(), self.keys.len(), "one sample per output name");
        let line = &mut self.line;
        line.clear();
        write!(line, "{{\"step\":{step}")?;
        for (key, sample) in self.keys.iter().zip(samples) {
            let value = match sample {
                Sample::NoVal => continue,
                Sample::Deferred => None,
                Sample::Value(v) => Some(v),
            };
            write!(line, ",{key}:")?;
            match value {
                None => line.extend_from_slice(b"null"),
                Some(Value::Int(i)) => write!(line, "{i}")?,
                Some(Value::Float(x)) if x.is_nan() => line.extend_from_slice(b"\"NaN\""),
                Some(Value::Float(x)) if x.is_infinite() => {
                    line.extend_from_slice(if *x > 0.0 { b"\"inf\"" } else { b"\"-inf\"" })
                }
                // Rust's `{:?}` of a finite float (`2.0`, `1e16`, `-0.0`)
                // is a valid JSON number.
                Some(Value::Float(x)) => write!(line, "{x:?}")?,
                Some(Value::Bool(b)) => write!(line, "{b}")?,
                Some(Value::Str(s)) => serde_json::to_writer(&mut *line, &**s)?,
                Some(Value::Unit) => line.extend_from_slice(b"\"()\""),
            }
        }
        line.extend_from_slice(b"}\n");
        self.out.write_all(line)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A sink the test can inspect after the writer has written into it.
    #[derive(Clone, Default)]
    struct Shared(Rc<RefCell<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn text(&self) -> String {
            String::from_utf8(self.0.borrow().clone()).unwrap()
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
}
