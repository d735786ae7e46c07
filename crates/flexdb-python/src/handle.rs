//! The open store shared by a `DB` and everything made from it
//! (keyspaces, iterators, snapshots, batches, transactions), and the one
//! locking rule that keeps the GIL and Rust locks from deadlocking.
//!
//! Invariants:
//! - `Handle::db` is `Some` from the open to `close()`, then `None` for
//!   good; every engine call runs under a read guard of it, so `close()`
//!   (the only writer) waits for calls in flight and no call reaches a
//!   closed engine: later calls raise `ClosedError`.
//! - Read guards are taken with `read_recursive`, which never waits for a
//!   queued writer: a thread holding the GIL only blocks on this lock
//!   while `close()` holds it, and `close()` runs with the GIL released,
//!   so it always finishes. `close()` first sets `closing`, after which
//!   no new read guard is taken, so readers that keep coming cannot
//!   starve it: it waits only for the calls already in flight.
//! - Every object that holds a piece of the engine (a keyspace, snapshot,
//!   transaction or iterator, each of which keeps the engine's store and
//!   so its directory lock alive) registers it here; `close()` drops them
//!   all after closing the engine, so the store can be opened again at
//!   once even while such Python objects live on. An object registered
//!   after `close()` began is dropped at once.
//! - A thread holding the GIL never blocks on a `Mutex` another thread
//!   may hold while it waits for the GIL: [`lock`] waits with the GIL
//!   released.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Weak;

use parking_lot::{MappedRwLockReadGuard, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use pyo3::prelude::*;

use crate::errors::{closed, OrPy};

/// An open store (or a closed one).
pub struct Handle {
    db: RwLock<Option<flexdb::Db>>,
    /// Set by `close()` before it waits for the write guard.
    closing: AtomicBool,
    /// The engine objects to drop at `close()`.
    owned: Mutex<Registry>,
    /// The store's directory, kept for `repr` after the close.
    pub path: PathBuf,
    /// Whether it was opened read-only.
    pub read_only: bool,
}

impl Handle {
    /// A handle of `db`.
    pub fn new(db: flexdb::Db) -> Handle {
        Handle {
            path: db.path().to_path_buf(),
            read_only: db.is_read_only(),
            db: RwLock::new(Some(db)),
            closing: AtomicBool::new(false),
            owned: Mutex::new(Registry::default()),
        }
    }

    /// The open store, or `ClosedError`. Never waits for a queued `close`.
    pub fn db(&self) -> PyResult<MappedRwLockReadGuard<'_, flexdb::Db>> {
        if self.closing.load(Ordering::Acquire) {
            return Err(closed("store"));
        }
        RwLockReadGuard::try_map(self.db.read_recursive(), Option::as_ref)
            .map_err(|_| closed("store"))
    }

    /// Whether `close()` ran.
    pub fn is_closed(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Closes the store: waits for the calls in flight, flushes and
    /// checkpoints it. Idempotent: a second close does nothing.
    pub fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            self.closing.store(true, Ordering::Release);
            let db = self.db.write().take();
            let closed = match db {
                Some(db) => db.close().py_err(),
                None => Ok(()),
            };
            let owned = std::mem::take(&mut self.owned.lock().items);
            for item in owned.iter().filter_map(Weak::upgrade) {
                item.release();
            }
            closed
        })
    }

    /// Registers `item` to be released at `close()` (at once if it began).
    pub fn register(&self, item: Weak<dyn Release>) {
        let mut reg = self.owned.lock();
        if self.closing.load(Ordering::Acquire) {
            drop(reg);
            if let Some(i) = item.upgrade() {
                i.release();
            }
            return;
        }
        if reg.items.len() >= reg.prune_at {
            reg.items.retain(|w| w.strong_count() > 0);
            reg.prune_at = (reg.items.len() * 2).max(64);
        }
        reg.items.push(item);
    }
}

/// Something holding engine state that `close()` must drop.
pub trait Release: Send + Sync {
    /// Drops the engine state; later use raises `ClosedError`.
    fn release(&self);
}

impl<T: Send> Release for Mutex<Option<T>> {
    fn release(&self) {
        // Taken out first, dropped after the guard.
        let taken = self.lock().take();
        drop(taken);
    }
}

impl<T: Send + Sync> Release for RwLock<Option<T>> {
    fn release(&self) {
        let taken = self.write().take();
        drop(taken);
    }
}

/// The weak references of what to release, pruned of dead ones as it
/// grows.
struct Registry {
    items: Vec<Weak<dyn Release>>,
    prune_at: usize,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            items: Vec::new(),
            prune_at: 64,
        }
    }
}

/// Locks `m`, waiting (if another thread holds it) with the GIL released,
/// so that a holder waiting for the GIL can finish.
pub fn lock<'a, T>(py: Python<'_>, m: &'a Mutex<T>) -> MutexGuard<'a, T>
where
    T: Send,
{
    loop {
        if let Some(g) = m.try_lock() {
            return g;
        }
        py.detach(|| drop(m.lock()));
    }
}
