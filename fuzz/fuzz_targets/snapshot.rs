//! Fuzz target: snapshots decoded from untrusted bytes against a fixed spec. A
//! snapshot that decodes and restores must run on every tier; anything else must
//! be a `SnapshotError` — never a panic, a hang or an allocation bomb.
//!
//! The first byte picks the input's form: raw binary, raw JSON, or a real
//! snapshot (after 0–15 rows) whose binary body or JSON text is mutated by the
//! remaining bytes — the binary one re-sealed with a valid length and SHA-256
//! (the envelope docs/library.md documents), so mutations reach the decoder and the
//! checks against the plan instead of stopping at the checksum. Modes 4–7 do
//! the same with keyed snapshots (a keyed monitor by `s` over the same rows),
//! which must restore as a `KeyedMonitor` on every tier or be refused. The
//! binary ones are also read key by key (`KeyedSnapshotReader`, as a resumed
//! checkpoint reads them), which must restore the same monitor or refuse
//! what `from_bytes` refuses; and a restored monitor's `write_snapshot`
//! must write its `to_bytes`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};
use std::io::Cursor;
use vigil::{KeyedMonitor, KeyedSnapshot, KeyedSnapshotReader, Monitor, Snapshot, Spec, Tier, Value};

const TIERS: [Tier; 4] = [Tier::Canonical, Tier::Quickened, Tier::NativeRegions, Tier::NativeWhole];

/// Offsets filling and full, Str and Float history, a flag, an `if` with a
/// division that traps (a stopped run).
const SPEC: &str = "in x: Int\nin s: Str\nin f: Float\nout total: Int\nout last: Str\nout w: Bool\n\
out g: Float\nout c: Int\ntotal = default(total[1], 0) + x\nlast = default(s[3], \"-\")\n\
w = when(x > 2)\ng = default(f[2], 0.5)\nc = if w then 10 / (x - 9) else 0\n";

/// The binary envelope's header: magic, version, length, SHA-256.
const HEADER: usize = 8 + 4 + 8 + 32;

fn row(i: u64) -> Vec<Option<Value>> {
    let f = [Some(-0.0), Some(f64::NAN), None, Some(f64::INFINITY)][(i % 4) as usize];
    vec![
        (i % 5 != 4).then_some(Value::Int(i as i64)),
        (i % 3 != 1).then(|| Value::Str(format!("v{i}").into())),
        f.map(Value::Float),
    ]
}

fn real_keyed_snapshot(spec: &Spec, rows: u64) -> KeyedSnapshot {
    let mut m = KeyedMonitor::builder(spec, "s").tier(Tier::Canonical).build().expect("`s` is an input");
    for i in 0..rows {
        let _ = m.step(&row(i));
    }
    m.snapshot()
}

/// Keyed modes: decode (raw or mutated), then restore on every tier and run.
fn keyed(spec: &Spec, mode: u8, rest: &[u8], rows: u64) {
    let decoded = match mode {
        4 => streamed(spec, rest),
        5 => match std::str::from_utf8(rest) {
            Ok(text) => KeyedSnapshot::from_json(text),
            Err(_) => return,
        },
        6 => {
            let bytes = real_keyed_snapshot(spec, rows).to_bytes();
            let (header, body) = bytes.split_at(HEADER);
            let mut body = body.to_vec();
            mutate(&mut body, rest.get(1..).unwrap_or_default());
            streamed(spec, &reseal([header, &body].concat()))
        }
        _ => {
            let mut text = real_keyed_snapshot(spec, rows).to_json().into_bytes();
            mutate(&mut text, rest.get(1..).unwrap_or_default());
            match std::str::from_utf8(&text) {
                Ok(text) => KeyedSnapshot::from_json(text),
                Err(_) => return,
            }
        }
    };
    let Ok(snapshot) = decoded else {
        return;
    };
    assert_eq!(KeyedSnapshot::from_bytes(&snapshot.to_bytes()).as_ref(), Ok(&snapshot));
    for tier in TIERS {
        let Ok(mut m) = KeyedMonitor::builder(spec, "s").tier(tier).restore(&snapshot).build() else {
            continue;
        };
        assert_eq!(m.snapshot(), snapshot, "a restored keyed monitor's snapshot differs");
        let mut written = Cursor::new(Vec::new());
        m.write_snapshot(&mut written).expect("a restored monitor holds no function value");
        assert!(written.into_inner() == snapshot.to_bytes(), "write_snapshot differs from to_bytes");
        for i in 0..8 {
            let _ = m.step(&row(snapshot.rows().wrapping_add(i)));
        }
    }
}

