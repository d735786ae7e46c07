//! Which pages of the tree file a just-committed checkpoint leaves free, as
//! a bit per page, and what follows from it: how many pages the file must
//! keep (one past the highest page the committed version references) and
//! which whole file-system blocks hold only free pages, so that they can be
//! punched.
//!
//! Invariants: a map covers `len` pages and answers only for them; a punch
//! range covers whole [`HOLE_BLOCK`]-byte blocks whose every page is free
//! and below the map's length, so it never touches a page the committed
//! version references, the header slots (block 0 holds both) or the tail
//! the file is truncated to. What a checkpoint leaves to give back waits in
//! [`FreePages`] until its caller or the next checkpoint (before it takes
//! a free page) gives it back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::checkpoint::PAGE_SIZE;
use crate::storage::StorageFile;

/// The file-system block a hole is made of: holes are punched in whole
/// blocks of this size (4 KiB, the block of ext4, xfs and tmpfs).
pub(crate) const HOLE_BLOCK: usize = 4096;
/// Pages per [`HOLE_BLOCK`].
const PAGES_PER_BLOCK: u32 = (HOLE_BLOCK / PAGE_SIZE) as u32;

/// A set of free pages among the first `len` pages of a tree file.
pub(crate) struct FreePageMap {
    bits: Vec<u64>,
    len: u32,
}

impl FreePageMap {
    /// A map of `len` pages, none free.
    pub fn new(len: u32) -> Self {
        FreePageMap {
            bits: vec![0; (len as usize).div_ceil(64)],
            len,
        }
    }

    /// Marks `pages` free (pages at or past the map's length are ignored).
    pub fn insert_all(&mut self, pages: &[u32]) {
        for &p in pages {
            if p < self.len {
                self.bits[p as usize / 64] |= 1 << (p % 64);
            }
        }
    }

    /// Whether `page` is free (pages past the map are free: the file need
    /// not keep them).
    pub fn is_free(&self, page: u32) -> bool {
        page >= self.len || self.bits[page as usize / 64] & (1 << (page % 64)) != 0
    }

    /// One past the highest page not free, at least `floor`: the pages the
    /// file must keep.
    pub fn used_len(&self, floor: u32) -> u32 {
        for (w, &word) in self.bits.iter().enumerate().rev() {
            let base = w as u32 * 64;
            // Pages of this word inside the map that are in use.
            let valid = if base + 64 <= self.len {
                u64::MAX
            } else {
                (1u64 << (self.len - base)) - 1
            };
            let used = !word & valid;
            if used != 0 {
                return (base + 64 - used.leading_zeros()).max(floor);
            }
        }
        floor
    }

    /// Byte ranges of the whole blocks below page `keep` that hold a page
    /// of `candidates` and only free pages, ascending, adjacent blocks
    /// joined into one range.
    pub fn punch_ranges(&self, candidates: &[u32], keep: u32) -> Vec<(u64, u64)> {
        let mut blocks: Vec<u32> = candidates
            .iter()
            .map(|&p| p / PAGES_PER_BLOCK)
            .filter(|&b| {
                let first = b * PAGES_PER_BLOCK;
                let end = first + PAGES_PER_BLOCK;
                end <= keep && (first..end).all(|p| self.is_free(p))
            })
            .collect();
        blocks.sort_unstable();
        blocks.dedup();
        let block = HOLE_BLOCK as u64;
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for b in blocks {
            let at = u64::from(b) * block;
            match ranges.last_mut() {
                Some((start, len)) if *start + *len == at => *len += block,
                _ => ranges.push((at, block)),
            }
        }
        ranges
    }
}

/// What giving free pages back to the file system did.
#[derive(Debug, Default)]
pub struct GiveBack {
    /// Bytes the file's allocation shrank by through punched holes.
    pub punched_bytes: u64,
    /// Bytes cut off the file's free tail.
    pub truncated_bytes: u64,
    /// The first failure; what failed leaves blocks allocated (until the
    /// file is loaded again), nothing else.
    pub error: Option<std::io::Error>,
    /// Time spent.
    pub time: Duration,
}

/// What a committed checkpoint left to give back: byte ranges to punch
/// and the length to cut the file to.
#[derive(Debug, Default)]
struct Pending {
    punch: Vec<(u64, u64)>,
    cut_to: Option<u64>,
}

