//! Property tests: the canonical tier equals the reference evaluator on random
//! well-formed specifications and random traces (docs/testing.md, "Property tests").
//!
//! Specs are generated as source text, so the lexer, parser and checker run on
//! them too. The generator is driven by a *choice sequence* (a `Vec<u32>` that
//! proptest generates and shrinks): every decision consumes one number, and an
//! exhausted or zeroed sequence always picks the simplest option (a leaf, a
//! small literal, a present input), so shrinking a failing case shrinks the
//! spec and the trace.
//!
//! Expressions are generated per result type (`Int`, `Float`, `Bool`) so that
//! nearly every spec passes the checker (`generator_coverage` checks that, and
//! that every feature shows up). Same-step cycles are avoided by construction:
//! a stream reads only earlier streams at offset 0, any stream (itself
//! included) at offset >= 1. Inside the compound operand of an offset (which
//! is evaluated every step but read n steps later) any stream may be read,
//! except inside an `if` arm, where an error of that operand would make the
//! arm's own value depend on itself.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use vigil::reference;
use vigil::{Monitor, RuntimeError, Sample, Spec, StepError, Tier, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    Int,
    Float,
    Bool,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::Int => "Int",
            Ty::Float => "Float",
            Ty::Bool => "Bool",
        }
    }
}

/// An input's declared type; `None` is an untyped input (`in x`, type Any).
pub(crate) type InTy = Option<Ty>;

/// A choice sequence: every decision of the generator reads one number.
struct Choices<'a> {
    data: &'a [u32],
    pos: usize,
}

impl Choices<'_> {
    /// A number in `0..n`; 0 once the sequence is exhausted.
    fn pick(&mut self, n: usize) -> usize {
        let v = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v as usize % n
    }

    fn one<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.pick(xs.len())]
    }

    /// True with probability `1 / n` (false when exhausted).
    fn rarely(&mut self, n: usize) -> bool {
        self.pick(n) == n - 1
    }
}

/// Where an expression is generated.
#[derive(Clone, Copy)]
struct Ctx {
    depth: u32,
    /// Inside the compound operand of an offset `(e)[n]`, n >= 1.
    in_offset: bool,
    /// Inside an arm of an `if`.
    in_arm: bool,
}

struct Gen<'a> {
    c: Choices<'a>,
    inputs: Vec<(String, InTy)>,
    streams: Vec<(String, Ty)>,
    /// The stream being defined.
    current: usize,
    /// Let the compound operand of an offset read any stream at offset 0
    /// (outside `if` arms); else only earlier streams, as everywhere else.
    late_reads_in_offsets: bool,
    /// Generate `eval` (keyed monitors refuse `dynamic`).
    dynamic: bool,
}

const BIG_INTS: [&str; 5] = [
    "4611686018427387904",
    "(-9223372036854775808)",
    "9223372036854775807",
    "3037000500",
    "1000000007",
];
const FLOATS: [&str; 8] = ["0.0", "1.0", "0.5", "2.5e3", "1.", "3.25", "1.0e300", "0.1"];

