//! Stages 1, 4 and 5: declare, define and finalize; the kernels' prologues and
//! epilogues; and the handles through which compiled code is called.

use crate::CompileError;
use crate::helpers::Helper;
use crate::translate::{
    Carried, CarriedRing, FrameVals, OnReturn, Previous, Share, Translator, carried_rings,
    carried_sharing, carried_slots, cl_type, helpers_used, lane_flags, load_field,
    load_previous_lane, offset, row_times, store_lane_and_tag, store_ring_lane, store_tag,
};
use cranelift_codegen::Context;
use cranelift_codegen::ir::{self as cl, AbiParam, BlockArg, InstBuilder, UserFuncName, types};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, ModuleReloc, default_libcall_names};
use scalar_ir::frame::*;
use scalar_ir::{BatchBuffers, BatchFrame, Decl, Exit, Frame, FrameBuffers, Program, Type, verify};
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A compiled row kernel: runs the program once on a frame and returns the exit word.
pub type RowFn = unsafe extern "C" fn(*mut Frame) -> u64;
/// A compiled batch kernel: runs the program over a batch's rows (see [`BatchFrame`]).
pub type BatchFn = unsafe extern "C" fn(*mut BatchFrame) -> u64;

/// Names one program compiled into a [`JitModule`]; valid for the [`NativeCode`] that
/// module finalizes into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FuncHandle(usize);

/// A `JITModule` whose machine code is freed when it is dropped. Dropping a
/// `JITModule` alone leaks its code (function pointers must stay valid), so every
/// owner of one goes through this.
struct OwnedModule(Option<JITModule>);

impl OwnedModule {
    fn get(&mut self) -> &mut JITModule {
        // Only `Drop` takes the module out, so it is always there before.
        self.0.as_mut().expect("module is present until dropped")
    }
}

impl Drop for OwnedModule {
    fn drop(&mut self) {
        if let Some(m) = self.0.take() {
            // SAFETY: the only pointers into this module's code are held by
            // `NativeFn`s borrowing the `NativeCode` that owns this module, so none
            // outlives it, and none can be running while it is dropped.
            unsafe { m.free_memory() };
        }
    }
}

/// The kernels of one program, declared in the module: its row kernel, and its
/// batch kernel unless it was compiled without one ([`JitModule::compile_row`]).
struct Declared {
    row: FuncId,
    batch: Option<FuncId>,
    decl: Decl,
    /// The output slots its batch kernel was compiled for, if any
    /// ([`JitModule::compile_for_outputs`]).
    outputs: Option<Box<[u32]>>,
    /// The output tags its batch kernel leaves for after its loop
    /// (`tags_after_loop`).
    tags_after: Option<Arc<[u8]>>,
}

/// The host's target with this crate's settings, looked up once per
/// process: every module (and every [`available`] check) clones it. Looking
/// it up, which probes the CPU and parses settings by name, cost about 7 µs,
/// and an engine is built for every new `dynamic` string, so doing it per
/// module was a quarter of such a run.
fn host_isa() -> Result<OwnedTargetIsa, CompileError> {
    static HOST: OnceLock<Result<OwnedTargetIsa, CompileError>> = OnceLock::new();
    HOST.get_or_init(|| {
        let mut flags = settings::builder();
        let set = |flags: &mut settings::Builder, k: &str, v: &str| {
            flags
                .set(k, v)
                .map_err(|e| CompileError::Host(format!("setting {k}={v}: {e}")))
        };
        set(&mut flags, "opt_level", "speed")?;
        // cranelift-jit requires absolute addressing with long-range calls.
        set(&mut flags, "is_pic", "false")?;
        set(&mut flags, "use_colocated_libcalls", "false")?;
        // Compiled code never unwinds, so it needs no unwind tables.
        set(&mut flags, "unwind_info", "false")?;
        // Cranelift's own IR verifier checks this crate's translation in debug builds
        // (the tests); release builds skip it for compile time.
        let verifier = if cfg!(debug_assertions) {
            "true"
        } else {
            "false"
        };
        set(&mut flags, "enable_verifier", verifier)?;
        cranelift_native::builder()
            .map_err(|e| CompileError::Host(e.to_string()))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| CompileError::Host(e.to_string()))
    })
    .clone()
}

/// Whether Cranelift can compile for this host, without making a module.
pub fn available() -> Result<(), CompileError> {
    host_isa().map(|_| ())
}

/// A module being compiled: programs go in with [`JitModule::compile`], native code
/// comes out of [`JitModule::finalize`].
pub struct JitModule {
    module: OwnedModule,
    ctx: Context,
    fctx: FunctionBuilderContext,
    /// Each helper's import, declared on first use.
    helper_ids: [Option<FuncId>; Helper::ALL.len()],
    funcs: Vec<Declared>,
    compile_time: Duration,
    /// The most program instructions translated into one Cranelift
    /// function so far.
    largest_function: usize,
    /// The most instructions of a chunk of a split program:
    /// [`MAX_FUNCTION_INSTS`], but for tests ([`JitModule::split_at`]).
    chunk_insts: usize,
}

impl JitModule {
    /// Creates an empty module for the host.
    pub fn new() -> Result<JitModule, CompileError> {
        let start = Instant::now();
        let isa = host_isa()?;
        let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
        for h in Helper::ALL {
            builder.symbol(h.symbol(), h.address());
        }
        let module = JITModule::new(builder);
        let ctx = module.make_context();
        Ok(JitModule {
            module: OwnedModule(Some(module)),
            ctx,
            fctx: FunctionBuilderContext::new(),
            helper_ids: [None; Helper::ALL.len()],
            funcs: Vec::new(),
            compile_time: start.elapsed(),
            largest_function: 0,
            chunk_insts: MAX_FUNCTION_INSTS,
        })
    }

    /// Splits every one-block program longer than `insts` instructions into
    /// chunks of at most that many (at least one), instead of
    /// [`MAX_FUNCTION_INSTS`]: the property tests split short random
    /// programs at every point this way.
    #[doc(hidden)]
    pub fn split_at(&mut self, insts: usize) {
        self.chunk_insts = insts.max(1);
    }

