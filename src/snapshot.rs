//! Snapshots: the whole run state of one trace, independent of the tier, in a versioned format.
//!
//! A [`Snapshot`] is what a monitor needs to continue a trace exactly where it
//! stopped: the step count, every stream's and node's value this step (and the
//! value it holds while NoVal), the builtin flags, the offset history, and the
//! runtime error that stopped the run, if one did. It is taken from the
//! canonical `NodeState`, which every tier shares, so a snapshot taken on one
//! tier restores on any other; which fused programs are promoted is not part of
//! it (promotion is recomputed from the state on the next row).
//!
//! Not stored: the constants' slots (rebuilt from the plan), the errors parked
//! inside `if` arms (empty between rows), the per-ring counts promotion reads
//! (recomputed from the entries) and the string bound (configuration).
//!
//! Every snapshot names the specification it belongs to by a [`Fingerprint`]:
//! SHA-256 over a canonical rendering of the plan (streams, types, schedule,
//! nodes, slots, constants, ring layout — never spans, comments or
//! whitespace), so the same specification has the same fingerprint in every
//! process, and a snapshot of another specification is rejected, never
//! misread.
//!
//! Two encodings, both documented in docs/library.md ("Snapshots"): a binary one
//! (`VIGILSNP`, the format version, the body's length and SHA-256, then the
//! body in postcard) and JSON for inspection. Floats survive both bit for bit:
//! postcard stores their bits; JSON writes finite floats as numbers (read back
//! exactly, serde_json's `float_roundtrip`) and the others as strings (`inf`,
//! `-inf`, `NaN`, or `NaN:0x…` with the bits of any other NaN).
//!
//! Decoding is untrusted input: every length is checked against the plan before
//! a `NodeState` is built, and a corrupt, truncated or hostile snapshot is a
//! [`SnapshotError`], never a panic.

mod repair;
mod stream;
pub use repair::{Repair, RepairError, Started, Why};
pub use stream::KeyedSnapshotReader;
pub(crate) use stream::{KeyedWriter, RunEncoder};

use crate::canonical::NodeState;
use crate::canonical::ops::op_name;
use crate::error::{ErrorKind, RuntimeError};
use crate::exec::Run;
use crate::lang::ast::{BinOp, Builtin, DeclKind, UnOp};
use crate::plan::{NodeOp, Operand, Plan};
use crate::value::{Key, MAX_VALUE_NESTING, Sample, Value};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use sha2::{Digest, Sha256};
use std::fmt::{self, Write as _};

/// The version of the snapshot format this vigil writes and reads. It changes
/// whenever the encoding or the meaning of a field changes; a snapshot of
/// another version is rejected with [`SnapshotError::Version`].
pub const FORMAT_VERSION: u32 = 5;

/// The first bytes of a binary snapshot.
pub const MAGIC: [u8; 8] = *b"VIGILSNP";

/// The length of a binary envelope's header: magic, version, body length and
/// the body's SHA-256.
pub(crate) const HEADER_LEN: usize = 8 + 4 + 8 + 32;

/// The run state of one trace at a step boundary, independent of the tier.
///
/// ```
/// use vigil::{Monitor, Sample, Snapshot, Spec, Tier, Value};
/// let spec = Spec::parse("sum.dsrv", "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x").unwrap();
/// let mut monitor = Monitor::builder(&spec).tier(Tier::Canonical).build();
/// monitor.step(&[Some(Value::Int(5))]).unwrap();
///
/// // Save the state (binary, or `to_json` for inspection) …
/// let bytes = monitor.snapshot().to_bytes();
/// // … and continue later, in another process, on any tier.
/// let snapshot = Snapshot::from_bytes(&bytes).unwrap();
/// let mut resumed = Monitor::builder(&spec).tier(Tier::Auto).restore(&snapshot).unwrap().build();
/// assert_eq!(resumed.steps(), 1);
/// resumed.step(&[Some(Value::Int(2))]).unwrap();
/// assert_eq!(resumed.output("total"), Some(Sample::Value(Value::Int(7))));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    body: Body,
}

/// A specification's identity for snapshots: SHA-256 over a canonical
/// rendering of its plan. Displayed as 64 hexadecimal digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The first 16 hexadecimal digits, as error messages show them.
    pub fn short(&self) -> String {
        self.to_string()[..16].to_string()
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// Why a snapshot cannot be read or restored.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The bytes do not start with [`MAGIC`] (binary), or the JSON has no
    /// `vigil_snapshot` version field.
    NotASnapshot,
    /// A snapshot of another format version.
    Version {
        /// The snapshot's format version.
        found: u32,
        /// The one this vigil reads.
        supported: u32,
    },
    /// The binary form is shorter than its header announces.
    Truncated {
        /// The length the header announces.
        expected: u64,
        /// The length there is.
        found: u64,
    },
    /// The binary body does not match its checksum.
    Checksum,
    /// The encoding is broken (the decoder's message).
    Malformed(String),
    /// The snapshot belongs to another specification.
    OtherSpec {
        /// The fingerprint the snapshot carries.
        snapshot: Fingerprint,
        /// The fingerprint of the specification it was given to.
        spec: Fingerprint,
    },
    /// The snapshot's fingerprint matches, but its contents do not fit the
    /// specification's state (a length, a flag, an error's stream).
    Inconsistent(String),
    /// The snapshot could not be read (an I/O error of the reader a
    /// [`KeyedSnapshotReader`] reads from).
    Io(String),
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::NotASnapshot => write!(f, "not a vigil snapshot"),
            SnapshotError::Version { found, supported } => write!(
                f,
                "snapshot format version {found} is not supported (this vigil reads version {supported})"
            ),
            SnapshotError::Truncated { expected, found } => write!(
                f,
                "the snapshot is truncated: its header announces {expected} bytes of data, {found} are present"
            ),
            SnapshotError::Checksum => write!(
                f,
                "the snapshot is corrupt: its contents do not match their checksum"
            ),
            SnapshotError::Malformed(m) => write!(f, "the snapshot is corrupt: {m}"),
            SnapshotError::OtherSpec { snapshot, spec } => write!(
                f,
                "the snapshot was taken with another specification (snapshot fingerprint {}, this specification's {})",
                snapshot.short(),
                spec.short()
            ),
            SnapshotError::Inconsistent(m) => {
                write!(f, "the snapshot does not fit the specification: {m}")
            }
            SnapshotError::Io(m) => write!(f, "cannot read the snapshot: {m}"),
        }
    }
}

impl std::error::Error for SnapshotError {}

/// The serialised body: every field of the format, in order (docs/library.md's
/// "Snapshots" section documents them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Body {
    /// The format version (also in the binary header, checked first).
    vigil_snapshot: u32,
    fingerprint: Fingerprint,
    /// Rows evaluated so far: the step the next row is.
    step: u64,
    /// Every stream's slot, then every node's (constants are not stored).
    slots: Vec<Slot>,
    /// The `when`, `init` and `update` nodes whose flag is set, increasing.
    flags: Vec<u32>,
    /// Every offset ring in layout order, lane by lane: `min(step, n)`
    /// entries for `e[n]`.
    rings: Vec<Vec<Cell>>,
    /// The runtime error that stopped the run.
    stopped: Option<StopError>,
    /// Every window's words, laid out as the plan's windows (format 2).
    windows: Vec<u64>,
    /// Every `dynamic`'s running instance, by `DynamicId` (format 3).
    dynamic: Vec<Option<DynamicCell>>,
    /// For a specification with periodic streams, the steps each clock has
    /// run (input steps, then each period's ticks), by which its rings are
    /// indexed; empty otherwise (format 4).
    clocks: Vec<u64>,
    /// A keyed monitor's key of a specification with periodic streams: the
    /// scheduler of the key's own ticks and the time of its last row (format
    /// 5); `None` for a plain monitor's run (its ticks are its caller's).
    ticks: Option<KeyTicks>,
}

/// The ticks of one key of a keyed monitor: its scheduler (each period's
/// next tick) and the time of its last row, which `--max-gap` measures a
/// gap from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct KeyTicks {
    pub(crate) scheduler: crate::time::Scheduler,
    pub(crate) last: Option<i64>,
}

/// A running `dynamic` instance: its string, its held result, how many
/// instances were started, and the instance's own run (a body of the
/// instance's specification, with that specification's fingerprint).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct DynamicCell {
    source: String,
    held: Option<Cell>,
    started: u64,
    run: Box<Body>,
}

/// A value or ⊥: what a slot holds, or a ring entry is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum Cell {
    Deferred,
    Int(i64),
    Float(F64),
    Bool(bool),
    Str(String),
    Unit,
    List(#[serde(deserialize_with = "nested")] Vec<Cell>),
    Tuple(#[serde(deserialize_with = "nested")] Vec<Cell>),
    Map(#[serde(deserialize_with = "nested")] Vec<(String, Cell)>),
    /// A function value, by its text: restoring one is refused (see
    /// `Cell::sample`), and the slots of lambda nodes, which hold one at
    /// every step, are not captured.
    Func(String),
    /// A list's NoVal (false) or ⊥ (true) element.
    Marker(bool),
}

thread_local! {
    /// How many containers deep the cell being read is, on this thread.
    static CELL_DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Reads a container cell's parts one level deeper, refusing a cell nested
/// deeper than any value a run holds ([`MAX_VALUE_NESTING`]): a snapshot is
/// untrusted input, and its decoder recurses once per level.
fn nested<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            CELL_DEPTH.with(|n| n.set(n.get() - 1));
        }
    }
    let depth = CELL_DEPTH.with(|n| {
        n.set(n.get() + 1);
        n.get()
    });
    let _leave = Leave;
    if depth > MAX_VALUE_NESTING {
        return Err(de::Error::custom(format_args!(
            "a value nests containers more than {MAX_VALUE_NESTING} deep"
        )));
    }
    T::deserialize(d)
}

