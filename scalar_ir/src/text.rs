//! The text form of programs: a printer and a parser that round-trip.
//!
//! The syntax follows Cranelift's:
//!
//! ```text
//! program inputs=2 env=3 state=1 sites=1
//! block0:
//!     guard_input 0, i64, 1
//!     v0 = load_input.i64 0
//!     v1 = iconst 2
//!     v2 = imul_ck v0, v1, site0
//!     store_env.i64 0, v2
//!     return
//! ```
//!
//! Value and block numbers in the text are the numbers in the program, so that
//! `parse(print(p)) == p` holds structurally (see `PartialEq for Program`). A `;`
//! starts a comment that runs to the end of the line. Float constants print with
//! Rust's `{:?}` (which round-trips every non-NaN `f64`, including `-0.0` and
//! `inf`) and NaNs print as `nan(0x…)` with their full bit pattern.
//!
//! The parser never panics: every error is a [`ParseError`] with a line and column.

use crate::ir::*;
use std::collections::HashMap;
use std::fmt::{self, Write};

/// Prints a whole program.
pub fn print(prog: &Program) -> String {
    let mut s = String::new();
    let d = prog.decl;
    let _ = write!(
        s,
        "program inputs={} env={} state={} sites={}",
        d.inputs, d.env, d.state, d.sites
    );
    // Only programs with windows declare them, so other programs print as before.
    if d.windows > 0 {
        let _ = write!(s, " windows={}", d.windows);
    }
    s.push('\n');
    for (i, &b) in prog.layout.blocks.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        let _ = write!(s, "{b}");
        let params = prog.params(b);
        if !params.is_empty() {
            s.push('(');
            for (j, &p) in params.iter().enumerate() {
                if j > 0 {
                    s.push_str(", ");
                }
                let ty = prog.value_type(p).map_or("?", Type::name);
                let _ = write!(s, "{p}: {ty}");
            }
            s.push(')');
        }
        s.push_str(":\n");
        for &inst in prog.layout.block_insts(b) {
            s.push_str("    ");
            s.push_str(&print_inst(prog, inst));
            s.push('\n');
        }
    }
    s
}

/// Formats an `f64` so that the parser gets the exact bits back.
pub fn format_f64(bits: u64) -> String {
    let v = f64::from_bits(bits);
    if v.is_nan() {
        format!("nan(0x{bits:016x})")
    } else {
        format!("{v:?}")
    }
}

fn block_call(bc: &BlockCall) -> String {
    if bc.args.is_empty() {
        bc.block.to_string()
    } else {
        let args: Vec<String> = bc.args.iter().map(Value::to_string).collect();
        format!("{}({})", bc.block, args.join(", "))
    }
}

