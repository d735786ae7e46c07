//! The log entries logged since the last commit, held in fixed-size chunks.
//!
//! A mutation appends its entries under the space's write lock; readers of
//! the space wait on that lock. A single growing `Vec` would now and then
//! double and copy megabytes there (measured: 8–22 ms of CPU inside one
//! mutation at a few MiB of pending log), so the entries go to chunks of
//! `CHUNK` bytes that are never reallocated, and a commit hands the filled
//! chunks back for reuse once they are written.
//!
//! Invariants: every chunk but the last is exactly `CHUNK` bytes; the
//! chunks, concatenated, are the entries in logging order; `len` is their
//! total length, a multiple of `log::ENTRY`; spare chunks are empty and
//! have `CHUNK` capacity, and at most `SPARE` of them are kept; `meta_at`,
//! when set, is where the one metadata entry of the pending entries lies.
//!
//! Only the metadata words a commit ends with matter (they are read at
//! recovery, after whole commits), so a pending metadata entry is
//! overwritten by the next one instead of followed by it: a caller may set
//! the words after every step of a long commit for a log entry a commit.

use crate::log::ENTRY;

/// Bytes of one chunk (a multiple of `ENTRY`).
const CHUNK: usize = 256 << 10;
/// Empty chunks kept for reuse.
const SPARE: usize = 16;

/// The pending log entries.
#[derive(Default)]
pub struct LogBuf {
    chunks: Vec<Vec<u8>>,
    len: usize,
    spare: Vec<Vec<u8>>,
    /// Byte offset of the pending metadata entry, if there is one.
    meta_at: Option<usize>,
}

/// Filled chunks taken by a commit.
pub struct TakenLog {
    /// The chunks, in order.
    pub chunks: Vec<Vec<u8>>,
    /// Their total length.
    pub len: usize,
}

impl TakenLog {
    /// Number of entries.
    pub fn entries(&self) -> u64 {
        (self.len / ENTRY) as u64
    }

    /// CRC-32C of the concatenated entries.
    pub fn crc(&self) -> u32 {
        self.chunks
            .iter()
            .fold(0, |crc, c| crc32c::crc32c_append(crc, c))
    }
}

