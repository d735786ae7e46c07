//! The interface the tree benchmark drives, implemented by FlexTree and by
//! the baselines.
//!
//! Invariant: every implementation maps the same logical space the same way
//! after the same operations (the baselines' unit tests check this against
//! FlexTree), so their timings compare equal work.

/// `v` cloned with the same spare capacity: a copy of a structure then
/// grows its vectors when the original would, so a phase timed on the copy
/// pays the same reallocations (`Vec::clone` keeps no spare room, and the
/// first push into the copy of a 10^7-extent baseline would reallocate
/// hundreds of megabytes).
pub fn clone_with_capacity<T: Clone>(v: &Vec<T>) -> Vec<T> {
    let mut c = Vec::with_capacity(v.capacity());
    c.extend_from_slice(v);
    c
}

/// An extent index over a byte-granular logical space.
pub trait ExtentIndex {
    /// The benchmark's name for the structure.
    fn name(&self) -> &'static str;
    /// Size of the logical space.
    fn len(&self) -> u64;
    /// Number of extents held.
    fn extent_count(&self) -> u64;
    /// Bytes of memory held by the structure.
    fn memory_usage(&self) -> usize;
    /// An independent copy (the benchmark repeats mutating phases on
    /// copies of one built structure).
    fn clone_box(&self) -> Box<dyn ExtentIndex>;
    /// Inserts `len` bytes mapped to `addr` at `offset <= len()`, shifting
    /// later bytes.
    fn insert(&mut self, offset: u64, len: u64, addr: u64);
    /// Appends `len` bytes mapped to `addr`.
    fn append(&mut self, len: u64, addr: u64) {
        self.insert(self.len(), len, addr);
    }
    /// The physical address of the byte at `offset < len()`.
    fn lookup(&self, offset: u64) -> Option<u64>;
    /// Collects the physical pieces of `offset..offset + len` into `out`
    /// (cleared first) as `(address, length)`.
    fn range(&self, offset: u64, len: u64, out: &mut Vec<(u64, u64)>);
}

impl ExtentIndex for flextree::FlexTree {
    fn name(&self) -> &'static str {
        "flextree"
    }
    fn len(&self) -> u64 {
        flextree::FlexTree::len(self)
    }
    fn extent_count(&self) -> u64 {
        flextree::FlexTree::extent_count(self)
    }
    fn memory_usage(&self) -> usize {
        flextree::FlexTree::memory_usage(self)
    }
    fn clone_box(&self) -> Box<dyn ExtentIndex> {
        Box::new(self.clone())
    }
    fn insert(&mut self, offset: u64, len: u64, addr: u64) {
        // The benchmark only generates valid arguments.
        flextree::FlexTree::insert(self, offset, len, addr).expect("valid insert");
    }
    fn lookup(&self, offset: u64) -> Option<u64> {
        flextree::FlexTree::lookup(self, offset).expect("valid lookup")
    }
    fn range(&self, offset: u64, len: u64, out: &mut Vec<(u64, u64)>) {
        out.clear();
        let end = offset + len;
        for e in self.extents_from(offset).expect("valid range") {
            let from = e.offset.max(offset);
            let to = (e.offset + e.len).min(end);
            out.push((
                e.addr.map_or(u64::MAX, |a| a + (from - e.offset)),
                to - from,
            ));
            if to == end {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_keep_the_spare_capacity() {
        let mut v = Vec::with_capacity(100);
        v.extend([1u64, 2, 3]);
        let c = clone_with_capacity(&v);
        assert_eq!(c, v);
        assert!(c.capacity() >= 100);
    }
}
