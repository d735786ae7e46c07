//! The storage backend: a directory of named files.
//!
//! Invariants: every byte flexspace and flexdb persist goes through a
//! [`Storage`] (the write-ahead log's mapped appends through
//! [`Storage::open_mappable`]), and so does every directory change;
//! `FileStorage` holds an exclusive `flock` on the directory's `lock` file
//! for its whole life, so a second open of the same directory (from this
//! process or another) fails with `Locked`; a read-only `FileStorage`
//! ([`FileStorage::open_read_only`]) takes no lock, opens every file
//! `O_RDONLY` and refuses every directory change, so it cannot change the
//! directory whatever its caller does.
//!
//! Submodules: [`fault`] (the fault-injecting in-memory backend of the
//! crash tests), [`mapping`] (the read-only mapping of the data file,
//! guarded against SIGBUS by `sigbus`),
//! [`aligned`] (O_DIRECT-aligned buffers) and [`counting_file`] (a file
//! wrapper counting the bytes written), [`writable_map`] (files appended
//! through writable mappings, as the write-ahead log is), `clone` (copies
//! between real files that share blocks where the file system can).

pub mod aligned;
mod clone;
pub mod counting_file;
pub mod fault;
pub mod mapping;
mod sigbus;
pub mod writable_map;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use flextree::{MemFile, StorageFile};

use crate::error::{Error, Result};
pub use mapping::Mapping;
pub use writable_map::{MappableFile, WritableMap};

/// A directory of files.
pub trait Storage: Send + Sync {
    /// Opens the file `name`, creating it (empty) when `create` is set;
    /// a missing file without `create` is `NotFound`.
    fn open_file(&self, name: &str, create: bool) -> io::Result<Arc<dyn StorageFile>>;
    /// Whether the file `name` exists.
    fn exists(&self, name: &str) -> io::Result<bool>;
    /// Removes the file `name` (durable after [`Storage::sync_dir`]).
    fn remove_file(&self, name: &str) -> io::Result<()>;
    /// Names of the files in the directory, sorted.
    fn list_files(&self) -> io::Result<Vec<String>>;
    /// Atomically replaces `to` with `from` (durable after
    /// [`Storage::sync_dir`]).
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// Makes file creations, removals and renames durable.
    fn sync_dir(&self) -> io::Result<()>;
    /// Maps up to `len` bytes of the file `name` read-only into memory,
    /// without changing the file (a read past its end is refused, see
    /// [`Mapping::read`]); `None` when the backend cannot map files (the
    /// default). See [`Mapping`] for what an I/O error on a mapped page
    /// does.
    fn map_file(&self, name: &str, len: u64) -> io::Result<Option<Mapping>> {
        let _ = (name, len);
        Ok(None)
    }
    /// Bytes of storage the file `name` occupies (see
    /// [`StorageFile::allocated_bytes`]).
    fn allocated_bytes(&self, name: &str) -> io::Result<u64> {
        self.open_file(name, false)?.allocated_bytes()
    }
    /// Opens the existing file `name` for appends through writable
    /// mappings ([`MappableFile`]); the handle follows the file through
    /// renames. `None` when the backend cannot map files (the default).
    fn open_mappable(&self, name: &str) -> io::Result<Option<Arc<dyn MappableFile>>> {
        let _ = name;
        Ok(None)
    }
    /// The directory of the reader registry (`registry.rs`) that readers in
    /// other processes register in; `None` (the default) when the backend
    /// is not shared with other processes.
    fn registry_dir(&self) -> Option<PathBuf> {
        None
    }
}

/// Real files in a directory, locked for exclusive use.
pub struct FileStorage {
    dir: PathBuf,
    /// The lock on `lock` (none when read-only).
    _lock: Option<File>,
    read_only: bool,
}

/// The error of a change asked of a read-only `FileStorage`.
fn read_only_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "the store is open read-only",
    )
}