/// A slot at a step boundary: NoVal and never had a value, NoVal holding its
/// last value, or a value (or ⊥) this step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum Slot {
    NoVal,
    Held(Cell),
    Now(Cell),
}

/// A runtime error as stored: `RuntimeError` with its kind and operation by
/// name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct StopError {
    kind: Kind,
    op: String,
    detail: Option<String>,
    stream: String,
    step: u64,
}

/// `ErrorKind`, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
enum Kind {
    IntegerOverflow,
    DivisionByZero,
    InvalidOperand,
    StringTooLong,
    IndexOutOfBounds,
    MissingKey,
    EmptyList,
    InvalidDynamic,
    RecursionTooDeep,
    ValueTooDeep,
    WindowFull,
}

impl From<ErrorKind> for Kind {
    fn from(k: ErrorKind) -> Kind {
        match k {
            ErrorKind::IntegerOverflow => Kind::IntegerOverflow,
            ErrorKind::DivisionByZero => Kind::DivisionByZero,
            ErrorKind::InvalidOperand => Kind::InvalidOperand,
            ErrorKind::StringTooLong => Kind::StringTooLong,
            ErrorKind::RecursionTooDeep => Kind::RecursionTooDeep,
            ErrorKind::InvalidDynamic => Kind::InvalidDynamic,
            ErrorKind::EmptyList => Kind::EmptyList,
            ErrorKind::MissingKey => Kind::MissingKey,
            ErrorKind::IndexOutOfBounds => Kind::IndexOutOfBounds,
            ErrorKind::ValueTooDeep => Kind::ValueTooDeep,
            ErrorKind::WindowFull => Kind::WindowFull,
        }
    }
}

impl From<Kind> for ErrorKind {
    fn from(k: Kind) -> ErrorKind {
        match k {
            Kind::IntegerOverflow => ErrorKind::IntegerOverflow,
            Kind::DivisionByZero => ErrorKind::DivisionByZero,
            Kind::InvalidOperand => ErrorKind::InvalidOperand,
            Kind::StringTooLong => ErrorKind::StringTooLong,
            Kind::RecursionTooDeep => ErrorKind::RecursionTooDeep,
            Kind::InvalidDynamic => ErrorKind::InvalidDynamic,
            Kind::EmptyList => ErrorKind::EmptyList,
            Kind::MissingKey => ErrorKind::MissingKey,
            Kind::IndexOutOfBounds => ErrorKind::IndexOutOfBounds,
            Kind::ValueTooDeep => ErrorKind::ValueTooDeep,
            Kind::WindowFull => ErrorKind::WindowFull,
        }
    }
}

/// A float by its bits (see the module doc for its two encodings).
#[derive(Clone, Copy, Debug, PartialEq)]
struct F64(u64);

impl F64 {
    /// The JSON string of a non-finite float.
    fn special(self) -> String {
        let f = f64::from_bits(self.0);
        if f == f64::INFINITY {
            "inf".into()
        } else if f == f64::NEG_INFINITY {
            "-inf".into()
        } else if self.0 == f64::NAN.to_bits() {
            "NaN".into()
        } else {
            format!("NaN:0x{:016x}", self.0)
        }
    }

    fn from_special(s: &str) -> Option<F64> {
        match s {
            "inf" => Some(F64(f64::INFINITY.to_bits())),
            "-inf" => Some(F64(f64::NEG_INFINITY.to_bits())),
            "NaN" => Some(F64(f64::NAN.to_bits())),
            _ => {
                let hex = s.strip_prefix("NaN:0x")?;
                let bits = u64::from_str_radix(hex, 16).ok()?;
                (hex.len() == 16 && f64::from_bits(bits).is_nan()).then_some(F64(bits))
            }
        }
    }
}

impl Serialize for F64 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = f64::from_bits(self.0);
        if s.is_human_readable() && !f.is_finite() {
            s.serialize_str(&self.special())
        } else {
            s.serialize_f64(f)
        }
    }
}

impl<'de> Deserialize<'de> for F64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<F64, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = F64;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a float, or one of \"inf\", \"-inf\", \"NaN\", \"NaN:0x<16 hex digits>\"",
                )
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<F64, E> {
                Ok(F64(v.to_bits()))
            }
            // A JSON integer (`3`) read where a float is stored.
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<F64, E> {
                Ok(F64((v as f64).to_bits()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<F64, E> {
                Ok(F64((v as f64).to_bits()))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<F64, E> {
                F64::from_special(s).ok_or_else(|| E::invalid_value(de::Unexpected::Str(s), &self))
            }
        }
        if d.is_human_readable() {
            d.deserialize_any(V)
        } else {
            d.deserialize_f64(V)
        }
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&self.to_string())
        } else {
            self.0.serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Fingerprint, D::Error> {
        if !d.is_human_readable() {
            return <[u8; 32]>::deserialize(d).map(Fingerprint);
        }
        let s = String::deserialize(d)?;
        let bytes = s.as_bytes();
        if bytes.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(de::Error::custom("a fingerprint is 64 hexadecimal digits"));
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let hex = std::str::from_utf8(pair).map_err(de::Error::custom)?;
            out[i] = u8::from_str_radix(hex, 16).map_err(de::Error::custom)?;
        }
        Ok(Fingerprint(out))
    }
}

impl Cell {
    fn of(s: Sample) -> Option<Cell> {
        Some(match s {
            Sample::NoVal => return None,
            Sample::Deferred => Cell::Deferred,
            Sample::Value(Value::Int(i)) => Cell::Int(i),
            Sample::Value(Value::Float(f)) => Cell::Float(F64(f.to_bits())),
            Sample::Value(Value::Bool(b)) => Cell::Bool(b),
            Sample::Value(Value::Str(s)) => Cell::Str(s.to_string()),
            Sample::Value(Value::Unit) => Cell::Unit,
            Sample::Value(v) => Cell::of_value(&v),
        })
    }

    fn of_value(v: &Value) -> Cell {
        let all = |items: &[Value]| items.iter().map(Cell::of_value).collect();
        match v {
            Value::Int(i) => Cell::Int(*i),
            Value::Float(f) => Cell::Float(F64(f.to_bits())),
            Value::Bool(b) => Cell::Bool(*b),
            Value::Str(s) => Cell::Str(s.to_string()),
            Value::Unit => Cell::Unit,
            Value::List(items) => Cell::List(items.iter().map(Cell::of_value).collect()),
            Value::Tuple(items) => Cell::Tuple(all(items)),
            Value::Map(m) => Cell::Map(
                m.iter()
                    .map(|(k, x)| (k.to_string(), Cell::of_value(x)))
                    .collect(),
            ),
            Value::Func(_) => Cell::Func(v.to_string()),
            Value::Marker(m) => Cell::Marker(*m == crate::value::Marker::Deferred),
        }
    }

    /// Whether this cell, or a part of it, is a function (which a snapshot
    /// cannot give back).
    fn has_function(&self) -> bool {
        match self {
            Cell::Func(_) => true,
            Cell::List(items) | Cell::Tuple(items) => items.iter().any(Cell::has_function),
            Cell::Map(m) => m.iter().any(|(_, c)| c.has_function()),
            _ => false,
        }
    }

    /// Why this cell (a slot's or a ring entry's value, at the top) is not
    /// one a run can hold: ⊥ or a marker inside a container (only a list's
    /// element may be a marker, and a marker is never a value of its own).
    fn malformed(&self, top: bool, in_list: bool) -> Option<&'static str> {
        match self {
            Cell::Deferred if !top => Some("⊥ inside a container"),
            Cell::Marker(_) if !in_list => Some("a NoVal or ⊥ element outside a list"),
            Cell::List(items) => items.iter().find_map(|c| c.malformed(false, true)),
            Cell::Tuple(items) => items.iter().find_map(|c| c.malformed(false, false)),
            Cell::Map(m) => m.iter().find_map(|(_, c)| c.malformed(false, false)),
            _ => None,
        }
    }

    /// The value of a part of a container (`malformed` refused a ⊥ there
    /// before any state is built; it would read as a ⊥ element).
    fn value(&self) -> Value {
        match self.sample() {
            Sample::Value(v) => v,
            Sample::Deferred => Value::Marker(crate::value::Marker::Deferred),
            Sample::NoVal => Value::Marker(crate::value::Marker::NoVal),
        }
    }

    /// The sample of a cell; a function cell (which `validate` refuses
    /// before any state is built) gives its text.
    fn sample(&self) -> Sample {
        match self {
            Cell::List(items) => {
                Sample::Value(Value::list(items.iter().map(Cell::value).collect()))
            }
            Cell::Tuple(items) => {
                Sample::Value(Value::tuple(items.iter().map(Cell::value).collect()))
            }
            Cell::Map(m) => Sample::Value(Value::Map(std::sync::Arc::new(
                m.iter()
                    .map(|(k, c)| (k.as_str().into(), c.value()))
                    .collect(),
            ))),
            Cell::Func(text) => Sample::Value(Value::Str(text.as_str().into())),
            Cell::Marker(deferred) => Sample::Value(Value::Marker(match deferred {
                true => crate::value::Marker::Deferred,
                false => crate::value::Marker::NoVal,
            })),
            Cell::Deferred => Sample::Deferred,
            Cell::Int(i) => Sample::Value(Value::Int(*i)),
            Cell::Float(f) => Sample::Value(Value::Float(f64::from_bits(f.0))),
            Cell::Bool(b) => Sample::Value(Value::Bool(*b)),
            Cell::Str(s) => Sample::Value(Value::Str(s.as_str().into())),
            Cell::Unit => Sample::Value(Value::Unit),
        }
    }
}

