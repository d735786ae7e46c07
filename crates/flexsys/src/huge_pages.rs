//! Memory mapped for one owner on a huge-page boundary and advised to use
//! transparent huge pages before anything touches it.
//!
//! Memory taken from an allocator may have been faulted in already, as
//! 4 KiB pages, and those stay small whatever advice comes after; a
//! mapping of its own, advised first, can get a 2 MiB page at its first
//! touch. Used for the tree's node blocks (`arena`) and for FlexDB's
//! MemTable chunks.
//!
//! Invariants: `map(size)` returns the start of `size` bytes (rounded up
//! to whole pages) of zeroed memory aligned to `HUGE_PAGE`, owned by the
//! caller until `unmap(ptr, size)` with the same `size`; elsewhere than
//! Linux, and under Miri, it maps nothing and returns `None`. `advise` is
//! only a hint and never changes memory's contents.

use std::ptr::NonNull;

/// Size and alignment of a transparent huge page (x86-64, and the usual size
/// elsewhere; on a system with other sizes the advice merely does less).
pub const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back `bytes` bytes at `ptr` with transparent huge
/// pages (Linux; elsewhere, and under Miri, nothing). Advice only: failure
/// changes nothing.
#[cfg(all(target_os = "linux", not(miri)))]
pub fn advise(ptr: *mut u8, bytes: usize) {
    // SAFETY: madvise(MADV_HUGEPAGE) only changes how the kernel backs the
    // range, never its contents or validity; the range is an allocation we
    // own, starting on a page boundary. An error (no THP support) leaves the
    // memory as it was.
    unsafe {
        libc::madvise(ptr.cast(), bytes, libc::MADV_HUGEPAGE);
    }
}

/// Asks for huge pages (nothing to ask for here).
#[cfg(not(all(target_os = "linux", not(miri))))]
pub fn advise(_ptr: *mut u8, _bytes: usize) {}

/// Bytes a mapping of `size` bytes occupies (whole pages).
#[cfg(all(target_os = "linux", not(miri)))]
fn mapped_len(size: usize) -> usize {
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    size.next_multiple_of(usize::try_from(page).unwrap_or(4096).max(1))
}

/// `size` bytes of fresh, zeroed, untouched memory starting on a
/// huge-page boundary, mapped for the caller alone and advised to use huge
/// pages; `None` if the kernel refuses (the caller then uses the heap), and
/// always elsewhere than Linux. Returned by [`unmap`].
#[cfg(all(target_os = "linux", not(miri)))]
pub fn map(size: usize) -> Option<NonNull<u8>> {
    let len = mapped_len(size);
    let span = len.checked_add(HUGE_PAGE)?;
    // SAFETY: a new private anonymous mapping at an address the kernel
    // chooses overlaps nothing we hold.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    let start = raw as usize;
    let aligned = start.next_multiple_of(HUGE_PAGE);
    let head = aligned - start;
    let tail = span - head - len;
    // SAFETY: the head and the tail are page-aligned parts of the mapping
    // just made, outside `aligned..aligned + len`, and nothing refers to
    // them; unmapping them (or failing to) never touches the part we keep.
    unsafe {
        if head > 0 {
            libc::munmap(raw, head);
        }
        if tail > 0 {
            libc::munmap((aligned + len) as *mut libc::c_void, tail);
        }
    }
    advise(aligned as *mut u8, len);
    NonNull::new(aligned as *mut u8)
}

/// Maps nothing here: the caller uses the heap.
#[cfg(not(all(target_os = "linux", not(miri))))]
pub fn map(_size: usize) -> Option<NonNull<u8>> {
    None
}

/// Lets the kernel take back the pages of `size` bytes at `ptr` (memory
/// from `map(size)`) whenever it needs them, without unmapping them
/// (`MADV_FREE`): until it does, they stay as they are and cost nothing to
/// touch again; once it has, they read as zeros. False if the kernel
/// refused (the memory is then unchanged), and always elsewhere than
/// Linux.
///
/// # Safety
///
/// `ptr` came from `map(size)` with the same `size` and is still mapped,
/// and its owner does not rely on the bytes there until it writes them
/// again.
#[cfg(all(target_os = "linux", not(miri)))]
pub unsafe fn free_lazily(ptr: NonNull<u8>, size: usize) -> bool {
    // SAFETY: by the caller's promise the range is a live mapping of ours
    // whose contents nobody needs; MADV_FREE keeps it mapped and valid.
    unsafe { libc::madvise(ptr.as_ptr().cast(), mapped_len(size), libc::MADV_FREE) == 0 }
}

/// Nothing to free lazily here: `map` maps nothing.
///
/// # Safety
///
/// As on Linux.
#[cfg(not(all(target_os = "linux", not(miri))))]
pub unsafe fn free_lazily(_ptr: NonNull<u8>, _size: usize) -> bool {
    false
}

/// Returns the memory `map(size)` gave.
///
/// # Safety
///
/// `ptr` came from `map(size)` with the same `size`, it is unmapped once,
/// and nothing uses the memory afterwards.
#[cfg(all(target_os = "linux", not(miri)))]
pub unsafe fn unmap(ptr: NonNull<u8>, size: usize) {
    // SAFETY: by the caller's promise, `ptr..ptr + mapped_len(size)` is
    // exactly the part of the mapping `map` kept, and its owner is gone.
    unsafe {
        libc::munmap(ptr.as_ptr().cast(), mapped_len(size));
    }
}

/// Returns the memory `map(size)` gave (never called: `map` maps nothing
/// here).
///
/// # Safety
///
/// As on Linux.
#[cfg(not(all(target_os = "linux", not(miri))))]
pub unsafe fn unmap(_ptr: NonNull<u8>, _size: usize) {
    unreachable!("`map` never maps here");
}
