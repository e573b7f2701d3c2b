//! The plan tier of a property file (issue 39): its properties compiled into a DSRV
//! specification, run by a [`Monitor`] on any tier, where that is exact — the delayed
//! semantics over a trace whose steps lie on one regular grid, but for a few `U`s — and the
//! STL evaluator (`ops.rs`) otherwise, chosen per run ([`StlRun`]).
//!
//! **Pastification on a fixed period.** On a grid of period p where every signal is sampled at
//! every grid time, each formula node n has a lag ℓ (its horizon in steps) and becomes a stream
//! whose value at step k is n's verdict for the time of step k − ℓ: a comparison's robustness
//! (or Bool) now, `!` its negation, `&&`/`||` the minimum/maximum of its operands read at the
//! offsets that align them, and `G[a,b]ψ`/`F[a,b]ψ` (ℓ = b/p + ℓψ) a count window of ψ's
//! stream over the last (b − a)/p + 1 steps, and `φ U[a,b] ψ` (ℓ = b/p + max(ℓφ, ℓψ); `a`
//! plays no part in the evaluator) a pipeline of 2·b/p streams: the evaluator's
//! `max_j min(ψ(t+j+o), min_{i≤j} φ(t+i))`, j = 0..=b/p, folded in its order
//! (`Lowering::until`). The evaluator pairs `U`'s operands' verdicts by position in caches
//! each pruned from its own newest verdict, so where their horizons differ ψ is read o steps
//! off φ's time, o moving from 0 to ℓφ − ℓψ over the first verdicts: a pipeline per o, chosen
//! by the step. An operand that repeats its verdict at each sample of a step (`true` over
//! several signals), and a `U[a,0]` whose operands differ in horizon or emit sample, decline.
//! The evaluator gives that same verdict at step k, with two of its timing rules kept here
//! (docs/language.md, "STL properties"):
//!
//! - a step's samples are taken one at a time in order of signal name, and each operator sees
//!   only its own signals' samples (all of them where it reads none); a `G`/`F` with `b > 0`
//!   gives its verdict at its first sample of step k, so where its operand's newest value comes
//!   at a later sample of that step, the window lacks it (`(b − a)/p` values, vacuous when
//!   that is none); a `U` with `b > 0` too, so where φ's newest value comes later its
//!   interval is one value shorter, and where only ψ's does its last term is φ's running
//!   minimum alone (ψ read as unknown: NaN, which `f64::min` passes over, or `false`) —
//!   `emit` below is the sample at which each node gives its verdict;
//! - `true`, `false` (and `!`, `G[0,0]`, `F[0,0]` over them) give their verdict at every sample
//!   they see, so a property that is one repeats its verdict once per signal (`copies`).
//!
//! Verdicts of one step come property by property, each from step ℓ on, and the last ℓ steps'
//! times never get one: the evaluator's order and its end. The values are the evaluator's bit
//! for bit: `min`/`max` are `f64::min`/`max` on every tier, with the same operand order, and a
//! count window's `min`/`max` keeps the latest of equal values, as the evaluator's deque does.
//!
//! A run starts on the evaluator; its second step gives the period, and the plan is built then
//! (the first step fed to it again). A step off the grid (a signal missing, samples of two
//! times, a time not one period on, a value not finite) moves the run back to the evaluator for
//! good: a fresh one is given the last steps again (as many as the longest horizon spans, all
//! the state a delayed verdict can read; twice that where a property has a `U`, for the fresh
//! evaluator's pairing of its operands to settle), their verdicts discarded since the plan gave
//! them.
//!
//! A step on the grid costs what the plan's kernel costs, and allocates nothing: its samples
//! are set in place in the row of the monitor's stepper (an `OwnedStepper`, the whole-row
//! kernel's fast path on native-whole), the verdicts read by position from its outputs into
//! the caller's buffer ([`StlRun::step_into`]), and the samples copied into a ring of the last
//! steps, one flat buffer of a sample per signal a step, overwritten from its oldest step once
//! full.

use super::{
    Emitted, Formula, FormulaId, Semantics, SignalId, StlError, StlMonitor, StlSample, StlSpec,
    Synchronization, Threshold, Verdict,
};
use crate::monitor::{Monitor, OwnedStepper, Spec, Tier};
use std::fmt::Write as _;
use std::time::Duration;

/// The most steps a property's horizon, or a window, may span on the plan: the steps the run
/// keeps to move back to the evaluator, and a count window's values.
pub const MAX_PLAN_STEPS: u64 = 1_000_000;

/// The most steps a `U[a,b]` may span on the plan (b/p): it unrolls into two streams per step
/// of its interval, so a longer one stays on the evaluator.
pub const MAX_UNTIL_STEPS: u64 = 1_000;

/// A property file compiled onto the DSRV plan for one period.
#[derive(Clone, Debug)]
pub struct StlPlan {
    /// The specification's text: an input `s<i>` per signal (in [`StlSpec::signals`]' order),
    /// an output `p<i>` per property, an auxiliary stream per formula node.
    pub text: String,
    /// Per property: its lag (the steps from a time to its verdict) and how many times a step
    /// repeats its verdict.
    props: Vec<(u64, usize)>,
    period: Duration,
    quantitative: bool,
    /// Whether a property has a `U`: a fresh evaluator pairs its operands otherwise over its
    /// first verdicts, so a move back to it replays more steps (`StlPlan::replayed`).
    settles: bool,
}

/// What a formula node compiles to.
struct Lowered {
    /// The stream holding its verdicts.
    name: String,
    /// Its horizon, in steps.
    lag: u64,
    /// The sample (by rank of signal name) of a step at which it gives its verdict.
    emit: usize,
    /// How many samples of a step give its verdict.
    copies: usize,
}

