//! vigil: a stream runtime-verification monitor engine for DSRV specifications.

pub mod lang;
pub mod trace;
pub mod value;

pub use value::{Sample, Value};