impl Snapshot {
    /// Captures `run`, a run of `plan`, at a step boundary.
    pub(crate) fn capture(plan: &Plan, run: &Run) -> Snapshot {
        Snapshot::capture_with(plan, run, fingerprint(plan))
    }

    /// As `capture`, with the plan's fingerprint already computed (a keyed
    /// monitor captures many runs of one plan).
    pub(crate) fn capture_with(plan: &Plan, run: &Run, fingerprint: Fingerprint) -> Snapshot {
        Snapshot {
            body: body_of(plan, &run.state, run.failed.as_deref(), fingerprint),
        }
    }

    /// This snapshot with `ticks` as its key's ticks (a keyed monitor's key).
    pub(crate) fn with_ticks(mut self, ticks: Option<KeyTicks>) -> Snapshot {
        self.body.ticks = ticks;
        self
    }

    /// The key's ticks the snapshot holds, if any (see [`Snapshot::scheduler`]).
    pub(crate) fn key_ticks(&self) -> Option<&KeyTicks> {
        self.body.ticks.as_ref()
    }

    /// The scheduler of the ticks of a keyed monitor's key, and the time of
    /// the key's last row, for a specification with periodic streams (a
    /// snapshot [`crate::KeyedMonitor::snapshot_key`] took, or an evicted
    /// key's); `None` for a plain monitor's snapshot, whose ticks are kept
    /// by its caller.
    pub fn scheduler(&self) -> Option<(&crate::time::Scheduler, Option<crate::time::Time>)> {
        let t = self.body.ticks.as_ref()?;
        Some((&t.scheduler, t.last.map(crate::time::Time)))
    }
}

/// The body of a run state of `plan`. The slots of the nodes that make
/// functions (lambdas, `partial`, `fix`) are not kept: each is NoVal only
/// while an operand has never had a value (so its held value is never
/// read), and the next step makes it again before anything reads it.
fn body_of(
    plan: &Plan,
    st: &NodeState,
    failed: Option<&RuntimeError>,
    fingerprint: Fingerprint,
) -> Body {
    {
        let stored = stored_slots(plan);
        let mut remade = vec![false; stored];
        for (n, node) in plan.nodes.iter().enumerate() {
            if matches!(node.op, NodeOp::Lambda(_) | NodeOp::Partial | NodeOp::Fix) {
                remade[plan.node_slot(crate::plan::NodeId(n as u32)).index()] = true;
            }
        }
        let slots = (0..stored as u32)
            .map(|i| match Cell::of(st.raw(crate::plan::Slot(i))) {
                _ if remade[i as usize] => Slot::NoVal,
                Some(now) => Slot::Now(now),
                None => match Cell::of(st.held(crate::plan::Slot(i))) {
                    Some(held) => Slot::Held(held),
                    None => Slot::NoVal,
                },
            })
            .collect();
        let flags = st
            .flag
            .iter()
            .enumerate()
            .filter(|(_, set)| **set)
            .map(|(n, _)| n as u32)
            .collect();
        let rings = (0..plan.offset_nodes.len())
            .map(|r| {
                st.ring_entries(r)
                    .into_iter()
                    .map(|s| Cell::of(s).expect("engine bug: a ring entry is NoVal"))
                    .collect()
            })
            .collect();
        let stopped = failed.map(StopError::of);
        let dynamic = (st.dynamic.iter())
            .map(|d| {
                let (source, inner, inner_state, held) = d.parts()?;
                Some(DynamicCell {
                    source: source.to_string(),
                    held: Cell::of(held.clone()),
                    started: d.started,
                    run: Box::new(body_of(inner, inner_state, None, self::fingerprint(inner))),
                })
            })
            .collect();
        Body {
            vigil_snapshot: FORMAT_VERSION,
            fingerprint,
            step: st.step,
            slots,
            flags,
            rings,
            stopped,
            windows: st.windows.clone(),
            dynamic,
            clocks: st.clocks.clone(),
            ticks: None,
        }
    }
}

impl Body {
    /// Whether the run holds a function value where a snapshot cannot give
    /// it back (a stream's slot or an offset's history, also inside a
    /// container): restoring such a snapshot is refused.
    fn holds_function(&self) -> bool {
        let slots = self.slots.iter().filter_map(|s| match s {
            Slot::Now(c) | Slot::Held(c) => Some(c),
            Slot::NoVal => None,
        });
        slots
            .chain(self.rings.iter().flatten())
            .any(Cell::has_function)
    }
}

impl Snapshot {
    /// Whether restoring this snapshot would be refused because the run
    /// holds a function value outside a lambda (a stream holding one, or an
    /// offset of such a stream): a checkpoint is not written of such a run.
    pub fn holds_function(&self) -> bool {
        self.body.holds_function()
    }

    /// Rebuilds the run state for `plan`: checks the fingerprint, then every
    /// length and value against the plan, and only then builds the state.
    pub(crate) fn restore_state(
        &self,
        plan: &Plan,
    ) -> Result<(NodeState, Option<RuntimeError>), SnapshotError> {
        self.restore_state_with(plan, fingerprint(plan))
    }

    /// As `restore_state`, with the plan's fingerprint already computed.
    pub(crate) fn restore_state_with(
        &self,
        plan: &Plan,
        spec_fp: Fingerprint,
    ) -> Result<(NodeState, Option<RuntimeError>), SnapshotError> {
        self.body.restore_state(plan, spec_fp)
    }
}

