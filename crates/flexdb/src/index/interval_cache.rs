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
//! Locking: every slot has its own small lock over its (generation, entry),
//! written only for the instant an entry goes in or out, and the
//! bookkeeping (charges, free slots, the CLOCK hand) has one mutex, which
//! only inserts, removals and evictions take. A lookup locks one slot
//! shared and never touches the mutex, so lookups do not contend with
//! inserts elsewhere in the cache; readers that must not wait only *try*
//! the slot's lock ([`IntervalCache::get_nowait`]) and the mutex
//! ([`IntervalCache::try_insert`]). Slots live in chunks that are
//! allocated once and never move (a directory sized from the capacity),
//! so a lookup needs no lock to find its slot.
//!
//! A slot also keeps, in plain atomics, where its entry's header,
//! fingerprints, offsets and bytes lie: a scan about to visit an interval
//! asks for those lines without taking the slot's lock
//! ([`IntervalCache::prefetch_slot`], [`IntervalCache::prefetch_entry`]),
//! and so does a get before its lookup ([`IntervalCache::prefetch_lookup`]),
//! so that they load together. Those addresses are only ever
//! prefetched, never read through, so a stale one (the entry gone) only
//! wastes a prefetch.
//!
//! Invariants: `used` is the sum of the charges of the occupied slots; a
//! slot's content changes only under the bookkeeping mutex (so its holder
//! may read a generation and act on it);
//! after `insert` returns, `used <= capacity` unless the newest interval
//! alone exceeds it (then it is the only entry); generations only grow, so
//! a stale reference never matches a reused slot.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};

use crate::index::interval::IntervalData;
use flexsys::counter::StripedCounter;

/// A handle to a cache slot, valid while the slot's generation matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheRef {
    slot: u32,
    generation: u32,
}

/// A mark a packed word may carry beside its reference (its top bit, which
/// no generation reaches): a published view holds the word of content newer
/// than its snapshot (`ViewPublisher::forward`). `unpack` ignores it.
pub const FORWARDED: u64 = 1 << 63;

/// Generations stay below this, so that a packed word leaves `FORWARDED`
/// clear; a slot whose generation reaches it is retired.
const MAX_GENERATION: u32 = (FORWARDED >> 32) as u32 - 1;

impl CacheRef {
    /// The reference packed in a nonzero word (for an atomic field).
    pub fn pack(self) -> u64 {
        u64::from(self.slot) | (u64::from(self.generation) << 32)
    }

    /// The reference of a packed word, with or without the `FORWARDED`
    /// mark; `None` for 0 (no reference).
    pub fn unpack(word: u64) -> Option<CacheRef> {
        let word = word & !FORWARDED;
        (word != 0).then_some(CacheRef {
            slot: word as u32,
            generation: (word >> 32) as u32,
        })
    }

    /// Whether a packed word carries the `FORWARDED` mark.
    pub fn forwarded(word: u64) -> bool {
        word & FORWARDED != 0
    }
}

/// The most bytes of an entry's fingerprints, and of its offsets, that
/// [`IntervalCache::prefetch_lookup`] asks for (an interval of udb pairs
/// has about 70 and 140).
const LOOKUP_PREFETCH_BYTES: usize = 512;
/// Referenced entries one eviction may pass over before it takes the next
/// cached entry whatever its reference bit.
const MAX_SECOND_CHANCES: usize = 64;
/// Slots per chunk.
const CHUNK: usize = 4096;
/// The smallest charge of an entry: bounds the slots a capacity needs.
const MIN_CHARGE: usize = size_of::<IntervalData>() + 64;
/// At most this many chunks (the directory's size for a huge capacity).
const MAX_CHUNKS: usize = 1 << 20;

/// A slot's content, changed under its lock.
#[derive(Default)]
struct Content {
    generation: u32,
    entry: Option<Arc<IntervalData>>,
}

#[derive(Default)]
struct Slot {
    content: RwLock<Content>,
    referenced: AtomicBool,
    /// The admission hash of the entry's interval (`read::frequency`), 0
    /// when its inserter gave none.
    door: AtomicU64,
    /// Where the entry's lines lie, for prefetching only (module docs).
    hint: Hint,
}