impl Gen<'_> {
    fn literal(&mut self, ty: Ty) -> String {
        match ty {
            Ty::Int if self.c.rarely(5) => self.c.one(&BIG_INTS).to_string(),
            Ty::Int => self.c.pick(8).to_string(),
            Ty::Float => self.c.one(&FLOATS).to_string(),
            Ty::Bool => self.c.one(&["true", "false"]).to_string(),
        }
    }

    /// May stream `i` be read at offset 0 here?
    fn same_step_ok(&self, i: usize, ctx: Ctx) -> bool {
        i < self.current || (self.late_reads_in_offsets && ctx.in_offset && !ctx.in_arm)
    }

    /// A literal, an input, a stream reference or an offset of a name.
    fn leaf(&mut self, ty: Ty, ctx: Ctx) -> String {
        // Untyped inputs fit numeric contexts; Bool contexts take them rarely
        // (a Bool-typed operation on a number is a runtime error).
        let any_ok = ty != Ty::Bool || self.c.rarely(6);
        let inputs: Vec<String> = self
            .inputs
            .iter()
            .filter(|(_, t)| *t == Some(ty) || (t.is_none() && any_ok))
            .map(|(n, _)| n.clone())
            .collect();
        let all_streams: Vec<usize> = (0..self.streams.len())
            .filter(|&i| self.streams[i].1 == ty)
            .collect();
        let now: Vec<usize> = all_streams
            .iter()
            .copied()
            .filter(|&i| self.same_step_ok(i, ctx))
            .collect();
        match self.c.pick(6) {
            1 | 2 if !inputs.is_empty() => {
                let i = self.c.pick(inputs.len());
                inputs[i].clone()
            }
            3 if !now.is_empty() => {
                let i = self.c.pick(now.len());
                let name = &self.streams[now[i]].0;
                if self.c.rarely(6) {
                    format!("{name}[0]")
                } else {
                    name.clone()
                }
            }
            4 if !inputs.is_empty() => {
                let i = self.c.pick(inputs.len());
                format!("{}[{}]", inputs[i], 1 + self.c.pick(3))
            }
            5 if !all_streams.is_empty() => {
                // Prefer the stream being defined: recursion through an offset.
                let s = if all_streams.contains(&self.current) && self.c.pick(2) == 0 {
                    self.current
                } else {
                    all_streams[self.c.pick(all_streams.len())]
                };
                format!("{}[{}]", self.streams[s].0, 1 + self.c.pick(3))
            }
            _ => self.literal(ty),
        }
    }

    fn expr(&mut self, ty: Ty, ctx: Ctx) -> String {
        if ctx.depth == 0 || self.c.pick(4) == 0 {
            return self.leaf(ty, ctx);
        }
        let sub = Ctx {
            depth: ctx.depth - 1,
            ..ctx
        };
        match ty {
            Ty::Int => self.int_expr(sub),
            Ty::Float => self.float_expr(sub),
            Ty::Bool => self.bool_expr(sub),
        }
    }

    fn any_type(&mut self) -> Ty {
        self.c.one(&[Ty::Int, Ty::Float, Ty::Bool])
    }

    fn num_type(&mut self) -> Ty {
        self.c.one(&[Ty::Int, Ty::Float])
    }

    fn arm(ctx: Ctx) -> Ctx {
        Ctx {
            in_arm: true,
            ..ctx
        }
    }

    /// `(e)[n]`, n in 0..=3 (`e[0]` is `e`: same-step rules stay).
    fn offset(&mut self, ty: Ty, ctx: Ctx) -> String {
        let n = self.c.pick(4);
        let inner = Ctx {
            in_offset: ctx.in_offset || n > 0,
            ..ctx
        };
        let e = self.expr(ty, inner);
        format!("({e})[{n}]")
    }

    /// `if c then a else b` with arms of types `ta`, `tb`.
    fn if_expr(&mut self, ta: Ty, tb: Ty, ctx: Ctx) -> String {
        let c = self.expr(Ty::Bool, ctx);
        let a = self.expr(ta, Self::arm(ctx));
        let b = self.expr(tb, Self::arm(ctx));
        format!("(if {c} then {a} else {b})")
    }

    /// The stateful builtins and `default`, with value sides `ta`, `tb`.
    fn temporal(&mut self, ta: Ty, tb: Ty, ctx: Ctx) -> String {
        match self.c.pick(4) {
            0 => {
                let (a, b) = (self.expr(ta, ctx), self.expr(tb, ctx));
                format!("default({a}, {b})")
            }
            1 => {
                let (a, b) = (self.expr(ta, ctx), self.expr(tb, ctx));
                format!("init({a}, {b})")
            }
            2 => {
                let (a, b) = (self.expr(ta, ctx), self.expr(tb, ctx));
                format!("update({a}, {b})")
            }
            _ => {
                // One value side: it must have the unified type.
                let tv = if ta != tb { Ty::Float } else { ta };
                let t = self.any_type();
                let a = if self.c.pick(2) == 0 {
                    self.expr(tv, ctx)
                } else {
                    self.leaf(tv, ctx)
                };
                let b = self.expr(t, ctx);
                format!("latch({a}, {b})")
            }
        }
    }

    /// `default(s[n], lit) op e` for a stream `s` of type `ty`, preferably
    /// the one being defined: `z = default(z[1], 0) + x`.
    fn accumulator(&mut self, ty: Ty, ctx: Ctx) -> String {
        let candidates: Vec<usize> = (0..self.streams.len())
            .filter(|&i| self.streams[i].1 == ty)
            .collect();
        let s = if self.streams[self.current].1 == ty {
            self.current
        } else if candidates.is_empty() {
            return self.leaf(ty, ctx);
        } else {
            candidates[self.c.pick(candidates.len())]
        };
        let name = self.streams[s].0.clone();
        let n = 1 + self.c.pick(2);
        let init = self.literal(ty);
        let rhs = self.expr(ty, ctx);
        let op = match ty {
            Ty::Bool => self.c.one(&["&&", "||", "=>", "!="]),
            _ => self.c.one(&["+", "+", "-", "*"]),
        };
        format!("(default({name}[{n}], {init}) {op} {rhs})")
    }

    /// An Int through containers, functions or `dynamic`: list builtins
    /// over lists of generated Ints, a lambda (whose body reads streams,
    /// offsets of them and stateful builtins, all captured) applied, mapped
    /// or folded, `partial`, maps, tuples, and `eval` of a string naming the
    /// inputs (a choice between two strings restarts the instance).
    fn container_expr(&mut self, ctx: Ctx) -> String {
        let i = Ty::Int;
        let e = |g: &mut Self| g.expr(i, ctx);
        match self.c.pick(9) {
            0 => {
                let (a, b) = (e(self), e(self));
                format!("List.len(List.append([{a}], {b}))")
            }
            1 => {
                let (a, b, k) = (e(self), e(self), e(self));
                format!("List.fold(\\acc: Int, v: Int -> acc + v, {k}, [{a}, {b}])")
            }
            2 => {
                let (a, b, k) = (e(self), e(self), e(self));
                format!("List.get(List.map(\\v: Int -> v - {k}, List.concat([{a}], [{b}])), 1)")
            }
            3 => {
                let (a, k) = (e(self), e(self));
                format!("(\\v: Int -> v * 2 + {k})({a})")
            }
            4 => {
                let (a, b) = (e(self), e(self));
                format!("partial(\\u: Int, v: Int -> u - v, {a})({b})")
            }
            5 => {
                let (a, b) = (e(self), e(self));
                format!("Map.get(Map.insert({{k: {a}}}, \"j\", {b}), \"k\")")
            }
            6 => {
                let (a, b) = (e(self), e(self));
                format!("Tuple({a}, [{b}]).1.0")
            }
            7 => {
                let (a, k) = (e(self), e(self));
                format!("List.head(List.filter(\\v: Int -> v > {k}, List.tail([0, {a}])))")
            }
            8 if !self.dynamic => {
                let (a, k) = (e(self), e(self));
                format!("List.head(List.filter(\\v: Int -> v > {k}, List.tail([0, {a}])))")
            }
            _ => {
                let names: Vec<String> = self.inputs.iter().map(|(n, _)| n.clone()).collect();
                let x = names[self.c.pick(names.len())].clone();
                let y = names[self.c.pick(names.len())].clone();
                let c = self.expr(Ty::Bool, ctx);
                let d = e(self);
                let first = self
                    .c
                    .one(&["{x} + 1", "default({x}[1], 7) * 2", "{x} - {y}"]);
                let first = first.replace("{x}", &x).replace("{y}", &y);
                let typed = self.c.one(&["", ": Int"]);
                format!("default(eval(if {c} then \"{first}\" else \"{y} * 3\"{typed}), {d})")
            }
        }
    }

    fn int_expr(&mut self, ctx: Ctx) -> String {
        let i = Ty::Int;
        match self.c.pick(12) {
            11 => self.container_expr(ctx),
            0 | 1 => {
                let op = self.c.one(&["+", "-", "*", "+", "-", "*", "/", "%"]);
                let (a, b) = (self.expr(i, ctx), self.expr(i, ctx));
                format!("({a} {op} {b})")
            }
            2 => format!("(-{})", self.expr(i, ctx)),
            3 => {
                // Division guarded by an `if`: the error in the unselected arm
                // must be discarded.
                let d = self.expr(i, ctx);
                let a = self.expr(i, Self::arm(ctx));
                let x = self.expr(i, Self::arm(ctx));
                let op = self.c.one(&["/", "%"]);
                format!("(if {d} == 0 then {a} else ({x} {op} {d}))")
            }
            4 => {
                let f = self.c.one(&["abs", "floor", "ceil"]);
                format!("{f}({})", self.expr(i, ctx))
            }
            5 => {
                let f = self.c.one(&["min", "max"]);
                let (a, b) = (self.expr(i, ctx), self.expr(i, ctx));
                format!("{f}({a}, {b})")
            }
            6 | 7 => self.temporal(i, i, ctx),
            8 => self.if_expr(i, i, ctx),
            9 => self.offset(i, ctx),
            _ => self.accumulator(i, ctx),
        }
    }

    fn float_expr(&mut self, ctx: Ctx) -> String {
        let f = Ty::Float;
        // One side Float, the other numeric, in either order.
        let mixed = |g: &mut Self| {
            let t = g.num_type();
            let (a, b) = (g.expr(f, ctx), g.expr(t, ctx));
            if g.c.pick(2) == 0 { (a, b) } else { (b, a) }
        };
        match self.c.pick(11) {
            0 | 1 => {
                let op = self.c.one(&["+", "-", "*", "/", "%"]);
                let (a, b) = mixed(self);
                format!("({a} {op} {b})")
            }
            2 => format!("(-{})", self.expr(f, ctx)),
            3 => {
                let g = self.c.one(&["abs", "floor", "ceil", "sin", "cos", "tan"]);
                format!("{g}({})", self.expr(f, ctx))
            }
            4 => {
                let t = self.num_type();
                format!("sqrt({})", self.expr(t, ctx))
            }
            5 => {
                let g = self.c.one(&["min", "max"]);
                let (a, b) = mixed(self);
                format!("{g}({a}, {b})")
            }
            6 | 7 => {
                let t = self.num_type();
                if self.c.pick(2) == 0 {
                    self.temporal(f, t, ctx)
                } else {
                    self.temporal(t, f, ctx)
                }
            }
            8 => {
                let t = self.num_type();
                if self.c.pick(2) == 0 {
                    self.if_expr(f, t, ctx)
                } else {
                    self.if_expr(t, f, ctx)
                }
            }
            9 => self.offset(f, ctx),
            _ => self.accumulator(f, ctx),
        }
    }

    fn bool_expr(&mut self, ctx: Ctx) -> String {
        let b = Ty::Bool;
        match self.c.pick(12) {
            0 | 1 => {
                let op = self.c.one(&["<", "<=", ">", ">="]);
                let (ta, tb) = (self.num_type(), self.num_type());
                let (x, y) = (self.expr(ta, ctx), self.expr(tb, ctx));
                format!("({x} {op} {y})")
            }
            2 => {
                let op = self.c.one(&["==", "!="]);
                let ta = self.any_type();
                let tb = if self.c.rarely(4) {
                    self.any_type()
                } else {
                    ta
                };
                let (x, y) = (self.expr(ta, ctx), self.expr(tb, ctx));
                format!("({x} {op} {y})")
            }
            3 | 4 => {
                let op = self.c.one(&["&&", "||", "=>"]);
                let (x, y) = (self.expr(b, ctx), self.expr(b, ctx));
                format!("({x} {op} {y})")
            }
            5 => format!("(!{})", self.expr(b, ctx)),
            6 => {
                let g = self.c.one(&["is_defined", "when"]);
                let t = self.any_type();
                // Often a bare reference: streams that are ⊥ at one step and
                // NoVal at a later one are where held and raw differ.
                let e = if self.c.pick(2) == 0 {
                    self.expr(t, ctx)
                } else {
                    self.leaf(t, ctx)
                };
                format!("{g}({e})")
            }
            7 => self.temporal(b, b, ctx),
            8 => self.if_expr(b, b, ctx),
            9 => self.offset(b, ctx),
            10 => {
                let op = self.c.one(&["<", ">="]);
                let (x, y) = (self.expr(b, ctx), self.expr(b, ctx));
                format!("({x} {op} {y})")
            }
            _ => self.accumulator(b, ctx),
        }
    }
}

