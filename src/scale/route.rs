//! The hash that routes a key to its worker: XXH3-64 of the key's documented byte encoding,
//! named by `ROUTE_HASH`, which a scaled run's checkpoints record and its processes compare.

use crate::value::Value;

/// The name of the hash that routes keys to workers ([`route`]): its
/// algorithm and the byte encoding of a value it hashes ([`feed`]). A
/// scaled run's checkpoint records it and a resume refuses another (a
/// worker's snapshot holds the keys that this hash sent it), and the
/// processes of one run compare it before any row.
pub const ROUTE_HASH: &str = "xxh3-64/vigil-value-1";

/// The worker hash of a key: XXH3 (64 bits, seed 0) of the key's encoding
/// ([`feed`]), so every build, process and machine routes a key to the same
/// worker. (It was `std`'s `DefaultHasher`, whose output Rust does not
/// promise across releases: a rebuilt binary could have sent a key's rows
/// to a worker that does not hold its state.)
///
/// A scalar key's encoding (nearly every key's: a host's name, an id) is
/// laid out in a buffer on the stack and hashed in one call: XXH3 of the
/// same bytes is the same value whether they come at once or piece by
/// piece, and the one call costs a third of the streaming state's updates
/// (13 million instructions over 200,000 rows, where they took 38). A
/// container, or a string too long for the buffer, is fed piece by piece.
pub fn route(key: &Value) -> u64 {
    let mut buf = [0u8; ROUTE_INLINE];
    match encode_scalar(key, &mut buf) {
        Some(n) => xxhash_rust::xxh3::xxh3_64(&buf[..n]),
        None => {
            let mut h = xxhash_rust::xxh3::Xxh3::new();
            feed(&mut h, key);
            h.digest()
        }
    }
}

/// The bytes of the stack buffer [`route`] encodes a scalar key into.
const ROUTE_INLINE: usize = 256;

/// Writes a scalar `value`'s encoding (as [`feed`] gives it) at the start of
/// `buf` and says its length, or `None` for a container or a string whose
/// encoding does not fit.
fn encode_scalar(value: &Value, buf: &mut [u8; ROUTE_INLINE]) -> Option<usize> {
    let mut put = |at: usize, bytes: &[u8]| buf[at..at + bytes.len()].copy_from_slice(bytes);
    match value {
        Value::Int(i) => {
            put(0, &[0]);
            put(1, &i.to_le_bytes());
            Some(9)
        }
        Value::Float(x) => {
            put(0, &[1]);
            put(1, &x.to_bits().to_le_bytes());
            Some(9)
        }
        Value::Bool(b) => {
            put(0, &[2, u8::from(*b)]);
            Some(2)
        }
        Value::Str(s) if s.len() <= ROUTE_INLINE - 9 => {
            put(0, &[3]);
            put(1, &(s.len() as u64).to_le_bytes());
            put(9, s.as_bytes());
            Some(9 + s.len())
        }
        Value::Unit => {
            put(0, &[4]);
            Some(1)
        }
        Value::Func(_) => {
            put(0, &[7]);
            Some(1)
        }
        Value::Marker(m) => {
            put(0, &[8, marker_byte(*m)]);
            Some(2)
        }
        Value::Str(_) | Value::List(_) | Value::Tuple(_) | Value::Map(_) => None,
    }
}

/// A marker's byte in the encoding.
fn marker_byte(m: crate::value::Marker) -> u8 {
    match m {
        crate::value::Marker::NoVal => 0,
        crate::value::Marker::Deferred => 1,
    }
}

