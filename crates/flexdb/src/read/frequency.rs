//! A frequency sketch (TinyLFU's second stage): how often an interval was
//! read lately, so that the interval cache admits a missed interval only
//! when it was read more often than the entry it would push out. Under a
//! flat (uniform) access pattern over more intervals than the cache holds,
//! every admission only trades one entry for another equally likely to be
//! read; refusing it saves the parse, the allocation and the eviction,
//! and the reader searches the interval in place instead.
//!
//! Shape: a count-min sketch of 4-bit counters, 16 to a word and 16 per
//! cache entry; a hash picks one block of 8 words (a cache line) and four
//! counters in it. `record` adds one to each of the four (saturating at 15,
//! by compare-and-swap, written only when below 15, so the lines of hot
//! intervals stay shared between cores);
//! `estimate` is the least of the four. After about ten records per entry
//! (counted one in 8, by hash) every counter is halved, so the sketch
//! follows a changing pattern. The halving is spread over the sampled
//! records that follow, `HALVE_STEP` words each (with a 1 GiB cache the
//! sketch is 4 MiB, a pass no single read should wait for).
//!
//! Invariants: an estimate never falls below the records of a hash since
//! the last halving, halved (up to 15); collisions only raise it; lost
//! races only lower it by a record; while a halving pass runs, a block
//! not yet halved reads up to twice what it will. Estimates only steer
//! admission, never what a cache serves.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Every counter's lowest bit: `(w >> 1) & HALVE` halves 16 counters at once.
const HALVE: u64 = 0x7777_7777_7777_7777;

/// One record in `1 << SAMPLE_BITS` (by hash) counts towards the window,
/// so that readers do not all write one counter.
const SAMPLE_BITS: u32 = 3;

/// Words in a block (one cache line): a hash's four counters lie in one.
const BLOCK: usize = 8;

/// Words a sampled record halves while a halving pass runs (4 KiB: a
/// 4 MiB sketch is halved over 1,024 sampled records, about 8,192 reads).
const HALVE_STEP: usize = 512;

/// See the module docs.
pub(crate) struct FrequencySketch {
    words: Box<[AtomicU64]>,
    records: AtomicUsize,
    /// Sampled records between halvings.
    window: usize,
    /// The next word the running halving pass halves (`words.len()` or
    /// more: no pass running).
    halving: AtomicUsize,
}

impl FrequencySketch {
    /// A sketch for a cache of about `entries` entries: sixteen counters
    /// per entry, halved every ten records per entry (TinyLFU's sample
    /// size), as Caffeine sizes its sketch.
    pub fn new(entries: usize) -> FrequencySketch {
        let words = entries.max(BLOCK).next_power_of_two();
        FrequencySketch {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            records: AtomicUsize::new(0),
            window: (entries.max(16) * 10) >> SAMPLE_BITS,
            halving: AtomicUsize::new(usize::MAX),
        }
    }

    /// The four counters of `hash`: each a word of its block and a shift
    /// in it.
    fn counters(&self, hash: u64) -> [(&AtomicU64, u32); 4] {
        let block = (hash as usize) & (self.words.len() - 1) & !(BLOCK - 1);
        std::array::from_fn(|j| {
            let word = block + ((hash >> (24 + 3 * j)) as usize & (BLOCK - 1));
            let shift = ((hash >> (40 + 4 * j)) & 15) as u32 * 4;
            (&self.words[word], shift)
        })
    }

