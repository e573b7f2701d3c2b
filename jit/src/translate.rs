//! Stages 2 and 3: translate a verified program's blocks into Cranelift IR, then emit
//! the exits they branch to.
//!
//! One [`Translator`] translates one program body into the function being built. The
//! same body is translated twice per program, into the row kernel and into the batch
//! kernel; the two differ only in where the frame's pointers and step come from
//! ([`FrameVals`]) and in what `return` does ([`OnReturn`]).
//!
//! Value representation: an `i64` and a `b1` are Cranelift `i64`s holding the raw lane
//! bits (a `b1` is 0 or 1), an `f64` is a Cranelift `f64`. So every load and store is
//! one 64-bit move, exactly as the quickened interpreter copies lanes.

use crate::CompileError;
use crate::helpers::Helper;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::immediates::Ieee64;
use cranelift_codegen::ir::{self as cl, BlockArg, InstBuilder, MemFlagsData, types};
use cranelift_frontend::FunctionBuilder;
use scalar_ir::frame::{
    BATCH_IN_LANES, BATCH_OUT_LANES, FRAME_ENV, FRAME_ENV_TAGS, FRAME_STATE, tag, tag_of,
};
use scalar_ir::ir::*;
use scalar_ir::{Exit, TrapKind};
use std::collections::HashMap;

/// Flags for every lane and tag access: the frame contract makes each address valid
/// and aligned, so the access cannot trap.
pub(crate) fn lane_flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// The Cranelift type of a scalar IR type (see the module docs).
pub(crate) fn cl_type(ty: Type) -> cl::Type {
    match ty {
        Type::I64 | Type::B1 => types::I64,
        Type::F64 => types::F64,
    }
}

/// The byte offset of element `index` of size `size`, as a load/store immediate.
/// Cranelift immediates are 32-bit; a frame that large is declined, not truncated.
pub(crate) fn offset(index: u32, size: u32) -> Result<i32, CompileError> {
    (index as u64 * size as u64).try_into().map_err(|_| {
        CompileError::Unsupported(format!("frame index {index} is beyond a 2 GiB offset"))
    })
}

/// The frame's pointers and step as Cranelift values, fixed for one run of the body.
pub(crate) struct FrameVals {
    pub inputs: cl::Value,
    pub input_tags: cl::Value,
    pub env: cl::Value,
    pub env_tags: cl::Value,
    pub state: cl::Value,
    pub step: cl::Value,
    pub windows: cl::Value,
    pub held_tags: cl::Value,
    /// The frame's `time` and `timed` (a batch kernel's rows have no time:
    /// `timed` is 0 there, and each row's time is its step's).
    pub time: cl::Value,
    pub timed: cl::Value,
    /// A batch kernel's frame: its cold exit stubs load the environment
    /// and state pointers from it again, so the loop does not keep them in
    /// registers for the stubs alone (most rows never leave early).
    pub reload_from: Option<cl::Value>,
}

/// Loads a pointer-sized field of the frame. `readonly`: the field does not change
/// during the run, and (the frame being valid for the whole call) it may be loaded
/// anywhere in it: `can_move` with `readonly` and `notrap` makes the load pure to
/// Cranelift's e-graph, which drops it when the program never uses it (a row kernel
/// had loaded every field of the frame at its entry, used or not).
pub(crate) fn load_field(
    b: &mut FunctionBuilder<'_>,
    base: cl::Value,
    off: usize,
    readonly: bool,
) -> cl::Value {
    let flags = if readonly {
        lane_flags().with_readonly().with_can_move()
    } else {
        lane_flags()
    };
    b.ins().load(types::I64, flags, base, off as i32)
}

/// The lane of `column` on the row before `row` (at least 1) of a batch of
/// `columns` columns at `lanes`: where a batch kernel keeps an output
/// slot's previous-row value (`Previous::Output`), or an input's
/// (`Previous::Input`).
pub(crate) fn load_previous_lane(
    b: &mut FunctionBuilder<'_>,
    lanes: cl::Value,
    row: cl::Value,
    columns: u32,
    column: u32,
    ty: Type,
) -> cl::Value {
    let before = b.ins().iadd_imm_s(row, -1);
    load_batch_lane(b, lanes, before, columns, column, ty)
}

/// The lane of `column` on `row` of a row-major batch of `columns` columns
/// at `lanes` (the output batch, or the input batch with the program's
/// inputs as its columns).
pub(crate) fn load_batch_lane(
    b: &mut FunctionBuilder<'_>,
    lanes: cl::Value,
    row: cl::Value,
    columns: u32,
    column: u32,
    ty: Type,
) -> cl::Value {
    let at = row_times(b, row, columns);
    let at = b.ins().iadd_imm_u(at, i64::from(column));
    let at8 = b.ins().ishl_imm_u(at, 3);
    let addr = b.ins().iadd(lanes, at8);
    b.ins().load(cl_type(ty), lane_flags(), addr, 0)
}

/// `row * columns`, the first lane of a row of a row-major batch, in the
/// forms x86-64 computes in one `lea` (and its loads then scale by 8 in
/// the address): `r + r` for 2 and `r + (r << k)` for 3, 5 and 9, which
/// Cranelift would otherwise emit as a `mov` and `shl` (a shift of 4 does
/// not fit an address) or an `imul` (three cycles) on every row.
pub(crate) fn row_times(b: &mut FunctionBuilder<'_>, row: cl::Value, columns: u32) -> cl::Value {
    match columns {
        1 => row,
        2 => b.ins().iadd(row, row),
        3 | 5 | 9 => {
            let shifted = b
                .ins()
                .ishl_imm_u(row, i64::from((columns - 1).trailing_zeros()));
            b.ins().iadd(row, shifted)
        }
        _ => b.ins().imul_imm_u(row, i64::from(columns)),
    }
}

/// What the program's `return` becomes.
#[derive(Clone, Copy)]
pub(crate) enum OnReturn {
    /// Row kernel: store status 0 at `frame + FRAME_STATUS` and return 0.
    Return { frame: cl::Value },
    /// Batch kernel: continue with the row's epilogue (copy outputs, next row).
    Jump(cl::Block),
}

/// Environment slots a batch kernel keeps out of the environment across its
/// rows instead of storing them on every row (see `carried_slots`): their
/// values reach the environment only when the kernel leaves.
pub(crate) struct Carried {
    /// Each carried slot, its type, and where its value of the previous row
    /// is while a row runs (meaningless before the batch's first row
    /// completes, when the environment still holds it).
    pub slots: Vec<(u32, Type, Previous)>,
    /// The number of output columns (the output batch's row stride), for
    /// slots whose previous value is in the output batch.
    pub columns: u32,
    /// The number of inputs (the input batch's row stride), for slots that
    /// hold an input (`Previous::Input`).
    pub inputs: u32,
    /// The batch's row number (the loop head's), 0 on its first row.
    pub row: cl::Value,
    /// This row's value of each carried slot, once the body stored it.
    now: Vec<Option<cl::Value>>,
    /// The output columns of each carried slot (none for most), and where
    /// this row's output lanes start: a store to such a slot writes its
    /// columns there at once, and an exit stub reads the lane back, so the
    /// value need not stay live through the rest of the row.
    out_columns: Vec<Vec<u32>>,
    out_row: Option<cl::Value>,
    /// The rings of one lane kept in registers (`carried_rings`).
    pub rings: Vec<CarriedRing>,
}

/// Where a carried slot's value of the previous row is while a row runs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Previous {
    /// In a register: the loop head's parameter.
    Register(cl::Value),
    /// In the output batch, at this column of the previous row (the slot is
    /// an output, whose lane every returning row writes there anyway).
    Output(u32),
    /// In the input batch, at this column of the previous row (every row
    /// stores this input into the slot: `Share::Input`).
    Input(u32),
    /// In the environment: with many slots, registers would spill, so the
    /// lane is stored on every row as usual, and only its tag, the same on
    /// every row, waits for the exit.
    Memory,
}

/// A ring of one lane a batch kernel keeps in a register across its rows:
/// a row reads the previous row's push and pushes its own, so in memory
/// every row waited on the store of the row before (store forwarding is
/// several cycles, a register one). Its lane reaches the state when the
/// kernel leaves.
pub(crate) struct CarriedRing {
    /// The ring's lane in the state.
    pub lane: u32,
    /// The previous row's push (the loop head's parameter; the state's lane
    /// itself on the batch's first row, loaded before the loop).
    pub previous: cl::Value,
    /// This row's push, once the body made it.
    now: Option<cl::Value>,
}

impl CarriedRing {
    pub(crate) fn new(lane: u32, previous: cl::Value) -> CarriedRing {
        CarriedRing {
            lane,
            previous,
            now: None,
        }
    }

    /// What the ring's lane holds at this point of the row.
    fn current(&self) -> cl::Value {
        self.now.unwrap_or(self.previous)
    }
}