    /// Time spent so far creating this module and compiling into it.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Number of programs compiled into the module.
    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    /// Whether no program has been compiled into the module.
    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }

    /// Verifies `prog` and compiles its row and batch kernels into the module.
    pub fn compile(&mut self, prog: &Program) -> Result<FuncHandle, CompileError> {
        let start = Instant::now();
        let result = self.compile_inner(prog, None);
        self.compile_time += start.elapsed();
        result
    }

    /// As [`JitModule::compile`], with a batch kernel for these output slots
    /// only: its batches must name exactly `outputs` (the [`BatchFrame`]'s
    /// `out_slots` and `n_out`). Knowing them, a kernel of a one-block
    /// program keeps the environment slots it stores in registers from row
    /// to row and stores them once, when it leaves (at its end, or at a
    /// decline or trap, where it stores exactly what the environment would
    /// hold there); outputs are written from registers too. Its batches
    /// also hold exactly the program's inputs per row (`in_stride`), which
    /// the kernel addresses by a constant.
    pub fn compile_for_outputs(
        &mut self,
        prog: &Program,
        outputs: &[u32],
    ) -> Result<FuncHandle, CompileError> {
        let start = Instant::now();
        let result = self.compile_inner(prog, Some((outputs, MAX_CARRIED_IN_REGISTERS)));
        self.compile_time += start.elapsed();
        result
    }

    /// Verifies `prog` and compiles its row kernel only, for a program that is
    /// never run over batches: half the work of [`JitModule::compile`]. Its
    /// [`NativeFn::batch_kernel`] is `None`.
    pub fn compile_row(&mut self, prog: &Program) -> Result<FuncHandle, CompileError> {
        self.compile_rows(&[prog])
            .pop()
            .expect("one result per program")
    }

    /// Compiles the row kernels of many programs (as [`JitModule::compile_row`]
    /// does each), with Cranelift's code generation, most of the work, spread
    /// over the machine's cores: a plan of thousands of regions builds in a
    /// fraction of the time. Declaring, building each function and defining
    /// its bytes stay on this thread (they need the module). One result per
    /// program, in order; a program that fails does not stop the others.
    pub fn compile_rows(&mut self, progs: &[&Program]) -> Vec<Result<FuncHandle, CompileError>> {
        let start = Instant::now();
        // Stages 1 to 3: declared and built, in order; each program's
        // functions (several for a split program) become jobs.
        let mut jobs: Vec<(FuncId, cl::Function)> = Vec::new();
        let built: Vec<Result<(Declared, std::ops::Range<usize>), CompileError>> = progs
            .iter()
            .map(|p| {
                let (declared, funcs) = self.build_row(p)?;
                let first = jobs.len();
                for (id, func, insts) in funcs {
                    self.largest_function = self.largest_function.max(insts);
                    jobs.push((id, func));
                }
                Ok((declared, first..jobs.len()))
            })
            .collect();
        // Stage 4, code generation: in parallel, each worker on its own
        // contiguous share of the functions, with a context of its own.
        let m = self.module.get();
        let isa = m.isa();
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8);
        // Each function is moved out of `jobs` into a worker's context.
        let generate = |share: &mut [(FuncId, cl::Function)]| {
            let mut ctx = Context::new();
            share
                .iter_mut()
                .map(|(id, func)| {
                    let func = std::mem::replace(func, cl::Function::new());
                    generate(&mut ctx, isa, *id, func)
                })
                .collect::<Vec<_>>()
        };
        let code: Vec<Result<Generated, CompileError>> =
            if workers < 2 || jobs.len() < PARALLEL_FROM {
                generate(&mut jobs)
            } else {
                let share = jobs.len().div_ceil(workers);
                std::thread::scope(|scope| {
                    let mut parts = jobs.chunks_mut(share);
                    let mine = parts.next().unwrap_or(&mut []);
                    let theirs: Vec<_> = parts
                        .map(|part| scope.spawn(move || generate(part)))
                        .collect();
                    let mut all = generate(mine);
                    for t in theirs {
                        // A worker that panicked is an engine bug: re-raise it.
                        all.extend(t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
                    }
                    all
                })
            };
        // Stage 4, defining the bytes, in order.
        let mut code = code.into_iter();
        let results = built
            .into_iter()
            .map(|b| {
                let (declared, range) = b?;
                // Every function of the program is defined (or its error
                // taken), so the next program's code comes next.
                let mine: Vec<_> = code.by_ref().take(range.len()).collect();
                let defined: Result<(), CompileError> =
                    (jobs[range].iter()).zip(mine).try_for_each(|((id, _), c)| {
                        let c = c?;
                        m.define_function_bytes(*id, c.alignment, &c.bytes, &c.relocs)
                            .map(|_| ())
                            .map_err(codegen)
                    });
                defined?;
                self.funcs.push(declared);
                Ok(FuncHandle(self.funcs.len() - 1))
            })
            .collect();
        self.compile_time += start.elapsed();
        results
    }

    /// Stages 1 to 3 of a row kernel: declared, and its Cranelift functions
    /// built (not yet compiled): the kernel itself, or, for a program split
    /// into chunks ([`ChunkPlan`]), each chunk and then the kernel calling
    /// them.
    fn build_row(&mut self, prog: &Program) -> Result<(Declared, Vec<Built>), CompileError> {
        verify(prog).map_err(CompileError::Verify)?;
        let declared = self.declare(prog, false)?;
        let helpers = helpers_used(prog);
        let Some(plan) = ChunkPlan::of(prog, self.chunk_insts) else {
            let built = self.build(declared.row, prog, &helpers, Kernel::Row);
            let func = self.take_func();
            built?;
            let row = declared.row;
            return Ok((declared, vec![(row, func, inst_count(prog))]));
        };
        let m = self.module.get();
        let ptr = m.target_config().pointer_type();
        let mut chunk_sig = m.make_signature();
        chunk_sig.params.push(AbiParam::new(ptr));
        chunk_sig.params.push(AbiParam::new(ptr));
        chunk_sig.returns.push(AbiParam::new(types::I64));
        let chunks = (plan.ranges.iter())
            .map(|_| m.declare_anonymous_function(&chunk_sig).map_err(codegen))
            .collect::<Result<Vec<FuncId>, _>>()?;
        let mut funcs = Vec::with_capacity(chunks.len() + 1);
        for (k, &id) in chunks.iter().enumerate() {
            let built = self.build_fn(id, 2, &helpers, |b, refs| {
                build_chunk(b, prog, refs, &plan, k)
            });
            let func = self.take_func();
            built?;
            funcs.push((id, func, plan.ranges[k].len()));
        }
        let built = self.build_fn(declared.row, 1, &[], |b, _| {
            build_split_row_kernel(b, &chunks, &chunk_sig, plan.lanes)
        });
        let func = self.take_func();
        built?;
        funcs.push((declared.row, func, chunks.len()));
        Ok((declared, funcs))
    }

    /// The function just built in the shared context, leaving the context
    /// clean for the next.
    fn take_func(&mut self) -> cl::Function {
        let func = std::mem::replace(&mut self.ctx.func, cl::Function::new());
        self.module.get().clear_context(&mut self.ctx);
        func
    }

    /// As [`JitModule::compile_for_outputs`], carrying at most
    /// `in_registers` slots in registers (tests use it to reach both ways of
    /// carrying slots with small programs).
    #[doc(hidden)]
    pub fn compile_for_outputs_carrying(
        &mut self,
        prog: &Program,
        outputs: &[u32],
        in_registers: usize,
    ) -> Result<FuncHandle, CompileError> {
        self.compile_inner(prog, Some((outputs, in_registers)))
    }

    fn compile_inner(
        &mut self,
        prog: &Program,
        outputs: Option<(&[u32], usize)>,
    ) -> Result<FuncHandle, CompileError> {
        verify(prog).map_err(CompileError::Verify)?;
        if !fits_one_function(prog) {
            return Err(CompileError::Unsupported(format!(
                "a program of {} instructions has no batch kernel (at most {MAX_FUNCTION_INSTS} \
                 instructions in one function); its row kernel is compile_row's",
                inst_count(prog)
            )));
        }
        self.largest_function = self.largest_function.max(inst_count(prog));
        if let Some(&slot) = outputs.and_then(|(o, _)| o.iter().find(|&&s| s >= prog.decl.env)) {
            return Err(CompileError::Unsupported(format!(
                "output slot {slot} is outside the environment"
            )));
        }
        let mut declared = self.declare(prog, true)?;
        let helpers = helpers_used(prog);
        let tags_after = outputs.and_then(|(o, _)| tags_after_loop(prog, o));
        self.define(declared.row, prog, &helpers, Kernel::Row)?;
        if let Some(id) = declared.batch {
            let batch = Kernel::Batch(outputs, tags_after.is_some());
            self.define(id, prog, &helpers, batch)?;
        }
        declared.outputs = outputs.map(|(o, _)| Box::from(o));
        declared.tags_after = tags_after;
        self.funcs.push(declared);
        Ok(FuncHandle(self.funcs.len() - 1))
    }

    /// Stage 1: declares the program's kernels (anonymous: nothing links to them
    /// by name) and the helpers it calls.
    fn declare(&mut self, prog: &Program, batch: bool) -> Result<Declared, CompileError> {
        let m = self.module.get();
        let ptr = m.target_config().pointer_type();
        let mut sig = m.make_signature();
        sig.params.push(AbiParam::new(ptr));
        sig.returns.push(AbiParam::new(types::I64));
        let row = m.declare_anonymous_function(&sig).map_err(codegen)?;
        let batch = match batch {
            true => Some(m.declare_anonymous_function(&sig).map_err(codegen)?),
            false => None,
        };
        let call_conv = m.isa().default_call_conv();
        for h in helpers_used(prog) {
            if self.helper_ids[h.index()].is_none() {
                let id = m
                    .declare_function(h.symbol(), Linkage::Import, &h.signature(call_conv))
                    .map_err(codegen)?;
                self.helper_ids[h.index()] = Some(id);
            }
        }
        Ok(Declared {
            row,
            batch,
            decl: prog.decl,
            outputs: None,
            tags_after: None,
        })
    }

    /// Stages 2 to 4 for one kernel: builds its Cranelift function in the shared
    /// context (stages 2 and 3 happen inside the kernel builders) and defines it.
    fn define(
        &mut self,
        id: FuncId,
        prog: &Program,
        helpers: &[Helper],
        kernel: Kernel<'_>,
    ) -> Result<(), CompileError> {
        let built = self.build(id, prog, helpers, kernel);
        let m = self.module.get();
        let defined = built.and_then(|()| m.define_function(id, &mut self.ctx).map_err(codegen));
        m.clear_context(&mut self.ctx);
        defined
    }

    /// Stages 2 and 3 for one kernel: builds its Cranelift function in the
    /// shared context.
    fn build(
        &mut self,
        id: FuncId,
        prog: &Program,
        helpers: &[Helper],
        kernel: Kernel<'_>,
    ) -> Result<(), CompileError> {
        self.build_fn(id, 1, helpers, |b, refs| match kernel {
            Kernel::Row => build_row_kernel(b, prog, refs),
            Kernel::Batch(outputs, tags_after) => {
                build_batch_kernel(b, prog, refs, outputs, tags_after)
            }
        })
    }

    /// Builds function `id` in the shared context: `params` pointer
    /// parameters, an `i64` result, `helpers` imported, its body made by
    /// `body`.
    fn build_fn(
        &mut self,
        id: FuncId,
        params: usize,
        helpers: &[Helper],
        body: impl FnOnce(
            &mut FunctionBuilder<'_>,
            [Option<cl::FuncRef>; Helper::ALL.len()],
        ) -> Result<(), CompileError>,
    ) -> Result<(), CompileError> {
        let m = self.module.get();
        m.clear_context(&mut self.ctx);
        let ptr = m.target_config().pointer_type();
        for _ in 0..params {
            self.ctx.func.signature.params.push(AbiParam::new(ptr));
        }
        self.ctx
            .func
            .signature
            .returns
            .push(AbiParam::new(types::I64));
        self.ctx.func.name = UserFuncName::user(0, id.as_u32());
        let mut refs = [None; Helper::ALL.len()];
        for &h in helpers {
            let hid = self.helper_ids[h.index()]
                .ok_or_else(|| CompileError::Internal(format!("{} not declared", h.symbol())))?;
            refs[h.index()] = Some(m.declare_func_in_func(hid, &mut self.ctx.func));
        }
        let mut b = FunctionBuilder::new(&mut self.ctx.func, &mut self.fctx);
        let built = body(&mut b, refs);
        // Seal and finalize even on error, so the builder context is clean for reuse.
        b.seal_all_blocks();
        b.finalize(m.isa().frontend_config());
        built
    }

    /// Stage 5: makes the code of every compiled program executable.
    pub fn finalize(mut self) -> Result<NativeCode, CompileError> {
        let start = Instant::now();
        let m = self.module.get();
        m.finalize_definitions().map_err(codegen)?;
        let funcs = self
            .funcs
            .iter()
            .map(|d| {
                let outputs = d.outputs.clone();
                let row = m.get_finalized_function(d.row);
                let batch = d.batch.map(|id| m.get_finalized_function(id));
                // SAFETY: both were compiled with the signature
                // `(pointer) -> i64` under the host's C calling convention.
                unsafe {
                    Compiled {
                        row: std::mem::transmute::<*const u8, RowFn>(row),
                        batch: batch.map(|b| BatchKernel {
                            f: std::mem::transmute::<*const u8, BatchFn>(b),
                            tags_after: d.tags_after.clone(),
                            in_stride: outputs.as_ref().map(|_| u64::from(d.decl.inputs)),
                        }),
                        decl: d.decl,
                        outputs,
                    }
                }
            })
            .collect();
        let compile_time = self.compile_time + start.elapsed();
        Ok(NativeCode {
            module: OwnedModule(self.module.0.take()),
            funcs,
            compile_time,
            largest_function: self.largest_function,
        })
    }
}