/// A generated specification: its source text and the types of its inputs.
#[derive(Clone, Debug)]
pub(crate) struct GenSpec {
    pub(crate) source: String,
    pub(crate) inputs: Vec<InTy>,
}

pub(crate) fn generate_spec(data: &[u32], late_reads_in_offsets: bool) -> GenSpec {
    generate_spec_with(data, late_reads_in_offsets, true)
}

/// `generate_spec` without `dynamic` (for keyed monitors, which refuse it).
pub(crate) fn generate_keyable_spec(data: &[u32], late_reads_in_offsets: bool) -> GenSpec {
    generate_spec_with(data, late_reads_in_offsets, false)
}

fn generate_spec_with(data: &[u32], late_reads_in_offsets: bool, dynamic: bool) -> GenSpec {
    let mut g = Gen {
        c: Choices { data, pos: 0 },
        inputs: Vec::new(),
        streams: Vec::new(),
        current: 0,
        late_reads_in_offsets,
        dynamic,
    };
    let n_inputs = 1 + g.c.pick(4);
    for i in 0..n_inputs {
        let t = g.c.one(&[
            Some(Ty::Int),
            Some(Ty::Int),
            Some(Ty::Float),
            Some(Ty::Bool),
            None,
        ]);
        g.inputs.push((format!("i{i}"), t));
    }
    let n_streams = 1 + g.c.pick(6);
    let mut decls = Vec::new();
    for s in 0..n_streams {
        let t = g.c.one(&[Ty::Int, Ty::Int, Ty::Float, Ty::Bool]);
        let name = format!("s{s}");
        let kind = g.c.one(&["out", "out", "out", "out", "aux", "var"]);
        let decl = if g.c.pick(3) == 2 {
            format!("{kind} {name}")
        } else {
            format!("{kind} {name}: {}", t.name())
        };
        decls.push(decl);
        g.streams.push((name, t));
    }
    let mut defs = Vec::new();
    for s in 0..n_streams {
        g.current = s;
        let depth = 1 + g.c.pick(3) as u32;
        let ctx = Ctx {
            depth,
            in_offset: false,
            in_arm: false,
        };
        let e = g.expr(g.streams[s].1, ctx);
        defs.push(format!("{} = {e}", g.streams[s].0));
    }
    let mut lines: Vec<String> = g
        .inputs
        .iter()
        .map(|(n, t)| match t {
            Some(t) => format!("in {n}: {}", t.name()),
            None => format!("in {n}"),
        })
        .collect();
    // Declarations and definitions in any order.
    match g.c.pick(4) {
        0 | 1 => {
            lines.extend(decls);
            lines.push("// definitions".into());
            lines.extend(defs);
        }
        2 => {
            for (d, e) in decls.into_iter().zip(defs) {
                lines.push(d);
                lines.push(e);
            }
        }
        _ => {
            lines.push("(* definitions first *)".into());
            lines.extend(defs);
            lines.extend(decls);
        }
    }
    GenSpec {
        source: lines.join("\n") + "\n",
        inputs: g.inputs.into_iter().map(|(_, t)| t).collect(),
    }
}

/// A trace of `len` rows; each input is absent with probability
/// `absent_in_10` / 10.
pub(crate) fn generate_trace(
    inputs: &[InTy],
    len: usize,
    data: &[u32],
    absent_in_10: usize,
) -> Vec<Vec<Option<Value>>> {
    let mut c = Choices { data, pos: 0 };
    let small = |c: &mut Choices| Value::Int(c.pick(7) as i64 - 3);
    let big = [
        i64::MAX,
        i64::MIN,
        4611686018427387904,
        -4611686018427387904,
        3037000500,
        -1,
    ];
    let floats = [
        0.0,
        1.0,
        -1.5,
        0.5,
        2.0,
        -0.0,
        3.25,
        1e300,
        -1e300,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.1,
        -7.0,
    ];
    (0..len)
        .map(|_| {
            inputs
                .iter()
                .map(|t| {
                    if c.pick(10) < absent_in_10 {
                        return None;
                    }
                    Some(match t {
                        Some(Ty::Int) if c.rarely(8) => Value::Int(c.one(&big)),
                        Some(Ty::Int) => small(&mut c),
                        Some(Ty::Float) => Value::Float(c.one(&floats)),
                        Some(Ty::Bool) => Value::Bool(c.pick(2) == 1),
                        None => match c.pick(16) {
                            0..=6 => small(&mut c),
                            7 => Value::Int(c.one(&big)),
                            8..=14 => Value::Float(c.one(&floats)),
                            _ => Value::Bool(c.pick(2) == 1),
                        },
                    })
                })
                .collect()
        })
        .collect()
}

/// The `.input` form of a trace, for failure messages.
fn show_trace(spec: &Spec, trace: &[Vec<Option<Value>>]) -> String {
    let names = spec.input_names();
    let mut out = String::new();
    for (step, row) in trace.iter().enumerate() {
        out.push_str(&format!("{step}:"));
        for (name, v) in names.iter().zip(row) {
            if let Some(v) = v {
                out.push_str(&format!(" {name} = {v}"));
            }
        }
        out.push('\n');
    }
    out
}

pub(crate) type Run = (Vec<Vec<Sample>>, Option<RuntimeError>);

/// Runs one tier: the outputs of every step before the first runtime error,
/// and that error.
pub(crate) fn run_tier(spec: &Spec, trace: &[Vec<Option<Value>>], tier: Tier) -> Run {
    run_monitor(&mut Monitor::builder(spec).tier(tier).build(), trace)
}

/// Runs `trace` on native regions alone ([`vigil::MonitorBuilder::regions_only`]): the
/// native-regions tier runs a whole-row program where the plan has one, which nearly every
/// generated spec has, so the regions would otherwise meet only declined rows.
pub(crate) fn run_regions_only(spec: &Spec, trace: &[Vec<Option<Value>>]) -> Run {
    let mut monitor = Monitor::builder(spec)
        .tier(Tier::NativeRegions)
        .regions_only()
        .build();
    run_monitor(&mut monitor, trace)
}

/// Runs `trace` on `monitor`, row by row, to its end or its first error.
pub(crate) fn run_monitor(monitor: &mut Monitor, trace: &[Vec<Option<Value>>]) -> Run {
    let mut outputs = Vec::new();
    for row in trace {
        match monitor.step(row) {
            Ok(samples) => outputs.push(samples.to_vec()),
            Err(e) => return (outputs, Some(runtime(e))),
        }
    }
    (outputs, None)
}

/// The trace a `Stepper` can be given: every cell that is not a scalar
/// (Int, Float, Bool) absent, as the stepper's row has no other values.
fn scalar_cells(trace: &[Vec<Option<Value>>]) -> Vec<Vec<Option<Value>>> {
    let scalar = |c: &Option<Value>| {
        c.clone()
            .filter(|v| matches!(v, Value::Int(_) | Value::Float(_) | Value::Bool(_)))
    };
    trace
        .iter()
        .map(|row| row.iter().map(scalar).collect())
        .collect()
}