impl LogBuf {
    /// Appends one encoded entry.
    pub fn push(&mut self, entry: &[u8; ENTRY]) {
        let room = self.chunks.last().is_some_and(|c| c.len() < CHUNK);
        if !room {
            let chunk = self
                .spare
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(CHUNK));
            self.chunks.push(chunk);
        }
        if let Some(c) = self.chunks.last_mut() {
            c.extend_from_slice(entry);
        }
        self.len += ENTRY;
    }

    /// Appends the metadata entry `entry`, or overwrites the pending one
    /// (see the module's documentation).
    pub fn push_meta(&mut self, entry: &[u8; ENTRY]) {
        if let Some(at) = self.meta_at {
            if let Some(c) = self.chunks.get_mut(at / CHUNK) {
                c[at % CHUNK..at % CHUNK + ENTRY].copy_from_slice(entry);
                return;
            }
        }
        self.meta_at = Some(self.len);
        self.push(entry);
    }

    /// Bytes of pending entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Takes every pending entry, leaving the buffer empty (its spare
    /// chunks stay).
    pub fn take(&mut self) -> TakenLog {
        self.meta_at = None;
        let len = std::mem::take(&mut self.len);
        TakenLog {
            chunks: std::mem::take(&mut self.chunks),
            len,
        }
    }

    /// Test aid: checks the module invariants (panics on a violation).
    pub fn check_invariants(&self) {
        let n = self.chunks.len();
        for (i, c) in self.chunks.iter().enumerate() {
            assert!(
                c.len() == CHUNK || (i + 1 == n && !c.is_empty() && c.len() < CHUNK),
                "log buffer: chunk {i} of {n} holds {} bytes",
                c.len()
            );
        }
        let sum: usize = self.chunks.iter().map(Vec::len).sum();
        assert_eq!(
            sum, self.len,
            "log buffer: chunks hold {sum} bytes, len says {}",
            self.len
        );
        assert_eq!(
            self.len % ENTRY,
            0,
            "log buffer: {} bytes is not whole entries",
            self.len
        );
        assert!(
            self.spare.len() <= SPARE,
            "log buffer: {} spare chunks",
            self.spare.len()
        );
        for c in &self.spare {
            assert!(
                c.is_empty() && c.capacity() == CHUNK,
                "log buffer: a spare chunk is not an empty one"
            );
        }
    }

    /// Gives written chunks back for reuse.
    pub fn recycle(&mut self, taken: TakenLog) {
        for mut c in taken.chunks {
            if self.spare.len() >= SPARE {
                break;
            }
            if c.capacity() == CHUNK {
                c.clear();
                self.spare.push(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: u32) -> [u8; ENTRY] {
        let mut e = [0u8; ENTRY];
        e[..4].copy_from_slice(&i.to_le_bytes());
        e[ENTRY - 1] = 0xAB;
        e
    }

    #[test]
    fn a_pending_metadata_entry_is_overwritten_by_the_next() {
        let mut b = LogBuf::default();
        let mut flat = Vec::new();
        // Across chunk boundaries: the first metadata entry lies in the
        // first chunk, later ones overwrite it there.
        for i in 0..(CHUNK / ENTRY) as u32 * 2 {
            b.push(&entry(i));
            flat.extend_from_slice(&entry(i));
            if i == 5 {
                b.push_meta(&entry(1_000_000));
                flat.extend_from_slice(&entry(0));
            }
            if i % 1000 == 999 {
                b.push_meta(&entry(1_000_000 + i));
            }
        }
        let last = 1_000_000 + (CHUNK / ENTRY) as u32 * 2 / 1000 * 1000 - 1;
        flat[6 * ENTRY..7 * ENTRY].copy_from_slice(&entry(last));
        assert_eq!(b.len(), flat.len());
        assert_eq!(b.take().chunks.concat(), flat);
        // After a commit took the entries, the next one is appended.
        b.push(&entry(1));
        b.push_meta(&entry(2));
        b.push_meta(&entry(3));
        assert_eq!(b.take().chunks.concat(), [entry(1), entry(3)].concat());
    }

    #[test]
    fn chunks_concatenate_to_the_entries_in_order() {
        let mut b = LogBuf::default();
        let n = (CHUNK / ENTRY) as u32 * 3 + 7;
        let mut flat = Vec::new();
        for i in 0..n {
            b.push(&entry(i));
            flat.extend_from_slice(&entry(i));
        }
        assert_eq!(b.len(), flat.len());
        let t = b.take();
        assert_eq!(b.len(), 0);
        assert_eq!(t.chunks.len(), 4);
        assert!(t.chunks[..3].iter().all(|c| c.len() == CHUNK));
        assert_eq!(t.chunks.concat(), flat);
        assert_eq!(t.entries(), u64::from(n));
        assert_eq!(t.crc(), crc32c::crc32c(&flat));
    }

    #[test]
    fn recycled_chunks_are_reused_empty() {
        let mut b = LogBuf::default();
        for i in 0..(CHUNK / ENTRY) as u32 * 2 {
            b.push(&entry(i));
        }
        let t = b.take();
        let ptrs: Vec<*const u8> = t.chunks.iter().map(|c| c.as_ptr()).collect();
        b.recycle(t);
        b.push(&entry(1));
        let t = b.take();
        assert_eq!(t.chunks.len(), 1);
        assert_eq!(t.chunks[0], entry(1));
        assert!(ptrs.contains(&t.chunks[0].as_ptr()));
        let empty = b.take();
        assert_eq!((empty.len, empty.chunks.len(), empty.crc()), (0, 0, 0));
    }
}