impl Body {
    /// See `Snapshot::restore_state_with`.
    fn restore_state(
        &self,
        plan: &Plan,
        spec_fp: Fingerprint,
    ) -> Result<(NodeState, Option<RuntimeError>), SnapshotError> {
        let b = self;
        // A key's run inside a keyed snapshot carries its own version, which
        // only this check reads (a plain snapshot's was checked on decoding).
        if b.vigil_snapshot != FORMAT_VERSION {
            return Err(SnapshotError::Version {
                found: b.vigil_snapshot,
                supported: FORMAT_VERSION,
            });
        }
        if b.fingerprint != spec_fp {
            return Err(SnapshotError::OtherSpec {
                snapshot: b.fingerprint,
                spec: spec_fp,
            });
        }
        let bad = |m: String| Err(SnapshotError::Inconsistent(m));
        // A timed plan's rings are indexed by their clocks' counts, each at
        // most the steps: input steps and ticks are both steps.
        let clocks = match plan.is_timed() {
            true => plan.periods.len() + 1,
            false => 0,
        };
        if b.clocks.len() != clocks {
            return bad(format!(
                "{} clocks, the specification has {clocks}",
                b.clocks.len()
            ));
        }
        if let Some(t) = &b.ticks
            && (!plan.is_timed() || t.scheduler.periods() != &plan.periods[..])
        {
            return bad(format!(
                "a key's ticks of the periods {:?} (ns), the specification's are {:?}",
                t.scheduler.periods(),
                plan.periods
            ));
        }
        if let Some(c) = b.clocks.iter().find(|&&c| c > b.step) {
            return bad(format!("a clock ran {c} steps of {}", b.step));
        }
        let stored = stored_slots(plan);
        if b.slots.len() != stored {
            return bad(format!(
                "{} slots, the specification has {stored}",
                b.slots.len()
            ));
        }
        let cells = (b.slots.iter())
            .filter_map(|s| match s {
                Slot::Now(c) | Slot::Held(c) => Some(c),
                Slot::NoVal => None,
            })
            .chain(b.rings.iter().flatten());
        for c in cells {
            if let Some(why) = c.malformed(true, false) {
                return bad(format!("a value holds {why}"));
            }
            if c.has_function() {
                return bad(
                    "the run holds a function value outside a lambda (a stream or an offset of one), which a snapshot cannot give back".into(),
                );
            }
        }
        if b.dynamic.len() != plan.dynamics as usize {
            return bad(format!(
                "{} dynamic instances, the specification has {}",
                b.dynamic.len(),
                plan.dynamics
            ));
        }
        // The next row's step must exist (`step + 1` at its end).
        if b.step == u64::MAX {
            return bad(format!("step {} is past the last step", b.step));
        }
        let mut previous = None;
        for &n in &b.flags {
            let ok = previous.is_none_or(|p| n > p)
                && plan.nodes.get(n as usize).is_some_and(|node| {
                    matches!(
                        node.op,
                        NodeOp::Call(Builtin::When | Builtin::Init | Builtin::Update)
                    )
                });
            if !ok {
                return bad(format!(
                    "flag of node {n}, which is not a `when`, `init` or `update` node (or not in increasing order)"
                ));
            }
            previous = Some(n);
        }
        if b.rings.len() != plan.offset_nodes.len() {
            return bad(format!(
                "{} offset rings, the specification has {}",
                b.rings.len(),
                plan.offset_nodes.len()
            ));
        }
        for (r, (&id, entries)) in plan.offset_nodes.iter().zip(&b.rings).enumerate() {
            let NodeOp::Offset(n) = plan.node(id).op else {
                unreachable!("offset_nodes holds offsets")
            };
            // A timed plan's rings are full (of ⊥) from the start.
            let want = match plan.is_timed() {
                true => u64::from(n),
                false => b.step.min(u64::from(n)),
            };
            if entries.len() as u64 != want {
                return bad(format!(
                    "ring {r} (offset {n}) has {} entries; at step {} it has {want}",
                    entries.len(),
                    b.step
                ));
            }
        }
        if b.windows.len() != plan.window_words {
            return bad(format!(
                "{} window words, the specification's windows have {}",
                b.windows.len(),
                plan.window_words
            ));
        }
        let mut windows = b.windows.clone();
        for (k, w) in plan.windows.iter().enumerate() {
            if let Err(m) = w.shape.restore(&mut windows[w.words()], b.step) {
                return bad(format!("window {k} ({}): {m}", w.shape.window));
            }
        }
        let failed = match &b.stopped {
            None => None,
            Some(e) => {
                let Some(op) = static_op(&e.op) else {
                    return bad(format!(
                        "the runtime error's operation `{}` is unknown",
                        e.op
                    ));
                };
                if plan.spec.stream_by_name(&e.stream).is_none() {
                    return bad(format!(
                        "the runtime error names no stream of the specification (`{}`)",
                        e.stream
                    ));
                }
                Some(RuntimeError {
                    kind: e.kind.into(),
                    op,
                    detail: e.detail.clone(),
                    stream: e.stream.clone(),
                    step: e.step,
                })
            }
        };
        let mut st = NodeState::new(plan);
        st.step = b.step;
        st.clocks.clone_from(&b.clocks);
        // A timed plan's state starts with its rings full of ⊥: they are
        // replaced by the snapshot's.
        st.clear_rings();
        for (i, slot) in b.slots.iter().enumerate() {
            let i = crate::plan::Slot(i as u32);
            match slot {
                Slot::NoVal => {}
                Slot::Now(c) => st.write(i, c.sample()),
                // A held value is the slot's last value, then NoVal.
                Slot::Held(c) => {
                    st.write(i, c.sample());
                    st.write(i, Sample::NoVal);
                }
            }
        }
        for &n in &b.flags {
            st.flag[n as usize] = true;
        }
        st.windows = windows;
        st.set_rings(
            b.rings
                .iter()
                .map(|entries| entries.iter().map(Cell::sample).collect())
                .collect(),
        );
        let dynamic_nodes = plan
            .nodes
            .iter()
            .filter(|n| matches!(n.op, NodeOp::Dynamic(_)));
        for (k, (node, cell)) in dynamic_nodes.zip(&b.dynamic).enumerate() {
            let Some(cell) = cell else { continue };
            let held = cell.held.as_ref().map_or(Sample::NoVal, Cell::sample);
            let restored = crate::canonical::dynamic::DynRun::restored(
                plan,
                node,
                &cell.source,
                held,
                cell.started,
                |inner| {
                    let inner_snapshot = Snapshot {
                        body: (*cell.run).clone(),
                    };
                    inner_snapshot.restore_state(inner).map(|(s, _)| s)
                },
            );
            st.dynamic[k] = match restored {
                Ok(run) => run,
                Err(e) => return bad(format!("dynamic instance {k} (`{}`): {e}", cell.source)),
            };
        }
        Ok((st, failed))
    }
}

impl Snapshot {
    /// Where `kept` (what an owner kept of a run restored from `self`)
    /// differs from `self`, named for an error message: the first slot by
    /// its stream (or node), else the part that differs. `None` when the
    /// owner kept all of it.
    pub(crate) fn lost_in(&self, kept: &Snapshot, plan: &Plan) -> Option<String> {
        let (a, b) = (&self.body, &kept.body);
        let streams = plan.spec.streams.len();
        if let Some(i) = (0..a.slots.len().min(b.slots.len())).find(|&i| a.slots[i] != b.slots[i]) {
            return Some(if i < streams {
                format!(
                    "the slot of stream `{}`",
                    plan.stream_name(crate::lang::check::StreamId(i as u32))
                )
            } else {
                match plan.node_slots.iter().position(|&slot| slot.index() == i) {
                    Some(n) => format!("the slot of node {n}"),
                    None => format!("slot {i}, which no node uses"),
                }
            });
        }
        (a != b).then(|| "its flags, rings, windows or error".to_string())
    }

    /// The step the next row will be: the number of rows the snapshot's run
    /// had evaluated.
    pub fn step(&self) -> u64 {
        self.body.step
    }

    /// The fingerprint of the specification the snapshot belongs to.
    pub fn fingerprint(&self) -> Fingerprint {
        self.body.fingerprint
    }

    /// Whether the run was stopped by a runtime error (a monitor restored
    /// from it reports that error on every row).
    pub fn is_stopped(&self) -> bool {
        self.body.stopped.is_some()
    }

    /// The binary form: [`MAGIC`], the format version (u32, little-endian),
    /// the body's length (u64, little-endian) and SHA-256, then the body
    /// (postcard).
    pub fn to_bytes(&self) -> Vec<u8> {
        let body =
            postcard::to_stdvec(&self.body).expect("engine bug: a snapshot body always serialises");
        seal(&MAGIC, FORMAT_VERSION, &body)
    }

    /// Reads the binary form. Checks the magic, the version, the length and
    /// the checksum before decoding the body.
    pub fn from_bytes(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
        let body = unseal(bytes, &MAGIC, FORMAT_VERSION)?;
        let body: Body = decode_postcard(body)?;
        if body.vigil_snapshot != FORMAT_VERSION {
            return Err(SnapshotError::Version {
                found: body.vigil_snapshot,
                supported: FORMAT_VERSION,
            });
        }
        Ok(Snapshot { body })
    }

    /// The JSON form, for inspection: one object with the body's fields
    /// (`vigil_snapshot` is the format version).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.body).expect("engine bug: a snapshot body always serialises")
    }

    /// Reads the JSON form. The version field is checked before the rest is
    /// decoded, so a snapshot of another version is reported as such.
    pub fn from_json(text: &str) -> Result<Snapshot, SnapshotError> {
        Ok(Snapshot {
            body: from_json_versioned(text, "vigil_snapshot", FORMAT_VERSION)?,
        })
    }
}

/// Reads a JSON envelope whose version is the field `field`: the version is
/// checked before the rest is decoded, so a snapshot of another version is
/// reported as such rather than as a mismatching field.
fn from_json_versioned<T: de::DeserializeOwned>(
    text: &str,
    field: &str,
    supported: u32,
) -> Result<T, SnapshotError> {
    let malformed = |e: serde_json::Error| SnapshotError::Malformed(format!("JSON: {e}"));
    let top: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text).map_err(malformed)?;
    match top.get(field).map(serde_json::Value::as_u64) {
        None => return Err(SnapshotError::NotASnapshot),
        Some(Some(v)) if v == u64::from(supported) => {}
        Some(Some(found)) => {
            return Err(SnapshotError::Version {
                found: u32::try_from(found).unwrap_or(u32::MAX),
                supported,
            });
        }
        Some(None) => {
            return Err(SnapshotError::Malformed(format!(
                "JSON: the version field `{field}` is not a number"
            )));
        }
    }
    serde_json::from_str(text).map_err(malformed)
}

/// The version of the keyed snapshot format this vigil writes and reads (the
/// run of each key inside has the [`FORMAT_VERSION`] of a [`Snapshot`]).
pub const KEYED_FORMAT_VERSION: u32 = 2;

/// The first bytes of a binary keyed snapshot.
pub const KEYED_MAGIC: [u8; 8] = *b"VIGILKSN";

/// The runs of every live key of a keyed monitor, at a row boundary:
/// what `KeyedMonitor::snapshot` takes and `KeyedMonitorBuilder::restore`
/// continues, on any tier.
///
/// It holds the key input's name, the rows the keyed monitor had evaluated,
/// and one [`Snapshot`] per live key, least recently used first (so a
/// restored monitor evicts in the same order). Its encodings are those of a
/// snapshot: binary ([`KEYED_MAGIC`], the version, the body's length and
/// SHA-256, then postcard) and JSON (`vigil_keyed_snapshot` is the
/// version).
#[derive(Clone, Debug, PartialEq)]
pub struct KeyedSnapshot {
    body: KeyedBody,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct KeyedBody {
    vigil_keyed_snapshot: u32,
    fingerprint: Fingerprint,
    /// The key input's name.
    key: String,
    /// Rows evaluated over every key (evicted ones included).
    rows: u64,
    /// Every live key's run, least recently used first.
    keys: Vec<KeyedEntry>,
}

/// One key of a keyed snapshot: the key's cell and its run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct KeyedEntry {
    key: Cell,
    run: Body,
}

