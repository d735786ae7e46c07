//! Idle sorting: when the active MemTable holds many writes that its
//! sorted view does not cover yet (`SORT_MIN`; the writers wake the
//! committer each time another `SORT_MIN` come) and few writes came for
//! `SORT_IDLE`, the committer sorts them into the view, as a scan would.
//! The first scan after a burst of writes then walks the view instead of
//! sorting first (a million writes: about 60 ms, a third of a full scan
//! from Python; docs/experiments/2026-12-06-idle-sort.md).
//!
//! Invariants: runs only on the committer's thread with nothing to
//! commit, never under the mailbox lock; sorts only a table that took
//! fewer than `SORT_IDLE_WRITES` writes during the wait (while writes
//! come fast, scans sort what they need, as before); the view it
//! publishes is the one a scan would publish, so readers cannot tell who
//! sorted it.

use std::sync::Arc;
use std::time::Duration;

use super::mailbox::MailboxGuard;
use crate::store::Store;

/// Unsorted entries below which the first scan sorts them itself (64 Ki
/// random udb keys sort in a few milliseconds).
pub(crate) const SORT_MIN: usize = 1 << 16;

/// How long the committer watches the active MemTable before it sorts
/// it...
pub(crate) const SORT_IDLE: Duration = Duration::from_millis(50);
/// ...if fewer writes than this came meanwhile (80 thousand a second): a
/// store written to steadily leaves its scans to sort, and one written
/// to only now and then gets its view sorted, after which the committer
/// waits as it did (the writers wake it every `SORT_MIN` entries).
const SORT_IDLE_WRITES: usize = 4096;

/// Whether the active MemTable has enough unsorted writes to sort them
/// when the store goes idle.
pub(crate) fn wanted(shared: &Store) -> bool {
    shared.writes.mems().active.unsorted() >= SORT_MIN
}

/// Waits up to `SORT_IDLE` for work (releasing `work`, which the caller
/// held); if none came and the active MemTable took fewer than
/// `SORT_IDLE_WRITES` writes meanwhile, sorts it.
pub(crate) fn wait_then_sort(shared: &Store, mut work: MailboxGuard<'_>) {
    let active = shared.writes.mems().active.clone();
    let before = active.len();
    let timed_out = work.wait_for(SORT_IDLE);
    drop(work);
    let idle = timed_out
        && active.len() < before + SORT_IDLE_WRITES
        && Arc::ptr_eq(&shared.writes.mems().active, &active);
    if idle {
        active.sort_view();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn an_idle_store_sorts_its_memtable_for_the_next_scan() {
        let dir = tempfile::tempdir().unwrap();
        let db =
            crate::Db::open(dir.path(), crate::Options::new().create_if_missing(true)).unwrap();
        let n = SORT_MIN as u64 + 100;
        for i in 0..n {
            db.put(format!("key{:08}", (i * 7919) % n), b"value")
                .unwrap();
        }
        let active = db.store().writes.mems().active.clone();
        // The committer sorts it once no write came for `SORT_IDLE`: give
        // a loaded machine time.
        let deadline = Instant::now() + Duration::from_secs(60);
        while active.unsorted() > 0 {
            assert!(Instant::now() < deadline, "never sorted");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(active.sorted_upto() as u64, n);
        // The view is the scan's: every key once, in order.
        let keys: Vec<Vec<u8>> = db.iter().map(|p| p.unwrap().0).collect();
        assert_eq!(keys.len() as u64, n);
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        // Writes after it are left for the scans while they keep coming.
        db.put(b"later", b"v").unwrap();
        assert_eq!(active.unsorted(), 1);
        db.close().unwrap();
    }
}
