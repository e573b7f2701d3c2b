//! The incremental operators an STL property runs as: a tree of state machines, one per
//! formula node, each taking the synchronized samples and returning the verdicts it can give.
//!
//! The algorithm is the one the Trustworthiness Checker runs (the `mstlo` crate 0.1.1, its
//! incremental algorithm), written here from its description and checked against it output for
//! output (`tests/it/stl.rs`): the verdicts, their times and the moment each is given are the
//! checker's. In short:
//!
//! - a comparison gives a value at every sample of its signal; `true`/`false` at every sample;
//! - `!` maps its operand's verdicts;
//! - `&&`/`||` pair their operands' verdicts of equal time (each kept in a queue until the other
//!   side reaches its time); under the eager semantics a `false` (`true`) side decides alone;
//! - `F[a,b]`/`G[a,b]` keep their operand's verdicts in a monotonic deque (an entry is evicted by a
//!   later one that dominates it within the window's length, so each verdict enters and leaves
//!   once: O(1) amortised per sample) and give the verdict at each operand time `t` once the
//!   samples reach `t + b` (plus the operand's own horizon): the first entry from `t + a` on;
//!   eager gives a deciding value at once, RoSI an interval that narrows;
//! - `U[a,b]` pairs its operands' verdicts position by position from `t` and gives the maximum
//!   over `t'` of `min(ψ(t'), min φ up to t')` once the samples pass `t + b` (its start `a` plays
//!   no part, as in mstlo).
//!
//! Every queue is pruned to the operator's horizon, so the state of a property is bounded by the
//! samples its longest horizon spans.
//!
//! A sample's time plus a bound saturates at `Duration::MAX`: a library caller may give any
//! time, and a time that close to the end of `Duration` has no later one to wait for.

use super::domain::Domain;
use super::{Cmp, Formula, FormulaId, SignalId, StlSpec, Threshold, Window};
use rustc_hash::FxHashSet;
use std::collections::VecDeque;
use std::time::Duration;

/// When a verdict is given (the semantics' timing; the domain is the type parameter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A verdict once its whole horizon has been seen.
    Delayed,
    /// As delayed, and a verdict as soon as it is decided.
    Eager,
    /// Robustness intervals, refined as samples arrive.
    Rosi,
}

/// One synchronized sample: a signal's value at a time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sample {
    pub signal: SignalId,
    pub time: Duration,
    pub value: f64,
}

/// A verdict of an operator: its value at a time.
pub(crate) type Out<D> = (Duration, D);

/// The signals an operand reads; an operand that reads none (`true`) takes every sample.
#[derive(Clone, Debug, Default)]
struct Signals(Vec<SignalId>);

impl Signals {
    fn takes(&self, s: SignalId) -> bool {
        self.0.is_empty() || self.0.contains(&s)
    }
}

/// An operator of the tree.
#[derive(Clone, Debug)]
pub(crate) enum Node<D> {
    /// A comparison of a signal with a threshold (`x > c`, `x < c`).
    Compare {
        signal: SignalId,
        greater: bool,
        threshold: f64,
    },
    /// `true` or `false`.
    Constant(bool),
    /// Negation.
    Not(Box<Node<D>>),
    /// Conjunction or disjunction.
    Binary(Box<Binary<D>>),
    /// Eventually or globally.
    Temporal(Box<Temporal<D>>),
    /// Until.
    Until(Box<Until<D>>),
}

/// The state of `&&` or `||`.
#[derive(Clone, Debug)]
pub(crate) struct Binary<D> {
    is_and: bool,
    mode: Mode,
    left: Node<D>,
    right: Node<D>,
    left_signals: Signals,
    right_signals: Signals,
    left_queue: VecDeque<Out<D>>,
    right_queue: VecDeque<Out<D>>,
    /// The time of the last verdict given (its first, under RoSI).
    last_given: Option<Duration>,
    /// The time of the last verdict taken off each queue.
    left_known: Duration,
    right_known: Duration,
    lookahead: Duration,
    /// Scratch: an operand's verdicts of one sample.
    scratch: Vec<Out<D>>,
}

