//! Keyed snapshots as streams: written key by key into a writer, read key by key from a reader.
//!
//! A [`KeyedSnapshot`](super::KeyedSnapshot) holds every key's run as a `Body` in memory, and
//! its binary form is one more copy: for a million keys that was 1.5 GB to write a 90 MB
//! checkpoint, and 2.45 GB to resume one (the snapshot, every key's restored state and the
//! monitor at once). Here the same bytes are made and read one key at a time, so memory stays
//! that of the monitor itself.
//!
//! The binary form does not change: it is exactly what `KeyedSnapshot::to_bytes` writes
//! (`VIGILKSN`, the version, the body's length and SHA-256, then the body in postcard). The
//! body is a struct whose last field is the list of keys, and postcard writes a list as its
//! length and then its elements, so a writer that knows how many keys there are writes the
//! body's head and then each key's entry as it comes, hashing the bytes on their way out
//! ([`KeyedWriter`]). Only the header cannot be written first: its length and digest are
//! known at the end, so it is written as zeros and patched with a seek before the file is
//! synced.
//!
//! A key's entry is encoded straight from its run state ([`RunEncoder`]), with no `Body` of
//! vectors per slot and ring in between; a unit test checks that the bytes are those of the
//! `Body` that `Snapshot::capture` makes.
//!
//! Reading ([`KeyedSnapshotReader`]) is two passes over the reader: the first checks the
//! header and hashes the body in fixed chunks, so that a damaged snapshot is refused before
//! anything is decoded; the second decodes the body's head and then one entry at a time from a
//! buffer that holds a few hundred kilobytes (more only for one entry that is larger).

use super::{
    Cell, FORMAT_VERSION, Fingerprint, HEADER_LEN, KEYED_FORMAT_VERSION, KEYED_MAGIC, KeyTicks,
    KeyedEntry, SnapshotError, StopError, body_of,
};
use crate::canonical::{NodeState, scalar_form};
use crate::error::RuntimeError;
use crate::plan::{NodeOp, Plan};
use crate::value::{Key, Value};
use scalar_ir::frame::tag;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{self, Read, Seek, SeekFrom, Write};

/// The message of the error a writer returns for a run holding a function value, which no
/// snapshot can give back (see `Snapshot::holds_function`).
const HOLDS_FUNCTION: &str = "a key's run holds a function value in a stream or its history, which a snapshot cannot give back (restoring it would be refused)";

/// Encodes runs of one plan as snapshot bodies, without building them.
pub(crate) struct RunEncoder<'p> {
    plan: &'p Plan,
    fingerprint: Fingerprint,
    /// The stored slots (streams and nodes, not constants), and which of
    /// them are remade by the next row (function-making nodes: `body_of`
    /// stores them as NoVal).
    remade: Vec<bool>,
}