/// Prints one instruction, with its result, as it appears in a block.
pub fn print_inst(prog: &Program, inst: Inst) -> String {
    let mut s = String::new();
    if let Some(r) = prog.result(inst) {
        let _ = write!(s, "{r} = ");
    }
    let _ = match prog.inst(inst) {
        InstData::Iconst(v) => write!(s, "iconst {v}"),
        InstData::Fconst(bits) => write!(s, "fconst {}", format_f64(*bits)),
        InstData::Bconst(v) => write!(s, "bconst {v}"),
        InstData::GuardInput { slot, ty, reason } => {
            write!(s, "guard_input {slot}, {ty}, {reason}")
        }
        InstData::GuardEnv { slot, ty, reason } => write!(s, "guard_env {slot}, {ty}, {reason}"),
        InstData::GuardHeld { slot, ty, reason } => write!(s, "guard_held {slot}, {ty}, {reason}"),
        InstData::GuardInputHeld {
            slot,
            env,
            ty,
            reason,
        } => write!(s, "guard_input_held {slot}, {env}, {ty}, {reason}"),
        InstData::TakeInput { ty, slot, env } => write!(s, "take_input.{ty} {slot}, {env}"),
        InstData::InputPresent { slot } => write!(s, "input_present {slot}"),
        InstData::EnvPresent { slot } => write!(s, "env_present {slot}"),
        InstData::StoreEnvP {
            ty,
            slot,
            present,
            arg,
        } => write!(s, "store_env_p.{ty} {slot}, {present}, {arg}"),
        InstData::Require { cond, reason } => write!(s, "require {cond}, {reason}"),
        InstData::LoadInput { ty, slot } => write!(s, "load_input.{ty} {slot}"),
        InstData::LoadEnv { ty, slot } => write!(s, "load_env.{ty} {slot}"),
        InstData::StoreEnv { ty, slot, arg } => write!(s, "store_env.{ty} {slot}, {arg}"),
        InstData::LoadState { ty, lane } => write!(s, "load_state.{ty} {lane}"),
        InstData::StoreState { ty, lane, arg } => write!(s, "store_state.{ty} {lane}, {arg}"),
        InstData::RingLoad { ty, base, len } => write!(s, "ring_load.{ty} {base}, {len}"),
        InstData::Window {
            ty,
            base,
            shape,
            arg,
            site,
            entry,
        } => {
            let shape = shape.encode();
            match entry {
                Entry::Always => write!(s, "window.{ty} {base}, {shape:#x}, {arg}, site{site}"),
                Entry::If { present, reason } => write!(
                    s,
                    "window_if.{ty} {base}, {shape:#x}, {present}, {arg}, site{site}, {reason}"
                ),
            }
        }
        InstData::Interval {
            ty,
            base,
            shape,
            present,
            arg,
            site,
        } => {
            let (lo, hi, kind) = (shape.lo_ns, shape.hi_ns, shape.encode_kind());
            match present {
                None => write!(
                    s,
                    "interval.{ty} {base}, {lo}, {hi}, {kind:#x}, {arg}, site{site}"
                ),
                Some(p) => write!(
                    s,
                    "interval_if.{ty} {base}, {lo}, {hi}, {kind:#x}, {p}, {arg}, site{site}"
                ),
            }
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
        } => {
            let (lo, hi, kind) = (shape.lo_ns, shape.hi_ns, shape.encode_kind());
            write!(
                s,
                "since.{ty} {base}, {lo}, {hi}, {kind:#x}, {phi_present}, {phi}, {psi_present}, {psi}, site{site}"
            )
        }
        InstData::RingStore { ty, base, len, arg } => {
            write!(s, "ring_store.{ty} {base}, {len}, {arg}")
        }
        InstData::Binary { op, args } => write!(s, "{} {}, {}", op.name(), args[0], args[1]),
        InstData::Unary { op, arg } => write!(s, "{} {arg}", op.name()),
        InstData::BinaryCk { op, args, site } => {
            write!(s, "{} {}, {}, site{site}", op.name(), args[0], args[1])
        }
        InstData::UnaryCk { op, arg, site } => write!(s, "{} {arg}, site{site}", op.name()),
        InstData::Cmp { kind, cond, args } => write!(
            s,
            "{}.{} {}, {}",
            kind.name(),
            cond.name(),
            args[0],
            args[1]
        ),
        InstData::Select { ty, cond, args } => {
            write!(s, "select.{ty} {cond}, {}, {}", args[0], args[1])
        }
        InstData::Jump { dest } => write!(s, "jump {}", block_call(dest)),
        InstData::Brif {
            cond,
            then_dest,
            else_dest,
        } => write!(
            s,
            "brif {cond}, {}, {}",
            block_call(then_dest),
            block_call(else_dest)
        ),
        InstData::Return => write!(s, "return"),
        InstData::Decline { reason } => write!(s, "decline {reason}"),
        InstData::Trap { kind, site } => write!(s, "trap {}, site{site}", kind.name()),
    };
    s
}

/// A parse error at a 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.message)
    }
}

