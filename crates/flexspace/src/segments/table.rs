//! Segment accounting of the data file: valid bytes per segment, the free
//! set, and the two waits a segment goes through before it is reused.
//!
//! Invariants:
//! - `valid[s]` is the number of bytes of segment `s` that the in-memory
//!   extent index maps; `live` is their sum and `holding` the number of
//!   segments with `valid > 0`.
//! - A segment whose last valid byte goes away joins `pending`; a commit
//!   takes the pending list when it starts ([`SegmentTable::take_pending`]) and,
//!   once the log records the change durably, hands it to the grace-period
//!   `quarantine` ([`SegmentTable::quarantine`]); only when every read that
//!   could have translated into it has finished does it become free
//!   ([`SegmentTable::release`]). So a crash never recovers metadata pointing
//!   into reused space, and no read ever sees reused space.
//! - `free` holds exactly the segments that can be allocated; allocation
//!   takes the lowest one, so the data file stays compact.
//! - The open segment (being filled) is never free, pending or quarantined.
//! - `unpunched` ⊆ `free`: free segments whose blocks may still be on file
//!   (freed since, or found at open); `punching` is a free segment whose
//!   blocks are being given back with no lock held: it is not allocated
//!   and does not count as free room until [`SegmentTable::end_punch`].
//!   A free segment holds nothing a checkpoint plus the log's committed
//!   batches reference (it became free only after the commit that emptied
//!   it was durable), so punching it at any moment is crash-safe.
//! - Readers in other processes (`registry`) pin segments too: a segment
//!   leaves the quarantine for `free` only when the last registry scan
//!   ([`ReaderPin`]) started after the commit that freed it and no live
//!   reader's commit point is older than that commit; otherwise it waits
//!   in `held` (counted as quarantined) until a later scan allows it.

use std::collections::BTreeSet;

use crate::grace::{GraceReaders, Quarantine};
use crate::options::SEGMENT_SIZE;
use crate::registry::CommitPoint;

/// What the readers of other processes allow to be reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReaderPin {
    /// No registry (storage without one): nothing is pinned.
    Unregistered,
    /// A registry scan that started once commit point `at` was durable
    /// found `oldest` the oldest live reader's commit point (`None`: no
    /// reader).
    Scanned {
        /// The writer's durable commit point when the scan started.
        at: CommitPoint,
        /// The oldest commit point a live reader holds.
        oldest: Option<CommitPoint>,
    },
}

impl ReaderPin {
    /// Whether a segment freed by the commit `freed_at` may be reused.
    pub fn allows(&self, freed_at: CommitPoint) -> bool {
        match *self {
            ReaderPin::Unregistered => true,
            ReaderPin::Scanned { at, oldest } => {
                at >= freed_at && oldest.is_none_or(|o| o >= freed_at)
            }
        }
    }
}

/// Valid-byte counts and free lists of the data file's segments.
pub struct SegmentTable {
    valid: Vec<u64>,
    free: BTreeSet<u32>,
    pending: Vec<u32>,
    quarantine: Quarantine,
    open: Option<u32>,
    live: u64,
    holding: usize,
    unpunched: BTreeSet<u32>,
    punching: Option<u32>,
    /// The commit that freed each quarantined segment.
    freed_at: std::collections::HashMap<u32, CommitPoint>,
    /// Segments past their grace period that readers of other processes
    /// may still reference: (the commit that freed it, segment).
    held: Vec<(CommitPoint, u32)>,
    pin: ReaderPin,
}

/// Calls `f(segment, bytes)` for each segment that `addr..addr + len`
/// touches.
pub fn for_each_part(addr: u64, len: u64, mut f: impl FnMut(u32, u64)) {
    let mut a = addr;
    let end = addr.saturating_add(len);
    while a < end {
        let seg = a / SEGMENT_SIZE;
        let part = ((seg + 1) * SEGMENT_SIZE).min(end) - a;
        f(seg as u32, part);
        a += part;
    }
}

