//! In-memory segment buffers: one segment's bytes, appended by one writer
//! while any number of readers copy the part already appended.
//!
//! Invariants:
//! - A [`SegBuf`] is shared by `Arc`. Its first `filled` bytes are
//!   immutable: nothing writes them again until the buffer is recycled,
//!   which needs the only `Arc` ([`SegBuf::recycle`]).
//! - Only a [`Filler`] writes, and only at `filled..`; there is at most one
//!   `Filler` per buffer (it is created from an unshared buffer and cannot
//!   be cloned). It publishes new bytes by raising `filled` with release
//!   ordering; readers load it with acquire ordering and never look past it.
//! - Under `--cfg loom` every access to the bytes is also reported to loom
//!   (one tracked cell per `LOOM_BLOCK` bytes), so the loom tests check that
//!   an append happens before every read the `filled` publication lets
//!   through; those tests append and read whole blocks.
//! - `flushed` (behind a mutex that every writer of the buffer's bytes to
//!   the data file holds while writing) is how much of the buffer the data
//!   file holds; writes to the file never race one another.

use std::cell::UnsafeCell;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::options::SEGMENT_SIZE;
use crate::storage::aligned::AlignedBuf;
use crate::sync::{AtomicUsize, Ordering};

/// One segment's worth of bytes (aligned for O_DIRECT).
pub struct SegBuf {
    /// Owns the allocation; accessed only through `base`.
    _mem: UnsafeCell<AlignedBuf>,
    base: *mut u8,
    filled: AtomicUsize,
    flushed: Mutex<usize>,
    /// One loom-tracked cell per `LOOM_BLOCK` bytes (see the module docs).
    #[cfg(loom)]
    loom_blocks: Box<[loom::cell::UnsafeCell<()>]>,
}

/// Bytes per loom-tracked cell of a buffer.
#[cfg(loom)]
const LOOM_BLOCK: usize = 64 << 10;

// SAFETY: the raw pointer refers to the heap allocation owned by `_mem`,
// which lives as long as the buffer and never moves. Concurrent access
// follows the module invariants: bytes below `filled` are only read, and
// the single `Filler` writes only at or past `filled`, publishing with
// release/acquire ordering, so no byte is read and written at once.
unsafe impl Send for SegBuf {}
// SAFETY: as for `Send`.
unsafe impl Sync for SegBuf {}

const LEN: usize = SEGMENT_SIZE as usize;

impl SegBuf {
    /// A new buffer of `SEGMENT_SIZE` bytes.
    pub fn new() -> SegBuf {
        let mut mem = AlignedBuf::zeroed(LEN);
        let base = mem.as_bytes_mut().as_mut_ptr();
        SegBuf {
            _mem: UnsafeCell::new(mem),
            base,
            filled: AtomicUsize::new(0),
            flushed: Mutex::new(0),
            #[cfg(loom)]
            loom_blocks: (0..LEN / LOOM_BLOCK)
                .map(|_| loom::cell::UnsafeCell::new(()))
                .collect(),
        }
    }

    /// Reports an access to bytes `at..end` to loom (nothing without loom).
    #[inline(always)]
    fn loom_access(&self, at: usize, end: usize, write: bool) {
        #[cfg(loom)]
        for b in at / LOOM_BLOCK..end.div_ceil(LOOM_BLOCK) {
            if write {
                self.loom_blocks[b].with_mut(|_| ());
            } else {
                self.loom_blocks[b].with(|_| ());
            }
        }
        #[cfg(not(loom))]
        let _ = (at, end, write);
    }

    /// Bytes appended so far (immutable from now on).
    pub fn filled(&self) -> usize {
        self.filled.load(Ordering::Acquire)
    }

    /// Copies `out.len()` bytes at `at`; false (and nothing copied) when
    /// they are not all appended yet.
    pub fn read(&self, at: usize, out: &mut [u8]) -> bool {
        match at.checked_add(out.len()) {
            Some(end) if end <= self.filled() => {
                self.loom_access(at, end, false);
                // SAFETY: `at..end` lies below `filled` (checked above with
                // acquire ordering), so those bytes are initialized and
                // immutable, and `out` is a distinct exclusive borrow.
                unsafe {
                    std::ptr::copy_nonoverlapping(self.base.add(at), out.as_mut_ptr(), out.len())
                };
                true
            }
            _ => false,
        }
    }