impl std::error::Error for ParseError {}

type PResult<T> = Result<T, ParseError>;

/// A cursor over one line (comment already stripped).
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
}

impl<'a> Cursor<'a> {
    fn err<T>(&self, message: impl Into<String>) -> PResult<T> {
        Err(self.err_at(self.pos, message))
    }

    fn err_at(&self, pos: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            line: self.line,
            col: self.text[..pos].chars().count() + 1,
            message: message.into(),
        }
    }

    fn skip_ws(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos == self.text.len()
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.text[self.pos..].chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> PResult<()> {
        if self.eat(c) {
            Ok(())
        } else {
            self.err(format!("expected `{c}`"))
        }
    }

    /// A run of characters that may appear in names and numbers.
    fn word(&mut self) -> &'a str {
        self.skip_ws();
        let rest = &self.text[self.pos..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        self.pos += len;
        &rest[..len]
    }

    fn expect_word(&mut self, what: &str) -> PResult<(usize, &'a str)> {
        self.skip_ws();
        let start = self.pos;
        let w = self.word();
        if w.is_empty() {
            self.err(format!("expected {what}"))
        } else {
            Ok((start, w))
        }
    }

    fn u32(&mut self, what: &str) -> PResult<u32> {
        let (start, w) = self.expect_word(what)?;
        w.parse::<u32>()
            .map_err(|_| self.err_at(start, format!("expected {what}, found `{w}`")))
    }

    fn i64(&mut self) -> PResult<i64> {
        self.skip_ws();
        let start = self.pos;
        let neg = self.eat('-');
        let w = self.word();
        let text = if neg { format!("-{w}") } else { w.to_string() };
        text.parse::<i64>()
            .map_err(|_| self.err_at(start, format!("expected an i64 literal, found `{text}`")))
    }

    fn prefixed(&mut self, prefix: &str, what: &str) -> PResult<u32> {
        let (start, w) = self.expect_word(what)?;
        w.strip_prefix(prefix)
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or_else(|| self.err_at(start, format!("expected {what}, found `{w}`")))
    }

    /// A window's encoded shape (`0x…`, `CountWindow::encode`): a count
    /// window's, or an interval's kind; `what` names it in the error.
    fn count_window(&mut self, what: &str) -> PResult<crate::window::CountWindow> {
        let (pos, word) = self.expect_word(what)?;
        word.strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .and_then(crate::window::CountWindow::decode)
            .ok_or_else(|| self.err_at(pos, format!("`{word}` is not {what}")))
    }

    /// An interval's or a since's words, bounds and kind, `base, lo, hi, kind,`. The verifier
    /// judges the window (invariant 15); the text only has to name one.
    fn window_head(&mut self, what: &str) -> PResult<(u32, i64, i64, crate::window::CountWindow)> {
        let base = self.u32("a window word")?;
        self.comma()?;
        let lo_ns = self.i64()?;
        self.comma()?;
        let hi_ns = self.i64()?;
        self.comma()?;
        let kind = self.count_window(what)?;
        self.comma()?;
        Ok((base, lo_ns, hi_ns, kind))
    }

    fn ty(&mut self) -> PResult<Type> {
        let (start, w) = self.expect_word("a type")?;
        Type::from_name(w).ok_or_else(|| self.err_at(start, format!("unknown type `{w}`")))
    }

    fn comma(&mut self) -> PResult<()> {
        self.expect(',')
    }
}

#[derive(Default)]
struct Parser {
    prog: Program,
    values: Vec<Option<ValueData>>,
    value_uses: Vec<(Value, usize, usize)>,
    blocks_defined: Vec<bool>,
    block_refs: Vec<(Block, usize, usize)>,
}

impl Parser {
    fn ensure_block(&mut self, b: Block) {
        while self.prog.block_params.len() <= b.index() {
            self.prog.block_params.push(Vec::new());
            self.prog.layout.insts.push(Vec::new());
            self.blocks_defined.push(false);
        }
    }

