//! The `array` baseline: extents in one sorted vector with absolute offsets.
//!
//! Invariant: `ext` is sorted by offset and contiguous from 0. An insert is a
//! binary search, a `Vec::insert` and an update of every later offset: O(N).

use crate::index::{clone_with_capacity, ExtentIndex};

#[derive(Clone, Copy)]
struct Ext {
    off: u64,
    len: u64,
    addr: u64,
}

/// A sorted array of extents.
#[derive(Default)]
pub struct SortedArray {
    ext: Vec<Ext>,
    total: u64,
}

impl SortedArray {
    /// An empty array.
    pub fn new() -> Self {
        Self::default()
    }

    /// Index of the extent holding `offset < total`.
    fn find(&self, offset: u64) -> usize {
        self.ext.partition_point(|e| e.off <= offset) - 1
    }
}

impl ExtentIndex for SortedArray {
    fn clone_box(&self) -> Box<dyn ExtentIndex> {
        Box::new(SortedArray {
            ext: clone_with_capacity(&self.ext),
            total: self.total,
        })
    }
    fn name(&self) -> &'static str {
        "array"
    }
    fn len(&self) -> u64 {
        self.total
    }
    fn extent_count(&self) -> u64 {
        self.ext.len() as u64
    }
    fn memory_usage(&self) -> usize {
        self.ext.capacity() * size_of::<Ext>()
    }
    fn insert(&mut self, offset: u64, len: u64, addr: u64) {
        let new = Ext {
            off: offset,
            len,
            addr,
        };
        let at = if offset == self.total {
            self.ext.len()
        } else {
            let i = self.find(offset);
            let e = self.ext[i];
            if e.off == offset {
                i
            } else {
                let d = offset - e.off;
                self.ext[i].len = d;
                let right = Ext {
                    off: offset,
                    len: e.len - d,
                    addr: e.addr + d,
                };
                self.ext.insert(i + 1, right);
                i + 1
            }
        };
        for e in &mut self.ext[at..] {
            e.off += len;
        }
        self.ext.insert(at, new);
        self.total += len;
    }
    fn lookup(&self, offset: u64) -> Option<u64> {
        let e = self.ext[self.find(offset)];
        Some(e.addr + (offset - e.off))
    }
    fn range(&self, offset: u64, len: u64, out: &mut Vec<(u64, u64)>) {
        out.clear();
        let end = offset + len;
        for e in &self.ext[self.find(offset)..] {
            let from = e.off.max(offset);
            let to = (e.off + e.len).min(end);
            out.push((e.addr + (from - e.off), to - from));
            if to == end {
                break;
            }
        }
    }
}
