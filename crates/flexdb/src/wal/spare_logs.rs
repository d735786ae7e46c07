//! Spare logs: the files of committed write-ahead logs, kept for new logs
//! to take over instead of creating files of their own.
//!
//! Why: a new log's pages are memory the kernel must find, zero and map as
//! the log fills (a page fault per page); a committed log's file still has
//! its pages in the page cache, and appending into them costs none of that.
//! docs/DESIGN.md, "Logs reused", has the measurements.
//!
//! A spare is named as a log being created (`log_files::wal_tmp_name` of the
//! generation it held), a name that promises no write to recover: a crash
//! leaves it for the next open to remove, like any such file. A log takes a
//! spare over by writing its own header (which names the lowest sequence
//! number its records carry, above every record the spare still holds:
//! see `wal::Wal::reuse`), syncing it, and renaming the spare to its name.
//!
//! Invariants: a spare holds only records committed to the space; at most
//! `keep` spares exist; each name here is a file of the directory that
//! nothing else uses (the pool hands a name out once).

use flexspace::Storage;
use parking_lot::Mutex;

use crate::error::{io_err, Result};
use crate::wal::log_files::{wal_name, wal_tmp_name};
use crate::wal::Wal;

/// The spare logs of a store.
pub(crate) struct SpareLogs {
    names: Mutex<Vec<String>>,
    keep: usize,
}

impl SpareLogs {
    /// A pool that keeps at most `keep` spares.
    pub fn new(keep: usize) -> Self {
        SpareLogs {
            names: Mutex::new(Vec::new()),
            keep,
        }
    }

    /// Whether one more spare may be kept.
    pub fn has_room(&self) -> bool {
        self.names.lock().len() < self.keep
    }

    /// Adds the spare named `name` (already renamed so); returns false,
    /// leaving it to the caller to remove, when the pool is full.
    pub fn put(&self, name: String) -> bool {
        let mut names = self.names.lock();
        if names.len() >= self.keep {
            return false;
        }
        names.push(name);
        true
    }

    /// A spare for a new log, if there is one; it is the caller's now.
    pub fn take(&self) -> Option<String> {
        self.names.lock().pop()
    }

    /// Every spare, for the caller to remove (the pool is left empty).
    pub fn take_all(&self) -> Vec<String> {
        std::mem::take(&mut *self.names.lock())
    }

    /// Spares kept.
    pub fn len(&self) -> usize {
        self.names.lock().len()
    }

    /// Lets go of `wal`, the log of committed generation `gen`: kept as a
    /// spare for a new log to take over (`spare_logs`) when it may be
    /// ([`Wal::reusable`]), or removed (also when enough are kept). A log
    /// that a crash leaves under either name holds nothing the next open
    /// replays (its generation is committed; a spare's name is a log's
    /// temporary one).
    pub fn retire(&self, storage: &dyn Storage, gen: u64, wal: &Wal) -> Result<()> {
        let name = wal_name(gen);
        if wal.reusable() && self.has_room() {
            let spare = wal_tmp_name(gen);
            match storage.rename(&name, &spare) {
                Ok(()) if self.put(spare.clone()) => return Ok(()),
                Ok(()) => return remove_log_file(storage, &spare),
                // Gone already (as the next open would also find).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(io_err(&name)(e)),
            }
        }
        remove_log_file(storage, &name)
    }

    /// Removes every spare log (an idle store, a closing one); tries each
    /// and reports the first failure.
    pub fn remove_all(&self, storage: &dyn Storage) -> Result<()> {
        let mut first_error = Ok(());
        for name in self.take_all() {
            let removed = remove_log_file(storage, &name);
            if first_error.is_ok() {
                first_error = removed;
            }
        }
        first_error
    }
}

fn remove_log_file(storage: &dyn Storage, name: &str) -> Result<()> {
    match storage.remove_file(name) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(name)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_at_most_its_limit_and_hands_each_spare_out_once() {
        let pool = SpareLogs::new(2);
        assert!(pool.has_room());
        assert!(pool.put("a".into()));
        assert!(pool.put("b".into()));
        assert!(!pool.has_room());
        assert!(!pool.put("c".into()));
        assert_eq!(pool.len(), 2);
        let first = pool.take().unwrap();
        let second = pool.take().unwrap();
        assert_ne!(first, second);
        assert_eq!(pool.take(), None);
        assert!(pool.put("d".into()));
        assert_eq!(pool.take_all(), vec!["d".to_string()]);
        assert_eq!(pool.len(), 0);
    }
}
