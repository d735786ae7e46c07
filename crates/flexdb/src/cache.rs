//! The interval cache (§5.2): decoded intervals kept in memory under CLOCK
//! replacement, bounded in bytes.
//!
//! A cached interval is immutable (`IntervalData`): the committer replaces it
//! (write-through) with a new version instead of editing it in place, so a
//! reader holding an `Arc` keeps a consistent view. The sparse index stores a
//! [`CacheRef`] (slot + generation); a reference whose generation no longer
//! matches its slot has been evicted, so eviction never needs a back-pointer
//! into the index.
//!
//! Invariants: `used` is the sum of the charged sizes of the occupied slots;
//! after `insert` returns, `used <= capacity` unless the newest interval
//! alone exceeds it (then it is the only entry); generations only grow, so
//! a stale reference never matches a reused slot.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::interval::IntervalData;

/// A handle to a cache slot, valid while the slot's generation matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheRef {
    slot: u32,
    generation: u32,
}

impl CacheRef {
    /// The reference packed in a nonzero word (for an atomic field).
    pub fn pack(self) -> u64 {
        u64::from(self.slot) | (u64::from(self.generation) << 32)
    }

    /// The reference of a packed word; `None` for 0 (no reference).
    pub fn unpack(word: u64) -> Option<CacheRef> {
        (word != 0).then_some(CacheRef {
            slot: word as u32,
            generation: (word >> 32) as u32,
        })
    }
}

/// Referenced entries one eviction may pass over before it takes the next
/// cached entry whatever its reference bit.
const MAX_SECOND_CHANCES: usize = 64;

struct Slot {
    generation: u32,
    entry: Option<Arc<IntervalData>>,
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
    /// Lookups share it (reference bits are atomic); changes take it
    /// exclusively.
    inner: RwLock<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl IntervalCache {
    /// A cache holding at most about `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        IntervalCache {
            capacity,
            inner: RwLock::new(Inner {
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
    pub fn get(&self, r: Option<CacheRef>) -> Option<Arc<IntervalData>> {
        let found = r.and_then(|r| {
            let (inner, _) = crate::lock_wait::read_spinning(&self.inner);
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
    pub fn insert(&self, old: Option<CacheRef>, interval: Arc<IntervalData>) -> CacheRef {
        let charge = interval.charge();
        let mut inner = self.inner.write();
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
        // Generations start at 1 (a packed reference is never 0) and a slot
        // is retired rather than reused once its generation would wrap.
        s.generation += 1;
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
        Self::remove_locked(&mut self.inner.write(), r);
    }

    fn remove_locked(inner: &mut Inner, r: CacheRef) {
        let Some(s) = inner.slots.get_mut(r.slot as usize) else {
            return;
        };
        if s.generation != r.generation || s.entry.is_none() {
            return;
        }
        s.entry = None;
        let charge = std::mem::take(&mut s.charge);
        inner.used -= charge;
        if s.generation < u32::MAX - 1 {
            inner.free.push(r.slot);
        }
    }

    fn evict_one(inner: &mut Inner) {
        let n = inner.slots.len();
        // Plain CLOCK may sweep the whole cache to find an unreferenced
        // entry (right after the cache fills, every entry is referenced),
        // and it does so under the cache's write lock, which readers and the
        // committer need on every lookup. After `MAX_SECOND_CHANCES`
        // referenced entries the next cached one goes regardless, so one
        // eviction costs O(1). Two sweeps still bound the loop.
        let mut chances = 0;
        for _ in 0..2 * n + 1 {
            let i = inner.hand;
            inner.hand = (inner.hand + 1) % n;
            let s = &mut inner.slots[i];
            if s.entry.is_none() {
                continue;
            }
            if s.referenced.swap(false, Ordering::Relaxed) && chances < MAX_SECOND_CHANCES {
                chances += 1;
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
        self.inner.read().used
    }

    /// The configured capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Hits and lookups since creation.
    pub fn counts(&self) -> (u64, u64) {
        let h = self.hits.load(Ordering::Relaxed);
        (h, h + self.misses.load(Ordering::Relaxed))
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
    use crate::interval::Builder;

    fn interval(n: u8, value_len: usize) -> Arc<IntervalData> {
        let mut b = Builder::new();
        for i in 0..n {
            b.push_pair(&[i], &vec![i; value_len]);
        }
        Arc::new(b.finish())
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
    fn one_eviction_clears_a_bounded_number_of_reference_bits() {
        let one = interval(4, 100).charge();
        let cache = IntervalCache::new(one * 500);
        for _ in 0..500 {
            cache.insert(None, interval(4, 100));
        }
        // Every entry is referenced (inserted so); plain CLOCK would clear
        // all 500 bits before evicting.
        cache.insert(None, interval(4, 100));
        let inner = cache.inner.read();
        let cached = inner.slots.iter().filter(|s| s.entry.is_some()).count();
        let cleared = inner
            .slots
            .iter()
            .filter(|s| s.entry.is_some() && !s.referenced.load(Ordering::Relaxed))
            .count();
        assert_eq!(cached, 500);
        assert_eq!(cleared, MAX_SECOND_CHANCES);
    }

    #[test]
    fn replaced_and_removed_refs_go_stale() {
        let cache = IntervalCache::new(1 << 20);
        let a = cache.insert(None, interval(3, 1));
        let b = cache.insert(Some(a), interval(5, 1));
        assert!(cache.get(Some(a)).is_none());
        assert_eq!(cache.get(Some(b)).unwrap().len(), 5);
        cache.remove(b);
        assert!(cache.get(Some(b)).is_none());
        assert_eq!(cache.used(), 0);
        assert!(cache.hit_ratio() > 0.0 && cache.hit_ratio() < 1.0);
        // The slot is reused with a new generation.
        let c = cache.insert(None, interval(2, 1));
        assert_ne!(c, b);
        assert!(cache.get(Some(b)).is_none());
        assert_eq!(CacheRef::unpack(c.pack()), Some(c));
        assert_ne!(c.pack(), 0);
        assert_eq!(CacheRef::unpack(0), None);
    }
}