/// The addresses and lengths of an entry's header, offsets and bytes,
/// written with the entry (under the slot's lock) and read without it.
#[derive(Default)]
struct Hint {
    header: AtomicUsize,
    offsets: AtomicUsize,
    offsets_len: AtomicUsize,
    bytes: AtomicUsize,
    bytes_len: AtomicUsize,
    fingerprints: AtomicUsize,
    fingerprints_len: AtomicUsize,
}

impl Hint {
    fn set(&self, d: &Arc<IntervalData>) {
        let [(o, ol), (b, bl)] = d.lines();
        self.header
            .store(Arc::as_ptr(d) as usize, Ordering::Relaxed);
        self.offsets.store(o as usize, Ordering::Relaxed);
        self.offsets_len.store(ol, Ordering::Relaxed);
        self.bytes.store(b as usize, Ordering::Relaxed);
        self.bytes_len.store(bl, Ordering::Relaxed);
        let (f, fl) = d.fingerprint_line();
        self.fingerprints.store(f as usize, Ordering::Relaxed);
        self.fingerprints_len.store(fl, Ordering::Relaxed);
    }

    /// Asks for the entry's header, with the reference counts just before
    /// it.
    fn prefetch_header(&self) {
        let counts = 2 * size_of::<usize>();
        flexsys::prefetch::at(
            (self.header.load(Ordering::Relaxed) as *const u8).wrapping_sub(counts),
            counts + size_of::<IntervalData>(),
        );
    }

    /// Asks for the entry's offsets.
    fn prefetch_offsets(&self) {
        flexsys::prefetch::at(
            self.offsets.load(Ordering::Relaxed) as *const u8,
            self.offsets_len.load(Ordering::Relaxed),
        );
    }
}

/// The bookkeeping of inserts, removals and evictions.
#[derive(Default)]
struct Book {
    /// Per slot in use so far: its entry's charge (0 when empty).
    charge: Vec<usize>,
    free: Vec<u32>,
    hand: usize,
    used: usize,
}

/// A CLOCK cache of decoded intervals, bounded in bytes.
pub struct IntervalCache {
    capacity: usize,
    chunks: Box<[OnceLock<Box<[Slot]>>]>,
    book: Mutex<Book>,
    hits: StripedCounter,
    misses: StripedCounter,
}

