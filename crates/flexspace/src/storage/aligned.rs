//! A byte buffer whose start is aligned to `DIRECT_ALIGN`, for O_DIRECT
//! writes of the segment buffer.
//!
//! Invariant: the buffer is a whole number of aligned blocks; `as_bytes`
//! views exactly those blocks.

use flextree::DIRECT_ALIGN;

#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct Block([u8; DIRECT_ALIGN]);

/// An aligned, zero-initialized byte buffer.
pub struct AlignedBuf {
    blocks: Vec<Block>,
}

impl AlignedBuf {
    /// A buffer of `len` bytes (rounded up to whole blocks), all zero.
    ///
    /// The memory comes from `alloc_zeroed` (fresh zero pages for a large
    /// buffer), not from copying a zero block into every slot: a segment
    /// buffer is made under the space's write lock, and writing 4 MiB there
    /// would hold it for a millisecond.
    pub fn zeroed(len: usize) -> Self {
        let n = len.div_ceil(DIRECT_ALIGN).max(1);
        let Ok(layout) = std::alloc::Layout::array::<Block>(n) else {
            return AlignedBuf {
                blocks: vec![Block([0; DIRECT_ALIGN]); n],
            };
        };
        // SAFETY: `layout` has a nonzero size (n >= 1 blocks). The pointer
        // is checked for null; the memory is zeroed, and an all-zero `Block`
        // is a valid value, so `n` initialized blocks live there. It was
        // allocated by the global allocator with exactly the layout a
        // `Vec<Block>` of capacity `n` uses, so the vector may own and free
        // it.
        let blocks = unsafe {
            let ptr = std::alloc::alloc_zeroed(layout).cast::<Block>();
            if ptr.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            Vec::from_raw_parts(ptr, n, n)
        };
        AlignedBuf { blocks }
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `Block` is `repr(C)` around a byte array with no padding
        // (its size equals its alignment), so the vector's blocks are one
        // contiguous, initialized run of `len * DIRECT_ALIGN` bytes.
        unsafe {
            std::slice::from_raw_parts(
                self.blocks.as_ptr().cast::<u8>(),
                self.blocks.len() * DIRECT_ALIGN,
            )
        }
    }

    /// The bytes, mutably.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`; the exclusive borrow of `self` makes the
        // byte view the only access to the blocks.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.blocks.as_mut_ptr().cast::<u8>(),
                self.blocks.len() * DIRECT_ALIGN,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_writable() {
        let mut b = AlignedBuf::zeroed(10_000);
        assert_eq!(b.as_bytes().len(), 3 * DIRECT_ALIGN);
        assert_eq!(b.as_bytes().as_ptr() as usize % DIRECT_ALIGN, 0);
        assert!(b.as_bytes().iter().all(|&x| x == 0));
        b.as_bytes_mut()[9999] = 7;
        assert_eq!(b.as_bytes()[9999], 7);
    }
}