/// Runs one tier through a `Stepper` (`scalar_cells` of the trace: other
/// cells are left unset), to its end or its first error; with the number
/// of rows the stepper completed on its kept kernel frame.
pub(crate) fn run_tier_stepper(
    spec: &Spec,
    trace: &[Vec<Option<Value>>],
    tier: Tier,
) -> (Run, u64) {
    let mut monitor = Monitor::builder(spec).tier(tier).build();
    let mut stepper = monitor.stepper();
    let mut outputs = Vec::new();
    for row in trace {
        for (k, cell) in row.iter().enumerate() {
            stepper
                .set(k, cell.as_ref())
                .expect("generated cells fit their inputs");
        }
        match stepper.step() {
            Ok(samples) => outputs.push(samples.to_vec()),
            Err(e) => return ((outputs, Some(runtime(e))), stepper.fast_rows()),
        }
    }
    let fast = stepper.fast_rows();
    ((outputs, None), fast)
}

/// The canonical run of `trace`, after checking that the native-whole batch
/// path gives the same.
fn canonical_and_batch(spec: &Spec, trace: &[Vec<Option<Value>>]) -> Run {
    let canon = run_tier(spec, trace, Tier::Canonical);
    let batch = run_tier_batch(spec, trace, Tier::NativeWhole);
    compare_runs(
        spec,
        trace,
        ("canonical", canon.clone()),
        ("native-whole batch", batch),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    canon
}

/// The runtime error of a step; generated rows always fit their inputs, so
/// a rejected row is a bug of the generator.
pub(crate) fn runtime(e: StepError) -> RuntimeError {
    match e {
        StepError::Runtime(e) => e,
        StepError::Row(e) => panic!("a generated row was rejected: {e}"),
    }
}

/// Runs one tier through the batch API (`Monitor::run_batch`), in batches
/// of up to 7 rows so that batch boundaries fall everywhere.
pub(crate) fn run_tier_batch(spec: &Spec, trace: &[Vec<Option<Value>>], tier: Tier) -> Run {
    let mut monitor = Monitor::builder(spec).tier(tier).build();
    run_batches(&mut monitor, trace, 7, |_, _| {})
}

/// Runs `trace` on `monitor` through the batch API in batches of `size`
/// rows, to its end or its first error; `before` sees the monitor and the
/// rows of each batch before it runs.
fn run_batches(
    monitor: &mut Monitor,
    trace: &[Vec<Option<Value>>],
    size: usize,
    mut before: impl FnMut(&mut Monitor, std::ops::Range<usize>),
) -> Run {
    let mut outputs = Vec::new();
    for (b, chunk) in trace.chunks(size).enumerate() {
        before(monitor, b * size..b * size + chunk.len());
        let mut rows = monitor.batch();
        for row in chunk {
            rows.push_row(row).expect("generated rows fit their inputs");
        }
        let mut out = vigil::OutputBatch::new();
        let result = monitor.run_batch(&rows, &mut out);
        outputs.extend(out.rows().map(|r| r.to_vec()));
        if let Err(e) = result {
            return (outputs, Some(runtime(e)));
        }
    }
    (outputs, None)
}

/// Compares canonical and reference; on disagreement, a message naming the
/// first differing step.
fn compare(spec: &Spec, trace: &[Vec<Option<Value>>]) -> Result<(), String> {
    let canon = run_tier(spec, trace, Tier::Canonical);
    let refer = reference::evaluate(spec.checked(), trace);
    compare_runs(spec, trace, ("canonical", canon), ("reference", refer))
}

/// Compares two runs of one spec over one trace: equal values at every step
/// (bitwise for floats) and the same runtime error (kind, stream, step).
pub(crate) fn compare_runs(
    spec: &Spec,
    trace: &[Vec<Option<Value>>],
    (a_name, (a, a_err)): (&str, Run),
    (b_name, (b, b_err)): (&str, Run),
) -> Result<(), String> {
    if a == b && a_err == b_err {
        return Ok(());
    }
    let names = spec.output_names();
    let step = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let show = |rows: &[Vec<Sample>]| match rows.get(step) {
        Some(row) => names
            .iter()
            .zip(row)
            .map(|(n, s)| format!("{n}={s}"))
            .collect::<Vec<_>>()
            .join(" "),
        None => "(no row)".into(),
    };
    Err(format!(
        "{a_name} != {b_name} at step {step}\n--- spec\n{}--- trace\n{}\
         --- {a_name}: {}\n    error: {:?}\n--- {b_name}: {}\n    error: {:?}",
        spec.checked().source,
        show_trace(spec, trace),
        show(&a),
        a_err.map(|e| e.to_string()),
        show(&b),
        b_err.map(|e| e.to_string()),
    ))
}

pub(crate) fn case_strategy() -> impl Strategy<Value = (Vec<u32>, usize, Vec<u32>)> {
    (
        vec(any::<u32>(), 0..300),
        0..=40usize,
        vec(any::<u32>(), 0..400),
    )
}

/// The cases of `case_strategy` drawn deterministically, for sweeps that
/// must not depend on proptest's case count.
fn deterministic_cases() -> impl Iterator<Item = (Vec<u32>, usize, Vec<u32>)> {
    let mut runner = TestRunner::deterministic();
    let strategy = case_strategy();
    std::iter::repeat_with(move || strategy.new_tree(&mut runner).unwrap().current())
}

proptest! {
    // 256 cases by default; PROPTEST_CASES overrides it.
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn canonical_equals_reference((spec_data, len, trace_data) in case_strategy()) {
        check_case(&spec_data, len, &trace_data, false)?;
    }

    /// As above, but the compound operand of an offset may also read streams
    /// scheduled after the reader, or the reader itself (`a = (b + 1)[1]`
    /// with `b` defined later; `z = default((z + x)[1], 0)`).
    /// Faster tiers == canonical, on traces from fully present (long fused
    /// stretches, warm-up rows, traps) through sparse (the kernels run rows
    /// with absent inputs under the hold rule) to never present.
    #[test]
    fn tiers_equal_canonical(
        (spec_data, len, trace_data) in case_strategy(),
        absent_in_10 in 0..=10usize,
    ) {
        check_tiers(&spec_data, len, &trace_data, absent_in_10)?;
    }

    /// Such reads order the reader after the stream read (a self read is a
    /// cycle, and the spec is rejected and skipped).
    #[test]
    fn canonical_equals_reference_late_reads_in_offsets((spec_data, len, trace_data) in case_strategy()) {
        check_case(&spec_data, len, &trace_data, true)?;
    }
}

/// Every faster tier gives the canonical tier's answer, and every program the
/// lowering produces verifies and round-trips through the IR text form.
fn check_tiers(
    spec_data: &[u32],
    len: usize,
    trace_data: &[u32],
    absent_in_10: usize,
) -> Result<(), TestCaseError> {
    let g = generate_spec(spec_data, true);
    let spec = Spec::parse("gen.dsrv", &g.source);
    prop_assume!(spec.is_ok(), "rejected spec");
    let spec = spec.unwrap();
    let monitor = Monitor::builder(&spec).tier(Tier::Quickened).build();
    for lowered in monitor.engine().lowered() {
        let text = scalar_ir::print(&lowered.program);
        scalar_ir::verify(&lowered.program)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let back =
            scalar_ir::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(
            &back,
            &lowered.program,
            "IR text does not round-trip:\n{}",
            text
        );
    }
    let trace = generate_trace(&g.inputs, len, trace_data, absent_in_10);
    let canon = run_tier(&spec, &trace, Tier::Canonical);
    let batch = run_tier_batch(&spec, &trace, Tier::NativeWhole);
    compare_runs(
        &spec,
        &trace,
        ("canonical", canon.clone()),
        ("native-whole batch", batch),
    )
    .map_err(TestCaseError::fail)?;
    compare_runs(
        &spec,
        &trace,
        ("canonical", canon.clone()),
        ("native regions only", run_regions_only(&spec, &trace)),
    )
    .map_err(TestCaseError::fail)?;
    for tier in [Tier::Quickened, Tier::NativeRegions, Tier::NativeWhole] {
        let run = run_tier(&spec, &trace, tier);
        compare_runs(
            &spec,
            &trace,
            ("canonical", canon.clone()),
            (tier.name(), run),
        )
        .map_err(TestCaseError::fail)?;
    }
    // The stepper, on the trace's scalar cells, against the canonical run
    // of the same cells.
    let scalars = scalar_cells(&trace);
    let canon = run_tier(&spec, &scalars, Tier::Canonical);
    for tier in [Tier::Canonical, Tier::Quickened, Tier::NativeWhole] {
        let (run, _) = run_tier_stepper(&spec, &scalars, tier);
        compare_runs(
            &spec,
            &scalars,
            ("canonical", canon.clone()),
            (&format!("{} stepper", tier.name()), run),
        )
        .map_err(TestCaseError::fail)?;
    }
    Ok(())
}

fn check_case(
    spec_data: &[u32],
    len: usize,
    trace_data: &[u32],
    late_reads_in_offsets: bool,
) -> Result<(), TestCaseError> {
    let g = generate_spec(spec_data, late_reads_in_offsets);
    let spec = Spec::parse("gen.dsrv", &g.source);
    prop_assume!(spec.is_ok(), "rejected spec");
    let spec = spec.unwrap();
    let trace = generate_trace(&g.inputs, len, trace_data, 3);
    compare(&spec, &trace).map_err(TestCaseError::fail)
}

/// The generator must make specs the checker accepts, cover every feature,
/// and not stop most runs with an early error: a generator producing only
/// rejected specs would make the property vacuous.
#[test]
fn generator_coverage() {
    let mut cases = deterministic_cases();
    let n = 400;
    let (mut accepted, mut clean, mut steps) = (0, 0, 0);
    let mut first_rejection = None;
    let features = [
        "default(",
        "is_defined(",
        "when(",
        "init(",
        "latch(",
        "update(",
        "abs(",
        "sqrt(",
        "min(",
        "max(",
        "floor(",
        "ceil(",
        "sin(",
        "cos(",
        "tan(",
        "if ",
        "then (if",
        " / ",
        " % ",
        " * ",
        "==",
        "!=",
        "&&",
        "||",
        "=>",
        "(!",
        "(-",
        ")[1]",
        ")[2]",
        "[0]",
        "<=",
        "4611686018427387904",
        "2.5e3",
        "in i0\n",
        "aux ",
        "var ",
        "List.fold(",
        "List.map(",
        "List.head(",
        "partial(",
        "Map.get(",
        ".1.0",
        "-> v * 2",
        "eval(if",
    ];
    let mut seen = vec![0usize; features.len()];
    let mut kinds = std::collections::BTreeMap::new();
    for k in 0..n {
        let (spec_data, len, trace_data) = cases.next().expect("the cases never end");
        let g = generate_spec(&spec_data, k % 2 == 1);
        match Spec::parse("gen.dsrv", &g.source) {
            Ok(spec) => {
                accepted += 1;
                for (i, f) in features.iter().enumerate() {
                    seen[i] += g.source.contains(f) as usize;
                }
                let trace = generate_trace(&g.inputs, len, &trace_data, 3);
                let (outs, err) = reference::evaluate(spec.checked(), &trace);
                clean += err.is_none() as usize;
                if let Some(e) = err {
                    *kinds.entry(e.kind.describe()).or_insert(0usize) += 1;
                }
                steps += outs.len();
            }
            Err(d) => {
                first_rejection.get_or_insert_with(|| format!("{}\n{d:?}", g.source));
            }
        }
    }
    eprintln!(
        "generator: {accepted}/{n} accepted, {clean} runs without runtime error, \
         {steps} steps evaluated, errors {kinds:?}"
    );
    for kind in [
        "integer overflow",
        "integer division by zero",
        "invalid operand",
    ] {
        assert!(
            kinds.contains_key(kind),
            "no generated run ends with {kind}"
        );
    }
    assert!(
        accepted * 100 >= n * 98,
        "only {accepted}/{n} generated specs pass the checker; first rejected:\n{}",
        first_rejection.unwrap_or_default()
    );
    assert!(
        clean * 100 >= accepted * 40,
        "too many runs stop with an error: {clean}/{accepted}"
    );
    for (f, k) in features.iter().zip(&seen) {
        assert!(*k > 0, "no accepted spec contains `{f}`");
    }
}

fn int_trace(values: &[Option<i64>]) -> Vec<Vec<Option<Value>>> {
    values.iter().map(|v| vec![v.map(Value::Int)]).collect()
}

/// Regression for a disagreement found by
/// `canonical_equals_reference_late_reads_in_offsets`: the compound operand
/// of an offset reads a stream declared later (`b`). Its value at step `s`
/// is `b(s) + 0`, so `a` at step `s` must be `b(s - 1)` (docs/language.md, "Offsets": "the
/// value `e` had `n` steps earlier"). The operand is evaluated at the current
/// step, so the reference to `b` orders `a` after `b`.
#[test]
fn offset_operand_reads_the_current_value_of_a_later_stream() {
    let spec = Spec::parse(
        "late.dsrv",
        "in x: Int\nout a: Int\nout b: Int\na = (b + 0)[1]\nb = x\n",
    )
    .unwrap();
    let trace = int_trace(&[Some(1), Some(2), Some(3)]);
    let d = Sample::Deferred;
    let (refer, err) = reference::evaluate(spec.checked(), &trace);
    assert_eq!(err, None);
    let a: Vec<Sample> = refer.iter().map(|r| r[0].clone()).collect();
    assert_eq!(
        a,
        [
            d,
            Sample::Value(Value::Int(1)),
            Sample::Value(Value::Int(2))
        ]
    );
    compare(&spec, &trace).unwrap_or_else(|m| panic!("{m}"));
}

/// The same situation through recursion: `(z + x)[1]` inside `z`'s own
/// definition reads `z` at the current step, so it is a same-step cycle and
/// the checker says so (the spec means `default(z[1] + x[1], 1)`).
#[test]
fn offset_operand_reading_its_own_stream_is_a_cycle() {
    let err = Spec::parse(
        "self.dsrv",
        "in x: Int\nout z: Int\nz = default((z + x)[1], 1)\n",
    )
    .unwrap_err();
    let messages: Vec<&str> = err.errors.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(messages, ["same-step cycle: z -> z"]);
}

/// The tier property must exercise the fused tier, not only its fallback:
/// over generated specs and fully present traces, the quickened tier's
/// whole-row programs and its regions (which take the rows a program
/// declines) run (after promotion, for temporal ones), decline, and trap.
#[test]
fn tier_coverage() {
    let mut cases = deterministic_cases();
    let (mut regions, mut runs, mut promotions, mut declines, mut fused_errors) = (0, 0, 0, 0, 0);
    let mut whole_rows = 0;
    for _ in 0..300 {
        let (spec_data, len, trace_data) = cases.next().expect("the cases never end");
        let g = generate_spec(&spec_data, true);
        let Ok(spec) = Spec::parse("gen.dsrv", &g.source) else {
            continue;
        };
        let trace = generate_trace(&g.inputs, len, &trace_data, 0);
        let mut monitor = Monitor::builder(&spec).tier(Tier::Quickened).build();
        regions += monitor.engine().lowered().count();
        for row in &trace {
            if monitor.step(row).is_err() {
                fused_errors += 1;
                break;
            }
        }
        let stats = monitor.stats();
        runs += stats.region_runs;
        whole_rows += stats.whole_rows;
        promotions += stats.promotions;
        declines += stats.declines.iter().map(|(_, n)| n).sum::<u64>();
    }
    eprintln!(
        "tiers: {regions} regions, {runs} region runs, {whole_rows} whole-row program rows, {promotions} promotions, {declines} declines, {fused_errors} runs ending in an error"
    );
    assert!(regions > 300 && runs > 1000 && promotions > 20 && declines > 20 && fused_errors > 10);
    assert!(whole_rows > 1000);
}

/// The tier property must exercise absent inputs on the native tiers: many
/// rows with an absent input run on the whole-row kernel (native-whole) and
/// in region programs, none declining (native-regions), at every
/// density the property draws, so it compares the hold rule in fused code
/// with the canonical tier's rather than passing by declining.
#[test]
fn presence_coverage() {
    let mut cases = deterministic_cases();
    let (mut whole, mut regions, mut sparse_rows) = (0u64, 0u64, 0u64);
    for k in 0..300 {
        let (spec_data, len, trace_data) = cases.next().expect("the cases never end");
        let g = generate_spec(&spec_data, true);
        let Ok(spec) = Spec::parse("gen.dsrv", &g.source) else {
            continue;
        };
        let trace = generate_trace(&g.inputs, len, &trace_data, 1 + k % 9);
        for tier in [Tier::NativeWhole, Tier::NativeRegions] {
            // Every row through the native regions: with a whole-row
            // program (nearly every generated spec has one), the
            // native-regions tier would run them on declined rows only.
            let mut monitor = match tier {
                Tier::NativeRegions => Monitor::builder(&spec).tier(tier).regions_only().build(),
                _ => Monitor::builder(&spec).tier(tier).build(),
            };
            for row in &trace {
                let before = monitor.stats();
                if monitor.step(row).is_err() {
                    break;
                }
                if row.iter().all(Option::is_some) {
                    continue;
                }
                let after = monitor.stats();
                match tier {
                    Tier::NativeWhole => {
                        sparse_rows += 1;
                        whole += u64::from(after.whole_rows > before.whole_rows);
                    }
                    // Regions ran and none declined the row.
                    _ => {
                        let declines =
                            |s: &vigil::Stats| s.declines.iter().map(|(_, n)| n).sum::<u64>();
                        let clean = declines(&after) == declines(&before);
                        regions += u64::from(after.region_runs > before.region_runs && clean);
                    }
                }
            }
        }
    }
    eprintln!(
        "presence: of {sparse_rows} rows with an absent input, {whole} ran on the native whole-row kernel and {regions} ran regions"
    );
    // (Regions that require their reads present still run 1,349 of these
    // rows cleanly, those whose regions read no absent value; with the hold
    // rule they run 1,965. The cases are deterministic.)
    assert!(whole > 1000 && whole * 4 > sparse_rows && regions > 1600);
}

/// The chain scenario over sparse rows (each row sets one of `x`, `y` and
/// `flag`, as `scripts/gen_traces.py` makes them) gives the canonical
/// outputs on every fused tier, per row and in batches, and no program
/// declines a row because a value is absent: the only declines left are
/// the rows before every input has come (nothing to hold yet) and before
/// the offsets' history fills.
#[test]
fn sparse_chain_runs_fused_without_declining_for_absence() {
    let spec = Spec::parse("chain.dsrv", include_str!("../../examples/chain.dsrv"))
        .expect("the chain example is valid");
    let mut next = 7u64;
    let trace: Vec<Vec<Option<Value>>> = (0..600)
        .map(|_| {
            next = next
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = (next >> 33) as i64 % 41 - 20;
            let k = (next >> 40) as usize % 3;
            let mut row = vec![None, None, None];
            row[k] = Some(if k == 2 {
                Value::Bool(v > 0)
            } else {
                Value::Int(v)
            });
            row
        })
        .collect();
    let canon = run_tier(&spec, &trace, Tier::Canonical);
    let batch = run_tier_batch(&spec, &trace, Tier::NativeWhole);
    compare_runs(
        &spec,
        &trace,
        ("canonical", canon.clone()),
        ("batch", batch),
    )
    .expect("batches equal canonical");
    for tier in [Tier::Quickened, Tier::NativeRegions, Tier::NativeWhole] {
        let mut monitor = Monitor::builder(&spec).tier(tier).build();
        let run = run_monitor(&mut monitor, &trace);
        compare_runs(
            &spec,
            &trace,
            ("canonical", canon.clone()),
            (tier.name(), run),
        )
        .expect("every tier equals canonical");
        let stats = monitor.stats();
        for (why, n) in &stats.declines {
            assert!(
                why.contains("never had a value") || why.contains("offset history"),
                "{tier}: {n} rows declined for {why}"
            );
            assert!(*n <= 10, "{tier}: {n} rows declined for {why}");
        }
        if tier == Tier::NativeWhole {
            assert!(
                stats.whole_rows > 590,
                "{tier}: {} kernel rows",
                stats.whole_rows
            );
        }
    }
}

/// The stepper half of the tier property must complete many rows on its
/// kept kernel frame (the fast path) on both whole-row tiers, and leave
/// many to the general path (declined rows, and the rows after them).
#[test]
fn stepper_coverage() {
    let mut cases = deterministic_cases();
    for tier in [Tier::Quickened, Tier::NativeWhole] {
        let (mut fast, mut rows) = (0, 0);
        for k in 0..300 {
            let (spec_data, len, trace_data) = cases.next().expect("the cases never end");
            let g = generate_spec(&spec_data, true);
            let Ok(spec) = Spec::parse("gen.dsrv", &g.source) else {
                continue;
            };
            let trace = scalar_cells(&generate_trace(&g.inputs, len, &trace_data, k % 4));
            let ((outputs, _), f) = run_tier_stepper(&spec, &trace, tier);
            fast += f;
            rows += outputs.len() as u64;
        }
        eprintln!("{tier} stepper: {fast} of {rows} rows on the kept frame");
        assert!(fast > 500 && rows - fast > 1000, "{tier}: {fast} of {rows}");
    }
}

/// The batch half of the tier property must run both batch kernels: the
/// one testing every row's inputs (batches with an absent cell) and the one
/// testing none (batches whose columns each hold one type), each for many
/// rows, so the sweep below compares them both with the canonical tier.
#[test]
fn batch_kernel_coverage() {
    let mut cases = deterministic_cases();
    let (mut batch_rows, mut typed_rows) = (0, 0);
    for k in 0..300 {
        let (spec_data, len, trace_data) = cases.next().expect("the cases never end");
        let g = generate_spec(&spec_data, true);
        let Ok(spec) = Spec::parse("gen.dsrv", &g.source) else {
            continue;
        };
        let trace = generate_trace(&g.inputs, len, &trace_data, k % 4);
        let mut monitor = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
        for chunk in trace.chunks(7) {
            let mut rows = monitor.batch();
            for row in chunk {
                rows.push_row(row).expect("generated rows fit their inputs");
            }
            if monitor
                .run_batch(&rows, &mut vigil::OutputBatch::new())
                .is_err()
            {
                break;
            }
        }
        let stats = monitor.stats();
        batch_rows += stats.batch_rows;
        typed_rows += stats.typed_batch_rows;
    }
    eprintln!("batch kernels: {batch_rows} rows, {typed_rows} of them untested");
    assert!(typed_rows > 200 && batch_rows - typed_rows > 200);
}

/// `auto`'s tier-up (canonical, then the whole-row program interpreted, then
/// native, each switch at a row boundary) gives the canonical run's outputs
/// and errors whatever rows it switches at, through every way rows come in:
/// one at a time, a `Stepper` and batches. The switches are forced at rows
/// picked from the case (`tier_up_one`) so that every stage runs rows; a
/// coverage guard fails if the runs stop reaching native code with rows
/// still to go, or stop running rows on each stage.
#[test]
fn tier_up_at_any_row_equals_canonical() {
    let mut cases = deterministic_cases();
    let (mut checked, mut native_switches) = (0, 0);
    let (mut canonical_rows, mut quick_rows, mut native_rows) = (0, 0, 0);
    for k in 0..200 {
        let (spec_data, len, trace_data) = cases.next().expect("the cases never end");
        let g = generate_spec(&spec_data, true);
        let Ok(spec) = Spec::parse("gen.dsrv", &g.source) else {
            continue;
        };
        let trace = generate_trace(&g.inputs, len, &trace_data, k % 4);
        let canon = run_tier(&spec, &trace, Tier::Canonical);
        // The rows before the first and the second switch.
        let pick = |i: usize| trace_data.get(i).copied().unwrap_or(0) as usize;
        let first = pick(0) % (trace.len() + 1);
        let second = first + pick(1) % (trace.len() + 1 - first);
        let switch_at = |m: &mut Monitor, row: usize| {
            if row == first || row == second {
                m.tier_up_one();
            }
        };
        let build = || Monitor::builder(&spec).tier_up_after(u64::MAX).build();
        let (mut m, mut outputs, mut error) = (build(), Vec::new(), None);
        for (r, row) in trace.iter().enumerate() {
            switch_at(&mut m, r);
            let tier = m.tier();
            match m.step(row) {
                Ok(samples) => outputs.push(samples.to_vec()),
                Err(e) => {
                    error = Some(runtime(e));
                    break;
                }
            }
            match tier {
                Tier::Canonical => canonical_rows += 1,
                Tier::Quickened => quick_rows += 1,
                Tier::NativeWhole => native_rows += 1,
                _ => {}
            }
        }
        let stats = m.stats();
        if stats.tier_up.is_some_and(|up| {
            up.native_at_row
                .is_some_and(|n| (n as usize) < outputs.len())
        }) {
            native_switches += 1;
        }
        compare_runs(
            &spec,
            &trace,
            ("canonical", canon.clone()),
            ("auto, switched", (outputs, error)),
        )
        .unwrap_or_else(|e| panic!("rows {first} and {second}: {e}"));
        // A stepper on the scalar cells, switched at the same rows: one
        // stepper for each stretch between switches, so that it keeps its
        // frame across the rows of a stretch.
        let scalars = scalar_cells(&trace);
        let canon_scalars = run_tier(&spec, &scalars, Tier::Canonical);
        let mut m = build();
        let (mut outputs, mut error) = (Vec::new(), None);
        let stretches = [0..first, first..second, second..scalars.len()];
        'stretches: for (i, stretch) in stretches.into_iter().enumerate() {
            if i > 0 {
                m.tier_up_one();
            }
            let mut stepper = m.stepper();
            for row in &scalars[stretch] {
                for (c, cell) in row.iter().enumerate() {
                    stepper
                        .set(c, cell.as_ref())
                        .expect("generated cells fit their inputs");
                }
                match stepper.step() {
                    Ok(samples) => outputs.push(samples.to_vec()),
                    Err(e) => {
                        error = Some(runtime(e));
                        break 'stretches;
                    }
                }
            }
        }
        compare_runs(
            &spec,
            &scalars,
            ("canonical", canon_scalars),
            ("auto stepper, switched", (outputs, error)),
        )
        .unwrap_or_else(|e| panic!("rows {first} and {second}: {e}"));
        // Batches of 5 rows, switched before the batches holding those rows
        // (once for each).
        let batches = run_batches(&mut build(), &trace, 5, |m, rows| {
            for _ in [first, second].iter().filter(|r| rows.contains(r)) {
                m.tier_up_one();
            }
        });
        compare_runs(
            &spec,
            &trace,
            ("canonical", canon),
            ("auto batches, switched", batches),
        )
        .unwrap_or_else(|e| panic!("rows {first} and {second}: {e}"));
        checked += 1;
    }
    eprintln!(
        "tier-up: {checked} specs, {native_switches} reached native code mid-run; rows: {canonical_rows} canonical, {quick_rows} quickened, {native_rows} native"
    );
    assert!(
        checked > 150 && native_switches > 50,
        "{checked} specs, {native_switches} switches"
    );
    assert!(canonical_rows > 700 && quick_rows > 250 && native_rows > 350);
}

