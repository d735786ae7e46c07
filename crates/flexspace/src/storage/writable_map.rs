//! Files appended through writable shared mappings (the write-ahead log's
//! production path), behind the storage abstraction.
//!
//! A [`MappableFile`] preallocates a stretch of its file and maps it
//! writable ([`MappableFile::map_writable`]); bytes copied into the
//! [`WritableMap`] are the file's bytes at once (reads see them, the death
//! of the process keeps them), and durable after
//! [`MappableFile::sync_data`]. Two backends: real files (`fallocate`,
//! then a `MAP_SHARED` mapping: [`FileStorage`](super::FileStorage)) and
//! the fault-injecting one ([`FaultStorage`](super::fault::FaultStorage)),
//! where each copy is one write of the inode: an operation a crash may be
//! planned at, kept, lost or torn by a crash until synced, as a page of a
//! real mapping may or may not have been written back.
//!
//! Invariants:
//! - A stretch is preallocated before it is mapped, so a copy into a real
//!   mapping never needs space the disk might not have (which would raise
//!   `SIGBUS`); a failed preallocation maps nothing and changes no byte.
//! - [`WritableMap::write`] dispatches on an enum, not a virtual call: the
//!   real mapping's copy is a `memcpy`, inlined into its caller.
//! - A copy cannot fail: an injected error at a simulated copy is reported
//!   by the file's next sync (as the kernel reports a failed write-back).

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

use memmap2::{MmapMut, MmapOptions};

use super::fault::SimulatedMap;

/// A file that can be appended through writable mappings.
pub trait MappableFile: Send + Sync {
    /// Preallocates `[at, at + len)` (extending the file), then maps it
    /// writable. Fails (with `ENOSPC` when the disk is full) having mapped
    /// nothing. `at` must be a multiple of the page size.
    fn map_writable(&self, at: u64, len: u64) -> io::Result<WritableMap>;
    /// Makes every byte written to the file (through its mappings or
    /// otherwise) durable, with the length needed to read them.
    fn sync_data(&self) -> io::Result<()>;
    /// Asks for the write-back of `[from, from + len)` to start now,
    /// without waiting: a hint that changes nothing a crash may leave.
    fn start_write_back(&self, from: u64, len: u64);
}

/// One writable mapping of a stretch of a [`MappableFile`].
pub struct WritableMap {
    kind: MapKind,
}

enum MapKind {
    /// A `MAP_SHARED` mapping of a real file.
    Real(MmapMut),
    /// A stretch of a fault-injecting storage's inode.
    Simulated(SimulatedMap),
}