    fn define_value(&mut self, c: &Cursor, pos: usize, v: Value, data: ValueData) -> PResult<()> {
        if v.index() > 1 << 24 {
            return Err(c.err_at(pos, format!("value number {v} is too large")));
        }
        if self.values.len() <= v.index() {
            self.values.resize(v.index() + 1, None);
        }
        if self.values[v.index()].is_some() {
            return Err(c.err_at(pos, format!("value {v} is defined twice")));
        }
        self.values[v.index()] = Some(data);
        Ok(())
    }

    /// The presence operand and its comma of a `window_if`/`interval_if`
    /// (`entered`), none otherwise.
    fn presence(&mut self, c: &mut Cursor, entered: bool) -> PResult<Option<Value>> {
        if !entered {
            return Ok(None);
        }
        let p = self.use_value(c)?;
        c.comma()?;
        Ok(Some(p))
    }

    fn use_value(&mut self, c: &mut Cursor) -> PResult<Value> {
        c.skip_ws();
        let pos = c.pos;
        let v = Value(c.prefixed("v", "a value")?);
        self.value_uses
            .push((v, c.line, c.text[..pos].chars().count() + 1));
        Ok(v)
    }

    fn block_ref(&mut self, c: &mut Cursor) -> PResult<Block> {
        c.skip_ws();
        let pos = c.pos;
        let b = Block(c.prefixed("block", "a block")?);
        if b.index() > 1 << 24 {
            return Err(c.err_at(pos, format!("block number {b} is too large")));
        }
        self.block_refs
            .push((b, c.line, c.text[..pos].chars().count() + 1));
        Ok(b)
    }

    fn block_call(&mut self, c: &mut Cursor) -> PResult<BlockCall> {
        let block = self.block_ref(c)?;
        let mut args = Vec::new();
        if c.eat('(') && !c.eat(')') {
            loop {
                args.push(self.use_value(c)?);
                if c.eat(')') {
                    break;
                }
                c.comma()?;
            }
        }
        Ok(BlockCall { block, args })
    }

    fn header(&mut self, c: &mut Cursor) -> PResult<()> {
        let (pos, w) = c.expect_word("`program`")?;
        if w != "program" {
            return Err(c.err_at(pos, "expected `program inputs=N env=N state=N sites=N`"));
        }
        let mut seen: HashMap<&str, u32> = HashMap::new();
        while !c.at_end() {
            let (pos, key) = c.expect_word("a declaration")?;
            if !["inputs", "env", "state", "sites", "windows"].contains(&key) {
                return Err(c.err_at(pos, format!("unknown declaration `{key}`")));
            }
            c.expect('=')?;
            let n = c.u32("a count")?;
            if seen.insert(key, n).is_some() {
                return Err(c.err_at(pos, format!("`{key}` declared twice")));
            }
        }
        for key in ["inputs", "env", "state", "sites"] {
            if !seen.contains_key(key) {
                return c.err(format!("missing declaration `{key}=N`"));
            }
        }
        self.prog.decl = Decl {
            inputs: seen["inputs"],
            env: seen["env"],
            state: seen["state"],
            sites: seen["sites"],
            windows: seen.get("windows").copied().unwrap_or(0),
        };
        Ok(())
    }