impl SegmentTable {
    /// Segments with the given valid bytes; empty ones are free.
    pub fn new(valid: Vec<u64>) -> Self {
        let free = (0..valid.len() as u32)
            .filter(|&s| valid[s as usize] == 0)
            .collect();
        let live = valid.iter().sum();
        let holding = valid.iter().filter(|&&v| v > 0).count();
        SegmentTable {
            valid,
            free,
            pending: Vec::new(),
            quarantine: Quarantine::default(),
            open: None,
            live,
            holding,
            unpunched: BTreeSet::new(),
            punching: None,
            freed_at: Default::default(),
            held: Vec::new(),
            pin: ReaderPin::Unregistered,
        }
    }

    /// Sets what the readers of other processes allow (see [`ReaderPin`]);
    /// the next [`SegmentTable::release`] applies it.
    pub fn set_pin(&mut self, pin: ReaderPin) {
        self.pin = pin;
    }

    /// At open, with readers of other processes about: the free segments
    /// below `n` (the data file's) may be referenced by them; they wait as
    /// if commit `at` had freed them.
    pub fn hold_free_below(&mut self, n: u32, at: CommitPoint) {
        let below: Vec<u32> = self
            .free
            .range(..n)
            .copied()
            .filter(|&s| self.punching != Some(s))
            .collect();
        for s in below {
            self.free.remove(&s);
            self.unpunched.remove(&s);
            self.held.push((at, s));
        }
    }

    /// Segments held for readers of other processes.
    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    /// Marks the free segments below `n` as possibly holding blocks (at
    /// open: the data file's first `n` segments may hold old bytes).
    pub fn mark_unpunched_below(&mut self, n: u32) {
        let below: Vec<u32> = self.free.range(..n).copied().collect();
        self.unpunched.extend(below);
    }

    /// Free segments that may still hold blocks on file.
    pub fn unpunched_count(&self) -> usize {
        self.unpunched.len()
    }

    /// Picks the highest free segment that may hold blocks, for a punch
    /// done with no lock held; `None` when there is none, a punch is
    /// running, or it would leave no free segment to allocate. The highest
    /// first: allocation takes the lowest, which would be refilled soon.
    pub fn start_punch(&mut self) -> Option<u32> {
        if self.punching.is_some() || self.free.len() < 2 {
            return None;
        }
        let s = self.unpunched.pop_last()?;
        self.punching = Some(s);
        Some(s)
    }

    /// The punch of `s` ended (done or failed: it is not retried).
    pub fn end_punch(&mut self, s: u32) {
        if self.punching == Some(s) {
            self.punching = None;
        }
    }

    /// Number of segments.
    pub fn count(&self) -> usize {
        self.valid.len()
    }

    /// Valid bytes of segment `s`.
    pub fn valid(&self, s: u32) -> u64 {
        self.valid.get(s as usize).copied().unwrap_or(0)
    }

    /// The per-segment valid bytes.
    pub fn valid_all(&self) -> &[u64] {
        &self.valid
    }

    /// Free segments that can be allocated now (a segment being punched
    /// excluded).
    pub fn free_count(&self) -> usize {
        self.free.len() - usize::from(self.punching.is_some())
    }

    /// Segments waiting for a commit.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// Segments waiting for their grace period or for readers of other
    /// processes.
    pub fn quarantined(&self) -> usize {
        self.quarantine.len() + self.held.len()
    }

    /// Segments waiting for the grace period of this process's readers
    /// (short reads and views: worth waiting for, unlike other processes'
    /// readers, which may live for hours).
    pub fn in_grace(&self) -> usize {
        self.quarantine.len()
    }

    /// The epoch readers register in.
    pub fn epoch(&self) -> u64 {
        self.quarantine.epoch()
    }

    /// The open segment.
    pub fn open(&self) -> Option<u32> {
        self.open
    }

    /// Total valid bytes.
    pub fn live(&self) -> u64 {
        self.live
    }

