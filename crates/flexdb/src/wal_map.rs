//! A write-ahead log file appended through a shared memory mapping.
//!
//! Copying a record into a `MAP_SHARED` mapping puts it in the operating
//! system's page cache at once: it survives the death of the process (a
//! `SIGKILL`, a panic elsewhere) without a system call per write, which a
//! `write` would cost (about 1.4 µs a record here, measured in
//! docs/DESIGN.md). `fdatasync` on the file makes it durable as usual.
//!
//! Invariants:
//! - The file's blocks are allocated (`fallocate`) before they are mapped,
//!   so touching a mapped page never needs space the disk might not have
//!   (which would raise `SIGBUS`); a log that cannot be preallocated is not
//!   mapped at all (the caller falls back to buffered writes).
//! - Only this object writes the file while it lives (the store holds the
//!   directory's lock), so the mapping is never changed behind its back.
//! - `end` only grows; bytes past it are zero.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use memmap2::{MmapMut, MmapOptions};

/// Bytes added to a mapping when it fills up (at least).
const GROW: u64 = 4 << 20;

/// A preallocated, mapped log file.
pub(crate) struct MappedLog {
    file: File,
    map: MmapMut,
    /// Bytes in use (header and records).
    end: u64,
}

fn preallocate(file: &File, len: u64) -> io::Result<()> {
    // SAFETY: fallocate on a descriptor we own; it takes no pointers.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn map(file: &File, len: u64) -> io::Result<MmapMut> {
    // SAFETY: the mapping covers allocated blocks of a file only this
    // process writes (the store's directory is locked), and it is only
    // written through this object.
    unsafe { MmapOptions::new().len(len as usize).map_mut(file) }
}

impl MappedLog {
    /// Maps the log at `path`, whose first `end` bytes (its header) are
    /// written already, with room for `capacity` bytes.
    pub fn open(path: &Path, end: u64, capacity: u64) -> io::Result<MappedLog> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let cap = capacity.max(end + GROW);
        preallocate(&file, cap)?;
        let map = map(&file, cap)?;
        Ok(MappedLog { file, map, end })
    }

    /// Bytes in use.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Appends `bytes` (growing the file and mapping as needed).
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let need = self.end + bytes.len() as u64;
        if need > self.map.len() as u64 {
            let cap = (self.map.len() as u64 * 2).max(need + GROW);
            preallocate(&self.file, cap)?;
            self.map = map(&self.file, cap)?;
        }
        let at = self.end as usize;
        self.map[at..at + bytes.len()].copy_from_slice(bytes);
        self.end = need;
        Ok(())
    }

    /// Overwrites bytes already in use (the header's durable-length slot).
    pub fn write_at(&mut self, at: u64, bytes: &[u8]) {
        let at = at as usize;
        self.map[at..at + bytes.len()].copy_from_slice(bytes);
    }

    /// Makes everything written durable (the store syncs through its own
    /// handle on the file, so appends go on meanwhile).
    #[cfg(test)]
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_land_in_the_file_and_grow_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, b"HEAD").unwrap();
        let mut log = MappedLog::open(&path, 4, 16).unwrap();
        log.append(b"hello").unwrap();
        let big = vec![7u8; (GROW as usize) * 3];
        log.append(&big).unwrap();
        log.write_at(0, b"head");
        log.sync().unwrap();
        assert_eq!(log.end(), 4 + 5 + big.len() as u64);
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() as u64 >= log.end());
        assert_eq!(&bytes[..9], b"headhello");
        assert_eq!(&bytes[9..9 + big.len()], &big[..]);
        assert!(bytes[log.end() as usize..].iter().all(|&b| b == 0));
    }
}
