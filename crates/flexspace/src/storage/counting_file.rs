//! A `StorageFile` wrapper that counts the bytes written through it.
//!
//! Invariant: `written` is the sum of the lengths of successful writes
//! (of a copy, the bytes copied rather than shared with the source).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::storage::StorageFile;

/// Counts bytes written to the wrapped file.
pub struct CountingFile {
    inner: Arc<dyn StorageFile>,
    written: AtomicU64,
}

impl CountingFile {
    pub fn new(inner: Arc<dyn StorageFile>) -> Self {
        CountingFile {
            inner,
            written: AtomicU64::new(0),
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

impl StorageFile for CountingFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_exact_at(offset, buf)
    }
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_all_at(offset, data)?;
        self.written.fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(())
    }
    fn write_direct_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_direct_at(offset, data)?;
        self.written.fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn drop_cache(&self) -> io::Result<()> {
        self.inner.drop_cache()
    }
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<u64> {
        self.inner.punch_hole(offset, len)
    }
    fn allocated_bytes(&self) -> io::Result<u64> {
        self.inner.allocated_bytes()
    }
    fn os_file(&self) -> Option<&std::fs::File> {
        self.inner.os_file()
    }
    fn copy_from(
        &self,
        src: &dyn StorageFile,
        src_offset: u64,
        offset: u64,
        len: u64,
    ) -> io::Result<u64> {
        let shared = self.inner.copy_from(src, src_offset, offset, len)?;
        // Shared blocks are not written; copied ones are.
        self.written.fetch_add(len - shared, Ordering::Relaxed);
        Ok(shared)
    }
}