impl Pending {
    fn apply(&mut self, file: &dyn StorageFile) -> GiveBack {
        let started = Instant::now();
        let mut done = GiveBack::default();
        if let Some(keep) = self.cut_to.take() {
            match file.len() {
                Ok(len) if len > keep => match file.set_len(keep) {
                    Ok(()) => done.truncated_bytes = len - keep,
                    Err(e) => done.error = Some(e),
                },
                Ok(_) => {}
                Err(e) => done.error = Some(e),
            }
        }
        for (offset, len) in std::mem::take(&mut self.punch) {
            if done.error.is_some() {
                break;
            }
            match file.punch_hole(offset, len) {
                Ok(n) => done.punched_bytes += n,
                Err(e) => done.error = Some(e),
            }
        }
        done.time = started.elapsed();
        done
    }
}

/// The free pages the last committed checkpoint of a tree left to give
/// back to the file system, shared between the tree and the caller of
/// [`FlexTree::checkpoint_report`](crate::FlexTree::checkpoint_report),
/// which may give them back after releasing its own locks.
///
/// Safe whenever it runs: the next checkpoint gives back whatever is still
/// pending before it takes any free page, under the same lock, so a page
/// is never punched after a checkpoint wrote into it.
#[derive(Clone, Debug)]
pub struct FreePages {
    pending: Arc<Mutex<Pending>>,
}

impl FreePages {
    /// Truncates `file` (the tree's file) to the pages the committed
    /// version needs and punches the whole free blocks; nothing when that
    /// was done already.
    pub fn give_back(&self, file: &dyn StorageFile) -> GiveBack {
        self.pending.lock().apply(file)
    }
}

/// A tree's [`FreePages`]; a copy of a tree starts with none pending (what
/// the original had pending stays allocated until the file is loaded).
#[derive(Debug, Default)]
pub(crate) struct PendingGiveBack(FreePages);

impl Default for FreePages {
    fn default() -> Self {
        FreePages {
            pending: Arc::new(Mutex::new(Pending::default())),
        }
    }
}

impl Clone for PendingGiveBack {
    fn clone(&self) -> Self {
        PendingGiveBack::default()
    }
}

impl PendingGiveBack {
    /// Gives back what is still pending (before a checkpoint allocates).
    pub fn drain(&self, file: &dyn StorageFile) -> GiveBack {
        self.0.give_back(file)
    }

    /// Records what the checkpoint that just committed leaves free: the
    /// file keeps `keep` pages, and the whole free blocks `candidates`
    /// touch are punched. Returns the shared handle.
    pub fn set(&self, map: &FreePageMap, candidates: &[u32], keep: u32) -> FreePages {
        let mut p = self.0.pending.lock();
        p.punch = map.punch_ranges(candidates, keep);
        p.cut_to = Some(u64::from(keep) * PAGE_SIZE as u64);
        self.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn used_len_is_one_past_the_highest_used_page() {
        let mut m = FreePageMap::new(130);
        assert_eq!(m.used_len(2), 130);
        m.insert_all(&[129, 128, 127, 5]);
        assert_eq!(m.used_len(2), 127);
        let all: Vec<u32> = (2..130).collect();
        m.insert_all(&all);
        assert_eq!(m.used_len(2), 2, "header slots stay");
        assert_eq!(FreePageMap::new(64).used_len(2), 64);
        let mut m = FreePageMap::new(64);
        m.insert_all(&[63, 200]);
        assert_eq!(m.used_len(2), 63);
    }

    #[test]
    fn punch_ranges_take_whole_free_blocks_only() {
        let mut m = FreePageMap::new(20);
        // Blocks: 1 = pages 2,3; 2 = 4,5; 3 = 6,7; 5 = 10,11.
        m.insert_all(&[2, 3, 4, 5, 6, 10, 11, 13]);
        // Page 7 is used: block 3 stays; 13's buddy 12 is used.
        let r = m.punch_ranges(&[2, 5, 6, 11, 13], 20);
        assert_eq!(r, vec![(4096, 2 * 4096), (5 * 4096, 4096)]);
        // Only blocks a candidate is in.
        assert_eq!(m.punch_ranges(&[10], 20), vec![(5 * 4096, 4096)]);
        // Nothing at or past `keep`.
        assert_eq!(m.punch_ranges(&[10, 11], 11), vec![]);
        // Block 0 holds the header slots, never free.
        assert_eq!(m.punch_ranges(&[0, 1], 20), vec![]);
    }
}
