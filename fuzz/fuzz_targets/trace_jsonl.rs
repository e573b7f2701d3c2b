//! Fuzz target: the `jsonl` trace reader on arbitrary bytes: rows or a located error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vigil::trace::TraceFormat;

fuzz_target!(|data: &[u8]| vigil_fuzz::read_all(data, TraceFormat::Jsonl));