    /// Takes the lowest free segment and makes it the open one (closing
    /// the previous one).
    pub fn open_lowest_free(&mut self) -> Option<u32> {
        let s = self
            .free
            .iter()
            .copied()
            .find(|&s| self.punching != Some(s))?;
        self.free.remove(&s);
        self.unpunched.remove(&s);
        self.close_open();
        self.open = Some(s);
        Some(s)
    }

    /// Adds `len` valid bytes at `addr` (panics on bytes past the last
    /// segment: the accounting would no longer match the index).
    pub fn add(&mut self, addr: u64, len: u64) {
        for_each_part(addr, len, |s, n| {
            let count = self.valid.len();
            let Some(v) = self.valid.get_mut(s as usize) else {
                panic!("segments: adding bytes to segment {s}, past the {count} segments");
            };
            if *v == 0 {
                self.holding += 1;
            }
            *v += n;
            self.live += n;
        });
    }

    /// Removes `len` valid bytes at `addr`; emptied segments become pending.
    /// Panics when a segment would count fewer bytes than it holds (the
    /// accounting no longer matches the index).
    pub fn remove(&mut self, addr: u64, len: u64) {
        for_each_part(addr, len, |s, n| {
            let count = self.valid.len();
            let Some(v) = self.valid.get_mut(s as usize) else {
                panic!("segments: removing bytes of segment {s}, past the {count} segments");
            };
            assert!(
                n <= *v,
                "segments: removing {n} bytes of segment {s}, which counts {} valid",
                *v
            );
            *v -= n;
            self.live -= n;
            if *v == 0 && n > 0 {
                self.holding -= 1;
                if self.open != Some(s) {
                    self.pending.push(s);
                }
            }
        });
    }

    /// Closes the open segment (it becomes pending if nothing in it is
    /// valid).
    pub fn close_open(&mut self) {
        if let Some(s) = self.open.take() {
            if self.valid(s) == 0 {
                self.pending.push(s);
            }
        }
    }

    /// The segments emptied so far, for a commit that is starting.
    pub fn take_pending(&mut self) -> Vec<u32> {
        let mut p = std::mem::take(&mut self.pending);
        p.sort_unstable();
        p.dedup();
        p
    }

    /// A commit that took `segs` failed and left nothing durable: they are
    /// pending again, for the next commit to take.
    pub fn restore_pending(&mut self, segs: Vec<u32>) {
        self.pending.extend(segs);
    }

    /// After the commit `freed_at` that took `segs` is durable: they wait
    /// for the grace period (and the readers of other processes).
    pub fn quarantine(&mut self, segs: &[u32], freed_at: CommitPoint) {
        for &s in segs {
            self.quarantine.add(s);
            self.freed_at.insert(s, freed_at);
        }
    }

    /// Frees the quarantined segments whose grace period has ended and
    /// that no reader of another process may reference; returns how many.
    pub fn release(&mut self, readers: &GraceReaders) -> usize {
        let mut out = Vec::new();
        self.quarantine.advance(readers, &mut out);
        for s in out {
            let at = self.freed_at.remove(&s).unwrap_or((u64::MAX, u64::MAX));
            self.held.push((at, s));
        }
        let pin = self.pin;
        let mut freed = Vec::new();
        self.held.retain(|&(at, s)| {
            let go = pin.allows(at);
            if go {
                freed.push(s);
            }
            !go
        });
        let n = freed.len();
        for s in freed {
            if self.valid(s) == 0 && self.open != Some(s) {
                self.free.insert(s);
                self.unpunched.insert(s);
            }
        }
        n
    }

    /// Segments that hold live data, other than the open one, and the
    /// bytes of garbage in them.
    pub fn garbage(&self) -> (usize, u64) {
        let open_valid = self.open.map_or(0, |s| self.valid(s));
        let n = self.holding - usize::from(open_valid > 0);
        let live = self.live - open_valid;
        (n, n as u64 * SEGMENT_SIZE - live)
    }

