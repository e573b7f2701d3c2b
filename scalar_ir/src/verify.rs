//! The verifier: checks every invariant the tiers rely on before any of them runs a program.
//!
//! Invariants, by number (each violation names its number, block and instruction):
//!
//! 1. **Layout**: the layout has at least one block, every laid-out block exists, and
//!    no block appears twice in the layout.
//! 2. **Instruction placement**: every laid-out instruction exists and appears in at
//!    most one block, at most once.
//! 3. **Terminators**: every laid-out block is non-empty, ends with a terminator and
//!    has no terminator before its end.
//! 4. **Entry parameters**: the entry block has no parameters.
//! 5. **Entry predecessors**: no branch targets the entry block.
//! 6. **Branch targets**: every branch targets a block in the layout, passing as many
//!    arguments as the target has parameters, each of the parameter's type.
//! 7. **Defined operands**: every operand is a value in the value table that is
//!    defined by a laid-out instruction or is a parameter of a laid-out block.
//! 8. **Dominance**: every operand's definition dominates its use (a parameter
//!    dominates its whole block; a result, the instructions after it and the blocks
//!    its block dominates).
//! 9. **Operand types**: every operand has the type the instruction's signature
//!    requires, and every result has the type the instruction produces.
//! 10. **Frame bounds**: input slots are below `inputs`, environment slots below
//!     `env`, and state lanes below `state`.
//! 11. **Rings**: a ring has `len >= 1` and `base + len <= state`.
//! 12. **Trap sites**: every trap site is below `sites`.
//! 13. **Reachability**: every laid-out block is reachable from the entry block.
//! 14. **Table consistency**: an instruction's result value records that instruction
//!     as its definition, and a block parameter records its block and position.
//! 15. **Windows**: a `window` or `window_if` names a count window of at least one
//!     value over Int, Float or Bool, its operand and result have that window's types
//!     (a `window_if`'s presence is a `b1`, invariant 9), and its words
//!     `base .. base + words` lie within `windows`. An `interval` or `interval_if`
//!     names a valid interval window (a capacity of at least one sample, bounds
//!     `0 <= lo <= hi`, `all`/`any` over `b1` or `min`/`max` over `f64`), its operand
//!     and result have its element's type, and its words lie within `windows`.
//!     A `since` names a valid since (a capacity, `0 <= lo <= hi`, over `b1` or
//!     `f64`), its presences are `b1`, its operands and result have its
//!     element's type, and its words lie within `windows`.
//! 16. **Held inputs**: every `take_input` of input `k` into environment slot `e` as
//!     `ty` follows a `guard_input_held k, e, ty` earlier in its block or in the entry
//!     block, so a held lane is read only once its tag says it holds a `ty`.

use crate::ir::*;
use crate::text::print_inst;
use std::fmt;

/// Where a verifier error was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub block: Option<Block>,
    pub inst: Option<Inst>,
}

/// One violated invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifierError {
    pub location: Location,
    /// The invariant's number in the module documentation.
    pub invariant: u8,
    /// The instruction as text, when the error is about an instruction.
    pub inst_text: Option<String>,
    pub message: String,
}

impl fmt::Display for VerifierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location.block {
            Some(b) => write!(f, "{b}")?,
            None => write!(f, "program")?,
        }
        if let Some(i) = self.location.inst {
            write!(f, ", {i}")?;
            if let Some(t) = &self.inst_text {
                write!(f, " `{t}`")?;
            }
        }
        write!(f, ": invariant {}: {}", self.invariant, self.message)
    }
}

/// All violations found in a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifierErrors(pub Vec<VerifierError>);

impl fmt::Display for VerifierErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifierErrors {}

struct Verifier<'a> {
    prog: &'a Program,
    errors: Vec<VerifierError>,
    /// The block and position of each laid-out instruction.
    inst_pos: Vec<Option<(Block, usize)>>,
    in_layout: Vec<bool>,
}