impl<'p> RunEncoder<'p> {
    pub(crate) fn new(plan: &'p Plan) -> RunEncoder<'p> {
        let mut remade = vec![false; super::stored_slots(plan)];
        for (n, node) in plan.nodes.iter().enumerate() {
            if matches!(node.op, NodeOp::Lambda(_) | NodeOp::Partial | NodeOp::Fix) {
                remade[plan.node_slot(crate::plan::NodeId(n as u32)).index()] = true;
            }
        }
        RunEncoder {
            plan,
            fingerprint: super::fingerprint(plan),
            remade,
        }
    }

    pub(crate) fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// Appends the postcard bytes of the snapshot body of `state` (stopped
    /// by `failed`) to `out`: the bytes `postcard::to_stdvec(&body_of(…))`
    /// gives, written field by field from the state's own vectors (a unit
    /// test compares the two). `Err` when the run holds a function value,
    /// which no snapshot can give back.
    pub(crate) fn encode_run(
        &self,
        st: &NodeState,
        failed: Option<&RuntimeError>,
        ticks: Option<&KeyTicks>,
        out: &mut Vec<u8>,
    ) -> Result<(), HoldsFunction> {
        if !st.dynamic.is_empty() {
            // `dynamic` instances carry runs of their own specifications;
            // keyed monitors refuse such specifications, so the rare run
            // with one is encoded through its `Body`.
            let mut body = body_of(self.plan, st, failed, self.fingerprint);
            body.ticks = ticks.cloned();
            append(&body, out);
            return match body.holds_function() {
                true => Err(HoldsFunction),
                false => Ok(()),
            };
        }
        let mut function = false;
        varint(out, u64::from(FORMAT_VERSION));
        out.extend_from_slice(&self.fingerprint.0);
        varint(out, st.step);
        varint(out, self.remade.len() as u64);
        for (i, &remade) in self.remade.iter().enumerate() {
            // As `body_of`: NoVal for a remade slot, else the raw value,
            // else the held one, else NoVal.
            let mark = out.len();
            let (t, variant) = match st.tags[i] {
                tag::ABSENT => (st.held_tags[i], SLOT_HELD),
                t => (t, SLOT_NOW),
            };
            out.push(variant);
            if remade || !cell(t, st.lanes[i], st.objects.get(i), out, &mut function) {
                out.truncate(mark);
                out.push(SLOT_NOVAL);
            }
        }
        varint(out, st.flag.iter().filter(|set| **set).count() as u64);
        for (n, _) in st.flag.iter().enumerate().filter(|(_, set)| **set) {
            varint(out, n as u64);
        }
        let rings = self.plan.offset_nodes.len();
        varint(out, rings as u64);
        for r in 0..rings {
            let count = st.ring_entry_count(r);
            varint(out, count as u64);
            for k in 0..count {
                let (t, lane, object) = st.ring_entry_parts(r, k);
                let wrote = cell(t, lane, object, out, &mut function);
                assert!(wrote, "engine bug: a ring entry is NoVal");
            }
        }
        match failed {
            None => out.push(0),
            Some(e) => {
                out.push(1);
                append(&StopError::of(e), out);
            }
        }
        varint(out, st.windows.len() as u64);
        for &w in &st.windows {
            varint(out, w);
        }
        // No `dynamic` instance (see above).
        varint(out, 0);
        varint(out, st.clocks.len() as u64);
        for &c in &st.clocks {
            varint(out, c);
        }
        append(&ticks, out);
        match function {
            true => Err(HoldsFunction),
            false => Ok(()),
        }
    }

    /// As `encode_run`, for a keyed snapshot's entry: the key's cell, then
    /// the run's body.
    pub(crate) fn encode_entry(
        &self,
        key: &Key,
        state: &NodeState,
        failed: Option<&RuntimeError>,
        ticks: Option<&KeyTicks>,
        out: &mut Vec<u8>,
    ) -> Result<(), HoldsFunction> {
        let (t, lane) = scalar_form(key.value()).unwrap_or((tag::OTHER, 0));
        let mut function = false;
        cell(t, lane, Some(key.value()), out, &mut function);
        self.encode_run(state, failed, ticks, out)
    }
}

/// A run that holds a function value (see `RunEncoder::encode_run`).
#[derive(Debug)]
pub(crate) struct HoldsFunction;

impl From<HoldsFunction> for io::Error {
    fn from(_: HoldsFunction) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, HOLDS_FUNCTION)
    }
}

/// Appends `value` in postcard to `out`.
fn append<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    let bytes = postcard::to_extend(value, std::mem::take(out))
        .expect("engine bug: a snapshot body always serialises");
    *out = bytes;
}

/// `Slot`'s variants, as postcard numbers them (declaration order).
const SLOT_NOVAL: u8 = 0;
const SLOT_HELD: u8 = 1;
const SLOT_NOW: u8 = 2;

/// `Cell`'s variants written here, as postcard numbers them.
const CELL_DEFERRED: u8 = 0;
const CELL_INT: u8 = 1;
const CELL_FLOAT: u8 = 2;
const CELL_BOOL: u8 = 3;
const CELL_STR: u8 = 4;
const CELL_UNIT: u8 = 5;

/// Appends postcard's variable-length integer.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends the `Cell` of a sample in frame form (what `decode` reads: a
/// tag, a lane, the object of a value tagged `OTHER`) as postcard writes
/// it; returns false, appending nothing, for NoVal. Scalars and strings are
/// written directly; containers and functions go through `Cell`, noting a
/// function in `function`.
fn cell(t: u8, lane: u64, object: Option<&Value>, out: &mut Vec<u8>, function: &mut bool) -> bool {
    match t {
        tag::ABSENT => return false,
        tag::DEFERRED => out.push(CELL_DEFERRED),
        tag::I64 => {
            out.push(CELL_INT);
            // Signed integers are zigzag-encoded.
            let i = lane as i64;
            varint(out, ((i << 1) ^ (i >> 63)) as u64);
        }
        tag::F64 => {
            out.push(CELL_FLOAT);
            out.extend_from_slice(&lane.to_le_bytes());
        }
        tag::B1 => {
            out.push(CELL_BOOL);
            out.push(u8::from(lane != 0));
        }
        _ => match object {
            None => return false,
            Some(Value::Str(s)) => {
                out.push(CELL_STR);
                varint(out, s.len() as u64);
                out.extend_from_slice(s.as_bytes());
            }
            Some(Value::Unit) => out.push(CELL_UNIT),
            Some(v) => {
                let c = Cell::of_value(v);
                *function |= c.has_function();
                append(&c, out);
            }
        },
    }
    true
}