impl Carried {
    pub(crate) fn new(
        slots: Vec<(u32, Type, Previous)>,
        (columns, inputs): (u32, u32),
        rings: Vec<CarriedRing>,
        row: cl::Value,
    ) -> Carried {
        let now = vec![None; slots.len()];
        Carried {
            out_columns: vec![Vec::new(); slots.len()],
            slots,
            columns,
            inputs,
            row,
            now,
            out_row: None,
            rings,
        }
    }

    /// Writes the carried output slots (`outputs`: the slot of each column)
    /// to this row's output lanes, at `out_row`, as the row stores them.
    pub(crate) fn write_outputs(&mut self, outputs: &[u32], out_row: cl::Value) {
        for (i, &(slot, ..)) in self.slots.iter().enumerate() {
            self.out_columns[i] = (outputs.iter().enumerate())
                .filter(|&(_, &s)| s == slot)
                .map(|(k, _)| k as u32)
                .collect();
        }
        self.out_row = Some(out_row);
    }

    fn ring(&mut self, lane: u32) -> Option<&mut CarriedRing> {
        self.rings.iter_mut().find(|r| r.lane == lane)
    }

    fn position(&self, slot: u32) -> Option<usize> {
        self.slots.iter().position(|&(s, _, _)| s == slot)
    }
}

/// A stub of a kernel that carries slots: its block, its exit word, and what
/// it stores before leaving.
struct CarriedStub {
    block: cl::Block,
    word: u64,
    stores: Vec<ExitStore>,
    /// Each carried ring's lane and what it holds there.
    rings: Vec<(u32, cl::Value)>,
}

/// A carried slot at an exit: its tag, and its lane: this row's if the row
/// stored it before the exit, else the previous row's (see `Previous`).
struct ExitStore {
    slot: u32,
    ty: Type,
    lane: ExitLane,
    this_row: bool,
}

/// Where an exit stub finds a carried slot's lane.
#[derive(Clone, Copy)]
enum ExitLane {
    Value(cl::Value),
    /// The previous row's output batch, at this column.
    Output(u32),
    /// This row's output lanes, at this column (`Carried::out_columns`).
    OutputNow(u32),
    /// The input batch, at this column, of this row or the previous one:
    /// read again there rather than kept live for the stub through the
    /// row (inputs are loaded first and used early).
    Input {
        column: u32,
        previous: bool,
    },
    /// The environment has it already.
    InEnv,
}

/// The slots a batch kernel of `prog` can carry in registers (`Carried`), in
/// order of first store, with their types: none unless the program is one
/// block (so every store it makes runs on every row that returns, in order)
/// and small enough that the stores made at each exit stay few. A slot is
/// carried when every store to it has one type and nothing reads it (a load
/// or a guard) before the row stores it: later loads take the stored value.
pub fn carried_slots(prog: &Program) -> Vec<(u32, Type)> {
    const MAX_CARRIED: usize = 64;
    const MAX_EXIT_STORES: usize = 4096;
    if prog.layout.blocks.len() != 1 {
        return Vec::new();
    }
    let mut carried: Vec<(u32, Type)> = Vec::new();
    let mut refused: Vec<u32> = Vec::new();
    let mut exits = 0usize;
    for &blk in &prog.layout.blocks {
        for &inst in prog.layout.block_insts(blk) {
            match *prog.inst(inst) {
                InstData::StoreEnv { ty, slot, .. } => {
                    match carried.iter().find(|&&(s, _)| s == slot) {
                        Some(&(_, t)) if t != ty => refused.push(slot),
                        Some(_) => {}
                        None => carried.push((slot, ty)),
                    }
                }
                InstData::LoadEnv { ty, slot } => {
                    let stored = carried.iter().any(|&(s, t)| s == slot && t == ty);
                    if !stored {
                        refused.push(slot);
                    }
                }
                InstData::GuardEnv { slot, .. } | InstData::GuardHeld { slot, .. } => {
                    refused.push(slot);
                    exits += 1;
                }
                // These read or write a slot's held tag, which a carried
                // slot's exit stores do not keep: such a slot stays in
                // memory.
                InstData::GuardInputHeld { env: slot, .. } => {
                    refused.push(slot);
                    exits += 1;
                }
                InstData::TakeInput { env: slot, .. }
                | InstData::StoreEnvP { slot, .. }
                | InstData::EnvPresent { slot } => refused.push(slot),
                InstData::Require { .. } => exits += 1,
                // A window leaves where its sum overflows, and a `window_if`
                // also where it is empty.
                InstData::Window {
                    entry: Entry::Always,
                    ..
                } => exits += 1,
                InstData::Window { .. } => exits += 2,
                // An interval or a since leaves where it is full.
                InstData::Interval { .. } | InstData::Since { .. } => exits += 1,
                // Each can leave the row (checked division by two ways).
                InstData::BinaryCk { .. } => exits += 2,
                InstData::GuardInput { .. }
                | InstData::UnaryCk { .. }
                | InstData::Decline { .. }
                | InstData::Trap { .. } => exits += 1,
                _ => {}
            }
        }
    }
    carried.retain(|&(s, _)| !refused.contains(&s) && offset(s, 8).is_ok());
    if carried.len() > MAX_CARRIED || (exits + 1) * carried.len() > MAX_EXIT_STORES {
        return Vec::new();
    }
    carried
}

/// The rings of one lane a batch kernel of `prog` can keep in registers
/// (`CarriedRing`), with their types: none unless the program is one block,
/// and only rings every access of which is a `ring_load` or `ring_store` of
/// one type on that ring alone (no `load_state`, `store_state` or longer
/// ring covers its lane).
pub fn carried_rings(prog: &Program) -> Vec<(u32, Type)> {
    const MAX_CARRIED_RINGS: usize = 4;
    if prog.layout.blocks.len() != 1 {
        return Vec::new();
    }
    let mut rings: Vec<(u32, Type)> = Vec::new();
    let mut refused: Vec<u32> = Vec::new();
    for &blk in &prog.layout.blocks {
        for &inst in prog.layout.block_insts(blk) {
            match *prog.inst(inst) {
                InstData::RingLoad { ty, base, len: 1 }
                | InstData::RingStore {
                    ty, base, len: 1, ..
                } => match rings.iter().find(|&&(l, _)| l == base) {
                    Some(&(_, t)) if t != ty => refused.push(base),
                    Some(_) => {}
                    None => rings.push((base, ty)),
                },
                InstData::RingLoad { base, len, .. } | InstData::RingStore { base, len, .. } => {
                    refused.extend(base..base.saturating_add(len));
                }
                InstData::LoadState { lane, .. } | InstData::StoreState { lane, .. } => {
                    refused.push(lane);
                }
                _ => {}
            }
        }
    }
    rings.retain(|&(l, _)| !refused.contains(&l) && offset(l, 8).is_ok());
    rings.truncate(MAX_CARRIED_RINGS);
    rings
}

/// Where a batch kernel keeps a carried slot's previous-row value between
/// rows (see `carried_sharing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    /// A loop parameter of its own.
    Own,
    /// The parameter of an earlier carried slot (by position in
    /// `carried_slots`) that every row stores the same value into.
    Slot(usize),
    /// The parameter of a carried ring (by position in `carried_rings`)
    /// whose push every row is the value the slot is stored.
    Ring(usize),
    /// No parameter: every row stores this input (by slot) into the slot,
    /// so its previous-row value is in the input batch.
    Input(u32),
}

/// For each of `carried` (from `carried_slots`), which loop parameter can
/// hold its previous-row value. Slots whose last store in the row is of the
/// same value share one, and a slot whose last store is what a carried ring
/// (of `rings`) pushes last uses the ring's: the value a parameter holds at
/// a row's start is then the same for all of them from the batch's second
/// row on (the program is one block, so every returning row makes each of
/// its stores and pushes), and on its first row a slot's previous value is
/// never read (the environment holds it) while the ring's is the state's
/// lane. A slot whose last store is an input (its `load_input`) needs no
/// parameter: the input batch holds it. Fewer loop-carried values leave the
/// loop's registers to the row.
pub fn carried_sharing(
    prog: &Program,
    carried: &[(u32, Type)],
    rings: &[(u32, Type)],
) -> Vec<Share> {
    // What each value is, seen through a load of a slot this row stored
    // before it (the translator gives such a load the stored value).
    let mut same_as: Vec<Option<Value>> = vec![None; prog.values.len()];
    let resolve = |same_as: &[Option<Value>], v: Value| same_as[v.index()].unwrap_or(v);
    // Each slot's last store and each ring's last push so far; once the
    // walk ends, what they hold when a row ends.
    let mut stored: HashMap<u32, Value> = HashMap::new();
    let mut pushed: HashMap<u32, Value> = HashMap::new();
    let mut input_of: HashMap<Value, u32> = HashMap::new();
    for &blk in &prog.layout.blocks {
        for &inst in prog.layout.block_insts(blk) {
            match *prog.inst(inst) {
                InstData::LoadInput { slot, .. } => {
                    if let Some(r) = prog.result(inst) {
                        input_of.insert(r, slot);
                    }
                }
                InstData::StoreEnv { slot, arg, .. } => {
                    stored.insert(slot, resolve(&same_as, arg));
                }
                InstData::LoadEnv { slot, .. } => {
                    if let Some(r) = prog.result(inst) {
                        same_as[r.index()] = stored.get(&slot).copied();
                    }
                }
                InstData::RingStore {
                    base, len: 1, arg, ..
                } => {
                    pushed.insert(base, resolve(&same_as, arg));
                }
                _ => {}
            }
        }
    }
    let mut shares: Vec<Share> = Vec::with_capacity(carried.len());
    for (i, &(slot, _)) in carried.iter().enumerate() {
        let share = stored.get(&slot).and_then(|v| {
            let input = input_of.get(v).map(|&k| Share::Input(k));
            let ring = (rings.iter()).position(|(lane, _)| pushed.get(lane) == Some(v));
            let earlier = (carried[..i].iter())
                .position(|(s, _)| stored.get(s) == Some(v))
                .map(|j| match shares[j] {
                    Share::Own => Share::Slot(j),
                    shared => shared,
                });
            input.or(ring.map(Share::Ring)).or(earlier)
        });
        shares.push(share.unwrap_or(Share::Own));
    }
    shares
}

