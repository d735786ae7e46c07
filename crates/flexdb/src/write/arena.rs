//! The MemTable's entry arena: every write version (header, key bytes,
//! value bytes) carved out of large huge-page chunks, linked to the previous
//! version of its key.
//!
//! Invariants:
//! - An entry is written completely before its pointer is published (by a
//!   `Release` store of the MemTable); after that it is never written again.
//!   Readers reach entries only through `Acquire`-loaded pointers.
//! - Chunks are never freed or moved while the arena lives, so an entry
//!   pointer stays valid for the arena's whole life. An arena with a pool
//!   takes its chunks from it and gives them back when it drops.
//! - `prev` points to the previous version of the same key (an older entry
//!   of the same arena) or is null.

use std::mem::size_of;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::write::chunk_pool::{Chunk, ChunkPool, ALIGN};

/// The value length that marks a deletion.
const TOMBSTONE: u32 = u32::MAX;

/// `Entry::flags`: a deadline follows the value.
const HAS_DEADLINE: u32 = 1;

/// An entry's fixed header; the key bytes follow, then the value bytes,
/// then, when `flags` has `HAS_DEADLINE`, the deadline (a native-endian
/// `u64`, unaligned).
#[repr(C)]
pub(crate) struct Entry {
    pub seq: u64,
    pub prev: *const Entry,
    pub klen: u32,
    pub vlen: u32,
    pub hash: u32,
    flags: u32,
}

/// One entry, borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The sequence number.
    pub seq: u64,
    /// The value, or `None` for a deletion.
    pub value: Option<&'a [u8]>,
    /// The value's deadline, Unix milliseconds (0: none; the reader
    /// judges whether it passed).
    pub expires: u64,
}

/// A pointer to a published entry. Dereferencing it is sound while the
/// arena that holds it lives; `MemTable` only hands out `EntryRef`s bound to
/// a borrow of itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EntryPtr(NonNull<Entry>);

// SAFETY: an `EntryPtr` names immutable bytes of an arena; sending it to
// another thread is sound under the same liveness rule as using it here.
unsafe impl Send for EntryPtr {}
// SAFETY: as above; the bytes are never written after publication.
unsafe impl Sync for EntryPtr {}

impl EntryPtr {
    /// The raw pointer (for atomics).
    pub fn as_ptr(self) -> *mut Entry {
        self.0.as_ptr()
    }

    /// From a raw pointer read out of an atomic.
    pub fn from_raw(p: *mut Entry) -> Option<EntryPtr> {
        NonNull::new(p).map(EntryPtr)
    }

    /// The header.
    ///
    /// # Safety
    /// The entry's arena is alive for `'a`.
    #[inline]
    pub unsafe fn header<'a>(self) -> &'a Entry {
        // SAFETY: the caller guarantees the arena is alive; the header was
        // written before publication and is never written again.
        unsafe { self.0.as_ref() }
    }

    /// The entry's key, sequence number and value.
    ///
    /// # Safety
    /// The entry's arena is alive for `'a`.
    #[inline]
    pub unsafe fn get<'a>(self) -> EntryRef<'a> {
        // SAFETY: as in `header`; key and value bytes follow the header in
        // the same allocation and are immutable after publication.
        unsafe {
            let h = self.header();
            let base = self.0.as_ptr().cast::<u8>().add(size_of::<Entry>());
            let value = (h.vlen != TOMBSTONE)
                .then(|| std::slice::from_raw_parts(base.add(h.klen as usize), h.vlen as usize));
            let expires = match h.flags & HAS_DEADLINE {
                0 => 0,
                _ => base
                    .add(h.klen as usize + h.vlen as usize)
                    .cast::<u64>()
                    .read_unaligned(),
            };
            EntryRef {
                key: std::slice::from_raw_parts(base, h.klen as usize),
                seq: h.seq,
                value,
                expires,
            }
        }
    }

    /// The entry's key.
    ///
    /// # Safety
    /// The entry's arena is alive for `'a`.
    #[inline]
    pub unsafe fn key<'a>(self) -> &'a [u8] {
        // SAFETY: as in `get`.
        unsafe {
            let h = self.header();
            let base = self.0.as_ptr().cast::<u8>().add(size_of::<Entry>());
            std::slice::from_raw_parts(base, h.klen as usize)
        }
    }
}

/// Append-only storage of entries. Not synchronized: the MemTable's writer
/// lock serializes `push`.
pub(crate) struct Arena {
    chunks: Vec<Chunk>,
    cursor: *mut u8,
    free: usize,
    used: usize,
    pool: Option<Arc<ChunkPool>>,
}

// SAFETY: `cursor` points into a chunk owned by `chunks`; moving the arena
// moves that ownership with it.
unsafe impl Send for Arena {}

impl Arena {
    #[cfg(test)]
    pub fn new() -> Arena {
        Arena::with_pool(None)
    }

    /// An arena that takes its chunks from `pool` (when given) and gives
    /// them back when it drops.
    pub fn with_pool(pool: Option<Arc<ChunkPool>>) -> Arena {
        Arena {
            chunks: Vec::new(),
            cursor: ptr::null_mut(),
            free: 0,
            used: 0,
            pool,
        }
    }

