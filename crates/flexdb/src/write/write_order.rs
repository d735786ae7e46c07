//! A MemTable's write order: every entry in the order it was written, which
//! one writer appends to and any number of readers copy from, without a
//! lock on either side.
//!
//! The entries live in buckets of doubling size (the first holds
//! `1 << FIRST_BITS`, each next one twice the one before), so an append
//! never moves what is there and the positions a reader was told of stay
//! where they are. A bucket is allocated by the writer the first time it
//! is needed, once.
//!
//! Invariants: only positions below a count the writer published (with
//! `Release`, after `set`) are read, so their buckets exist and their slots
//! hold the entries written there; a slot is written once.

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

use crate::write::arena::{Entry, EntryPtr};

/// Slots of the first bucket: `1 << FIRST_BITS`.
const FIRST_BITS: u32 = 12;
/// Buckets: enough for every position a `usize` can name.
const BUCKETS: usize = (usize::BITS - FIRST_BITS) as usize;

/// The write order of one MemTable.
pub(crate) struct WriteOrder {
    buckets: [OnceLock<Box<[AtomicPtr<Entry>]>>; BUCKETS],
}

impl Default for WriteOrder {
    fn default() -> Self {
        WriteOrder {
            buckets: std::array::from_fn(|_| OnceLock::new()),
        }
    }
}

/// The bucket holding position `i`, and the slot in it.
fn locate(i: usize) -> (usize, usize) {
    let j = i + (1 << FIRST_BITS);
    let b = usize::BITS - 1 - j.leading_zeros() - FIRST_BITS;
    (b as usize, j - (1 << (b + FIRST_BITS)))
}

impl WriteOrder {
    /// Writes position `i` (the writer only, each position once, in
    /// order); readers may read it once the writer publishes a count above
    /// `i`.
    pub fn set(&self, i: usize, e: EntryPtr) {
        let (b, slot) = locate(i);
        let bucket = self.buckets[b].get_or_init(|| {
            (0..1usize << (b as u32 + FIRST_BITS))
                .map(|_| AtomicPtr::default())
                .collect()
        });
        bucket[slot].store(e.as_ptr(), Ordering::Relaxed);
    }

    /// The entries at positions `from..to`, all below a count the writer
    /// published (which the caller loaded with `Acquire`).
    pub fn copy(&self, from: usize, to: usize) -> Vec<EntryPtr> {
        let mut out = Vec::with_capacity(to.saturating_sub(from));
        let mut at = from;
        while at < to {
            let (b, slot) = locate(at);
            let Some(bucket) = self.buckets[b].get() else {
                // Not reached: a published position's bucket exists.
                debug_assert!(false, "position {at} copied before it was set");
                break;
            };
            let take = (to - at).min(bucket.len() - slot);
            out.extend(
                bucket[slot..slot + take]
                    .iter()
                    .filter_map(|p| EntryPtr::from_raw(p.load(Ordering::Relaxed))),
            );
            at += take;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_map_to_buckets_of_doubling_size_without_gaps() {
        let first = 1usize << FIRST_BITS;
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(first - 1), (0, first - 1));
        assert_eq!(locate(first), (1, 0));
        assert_eq!(locate(3 * first - 1), (1, 2 * first - 1));
        assert_eq!(locate(3 * first), (2, 0));
        // Consecutive positions fill each bucket in turn.
        let mut prev = locate(0);
        for i in 1..20 * first {
            let (b, s) = locate(i);
            assert!(
                (b == prev.0 && s == prev.1 + 1) || (b == prev.0 + 1 && s == 0),
                "{i}"
            );
            prev = (b, s);
        }
        let (b, s) = locate(usize::MAX - first);
        assert_eq!((b, s), (BUCKETS - 1, (1 << (usize::BITS - 1)) - 1));
    }

    #[test]
    fn copies_read_back_what_was_set_across_buckets() {
        let mut arena = crate::write::arena::Arena::new();
        let order = WriteOrder::default();
        let n = 5 * (1usize << FIRST_BITS) + 17;
        let entries: Vec<EntryPtr> = (0..n)
            .map(|i| arena.push(&(i as u64).to_be_bytes(), i as u64, None, None, 0))
            .collect();
        for (i, &e) in entries.iter().enumerate() {
            order.set(i, e);
        }
        assert_eq!(order.copy(0, n), entries);
        let first = 1 << FIRST_BITS;
        assert_eq!(
            order.copy(first - 3, 3 * first + 2),
            entries[first - 3..3 * first + 2]
        );
        assert!(order.copy(7, 7).is_empty());
    }
}