/// Compiles one program into its own module and finalizes it; the program is the
/// code's [`NativeCode::main`] function.
pub fn compile(prog: &Program) -> Result<NativeCode, CompileError> {
    let mut m = JitModule::new()?;
    m.compile(prog)?;
    m.finalize()
}

/// Compiles one program, its batch kernel for `outputs`
/// ([`JitModule::compile_for_outputs`]), into a module of its own.
pub fn compile_for_outputs(prog: &Program, outputs: &[u32]) -> Result<NativeCode, CompileError> {
    let mut m = JitModule::new()?;
    m.compile_for_outputs(prog, outputs)?;
    m.finalize()
}

/// The most instructions of a program that one Cranelift function holds. A
/// longer one-block program (a whole-row program of thousands of streams)
/// is compiled as a row kernel calling chunks of at most this many
/// instructions in order (`ChunkPlan`): Cranelift's code generation
/// (register allocation above all) grew faster than the function, so one
/// function of 400,000 instructions took 30 s where 100 functions of 4,000
/// take a second. Such a program has no batch kernel ([`fits_one_function`]).
pub const MAX_FUNCTION_INSTS: usize = 4096;

/// The most values a chunked row kernel hands from chunk to chunk at once:
/// they live in a scratch area on the kernel's stack, kept under a page so
/// that the frame needs no stack probe. A program needing more is compiled
/// as one function, as before.
const MAX_SCRATCH_LANES: usize = 448;

/// Whether `prog` is compiled as one Cranelift function: it is no longer
/// than [`MAX_FUNCTION_INSTS`] instructions. A longer program has only a
/// row kernel ([`JitModule::compile_row`] splits it); [`JitModule::compile`]
/// and [`JitModule::compile_for_outputs`], which also make a batch kernel
/// (the whole program in one loop), decline it.
pub fn fits_one_function(prog: &Program) -> bool {
    inst_count(prog) <= MAX_FUNCTION_INSTS
}

/// How many functions [`JitModule::compile_row`] compiles `prog`'s row kernel
/// into, besides the kernel itself: the chunks of a split program
/// ([`MAX_FUNCTION_INSTS`] instructions at most each), else 0.
pub fn row_kernel_chunks(prog: &Program) -> usize {
    ChunkPlan::of(prog, MAX_FUNCTION_INSTS).map_or(0, |plan| plan.ranges.len())
}

