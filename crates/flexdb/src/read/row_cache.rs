//! The row cache (EvenDB §2.2): values of keys that gets read often, so a
//! get of a hot key that no MemTable holds takes one hash probe instead of
//! a descent of the sparse index and a search of the key's interval.
//! Zipfian gets over keys spread across the key space (little spatial
//! locality) hit it most; the interval cache still serves scans, and
//! every get it misses.
//!
//! Invariants:
//! - A row holds what a published view of generation `tag` gave for its
//!   key (a value, or none), as read by a get that found the key in no
//!   MemTable. It is served only to a get whose view has that same
//!   generation: a write to the key that such a get could miss is in a
//!   MemTable newer than the view's generation, which stays in the list
//!   until a view of a newer generation is published (`read::view`), and a
//!   get finds it there first. A row of an older generation is never
//!   served, only replaced.
//! - A set is one cache line: its ways' slots and, per way, a word naming
//!   the hash and generation of the row the way was last given (0: none).
//!   A get loads only a way whose word matches, so a miss costs one line
//!   and no slot load, and a hit one line and its row. The word is a filter, never trusted: a row is served only after
//!   its own hash, generation and key matched (a racing offer may have put
//!   another row in the way since).
//! - Readers write nothing shared but the striped hit counters: a slot is
//!   an atomically swapped, reference-counted row (`triomphe::ThinArc`:
//!   head, key and value in one allocation behind one thin pointer),
//!   loaded without a lock; a replaced row lives until its last reader
//!   drops it.
//! - A row is kept only after its key missed twice within one window of
//!   misses (`read::doorkeeper`), so keys read once do not push out hot
//!   ones; rows of more than `MAX_ROW` bytes are not kept.
//! - The slots and the rows' bytes stay within the budget: an insert that
//!   would pass it is dropped.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use arc_swap::ArcSwapAny;
use flexsys::counter::StripedCounter;
use triomphe::ThinArc;

use crate::read::doorkeeper::Doorkeeper;

/// Ways a key may occupy (the set its hash picks).
const WAYS: usize = 4;
/// The largest row kept (key and value bytes).
const MAX_ROW: usize = 1024;
/// Bytes a way (its slot and its word) and a row's fixed part take,
/// charged with the row.
const SLOT_BYTES: usize = 16;
const ROW_OVERHEAD: usize = 64;

/// A cached row's fixed part.
struct RowHead {
    tag: u64,
    hash: u32,
    /// The key's length (at most `MAX_ROW`).
    klen: u16,
    /// `false`: the key is absent.
    present: bool,
}

/// One cached row: its head, then the key, then the value, in one
/// allocation, so that a hit loads the line of its head and key instead
/// of a row and then, dependent on it, its bytes (a separately allocated
/// key and value cost a third of the probe's time in a Zipfian get:
/// `experiments/2026-12-07-row-in-one-allocation.md`).
type Row = ThinArc<RowHead, u8>;

/// One set: its ways' words and slots, in one cache line.
#[repr(align(64))]
#[derive(Default)]
struct Set {
    words: [AtomicU64; WAYS],
    slots: [ArcSwapAny<Option<Row>>; WAYS],
}

/// The word of a row of `hash` and generation `tag` (never 0).
fn word_of(hash: u32, tag: u64) -> u64 {
    (u64::from(hash) << 32 | (tag & 0xffff_ffff)) | 1 << 63
}

/// A fixed number of sets of `WAYS` slots.
pub(crate) struct RowCache {
    sets: Box<[Set]>,
    /// Bytes of the rows held (their charge).
    held: AtomicUsize,
    budget: usize,
    /// Keeps a row on its key's second miss.
    door: Doorkeeper,
    /// Gets served, and gets not served (for `Stats`).
    hits: StripedCounter,
    misses: StripedCounter,
}

impl RowCache {
    /// A cache of at most `budget` bytes; `None` when that holds no set.
    pub fn new(budget: usize) -> Option<RowCache> {
        // A quarter of the budget for the ways, so that rows (of about 200
        // bytes) fill about a quarter of them: a key seldom finds its set
        // full, and a hot row is seldom pushed out by a newcomer.
        let sets = budget / 4 / (WAYS * SLOT_BYTES);
        if sets == 0 {
            return None;
        }
        Some(RowCache {
            sets: (0..sets).map(|_| Set::default()).collect(),
            held: AtomicUsize::new(0),
            budget: budget - sets * WAYS * SLOT_BYTES,
            door: Doorkeeper::new(sets * WAYS),
            hits: StripedCounter::default(),
            misses: StripedCounter::default(),
        })
    }

    fn set_of(&self, hash: u32) -> &Set {
        &self.sets[(hash as usize) % self.sets.len()]
    }

    /// `read` applied to the row of `key` as a view of generation `tag`
    /// gave it (`Some(None)`: absent), or `None` when no such row is held.
    pub fn get<R>(
        &self,
        key: &[u8],
        hash: u32,
        tag: u64,
        read: &mut impl FnMut(Option<&[u8]>) -> R,
    ) -> Option<R> {
        let set = self.set_of(hash);
        let want = word_of(hash, tag);
        for (word, slot) in set.words.iter().zip(&set.slots) {
            if word.load(Ordering::Acquire) != want {
                continue;
            }
            let row = slot.load();
            let Some(row) = row.as_ref() else { continue };
            let (head, bytes) = (&row.header.header, &row.slice);
            let klen = usize::from(head.klen);
            if head.hash == hash && head.tag == tag && bytes.get(..klen) == Some(key) {
                self.hits.add(1);
                let value = head.present.then(|| &bytes[klen..]);
                return Some(read(value));
            }
        }
        self.misses.add(1);
        None
    }

