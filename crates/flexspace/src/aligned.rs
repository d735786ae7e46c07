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
    pub fn zeroed(len: usize) -> Self {
        AlignedBuf {
            blocks: vec![Block([0; DIRECT_ALIGN]); len.div_ceil(DIRECT_ALIGN)],
        }
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