/// The number of instructions of `prog`.
fn inst_count(prog: &Program) -> usize {
    prog.layout.insts.iter().map(Vec::len).sum()
}

/// How a long one-block program is split into chunks, each a function
/// `fn(*mut Frame, *mut u64) -> u64` that the row kernel calls in order with
/// the same frame and a scratch area of [`ChunkPlan::lanes`] lanes: a value
/// defined in one chunk and used in a later one is stored to its scratch
/// lane at the end of the chunk defining it and loaded at the start of each
/// chunk using it. A chunk that leaves (a decline or a trap) stores its exit
/// word in the frame and returns it, as the row kernel would, and the
/// kernel returns it at once; any other chunk returns 0 and the next runs;
/// the last chunk ends with the program's own terminator. So the chunks
/// run exactly the program's instructions, in its order.
#[derive(Debug)]
pub(crate) struct ChunkPlan {
    /// Each chunk's instructions: a range of the block's.
    pub(crate) ranges: Vec<std::ops::Range<usize>>,
    /// By chunk: the values it loads from the scratch area (value, lane).
    pub(crate) imports: Vec<Vec<(scalar_ir::Value, u32)>>,
    /// By chunk: the values it stores to the scratch area (value, lane).
    pub(crate) exports: Vec<Vec<(scalar_ir::Value, u32)>>,
    /// The scratch lanes the kernel provides.
    pub(crate) lanes: u32,
}

impl ChunkPlan {
    /// The plan for `prog` in chunks of `chunk` instructions, if it is
    /// split: a program of one block longer than `chunk` (what lowering
    /// makes: its branches only leave), needing at most
    /// [`MAX_SCRATCH_LANES`] scratch lanes at once.
    pub(crate) fn of(prog: &Program, chunk: usize) -> Option<ChunkPlan> {
        let [block] = prog.layout.blocks[..] else {
            return None;
        };
        if !prog.params(block).is_empty() {
            return None;
        }
        let insts = prog.layout.block_insts(block);
        if insts.len() <= chunk {
            return None;
        }
        let ranges: Vec<_> = (0..insts.len())
            .step_by(chunk)
            .map(|start| start..(start + chunk).min(insts.len()))
            .collect();
        let chunk_of = |i: usize| i / chunk;
        // Where each value is defined, and the last chunk using it.
        let values = prog.values.len();
        let mut defined = vec![usize::MAX; values];
        let mut last_use = vec![0usize; values];
        let mut imports: Vec<Vec<scalar_ir::Value>> = vec![Vec::new(); ranges.len()];
        for (i, &inst) in insts.iter().enumerate() {
            let c = chunk_of(i);
            let data = prog.inst(inst);
            let mut used: Vec<scalar_ir::Value> =
                data.typed_operands().into_iter().map(|(v, _)| v).collect();
            // A window's operand, whatever its element type.
            if let scalar_ir::InstData::Window { arg, .. } = data {
                used.push(*arg);
            }
            for v in used {
                let d = defined[v.index()];
                if d < c {
                    // Each chunk imports a value once.
                    if last_use[v.index()] != c {
                        imports[c].push(v);
                    }
                    last_use[v.index()] = c;
                }
            }
            if let Some(r) = prog.result(inst) {
                defined[r.index()] = c;
                last_use[r.index()] = c;
            }
        }
        // Scratch lanes: a value holds its lane from the end of the chunk
        // defining it to the start of the last chunk using it, so a lane
        // freed by a chunk's imports serves the same chunk's exports.
        let mut lane_of = vec![u32::MAX; values];
        let mut free: Vec<u32> = Vec::new();
        let mut lanes = 0u32;
        let mut exports: Vec<Vec<(scalar_ir::Value, u32)>> = vec![Vec::new(); ranges.len()];
        let mut imported: Vec<Vec<(scalar_ir::Value, u32)>> = Vec::with_capacity(ranges.len());
        let mut crossing: Vec<Vec<scalar_ir::Value>> = vec![Vec::new(); ranges.len()];
        for import in &imports {
            for &v in import {
                crossing[defined[v.index()]].push(v);
            }
        }
        for c in 0..ranges.len() {
            let mine: Vec<_> = imports[c]
                .iter()
                .map(|&v| (v, lane_of[v.index()]))
                .collect();
            for &(v, lane) in &mine {
                if last_use[v.index()] == c {
                    free.push(lane);
                }
            }
            imported.push(mine);
            crossing[c].sort_unstable_by_key(|v| v.index());
            crossing[c].dedup();
            for &v in &crossing[c] {
                let lane = free.pop().unwrap_or_else(|| {
                    lanes += 1;
                    lanes - 1
                });
                lane_of[v.index()] = lane;
                exports[c].push((v, lane));
            }
        }
        (lanes as usize <= MAX_SCRATCH_LANES).then_some(ChunkPlan {
            ranges,
            imports: imported,
            exports,
            lanes,
        })
    }
}

/// Programs from which `compile_rows` spreads code generation over threads
/// (below it, starting them costs more than it saves).
const PARALLEL_FROM: usize = 64;

/// A Cranelift function built for the module, not yet compiled: its id,
/// the function, and how many program instructions went into it.
type Built = (FuncId, cl::Function, usize);

/// A kernel's machine code, generated apart from the module.
struct Generated {
    bytes: Vec<u8>,
    alignment: u64,
    relocs: Vec<ModuleReloc>,
}

/// Stage 4's code generation for one built function, in `ctx` (any
/// thread's): what `Module::define_function` does before it copies the
/// bytes into the module.
fn generate(
    ctx: &mut Context,
    isa: &dyn cranelift_codegen::isa::TargetIsa,
    id: FuncId,
    func: cl::Function,
) -> Result<Generated, CompileError> {
    ctx.clear();
    ctx.func = func;
    ctx.compile(isa, &mut Default::default())
        .map_err(|e| CompileError::Codegen(format!("{:?}", e.inner)))?;
    let compiled = ctx
        .compiled_code()
        .ok_or_else(|| CompileError::Internal("compiled code missing after compile".into()))?;
    let alignment = u64::from(compiled.buffer.alignment);
    let bytes = compiled.code_buffer().to_vec();
    let relocs = compiled
        .buffer
        .relocs()
        .iter()
        .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, id))
        .collect();
    Ok(Generated {
        bytes,
        alignment,
        relocs,
    })
}

fn codegen(e: impl std::fmt::Display) -> CompileError {
    CompileError::Codegen(e.to_string())
}

