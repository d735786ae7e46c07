//! The MemTable: a concurrent ordered map holding the newest writes until the
//! committer merges them into the space.
//!
//! Every write is kept as its own version, ordered by key ascending and then
//! sequence number descending, so a reader at snapshot `s` finds the newest
//! version of a key with a sequence number `<= s` by one ordered search. A
//! reader never sees a version newer than its snapshot: writers publish a
//! sequence number only after every version up to it is inserted, which makes
//! a `WriteBatch` visible all at once (and leaves room for snapshots).
//!
//! Invariants: versions are never removed while the table lives; a deletion
//! is a version whose value is `None` (a tombstone) so it can hide the pair
//! in the space until it is committed; `approximate_bytes` grows with every
//! insert, also overwrites, so a table fills up under updates too.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

use crossbeam_skiplist::SkipMap;

/// A value version: `None` is a deletion.
pub type Version = Option<Box<[u8]>>;

/// Per-entry bookkeeping counted on top of key and value bytes.
const ENTRY_OVERHEAD: usize = 80;

/// The skip list's key: a user key and the sequence number of one write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemKey {
    /// The user's key.
    pub key: Box<[u8]>,
    /// The write's sequence number.
    pub seq: u64,
}

/// What can be compared as a (key, sequence) pair without allocating.
pub trait KeySeq {
    /// The user key.
    fn key(&self) -> &[u8];
    /// The sequence number.
    fn seq(&self) -> u64;
}

impl KeySeq for MemKey {
    fn key(&self) -> &[u8] {
        &self.key
    }
    fn seq(&self) -> u64 {
        self.seq
    }
}

impl KeySeq for (&[u8], u64) {
    fn key(&self) -> &[u8] {
        self.0
    }
    fn seq(&self) -> u64 {
        self.1
    }
}

fn order(a: &dyn KeySeq, b: &dyn KeySeq) -> Ordering {
    a.key().cmp(b.key()).then_with(|| b.seq().cmp(&a.seq()))
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        order(self, other)
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<'a> Borrow<dyn KeySeq + 'a> for MemKey {
    fn borrow(&self) -> &(dyn KeySeq + 'a) {
        self
    }
}

impl PartialEq for dyn KeySeq + '_ {
    fn eq(&self, other: &Self) -> bool {
        order(self, other) == Ordering::Equal
    }
}

impl Eq for dyn KeySeq + '_ {}

impl PartialOrd for dyn KeySeq + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn KeySeq + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        order(self, other)
    }
}

/// A concurrent ordered map of write versions.
#[derive(Default)]
pub struct MemTable {
    map: SkipMap<MemKey, Version>,
    bytes: AtomicUsize,
}

impl MemTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a write of `key` at `seq` (a deletion when `value` is `None`).
    pub fn insert(&self, key: &[u8], seq: u64, value: Option<&[u8]>) {
        let size = key.len() + value.map_or(0, <[u8]>::len) + ENTRY_OVERHEAD;
        self.map.insert(
            MemKey {
                key: key.into(),
                seq,
            },
            value.map(Box::from),
        );
        self.bytes.fetch_add(size, AtomicOrdering::Relaxed);
    }

    /// The newest version of `key` with a sequence number `<= snapshot`:
    /// `Some(None)` for a deletion, `None` when the table has no version.
    pub fn get(&self, key: &[u8], snapshot: u64) -> Option<Version> {
        let probe: &dyn KeySeq = &(key, snapshot);
        let e = self.map.lower_bound(Bound::Included(probe))?;
        (&*e.key().key == key).then(|| e.value().clone())
    }

    /// Approximate memory held, in bytes.
    pub fn approximate_bytes(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
    }

    /// Number of versions.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the table holds no write.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Up to `max` keys after `from` (in key order, visible at `snapshot`),
    /// each with its newest visible version, stopping at `end`. `from` is
    /// excluded when `exclusive`. Used by iterators, which refill in chunks.
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
        let start: Bound<&dyn KeySeq> = match from {
            Bound::Included(k) => Bound::Included(&(k, u64::MAX) as &dyn KeySeq),
            Bound::Excluded(k) => Bound::Excluded(&(k, 0u64) as &dyn KeySeq),
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut last: Option<&[u8]> = None;
        let mut entries = self.map.range::<dyn KeySeq, _>((start, Bound::Unbounded));
        let mut taken = 0;
        for e in entries.by_ref() {
            let k = &*e.key().key;
            if !within_end(k, end) {
                break;
            }
            if e.key().seq > snapshot || last.is_some_and(|l| l == k) {
                continue;
            }
            if taken == max {
                break;
            }
            out.push((k.into(), e.value().clone()));
            taken += 1;
            last = out.last().map(|(k, _)| &**k);
        }
    }

    /// Like [`MemTable::scan_forward`] in reverse: up to `max` keys before
    /// `from` (excluded when `Excluded`), stopping at `end` (a lower bound).
    pub fn scan_backward(
        &self,
        from: Bound<&[u8]>,
        end: Bound<&[u8]>,
        snapshot: u64,
        max: usize,
        out: &mut Vec<(Box<[u8]>, Version)>,
    ) {
        let upper: Bound<&dyn KeySeq> = match from {
            Bound::Included(k) => Bound::Included(&(k, 0u64) as &dyn KeySeq),
            Bound::Excluded(k) => Bound::Excluded(&(k, u64::MAX) as &dyn KeySeq),
            Bound::Unbounded => Bound::Unbounded,
        };
        // Walking backwards a key's versions come oldest first: remember the
        // best visible version of the current key and emit it when the key
        // changes.
        let mut pending: Option<(Box<[u8]>, Version)> = None;
        let mut cur: Option<Box<[u8]>> = None;
        let mut taken = 0;
        let mut entries = self.map.range::<dyn KeySeq, _>((Bound::Unbounded, upper));
        while let Some(e) = entries.next_back() {
            let k = &*e.key().key;
            if !within_start(k, end) {
                break;
            }
            if cur.as_deref() != Some(k) {
                if let Some(p) = pending.take() {
                    out.push(p);
                    taken += 1;
                    if taken == max {
                        return;
                    }
                }
                cur = Some(k.into());
            }
            if e.key().seq <= snapshot {
                pending = Some((k.into(), e.value().clone()));
            }
        }
        if let Some(p) = pending {
            out.push(p);
        }
    }

    /// The newest version of every key, in key order (for the committer,
    /// on a frozen table).
    pub fn newest(&self) -> impl Iterator<Item = (Box<[u8]>, Version)> + '_ {
        let mut last: Option<Box<[u8]>> = None;
        self.map.iter().filter_map(move |e| {
            let k = &e.key().key;
            if last.as_deref() == Some(&**k) {
                return None;
            }
            last = Some(k.clone());
            Some((k.clone(), e.value().clone()))
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
        let newest: Vec<_> = t.newest().collect();
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
