//! vigil: a stream runtime-verification monitor engine for DSRV specifications.
//!
//! A specification (DSRV, the Trustworthiness Checker's Lola-style language) declares input
//! streams and defines output streams from them; a [`Monitor`] evaluates it over a trace of
//! rows, one step per row, and after each row every output has a [`Sample`]: a [`Value`],
//! `NoVal` (no event this step) or `Deferred` (⊥, history not yet there).
//!
//! # A tour
//!
//! Parse and check a specification ([`Spec`]; errors are [`Diagnostics`], located and
//! printable), build a monitor on a [`Tier`], and feed it rows — built by name with
//! [`Row`], or as a slice of cells in declaration order. Every row is checked against the
//! declared inputs ([`RowError`]); a runtime fault of the specification (overflow,
//! division by zero) is a [`RuntimeError`] naming the stream and the step, the same on
//! every tier.
//!
//! ```
//! use vigil::{Monitor, Sample, Spec, Tier, Value};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let spec = Spec::parse(
//!     "hot.dsrv",
//!     "in temp: Float\nout avg: Float\nout hot: Bool\n\
//!      aux n: Int\naux sum: Float\n\
//!      n = default(n[1], 0) + 1\nsum = default(sum[1], 0.0) + temp\n\
//!      avg = sum / n\nhot = avg > 30.0",
//! )?;
//! let mut monitor = Monitor::builder(&spec).tier(Tier::Auto).build();
//! for t in [29.0, 31.0, 33.5] {
//!     let row = monitor.row().set("temp", t)?;
//!     let outputs = monitor.step(&row)?;
//!     println!("step {}: {:?}", outputs.step(), outputs.to_vec());
//! }
//! assert_eq!(monitor.output("hot"), Some(Sample::Value(Value::Bool(true))));
//! # Ok(())
//! # }
//! ```
//!
//! - **Batches**: [`RowBatch`] holds many rows in columns and [`Monitor::run_batch`] evaluates
//!   them into an [`OutputBatch`]; on the native-whole tier one native call runs a whole
//!   stretch of rows.
//! - **Keys**: a [`KeyedMonitor`] monitors each value of a key input (`host`, `device`) as a
//!   trace of its own, all keys sharing one compiled plan; each [`Key`] owns only its run
//!   state, and live keys may be bounded (least recently used evicted, optionally to a
//!   callback as a [`Snapshot`]).
//! - **Checkpoints**: [`Monitor::snapshot`] captures a run at a step boundary, independent of
//!   the tier, in a versioned binary or JSON [`Snapshot`]; [`MonitorBuilder::restore`]
//!   continues it on any tier, in this process or another. [`KeyedMonitor::snapshot`] is a
//!   [`KeyedSnapshot`] of every live key.
//! - **Tiers**: every [`Tier`] gives the same outputs and errors bit for bit; `Auto` picks the
//!   fastest available, and [`Monitor::stats`] says what ran where.
//!
//! The engine's stages behind this API (`lang`, `plan`, `fusion`, `exec`, `window`, the
//! canonical interpreter, the reference evaluator) are private; the project's own tests,
//! benchmarks and fuzz targets reach them through the `testing` feature, hidden from this
//! documentation and not part of the API. So is `cli`, the `vigil` binary's command line.
//!
//! The guides are in the repository: `docs/library.md` walks through this API,
//! `docs/language.md` is the language reference (what every construct computes at each step),
//! `docs/engine.md` explains the tiers.
//!
//! # Cargo features
//!
//! Every feature is on by default. A program that only evaluates specifications takes
//! `default-features = false` and gets everything above without the command line's crates,
//! the live transports' clients or timely. `scale` adds `vigil::scale` (keyed monitors as a
//! timely-dataflow fragment); `mqtt` and `redis` the live transports of `vigil::live` (MQTT and
//! Redis Streams sources and sinks); `cli` is the `vigil` binary. `docs/library.md` ("Cargo
//! features") lists what each pulls in.
#![deny(missing_docs)]

mod batch;
pub mod bench;
mod canonical;
mod error;
mod keyed;
pub mod live;
pub mod merge;
mod monitor;
pub mod notice;
pub mod pipeline;
pub mod repl;
mod row;
#[cfg(feature = "scale")]
pub mod scale;
mod snapshot;
pub mod stl;
pub mod time;
pub mod trace;
mod value;

// The command line, for the `vigil` binary: not API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
pub mod explain;

// The engine's stages (see the crate documentation): private, and public only
// to the project's own tests, benches and fuzz targets (the `testing`
// feature), never API.
macro_rules! stages {
    ($($name:ident),*) => {$(
        #[cfg(feature = "testing")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "testing"))]
        mod $name;
    )*};
}
stages!(exec, fusion, lang, plan, window);
// The reference evaluator: the tests' oracle, not part of any run.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod reference;

// The README's Rust example runs as a doctest, so that it cannot drift from the API (its other
// examples run in tests/it/docs.rs).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use batch::{OutputBatch, OutputRow, RowBatch};
pub use error::{ErrorKind, RuntimeError};
pub use exec::TIER_UP_ROWS;
pub use keyed::{KeyedBuildError, KeyedMonitor, KeyedMonitorBuilder};
pub use lang::check::AlertState;
pub use lang::diag::Diagnostics;
pub use lang::types::Type;
pub use monitor::{
    Alert, DEFAULT_MAX_STRING_BYTES, Monitor, MonitorBuilder, Outputs, Spec, Stats, Stepper, Tier,
};
pub use row::{Row, RowError, ScalarRow, StepError, conform, describe};
pub use snapshot::{
    FORMAT_VERSION, Fingerprint, KEYED_FORMAT_VERSION, KEYED_MAGIC, KeyedSnapshot,
    KeyedSnapshotReader, MAGIC, Repair, RepairError, Snapshot, SnapshotError, Started, Why,
};
pub use value::{Key, List, MAX_VALUE_NESTING, Sample, Value};
