//! Public value types describing extents and the pieces of a range query.
//!
//! Invariant: an extent or piece with `addr == None` is a hole (an unmapped
//! range); every mapped physical range lies within `0..=MAX_ADDR`.

/// The largest physical address an extent can map. Leaf entries keep 48-bit
/// addresses; the top 2^32 values of that range mark holes (a hole keeps the
/// high half of its 64-bit length there), so mapped data lies below.
pub const MAX_ADDR: u64 = (1 << 48) - (1 << 32) - 1;
/// The largest length of one mapped leaf entry; longer mapped inserts become
/// several entries (holes of any length take one entry).
pub const MAX_EXTENT_LEN: u64 = u32::MAX as u64;
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