/// Translates one program body. Created per kernel; consumed by [`Translator::finish`].
pub(crate) struct Translator<'p, 'b, 'f> {
    prog: &'p Program,
    b: &'b mut FunctionBuilder<'f>,
    frame: FrameVals,
    helpers: [Option<cl::FuncRef>; Helper::ALL.len()],
    on_return: OnReturn,
    /// A batch kernel's carried slots, if it carries any.
    carried: Option<Carried>,
    /// With carried slots, the input each `load_input` result is (by
    /// slot): an exit stub reads it from the input batch again.
    input_of: HashMap<cl::Value, u32>,
    /// With carried slots, one stub per exit taken (not per exit word): each
    /// stores what the environment holds at that point of the row.
    carried_stubs: Vec<CarriedStub>,
    /// The shared exit block, created with the first stub: takes the exit word as its
    /// one parameter. Filled by the caller, because each kernel leaves differently.
    /// Cold stubs, one per distinct non-return exit word, each leaving the function
    /// itself (see [`Translator::finish`]).
    stubs: HashMap<u64, cl::Block>,
    /// Cranelift value of each scalar IR value, once translated. A map
    /// rather than a table over the program's values: a split program's
    /// chunks (`module::ChunkPlan`) each translate a small part of a long
    /// program, and a table per chunk made the split quadratic.
    vals: HashMap<Value, cl::Value>,
    /// The raw `i8` result of each comparison, so `brif`/`select` can use it directly
    /// instead of the widened 0/1 lane.
    flags: HashMap<Value, cl::Value>,
    /// Cranelift block of each scalar IR block.
    blocks: Vec<Option<cl::Block>>,
}

impl<'p, 'b, 'f> Translator<'p, 'b, 'f> {
    pub(crate) fn new(
        prog: &'p Program,
        b: &'b mut FunctionBuilder<'f>,
        frame: FrameVals,
        helpers: [Option<cl::FuncRef>; Helper::ALL.len()],
        on_return: OnReturn,
    ) -> Self {
        Translator {
            prog,
            b,
            frame,
            helpers,
            on_return,
            carried: None,
            input_of: HashMap::new(),
            carried_stubs: Vec::new(),
            stubs: HashMap::new(),
            vals: HashMap::new(),
            flags: HashMap::new(),
            blocks: vec![None; prog.block_params.len()],
        }
    }

    /// Makes this (batch) kernel keep `carried`'s slots in registers.
    pub(crate) fn carry(&mut self, carried: Carried) {
        self.carried = Some(carried);
    }

    /// The value of each carried slot at the end of a row that returned (in
    /// `Carried::slots` order).
    pub(crate) fn carried_now(&self) -> Result<Vec<cl::Value>, CompileError> {
        let c = self
            .carried
            .as_ref()
            .ok_or_else(|| internal("nothing is carried"))?;
        c.now
            .iter()
            .map(|v| v.ok_or_else(|| internal("a carried slot is not stored on every row")))
            .collect()
    }

    /// Whether the ring of one lane at `lane` is carried in a register.
    fn carries_ring(&self, lane: u32) -> bool {
        self.carried
            .as_ref()
            .is_some_and(|c| c.rings.iter().any(|r| r.lane == lane))
    }

    /// The lane of each carried ring at the end of a row that returned (in
    /// `Carried::rings` order).
    pub(crate) fn carried_rings_now(&self) -> Vec<cl::Value> {
        self.carried.as_ref().map_or_else(Vec::new, |c| {
            c.rings.iter().map(CarriedRing::current).collect()
        })
    }

    /// Creates a Cranelift block (with typed parameters) for every laid-out block and
    /// jumps from the current block into the program's entry block.
    pub(crate) fn enter(&mut self) -> Result<(), CompileError> {
        for &blk in &self.prog.layout.blocks {
            let cb = self.b.create_block();
            for &p in self.prog.params(blk) {
                let ty = self.value_type(p)?;
                let v = self.b.append_block_param(cb, cl_type(ty));
                self.vals.insert(p, v);
            }
            self.blocks[blk.index()] = Some(cb);
        }
        let entry = self
            .prog
            .entry()
            .ok_or_else(|| internal("program has no entry block"))?;
        let entry = self.block(entry)?;
        self.b.ins().jump(entry, &[]);
        Ok(())
    }

    /// Translates every block, in reverse postorder so that each value's definition
    /// (which dominates its uses, by the verifier) is translated before its uses,
    /// whatever the program's layout order.
    pub(crate) fn translate_blocks(&mut self) -> Result<(), CompileError> {
        for blk in reverse_postorder(self.prog) {
            let cb = self.block(blk)?;
            self.b.switch_to_block(cb);
            for &inst in self.prog.layout.block_insts(blk) {
                self.translate_inst(inst)?;
            }
        }
        Ok(())
    }

    /// Translates `insts`, a range of a one-block program's block (one
    /// chunk of a split program, `module::ChunkPlan`), into the current
    /// block.
    pub(crate) fn translate_range(&mut self, insts: &[Inst]) -> Result<(), CompileError> {
        for &inst in insts {
            self.translate_inst(inst)?;
        }
        Ok(())
    }

    /// Loads value `v`, which an earlier chunk defined, from lane `lane` of
    /// the scratch area at `scratch`.
    pub(crate) fn import(
        &mut self,
        v: Value,
        scratch: cl::Value,
        lane: u32,
    ) -> Result<(), CompileError> {
        let ty = cl_type(self.value_type(v)?);
        let x = self
            .b
            .ins()
            .load(ty, lane_flags(), scratch, offset(lane, 8)?);
        self.vals.insert(v, x);
        Ok(())
    }

    /// Stores value `v` to lane `lane` of the scratch area at `scratch`, for
    /// a later chunk.
    pub(crate) fn export(
        &mut self,
        v: Value,
        scratch: cl::Value,
        lane: u32,
    ) -> Result<(), CompileError> {
        let x = self.val(v)?;
        self.b
            .ins()
            .store(lane_flags(), x, scratch, offset(lane, 8)?);
        Ok(())
    }

    /// Ends a chunk that is not the last: returns 0, so the next one runs.
    pub(crate) fn next_chunk(&mut self) {
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.ins().return_(&[zero]);
    }