#[derive(Clone, Copy)]
enum Kernel<'a> {
    Row,
    /// The batch kernel, for these output slots if they are known (with
    /// the most slots it may carry in registers), and whether it leaves the
    /// output tags for after its loop (`tags_after_loop`).
    Batch(Option<(&'a [u32], usize)>, bool),
}

fn store_field(b: &mut FunctionBuilder<'_>, v: cl::Value, base: cl::Value, off: usize) {
    b.ins().store(lane_flags(), v, base, off as i32);
}

/// A row kernel's view of `frame`: its pointers and step, each loaded
/// where first used (`load_field`).
fn frame_vals(b: &mut FunctionBuilder<'_>, frame: cl::Value) -> FrameVals {
    FrameVals {
        inputs: load_field(b, frame, FRAME_INPUTS, true),
        input_tags: load_field(b, frame, FRAME_INPUT_TAGS, true),
        env: load_field(b, frame, FRAME_ENV, true),
        env_tags: load_field(b, frame, FRAME_ENV_TAGS, true),
        state: load_field(b, frame, FRAME_STATE, true),
        step: load_field(b, frame, FRAME_STEP, true),
        windows: load_field(b, frame, FRAME_WINDOWS, true),
        held_tags: load_field(b, frame, FRAME_HELD_TAGS, true),
        time: load_field(b, frame, FRAME_TIME, true),
        timed: load_field(b, frame, FRAME_TIMED, true),
        reload_from: None,
    }
}

/// The row kernel: load the frame's pointers, run the body, and leave through the
/// exit block, which records the exit word in `frame.status` and returns it.
fn build_row_kernel(
    b: &mut FunctionBuilder<'_>,
    prog: &Program,
    helpers: [Option<cl::FuncRef>; Helper::ALL.len()],
) -> Result<(), CompileError> {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let frame = b.block_params(entry)[0];
    let fv = frame_vals(b, frame);
    let mut t = Translator::new(prog, b, fv, helpers, OnReturn::Return { frame });
    t.enter()?;
    t.translate_blocks()?;
    t.finish(|b, word| {
        store_field(b, word, frame, FRAME_STATUS);
        b.ins().return_(&[word]);
    });
    Ok(())
}

/// One chunk of a split row kernel (see [`ChunkPlan`]):
/// `fn(frame, scratch) -> u64`, running instructions `plan.ranges[k]` of the
/// program's block.
fn build_chunk(
    b: &mut FunctionBuilder<'_>,
    prog: &Program,
    helpers: [Option<cl::FuncRef>; Helper::ALL.len()],
    plan: &ChunkPlan,
    k: usize,
) -> Result<(), CompileError> {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (frame, scratch) = (b.block_params(entry)[0], b.block_params(entry)[1]);
    let fv = frame_vals(b, frame);
    let mut t = Translator::new(prog, b, fv, helpers, OnReturn::Return { frame });
    for &(v, lane) in &plan.imports[k] {
        t.import(v, scratch, lane)?;
    }
    let block = prog
        .entry()
        .ok_or_else(|| CompileError::Internal("a split program has a block".into()))?;
    t.translate_range(&prog.layout.block_insts(block)[plan.ranges[k].clone()])?;
    if k + 1 < plan.ranges.len() {
        for &(v, lane) in &plan.exports[k] {
            t.export(v, scratch, lane)?;
        }
        t.next_chunk();
    }
    t.finish(|b, word| {
        store_field(b, word, frame, FRAME_STATUS);
        b.ins().return_(&[word]);
    });
    Ok(())
}

/// The row kernel of a split program: calls each chunk with the frame and
/// its scratch area, returning the first word that is not 0 (a chunk
/// that left has stored it in the frame already) or the last chunk's.
/// The chunks are called through their absolute addresses, wherever the
/// module placed them.
fn build_split_row_kernel(
    b: &mut FunctionBuilder<'_>,
    chunks: &[FuncId],
    chunk_sig: &cl::Signature,
    lanes: u32,
) -> Result<(), CompileError> {
    let ptr = chunk_sig.params[0].value_type;
    let sig = b.import_signature(chunk_sig.clone());
    let calls: Vec<cl::FuncRef> = chunks
        .iter()
        .map(|id| {
            let name = b.func.declare_imported_user_function(cl::UserExternalName {
                namespace: 0,
                index: id.as_u32(),
            });
            b.import_function(cl::ExtFuncData {
                name: cl::ExternalName::user(name),
                signature: sig,
                colocated: false,
                patchable: false,
            })
        })
        .collect();
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let frame = b.block_params(entry)[0];
    let bytes = lanes.max(1) * 8;
    let slot = b.create_sized_stack_slot(cl::StackSlotData::new(
        cl::StackSlotKind::ExplicitSlot,
        bytes,
        3,
    ));
    let scratch = b.ins().stack_addr(ptr, slot, 0);
    let left = b.create_block();
    b.set_cold_block(left);
    let word = b.append_block_param(left, types::I64);
    let Some((last, first)) = calls.split_last() else {
        return Err(CompileError::Internal("a split program has chunks".into()));
    };
    for &f in first {
        let call = b.ins().call(f, &[frame, scratch]);
        let w = b.inst_results(call)[0];
        let next = b.create_block();
        b.ins().brif(w, left, &[BlockArg::Value(w)], next, &[]);
        b.switch_to_block(next);
    }
    let call = b.ins().call(*last, &[frame, scratch]);
    let w = b.inst_results(call)[0];
    b.ins().return_(&[w]);
    b.switch_to_block(left);
    b.ins().return_(&[word]);
    Ok(())
}

/// The batch kernel: the body inlined in a loop over the rows (contract: see
/// [`BatchFrame`]). Loop-carried values live in block parameters, and as few
/// as possible, because the register allocator spills what does not fit and
/// every row then waits on a store and a reload:
/// - the row number, from which the row's input and output lanes and tags
///   are addressed, and the step computed (the first row's plus it);
/// - when the output slots are known (`outputs`), the environment slots the
///   kernel keeps in registers (`translate::carried_slots`), stored only
///   when it leaves, with the outputs written from registers; slots holding
///   what another slot or a carried ring holds share its parameter
///   (`translate::carried_sharing`);
/// - the carried rings (`translate::carried_rings`).
///
/// The environment, state and step pointers are used only when a row
/// leaves early or the batch ends, so those paths load them from the frame
/// again instead of keeping them in registers across the loop.
fn build_batch_kernel(
    b: &mut FunctionBuilder<'_>,
    prog: &Program,
    helpers: [Option<cl::FuncRef>; Helper::ALL.len()],
    outputs: Option<(&[u32], usize)>,
    tags_after: bool,
) -> Result<(), CompileError> {
    let i64t = types::I64;
    let (outputs, max_in_registers) = match outputs {
        Some((o, n)) => (Some(o), n),
        None => (None, 0),
    };
    let (carried, rings) = match outputs {
        Some(_) => (carried_slots(prog), carried_rings(prog)),
        None => (Vec::new(), Vec::new()),
    };
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let bf = b.block_params(entry)[0];
    // Fields the kernel never writes are read-only; the step, status, done and input
    // pointers are written, so they are not.
    let env = load_field(b, bf, FRAME_ENV, true);
    let env_tags = load_field(b, bf, FRAME_ENV_TAGS, true);
    let state = load_field(b, bf, FRAME_STATE, true);
    let windows = load_field(b, bf, FRAME_WINDOWS, true);
    let held_tags = load_field(b, bf, FRAME_HELD_TAGS, true);
    let step0 = load_field(b, bf, FRAME_STEP, false);
    let rows = load_field(b, bf, BATCH_ROWS, true);
    let in_lanes = load_field(b, bf, BATCH_IN_LANES, true);
    let in_tags = load_field(b, bf, BATCH_IN_TAGS, true);
    // A kernel for known outputs also knows its input stride: the
    // program's inputs (`BatchKernel::run` checks each batch has it), so a
    // row's inputs are addressed without a multiplication by a variable.
    let in_stride = match outputs {
        Some(_) => None,
        None => Some(load_field(b, bf, BATCH_IN_STRIDE, true)),
    };
    let out_lanes = load_field(b, bf, BATCH_OUT_LANES, true);
    let out_tags = load_field(b, bf, BATCH_OUT_TAGS, true);
    let out_slots = load_field(b, bf, BATCH_OUT_SLOTS, true);
    let n_out = load_field(b, bf, BATCH_N_OUT, true);
    let zero = b.ins().iconst(i64t, 0);
    // Where each carried slot's previous-row value waits (`Previous`): an
    // output's in the output batch, which every row writes anyway; a slot
    // holding what another holds or a ring pushes, where that one's does;
    // the others in registers of their own if they are few, else (they
    // would spill) in the environment, stored on every row.
    let shares = carried_sharing(prog, &carried, &rings);
    let column =
        |slot: u32| (outputs.unwrap_or_default().iter().position(|&s| s == slot)).map(|c| c as u32);
    let own_count = (carried.iter().zip(&shares))
        .filter(|&(&(slot, _), share)| *share == Share::Own && column(slot).is_none())
        .count();
    let in_registers = own_count <= max_in_registers;

    // head(r, own carried slots…, carried rings…): the row number is the
    // only cursor (the inputs and outputs of row `r` are addressed from it),
    // and slots that hold what another slot or a ring holds share its
    // parameter (`carried_sharing`), so few values live across rows.
    let head = b.create_block();
    let row_done = b.create_block();
    let copy = b.create_block();
    let copy_one = b.create_block();
    let next_row = b.create_block();
    let all_done = b.create_block();
    let r = b.append_block_param(head, i64t);
    let own: Vec<Option<cl::Value>> = (carried.iter().zip(&shares))
        .map(|(&(slot, ty), share)| {
            let register = *share == Share::Own && column(slot).is_none() && in_registers;
            register.then(|| b.append_block_param(head, cl_type(ty)))
        })
        .collect();
    // Carried rings follow the slots: their lanes as the state holds them
    // before the first row, each row's push after.
    let ring_params: Vec<cl::Value> = rings
        .iter()
        .map(|&(_, ty)| b.append_block_param(head, cl_type(ty)))
        .collect();
    let previous: Vec<(u32, Type, Previous)> = (carried.iter().enumerate())
        .map(|(i, &(slot, ty))| {
            // (`Share::Slot` names an earlier slot, whose own is decided.)
            let holder = match shares[i] {
                Share::Slot(j) => j,
                _ => i,
            };
            let previous = match (column(slot), column(carried[holder].0), shares[i]) {
                (Some(c), ..) | (None, Some(c), _) => Previous::Output(c),
                (None, None, Share::Ring(k)) => Previous::Register(ring_params[k]),
                (None, None, Share::Input(k)) => Previous::Input(k),
                (None, None, _) => own[holder].map_or(Previous::Memory, Previous::Register),
            };
            (slot, ty, previous)
        })
        .collect();
    let j = b.append_block_param(copy, i64t);
    let args =
        |vs: &[cl::Value]| -> Vec<BlockArg> { vs.iter().map(|&v| BlockArg::Value(v)).collect() };
    // Before the first row completes, a carried slot's "previous row" value
    // is never stored (the environment holds it): any value will do.
    let mut first = vec![zero];
    for (&(_, ty), p) in carried.iter().zip(&own) {
        if p.is_some() {
            first.push(match ty {
                Type::F64 => b.ins().f64const(0.0),
                Type::I64 | Type::B1 => b.ins().iconst(i64t, 0),
            });
        }
    }
    for &(lane, ty) in &rings {
        let v = b
            .ins()
            .load(cl_type(ty), lane_flags(), state, offset(lane, 8)?);
        first.push(v);
    }
    // The loop is rotated: the test for more rows closes each row (one
    // branch a row), so `all_done` is entered from here (no rows) and from
    // the last row, with the loop's values as its parameters.
    let head_params = b.func.dfg.block_params(head).to_vec();
    let done_params: Vec<cl::Value> = (head_params.iter())
        .map(|&p| {
            let ty = b.func.dfg.value_type(p);
            b.append_block_param(all_done, ty)
        })
        .collect();
    b.ins()
        .brif(rows, head, &args(&first), all_done, &args(&first));

    // One row: the body, reading the row's inputs from row `r` (the
    // frame's input pointers are not kept up to date: nothing reads them).
    b.switch_to_block(head);
    let step = b.ins().iadd(step0, r);
    let at = match in_stride {
        Some(stride) => b.ins().imul(r, stride),
        None => row_times(b, r, prog.decl.inputs),
    };
    let at8 = b.ins().ishl_imm_u(at, 3);
    let inp = b.ins().iadd(in_lanes, at8);
    let itag = b.ins().iadd(in_tags, at);
    // Row `r`'s output lanes and tags (a kernel for known outputs has
    // exactly that many; see `NativeFn::run_batch_frame`).
    let out_at = match outputs {
        Some(o) => row_times(b, r, o.len() as u32),
        None => b.ins().imul(r, n_out),
    };
    let out_at8 = b.ins().ishl_imm_u(out_at, 3);
    let out_row = b.ins().iadd(out_lanes, out_at8);
    let fv = FrameVals {
        inputs: inp,
        input_tags: itag,
        env,
        env_tags,
        state,
        step,
        windows,
        held_tags,
        // A batch's rows have no time: each reads its step's.
        time: b.ins().iconst(types::I64, 0),
        timed: b.ins().iconst(types::I64, 0),
        reload_from: Some(bf),
    };
    let mut t = Translator::new(prog, b, fv, helpers, OnReturn::Jump(row_done));
    if !carried.is_empty() || !rings.is_empty() {
        let carried_rings = (rings.iter().zip(&ring_params))
            .map(|(&(lane, _), &v)| CarriedRing::new(lane, v))
            .collect();
        let columns = outputs.map_or(0, |o| o.len() as u32);
        let inputs = prog.decl.inputs;
        let mut c = Carried::new(previous.clone(), (columns, inputs), carried_rings, r);
        if let Some(outputs) = outputs {
            c.write_outputs(outputs, out_row);
        }
        t.carry(c);
    }
    t.enter()?;
    t.translate_blocks()?;
    let now = match carried.is_empty() {
        true => Vec::new(),
        false => t.carried_now()?,
    };
    // The values the loop carries to the next row.
    let mut carry_on: Vec<cl::Value> = (now.iter().zip(&own))
        .filter_map(|(&v, p)| p.map(|_| v))
        .collect();
    carry_on.extend(t.carried_rings_now());
    // A row declined or trapped: `r` rows returned, and the step stays at this row's.
    t.finish(|b, word| {
        // The frame's step is still the first row's (the loop keeps it
        // nowhere else; see `FrameVals::reload_from`).
        let step = load_field(b, bf, FRAME_STEP, false);
        let step = b.ins().iadd(step, r);
        store_field(b, word, bf, FRAME_STATUS);
        store_field(b, step, bf, FRAME_STEP);
        store_field(b, r, bf, BATCH_DONE);
        b.ins().return_(&[word]);
    });

    b.switch_to_block(row_done);
    let (olane, otag) = (out_row, b.ins().iadd(out_tags, out_at));
    match outputs {
        // The row returned: write each output the body has not (it wrote
        // the carried ones as it stored them: `Carried::write_outputs`),
        // from the environment.
        Some(outputs) if !carried.is_empty() => {
            let flags = lane_flags();
            for (k, &slot) in outputs.iter().enumerate() {
                let (lane_off, tag_off) = (offset(k as u32, 8)?, offset(k as u32, 1)?);
                match carried.iter().position(|&(s, _)| s == slot) {
                    Some(i) => {
                        // With every output carried, `BatchKernel::run`
                        // writes the tags.
                        if !tags_after {
                            let tag = b.ins().iconst(types::I8, tag_of(carried[i].1) as i64);
                            b.ins().store(flags, tag, otag, tag_off);
                        }
                    }
                    None => {
                        let lane = b.ins().load(i64t, flags, env, offset(slot, 8)?);
                        b.ins().store(flags, lane, olane, lane_off);
                        let tag = b.ins().load(types::I8, flags, env_tags, offset(slot, 1)?);
                        b.ins().store(flags, tag, otag, tag_off);
                    }
                }
            }
            b.ins().jump(next_row, &[]);
        }
        // The row returned: copy the requested environment slots to the output row.
        _ => {
            b.ins().jump(copy, &args(&[zero]));
        }
    }
    b.switch_to_block(copy);
    let more_cols = b
        .ins()
        .icmp(cl::condcodes::IntCC::UnsignedLessThan, j, n_out);
    b.ins().brif(more_cols, copy_one, &[], next_row, &[]);
    b.switch_to_block(copy_one);
    let flags = lane_flags();
    let j4 = b.ins().ishl_imm_u(j, 2);
    let slot_addr = b.ins().iadd(out_slots, j4);
    let slot = b.ins().uload32(flags, slot_addr, 0);
    let slot8 = b.ins().ishl_imm_u(slot, 3);
    let src = b.ins().iadd(env, slot8);
    let lane = b.ins().load(i64t, flags, src, 0);
    let j8 = b.ins().ishl_imm_u(j, 3);
    let dst = b.ins().iadd(olane, j8);
    b.ins().store(flags, lane, dst, 0);
    let tsrc = b.ins().iadd(env_tags, slot);
    let tag = b.ins().load(types::I8, flags, tsrc, 0);
    let tdst = b.ins().iadd(otag, j);
    b.ins().store(flags, tag, tdst, 0);
    let j1 = b.ins().iadd_imm_u(j, 1);
    b.ins().jump(copy, &args(&[j1]));

    // Advance every cursor by one row.
    b.switch_to_block(next_row);
    let r1 = b.ins().iadd_imm_u(r, 1);
    let mut next = vec![r1];
    next.extend(&carry_on);
    let more = b
        .ins()
        .icmp(cl::condcodes::IntCC::UnsignedLessThan, r1, rows);
    b.ins()
        .brif(more, head, &args(&next), all_done, &args(&next));

    // Every row returned: the carried slots hold the last row's values (none
    // if the batch was empty), the carried rings the last push (the state's
    // own if it was).
    b.switch_to_block(all_done);
    // The loop's values here: what the head's parameters held for the row
    // that would have come next.
    let done = |v: cl::Value| {
        let i = head_params.iter().position(|&p| p == v);
        i.map_or(v, |i| done_params[i])
    };
    let r = done(r);
    // As in the stubs, the pointers are loaded again rather than kept
    // live across the loop.
    let (env, env_tags, state, step0) = (
        load_field(b, bf, FRAME_ENV, true),
        load_field(b, bf, FRAME_ENV_TAGS, true),
        load_field(b, bf, FRAME_STATE, true),
        load_field(b, bf, FRAME_STEP, false),
    );
    for (&(lane, _), &v) in rings.iter().zip(&ring_params) {
        store_ring_lane(b, state, lane, done(v));
    }
    if !carried.is_empty() {
        let stores = b.create_block();
        let fin = b.create_block();
        b.ins().brif(r, stores, &[], fin, &[]);
        b.switch_to_block(stores);
        let columns = outputs.map_or(0, |o| o.len() as u32);
        for &(slot, ty, v) in &previous {
            match v {
                Previous::Register(v) => store_lane_and_tag(b, env, env_tags, slot, ty, done(v)),
                Previous::Output(c) => {
                    // The last row's (`r` rows returned).
                    let v = load_previous_lane(b, out_lanes, r, columns, c, ty);
                    store_lane_and_tag(b, env, env_tags, slot, ty, v);
                }
                Previous::Input(k) => {
                    let inputs = prog.decl.inputs;
                    let v = load_previous_lane(b, in_lanes, r, inputs, k, ty);
                    store_lane_and_tag(b, env, env_tags, slot, ty, v);
                }
                Previous::Memory => store_tag(b, env_tags, slot, ty),
            }
        }
        b.ins().jump(fin, &[]);
        b.switch_to_block(fin);
    }
    let step = b.ins().iadd(step0, r);
    store_field(b, step, bf, FRAME_STEP);
    store_field(b, rows, bf, BATCH_DONE);
    store_field(b, zero, bf, FRAME_STATUS);
    b.ins().return_(&[zero]);

    Ok(())
}

/// The output tags (one per output, in order) that the batch kernel for
/// known `outputs` does not write on every row, when there are such: when
/// every output is a carried slot (`carried_slots`), each column's tag is
/// its type's on every row that returns, so [`BatchKernel::run`] writes the
/// tags of the rows done after the loop, at memory speed; byte stores in
/// the loop took a store slot per output and row (and a register for the
/// tag column).
fn tags_after_loop(prog: &Program, outputs: &[u32]) -> Option<Arc<[u8]>> {
    let carried = carried_slots(prog);
    (outputs.iter())
        .map(|&slot| {
            let &(_, ty) = carried.iter().find(|&&(s, _)| s == slot)?;
            Some(tag_of(ty))
        })
        .collect()
}

/// The most slots a batch kernel carries in registers from row to row (see
/// `translate::Carried`): beyond it, the register allocator spills them.
const MAX_CARRIED_IN_REGISTERS: usize = 8;

/// One finalized program.
#[derive(Clone)]
struct Compiled {
    row: RowFn,
    batch: Option<BatchKernel>,
    decl: Decl,
    outputs: Option<Box<[u32]>>,
}

/// The finalized native code of a module. Dropping it frees the code.
pub struct NativeCode {
    module: OwnedModule,
    funcs: Vec<Compiled>,
    compile_time: Duration,
    largest_function: usize,
}

impl NativeCode {
    /// The compiled program `h`.
    ///
    /// # Panics
    /// Panics if `h` comes from another module with more programs.
    pub fn func(&self, h: FuncHandle) -> NativeFn<'_> {
        let c = &self.funcs[h.0];
        NativeFn {
            row: c.row,
            batch: c.batch.as_ref(),
            decl: c.decl,
            outputs: c.outputs.as_deref(),
            _code: PhantomData,
        }
    }

    /// The first program compiled into the module (the only one, for [`compile`]).
    ///
    /// # Panics
    /// Panics if the module holds no program.
    pub fn main(&self) -> NativeFn<'_> {
        self.func(FuncHandle(0))
    }

    /// Number of programs in the module.
    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    /// Whether the module holds no program.
    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }

    /// Total compile time: module creation, every program, and finalization.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// The most program instructions that went into one Cranelift function
    /// of this code: at most [`MAX_FUNCTION_INSTS`] for programs compiled by
    /// [`JitModule::compile_row`] or [`JitModule::compile_rows`], whatever
    /// their length (a longer program is split into chunks).
    pub fn largest_function(&self) -> usize {
        self.largest_function
    }
}