/// The state of `F[a,b]` (`is_max`) or `G[a,b]`.
#[derive(Clone, Debug)]
pub(crate) struct Temporal<D> {
    is_max: bool,
    mode: Mode,
    window: Window,
    operand: Node<D>,
    /// The operand's verdicts, a monotonic deque (decreasing for F, increasing for G, between
    /// entries closer than the window's length).
    cache: VecDeque<Out<D>>,
    /// Whether an entry ever went into `cache` before its back (see `Pending::unsorted`).
    cache_unsorted: bool,
    /// The times whose verdicts are still to give.
    pending: Pending,
    /// Scratch: the operand's verdicts of one sample, and the times given.
    subs: Vec<Out<D>>,
    done: Vec<Duration>,
    lookahead: Duration,
}

/// The state of `φ U[a,b] ψ`.
#[derive(Clone, Debug)]
pub(crate) struct Until<D> {
    mode: Mode,
    window: Window,
    left: Node<D>,
    right: Node<D>,
    left_signals: Signals,
    right_signals: Signals,
    left_cache: VecDeque<Out<D>>,
    right_cache: VecDeque<Out<D>>,
    /// Whether an entry ever went into `left_cache` before its back.
    left_unsorted: bool,
    /// The latest verdict time of each operand.
    left_latest: Duration,
    right_latest: Duration,
    pending: Pending,
    /// Scratch: each operand's verdicts of one sample, and the times given.
    lefts: Vec<Out<D>>,
    rights: Vec<Out<D>>,
    done: Vec<Duration>,
    lookahead: Duration,
}

/// The times whose verdicts are still to give, in order of arrival, and the set of those
/// not yet given (a time is added once while in the set).
#[derive(Clone, Debug, Default)]
struct Pending {
    times: VecDeque<Duration>,
    set: FxHashSet<Duration>,
    /// Whether `times` has been increasing so far (it stays so unless an eager operand gives
    /// its verdicts out of order), so that a time's place is a binary search.
    unsorted: bool,
}

impl Pending {
    /// Adds a time unless it is pending already.
    fn add(&mut self, t: Duration) {
        if self.set.insert(t) {
            self.unsorted |= self.times.back().is_some_and(|&b| t < b);
            self.times.push_back(t);
        }
    }

    fn front(&self) -> Option<Duration> {
        self.times.front().copied()
    }

    /// The index of the first time not before `t`, as a scan from the front skipping the
    /// times before `t` finds it.
    fn first_from(&self, t: Duration) -> usize {
        if self.unsorted {
            self.times.iter().take_while(|&&p| p < t).count()
        } else {
            self.times.partition_point(|&p| p < t)
        }
    }

    /// Takes the given times off the set, `finalized` times off the front of the queue, and
    /// the other given times (given early) off the queue wherever they are. (Under RoSI a
    /// refined time ahead of a finalized one leaves the queue without leaving the set, as in
    /// mstlo; the property test compares every semantics with it.)
    fn retire(&mut self, done: &[Duration], finalized: usize) {
        for t in done {
            self.set.remove(t);
        }
        self.times.drain(..finalized.min(self.times.len()));
        if done.len() > finalized {
            let set = &self.set;
            self.times.retain(|t| set.contains(t));
        }
    }
}

/// A variable has no value (`$t` without `--mstlo-vars t=…`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MissingVar(pub String);