    /// Offers the row of `key` as a view of generation `tag` gave it; kept
    /// if the key missed recently too and there is room.
    pub fn offer(&self, key: &[u8], hash: u32, tag: u64, value: Option<&[u8]>) {
        let len = key.len() + value.map_or(0, <[u8]>::len);
        if len > MAX_ROW || !self.door.admit(hash) {
            return;
        }
        let charge = len + ROW_OVERHEAD;
        let set = self.set_of(hash);
        let words = &set.words;
        // A way that is empty or holds an older generation's row, else the
        // one the hash's next bits pick.
        let low = tag & 0xffff_ffff;
        let way = words
            .iter()
            .position(|w| {
                let w = w.load(Ordering::Relaxed);
                w == 0 || w & 0xffff_ffff != low
            })
            .unwrap_or((hash as usize >> 24) % WAYS);
        let old = set.slots[way]
            .load()
            .as_ref()
            .map_or(0, |r| r.slice.len() + ROW_OVERHEAD);
        if self.held.load(Ordering::Relaxed) + charge > self.budget + old {
            return;
        }
        let present = value.is_some();
        let value = value.unwrap_or_default();
        let bytes = (0..len).map(|i| match key.get(i) {
            Some(&b) => b,
            None => value[i - key.len()],
        });
        let head = RowHead {
            tag,
            hash,
            // `len <= MAX_ROW` above.
            klen: key.len() as u16,
            present,
        };
        let row = ThinArc::from_header_and_iter(head, bytes);
        // Racing offers may both count: the charge is what the slot held
        // when swapped out. The word follows the row (a get checks the
        // row itself either way).
        let out = set.slots[way].swap(Some(row));
        words[way].store(word_of(hash, tag), Ordering::Release);
        let freed = out.as_ref().map_or(0, |r| r.slice.len() + ROW_OVERHEAD);
        self.held.fetch_add(charge, Ordering::Relaxed);
        self.held.fetch_sub(freed, Ordering::Relaxed);
    }

    /// Bytes the rows hold (their charge), for `Stats`.
    pub fn held_bytes(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Gets it served and gets it was asked, for `Stats`.
    pub fn hits_and_lookups(&self) -> (u64, u64) {
        let hits = self.hits.sum();
        (hits, hits + self.misses.sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn hash(key: &[u8]) -> u32 {
        crc32c::crc32c(key)
    }

    fn got(c: &RowCache, key: &[u8], tag: u64) -> Option<Option<Vec<u8>>> {
        c.get(key, hash(key), tag, &mut |v| v.map(<[u8]>::to_vec))
    }

    #[test]
    fn a_set_is_one_cache_line() {
        // A fat pointer in a slot would make it two, and a probe two misses.
        assert_eq!(size_of::<Set>(), 64);
    }

    #[test]
    fn a_row_is_kept_on_its_second_miss_and_served_only_to_its_generation() {
        let c = RowCache::new(1 << 20).unwrap();
        c.offer(b"k", hash(b"k"), 5, Some(b"v"));
        assert_eq!(got(&c, b"k", 5), None, "kept on the first miss");
        c.offer(b"k", hash(b"k"), 5, Some(b"v"));
        assert_eq!(got(&c, b"k", 5), Some(Some(b"v".to_vec())));
        assert_eq!(got(&c, b"k", 6), None, "another generation");
        assert_eq!(got(&c, b"other", 5), None);
        c.offer(b"gone", hash(b"gone"), 5, None);
        c.offer(b"gone", hash(b"gone"), 5, None);
        assert_eq!(got(&c, b"gone", 5), Some(None), "an absent key");
        // A newer generation's row replaces the old one.
        c.offer(b"k", hash(b"k"), 6, Some(b"w"));
        assert_eq!(got(&c, b"k", 6), Some(Some(b"w".to_vec())));
    }

    #[test]
    fn the_rows_stay_within_the_budget_and_big_rows_are_not_kept() {
        let budget = 64 << 10;
        let c = RowCache::new(budget).unwrap();
        for i in 0..20_000u32 {
            let k = format!("key{i}");
            for _ in 0..2 {
                c.offer(k.as_bytes(), hash(k.as_bytes()), 1, Some(&[7; 300]));
            }
            assert!(
                c.held_bytes() <= c.budget,
                "{} > {}",
                c.held_bytes(),
                c.budget
            );
        }
        assert!(c.held_bytes() > c.budget / 2, "{}", c.held_bytes());
        let big = vec![1u8; MAX_ROW];
        c.offer(b"big", hash(b"big"), 1, Some(&big));
        c.offer(b"big", hash(b"big"), 1, Some(&big));
        assert_eq!(got(&c, b"big", 1), None);
        assert!(RowCache::new(10).is_none());
    }

    #[test]
    fn rows_read_while_others_replace_them_are_whole() {
        let c = Arc::new(RowCache::new(16 << 10).unwrap());
        let keys: Vec<Vec<u8>> = (0..500u32).map(|i| format!("k{i}").into_bytes()).collect();
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (c, keys) = (&c, &keys);
                s.spawn(move || {
                    for round in 0..200u64 {
                        for k in keys {
                            let v = [k.len() as u8; 40];
                            c.offer(k, hash(k), round % 3 + t, Some(&v));
                            if let Some(Some(got)) = got(c, k, round % 3) {
                                assert_eq!(got, v.to_vec());
                            }
                        }
                    }
                });
            }
        });
    }
}
