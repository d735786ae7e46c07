//! A chunked arena that owns the tree's nodes and hands out `u32` ids.
//!
//! Invariants: ids are dense (`0..len`); a node never moves once allocated,
//! because the arena grows by whole chunks instead of reallocating one
//! vector. Growth therefore never copies the tree (no latency spike on the
//! insert that crosses a power of two) and never holds twice the memory.

use std::ops::{Index, IndexMut};

const CHUNK_BITS: u32 = 8;
const CHUNK: usize = 1 << CHUNK_BITS;

/// Nodes of one kind, addressed by id.
#[derive(Clone, Default)]
pub(crate) struct Arena<T> {
    /// Fixed-size chunks: indexing one with `id % CHUNK` needs no bounds
    /// check.
    chunks: Vec<Box<[T; CHUNK]>>,
    len: usize,
}

impl<T: Clone> Arena<T> {
    pub fn new() -> Self {
        Arena {
            chunks: Vec::new(),
            len: 0,
        }
    }

    /// Number of ids handed out.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends `node` and returns its id.
    pub fn push(&mut self, node: T) -> u32 {
        let id = self.len;
        if id.is_multiple_of(CHUNK) {
            let chunk: Box<[T]> = vec![node.clone(); CHUNK].into_boxed_slice();
            match chunk.try_into() {
                Ok(chunk) => self.chunks.push(chunk),
                Err(_) => unreachable!("the vector holds exactly CHUNK nodes"),
            }
        }
        self.chunks[id >> CHUNK_BITS][id % CHUNK] = node;
        self.len += 1;
        id as u32
    }

    /// Drops every node.
    pub fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
    }

    /// Bytes of node memory held (whole chunks).
    pub fn memory_usage(&self) -> usize {
        self.chunks.len() * CHUNK * std::mem::size_of::<T>()
            + self.chunks.capacity() * std::mem::size_of::<Box<[T; CHUNK]>>()
    }
}

impl<T> Index<usize> for Arena<T> {
    type Output = T;
    #[inline(always)]
    fn index(&self, id: usize) -> &T {
        &self.chunks[id >> CHUNK_BITS][id % CHUNK]
    }
}

impl<T> IndexMut<usize> for Arena<T> {
    #[inline(always)]
    fn index_mut(&mut self, id: usize) -> &mut T {
        &mut self.chunks[id >> CHUNK_BITS][id % CHUNK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_dense_and_stable() {
        let mut a = Arena::new();
        for i in 0..1000u32 {
            assert_eq!(a.push(i * 3), i);
        }
        assert_eq!(a.len(), 1000);
        assert_eq!(a[999], 2997);
        a[5] = 7;
        assert_eq!(a[5], 7);
        assert!(a.memory_usage() >= 1000 * 4);
        a.clear();
        assert_eq!(a.len(), 0);
    }
}
