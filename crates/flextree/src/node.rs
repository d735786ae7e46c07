//! In-memory FlexTree nodes and the arena that owns them.
//!
//! Invariants (the *normal form* every operation restores before it returns):
//! - A leaf's entries are contiguous: `loff[0] == 0` and
//!   `loff[i + 1] == loff[i] + entry_len(i)`. Partial offsets are therefore
//!   relative to the leaf's own start and bounded by its span, so they never
//!   overflow and never need a separate rebase pass.
//! - An internal node's `shift[0] == 0` and `shift[i]` is the start of child
//!   `i` relative to the node's start, strictly increasing. The shift value of
//!   a child pointer doubles as the pivot that separates it from its left
//!   sibling, so an internal node stores one array, not two.
//! - The effective offset of any entry is the sum of the shift values on its
//!   search path plus its partial offset (§3.1 of the paper).
//! - `dirty` is set on every node modified since the last checkpoint and on
//!   all of its ancestors, so a clean node roots a clean subtree.
//! - `page` is the tree-file page holding the node's last checkpointed image
//!   (0 when it has none).

/// Entries per leaf node.
pub(crate) const LEAF_CAP: usize = 128;
/// Children per internal node.
pub(crate) const INTERNAL_CAP: usize = 128;

/// Bits of a packed address word that hold the physical address.
const ADDR_BITS: u32 = 48;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;
/// Address words whose bits 32..48 are all ones denote holes; their low 32
/// bits hold the high half of the hole's length.
const HOLE_MARK: u64 = 0xFFFF << 32;

/// Packs a mapped extent's address and tag.
#[inline]
pub(crate) fn pack_mapped(addr: u64, tag: u16) -> u64 {
    addr | (u64::from(tag) << ADDR_BITS)
}

/// Packs a hole of length `len` (its high half) and tag.
#[inline]
pub(crate) fn pack_hole(len: u64, tag: u16) -> u64 {
    HOLE_MARK | (len >> 32) | (u64::from(tag) << ADDR_BITS)
}

/// Whether a packed word denotes a hole.
#[inline]
pub(crate) fn is_hole(word: u64) -> bool {
    word & HOLE_MARK == HOLE_MARK
}

/// The tag of a packed word.
#[inline]
pub(crate) fn tag_of(word: u64) -> u16 {
    (word >> ADDR_BITS) as u16
}

/// The word with its tag replaced.
#[inline]
pub(crate) fn with_tag(word: u64, tag: u16) -> u64 {
    (word & ADDR_MASK) | (u64::from(tag) << ADDR_BITS)
}

/// The physical address of a packed word, `None` for a hole.
#[inline]
pub(crate) fn addr_of(word: u64) -> Option<u64> {
    if is_hole(word) {
        None
    } else {
        Some(word & ADDR_MASK)
    }
}

/// The length of an entry from its low 32 bits and packed word.
#[inline]
pub(crate) fn entry_len(len_lo: u32, word: u64) -> u64 {
    if is_hole(word) {
        ((word & 0xFFFF_FFFF) << 32) | u64::from(len_lo)
    } else {
        u64::from(len_lo)
    }
}

/// The packed word and low length for an extent of `len` bytes at `addr`
/// (`None`: hole) with `tag`. Mapped lengths must fit in 32 bits.
#[inline]
pub(crate) fn encode(len: u64, addr: Option<u64>, tag: u16) -> (u32, u64) {
    match addr {
        Some(a) => (len as u32, pack_mapped(a, tag)),
        None => (len as u32, pack_hole(len, tag)),
    }
}

/// A leaf node: up to `LEAF_CAP` extents in structure-of-arrays layout.
#[derive(Clone)]
pub(crate) struct Leaf {
    pub count: usize,
    pub dirty: bool,
    pub page: u32,
    /// Partial offsets, relative to the leaf's start.
    pub loff: [u64; LEAF_CAP],
    /// Low 32 bits of each entry's length.
    pub len: [u32; LEAF_CAP],
    /// Packed address (or hole length high half) and tag.
    pub word: [u64; LEAF_CAP],
}

impl Leaf {
    pub fn new() -> Self {
        Leaf {
            count: 0,
            dirty: true,
            page: 0,
            loff: [0; LEAF_CAP],
            len: [0; LEAF_CAP],
            word: [0; LEAF_CAP],
        }
    }

    /// Length of entry `i`.
    #[inline]
    pub fn elen(&self, i: usize) -> u64 {
        entry_len(self.len[i], self.word[i])
    }

    /// The logical bytes the leaf covers.
    #[inline]
    pub fn span(&self) -> u64 {
        match self.count {
            0 => 0,
            n => self.loff[n - 1] + self.elen(n - 1),
        }
    }

    /// Number of entries whose partial offset is `<= rel` (the entry holding
    /// `rel` is the one before that index).
    #[inline]
    pub fn upper_bound(&self, rel: u64) -> usize {
        upper_bound(&self.loff[..self.count], rel)
    }