    /// Stage 3, emit exits: fills the cold exit stubs, each of which materialises its
    /// exit word and leaves through `leave` (which stores what the kernel reports and
    /// returns). Every stub leaves on its own rather than jumping to one shared exit
    /// block: a block with thousands of predecessors made Cranelift's dominator tree
    /// and register allocation quadratic in the number of trap sites.
    pub(crate) fn finish(self, mut leave: impl FnMut(&mut FunctionBuilder<'_>, cl::Value)) {
        // With carried slots, each stub first stores what the environment
        // would hold there: this row's values of the slots it has stored,
        // and the previous row's of the others (unless this is the batch's
        // first row, whose previous values are the environment's already).
        let row = self.carried.as_ref().map(|c| c.row);
        for stub in self.carried_stubs {
            self.b.switch_to_block(stub.block);
            let (env, env_tags, state) = match self.frame.reload_from {
                Some(frame) => (
                    load_field(self.b, frame, FRAME_ENV, true),
                    load_field(self.b, frame, FRAME_ENV_TAGS, true),
                    load_field(self.b, frame, FRAME_STATE, true),
                ),
                None => (self.frame.env, self.frame.env_tags, self.frame.state),
            };
            let (columns, inputs) = self
                .carried
                .as_ref()
                .map_or((0, 0), |c| (c.columns, c.inputs));
            let (frame, row_now) = (self.frame.reload_from, row);
            let store = |b: &mut FunctionBuilder<'_>, e: &ExitStore| match e.lane {
                ExitLane::Value(v) => store_lane_and_tag(b, env, env_tags, e.slot, e.ty, v),
                ExitLane::Output(column) => {
                    // Only on a row after the first (see below): the row
                    // before's output lane `column`.
                    let (Some(frame), Some(row)) = (frame, row_now) else {
                        unreachable!("a slot kept in the output batch has a batch frame");
                    };
                    let lanes = load_field(b, frame, BATCH_OUT_LANES, true);
                    let v = load_previous_lane(b, lanes, row, columns, column, e.ty);
                    store_lane_and_tag(b, env, env_tags, e.slot, e.ty, v)
                }
                ExitLane::OutputNow(column) => {
                    let (Some(frame), Some(row)) = (frame, row_now) else {
                        unreachable!("a slot kept in the output batch has a batch frame");
                    };
                    let lanes = load_field(b, frame, BATCH_OUT_LANES, true);
                    let v = load_batch_lane(b, lanes, row, columns, column, e.ty);
                    store_lane_and_tag(b, env, env_tags, e.slot, e.ty, v)
                }
                ExitLane::Input { column, previous } => {
                    // The previous row's only on a row after the first.
                    let (Some(frame), Some(row)) = (frame, row_now) else {
                        unreachable!("a slot kept in the input batch has a batch frame");
                    };
                    let lanes = load_field(b, frame, BATCH_IN_LANES, true);
                    let v = match previous {
                        true => load_previous_lane(b, lanes, row, inputs, column, e.ty),
                        false => load_batch_lane(b, lanes, row, inputs, column, e.ty),
                    };
                    store_lane_and_tag(b, env, env_tags, e.slot, e.ty, v)
                }
                ExitLane::InEnv => store_tag(b, env_tags, e.slot, e.ty),
            };
            for e in stub.stores.iter().filter(|e| e.this_row) {
                store(self.b, e);
            }
            // A carried ring's value is the state's own on the first row.
            for &(lane, v) in &stub.rings {
                store_ring_lane(self.b, state, lane, v);
            }
            let previous: Vec<&ExitStore> = stub.stores.iter().filter(|e| !e.this_row).collect();
            if let (Some(row), false) = (row, previous.is_empty()) {
                let stores = self.b.create_block();
                let out = self.b.create_block();
                self.b.set_cold_block(stores);
                self.b.set_cold_block(out);
                self.b.ins().brif(row, stores, &[], out, &[]);
                self.b.switch_to_block(stores);
                for v in previous {
                    store(self.b, v);
                }
                self.b.ins().jump(out, &[]);
                self.b.switch_to_block(out);
            }
            let w = self.b.ins().iconst(types::I64, stub.word as i64);
            leave(self.b, w);
        }
        let mut stubs: Vec<_> = self.stubs.into_iter().collect();
        // Deterministic block order, so that compiling a program twice gives the same code.
        stubs.sort_unstable_by_key(|&(word, _)| word);
        for (word, stub) in stubs {
            self.b.switch_to_block(stub);
            let w = self.b.ins().iconst(types::I64, word as i64);
            leave(self.b, w);
        }
    }

    fn block(&self, blk: Block) -> Result<cl::Block, CompileError> {
        self.blocks
            .get(blk.index())
            .copied()
            .flatten()
            .ok_or_else(|| internal(&format!("{blk} is not laid out")))
    }

    fn value_type(&self, v: Value) -> Result<Type, CompileError> {
        self.prog
            .value_type(v)
            .ok_or_else(|| internal(&format!("{v} is not in the value table")))
    }

    fn val(&self, v: Value) -> Result<cl::Value, CompileError> {
        self.vals
            .get(&v)
            .copied()
            .ok_or_else(|| internal(&format!("{v} used before it was translated")))
    }

    /// A branch condition: the comparison's own flag if there is one, else the lane.
    fn cond(&self, v: Value) -> Result<cl::Value, CompileError> {
        match self.flags.get(&v).copied() {
            Some(f) => Ok(f),
            None => self.val(v),
        }
    }

    fn args(&self, call: &BlockCall) -> Result<Vec<BlockArg>, CompileError> {
        call.args
            .iter()
            .map(|&v| self.val(v).map(BlockArg::Value))
            .collect()
    }

    /// The cold block that leaves with `exit`.
    fn stub(&mut self, exit: Exit) -> cl::Block {
        let word = exit.encode();
        if let Some(c) = &self.carried {
            let blk = self.b.create_block();
            self.b.set_cold_block(blk);
            let stores = (c.slots.iter().zip(&c.now).zip(&c.out_columns))
                .map(|((&(slot, ty, previous), now), out_columns)| ExitStore {
                    slot,
                    ty,
                    lane: match (previous, now) {
                        (Previous::Memory, _) => ExitLane::InEnv,
                        (_, &Some(v)) => match (self.input_of.get(&v), out_columns.first()) {
                            (Some(&column), _) => ExitLane::Input {
                                column,
                                previous: false,
                            },
                            (None, Some(&column)) => ExitLane::OutputNow(column),
                            (None, None) => ExitLane::Value(v),
                        },
                        (Previous::Register(v), None) => ExitLane::Value(v),
                        (Previous::Output(column), None) => ExitLane::Output(column),
                        (Previous::Input(column), None) => ExitLane::Input {
                            column,
                            previous: true,
                        },
                    },
                    this_row: now.is_some(),
                })
                .collect();
            let rings = c.rings.iter().map(|r| (r.lane, r.current())).collect();
            self.carried_stubs.push(CarriedStub {
                block: blk,
                word,
                stores,
                rings,
            });
            return blk;
        }
        if let Some(&blk) = self.stubs.get(&word) {
            return blk;
        }
        let blk = self.b.create_block();
        self.b.set_cold_block(blk);
        self.stubs.insert(word, blk);
        blk
    }

