//! The keyed monitor's table of keys: each live key's record (its packed run in place), found
//! by one hash probe, in recency order.
//!
//! A keyed row looks its key up, then runs on that key's packed run. With the `lru` crate the
//! lookup followed a pointer to a heap node to compare the key (72% of the lookup, a cache
//! miss on nearly every row: profiled on 10,000 keys), and the run was in a block elsewhere, a
//! second miss. Here a key's record is one stretch of words holding a header (the key's scalar
//! form, the record's state) and then the packed run, and the hash index holds only record
//! numbers (4 bytes each, so it stays in cache): a lookup compares the key in the header, on
//! the very lines the row then works on.
//!
//! Recency is a doubly linked list over record numbers (`links`), most recent first: new keys
//! go to the front, and `touch` moves a key there (a keyed monitor touches keys only under a
//! bound on live keys, so without one the order is the order keys were first seen).

use super::Side;
use crate::value::{Key, Value};
use hashbrown::HashMap;
use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;
use zerocopy::IntoBytes;

/// A live key's record number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct EntryId(u32);

impl EntryId {
    fn index(self) -> usize {
        self.0 as usize
    }
}

/// A record's neighbours in recency order.
#[derive(Clone, Copy, Debug, Default)]
struct Link {
    newer: Option<EntryId>,
    older: Option<EntryId>,
}

/// Header words of a record, before its packed run: the key's scalar lane,
/// then its tag.
const HEADER: usize = 2;

/// The tag a header gives a key without a scalar form (Str, Unit): such a
/// key is compared with its `Key` (`keys`).
const OBJECT_KEY: u8 = u8::MAX;

/// A key's form in a header.
fn header_of(key: &Value) -> (u64, u8) {
    match key {
        Value::Int(i) => (*i as u64, 1),
        Value::Float(x) => (x.to_bits(), 2),
        Value::Bool(b) => (u64::from(*b), 3),
        _ => (0, OBJECT_KEY),
    }
}

/// A key's hash: of its header form (one word) for a scalar key, of its
/// text for a Str key. Keys whose forms collide (an Int and a Float of the
/// same bits, say) are told apart by the header's tag.
#[inline]
fn key_hash(hasher: &DefaultHashBuilder, key: &Value) -> u64 {
    match key {
        Value::Str(s) => hasher.hash_one(&**s),
        _ => hasher.hash_one(header_of(key).0),
    }
}

/// Every live key's record, index and recency (see the module docs).
pub(super) struct KeyTable {
    hasher: DefaultHashBuilder,
    index: HashTable<EntryId>,
    /// Words of a packed run (`PackLayout::len` / 8) and of a record.
    words: usize,
    stride: usize,
    records: Vec<u64>,
    /// The key of each record (`None`: free).
    keys: Vec<Option<Key>>,
    links: Vec<Link>,
    newest: Option<EntryId>,
    oldest: Option<EntryId>,
    free: Vec<EntryId>,
    len: usize,
    /// What a packed run keeps beside its words, in the rare case there is
    /// anything (`Side`).
    sides: HashMap<EntryId, Box<Side>>,
}

impl KeyTable {
    /// A table of packed runs of `len` bytes (a multiple of 8: `PackLayout::len`).
    pub(super) fn new(len: usize) -> KeyTable {
        debug_assert_eq!(len % 8, 0, "engine bug: a layout of partial words");
        KeyTable {
            hasher: DefaultHashBuilder::default(),
            index: HashTable::new(),
            words: len / 8,
            stride: HEADER + len / 8,
            records: Vec::new(),
            keys: Vec::new(),
            links: Vec::new(),
            newest: None,
            oldest: None,
            free: Vec::new(),
            len: 0,
            sides: HashMap::new(),
        }
    }

    /// Lays every record out anew for packed runs of `len` bytes (a
    /// multiple of 8), keeping record numbers, keys, the index and recency:
    /// each live record's new run is written by `convert`, given its key,
    /// old run and side, which returns its new side. (A keyed monitor's tier-up
    /// changes the layout of its runs.) Both layouts are held at once until
    /// it returns.
    pub(super) fn relayout(
        &mut self,
        len: usize,
        mut convert: impl FnMut(&Key, &[u8], Option<&Side>, &mut [u8]) -> Option<Box<Side>>,
    ) {
        debug_assert_eq!(len % 8, 0, "engine bug: a layout of partial words");
        let (words, stride) = (len / 8, HEADER + len / 8);
        let mut records = vec![0u64; self.keys.len() * stride];
        let mut sides = HashMap::new();
        for (i, key) in self.keys.iter().enumerate() {
            let Some(key) = key else { continue };
            let id = EntryId(i as u32);
            let (old, new) = (i * self.stride, i * stride);
            records[new..new + HEADER].copy_from_slice(&self.records[old..old + HEADER]);
            let run = self.records[old + HEADER..old + self.stride].as_bytes();
            let side = self.sides.get(&id).map(|s| &**s);
            if let Some(side) = convert(
                key,
                run,
                side,
                records[new + HEADER..new + stride].as_mut_bytes(),
            ) {
                sides.insert(id, side);
            }
        }
        self.records = records;
        self.words = words;
        self.stride = stride;
        self.sides = sides;
    }