    /// Sets entry `i` to `len` bytes at `addr` with `tag` (offset untouched).
    #[inline]
    pub fn set_entry(&mut self, i: usize, len: u64, addr: Option<u64>, tag: u16) {
        let (lo, word) = encode(len, addr, tag);
        self.len[i] = lo;
        self.word[i] = word;
    }

    /// Opens a gap of `n` entries at `at`, moving the entries after it.
    pub fn open_gap(&mut self, at: usize, n: usize) {
        let c = self.count;
        self.loff.copy_within(at..c, at + n);
        self.len.copy_within(at..c, at + n);
        self.word.copy_within(at..c, at + n);
        self.count = c + n;
    }

    /// Removes entries `at..at + n`.
    pub fn close_gap(&mut self, at: usize, n: usize) {
        let c = self.count;
        self.loff.copy_within(at + n..c, at);
        self.len.copy_within(at + n..c, at);
        self.word.copy_within(at + n..c, at);
        self.count = c - n;
    }

    /// Recomputes partial offsets from entry `from` on (contiguity).
    pub fn relink(&mut self, from: usize) {
        let mut off = if from == 0 {
            0
        } else {
            self.loff[from - 1] + self.elen(from - 1)
        };
        for i in from..self.count {
            self.loff[i] = off;
            off += self.elen(i);
        }
    }

    /// Adds `delta` to the partial offsets of entries `from..count`.
    #[inline]
    pub fn shift_from(&mut self, from: usize, delta: u64) {
        for o in &mut self.loff[from..self.count] {
            *o += delta;
        }
    }
}

/// An internal node: up to `INTERNAL_CAP` children with shift values.
#[derive(Clone)]
pub(crate) struct Internal {
    pub count: usize,
    pub dirty: bool,
    pub page: u32,
    /// Start of each child relative to this node's start.
    pub shift: [u64; INTERNAL_CAP],
    /// Arena ids of the children (leaves or internals by level).
    pub child: [u32; INTERNAL_CAP],
}

impl Internal {
    pub fn new() -> Self {
        Internal {
            count: 0,
            dirty: true,
            page: 0,
            shift: [0; INTERNAL_CAP],
            child: [0; INTERNAL_CAP],
        }
    }

    /// Index of the child covering relative offset `rel`.
    #[inline]
    pub fn child_index(&self, rel: u64) -> usize {
        upper_bound(&self.shift[1..self.count], rel)
    }

    /// Inserts a child at `at`.
    pub fn insert_child(&mut self, at: usize, shift: u64, child: u32) {
        let c = self.count;
        self.shift.copy_within(at..c, at + 1);
        self.child.copy_within(at..c, at + 1);
        self.shift[at] = shift;
        self.child[at] = child;
        self.count = c + 1;
    }

    /// Removes the child at `at`.
    pub fn remove_child(&mut self, at: usize) {
        let c = self.count;
        self.shift.copy_within(at + 1..c, at);
        self.child.copy_within(at + 1..c, at);
        self.count = c - 1;
    }

    /// Span of child `i` given this node's span.
    #[inline]
    pub fn child_span(&self, i: usize, span: u64) -> u64 {
        let end = if i + 1 < self.count {
            self.shift[i + 1]
        } else {
            span
        };
        end - self.shift[i]
    }

    /// Adds `delta` (wrapping, for negative deltas) to shifts after child `i`.
    #[inline]
    pub fn shift_after(&mut self, i: usize, delta: u64) {
        for s in &mut self.shift[i + 1..self.count] {
            *s = s.wrapping_add(delta);
        }
    }
}

/// Number of elements of the sorted slice that are `<= key`.
#[inline]
pub(crate) fn upper_bound(sorted: &[u64], key: u64) -> usize {
    sorted.partition_point(|&v| v <= key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_bound_matches_linear_count() {
        for n in 0..40u64 {
            let v: Vec<u64> = (0..n).map(|i| i * 3).collect();
            for key in 0..n * 3 + 3 {
                let want = v.iter().filter(|&&x| x <= key).count();
                assert_eq!(upper_bound(&v, key), want, "n={n} key={key}");
            }
        }
    }

    #[test]
    fn packing_round_trips() {
        let w = pack_mapped(crate::MAX_ADDR, 0xBEEF);
        assert_eq!(addr_of(w), Some(crate::MAX_ADDR));
        assert_eq!(tag_of(w), 0xBEEF);
        let (lo, h) = encode(1 << 62, None, 7);
        assert!(is_hole(h));
        assert_eq!(entry_len(lo, h), 1 << 62);
        assert_eq!(tag_of(h), 7);
        assert_eq!(tag_of(with_tag(h, 9)), 9);
        assert_eq!(entry_len(lo, with_tag(h, 9)), 1 << 62);
    }
}
