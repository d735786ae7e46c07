//! Prefetching the cached intervals a scan is about to visit, in either
//! direction.
//!
//! A cached interval lies several dependent cache misses from its entry in
//! the sparse index: the cache slot, then the interval's header, offsets
//! and bytes, whose addresses the slot holds. A walk that meets them one
//! interval at a time waits for each miss in turn. [`WalkAhead`] asks for
//! the slots of the next few intervals at once, then, two steps ahead of
//! the walk, for each one's header, offsets and first bytes, so that the
//! misses of several intervals overlap. It asks at once, too, for each
//! interval's line of the frequency sketch, which the walk's fetch records
//! in (a miss there took 5 % of a Zipfian scan's time:
//! `experiments/2026-12-07-row-in-one-allocation.md`).
//!
//! Invariant: only hints. Nothing here changes what a walk reads or
//! returns; a stale reference (the interval evicted or replaced since)
//! only wastes a prefetch.

use std::sync::atomic::Ordering;

use crate::index::interval_cache::{CacheRef, IntervalCache};
use crate::index::sparse::{IntervalPos, SparseIndex, UNKNOWN_COUNT};
use crate::read::frequency::{interval_hash, FrequencySketch};

/// Intervals asked for at most.
const MAX: usize = 12;
/// Pairs assumed for an interval whose count is not known.
const ASSUMED_PAIRS: usize = 8;

/// The cache references of the intervals a walk starting at some interval
/// will visit next, in order (the first is the starting one).
pub(crate) struct WalkAhead {
    refs: [Option<CacheRef>; MAX],
    len: usize,
    /// The walk goes down: an interval is entered at its end.
    reverse: bool,
}

impl WalkAhead {
    /// Collects the intervals from `f` on (from `f` down, when `reverse`)
    /// until they hold about `pairs` pairs, asking for each one's cache
    /// slot and its line of `sketch`.
    pub(crate) fn new(
        sparse: &SparseIndex,
        f: &IntervalPos,
        pairs: usize,
        (cache, sketch): (&IntervalCache, &FrequencySketch),
        reverse: bool,
    ) -> WalkAhead {
        let mut w = WalkAhead {
            refs: [None; MAX],
            len: 0,
            reverse,
        };
        let (mut g, mut seen) = (*f, 0);
        loop {
            let meta = sparse.meta(&g);
            let r = CacheRef::unpack(meta.cache.load(Ordering::Relaxed));
            cache.prefetch_slot(r);
            sketch.prefetch(interval_hash(g.offset));
            w.refs[w.len] = r;
            w.len += 1;
            seen += match meta.count {
                UNKNOWN_COUNT => ASSUMED_PAIRS,
                n => usize::from(n),
            };
            if w.len == MAX || seen >= pairs {
                return w;
            }
            let step = if reverse {
                sparse.prev(&g)
            } else {
                sparse.next(&g)
            };
            match step {
                Some(n) => g = n,
                None => return w,
            }
        }
    }

    /// Called as the walk reaches its `k`-th interval (0: the first): asks
    /// for the header, offsets and up to `bytes` bytes (from the end the
    /// walk enters by) of the interval two steps ahead (and, at the start,
    /// of the next one), whose slots were asked for when the walk began.
    pub(crate) fn reached(&self, k: usize, cache: &IntervalCache, bytes: usize) {
        if k == 0 && self.len > 1 {
            cache.prefetch_entry(self.refs[1], bytes, self.reverse);
        }
        if k + 2 < self.len {
            cache.prefetch_entry(self.refs[k + 2], bytes, self.reverse);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::interval::Builder;
    use crate::index::sparse::{IntervalMeta, NewInterval};
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// An index of `n` intervals of `count` pairs each (anchors "", "k01",
    /// "k02", ...), every other one cached.
    fn index(n: usize, count: u16, cache: &IntervalCache) -> (SparseIndex, Vec<Option<CacheRef>>) {
        let mut refs = Vec::new();
        let intervals = (0..n)
            .map(|i| {
                let r = (i % 2 == 0).then(|| {
                    let mut b = Builder::new();
                    b.push_pair(format!("k{i:02}").as_bytes(), b"v");
                    cache.insert(None, Arc::new(b.finish()))
                });
                refs.push(r);
                NewInterval {
                    anchor: if i == 0 {
                        Vec::new()
                    } else {
                        format!("k{i:02}").into_bytes()
                    },
                    meta: IntervalMeta {
                        cache: AtomicU64::new(r.map_or(0, CacheRef::pack)),
                        size: 100,
                        count,
                        fragmented: false,
                    },
                }
            })
            .collect();
        (SparseIndex::build(intervals), refs)
    }

    #[test]
    fn collects_the_intervals_that_hold_the_pairs_asked_for() {
        let cache = IntervalCache::new(1 << 20);
        let sketch = FrequencySketch::new(64);
        let cache = (&cache, &sketch);
        let (sparse, refs) = index(30, 10, cache.0);
        let f = sparse.find(b"k03x");
        let w = WalkAhead::new(&sparse, &f, 35, cache, false);
        assert_eq!(w.len, 4);
        assert_eq!(&w.refs[..w.len], &refs[3..7]);
        // Backward: the same intervals from `f` down.
        let w = WalkAhead::new(&sparse, &f, 35, cache, true);
        let down: Vec<_> = refs[..=3].iter().rev().copied().collect();
        assert_eq!(&w.refs[..w.len], &down[..]);
        // Near either end: only what is left.
        let w = WalkAhead::new(&sparse, &sparse.find(b"k28"), 64, cache, false);
        assert_eq!(&w.refs[..w.len], &refs[28..30]);
        let w = WalkAhead::new(&sparse, &sparse.find(b"k01"), 64, cache, true);
        assert_eq!(&w.refs[..w.len], &[refs[1], refs[0]]);
        // Unknown counts are assumed, and the walk is bounded.
        let (sparse, refs) = index(30, UNKNOWN_COUNT, cache.0);
        let w = WalkAhead::new(&sparse, &sparse.find(b""), 20, cache, false);
        assert_eq!(&w.refs[..w.len], &refs[..3]);
        let w = WalkAhead::new(&sparse, &sparse.find(b""), 1 << 20, cache, false);
        assert_eq!(w.len, MAX);
        // Hints only: nothing counted, nothing changed, whatever the step.
        let cache = cache.0;
        let before = cache.counts();
        for k in 0..MAX + 3 {
            w.reached(k, cache, 4096);
        }
        let back = WalkAhead::new(
            &sparse,
            &sparse.find(b"k29"),
            1 << 20,
            (cache, &sketch),
            true,
        );
        assert_eq!(back.len, MAX);
        for k in 0..MAX + 3 {
            back.reached(k, cache, 16);
        }
        cache.remove(refs[2].unwrap());
        w.reached(1, cache, 4096);
        assert_eq!(cache.counts(), before);
        // Nor recorded in the sketch the walk asked lines of.
        let mut g = sparse.find(b"");
        loop {
            assert_eq!(sketch.estimate(interval_hash(g.offset)), 0);
            match sparse.next(&g) {
                Some(n) => g = n,
                None => break,
            }
        }
        assert_eq!(cache.get(refs[4]).map(|d| d.len()), Some(1));
        assert!(cache.get(refs[2]).is_none());
    }
}
