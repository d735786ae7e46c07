//! A read-only shared memory mapping of a file, for reads of the data file
//! without a system call (`Options::mmap_reads`).
//!
//! Invariants:
//! - The mapping reserves `len` bytes of address space but never changes
//!   the file: a copy is made only of bytes below the file's length as last
//!   seen (`backed`, raised by `fstat` when a read reaches past it), so a
//!   read never touches a page past the end of the file. Flexspace never
//!   shortens its data file, so a length once seen stays backed (another
//!   process truncating the file, or an I/O error while a page is read in,
//!   raises SIGBUS: the trade-off documented in docs/DESIGN.md).
//! - Bytes past the backed length are left to the caller's `pread`, which
//!   reports them as a short read: a corrupt index naming them gets an
//!   error, never a signal.
//! - Bytes are only copied out of the mapping (no reference into it is ever
//!   handed out), and flexspace copies only ranges that no write touches
//!   while they are read (segments are reused only after a grace period;
//!   segments being written are read from their in-memory buffers).

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// A read-only `MAP_SHARED` mapping of up to `len` bytes of a file.
pub struct Mapping {
    ptr: *const u8,
    len: usize,
    /// The file, to see its length when a read reaches past `backed`.
    file: File,
    /// Bytes of the file known to exist (its length when last seen).
    backed: AtomicU64,
}

// SAFETY: the mapping is read-only memory owned by this value until drop;
// copying out of it from several threads at once is sound (see `read`).
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps up to `len` bytes of `file` (open for reading, kept to see its
    /// length) read-only, however long the file is now (it is not
    /// extended; `read` copies only what it holds). `len` 0 maps nothing
    /// and gives `None`.
    pub fn new(file: File, len: u64) -> io::Result<Option<Mapping>> {
        if len == 0 {
            return Ok(None);
        }
        let len_usize = usize::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
        let backed = AtomicU64::new(file.metadata()?.len());
        // SAFETY: a fresh read-only shared mapping of an open descriptor;
        // the kernel chooses the address, so no existing memory is touched.
        // The result is checked against MAP_FAILED before use. Pages past
        // the end of the file are never read (see `read`).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len_usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Some(Mapping {
            ptr: ptr as *const u8,
            len: len_usize,
            file,
            backed,
        }))
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is mapped (never: a mapping has at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the file holds the bytes up to `end`: known already, or seen
    /// now with one `fstat` (the file grew since it was last looked at).
    fn backs(&self, end: u64) -> bool {
        if end <= self.backed.load(Ordering::Acquire) {
            return true;
        }
        match self.file.metadata() {
            Ok(m) => {
                self.backed.fetch_max(m.len(), Ordering::AcqRel);
                end <= m.len()
            }
            Err(_) => false,
        }
    }

    /// Copies `out.len()` bytes at `offset`; false (and nothing copied) when
    /// they are not all mapped, or not all in the file.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> bool {
        let Ok(start) = usize::try_from(offset) else {
            return false;
        };
        match start.checked_add(out.len()) {
            Some(end) if end <= self.len && self.backs(end as u64) => {
                // SAFETY: `start..end` lies inside the mapping (checked),
                // which is valid for reads until drop; `out` is a distinct
                // exclusive buffer. Nothing writes the range meanwhile (module
                // invariants), and the file covers it (checked, and never
                // shortened), so the copy cannot fault except on an I/O
                // error (SIGBUS, documented).
                unsafe {
                    std::ptr::copy_nonoverlapping(self.ptr.add(start), out.as_mut_ptr(), out.len())
                };
                true
            }
            _ => false,
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region mapped in `new`, once; no copy
        // can be running (reads borrow `self`).
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn reads_only_what_the_file_holds() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        f.write_all_at(b"hello", 10).unwrap();
        let m = Mapping::new(f.try_clone().unwrap(), 1 << 20)
            .unwrap()
            .unwrap();
        // The file is not extended to the mapping's size.
        assert_eq!(f.metadata().unwrap().len(), 15);
        assert_eq!(m.len(), 1 << 20);
        let mut b = [0u8; 5];
        assert!(m.read(9, &mut b));
        assert_eq!(&b, b"\0hell");
        // Past the end of the file: not copied (no SIGBUS), left to pread.
        assert!(!m.read(12, &mut b));
        assert!(!m.read(4096, &mut b));
        // The file grows: the mapping sees it, and writes through the file
        // show through it.
        f.write_all_at(b"world", 15).unwrap();
        assert!(m.read(12, &mut b));
        assert_eq!(&b, b"llowo");
        f.write_all_at(b"HELLO", 10).unwrap();
        assert!(m.read(10, &mut b));
        assert_eq!(&b, b"HELLO");
        // A page far from the first, once the file reaches it.
        f.write_all_at(b"far", 300_000).unwrap();
        let mut c = [0u8; 3];
        assert!(m.read(300_000, &mut c));
        assert_eq!(&c, b"far");
        assert!(!m.read((1 << 20) - 1, &mut c));
        assert!(!m.read(u64::MAX, &mut c));
        assert!(Mapping::new(f, 0).unwrap().is_none());
    }
}
