//! A frozen copy of a space's index, for readers that must never wait for
//! the space's writer.
//!
//! A [`Snapshot`] holds a copy of the extent index and of the table of
//! segment buffers as they were when it was taken, and a grace-period
//! registration for its whole life. Its reads translate offsets against the
//! copy, with no lock of the space, and copy bytes from the data file or
//! from the segment buffers it holds.
//!
//! Invariants:
//! - The copy is taken under the space's read lock, so it is one state
//!   between mutations. It shares the space's index nodes
//!   (`FlexTree::share`: O(node blocks), no node copied) and never waits
//!   for a running checkpoint. The space's later mutations copy a node
//!   block before writing into one a snapshot shares, so the snapshot's
//!   nodes never change; what it costs on top of the space's index is the
//!   blocks rewritten since ([`Snapshot::index_bytes`]).
//! - No segment the copy maps into is reused while the snapshot lives: it
//!   registered as a reader before any segment it maps could be freed, and
//!   a freed segment waits for every such reader (`grace`). So the bytes a
//!   snapshot reads are those of the state it copied.
//! - Segment buffers the snapshot holds are never recycled while it holds
//!   them (recycling needs the only handle), and the bytes of a buffer that
//!   the copy maps were appended before the copy and never change.
//! - A snapshot delays the reuse of physical space freed after it was
//!   taken: keep snapshots short-lived (the layer above replaces its
//!   snapshot at each of its commits). A mutation that finds no free space
//!   waits for readers for a while and then fails with `NoSpace`.

use std::sync::Arc;

use flextree::FlexTree;

use crate::error::Result;
use crate::grace::OwnedReadGuard;
use crate::read::{self, ReadPlan};
use crate::segments::segbuf::SegBuf;
use crate::space::{FlexSpace, SpaceInner};

/// Where the memory of one extent index (the space's, a snapshot's copy or
/// a spare) goes: nodes in the index, nodes on its free lists, arena slots
/// never handed out; and how full its leaves are. For diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IndexMemory {
    /// Bytes held, shared with other indexes or not (what
    /// `Stats::index_bytes` counts for the space's index).
    pub held_bytes: u64,
    /// Bytes held that the space's own index does not share (for a
    /// snapshot, what [`Snapshot::index_bytes`] counts; for the space's
    /// index, `held_bytes`).
    pub own_bytes: u64,
    /// Bytes of the nodes in the index.
    pub tree_bytes: u64,
    /// Bytes of the nodes on the free lists.
    pub free_bytes: u64,
    /// Bytes of arena slots never handed out.
    pub unused_bytes: u64,
    /// Leaves in the index.
    pub leaves: u64,
    /// Leaf entries (extents and holes).
    pub extents: u64,
    /// Entries over the leaves' capacity.
    pub leaf_fill: f64,
}

impl IndexMemory {
    fn of(tree: &FlexTree, own_bytes: u64) -> IndexMemory {
        let m = tree.node_memory();
        IndexMemory {
            held_bytes: m.held_bytes,
            own_bytes,
            tree_bytes: m.tree_bytes(),
            free_bytes: m.free_bytes(),
            unused_bytes: m.unused_slot_bytes,
            leaves: m.leaves,
            extents: m.extents,
            leaf_fill: m.leaf_fill(),
        }
    }
}

/// A read-only view of a space as of one moment (see the module docs).
pub struct Snapshot {
    pub(crate) tree: FlexTree,
    pub(crate) resident: Vec<Option<Arc<SegBuf>>>,
    /// The user metadata words as of the snapshot.
    pub(crate) user_meta: [u64; 3],
    pub(crate) space: Arc<SpaceInner>,
    _guard: OwnedReadGuard,
}

impl FlexSpace {
    /// Where the memory of the space's own extent index goes (takes the
    /// read lock briefly; O(1)).
    pub fn index_memory(&self) -> IndexMemory {
        let st = self.s.state.read();
        IndexMemory::of(&st.tree, st.tree.node_memory_usage() as u64)
    }

    /// A read-only view of the space as it is now, sharing the space's
    /// index nodes (see the module docs). O(node blocks): about one
    /// reference per 2 MiB of index; holds the space's read lock meanwhile.
    pub fn snapshot(&self) -> Result<Snapshot> {
        let st = self.s.state.read();
        let guard = self.s.readers.enter_owned(st.seg.epoch());
        Ok(Snapshot {
            tree: st.tree.share(),
            resident: st.resident_table().to_vec(),
            user_meta: st.user_meta,
            space: self.s.clone(),
            _guard: guard,
        })
    }
}

impl Snapshot {
    /// The length of the space as of the snapshot.
    pub fn len(&self) -> u64 {
        self.tree.len()
    }

    /// Bytes of memory the snapshot's copy of the extent index holds on
    /// top of the space's own index: the node blocks the space rewrote
    /// since the snapshot, and the snapshot's tables (takes the space's
    /// read lock briefly).
    pub fn index_bytes(&self) -> u64 {
        let st = self.space.state.read();
        self.tree.node_memory_not_shared_with(&st.tree) as u64
    }

    /// Where the memory of the snapshot's copy of the extent index goes
    /// (takes the space's read lock briefly).
    pub fn index_memory(&self) -> IndexMemory {
        IndexMemory::of(&self.tree, self.index_bytes())
    }

    /// The user metadata words as of the snapshot
    /// ([`FlexSpace::user_meta`]).
    pub fn user_meta(&self) -> [u64; 3] {
        self.user_meta
    }

    /// Whether the space was empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Plans a read of up to `len` bytes at `offset` as of the snapshot, as
    /// [`FlexSpace::plan_read`] does for the live space, taking no lock.
    pub fn plan_read(&self, offset: u64, len: u64) -> Result<ReadPlan<'_>> {
        read::plan_in(
            &self.tree,
            &self.resident,
            offset,
            len,
            self.space.source(),
            None,
        )
    }
}