impl WritableMap {
    pub(super) fn simulated(map: SimulatedMap) -> WritableMap {
        WritableMap {
            kind: MapKind::Simulated(map),
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match &self.kind {
            MapKind::Real(m) => m.len(),
            MapKind::Simulated(m) => m.len(),
        }
    }

    /// Whether it maps nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies `bytes` to offset `off` of the mapping.
    ///
    /// # Panics
    /// When `off + bytes.len()` passes [`WritableMap::len`] (a caller's
    /// bug, as any slice index out of bounds).
    #[inline]
    pub fn write(&mut self, off: usize, bytes: &[u8]) {
        match &mut self.kind {
            MapKind::Real(m) => m[off..off + bytes.len()].copy_from_slice(bytes),
            MapKind::Simulated(m) => m.write(off, bytes),
        }
    }

    /// The memory of bytes `[from, to)` of the mapping, as `(address,
    /// length)`, for hints such as `madvise` on it; `None` for a simulated
    /// mapping or an empty range.
    pub fn span(&self, from: usize, to: usize) -> Option<(usize, usize)> {
        match &self.kind {
            MapKind::Real(m) => {
                let to = to.min(m.len());
                (from < to).then(|| (m.as_ptr() as usize + from, to - from))
            }
            MapKind::Simulated(_) => None,
        }
    }
}

/// A real file opened for mapped appends.
pub(super) struct RealMappable {
    pub(super) file: File,
}

/// Allocates the file's blocks in `[at, at + len)` (extending it).
fn preallocate(file: &File, at: u64, len: u64) -> io::Result<()> {
    let (Ok(at), Ok(len)) = (libc::off_t::try_from(at), libc::off_t::try_from(len)) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "file length out of range",
        ));
    };
    // SAFETY: fallocate on a descriptor we own; it takes no pointers.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, at, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl MappableFile for RealMappable {
    fn map_writable(&self, at: u64, len: u64) -> io::Result<WritableMap> {
        preallocate(&self.file, at, len)?;
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "mapping too large"))?;
        // SAFETY: the mapping covers blocks of the file allocated just
        // above, of a file only this process writes (the store's directory
        // is locked), and it is written only through the returned value;
        // memmap2 checks that `at` suits the page size.
        let map = unsafe { MmapOptions::new().offset(at).len(len).map_mut(&self.file) }?;
        Ok(WritableMap {
            kind: MapKind::Real(map),
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    #[cfg(target_os = "linux")]
    fn start_write_back(&self, from: u64, len: u64) {
        let (Ok(from), Ok(len)) = (i64::try_from(from), i64::try_from(len)) else {
            return;
        };
        // SAFETY: `sync_file_range` takes a descriptor, two integers and
        // flags, no pointers; with SYNC_FILE_RANGE_WRITE alone it only
        // queues write-back of the range. A hint: the sync that follows
        // reports any real I/O error, so the result is ignored.
        let _ = unsafe {
            libc::sync_file_range(
                self.file.as_raw_fd(),
                from,
                len,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
    }

    #[cfg(not(target_os = "linux"))]
    fn start_write_back(&self, _from: u64, _len: u64) {}
}

#[cfg(test)]
mod tests {
    use crate::storage::fault::{CrashModel, Fault, FaultStorage};
    use crate::storage::{FileStorage, Storage};

    /// On both backends: writes through two mappings land in the file,
    /// reads see them at once, and a sync makes them durable.
    #[test]
    fn mapped_writes_are_the_files_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let real = FileStorage::open(dir.path(), true).unwrap();
        let fault = FaultStorage::new();
        let page = 1 << 20;
        for st in [&real as &dyn Storage, &fault] {
            let f = st.open_file("log", true).unwrap();
            f.write_all_at(0, b"HEAD").unwrap();
            let m = st.open_mappable("log").unwrap().expect("mappable");
            let mut a = m.map_writable(0, page).unwrap();
            let mut b = m.map_writable(page, page).unwrap();
            assert_eq!(a.len() as u64, page);
            a.write(4, b"hello");
            b.write(0, b"world");
            assert!(f.len().unwrap() >= 2 * page);
            let mut buf = [0u8; 9];
            f.read_exact_at(0, &mut buf).unwrap();
            assert_eq!(&buf, b"HEADhello");
            f.read_exact_at(page, &mut buf[..5]).unwrap();
            assert_eq!(&buf[..5], b"world");
            m.start_write_back(0, page);
            // Ranges past the end, empty and out of range: hints, no panic.
            m.start_write_back(10 * page, page);
            m.start_write_back(0, 0);
            m.start_write_back(u64::MAX, 1);
            m.start_write_back(i64::MAX as u64 - 10, 100);
            m.sync_data().unwrap();
        }
        let img = fault.crash_image();
        let bytes = img.file_bytes("log").unwrap();
        assert_eq!(&bytes[..9], b"HEADhello");
        assert_eq!(&bytes[page as usize..page as usize + 5], b"world");
        let real_bytes = std::fs::read(dir.path().join("log")).unwrap();
        assert_eq!(&real_bytes[..9], b"HEADhello");
    }

    /// Unsynced mapped bytes are lost by a crash that keeps only synced
    /// bytes; with reordering some are kept, some lost, some torn by
    /// sector; an injected error at a copy surfaces at the next sync.
    #[test]
    fn unsynced_mapped_bytes_may_or_may_not_survive() {
        let st = FaultStorage::new();
        st.open_file("log", true).unwrap();
        let m = st.open_mappable("log").unwrap().unwrap();
        let mut map = m.map_writable(0, 4096).unwrap();
        map.write(0, &[1u8; 1024]);
        m.sync_data().unwrap();
        map.write(0, &[2u8; 1024]);
        st.plan(0, Fault::Crash { tear: false });
        // A copy after the crash changes nothing.
        map.write(0, &[3u8; 1024]);
        assert!(m.sync_data().is_err());
        assert_eq!(
            &st.crash_image().file_bytes("log").unwrap()[..1024],
            &[1u8; 1024]
        );

        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..32 {
            let st = FaultStorage::with_model(CrashModel::Reorder { seed });
            st.open_file("log", true).unwrap();
            let m = st.open_mappable("log").unwrap().unwrap();
            st.sync_dir().unwrap();
            let mut map = m.map_writable(0, 4096).unwrap();
            map.write(0, &[1u8; 1024]);
            m.sync_data().unwrap();
            map.write(0, &[2u8; 1024]);
            st.plan(0, Fault::Crash { tear: false });
            assert!(m.sync_data().is_err());
            let b = st.crash_image().file_bytes("log").unwrap();
            seen.insert((b[0], b[600]));
        }
        assert!(seen.contains(&(1, 1)) && seen.contains(&(2, 2)), "{seen:?}");
        assert!(seen.iter().any(|&(a, b)| a != b), "never torn: {seen:?}");

        let st = FaultStorage::new();
        st.open_file("log", true).unwrap();
        let m = st.open_mappable("log").unwrap().unwrap();
        let mut map = m.map_writable(0, 4096).unwrap();
        st.plan(0, Fault::Io);
        map.write(0, b"x");
        assert_eq!(m.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
        m.sync_data().unwrap();
    }

    /// A preallocation is an operation: a full disk there maps nothing.
    #[test]
    fn a_failed_preallocation_maps_nothing() {
        let st = FaultStorage::new();
        st.open_file("log", true).unwrap();
        let m = st.open_mappable("log").unwrap().unwrap();
        st.plan(0, Fault::NoSpace);
        let e = m.map_writable(0, 4096).err().unwrap();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(st.file_bytes("log").unwrap().len(), 0);
        assert!(m.map_writable(0, 4096).is_ok());
        assert_eq!(st.file_bytes("log").unwrap().len(), 4096);
    }
}