    /// Leaves with `exit` if `cond` is non-zero, else continues in a fresh block.
    fn exit_if(&mut self, cond: cl::Value, exit: Exit) {
        let stub = self.stub(exit);
        let cont = self.b.create_block();
        self.b.ins().brif(cond, stub, &[], cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// A count window's push and read (`window`, `window_if`): its value.
    fn count_window(
        &mut self,
        ty: Type,
        base: u32,
        shape: scalar_ir::window::CountWindow,
        arg: Value,
        site: u32,
        entry: Entry,
    ) -> Result<cl::Value, CompileError> {
        let v = self.val(arg)?;
        // The value's bits: a float argument is passed as its bits.
        let bits = if self.b.func.dfg.value_type(v) == types::F64 {
            self.b.ins().bitcast(types::I64, MemFlagsData::new(), v)
        } else if self.b.func.dfg.value_type(v) == types::I64 {
            v
        } else {
            self.b.ins().uextend(types::I64, v)
        };
        let words = self
            .b
            .ins()
            .iadd_imm_u(self.frame.windows, i64::from(base) * 8);
        let slot = self.b.create_sized_stack_slot(cl::StackSlotData::new(
            cl::StackSlotKind::ExplicitSlot,
            8,
            3,
        ));
        let out = self.b.ins().stack_addr(types::I64, slot, 0);
        let fast = scalar_ir::window::MinMaxWindow::of(shape);
        if let (Some(fast), Entry::Always) = (fast, entry) {
            // A `min`/`max` that enters a value every row (a plan's `G`/`F`): its
            // push and read inline, the helper for the rest.
            let r = self.min_max_inline(fast, words, bits, out)?;
            return Ok(self.bits_as(r, ty));
        }
        let step = self.frame.step;
        let enter = match entry {
            Entry::Always => self.b.ins().iconst(types::I64, 1),
            // A b1 is an i64 lane holding 0 or 1.
            Entry::If { present, .. } => self.val(present)?,
        };
        let status = match fast {
            // `min`/`max` (a plan's `G`/`F`): the fast path, its modulus computed
            // here once rather than at every step.
            Some(fast) => {
                let (n, m, kind) = fast.encode();
                let n = self.b.ins().iconst(types::I64, n as i64);
                let m = self.b.ins().iconst(types::I64, m as i64);
                let kind = self.b.ins().iconst(types::I64, kind as i64);
                let args = [words, n, m, kind, bits, step, enter, out];
                self.call(Helper::MinMax, &args)?
            }
            None => {
                let shape = self.b.ins().iconst(types::I64, shape.encode() as i64);
                self.call(Helper::Window, &[words, shape, bits, step, enter, out])?
            }
        };
        // Status 1 is an Int sum out of range; 2, an empty window,
        // only a `window_if` that entered nothing can read.
        let overflow = self.b.ins().icmp_imm_u(IntCC::Equal, status, 1);
        self.exit_if(overflow, Exit::Trap(TrapKind::Overflow, site));
        if let Entry::If { reason, .. } = entry {
            let empty = self.b.ins().icmp_imm_u(IntCC::Equal, status, 2);
            self.exit_if(empty, Exit::Decline(reason));
        }
        let r = self.b.ins().load(types::I64, lane_flags(), out, 0);
        Ok(self.bits_as(r, ty))
    }

    /// A window result's bits as a value of `ty`.
    fn bits_as(&mut self, r: cl::Value, ty: Type) -> cl::Value {
        let want = cl_type(ty);
        if want == types::F64 {
            self.b.ins().bitcast(types::F64, MemFlagsData::new(), r)
        } else if want == types::I64 {
            r
        } else {
            self.b.ins().ireduce(want, r)
        }
    }

    /// A `min`/`max` count window's push of `bits` and read, inline, on the words at `words`
    /// (`scalar_ir::window::minmax`'s layout and algorithm: the same words, written as its
    /// `MinMaxWindow::step` writes them); the result's bits. The common row — the step's first
    /// push, at a position below 2³² that is not a block's first — runs here: the position
    /// reduced by Lemire's multiplication, the value into the ring, this block's running
    /// extreme updated and combined with the last block's suffix. Every other row (a push
    /// again within a step, a block's start, which makes the suffixes, a position past 2³²)
    /// calls the helper, which writes what it would. The helper's call was half of a plan's
    /// `G` step on the native tiers (its arguments, its saved registers and its checks).
    ///
    /// Every address is inside the window's words: the index is below `n` (the high word of
    /// a product by `n`), the suffix read at `at + 1` only where that is below `n`.
    fn min_max_inline(
        &mut self,
        fast: scalar_ir::window::MinMaxWindow,
        words: cl::Value,
        bits: cl::Value,
        out: cl::Value,
    ) -> Result<cl::Value, CompileError> {
        let (n, m) = (fast.length(), fast.multiplier());
        let (float, min) = (fast.compares_floats(), fast.keeps_least());
        // Byte offsets from `words` of the window's parts (`MinMaxWindow::layout`); the
        // suffix read is `S[at + 1]`, from the ring slot's address (`words + 8·at`).
        let l = fast.layout();
        let off = |w: usize| {
            w.checked_mul(8)
                .and_then(|b| i32::try_from(b).ok())
                .ok_or_else(|| internal("a window's words past an i32 offset"))
        };
        let (pushes_off, pushed_at_off, ring_off) =
            (off(l.pushes)?, off(l.pushed_at)?, off(l.ring)?);
        let (running_off, suffix_off) = (off(l.running)?, off(l.suffixes + 1)?);
        let step1 = self.b.ins().iadd_imm_u(self.frame.step, 1);
        let flags = lane_flags();
        let pushed_at = self.b.ins().load(types::I64, flags, words, pushed_at_off);
        let pushes = self.b.ins().load(types::I64, flags, words, pushes_off);
        let again = self.b.ins().icmp(IntCC::Equal, pushed_at, step1);
        let wide = self
            .b
            .ins()
            .icmp_imm_u(IntCC::UnsignedGreaterThan, pushes, i64::from(u32::MAX));
        let slow_row = self.b.ins().bor(again, wide);
        // Lemire: `pushes mod n` is the high word of `(m·pushes mod 2⁶⁴)·n` below 2³².
        let low = self.b.ins().imul_imm_u(pushes, m as i64);
        let nv = self.b.ins().iconst(types::I64, n as i64);
        let at = self.b.ins().umulhi(low, nv);
        let first = self.b.ins().icmp_imm_u(IntCC::Equal, at, 0);
        let slow_row = self.b.ins().bor(slow_row, first);
        let (inline, slow, join) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.set_cold_block(slow);
        let result = self.b.append_block_param(join, types::I64);
        self.b.ins().brif(slow_row, slow, &[], inline, &[]);

        self.b.switch_to_block(slow);
        let (_, _, kind) = fast.encode();
        let (mv, kv) = (
            self.b.ins().iconst(types::I64, m as i64),
            self.b.ins().iconst(types::I64, kind as i64),
        );
        let one = self.b.ins().iconst(types::I64, 1);
        let step = self.frame.step;
        self.call(Helper::MinMax, &[words, nv, mv, kv, bits, step, one, out])?;
        // After a push the window is never empty: the helper's status is 0.
        let r = self.b.ins().load(types::I64, flags, out, 0);
        self.b.ins().jump(join, &[BlockArg::Value(r)]);

        self.b.switch_to_block(inline);
        self.b.ins().store(flags, step1, words, pushed_at_off);
        let at8 = self.b.ins().ishl_imm_u(at, 3);
        let ring_at = self.b.ins().iadd(words, at8);
        self.b.ins().store(flags, bits, ring_at, ring_off);
        let held = self.b.ins().load(types::I64, flags, words, running_off);
        let running = self.pick(float, min, held, bits);
        self.b.ins().store(flags, running, words, running_off);
        let pushes1 = self.b.ins().iadd_imm_u(pushes, 1);
        self.b.ins().store(flags, pushes1, words, pushes_off);
        // The last block's suffix from `at + 1`, where the window holds the end of it: `n`
        // values or more before this one, and `at + 1 < n`.
        let full = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, pushes, nv);
        let inside = self
            .b
            .ins()
            .icmp_imm_u(IntCC::UnsignedLessThan, at, n as i64 - 1);
        let reads = self.b.ins().band(full, inside);
        let (suffix, done) = (self.b.create_block(), self.b.create_block());
        let best = self.b.append_block_param(done, types::I64);
        self.b
            .ins()
            .brif(reads, suffix, &[], done, &[BlockArg::Value(running)]);
        self.b.switch_to_block(suffix);
        let older = self.b.ins().load(types::I64, flags, ring_at, suffix_off);
        let both = self.pick(float, min, older, running);
        self.b.ins().jump(done, &[BlockArg::Value(both)]);
        self.b.switch_to_block(done);
        let best = if float {
            // Every value held NaN: `f64::NAN`'s bits, as the helper gives.
            let f = self.b.ins().bitcast(types::F64, MemFlagsData::new(), best);
            let nan = self.b.ins().fcmp(FloatCC::Unordered, f, f);
            let canonical = self.b.ins().iconst(types::I64, f64::NAN.to_bits() as i64);
            self.b.ins().select(nan, canonical, best)
        } else {
            best
        };
        self.b.ins().jump(join, &[BlockArg::Value(best)]);
        self.b.switch_to_block(join);
        Ok(result)
    }

    /// `scalar_ir::window::minmax`'s choice between an older and a newer value's bits, for a
    /// `min` (`min`) or `max` of Floats (`float`) or of Ints and Bools as `i64`s: the newer
    /// where it is at least as extreme, or where the older is NaN.
    fn pick(&mut self, float: bool, min: bool, older: cl::Value, newer: cl::Value) -> cl::Value {
        let wins = if float {
            let o = self.b.ins().bitcast(types::F64, MemFlagsData::new(), older);
            let v = self.b.ins().bitcast(types::F64, MemFlagsData::new(), newer);
            let cc = if min {
                FloatCC::LessThanOrEqual
            } else {
                FloatCC::GreaterThanOrEqual
            };
            let beats = self.b.ins().fcmp(cc, v, o);
            let gone = self.b.ins().fcmp(FloatCC::Unordered, o, o);
            self.b.ins().bor(beats, gone)
        } else {
            let cc = if min {
                IntCC::SignedLessThanOrEqual
            } else {
                IntCC::SignedGreaterThanOrEqual
            };
            self.b.ins().icmp(cc, newer, older)
        };
        self.b.ins().select(wins, newer, older)
    }

    fn call(&mut self, h: Helper, args: &[cl::Value]) -> Result<cl::Value, CompileError> {
        let f = self.helpers[h.index()]
            .ok_or_else(|| internal(&format!("helper {} was not imported", h.symbol())))?;
        let call = self.b.ins().call(f, args);
        Ok(self.b.inst_results(call)[0])
    }

    /// Loads a tag byte and tests it against `ty`'s tag: non-zero when it differs.
    fn tag_differs(
        &mut self,
        tags: cl::Value,
        slot: u32,
        ty: Type,
    ) -> Result<cl::Value, CompileError> {
        let t = self
            .b
            .ins()
            .load(types::I8, lane_flags(), tags, offset(slot, 1)?);
        Ok(self
            .b
            .ins()
            .icmp_imm_s(IntCC::NotEqual, t, tag_of(ty) as i64))
    }

    /// Stores environment `slot`'s tags for a value of `ty` present where
    /// `present` (nonzero) is, else NoVal: its tag is `ty`'s or `ABSENT`, and
    /// its held tag `ty`'s either way.
    fn store_presence_tags(
        &mut self,
        present: cl::Value,
        slot: u32,
        ty: Type,
    ) -> Result<(), CompileError> {
        let (flags, toff) = (lane_flags(), offset(slot, 1)?);
        let want = self.b.ins().iconst(types::I8, tag_of(ty) as i64);
        let none = self.b.ins().iconst(types::I8, tag::ABSENT as i64);
        let t = self.b.ins().select(present, want, none);
        self.b.ins().store(flags, t, self.frame.env_tags, toff);
        self.b.ins().store(flags, want, self.frame.held_tags, toff);
        Ok(())
    }

    /// Environment `slot`'s tag under the hold rule: its tag, or while it is
    /// `ABSENT` its held tag (as an `i8`).
    fn held_tag(&mut self, slot: u32) -> Result<cl::Value, CompileError> {
        let toff = offset(slot, 1)?;
        let flags = lane_flags();
        let t = self
            .b
            .ins()
            .load(types::I8, flags, self.frame.env_tags, toff);
        let h = self
            .b
            .ins()
            .load(types::I8, flags, self.frame.held_tags, toff);
        let absent = self.b.ins().icmp_imm_s(IntCC::Equal, t, tag::ABSENT as i64);
        Ok(self.b.ins().select(absent, h, t))
    }

    /// The address of ring lane `base + step % len`, as (pointer, byte offset).
    fn ring_addr(&mut self, base: u32, len: u32) -> Result<(cl::Value, i32), CompileError> {
        if len == 1 {
            // Every step's lane is the ring's only one.
            return Ok((self.frame.state, offset(base, 8)?));
        }
        // The verifier guarantees len >= 1, so the remainder never divides by zero.
        let idx = self.b.ins().urem_imm_u(self.frame.step, len as i64);
        let scaled = self.b.ins().ishl_imm_u(idx, 3);
        let addr = self.b.ins().iadd(self.frame.state, scaled);
        Ok((addr, offset(base, 8)?))
    }

    fn translate_inst(&mut self, inst: Inst) -> Result<(), CompileError> {
        let data = self.prog.inst(inst);
        let flags = lane_flags();
        let result: Option<cl::Value> = match *data {
            InstData::Iconst(v) => Some(self.b.ins().iconst(types::I64, v)),
            InstData::Fconst(bits) => Some(self.b.ins().f64const(Ieee64::with_bits(bits))),
            InstData::Bconst(v) => Some(self.b.ins().iconst(types::I64, v as i64)),
            InstData::GuardInput { slot, ty, reason } => {
                let bad = self.tag_differs(self.frame.input_tags, slot, ty)?;
                self.exit_if(bad, Exit::Decline(reason));
                None
            }
            InstData::GuardEnv { slot, ty, reason } => {
                let bad = self.tag_differs(self.frame.env_tags, slot, ty)?;
                self.exit_if(bad, Exit::Decline(reason));
                None
            }
            InstData::GuardHeld { slot, ty, reason } => {
                let t = self.held_tag(slot)?;
                let bad = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::NotEqual, t, tag_of(ty) as i64);
                self.exit_if(bad, Exit::Decline(reason));
                None
            }
            InstData::GuardInputHeld {
                slot,
                env,
                ty,
                reason,
            } => {
                // The common case (the input is there) is one test; only an
                // absent input looks at the held tag.
                let t =
                    self.b
                        .ins()
                        .load(types::I8, flags, self.frame.input_tags, offset(slot, 1)?);
                let present_ok = self.b.ins().icmp_imm_s(IntCC::Equal, t, tag_of(ty) as i64);
                let absent = self.b.ins().icmp_imm_s(IntCC::Equal, t, tag::ABSENT as i64);
                let held = self.held_tag(env)?;
                let held_ok = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::Equal, held, tag_of(ty) as i64);
                let absent_ok = self.b.ins().band(absent, held_ok);
                let ok = self.b.ins().bor(present_ok, absent_ok);
                let bad = self.b.ins().icmp_imm_s(IntCC::Equal, ok, 0);
                self.exit_if(bad, Exit::Decline(reason));
                None
            }
            InstData::TakeInput { ty, slot, env } => {
                let t =
                    self.b
                        .ins()
                        .load(types::I8, flags, self.frame.input_tags, offset(slot, 1)?);
                let present = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::NotEqual, t, tag::ABSENT as i64);
                let off = offset(env, 8)?;
                let now =
                    self.b
                        .ins()
                        .load(cl_type(ty), flags, self.frame.inputs, offset(slot, 8)?);
                let held = self.b.ins().load(cl_type(ty), flags, self.frame.env, off);
                let v = self.b.ins().select(present, now, held);
                self.b.ins().store(flags, v, self.frame.env, off);
                self.store_presence_tags(present, env, ty)?;
                Some(v)
            }
            InstData::InputPresent { slot } => {
                let t =
                    self.b
                        .ins()
                        .load(types::I8, flags, self.frame.input_tags, offset(slot, 1)?);
                let p = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::NotEqual, t, tag::ABSENT as i64);
                Some(self.b.ins().uextend(types::I64, p))
            }
            InstData::EnvPresent { slot } => {
                let t = self
                    .b
                    .ins()
                    .load(types::I8, flags, self.frame.env_tags, offset(slot, 1)?);
                let p = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::NotEqual, t, tag::ABSENT as i64);
                Some(self.b.ins().uextend(types::I64, p))
            }
            InstData::StoreEnvP {
                ty,
                slot,
                present,
                arg,
            } => {
                let (p, v) = (self.val(present)?, self.val(arg)?);
                self.b
                    .ins()
                    .store(flags, v, self.frame.env, offset(slot, 8)?);
                self.store_presence_tags(p, slot, ty)?;
                None
            }
            InstData::Require { cond, reason } => {
                let c = self.val(cond)?;
                let bad = self.b.ins().icmp_imm_s(IntCC::Equal, c, 0);
                self.exit_if(bad, Exit::Decline(reason));
                None
            }
            InstData::LoadInput { ty, slot } => {
                let off = offset(slot, 8)?;
                let v = self
                    .b
                    .ins()
                    .load(cl_type(ty), flags, self.frame.inputs, off);
                if self.carried.is_some() {
                    self.input_of.insert(v, slot);
                }
                Some(v)
            }
            InstData::LoadEnv { ty, slot } => {
                let carried = self.carried.as_ref().and_then(|c| c.now[c.position(slot)?]);
                match carried {
                    Some(v) => Some(v),
                    None => {
                        let off = offset(slot, 8)?;
                        Some(self.b.ins().load(cl_type(ty), flags, self.frame.env, off))
                    }
                }
            }
            InstData::StoreEnv { slot, arg, .. }
                if self
                    .carried
                    .as_ref()
                    .is_some_and(|c| c.position(slot).is_some()) =>
            {
                let v = self.val(arg)?;
                let c = self
                    .carried
                    .as_mut()
                    .ok_or_else(|| internal("checked above"))?;
                let i = c.position(slot).ok_or_else(|| internal("checked above"))?;
                c.now[i] = Some(v);
                if let Previous::Memory = c.slots[i].2 {
                    // The lane is not carried in a register: to memory.
                    let off = offset(slot, 8)?;
                    self.b.ins().store(flags, v, self.frame.env, off);
                }
                if let Some(out_row) = c.out_row {
                    for &k in &c.out_columns[i] {
                        self.b.ins().store(flags, v, out_row, offset(k, 8)?);
                    }
                }
                None
            }
            InstData::StoreEnv { ty, slot, arg } => {
                let (v, off, toff) = (self.val(arg)?, offset(slot, 8)?, offset(slot, 1)?);
                self.b.ins().store(flags, v, self.frame.env, off);
                let t = self.b.ins().iconst(types::I8, tag_of(ty) as i64);
                self.b.ins().store(flags, t, self.frame.env_tags, toff);
                None
            }
            InstData::LoadState { ty, lane } => {
                let off = offset(lane, 8)?;
                Some(self.b.ins().load(cl_type(ty), flags, self.frame.state, off))
            }
            InstData::StoreState { lane, arg, .. } => {
                let (v, off) = (self.val(arg)?, offset(lane, 8)?);
                self.b.ins().store(flags, v, self.frame.state, off);
                None
            }
            InstData::Window {
                ty,
                base,
                shape,
                arg,
                site,
                entry,
            } => Some(self.count_window(ty, base, shape, arg, site, entry)?),
            InstData::Interval {
                ty,
                base,
                shape,
                present,
                arg,
                site,
            } => {
                let bits = self.word_bits(arg)?;
                let enter = match present {
                    None => self.b.ins().iconst(types::I64, 1),
                    // A b1 is an i64 lane holding 0 or 1.
                    Some(p) => self.val(p)?,
                };
                let bounds = (shape.lo_ns, shape.hi_ns, shape.encode_kind());
                let call = (Helper::Interval, base, bounds, site);
                Some(self.window_call(ty, call, &[bits], enter)?)
            }
            InstData::Since {
                ty,
                base,
                shape,
                phi_present,
                phi,
                psi_present,
                psi,
                site,
            } => Some(self.since(
                ty,
                base,
                shape,
                [(phi_present, phi), (psi_present, psi)],
                site,
            )?),
            // A carried ring's lane is a register.
            InstData::RingLoad { base, len: 1, .. } if self.carries_ring(base) => self
                .carried
                .as_mut()
                .and_then(|c| c.ring(base))
                .map(|r| r.current()),
            InstData::RingStore {
                base, len: 1, arg, ..
            } if self.carries_ring(base) => {
                let v = self.val(arg)?;
                if let Some(r) = self.carried.as_mut().and_then(|c| c.ring(base)) {
                    r.now = Some(v);
                }
                None
            }
            InstData::RingLoad { ty, base, len } => {
                let (addr, off) = self.ring_addr(base, len)?;
                Some(self.b.ins().load(cl_type(ty), flags, addr, off))
            }
            InstData::RingStore { base, len, arg, .. } => {
                let v = self.val(arg)?;
                let (addr, off) = self.ring_addr(base, len)?;
                self.b.ins().store(flags, v, addr, off);
                None
            }
            InstData::Binary { op, args } => {
                let (a, b) = (self.val(args[0])?, self.val(args[1])?);
                Some(self.binary(op, a, b)?)
            }
            InstData::Unary { op, arg } => {
                let a = self.val(arg)?;
                Some(self.unary(op, a)?)
            }
            InstData::BinaryCk { op, args, site } => {
                let (a, b) = (self.val(args[0])?, self.val(args[1])?);
                Some(self.binary_ck(op, a, b, site))
            }
            InstData::UnaryCk { op, arg, site } => {
                let a = self.val(arg)?;
                let overflow = Exit::Trap(TrapKind::Overflow, site);
                Some(match op {
                    CkUnOp::InegCk => {
                        let zero = self.b.ins().iconst(types::I64, 0);
                        let (r, of) = self.b.ins().ssub_overflow(zero, a);
                        self.exit_if(of, overflow);
                        r
                    }
                    CkUnOp::IabsCk => {
                        // |i64::MIN| is the only absolute value that does not fit.
                        let is_min = self.b.ins().icmp_imm_s(IntCC::Equal, a, i64::MIN);
                        self.exit_if(is_min, overflow);
                        self.b.ins().iabs(a)
                    }
                })
            }
            InstData::Cmp { kind, cond, args } => {
                let (a, b) = (self.val(args[0])?, self.val(args[1])?);
                let flag = match kind {
                    // b1 lanes are 0/1, so a signed integer comparison orders false < true.
                    CmpKind::Icmp | CmpKind::Bcmp => self.b.ins().icmp(int_cc(cond), a, b),
                    CmpKind::Fcmp => self.b.ins().fcmp(float_cc(cond), a, b),
                };
                if let Some(r) = self.prog.result(inst) {
                    self.flags.insert(r, flag);
                }
                Some(self.b.ins().uextend(types::I64, flag))
            }
            InstData::Select { cond, args, .. } => {
                let c = self.cond(cond)?;
                let (a, b) = (self.val(args[0])?, self.val(args[1])?);
                Some(self.b.ins().select(c, a, b))
            }
            InstData::Jump { ref dest } => {
                let (target, args) = (self.block(dest.block)?, self.args(dest)?);
                self.b.ins().jump(target, &args);
                None
            }
            InstData::Brif {
                cond,
                ref then_dest,
                ref else_dest,
            } => {
                let c = self.cond(cond)?;
                let (t, targs) = (self.block(then_dest.block)?, self.args(then_dest)?);
                let (e, eargs) = (self.block(else_dest.block)?, self.args(else_dest)?);
                self.b.ins().brif(c, t, &targs, e, &eargs);
                None
            }
            InstData::Return => {
                match self.on_return {
                    OnReturn::Return { frame } => {
                        let zero = self.b.ins().iconst(types::I64, 0);
                        let off = scalar_ir::frame::FRAME_STATUS as i32;
                        self.b.ins().store(flags, zero, frame, off);
                        self.b.ins().return_(&[zero]);
                    }
                    OnReturn::Jump(next) => {
                        self.b.ins().jump(next, &[]);
                    }
                }
                None
            }
            InstData::Decline { reason } => {
                let stub = self.stub(Exit::Decline(reason));
                self.b.ins().jump(stub, &[]);
                None
            }
            InstData::Trap { kind, site } => {
                let stub = self.stub(Exit::Trap(kind, site));
                self.b.ins().jump(stub, &[]);
                None
            }
        };
        if let (Some(v), Some(r)) = (result, self.prog.result(inst)) {
            self.vals.insert(r, v);
        }
        Ok(())
    }

    /// `x` with its quiet bit set, computed on its bits (the value x86
    /// produces for a NaN operand).
    /// A `since`: the helper's call on the since's words, with φ's and ψ's
    /// bits and their presences packed in one word (bit 0 φ's, bit 1 ψ's),
    /// leaving where it is full.
    fn since(
        &mut self,
        ty: Type,
        base: u32,
        shape: scalar_ir::window::SinceWindow,
        samples: [(Value, Value); 2],
        site: u32,
    ) -> Result<cl::Value, CompileError> {
        let [(pp, phi), (qp, psi)] = samples;
        let (phi, psi) = (self.word_bits(phi)?, self.word_bits(psi)?);
        // A b1 is an i64 lane holding 0 or 1: φ's presence in bit 0, ψ's in bit 1.
        let (pp, qp) = (self.val(pp)?, self.val(qp)?);
        let qp2 = self.b.ins().ishl_imm_u(qp, 1);
        let present = self.b.ins().bor(pp, qp2);
        let bounds = (shape.lo_ns, shape.hi_ns, shape.encode_kind());
        self.window_call(
            ty,
            (Helper::Since, base, bounds, site),
            &[phi, psi],
            present,
        )
    }

    /// A value as the word a window helper takes: a float as its bits.
    fn word_bits(&mut self, v: Value) -> Result<cl::Value, CompileError> {
        let v = self.val(v)?;
        Ok(if self.b.func.dfg.value_type(v) == types::F64 {
            self.b.ins().bitcast(types::I64, MemFlagsData::new(), v)
        } else {
            v
        })
    }

    /// Calls an interval's or a since's native helper on its words at `base`
    /// (with its bounds and kind word), the step's `operands` and what is
    /// present of them: a full window traps at `site`, and the result is
    /// read back as a value of `ty`.
    fn window_call(
        &mut self,
        ty: Type,
        (helper, base, (lo_ns, hi_ns, kind), site): (Helper, u32, (i64, i64, u64), u32),
        operands: &[cl::Value],
        present: cl::Value,
    ) -> Result<cl::Value, CompileError> {
        let words = self
            .b
            .ins()
            .iadd_imm_u(self.frame.windows, i64::from(base) * 8);
        let lo = self.b.ins().iconst(types::I64, lo_ns);
        let hi = self.b.ins().iconst(types::I64, hi_ns);
        let kind = self.b.ins().iconst(types::I64, kind as i64);
        let slot = self.b.create_sized_stack_slot(cl::StackSlotData::new(
            cl::StackSlotKind::ExplicitSlot,
            8,
            3,
        ));
        let out = self.b.ins().stack_addr(types::I64, slot, 0);
        let (step, time, timed) = (self.frame.step, self.frame.time, self.frame.timed);
        let mut args = vec![words, lo, hi, kind];
        args.extend_from_slice(operands);
        args.extend([step, time, timed, present, out]);
        let status = self.call(helper, &args)?;
        let full = self.b.ins().icmp_imm_u(IntCC::Equal, status, 1);
        self.exit_if(full, Exit::Trap(TrapKind::WindowFull, site));
        let r = self.b.ins().load(types::I64, lane_flags(), out, 0);
        Ok(if cl_type(ty) == types::F64 {
            self.b.ins().bitcast(types::F64, MemFlagsData::new(), r)
        } else {
            r
        })
    }

    fn quiet_nan_bits(&mut self, x: cl::Value) -> cl::Value {
        let bits = self.b.ins().bitcast(types::I64, MemFlagsData::new(), x);
        let quiet = self.b.ins().bor_imm_u(bits, 0x0008_0000_0000_0000);
        self.b.ins().bitcast(types::F64, MemFlagsData::new(), quiet)
    }

    fn binary(&mut self, op: BinOp, a: cl::Value, b: cl::Value) -> Result<cl::Value, CompileError> {
        // NaN payloads: Rust's `a op b` on x86 returns the quieted `a` when `a`
        // is NaN, else the quieted `b` when `b` is NaN. Cranelift may commute
        // `fadd`/`fmul` and its algebraic rewrites (e.g. `fneg x * fneg y`
        // to `x * y`) may move sign bits, so NaN results are chosen here
        // explicitly, with integer bit operations no float rewrite touches.
        if matches!(op, BinOp::Fadd | BinOp::Fsub | BinOp::Fmul | BinOp::Fdiv) {
            let r = match op {
                BinOp::Fadd => self.b.ins().fadd(a, b),
                BinOp::Fsub => self.b.ins().fsub(a, b),
                BinOp::Fmul => self.b.ins().fmul(a, b),
                _ => self.b.ins().fdiv(a, b),
            };
            let qa = self.quiet_nan_bits(a);
            let qb = self.quiet_nan_bits(b);
            let b_nan = self.b.ins().fcmp(FloatCC::Unordered, b, b);
            let r = self.b.ins().select(b_nan, qb, r);
            let a_nan = self.b.ins().fcmp(FloatCC::Unordered, a, a);
            return Ok(self.b.ins().select(a_nan, qa, r));
        }
        let ins = self.b.ins();
        Ok(match op {
            BinOp::Imin => ins.smin(a, b),
            BinOp::Imax => ins.smax(a, b),
            BinOp::Fadd | BinOp::Fsub | BinOp::Fmul | BinOp::Fdiv => unreachable!("handled above"),
            BinOp::Band => ins.band(a, b),
            BinOp::Bor => ins.bor(a, b),
            BinOp::Bxor => ins.bxor(a, b),
            BinOp::Frem => return self.call(Helper::Frem, &[a, b]),
            BinOp::Fmin => return self.call(Helper::Fmin, &[a, b]),
            BinOp::Fmax => return self.call(Helper::Fmax, &[a, b]),
        })
    }

    fn unary(&mut self, op: UnOp, a: cl::Value) -> Result<cl::Value, CompileError> {
        // Negation and absolute value are sign-bit operations and square root is the
        // correctly rounded SSE2 `sqrtsd` in both tiers, so the native instruction gives
        // the same bits as Rust's method. Floor and ceiling are not (see helpers.rs).
        let ins = self.b.ins();
        Ok(match op {
            UnOp::Fneg => ins.fneg(a),
            UnOp::Fabs => ins.fabs(a),
            UnOp::Fsqrt => ins.sqrt(a),
            UnOp::FcvtFromI64 => ins.fcvt_from_sint(types::F64, a),
            UnOp::Bnot => ins.bxor_imm_u(a, 1),
            UnOp::Fsin => return self.call(Helper::Sin, &[a]),
            UnOp::Fcos => return self.call(Helper::Cos, &[a]),
            UnOp::Ftan => return self.call(Helper::Tan, &[a]),
            UnOp::Ffloor => return self.call(Helper::Floor, &[a]),
            UnOp::Fceil => return self.call(Helper::Ceil, &[a]),
        })
    }

    /// Checked arithmetic, exactly Rust's `checked_*`: the overflow flag of the
    /// `*_overflow` instructions for `+ - *`; for `/` and `%` a zero divisor first
    /// (division by zero), then `i64::MIN` by `-1` (overflow), both tested before
    /// dividing so that the hardware divide never faults.
    fn binary_ck(&mut self, op: CkBinOp, a: cl::Value, b: cl::Value, site: u32) -> cl::Value {
        let overflow = Exit::Trap(TrapKind::Overflow, site);
        let (r, of) = match op {
            CkBinOp::IaddCk => self.b.ins().sadd_overflow(a, b),
            CkBinOp::IsubCk => self.b.ins().ssub_overflow(a, b),
            CkBinOp::ImulCk => self.b.ins().smul_overflow(a, b),
            CkBinOp::IdivCk | CkBinOp::IremCk => {
                let zero = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
                self.exit_if(zero, Exit::Trap(TrapKind::DivByZero, site));
                let a_min = self.b.ins().icmp_imm_s(IntCC::Equal, a, i64::MIN);
                let b_m1 = self.b.ins().icmp_imm_s(IntCC::Equal, b, -1);
                let both = self.b.ins().band(a_min, b_m1);
                self.exit_if(both, overflow);
                return match op {
                    CkBinOp::IdivCk => self.b.ins().sdiv(a, b),
                    _ => self.b.ins().srem(a, b),
                };
            }
        };
        self.exit_if(of, overflow);
        r
    }
}