    fn block_header(&mut self, c: &mut Cursor) -> PResult<Block> {
        c.skip_ws();
        let pos = c.pos;
        let b = Block(c.prefixed("block", "a block")?);
        if b.index() > 1 << 24 {
            return Err(c.err_at(pos, format!("block number {b} is too large")));
        }
        self.ensure_block(b);
        if self.blocks_defined[b.index()] {
            return Err(c.err_at(pos, format!("{b} is defined twice")));
        }
        self.blocks_defined[b.index()] = true;
        self.prog.layout.blocks.push(b);
        if c.eat('(') && !c.eat(')') {
            loop {
                c.skip_ws();
                let vpos = c.pos;
                let v = Value(c.prefixed("v", "a parameter value")?);
                c.expect(':')?;
                let ty = c.ty()?;
                let n = self.prog.block_params[b.index()].len() as u32;
                self.define_value(
                    c,
                    vpos,
                    v,
                    ValueData {
                        ty,
                        def: ValueDef::Param(b, n),
                    },
                )?;
                self.prog.block_params[b.index()].push(v);
                if c.eat(')') {
                    break;
                }
                c.comma()?;
            }
        }
        c.expect(':')?;
        if !c.at_end() {
            return c.err("unexpected text after block header");
        }
        Ok(b)
    }

