//! Giving disk space back: punching free segments out of the data file,
//! and `compact` (collect every segment's garbage, checkpoint, punch).
//!
//! Invariants:
//! - Only free segments are punched, and a free segment holds nothing the
//!   newest checkpoint plus the log's committed batches reference: it
//!   became free only after the commit that emptied it was durable (and
//!   the readers' grace period ended), and a checkpoint only ever records
//!   a state at or after that commit. So a crash before, during or after a
//!   punch recovers the same state, whether the punch reached the disk or
//!   not; the data file is never read at recovery.
//! - A punch runs with no lock held; the segment being punched is neither
//!   allocated nor counted as free room meanwhile (see `segments`), and at
//!   least one other free segment stays allocatable.
//! - The file is never truncated: readers map it, and a mapped page past
//!   the end would fault, while a punched page reads as zeros.
//! - `compact` holds `maint` one round at a time (like `maintain`), so
//!   commits and mutations interleave with it; a round holds the gate for
//!   at most four segments' worth of copying.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::{io, Result};
use crate::maintenance::gc::Goal;
use crate::open::DATA;
use crate::options::SEGMENT_SIZE;
use crate::space::SpaceInner;
use crate::storage::StorageFile;

/// How long `compact` waits for readers to release emptied segments.
const COMPACT_GRACE_WAIT: Duration = Duration::from_secs(2);

/// Whether `compact` waits for the readers of the segments it emptied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReaderWait {
    /// Up to [`COMPACT_GRACE_WAIT`].
    Brief,
    /// Not at all: the caller holds the readers and releases them after.
    None,
}

/// The thread that punches free segments (`SpaceInner::punch_soon`).
/// `running` is cleared by the thread itself, under the lock, when it
/// finds `again` unset: a request made while it runs is never lost.
#[derive(Default)]
pub(crate) struct PunchThread {
    handle: Option<std::thread::JoinHandle<()>>,
    running: bool,
    again: bool,
}

/// What [`crate::FlexSpace::compact`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Live bytes relocated.
    pub relocated_bytes: u64,
    /// Allocated bytes of the data file before.
    pub data_allocated_before: u64,
    /// Allocated bytes of the data file after.
    pub data_allocated_after: u64,
    /// Bytes the punches gave back to the file system.
    pub punched_bytes: u64,
}

impl SpaceInner {
    /// Has a thread punch every free segment that may still hold blocks
    /// (commits and released views call this), or the running one go on
    /// once more: 2.5 ms of `fallocate` a segment on ext4, 0.5 s for the
    /// 190 segments one garbage collection frees at 10 M pairs, which held
    /// up the committer (and so the writers) when they were punched on its
    /// thread, four a commit, and left hundreds of MiB allocated at the end
    /// of a phase. Nothing to punch costs a read lock. A thread that cannot
    /// be started leaves the segments to the next call.
    pub(crate) fn punch_soon(&self) {
        {
            let st = self.state.read();
            if st.seg.unpunched_count() == 0 || st.closed || st.poisoned {
                return;
            }
        }
        let mut slot = self.punch_thread.lock();
        if slot.running {
            slot.again = true;
            return;
        }
        if let Some(done) = slot.handle.take() {
            // It decided to stop (under this lock) and is exiting.
            let _ = done.join();
        }
        let Some(space) = self.this.upgrade() else {
            return;
        };
        let h = std::thread::Builder::new()
            .name("flexspace-punch".into())
            .spawn(move || loop {
                let _ = space.punch_free_segments(usize::MAX);
                let mut slot = space.punch_thread.lock();
                if !slot.again {
                    slot.running = false;
                    return;
                }
                slot.again = false;
            });
        if let Ok(h) = h {
            slot.handle = Some(h);
            slot.running = true;
        }
    }

    /// Waits for the punching thread (close, drop, and an explicit punch,
    /// which would otherwise find the thread's segment in a punch and stop).
    pub(crate) fn join_punch_thread(&self) {
        let h = self.punch_thread.lock().handle.take();
        if let Some(h) = h {
            let _ = h.join();
        }
    }