impl FileStorage {
    /// Opens (and with `create`, creates) the directory and locks it.
    pub fn open(dir: &Path, create: bool) -> Result<FileStorage> {
        if create {
            if !dir.is_dir() {
                std::fs::create_dir_all(dir).map_err(crate::error::io("directory"))?;
                // The new directory's entry is durable once its parent is
                // synced (a power loss could otherwise take the store).
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    File::open(parent)
                        .and_then(|p| p.sync_all())
                        .map_err(crate::error::io("directory"))?;
                }
            }
        } else if !dir.is_dir() {
            return Err(Error::NotAFlexSpace(dir.to_path_buf()));
        }
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("lock"))
            .map_err(crate::error::io("lock"))?;
        // SAFETY: flock on a file descriptor we own; it only takes an
        // advisory lock and cannot touch memory.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            return Err(Error::Locked(dir.to_path_buf()));
        }
        Ok(FileStorage {
            dir: dir.to_path_buf(),
            _lock: Some(lock),
            read_only: false,
        })
    }

    /// Opens the existing directory `dir` for reading only: no lock (a
    /// writer in another process may hold it), files opened `O_RDONLY`,
    /// file creation and directory changes refused.
    pub fn open_read_only(dir: &Path) -> Result<FileStorage> {
        if !dir.is_dir() {
            return Err(Error::NotAFlexSpace(dir.to_path_buf()));
        }
        Ok(FileStorage {
            dir: dir.to_path_buf(),
            _lock: None,
            read_only: true,
        })
    }
}

impl Storage for FileStorage {
    fn open_file(&self, name: &str, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let path = self.dir.join(name);
        if self.read_only {
            if create && !path.exists() {
                return Err(read_only_error());
            }
            let mut opts = OpenOptions::new();
            opts.read(true);
            let file = match opts.clone().custom_flags(libc::O_NOATIME).open(&path) {
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => opts.open(&path)?,
                other => other?,
            };
            return Ok(Arc::new(RealFile {
                file,
                direct: None,
                read_only: true,
            }));
        }
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(create).truncate(false);
        // Reads need not update the access time (a few percent of a small
        // read's cost); only the file's owner may ask, so fall back.
        let file = match opts.clone().custom_flags(libc::O_NOATIME).open(&path) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => opts.open(&path)?,
            other => other?,
        };
        // A second handle for aligned writes that bypass the page cache;
        // file systems without O_DIRECT (tmpfs) fall back to `file`.
        let direct = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .ok();
        Ok(Arc::new(RealFile {
            file,
            direct,
            read_only: false,
        }))
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        self.dir.join(name).try_exists()
    }

    fn remove_file(&self, name: &str) -> io::Result<()> {
        if self.read_only {
            return Err(read_only_error());
        }
        std::fs::remove_file(self.dir.join(name))
    }

    fn list_files(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                if let Some(n) = entry.file_name().to_str() {
                    names.push(n.to_string());
                }
            }
        }
        names.sort();
        Ok(names)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        if self.read_only {
            return Err(read_only_error());
        }
        std::fs::rename(self.dir.join(from), self.dir.join(to))
    }

    fn sync_dir(&self) -> io::Result<()> {
        if self.read_only {
            return Err(read_only_error());
        }
        File::open(&self.dir)?.sync_all()
    }

    fn map_file(&self, name: &str, len: u64) -> io::Result<Option<Mapping>> {
        Mapping::new(File::open(self.dir.join(name))?, len)
    }

    fn allocated_bytes(&self, name: &str) -> io::Result<u64> {
        Ok(std::fs::metadata(self.dir.join(name))?.blocks() * 512)
    }

    fn open_mappable(&self, name: &str) -> io::Result<Option<Arc<dyn MappableFile>>> {
        if self.read_only {
            return Err(read_only_error());
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.dir.join(name))?;
        Ok(Some(Arc::new(writable_map::RealMappable { file })))
    }

    fn registry_dir(&self) -> Option<PathBuf> {
        Some(self.dir.join(crate::registry::DIR))
    }
}

