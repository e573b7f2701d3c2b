//! The integration-test binary: conformance cases under every tier, CLI behaviour,
//! diagnostics snapshots, and property tests against the reference evaluator.

mod checkpoints;
mod cli;
mod cli_io;
mod conformance;
mod diagnostics;
mod docs;
mod explain;
mod frontend_hardening;
mod hardening;
mod keyed;
mod keyed_time;
mod library_guide;
mod live;
mod matrix;
mod memory;
mod merged_checkpoints;
mod operator;
mod props;
mod repair;
mod repl;
mod robustness;
mod rows;
mod scale;
mod scale_combos;
mod schema;
mod snapshots;
mod stl;
mod stl_spec;
mod strings;
mod support;
mod time;
mod trace_hardening;
mod triggers;
mod wall_clock;
mod windows;