/// One chain of a `U` (`Lowering::until`): ψ read at one offset from φ.
struct Chain {
    /// ψ's stream, shifted to that offset.
    psi: String,
    /// Whether ψ's value of the interval's last step is in by the verdict's sample.
    psi_last: bool,
    /// The best term so far, and the step of the interval it has reached.
    u: String,
    last: u64,
    /// Whether terms are still to come.
    open: bool,
}

struct Lowering<'a> {
    spec: &'a StlSpec,
    quantitative: bool,
    vars: &'a [Option<f64>],
    period: u128,
    /// Each signal's place among the signals sorted by name.
    rank: Vec<usize>,
    text: String,
    nodes: usize,
    /// Whether a property has a `U` (`StlPlan::settles`).
    settles: bool,
}

impl StlPlan {
    /// Compiles `spec`'s properties for a trace of period `period`, or says why they cannot
    /// run on the plan. `vars` are the variables' values by `VarId` (`None`: shown as `$name`,
    /// for `vigil explain`; such a text does not parse).
    pub(crate) fn lower(
        spec: &StlSpec,
        semantics: Semantics,
        vars: &[Option<f64>],
        period: Duration,
    ) -> Result<StlPlan, String> {
        static_decline(spec, semantics, vars)?;
        if period.is_zero() {
            return Err("the trace's period is zero".into());
        }
        let mut names: Vec<(usize, &str)> = spec
            .signals
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.as_str()))
            .collect();
        names.sort_by(|a, b| a.1.cmp(b.1));
        let mut rank = vec![0; names.len()];
        for (r, (i, _)) in names.iter().enumerate() {
            rank[*i] = r;
        }
        let quantitative = semantics == Semantics::DelayedQuantitative;
        let ty = if quantitative { "Float" } else { "Bool" };
        let mut l = Lowering {
            spec,
            quantitative,
            vars,
            period: period.as_nanos(),
            rank,
            text: String::new(),
            nodes: 0,
            settles: false,
        };
        for (i, s) in spec.signals.iter().enumerate() {
            let _ = writeln!(l.text, "in s{i}: Float  // {s}");
        }
        let all: Vec<SignalId> = (0..spec.signals.len() as u32).map(SignalId).collect();
        let mut props = Vec::new();
        for (i, p) in spec.properties.iter().enumerate() {
            let root = l.node(p.root, &all)?;
            if root.lag > MAX_PLAN_STEPS {
                return Err(format!(
                    "`{}` spans {} steps of the trace, more than {MAX_PLAN_STEPS}",
                    p.name, root.lag
                ));
            }
            let _ = writeln!(
                l.text,
                "out p{i}: {ty}  // {}\np{i} = {}",
                p.name, root.name
            );
            props.push((root.lag, root.copies));
        }
        Ok(StlPlan {
            text: l.text,
            props,
            period,
            quantitative,
            settles: l.settles,
        })
    }

    /// The most steps a property's verdict waits for.
    pub fn max_lag(&self) -> u64 {
        self.props.iter().map(|p| p.0).max().unwrap_or(0)
    }

    /// How many of the last steps a move back to the evaluator gives a fresh one: those the
    /// longest horizon spans, all the state a delayed verdict reads — and as many again where
    /// a property has a `U`, since a fresh evaluator pairs its operands otherwise until its
    /// caches are pruned, over its first verdicts (each U's for a time at most its operands'
    /// horizon on, itself less than the property's), so that its verdicts after the move are
    /// the first evaluator's. That is so where the operands' horizons differ (o moves), and
    /// where they are equal too once the step that moved the run lacks a signal's sample
    /// without synchronization: one operand's verdicts then fall a step behind the other's,
    /// and a pairing by position reads caches a fresh evaluator has not yet pruned
    /// (`a_move_under_no_synchronization_keeps_the_untils_verdicts`).
    fn replayed(&self) -> u64 {
        let lag = self.max_lag();
        if self.settles { 2 * lag + 2 } else { lag + 2 }
    }
}

