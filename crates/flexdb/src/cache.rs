//! The interval cache (§5.2): decoded intervals kept in memory under CLOCK
//! replacement, with 16-bit key fingerprints for point lookups.
//!
//! A cached interval is immutable: the committer replaces it (write-through)
//! with a new version instead of editing it in place, so a reader holding an
//! `Arc` keeps a consistent view. The sparse index stores a [`CacheRef`]
//! (slot + generation); a reference whose generation no longer matches its
//! slot has been evicted, so eviction never needs a back-pointer into the
//! index.
//!
//! Invariants: `used` is the sum of the charged sizes of the occupied slots;
//! after `insert` returns, `used <= capacity` unless the newest interval
//! alone exceeds it (then it is the only entry).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// A 16-bit fingerprint of a key.
pub fn fingerprint(key: &[u8]) -> u16 {
    let h = crc32c::crc32c(key);
    (h ^ (h >> 16)) as u16
}

/// A decoded key-value pair.
pub type Pair = (Box<[u8]>, Box<[u8]>);

/// The pairs of one interval, decoded and sorted by key.
#[derive(Debug, Default)]
pub struct CachedInterval {
    /// Keys and values in key order.
    pub pairs: Vec<Pair>,
    /// `fingerprints[i]` is `fingerprint(&pairs[i].0)`.
    pub fingerprints: Vec<u16>,
    /// Number of space extents the interval spanned when it was loaded.
    pub extents: usize,
}

impl CachedInterval {
    /// Builds an interval from sorted pairs.
    pub fn new(pairs: Vec<Pair>, extents: usize) -> Self {
        let fingerprints = pairs.iter().map(|(k, _)| fingerprint(k)).collect();
        CachedInterval {
            pairs,
            fingerprints,
            extents,
        }
    }

    /// The value of `key`, found by fingerprint then key comparison.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let fp = fingerprint(key);
        self.fingerprints
            .iter()
            .enumerate()
            .filter(|&(_, &f)| f == fp)
            .find(|&(i, _)| &*self.pairs[i].0 == key)
            .map(|(i, _)| &*self.pairs[i].1)
    }

    /// Index of the first pair whose key is `>= key` (binary search, for
    /// seeks).
    pub fn seek(&self, key: &[u8]) -> usize {
        self.pairs.partition_point(|(k, _)| &**k < key)
    }

    /// Bytes charged to the cache for this interval.
    pub fn charge(&self) -> usize {
        self.pairs
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2 * std::mem::size_of::<Box<[u8]>>() + 2)
            .sum::<usize>()
            + std::mem::size_of::<Self>()
    }
}

/// A handle to a cache slot, valid while the slot's generation matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheRef {
    slot: u32,
    generation: u32,
}

struct Slot {
    generation: u32,
    entry: Option<Arc<CachedInterval>>,
    charge: usize,
    referenced: AtomicBool,
}

struct Inner {
    slots: Vec<Slot>,
    free: Vec<u32>,
    hand: usize,
    used: usize,
}

/// A CLOCK cache of decoded intervals, bounded in bytes.
pub struct IntervalCache {
    capacity: usize,
    inner: Mutex<Inner>,
    hits: std::sync::atomic::AtomicU64,
    misses: std::sync::atomic::AtomicU64,
}