impl std::fmt::Debug for NativeCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeCode")
            .field("funcs", &self.funcs.len())
            .field("compile_time", &self.compile_time)
            .field("module", &self.module.0.is_some())
            .finish()
    }
}

/// A batch kernel, the output tags it leaves for after its loop
/// (`tags_after_loop`), and the input stride it was compiled for (a kernel
/// for known outputs addresses rows by the program's inputs). Valid only
/// while the [`NativeCode`] it came from lives.
#[derive(Clone)]
pub struct BatchKernel {
    f: BatchFn,
    tags_after: Option<Arc<[u8]>>,
    in_stride: Option<u64>,
}

impl BatchKernel {
    /// Runs the kernel over a raw batch frame; returns the exit word of the
    /// row that stopped the batch (0 if every row returned), also stored in
    /// `frame.status`. The output tags of every row done are written when
    /// it returns, whether by the loop or after it.
    ///
    /// # Safety
    /// As [`NativeFn::run_batch_frame`]; and the [`NativeCode`] the kernel
    /// came from must still live.
    ///
    /// # Panics
    /// Panics if the kernel was compiled for known outputs and the batch's
    /// `in_stride` is not the program's inputs.
    #[inline]
    pub unsafe fn run(&self, batch: *mut BatchFrame) -> u64 {
        if let Some(stride) = self.in_stride {
            // SAFETY: the caller's contract makes `batch` valid to read.
            let given = unsafe { (*batch).in_stride };
            assert_eq!(
                given, stride,
                "a batch kernel for known outputs runs batches of its program's inputs per row"
            );
        }
        // SAFETY: forwarded from the caller.
        let word = unsafe { (self.f)(batch) };
        if let Some(tags) = &self.tags_after {
            // SAFETY: the caller's contract makes `out_tags` valid for
            // `rows * n_out` tags, `n_out` is `tags.len()` (the outputs the
            // kernel was compiled for), and the kernel did at most `rows`.
            unsafe {
                let b = &*batch;
                assert!(
                    b.done <= b.rows,
                    "engine bug: a batch kernel did more rows than asked"
                );
                let done = b.done as usize * tags.len();
                fill_tags(std::slice::from_raw_parts_mut(b.out_tags, done), tags);
            }
        }
        word
    }
}

