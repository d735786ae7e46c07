//! A MemTable's range deletes (range tombstones): each removes every key
//! `start <= k < end` (`end` unset: every key from `start` on) written
//! before it, in its own table or an older one, or committed to the space.
//!
//! Readers at snapshot `s` see the tombstones numbered `<= s`. A key's
//! version in the same table is hidden by a tombstone of that table with a
//! higher sequence number; every version in an older table, and every pair
//! in the space, by any tombstone of this one (its writes are all newer).
//!
//! Invariants: tombstones are only added, by the one writer (the store's
//! writer lock), before the sequence number that makes them visible is
//! published; the list is replaced whole (`ArcSwap`), so readers take no
//! lock and write no shared line; a table without any (the common case)
//! costs a reader one atomic load (`is_empty`). Adding one copies the
//! list and lookups are linear in it: range deletes are expected to be few
//! beside point writes (see docs/DESIGN.md, "Range deletes").

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use arc_swap::ArcSwap;

/// One range delete, as its table keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RangeTombstone {
    /// The first key removed.
    pub start: Box<[u8]>,
    /// The key bound (exclusive); `None`: to the last key.
    pub end: Option<Box<[u8]>>,
    /// Its sequence number.
    pub seq: u64,
}

impl RangeTombstone {
    /// Whether it removes `key`.
    pub fn covers(&self, key: &[u8]) -> bool {
        *self.start <= *key && self.end.as_deref().is_none_or(|e| key < e)
    }

    /// Whether a key between `lo` and `hi` lies in it.
    pub fn overlaps(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        // Its keys are [start, end); the bounds' keys are a range too: they
        // share a key when each starts before the other ends.
        let below_hi = match hi {
            Bound::Included(h) => *self.start <= *h,
            Bound::Excluded(h) => *self.start < *h,
            Bound::Unbounded => true,
        };
        let above_lo = match (lo, self.end.as_deref()) {
            (_, None) | (Bound::Unbounded, _) => true,
            // A key `k >= lo` (or `> lo`) below `end` exists when `lo < end`
            // (for an excluded `lo`, `lo\0 < end`, which is `lo < end`
            // unless `end` is `lo\0` itself).
            (Bound::Included(l), Some(e)) => l < e,
            (Bound::Excluded(l), Some(e)) => {
                l < e && !(e.len() == l.len() + 1 && e.starts_with(l) && e[l.len()] == 0)
            }
        };
        below_hi && above_lo
    }

    /// Bytes it takes (for the table's size).
    fn bytes(&self) -> usize {
        self.start.len() + self.end.as_ref().map_or(0, |e| e.len()) + 48
    }
}

/// The range deletes of one MemTable.
#[derive(Default)]
pub(crate) struct RangeTombstones {
    any: AtomicBool,
    list: ArcSwap<Vec<RangeTombstone>>,
    bytes: AtomicUsize,
}

impl RangeTombstones {
    /// Adds one (the writer, before `seq` is visible).
    pub fn push(&self, start: &[u8], end: Option<&[u8]>, seq: u64) {
        let t = RangeTombstone {
            start: start.into(),
            end: end.map(Box::from),
            seq,
        };
        self.bytes.fetch_add(t.bytes(), Ordering::Relaxed);
        let mut list = Vec::clone(&self.list.load());
        list.push(t);
        self.list.store(std::sync::Arc::new(list));
        self.any.store(true, Ordering::Release);
    }

    /// Whether it holds none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }

    /// Bytes they take.
    #[inline]
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The newest sequence number `<= snapshot` of one covering `key`.
    pub fn covering(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        self.list
            .load()
            .iter()
            .filter(|t| t.seq <= snapshot && t.covers(key))
            .map(|t| t.seq)
            .max()
    }

    /// Whether one numbered above `after` shares a key with `lo..hi`.
    pub fn newer_overlapping(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>, after: u64) -> bool {
        if self.is_empty() {
            return false;
        }
        self.list
            .load()
            .iter()
            .any(|t| t.seq > after && t.overlaps(lo, hi))
    }

    /// Those numbered `<= snapshot`, copied.
    pub fn visible(&self, snapshot: u64) -> Vec<RangeTombstone> {
        if self.is_empty() {
            return Vec::new();
        }
        self.list
            .load()
            .iter()
            .filter(|t| t.seq <= snapshot)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(start: &[u8], end: Option<&[u8]>) -> RangeTombstone {
        RangeTombstone {
            start: start.into(),
            end: end.map(Box::from),
            seq: 1,
        }
    }

    #[test]
    fn a_tombstone_covers_its_start_and_not_its_end() {
        let r = t(b"b", Some(b"d"));
        assert!(!r.covers(b"a"));
        assert!(r.covers(b"b"));
        assert!(r.covers(b"c\xff"));
        assert!(!r.covers(b"d"));
        let open = t(b"b", None);
        assert!(open.covers(b"\xff\xff"));
        assert!(!open.covers(b"a\xff"));
    }

    #[test]
    fn overlaps_follows_the_bounds() {
        use Bound::*;
        let r = t(b"b", Some(b"d"));
        assert!(r.overlaps(Unbounded, Unbounded));
        assert!(r.overlaps(Included(b"c"), Unbounded));
        assert!(!r.overlaps(Included(b"d"), Unbounded));
        assert!(r.overlaps(Unbounded, Included(b"b")));
        assert!(!r.overlaps(Unbounded, Excluded(b"b")));
        assert!(!r.overlaps(Unbounded, Included(b"a")));
        assert!(r.overlaps(Excluded(b"c"), Excluded(b"z")));
        // Above "c\0" nothing is below "c\0".
        let tight = t(b"b", Some(b"c\0"));
        assert!(!tight.overlaps(Excluded(b"c"), Unbounded));
        assert!(tight.overlaps(Included(b"c"), Unbounded));
    }

    #[test]
    fn the_newest_visible_covering_tombstone_is_found() {
        let ts = RangeTombstones::default();
        assert!(ts.is_empty());
        assert_eq!(ts.covering(b"c", u64::MAX), None);
        ts.push(b"a", Some(b"m"), 5);
        ts.push(b"c", Some(b"e"), 9);
        assert!(!ts.is_empty());
        assert_eq!(ts.covering(b"c", u64::MAX), Some(9));
        assert_eq!(ts.covering(b"c", 8), Some(5));
        assert_eq!(ts.covering(b"c", 4), None);
        assert_eq!(ts.covering(b"z", u64::MAX), None);
        assert!(ts.newer_overlapping(Bound::Included(b"d"), Bound::Unbounded, 8));
        assert!(!ts.newer_overlapping(Bound::Included(b"f"), Bound::Unbounded, 8));
        assert_eq!(ts.visible(6).len(), 1);
        assert!(ts.bytes() > 0);
    }
}