/// The head of a keyed snapshot's body: the fields of `KeyedBody` before
/// its keys, and the number of keys (the list's length, which postcard
/// writes before its elements).
#[derive(Serialize, Deserialize)]
struct KeyedHead {
    vigil_keyed_snapshot: u32,
    fingerprint: Fingerprint,
    key: String,
    rows: u64,
    count: u64,
}

/// Writes a keyed snapshot's binary form into `out`, one key at a time:
/// `start`, then `entry` for each key (exactly as many as announced), then
/// `finish`, which patches the header's length and digest.
pub(crate) struct KeyedWriter<'w, W: Write + Seek + ?Sized> {
    out: &'w mut W,
    /// Where the snapshot starts in `out`.
    start: u64,
    hasher: Sha256,
    /// Body bytes written so far.
    len: u64,
    /// Entries still to write.
    left: u64,
    /// One entry's bytes, reused.
    scratch: Vec<u8>,
}

impl<'w, W: Write + Seek + ?Sized> KeyedWriter<'w, W> {
    /// Writes the header (its length and digest zero until `finish`) and the
    /// body's head, announcing `count` keys.
    pub(crate) fn start(
        out: &'w mut W,
        fingerprint: Fingerprint,
        key: &str,
        rows: u64,
        count: usize,
    ) -> io::Result<KeyedWriter<'w, W>> {
        let start = out.stream_position()?;
        let mut header = [0u8; HEADER_LEN];
        header[..8].copy_from_slice(&KEYED_MAGIC);
        header[8..12].copy_from_slice(&KEYED_FORMAT_VERSION.to_le_bytes());
        out.write_all(&header)?;
        let mut w = KeyedWriter {
            out,
            start,
            hasher: Sha256::new(),
            len: 0,
            left: count as u64,
            scratch: Vec::with_capacity(4096),
        };
        let head = KeyedHead {
            vigil_keyed_snapshot: KEYED_FORMAT_VERSION,
            fingerprint,
            key: key.to_string(),
            rows,
            count: count as u64,
        };
        append(&head, &mut w.scratch);
        w.emit()?;
        Ok(w)
    }

    /// Writes one key's entry, encoded by `enc` from its run state.
    pub(crate) fn entry(
        &mut self,
        enc: &RunEncoder<'_>,
        key: &Key,
        state: &NodeState,
        failed: Option<&RuntimeError>,
        ticks: Option<&KeyTicks>,
    ) -> io::Result<()> {
        if self.left == 0 {
            return Err(io::Error::other(
                "engine bug: more keys written than announced",
            ));
        }
        self.left -= 1;
        enc.encode_entry(key, state, failed, ticks, &mut self.scratch)?;
        self.emit()
    }

    /// Writes the scratch bytes out and hashes them.
    fn emit(&mut self) -> io::Result<()> {
        self.hasher.update(&self.scratch);
        self.out.write_all(&self.scratch)?;
        self.len += self.scratch.len() as u64;
        self.scratch.clear();
        Ok(())
    }

    /// Patches the header's length and digest, and leaves `out` at the
    /// snapshot's end.
    pub(crate) fn finish(self) -> io::Result<()> {
        if self.left != 0 {
            return Err(io::Error::other(
                "engine bug: fewer keys written than announced",
            ));
        }
        let digest: [u8; 32] = self.hasher.finalize().into();
        self.out.seek(SeekFrom::Start(self.start + 12))?;
        self.out.write_all(&self.len.to_le_bytes())?;
        self.out.write_all(&digest)?;
        self.out
            .seek(SeekFrom::Start(self.start + HEADER_LEN as u64 + self.len))?;
        Ok(())
    }
}

/// The fewest bytes a keyed snapshot's entry takes: the key's variant, and
/// a run's version, fingerprint (32 bytes), step, the lengths of its slots,
/// flags, rings, windows and `dynamic`, its stop error's variant and its
/// ticks' variant.
const MIN_ENTRY: u64 = 1 + 1 + 32 + 1 + 5 + 1 + 1;