/// Writes `tags` (one per output column) on every row of `out`, row-major:
/// the first row, then copies of what is written, doubling.
fn fill_tags(out: &mut [u8], tags: &[u8]) {
    match tags {
        [] => {}
        &[tag] => out.fill(tag),
        _ => {
            let first = out.len().min(tags.len());
            out[..first].copy_from_slice(&tags[..first]);
            let mut filled = first;
            while filled < out.len() {
                let n = filled.min(out.len() - filled);
                out.copy_within(..n, filled);
                filled += n;
            }
        }
    }
}

/// A callable compiled program, borrowing the [`NativeCode`] that owns its machine code.
#[derive(Clone, Copy)]
pub struct NativeFn<'a> {
    row: RowFn,
    batch: Option<&'a BatchKernel>,
    decl: Decl,
    /// The output slots its batch kernel was compiled for, if any: its
    /// batches must name exactly these.
    outputs: Option<&'a [u32]>,
    _code: PhantomData<&'a NativeCode>,
}

impl NativeFn<'_> {
    /// The frame sizes the program declared.
    pub fn decl(&self) -> &Decl {
        &self.decl
    }

    /// The raw row kernel. Calling it is subject to [`NativeFn::run_frame`]'s contract
    /// and valid only while the [`NativeCode`] lives.
    pub fn row_fn(&self) -> RowFn {
        self.row
    }

    /// The batch kernel (`None` for a program compiled with
    /// [`JitModule::compile_row`]), valid only while the [`NativeCode`]
    /// lives (see [`BatchKernel::run`]).
    pub fn batch_kernel(&self) -> Option<BatchKernel> {
        self.batch.cloned()
    }

    /// Runs the program on owned frame buffers and records the exit in `fb.status`
    /// (and `fb`'s environment and state), exactly as [`scalar_ir::QuickCode::run`].
    ///
    /// # Panics
    /// Panics if the buffers are smaller than the program's declarations.
    #[inline]
    pub fn run(&self, fb: &mut FrameBuffers) -> Exit {
        assert!(
            fb.fits(&self.decl),
            "frame buffers are smaller than the program declares"
        );
        let mut frame = fb.frame();
        // SAFETY: `frame` points into buffers that fit the program's declarations.
        let word = unsafe { self.run_frame(&mut frame) };
        fb.status = frame.status;
        decode(word)
    }

    /// Runs the program on a raw frame; returns the exit word, also stored in
    /// `frame.status`.
    ///
    /// # Safety
    /// Every pointer in `*frame` must be valid (and the mutable ones exclusive) for as
    /// many lanes and tags as the program declares.
    #[inline]
    pub unsafe fn run_frame(&self, frame: *mut Frame) -> u64 {
        // SAFETY: forwarded from the caller.
        unsafe { (self.row)(frame) }
    }

    /// Runs the program over a batch, exactly as [`scalar_ir::QuickCode::run_batch`]:
    /// `fb` supplies the environment, state and step shared by the rows.
    ///
    /// # Panics
    /// Panics unless `batch.fits(fb, decl)` holds.
    #[inline]
    pub fn run_batch(&self, fb: &mut FrameBuffers, batch: &mut BatchBuffers) -> Exit {
        assert!(
            batch.fits(fb, &self.decl),
            "batch or frame buffers are smaller than the program declares"
        );
        if let Some(outputs) = self.outputs {
            assert_eq!(
                &batch.out_slots[..],
                outputs,
                "the batch names other outputs than the kernel was compiled for"
            );
        }
        let mut bf = batch.frame(fb);
        // SAFETY: `bf` was built from buffers that fit, as `fits` checked.
        let word = unsafe { self.run_batch_frame(&mut bf) };
        batch.finish(&bf, fb);
        decode(word)
    }

    /// Runs the program over a raw batch frame; returns the exit word of the row that
    /// stopped the batch (0 if every row returned), also stored in `frame.status`.
    ///
    /// # Safety
    /// `*batch` must satisfy the [`BatchFrame`] safety contract for this program
    /// and, if it was compiled for output slots ([`JitModule::compile_for_outputs`]),
    /// name exactly those (`out_slots`, `n_out`).
    ///
    /// # Panics
    /// Panics if the program was compiled without its batch kernel
    /// ([`JitModule::compile_row`]).
    #[inline]
    pub unsafe fn run_batch_frame(&self, batch: *mut BatchFrame) -> u64 {
        let k = self
            .batch
            .expect("a program compiled with `compile_row` has no batch kernel");
        // SAFETY: forwarded from the caller; `self` borrows the code.
        unsafe { k.run(batch) }
    }
}

impl std::fmt::Debug for NativeFn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeFn")
            .field("decl", &self.decl)
            .finish()
    }
}

/// Compiled code only ever produces words that [`Exit::encode`] produces.
#[inline]
fn decode(word: u64) -> Exit {
    Exit::decode(word).expect("compiled code returned a well-formed exit word")
}

#[cfg(test)]
mod tests {
    use super::fill_tags;

    #[test]
    fn tags_are_filled_row_by_row() {
        for rows in [0, 1, 2, 3, 7, 64, 1000] {
            for tags in [&[][..], &[2], &[2, 3], &[2, 4, 3, 2, 2, 2, 2, 2, 4]] {
                let mut out = vec![0u8; rows * tags.len() + 5];
                let n = rows * tags.len();
                fill_tags(&mut out[..n], tags);
                let want: Vec<u8> = (0..rows).flat_map(|_| tags.iter().copied()).collect();
                assert_eq!(&out[..n], &want[..], "{rows} rows of {tags:?}");
                assert_eq!(&out[n..], &[0; 5], "past the rows done");
            }
        }
    }
}