/// Feeds `value`'s encoding to `h`, as [`ROUTE_HASH`] names it: a tag byte
/// (Int 0, Float 1, Bool 2, Str 3, Unit 4, List and Tuple 5, Map 6,
/// function 7, marker 8), then an Int as its 8 little-endian bytes, a Float
/// as the 8 little-endian bytes of its bits (so 0.0 and -0.0 differ, as
/// keys do), a Bool as one byte 0 or 1, a Str as its length (8 bytes, little
/// endian) and its UTF-8 bytes, a List or Tuple as a byte 0 or 1, its
/// length and each element, a Map as its length and each entry's key (as a
/// Str) and value in key order, a marker as one byte (NoVal 0, Deferred 1);
/// a function is its tag alone (functions are not keys).
pub fn feed(h: &mut xxhash_rust::xxh3::Xxh3, value: &Value) {
    let len = |h: &mut xxhash_rust::xxh3::Xxh3, n: usize| h.update(&(n as u64).to_le_bytes());
    match value {
        Value::Int(i) => {
            h.update(&[0]);
            h.update(&i.to_le_bytes());
        }
        Value::Float(x) => {
            h.update(&[1]);
            h.update(&x.to_bits().to_le_bytes());
        }
        Value::Bool(b) => h.update(&[2, u8::from(*b)]),
        Value::Str(s) => {
            h.update(&[3]);
            len(h, s.len());
            h.update(s.as_bytes());
        }
        Value::Unit => h.update(&[4]),
        Value::List(v) => {
            h.update(&[5, 0]);
            len(h, v.len());
            for x in v.iter() {
                feed(h, x);
            }
        }
        Value::Tuple(v) => {
            h.update(&[5, 1]);
            len(h, v.len());
            for x in v.iter() {
                feed(h, x);
            }
        }
        Value::Map(m) => {
            h.update(&[6]);
            len(h, m.len());
            for (k, x) in m.iter() {
                len(h, k.len());
                h.update(k.as_bytes());
                feed(h, x);
            }
        }
        Value::Func(_) => h.update(&[7]),
        Value::Marker(m) => h.update(&[8, marker_byte(*m)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of key, with strings around each of XXH3's length classes (up to 16, 128,
    /// 240 bytes and beyond, the encoding adding 9) and beyond any buffer `route` keeps.
    fn route_cases() -> Vec<Value> {
        let mut keys = vec![
            Value::Int(0),
            Value::Int(i64::MIN),
            Value::Int(-7),
            Value::Float(0.0),
            Value::Float(-0.0),
            Value::Float(f64::NAN),
            Value::Float(31.5),
            Value::Bool(false),
            Value::Bool(true),
            Value::Unit,
            Value::Marker(crate::value::Marker::NoVal),
            Value::Marker(crate::value::Marker::Deferred),
            Value::List(vec![Value::Int(1), Value::Str("a".into())].into()),
            Value::Tuple(vec![Value::Bool(true), Value::Float(2.5)].into()),
            Value::Map(std::sync::Arc::new(
                [("k".into(), Value::Int(3)), ("z".into(), Value::Unit)]
                    .into_iter()
                    .collect(),
            )),
        ];
        for n in (0..300).chain([511, 512, 1000, 5000]) {
            let s: String = (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            keys.push(Value::Str(s.into()));
        }
        keys.push(Value::Str("héllo wörld ✓".into()));
        keys
    }

    /// The route hash as it was first defined: XXH3's streaming state fed the encoding
    /// piece by piece ([`feed`]). `route` must give the same value for every key, since a
    /// checkpoint's workers hold the keys this routed to them.
    fn streamed(key: &Value) -> u64 {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        feed(&mut h, key);
        h.digest()
    }

    #[test]
    fn route_gives_the_streamed_hash_of_every_key() {
        for key in route_cases() {
            assert_eq!(route(&key), streamed(&key), "{key:?}");
        }
        // Pinned values, recorded from the streamed hash of 2026-12-07 (`xxh3-64/vigil-value-1`).
        let pinned = [
            (Value::Str("host1".into()), 0xf175_d790_16c6_46c1),
            (Value::Str("h264".into()), 0x18c6_9d0d_94c3_cffb),
            (Value::Int(-7), 0x08e0_4a4a_fe1f_b4cd),
            (Value::Float(31.5), 0x2e2d_f2ed_d03a_6ca4),
            (Value::Unit, 0x73b2_284b_32bf_8672),
        ];
        for (key, hash) in pinned {
            assert_eq!(route(&key), hash, "{key:?}");
        }
    }
}
