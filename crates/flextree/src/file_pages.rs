//! The tree's relation to its tree file: which pages the file holds, which
//! are free for the next checkpoint, and which the committed version still
//! references although the tree no longer uses them. Held by `FlexTree`
//! behind its persist mutex and updated by `checkpoint` (its own file, so
//! that the tree and the checkpoint code each depend on this one and not on
//! each other).
//!
//! Pages hold nodes addressed by *node id* (`page << 5 | slot`, see
//! `leaf_pack`): a leaf page holds up to 32 leaves, an internal page one
//! internal node.
//!
//! Invariants: a page is in at most one of `free` and `released` (which
//! holds node ids); node id 0 (page 0, a header slot, standing for "never
//! written") is never released; `live[p]` counts the nodes of page `p` the
//! committed version references and `records[p]` the nodes the page holds
//! (0 for a free page), so a page is free exactly when its `live` is 0; pages in
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
    /// Per page: nodes of the page the committed version references.
    pub live: Vec<u8>,
    /// Per page: nodes the page holds.
    pub records: Vec<u8>,
    /// The file was loaded from format 1: the other header slot may hold a
    /// format-1 header, which the first checkpoint invalidates.
    pub legacy_slot: bool,
}

impl FilePages {
    /// Notes that the tree no longer uses node `id` (0: a node never
    /// written).
    pub fn release(&mut self, id: u32) {
        if id != 0 {
            self.released.push(id);
        }
    }

    /// Bytes the page lists hold.
    pub fn memory_usage(&self) -> usize {
        (self.free.capacity() + self.released.capacity() + self.unpunched.capacity()) * 4
            + self.live.capacity()
            + self.records.capacity()
    }
}
