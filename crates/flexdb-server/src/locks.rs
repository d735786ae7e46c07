//! The server's key locks, which make each command atomic against the
//! others.
//!
//! The store's transactions cannot write a pair with a deadline, and most
//! Redis writes must keep or set one, so read-modify-write commands are
//! made atomic here instead: the server is the store's only writer (the
//! store is locked to one process), so a command holding the locks of the
//! keys it writes sees no other write of them until it is done.
//!
//! Invariants: every command holds the gate, shared, while it runs, and a
//! command that writes also holds the stripe of every key it writes,
//! taken in ascending stripe order (so two commands never wait on each
//! other in a cycle); a command that must see no other command run (EXEC,
//! FLUSHDB, FLUSHALL) holds the gate exclusively and no stripe; a lock is
//! never taken while one of the same kind is held by the same command.

use std::hash::{BuildHasher, Hasher};

use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// How many stripes keys hash to.
const STRIPES: usize = 1024;

/// The gate and the key stripes.
pub struct Locks {
    gate: RwLock<()>,
    stripes: Vec<Mutex<()>>,
    hasher: std::collections::hash_map::RandomState,
}

/// What a command holds while it runs.
pub enum Held<'a> {
    /// Nothing (commands run inside EXEC, under its exclusive gate).
    Nothing,
    /// The gate, shared, and the stripes of the keys written.
    Shared(RwLockReadGuard<'a, ()>, Vec<MutexGuard<'a, ()>>),
    /// The gate, exclusively.
    Exclusive(RwLockWriteGuard<'a, ()>),
}

impl Default for Locks {
    fn default() -> Self {
        Self::new()
    }
}

impl Locks {
    /// Locks with every stripe free.
    pub fn new() -> Self {
        Locks {
            gate: RwLock::new(()),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    fn stripe(&self, db: usize, key: &[u8]) -> usize {
        let mut h = self.hasher.build_hasher();
        h.write_usize(db);
        h.write(key);
        (h.finish() % STRIPES as u64) as usize
    }

    /// The gate, shared, and the stripes of `keys` (database, key).
    pub fn shared<'a, 'k>(&'a self, keys: impl Iterator<Item = (usize, &'k [u8])>) -> Held<'a> {
        let mut ids: Vec<usize> = keys.map(|(db, k)| self.stripe(db, k)).collect();
        ids.sort_unstable();
        ids.dedup();
        let gate = self.gate.read();
        let guards = ids.into_iter().map(|i| self.stripes[i].lock()).collect();
        Held::Shared(gate, guards)
    }

    /// The gate, exclusively.
    pub fn exclusive(&self) -> Held<'_> {
        Held::Exclusive(self.gate.write())
    }
}
