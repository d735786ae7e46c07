//! SCAN cursors: a cursor is a number naming the key a scan goes on from.
//!
//! Clients read cursors as unsigned 64-bit integers, and a key does not
//! fit in one, so the server keeps a bounded table from cursor number to
//! (database, next key). A scan resumes by seeking to that key in the
//! store as it is then: every key present for the whole scan is at or
//! after it, so each is returned at least once, whatever was written
//! meanwhile.
//!
//! Invariants: cursor 0 is the start and the end of a scan, never an
//! entry; numbers are never reused while the server runs; the table holds
//! at most `MAX_CURSORS` entries, dropping the oldest (a client resuming a
//! dropped cursor gets an error, never a wrong position).

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

/// The most cursors kept.
pub const MAX_CURSORS: usize = 100_000;

#[derive(Default)]
struct Table {
    next: u64,
    entries: HashMap<u64, (usize, Vec<u8>)>,
    order: VecDeque<u64>,
}

/// The table of live cursors.
#[derive(Default)]
pub struct Cursors {
    table: Mutex<Table>,
}

impl Cursors {
    /// A new cursor resuming database `db` at `key`.
    pub fn make(&self, db: usize, key: Vec<u8>) -> u64 {
        let mut t = self.table.lock();
        t.next += 1;
        let id = t.next;
        t.entries.insert(id, (db, key));
        t.order.push_back(id);
        while t.order.len() > MAX_CURSORS {
            if let Some(old) = t.order.pop_front() {
                t.entries.remove(&old);
            }
        }
        id
    }

    /// Where cursor `id` resumes database `db`: `None` for an unknown
    /// cursor or one of another database.
    pub fn resume(&self, db: usize, id: u64) -> Option<Vec<u8>> {
        let t = self.table.lock();
        match t.entries.get(&id) {
            Some((d, key)) if *d == db => Some(key.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_resume_and_age_out() {
        let c = Cursors::default();
        let a = c.make(0, b"k".to_vec());
        assert_eq!(c.resume(0, a), Some(b"k".to_vec()));
        assert_eq!(c.resume(1, a), None);
        for i in 0..MAX_CURSORS {
            c.make(0, i.to_string().into_bytes());
        }
        assert_eq!(c.resume(0, a), None);
    }
}
