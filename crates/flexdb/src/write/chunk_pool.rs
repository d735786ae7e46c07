//! Large zeroed memory chunks backed by transparent huge pages where the
//! kernel offers them.
//!
//! Random walks over hundreds of megabytes (the hash table and arena of a
//! full MemTable) miss the TLB on almost every step with 4 KiB pages, and
//! on a virtual machine each miss is a two-dimensional page walk; 2 MiB
//! pages cut those misses by 512 (docs/DESIGN.md has the measurement).
//!
//! On Linux each chunk is its own anonymous mapping
//! (`flexsys::huge_pages`), advised before any page of it is touched:
//! memory taken from the global allocator may have been faulted in as
//! 4 KiB pages already, and those stay small whatever the advice (1.45 of
//! 3.67 GB anonymous were huge that way, 3.10 of 3.92 GB mapped; the
//! allocator remains the fallback). A fresh chunk then costs one fault
//! instead of 512, and the writers, who take those faults under the
//! writer lock, wait for each other less: p99 put latency fell from
//! 5.7–11.0 µs to 3.1–3.5 µs (docs/DESIGN.md, "MemTable chunks mapped
//! directly"). The huge pages are still advice: where the kernel has none,
//! a chunk gets small ones.
//!
//! Memory a MemTable frees is kept for the next one (`ChunkPool`): on a
//! virtual machine, touching a page for the first time costs a fault the
//! host must serve (about 2 µs a 4 KiB page here, against 0.2 µs to
//! rewrite it; docs/DESIGN.md), and a MemTable of 512 MiB (the default)
//! touches 131,072.
//!
//! An idle store lets go of the pool lazily (`ChunkPool::release`): its
//! mapped chunks stay in it with their pages advised `MADV_FREE`, so the
//! kernel takes them back when it needs memory, and a MemTable that takes
//! one before the kernel does finds its pages in place.
//!
//! A MemTable's hash table is one chunk of its own size (`take_table`,
//! `give_table`): the table of a committed MemTable is kept for the next
//! one, which zeroes it (on the thread preparing the next MemTable; under
//! the writer lock only when a rotation or a growth finds a kept table of
//! its size) instead of faulting in tens of megabytes of fresh pages
//! under the writer lock (docs/DESIGN.md, "Hash tables made ahead").
//!
//! Invariants: a `Chunk` owns `len` bytes at `ptr`, aligned to `ALIGN`,
//! until it is dropped; the memory is never moved. A new chunk is zeroed;
//! one from the pool holds whatever its last owner wrote, or, where it was
//! released lazily, zeros in any page the kernel took back (nothing reads
//! a pooled byte before writing it). The pool holds at most its capacity,
//! in chunks of exactly `ALIGN` bytes; the first `lazy` of its list are
//! the ones released lazily. Besides its capacity, the pool keeps at
//! most `TABLES_KEPT` table chunks, whatever their size; `release` frees
//! them.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

use parking_lot::Mutex;

/// Alignment (and preferred size) of a chunk: one huge page.
pub const ALIGN: usize = flexsys::huge_pages::HUGE_PAGE;

/// An owned, zeroed, huge-page-aligned block of memory.
pub struct Chunk {
    ptr: NonNull<u8>,
    layout: Layout,
    /// Whether the memory is a mapping of its own (`huge_pages::map`)
    /// rather than the global allocator's.
    mapped: bool,
}

// SAFETY: a `Chunk` is a uniquely owned block of plain bytes.
unsafe impl Send for Chunk {}
// SAFETY: `Chunk` hands out only raw pointers; synchronizing access to the
// bytes is the owner's job (the arena's invariants).
unsafe impl Sync for Chunk {}

impl Chunk {
    /// A zeroed chunk of at least `len` bytes (rounded up to `ALIGN`): a
    /// mapping of its own where the system gives one (see the module
    /// doc), else the global allocator's memory, advised likewise. Aborts
    /// like any allocation when memory is exhausted.
    pub fn new(len: usize) -> Chunk {
        let layout = Self::layout(len);
        match flexsys::huge_pages::map(layout.size()) {
            Some(ptr) => Chunk {
                ptr,
                layout,
                mapped: true,
            },
            None => Self::allocated(len),
        }
    }