/// Verifies a program, returning every violation found.
pub fn verify(prog: &Program) -> Result<(), VerifierErrors> {
    let mut v = Verifier {
        prog,
        errors: Vec::new(),
        inst_pos: vec![None; prog.insts.len()],
        in_layout: vec![false; prog.block_params.len()],
    };
    v.run();
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(VerifierErrors(v.errors))
    }
}

impl Verifier<'_> {
    fn report(&mut self, block: Option<Block>, inst: Option<Inst>, invariant: u8, message: String) {
        let inst_text = inst
            .filter(|i| i.index() < self.prog.insts.len())
            .map(|i| print_inst(self.prog, i));
        self.errors.push(VerifierError {
            location: Location { block, inst },
            invariant,
            inst_text,
            message,
        });
    }

    fn run(&mut self) {
        let p = self.prog;
        // 1 and 2: the layout's shape. Later checks only look at what passed here.
        if p.layout.blocks.is_empty() {
            self.report(None, None, 1, "the program has no entry block".into());
            return;
        }
        let mut blocks = Vec::new();
        for &b in &p.layout.blocks {
            if b.index() >= p.block_params.len() || b.index() >= p.layout.insts.len() {
                self.report(Some(b), None, 1, format!("{b} does not exist"));
            } else if self.in_layout[b.index()] {
                self.report(Some(b), None, 1, format!("{b} appears twice in the layout"));
            } else {
                self.in_layout[b.index()] = true;
                blocks.push(b);
            }
        }
        for &b in &blocks {
            for (i, &inst) in p.layout.block_insts(b).iter().enumerate() {
                if inst.index() >= p.insts.len() {
                    self.report(Some(b), None, 2, format!("{inst} does not exist"));
                } else if let Some((ob, _)) = self.inst_pos[inst.index()] {
                    self.report(
                        Some(b),
                        Some(inst),
                        2,
                        format!("{inst} is already placed in {ob}"),
                    );
                } else {
                    self.inst_pos[inst.index()] = Some((b, i));
                }
            }
        }
        if !self.errors.is_empty() {
            return;
        }
        let entry = blocks[0];

        // 3: terminators.
        for &b in &blocks {
            let insts = p.layout.block_insts(b);
            match insts.last() {
                None => self.report(Some(b), None, 3, format!("{b} is empty")),
                Some(&last) if !p.inst(last).is_terminator() => self.report(
                    Some(b),
                    Some(last),
                    3,
                    format!("{b} does not end with a terminator"),
                ),
                _ => {}
            }
            for &inst in insts.iter().rev().skip(1) {
                if p.inst(inst).is_terminator() {
                    self.report(
                        Some(b),
                        Some(inst),
                        3,
                        "terminator before the end of the block".into(),
                    );
                }
            }
        }

        // 4: entry parameters.
        if !p.params(entry).is_empty() {
            self.report(
                Some(entry),
                None,
                4,
                "the entry block has parameters".into(),
            );
        }

        // 14: table consistency.
        for &b in &blocks {
            for (n, &v) in p.params(b).iter().enumerate() {
                let ok = p
                    .values
                    .get(v.index())
                    .is_some_and(|d| d.def == ValueDef::Param(b, n as u32));
                if !ok {
                    self.report(
                        Some(b),
                        None,
                        14,
                        format!("parameter {v} does not record {b} position {n}"),
                    );
                }
            }
            for &inst in p.layout.block_insts(b) {
                let data = p.inst(inst);
                let result = p.result(inst);
                match (data.result_type(), result) {
                    (Some(ty), Some(r)) => {
                        match p.values.get(r.index()) {
                            Some(d) if d.def == ValueDef::Result(inst) => {
                                if d.ty != ty {
                                    self.report(
                                    Some(b),
                                    Some(inst),
                                    9,
                                    format!("result {r} has type {} but the instruction produces {ty}", d.ty),
                                );
                                }
                            }
                            _ => self.report(
                                Some(b),
                                Some(inst),
                                14,
                                format!("result {r} does not record {inst} as its definition"),
                            ),
                        }
                    }
                    (Some(_), None) => self.report(
                        Some(b),
                        Some(inst),
                        14,
                        "the instruction has no result value".into(),
                    ),
                    (None, Some(r)) => self.report(
                        Some(b),
                        Some(inst),
                        14,
                        format!("the instruction produces no result but records {r}"),
                    ),
                    (None, None) => {}
                }
            }
        }

        // 5 and 6: branches.
        for &b in &blocks {
            for &inst in p.layout.block_insts(b) {
                for call in p.inst(inst).branch_targets() {
                    let t = call.block;
                    if t.index() >= self.in_layout.len() || !self.in_layout[t.index()] {
                        self.report(
                            Some(b),
                            Some(inst),
                            6,
                            format!("branch to {t}, which is not in the layout"),
                        );
                        continue;
                    }
                    if t == entry {
                        self.report(
                            Some(b),
                            Some(inst),
                            5,
                            format!("branch to the entry block {t}"),
                        );
                    }
                    let params = p.params(t);
                    if params.len() != call.args.len() {
                        self.report(
                            Some(b),
                            Some(inst),
                            6,
                            format!(
                                "{t} takes {} arguments but the branch passes {}",
                                params.len(),
                                call.args.len()
                            ),
                        );
                        continue;
                    }
                    for (k, (&arg, &param)) in call.args.iter().zip(params).enumerate() {
                        let (at, pt) = (p.value_type(arg), p.value_type(param));
                        if at.is_some() && at != pt {
                            self.report(
                                Some(b),
                                Some(inst),
                                6,
                                format!(
                                    "argument {k} to {t} is {arg} of type {}, but parameter {param} has type {}",
                                    at.map_or("?", Type::name),
                                    pt.map_or("?", Type::name)
                                ),
                            );
                        }
                    }
                }
            }
        }

        // 13: reachability, and the dominator tree for 8. Only laid-out blocks are
        // followed, since the instructions of other blocks were never checked.
        let in_layout = self.in_layout.clone();
        let succs = |b: Block| -> Vec<Block> {
            p.layout
                .block_insts(b)
                .last()
                .map(|&i| {
                    p.inst(i)
                        .branch_targets()
                        .into_iter()
                        .map(|c| c.block)
                        .filter(|t| in_layout.get(t.index()).copied().unwrap_or(false))
                        .collect()
                })
                .unwrap_or_default()
        };
        let nblocks = p.block_params.len();
        let mut rpo_index = vec![usize::MAX; nblocks];
        let mut postorder = Vec::new();
        let mut visited = vec![false; nblocks];
        let mut stack = vec![(entry, 0usize)];
        visited[entry.index()] = true;
        while let Some((b, k)) = stack.pop() {
            let s = succs(b);
            if k < s.len() {
                stack.push((b, k + 1));
                let t = s[k];
                if !visited[t.index()] {
                    visited[t.index()] = true;
                    stack.push((t, 0));
                }
            } else {
                postorder.push(b);
            }
        }
        let rpo: Vec<Block> = postorder.iter().rev().copied().collect();
        for (i, &b) in rpo.iter().enumerate() {
            rpo_index[b.index()] = i;
        }
        for &b in &blocks {
            if !visited[b.index()] {
                self.report(
                    Some(b),
                    None,
                    13,
                    format!("{b} is unreachable from the entry block"),
                );
            }
        }
        let idom = dominators(&rpo, &rpo_index, &succs);
        let dominates = |a: Block, mut b: Block| -> bool {
            // Walk up b's dominator chain; unreachable blocks dominate nothing.
            if rpo_index[a.index()] == usize::MAX || rpo_index[b.index()] == usize::MAX {
                return false;
            }
            loop {
                if a == b {
                    return true;
                }
                let up = idom[rpo_index[b.index()]];
                if up == rpo_index[b.index()] {
                    return false;
                }
                b = rpo[up];
            }
        };

        // 7, 8, 9, 10, 11, 12, 16: per instruction.
        let d = p.decl;
        let first = blocks.first().copied();
        let mut entry_guards: Vec<(u32, u32, Type)> = Vec::new();
        for &b in &blocks {
            let mut guards = if Some(b) == first {
                Vec::new()
            } else {
                entry_guards.clone()
            };
            for (pos, &inst) in p.layout.block_insts(b).iter().enumerate() {
                let data = p.inst(inst);
                match *data {
                    InstData::GuardInputHeld { slot, env, ty, .. } => guards.push((slot, env, ty)),
                    InstData::TakeInput { ty, slot, env } if !guards.contains(&(slot, env, ty)) => {
                        self.report(
                            Some(b),
                            Some(inst),
                            16,
                            format!("no `guard_input_held {slot}, {env}, {ty}` comes before it"),
                        );
                    }
                    _ => {}
                }
                let mut operands: Vec<(Value, Option<Type>)> = data
                    .typed_operands()
                    .into_iter()
                    .map(|(v, t)| (v, Some(t)))
                    .collect();
                for call in data.branch_targets() {
                    // Argument types were checked against the parameters under 6.
                    operands.extend(call.args.iter().map(|&v| (v, None)));
                }
                for (v, want) in operands {
                    let Some(vd) = p.values.get(v.index()) else {
                        self.report(Some(b), Some(inst), 7, format!("{v} does not exist"));
                        continue;
                    };
                    let def_place = match vd.def {
                        ValueDef::Result(di) => self
                            .inst_pos
                            .get(di.index())
                            .copied()
                            .flatten()
                            .map(|(db, dpos)| (db, Some(dpos))),
                        ValueDef::Param(pb, _) => (pb.index() < self.in_layout.len()
                            && self.in_layout[pb.index()])
                        .then_some((pb, None)),
                        ValueDef::Reserved => None,
                    };
                    match def_place {
                        None => self.report(
                            Some(b),
                            Some(inst),
                            7,
                            format!("{v} is not defined by any laid-out instruction or block"),
                        ),
                        Some((db, dpos)) => {
                            let ok = if db == b {
                                dpos.is_none_or(|dp| dp < pos)
                            } else {
                                dominates(db, b)
                            };
                            if !ok {
                                self.report(
                                    Some(b),
                                    Some(inst),
                                    8,
                                    format!("{v} (defined in {db}) does not dominate this use"),
                                );
                            }
                        }
                    }
                    if let Some(want) = want
                        && vd.ty != want
                    {
                        self.report(
                            Some(b),
                            Some(inst),
                            9,
                            format!("{v} has type {} but {want} is required", vd.ty),
                        );
                    }
                }

                let bound = |kind: &str, n: u32, limit: u32, decl: &str| {
                    (n >= limit).then(|| {
                        format!("{kind} {n} is out of range (the program declares {decl}={limit})")
                    })
                };
                let range_err = match *data {
                    InstData::GuardInput { slot, .. }
                    | InstData::LoadInput { slot, .. }
                    | InstData::InputPresent { slot } => {
                        bound("input slot", slot, d.inputs, "inputs")
                    }
                    InstData::GuardInputHeld { slot, env, .. }
                    | InstData::TakeInput { slot, env, .. } => {
                        bound("input slot", slot, d.inputs, "inputs")
                            .or_else(|| bound("env slot", env, d.env, "env"))
                    }
                    InstData::GuardEnv { slot, .. }
                    | InstData::GuardHeld { slot, .. }
                    | InstData::EnvPresent { slot }
                    | InstData::LoadEnv { slot, .. }
                    | InstData::StoreEnv { slot, .. }
                    | InstData::StoreEnvP { slot, .. } => bound("env slot", slot, d.env, "env"),
                    InstData::LoadState { lane, .. } | InstData::StoreState { lane, .. } => {
                        bound("state lane", lane, d.state, "state")
                    }
                    _ => None,
                };
                if let Some(m) = range_err {
                    self.report(Some(b), Some(inst), 10, m);
                }
                // A window's words past the declared ones (count windows and
                // intervals alike).
                let beyond_windows = |base: u32, words: usize| {
                    let end = base as u64 + words as u64;
                    (end > d.windows as u64).then(|| {
                        format!(
                            "window words {base}..{end} exceed the declared windows={}",
                            d.windows
                        )
                    })
                };
                if let InstData::Window {
                    ty, base, shape, ..
                } = *data
                {
                    let want =
                        crate::ir::elem_type(crate::window::result_elem(shape.agg, shape.elem));
                    if shape.n == 0 || crate::ir::elem_type(shape.elem).is_none() {
                        self.report(
                            Some(b),
                            Some(inst),
                            15,
                            "a window of no scalar values".into(),
                        );
                    } else if want != Some(ty) {
                        self.report(
                            Some(b),
                            Some(inst),
                            15,
                            format!("a window reading {ty}, its aggregate gives {want:?}"),
                        );
                    } else if let Some(m) = beyond_windows(base, shape.words()) {
                        self.report(Some(b), Some(inst), 15, m);
                    }
                }
                if let InstData::Interval {
                    ty, base, shape, ..
                } = *data
                {
                    if !shape.is_valid() {
                        self.report(
                            Some(b),
                            Some(inst),
                            15,
                            "an interval window no STL operator makes".into(),
                        );
                    } else if crate::ir::elem_type(shape.elem) != Some(ty) {
                        self.report(
                            Some(b),
                            Some(inst),
                            15,
                            format!("an interval reading {ty} over {:?}", shape.elem),
                        );
                    } else if let Some(m) = beyond_windows(base, shape.words()) {
                        self.report(Some(b), Some(inst), 15, m);
                    }
                }
                if let InstData::Since {
                    ty, base, shape, ..
                } = *data
                {
                    if !shape.is_valid() {
                        self.report(
                            Some(b),
                            Some(inst),
                            15,
                            "a since no STL operator makes".into(),
                        );
                    } else if crate::ir::elem_type(shape.elem) != Some(ty) {
                        self.report(
                            Some(b),
                            Some(inst),
                            15,
                            format!("a since reading {ty} over {:?}", shape.elem),
                        );
                    } else if let Some(m) = beyond_windows(base, shape.words()) {
                        self.report(Some(b), Some(inst), 15, m);
                    }
                }
                if let InstData::RingLoad { base, len, .. }
                | InstData::RingStore { base, len, .. } = *data
                {
                    if len == 0 {
                        self.report(Some(b), Some(inst), 11, "ring length is 0".into());
                    } else if base as u64 + len as u64 > d.state as u64 {
                        self.report(
                            Some(b),
                            Some(inst),
                            11,
                            format!(
                                "ring lanes {base}..{} exceed the declared state={}",
                                base as u64 + len as u64,
                                d.state
                            ),
                        );
                    }
                }
                if let Some(site) = data.trap_site()
                    && site >= d.sites
                {
                    self.report(
                        Some(b),
                        Some(inst),
                        12,
                        format!(
                            "trap site {site} is out of range (the program declares sites={})",
                            d.sites
                        ),
                    );
                }
            }
            if Some(b) == first {
                entry_guards = guards;
            }
        }
    }
}

/// Immediate dominators by the Cooper–Harvey–Kennedy iteration, indexed by
/// reverse-postorder number; the entry is its own immediate dominator.
fn dominators(
    rpo: &[Block],
    rpo_index: &[usize],
    succs: &dyn Fn(Block) -> Vec<Block>,
) -> Vec<usize> {
    let n = rpo.len();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, &b) in rpo.iter().enumerate() {
        for t in succs(b) {
            let ti = rpo_index[t.index()];
            if ti != usize::MAX {
                preds[ti].push(i);
            }
        }
    }
    const UNDEF: usize = usize::MAX;
    let mut idom = vec![UNDEF; n];
    if n == 0 {
        return idom;
    }
    idom[0] = 0;
    let intersect = |idom: &[usize], mut a: usize, mut b: usize| {
        while a != b {
            while a > b {
                a = idom[a];
            }
            while b > a {
                b = idom[b];
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for i in 1..n {
            let mut new = UNDEF;
            for &pi in &preds[i] {
                if idom[pi] != UNDEF {
                    new = if new == UNDEF {
                        pi
                    } else {
                        intersect(&idom, pi, new)
                    };
                }
            }
            if new != idom[i] {
                idom[i] = new;
                changed = true;
            }
        }
    }
    idom
}