    /// The first `end` bytes, when all are appended.
    pub fn prefix(&self, end: usize) -> Option<&[u8]> {
        if end > self.filled() {
            return None;
        }
        self.loom_access(0, end, false);
        // SAFETY: `0..end` lies below `filled`: immutable while `self` is
        // borrowed (recycling needs the only `Arc`, which a borrow of the
        // buffer's contents prevents from being unwrapped).
        Some(unsafe { std::slice::from_raw_parts(self.base, end) })
    }

    /// Locks the buffer's file-write state: the bytes the file holds.
    pub fn flushed(&self) -> MutexGuard<'_, usize> {
        self.flushed.lock()
    }

    /// The buffer back as an unshared one, when `this` is the only handle.
    pub fn recycle(this: Arc<SegBuf>) -> Option<SegBuf> {
        Arc::try_unwrap(this).ok()
    }
}

/// Unshared buffers kept for reuse, so that making a segment buffer (a
/// 4 MiB allocation and zeroing) rarely happens under the space's lock:
/// mutations top the pool up before they take it ([`SegBufPool::fill`]).
pub struct SegBufPool {
    bufs: Mutex<Vec<SegBuf>>,
    cap: usize,
}

impl SegBufPool {
    /// A pool keeping at most `cap` buffers.
    pub fn new(cap: usize) -> SegBufPool {
        SegBufPool {
            bufs: Mutex::new(Vec::new()),
            cap,
        }
    }

    /// A buffer from the pool, or a new one.
    pub fn take(&self) -> SegBuf {
        self.bufs.lock().pop().unwrap_or_else(SegBuf::new)
    }

    /// Keeps `buf` if the pool has room (else frees it).
    pub fn give(&self, buf: SegBuf) {
        let mut b = self.bufs.lock();
        if b.len() < self.cap {
            b.push(buf);
        }
    }

    /// Makes sure the pool holds at least `n` buffers (at most its cap),
    /// allocating with no lock of the space held.
    pub fn fill(&self, n: usize) {
        let n = n.min(self.cap);
        while self.bufs.lock().len() < n {
            let b = SegBuf::new();
            self.give(b);
        }
    }
}

/// The single writer of a buffer.
pub struct Filler {
    buf: Arc<SegBuf>,
}

impl Filler {
    /// Starts filling `buf` from its beginning.
    pub fn new(mut buf: SegBuf) -> Filler {
        // Unshared here: a relaxed store is a plain one (loom's atomics
        // have no `get_mut`).
        buf.filled.store(0, Ordering::Relaxed);
        *buf.flushed.get_mut() = 0;
        Filler { buf: Arc::new(buf) }
    }

    /// The shared buffer (for readers and the commit).
    pub fn shared(&self) -> &Arc<SegBuf> {
        &self.buf
    }

    /// Bytes appended.
    pub fn filled(&self) -> usize {
        // Only this filler changes it.
        self.buf.filled.load(Ordering::Relaxed)
    }

    /// Bytes left.
    pub fn room(&self) -> usize {
        LEN - self.filled()
    }

    /// Appends `data` (which must fit in the room left); returns its offset
    /// in the segment.
    pub fn push(&mut self, data: &[u8]) -> Option<usize> {
        let at = self.filled();
        let end = at.checked_add(data.len()).filter(|&e| e <= LEN)?;
        self.buf.loom_access(at, end, true);
        // SAFETY: `at..end` lies at or past `filled`, inside the allocation
        // (checked above). No reader looks there (they stop at `filled`),
        // and this filler is the buffer's only writer (module invariants);
        // `data` cannot alias the buffer, whose bytes are never lent out
        // mutably.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.buf.base.add(at), data.len()) };
        self.buf.filled.store(end, Ordering::Release);
        Some(at)
    }

