//! The MemTable: the newest writes, ordered, until the committer merges
//! them into the space.
//!
//! Every write is kept as its own version in an arena skip list
//! (`skiplist`), ordered by key ascending and then sequence number
//! descending, so a reader at snapshot `s` finds the newest version of a key
//! with a sequence number `<= s` by one ordered search. A reader never sees a
//! version newer than its snapshot: writers publish a sequence number only
//! after every version up to it is inserted, which makes a `WriteBatch`
//! visible all at once (and leaves room for snapshots).
//!
//! Invariants: versions are never removed while the table lives; a deletion
//! is a version without a value (a tombstone) so it can hide the pair in the
//! space until it is committed; `approximate_bytes` grows with every insert,
//! also overwrites, so a table fills up under updates too.

use std::ops::Bound;

use crate::skiplist::{EntryRef, SkipList};

/// A value version: `None` is a deletion.
pub type Version = Option<Box<[u8]>>;

/// An ordered table of write versions: one writer at a time (the store's
/// writer lock), any number of concurrent readers.
#[derive(Default)]
pub struct MemTable {
    list: SkipList,
}

impl MemTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a write of `key` at `seq` (a deletion when `value` is `None`).
    pub fn insert(&self, key: &[u8], seq: u64, value: Option<&[u8]>) {
        self.list.insert(key, seq, value);
    }

    /// The newest version of `key` with a sequence number `<= snapshot`:
    /// `Some(None)` for a deletion, `None` when the table has no version.
    pub fn get(&self, key: &[u8], snapshot: u64) -> Option<Version> {
        let e = self.list.lower_bound(key, snapshot)?;
        (e.key == key).then(|| e.value.map(Box::from))
    }

    /// Approximate memory held, in bytes.
    pub fn approximate_bytes(&self) -> usize {
        self.list.memory()
    }

    /// Number of versions.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether the table holds no write.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Up to `max` keys after `from` (in key order, visible at `snapshot`),
    /// each with its newest visible version, stopping at `end`. Used by
    /// iterators, which refill in chunks.
    pub fn scan_forward(
        &self,
        from: Bound<&[u8]>,
        end: Bound<&[u8]>,
        snapshot: u64,
        max: usize,
        out: &mut Vec<(Box<[u8]>, Version)>,
    ) {
        // Versions of a key run from newest to oldest; the first one with a
        // sequence number <= snapshot is the key's visible version.
        let (it, skip) = match from {
            Bound::Included(k) => (self.list.iter_from(k, u64::MAX), None),
            Bound::Excluded(k) => (self.list.iter_from(k, 0), Some(k)),
            Bound::Unbounded => (self.list.iter(), None),
        };
        let mut last: Option<&[u8]> = skip;
        let mut taken = 0;
        for e in it {
            if !within_end(e.key, end) {
                break;
            }
            if e.seq > snapshot || last == Some(e.key) {
                continue;
            }
            if taken == max {
                break;
            }
            out.push((e.key.into(), e.value.map(Box::from)));
            taken += 1;
            last = Some(e.key);
        }
    }

    /// Like [`MemTable::scan_forward`] in reverse: up to `max` keys before
    /// `from`, in descending order, stopping at `end` (a lower bound).
    pub fn scan_backward(
        &self,
        from: Bound<&[u8]>,
        end: Bound<&[u8]>,
        snapshot: u64,
        max: usize,
        out: &mut Vec<(Box<[u8]>, Version)>,
    ) {
        // Windows of entries just before a position, walked back; each key
        // found is then looked up for its visible version.
        let mut pos: Option<(Vec<u8>, u64)> = match from {
            Bound::Included(k) => Some((k.to_vec(), 0)),
            Bound::Excluded(k) => Some((k.to_vec(), u64::MAX)),
            Bound::Unbounded => None,
        };
        let mut taken = 0;
        loop {
            let (window, from_start) = self.list.iter_before(
                pos.as_ref().map(|(k, _)| k.as_slice()),
                pos.as_ref().map_or(0, |p| p.1),
            );
            let before = |e: &EntryRef<'_>| match &pos {
                Some((k, s)) => {
                    (e.key, std::cmp::Reverse(e.seq)) < (k.as_slice(), std::cmp::Reverse(*s))
                }
                None => true,
            };
            let mut keys: Vec<&[u8]> = Vec::new();
            for e in window.take_while(before) {
                if keys.last() != Some(&e.key) {
                    keys.push(e.key);
                }
            }
            // The window may start inside the versions of its first key,
            // whose newer versions come before it: leave that key to the
            // next window, unless it is the only one.
            if !from_start && keys.len() > 1 {
                keys.remove(0);
            }
            let Some(&lowest) = keys.first() else {
                return;
            };
            for &k in keys.iter().rev() {
                if !within_start(k, end) {
                    return;
                }
                if let Some(v) = self.get(k, snapshot) {
                    out.push((k.into(), v));
                    taken += 1;
                    if taken == max {
                        return;
                    }
                }
            }
            if from_start {
                return;
            }
            pos = Some((lowest.to_vec(), u64::MAX));
        }
    }

    /// The newest version of every key, in key order, borrowed from the
    /// table (for the committer, on a frozen table).
    pub fn newest(&self) -> impl Iterator<Item = EntryRef<'_>> + '_ {
        let mut last: Option<&[u8]> = None;
        self.list.iter().filter(move |e| {
            let repeat = last == Some(e.key);
            last = Some(e.key);
            !repeat
        })
    }
}

