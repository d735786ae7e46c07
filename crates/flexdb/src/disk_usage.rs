//! Where a store's disk bytes go: the space's data file (live pairs and
//! garbage), the write-ahead logs, the checkpoints, the space's logical
//! log and the rest (manifest, lock).
//!
//! Invariants: every figure is bytes the file system holds (allocated
//! blocks, `st_blocks` × 512 on real files), not file lengths: a
//! preallocated log or a sparse data file counts what it occupies;
//! `total` is the sum of the parts and every file of the directory counts
//! in exactly one part. Files are read one after another without stopping
//! the store, so a file created or removed meanwhile may be missed.

use flexspace::Storage;

use crate::error::{io_err, Result};
use crate::wal::log_files::is_wal_file;

/// A store's disk bytes, by what holds them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DiskUsage {
    /// Bytes of pairs the space maps (at most the data file's allocation).
    pub live: u64,
    /// The data file's allocation beyond `live`.
    pub garbage: u64,
    /// Write-ahead logs, active, frozen and spare.
    pub wal: u64,
    /// The space's tree file and the saved sparse index.
    pub checkpoint: u64,
    /// The space's logical log.
    pub log: u64,
    /// Everything else (manifest, lock, temporary files).
    pub other: u64,
}

impl DiskUsage {
    /// The sum of the parts.
    pub fn total(&self) -> u64 {
        self.live + self.garbage + self.wal + self.checkpoint + self.log + self.other
    }
}

/// Reads the allocation of every file of the store's directory; `live` is
/// the space's live bytes.
pub(crate) fn measure(storage: &dyn Storage, live: u64) -> Result<DiskUsage> {
    let mut u = DiskUsage::default();
    for name in storage.list_files().map_err(io_err("."))? {
        let bytes = match storage.allocated_bytes(&name) {
            Ok(b) => b,
            // Removed since the listing (a retired log).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err(&name)(e)),
        };
        match name.as_str() {
            "data" => {
                u.live = live.min(bytes);
                u.garbage = bytes - u.live;
            }
            "tree" | "SPARSE" | "SPARSE.tmp" => u.checkpoint += bytes,
            "log" => u.log += bytes,
            n if is_wal_file(n) => u.wal += bytes,
            _ => u.other += bytes,
        }
    }
    Ok(u)
}
