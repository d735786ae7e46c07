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
//!   between mutations. It holds the same extents as the space's index, in
//!   full nodes (a read-only copy needs no room for inserts), and never
//!   waits for a running checkpoint.
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

/// The memory of an ended snapshot's index copy, kept to be written over by
/// the next snapshot ([`FlexSpace::snapshot_reusing`]): memory the process
/// touched before costs far less to write than fresh memory. Opaque: the
/// layers above never see the extent index itself.
pub struct SpareIndex(FlexTree);

impl SpareIndex {
    /// Bytes of node memory the copy holds.
    pub fn memory_bytes(&self) -> usize {
        self.0.node_memory_usage()
    }

    /// Where the copy's memory goes.
    pub fn index_memory(&self) -> IndexMemory {
        IndexMemory::of(&self.0)
    }
}

/// Where the memory of one extent index (the space's, a snapshot's copy or
/// a spare) goes: nodes in the index, nodes on its free lists, arena slots
/// never handed out; and how full its leaves are. For diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IndexMemory {
    /// Bytes held (what `Stats::index_bytes` and
    /// [`Snapshot::index_bytes`] count).
    pub held_bytes: u64,
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
    fn of(tree: &FlexTree) -> IndexMemory {
        let m = tree.node_memory();
        IndexMemory {
            held_bytes: m.held_bytes,
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
    tree: FlexTree,
    resident: Vec<Option<Arc<SegBuf>>>,
    space: Arc<SpaceInner>,
    _guard: OwnedReadGuard,
}

impl FlexSpace {
    /// Where the memory of the space's own extent index goes (takes the
    /// read lock briefly; O(1)).
    pub fn index_memory(&self) -> IndexMemory {
        IndexMemory::of(&self.s.state.read().tree)
    }

    /// A read-only copy of the space's index as it is now. Copying takes
    /// time in proportion to the extents and holds the space's read lock
    /// meanwhile (mutations wait; readers do not). The copy packs the
    /// extents into full nodes (`FlexTree::copy_compacted_from`): about 16
    /// bytes an extent, where the space's own index, which keeps room in
    /// its nodes for inserts, holds more.
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.snapshot_reusing(None)
    }

    /// A snapshot as [`FlexSpace::snapshot`] takes, whose copy of the index
    /// is written into `spare` (the index of an earlier snapshot, from
    /// [`Snapshot::into_index`]) when given: memory the process touched
    /// before costs far less to write than fresh memory.
    pub fn snapshot_reusing(&self, spare: Option<SpareIndex>) -> Result<Snapshot> {
        let st = self.s.state.read();
        let guard = self.s.readers.enter_owned(st.seg.epoch());
        let mut tree = match spare {
            Some(SpareIndex(tree)) => tree,
            None => FlexTree::new(),
        };
        tree.copy_compacted_from(&st.tree);
        Ok(Snapshot {
            tree,
            resident: st.resident_table().to_vec(),
            space: self.s.clone(),
            _guard: guard,
        })
    }
}

impl Snapshot {
    /// Ends the snapshot (it no longer holds freed space back) and returns
    /// its copy of the index, for [`FlexSpace::snapshot_reusing`].
    pub fn into_index(self) -> SpareIndex {
        SpareIndex(self.tree)
    }

    /// The length of the space as of the snapshot.
    pub fn len(&self) -> u64 {
        self.tree.len()
    }

    /// Bytes of memory the snapshot's copy of the extent index holds.
    pub fn index_bytes(&self) -> u64 {
        self.tree.node_memory_usage() as u64
    }

    /// Where the memory of the snapshot's copy of the extent index goes.
    pub fn index_memory(&self) -> IndexMemory {
        IndexMemory::of(&self.tree)
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
