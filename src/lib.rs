//! vigil: a stream runtime-verification monitor engine for DSRV specifications.

pub mod batch;
pub mod canonical;
pub mod cli;
pub mod error;
pub mod exec;
pub mod explain;
pub mod fusion;
pub mod lang;
pub mod monitor;
pub mod plan;
pub mod reference;
pub mod snapshot;
pub mod trace;
pub mod value;

pub use batch::{OutputBatch, RowBatch};
pub use error::RuntimeError;
pub use monitor::{DEFAULT_MAX_STRING_BYTES, Monitor, Outputs, Spec, Stats, Tier};
pub use snapshot::{Fingerprint, Snapshot, SnapshotError};
pub use value::{Sample, Value};
