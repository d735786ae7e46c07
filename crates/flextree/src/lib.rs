//! FlexTree: an extent index whose insert-range and collapse-range cost
//! O(log N) wherever they happen (§3 of the FlexSpace paper).
//!
//! The tree maps a byte-granular logical address space `0..len()` onto
//! physical addresses. Every byte of the space belongs to exactly one extent;
//! unmapped ranges are explicit holes, so the extents of the leaf level are
//! always contiguous. Leaf entries keep *partial* offsets and every child
//! pointer keeps a *shift value*; the effective offset of an entry is its
//! partial offset plus the shift values on its search path, so shifting every
//! extent after a point touches only the nodes on one root-to-leaf path.
//!
//! ```
//! use flextree::FlexTree;
//! let mut tree = FlexTree::new();
//! tree.append(100, 0).unwrap();        // bytes 0..100 at physical 0
//! tree.insert(50, 10, 4096).unwrap();  // 10 new bytes in the middle
//! assert_eq!(tree.len(), 110);
//! assert_eq!(tree.lookup(55).unwrap(), Some(4096 + 5));
//! assert_eq!(tree.lookup(60).unwrap(), Some(50)); // shifted by 10
//! tree.collapse(50, 10).unwrap();
//! assert_eq!(tree.lookup(60).unwrap(), Some(60));
//! ```

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod arena;
mod checkpoint;
mod compact;
mod cursor;
mod error;
mod extent;
mod file_pages;
mod free_page_map;
mod invariants;
mod leaf_pack;
mod node;
mod shared;
mod storage;
mod tree;

#[cfg(test)]
mod sanity_tests;

pub use checkpoint::{
    Checkpoint, CheckpointReport, FreePages, GiveBack, CHECKPOINT_BATCH_BYTES, MAX_META,
};
pub use compact::NodeMemory;
pub use cursor::Extents;
pub use error::{Error, Result};
pub use extent::{Extent, Piece, MAX_ADDR, MAX_EXTENT_LEN, MAX_SPACE};
pub use storage::{copy_through_buffer, MemFile, StorageFile, DIRECT_ALIGN};
pub use tree::FlexTree;
