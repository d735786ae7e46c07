//! The committer's prefetcher: a thread at the lowest priority that walks
//! the same keys as the committer, a little ahead of it, and loads the
//! intervals they fall into into the cache.
//!
//! Invariants: it never runs more than `PREFETCH_AHEAD` updates ahead, nor
//! outlives the commit it follows (`done`); it holds the committer's index
//! shared only to find an interval and install what it read, never during
//! the read; what it loads is an ordinary cache entry, so being wrong or
//! late costs nothing but the read.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use super::newest_of;
use super::range_delete::Overrides;
use crate::store::Store;
use crate::write::FrozenMemTable;

/// Updates the prefetcher may run ahead of the committer...
const PREFETCH_AHEAD: usize = 4096;
/// ...and how far ahead of it a prefetcher that fell behind starts
/// loading again: the intervals in between are the committer's own.
const PREFETCH_LEAD: usize = 256;

/// Walks the same keys as the committer, a little ahead of it, and loads
/// each interval they fall into into the cache, so that the committer
/// (whose thread is the store's write bottleneck) finds them there instead
/// of reading the space itself. Uses what the other core has spare; a
/// prefetched interval is an ordinary cache entry, so being wrong or late
/// costs nothing but the read.
pub(super) fn prefetch(
    shared: &Store,
    batch: &[FrozenMemTable],
    overrides: &Overrides,
    progress: &AtomicUsize,
    done: &AtomicBool,
) {
    crate::threads::lowest_priority();
    // The next interval's anchor: keys below it fall into the interval
    // loaded last.
    let mut bound: Option<Vec<u8>> = None;
    // The committer's stream: without the versions range deletes override.
    let stream = newest_of(batch).filter(|e| !overrides.hides(e));
    for (n, e) in stream.enumerate() {
        while n > progress.load(Ordering::Acquire) + PREFETCH_AHEAD {
            if done.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        if done.load(Ordering::Acquire) {
            return;
        }
        // Behind the committer (the prefetcher runs at the lowest
        // priority, and the clients may have had both cores): what the
        // committer passed is committed, and what it is about to reach it
        // reads before a load here could finish, so skip to a lead.
        if n < progress.load(Ordering::Acquire) + PREFETCH_LEAD {
            continue;
        }
        if bound.as_deref().is_some_and(|b| e.key < b) {
            continue;
        }
        // Not `read_state`: the prefetcher's waits are not a reader's, and
        // it polls rather than parks, so the committer's unlock never has
        // to wake it. The read itself happens with the index released, so
        // the committer never waits for it.
        let fetched = shared.interval_of(
            e.key,
            || flexsys::lock_wait::read_polling(&shared.index),
            |st, f| bound = st.sparse.next_anchor(f),
        );
        if fetched.is_err() {
            return;
        }
        if bound.is_none() {
            // The last interval holds every key left.
            return;
        }
    }
}