/// A deterministic sweep of the tier property (independent of proptest's
/// case count), so a regression in any faster tier shows here too.
#[test]
fn tiers_equal_canonical_sweep() {
    let mut cases = deterministic_cases();
    let mut checked = 0;
    for k in 0..150 {
        let (spec_data, len, trace_data) = cases.next().expect("the cases never end");
        match check_tiers(&spec_data, len, &trace_data, k % 11) {
            Ok(()) => checked += 1,
            Err(TestCaseError::Reject(_)) => {}
            Err(TestCaseError::Fail(why)) => panic!("{why}"),
        }
    }
    assert!(checked > 140, "only {checked} specs checked");
}

/// `generate_spec` with a Str input `lbl` and streams the whole-row kernel
/// leaves to the canonical tier (its tail): a Str stream, a Bool stream
/// reading it, and an Int stream reading that, with history and a division
/// that traps when the first Int input is 0 — declared before the generated
/// streams (so tail streams, and their rings, come first in the schedule
/// and layout) or after them. The trace's last column is `lbl`.
fn generate_tail_case(
    spec_data: &[u32],
    len: usize,
    trace_data: &[u32],
    absent_in_10: usize,
) -> Option<(Spec, Vec<Vec<Option<Value>>>)> {
    let g = generate_spec(spec_data, true);
    let divisor = g
        .inputs
        .iter()
        .position(|t| *t == Some(Ty::Int))
        .map_or_else(|| "1".to_string(), |k| format!("i{k}"));
    let tail = format!(
        "in lbl: Str\nout echo: Str\necho = default(lbl, \"-\")\nout hit: Bool\nhit = echo == \"a\"\n\
         out quot: Int\nquot = if hit then 7 / {divisor} else default(quot[1], 0) + 1\n"
    );
    let first = trace_data.first().is_some_and(|d| d % 2 == 0);
    let source = if first {
        tail + &g.source
    } else {
        g.source.clone() + &tail
    };
    let spec = Spec::parse("gen.dsrv", &source).ok()?;
    let mut trace = generate_trace(&g.inputs, len, trace_data, absent_in_10);
    // `lbl` is the last input declared in both orders (inputs are ordered
    // by declaration, and the generated ones come first or last).
    let names = spec.input_names();
    let at = names
        .iter()
        .position(|&n| n == "lbl")
        .expect("declared above");
    for (step, row) in trace.iter_mut().enumerate() {
        let pick = trace_data.get(step).copied().unwrap_or(0) as usize / 7;
        let v = ["a", "b", "a", ""][pick % 4];
        let cell = (pick % 5 != 4).then(|| Value::Str(v.into()));
        row.insert(at, cell);
    }
    Some((spec, trace))
}