impl IntervalCache {
    /// A cache holding at most about `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        IntervalCache {
            capacity,
            inner: Mutex::new(Inner {
                slots: Vec::new(),
                free: Vec::new(),
                hand: 0,
                used: 0,
            }),
            hits: Default::default(),
            misses: Default::default(),
        }
    }

    /// The interval behind `r`, if it is still cached. Counts a hit or miss.
    pub fn get(&self, r: Option<CacheRef>) -> Option<Arc<CachedInterval>> {
        let found = r.and_then(|r| {
            let inner = self.inner.lock();
            let slot = inner.slots.get(r.slot as usize)?;
            if slot.generation != r.generation {
                return None;
            }
            slot.referenced.store(true, Ordering::Relaxed);
            slot.entry.clone()
        });
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Caches `interval`, replacing the one behind `old` (write-through), and
    /// returns its reference. Evicts by CLOCK until it fits.
    pub fn insert(&self, old: Option<CacheRef>, interval: Arc<CachedInterval>) -> CacheRef {
        let charge = interval.charge();
        let mut inner = self.inner.lock();
        if let Some(r) = old {
            Self::remove_locked(&mut inner, r);
        }
        while inner.used + charge > self.capacity && inner.used > 0 {
            Self::evict_one(&mut inner);
        }
        let slot = match inner.free.pop() {
            Some(s) => s,
            None => {
                inner.slots.push(Slot {
                    generation: 0,
                    entry: None,
                    charge: 0,
                    referenced: AtomicBool::new(false),
                });
                (inner.slots.len() - 1) as u32
            }
        };
        let s = &mut inner.slots[slot as usize];
        s.generation = s.generation.wrapping_add(1);
        s.entry = Some(interval);
        s.charge = charge;
        s.referenced.store(true, Ordering::Relaxed);
        let generation = s.generation;
        inner.used += charge;
        CacheRef { slot, generation }
    }

    /// Drops the interval behind `r` (when its interval is split, merged or
    /// removed).
    pub fn remove(&self, r: CacheRef) {
        Self::remove_locked(&mut self.inner.lock(), r);
    }

    fn remove_locked(inner: &mut Inner, r: CacheRef) {
        let Some(s) = inner.slots.get_mut(r.slot as usize) else {
            return;
        };
        if s.generation != r.generation || s.entry.is_none() {
            return;
        }
        s.entry = None;
        s.generation = s.generation.wrapping_add(1);
        let charge = std::mem::take(&mut s.charge);
        inner.used -= charge;
        inner.free.push(r.slot);
    }

    fn evict_one(inner: &mut Inner) {
        let n = inner.slots.len();
        // Two sweeps clear every reference bit, so a victim is always found.
        for _ in 0..2 * n + 1 {
            let i = inner.hand;
            inner.hand = (inner.hand + 1) % n;
            let s = &mut inner.slots[i];
            if s.entry.is_none() {
                continue;
            }
            if s.referenced.swap(false, Ordering::Relaxed) {
                continue;
            }
            let r = CacheRef {
                slot: i as u32,
                generation: s.generation,
            };
            Self::remove_locked(inner, r);
            return;
        }
    }

    /// Bytes currently charged.
    pub fn used(&self) -> usize {
        self.inner.lock().used
    }

    /// Hits over lookups since creation (0 when there were none).
    pub fn hit_ratio(&self) -> f64 {
        let h = self.hits.load(Ordering::Relaxed) as f64;
        let m = self.misses.load(Ordering::Relaxed) as f64;
        if h + m == 0.0 {
            0.0
        } else {
            h / (h + m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(n: u8, value_len: usize) -> Arc<CachedInterval> {
        let pairs = (0..n)
            .map(|i| {
                (
                    vec![i].into_boxed_slice(),
                    vec![i; value_len].into_boxed_slice(),
                )
            })
            .collect();
        Arc::new(CachedInterval::new(pairs, 1))
    }

    #[test]
    fn point_lookup_and_seek() {
        let c = interval(10, 3);
        assert_eq!(c.get(&[4]), Some(&[4u8, 4, 4][..]));
        assert_eq!(c.get(&[40]), None);
        assert_eq!(c.seek(&[4]), 4);
        assert_eq!(c.seek(&[4, 0]), 5);
        assert_eq!(c.seek(&[]), 0);
        assert_eq!(c.seek(&[200]), 10);
    }

    #[test]
    fn stays_within_capacity_and_evicts_unreferenced_first() {
        let one = interval(4, 100).charge();
        let cache = IntervalCache::new(one * 3);
        let a = cache.insert(None, interval(4, 100));
        let b = cache.insert(None, interval(4, 100));
        let c = cache.insert(None, interval(4, 100));
        assert!(cache.used() <= one * 3);
        // A fourth interval evicts exactly one of the first three.
        let d = cache.insert(None, interval(4, 100));
        assert!(cache.used() <= one * 3);
        let alive = [a, b, c, d]
            .iter()
            .filter(|r| cache.get(Some(**r)).is_some())
            .count();
        assert_eq!(alive, 3);
        assert!(cache.get(Some(d)).is_some());
    }

    #[test]
    fn replaced_and_removed_refs_go_stale() {
        let cache = IntervalCache::new(1 << 20);
        let a = cache.insert(None, interval(3, 1));
        let b = cache.insert(Some(a), interval(5, 1));
        assert!(cache.get(Some(a)).is_none());
        assert_eq!(cache.get(Some(b)).unwrap().pairs.len(), 5);
        cache.remove(b);
        assert!(cache.get(Some(b)).is_none());
        assert_eq!(cache.used(), 0);
        assert!(cache.hit_ratio() > 0.0 && cache.hit_ratio() < 1.0);
    }
}