impl IntervalCache {
    /// A cache holding at most about `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        // Occupied slots are at most capacity / MIN_CHARGE + 1, and free
        // slots are reused first; a chunk of margin covers retired slots.
        let chunks = (capacity / MIN_CHARGE / CHUNK + 2).min(MAX_CHUNKS);
        IntervalCache {
            capacity,
            chunks: (0..chunks).map(|_| OnceLock::new()).collect(),
            book: Mutex::new(Book::default()),
            hits: Default::default(),
            misses: Default::default(),
        }
    }

    /// The slot `i`, if its chunk exists.
    fn slot(&self, i: u32) -> Option<&Slot> {
        let i = i as usize;
        self.chunks.get(i / CHUNK)?.get()?.get(i % CHUNK)
    }

    /// The slot `i`, making its chunk if need be (under `book`).
    fn slot_made(&self, i: usize) -> &Slot {
        let chunk =
            self.chunks[i / CHUNK].get_or_init(|| (0..CHUNK).map(|_| Slot::default()).collect());
        &chunk[i % CHUNK]
    }

    /// The interval behind `r`, if it is still cached. Counts a hit or miss.
    pub fn get(&self, r: Option<CacheRef>) -> Option<Arc<IntervalData>> {
        self.counted(self.with_entry(r, |slot| Some(slot.content.read()), Arc::clone))
    }

    /// [`IntervalCache::get`] for a reader that must not wait: `None` when
    /// the slot is being written this instant (its entry going in or
    /// out, and its writer possibly descheduled); the reader then reads
    /// the interval from the space. Counts a miss then.
    pub fn get_nowait(&self, r: Option<CacheRef>) -> Option<Arc<IntervalData>> {
        self.counted(self.with_entry(r, |slot| slot.content.try_read(), Arc::clone))
    }

    /// Applies `read` to the interval behind `r` if it is cached, under its
    /// slot's lock and without a reference to it, for a reader that must not
    /// wait (as [`IntervalCache::get_nowait`]). Counts a hit only: on `None`
    /// the caller falls back to `get_nowait`, which counts the miss.
    pub fn read_nowait<R>(
        &self,
        r: Option<CacheRef>,
        read: impl FnOnce(&IntervalData) -> R,
    ) -> Option<R> {
        let out = self.with_entry(r, |slot| slot.content.try_read(), |d| read(d))?;
        self.hits.add(1);
        Some(out)
    }

    /// Asks for the cache line of the slot behind `r`, for a walk about to
    /// look it up. A hint: reads nothing, never waits.
    pub fn prefetch_slot(&self, r: Option<CacheRef>) {
        if let Some(slot) = r.and_then(|r| self.slot(r.slot)) {
            flexsys::prefetch::at((slot as *const Slot).cast(), size_of::<Slot>());
        }
    }

    /// Asks for the lines of the entry last cached in `r`'s slot: its
    /// header, its offsets and up to `bytes` of its bytes, its first ones
    /// or, when `tail`, its last ones. Reads the slot's addresses without
    /// its lock (so it waits for the slot's line unless
    /// [`IntervalCache::prefetch_slot`] asked for it before), writes
    /// nothing, counts nothing.
    pub fn prefetch_entry(&self, r: Option<CacheRef>, bytes: usize, tail: bool) {
        let Some(slot) = r.and_then(|r| self.slot(r.slot)) else {
            return;
        };
        let h = &slot.hint;
        h.prefetch_header();
        h.prefetch_offsets();
        let len = h.bytes_len.load(Ordering::Relaxed);
        let take = len.min(bytes);
        let skip = if tail { len - take } else { 0 };
        flexsys::prefetch::at(
            (h.bytes.load(Ordering::Relaxed) as *const u8).wrapping_add(skip),
            take,
        );
    }

    /// Asks for the lines a point lookup in the entry behind `r` reads
    /// before the pair it finds: the header, the fingerprints and the
    /// offsets, so that they load together rather than one after another.
    /// Reads the slot's addresses without its lock (the lookup waits for
    /// the slot's line anyway), writes nothing, counts nothing.
    pub fn prefetch_lookup(&self, r: Option<CacheRef>) {
        let Some(slot) = r.and_then(|r| self.slot(r.slot)) else {
            return;
        };
        let h = &slot.hint;
        h.prefetch_header();
        // Bounded: an interval of many small pairs has long columns, of
        // which a lookup reads all fingerprints but one offset.
        for (at, len) in [
            (&h.fingerprints, &h.fingerprints_len),
            (&h.offsets, &h.offsets_len),
        ] {
            flexsys::prefetch::at(
                at.load(Ordering::Relaxed) as *const u8,
                len.load(Ordering::Relaxed).min(LOOKUP_PREFETCH_BYTES),
            );
        }
    }

    /// Applies `read` to the entry behind `r`, under the slot's lock as
    /// `lock` takes it (`None`: not taken), and marks the entry referenced.
    /// `None` when the entry is gone or the lock was not taken.
    fn with_entry<'a, G, R>(
        &'a self,
        r: Option<CacheRef>,
        lock: impl FnOnce(&'a Slot) -> Option<G>,
        read: impl FnOnce(&Arc<IntervalData>) -> R,
    ) -> Option<R>
    where
        G: std::ops::Deref<Target = Content>,
    {
        let r = r?;
        let slot = self.slot(r.slot)?;
        let content = lock(slot)?;
        if content.generation != r.generation {
            return None;
        }
        let out = read(content.entry.as_ref()?);
        drop(content);
        // Written only when clear: hot entries' lines stay shared.
        if !slot.referenced.load(Ordering::Relaxed) {
            slot.referenced.store(true, Ordering::Relaxed);
        }
        Some(out)
    }

    /// Counts a miss of a reader that searched the interval in place
    /// instead of caching it.
    pub fn note_miss(&self) {
        self.misses.add(1);
    }

    /// Counts `found` as a hit or a miss.
    fn counted<T>(&self, found: Option<T>) -> Option<T> {
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.add(1);
        found
    }

    /// Caches `interval`, replacing the one behind `old` (write-through), and
    /// returns its reference. Evicts by CLOCK until it fits.
    pub fn insert(&self, old: Option<CacheRef>, interval: Arc<IntervalData>) -> CacheRef {
        self.insert_booked(&mut self.book.lock(), old, interval, 0)
    }

    /// [`IntervalCache::insert`] (of a new interval) for a reader that must
    /// not wait: `None`, and nothing cached, when another insert, removal
    /// or eviction is under way. `door`: the interval's admission hash,
    /// kept with the entry for [`IntervalCache::admits`].
    pub fn try_insert(&self, interval: Arc<IntervalData>, door: u64) -> Option<CacheRef> {
        let mut book = self.book.try_lock()?;
        Some(self.insert_booked(&mut book, None, interval, door))
    }

    /// Whether a reader should cache an interval of about `charge` bytes:
    /// yes while the cache has room; when full, what `beats` says of the
    /// admission hash of the entry CLOCK would evict next (a hash of 0,
    /// an entry the committer cached: yes). Advances CLOCK to that entry
    /// (clearing reference bits on the way, as an eviction would), so an
    /// insert that follows evicts it first. No when another insert,
    /// removal or eviction is under way.
    pub fn admits(&self, charge: usize, beats: impl FnOnce(u64) -> bool) -> bool {
        let Some(mut book) = self.book.try_lock() else {
            return false;
        };
        if book.used + charge <= self.capacity {
            return true;
        }
        match self.next_victim(&mut book) {
            Some(i) => match self.slot(i as u32).map(|s| s.door.load(Ordering::Relaxed)) {
                Some(0) | None => true,
                Some(door) => beats(door),
            },
            None => true,
        }
    }

    fn insert_booked(
        &self,
        book: &mut Book,
        old: Option<CacheRef>,
        interval: Arc<IntervalData>,
        door: u64,
    ) -> CacheRef {
        let charge = interval.charge().max(1);
        if let Some(r) = old {
            self.remove_booked(book, r);
        }
        while book.used + charge > self.capacity && book.used > 0 {
            self.evict_one(book);
        }
        let slot = loop {
            if let Some(s) = book.free.pop() {
                break s as usize;
            }
            if book.charge.len() < self.chunks.len() * CHUNK {
                book.charge.push(0);
                break book.charge.len() - 1;
            }
            // Every slot is taken (only retired slots can bring this
            // about): evictions free some.
            self.evict_one(book);
        };
        let s = self.slot_made(slot);
        let generation = {
            let mut content = s.content.write();
            // Generations start at 1 (a packed reference is never 0) and a
            // slot is retired rather than reused once its generation would
            // wrap.
            content.generation += 1;
            s.hint.set(&interval);
            content.entry = Some(interval);
            content.generation
        };
        s.referenced.store(true, Ordering::Relaxed);
        s.door.store(door, Ordering::Relaxed);
        book.charge[slot] = charge;
        book.used += charge;
        CacheRef {
            slot: slot as u32,
            generation,
        }
    }

    /// Drops the interval behind `r` (when its interval is split, merged or
    /// removed).
    pub fn remove(&self, r: CacheRef) {
        self.remove_booked(&mut self.book.lock(), r);
    }

    /// [`IntervalCache::remove`] for a reader that must not wait: does
    /// nothing when another insert, removal or eviction is under way (the
    /// entry is then left to CLOCK).
    pub fn try_remove(&self, r: CacheRef) {
        if let Some(mut book) = self.book.try_lock() {
            self.remove_booked(&mut book, r);
        }
    }

    fn remove_booked(&self, book: &mut Book, r: CacheRef) {
        let i = r.slot as usize;
        let Some(&charge) = book.charge.get(i) else {
            return;
        };
        let Some(slot) = self.slot(r.slot).filter(|_| charge > 0) else {
            return;
        };
        let entry = {
            let mut content = slot.content.write();
            if content.generation != r.generation {
                return;
            }
            content.entry.take()
        };
        // Freed after the slot's lock is let go.
        drop(entry);
        book.charge[i] = 0;
        book.used -= charge;
        if r.generation < MAX_GENERATION {
            book.free.push(r.slot);
        }
    }

    fn evict_one(&self, book: &mut Book) {
        let Some(i) = self.next_victim(book) else {
            return;
        };
        book.hand = (i + 1) % book.charge.len();
        let Some(slot) = self.slot(i as u32) else {
            return;
        };
        // Stable: contents change only under `book`, which we hold.
        let generation = slot.content.read().generation;
        self.remove_booked(
            book,
            CacheRef {
                slot: i as u32,
                generation,
            },
        );
    }

    /// The slot CLOCK evicts next, the hand left on it: the first cached
    /// entry from the hand on whose reference bit is clear (clearing the
    /// bits it passes).
    fn next_victim(&self, book: &mut Book) -> Option<usize> {
        let n = book.charge.len();
        if n == 0 {
            return None;
        }
        // Plain CLOCK may sweep the whole cache to find an unreferenced
        // entry (right after the cache fills, every entry is referenced).
        // After `MAX_SECOND_CHANCES` referenced entries the next cached one
        // goes regardless, so one eviction costs O(1). Two sweeps still
        // bound the loop.
        let mut chances = 0;
        for _ in 0..2 * n + 1 {
            let i = book.hand;
            if book.charge[i] != 0 {
                if let Some(slot) = self.slot(i as u32) {
                    if !slot.referenced.swap(false, Ordering::Relaxed)
                        || chances >= MAX_SECOND_CHANCES
                    {
                        return Some(i);
                    }
                    chances += 1;
                }
            }
            book.hand = (i + 1) % n;
        }
        None
    }

    /// Bytes currently charged.
    pub fn used(&self) -> usize {
        self.book.lock().used
    }

    /// The configured capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Hits and lookups since creation.
    pub fn counts(&self) -> (u64, u64) {
        let h = self.hits.sum();
        (h, h + self.misses.sum())
    }

    /// Hits over lookups since creation (0 when there were none).
    pub fn hit_ratio(&self) -> f64 {
        let h = self.hits.sum() as f64;
        let m = self.misses.sum() as f64;
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
    use crate::index::interval::Builder;

    fn interval(n: u8, value_len: usize) -> Arc<IntervalData> {
        let mut b = Builder::new();
        for i in 0..n {
            b.push_pair(&[i], &vec![i; value_len]);
        }
        Arc::new(b.finish())
    }

    #[test]
    fn readers_do_not_wait_for_an_exclusive_holder() {
        let cache = IntervalCache::new(1 << 20);
        let a = cache.insert(None, interval(4, 100));
        assert!(cache.get_nowait(Some(a)).is_some());
        let b = cache
            .try_insert(interval(3, 10), 0)
            .expect("a free cache takes it");
        assert!(cache.get_nowait(Some(b)).is_some());
        // A slot being written: its lookup does not wait (the test would
        // hang if it did) but misses; other slots are unaffected.
        let slot_held = cache.slot(a.pack() as u32).unwrap().content.write();
        assert!(cache.get_nowait(Some(a)).is_none());
        assert!(cache.get_nowait(Some(b)).is_some());
        drop(slot_held);
        // An insert under way: a reader's insert caches nothing, lookups
        // go on.
        let book_held = cache.book.lock();
        assert!(cache.try_insert(interval(2, 10), 0).is_none());
        assert!(cache.get_nowait(Some(a)).is_some());
        drop(book_held);
        assert!(cache.get_nowait(Some(a)).is_some());
        assert_eq!(
            cache.used(),
            interval(4, 100).charge() + interval(3, 10).charge()
        );
    }

    /// Lookups race inserts, replacements, removals and evictions that reuse
    /// slots: a lookup finds the interval its reference was made for, or
    /// nothing, never another slot generation's.
    #[test]
    fn racing_lookups_never_see_another_generations_interval() {
        use std::sync::atomic::AtomicU64;
        // Room for a few dozen intervals, so slots are reused constantly.
        let cache = IntervalCache::new(interval(4, 100).charge() * 40);
        // Published (reference, expected length) words for the readers.
        let published: Vec<AtomicU64> = (0..64).map(|_| AtomicU64::new(0)).collect();
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for t in 0..2u64 {
                let (cache, published, stop) = (&cache, &published, &stop);
                scope.spawn(move || {
                    let (mut found, mut i) = (0u64, t);
                    while !stop.load(Ordering::Relaxed) {
                        i = i
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let w = published[(i >> 33) as usize % 64].load(Ordering::Acquire);
                        let (r, len) = (CacheRef::unpack(w & 0xFFFF_FFFF_FFFF), w >> 48);
                        let got = if i & 1 == 0 {
                            cache.get_nowait(r).map(|d| d.len())
                        } else {
                            cache.read_nowait(r, |d| d.len())
                        };
                        if let Some(n) = got {
                            assert_eq!(n as u64, len, "{r:?}");
                            found += 1;
                        }
                    }
                    assert!(found > 0);
                });
            }
            let mut refs: Vec<Option<CacheRef>> = vec![None; 64];
            for k in 0..200_000usize {
                let at = (k * 7919) % 64;
                // Lengths 1..=20 tell the intervals of a slot apart.
                let len = (k % 20 + 1) as u8;
                let r = match k % 5 {
                    0 => {
                        if let Some(r) = refs[at].take() {
                            cache.remove(r);
                        }
                        None
                    }
                    1 => Some(cache.insert(refs[at], interval(len, 100))),
                    _ => Some(cache.insert(None, interval(len, 100))),
                };
                refs[at] = r;
                let word = r.map_or(0, |r| {
                    assert!(r.pack() < 1 << 48);
                    r.pack() | (u64::from(len) << 48)
                });
                published[at].store(word, Ordering::Release);
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert!(cache.used() <= interval(4, 100).charge() * 40);
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

    /// A full cache asks about the entry CLOCK evicts next, and the insert
    /// that follows a yes evicts exactly that one.
    #[test]
    fn admission_asks_about_the_next_victim_and_evicts_it() {
        let one = interval(4, 100).charge();
        let cache = IntervalCache::new(one * 3);
        assert!(cache.admits(one, |_| false), "room: no question asked");
        let a = cache.try_insert(interval(4, 100), 11).unwrap();
        let b = cache.try_insert(interval(4, 100), 22).unwrap();
        let c = cache.try_insert(interval(4, 100), 33).unwrap();
        // Every entry was referenced when it went in: CLOCK clears a's and
        // b's and c's bits on its first sweep and stops at a.
        let mut asked = Vec::new();
        assert!(!cache.admits(one, |door| {
            asked.push(door);
            false
        }));
        assert_eq!(asked, [11]);
        // A get marks a referenced again, so the next question is b's.
        assert!(cache.get(Some(a)).is_some());
        assert!(cache.admits(one, |door| door == 22));
        let d = cache.try_insert(interval(4, 100), 44).unwrap();
        assert!(cache.get(Some(b)).is_none(), "b evicted");
        for r in [a, c, d] {
            assert!(cache.get(Some(r)).is_some());
        }
        // An entry the committer cached (no hash) is always given up.
        let cache = IntervalCache::new(one);
        cache.insert(None, interval(4, 100));
        assert!(cache.admits(one, |_| false));
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
        let book = cache.book.lock();
        let occupied = |i: &usize| book.charge[*i] > 0;
        let cached = (0..book.charge.len()).filter(occupied).count();
        let cleared = (0..book.charge.len())
            .filter(occupied)
            .filter(|&i| {
                !cache
                    .slot(i as u32)
                    .unwrap()
                    .referenced
                    .load(Ordering::Relaxed)
            })
            .count();
        assert_eq!(cached, 500);
        assert_eq!(cleared, MAX_SECOND_CHANCES);
    }

    #[test]
    fn prefetching_any_ref_changes_nothing() {
        let cache = IntervalCache::new(1 << 20);
        let a = cache.insert(None, interval(3, 1));
        let b = cache.insert(None, interval(4, 1));
        cache.remove(b);
        let far = CacheRef {
            slot: u32::MAX - 1,
            generation: 1,
        };
        // Live, removed (its addresses name freed memory), out of range,
        // none: hints only.
        for r in [Some(a), Some(b), Some(far), None] {
            cache.prefetch_slot(r);
            cache.prefetch_lookup(r);
            cache.prefetch_entry(r, 1 << 20, false);
            cache.prefetch_entry(r, 1 << 20, true);
        }
        assert_eq!(cache.get(Some(a)).unwrap().len(), 3);
        assert!(cache.get(Some(b)).is_none());
        assert!(cache.get(Some(far)).is_none());
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
        // The mark leaves the reference as it is.
        assert!(!CacheRef::forwarded(c.pack()));
        assert!(CacheRef::forwarded(c.pack() | FORWARDED));
        assert_eq!(CacheRef::unpack(c.pack() | FORWARDED), Some(c));
    }
}