/// The tiers agree with canonical on specs whose whole-row kernel leaves a
/// tail (Str streams and what reads them) to the canonical tier, row by
/// row and in batches; and the kernel does run such specs (rows it
/// completes, the tail's traps and the kernel's), so the check cannot pass
/// on fallbacks alone.
#[test]
fn tiers_equal_canonical_with_a_tail() {
    let mut cases = deterministic_cases();
    let (mut checked, mut whole_rows, mut tail_errors, mut kernel_errors) = (0, 0, 0, 0);
    for k in 0..150 {
        let (spec_data, len, trace_data) = cases.next().expect("the cases never end");
        let Some((spec, trace)) = generate_tail_case(&spec_data, len, &trace_data, k % 3) else {
            continue;
        };
        let canon = canonical_and_batch(&spec, &trace);
        compare_runs(
            &spec,
            &trace,
            ("canonical", canon.clone()),
            ("native regions only", run_regions_only(&spec, &trace)),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        for tier in [Tier::Quickened, Tier::NativeRegions, Tier::NativeWhole] {
            let run = run_tier(&spec, &trace, tier);
            compare_runs(
                &spec,
                &trace,
                ("canonical", canon.clone()),
                (tier.name(), run),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
        let mut m = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
        if m.tier() != Tier::NativeWhole {
            // Every generated stream reads an untyped input: no kernel.
            continue;
        }
        for row in &trace {
            if let Err(e) = m.step(row) {
                match runtime(e).stream.as_str() {
                    "quot" => tail_errors += 1,
                    _ => kernel_errors += 1,
                }
                break;
            }
        }
        whole_rows += m.stats().whole_rows;
        checked += 1;
    }
    eprintln!(
        "tails: {checked} specs, {whole_rows} kernel rows, {tail_errors} tail errors, {kernel_errors} kernel errors"
    );
    assert!(checked > 100 && whole_rows > 500 && tail_errors > 5 && kernel_errors > 5);
}

/// A row on which both a tail stream and a later kernel stream fail reports
/// the tail's error on every tier (the first in schedule order), though the
/// kernel, which runs first, meets its own.
#[test]
fn the_first_error_in_schedule_order_wins_over_the_kernels() {
    let spec = Spec::parse(
        "t.dsrv",
        "in x: Int\nin lbl: Str\nout hit: Bool\nhit = lbl == \"a\"\nout quot: Int\n\
         quot = if hit then 7 / x else 0\nout k: Int\nk = 10 / x\n",
    )
    .unwrap();
    let row = |x: i64, l: &str| vec![Some(Value::Int(x)), Some(Value::Str(l.into()))];
    for (label, stream) in [("a", "quot"), ("b", "k")] {
        let trace = vec![row(1, "a"), row(2, "b"), row(0, label)];
        for tier in Tier::ALL {
            let (outputs, error) = run_tier(&spec, &trace, tier);
            let error = error.unwrap_or_else(|| panic!("{tier:?} ran past the division"));
            assert_eq!(
                (outputs.len(), error.stream.as_str(), error.step),
                (2, stream, 2),
                "{tier:?}"
            );
        }
        let mut m = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
        for r in &trace {
            let _ = m.step(r);
        }
        assert_eq!(m.tier(), Tier::NativeWhole);
        assert_eq!(m.stats().whole_rows, 2, "the kernel ran the first rows");
    }
}

/// Converts `v` to the representation `rep` picks (0 Int, 1 Float, 2 Bool).
fn to_rep(v: &Value, rep: u32) -> Value {
    let f = match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        other => return other.clone(),
    };
    match (rep, v) {
        (0, Value::Int(i)) => Value::Int(*i),
        (0, _) => Value::Int(if f.is_finite() {
            f.clamp(-3.0, 3.0) as i64
        } else {
            1
        }),
        (1, _) => Value::Float(f),
        _ => Value::Bool(f > 0.0),
    }
}

/// A generated spec with untyped inputs, and a trace in which each untyped
/// input keeps one representation (picked from the data) except on about
/// one row in `contradict_in`, where it has another.
fn speculation_case(
    spec_data: &[u32],
    len: usize,
    trace_data: &[u32],
    contradict_in: u32,
) -> Option<(Spec, Vec<Vec<Option<Value>>>)> {
    let g = generate_spec(spec_data, true);
    if !g.inputs.iter().any(Option::is_none) {
        return None;
    }
    let spec = Spec::parse("gen.dsrv", &g.source).ok()?;
    let mut trace = generate_trace(&g.inputs, len, trace_data, 1);
    let at = |i: usize| {
        trace_data
            .get(i % trace_data.len().max(1))
            .copied()
            .unwrap_or(0)
    };
    for (k, t) in g.inputs.iter().enumerate() {
        if t.is_some() {
            continue;
        }
        let rep = at(k) % 3;
        for (i, row) in trace.iter_mut().enumerate() {
            // Contradict about one row in `contradict_in` (never the first).
            let against = i > 0 && (i as u32 ^ at(k)).is_multiple_of(contradict_in);
            let r = if against {
                (rep + 1 + at(i) % 2) % 3
            } else {
                rep
            };
            // The generator's values run out with its data (then every
            // value is absent): these are made from the data, cycled.
            let d = at(i * 3 + k);
            row[k] = (d % 10 != 0).then(|| to_rep(&Value::Int(i64::from(d % 7) - 3), r));
        }
    }
    Some((spec, trace))
}

/// Untyped inputs are speculated: the tiers agree with canonical whether the
/// speculation holds, is contradicted now and then (those rows decline), or
/// is given up; and the property is not vacuous: speculation begins, fused
/// programs complete rows on it, and it is given up in some runs.
#[test]
fn tiers_equal_canonical_when_speculating_on_untyped_inputs() {
    let mut cases = deterministic_cases();
    let (mut checked, mut speculating, mut fused, mut given_up) = (0, 0, 0, 0);
    for k in 0..200 {
        let (spec_data, len, trace_data) = cases.next().expect("the cases never end");
        // Mostly consistent traces, and some where one value in two
        // contradicts (to give speculation up, the traces must be long).
        let contradict_in = [40, 40, 2][k % 3];
        let rows = len * if contradict_in == 2 { 40 } else { 8 };
        let Some((spec, trace)) = speculation_case(&spec_data, rows, &trace_data, contradict_in)
        else {
            continue;
        };
        let canon = canonical_and_batch(&spec, &trace);
        for tier in [
            Tier::Quickened,
            Tier::NativeRegions,
            Tier::NativeWhole,
            Tier::Auto,
        ] {
            let mut m = Monitor::builder(&spec).tier(tier).build();
            let (outputs, error) = run_monitor(&mut m, &trace);
            compare_runs(
                &spec,
                &trace,
                ("canonical", canon.clone()),
                (tier.name(), (outputs, error)),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let stats = m.stats();
            let said = stats.speculation.unwrap_or_default();
            if said.starts_with("speculating") {
                speculating += 1;
                fused += stats.whole_rows + stats.region_runs;
            }
            given_up += u64::from(said.contains("given up"));
        }
        checked += 1;
    }
    eprintln!(
        "speculation: {checked} specs, {speculating} runs speculating, {fused} fused completions, {given_up} given up"
    );
    assert!(checked > 50 && speculating > 50 && fused > 2000 && given_up > 3);
}

/// A canonical run that `fusion` places before the islands of a program it
/// does not read raised its error first, though a node of those islands,
/// earlier in the stream, fails at the same step on the canonical tier
/// (found by `tiers_equal_canonical`: here the islands speculate on the
/// untyped `i0`, and the `dynamic` after them fails too). The fused tiers
/// now rerun the stream in node order and report the canonical tier's
/// error.
#[test]
fn an_error_of_a_canonical_run_placed_before_islands_is_reported_in_node_order() {
    let spec = Spec::parse(
        "order.dsrv",
        "in i0\nout s1: Int\n\
         s1 = (if ((i0 + i0[1]) == (i0[1] + i0[1])) then \
         partial(\\u: Int, v: Int -> u - v, i0)(default(eval(if true then \"i0 - i0\" else \"i0 * 3\"), 1)) \
         else abs((if 0 == 0 then 0 else (0 / 0))))\n",
    )
    .unwrap();
    let trace = vec![
        vec![Some(Value::Int(-3))],
        vec![Some(Value::Bool(false))],
        vec![Some(Value::Int(-3))],
    ];
    let canon = run_tier(&spec, &trace, Tier::Canonical);
    let err = canon.1.as_ref().expect("step 1 fails");
    assert_eq!((err.step, err.op), (1, "addition"));
    for tier in Tier::ALL {
        compare_runs(
            &spec,
            &trace,
            ("canonical", canon.clone()),
            (tier.name(), run_tier(&spec, &trace, tier)),
        )
        .unwrap_or_else(|m| panic!("{m}"));
    }
}