    /// Garbage over the capacity of the segments that hold live data (open
    /// one excluded); 0 when there are none.
    pub fn garbage_ratio(&self) -> f64 {
        let (n, g) = self.garbage();
        if n == 0 {
            0.0
        } else {
            g as f64 / (n as u64 * SEGMENT_SIZE) as f64
        }
    }

    /// Segments not free (in use, open, pending or quarantined).
    pub fn in_use(&self) -> usize {
        self.valid.len() - self.free.len()
    }

    /// Segments holding live data other than the open one, least valid
    /// first.
    pub fn gc_candidates(&self) -> Vec<u32> {
        let mut v: Vec<u32> = (0..self.valid.len() as u32)
            .filter(|&s| self.valid[s as usize] > 0 && self.open != Some(s))
            .collect();
        v.sort_by_key(|&s| (self.valid[s as usize], s));
        v
    }
}

impl SegmentTable {
    /// Test aid: checks the module invariants and panics at the first one
    /// broken. `settled`: no commit is between taking the pending list and
    /// quarantining it, and none failed, so every empty segment other than
    /// the open one is free, pending or quarantined.
    pub fn check_invariants(&self, settled: bool) {
        let n = self.valid.len();
        let mut live = 0u64;
        let mut holding = 0usize;
        for (s, &v) in self.valid.iter().enumerate() {
            assert!(
                v <= SEGMENT_SIZE,
                "segments: segment {s} counts {v} valid bytes"
            );
            live += v;
            holding += usize::from(v > 0);
        }
        assert_eq!(
            live, self.live,
            "segments: live is {} but the segments hold {live}",
            self.live
        );
        assert_eq!(
            holding, self.holding,
            "segments: holding is {} but {holding} segments hold data",
            self.holding
        );
        // Where each segment is: 1 free, 2 pending, 3 quarantined, 4 open.
        let mut place = vec![0u8; n];
        let mut put = |s: u32, p: u8, what: &str| {
            let Some(x) = place.get_mut(s as usize) else {
                panic!("segments: {what} segment {s} is past the {n} segments");
            };
            assert!(
                *x == 0 || (*x == 2 && p == 2),
                "segments: segment {s} is {what} and also {}",
                ["", "free", "pending", "quarantined", "open"][*x as usize]
            );
            *x = p;
            assert_eq!(
                self.valid[s as usize], 0,
                "segments: {what} segment {s} holds valid bytes"
            );
        };
        for &s in &self.free {
            put(s, 1, "free");
        }
        for s in self.unpunched.iter().copied().chain(self.punching) {
            assert!(
                self.free.contains(&s),
                "segments: segment {s} waits for or is in a punch but is not free"
            );
        }
        for &s in &self.pending {
            put(s, 2, "pending");
        }
        for s in self.quarantine.segments() {
            put(s, 3, "quarantined");
        }
        for &(_, s) in &self.held {
            put(s, 3, "held for readers");
        }
        self.quarantine.check_invariants();
        if let Some(s) = self.open {
            let x = place.get(s as usize).copied();
            assert!(
                x == Some(0),
                "segments: the open segment {s} is also free, pending or quarantined"
            );
            place[s as usize] = 4;
        }
        if settled {
            for (s, (&v, &p)) in self.valid.iter().zip(&place).enumerate() {
                assert!(
                    v > 0 || p != 0,
                    "segments: segment {s} is empty but neither open, free, pending nor quarantined (leaked)"
                );
            }
        }
    }