/// Checks a keyed snapshot's fingerprint and key input (`snapshot_key`)
/// against the monitor's plan and key input; returns the plan's
/// fingerprint, which each entry's run is checked against
/// ([`KeyedEntry::restore`]).
pub(crate) fn check_keyed_head(
    plan: &Plan,
    fingerprint: Fingerprint,
    snapshot_key: &str,
    key: &str,
) -> Result<Fingerprint, SnapshotError> {
    let spec_fp = self::fingerprint(plan);
    if fingerprint != spec_fp {
        return Err(SnapshotError::OtherSpec {
            snapshot: fingerprint,
            spec: spec_fp,
        });
    }
    if snapshot_key != key {
        return Err(SnapshotError::Inconsistent(format!(
            "the snapshot is keyed by `{snapshot_key}`, the monitor by `{key}`"
        )));
    }
    Ok(spec_fp)
}

impl KeyedEntry {
    /// The entry's key; ⊥ is refused.
    pub(crate) fn key(&self) -> Result<Key, SnapshotError> {
        match self.key.sample() {
            Sample::Value(v) => Ok(Key::new(v)),
            _ => Err(SnapshotError::Inconsistent("a key is ⊥".to_string())),
        }
    }

    /// Rebuilds the run state of key `key` (this entry's) for `plan`, whose
    /// fingerprint is `spec_fp`, checked as `Snapshot::restore_state`
    /// checks a run. That no key repeats is the monitor's to check.
    pub(crate) fn restore(
        &self,
        key: &Key,
        plan: &Plan,
        spec_fp: Fingerprint,
    ) -> Result<(NodeState, Option<RuntimeError>), SnapshotError> {
        if self.run.fingerprint != spec_fp {
            return Err(SnapshotError::Inconsistent(format!(
                "the run of key {key} belongs to another specification"
            )));
        }
        self.run.restore_state(plan, spec_fp).map_err(|e| match e {
            SnapshotError::Inconsistent(m) => {
                SnapshotError::Inconsistent(format!("key {key}: {m}"))
            }
            other => other,
        })
    }

    /// The key's ticks the entry holds, if any.
    pub(crate) fn ticks(&self) -> Option<&KeyTicks> {
        self.run.ticks.as_ref()
    }

    /// Appends the entry's postcard bytes to `out`: what
    /// `RunEncoder::encode_entry` gives its key and a run holding the same
    /// state.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let bytes = postcard::to_extend(self, std::mem::take(out))
            .expect("engine bug: a snapshot body always serialises");
        *out = bytes;
    }
}

impl KeyedSnapshot {
    /// Whether some key's run holds a function value a snapshot cannot give
    /// back (see [`Snapshot::holds_function`]).
    pub fn holds_function(&self) -> bool {
        self.body.keys.iter().any(|k| k.run.holds_function())
    }

    /// A keyed snapshot of the key runs' snapshots (least recently used
    /// first), taken of `plan`'s runs.
    pub(crate) fn from_parts(
        plan: &Plan,
        key: &str,
        rows: u64,
        runs: Vec<(Key, Snapshot)>,
    ) -> KeyedSnapshot {
        let keys = runs
            .into_iter()
            .map(|(k, snapshot)| KeyedEntry {
                key: Cell::of(Sample::Value(k.value().clone())).expect("a key is a value"),
                run: snapshot.body,
            })
            .collect();
        KeyedSnapshot {
            body: KeyedBody {
                vigil_keyed_snapshot: KEYED_FORMAT_VERSION,
                fingerprint: fingerprint(plan),
                key: key.to_string(),
                rows,
                keys,
            },
        }
    }

    /// The live keys' entries, least recently used first.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &KeyedEntry> + '_ {
        self.body.keys.iter()
    }

    /// The number of keys it holds.
    pub fn len(&self) -> usize {
        self.body.keys.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.body.keys.is_empty()
    }

    /// The name of the key input the monitor was keyed by.
    pub fn key_input(&self) -> &str {
        &self.body.key
    }

    /// The rows the keyed monitor had evaluated, over every key.
    pub fn rows(&self) -> u64 {
        self.body.rows
    }

    /// The fingerprint of the specification it belongs to.
    pub fn fingerprint(&self) -> Fingerprint {
        self.body.fingerprint
    }

    /// The keys it holds, least recently used first.
    pub fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.body.keys.iter().filter_map(|e| match e.key.sample() {
            Sample::Value(v) => Some(Key::new(v)),
            _ => None,
        })
    }

    /// The snapshot of one key's run, if it holds that key (a linear search).
    pub fn get(&self, key: &Key) -> Option<Snapshot> {
        self.body
            .keys
            .iter()
            .find(|e| e.key.sample().value() == Some(key.value()))
            .map(|e| Snapshot {
                body: e.run.clone(),
            })
    }

    /// The binary form (see the type's documentation).
    pub fn to_bytes(&self) -> Vec<u8> {
        let body = postcard::to_stdvec(&self.body)
            .expect("engine bug: a keyed snapshot body always serialises");
        seal(&KEYED_MAGIC, KEYED_FORMAT_VERSION, &body)
    }

    /// Reads the binary form, checking the magic, version, length and
    /// checksum before decoding the body.
    pub fn from_bytes(bytes: &[u8]) -> Result<KeyedSnapshot, SnapshotError> {
        let body = unseal(bytes, &KEYED_MAGIC, KEYED_FORMAT_VERSION)?;
        let body: KeyedBody = decode_postcard(body)?;
        if body.vigil_keyed_snapshot != KEYED_FORMAT_VERSION {
            return Err(SnapshotError::Version {
                found: body.vigil_keyed_snapshot,
                supported: KEYED_FORMAT_VERSION,
            });
        }
        Ok(KeyedSnapshot { body })
    }

    /// The JSON form, for inspection.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.body)
            .expect("engine bug: a keyed snapshot body always serialises")
    }

    /// Reads the JSON form (the version is checked first).
    pub fn from_json(text: &str) -> Result<KeyedSnapshot, SnapshotError> {
        Ok(KeyedSnapshot {
            body: from_json_versioned(text, "vigil_keyed_snapshot", KEYED_FORMAT_VERSION)?,
        })
    }
}

/// Decodes a postcard value that must use every byte.
pub(crate) fn decode_postcard<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, SnapshotError> {
    let (value, rest) =
        postcard::take_from_bytes(bytes).map_err(|e| SnapshotError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(SnapshotError::Malformed(format!(
            "{} bytes after the end of the data",
            rest.len()
        )));
    }
    Ok(value)
}

/// Wraps `body` in a binary envelope: `magic`, `version` (u32 LE), the body's
/// length (u64 LE) and SHA-256, then the body.
pub(crate) fn seal(magic: &[u8; 8], version: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&sha256(body));
    out.extend_from_slice(body);
    out
}

/// The body of a binary envelope made by `seal`, once its magic, version,
/// length and checksum are checked.
pub(crate) fn unseal<'a>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    version: u32,
) -> Result<&'a [u8], SnapshotError> {
    if bytes.len() < magic.len() || bytes[..magic.len()] != magic[..] {
        return Err(SnapshotError::NotASnapshot);
    }
    if bytes.len() < HEADER_LEN {
        return Err(SnapshotError::Truncated {
            expected: HEADER_LEN as u64,
            found: bytes.len() as u64,
        });
    }
    let word = |at: usize, n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&bytes[at..at + n]);
        u64::from_le_bytes(b)
    };
    let found = word(8, 4) as u32;
    if found != version {
        return Err(SnapshotError::Version {
            found,
            supported: version,
        });
    }
    let len = word(12, 8);
    let body = &bytes[HEADER_LEN..];
    if (body.len() as u64) < len {
        return Err(SnapshotError::Truncated {
            expected: len,
            found: body.len() as u64,
        });
    }
    if (body.len() as u64) > len {
        return Err(SnapshotError::Malformed(format!(
            "{} bytes after the end of the data",
            body.len() as u64 - len
        )));
    }
    if sha256(body)[..] != bytes[20..52] {
        return Err(SnapshotError::Checksum);
    }
    Ok(body)
}

pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The slots a snapshot stores: every stream's and node's, not the
/// constants' (the last `plan.consts.len()` slots).
fn stored_slots(plan: &Plan) -> usize {
    plan.slot_count() - plan.consts.len()
}

/// The `&'static str` of an operation name a runtime error can carry, so a
/// restored error is the very value the run had.
fn static_op(name: &str) -> Option<&'static str> {
    BIN_OPS
        .iter()
        .map(|&b| op_name(b))
        .chain(Builtin::ALL.iter().map(|b| b.name()))
        .chain(crate::lang::ast::Method::ALL.iter().map(|m| m.name()))
        .chain(crate::canonical::func::OPS.iter().copied())
        .chain(["negation", "if"])
        .find(|&n| n == name)
}