/// Builds the operator tree of `root`, variables read from `vars` (by `VarId`).
pub(crate) fn build<D: Domain>(
    spec: &StlSpec,
    root: FormulaId,
    mode: Mode,
    vars: &[Option<f64>],
) -> Result<Node<D>, MissingVar> {
    let not = |n: Node<D>| Node::Not(Box::new(n));
    Ok(match spec.formula(root) {
        Formula::True => Node::Constant(true),
        Formula::False => Node::Constant(false),
        Formula::Compare {
            signal,
            cmp,
            threshold,
        } => {
            let threshold = match *threshold {
                Threshold::Const(c) => c,
                Threshold::Var(v) => vars
                    .get(v.0 as usize)
                    .copied()
                    .flatten()
                    .ok_or_else(|| MissingVar(spec.vars[v.0 as usize].clone()))?,
            };
            // `x >= c` is `!(x < c)` and `x <= c` is `!(x > c)`, as the checker reads them.
            let compare = |greater| Node::Compare {
                signal: *signal,
                greater,
                threshold,
            };
            match cmp {
                Cmp::Gt => compare(true),
                Cmp::Lt => compare(false),
                Cmp::Ge => not(compare(false)),
                Cmp::Le => not(compare(true)),
            }
        }
        Formula::Not(f) => not(build(spec, *f, mode, vars)?),
        Formula::And(l, r) => binary(
            spec,
            true,
            mode,
            build(spec, *l, mode, vars)?,
            build(spec, *r, mode, vars)?,
            (*l, *r),
        ),
        Formula::Or(l, r) => binary(
            spec,
            false,
            mode,
            build(spec, *l, mode, vars)?,
            build(spec, *r, mode, vars)?,
            (*l, *r),
        ),
        // `φ -> ψ` is `!φ || ψ`.
        Formula::Implies(l, r) => binary(
            spec,
            false,
            mode,
            not(build(spec, *l, mode, vars)?),
            build(spec, *r, mode, vars)?,
            (*l, *r),
        ),
        Formula::Eventually(w, f) | Formula::Globally(w, f) => {
            let operand = build(spec, *f, mode, vars)?;
            let lookahead = w.end + operand.lookahead();
            Node::Temporal(Box::new(Temporal {
                is_max: matches!(spec.formula(root), Formula::Eventually(..)),
                mode,
                window: *w,
                operand,
                cache: VecDeque::new(),
                cache_unsorted: false,
                pending: Pending::default(),
                subs: Vec::new(),
                done: Vec::new(),
                lookahead,
            }))
        }
        Formula::Until(w, l, r) => {
            let left = build(spec, *l, mode, vars)?;
            let right = build(spec, *r, mode, vars)?;
            let lookahead = w.end + left.lookahead().max(right.lookahead());
            Node::Until(Box::new(Until {
                mode,
                window: *w,
                left,
                right,
                left_signals: Signals(spec.signals_of(*l)),
                right_signals: Signals(spec.signals_of(*r)),
                left_cache: VecDeque::new(),
                right_cache: VecDeque::new(),
                left_unsorted: false,
                left_latest: Duration::ZERO,
                right_latest: Duration::ZERO,
                pending: Pending::default(),
                lefts: Vec::new(),
                rights: Vec::new(),
                done: Vec::new(),
                lookahead,
            }))
        }
    })
}

fn binary<D: Domain>(
    spec: &StlSpec,
    is_and: bool,
    mode: Mode,
    left: Node<D>,
    right: Node<D>,
    (l, r): (FormulaId, FormulaId),
) -> Node<D> {
    let lookahead = left.lookahead().max(right.lookahead());
    Node::Binary(Box::new(Binary {
        is_and,
        mode,
        left,
        right,
        left_signals: Signals(spec.signals_of(l)),
        right_signals: Signals(spec.signals_of(r)),
        left_queue: VecDeque::new(),
        right_queue: VecDeque::new(),
        last_given: None,
        left_known: Duration::ZERO,
        right_known: Duration::ZERO,
        lookahead,
        scratch: Vec::new(),
    }))
}

impl<D: Domain> Node<D> {
    /// How far past a time the samples must reach before its verdict is final.
    pub(crate) fn lookahead(&self) -> Duration {
        match self {
            Node::Compare { .. } | Node::Constant(_) => Duration::ZERO,
            Node::Not(n) => n.lookahead(),
            Node::Binary(b) => b.lookahead,
            Node::Temporal(t) => t.lookahead,
            Node::Until(u) => u.lookahead,
        }
    }

    /// Takes one synchronized sample and appends the verdicts it makes possible to `out`.
    pub(crate) fn update(&mut self, s: &Sample, out: &mut Vec<Out<D>>) {
        match self {
            Node::Compare {
                signal,
                greater,
                threshold,
            } => {
                if *signal == s.signal {
                    let v = if *greater {
                        D::greater(s.value, *threshold)
                    } else {
                        D::less(s.value, *threshold)
                    };
                    out.push((s.time, v));
                }
            }
            Node::Constant(c) => out.push((s.time, if *c { D::top() } else { D::bottom() })),
            Node::Not(n) => {
                let start = out.len();
                n.update(s, out);
                for (_, v) in &mut out[start..] {
                    *v = D::not(*v);
                }
            }
            Node::Binary(b) => b.update(s, out),
            Node::Temporal(t) => t.update(s, out),
            Node::Until(u) => u.update(s, out),
        }
    }

