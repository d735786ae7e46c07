//! WATCH: which clients watch which keys, and marking them when a watched
//! key is written (as Redis does).
//!
//! Invariants: every write of a key through the server marks every client
//! watching it in that database before the writing command releases its
//! locks, so an EXEC (which holds the gate exclusively) sees every mark of
//! a write that completed before it; a client's registrations are removed
//! when it unwatches, execs, discards or disconnects.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// A client's mark: set when a key it watches is written.
pub type Dirty = Arc<AtomicBool>;

/// The clients watching one key: (client id, its mark).
type Watchers = Vec<(u64, Dirty)>;

/// The watched keys of every database.
#[derive(Default)]
pub struct Watches {
    keys: Mutex<HashMap<(usize, Vec<u8>), Watchers>>,
    /// How many (key, client) registrations there are: writes skip the
    /// map while it is 0.
    count: AtomicUsize,
}

impl Watches {
    /// Client `id` watches `key` of database `db`.
    pub fn watch(&self, db: usize, key: &[u8], id: u64, dirty: &Dirty) {
        let mut keys = self.keys.lock();
        let list = keys.entry((db, key.to_vec())).or_default();
        if !list.iter().any(|(c, _)| *c == id) {
            list.push((id, dirty.clone()));
            self.count.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Removes client `id`'s registrations of `keys`.
    pub fn unwatch(&self, id: u64, keys: &[(usize, Vec<u8>)]) {
        if keys.is_empty() {
            return;
        }
        let mut map = self.keys.lock();
        for k in keys {
            if let Some(list) = map.get_mut(k) {
                let before = list.len();
                list.retain(|(c, _)| *c != id);
                self.count.fetch_sub(before - list.len(), Ordering::SeqCst);
                if list.is_empty() {
                    map.remove(k);
                }
            }
        }
    }

    /// Marks the watchers of `key` in `db`.
    pub fn touch(&self, db: usize, key: &[u8]) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        if let Some(list) = self.keys.lock().get(&(db, key.to_vec())) {
            for (_, d) in list {
                d.store(true, Ordering::SeqCst);
            }
        }
    }

    /// Marks the watchers of every key of `db` (every database for
    /// `None`) that `within` accepts.
    pub fn touch_where(&self, db: Option<usize>, within: impl Fn(&[u8]) -> bool) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        for ((d, k), list) in self.keys.lock().iter() {
            if db.is_none_or(|db| db == *d) && within(k) {
                for (_, dirty) in list {
                    dirty.store(true, Ordering::SeqCst);
                }
            }
        }
    }
}
