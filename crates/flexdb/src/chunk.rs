//! Large zeroed memory chunks backed by transparent huge pages where the
//! kernel offers them.
//!
//! Random walks over hundreds of megabytes (the skip list of a full
//! MemTable) miss the TLB on almost every step with 4 KiB pages, and on a
//! virtual machine each miss is a two-dimensional page walk; 2 MiB pages cut
//! those misses by 512 (docs/DESIGN.md has the measurement).
//!
//! Invariants: a `Chunk` owns `len` zeroed bytes at `ptr`, aligned to
//! `ALIGN`, until it is dropped; the memory is never moved.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// Alignment (and preferred size) of a chunk: one huge page.
pub const ALIGN: usize = 2 << 20;

/// An owned, zeroed, huge-page-aligned block of memory.
pub struct Chunk {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a `Chunk` is a uniquely owned block of plain bytes.
unsafe impl Send for Chunk {}
// SAFETY: `Chunk` hands out only raw pointers; synchronizing access to the
// bytes is the owner's job (the skip list's invariants).
unsafe impl Sync for Chunk {}

impl Chunk {
    /// A zeroed chunk of at least `len` bytes (rounded up to `ALIGN`).
    /// Aborts like any allocation when memory is exhausted.
    pub fn new(len: usize) -> Chunk {
        let size = len.max(1).next_multiple_of(ALIGN);
        let layout = match Layout::from_size_align(size, ALIGN) {
            Ok(l) => l,
            Err(_) => std::alloc::handle_alloc_error(Layout::new::<u8>()),
        };
        // SAFETY: `layout` has a nonzero size.
        let p = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(p) else {
            std::alloc::handle_alloc_error(layout)
        };
        #[cfg(target_os = "linux")]
        // SAFETY: advice on a range we own; it cannot change its contents
        // (the pages are zero either way) and failure is harmless.
        unsafe {
            libc::madvise(p.cast(), size, libc::MADV_HUGEPAGE);
        }
        Chunk { ptr, layout }
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes in the chunk.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_aligned_and_writable() {
        let c = Chunk::new(100);
        assert_eq!(c.len(), ALIGN);
        assert_eq!(c.as_ptr() as usize % ALIGN, 0);
        // SAFETY: within the chunk's bytes, which we own.
        unsafe {
            assert!(std::slice::from_raw_parts(c.as_ptr(), c.len())
                .iter()
                .all(|&b| b == 0));
            *c.as_ptr().add(ALIGN - 1) = 7;
            assert_eq!(*c.as_ptr().add(ALIGN - 1), 7);
        }
        let big = Chunk::new(3 * ALIGN + 1);
        assert_eq!(big.len(), 4 * ALIGN);
    }
}
