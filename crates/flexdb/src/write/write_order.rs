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

use std::sync::atomic::Ordering;

#[cfg(loom)]
use loom_facade::{AtomicPtr, OnceLock};
#[cfg(not(loom))]
use std::sync::{atomic::AtomicPtr, OnceLock};

use crate::write::arena::{Entry, EntryPtr};

/// Slots of the first bucket: `1 << FIRST_BITS`.
#[cfg(not(loom))]
const FIRST_BITS: u32 = 12;
/// Under loom, buckets of two, four, ... slots, so that a few writes cross
/// buckets (and every slot is an atomic loom tracks).
#[cfg(loom)]
const FIRST_BITS: u32 = 1;
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

#[cfg(all(test, not(loom)))]
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
            .map(|i| arena.push(&(i as u64).to_be_bytes(), i as u64, None, 0, None, 0))
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

/// What loom sees of `std`'s `OnceLock` and `AtomicPtr`: loom's atomics,
/// and a `OnceLock` made of one (initialised once with a release, read with
/// an acquire, as `std`'s is), so that a model checks the writer's
/// publication of a bucket and of its slots.
#[cfg(loom)]
mod loom_facade {
    pub(super) use loom::sync::atomic::AtomicPtr;
    use std::sync::atomic::Ordering;

    pub(super) struct OnceLock<T> {
        ptr: AtomicPtr<T>,
    }

    impl<T> OnceLock<T> {
        pub fn new() -> Self {
            OnceLock {
                ptr: AtomicPtr::new(std::ptr::null_mut()),
            }
        }

        pub fn get(&self) -> Option<&T> {
            // SAFETY: a non-null pointer is a leaked box, freed only on drop.
            unsafe { self.ptr.load(Ordering::Acquire).as_ref() }
        }

        pub fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
            if let Some(v) = self.get() {
                return v;
            }
            let new = Box::into_raw(Box::new(f()));
            match self.ptr.compare_exchange(
                std::ptr::null_mut(),
                new,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                // SAFETY: `new` is now owned by the cell, freed on drop.
                Ok(_) => unsafe { &*new },
                Err(won) => {
                    // SAFETY: `new` was never shared; `won` is the cell's.
                    drop(unsafe { Box::from_raw(new) });
                    unsafe { &*won }
                }
            }
        }
    }

    impl<T> Drop for OnceLock<T> {
        fn drop(&mut self) {
            let p = self.ptr.with_mut(|p| *p);
            if !p.is_null() {
                // SAFETY: the cell's own box, no longer shared (`&mut self`).
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

/// Run with `RUSTFLAGS="--cfg loom" cargo test -p flexdb --lib --release
/// write_order`.
#[cfg(loom)]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;

    /// A distinct, never dereferenced entry pointer for position `i`.
    fn entry(i: usize) -> EntryPtr {
        EntryPtr::from_raw(std::ptr::without_provenance_mut::<Entry>((i + 1) * 64))
            .expect("non-null")
    }

    /// A reader that loads the published count with `Acquire` copies
    /// exactly the entries set below it, across buckets the writer
    /// allocates meanwhile, whatever the interleaving.
    #[test]
    fn write_order_a_reader_copies_every_published_position() {
        loom::model(|| {
            let order = Arc::new(WriteOrder::default());
            let len = Arc::new(AtomicUsize::new(0));
            let writer = {
                let (order, len) = (order.clone(), len.clone());
                loom::thread::spawn(move || {
                    // Positions 0-1 fill the first bucket; 2 starts the next.
                    for i in 0..3 {
                        order.set(i, entry(i));
                        len.store(i + 1, Ordering::Release);
                    }
                })
            };
            let n = len.load(Ordering::Acquire);
            let want: Vec<EntryPtr> = (0..n).map(entry).collect();
            assert_eq!(order.copy(0, n), want);
            writer.join().expect("the writer");
            assert_eq!(order.copy(0, 3), (0..3).map(entry).collect::<Vec<_>>());
        });
    }
}