/// Decodes `bytes` whole, and reads them key by key into a canonical
/// monitor: a snapshot that decodes and restores must restore the same
/// monitor read key by key, and one refused either way must be refused read
/// key by key.
fn streamed(spec: &Spec, bytes: &[u8]) -> Result<KeyedSnapshot, vigil::SnapshotError> {
    let whole = KeyedSnapshot::from_bytes(bytes);
    let restored = whole
        .as_ref()
        .ok()
        .and_then(|s| KeyedMonitor::builder(spec, "s").tier(Tier::Canonical).restore(s).build().ok());
    let by_key = KeyedSnapshotReader::new(Cursor::new(bytes))
        .ok()
        .and_then(|r| KeyedMonitor::builder(spec, "s").tier(Tier::Canonical).restore_from(r).build().ok());
    match (&restored, &by_key) {
        (Some(a), Some(b)) => assert_eq!(a.snapshot(), b.snapshot(), "read key by key, another monitor"),
        (None, None) => {}
        _ => panic!(
            "restored whole: {}, key by key: {}",
            restored.is_some(),
            by_key.is_some()
        ),
    }
    whole
}

fn real_snapshot(spec: &Spec, rows: u64) -> Snapshot {
    let mut m = Monitor::builder(spec).tier(Tier::Canonical).build();
    for i in 0..rows {
        let _ = m.step(&row(i));
    }
    m.snapshot()
}

/// Applies edits read from `ops` (4 bytes each: position, operation, value)
/// to `bytes`: flip bits, insert or delete a byte.
fn mutate(bytes: &mut Vec<u8>, ops: &[u8]) {
    for op in ops.chunks_exact(4).take(16) {
        if bytes.is_empty() {
            return;
        }
        let at = u16::from_le_bytes([op[0], op[1]]) as usize % bytes.len();
        match op[2] % 3 {
            0 => bytes[at] ^= op[3].max(1),
            1 => bytes.insert(at, op[3]),
            _ => {
                bytes.remove(at);
            }
        }
    }
}

fn reseal(mut bytes: Vec<u8>) -> Vec<u8> {
    let body = bytes.split_off(HEADER);
    bytes[12..20].copy_from_slice(&(body.len() as u64).to_le_bytes());
    bytes[20..52].copy_from_slice(&Sha256::digest(&body));
    bytes.extend_from_slice(&body);
    bytes
}

fuzz_target!(|data: &[u8]| {
    let spec = Spec::parse("snap.dsrv", SPEC).expect("the fuzz spec is valid");
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let rows = rest.first().map_or(0, |b| u64::from(b % 16));
    if mode % 8 >= 4 {
        return keyed(&spec, mode % 8, rest, rows);
    }
    let decoded = match mode % 4 {
        0 => Snapshot::from_bytes(rest),
        1 => match std::str::from_utf8(rest) {
            Ok(text) => Snapshot::from_json(text),
            Err(_) => return,
        },
        2 => {
            let bytes = real_snapshot(&spec, rows).to_bytes();
            let (header, body) = bytes.split_at(HEADER);
            let mut body = body.to_vec();
            mutate(&mut body, rest.get(1..).unwrap_or_default());
            Snapshot::from_bytes(&reseal([header, &body].concat()))
        }
        _ => {
            let mut text = real_snapshot(&spec, rows).to_json().into_bytes();
            mutate(&mut text, rest.get(1..).unwrap_or_default());
            match std::str::from_utf8(&text) {
                Ok(text) => Snapshot::from_json(text),
                Err(_) => return,
            }
        }
    };
    let Ok(snapshot) = decoded else {
        return;
    };
    // What decodes re-encodes to itself.
    assert_eq!(Snapshot::from_bytes(&snapshot.to_bytes()).as_ref(), Ok(&snapshot));
    for tier in TIERS {
        let Ok(builder) = Monitor::builder(&spec).tier(tier).restore(&snapshot) else {
            continue;
        };
        let mut m = builder.build();
        assert_eq!(m.snapshot(), snapshot, "a restored monitor's snapshot differs");
        for i in 0..8 {
            let _ = m.step(&row(snapshot.step().wrapping_add(i)));
        }
    }
});
