//! A property file's verdicts written out, in the checker's text format (its properties'
//! streams in lockstep, `always_x[0] = Map({"time": Int(0), "value": Float(1.0)})`) or as plain
//! columns, one verdict a line: CSV (`property,time,value`, or `lower,upper` for robustness
//! intervals) and JSON lines (`{"property": …, "time": …, "value": …}`). What `vigil run
//! props.mstlo` prints, for an embedder's own sink.

use super::{Emitted, Lockstep, Semantics, StlSpec, Verdict, millis, verdict_value};
use crate::trace;
use crate::value::Value;
use std::io::{self, Write};

/// The form verdicts are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerdictForm {
    /// The checker's text output: each property's verdicts as an output stream of maps, the
    /// properties in lockstep ([`Lockstep`]).
    Text,
    /// `property,time,value` (or `property,time,lower,upper`), every verdict as it is given.
    Csv,
    /// One JSON object per verdict, as it is given.
    Jsonl,
}

/// Writes a property file's verdicts to `sink` in one [`VerdictForm`].
///
/// ```
/// use vigil::stl::{Semantics, StlMonitor, StlSample, StlSpec, Synchronization, VerdictForm, VerdictWriter};
/// use std::time::Duration;
///
/// let spec = StlSpec::parse("p.mstlo", "hot: x > 3\n")?;
/// let mut monitor = StlMonitor::new(&spec, Semantics::default(), Synchronization::default(), &[])?;
/// let mut out = VerdictWriter::new(Vec::new(), &spec, Semantics::default(), VerdictForm::Csv)?;
/// let x = spec.signal("x").expect("a signal of the property");
/// let mut samples = vec![StlSample { signal: x, time: Duration::from_millis(500), value: 5.0 }];
/// out.write(&monitor.step(&mut samples))?;
/// assert_eq!(String::from_utf8(out.finish()?)?, "property,time,value\nhot,500,2.0\n");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct VerdictWriter<W: Write> {
    sink: W,
    form: Form,
    names: Vec<String>,
}

enum Form {
    Text(Lockstep),
    Csv,
    Jsonl,
}

impl<W: Write> VerdictWriter<W> {
    /// A writer of `spec`'s verdicts under `semantics` (which decides the CSV header) to
    /// `sink`; a CSV header is written at once.
    pub fn new(
        sink: W,
        spec: &StlSpec,
        semantics: Semantics,
        form: VerdictForm,
    ) -> io::Result<VerdictWriter<W>> {
        let names: Vec<String> = spec.properties().map(String::from).collect();
        let form = match form {
            VerdictForm::Text => Form::Text(Lockstep::new(names.len())),
            VerdictForm::Csv => Form::Csv,
            VerdictForm::Jsonl => Form::Jsonl,
        };
        let mut out = VerdictWriter { sink, form, names };
        if matches!(out.form, Form::Csv) {
            let header = match semantics {
                Semantics::RobustnessInterval => "property,time,lower,upper\n",
                _ => "property,time,value\n",
            };
            out.sink.write_all(header.as_bytes())?;
        }
        Ok(out)
    }

    /// Writes `verdicts` (a step's, as [`super::StlMonitor::step`] gives them); in the text
    /// form, the lines they complete.
    pub fn write(&mut self, verdicts: &[Emitted]) -> io::Result<()> {
        match &mut self.form {
            Form::Text(lockstep) => {
                for v in verdicts {
                    lockstep.push(v);
                }
                for (p, i, value) in lockstep.ready() {
                    writeln!(self.sink, "{}[{i}] = {value}", self.names[p])?;
                }
            }
            Form::Csv => {
                for v in verdicts {
                    let name = csv_quoted(&self.names[v.property]);
                    write!(self.sink, "{name},{}", millis(v.time))?;
                    match v.value {
                        Verdict::Robustness(r) => cell(&mut self.sink, &Value::Float(r))?,
                        Verdict::Bool(b) => cell(&mut self.sink, &Value::Bool(b))?,
                        Verdict::Interval(i) => {
                            cell(&mut self.sink, &Value::Float(i.lower))?;
                            cell(&mut self.sink, &Value::Float(i.upper))?;
                        }
                    }
                    self.sink.write_all(b"\n")?;
                }
            }
            Form::Jsonl => {
                for v in verdicts {
                    // A map's members are in key order: property, time, value.
                    let line = Value::Map(std::sync::Arc::new(
                        [
                            (
                                "property".into(),
                                Value::Str(self.names[v.property].as_str().into()),
                            ),
                            ("time".into(), Value::Int(millis(v.time))),
                            ("value".into(), verdict_value(v.value)),
                        ]
                        .into_iter()
                        .collect(),
                    ));
                    self.sink.write_all(&trace::json_text(&line))?;
                    self.sink.write_all(b"\n")?;
                }
            }
        }
        Ok(())
    }

    /// Flushes the sink and gives it back.
    pub fn finish(mut self) -> io::Result<W> {
        self.sink.flush()?;
        Ok(self.sink)
    }
}

/// Writes `,` and a value as vigil's CSV writer writes a cell (`2.5`, `-inf`, `true`).
fn cell(sink: &mut impl Write, v: &Value) -> io::Result<()> {
    sink.write_all(b",")?;
    sink.write_all(&trace::cell_text(v))
}

/// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
fn csv_quoted(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stl::{StlMonitor, StlSample, Synchronization};
    use std::time::Duration;

    /// Every form over the same verdicts: the text form gives a line of each property once
    /// both have given a verdict, the columns give each verdict as it comes.
    #[test]
    fn each_form_writes_the_verdicts_as_vigil_run_prints_them() {
        let spec = StlSpec::parse("p.mstlo", "a: x > 1\nb: x < 4\n").expect("parses");
        let x = spec.signal("x").expect("a signal");
        let run = |form| {
            let sem = Semantics::default();
            let mut m =
                StlMonitor::new(&spec, sem, Synchronization::default(), &[]).expect("builds");
            let mut out = VerdictWriter::new(Vec::new(), &spec, sem, form).expect("writes");
            for (t, v) in [(0, 2.0), (1000, 5.0)] {
                let mut s = vec![StlSample {
                    signal: x,
                    time: Duration::from_millis(t),
                    value: v,
                }];
                out.write(&m.step(&mut s)).expect("writes");
            }
            String::from_utf8(out.finish().expect("flushes")).expect("UTF-8")
        };
        let names: Vec<&str> = spec.properties().collect();
        let (a, b) = (names[0], names[1]);
        assert_eq!(
            run(VerdictForm::Csv),
            format!("property,time,value\n{a},0,1.0\n{b},0,2.0\n{a},1000,4.0\n{b},1000,-1.0\n")
        );
        let text = run(VerdictForm::Text);
        assert_eq!(text.lines().count(), 4, "{text}");
        let first = format!("{a}[0] = Map({{\"time\": Int(0), \"value\": Float(1.0)}})\n");
        assert!(text.starts_with(&first), "{text}");
        let jsonl = run(VerdictForm::Jsonl);
        assert_eq!(
            jsonl.lines().next(),
            Some(format!("{{\"property\":\"{a}\",\"time\":0,\"value\":1.0}}").as_str()),
            "{jsonl}"
        );
    }
}