    /// The layout of a chunk of at least `len` bytes.
    fn layout(len: usize) -> Layout {
        let size = len.max(1).next_multiple_of(ALIGN);
        match Layout::from_size_align(size, ALIGN) {
            Ok(l) => l,
            Err(_) => std::alloc::handle_alloc_error(Layout::new::<u8>()),
        }
    }

    /// [`Chunk::new`] from the global allocator (where no mapping is to
    /// be had).
    fn allocated(len: usize) -> Chunk {
        let layout = Self::layout(len);
        let size = layout.size();
        // SAFETY: `layout` has a nonzero size.
        let p = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(p) else {
            std::alloc::handle_alloc_error(layout)
        };
        flexsys::huge_pages::advise(p, size);
        Chunk {
            ptr,
            layout,
            mapped: false,
        }
    }

    /// Lets the kernel take the chunk's pages back when it needs them,
    /// keeping the chunk (`huge_pages::free_lazily`); false, changing
    /// nothing, unless the chunk is a mapping of its own and the kernel
    /// agreed. Its bytes are unspecified after.
    fn free_lazily(&self) -> bool {
        // SAFETY: a mapped chunk's memory came from `huge_pages::map` with
        // this size and stays mapped while `self` lives; the pool's chunks
        // hold nothing anyone reads before writing it.
        self.mapped && unsafe { flexsys::huge_pages::free_lazily(self.ptr, self.layout.size()) }
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

/// Hash tables kept for the next MemTables: one is the table a commit
/// frees while the next MemTable is made.
const TABLES_KEPT: usize = 1;

/// Chunks of `ALIGN` bytes freed by one MemTable, kept for the next, and
/// the hash table it freed.
pub struct ChunkPool {
    kept: Mutex<Kept>,
    /// Hash-table chunks, the most lately kept last.
    tables: Mutex<Vec<Chunk>>,
    /// The most chunks kept.
    cap: usize,
}

/// The pool's chunks: the first `lazy` were freed lazily (`release`).
#[derive(Default)]
struct Kept {
    chunks: Vec<Chunk>,
    lazy: usize,
}

impl ChunkPool {
    /// A pool that keeps up to `cap_bytes`, rounded up to whole chunks (a
    /// MemTable smaller than a chunk still takes one).
    pub fn new(cap_bytes: usize) -> ChunkPool {
        ChunkPool {
            kept: Mutex::new(Kept::default()),
            tables: Mutex::new(Vec::new()),
            cap: cap_bytes.div_ceil(ALIGN),
        }
    }

    /// A chunk of `ALIGN` bytes: a kept one (its bytes unspecified), the
    /// most lately kept first, or a new zeroed one.
    pub fn take(&self) -> Chunk {
        let mut kept = self.kept.lock();
        let Some(chunk) = kept.chunks.pop() else {
            drop(kept);
            return Chunk::new(ALIGN);
        };
        kept.lazy = kept.lazy.min(kept.chunks.len());
        chunk
    }

    /// Keeps `chunk` for a later `take` if it is `ALIGN` bytes and the pool
    /// has room; frees it otherwise.
    pub fn give(&self, chunk: Chunk) {
        if chunk.len() == ALIGN {
            let mut kept = self.kept.lock();
            if kept.chunks.len() < self.cap {
                kept.chunks.push(chunk);
            }
        }
    }

    /// A kept hash-table chunk the size of a new one of `len` bytes (its
    /// bytes unspecified), if the pool has one.
    pub fn take_table(&self, len: usize) -> Option<Chunk> {
        let size = Chunk::layout(len).size();
        let mut tables = self.tables.lock();
        let i = tables.iter().rposition(|c| c.len() == size)?;
        Some(tables.remove(i))
    }

    /// Keeps a hash table's chunk for a later `take_table`, letting go of
    /// the oldest kept when `TABLES_KEPT` are.
    pub fn give_table(&self, chunk: Chunk) {
        let mut tables = self.tables.lock();
        let dropped = (tables.len() >= TABLES_KEPT).then(|| tables.remove(0));
        tables.push(chunk);
        drop(tables);
        drop(dropped);
    }

    /// Bytes kept and not freed lazily: memory the pool holds for sure.
    pub fn kept_bytes(&self) -> usize {
        let tables: usize = self.tables.lock().iter().map(Chunk::len).sum();
        let kept = self.kept.lock();
        (kept.chunks.len() - kept.lazy) * ALIGN + tables
    }

    /// Bytes kept that the kernel may take back (see `release`).
    pub fn lazily_freed_bytes(&self) -> usize {
        self.kept.lock().lazy * ALIGN
    }

    /// Lets go of the memory kept (the store went idle). A chunk that is a
    /// mapping of its own stays in the pool, its pages freed lazily
    /// (`MADV_FREE`): the kernel takes them back when it needs memory, and
    /// until then a MemTable that takes the chunk finds them in place
    /// instead of faulting in fresh ones (docs/DESIGN.md, "Memory the
    /// process touched before"). Other chunks, and the hash tables kept,
    /// are freed.
    pub fn release(&self) {
        let tables = std::mem::take(&mut *self.tables.lock());
        drop(tables);
        let mut kept = self.kept.lock();
        let from = kept.lazy;
        let fresh = kept.chunks.split_off(from);
        let mut dropped = Vec::new();
        for chunk in fresh {
            if chunk.free_lazily() {
                kept.chunks.push(chunk);
            } else {
                dropped.push(chunk);
            }
        }
        kept.lazy = kept.chunks.len();
        drop(kept);
        drop(dropped);
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: `new` took this memory from `huge_pages::map` with
            // this size; the chunk drops once and nothing uses its bytes
            // after.
            unsafe { flexsys::huge_pages::unmap(self.ptr, self.layout.size()) };
        } else {
            // SAFETY: allocated in `new` with this layout, freed once.
            unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_aligned_and_writable() {
        check_zeroed_aligned_and_writable(Chunk::new);
        // The fallback where no mapping is to be had.
        check_zeroed_aligned_and_writable(Chunk::allocated);
    }

    fn check_zeroed_aligned_and_writable(new: fn(usize) -> Chunk) {
        let c = new(100);
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
        let big = new(3 * ALIGN + 1);
        assert_eq!(big.len(), 4 * ALIGN);
    }

    /// The `/proc/self/smaps` lines (fields) of the mapping holding `at`,
    /// and the mapping's end.
    #[cfg(target_os = "linux")]
    fn smaps_of(at: usize) -> (Vec<String>, usize) {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines();
        while let Some(line) = lines.next() {
            let Some((range, _)) = line.split_once(' ') else {
                continue;
            };
            let Some((lo, hi)) = range.split_once('-') else {
                continue;
            };
            let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            else {
                continue;
            };
            if (lo..hi).contains(&at) {
                let fields = lines
                    .by_ref()
                    .take_while(|l| !l.contains('-') || l.starts_with("THP"))
                    .map(str::to_owned)
                    .collect();
                return (fields, hi);
            }
        }
        panic!("no mapping holds {at:#x}");
    }

    /// A field of [`smaps_of`] in kB.
    #[cfg(target_os = "linux")]
    fn kb(fields: &[String], name: &str) -> Option<u64> {
        fields.iter().find_map(|l| {
            l.strip_prefix(name)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
    }

    /// On Linux with transparent huge pages not disabled, a chunk is a
    /// mapping of its own that the kernel may back with huge pages (the
    /// advice reached it before any touch); where the kernel has them
    /// disabled there is nothing to check.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_chunk_is_its_own_mapping_eligible_for_huge_pages() {
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if !thp.contains("[always]") && !thp.contains("[madvise]") {
            return;
        }
        let c = Chunk::new(ALIGN);
        // SAFETY: the first byte of `c`, which we own.
        unsafe { *c.as_ptr() = 1 };
        let at = c.as_ptr() as usize;
        let (fields, end) = smaps_of(at);
        assert!(at + ALIGN <= end, "the chunk lies in one mapping");
        let eligible = fields
            .iter()
            .find_map(|l| l.strip_prefix("THPeligible:").map(|v| v.trim() == "1"));
        assert_eq!(eligible, Some(true), "the chunk's mapping takes huge pages");
    }

    /// A released pool keeps its mapped chunks with their pages freed
    /// lazily: the kernel counts them as lazily free (or has already taken
    /// them), the pool no longer counts them as kept, and the next `take`
    /// hands the same chunk back, writable.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_released_chunk_is_freed_lazily_and_taken_again() {
        let pool = ChunkPool::new(ALIGN);
        let c = pool.take();
        if !c.mapped {
            return;
        }
        let at = c.as_ptr();
        // SAFETY: the chunk's own bytes.
        unsafe { std::ptr::write_bytes(at, 0xAB, ALIGN) };
        pool.give(c);
        assert_eq!(pool.kept_bytes(), ALIGN);
        pool.release();
        assert_eq!(pool.kept_bytes(), 0);
        assert_eq!(pool.lazily_freed_bytes(), ALIGN);
        let (fields, _) = smaps_of(at as usize);
        let (lazy, rss) = (kb(&fields, "LazyFree:"), kb(&fields, "Rss:"));
        assert!(
            lazy.is_some_and(|k| k > 0) || rss == Some(0),
            "the pages are lazily free or gone: {fields:?}"
        );
        // A second release changes nothing.
        pool.release();
        assert_eq!(pool.lazily_freed_bytes(), ALIGN);
        let again = pool.take();
        assert_eq!(again.as_ptr(), at, "the released chunk is taken again");
        assert_eq!(pool.lazily_freed_bytes(), 0);
        // SAFETY: the chunk's own bytes.
        unsafe {
            std::ptr::write_bytes(at, 0x5A, ALIGN);
            assert!(std::slice::from_raw_parts(at, ALIGN)
                .iter()
                .all(|&b| b == 0x5A));
        }
    }

    #[test]
    fn the_pool_hands_back_what_it_kept_up_to_its_capacity() {
        let pool = ChunkPool::new(2 * ALIGN - 1);
        let (a, b, c) = (pool.take(), pool.take(), pool.take());
        let kept = [a.as_ptr(), b.as_ptr()];
        // SAFETY: within `a`, which we own.
        unsafe { *a.as_ptr() = 9 };
        pool.give(a);
        pool.give(b);
        pool.give(c);
        pool.give(Chunk::new(2 * ALIGN));
        assert_eq!(
            pool.kept_bytes(),
            2 * ALIGN,
            "capacity and size bound the pool"
        );
        let (x, y) = (pool.take(), pool.take());
        assert!(kept.contains(&x.as_ptr()) && kept.contains(&y.as_ptr()));
        drop(y);
        assert_eq!(pool.kept_bytes(), 0);
        pool.give(x);
        pool.release();
        assert_eq!(pool.kept_bytes(), 0);
        // A released chunk (freed lazily where it is a mapping, else freed)
        // comes back before a new one is made.
        let again = pool.take();
        assert_eq!(pool.kept_bytes() + pool.lazily_freed_bytes(), 0);
        // An empty pool makes new (zeroed) chunks.
        let fresh = pool.take();
        assert_ne!(fresh.as_ptr(), again.as_ptr());
        // SAFETY: within `fresh`, which we own; a new chunk is zeroed.
        unsafe { assert_eq!(*fresh.as_ptr(), 0) };
    }

    #[test]
    fn a_kept_table_goes_to_a_table_of_its_size_and_release_frees_it() {
        let pool = ChunkPool::new(0);
        assert!(pool.take_table(3 * ALIGN).is_none());
        let t = Chunk::new(3 * ALIGN);
        let at = t.as_ptr();
        pool.give_table(t);
        assert_eq!(pool.kept_bytes(), 3 * ALIGN);
        assert!(pool.take_table(2 * ALIGN).is_none(), "another size");
        let again = pool.take_table(3 * ALIGN - 1).expect("kept");
        assert_eq!(again.as_ptr(), at);
        assert_eq!(pool.kept_bytes(), 0);
        // Only the newest is kept.
        pool.give_table(again);
        pool.give_table(Chunk::new(ALIGN));
        assert_eq!(pool.kept_bytes(), ALIGN);
        assert!(pool.take_table(3 * ALIGN).is_none());
        pool.release();
        assert_eq!(pool.kept_bytes() + pool.lazily_freed_bytes(), 0);
        assert!(pool.take_table(ALIGN).is_none());
    }
}