/// One real file.
pub struct RealFile {
    file: File,
    direct: Option<File>,
    /// Opened by a read-only `FileStorage`: nothing was written through
    /// it, so a sync has nothing to make durable (and would only force a
    /// writer process's pages to disk).
    read_only: bool,
}

impl StorageFile for RealFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, offset)
    }
    fn write_direct_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        match &self.direct {
            Some(d) => d.write_all_at(data, offset),
            None => self.file.write_all_at(data, offset),
        }
    }
    fn sync(&self) -> io::Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.file.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn drop_cache(&self) -> io::Result<()> {
        // SAFETY: posix_fadvise only advises the kernel about our own
        // descriptor's page cache; no memory is touched.
        let rc =
            unsafe { libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(rc))
        }
    }
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<u64> {
        let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "hole past the largest file offset",
            ));
        };
        if n == 0 {
            return Ok(0);
        }
        let before = self.allocated_bytes()?;
        // SAFETY: fallocate on a descriptor we own; it changes the file's
        // blocks, never our memory.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off,
                n,
            )
        };
        if rc != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                // The file system cannot punch holes: nothing changed.
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(0),
                _ => Err(e),
            };
        }
        Ok(before.saturating_sub(self.allocated_bytes()?))
    }
    fn allocated_bytes(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.blocks() * 512)
    }
    fn os_file(&self) -> Option<&File> {
        Some(&self.file)
    }
    fn copy_from(
        &self,
        src: &dyn StorageFile,
        src_offset: u64,
        offset: u64,
        len: u64,
    ) -> io::Result<u64> {
        let kernel = match src.os_file() {
            Some(from) => clone::copy_range(from, &self.file, src_offset, offset, len)?,
            None => clone::KernelCopy { shared: 0, done: 0 },
        };
        let done = kernel.done;
        flextree::copy_through_buffer(src, src_offset + done, self, offset + done, len - done)?;
        Ok(kernel.shared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_operations_on_real_files() {
        let dir = tempfile::tempdir().unwrap();
        let st = FileStorage::open(dir.path(), true).unwrap();
        st.open_file("b", true)
            .unwrap()
            .write_all_at(0, b"x")
            .unwrap();
        st.open_file("a", true).unwrap();
        assert_eq!(st.list_files().unwrap(), vec!["a", "b", "lock"]);
        st.rename("b", "a").unwrap();
        st.sync_dir().unwrap();
        assert_eq!(st.list_files().unwrap(), vec!["a", "lock"]);
        let mut buf = [0u8; 1];
        st.open_file("a", false)
            .unwrap()
            .read_exact_at(0, &mut buf)
            .unwrap();
        assert_eq!(&buf, b"x");
        st.remove_file("a").unwrap();
        assert!(!st.exists("a").unwrap());
        assert!(matches!(
            FileStorage::open(dir.path(), false),
            Err(Error::Locked(_))
        ));
    }

    /// A punched range reads as zeros and its blocks leave the file (on a
    /// file system that punches; elsewhere nothing changes and 0 is freed).
    #[test]
    fn punching_a_hole_frees_blocks_and_reads_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let st = FileStorage::open(dir.path(), true).unwrap();
        let f = st.open_file("d", true).unwrap();
        let mb = 1u64 << 20;
        f.write_all_at(0, &vec![7u8; 4 * mb as usize]).unwrap();
        f.sync().unwrap();
        let before = f.allocated_bytes().unwrap();
        assert!(before >= 4 * mb, "{before}");
        let freed = f.punch_hole(mb, 2 * mb).unwrap();
        let after = f.allocated_bytes().unwrap();
        assert_eq!(f.len().unwrap(), 4 * mb, "the length is kept");
        assert_eq!(before - after, freed);
        let mut b = vec![1u8; mb as usize];
        f.read_exact_at(mb, &mut b).unwrap();
        if freed > 0 {
            assert_eq!(freed, 2 * mb);
            assert!(b.iter().all(|&x| x == 0));
        }
        f.read_exact_at(3 * mb, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 7));
        assert_eq!(f.punch_hole(0, 0).unwrap(), 0);
    }
}
