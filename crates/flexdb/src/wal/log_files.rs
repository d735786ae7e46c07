//! Write-ahead log files: their names, and creating one under a temporary
//! name until its header is durable, then renamed into place.
//!
//! Invariants: a file named as a log (`wal_name`) always has a whole,
//! synced header; a crash while one is made leaves only a temporary name
//! (`wal_tmp_name`), which promises nothing to recover. Log names carry
//! their generation in fixed-width decimal, so listing them in name order
//! lists them in generation order.

use std::sync::Arc;

use flexspace::Storage;

use crate::error::{io_err, Result};
use crate::options::Options;
use crate::wal::Wal;

/// The write-ahead log file of MemTable generation `gen`.
pub fn wal_name(gen: u64) -> String {
    format!("wal-{gen:012}.log")
}

/// The name a write-ahead log is created under before it is renamed to
/// [`wal_name`]; one left by a crash holds no write.
pub fn wal_tmp_name(gen: u64) -> String {
    format!("{}.new", wal_name(gen))
}

/// Whether `name` is a log's temporary name.
pub fn is_wal_tmp_name(name: &str) -> bool {
    name.strip_suffix(".new").and_then(parse_wal_name).is_some()
}

/// The generation of a write-ahead log file name.
pub fn parse_wal_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    if digits.len() != 12 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether `name` is a write-ahead log file: a log (active, frozen, or
/// left by a crash), a spare or a log being made (both named
/// `wal_tmp_name`). The files the WAL's disk footprint is made of (for
/// `Stats`).
pub(crate) fn is_wal_file(name: &str) -> bool {
    parse_wal_name(name).is_some() || is_wal_tmp_name(name)
}

/// Creates the write-ahead log of generation `gen` durably, its records
/// numbered from `first` on: under a temporary name until its header is
/// synced, then renamed and the directory synced, so that a file named as a
/// log always has a whole header (see `recovery::manifest`). With `spare` (see
/// `spare_logs`), the log takes that file over instead of a new one: the
/// spare's name is such a temporary name already. The header records the
/// generation the log `follows` (the one it rotates from, or what an open
/// took), so recovery can tell a predecessor that was removed without
/// being committed (`recovery::open`).
pub(crate) fn new_wal(
    storage: &Arc<dyn Storage>,
    opts: &Options,
    gen: u64,
    first: u64,
    spare: Option<String>,
    follows: Option<u64>,
) -> Result<Arc<Wal>> {
    // (A distance that does not fit is left unrecorded: never in practice.)
    let back = follows
        .and_then(|f| gen.checked_sub(f))
        .and_then(|d| u32::try_from(d).ok())
        .unwrap_or(0);
    let name = wal_name(gen);
    let reused = spare.is_some();
    let tmp = spare.unwrap_or_else(|| wal_tmp_name(gen));
    let file = storage.open_file(&tmp, !reused).map_err(io_err(&tmp))?;
    // The handle for mapped appends (when the backend maps files) follows
    // the file through the rename, as `file` does.
    let mappable = storage.open_mappable(&tmp).map_err(io_err(&tmp))?;
    // Room for a MemTable's worth of records, up to `mapped::FIRST_MAX`;
    // the log grows by steps past it if need be.
    let capacity = opts.memtable_bytes as u64 + (1 << 20);
    let mapping = mappable.map(|m| (m, capacity));
    let wal = if reused {
        Wal::reuse(file, &name, mapping, first, back)?
    } else {
        Wal::create(file, &name, mapping, first, back)?
    };
    wal.set_strict_sync(opts.strict_wal_sync);
    storage.rename(&tmp, &name).map_err(io_err(&name))?;
    storage.sync_dir().map_err(io_err(&name))?;
    Ok(Arc::new(wal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wal_files_are_logs_and_spares_only() {
        for name in [wal_name(7), wal_tmp_name(3), wal_name(12)] {
            assert!(is_wal_file(&name), "{name}");
        }
        for name in ["data", "wal-7.log", "MANIFEST", "tree", "SPARSE"] {
            assert!(!is_wal_file(name), "{name}");
        }
    }
}