    /// Punches up to `max` free segments that may still hold blocks, one at
    /// a time, each with no lock held; returns the bytes given back. A
    /// failed punch is not retried (the segment stays usable).
    pub(crate) fn punch_free_segments(&self, max: usize) -> Result<u64> {
        let mut freed = 0u64;
        for _ in 0..max {
            let s = {
                let mut st = self.state.write();
                if st.poisoned || st.closed {
                    break;
                }
                match st.seg.start_punch() {
                    Some(s) => s,
                    None => break,
                }
            };
            let r = self
                .files
                .data
                .punch_hole(u64::from(s) * SEGMENT_SIZE, SEGMENT_SIZE);
            self.state.write().seg.end_punch(s);
            let n = r.map_err(io(DATA))?;
            freed += n;
            self.counters.punched.fetch_add(n, Ordering::Relaxed);
        }
        Ok(freed)
    }

    /// See [`crate::FlexSpace::compact`]; `reader_wait`: how long to wait
    /// for readers of emptied segments ([`COMPACT_GRACE_WAIT`], or zero
    /// for [`crate::FlexSpace::compact_without_reader_wait`]).
    pub(crate) fn compact(
        &self,
        progress: &mut dyn FnMut(u64, u64),
        reader_wait: ReaderWait,
    ) -> Result<CompactReport> {
        self.check_usable()?;
        let data_allocated_before = self.files.data.allocated_bytes().map_err(io(DATA))?;
        let punched_before = self.counters.punched.load(Ordering::Relaxed);
        {
            let mut m = self.maint.lock();
            self.commit_locked(&mut m)?;
        }
        // The work: every segment holding data that is not full, as of now
        // (later writes are not chased; each round takes at least one).
        let (victims, total) = {
            let st = self.state.read();
            let v: Vec<u64> = st
                .seg
                .gc_candidates()
                .into_iter()
                .map(|s| st.seg.valid(s))
                .filter(|&v| v < SEGMENT_SIZE)
                .collect();
            (v.len(), v.iter().sum::<u64>())
        };
        progress(0, total);
        let mut done = 0u64;
        for _ in 0..victims {
            let moved = {
                let mut m = self.maint.lock();
                if self.state.read().closed {
                    break;
                }
                self.gc_round(&mut m, Goal::Compact)?
            };
            let Some(moved) = moved else { break };
            done = (done + moved).min(total);
            progress(done, total);
            if done >= total {
                break;
            }
        }
        {
            let mut m = self.maint.lock();
            self.checkpoint_locked(&mut m)?;
        }
        self.settle_freed(match reader_wait {
            ReaderWait::Brief => COMPACT_GRACE_WAIT,
            ReaderWait::None => Duration::ZERO,
        })?;
        // The punching thread gives back what the rounds' commits freed;
        // the rest is punched here. The report counts both.
        self.join_punch_thread();
        self.punch_free_segments(usize::MAX)?;
        let punched_bytes = self.counters.punched.load(Ordering::Relaxed) - punched_before;
        progress(total, total);
        Ok(CompactReport {
            relocated_bytes: done,
            data_allocated_before,
            data_allocated_after: self.files.data.allocated_bytes().map_err(io(DATA))?,
            punched_bytes,
        })
    }

    /// See [`crate::FlexSpace::compact_step`].
    pub(crate) fn compact_step(&self) -> Result<Option<u64>> {
        self.check_usable()?;
        let mut m = self.maint.lock();
        if self.state.read().closed {
            return Ok(None);
        }
        self.gc_round(&mut m, Goal::Compact)
    }

    /// Commits what was emptied and waits (at most `wait`) for the readers
    /// of emptied segments, so that they become free.
    pub(crate) fn settle_freed(&self, wait: Duration) -> Result<()> {
        let deadline = Instant::now() + wait;
        let mut commits = 0;
        self.refresh_reader_pin(true);
        loop {
            // Only this process's readers are waited for: another
            // process's reader may hold its segments for hours.
            let (pending, quarantined) = {
                let mut st = self.state.write();
                st.release();
                (st.seg.pending_count(), st.seg.in_grace())
            };
            if pending > 0 && commits < 4 {
                commits += 1;
                let mut m = self.maint.lock();
                self.commit_locked(&mut m)?;
                continue;
            }
            if quarantined == 0 || Instant::now() >= deadline {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