/// How many bytes a reader reads at a time (and its decoding buffer's
/// first size).
const CHUNK: usize = 256 * 1024;

/// A keyed snapshot's binary form being read key by key: made by
/// [`KeyedSnapshotReader::new`], which checks the header and the checksum
/// (a first pass over the bytes) and reads the body's head; each key's run
/// is then decoded as it is restored, by
/// [`KeyedMonitorBuilder::restore_from`](crate::KeyedMonitorBuilder::restore_from).
///
/// ```
/// use std::io::Cursor;
/// use vigil::{KeyedMonitor, KeyedSnapshotReader, Spec};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let spec = Spec::parse("n.dsrv", "in host: Str\nout n: Int\nn = default(n[1], 0) + 1")?;
/// let mut monitor = KeyedMonitor::builder(&spec, "host").build()?;
/// for host in ["a", "b", "a"] {
///     let row = monitor.row().set("host", host)?;
///     monitor.step(&row)?;
/// }
/// // A file in practice; the bytes are those of `snapshot().to_bytes()`.
/// let mut file = Cursor::new(Vec::new());
/// monitor.write_snapshot(&mut file)?;
/// file.set_position(0);
/// let reader = KeyedSnapshotReader::new(file)?;
/// assert_eq!((reader.len(), reader.rows(), reader.key_input()), (2, 3, "host"));
/// let resumed = KeyedMonitor::builder(&spec, "host").restore_from(reader).build()?;
/// assert_eq!(resumed.snapshot(), monitor.snapshot());
/// # Ok(())
/// # }
/// ```
pub struct KeyedSnapshotReader<'a> {
    /// `Send`, so that a builder holding the reader stays `Send`.
    src: Box<dyn Read + Send + 'a>,
    buf: Vec<u8>,
    /// The bytes of `buf` not decoded yet.
    pos: usize,
    end: usize,
    /// Body bytes not read into `buf` yet.
    unread: u64,
    fingerprint: Fingerprint,
    key: String,
    rows: u64,
    count: u64,
    /// Entries not decoded yet.
    left: u64,
    /// Where the last value decoded lies in `buf`.
    last: std::ops::Range<usize>,
}

