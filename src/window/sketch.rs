//! Percentile sketches of time windows: one `sketches_ddsketch::DDSketch` per pane, kept in
//! the pane's words in its postcard encoding, merged oldest pane first at a read.
//!
//! A sketch answers a quantile within a relative error of [`ALPHA`] of a value of that rank
//! (DDSketch's guarantee), as long as the values it holds of one sign lie within a factor
//! of `gamma^MAX_BINS` (about 28,000) of each other: beyond that its lowest bins are merged
//! ("collapsing lowest"), which keeps the upper percentiles exact to `ALPHA` and makes the
//! lower ones coarser. Values of magnitude below [`MIN_VALUE`] count as 0. NaN and the
//! infinities have no bin: they enter no sketch (a window holding only those reads NaN).
//!
//! The words are the sketch's serde form, which this crate does not define: a snapshot's
//! words are checked against that form's invariants ([`check`]) before the crate reads
//! them, so that no snapshot can make it index out of bounds.

use serde::Deserialize;
use sketches_ddsketch::{Config, DDSketch};

/// The relative accuracy of a percentile read from a time window.
pub const ALPHA: f64 = 0.01;
/// Bins per sign before the lowest are merged.
pub const MAX_BINS: u32 = 512;
/// Values of smaller magnitude count as 0.
pub const MIN_VALUE: f64 = 1e-9;

/// The largest postcard encoding of a sketch: its config (a varint `u32`, three `f64`s, a
/// zigzag `i32`: 34 bytes), two stores (each a length of at most 3 bytes, at most
/// [`MAX_BINS`] varint counts of at most 10 bytes, a count, three keys, a bin limit and a
/// flag: at most 39 bytes beside the bins), three `f64`s and a varint count.
pub const MAX_BYTES: usize = 34 + 2 * (3 + MAX_BINS as usize * 10 + 10 + 15 + 10 + 1) + 24 + 10;
/// Words of a pane's sketch: its byte length, then its bytes (0: empty).
pub const WORDS: usize = 1 + MAX_BYTES.div_ceil(8);

/// The configuration of every window's sketches.
pub fn config() -> Config {
    Config::new(ALPHA, MAX_BINS, MIN_VALUE)
}

fn bytes_of(w: &[u64]) -> Vec<u8> {
    let len = (w[0] as usize).min(MAX_BYTES);
    let mut bytes: Vec<u8> = (w[1..1 + len.div_ceil(8)].iter())
        .flat_map(|x| x.to_le_bytes())
        .collect();
    bytes.truncate(len);
    bytes
}

/// The sketch in words `w` (of [`WORDS`]), which a run wrote or [`check`] passed.
pub fn load(w: &[u64]) -> DDSketch {
    if w[0] == 0 {
        return DDSketch::new(config());
    }
    postcard::from_bytes(&bytes_of(w)).expect("a pane's sketch is one this module wrote or checked")
}

/// Writes `sketch` into words `w` (of [`WORDS`]).
pub fn store(w: &mut [u64], sketch: &DDSketch) {
    let bytes = postcard::to_allocvec(sketch).expect("a sketch serializes");
    assert!(bytes.len() <= MAX_BYTES, "a sketch of {} bytes, past its bound", bytes.len());
    // Only the words the old bytes took need clearing.
    let used = 1 + (w[0] as usize).min(MAX_BYTES).div_ceil(8);
    w[..used].fill(0);
    w[0] = bytes.len() as u64;
    for (word, chunk) in w[1..].iter_mut().zip(bytes.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        *word = u64::from_le_bytes(b);
    }
}

/// Enters `x` into the pane's sketch (NaN and the infinities have no bin).
pub fn add(w: &mut [u64], x: f64) {
    if !x.is_finite() {
        return;
    }
    let mut sketch = load(w);
    sketch.add(x);
    store(w, &sketch);
}

/// The panes' sketches merged, in order, into an empty one.
pub fn merged<'a>(panes: impl Iterator<Item = &'a [u64]>) -> DDSketch {
    let mut all = DDSketch::new(config());
    for w in panes {
        all.merge(&load(w)).expect("one configuration for every sketch");
    }
    all
}

/// The quantile `q` of the panes' sketches merged (oldest first); `None` if
/// they hold no value.
pub fn quantile<'a>(panes: impl Iterator<Item = &'a [u64]>, q: f64) -> Option<f64> {
    merged(panes).quantile(q).ok().flatten()
}

/// The number of values in a pane's sketch.
#[cfg(test)]
fn count(w: &[u64]) -> u64 {
    load(w).count() as u64
}

// The serde form of `sketches_ddsketch` 0.4.2 (fields in declaration order), read to check a
// snapshot's words before the crate trusts them.
#[derive(Deserialize)]
struct ConfigForm {
    _max_num_bins: u32,
    _gamma: f64,
    _gamma_ln: f64,
    _min_value: f64,
    _offset: i32,
}

