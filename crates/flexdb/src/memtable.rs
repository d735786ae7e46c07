//! The MemTable: a concurrent ordered map holding the newest writes until the
//! committer merges them into the space.
//!
//! Invariants: for every key the table keeps the write with the highest
//! sequence number it has seen (a concurrent writer with an older sequence
//! number never overwrites a newer one, whatever order the inserts land
//! in); a deletion is kept as a tombstone (`value == None`) so it can hide
//! the pair in the space until it is committed.

use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_skiplist::SkipMap;

/// The newest write of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Sequence number of the write.
    pub seq: u64,
    /// The value, or `None` for a deletion.
    pub value: Option<Arc<[u8]>>,
}

/// Per-entry bookkeeping counted on top of key and value bytes.
const ENTRY_OVERHEAD: usize = 64;

/// A concurrent ordered map of the newest writes.
#[derive(Default)]
pub struct MemTable {
    map: SkipMap<Vec<u8>, Slot>,
    bytes: AtomicUsize,
}

impl MemTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a write of `key` (a deletion when `value` is `None`).
    pub fn insert(&self, key: &[u8], seq: u64, value: Option<&[u8]>) {
        let size = key.len() + value.map_or(0, <[u8]>::len) + ENTRY_OVERHEAD;
        let slot = Slot {
            seq,
            value: value.map(Arc::from),
        };
        self.map
            .compare_insert(key.to_vec(), slot, |old| old.seq < seq);
        self.bytes.fetch_add(size, Ordering::Relaxed);
    }

    /// The newest write of `key`, if any.
    pub fn get(&self, key: &[u8]) -> Option<Slot> {
        self.map.get(key).map(|e| e.value().clone())
    }

    /// Approximate memory held, in bytes (grows with every write, also
    /// overwrites, so a table fills up under updates too).
    pub fn approximate_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Number of distinct keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the table holds no write.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The first entry at or after `from` (after it when `exclusive`), in key
    /// order.
    pub fn next_from(&self, from: &[u8], exclusive: bool) -> Option<(Vec<u8>, Slot)> {
        let bound = if exclusive {
            Bound::Excluded(from)
        } else {
            Bound::Included(from)
        };
        self.map
            .lower_bound(bound)
            .map(|e| (e.key().clone(), e.value().clone()))
    }

    /// The last entry at or before `to` (before it when `exclusive`).
    pub fn prev_from(&self, to: &[u8], exclusive: bool) -> Option<(Vec<u8>, Slot)> {
        let bound = if exclusive {
            Bound::Excluded(to)
        } else {
            Bound::Included(to)
        };
        self.map
            .upper_bound(bound)
            .map(|e| (e.key().clone(), e.value().clone()))
    }

    /// Every entry in key order (used by the committer on a frozen table).
    pub fn iter(&self) -> impl Iterator<Item = (Vec<u8>, Slot)> + '_ {
        self.map
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_sequence_wins_in_any_order() {
        let t = MemTable::new();
        t.insert(b"k", 5, Some(b"five"));
        t.insert(b"k", 3, Some(b"three"));
        assert_eq!(t.get(b"k").unwrap().seq, 5);
        t.insert(b"k", 9, None);
        assert_eq!(
            t.get(b"k"),
            Some(Slot {
                seq: 9,
                value: None
            })
        );
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn ordered_navigation() {
        let t = MemTable::new();
        for (i, k) in [b"b", b"d", b"f"].iter().enumerate() {
            t.insert(*k, i as u64, Some(b"v"));
        }
        assert_eq!(t.next_from(b"c", false).unwrap().0, b"d");
        assert_eq!(t.next_from(b"d", false).unwrap().0, b"d");
        assert_eq!(t.next_from(b"d", true).unwrap().0, b"f");
        assert!(t.next_from(b"g", false).is_none());
        assert_eq!(t.prev_from(b"c", false).unwrap().0, b"b");
        assert_eq!(t.prev_from(b"d", true).unwrap().0, b"b");
        assert!(t.prev_from(b"a", false).is_none());
        let keys: Vec<_> = t.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, vec![b"b".to_vec(), b"d".to_vec(), b"f".to_vec()]);
        assert!(t.approximate_bytes() >= 3 * ENTRY_OVERHEAD);
    }

    #[test]
    fn concurrent_writers_keep_the_newest() {
        let t = Arc::new(MemTable::new());
        let threads: Vec<_> = (0..4u64)
            .map(|th| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        let seq = i * 4 + th;
                        t.insert(&(i % 50).to_le_bytes(), seq, Some(&seq.to_le_bytes()));
                    }
                })
            })
            .collect();
        for h in threads {
            h.join().unwrap();
        }
        for k in 0..50u64 {
            let s = t.get(&k.to_le_bytes()).unwrap();
            // The largest sequence written for key k is from i = 950 + k.
            assert_eq!(s.seq, (950 + k) * 4 + 3);
            assert_eq!(&*s.value.unwrap(), &s.seq.to_le_bytes());
        }
    }
}