impl<'a> KeyedSnapshotReader<'a> {
    /// Starts reading the keyed snapshot at `src`'s position, which runs to
    /// its end: checks the magic, the version, the length and the
    /// checksum (reading the body once, in chunks), then decodes the body's
    /// head. A damaged snapshot is a [`SnapshotError`], as
    /// [`KeyedSnapshot::from_bytes`](super::KeyedSnapshot::from_bytes)
    /// reports it; an I/O error is [`SnapshotError::Io`].
    pub fn new(
        mut src: impl Read + Seek + Send + 'a,
    ) -> Result<KeyedSnapshotReader<'a>, SnapshotError> {
        let start = src.stream_position().map_err(io_error)?;
        // A reader positioned past its end has nothing to read.
        let total = (src.seek(SeekFrom::End(0)).map_err(io_error)?).saturating_sub(start);
        src.seek(SeekFrom::Start(start)).map_err(io_error)?;
        let mut header = [0u8; HEADER_LEN];
        let got = read_up_to(&mut src, &mut header).map_err(io_error)?;
        if got < KEYED_MAGIC.len() || header[..8] != KEYED_MAGIC {
            return Err(SnapshotError::NotASnapshot);
        }
        if got < HEADER_LEN {
            return Err(SnapshotError::Truncated {
                expected: HEADER_LEN as u64,
                found: got as u64,
            });
        }
        let mut word = [0u8; 8];
        word[..4].copy_from_slice(&header[8..12]);
        let version = u64::from_le_bytes(word) as u32;
        if version != KEYED_FORMAT_VERSION {
            return Err(SnapshotError::Version {
                found: version,
                supported: KEYED_FORMAT_VERSION,
            });
        }
        word.copy_from_slice(&header[12..20]);
        let len = u64::from_le_bytes(word);
        let present = total - HEADER_LEN as u64;
        if present < len {
            return Err(SnapshotError::Truncated {
                expected: len,
                found: present,
            });
        }
        if present > len {
            return Err(SnapshotError::Malformed(format!(
                "{} bytes after the end of the data",
                present - len
            )));
        }
        // The first pass: the checksum, before anything is decoded.
        let mut buf = vec![0u8; CHUNK];
        let mut hasher = Sha256::new();
        let mut left = len;
        while left > 0 {
            let n = (left.min(CHUNK as u64)) as usize;
            read_body(&mut src, &mut buf[..n])?;
            hasher.update(&buf[..n]);
            left -= n as u64;
        }
        if hasher.finalize()[..] != header[20..52] {
            return Err(SnapshotError::Checksum);
        }
        src.seek(SeekFrom::Start(start + HEADER_LEN as u64))
            .map_err(io_error)?;
        let mut reader = KeyedSnapshotReader {
            src: Box::new(src),
            buf,
            pos: 0,
            end: 0,
            unread: len,
            fingerprint: Fingerprint([0; 32]),
            key: String::new(),
            rows: 0,
            count: 0,
            left: 0,
            last: 0..0,
        };
        let head: KeyedHead = reader.take()?;
        if head.vigil_keyed_snapshot != KEYED_FORMAT_VERSION {
            return Err(SnapshotError::Version {
                found: head.vigil_keyed_snapshot,
                supported: KEYED_FORMAT_VERSION,
            });
        }
        // Every entry takes at least `MIN_ENTRY` bytes: a count past them
        // is a lie, refused before anything is made for it (a monitor
        // reserves room for the keys announced).
        let rest = reader.unread + (reader.end - reader.pos) as u64;
        if head.count > rest / MIN_ENTRY {
            return Err(SnapshotError::Malformed(format!(
                "{} keys announced in {} bytes",
                head.count, len
            )));
        }
        reader.fingerprint = head.fingerprint;
        reader.key = head.key;
        reader.rows = head.rows;
        reader.count = head.count;
        reader.left = head.count;
        Ok(reader)
    }

    /// The name of the key input the monitor was keyed by.
    pub fn key_input(&self) -> &str {
        &self.key
    }

    /// The rows the keyed monitor had evaluated, over every key.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The fingerprint of the specification it belongs to.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// The number of keys it holds.
    pub fn len(&self) -> usize {
        usize::try_from(self.count).unwrap_or(usize::MAX)
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The bytes of the entry `next_entry` returned last.
    pub(crate) fn last_bytes(&self) -> &[u8] {
        &self.buf[self.last.clone()]
    }

    /// The next key's entry, or `None` after the last (when the body must
    /// have been read to its end).
    pub(crate) fn next_entry(&mut self) -> Result<Option<KeyedEntry>, SnapshotError> {
        if self.left == 0 {
            let after = self.unread + (self.end - self.pos) as u64;
            if after > 0 {
                return Err(SnapshotError::Malformed(format!(
                    "{after} bytes after the end of the data"
                )));
            }
            return Ok(None);
        }
        self.left -= 1;
        self.take().map(Some)
    }

    /// Decodes one value from the buffer, reading more of the body while
    /// the value runs past what is buffered (the buffer grows only when one
    /// value is larger than it).
    fn take<T: for<'de> Deserialize<'de>>(&mut self) -> Result<T, SnapshotError> {
        loop {
            match postcard::take_from_bytes::<T>(&self.buf[self.pos..self.end]) {
                Ok((value, rest)) => {
                    self.last = self.pos..self.end - rest.len();
                    self.pos = self.last.end;
                    return Ok(value);
                }
                Err(postcard::Error::DeserializeUnexpectedEnd) if self.unread > 0 => {
                    self.refill()?;
                }
                Err(e) => return Err(SnapshotError::Malformed(e.to_string())),
            }
        }
    }

    fn refill(&mut self) -> Result<(), SnapshotError> {
        self.buf.copy_within(self.pos..self.end, 0);
        self.end -= self.pos;
        self.pos = 0;
        if self.end == self.buf.len() {
            let more = self
                .buf
                .len()
                .min(usize::try_from(self.unread).unwrap_or(usize::MAX));
            self.buf.resize(self.buf.len() + more, 0);
        }
        let room = (self.buf.len() - self.end) as u64;
        let n = room.min(self.unread) as usize;
        read_body(&mut self.src, &mut self.buf[self.end..self.end + n])?;
        self.end += n;
        self.unread -= n as u64;
        Ok(())
    }
}

impl std::fmt::Debug for KeyedSnapshotReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedSnapshotReader")
            .field("key", &self.key)
            .field("rows", &self.rows)
            .field("keys", &self.count)
            .field("keys_left", &self.left)
            .finish_non_exhaustive()
    }
}

/// Reads into `buf` until it is full or the reader ends; the bytes read.
fn read_up_to(src: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match src.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads body bytes the length promised: a reader that ends early was cut
/// since its length was taken.
fn read_body(src: &mut (impl Read + ?Sized), buf: &mut [u8]) -> Result<(), SnapshotError> {
    src.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => {
            SnapshotError::Io("the snapshot became shorter while it was read".to_string())
        }
        _ => io_error(e),
    })
}