    /// Makes room for `additional` more keys at once (a restore knows how
    /// many it brings), instead of growing by an eighth at a time.
    pub(super) fn reserve(&mut self, additional: usize) {
        let new = additional.saturating_sub(self.free.len());
        self.records.reserve_exact(new.saturating_mul(self.stride));
        self.keys.reserve_exact(new);
        self.links.reserve_exact(new);
        let (keys, hasher) = (&self.keys, &self.hasher);
        self.index.reserve(additional, |other| {
            let other = keys[other.index()].as_ref().expect("indexed keys are live");
            key_hash(hasher, other.value())
        });
    }

    /// The record of the live key whose value is `key`, if any.
    #[inline]
    pub(super) fn find(&self, key: &Value) -> Option<EntryId> {
        let (lane, tag) = header_of(key);
        let hash = key_hash(&self.hasher, key);
        self.index
            .find(hash, |&id| {
                let at = id.index() * self.stride;
                self.records[at] == lane
                    && self.records[at + 1] as u8 == tag
                    && (tag != OBJECT_KEY
                        || self.keys[id.index()].as_ref().map(Key::value) == Some(key))
            })
            .copied()
    }

    /// Adds `key` (not live) as the most recent key, with a zeroed record.
    pub(super) fn insert(&mut self, key: Key) -> EntryId {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                let id = EntryId(u32::try_from(self.keys.len()).expect("fewer than 2^32 keys"));
                if self.records.len() + self.stride > self.records.capacity() {
                    // Grow by an eighth, not double: the slack is memory every
                    // key pays for, and growth stays amortised constant.
                    self.records
                        .reserve_exact(self.records.capacity() / 8 + 64 * self.stride);
                }
                self.records.resize(self.records.len() + self.stride, 0);
                self.keys.push(None);
                self.links.push(Link::default());
                id
            }
        };
        let at = id.index() * self.stride;
        self.records[at..at + self.stride].fill(0);
        let (lane, tag) = header_of(key.value());
        self.records[at] = lane;
        self.records[at + 1] = u64::from(tag);
        let hash = key_hash(&self.hasher, key.value());
        let (keys, hasher) = (&self.keys, &self.hasher);
        self.index.insert_unique(hash, id, |other| {
            let other = keys[other.index()].as_ref().expect("indexed keys are live");
            key_hash(hasher, other.value())
        });
        self.keys[id.index()] = Some(key);
        self.link_newest(id);
        self.len += 1;
        id
    }

    /// Removes a live key's record; returns its key.
    pub(super) fn remove(&mut self, id: EntryId) -> Key {
        let key = self.keys[id.index()]
            .take()
            .expect("engine bug: removing a free record");
        let hash = key_hash(&self.hasher, key.value());
        if let Ok(entry) = self.index.find_entry(hash, |&other| other == id) {
            entry.remove();
        }
        self.unlink(id);
        self.sides.remove(&id);
        self.free.push(id);
        self.len -= 1;
        key
    }

    /// Makes a live key the most recent.
    pub(super) fn touch(&mut self, id: EntryId) {
        if self.newest != Some(id) {
            self.unlink(id);
            self.link_newest(id);
        }
    }

    fn link_newest(&mut self, id: EntryId) {
        self.links[id.index()] = Link {
            newer: None,
            older: self.newest,
        };
        match self.newest {
            Some(n) => self.links[n.index()].newer = Some(id),
            None => self.oldest = Some(id),
        }
        self.newest = Some(id);
    }

    fn unlink(&mut self, id: EntryId) {
        let Link { newer, older } = self.links[id.index()];
        match newer {
            Some(n) => self.links[n.index()].older = older,
            None => self.newest = older,
        }
        match older {
            Some(o) => self.links[o.index()].newer = newer,
            None => self.oldest = newer,
        }
    }

    /// The least recently used key's record.
    pub(super) fn oldest(&self) -> Option<EntryId> {
        self.oldest
    }

    /// The live records, most recent first.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = EntryId> + '_ {
        // Collected, since the list is walked from either end.
        let mut ids = Vec::with_capacity(self.len);
        let mut at = self.newest;
        while let Some(id) = at {
            ids.push(id);
            at = self.links[id.index()].older;
        }
        ids.into_iter()
    }

    /// The key of a live record.
    pub(super) fn key(&self, id: EntryId) -> &Key {
        self.keys[id.index()]
            .as_ref()
            .expect("engine bug: a free record's key")
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Drops every key.
    pub(super) fn clear(&mut self) {
        self.index.clear();
        self.records.clear();
        self.keys.clear();
        self.links.clear();
        self.newest = None;
        self.oldest = None;
        self.free.clear();
        self.len = 0;
        self.sides.clear();
    }

    /// Starts bringing a record into the cache (a hint: nothing is read).
    #[inline]
    pub(super) fn prefetch(&self, id: EntryId) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let at = id.index() * self.stride;
            let record = &self.records[at..at + self.stride];
            // One hint per cache line of the record (8 words).
            for line in record.chunks(8) {
                // SAFETY: a prefetch is a hint that never faults nor reads
                // into the program; the address is inside `records` anyway.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast()) };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = id;
    }

    /// The key's packed run, as bytes.
    #[inline]
    pub(super) fn block(&self, id: EntryId) -> &[u8] {
        let at = id.index() * self.stride + HEADER;
        self.records[at..at + self.words].as_bytes()
    }

    /// The key's packed run, as words.
    #[inline]
    pub(super) fn words(&self, id: EntryId) -> &[u64] {
        let at = id.index() * self.stride + HEADER;
        &self.records[at..at + self.words]
    }

    /// The key's packed run, as words (a kernel runs on it in place).
    #[inline]
    pub(super) fn words_mut(&mut self, id: EntryId) -> &mut [u64] {
        let at = id.index() * self.stride + HEADER;
        &mut self.records[at..at + self.words]
    }

    #[inline]
    pub(super) fn side(&self, id: EntryId) -> Option<&Side> {
        if self.sides.is_empty() {
            return None;
        }
        self.sides.get(&id).map(|s| &**s)
    }

    pub(super) fn set_side(&mut self, id: EntryId, side: Option<Box<Side>>) {
        match side {
            Some(side) => {
                self.sides.insert(id, side);
            }
            None if !self.sides.is_empty() => {
                self.sides.remove(&id);
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_removed_and_kept_in_recency_order() {
        let mut t = KeyTable::new(16);
        let keys = [
            Key::new(1),
            Key::new(1.0),
            Key::new(true),
            Key::new("a"),
            Key::new("b"),
            Key::new(Value::Unit),
            Key::new(-0.0),
            Key::new(0.0),
        ];
        let ids: Vec<EntryId> = keys.iter().map(|k| t.insert(k.clone())).collect();
        for (k, id) in keys.iter().zip(&ids) {
            assert_eq!(t.find(k.value()), Some(*id), "{k:?}");
            assert_eq!(t.key(*id), k);
        }
        assert_eq!(t.find(&Value::Int(2)), None);
        assert_eq!(t.find(&Value::from("c")), None);
        assert_eq!(t.iter().next(), Some(ids[7]));
        assert_eq!(t.oldest(), Some(ids[0]));
        t.touch(ids[0]);
        assert_eq!(t.oldest(), Some(ids[1]));
        assert_eq!(t.iter().next(), Some(ids[0]));
        assert_eq!(t.remove(ids[3]), keys[3]);
        assert_eq!(t.find(keys[3].value()), None);
        assert_eq!(t.len(), 7);
        assert_eq!(t.iter().count(), 7);
        // A freed record is reused, zeroed, for a new key.
        t.words_mut(ids[4])[0] = 7;
        t.remove(ids[4]);
        let again = t.insert(Key::new("d"));
        assert_eq!(again, ids[4]);
        assert_eq!(t.words_mut(again)[0], 0);
        assert_eq!(t.find(&Value::from("d")), Some(again));
        assert_eq!(t.iter().next_back(), Some(ids[1]));
    }

    #[test]
    fn a_relayout_keeps_keys_recency_and_what_convert_writes() {
        let mut t = KeyTable::new(16);
        let keys = [Key::new(1), Key::new("a"), Key::new(2), Key::new(true)];
        let ids: Vec<EntryId> = keys.iter().map(|k| t.insert(k.clone())).collect();
        for (i, &id) in ids.iter().enumerate() {
            t.words_mut(id).copy_from_slice(&[i as u64, 10 + i as u64]);
        }
        t.remove(ids[2]);
        t.touch(ids[0]);
        let order: Vec<EntryId> = t.iter().collect();
        // Each new run of three words: the old two, then their sum.
        t.relayout(24, |_, old, side, new| {
            assert!(side.is_none());
            let (a, b) = (old[0], old[8]);
            new.fill(0);
            new[0] = a;
            new[8] = b;
            new[16] = a + b;
            None
        });
        assert_eq!(t.iter().collect::<Vec<_>>(), order);
        for (i, &id) in ids.iter().enumerate().filter(|&(i, _)| i != 2) {
            assert_eq!(t.find(keys[i].value()), Some(id));
            assert_eq!(t.words(id), [i as u64, 10 + i as u64, 10 + 2 * i as u64]);
        }
        assert_eq!(t.find(keys[2].value()), None);
        // The freed record is reused at the new length.
        assert_eq!(t.insert(Key::new(9)), ids[2]);
        assert_eq!(t.words(ids[2]), [0, 0, 0]);
    }

    #[test]
    fn many_keys_survive_growth_and_removal() {
        let mut t = KeyTable::new(8);
        let ids: Vec<EntryId> = (0..5000).map(|i| t.insert(Key::new(i))).collect();
        for (i, id) in ids.iter().enumerate().filter(|(i, _)| i % 3 == 0) {
            assert_eq!(t.remove(*id), Key::new(i as i64));
        }
        for i in 0..5000 {
            assert_eq!(t.find(&Value::Int(i)).is_some(), i % 3 != 0, "{i}");
        }
        assert_eq!(t.len(), 5000 - 1667);
    }
}
