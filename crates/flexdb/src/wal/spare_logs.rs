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
//! The WAL's footprint: a spare is kept only while the log files, the
//! logs in use (the active one and the frozen ones) and the spares, number
//! at most `keep + 1` (with `keep` = `Options::max_frozen_memtables`: as
//! many logs as MemTables may exist at once). So the WAL holds at most
//! `max_frozen_memtables + 1` files of about `memtable_bytes` each, and
//! the log prepared ahead of a rotation (the committer retires logs under
//! the writer lock, so no rotation races the count), spares included; it
//! used to keep up to 3 spares beside 4 logs in use. A rotation
//! still finds a spare whenever a commit retired a log since the last
//! rotation: logs in use and spares together stay at the bound.
//!
//! Invariants: a spare holds only records committed to the space; at most
//! `keep` spares exist, and a log is kept as one only while spares and
//! logs in use number at most `keep + 1` with it; each name here is a file
//! of the directory that nothing else uses (the pool hands a name out
//! once).

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

    /// Whether one more spare may be kept beside `in_use` logs in use.
    pub fn has_room(&self, in_use: usize) -> bool {
        let spares = self.names.lock().len();
        spares < self.keep && spares + in_use <= self.keep
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

    /// Lets go of `wal`, the log of committed generation `gen`, with
    /// `in_use` logs still in use (the active one and the frozen ones):
    /// kept as a spare for a new log to take over (`spare_logs`) when it
    /// may be ([`Wal::reusable`]) and the files stay within the bound, or
    /// removed. A log that a crash leaves under either name holds nothing
    /// the next open replays (its generation is committed; a spare's name
    /// is a log's temporary one).
    pub fn retire(&self, storage: &dyn Storage, gen: u64, wal: &Wal, in_use: usize) -> Result<()> {
        let name = wal_name(gen);
        if wal.reusable() && self.has_room(in_use) {
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
        assert!(pool.has_room(0));
        assert!(pool.put("a".into()));
        assert!(pool.put("b".into()));
        assert!(!pool.has_room(0));
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

    #[test]
    fn spares_and_logs_in_use_stay_within_keep_plus_one() {
        let pool = SpareLogs::new(3);
        // The active log alone: room for 3 spares (4 files).
        assert!(pool.has_room(1));
        assert!(pool.put("a".into()));
        assert!(pool.put("b".into()));
        // Two spares and the active log: a third spare makes 4 files.
        assert!(pool.has_room(1));
        // Two spares, the active log and a frozen one: a third makes 5.
        assert!(!pool.has_room(2));
        assert!(!pool.has_room(3));
        assert!(pool.put("c".into()));
        // Never more than `keep` spares, whatever is in use.
        assert!(!pool.has_room(0));
    }

    #[test]
    fn retire_removes_a_log_beyond_the_bound_and_keeps_one_within() {
        let dir = tempfile::tempdir().unwrap();
        let storage = flexspace::FileStorage::open(dir.path(), true).unwrap();
        let pool = SpareLogs::new(3);
        let log = |gen: u64| {
            let file = storage.open_file(&wal_name(gen), true).unwrap();
            Wal::create(file, &wal_name(gen), None, gen * 100, 0).unwrap()
        };
        let files = || {
            let mut f: Vec<String> = storage
                .list_files()
                .unwrap()
                .into_iter()
                .filter(|n| crate::wal::log_files::is_wal_file(n))
                .collect();
            f.sort();
            f
        };
        // Two spares kept beside the active log and one frozen log...
        pool.retire(&storage, 1, &log(1), 2).unwrap();
        pool.retire(&storage, 2, &log(2), 2).unwrap();
        assert_eq!(pool.len(), 2);
        // ...and a third would make five files: removed.
        pool.retire(&storage, 3, &log(3), 2).unwrap();
        assert_eq!(pool.len(), 2);
        assert_eq!(files(), vec![wal_tmp_name(1), wal_tmp_name(2)]);
    }
}