fn io_error(e: io::Error) -> SnapshotError {
    SnapshotError::Io(e.to_string())
}

impl StopError {
    /// A runtime error as stored.
    pub(super) fn of(e: &RuntimeError) -> StopError {
        StopError {
            kind: e.kind.into(),
            op: e.op.to_string(),
            detail: e.detail.clone(),
            stream: e.stream.clone(),
            step: e.step,
        }
    }
}

/// The bytes of the `Body` that `body_of` makes of a run, which
/// `RunEncoder::encode_run` must give (tested below).
#[cfg(test)]
pub(super) fn body_bytes(plan: &Plan, st: &NodeState, failed: Option<&RuntimeError>) -> Vec<u8> {
    let body: super::Body = body_of(plan, st, failed, super::fingerprint(plan));
    postcard::to_stdvec(&body).expect("a body serialises")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyed::KeyedMonitor;
    use crate::monitor::{Spec, Tier};
    use crate::value::Value;
    use std::io::Cursor;

    /// Offsets filling and full, Str and Float history (NaN payloads, -0.0),
    /// a flag, and an `if` whose division stops a key.
    const SPEC: &str = "in k: Int\nin x: Int\nin s: Str\nin f: Float\nout total: Int\nout last: Str\n\
out w: Bool\nout g: Float\nout c: Int\ntotal = default(total[1], 0) + x\nlast = default(s[3], \"-\")\n\
w = when(x > 2)\ng = default(f[2], 0.5)\nc = if w then 10 / (x - 9) else 0\n";

    fn row(i: i64) -> Vec<Option<Value>> {
        let nan = f64::from_bits(0x7ff8_0000_dead_beef);
        let f = [Some(-0.0), Some(nan), None, Some(f64::INFINITY)][(i % 4) as usize];
        vec![
            Some(Value::Int(i * 7 % 11)),
            (i % 5 != 4).then_some(Value::Int(i % 13)),
            (i % 3 != 1).then(|| Value::Str(format!("v{i}").into())),
            f.map(Value::Float),
        ]
    }

    /// The streamed bytes are `to_bytes`' on every tier, with keys filling
    /// and full, stopped, evicted and touched; and each run's encoding is
    /// the postcard of its `Body`.
    /// Containers (a list growing, a tuple holding a map) and a Unit input,
    /// encoded through `Cell`, beside scalars written directly.
    const CONTAINERS: &str = "in k: Int\nin x: Int\nin s: Str\nin f: Float\nin u: Unit\nout l\n\
out t\nout v: Unit\nl = List.append(default(l[1], List()), x)\nt = Tuple(s, {a: f})\nv = default(u[1], u)\n";

    #[test]
    fn streamed_snapshots_are_the_snapshots_bytes() {
        for source in [SPEC, CONTAINERS] {
            streamed_snapshots_are_the_snapshots_bytes_of(source);
        }
    }

    fn streamed_snapshots_are_the_snapshots_bytes_of(source: &str) {
        let spec = Spec::parse("k.dsrv", source).unwrap();
        let unit = source.contains("in u: Unit");
        for tier in Tier::ALL {
            for bound in [None, Some(5)] {
                let mut b = KeyedMonitor::builder(&spec, "k").tier(tier);
                if let Some(n) = bound {
                    b = b.max_keys(std::num::NonZeroUsize::new(n).unwrap());
                }
                let mut m = b.build().unwrap();
                for i in 0..60 {
                    let mut out = Cursor::new(b"prefix".to_vec());
                    out.set_position(6);
                    m.write_snapshot(&mut out).unwrap();
                    let bytes = out.into_inner();
                    assert!(
                        bytes[6..] == m.snapshot().to_bytes()[..],
                        "{tier:?} {bound:?} after {i} rows"
                    );
                    let mut r = row(i);
                    if unit {
                        r.push((i % 3 != 0).then_some(Value::Unit));
                    }
                    let _ = m.step(r);
                }
                let plan = m.engine_plan();
                let enc = RunEncoder::new(&plan);
                for key in m.keys() {
                    let (state, failed) = m.run_state(key).unwrap();
                    let mut got = Vec::new();
                    enc.encode_run(&state, failed.as_ref(), None, &mut got)
                        .unwrap();
                    assert_eq!(got, body_bytes(&plan, &state, failed.as_ref()));
                }
            }
        }
    }
}
