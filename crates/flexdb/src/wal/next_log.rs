//! The next write-ahead log, prepared ahead of its rotation on a helper
//! thread, so that the rotation under the writer lock swaps logs instead
//! of making one (taking a spare or creating a file, writing and syncing
//! its header, renaming it, syncing the directory, mapping it: up to tens
//! of milliseconds when the disk is busy). The thread makes the next
//! MemTable too (its hash table sized for the keys the active one will
//! hold: up to 70–150 ms under the lock on a loaded machine).
//!
//! The write path claims the preparation when the active log's MemTable
//! passes a fill mark (`write::PREPARE_AT_EIGHTHS`); a thread makes log
//! `gen` (the active generation's successor) with `log_files::new_wal`,
//! its header's first sequence number the writer's next one at the claim.
//! Every record of a spare it takes over is numbered below that (spares
//! hold committed records only), and every record the log will get is
//! numbered at or above it (sequence numbers only grow), which is all
//! `Wal::reuse` asks. Until the rotation, the prepared log is an empty log
//! named as generation `gen` beside the active one: a crash there leaves
//! what a crash right after a rotation leaves, an empty newest log, which
//! recovery replays (nothing) and removes.
//!
//! Invariants: at most one log is prepared or being prepared, always for
//! the active generation's successor (claims and rotations run under the
//! writer lock, and a rotation takes what was prepared for its generation,
//! waiting for a preparation under way); a preparation that failed leaves
//! nothing for the rotation to use, which then makes the log itself, as
//! without this module.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::Result;
use crate::wal::Wal;
use crate::write::memtable::MemTable;

/// A log made ahead of its rotation, and the MemTable that goes with it.
pub(crate) struct PreparedLog {
    /// The generation it is named for.
    pub gen: u64,
    pub wal: Arc<Wal>,
    /// It took over a spare's file.
    pub reused: bool,
    /// The next MemTable, its hash table sized for the keys the active one
    /// will hold when full (`None`: the rotation makes it).
    pub mem: Option<Arc<MemTable>>,
}

enum State {
    Idle,
    /// A thread is making the log of this generation.
    Preparing(u64),
    Ready(PreparedLog),
}

/// The slot for the next log (one per store).
pub(crate) struct NextLog {
    state: Mutex<State>,
    done: Condvar,
    /// The newest generation a preparation was claimed for (a relaxed
    /// check on the append path before the slot's lock).
    claimed: AtomicU64,
}

impl Default for NextLog {
    fn default() -> Self {
        NextLog {
            state: Mutex::new(State::Idle),
            done: Condvar::new(),
            claimed: AtomicU64::new(0),
        }
    }
}

impl NextLog {
    /// Whether the caller (holding the writer lock) is the first to claim
    /// the preparation of generation `gen`'s log; if so it must prepare it
    /// and hand the outcome to [`NextLog::finish`].
    pub fn claim(&self, gen: u64) -> bool {
        if self.claimed.load(Ordering::Relaxed) >= gen
            || self.claimed.fetch_max(gen, Ordering::Relaxed) >= gen
        {
            return false;
        }
        let mut s = self.state.lock();
        if !matches!(*s, State::Idle) {
            // Left over from an older generation (cannot happen while
            // rotations take what is prepared): not claimed.
            return false;
        }
        *s = State::Preparing(gen);
        true
    }

    /// Hands over the outcome of the preparation of generation `gen`'s log.
    /// A failure leaves the slot empty (the rotation makes the log).
    pub fn finish(&self, gen: u64, made: Result<PreparedLog>) {
        let mut s = self.state.lock();
        if matches!(*s, State::Preparing(g) if g == gen) {
            *s = match made {
                Ok(p) if p.gen == gen => State::Ready(p),
                _ => State::Idle,
            };
        }
        self.done.notify_all();
    }

    /// The log prepared for generation `gen`, waiting for a preparation
    /// under way; `None` when there is none (or it failed). The slot is
    /// left empty either way.
    pub fn take(&self, gen: u64) -> Option<PreparedLog> {
        let mut s = self.state.lock();
        while matches!(*s, State::Preparing(g) if g == gen) {
            self.done.wait(&mut s);
        }
        match std::mem::replace(&mut *s, State::Idle) {
            State::Ready(p) if p.gen == gen => Some(p),
            State::Ready(p) => {
                // Not this rotation's: put back (cannot happen, see the
                // module's invariants).
                *s = State::Ready(p);
                None
            }
            other => {
                *s = other;
                None
            }
        }
    }

    /// What was prepared and never used (a closing store removes it),
    /// waiting for a preparation under way.
    pub fn take_any(&self) -> Option<PreparedLog> {
        let mut s = self.state.lock();
        while matches!(*s, State::Preparing(_)) {
            self.done.wait(&mut s);
        }
        match std::mem::replace(&mut *s, State::Idle) {
            State::Ready(p) => Some(p),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexspace::MemFile;

    fn log(gen: u64, reused: bool) -> Result<PreparedLog> {
        let wal = Arc::new(Wal::create(Arc::new(MemFile::new()), "w", None, 1, 0).unwrap());
        Ok(PreparedLog {
            gen,
            wal,
            reused,
            mem: None,
        })
    }

    #[test]
    fn a_generation_is_claimed_once_and_taken_once() {
        let next = NextLog::default();
        assert!(next.claim(2));
        assert!(!next.claim(2));
        next.finish(2, log(2, true));
        let p = next.take(2).unwrap();
        assert_eq!((p.gen, p.reused), (2, true));
        assert!(next.take(2).is_none());
        // An older generation is never claimed again.
        assert!(!next.claim(1));
        assert!(next.claim(3));
    }

    #[test]
    fn a_failed_preparation_leaves_nothing_to_take() {
        let next = NextLog::default();
        assert!(next.claim(5));
        next.finish(5, Err(crate::error::Error::Stopped("test".into())));
        assert!(next.take(5).is_none());
    }

    #[test]
    fn a_rotation_waits_for_the_preparation_under_way() {
        let next = Arc::new(NextLog::default());
        assert!(next.claim(7));
        let preparer = {
            let next = next.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                next.finish(7, log(7, false));
            })
        };
        let p = next.take(7).expect("the prepared log");
        assert_eq!(p.gen, 7);
        preparer.join().unwrap();
        // Another generation's log is not handed out.
        assert!(next.claim(8));
        next.finish(8, log(8, false));
        assert!(next.take(9).is_none());
        assert_eq!(next.take_any().map(|p| p.gen), Some(8));
    }
}