/// Every binary operator (`static_op` looks their names up).
const BIN_OPS: [BinOp; 15] = [
    BinOp::Add,
    BinOp::Sub,
    BinOp::Mul,
    BinOp::Div,
    BinOp::Rem,
    BinOp::Eq,
    BinOp::Ne,
    BinOp::Lt,
    BinOp::Le,
    BinOp::Gt,
    BinOp::Ge,
    BinOp::And,
    BinOp::Or,
    BinOp::Implies,
    BinOp::Concat,
];

/// Fails to compile when an operator is added, as a reminder to list it in
/// `BIN_OPS`.
#[allow(dead_code)]
fn bin_ops_are_listed(op: BinOp) {
    match op {
        BinOp::Add
        | BinOp::Sub
        | BinOp::Mul
        | BinOp::Div
        | BinOp::Rem
        | BinOp::Eq
        | BinOp::Ne
        | BinOp::Lt
        | BinOp::Le
        | BinOp::Gt
        | BinOp::Ge
        | BinOp::And
        | BinOp::Or
        | BinOp::Implies
        | BinOp::Concat => {}
    }
}

/// The fingerprint of a plan: SHA-256 of `render_plan`.
pub(crate) fn fingerprint(plan: &Plan) -> Fingerprint {
    Fingerprint(sha256(render_plan(plan).as_bytes()))
}

