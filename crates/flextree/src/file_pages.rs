//! The tree's relation to its tree file: which pages the file holds, which
//! are free for the next checkpoint, and which the committed version still
//! references although the tree no longer uses them. Held by `FlexTree`
//! behind its persist mutex and updated by `checkpoint` (its own file, so
//! that the tree and the checkpoint code each depend on this one and not on
//! each other).
//!
//! Invariants: a page is in at most one of `free` and `released`; page 0
//! (a header slot, standing for "never written") is never released; pages in
//! `released` become free only after the next header is durable; every page
//! of `unpunched` is in `free` or was allocated since (a checkpoint filters
//! it against the free pages before punching), and a free page not in
//! `unpunched` reads as zeros or shares its file-system block with a page in
//! use.

use crate::free_page_map::PendingGiveBack;

/// The tree's relation to its tree file (behind `FlexTree::persist`).
#[derive(Clone, Debug, Default)]
pub(crate) struct FilePages {
    /// Whether the tree was loaded from, or checkpointed into, a file.
    pub bound: bool,
    /// Pages the file holds (header slots included).
    pub page_count: u32,
    /// Pages the committed version does not reference.
    pub free: Vec<u32>,
    /// Pages the committed version references and the tree no longer uses.
    pub released: Vec<u32>,
    /// Free pages that may still occupy disk blocks: the next checkpoint
    /// punches the whole blocks among them that hold only free pages.
    pub unpunched: Vec<u32>,
    /// What the last checkpoint left to give back to the file system.
    pub give_back: PendingGiveBack,
}

impl FilePages {
    /// Notes that the tree no longer uses `page` (0: a node never written).
    pub fn release(&mut self, page: u32) {
        if page != 0 {
            self.released.push(page);
        }
    }

    /// Bytes the page lists hold.
    pub fn memory_usage(&self) -> usize {
        (self.free.capacity() + self.released.capacity() + self.unpunched.capacity()) * 4
    }
}
