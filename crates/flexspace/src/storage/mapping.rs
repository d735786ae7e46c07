//! A read-only shared memory mapping of a file, for reads of the data file
//! without a system call (`Options::mmap_reads`).
//!
//! Invariants:
//! - The mapping reserves `len` bytes of address space but never changes
//!   the file: a copy is made only of bytes below the file's length as last
//!   seen (`backed`, raised by `fstat` when a read reaches past it), so a
//!   read never touches a page past the end of the file. Flexspace never
//!   shortens its data file, so a length once seen stays backed. Another
//!   process truncating the file, or an I/O error while a page is read in,
//!   raises SIGBUS; the mapping is registered with `sigbus`, whose handler
//!   turns that into a failed copy (the caller's `pread` then reports the
//!   error) instead of the end of the process.
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
    /// The `sigbus` slot guarding the range (`None`: the table was full).
    guard: Option<usize>,
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
            guard: super::sigbus::register(ptr as usize, len_usize),
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
                // which is valid for reads until drop and maps the file
                // from offset 0; `out` is a distinct exclusive buffer.
                // Nothing writes the range meanwhile (module invariants).
                // The file covers it (checked, and never shortened), so
                // the copy faults only on an I/O error or a truncation by
                // another process: guarded, that fails the copy; where the
                // guard table was full, SIGBUS ends the process.
                unsafe {
                    let src = self.ptr.add(start);
                    if self.guard.is_some() {
                        super::sigbus::guarded_copy(src, out, self.file.as_raw_fd(), offset)
                    } else {
                        std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len());
                        true
                    }
                }
            }
            _ => false,
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Some(slot) = self.guard {
            super::sigbus::unregister(slot);
        }
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

    /// A page that cannot be read in (here: the file was cut short under
    /// the mapping by another handle, which raises SIGBUS exactly as an
    /// I/O error does) fails the copy instead of ending the process; once
    /// the file holds the bytes again, the mapping reads them.
    #[test]
    fn a_page_that_cannot_be_read_in_fails_the_copy_not_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.write_all_at(&[7u8; 64 << 10], 0).unwrap();
        let m = Mapping::new(f.try_clone().unwrap(), 1 << 20)
            .unwrap()
            .unwrap();
        assert!(m.guard.is_some(), "the mapping is guarded");
        let mut b = vec![0u8; 8192];
        assert!(m.read(4096, &mut b));
        assert!(b.iter().all(|&x| x == 7));
        // Cut under the mapping: its length as seen stays 64 KiB.
        f.set_len(4096).unwrap();
        let mut b = vec![1u8; 8192];
        let r = m.read(16 << 10, &mut b);
        assert!(!r, "the faulting copy fails");
        // The same thread and another go on; bytes still in the file read.
        let mut c = [0u8; 100];
        assert!(m.read(0, &mut c));
        assert!(c.iter().all(|&x| x == 7));
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut d = vec![0u8; 4096];
                assert!(!m.read(20 << 10, &mut d));
            });
        });
        // The file grows back: the pages mapped back read its new bytes.
        f.write_all_at(&[9u8; 64 << 10], 0).unwrap();
        let mut e = vec![0u8; 8192];
        assert!(m.read(16 << 10, &mut e));
        assert!(e.iter().all(|&x| x == 9));
    }
}