/// A canonical rendering of everything the run state's layout and meaning
/// depend on: the streams (names, kinds, types, signatures), inputs, outputs,
/// schedule, every node (operation, operands, slots, signature, `if` arm,
/// ring), the constants (floats by their bits) and the ring layout. Spans,
/// comments and whitespace of the source are not in it. Changing this
/// rendering changes every fingerprint: it is part of the format version.
fn render_plan(plan: &Plan) -> String {
    let spec = &plan.spec;
    let mut out = String::from("vigil plan 1\n");
    // Writing to a `String` cannot fail.
    let w = &mut out;
    for (i, s) in spec.streams.iter().enumerate() {
        let kind = match s.kind {
            DeclKind::Input => "in",
            DeclKind::Output => "out",
            DeclKind::Aux => "aux",
            DeclKind::Trigger => "trigger",
        };
        let declared = s.declared.map_or("-".to_string(), |t| t.to_string());
        // Event streams render as they always did, so that the snapshots of
        // specs without periodic streams keep their fingerprints.
        let pace = match s.pace {
            crate::lang::check::Pace::Event => String::new(),
            crate::lang::check::Pace::Periodic(p) => format!(" every {p}ns"),
        };
        let _ = writeln!(
            w,
            "stream {i} {kind} {:?} declared {declared} type {} sig {} defined {}{pace}",
            s.name,
            s.ty,
            s.sig,
            s.def.is_some()
        );
    }
    let ids = |v: &[crate::lang::check::StreamId]| {
        v.iter()
            .map(|s| s.0.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(w, "inputs {}", ids(&spec.inputs));
    let _ = writeln!(w, "outputs {}", ids(&spec.outputs));
    let _ = writeln!(w, "schedule {}", ids(&plan.schedule));
    for (n, node) in plan.nodes.iter().enumerate() {
        let op = match node.op {
            NodeOp::Unary(UnOp::Neg) => "neg".to_string(),
            NodeOp::Unary(UnOp::Not) => "not".to_string(),
            NodeOp::Binary(b) => format!("bin {}", b.symbol()),
            NodeOp::If => "if".to_string(),
            NodeOp::Offset(k) => format!("offset {k}"),
            NodeOp::Call(f) => format!("call {}", f.name()),
            NodeOp::Window(k) => {
                let shape = plan.windows[k.index()].shape;
                // A since and an interval of the same bounds print alike.
                let what = match shape.since_window() {
                    Some(_) => "since",
                    None => "window",
                };
                format!("{what} {} {:?}", shape.window, shape.elem)
            }
            NodeOp::List => "list".to_string(),
            NodeOp::Tuple => "tuple".to_string(),
            NodeOp::Apply => "apply".to_string(),
            NodeOp::Partial => "partial".to_string(),
            NodeOp::Fix => "fix".to_string(),
            NodeOp::Method(m) => format!("method {}", m.name()),
            // What these compute is in their expression (keys, field,
            // body, form), whose text the rendering carries.
            NodeOp::Map | NodeOp::Field | NodeOp::Lambda(_) | NodeOp::Dynamic(_) => {
                let span = spec.ast.expr(node.expr).span;
                let text = spec
                    .source
                    .get(span.start as usize..span.end as usize)
                    .unwrap_or("");
                format!("expr {text:?}")
            }
        };
        let args: Vec<String> = node
            .args
            .iter()
            .map(|a| match a {
                Operand::Node(id) => format!("n{}", id.0),
                Operand::Stream(s) => format!("s{}", s.0),
                Operand::Const(v) => format!("c{}", render_value(v)),
            })
            .collect();
        let branch = node
            .branch
            .map_or("-".to_string(), |b| format!("{}/{}", b.if_node.0, b.arm));
        let _ = writeln!(
            w,
            "node {n} {op} args {} stream {} sig {} branch {branch} ring {} slots {:?} rebound {} slot {}",
            args.join(" "),
            node.stream.0,
            node.sig,
            node.ring_base,
            // As numbers: the fingerprint of a plan must not change with
            // how the engine spells its ids (`Slot`).
            node.slots.map(|s| s.0),
            node.rebound,
            plan.node_slots[n],
        );
    }
    for (s, g) in plan.graphs.iter().enumerate() {
        if let Some(g) = g {
            let _ = writeln!(
                w,
                "graph {s} nodes {}..{} root slot {}",
                g.nodes.start, g.nodes.end, g.root_slot
            );
        }
    }
    let offsets: Vec<String> = plan.offset_nodes.iter().map(|n| n.0.to_string()).collect();
    let _ = writeln!(w, "rings {} len {}", offsets.join(" "), plan.ring_len);
    for c in &plan.consts {
        let _ = writeln!(w, "const {}", render_value(c));
    }
    out
}

fn render_value(v: &Value) -> String {
    match v {
        Value::Int(i) => format!("int {i}"),
        Value::Float(f) => format!("float {:#018x}", f.to_bits()),
        Value::Bool(b) => format!("bool {b}"),
        Value::Str(s) => format!("str {:?}", &**s),
        Value::Unit => "unit".to_string(),
        // Containers and functions are never constants of a plan; their
        // rendering is their text, which names their parts.
        other => format!("{} {other}", other.type_name().to_lowercase()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::{Monitor, Spec, Tier};
    use scalar_ir::frame::tag;

    const SPEC: &str = "in x: Int\nin s: Str\nin f: Float\nout total: Int\nout last: Str\nout w: Bool\nout g: Float\n\
total = default(total[1], 0) + x\nlast = default(s[3], \"-\")\nw = when(x > 2)\ng = default(f[1], 0.5)\n";

    fn spec() -> Spec {
        Spec::parse("t.dsrv", SPEC).unwrap()
    }

    /// The rows the tests feed: Str values (present, empty, absent), NaN
    /// payloads, -0.0 and infinities, and an absent Int now and then.
    fn rows(n: usize) -> Vec<Vec<Option<Value>>> {
        let nan = f64::from_bits(0x7ff8_0000_dead_beef);
        (0..n)
            .map(|i| {
                let f = [Some(-0.0), Some(nan), None, Some(f64::INFINITY)][i % 4];
                let s = (i % 3 != 1).then(|| ["a", "", "é\"\n"][i % 3]);
                let x = (i % 5 != 4).then_some(i as i64);
                vec![
                    x.map(Value::Int),
                    s.map(|s| Value::Str(s.into())),
                    f.map(Value::Float),
                ]
            })
            .collect()
    }

    fn monitor_after(n: usize) -> Monitor {
        let mut m = Monitor::builder(&spec()).tier(Tier::Canonical).build();
        for row in rows(n) {
            m.step(&row).unwrap();
        }
        m
    }

    /// Issue 34, item 1: a snapshot's cells are decoded recursively, so a
    /// (resealed, hostile) body nesting lists 100,000 deep overflowed the
    /// stack; a cell deeper than `MAX_VALUE_NESTING` is now refused, and one
    /// at the limit is read, on a 2 MiB thread.
    #[test]
    fn deep_cells_are_refused_not_a_stack_overflow() {
        // A `Cell::List` is its variant's index and its length, each a varint.
        let list = postcard::to_stdvec(&Cell::List(vec![Cell::Unit])).unwrap();
        let (tag, one) = (list[0], list[1]);
        let nested = move |n: usize| {
            let mut bytes = [tag, one].repeat(n);
            bytes.extend(postcard::to_stdvec(&Cell::Unit).unwrap());
            bytes
        };
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let deep = postcard::from_bytes::<Cell>(&nested(100_000));
                let e = deep.unwrap_err().to_string();
                assert!(!e.is_empty());
                let ok = postcard::from_bytes::<Cell>(&nested(MAX_VALUE_NESTING)).unwrap();
                let past = postcard::from_bytes::<Cell>(&nested(MAX_VALUE_NESTING + 1));
                assert!(past.is_err());
                // The depth count is back to zero after an error and a success.
                assert_eq!(CELL_DEPTH.with(|n| n.get()), 0);
                assert!(matches!(ok, Cell::List(_)));
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn both_encodings_round_trip_bit_for_bit() {
        for n in [0, 1, 2, 3, 4, 7] {
            let snap = monitor_after(n).snapshot();
            let bin = Snapshot::from_bytes(&snap.to_bytes()).unwrap();
            assert_eq!(bin, snap, "binary after {n} rows");
            let json = Snapshot::from_json(&snap.to_json()).unwrap();
            assert_eq!(json, snap, "JSON after {n} rows");
        }
        // Every special float shows up in some snapshot above.
        let json: String = (0..8)
            .map(|n| monitor_after(n).snapshot().to_json())
            .collect();
        for special in ["\"NaN:0x7ff80000deadbeef\"", "{\"Float\":-0.0}", "\"inf\""] {
            assert!(json.contains(special), "{special} in {json}");
        }
    }

    #[test]
    fn floats_in_json_keep_their_bits() {
        let bits = [
            0u64,
            1 << 63,
            1,
            0x3fb9_9999_9999_999a,
            0x7fef_ffff_ffff_ffff,
            0x7ff0_0000_0000_0000,
            0xfff0_0000_0000_0000,
            0x7ff8_0000_0000_0000,
            0xfff8_0000_0000_0000,
            0x7ff0_0000_0000_0001,
            0x4009_21fb_5444_2d18,
            0x0010_0000_0000_0001,
            // Read back one unit off without `float_roundtrip`.
            3172202755002334251,
        ];
        for b in bits {
            let text = serde_json::to_string(&F64(b)).unwrap();
            let back: F64 = serde_json::from_str(&text).unwrap();
            assert_eq!(back.0, b, "{text}");
            let bin = postcard::to_stdvec(&F64(b)).unwrap();
            let back: F64 = postcard::from_bytes(&bin).unwrap();
            assert_eq!(back.0, b);
        }
        // A NaN spelling whose bits are not a NaN would alias a number.
        assert!(serde_json::from_str::<F64>("\"NaN:0x3ff0000000000000\"").is_err());
    }

    proptest::proptest! {
        /// Any float, by its bits, survives JSON and postcard: finite ones
        /// need serde_json's exact parsing (`float_roundtrip`), which its
        /// default parser is not (it is off by one unit in the last place
        /// for some long decimals).
        #[test]
        fn any_float_round_trips(bits in proptest::prelude::any::<u64>()) {
            let text = serde_json::to_string(&F64(bits)).unwrap();
            let back: F64 = serde_json::from_str(&text).unwrap();
            proptest::prop_assert_eq!(back.0, bits, "{}", text);
            let bin = postcard::to_stdvec(&F64(bits)).unwrap();
            proptest::prop_assert_eq!(postcard::from_bytes::<F64>(&bin).unwrap().0, bits);
        }
    }

    /// Restoring rebuilds the state the snapshot was taken from: capturing it
    /// again gives the same snapshot, and promotion's per-ring counts (not
    /// stored) are recomputed to the same answers.
    #[test]
    fn restoring_gives_back_the_same_state() {
        let plan = std::sync::Arc::new(Plan::new(spec().checked().clone()));
        let engine = crate::exec::Engine::new(plan.clone(), Tier::Canonical);
        let mut st = NodeState::new(&plan);
        for (n, row) in rows(10).iter().enumerate() {
            let snap = Snapshot::capture(&plan, &Run::from_state(&engine, st.clone()));
            assert_eq!(snap, monitor_after(n).snapshot(), "after {n} rows");
            let (back, failed) = snap.restore_state(&plan).unwrap();
            assert_eq!(failed, None);
            assert_eq!(
                Snapshot::capture(&plan, &Run::from_state(&engine, back.clone())),
                snap
            );
            for &id in &plan.offset_nodes {
                let node = plan.node(id);
                let NodeOp::Offset(len) = node.op else {
                    unreachable!()
                };
                for want in [tag::I64, tag::F64, tag::OTHER] {
                    assert_eq!(
                        back.ring_promotable(node.ring_base, len, want),
                        st.ring_promotable(node.ring_base, len, want),
                        "ring at {} after {n} rows",
                        node.ring_base
                    );
                }
            }
            st.run_row(&plan, row).unwrap();
        }
    }

    #[test]
    fn fingerprints_ignore_layout_of_the_text_but_not_the_spec() {
        let a = spec().fingerprint();
        let spaced = SPEC
            .replace(" = ", "   =   ")
            .replace('\n', "\n// comment\n");
        assert_eq!(Spec::parse("other.dsrv", &spaced).unwrap().fingerprint(), a);
        let renamed = SPEC.replace("total", "sum");
        assert_ne!(Spec::parse("t.dsrv", &renamed).unwrap().fingerprint(), a);
        let other_offset = SPEC.replace("s[3]", "s[4]");
        assert_ne!(
            Spec::parse("t.dsrv", &other_offset).unwrap().fingerprint(),
            a
        );
        // Stable across processes and builds: a fixed value for a fixed spec
        // (it changes only with the rendering, which is part of the format).
        let fixed = Spec::parse("f.dsrv", "in x: Int\nout y: Int\ny = x + 1\n").unwrap();
        assert_eq!(
            fixed.fingerprint().to_string(),
            "83cddf54ad04cce87bc073182c14200d2e31cd982d86247138c2a5c21da53956"
        );
    }

    /// A body re-sealed after a change: what a hostile or buggy writer could
    /// produce with a valid checksum.
    fn resealed(snap: &Snapshot, change: impl FnOnce(&mut Body)) -> Vec<u8> {
        let mut body = snap.body.clone();
        change(&mut body);
        seal(&MAGIC, FORMAT_VERSION, &postcard::to_stdvec(&body).unwrap())
    }

    fn restore_err(bytes: &[u8]) -> String {
        let snap = match Snapshot::from_bytes(bytes) {
            Ok(s) => s,
            Err(e) => return e.to_string(),
        };
        match Monitor::builder(&spec()).restore(&snap) {
            Ok(_) => "restored".to_string(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn damaged_binary_snapshots_are_errors() {
        let bytes = monitor_after(5).snapshot().to_bytes();
        assert_eq!(restore_err(b"{\"x\": 1}"), "not a vigil snapshot");
        assert_eq!(
            restore_err(&bytes[..30]),
            "the snapshot is truncated: its header announces 52 bytes of data, 30 are present"
        );
        let cut = &bytes[..bytes.len() - 3];
        assert_eq!(
            restore_err(cut),
            format!(
                "the snapshot is truncated: its header announces {} bytes of data, {} are present",
                bytes.len() - 52,
                bytes.len() - 55
            )
        );
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(
            restore_err(&flipped),
            "the snapshot is corrupt: its contents do not match their checksum"
        );
        let mut version = bytes.clone();
        version[8] = 9;
        assert_eq!(
            restore_err(&version),
            format!(
                "snapshot format version 9 is not supported (this vigil reads version {FORMAT_VERSION})"
            )
        );
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            restore_err(&longer),
            "the snapshot is corrupt: 1 bytes after the end of the data"
        );
        // Garbage with a valid envelope.
        let garbage = seal(&MAGIC, FORMAT_VERSION, &[7; 40]);
        assert!(
            restore_err(&garbage).starts_with("the snapshot is corrupt: "),
            "{}",
            restore_err(&garbage)
        );
    }

    #[test]
    fn a_huge_length_claim_is_an_error_not_an_allocation() {
        let snap = monitor_after(5).snapshot();
        let mut body = postcard::to_stdvec(&snap.body).unwrap();
        // The body starts with the version (1 byte), the fingerprint (32
        // bytes) and the step (1 byte here); then the slots' count, a varint:
        // claim 2^62 slots.
        assert_eq!(body[34] as usize, snap.body.slots.len());
        body.splice(
            34..35,
            [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40],
        );
        let e = restore_err(&seal(&MAGIC, FORMAT_VERSION, &body));
        assert!(e.starts_with("the snapshot is corrupt: "), "{e}");
    }

    #[test]
    fn snapshots_that_do_not_fit_the_plan_are_errors() {
        let snap = monitor_after(5).snapshot();
        type Damage = Box<dyn FnOnce(&mut Body)>;
        let cases: Vec<(Damage, &str)> = vec![
            (
                Box::new(|b| {
                    b.slots.pop();
                }),
                "15 slots, the specification has 16",
            ),
            (
                Box::new(|b| b.slots.push(Slot::NoVal)),
                "17 slots, the specification has 16",
            ),
            (
                Box::new(|b| {
                    b.rings.pop();
                }),
                "2 offset rings, the specification has 3",
            ),
            (
                Box::new(|b| {
                    b.rings[2].pop();
                }),
                "ring 2 (offset 3) has 2 entries; at step 5 it has 3",
            ),
            (
                Box::new(|b| b.rings[0].push(Cell::Int(1))),
                "ring 0 (offset 1) has 2 entries; at step 5 it has 1",
            ),
            (
                Box::new(|b| b.step = 2),
                "ring 0 (offset 1) has 1 entries; at step 2 it has 1",
            ),
            (
                Box::new(|b| b.step = u64::MAX),
                "step 18446744073709551615 is past the last step",
            ),
            (
                Box::new(|b| b.flags = vec![0]),
                "flag of node 0, which is not a `when`, `init` or `update` node (or not in increasing order)",
            ),
            (
                Box::new(|b| b.flags = vec![6, 6]),
                "flag of node 6, which is not a `when`, `init` or `update` node (or not in increasing order)",
            ),
            (
                Box::new(|b| b.flags = vec![u32::MAX]),
                "flag of node 4294967295, which is not a `when`, `init` or `update` node (or not in increasing order)",
            ),
            (
                Box::new(|b| {
                    b.stopped = Some(StopError {
                        kind: Kind::InvalidOperand,
                        op: "teleport".into(),
                        detail: None,
                        stream: "total".into(),
                        step: 1,
                    })
                }),
                "the runtime error's operation `teleport` is unknown",
            ),
            (
                Box::new(|b| {
                    b.stopped = Some(StopError {
                        kind: Kind::InvalidOperand,
                        op: "addition".into(),
                        detail: None,
                        stream: "nope".into(),
                        step: 1,
                    })
                }),
                "the runtime error names no stream of the specification (`nope`)",
            ),
        ];
        for (change, want) in cases {
            let e = restore_err(&resealed(&snap, change));
            if want.starts_with("ring 0 (offset 1) has 1 entries") {
                // Step 2 leaves the offset-3 ring with 2 entries, not 3.
                assert_eq!(
                    e,
                    "the snapshot does not fit the specification: ring 2 (offset 3) has 3 entries; at step 2 it has 2"
                );
            } else {
                assert_eq!(
                    e,
                    format!("the snapshot does not fit the specification: {want}")
                );
            }
        }
    }

    #[test]
    fn a_snapshot_of_another_spec_names_both_fingerprints() {
        let snap = monitor_after(3).snapshot();
        let other = Spec::parse("o.dsrv", &SPEC.replace("0.5", "1.5")).unwrap();
        let e = Monitor::restore(&other, &snap).err().unwrap();
        assert_eq!(
            e.to_string(),
            format!(
                "the snapshot was taken with another specification (snapshot fingerprint {}, this specification's {})",
                spec().fingerprint().short(),
                other.fingerprint().short()
            )
        );
        assert_ne!(spec().fingerprint(), other.fingerprint());
    }

    /// Fuzzing found a keyed snapshot (a real one, mutated) whose run held
    /// a value in a slot no keyed run keeps between rows (one no node uses):
    /// restoring it dropped the value, so the restored monitor's snapshot
    /// differed from the one restored. Each slot that is NoVal in a real
    /// keyed snapshot is given a held value in turn: the snapshot restores
    /// exactly, or is refused naming the slot.
    #[test]
    fn a_keyed_snapshot_holding_what_no_keyed_run_keeps_is_refused() {
        use crate::keyed::{KeyedBuildError, KeyedMonitor};
        let spec = spec();
        let mut m = KeyedMonitor::builder(&spec, "s")
            .tier(Tier::Canonical)
            .build()
            .unwrap();
        for row in rows(6) {
            let _ = m.step(&row);
        }
        let real = m.snapshot();
        let slots = real.body.keys[0].run.slots.len();
        let mut refused = Vec::new();
        for i in 0..slots {
            if real.body.keys.iter().any(|e| e.run.slots[i] != Slot::NoVal) {
                continue;
            }
            let mut bad = real.clone();
            for entry in &mut bad.body.keys {
                entry.run.slots[i] = Slot::Held(Cell::Deferred);
            }
            for tier in Tier::ALL {
                match KeyedMonitor::builder(&spec, "s")
                    .tier(tier)
                    .restore(&bad)
                    .build()
                {
                    Ok(restored) => assert_eq!(restored.snapshot(), bad, "slot {i} on {tier:?}"),
                    Err(KeyedBuildError::Snapshot(SnapshotError::Inconsistent(m))) => {
                        assert!(m.starts_with("key "), "{m}");
                        assert!(m.ends_with(" holds state no keyed run keeps"), "{m}");
                        refused.push(m);
                    }
                    Err(e) => panic!("slot {i} on {tier:?}: {e}"),
                }
            }
            let restored = KeyedMonitor::builder(&spec, "s")
                .restore(&real)
                .build()
                .unwrap();
            assert_eq!(restored.snapshot(), real);
        }
        // The fuzz case (a slot no node uses) and a node's slot are among
        // those refused.
        assert!(
            refused.iter().any(|m| m.contains("which no node uses")),
            "{refused:?}"
        );
        assert!(
            refused.iter().any(|m| m.contains("the slot of node ")),
            "{refused:?}"
        );
    }

    #[test]
    fn a_stopped_monitor_stays_stopped_on_every_tier() {
        let spec = Spec::parse("d.dsrv", "in x: Int\nin y: Int\nout z: Int\nz = x / y\n").unwrap();
        let mut m = Monitor::builder(&spec).tier(Tier::Canonical).build();
        m.step(&[Some(Value::Int(4)), Some(Value::Int(2))]).unwrap();
        let err = m
            .step(&[Some(Value::Int(1)), Some(Value::Int(0))])
            .unwrap_err();
        let snap = m.snapshot();
        assert!(snap.is_stopped());
        let json = Snapshot::from_json(&snap.to_json()).unwrap();
        for tier in Tier::ALL {
            let mut r = Monitor::builder(&spec)
                .tier(tier)
                .restore(&json)
                .unwrap()
                .build();
            assert_eq!(
                r.step(&[Some(Value::Int(1)), Some(Value::Int(1))])
                    .unwrap_err(),
                err
            );
            assert_eq!(r.steps(), 1);
        }
    }

    #[test]
    fn reset_starts_over_with_the_same_code() {
        let mut m = Monitor::builder(&spec())
            .tier(Tier::Auto)
            .max_string_bytes(3)
            .build();
        let fresh = m.snapshot();
        for row in rows(6) {
            m.step(&row).unwrap();
        }
        m.reset();
        assert_eq!(m.snapshot(), fresh);
        assert_eq!(m.steps(), 0);
        // The string bound is kept.
        let spec = Spec::parse("s.dsrv", "in s: Str\nout t: Str\nt = s ++ s\n").unwrap();
        let mut m = Monitor::builder(&spec).max_string_bytes(3).build();
        m.reset();
        let e = m.step(&[Some(Value::Str("ab".into()))]).unwrap_err();
        assert!(
            matches!(e, crate::row::StepError::Runtime(e) if e.kind == ErrorKind::StringTooLong)
        );
    }
}

#[cfg(test)]
mod container_tests {
    use crate::monitor::{Monitor, Spec, Tier};
    use crate::value::Value;

    fn spec() -> Spec {
        Spec::parse(
            "c.dsrv",
            "in x: Int\nin s: Str\nout l\nout d\nl = List.append(default(l[1], List()), Tuple(x, {k: x}))\nd = dynamic(s)\n",
        )
        .unwrap()
    }

    /// Containers and a running `dynamic` instance survive a snapshot: the
    /// restored run goes on exactly (the instance keeps its history).
    #[test]
    fn containers_and_dynamic_instances_round_trip() {
        let rows: Vec<Vec<Option<Value>>> = (0..6)
            .map(|i| {
                vec![
                    Some(Value::Int(i)),
                    (i < 2).then(|| Value::from("default(x[1], 7) + x")),
                ]
            })
            .collect();
        let mut whole = Monitor::builder(&spec()).tier(Tier::Quickened).build();
        let want: Vec<_> = rows
            .iter()
            .map(|r| whole.step(r).unwrap().to_vec())
            .collect();
        let mut first = Monitor::builder(&spec()).tier(Tier::Quickened).build();
        for r in &rows[..3] {
            first.step(r).unwrap();
        }
        for bytes in [
            first.snapshot().to_bytes(),
            first.snapshot().to_json().into_bytes(),
        ] {
            let snap = match bytes.first() {
                Some(b'{') => super::Snapshot::from_json(std::str::from_utf8(&bytes).unwrap()),
                _ => super::Snapshot::from_bytes(&bytes),
            }
            .unwrap();
            let mut resumed = Monitor::builder(&spec()).restore(&snap).unwrap().build();
            for (r, w) in rows[3..].iter().zip(&want[3..]) {
                assert_eq!(&resumed.step(r).unwrap().to_vec(), w);
            }
        }
    }

    /// A snapshot whose container holds ⊥, or a NoVal element outside a
    /// list, is refused before any state is built (it could not come from a
    /// run; found by reading the restore path for what fuzzing could make).
    #[test]
    fn a_malformed_container_is_refused() {
        let mut m = Monitor::builder(&spec()).tier(Tier::Canonical).build();
        m.step(&[Some(Value::Int(1)), None]).unwrap();
        let json = m.snapshot().to_json();
        assert!(json.contains("{\"Int\":1}"), "{json}");
        for (from, to) in [
            ("{\"Tuple\":[{\"Int\":1}", "{\"Tuple\":[\"Deferred\""),
            ("{\"Tuple\":[{\"Int\":1}", "{\"Tuple\":[{\"Marker\":false}"),
        ] {
            let bad = json.replacen(from, to, 1);
            assert_ne!(bad, json, "{from} not in {json}");
            let snap = super::Snapshot::from_json(&bad).unwrap();
            let err = Monitor::builder(&spec())
                .restore(&snap)
                .err()
                .expect("refused");
            assert!(err.to_string().contains("a value holds"), "{err}");
        }
    }
}
