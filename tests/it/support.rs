//! Helpers shared by the integration tests: running a spec over a trace in process.

use std::io::Write;
use std::sync::{Arc, Mutex};
use vigil::trace::{self, OutputFormat, TraceFormat};
use vigil::{Monitor, RuntimeError, Spec, Tier};

/// A `Write` whose bytes can be read back after the writer is dropped.
#[derive(Clone, Default)]
pub struct SharedBuf(pub Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedBuf {
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// Runs `spec` over a trace given as text in `format` on `tier`, and returns
/// the text output and the runtime error, if any.
pub fn run_text(
    spec: &Spec,
    trace_text: &str,
    format: TraceFormat,
    tier: Tier,
) -> (String, Option<RuntimeError>) {
    let mut reader = trace::reader_from_bytes(
        "trace",
        trace_text.as_bytes().to_vec(),
        format,
        &spec.input_schema(),
    )
    .expect("trace opens");
    let mut monitor = Monitor::builder(spec).tier(tier).build();
    let buf = SharedBuf::default();
    let names = monitor
        .output_names()
        .into_iter()
        .map(String::from)
        .collect();
    let mut writer = trace::make_writer(OutputFormat::Text, names, Box::new(buf.clone()));
    let mut row = vec![None; monitor.input_count()];
    let mut error = None;
    while reader.next_row(&mut row).expect("trace is well formed") {
        let step = monitor.steps();
        match monitor.step(&row) {
            Ok(outputs) => writer.write_step(step, &outputs.to_vec()).unwrap(),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    writer.flush().unwrap();
    drop(writer);
    (buf.text(), error)
}