    /// How many verdicts the operator holds (its queues and deques), for the memory bound.
    pub(crate) fn held(&self) -> usize {
        match self {
            Node::Compare { .. } | Node::Constant(_) => 0,
            Node::Not(n) => n.held(),
            Node::Binary(b) => {
                b.left_queue.len() + b.right_queue.len() + b.left.held() + b.right.held()
            }
            Node::Temporal(t) => t.cache.len() + t.pending.times.len() + t.operand.held(),
            Node::Until(u) => {
                u.left_cache.len()
                    + u.right_cache.len()
                    + u.pending.times.len()
                    + u.left.held()
                    + u.right.held()
            }
        }
    }
}

/// The index of the first entry of `queue` not before `t`, as a scan from the front skipping
/// the entries before `t` finds it: a binary search while the queue is in time order.
fn first_from<D>(queue: &VecDeque<Out<D>>, sorted: bool, t: Duration) -> usize {
    if sorted {
        queue.partition_point(|e| e.0 < t)
    } else {
        queue.iter().take_while(|e| e.0 < t).count()
    }
}

/// Replaces the entry of the same time in a queue ordered by time; false when there is none.
fn replace_same_time<D: Copy>(queue: &mut VecDeque<Out<D>>, (t, v): Out<D>) -> bool {
    match queue.binary_search_by(|e| e.0.cmp(&t)) {
        Ok(i) => {
            queue[i] = (t, v);
            true
        }
        Err(_) => false,
    }
}

/// Drops the entries older than the horizon from a queue's front, keeping every entry from
/// `keep_from` on: the oldest time a pending verdict may still read.
fn prune<D>(queue: &mut VecDeque<Out<D>>, lookahead: Duration, keep_from: Duration) {
    let Some(&(newest, _)) = queue.back() else {
        return;
    };
    let age = lookahead.max(newest.saturating_sub(keep_from));
    let cutoff = newest.saturating_sub(age);
    while queue.front().is_some_and(|e| e.0 < cutoff) {
        queue.pop_front();
    }
}

impl<D: Domain> Binary<D> {
    fn combine(&self, l: D, r: D) -> D {
        if self.is_and {
            D::and(l, r)
        } else {
            D::or(l, r)
        }
    }

    /// The value that decides the operator alone: `false` for `&&`, `true` for `||`.
    fn decisive(&self) -> D {
        if self.is_and { D::bottom() } else { D::top() }
    }

    fn update(&mut self, s: &Sample, out: &mut Vec<Out<D>>) {
        let rosi = self.mode == Mode::Rosi;
        // A verdict older than the last one given is stale; RoSI refines the last one too.
        let last_given = self.last_given;
        let fresh =
            |t: Duration| last_given.is_none_or(|last| if rosi { t >= last } else { t > last });
        let mut scratch = std::mem::take(&mut self.scratch);
        for (takes, node, queue) in [
            (
                self.left_signals.takes(s.signal),
                &mut self.left,
                &mut self.left_queue,
            ),
            (
                self.right_signals.takes(s.signal),
                &mut self.right,
                &mut self.right_queue,
            ),
        ] {
            if takes {
                scratch.clear();
                node.update(s, &mut scratch);
                for &v in &scratch {
                    if fresh(v.0) && !replace_same_time(queue, v) {
                        queue.push_back(v);
                    }
                }
            }
        }
        self.scratch = scratch;
        let start = out.len();
        if rosi {
            self.pair_rosi(out);
        } else {
            self.pair(out);
            if let Some(last) = self.last_given {
                let mut kept = start;
                for i in start..out.len() {
                    if out[i].0 > last {
                        out[kept] = out[i];
                        kept += 1;
                    }
                }
                out.truncate(kept);
            }
        }
        let keep_from = self
            .left_known
            .min(self.right_known)
            .saturating_sub(self.lookahead);
        prune(&mut self.left_queue, self.lookahead, keep_from);
        prune(&mut self.right_queue, self.lookahead, keep_from);
        let given = if rosi {
            out[start..].first()
        } else {
            out[start..].last()
        };
        if let Some(&(t, _)) = given {
            self.last_given = Some(t);
        }
    }

