//! A read-only shared memory mapping of a file, for reads of the data file
//! without a system call (opt-in: `Options::mmap_reads`).
//!
//! Invariants:
//! - The mapping covers `len` bytes of a file that is at least that long
//!   when mapped; flexspace never shortens its data file, so every mapped
//!   page stays backed by the file (another process truncating the file, or
//!   an I/O error while a page is read in, raises SIGBUS: the trade-off
//!   documented in docs/DESIGN.md).
//! - Bytes are only copied out of the mapping (no reference into it is ever
//!   handed out), and flexspace copies only ranges that no write touches
//!   while they are read (segments are reused only after a grace period;
//!   segments being written are read from their in-memory buffers).

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

/// A read-only `MAP_SHARED` mapping of a file's first `len` bytes.
pub struct Mapping {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the mapping is read-only memory owned by this value until drop;
// copying out of it from several threads at once is sound (see `read`).
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `file` read-only after extending it (sparsely) to at least
    /// `len` bytes. `len` 0 maps nothing and gives `None`.
    pub fn new(file: &File, len: u64) -> io::Result<Option<Mapping>> {
        if len == 0 {
            return Ok(None);
        }
        let len_usize = usize::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
        if file.metadata()?.len() < len {
            file.set_len(len)?;
        }
        // SAFETY: a fresh read-only shared mapping of an open descriptor;
        // the kernel chooses the address, so no existing memory is touched.
        // The result is checked against MAP_FAILED before use.
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

    /// Copies `out.len()` bytes at `offset`; false (and nothing copied) when
    /// they are not all mapped.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> bool {
        let Ok(start) = usize::try_from(offset) else {
            return false;
        };
        match start.checked_add(out.len()) {
            Some(end) if end <= self.len => {
                // SAFETY: `start..end` lies inside the mapping (checked),
                // which is valid for reads until drop; `out` is a distinct
                // exclusive buffer. Nothing writes the range meanwhile (module
                // invariants), and the file covers it, so the copy cannot
                // fault except on an I/O error (SIGBUS, documented).
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
    fn maps_extends_and_reads() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        f.write_all_at(b"hello", 10).unwrap();
        let m = Mapping::new(&f, 1 << 20).unwrap().unwrap();
        assert_eq!(f.metadata().unwrap().len(), 1 << 20);
        assert_eq!(m.len(), 1 << 20);
        let mut b = [0u8; 7];
        assert!(m.read(9, &mut b));
        assert_eq!(&b, b"\0hello\0");
        // Writes through the file show through the shared mapping.
        f.write_all_at(b"world", 12).unwrap();
        assert!(m.read(10, &mut b));
        assert_eq!(&b, b"heworld");
        assert!(!m.read((1 << 20) - 3, &mut b));
        assert!(!m.read(u64::MAX, &mut b));
        assert!(Mapping::new(&f, 0).unwrap().is_none());
    }
}
