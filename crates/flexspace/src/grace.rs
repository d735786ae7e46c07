//! Grace periods for physical space: a data-file segment that no longer
//! holds live data is reused only after every read that translated offsets
//! to physical addresses before it was freed has finished (an SRCU-like
//! scheme with `SLOTS` reader counters indexed by the epoch modulo `SLOTS`).
//!
//! Invariants (the caller keeps the epoch, i.e. the [`Quarantine`], under
//! a reader-writer lock):
//! - A reader registers with [`GraceReaders::enter`] while holding the read side
//!   of that lock, in counter `epoch % SLOTS`; the epoch changes only under the
//!   write side. So when the epoch moves from `e` to `e + 1`, every reader
//!   of epoch `e` is already counted, and new ones count in the next slot.
//! - The epoch moves from `e` to `e + 1` only when the counter of
//!   `e + 1 - SLOTS` (the same slot as `e + 1`) is zero, so each slot counts
//!   readers of one epoch at a time: at epoch `e`, the slot of each epoch in
//!   `e + 1 - SLOTS ..= e` counts exactly that epoch's readers, and every
//!   reader of an older epoch has finished.
//! - A segment quarantined in epoch `q` is released once the epoch is past
//!   `q` and the counters of every epoch up to `q` have drained: every
//!   reader that could have seen the segment mapped registered in epoch `q`
//!   or earlier.
//!
//! Why four slots and not two: the layer above keeps long-lived readers
//! (flexdb's published views, one registered at each publish). With two
//! slots, a segment freed while such a reader of the previous epoch lived
//! could not move the epoch on, so the next reader registered in the
//! segment's own epoch and held it for one more publish. Four let the
//! epoch move past up to three epochs of live readers.

use std::sync::Arc;

use crate::sync::{AtomicU64, Ordering};

/// Reader counters: epoch `e`'s readers count in slot `e % SLOTS`.
const SLOTS: u64 = 4;

/// The reader counters.
#[derive(Default)]
pub struct GraceReaders {
    active: [AtomicU64; SLOTS as usize],
}

fn slot(epoch: u64) -> usize {
    (epoch % SLOTS) as usize
}

/// A registered reader; dropping it ends its read.
pub struct ReadGuard<'a> {
    counter: &'a AtomicU64,
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        // Release: the reader's accesses to the data file happen before a
        // writer that observes the drained counter reuses the space.
        self.counter.fetch_sub(1, Ordering::Release);
    }
}

/// A registered reader that owns its handle on the counters (a snapshot's
/// registration, which lives as long as the snapshot).
pub struct OwnedReadGuard {
    readers: Arc<GraceReaders>,
    slot: usize,
}

impl Drop for OwnedReadGuard {
    fn drop(&mut self) {
        // Release, as for `ReadGuard`.
        self.readers.active[self.slot].fetch_sub(1, Ordering::Release);
    }
}

impl GraceReaders {
    /// Registers a reader in `epoch` that owns its registration (same rule
    /// as [`GraceReaders::enter`]).
    pub fn enter_owned(self: &Arc<Self>, epoch: u64) -> OwnedReadGuard {
        OwnedReadGuard {
            readers: self.clone(),
            slot: self.register(epoch),
        }
    }

    /// Registers a reader in `epoch` (see the module invariants: call with
    /// the read side of the epoch's lock held).
    pub fn enter(&self, epoch: u64) -> ReadGuard<'_> {
        ReadGuard {
            counter: &self.active[self.register(epoch)],
        }
    }

    /// Counts a reader in `epoch`'s slot, which it returns.
    fn register(&self, epoch: u64) -> usize {
        let slot = slot(epoch);
        self.active[slot].fetch_add(1, Ordering::Relaxed);
        slot
    }

    fn drained(&self, epoch: u64) -> bool {
        self.active[slot(epoch)].load(Ordering::Acquire) == 0
    }

    /// Readers currently registered (both slots).
    #[cfg(all(test, not(loom)))]
    pub fn count(&self) -> u64 {
        self.active.iter().map(|a| a.load(Ordering::Relaxed)).sum()
    }
}

/// Segments waiting for their grace period, and the epoch.
#[derive(Default)]
pub struct Quarantine {
    epoch: u64,
    /// (epoch quarantined in, segment), oldest first.
    items: Vec<(u64, u32)>,
}