/// Stores the tag of type `ty` to environment slot `slot`.
pub(crate) fn store_tag(b: &mut FunctionBuilder<'_>, env_tags: cl::Value, slot: u32, ty: Type) {
    // Slots beyond a 32-bit offset are never carried (`carried_slots`).
    let t = b.ins().iconst(types::I8, tag_of(ty) as i64);
    b.ins().store(lane_flags(), t, env_tags, slot as i32);
}

/// Stores `v` to state lane `lane` (a carried ring's; `carried_rings` keeps
/// only lanes within a 32-bit offset).
pub(crate) fn store_ring_lane(
    b: &mut FunctionBuilder<'_>,
    state: cl::Value,
    lane: u32,
    v: cl::Value,
) {
    b.ins().store(lane_flags(), v, state, lane as i32 * 8);
}

/// Stores `v`, a value of type `ty`, to environment slot `slot`, with its tag.
pub(crate) fn store_lane_and_tag(
    b: &mut FunctionBuilder<'_>,
    env: cl::Value,
    env_tags: cl::Value,
    slot: u32,
    ty: Type,
    v: cl::Value,
) {
    // Slots beyond a 32-bit offset are declined before any code is built.
    let (off, toff) = (slot as i32 * 8, slot as i32);
    b.ins().store(lane_flags(), v, env, off);
    let t = b.ins().iconst(types::I8, tag_of(ty) as i64);
    b.ins().store(lane_flags(), t, env_tags, toff);
}

