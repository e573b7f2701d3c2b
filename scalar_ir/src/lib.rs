//! `scalar_ir`: the scalar SSA IR that vigil's fused regions lower to, with its
//! builder, verifier, text form, frame ABI and quickened register interpreter.
//!
//! The crate depends on no other workspace crate and performs no I/O, so both the
//! quickened tier (here) and the Cranelift tier (the `jit` crate) can share it.
//! A program must pass [`verify::verify`] before any tier runs it;
//! [`quick::QuickCode::compile`] enforces that.

pub mod builder;
pub mod frame;
pub mod ir;
pub mod quick;
pub mod text;
pub mod verify;
pub mod window;

pub use quick::QuickCode;

pub use builder::FunctionBuilder;
pub use frame::{BatchBuffers, BatchFrame, Exit, Frame, FrameBuffers, Slot};
pub use ir::*;

pub use text::{ParseError, parse, print};
pub use verify::{VerifierError, VerifierErrors, verify};