/// Whether `k` lies before the upper bound `end`.
pub fn within_end(k: &[u8], end: Bound<&[u8]>) -> bool {
    match end {
        Bound::Included(e) => k <= e,
        Bound::Excluded(e) => k < e,
        Bound::Unbounded => true,
    }
}

/// Whether `k` lies after the lower bound `start`.
pub fn within_start(k: &[u8], start: Bound<&[u8]>) -> bool {
    match start {
        Bound::Included(s) => k >= s,
        Bound::Excluded(s) => k > s,
        Bound::Unbounded => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn v(s: &str) -> Version {
        Some(s.as_bytes().into())
    }

    #[test]
    fn snapshots_see_the_newest_version_at_or_below_them() {
        let t = MemTable::new();
        t.insert(b"k", 5, Some(b"five"));
        t.insert(b"k", 3, Some(b"three"));
        t.insert(b"k", 9, None);
        t.insert(b"j", 4, Some(b"j4"));
        t.insert(b"l", 1, Some(b"l1"));
        assert_eq!(t.get(b"k", 2), None);
        assert_eq!(t.get(b"k", 3), Some(v("three")));
        assert_eq!(t.get(b"k", 8), Some(v("five")));
        assert_eq!(t.get(b"k", 9), Some(None));
        assert_eq!(t.get(b"k", u64::MAX), Some(None));
        assert_eq!(t.get(b"kk", u64::MAX), None);
        assert_eq!(t.get(b"j", 3), None);
        assert_eq!(t.len(), 5);
        let newest: Vec<_> = t
            .newest()
            .map(|e| (Box::<[u8]>::from(e.key), e.value.map(Box::from)))
            .collect();
        assert_eq!(
            newest,
            vec![
                (b"j".to_vec().into(), v("j4")),
                (b"k".to_vec().into(), None),
                (b"l".to_vec().into(), v("l1")),
            ]
        );
    }

    #[test]
    fn scans_respect_bounds_snapshots_and_limits() {
        let t = MemTable::new();
        for (i, k) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            t.insert(k.as_bytes(), i as u64 + 1, Some(k.as_bytes()));
            t.insert(k.as_bytes(), i as u64 + 10, None);
        }
        let keys = |out: &Vec<(Box<[u8]>, Version)>| {
            out.iter()
                .map(|(k, v)| (String::from_utf8(k.to_vec()).unwrap(), v.is_some()))
                .collect::<Vec<_>>()
        };
        let mut out = Vec::new();
        t.scan_forward(
            Bound::Excluded(b"a"),
            Bound::Included(b"d"),
            100,
            10,
            &mut out,
        );
        assert_eq!(
            keys(&out),
            vec![
                ("b".into(), false),
                ("c".into(), false),
                ("d".into(), false)
            ]
        );
        out.clear();
        t.scan_forward(Bound::Unbounded, Bound::Unbounded, 3, 2, &mut out);
        assert_eq!(keys(&out), vec![("a".into(), true), ("b".into(), true)]);
        out.clear();
        t.scan_forward(Bound::Included(b"c"), Bound::Unbounded, 3, 10, &mut out);
        assert_eq!(keys(&out), vec![("c".into(), true)]);
        out.clear();
        t.scan_backward(Bound::Unbounded, Bound::Excluded(b"a"), 12, 10, &mut out);
        assert_eq!(
            keys(&out),
            vec![
                ("e".into(), true),
                ("d".into(), true),
                ("c".into(), false),
                ("b".into(), false)
            ]
        );
        out.clear();
        t.scan_backward(Bound::Excluded(b"d"), Bound::Unbounded, 100, 2, &mut out);
        assert_eq!(keys(&out), vec![("c".into(), false), ("b".into(), false)]);
        out.clear();
        t.scan_backward(Bound::Included(b"b"), Bound::Unbounded, 1, 5, &mut out);
        assert_eq!(keys(&out), vec![("a".into(), true)]);
    }

    #[test]
    fn concurrent_writers_and_readers() {
        let t = Arc::new(MemTable::new());
        let threads: Vec<_> = (0..4u64)
            .map(|th| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        let seq = i * 4 + th + 1;
                        t.insert(&(i % 50).to_le_bytes(), seq, Some(&seq.to_le_bytes()));
                        let _ = t.get(&(i % 7).to_le_bytes(), seq);
                    }
                })
            })
            .collect();
        for h in threads {
            h.join().unwrap();
        }
        for k in 0..50u64 {
            // The largest sequence written for key k is from i = 950 + k.
            let want = (950 + k) * 4 + 4;
            let got = t.get(&k.to_le_bytes(), u64::MAX).unwrap().unwrap();
            assert_eq!(&*got, &want.to_le_bytes());
        }
    }
}
