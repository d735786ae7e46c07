//! The read path: point reads (here), iterators (`iter`, `runs`, `walk_ahead`),
//! fetching an interval (`fetch`), and the view the committer publishes for
//! readers (`view`).
//!
//! Invariants: a reader takes no lock the committer holds for long and
//! writes no line other readers read; it loads the MemTables before the
//! view, so whatever it misses in the MemTables it saw is in its view or
//! in a MemTable it saw (see `view`); it reads at the snapshot `visible`
//! had when it began, and so sees whole batches.

pub(crate) mod doorkeeper;
mod fetch;
pub(crate) mod frequency;
pub(crate) mod iter;
pub(crate) mod row_cache;
mod runs;
pub(crate) mod snapshot;
pub(crate) mod view;
mod walk_ahead;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::clock::Now;
use crate::codec::check_stored_sizes;
use crate::error::Result;
use crate::index::interval_cache::CacheRef;
use crate::store::Store;
use crate::write::MemTables;

impl Store {
    /// The MemTables, for one read (never waits).
    fn read_mems(&self) -> arc_swap::Guard<Arc<MemTables>> {
        self.writes.mems()
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |v| v.map(<[u8]>::to_vec))
    }

    /// `read` applied to the value of `key` (`None`: absent, or expired),
    /// borrowed from the MemTable, the cached interval or the interval
    /// fetched for this read: no copy. `read` runs exactly once (an
    /// `FnMut` only so that a cache miss can still call it), while a
    /// cached interval's slot is held for reading (see `Db::get_with`).
    pub fn get_with<R>(&self, key: &[u8], mut read: impl FnMut(Option<&[u8]>) -> R) -> Result<R> {
        let now = Now::new(&self.clock);
        self.get_entry_with(key, |e| read(now.live(e)))
    }

    /// `read` applied to the newest version of `key` and its deadline (0:
    /// none), expired or not (as [`Store::get_with`] otherwise).
    pub fn get_entry_with<R>(
        &self,
        key: &[u8],
        mut read: impl FnMut(Option<(&[u8], u64)>) -> R,
    ) -> Result<R> {
        check_stored_sizes(key, None)?;
        let snapshot = self.writes.visible();
        // One hash of the key serves the MemTables, the row cache and the
        // interval's fingerprints.
        let hash = crc32c::crc32c(key);
        {
            let m = self.read_mems();
            if let Some(v) = m.active.get_ref_hashed(key, hash, snapshot) {
                return Ok(read(v));
            }
            for f in m.frozen.iter().rev() {
                if let Some(v) = f.mem.get_ref_hashed(key, hash, snapshot) {
                    return Ok(read(v));
                }
            }
        }
        // After the MemTables (see `view`'s invariants).
        let view = self.views.load();
        // A hot key's row, as this view's generation gave it (`row_cache`;
        // it never holds a pair with a deadline).
        if let Some(rows) = &self.rows {
            if let Some(out) = rows.get(key, hash, view.gen, &mut |v| read(v.map(|v| (v, 0)))) {
                return Ok(out);
            }
        }
        let offer = |entry: Option<(&[u8], u64)>| {
            if let Some(rows) = &self.rows {
                match entry {
                    None => rows.offer(key, hash, view.gen, None),
                    Some((v, 0)) => rows.offer(key, hash, view.gen, Some(v)),
                    Some(_) => {}
                }
            }
        };
        let f = view.sparse.find(key);
        let meta = view.sparse.meta(&f);
        if meta.size == 0 {
            return Ok(read(None));
        }
        // A hit reads the value under the slot's lock, without taking a
        // reference to the interval (whose count the threads reading a
        // hot interval would all write).
        let word = meta.cache.load(Ordering::Acquire);
        self.cache.prefetch_lookup(CacheRef::unpack(word));
        let door = frequency::interval_hash(f.offset);
        self.interval_freq.prefetch(door);
        let hit = self.cache.read_nowait(CacheRef::unpack(word), |d| {
            let entry = d.get_hashed(key, hash);
            offer(entry);
            read(entry)
        });
        if let Some(out) = hit {
            // Hits count as misses do: the sketch ranks the cached
            // intervals against the missed ones (hot ones saturate and
            // then write nothing).
            self.interval_freq.record(door);
            return Ok(out);
        }
        // An interval missed for the first time in a while is searched in
        // place, not cached: intervals read once do not push out the ones
        // read often (`doorkeeper`). Nor is one read no more often than the
        // entry it would push out (`frequency`).
        self.interval_freq.record(door);
        if !self.admits(door, meta.size as usize) {
            self.cache.note_miss();
            let out = self.get_in_place(&view, &f, key, &mut |e| {
                offer(e);
                read(e)
            })?;
            if let Some(out) = out {
                return Ok(out);
            }
        }
        let data = self.view_interval(&view, &f)?;
        let entry = data.get_hashed(key, hash);
        offer(entry);
        Ok(read(entry))
    }
}