    /// Whether segment `s` is free.
    pub fn is_free(&self, s: u32) -> bool {
        self.free.contains(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Freed segments wait for a punch, highest first; the one being
    /// punched is neither allocated nor counted as free room, and the last
    /// free segment is never taken for a punch.
    #[test]
    fn freed_segments_are_punched_highest_first_and_not_allocated_meanwhile() {
        let readers = GraceReaders::default();
        let mut s = SegmentTable::new(vec![0; 4]);
        s.mark_unpunched_below(2);
        assert_eq!(s.unpunched_count(), 2);
        assert_eq!(s.start_punch(), Some(1));
        assert_eq!(s.start_punch(), None, "one punch at a time");
        assert_eq!(s.free_count(), 3);
        assert_eq!(s.open_lowest_free(), Some(0));
        assert_eq!(s.open_lowest_free(), Some(2), "segment 1 is being punched");
        s.check_invariants(false);
        s.end_punch(1);
        s.release(&readers);
        assert_eq!(s.unpunched_count(), 0);
        assert_eq!(s.free_count(), 2);
        s.add(2 * SEGMENT_SIZE, 10);
        assert_eq!(s.open_lowest_free(), Some(1));
        s.remove(2 * SEGMENT_SIZE, 10);
        let taken = s.take_pending();
        s.quarantine(&taken, (1, 1));
        s.release(&readers);
        s.release(&readers);
        // Segments 0 (closed empty) and 2 (emptied) were freed.
        assert_eq!(s.unpunched_count(), 2);
        assert_eq!(s.free_count(), 3);
        assert_eq!(s.start_punch(), Some(2));
        s.end_punch(2);
        // Allocating a segment that waits for a punch takes it off the list.
        assert_eq!(s.open_lowest_free(), Some(0));
        assert_eq!(s.unpunched_count(), 0);
        assert_eq!(s.start_punch(), None);
        assert_eq!(s.open_lowest_free(), Some(2));
        assert_eq!(s.free_count(), 1);
        s.check_invariants(true);
    }

    #[test]
    fn emptied_segments_wait_for_a_commit_and_the_readers() {
        let readers = GraceReaders::default();
        let mut s = SegmentTable::new(vec![0; 4]);
        assert_eq!(s.free_count(), 4);
        assert_eq!(s.open_lowest_free(), Some(0));
        s.add(0, 100);
        assert_eq!(s.open_lowest_free(), Some(1));
        s.remove(0, 100);
        assert_eq!(s.pending_count(), 1);
        let taken = s.take_pending();
        assert_eq!(taken, vec![0]);
        // Not free before the commit is published.
        assert_eq!(s.free_count(), 2);
        let reader = readers.enter(s.epoch());
        s.quarantine(&taken, (1, 1));
        assert_eq!(s.release(&readers), 0);
        assert_eq!(s.free_count(), 2);
        drop(reader);
        assert_eq!(s.release(&readers), 1);
        assert_eq!(s.free_count(), 3);
        // The lowest free segment comes first.
        assert_eq!(s.open_lowest_free(), Some(0));
    }

    /// A segment freed at commit (1, 4) is reused only once a registry
    /// scan that started at or after (1, 4) found no reader older than it;
    /// meanwhile it is held (counted as quarantined, never free).
    #[test]
    fn readers_of_other_processes_hold_what_later_commits_freed() {
        let readers = GraceReaders::default();
        let mut s = SegmentTable::new(vec![0, 7, 7, 0]);
        s.set_pin(ReaderPin::Scanned {
            at: (1, 3),
            oldest: None,
        });
        s.remove(SEGMENT_SIZE, 7);
        let taken = s.take_pending();
        s.quarantine(&taken, (1, 4));
        // The scan started before the commit that freed it: a reader may
        // have registered since and loaded (1, 3).
        assert_eq!(s.release(&readers), 0);
        assert_eq!((s.held_count(), s.quarantined(), s.in_grace()), (1, 1, 0));
        assert!(!s.is_free(1));
        s.check_invariants(true);
        // A later scan finds a reader of (1, 3): still held.
        s.set_pin(ReaderPin::Scanned {
            at: (1, 5),
            oldest: Some((1, 3)),
        });
        assert_eq!(s.release(&readers), 0);
        assert!(!s.is_free(1));
        // The reader moved to (1, 4): its state no longer maps segment 1.
        s.set_pin(ReaderPin::Scanned {
            at: (1, 6),
            oldest: Some((1, 4)),
        });
        assert_eq!(s.release(&readers), 1);
        assert!(s.is_free(1));
        assert_eq!(s.held_count(), 0);
        // At open, the free segments of the file wait for older readers.
        s.hold_free_below(2, (2, 0));
        assert!(!s.is_free(0) && !s.is_free(1) && s.is_free(3));
        s.check_invariants(true);
        s.set_pin(ReaderPin::Scanned {
            at: (2, 0),
            oldest: None,
        });
        assert_eq!(s.release(&readers), 2);
        assert!(s.is_free(0) && s.is_free(1));
        assert!(ReaderPin::Unregistered.allows((9, 9)));
    }

    #[test]
    fn garbage_counts_only_segments_holding_data() {
        let mut s = SegmentTable::new(vec![0; 8]);
        s.open_lowest_free();
        s.add(0, SEGMENT_SIZE);
        s.open_lowest_free();
        s.add(SEGMENT_SIZE, 10);
        s.remove(0, SEGMENT_SIZE / 4);
        // Segment 0 is sealed and 1/4 garbage; segment 1 is open.
        assert_eq!(s.garbage(), (1, SEGMENT_SIZE / 4));
        assert!((s.garbage_ratio() - 0.25).abs() < 1e-9);
        assert_eq!(s.live(), SEGMENT_SIZE * 3 / 4 + 10);
        assert_eq!(s.gc_candidates(), vec![0]);
        assert_eq!(s.in_use(), 2);
    }

    #[test]
    fn parts_split_at_segment_boundaries() {
        let mut parts = Vec::new();
        for_each_part(SEGMENT_SIZE - 10, 30, |s, n| parts.push((s, n)));
        assert_eq!(parts, vec![(0, 10), (1, 20)]);
    }

    /// A table through its whole cycle passes its checks at every step.
    #[test]
    fn the_cycle_keeps_the_invariants() {
        let readers = GraceReaders::default();
        let mut s = SegmentTable::new(vec![0, 7, 0, 0]);
        s.check_invariants(true);
        s.open_lowest_free();
        s.add(0, 100);
        s.check_invariants(true);
        s.remove(SEGMENT_SIZE, 7);
        s.check_invariants(true);
        let taken = s.take_pending();
        // Between taking and quarantining, the segment is in flight.
        s.check_invariants(false);
        s.quarantine(&taken, (1, 1));
        s.release(&readers);
        s.check_invariants(true);
        assert_eq!(s.free_count(), 3);
    }

    #[test]
    #[should_panic(expected = "leaked")]
    fn a_lost_empty_segment_is_caught() {
        let mut s = SegmentTable::new(vec![0, 7]);
        s.remove(SEGMENT_SIZE, 7);
        let _lost = s.take_pending();
        s.check_invariants(true);
    }

    #[test]
    #[should_panic(expected = "holds valid bytes")]
    fn a_free_segment_with_data_is_caught() {
        let mut s = SegmentTable::new(vec![0, 0]);
        // Bytes added to a segment that was never opened.
        s.add(SEGMENT_SIZE, 5);
        s.check_invariants(true);
    }

    #[test]
    #[should_panic(expected = "live is")]
    fn a_wrong_live_total_is_caught() {
        let mut s = SegmentTable::new(vec![3, 0]);
        s.live += 1;
        s.check_invariants(true);
    }

    #[test]
    #[should_panic(expected = "also")]
    fn an_open_segment_that_is_also_free_is_caught() {
        let mut s = SegmentTable::new(vec![0, 0]);
        s.open_lowest_free();
        s.free.insert(0);
        s.check_invariants(true);
    }

    #[test]
    #[should_panic(expected = "counts 7 valid")]
    fn removing_more_than_a_segment_holds_panics() {
        let mut s = SegmentTable::new(vec![0, 7]);
        s.remove(SEGMENT_SIZE, 8);
    }
}