impl Quarantine {
    /// The current epoch (readers register in it).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Segments waiting.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// The segments waiting.
    pub fn segments(&self) -> impl Iterator<Item = u32> + '_ {
        self.items.iter().map(|&(_, s)| s)
    }

    /// Test aid: checks that the segments waiting are oldest first and
    /// none was quarantined in a future epoch (panics otherwise).
    pub fn check_invariants(&self) {
        let mut last = 0;
        for &(e, s) in &self.items {
            assert!(
                e >= last && e <= self.epoch,
                "quarantine: segment {s} quarantined in epoch {e} (previous {last}, now {})",
                self.epoch
            );
            last = e;
        }
    }

    /// Quarantines `seg` in the current epoch (call with the write side of
    /// the lock held).
    pub fn add(&mut self, seg: u32) {
        self.items.push((self.epoch, seg));
    }

    /// Moves the epoch forward as far as the readers allow and appends to
    /// `out` every segment whose grace period has ended (call with the
    /// write side of the lock held).
    pub fn advance(&mut self, readers: &GraceReaders, out: &mut Vec<u32>) {
        loop {
            let e = self.epoch;
            // Readers of epochs before `e + 1 - SLOTS` have all finished;
            // of the later ones before `e`, the oldest still counted bounds
            // what may go.
            let oldest_counted = e.saturating_sub(SLOTS - 1);
            let safe_below = (oldest_counted..e)
                .find(|&p| !readers.drained(p))
                .unwrap_or(e);
            self.items.retain(|&(q, s)| {
                if q < safe_below {
                    out.push(s);
                    false
                } else {
                    true
                }
            });
            let waiting_now = self.items.iter().any(|&(q, _)| q == e);
            // New readers go to the slot of `e + 1`, once the readers of
            // `e + 1 - SLOTS` it counted have finished.
            if !waiting_now || !readers.drained(e + 1) {
                return;
            }
            self.epoch = e + 1;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn released(q: &mut Quarantine, r: &GraceReaders) -> Vec<u32> {
        let mut out = Vec::new();
        q.advance(r, &mut out);
        out
    }

    #[test]
    fn without_readers_release_is_immediate() {
        let r = GraceReaders::default();
        let mut q = Quarantine::default();
        q.add(3);
        q.add(5);
        assert_eq!(released(&mut q, &r), vec![3, 5]);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_reader_from_before_holds_the_segment() {
        let r = GraceReaders::default();
        let mut q = Quarantine::default();
        let g = r.enter(q.epoch());
        q.add(7);
        assert!(released(&mut q, &r).is_empty());
        // A reader that registers after the quarantine does not hold it.
        let late = r.enter(q.epoch());
        assert!(released(&mut q, &r).is_empty());
        drop(g);
        assert_eq!(released(&mut q, &r), vec![7]);
        drop(late);
        assert_eq!(r.count(), 0);
    }

    /// The pattern of flexdb's published views: one long reader at a
    /// time, replaced after segments were freed in two successive epochs
    /// (a collection round's commit, then the MemTable's). Once the old
    /// reader is gone, both come out while the new reader lives: it
    /// registered in a later epoch than either.
    #[test]
    fn a_replaced_long_reader_releases_two_epochs_of_segments() {
        let r = GraceReaders::default();
        let mut q = Quarantine::default();
        let mut out = Vec::new();
        let view = r.enter(q.epoch());
        q.add(1);
        q.advance(&r, &mut out);
        q.add(2);
        q.advance(&r, &mut out);
        assert!(out.is_empty());
        let next = r.enter(q.epoch());
        drop(view);
        q.advance(&r, &mut out);
        assert_eq!(out, vec![1, 2]);
        drop(next);
    }

    /// A reader of an old epoch holds the epoch back once every slot is
    /// taken, and everything freed since; its finishing lets all of it go.
    #[test]
    fn a_reader_holds_at_most_slots_epochs_then_the_epoch_waits() {
        let r = GraceReaders::default();
        let mut q = Quarantine::default();
        let mut out = Vec::new();
        let old = r.enter(q.epoch());
        let mut later = Vec::new();
        for s in 0..10 {
            q.add(s);
            q.advance(&r, &mut out);
            later.push(r.enter(q.epoch()));
            later.remove(0);
        }
        assert!(out.is_empty());
        assert_eq!(
            q.epoch(),
            SLOTS - 1,
            "the epoch moved into the old reader's slot"
        );
        drop(old);
        q.advance(&r, &mut out);
        drop(later);
        q.advance(&r, &mut out);
        q.add(99);
        q.advance(&r, &mut out);
        assert_eq!(out, (0..10).chain([99]).collect::<Vec<_>>());
    }

    #[test]
    fn a_steady_stream_of_readers_does_not_starve_release() {
        let r = GraceReaders::default();
        let mut q = Quarantine::default();
        let mut held = vec![r.enter(q.epoch())];
        q.add(1);
        let mut out = Vec::new();
        for _ in 0..4 {
            // Each round: a new reader arrives, the oldest leaves; there is
            // always a reader, yet the segment comes out.
            held.push(r.enter(q.epoch()));
            q.advance(&r, &mut out);
            held.remove(0);
        }
        assert_eq!(out, vec![1]);
        assert_eq!(held.len(), 1);
    }
}

/// Loom models of the grace period (run with
/// `RUSTFLAGS="--cfg loom" cargo test -p flexspace --lib --release grace`).
///
/// The space's state lock is a loom `RwLock` over whether a segment is
/// mapped and the quarantine; the segment's bytes are a loom `UnsafeCell`.
/// A reader that finds the segment mapped registers under the read lock and
/// reads the bytes after releasing it; the mutator unmaps and quarantines
/// the segment, advances until it is released and then reuses (writes) it.
/// Loom reports a reuse that is not ordered after every such read.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::{Arc, RwLock};

    struct Space {
        /// (segment `i` mapped, quarantine).
        state: RwLock<([bool; 2], Quarantine)>,
        readers: GraceReaders,
        segs: [UnsafeCell<u8>; 2],
    }

    fn space() -> Arc<Space> {
        Arc::new(Space {
            state: RwLock::new(([true; 2], Quarantine::default())),
            readers: GraceReaders::default(),
            segs: [UnsafeCell::new(1), UnsafeCell::new(1)],
        })
    }

    /// A reader of segment `seg`: translate under the read lock, read after.
    fn read(sp: &Space, seg: usize) {
        let st = sp.state.read().unwrap();
        if !st.0[seg] {
            return;
        }
        let guard = sp.readers.enter(st.1.epoch());
        drop(st);
        // SAFETY: a plain read of the cell; loom checks that no write
        // (the reuse) races with it, which is what the test is about.
        let v = sp.segs[seg].with(|p| unsafe { *p });
        assert_eq!(v, 1, "a reader saw segment {seg} reused");
        drop(guard);
    }

    /// Unmaps and quarantines `seg`, waits for its release, reuses it.
    fn free_and_reuse(sp: &Space, seg: usize) {
        {
            let mut st = sp.state.write().unwrap();
            st.0[seg] = false;
            st.1.add(seg as u32);
        }
        loop {
            let mut out = Vec::new();
            sp.state.write().unwrap().1.advance(&sp.readers, &mut out);
            if out.contains(&(seg as u32)) {
                break;
            }
            loom::thread::yield_now();
        }
        // SAFETY: a plain write of the cell; loom checks that no read races
        // with it, which is what the test is about.
        sp.segs[seg].with_mut(|p| unsafe { *p = 2 });
    }

    #[test]
    fn a_segment_is_reused_only_after_its_readers() {
        loom::model(|| {
            let sp = space();
            let r = {
                let sp = sp.clone();
                loom::thread::spawn(move || read(&sp, 0))
            };
            free_and_reuse(&sp, 0);
            r.join().unwrap();
        });
    }

    /// Two segments freed one after the other while two readers come and
    /// go: the epoch moves through both counter slots.
    #[test]
    fn two_frees_and_two_readers_across_epochs() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(2);
        b.check(|| {
            let sp = space();
            let readers: Vec<_> = (0..2)
                .map(|i| {
                    let sp = sp.clone();
                    loom::thread::spawn(move || {
                        read(&sp, i);
                        read(&sp, 1 - i);
                    })
                })
                .collect();
            free_and_reuse(&sp, 0);
            free_and_reuse(&sp, 1);
            for r in readers {
                r.join().unwrap();
            }
        });
    }
}