    /// Ends filling; the buffer is immutable from now on.
    pub fn seal(self) -> Arc<SegBuf> {
        self.buf
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn readers_see_only_appended_bytes() {
        let mut f = Filler::new(SegBuf::new());
        assert_eq!(f.push(b"hello"), Some(0));
        assert_eq!(f.push(b" world"), Some(5));
        let b = f.shared().clone();
        let mut out = [0u8; 11];
        assert!(b.read(0, &mut out));
        assert_eq!(&out, b"hello world");
        assert!(!b.read(1, &mut out));
        assert!(!b.read(usize::MAX, &mut out));
        assert_eq!(b.prefix(5), Some(&b"hello"[..]));
        assert_eq!(b.prefix(12), None);
        assert_eq!(f.push(&vec![0u8; LEN]), None);
        assert_eq!(f.room(), LEN - 11);
        drop(b);
        let sealed = f.seal();
        let again = SegBuf::recycle(sealed).expect("only handle");
        let f = Filler::new(again);
        assert_eq!(f.filled(), 0);
        assert!(!f.shared().read(0, &mut out));
    }

    #[test]
    fn the_pool_keeps_buffers_up_to_its_cap() {
        let p = SegBufPool::new(2);
        p.fill(5);
        assert_eq!(p.bufs.lock().len(), 2);
        let a = p.take();
        let b = p.take();
        let c = p.take();
        p.give(a);
        p.give(b);
        p.give(c);
        assert_eq!(p.bufs.lock().len(), 2);
    }

    #[test]
    fn recycling_needs_the_only_handle() {
        let f = Filler::new(SegBuf::new());
        let reader = f.shared().clone();
        let sealed = f.seal();
        assert!(SegBuf::recycle(sealed).is_none());
        drop(reader);
    }

    /// One thread appends records while others copy what is appended: every
    /// copy must see whole, correct records (exercises the unsafe code).
    #[test]
    fn concurrent_append_and_read() {
        let mut f = Filler::new(SegBuf::new());
        let shared = f.shared().clone();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let b = shared.clone();
                std::thread::spawn(move || {
                    let mut seen = 0;
                    let mut rec = [0u8; 64];
                    while seen < LEN / 64 {
                        let n = b.filled() / 64;
                        for i in seen.saturating_sub(3)..n {
                            assert!(b.read(i * 64, &mut rec));
                            assert!(rec.iter().all(|&x| x == (i % 251) as u8), "record {i}");
                        }
                        seen = n;
                    }
                })
            })
            .collect();
        for i in 0..LEN / 64 {
            f.push(&[(i % 251) as u8; 64]).unwrap();
        }
        for r in readers {
            r.join().unwrap();
        }
    }
}

/// Loom models of the publication of appended bytes (run with
/// `RUSTFLAGS="--cfg loom" cargo test -p flexspace --lib --release segbuf`).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    fn block(byte: u8) -> Vec<u8> {
        vec![byte; LOOM_BLOCK]
    }

    /// One filler appends two blocks while two readers copy (and take a
    /// prefix of) what is published: every access loom sees to a block is
    /// ordered after the append that wrote it, and readers see its bytes.
    #[test]
    fn appended_blocks_are_published_to_concurrent_readers() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(|| {
            let mut f = Filler::new(SegBuf::new());
            let copier = {
                let buf = f.shared().clone();
                loom::thread::spawn(move || {
                    let mut out = vec![0u8; LOOM_BLOCK];
                    for k in 0..2 {
                        if buf.read(k * LOOM_BLOCK, &mut out) {
                            assert!(out.iter().all(|&x| x == k as u8 + 1), "block {k}");
                        }
                    }
                })
            };
            let flusher = {
                let buf = f.shared().clone();
                loom::thread::spawn(move || {
                    let _flushed = buf.flushed();
                    let n = buf.filled();
                    let bytes = buf.prefix(n).expect("filled bytes are a prefix");
                    assert!(bytes
                        .iter()
                        .enumerate()
                        .all(|(i, &x)| x == (i / LOOM_BLOCK) as u8 + 1));
                })
            };
            assert_eq!(f.push(&block(1)), Some(0));
            assert_eq!(f.push(&block(2)), Some(LOOM_BLOCK));
            copier.join().unwrap();
            flusher.join().unwrap();
            // The readers are gone: the buffer can be recycled and refilled.
            let again = SegBuf::recycle(f.seal()).expect("only handle");
            let mut f = Filler::new(again);
            assert_eq!(f.filled(), 0);
            assert_eq!(f.push(&block(3)), Some(0));
        });
    }
}