fn int_cc(c: Cond) -> IntCC {
    match c {
        Cond::Eq => IntCC::Equal,
        Cond::Ne => IntCC::NotEqual,
        Cond::Lt => IntCC::SignedLessThan,
        Cond::Le => IntCC::SignedLessThanOrEqual,
        Cond::Gt => IntCC::SignedGreaterThan,
        Cond::Ge => IntCC::SignedGreaterThanOrEqual,
    }
}

/// IEEE conditions as Rust's `PartialOrd` evaluates them: the ordered ones are false
/// on NaN; `ne` is "unordered or not equal", so it is true on NaN.
fn float_cc(c: Cond) -> FloatCC {
    match c {
        Cond::Eq => FloatCC::Equal,
        Cond::Ne => FloatCC::NotEqual,
        Cond::Lt => FloatCC::LessThan,
        Cond::Le => FloatCC::LessThanOrEqual,
        Cond::Gt => FloatCC::GreaterThan,
        Cond::Ge => FloatCC::GreaterThanOrEqual,
    }
}

/// The helpers a program calls, so the caller imports exactly those.
pub(crate) fn helpers_used(prog: &Program) -> Vec<Helper> {
    let mut used = [false; Helper::ALL.len()];
    for &blk in &prog.layout.blocks {
        for &inst in prog.layout.block_insts(blk) {
            let h = match *prog.inst(inst) {
                InstData::Binary {
                    op: BinOp::Frem, ..
                } => Helper::Frem,
                InstData::Binary {
                    op: BinOp::Fmin, ..
                } => Helper::Fmin,
                InstData::Binary {
                    op: BinOp::Fmax, ..
                } => Helper::Fmax,
                InstData::Unary { op: UnOp::Fsin, .. } => Helper::Sin,
                InstData::Unary { op: UnOp::Fcos, .. } => Helper::Cos,
                InstData::Unary { op: UnOp::Ftan, .. } => Helper::Tan,
                InstData::Unary {
                    op: UnOp::Ffloor, ..
                } => Helper::Floor,
                InstData::Unary {
                    op: UnOp::Fceil, ..
                } => Helper::Ceil,
                InstData::Window { shape, .. } => {
                    match scalar_ir::window::MinMaxWindow::of(shape) {
                        Some(_) => Helper::MinMax,
                        None => Helper::Window,
                    }
                }
                InstData::Interval { .. } => Helper::Interval,
                InstData::Since { .. } => Helper::Since,
                _ => continue,
            };
            used[h.index()] = true;
        }
    }
    Helper::ALL
        .into_iter()
        .filter(|h| used[h.index()])
        .collect()
}

/// The laid-out blocks in reverse postorder of the control-flow graph from the entry.
/// The verifier makes every laid-out block reachable, so this is every block.
fn reverse_postorder(prog: &Program) -> Vec<Block> {
    let Some(entry) = prog.entry() else {
        return Vec::new();
    };
    let mut seen = vec![false; prog.block_params.len()];
    let mut post = Vec::with_capacity(prog.layout.blocks.len());
    // Iterative DFS: (block, index of the next successor to visit).
    let succs = |b: Block| -> Vec<Block> {
        prog.layout
            .block_insts(b)
            .last()
            .map(|&i| {
                prog.inst(i)
                    .branch_targets()
                    .iter()
                    .map(|c| c.block)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut stack = vec![(entry, succs(entry), 0usize)];
    seen[entry.index()] = true;
    while let Some((b, ss, k)) = stack.last_mut() {
        if let Some(&s) = ss.get(*k) {
            *k += 1;
            if !seen[s.index()] {
                seen[s.index()] = true;
                let next = succs(s);
                stack.push((s, next, 0));
            }
        } else {
            post.push(*b);
            stack.pop();
        }
    }
    post.reverse();
    post
}

fn internal(msg: &str) -> CompileError {
    CompileError::Internal(msg.to_string())
}