    fn inst_line(&mut self, c: &mut Cursor, block: Block) -> PResult<()> {
        // An optional `vN =` result.
        let save = c.pos;
        let mut result = None;
        c.skip_ws();
        let rpos = c.pos;
        let w = c.word();
        if w.starts_with('v') && c.eat('=') {
            let v = w[1..]
                .parse::<u32>()
                .map_err(|_| c.err_at(rpos, format!("expected a result value, found `{w}`")))?;
            result = Some((rpos, Value(v)));
        } else {
            c.pos = save;
        }

        let (mpos, mnemonic) = c.expect_word("an instruction")?;
        let suffix = if c.text[c.pos..].starts_with('.') {
            c.pos += 1;
            Some(c.expect_word("a suffix")?)
        } else {
            None
        };
        let typed = |c: &Cursor| -> PResult<Type> {
            match suffix {
                Some((p, s)) => Type::from_name(s)
                    .ok_or_else(|| c.err_at(p, format!("unknown type suffix `{s}`"))),
                None => Err(c.err_at(mpos, format!("`{mnemonic}` needs a type suffix"))),
            }
        };
        let no_suffix = |c: &Cursor| -> PResult<()> {
            match suffix {
                Some((p, _)) => Err(c.err_at(p, format!("`{mnemonic}` takes no suffix"))),
                None => Ok(()),
            }
        };
        let data = match mnemonic {
            "iconst" => {
                no_suffix(c)?;
                InstData::Iconst(c.i64()?)
            }
            "fconst" => {
                no_suffix(c)?;
                InstData::Fconst(parse_f64(c)?)
            }
            "bconst" => {
                no_suffix(c)?;
                let (p, w) = c.expect_word("`true` or `false`")?;
                match w {
                    "true" => InstData::Bconst(true),
                    "false" => InstData::Bconst(false),
                    _ => {
                        return Err(c.err_at(p, format!("expected `true` or `false`, found `{w}`")));
                    }
                }
            }
            "guard_input" | "guard_env" => {
                no_suffix(c)?;
                let slot = c.u32("a slot")?;
                c.comma()?;
                let ty = c.ty()?;
                c.comma()?;
                let reason = c.u32("a decline reason")?;
                if mnemonic == "guard_input" {
                    InstData::GuardInput { slot, ty, reason }
                } else {
                    InstData::GuardEnv { slot, ty, reason }
                }
            }
            "guard_held" => {
                no_suffix(c)?;
                let slot = c.u32("a slot")?;
                c.comma()?;
                let ty = c.ty()?;
                c.comma()?;
                let reason = c.u32("a decline reason")?;
                InstData::GuardHeld { slot, ty, reason }
            }
            "guard_input_held" => {
                no_suffix(c)?;
                let slot = c.u32("a slot")?;
                c.comma()?;
                let env = c.u32("a slot")?;
                c.comma()?;
                let ty = c.ty()?;
                c.comma()?;
                let reason = c.u32("a decline reason")?;
                InstData::GuardInputHeld {
                    slot,
                    env,
                    ty,
                    reason,
                }
            }
            "take_input" => {
                let ty = typed(c)?;
                let slot = c.u32("a slot")?;
                c.comma()?;
                let env = c.u32("a slot")?;
                InstData::TakeInput { ty, slot, env }
            }
            "input_present" | "env_present" => {
                no_suffix(c)?;
                let slot = c.u32("a slot")?;
                if mnemonic == "input_present" {
                    InstData::InputPresent { slot }
                } else {
                    InstData::EnvPresent { slot }
                }
            }
            "store_env_p" => {
                let ty = typed(c)?;
                let slot = c.u32("a slot")?;
                c.comma()?;
                let present = self.use_value(c)?;
                c.comma()?;
                let arg = self.use_value(c)?;
                InstData::StoreEnvP {
                    ty,
                    slot,
                    present,
                    arg,
                }
            }
            "require" => {
                no_suffix(c)?;
                let cond = self.use_value(c)?;
                c.comma()?;
                let reason = c.u32("a decline reason")?;
                InstData::Require { cond, reason }
            }
            "load_input" => InstData::LoadInput {
                ty: typed(c)?,
                slot: c.u32("a slot")?,
            },
            "load_env" => InstData::LoadEnv {
                ty: typed(c)?,
                slot: c.u32("a slot")?,
            },
            "load_state" => InstData::LoadState {
                ty: typed(c)?,
                lane: c.u32("a lane")?,
            },
            "store_env" | "store_state" => {
                let ty = typed(c)?;
                let slot = c.u32("a slot")?;
                c.comma()?;
                let arg = self.use_value(c)?;
                if mnemonic == "store_env" {
                    InstData::StoreEnv { ty, slot, arg }
                } else {
                    InstData::StoreState {
                        ty,
                        lane: slot,
                        arg,
                    }
                }
            }
            "window" | "window_if" => {
                let ty = typed(c)?;
                let base = c.u32("a window word")?;
                c.comma()?;
                let shape = c.count_window("a window shape")?;
                c.comma()?;
                let present = self.presence(c, mnemonic == "window_if")?;
                let arg = self.use_value(c)?;
                c.comma()?;
                let site = c.prefixed("site", "a trap site")?;
                let entry = match present {
                    Some(present) => {
                        c.comma()?;
                        let reason = c.u32("a decline reason")?;
                        Entry::If { present, reason }
                    }
                    None => Entry::Always,
                };
                InstData::Window {
                    ty,
                    base,
                    shape,
                    arg,
                    site,
                    entry,
                }
            }
            "interval" | "interval_if" => {
                let ty = typed(c)?;
                let (base, lo_ns, hi_ns, kind) = c.window_head("an interval's kind")?;
                let shape = crate::window::IntervalWindow {
                    lo_ns,
                    hi_ns,
                    cap: kind.n,
                    agg: kind.agg,
                    elem: kind.elem,
                };
                let present = self.presence(c, mnemonic == "interval_if")?;
                let arg = self.use_value(c)?;
                c.comma()?;
                let site = c.prefixed("site", "a trap site")?;
                InstData::Interval {
                    ty,
                    base,
                    shape,
                    present,
                    arg,
                    site,
                }
            }
            "since" => {
                let ty = typed(c)?;
                let (base, lo_ns, hi_ns, kind) = c.window_head("a since's kind")?;
                let shape = crate::window::SinceWindow {
                    lo_ns,
                    hi_ns,
                    cap: kind.n,
                    elem: kind.elem,
                };
                let mut operand = || -> PResult<Value> {
                    let v = self.use_value(c)?;
                    c.comma()?;
                    Ok(v)
                };
                let (phi_present, phi) = (operand()?, operand()?);
                let (psi_present, psi) = (operand()?, operand()?);
                let site = c.prefixed("site", "a trap site")?;
                InstData::Since {
                    ty,
                    base,
                    shape,
                    phi_present,
                    phi,
                    psi_present,
                    psi,
                    site,
                }
            }
            "ring_load" | "ring_store" => {
                let ty = typed(c)?;
                let base = c.u32("a base lane")?;
                c.comma()?;
                let len = c.u32("a ring length")?;
                if mnemonic == "ring_load" {
                    InstData::RingLoad { ty, base, len }
                } else {
                    c.comma()?;
                    let arg = self.use_value(c)?;
                    InstData::RingStore { ty, base, len, arg }
                }
            }
            "icmp" | "fcmp" | "bcmp" => {
                let kind = match mnemonic {
                    "icmp" => CmpKind::Icmp,
                    "fcmp" => CmpKind::Fcmp,
                    _ => CmpKind::Bcmp,
                };
                let cond = match suffix {
                    Some((p, s)) => Cond::ALL
                        .into_iter()
                        .find(|cc| cc.name() == s)
                        .ok_or_else(|| c.err_at(p, format!("unknown condition `{s}`")))?,
                    None => return Err(c.err_at(mpos, format!("`{mnemonic}` needs a condition"))),
                };
                let a = self.use_value(c)?;
                c.comma()?;
                let b = self.use_value(c)?;
                InstData::Cmp {
                    kind,
                    cond,
                    args: [a, b],
                }
            }
            "select" => {
                let ty = typed(c)?;
                let cond = self.use_value(c)?;
                c.comma()?;
                let a = self.use_value(c)?;
                c.comma()?;
                let b = self.use_value(c)?;
                InstData::Select {
                    ty,
                    cond,
                    args: [a, b],
                }
            }
            "jump" => {
                no_suffix(c)?;
                InstData::Jump {
                    dest: self.block_call(c)?,
                }
            }
            "brif" => {
                no_suffix(c)?;
                let cond = self.use_value(c)?;
                c.comma()?;
                let then_dest = self.block_call(c)?;
                c.comma()?;
                let else_dest = self.block_call(c)?;
                InstData::Brif {
                    cond,
                    then_dest,
                    else_dest,
                }
            }
            "return" => {
                no_suffix(c)?;
                InstData::Return
            }
            "decline" => {
                no_suffix(c)?;
                InstData::Decline {
                    reason: c.u32("a decline reason")?,
                }
            }
            "trap" => {
                no_suffix(c)?;
                let (p, k) = c.expect_word("a trap kind")?;
                let kind = match k {
                    "overflow" => TrapKind::Overflow,
                    "div_by_zero" => TrapKind::DivByZero,
                    "window_full" => TrapKind::WindowFull,
                    _ => return Err(c.err_at(p, format!("unknown trap kind `{k}`"))),
                };
                c.comma()?;
                InstData::Trap {
                    kind,
                    site: c.prefixed("site", "a trap site")?,
                }
            }
            _ => {
                no_suffix(c)?;
                if let Some(op) = CkBinOp::from_name(mnemonic) {
                    let a = self.use_value(c)?;
                    c.comma()?;
                    let b = self.use_value(c)?;
                    c.comma()?;
                    let site = c.prefixed("site", "a trap site")?;
                    InstData::BinaryCk {
                        op,
                        args: [a, b],
                        site,
                    }
                } else if let Some(op) = CkUnOp::from_name(mnemonic) {
                    let arg = self.use_value(c)?;
                    c.comma()?;
                    let site = c.prefixed("site", "a trap site")?;
                    InstData::UnaryCk { op, arg, site }
                } else if let Some(op) = BinOp::from_name(mnemonic) {
                    let a = self.use_value(c)?;
                    c.comma()?;
                    let b = self.use_value(c)?;
                    InstData::Binary { op, args: [a, b] }
                } else if let Some(op) = UnOp::from_name(mnemonic) {
                    InstData::Unary {
                        op,
                        arg: self.use_value(c)?,
                    }
                } else {
                    return Err(c.err_at(mpos, format!("unknown instruction `{mnemonic}`")));
                }
            }
        };
        if !c.at_end() {
            return c.err("unexpected text after instruction");
        }

        let inst = Inst(self.prog.insts.len() as u32);
        let result = match (data.result_type(), result) {
            (Some(ty), Some((pos, v))) => {
                self.define_value(
                    c,
                    pos,
                    v,
                    ValueData {
                        ty,
                        def: ValueDef::Result(inst),
                    },
                )?;
                Some(v)
            }
            (None, Some((pos, _))) => {
                return Err(c.err_at(pos, format!("`{mnemonic}` produces no result")));
            }
            (Some(_), None) => {
                return Err(c.err_at(mpos, format!("`{mnemonic}` needs a result value")));
            }
            (None, None) => None,
        };
        self.prog.insts.push(data);
        self.prog.inst_result.push(result);
        self.prog.layout.insts[block.index()].push(inst);
        Ok(())
    }
}