/// Why a property file under `semantics` cannot run on the plan whatever the trace.
fn static_decline(
    spec: &StlSpec,
    semantics: Semantics,
    vars: &[Option<f64>],
) -> Result<(), String> {
    if !matches!(
        semantics,
        Semantics::DelayedQuantitative | Semantics::DelayedQualitative
    ) {
        return Err(format!(
            "the {} semantics gives verdicts as they are decided (only the delayed ones run on the plan)",
            semantics.name()
        ));
    }
    if spec.signals.is_empty() {
        return Err("the properties read no signal".into());
    }
    for (f, _) in &spec.formulas {
        match f {
            Formula::Compare {
                threshold: Threshold::Const(c),
                ..
            } if !c.is_finite() => return Err(format!("the threshold {c} is not finite")),
            Formula::Compare {
                threshold: Threshold::Var(v),
                ..
            } => {
                if let Some(Some(c)) = vars.get(v.0 as usize)
                    && !c.is_finite()
                {
                    return Err(format!(
                        "the variable `${}` is {c}, not finite",
                        spec.vars[v.0 as usize]
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

impl Lowering<'_> {
    /// Defines a stream of the node's values; returns its name.
    fn define(&mut self, expr: &str) -> String {
        let ty = if self.quantitative { "Float" } else { "Bool" };
        self.define_typed(expr, ty)
    }

    /// Defines a stream of type `ty`; returns its name.
    fn define_typed(&mut self, expr: &str, ty: &str) -> String {
        let name = format!("n{}", self.nodes);
        self.nodes += 1;
        let _ = writeln!(self.text, "aux {name}: {ty}\n{name} = {expr}");
        name
    }

    /// A stream read `by` steps back (a default before it has that many: those steps give no
    /// verdict).
    fn back(&self, name: &str, by: u64) -> String {
        let zero = if self.quantitative { "0.0" } else { "false" };
        match by {
            0 => name.to_string(),
            _ => format!("default({name}[{by}], {zero})"),
        }
    }

    fn negate(&self, e: &str) -> String {
        if self.quantitative {
            format!("-({e})")
        } else {
            format!("!({e})")
        }
    }

    /// A bound in steps, if it is a whole number of them.
    fn steps(&self, d: Duration, what: impl Fn() -> String) -> Result<u64, String> {
        let n = d.as_nanos();
        if !n.is_multiple_of(self.period) {
            return Err(format!(
                "the interval bound {} s of `{}` is not a multiple of the trace's period ({} s)",
                d.as_secs_f64(),
                what(),
                // In nanoseconds, as a u128: a period between two times in `Duration` may
                // not fit a u64 of them.
                self.period as f64 / 1e9
            ));
        }
        u64::try_from(n / self.period)
            .ok()
            .filter(|&s| s <= MAX_PLAN_STEPS)
            .ok_or_else(|| {
                format!(
                    "`{}` spans more than {MAX_PLAN_STEPS} steps of the trace",
                    what()
                )
            })
    }

    /// A number as a DSRV literal that reads back as the same f64 (a negative one negated).
    fn literal(&self, threshold: Threshold) -> String {
        let c = match threshold {
            Threshold::Const(c) => c,
            Threshold::Var(v) => match self.vars.get(v.0 as usize).copied().flatten() {
                Some(c) => c,
                None => return format!("${}", self.spec.vars[v.0 as usize]),
            },
        };
        // `{:?}` is the shortest text that parses back to the same f64, with a dot or an
        // exponent (a Float literal); the sign is a negation, which is exact.
        if c.is_sign_negative() {
            format!("(-{:?})", -c)
        } else {
            format!("{c:?}")
        }
    }

    /// A comparison: as `ops::build`, `x >= c` is `!(x < c)` and `x <= c` is `!(x > c)`; the
    /// robustness of `x > c` is `x - c`, of `x < c` is `c - x`.
    fn compare(&mut self, signal: SignalId, cmp: super::Cmp, threshold: Threshold) -> Lowered {
        let (x, c) = (format!("s{}", signal.0), self.literal(threshold));
        let (greater, negated) = match cmp {
            super::Cmp::Gt => (true, false),
            super::Cmp::Lt => (false, false),
            super::Cmp::Ge => (false, true),
            super::Cmp::Le => (true, true),
        };
        let atom = match (self.quantitative, greater) {
            (true, true) => format!("({x} - {c})"),
            (true, false) => format!("({c} - {x})"),
            (false, true) => format!("({x} > {c})"),
            (false, false) => format!("({x} < {c})"),
        };
        let expr = if negated { self.negate(&atom) } else { atom };
        Lowered {
            name: self.define(&expr),
            lag: 0,
            emit: self.rank[signal.0 as usize],
            copies: 1,
        }
    }

    /// `&&`, `||` or `->` (`!l || r`) of two lowered operands, aligned by offsets; the
    /// operator's `combine(l, r)` is `l.min(r)` (`l.max(r)`), so is `min(l, r)` here.
    fn binary(&mut self, op: Formula, left: Lowered, right: Lowered) -> Lowered {
        let is_and = matches!(op, Formula::And(..));
        let lag = left.lag.max(right.lag);
        let mut le = self.back(&left.name, lag - left.lag);
        if matches!(op, Formula::Implies(..)) {
            le = self.negate(&le);
        }
        let re = self.back(&right.name, lag - right.lag);
        let expr = match (self.quantitative, is_and) {
            (true, true) => format!("min({le}, {re})"),
            (true, false) => format!("max({le}, {re})"),
            (false, true) => format!("({le}) && ({re})"),
            (false, false) => format!("({le}) || ({re})"),
        };
        // The pair is given when the later operand gives its verdict.
        let emit = match left.lag.cmp(&right.lag) {
            std::cmp::Ordering::Greater => left.emit,
            std::cmp::Ordering::Less => right.emit,
            std::cmp::Ordering::Equal => left.emit.max(right.emit),
        };
        Lowered {
            name: self.define(&expr),
            lag,
            emit,
            copies: 1,
        }
    }

    /// `F` (`is_f`) or `G` over `[lo, hi]` periods of a lowered operand, for a node whose first
    /// sample of a step is `first`.
    fn temporal(
        &mut self,
        is_f: bool,
        (lo, hi): (u64, u64),
        a: Lowered,
        first: usize,
    ) -> Result<Lowered, String> {
        if hi == 0 {
            // `[0,0]`: the window of one value, given when the operand gives it.
            return Ok(a);
        }
        let agg = match (self.quantitative, is_f) {
            (true, true) => "max",
            (true, false) => "min",
            (false, true) => "any",
            (false, false) => "all",
        };
        let len = hi - lo + 1;
        let expr = if a.emit == first {
            format!("window({}, {len}, {agg})", a.name)
        } else if len == 1 {
            // The window's one value comes after the verdict: vacuous.
            match (self.quantitative, is_f) {
                (true, true) => "stl_rob(false)".to_string(),
                (true, false) => "stl_rob(true)".to_string(),
                (false, is_f) => (!is_f).to_string(),
            }
        } else {
            let w = self.define(&format!("window({}, {}, {agg})", a.name, len - 1));
            self.back(&w, 1)
        };
        let lag = hi + a.lag;
        if lag > MAX_PLAN_STEPS {
            return Err(format!("a property spans more than {MAX_PLAN_STEPS} steps"));
        }
        Ok(Lowered {
            name: self.define(&expr),
            lag,
            emit: first,
            copies: 1,
        })
    }

    /// `min` (`&&`) or `max` (`||`) of two expressions, in this operand order.
    fn meet(&self, is_min: bool, a: &str, b: &str) -> String {
        match (self.quantitative, is_min) {
            (true, true) => format!("min({a}, {b})"),
            (true, false) => format!("max({a}, {b})"),
            (false, true) => format!("({a}) && ({b})"),
            (false, false) => format!("({a}) || ({b})"),
        }
    }

    /// `φ U[a,b] ψ` over `hi` = b/p periods of lowered operands, for a node whose first sample
    /// of a step is `first`. The evaluator (`ops::Until`, mstlo's reading) ignores `a` and
    /// gives, for time t, `best` over j = 0, 1, … of `min(ψ, m_j)`, where
    /// `m_j = min(m_{j−1}, φ(t+j))` and `best_j = max(best_{j−1}, v_j)`, in that operand order.
    /// It pairs its operands' verdicts by position in caches each pruned to the horizon from
    /// its own newest verdict, so the ψ paired with φ(t+j) is ψ(t+j+o): o = 0 while neither
    /// cache has been pruned, then one step further each verdict until o = ℓφ − ℓψ (the
    /// difference of the operands' horizons) — a chain per o, chosen by the step. A chain is
    /// a pipeline of streams that each read their predecessor one step back, at the step of
    /// the slower operand's time s: `q_j` is `min(q_{j−1}[1], φ(s))`, the running minimum of
    /// φ from s − j, and `u_j` is `max(u_{j−1}[1], min(ψ(s + o), q_j))`, the best over the
    /// j + 1 times from s − j.
    fn until(
        &mut self,
        hi: u64,
        left: Lowered,
        right: Lowered,
        first: usize,
        what: impl Fn() -> String,
    ) -> Result<Lowered, String> {
        if left.copies > 1 || right.copies > 1 {
            return Err(format!(
                "an operand of `{}` reads no signal and gives its verdict at each sample of a step, which the evaluator pairs with the other operand's by position",
                what()
            ));
        }
        let d = left.lag as i64 - right.lag as i64;
        if hi == 0 && (d != 0 || left.emit != right.emit) {
            return Err(format!(
                "the operands of `{}` have different horizons or give their verdicts at different samples of a step, where the evaluator's pairing of them changes after the first steps",
                what()
            ));
        }
        let spread = d.unsigned_abs();
        if (spread + 1).saturating_mul(hi) > MAX_UNTIL_STEPS {
            return Err(format!(
                "`{}` unrolls to {} chains of {hi} steps, more than the {MAX_UNTIL_STEPS} steps in all a `U` unrolls to on the plan",
                what(),
                spread + 1
            ));
        }
        let m = left.lag.max(right.lag);
        // φ's values up to t + b are in by the verdict's sample unless φ is the slower operand
        // and its value of the step comes later (then j < b: φ paired up to the last it has).
        let phi_full = hi == 0 || left.lag < m || left.emit == first;
        let phi = self.shifted(&left.name, m - left.lag);
        // A move back to the evaluator settles its pairing of the operands, whatever their
        // horizons (`StlPlan::replayed`).
        self.settles = true;
        let sign = d.signum();
        let mut chains = Vec::new();
        for i in 0..=spread as i64 {
            chains.push(self.until_chain(hi, &phi, &right, m, sign * i, first));
        }
        // The running minimum of φ and each chain's next term, step by step of the interval
        // (each term beside the minimum it reads).
        let mut q = phi.clone();
        for j in 1..=(if phi_full { hi } else { hi - 1 }) {
            let e = self.meet(true, &self.back(&q, 1), &phi);
            q = self.define(&e);
            for c in chains.iter_mut().filter(|c| c.open) {
                let term = match (j == hi && !c.psi_last, self.quantitative) {
                    (false, _) => self.meet(true, &c.psi, &q),
                    (true, true) => q.clone(),
                    // `best || false` is `best`: the chain ends a step early.
                    (true, false) => {
                        c.open = false;
                        continue;
                    }
                };
                let e = self.meet(false, &self.back(&c.u, 1), &term);
                c.u = self.define(&e);
                c.last = j;
            }
        }
        // A chain's `u` covers the times from t + b − last on; the verdict is for t.
        let chains: Vec<String> = chains
            .into_iter()
            .map(|c| match hi - c.last {
                0 => c.u,
                by => self.define(&self.back(&c.u, by)),
            })
            .collect();
        // The chain of o = ±i gives the verdicts for t = min(ℓφ, ℓψ) + 1 + i on, at the step
        // t + b + m.
        let name = self.by_step(chains, left.lag.min(right.lag) + 1 + hi + m);
        let lag = hi + m;
        if lag > MAX_PLAN_STEPS {
            return Err(format!("a property spans more than {MAX_PLAN_STEPS} steps"));
        }
        Ok(Lowered {
            name,
            lag,
            emit: if hi == 0 { left.emit } else { first },
            copies: 1,
        })
    }

    /// The start of the chain of `U[·, hi·p]` whose ψ is read `o` steps on from φ (`phi`, at
    /// the slower operand's time): its first term.
    fn until_chain(
        &mut self,
        hi: u64,
        phi: &str,
        right: &Lowered,
        m: u64,
        o: i64,
        first: usize,
    ) -> Chain {
        // o never takes ψ past the step: o is between 0 and ℓφ − ℓψ ≤ m − ℓψ.
        let psi_back = u64::try_from((m - right.lag) as i64 - o).unwrap_or(0);
        let psi = self.shifted(&right.name, psi_back);
        // ψ(t + b + o) is in by the verdict's sample unless it lies past ψ's newest value
        // (then it reads as unknown: NaN, which `min` passes over, or `false`).
        let psi_last = hi == 0 || o <= (m - right.lag) as i64 - i64::from(right.emit != first);
        let u = self.define(&self.meet(true, &psi, phi));
        Chain {
            psi,
            psi_last,
            u,
            last: 0,
            open: true,
        }
    }

    /// The i-th of `chains` (from 0) at steps `from` + i up to the next one's, the first
    /// before `from` + 1 and the last from its step on (the only one, where there is one).
    fn by_step(&mut self, mut chains: Vec<String>, from: u64) -> String {
        let mut name = chains.pop().unwrap_or_default();
        if !chains.is_empty() {
            // `z` is false, so `default(z[X], true)` holds before step X.
            let z = self.define_typed("false", "Bool");
            while let Some(earlier) = chains.pop() {
                let before = from + chains.len() as u64 + 1;
                let e = format!("if default({z}[{before}], true) then {earlier} else {name}");
                name = self.define(&e);
            }
        }
        name
    }

    /// A stream read `by` steps back, as a stream of its own (the stream itself for 0).
    fn shifted(&mut self, name: &str, by: u64) -> String {
        match by {
            0 => name.to_string(),
            _ => self.define(&self.back(name, by)),
        }
    }

    /// The node of `f`, which sees the samples of `vis` (never empty).
    fn node(&mut self, f: FormulaId, vis: &[SignalId]) -> Result<Lowered, String> {
        let first = vis
            .iter()
            .map(|s| self.rank[s.0 as usize])
            .min()
            .unwrap_or(0);
        // A child of `&&`/`||` sees its own signals' samples, or every sample its parent sees
        // where it reads none (the evaluator's `Signals::takes`).
        let child_vis = |spec: &StlSpec, c: FormulaId| {
            let own = spec.signals_of(c);
            if own.is_empty() { vis.to_vec() } else { own }
        };
        Ok(match self.spec.formula(f).clone() {
            Formula::True | Formula::False => {
                let t = matches!(self.spec.formula(f), Formula::True);
                let expr = match (self.quantitative, t) {
                    (true, true) => "stl_rob(true)",
                    (true, false) => "stl_rob(false)",
                    (false, true) => "true",
                    (false, false) => "false",
                };
                Lowered {
                    name: self.define(expr),
                    lag: 0,
                    emit: first,
                    copies: vis.len(),
                }
            }
            Formula::Compare {
                signal,
                cmp,
                threshold,
            } => self.compare(signal, cmp, threshold),
            Formula::Not(a) => {
                let a = self.node(a, vis)?;
                let expr = self.negate(&a.name);
                Lowered {
                    name: self.define(&expr),
                    ..a
                }
            }
            Formula::And(l, r) | Formula::Or(l, r) | Formula::Implies(l, r) => {
                let (lv, rv) = (child_vis(self.spec, l), child_vis(self.spec, r));
                let left = self.node(l, &lv)?;
                let right = self.node(r, &rv)?;
                self.binary(self.spec.formula(f).clone(), left, right)
            }
            Formula::Eventually(w, a) | Formula::Globally(w, a) => {
                let is_f = matches!(self.spec.formula(f), Formula::Eventually(..));
                let what = || self.spec.show(f);
                let (lo, hi) = (self.steps(w.start, what)?, self.steps(w.end, what)?);
                let a = self.node(a, vis)?;
                self.temporal(is_f, (lo, hi), a, first)?
            }
            Formula::Until(w, l, r) => {
                let what = || self.spec.show(f);
                let hi = self.steps(w.end, what)?;
                let (lv, rv) = (child_vis(self.spec, l), child_vis(self.spec, r));
                let left = self.node(l, &lv)?;
                let right = self.node(r, &rv)?;
                self.until(hi, left, right, first, what)?
            }
        })
    }
}

/// Where a run of a property file is.
enum State {
    /// Its first step ran on the evaluator, and is kept: the second gives the period.
    Starting {
        eval: StlMonitor,
        first: Vec<StlSample>,
    },
    /// On the plan.
    Plan(Box<PlanRun>),
    /// On the evaluator.
    Evaluator(StlMonitor),
    /// Only while a step moves the run from one state to the next.
    Moving,
}

struct PlanRun {
    plan: StlPlan,
    /// The plan's monitor, stepped through the whole-row kernel's fast path (its row of
    /// floats set in place: input `s<i>` is signal i).
    stepper: OwnedStepper,
    /// Per property: its lag, how many times a step repeats its verdict, and the time its
    /// lag spans (a verdict's time is the step's less that).
    props: Vec<(u64, usize, Duration)>,
    /// The time of the last step.
    last: Duration,
    steps: u64,
    /// The last `keep` steps' samples, to give a fresh evaluator on a step off the grid: a
    /// ring of `signals` samples a step (every step on the grid has one per signal), filled
    /// up to `keep` steps and then overwritten from its oldest step, at `head`.
    recent: Vec<StlSample>,
    head: usize,
    keep: usize,
    signals: usize,
    /// Per signal, the last check (`stamp`) that met a sample of it: a step's check of the
    /// grid marks the signals it sees without clearing anything.
    seen: Vec<u64>,
    stamp: u64,
    /// Why the plan failed on the last step (an engine bug), for [`PlanRun::step`] to give.
    failed: Option<String>,
}

/// A run of a property file on the plan tier where it is exact, on the evaluator otherwise:
/// the verdicts are [`StlMonitor`]'s either way, step for step.
///
/// ```
/// use vigil::stl::{Semantics, StlRun, StlSample, StlSpec, Synchronization};
/// use vigil::Tier;
/// use std::time::Duration;
///
/// let spec = StlSpec::parse("p.mstlo", "calm: G[0,1](x < 3)\n")?;
/// let mut run = StlRun::new(&spec, Semantics::default(), Synchronization::default(), &[], Tier::Canonical)?;
/// let x = spec.signal("x").expect("a signal");
/// let mut given = Vec::new();
/// for (ms, v) in [(0, 1.0), (500, 2.0), (1000, 0.5), (1500, 2.5)] {
///     let mut step = vec![StlSample { signal: x, time: Duration::from_millis(ms), value: v }];
///     given.extend(run.step(&mut step));
/// }
/// assert!(run.on_plan(), "{:?}", run.declined());
/// // The verdict for 0 s once the samples reach 1 s: min(3 - 1, 3 - 2, 3 - 0.5).
/// assert_eq!(given[0].time, Duration::ZERO);
/// assert_eq!(given.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct StlRun {
    spec: StlSpec,
    semantics: Semantics,
    values: Vec<Option<f64>>,
    tier: Tier,
    /// A monitor that has seen nothing, to start the evaluator from.
    fresh: StlMonitor,
    state: State,
    declined: Option<String>,
}

impl StlRun {
    /// A run of `spec` as [`StlMonitor::new`] makes it, whose plan runs on `tier`.
    pub fn new(
        spec: &StlSpec,
        semantics: Semantics,
        sync: Synchronization,
        vars: &[(String, f64)],
        tier: Tier,
    ) -> Result<StlRun, StlError> {
        let fresh = StlMonitor::new(spec, semantics, sync, vars)?;
        let mut values = vec![None; spec.vars.len()];
        for (name, v) in vars {
            if let Some(i) = spec.vars.iter().position(|n| n == name) {
                values[i] = Some(*v);
            }
        }
        let declined = static_decline(spec, semantics, &values).err();
        let state = match declined {
            Some(_) => State::Evaluator(fresh.clone()),
            None => State::Starting {
                eval: fresh.clone(),
                first: Vec::new(),
            },
        };
        Ok(StlRun {
            spec: spec.clone(),
            semantics,
            values,
            tier,
            fresh,
            state,
            declined,
        })
    }

    /// Whether the run is on the plan now.
    pub fn on_plan(&self) -> bool {
        matches!(self.state, State::Plan(_))
    }

    /// Why the run is on the evaluator (`None` while it is on the plan or has not yet seen
    /// the two steps that decide).
    pub fn declined(&self) -> Option<&str> {
        self.declined.as_deref()
    }

    /// The plan's specification, once the run is on it.
    pub fn plan_text(&self) -> Option<&str> {
        match &self.state {
            State::Plan(p) => Some(&p.plan.text),
            _ => None,
        }
    }

    /// The tier the plan's monitor runs on now, once the run is on the plan.
    pub fn plan_tier(&self) -> Option<Tier> {
        match &self.state {
            State::Plan(p) => Some(p.stepper.monitor().tier()),
            _ => None,
        }
    }

    /// The warnings since the last call (samples dropped; only the evaluator drops any).
    pub fn take_warnings(&mut self) -> Vec<String> {
        match &mut self.state {
            State::Starting { eval, .. } | State::Evaluator(eval) => eval.take_warnings(),
            State::Plan(_) | State::Moving => Vec::new(),
        }
    }

    /// What the run holds: the evaluator's [`StlMonitor::held`], or the samples the plan keeps
    /// to move back to it.
    pub fn held(&self) -> usize {
        match &self.state {
            State::Starting { eval, .. } | State::Evaluator(eval) => eval.held(),
            State::Plan(p) => p.recent.len(),
            State::Moving => 0,
        }
    }

    /// Runs one step, as [`StlMonitor::step`] does, and returns the same verdicts.
    pub fn step(&mut self, samples: &mut [StlSample]) -> Vec<Emitted> {
        let mut out = Vec::new();
        self.step_into(samples, &mut out);
        out
    }

    /// [`StlRun::step`], its verdicts put in `out` (what `out` held is dropped): a caller
    /// that keeps one buffer from step to step makes a step on the plan allocate nothing.
    pub fn step_into(&mut self, samples: &mut [StlSample], out: &mut Vec<Emitted>) {
        out.clear();
        // On the plan, a step on the grid runs in place: the state (whose other variants hold
        // whole evaluators) is not moved out and back.
        if let State::Plan(run) = &mut self.state
            && run.try_step(samples, out)
        {
            return;
        }
        self.step_moving(samples, out);
    }

    /// A step that is not one on the grid of a run on the plan: it runs on the evaluator,
    /// or moves the run from one state to the next. Apart from [`StlRun::step_into`] so that
    /// the step on the plan is a small function (this one's frame, holding whole evaluators,
    /// was kilobytes, probed at every step).
    #[inline(never)]
    fn step_moving(&mut self, samples: &mut [StlSample], out: &mut Vec<Emitted>) {
        // (A step off the grid ran nothing and gave nothing: it is tried again below, and
        // moves the run.)
        out.clear();
        let state = std::mem::replace(&mut self.state, State::Moving);
        let (state, given) = match state {
            // Every step leaves the run in one of the other states.
            State::Moving => unreachable!("a step left the run between states"),
            State::Evaluator(mut eval) => {
                let given = eval.step(samples);
                (State::Evaluator(eval), given)
            }
            State::Starting { mut eval, first } if first.is_empty() => {
                let grid = on_grid(samples, self.spec.signals.len(), None);
                let given = eval.step(samples);
                match grid {
                    Ok(_) => (
                        State::Starting {
                            eval,
                            first: samples.to_vec(),
                        },
                        given,
                    ),
                    Err(why) => {
                        self.declined = Some(format!("at the first step: {why}"));
                        (State::Evaluator(eval), given)
                    }
                }
            }
            State::Starting { mut eval, first } => match self.start(&first, samples, out) {
                Ok(run) => (State::Plan(run), Vec::new()),
                Err(why) => {
                    self.declined = Some(why);
                    out.clear();
                    let given = eval.step(samples);
                    (State::Evaluator(eval), given)
                }
            },
            State::Plan(mut run) => match run.step(samples, out) {
                Ok(()) => (State::Plan(run), Vec::new()),
                Err(why) => {
                    self.declined = Some(format!("at step {}: {why}", run.steps));
                    out.clear();
                    let mut eval = self.fresh.clone();
                    run.replay(&mut eval);
                    eval.take_warnings();
                    let given = eval.step(samples);
                    (State::Evaluator(eval), given)
                }
            },
        };
        self.state = state;
        out.extend(given);
    }

    /// The plan from the first two steps: the period, the specification, its monitor, the
    /// first step fed to it and the second run.
    fn start(
        &self,
        first: &[StlSample],
        second: &mut [StlSample],
        out: &mut Vec<Emitted>,
    ) -> Result<Box<PlanRun>, String> {
        let t0 = first[0].time;
        let t1 = on_grid(second, self.spec.signals.len(), None)
            .map_err(|why| format!("at step 1: {why}"))?;
        if t1 <= t0 {
            return Err("at step 1: the time does not increase".into());
        }
        let plan = StlPlan::lower(&self.spec, self.semantics, &self.values, t1 - t0)?;
        // A specification past the language's bounds (its windows' values in all) is refused.
        let spec = Spec::parse("stl-plan.dsrv", &plan.text).map_err(refused)?;
        let monitor = Monitor::builder(&spec).tier(self.tier).build();
        let keep = usize::try_from(plan.replayed()).unwrap_or(usize::MAX);
        let props = (plan.props.iter())
            .map(|&(lag, copies)| {
                let span = plan
                    .period
                    .checked_mul(u32::try_from(lag).unwrap_or(u32::MAX));
                (lag, copies, span.unwrap_or(Duration::MAX))
            })
            .collect();
        let signals = self.spec.signals.len();
        let mut run = Box::new(PlanRun {
            plan,
            stepper: OwnedStepper::new(monitor),
            props,
            last: t0,
            steps: 0,
            recent: Vec::new(),
            head: 0,
            keep,
            signals,
            seen: vec![0; signals],
            stamp: 0,
            failed: None,
        });
        // Its verdicts were the evaluator's, given at the first step.
        if !run.eval(first, t0, &mut Vec::new()) {
            let why = run.failed.take().unwrap_or_default();
            return Err(format!("at step 0: {why}"));
        }
        run.step(second, out)
            .map_err(|why| format!("at step 1: {why}"))?;
        Ok(run)
    }
}

/// Why the language refused a generated specification: its first error's message, and how
/// many more there are. (Its errors point into a text the user never sees, and a file of many
/// properties may have one per property: the whole rendering was tens of kilobytes a line.)
fn refused(d: crate::lang::diag::Diagnostics) -> String {
    let Some(first) = d.errors.first() else {
        return "the generated specification is refused".into();
    };
    match d.errors.len() - 1 {
        0 => format!("the generated specification is refused: {}", first.message),
        more => format!(
            "the generated specification is refused: {} (and {more} more errors)",
            first.message
        ),
    }
}

/// Whether a step's samples lie on the grid: one per signal, every one finite, all at one
/// time (`at`, where given); returns that time.
fn on_grid(
    samples: &[StlSample],
    signals: usize,
    at: Option<Duration>,
) -> Result<Duration, String> {
    let mut seen = vec![false; signals];
    for s in samples {
        let i = s.signal.0 as usize;
        if i >= signals || std::mem::replace(&mut seen[i], true) {
            return Err("a signal has two samples".into());
        }
        if !s.value.is_finite() {
            return Err(format!("a sample's value is {}", s.value));
        }
    }
    if samples.len() != signals {
        return Err("a signal has no sample".into());
    }
    let t = samples[0].time;
    if samples.iter().any(|s| s.time != t) {
        return Err("the samples have different times".into());
    }
    if let Some(want) = at
        && t != want
    {
        return Err(format!(
            "the time {} ms is not one period after the last ({} ms expected)",
            t.as_millis(),
            want.as_millis()
        ));
    }
    Ok(t)
}

impl PlanRun {
    /// Runs a step on the grid, its verdicts added to `out`, or says why it is not on it
    /// (nothing run, nothing added), or why the plan failed on it: what [`PlanRun::try_step`]
    /// does, with the reason where it gives `false`. Where a `try_step` just failed on these
    /// samples (`StlRun::step_into`'s, before it moves the run), its reason is given, and
    /// nothing runs again.
    fn step(&mut self, samples: &mut [StlSample], out: &mut Vec<Emitted>) -> Result<(), String> {
        if let Some(why) = self.failed.take() {
            return Err(why);
        }
        if self.try_step(samples, out) {
            return Ok(());
        }
        if let Some(why) = self.failed.take() {
            return Err(why);
        }
        // Off the grid (nothing ran): `on_grid` says why (it checks what `fits` checks).
        let Some(at) = self.last.checked_add(self.plan.period) else {
            return Err("the next time of the grid is past the largest time".into());
        };
        on_grid(samples, self.signals, Some(at))?;
        unreachable!("engine bug: a step on the grid that `fits` refused")
    }

    /// Runs a step on the grid, its verdicts added to `out`: `false` where the step is off the
    /// grid (nothing run, nothing added), or where the plan failed on it (`failed` says why,
    /// which [`PlanRun::step`] gives). Always inlined into [`StlRun::step_into`], so that a
    /// step on the plan is one function around the kernel's call: as calls of their own, with
    /// a `Result<(), String>` each, this step's bookkeeping was twice the kernel's cost.
    #[inline(always)]
    fn try_step(&mut self, samples: &[StlSample], out: &mut Vec<Emitted>) -> bool {
        // A library caller's times may run to `Duration::MAX`: past it there is no grid.
        let Some(at) = self.last.checked_add(self.plan.period) else {
            return false;
        };
        self.fits(samples, at) && self.eval(samples, at, out)
    }

    /// Whether a step's samples lie on the grid at `at` ([`on_grid`]'s rule), in one pass
    /// that builds no reason.
    #[inline(always)]
    fn fits(&mut self, samples: &[StlSample], at: Duration) -> bool {
        // One signal (the common case): its one sample, of that signal, needs no marks.
        if let [s] = samples
            && self.signals == 1
        {
            return s.signal.0 == 0 && s.time == at && s.value.is_finite();
        }
        if samples.len() != self.signals {
            return false;
        }
        self.stamp += 1;
        samples.iter().all(|s| {
            let fresh = match self.seen.get_mut(s.signal.0 as usize) {
                Some(seen) => std::mem::replace(seen, self.stamp) != self.stamp,
                None => false,
            };
            fresh && s.time == at && s.value.is_finite()
        })
    }

    /// Feeds a step on the grid to the monitor; its verdicts are added to `out`. `false` where
    /// the plan failed (an engine bug: `failed` says what), its verdicts of the step, if any,
    /// left in `out`.
    #[inline(always)]
    fn eval(&mut self, samples: &[StlSample], t: Duration, out: &mut Vec<Emitted>) -> bool {
        for s in samples {
            if let Err(e) = (self.stepper).set_float(s.signal.0 as usize, s.value) {
                return self.fail(format!("the plan refused a sample (a bug): {e}"));
            }
        }
        let k = self.steps;
        let outputs = match self.stepper.step() {
            Ok(outputs) => outputs,
            Err(e) => {
                let why = format!("the plan stopped: {e}");
                return self.fail(why);
            }
        };
        for (i, &(lag, copies, span)) in self.props.iter().enumerate() {
            if k < lag {
                continue;
            }
            let value = if self.plan.quantitative {
                outputs.float(i).map(Verdict::Robustness)
            } else {
                outputs.bool(i).map(Verdict::Bool)
            };
            // From step `lag` on, `t` is at least `lag` periods on from the first step's time.
            let (Some(value), Some(time)) = (value, t.checked_sub(span)) else {
                let why = match value {
                    None => format!("the plan gave no value for property {i} (a bug)"),
                    Some(_) => format!("property {i}'s verdict is for a time before 0 (a bug)"),
                };
                self.failed = Some(why);
                return false;
            };
            let e = Emitted {
                property: i,
                time,
                value,
            };
            // One verdict (all but `true`'s over several signals): a push, not an extend's
            // reservation and unrolled loop.
            match copies {
                1 => out.push(e),
                _ => out.extend(std::iter::repeat_n(e, copies)),
            }
        }
        self.steps += 1;
        self.last = t;
        self.keep_step(samples);
        true
    }

    /// Records why the plan failed; `false`, for [`PlanRun::eval`] to return.
    #[cold]
    #[inline(never)]
    fn fail(&mut self, why: String) -> bool {
        self.failed = Some(why);
        false
    }

    /// Keeps a step's samples in the ring, over its oldest step once the ring is full.
    #[inline(always)]
    fn keep_step(&mut self, samples: &[StlSample]) {
        if self.recent.len() < self.keep.saturating_mul(self.signals) {
            self.recent.extend_from_slice(samples);
        } else if !self.recent.is_empty() {
            let at = self.head * self.signals;
            match samples {
                // One signal (the common case): a copy of one sample, field by field, not a
                // call to copy a slice (the whole sample's copy compiled to one, `memcpy`).
                [one] => {
                    let slot = &mut self.recent[at];
                    (slot.signal, slot.time, slot.value) = (one.signal, one.time, one.value);
                }
                _ => self.recent[at..at + self.signals].copy_from_slice(samples),
            }
            // A comparison, not a remainder: a division a step was a twentieth of it.
            self.head += 1;
            if self.head >= self.keep {
                self.head = 0;
            }
        }
    }

    /// Gives `eval` the kept steps, oldest first.
    fn replay(&self, eval: &mut StlMonitor) {
        let n = self.signals;
        let (newer, older) = self.recent.split_at(self.head * n);
        let mut step = Vec::with_capacity(n);
        for chunk in older.chunks(n).chain(newer.chunks(n)) {
            step.clear();
            step.extend_from_slice(chunk);
            eval.step(&mut step);
        }
    }
}

/// What `vigil explain` says of the plan tier: the specification for the coarsest grid the
/// bounds allow (any period dividing it runs the same, its bounds scaled), or why not.
pub(crate) fn explain(spec: &StlSpec) -> String {
    let semantics = Semantics::DelayedQuantitative;
    let vars = vec![None; spec.vars.len()];
    if let Err(why) = static_decline(spec, semantics, &vars) {
        return format!("plan tier: declines ({why}); the properties run on the STL evaluator\n");
    }
    let mut g: u128 = 0;
    for (f, _) in &spec.formulas {
        match f {
            Formula::Eventually(w, _) | Formula::Globally(w, _) => {
                for d in [w.start.as_nanos(), w.end.as_nanos()] {
                    g = gcd(g, d);
                }
            }
            // `U` reads only its end (the evaluator ignores its start).
            Formula::Until(w, ..) => g = gcd(g, w.end.as_nanos()),
            _ => {}
        }
    }
    let period = Duration::from_nanos(if g == 0 { 1_000_000_000 } else { g as u64 });
    match StlPlan::lower(spec, semantics, &vars, period) {
        Ok(plan) => format!(
            "plan tier (--tier, delayed semantics): over a trace whose every signal is sampled at every time of one grid of period p, where p divides {} s; for p = {} s (delayed-quantitative):\n{}",
            period.as_secs_f64(),
            period.as_secs_f64(),
            plan.text
        ),
        Err(why) => {
            format!("plan tier: declines ({why}); the properties run on the STL evaluator\n")
        }
    }
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 { a } else { gcd(b, a % b) }
}