    /// Bytes taken by entries.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Writes a new entry and returns it (not yet published); `expires`
    /// is the value's deadline (0: none; ignored for a deletion).
    pub fn push(
        &mut self,
        key: &[u8],
        seq: u64,
        value: Option<&[u8]>,
        expires: u64,
        prev: Option<EntryPtr>,
        hash: u32,
    ) -> EntryPtr {
        let vlen = value.map_or(0, <[u8]>::len);
        assert!(
            key.len() < u32::MAX as usize && vlen < TOMBSTONE as usize,
            "entry too large for the MemTable"
        );
        let deadline = value.is_some() && expires != 0;
        let tail = if deadline { size_of::<u64>() } else { 0 };
        let size = (size_of::<Entry>() + key.len() + vlen + tail).next_multiple_of(8);
        let p = if size > ALIGN / 4 {
            // A big entry gets a chunk of its own, so the current chunk's
            // free tail is not wasted.
            let chunk = Chunk::new(size);
            let p = chunk.as_ptr();
            self.chunks.push(chunk);
            p
        } else {
            if self.free < size {
                let chunk = match &self.pool {
                    Some(pool) => pool.take(),
                    None => Chunk::new(ALIGN),
                };
                self.cursor = chunk.as_ptr();
                self.free = chunk.len();
                self.chunks.push(chunk);
            }
            let p = self.cursor;
            // SAFETY: `size <= free`, so the new cursor stays within the
            // chunk (or one past its end).
            self.cursor = unsafe { self.cursor.add(size) };
            self.free -= size;
            p
        };
        self.used += size;
        // SAFETY: `p` is 8-aligned (chunks are 2 MiB aligned and every size
        // is a multiple of 8) with room for the header, key, value and
        // deadline, and nothing else refers to it yet.
        unsafe {
            p.cast::<Entry>().write(Entry {
                seq,
                prev: prev.map_or(ptr::null(), |e| e.as_ptr().cast_const()),
                klen: key.len() as u32,
                vlen: if value.is_some() {
                    vlen as u32
                } else {
                    TOMBSTONE
                },
                hash,
                flags: if deadline { HAS_DEADLINE } else { 0 },
            });
            let base = p.add(size_of::<Entry>());
            ptr::copy_nonoverlapping(key.as_ptr(), base, key.len());
            if let Some(v) = value {
                ptr::copy_nonoverlapping(v.as_ptr(), base.add(key.len()), v.len());
            }
            if deadline {
                base.add(key.len() + vlen)
                    .cast::<u64>()
                    .write_unaligned(expires);
            }
            EntryPtr(NonNull::new_unchecked(p.cast()))
        }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            for chunk in self.chunks.drain(..) {
                pool.give(chunk);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_link() {
        let mut a = Arena::new();
        let e1 = a.push(b"key", 7, Some(b"value"), 0, None, 1);
        let e2 = a.push(b"key", 9, None, 0, Some(e1), 1);
        let big = vec![3u8; ALIGN];
        let e3 = a.push(b"big", 10, Some(&big), 0, None, 2);
        // SAFETY: the arena lives until the end of the test.
        unsafe {
            assert_eq!(
                e1.get(),
                EntryRef {
                    key: b"key",
                    seq: 7,
                    value: Some(b"value"),
                    expires: 0,
                }
            );
            assert_eq!(e2.get().value, None);
            assert_eq!(EntryPtr::from_raw(e2.header().prev.cast_mut()), Some(e1));
            assert_eq!(e3.get().value.unwrap().len(), ALIGN);
            assert_eq!(e3.key(), b"big");
        }
        assert!(a.used() > ALIGN);
    }

    #[test]
    fn deadlines_follow_values_and_deletions_have_none() {
        let mut a = Arena::new();
        let e1 = a.push(b"k", 1, Some(b"abc"), 1234, None, 0);
        let e2 = a.push(b"k", 2, None, 99, Some(e1), 0);
        let e3 = a.push(b"key", 3, Some(b""), u64::MAX, None, 0);
        // SAFETY: the arena lives until the end of the test.
        unsafe {
            assert_eq!(
                (e1.get().value, e1.get().expires),
                (Some(&b"abc"[..]), 1234)
            );
            assert_eq!((e2.get().value, e2.get().expires), (None, 0));
            assert_eq!(
                (e3.get().value, e3.get().expires),
                (Some(&b""[..]), u64::MAX)
            );
            assert_eq!(e3.key(), b"key");
        }
    }

    #[test]
    fn a_pooled_arena_reuses_the_chunks_of_a_dropped_one() {
        let pool = Arc::new(ChunkPool::new(4 * ALIGN));
        let mut a = Arena::with_pool(Some(pool.clone()));
        let first = a.push(b"k", 1, Some(&[7u8; 1000]), 0, None, 0).as_ptr() as usize;
        a.push(b"big", 2, Some(&vec![1u8; ALIGN]), 0, None, 0);
        drop(a);
        assert_eq!(
            pool.kept_bytes(),
            ALIGN,
            "the big entry's chunk is not kept"
        );
        let mut b = Arena::with_pool(Some(pool.clone()));
        let e = b.push(b"other", 3, Some(b"v"), 0, None, 0);
        assert_eq!(e.as_ptr() as usize, first, "the kept chunk is reused");
        // SAFETY: `b` lives until the end of the test.
        unsafe {
            assert_eq!(
                e.get(),
                EntryRef {
                    key: b"other",
                    seq: 3,
                    value: Some(b"v"),
                    expires: 0,
                }
            );
        }
        assert_eq!(pool.kept_bytes(), 0);
    }
}