fn parse_f64(c: &mut Cursor) -> PResult<u64> {
    c.skip_ws();
    let start = c.pos;
    let rest = &c.text[start..];
    if let Some(hex) = rest.strip_prefix("nan(0x") {
        let len = hex.find(')').unwrap_or(hex.len());
        let bits = u64::from_str_radix(&hex[..len], 16)
            .ok()
            .filter(|b| f64::from_bits(*b).is_nan())
            .ok_or_else(|| c.err_at(start, "expected NaN bits `nan(0x…)`"))?;
        c.pos = start + "nan(0x".len() + len;
        c.expect(')')?;
        return Ok(bits);
    }
    let len = rest
        .find(|ch: char| ch.is_whitespace() || ch == ',')
        .unwrap_or(rest.len());
    let tok = &rest[..len];
    match tok.parse::<f64>() {
        // A bare `NaN` would lose the payload and sign; insist on the bit form.
        Ok(v) if !v.is_nan() => {
            c.pos = start + len;
            Ok(v.to_bits())
        }
        _ => Err(c.err_at(
            start,
            format!("expected an f64 literal or `nan(0x…)`, found `{tok}`"),
        )),
    }
}

/// Parses a program from its text form.
pub fn parse(text: &str) -> Result<Program, ParseError> {
    let mut p = Parser::default();
    let mut header_seen = false;
    let mut current: Option<Block> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.find(';').map_or(raw, |k| &raw[..k]);
        let mut c = Cursor {
            text: line,
            pos: 0,
            line: i + 1,
        };
        if c.at_end() {
            continue;
        }
        if !header_seen {
            p.header(&mut c)?;
            header_seen = true;
            continue;
        }
        c.skip_ws();
        if c.text[c.pos..].starts_with("block") {
            current = Some(p.block_header(&mut c)?);
            continue;
        }
        match current {
            Some(b) => p.inst_line(&mut c, b)?,
            None => return c.err("expected a block header before instructions"),
        }
    }
    if !header_seen {
        return Err(ParseError {
            line: 1,
            col: 1,
            message: "expected `program inputs=N env=N state=N sites=N`".into(),
        });
    }
    for &(v, line, col) in &p.value_uses {
        if p.values.get(v.index()).copied().flatten().is_none() {
            return Err(ParseError {
                line,
                col,
                message: format!("use of undefined value {v}"),
            });
        }
    }
    for &(b, line, col) in &p.block_refs {
        if !p.blocks_defined.get(b.index()).copied().unwrap_or(false) {
            return Err(ParseError {
                line,
                col,
                message: format!("reference to undefined block {b}"),
            });
        }
    }
    // Numbers the text skipped stay reserved, so every defined value keeps its number.
    p.prog.values = p
        .values
        .into_iter()
        .map(|d| {
            d.unwrap_or(ValueData {
                ty: Type::I64,
                def: ValueDef::Reserved,
            })
        })
        .collect();
    Ok(p.prog)
}
