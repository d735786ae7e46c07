//! Segment accounting of the data file: valid bytes per segment, the free
//! list, and segments waiting for a commit before they may be reused.
//!
//! Invariants:
//! - `valid[s]` is the number of bytes of segment `s` that the in-memory
//!   extent index maps.
//! - A segment is in `free` only when no committed state references it:
//!   a segment whose last valid byte goes away joins `pending`, and moves
//!   to `free` only after the log commit that records the change is
//!   durable ([`Segments::release_pending`]). So a crash never recovers
//!   metadata that points into reused space.
//! - The open segment (being filled) is never free nor pending.

use crate::options::SEGMENT_SIZE;

/// Valid-byte counts and free lists of the data file's segments.
pub struct Segments {
    pub valid: Vec<u64>,
    /// The sum of `valid` (kept, not recomputed: it is read on every
    /// mutation).
    total: u64,
    /// Free segments, highest first (so `pop` reuses low segments first).
    free: Vec<u32>,
    pending: Vec<u32>,
    pub open: Option<u32>,
}

/// Calls `f(segment, bytes)` for each segment that `addr..addr + len`
/// touches.
pub fn for_each_part(addr: u64, len: u64, mut f: impl FnMut(u32, u64)) {
    let mut a = addr;
    let end = addr + len;
    while a < end {
        let seg = a / SEGMENT_SIZE;
        let part = ((seg + 1) * SEGMENT_SIZE).min(end) - a;
        f(seg as u32, part);
        a += part;
    }
}

impl Segments {
    /// `count` segments with the given valid bytes; empty ones are free.
    pub fn new(valid: Vec<u64>) -> Self {
        let free = (0..valid.len() as u32)
            .rev()
            .filter(|&s| valid[s as usize] == 0)
            .collect();
        Segments {
            total: valid.iter().sum(),
            valid,
            free,
            pending: Vec::new(),
            open: None,
        }
    }

    /// Number of segments.
    pub fn count(&self) -> usize {
        self.valid.len()
    }

    /// Free segments.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Segments waiting for a commit.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// Takes a free segment.
    pub fn take_free(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Adds `len` valid bytes at `addr`.
    pub fn add(&mut self, addr: u64, len: u64) {
        for_each_part(addr, len, |s, n| self.valid[s as usize] += n);
        self.total += len;
    }

    /// Removes `len` valid bytes at `addr`; emptied segments become pending.
    pub fn remove(&mut self, addr: u64, len: u64) {
        let mut emptied = Vec::new();
        let mut removed = 0;
        for_each_part(addr, len, |s, n| {
            let v = &mut self.valid[s as usize];
            removed += n.min(*v);
            *v = v.saturating_sub(n);
            if *v == 0 && self.open != Some(s) {
                emptied.push(s);
            }
        });
        self.pending.extend(emptied);
        self.total -= removed;
    }

    /// Closes the open segment (it becomes pending if nothing in it is
    /// valid).
    pub fn close_open(&mut self) {
        if let Some(s) = self.open.take() {
            if self.valid[s as usize] == 0 {
                self.pending.push(s);
            }
        }
    }

    /// After a durable commit: pending segments become free.
    pub fn release_pending(&mut self) {
        let mut p = std::mem::take(&mut self.pending);
        p.retain(|&s| self.valid[s as usize] == 0 && self.open != Some(s));
        p.sort_unstable();
        p.dedup();
        self.free.extend(p);
        self.free.sort_unstable_by(|a, b| b.cmp(a));
        self.free.dedup();
    }

    /// Total valid bytes.
    pub fn total_valid(&self) -> u64 {
        self.total
    }

    /// Used (non-free) segments, least valid first, excluding the open one.
    pub fn gc_candidates(&self) -> Vec<u32> {
        let mut v: Vec<u32> = (0..self.valid.len() as u32)
            .filter(|&s| self.valid[s as usize] > 0 && self.open != Some(s))
            .collect();
        v.sort_by_key(|&s| self.valid[s as usize]);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emptied_segments_wait_for_a_commit() {
        let mut s = Segments::new(vec![0; 4]);
        assert_eq!(s.free_count(), 4);
        let a = s.take_free().unwrap();
        assert_eq!(a, 0);
        s.open = Some(a);
        s.add(0, 100);
        s.close_open();
        s.remove(0, 100);
        assert_eq!(s.pending_count(), 1);
        assert_eq!(s.free_count(), 3);
        s.release_pending();
        assert_eq!(s.free_count(), 4);
        assert_eq!(s.total_valid(), 0);
        s.add(SEGMENT_SIZE + 5, 10);
        assert_eq!(s.total_valid(), 10);
        assert_eq!(s.take_free(), Some(0));
    }

    #[test]
    fn parts_split_at_segment_boundaries() {
        let mut parts = Vec::new();
        for_each_part(SEGMENT_SIZE - 10, 30, |s, n| parts.push((s, n)));
        assert_eq!(parts, vec![(0, 10), (1, 20)]);
    }
}
