//! The small storage interface through which a FlexTree checkpoint reads and
//! writes its tree file.
//!
//! Invariants: the trait is positional (no cursor), so one handle may be shared
//! by concurrent readers; `sync` is the only durability barrier: bytes written
//! before a `sync` that returned `Ok` survive a crash, bytes written after it
//! may be lost, torn or kept. Upper layers (flexspace) implement this trait for
//! real files and for a fault-injecting backend; [`MemFile`] is a plain
//! in-memory implementation for tests and tools.

use std::io;
use std::sync::Mutex;

/// A byte-addressed file used by the persistence layers.
pub trait StorageFile: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset`; reading past the end is an
    /// `UnexpectedEof` error.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes all of `data` at `offset`, extending the file if needed.
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Makes every completed write durable.
    fn sync(&self) -> io::Result<()>;
    /// The current length of the file in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file holds no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Truncates or zero-extends the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Writes `data` at `offset` where offset, length and the buffer's
    /// address are multiples of [`DIRECT_ALIGN`]; a backend may bypass the
    /// page cache for such writes (O_DIRECT). The default is `write_all_at`.
    fn write_direct_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_all_at(offset, data)
    }
    /// Hints that cached pages of this file may be dropped (used by benchmarks
    /// to measure cold reads). The default does nothing.
    fn drop_cache(&self) -> io::Result<()> {
        Ok(())
    }
    /// Gives the blocks of `offset..offset + len` back to the file system
    /// (the file keeps its length; the range reads as zeros afterwards) and
    /// returns the bytes the file's allocation shrank by, or 0 where the
    /// backend cannot punch holes (the default: it changes nothing).
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<u64> {
        let _ = (offset, len);
        Ok(0)
    }
    /// Bytes of storage the file occupies (a sparse file's holes excluded);
    /// the default is its length.
    fn allocated_bytes(&self) -> io::Result<u64> {
        self.len()
    }
    /// The operating system's file behind this handle, if there is one
    /// (so that [`StorageFile::copy_from`] between two real files can stay
    /// in the kernel and share blocks). The default: none.
    fn os_file(&self) -> Option<&std::fs::File> {
        None
    }
    /// Copies `len` bytes at `src_offset` of `src` to `offset` of this
    /// file (extending it if needed) and returns how many of them now
    /// share the file system's blocks with `src` (a reflink) instead of
    /// having been copied. Reading past the end of `src` is an
    /// `UnexpectedEof` error. The default copies through a buffer and
    /// shares nothing.
    fn copy_from(
        &self,
        src: &dyn StorageFile,
        src_offset: u64,
        offset: u64,
        len: u64,
    ) -> io::Result<u64> {
        copy_through_buffer(src, src_offset, self, offset, len)?;
        Ok(0)
    }
}

/// Bytes a buffered copy moves per read and write.
const COPY_CHUNK: u64 = 1 << 20;

/// Copies `len` bytes at `src_offset` of `src` to `offset` of `dst` through
/// a buffer of at most 1 MiB (what [`StorageFile::copy_from`] does when the
/// files cannot share blocks).
pub fn copy_through_buffer<D: StorageFile + ?Sized>(
    src: &dyn StorageFile,
    src_offset: u64,
    dst: &D,
    offset: u64,
    len: u64,
) -> io::Result<()> {
    let mut buf = vec![0u8; len.min(COPY_CHUNK) as usize];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(COPY_CHUNK) as usize;
        src.read_exact_at(src_offset + done, &mut buf[..n])?;
        dst.write_all_at(offset + done, &buf[..n])?;
        done += n as u64;
    }
    Ok(())
}

/// Alignment of offsets, lengths and buffers for
/// [`StorageFile::write_direct_at`].
pub const DIRECT_ALIGN: usize = 4096;

/// A `StorageFile` held in memory. Every write is immediately "durable".
#[derive(Debug, Default)]
pub struct MemFile {
    bytes: Mutex<Vec<u8>>,
}

impl MemFile {
    /// An empty in-memory file.
    pub fn new() -> Self {
        Self::default()
    }

    /// An in-memory file holding `bytes`.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self {
            bytes: Mutex::new(bytes),
        }
    }

    /// A copy of the file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        // A poisoned lock only means another thread panicked mid-copy of plain
        // bytes; the bytes themselves are still a valid file image.
        self.bytes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn range(offset: u64, len: usize) -> io::Result<(usize, usize)> {
    let start = usize::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    let end = start
        .checked_add(len)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "range overflows"))?;
    Ok((start, end))
}

impl StorageFile for MemFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let bytes = self.lock();
        let (start, end) = range(offset, buf.len())?;
        if end > bytes.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the file",
            ));
        }
        buf.copy_from_slice(&bytes[start..end]);
        Ok(())
    }

    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut bytes = self.lock();
        let (start, end) = range(offset, data.len())?;
        if end > bytes.len() {
            bytes.resize(end, 0);
        }
        bytes[start..end].copy_from_slice(data);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.lock().len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let (len, _) = range(len, 0)?;
        self.lock().resize(len, 0);
        Ok(())
    }
}

impl<T: StorageFile + ?Sized> StorageFile for std::sync::Arc<T> {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_exact_at(offset, buf)
    }
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        (**self).write_all_at(offset, data)
    }
    fn sync(&self) -> io::Result<()> {
        (**self).sync()
    }
    fn len(&self) -> io::Result<u64> {
        (**self).len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        (**self).set_len(len)
    }
    fn write_direct_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        (**self).write_direct_at(offset, data)
    }
    fn drop_cache(&self) -> io::Result<()> {
        (**self).drop_cache()
    }
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<u64> {
        (**self).punch_hole(offset, len)
    }
    fn allocated_bytes(&self) -> io::Result<u64> {
        (**self).allocated_bytes()
    }
    fn os_file(&self) -> Option<&std::fs::File> {
        (**self).os_file()
    }
    fn copy_from(
        &self,
        src: &dyn StorageFile,
        src_offset: u64,
        offset: u64,
        len: u64,
    ) -> io::Result<u64> {
        (**self).copy_from(src, src_offset, offset, len)
    }
}

impl<T: StorageFile + ?Sized> StorageFile for Box<T> {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_exact_at(offset, buf)
    }
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        (**self).write_all_at(offset, data)
    }
    fn sync(&self) -> io::Result<()> {
        (**self).sync()
    }
    fn len(&self) -> io::Result<u64> {
        (**self).len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        (**self).set_len(len)
    }
    fn write_direct_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        (**self).write_direct_at(offset, data)
    }
    fn drop_cache(&self) -> io::Result<()> {
        (**self).drop_cache()
    }
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<u64> {
        (**self).punch_hole(offset, len)
    }
    fn allocated_bytes(&self) -> io::Result<u64> {
        (**self).allocated_bytes()
    }
    fn os_file(&self) -> Option<&std::fs::File> {
        (**self).os_file()
    }
    fn copy_from(
        &self,
        src: &dyn StorageFile,
        src_offset: u64,
        offset: u64,
        len: u64,
    ) -> io::Result<u64> {
        (**self).copy_from(src, src_offset, offset, len)
    }
}
