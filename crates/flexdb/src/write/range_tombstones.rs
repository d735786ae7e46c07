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
//! list (range deletes are expected to be few beside point writes); a
//! lookup is a binary search and a short walk (`TombstoneList`).

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

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

/// Tombstones sorted by start, each with the index of the one reaching
/// furthest among it and those before it (`reach`), so that the ones
/// covering a key are found by a binary search and a walk back that stops
/// as soon as nothing before can reach the key: O(log n) for tombstones
/// that do not overlap (the common case), whatever their number.
/// Immutable once built.
#[derive(Clone, Debug, Default)]
pub(crate) struct TombstoneList {
    /// Shared with the lists it was copied from.
    items: Vec<Arc<RangeTombstone>>,
    reach: Vec<u32>,
}

/// Whether end `a` reaches further than end `b` (`None`: unbounded).
fn further(a: Option<&[u8]>, b: Option<&[u8]>) -> bool {
    match (a, b) {
        (None, Some(_)) => true,
        (Some(a), Some(b)) => a > b,
        _ => false,
    }
}

impl TombstoneList {
    /// The list of `items`, in any order.
    pub fn new(items: Vec<RangeTombstone>) -> TombstoneList {
        let mut items: Vec<Arc<RangeTombstone>> = items.into_iter().map(Arc::new).collect();
        items.sort_by(|a, b| a.start.cmp(&b.start));
        let mut list = TombstoneList {
            items,
            reach: Vec::new(),
        };
        list.reach_from(0);
        list
    }

    /// Recomputes `reach` from index `from` on.
    fn reach_from(&mut self, from: usize) {
        self.reach.truncate(from);
        for i in from..self.items.len() {
            let end = self.items[i].end.as_deref();
            let best = match self.reach.last() {
                Some(&r) if !further(end, self.items[r as usize].end.as_deref()) => r,
                _ => i as u32,
            };
            self.reach.push(best);
        }
    }

    /// The list with `t` added: a copy of the pointers, `t` put in place.
    fn with(&self, t: RangeTombstone) -> TombstoneList {
        let at = self.items.partition_point(|u| u.start <= t.start);
        let mut items = Vec::with_capacity(self.items.len() + 1);
        items.extend_from_slice(&self.items[..at]);
        items.push(Arc::new(t));
        items.extend_from_slice(&self.items[at..]);
        let mut list = TombstoneList {
            items,
            reach: self.reach[..at].to_vec(),
        };
        list.reach_from(at);
        list
    }

    /// How many it holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Every tombstone, by start.
    pub fn iter(&self) -> impl Iterator<Item = &RangeTombstone> {
        self.items.iter().map(|t| &**t)
    }

    /// Calls `f` on every tombstone covering `key` (only those starting at
    /// or before it can), latest start first, stopping as soon as none
    /// before can reach past `key`.
    fn each_reaching(&self, key: &[u8], mut f: impl FnMut(&RangeTombstone)) {
        let j = self.items.partition_point(|t| *t.start <= *key);
        for i in (0..j).rev() {
            let r = &self.items[self.reach[i] as usize];
            if r.end.as_deref().is_some_and(|e| e <= key) {
                // Nothing at or before `i` reaches past `key`.
                return;
            }
            let t = &self.items[i];
            if t.end.as_deref().is_none_or(|e| key < e) {
                f(t);
            }
        }
    }

    /// The newest sequence number `<= snapshot` of one covering `key`.
    pub fn covering(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        let mut best = None;
        self.each_reaching(key, |t| {
            if t.seq <= snapshot {
                best = best.max(Some(t.seq));
            }
        });
        best
    }

    /// Whether one numbered `<= snapshot` covers a key in `lo..=hi`
    /// (both included).
    pub fn any_within(&self, lo: &[u8], hi: &[u8], snapshot: u64) -> bool {
        // One covering `lo`, or one starting in `(lo, hi]`.
        if self.covering(lo, snapshot).is_some() {
            return true;
        }
        let from = self.items.partition_point(|t| *t.start <= *lo);
        self.items[from..]
            .iter()
            .take_while(|t| *t.start <= *hi)
            .any(|t| t.seq <= snapshot)
    }
}

/// The range deletes of one MemTable.
#[derive(Default)]
pub(crate) struct RangeTombstones {
    any: AtomicBool,
    list: ArcSwap<TombstoneList>,
    bytes: AtomicUsize,
}

impl RangeTombstones {
    /// Adds one (the writer, before `seq` is visible). Copies the list:
    /// range deletes are few beside point writes.
    pub fn push(&self, start: &[u8], end: Option<&[u8]>, seq: u64) {
        let t = RangeTombstone {
            start: start.into(),
            end: end.map(Box::from),
            seq,
        };
        self.bytes.fetch_add(t.bytes(), Ordering::Relaxed);
        let list = self.list.load().with(t);
        self.list.store(Arc::new(list));
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
    #[inline]
    pub fn covering(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        self.list.load().covering(key, snapshot)
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

    /// All of them (`None` when there are none).
    pub fn list(&self) -> Option<Arc<TombstoneList>> {
        (!self.is_empty()).then(|| self.list.load_full())
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

    /// `covering` and `any_within` agree with a linear search over random
    /// overlapping and disjoint tombstones.
    #[test]
    fn the_sorted_list_finds_what_a_linear_search_finds() {
        let mut x = 12345u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let k = |i: u64| format!("{i:04}").into_bytes();
        for round in 0..40 {
            let mut items = Vec::new();
            for seq in 1..=1 + next(30) {
                let a = next(200);
                let end = match next(10) {
                    0 => None,
                    _ if round % 2 == 0 => Some(a + 1 + next(60)),
                    _ => Some(a + 1 + next(3)),
                };
                items.push(RangeTombstone {
                    start: k(a).into(),
                    end: end.map(|e| k(e).into()),
                    seq,
                });
            }
            let list = TombstoneList::new(items.clone());
            // The same, added one at a time (`with`).
            let pushed = RangeTombstones::default();
            for t in &items {
                pushed.push(&t.start, t.end.as_deref(), t.seq);
            }
            for q in 0..210 {
                for snap in [0, 5, 15, u64::MAX] {
                    let key = k(q);
                    let want = items
                        .iter()
                        .filter(|t| t.seq <= snap && t.covers(&key))
                        .map(|t| t.seq)
                        .max();
                    assert_eq!(list.covering(&key, snap), want, "{q} at {snap}");
                    assert_eq!(pushed.covering(&key, snap), want, "{q} at {snap}");
                    let hi = k(q + next(20));
                    let want_within = items.iter().any(|t| {
                        t.seq <= snap && t.overlaps(Bound::Included(&key), Bound::Included(&hi))
                    });
                    assert_eq!(list.any_within(&key, &hi, snap), want_within);
                }
            }
        }
    }
}