    /// Pairs the queues' verdicts of equal time, taking them off; under the eager semantics a
    /// deciding verdict on one side is given without waiting for the other.
    fn pair(&mut self, out: &mut Vec<Out<D>>) {
        let eager = self.mode == Mode::Eager;
        let decisive = self.decisive();
        loop {
            match (
                self.left_queue.front().copied(),
                self.right_queue.front().copied(),
            ) {
                (Some(l), Some(r)) => {
                    if l.0 == r.0 {
                        out.push((l.0, self.combine(l.1, r.1)));
                        self.left_known = l.0;
                        self.right_known = r.0;
                        self.left_queue.pop_front();
                        self.right_queue.pop_front();
                    } else if l.0 < r.0 {
                        self.left_known = l.0;
                        self.left_queue.pop_front();
                    } else {
                        self.right_known = r.0;
                        self.right_queue.pop_front();
                    }
                }
                (Some(l), None) if eager && l.1 == decisive => {
                    out.push((l.0, decisive));
                    self.left_known = l.0;
                    self.left_queue.pop_front();
                }
                (None, Some(r)) if eager && r.1 == decisive => {
                    out.push((r.0, decisive));
                    self.right_known = r.0;
                    self.right_queue.pop_front();
                }
                _ => break,
            }
        }
    }

    /// RoSI: pairs the verdicts of equal time without taking them off (a later refinement of
    /// either side gives the pair again).
    fn pair_rosi(&mut self, out: &mut Vec<Out<D>>) {
        let (mut i, mut j) = (0, 0);
        while let (Some(&l), Some(&r)) = (self.left_queue.get(i), self.right_queue.get(j)) {
            if l.0 == r.0 {
                out.push((l.0, self.combine(l.1, r.1)));
                self.left_known = l.0;
                self.right_known = r.0;
                i += 1;
                j += 1;
            } else if l.0 < r.0 {
                self.left_known = l.0;
                i += 1;
            } else {
                self.right_known = r.0;
                j += 1;
            }
        }
    }
}

impl<D: Domain> Temporal<D> {
    fn combine(&self, a: D, b: D) -> D {
        if self.is_max {
            D::or(a, b)
        } else {
            D::and(a, b)
        }
    }

    fn identity(&self) -> D {
        if self.is_max {
            D::eventually_identity()
        } else {
            D::globally_identity()
        }
    }

    fn decisive(&self) -> D {
        if self.is_max { D::top() } else { D::bottom() }
    }

    fn update(&mut self, s: &Sample, out: &mut Vec<Out<D>>) {
        let mut subs = std::mem::take(&mut self.subs);
        subs.clear();
        self.operand.update(s, &mut subs);
        // First the verdicts due before the operand's new times, on the deque as it was.
        if let Some(&(first, _)) = subs.first()
            && let Some(bound) = first.checked_sub(self.lookahead)
        {
            self.give(out, first, Some(bound));
        }
        let window_length = self.window.end - self.window.start;
        for &sub in &subs {
            self.pending.add(sub.0);
            if self.mode == Mode::Rosi
                && (replace_same_time(&mut self.cache, sub)
                    || self.cache.back().is_some_and(|b| sub.0 <= b.0))
            {
                continue;
            }
            while let Some(&back) = self.cache.back() {
                if D::dominated(back.1, sub.1, self.is_max)
                    && back.0.saturating_add(window_length) >= sub.0
                {
                    self.cache.pop_back();
                } else {
                    break;
                }
            }
            self.cache_unsorted |= self.cache.back().is_some_and(|b| sub.0 < b.0);
            self.cache.push_back(sub);
        }
        self.subs = subs;
        let now = if self.mode == Mode::Rosi {
            self.cache.back().map_or(Duration::ZERO, |b| b.0)
        } else {
            s.time
        };
        self.give(out, now, None);
        let keep_from = self.pending.front().unwrap_or(Duration::ZERO);
        prune(&mut self.cache, self.lookahead, keep_from);
    }

