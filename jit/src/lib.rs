//! `jit`: vigil's Cranelift backend. It compiles a verified [`scalar_ir::Program`] to
//! native code over the shared frame ABI ([`scalar_ir::Frame`]), with exactly the
//! quickened interpreter's semantics, so the two tiers agree bit for bit.
//!
//! # The pipeline
//!
//! A [`JitModule`] owns one `cranelift_jit::JITModule` per compiled *plan*: any number
//! of programs are compiled into it, then it is finalized once into [`NativeCode`],
//! whose `Drop` frees the machine code. Each program goes through these stages, in
//! the order the code reads (`module.rs`, then `translate.rs`):
//!
//! 1. **Declare** ([`JitModule::compile`]): verify the program (no tier runs an
//!    unverified program), declare its two kernels in the module and import the host
//!    helpers it calls (`frem`, `fmin`/`fmax`, `sin`/`cos`/`tan`; see `helpers.rs`).
//! 2. **Translate blocks**: every scalar IR block becomes a Cranelift block with the
//!    same typed parameters, translated in reverse postorder so that definitions come
//!    before uses. Checked arithmetic, guards and explicit exits branch to cold
//!    per-exit stubs.
//! 3. **Emit exits**: each stub materialises its exit word, stores it in
//!    `frame.status` and returns it (no shared exit block: one with thousands of
//!    predecessors made Cranelift quadratic). `return` is the word 0, stored and
//!    returned inline on the hot path.
//! 4. **Define**: Cranelift compiles the function into the module. The
//!    `codegen::Context` and `FunctionBuilderContext` are reused for every function
//!    of the module.
//! 5. **Finalize** ([`JitModule::finalize`]): relocate and make the code executable,
//!    once for the whole module, and hand out typed function pointers.
//!
//! # Long programs
//!
//! Cranelift's code generation grows faster than the function it compiles, so no
//! function holds more than [`MAX_FUNCTION_INSTS`] program instructions: the row
//! kernel of a longer one-block program calls chunks of it in order, passing the
//! values that cross chunks through a scratch area on its stack, and such a program
//! has no batch kernel ([`fits_one_function`], [`row_kernel_chunks`],
//! [`NativeCode::largest_function`]).
//!
//! # Two kernels per program
//!
//! - the **row kernel**, `extern "C" fn(*mut Frame) -> u64`: one run of the program,
//!   as [`scalar_ir::QuickCode::run`];
//! - the **batch kernel**, `extern "C" fn(*mut BatchFrame) -> u64`: the program body
//!   inlined in a native loop over the rows of a [`scalar_ir::BatchFrame`], as
//!   [`scalar_ir::QuickCode::run_batch`].
//!
//! # Safety
//!
//! Compiled code never unwinds: all exits are return values, the host helpers are
//! `extern "C"` float functions that cannot panic, and division is guarded before the
//! hardware could fault. Compilation never panics on a verified program: anything
//! the backend cannot represent is a [`CompileError::Unsupported`] decline.

mod helpers;
mod module;
mod translate;

pub use module::{
    BatchFn, BatchKernel, FuncHandle, JitModule, MAX_FUNCTION_INSTS, NativeCode, NativeFn, RowFn,
    available, compile, compile_for_outputs, fits_one_function, row_kernel_chunks,
};
pub use translate::{Share, carried_rings, carried_sharing, carried_slots};

use scalar_ir::VerifierErrors;
use std::fmt;

/// Why a program (or a module) could not be compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileError {
    /// The program failed verification.
    Verify(VerifierErrors),
    /// The program uses something this backend does not support; the caller keeps it
    /// on the quickened tier.
    Unsupported(String),
    /// Cranelift does not support this host.
    Host(String),
    /// Cranelift reported an error while compiling or finalizing.
    Codegen(String),
    /// A bug in this crate: translation met a state the verifier rules out.
    Internal(String),
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Verify(e) => write!(f, "program failed verification:\n{e}"),
            CompileError::Unsupported(m) => write!(f, "unsupported by the JIT: {m}"),
            CompileError::Host(m) => write!(f, "host not supported by Cranelift: {m}"),
            CompileError::Codegen(m) => write!(f, "code generation failed: {m}"),
            CompileError::Internal(m) => write!(f, "internal JIT error: {m}"),
        }
    }
}

impl std::error::Error for CompileError {}
