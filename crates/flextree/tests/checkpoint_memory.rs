//! A checkpoint streams its page writes: however many nodes are dirty, it
//! holds at most one batch of page images. Measured with a counting global
//! allocator, so this file holds a single test (no other test's
//! allocations run in this process meanwhile).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use flextree::{FlexTree, MemFile, StorageFile, CHECKPOINT_BATCH_BYTES};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to the system allocator with the caller's
// layout and pointer unchanged; the counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A file that keeps nothing and records the size of every write.
#[derive(Default)]
struct SinkFile {
    writes: Mutex<Vec<usize>>,
    len: AtomicUsize,
}

impl StorageFile for SinkFile {
    fn read_exact_at(&self, _offset: u64, _buf: &mut [u8]) -> io::Result<()> {
        Err(io::Error::other("write-only"))
    }
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut w = self.writes.lock().unwrap();
        if w.len() == w.capacity() {
            // Grow outside the measured checkpoint's budget: reserve ahead.
            return Err(io::Error::other("test reserved too few write slots"));
        }
        w.push(data.len());
        self.len
            .fetch_max(offset as usize + data.len(), Ordering::Relaxed);
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.len.load(Ordering::Relaxed) as u64)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.len.store(len as usize, Ordering::Relaxed);
        Ok(())
    }
}

/// An address far from the previous extent's (no two merge).
fn scattered(i: u64) -> u64 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % (1 << 40)) & !0xfff
}

/// Extra bytes allocated at the peak of `f` over what was live before it.
fn peak_extra<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = CURRENT.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - before)
}

#[test]
fn a_large_dirty_tree_checkpoints_in_bounded_batches_and_memory() {
    // Scattered addresses: a packed leaf entry takes ~8 bytes, so the
    // tree's pages are several batches.
    let mut t = FlexTree::new();
    for i in 0..1_000_000u64 {
        t.append(100, scattered(i)).unwrap();
    }
    let sink = SinkFile::default();
    sink.writes.lock().unwrap().reserve(100_000);
    let (v, extra) = peak_extra(|| t.checkpoint(&sink, b"big").unwrap());
    assert_eq!(v, 1);
    let writes = sink.writes.lock().unwrap().clone();
    let bytes: usize = writes.iter().sum();
    // About 4,000 pages of 2 KiB: every node went out, in many writes,
    // none larger than a batch.
    assert!(bytes > 6 << 20, "wrote only {bytes} bytes");
    assert!(writes.len() >= bytes / CHECKPOINT_BATCH_BYTES);
    assert!(writes.len() >= 9);
    assert!(writes.iter().all(|&w| w <= CHECKPOINT_BATCH_BYTES));
    // All the page images together are 6+ MiB; the checkpoint held one
    // batch (plus the header page and small bookkeeping).
    assert!(
        extra <= CHECKPOINT_BATCH_BYTES + (64 << 10),
        "checkpoint allocated {extra} bytes at its peak"
    );

    // Dirty leaves all over the tree (random inserts dirty leaves and their
    // parents, about 1,500 distinct): again batches and bounded memory.
    let mut rng = StdRng::seed_from_u64(1);
    for i in 0..2000u64 {
        let at = rng.gen_range(0..=t.len());
        t.insert(at, 10, (1 << 30) + i * 20).unwrap();
    }
    let n_before = sink.writes.lock().unwrap().len();
    let (r, extra) = peak_extra(|| t.checkpoint_report(&sink, b"b").unwrap());
    assert_eq!(r.version, 2);
    assert!(r.leaves_written >= 1000, "{} leaves", r.leaves_written);
    let writes = sink.writes.lock().unwrap()[n_before..].to_vec();
    assert!(writes.iter().sum::<usize>() >= r.pages_written as usize * 2048);
    assert!(writes.iter().all(|&w| w <= CHECKPOINT_BATCH_BYTES));
    assert!(
        extra <= CHECKPOINT_BATCH_BYTES + (64 << 10),
        "{extra} bytes"
    );

    // The same two versions through a real (in-memory) file load back.
    let file = MemFile::new();
    let mut t2 = FlexTree::new();
    for i in 0..1_000_000u64 {
        t2.append(100, scattered(i)).unwrap();
    }
    t2.checkpoint(&file, b"a").unwrap();
    let mut rng = StdRng::seed_from_u64(1);
    for i in 0..2000u64 {
        let at = rng.gen_range(0..=t2.len());
        t2.insert(at, 10, (1 << 30) + i * 20).unwrap();
    }
    assert_eq!(t2.checkpoint(&file, b"b").unwrap(), 2);
    let (loaded, cp) = FlexTree::load(&file).unwrap();
    assert_eq!(cp.meta, b"b");
    assert!(loaded
        .extents_from(0)
        .unwrap()
        .eq(t2.extents_from(0).unwrap()));
    assert!(loaded
        .extents_from(0)
        .unwrap()
        .eq(t.extents_from(0).unwrap()));
}
