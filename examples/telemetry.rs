//! A telemetry-pipeline example: embed a vigil monitor in a program that reads JSON lines.
//!
//! Run it with `cargo run --example telemetry < examples/temperature.jsonl`. Each line is
//! one step; the program prints a line only when the `alarm` output is true, which is how
//! a pipeline would forward violations and drop everything else.

use std::io::{self, Write};
use vigil::trace::{self, TraceFormat};
use vigil::{Monitor, Sample, Spec, Value};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let source = include_str!("temperature.dsrv");
    let spec = Spec::parse("temperature.dsrv", source)?;
    let mut monitor = Monitor::builder(&spec).build();
    let alarm = monitor
        .output_index("alarm")
        .ok_or("the spec has no `alarm` output")?;
    let stdin = Box::new(io::BufReader::new(io::stdin()));
    let mut reader =
        trace::reader_from_bufread("<stdin>", stdin, TraceFormat::Jsonl, &spec.input_schema())?;
    let mut row = vec![None; monitor.input_count()];
    let mut out = io::stdout().lock();
    while reader.next_row(&mut row)? {
        let outputs = monitor.step(&row)?;
        if outputs.get(alarm) == Sample::Value(Value::Bool(true)) {
            writeln!(
                out,
                "step {}: temperature rising fast while the heater is on",
                outputs.step()
            )?;
            out.flush()?;
        }
    }
    Ok(())
}
