//! Public value types describing extents and the pieces of a range query.
//!
//! Invariant: an extent or piece with `addr == None` is a hole (an unmapped
//! range); every mapped physical range lies within `0..=MAX_ADDR`.

/// The largest physical address an extent can map (48 bits; the all-ones
/// value marks holes in the leaf encoding).
pub const MAX_ADDR: u64 = (1 << 48) - 2;
/// The largest length of one leaf entry. Leaf lengths are 64-bit, so any
/// extent that fits in the space fits in one entry.
pub const MAX_EXTENT_LEN: u64 = MAX_SPACE;
/// The largest size of an address space.
pub const MAX_SPACE: u64 = 1 << 63;

/// One extent of the address space: `len` logical bytes starting at `offset`
/// mapped to physical bytes starting at `addr` (or a hole).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Extent {
    /// Logical offset of the first byte.
    pub offset: u64,
    /// Length in bytes (never zero).
    pub len: u64,
    /// Physical address of the first byte, or `None` for a hole.
    pub addr: Option<u64>,
    /// The 16-bit tag of the extent (0 unless set).
    pub tag: u16,
}

/// One piece of a range query: `len` bytes at physical `addr` (or a hole).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Piece {
    /// Physical address of the piece, or `None` for a hole.
    pub addr: Option<u64>,
    /// Length in bytes (never zero).
    pub len: u64,
}
