//! The read path: point reads (here), iterators (`iter`, `walk_ahead`),
//! fetching an interval (`fetch`), and the view the committer publishes for
//! readers (`view`).
//!
//! Invariants: a reader takes no lock the committer holds for long and
//! writes no line other readers read; it loads the MemTables before the
//! view, so whatever it misses in the MemTables it saw is in its view or
//! in a MemTable it saw (see `view`); it reads at the snapshot `visible`
//! had when it began, and so sees whole batches.

mod fetch;
pub(crate) mod iter;
pub(crate) mod snapshot;
pub(crate) mod view;
mod walk_ahead;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::codec::check_sizes;
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
        check_sizes(key, None)?;
        let snapshot = self.writes.visible();
        {
            let m = self.read_mems();
            if let Some(v) = m.active.get(key, snapshot) {
                return Ok(v.map(Vec::from));
            }
            for f in m.frozen.iter().rev() {
                if let Some(v) = f.mem.get(key, snapshot) {
                    return Ok(v.map(Vec::from));
                }
            }
        }
        // After the MemTables (see `view`'s invariants).
        let view = self.views.load();
        let f = view.sparse.find(key);
        let meta = view.sparse.meta(&f);
        if meta.size == 0 {
            return Ok(None);
        }
        // A hit copies the value out under the slot's lock, without taking
        // a reference to the interval (whose count the threads reading a
        // hot interval would all write).
        let word = meta.cache.load(Ordering::Acquire);
        let hit = self
            .cache
            .read_nowait(CacheRef::unpack(word), |d| d.get(key).map(<[u8]>::to_vec));
        if let Some(value) = hit {
            return Ok(value);
        }
        let data = self.view_interval(&view, &f)?;
        Ok(data.get(key).map(<[u8]>::to_vec))
    }
}
