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
pub mod row;
pub mod trace;
pub mod value;

pub use batch::{OutputBatch, OutputRow, RowBatch};
pub use error::RuntimeError;
pub use lang::diag::Diagnostics;
pub use lang::types::Type;
pub use monitor::{DEFAULT_MAX_STRING_BYTES, Monitor, MonitorBuilder, Outputs, Spec, Stats, Tier};
pub use row::{Row, RowError, StepError};
pub use value::{Sample, Value};