    /// Gives the verdicts of the pending times (before `bound`) that `now` finalizes, or that
    /// the semantics gives early.
    fn give(&mut self, out: &mut Vec<Out<D>>, now: Duration, bound: Option<Duration>) {
        let mut done = std::mem::take(&mut self.done);
        done.clear();
        let mut finalized = 0;
        for &t in &self.pending.times {
            if bound.is_some_and(|b| t >= b) {
                break;
            }
            let is_final = now >= t.saturating_add(self.lookahead);
            if !is_final && self.mode == Mode::Delayed {
                break;
            }
            let from = t.saturating_add(self.window.start);
            let to = t.saturating_add(self.window.end);
            let inside = self
                .cache
                .range(first_from(&self.cache, !self.cache_unsorted, from)..);
            let value = if self.mode == Mode::Rosi {
                inside
                    .take_while(|e| e.0 <= to)
                    .map(|e| e.1)
                    .reduce(|a, b| self.combine(a, b))
            } else {
                // The deque's first entry from the window's start is its extremum.
                inside.map(|e| e.1).next()
            }
            .unwrap_or_else(|| self.identity());
            if is_final || (self.mode == Mode::Eager && value == self.decisive()) {
                out.push((t, value));
                done.push(t);
                if is_final {
                    finalized += 1;
                }
            } else if self.mode == Mode::Rosi {
                out.push((t, self.combine(value, D::unknown())));
            } else {
                break;
            }
        }
        self.pending.retire(&done, finalized);
        self.done = done;
    }
}

impl<D: Domain> Until<D> {
    fn update(&mut self, s: &Sample, out: &mut Vec<Out<D>>) {
        let rosi = self.mode == Mode::Rosi;
        let eager = self.mode == Mode::Eager;
        let mut lefts = std::mem::take(&mut self.lefts);
        let mut rights = std::mem::take(&mut self.rights);
        lefts.clear();
        rights.clear();
        if self.left_signals.takes(s.signal) {
            self.left.update(s, &mut lefts);
        }
        if self.right_signals.takes(s.signal) {
            self.right.update(s, &mut rights);
        }
        if let Some(&(t, _)) = lefts.last() {
            self.left_latest = self.left_latest.max(t);
        }
        if let Some(&(t, _)) = rights.last() {
            self.right_latest = self.right_latest.max(t);
        }
        let both_latest = self.left_latest.min(self.right_latest);
        for &v in &rights {
            self.pending.add(v.0);
            if !(rosi && replace_same_time(&mut self.right_cache, v)) {
                self.right_cache.push_back(v);
            }
        }
        for &v in &lefts {
            self.pending.add(v.0);
            if !(rosi && replace_same_time(&mut self.left_cache, v)) {
                self.left_unsorted |= self.left_cache.back().is_some_and(|b| v.0 < b.0);
                self.left_cache.push_back(v);
            }
        }
        self.lefts = lefts;
        self.rights = rights;
        if self.left_cache.is_empty() || self.right_cache.is_empty() {
            return;
        }
        let now = s.time;
        let mut done = std::mem::take(&mut self.done);
        done.clear();
        let mut finalized = 0;
        for &t in &self.pending.times {
            let end = now.min(t.saturating_add(self.window.end));
            // The left and right verdicts are paired by position from the first left verdict
            // at or after `t`, one pair per pending time in `[t, end]` (mstlo's reading).
            let skip = first_from(&self.left_cache, !self.left_unsorted, t);
            let mut lefts = self.left_cache.iter().skip(skip);
            let mut rights = self.right_cache.iter().skip(skip);
            let mut left_min = D::globally_identity();
            let mut best: Option<D> = None;
            let mut falsified = false;
            let first = self.pending.first_from(t);
            for _ in self.pending.times.range(first..).take_while(|&&p| p <= end) {
                let Some(l) = lefts.next() else { break };
                left_min = D::and(left_min, l.1);
                let psi = rights.next().map_or_else(D::unknown, |r| r.1);
                if eager && left_min == D::bottom() && both_latest >= t {
                    falsified = true;
                    best = Some(best.map_or(D::bottom(), |b| D::or(b, D::bottom())));
                    break;
                }
                let v = D::and(psi, left_min);
                best = Some(best.map_or(v, |b| D::or(b, v)));
            }
            let Some(best) = best else { break };
            if now >= t.saturating_add(self.lookahead) {
                out.push((t, best));
                done.push(t);
                finalized += 1;
            } else if eager && (best == D::top() || falsified) {
                out.push((t, best));
                done.push(t);
            } else if rosi {
                out.push((t, D::or(best, D::unknown())));
            } else {
                break;
            }
        }
        let keep_from = self.pending.front().unwrap_or(Duration::ZERO);
        prune(&mut self.left_cache, self.lookahead, keep_from);
        prune(&mut self.right_cache, self.lookahead, keep_from);
        self.pending.retire(&done, finalized);
        self.done = done;
    }
}
