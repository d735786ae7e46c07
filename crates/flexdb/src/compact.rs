//! `Db::compact`: commit every MemTable, collect every segment's garbage
//! in the space, and give the freed disk space back.
//!
//! Order: flush (every write so far is in the space); the space compacts
//! in rounds on the caller's thread (the committer commits between them,
//! writers go on); the committer publishes a fresh view (the old one holds
//! the segments compaction emptied) and drops the old one once no reader
//! holds it; the freed segments are punched; spare logs are removed, the
//! active log's tail past its records punched and the MemTable pool
//! released, as an idle committer does. Invariant: no
//! step holds a lock of the store across I/O that writers or readers wait
//! for longer than one garbage-collection round.

use std::time::{Duration, Instant};

use crate::disk_usage;
use crate::error::{space_err, Result};
use crate::store::Store;

/// How long `compact` waits for readers of the replaced view to let go.
const VIEW_WAIT: Duration = Duration::from_secs(2);
/// How long one fresh view is given before another is published.
const REPUBLISH_AFTER: Duration = Duration::from_millis(50);

/// Progress of a compaction: live bytes relocated so far, out of those to
/// relocate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactProgress {
    /// Bytes relocated so far.
    pub done: u64,
    /// Bytes to relocate in all (fixed when the compaction starts).
    pub total: u64,
}

/// What a compaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Disk bytes of the store (every file's allocation) before.
    pub disk_bytes_before: u64,
    /// Disk bytes of the store after.
    pub disk_bytes_after: u64,
    /// Live bytes relocated.
    pub relocated_bytes: u64,
    /// Bytes of the data file given back to the file system.
    pub punched_bytes: u64,
    /// Bytes of emptied segments still held when compaction returned:
    /// readers of older views (a snapshot, an iterator) kept them past
    /// the wait for them (`VIEW_WAIT`, 2 s). They are freed, and given
    /// back, once those readers let go. Zero when nothing held on.
    pub held_bytes: u64,
}

/// See [`crate::Db::compact_with_progress`].
pub(crate) fn compact(
    shared: &Store,
    progress: &mut dyn FnMut(CompactProgress),
) -> Result<CompactReport> {
    shared.check_stopped()?;
    let usage =
        |s: &Store| disk_usage::measure(&*s.storage, s.space.stats().live_bytes).map(|u| u.total());
    let disk_bytes_before = usage(shared)?;
    // Every punch counts, the space's punching thread's too.
    let punched_before = shared.space.stats().punched_bytes;
    shared.flush()?;
    // The space does not wait for the readers of the segments it empties:
    // the store's current view is one, and only the republishing below
    // lets it go.
    let r = shared
        .space
        .compact_without_reader_wait(|done, total| progress(CompactProgress { done, total }))
        .map_err(space_err)?;
    let deadline = Instant::now() + VIEW_WAIT;
    // What this process's views hold (readers of other processes may hold
    // theirs for hours: not waited for).
    let waiting = |s: &Store| {
        let st = s.space.stats();
        st.reclaimable_segments - st.reader_held_segments
    };
    loop {
        // A fresh view lets go of the old one (the committer drops it once
        // no reader holds it, and the segments it held are free); readers
        // of older views may hold some longer, so this repeats until none
        // is left or the wait is over.
        shared.mailbox.republish()?;
        let republished = Instant::now();
        loop {
            shared.space.punch_free_segments().map_err(space_err)?;
            if waiting(shared) == 0
                || Instant::now() >= deadline
                || republished.elapsed() >= REPUBLISH_AFTER
            {
                break;
            }
            shared.mailbox.want_reap();
            std::thread::sleep(Duration::from_millis(5));
        }
        if waiting(shared) == 0 || Instant::now() >= deadline {
            break;
        }
    }
    let held = shared.space.stats().reclaimable_segments as u64 * flexspace::SEGMENT_SIZE;
    // A spare that cannot be removed holds nothing anyone needs; the next
    // open removes it.
    let _ = shared.spare_logs.remove_all(&*shared.storage);
    shared.chunks.release();
    // The active log's blocks past its records (best effort, likewise).
    let wal = shared.writes.lock().wal.clone();
    let _ = wal.trim_tail();
    shared.space.wait_punched();
    Ok(CompactReport {
        disk_bytes_before,
        disk_bytes_after: usage(shared)?,
        relocated_bytes: r.relocated_bytes,
        punched_bytes: shared.space.stats().punched_bytes - punched_before,
        held_bytes: held,
    })
}