#[derive(Deserialize)]
struct StoreForm {
    bins: Vec<u64>,
    count: u64,
    min_key: i32,
    max_key: i32,
    offset: i32,
    bin_limit: usize,
    is_collapsed: bool,
}

#[derive(Deserialize)]
struct SketchForm {
    _config: ConfigForm,
    store: StoreForm,
    negative_store: StoreForm,
    _min: f64,
    _max: f64,
    _sum: f64,
    zero_count: u64,
}

/// Keys of finite values lie within ±40,000 (`ln(f64::MAX) / ln(gamma)`).
const KEY_BOUND: i32 = 1 << 20;

fn check_store(s: &StoreForm) -> Result<u64, String> {
    if s.bin_limit != MAX_BINS as usize || s.bins.len() > MAX_BINS as usize {
        return Err("a sketch store of another size".into());
    }
    if s.bins.is_empty() {
        return match (s.count, s.min_key, s.max_key, s.offset, s.is_collapsed) {
            (0, i32::MAX, i32::MIN, 0, false) => Ok(0),
            _ => Err("an empty sketch store that holds state".into()),
        };
    }
    let len = s.bins.len() as i64;
    let (lo, hi, off) = (i64::from(s.min_key), i64::from(s.max_key), i64::from(s.offset));
    let bounded = [lo, hi, off].iter().all(|k| k.abs() <= i64::from(KEY_BOUND));
    if !bounded || len % 128 != 0 || off > lo || lo > hi || hi >= off + len {
        return Err("a sketch store's keys outside its bins".into());
    }
    let mut sum = 0u64;
    for (i, &b) in s.bins.iter().enumerate() {
        let key = off + i as i64;
        if b != 0 && (key < lo || key > hi) {
            return Err("a sketch store's count outside its keys".into());
        }
        sum = sum.checked_add(b).ok_or("a sketch store's count past 2^64")?;
    }
    if sum != s.count {
        return Err("a sketch store's bins that do not add up to its count".into());
    }
    Ok(sum)
}

/// Checks a pane's sketch words read from a snapshot, for a pane of `values`
/// values: the crate's own encoding (re-encoded to the same bytes) of a
/// sketch of this module's configuration, with consistent stores, holding
/// at most `values` values.
pub fn check(w: &[u64], values: u64) -> Result<(), String> {
    if w.len() != WORDS || w[0] as usize > MAX_BYTES {
        return Err("a percentile sketch of another size".into());
    }
    if w[0] == 0 {
        return match w.iter().all(|&x| x == 0) {
            true => Ok(()),
            false => Err("an empty percentile sketch that holds state".into()),
        };
    }
    let bytes = bytes_of(w);
    let ours = postcard::to_allocvec(&config()).expect("a config serializes");
    if !bytes.starts_with(&ours) {
        return Err("a percentile sketch of another configuration".into());
    }
    let form: SketchForm =
        postcard::from_bytes(&bytes).map_err(|e| format!("a percentile sketch: {e}"))?;
    let held = check_store(&form.store)?
        .checked_add(check_store(&form.negative_store)?)
        .and_then(|n| n.checked_add(form.zero_count))
        .ok_or("a sketch's count past 2^64")?;
    if held > values {
        return Err("a percentile sketch holding more values than its pane".into());
    }
    let sketch: DDSketch =
        postcard::from_bytes(&bytes).map_err(|e| format!("a percentile sketch: {e}"))?;
    // Written again, the sketch gives the very words: its bytes, their
    // length and zero padding.
    let mut again = vec![0u64; WORDS];
    store(&mut again, &sketch);
    if again != w {
        return Err("a percentile sketch that is not in its own form".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sketches_round_trip_through_words_and_meet_their_bound() {
        let mut w = vec![0u64; WORDS];
        // Values spread over the widest range of keys a store keeps, both
        // signs, and zeros.
        for k in 0..2000 {
            let x = 1.0e-6 * 1.03f64.powi(k);
            add(&mut w, x);
            add(&mut w, -x * 3.0);
            add(&mut w, 0.0);
        }
        assert_eq!(count(&w), 6000);
        check(&w, 6000).unwrap();
        assert!(check(&w, 5999).is_err());
        let mut broken = w.clone();
        broken[3] ^= 0xffff;
        assert!(check(&broken, 6000).is_err());
        let mut w = vec![0u64; WORDS];
        for x in [1.0, 2.0, 3.0, 4.0, 100.0] {
            add(&mut w, x);
        }
        let p50 = quantile([w.as_slice()].into_iter(), 0.5).unwrap();
        assert!((p50 - 3.0).abs() <= 3.0 * ALPHA, "{p50}");
    }
}