    /// Asks for the cache line of `hash`'s counters, for a `record` soon.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        let block = (hash as usize) & (self.words.len() - 1) & !(BLOCK - 1);
        flexsys::prefetch::at(self.words[block..].as_ptr().cast(), 64);
    }

    /// Notes one read of `hash`.
    pub fn record(&self, hash: u64) {
        for (word, s) in self.counters(hash) {
            let w = word.load(Ordering::Relaxed);
            // Saturated: nothing to write. A lost race drops this record.
            if (w >> s) & 15 < 15 {
                let _ =
                    word.compare_exchange(w, w + (1 << s), Ordering::Relaxed, Ordering::Relaxed);
            }
        }
        if hash >> (64 - SAMPLE_BITS) == 0 {
            if self.records.fetch_add(1, Ordering::Relaxed) % self.window == self.window - 1 {
                // A new pass (one still running starts over: its blocks
                // are halved once more).
                self.halving.store(0, Ordering::Relaxed);
            }
            self.halve_step();
        }
    }

    /// Halves the next `HALVE_STEP` words of the running pass, if one
    /// runs (a word halved while a record adds to it may lose the record).
    fn halve_step(&self) {
        if self.halving.load(Ordering::Relaxed) >= self.words.len() {
            return;
        }
        let from = self.halving.fetch_add(HALVE_STEP, Ordering::Relaxed);
        let to = from.saturating_add(HALVE_STEP).min(self.words.len());
        for word in self.words.get(from..to).unwrap_or_default() {
            let w = word.load(Ordering::Relaxed);
            word.store((w >> 1) & HALVE, Ordering::Relaxed);
        }
    }

    /// About how often `hash` was recorded lately (0 to 15).
    pub fn estimate(&self, hash: u64) -> u32 {
        self.counters(hash)
            .iter()
            .map(|&(word, s)| ((word.load(Ordering::Relaxed) >> s) & 15) as u32)
            .min()
            .unwrap_or(0)
    }
}

/// The sketch's hash of an interval at `offset` (nonzero: the cache takes 0
/// for an entry of unknown origin).
pub(crate) fn interval_hash(offset: u64) -> u64 {
    (offset ^ 0x5bd1_e995).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_saturate_and_halve_after_a_window() {
        let s = FrequencySketch::new(4096);
        let (hot, cold) = (interval_hash(4096), interval_hash(8192));
        for _ in 0..20 {
            s.record(hot);
        }
        s.record(cold);
        assert_eq!(s.estimate(hot), 15, "saturates at 15");
        assert!(s.estimate(cold) >= 1);
        assert!(s.estimate(hot) > s.estimate(cold));
        assert_eq!(s.estimate(interval_hash(1 << 40)), 0, "never recorded");
        // About ten records per entry (40960) later, every counter halves.
        let mut n = 0u64;
        while s.estimate(hot) == 15 {
            s.record(interval_hash(1 << 32 | n));
            n += 1;
            assert!(n < 80_000, "never halved");
        }
        assert!(n > 30_000, "halved after only {n} records");
        assert!(s.estimate(hot) <= 8, "halved: {}", s.estimate(hot));
    }

    #[test]
    fn a_halving_pass_is_spread_over_the_sampled_records_after_the_window() {
        let s = FrequencySketch::new(8192);
        let words = s.words.len();
        // Not sampled (a top bit set): in the first block and the last.
        let hot = |block: usize| 1 << 63 | 0xAB_CDEF << 24 | block as u64;
        let (first, last) = (hot(0), hot(words - BLOCK));
        for _ in 0..20 {
            s.record(first);
            s.record(last);
        }
        // Sampled records (top bits clear) in another block, until one
        // ends the window and starts a pass.
        let sampled = |n: u64| n << 24 | BLOCK as u64;
        let mut n = 0;
        while s.halving.load(Ordering::Relaxed) >= words {
            s.record(sampled(n));
            n += 1;
            assert!(n < 20_000, "the window never ended");
        }
        assert!(s.estimate(first) <= 8, "the first step halves block 0");
        assert_eq!(s.estimate(last), 15, "one step halved the whole sketch");
        for m in 1..words / HALVE_STEP {
            assert_eq!(s.estimate(last), 15, "halved early, after {m} steps");
            s.record(sampled(n + m as u64));
        }
        assert!(s.estimate(last) <= 8, "the pass never reached the end");
        assert!(
            s.estimate(first) >= 7,
            "halved twice: {}",
            s.estimate(first)
        );
        assert!(
            s.halving.load(Ordering::Relaxed) >= words,
            "the pass ran on"
        );
    }

    #[test]
    fn the_hash_is_never_zero() {
        for o in [0, 1, 4096, u64::MAX] {
            assert_ne!(interval_hash(o), 0);
        }
    }
}
