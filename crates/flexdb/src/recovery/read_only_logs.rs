//! The write-ahead logs a read-only load reads, opened before it loads the
//! space: a log the writer retires while the space loads is still read
//! whole through the handle opened before (a removed file keeps its
//! bytes), and a log the writer took over as a spare meanwhile is caught
//! by its header, which a takeover rewrites before any record
//! (`recovery::read_only`).
//!
//! Invariants: every handle served for a log name was opened under that
//! name, and names are never used twice; [`OpenedLogs::unchanged`] holds
//! only if the log's header read now equals the one read at its opening
//! (but for the durable-length slot, which every sync rewrites), so every
//! record read through the handle before was the log's own.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use flexspace::{Mapping, Storage, StorageFile};
use parking_lot::Mutex;

use crate::error::{io_err, Result};
use crate::recovery::manifest;

/// Header bytes compared (a version-4 header; older ones are shorter and
/// compared as far as the file goes).
const HEADER: usize = 48;

/// Logs opened ahead, by name, with their headers as first read; other
/// names go to the storage below.
pub(super) struct OpenedLogs {
    inner: Arc<dyn Storage>,
    logs: Mutex<BTreeMap<String, Opened>>,
}

/// A log's handle and its header as first read.
type Opened = (Arc<dyn StorageFile>, Vec<u8>);

/// Where a log header's durable-length slot lies (`wal::format`): every
/// sync rewrites it, so it is left out of the comparison. A takeover
/// rewrites the first sequence number and `back` (and their CRC), which
/// are compared.
const SLOT: std::ops::Range<usize> = 16..32;

/// The header of `file` as compared: its first `HEADER` bytes (as far as
/// the file goes), the durable-length slot zeroed.
fn header(file: &dyn StorageFile) -> io::Result<Vec<u8>> {
    let n = (file.len()? as usize).min(HEADER);
    let mut b = vec![0u8; n];
    file.read_exact_at(0, &mut b)?;
    for x in b.iter_mut().take(SLOT.end).skip(SLOT.start) {
        *x = 0;
    }
    Ok(b)
}

impl OpenedLogs {
    /// Opens every log of `storage` now (a log gone between the listing
    /// and its opening is left to the listing after the space's load).
    pub fn open(storage: &Arc<dyn Storage>) -> Result<OpenedLogs> {
        let logs = OpenedLogs {
            inner: storage.clone(),
            logs: Mutex::new(BTreeMap::new()),
        };
        logs.refresh()?;
        Ok(logs)
    }

    /// Opens the logs made since the last call (a loader calls it while
    /// the space loads, so that a log made and retired meanwhile is read
    /// too).
    pub fn refresh(&self) -> Result<()> {
        for (_, name) in manifest::list_wals(self.inner.as_ref())? {
            if self.logs.lock().contains_key(&name) {
                continue;
            }
            let file = match self.inner.open_file(&name, false) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(&name)(e)),
            };
            let h = header(file.as_ref()).map_err(io_err(&name))?;
            self.logs.lock().insert(name, (file, h));
        }
        Ok(())
    }

    /// The logs above generation `above`: those opened ahead and those
    /// listed now, in generation order.
    pub fn above(&self, above: u64) -> Result<Vec<(u64, String)>> {
        let mut all: BTreeMap<u64, String> = manifest::list_wals(self.inner.as_ref())?
            .into_iter()
            .collect();
        for name in self.logs.lock().keys() {
            if let Some(gen) = crate::wal::log_files::parse_wal_name(name) {
                all.insert(gen, name.clone());
            }
        }
        Ok(all.into_iter().filter(|(gen, _)| *gen > above).collect())
    }

    /// Whether the log `name`'s header is still the one first read (for a
    /// log not opened ahead: whether it is still there under its name).
    pub fn unchanged(&self, name: &str) -> Result<bool> {
        let opened = self.logs.lock().get(name).cloned();
        match opened {
            Some((file, h)) => Ok(header(file.as_ref()).map_err(io_err(name))? == h),
            None => self.inner.exists(name).map_err(io_err(name)),
        }
    }
}

impl Storage for OpenedLogs {
    fn open_file(&self, name: &str, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let opened = self.logs.lock().get(name).map(|(f, _)| f.clone());
        match opened {
            Some(file) => Ok(file),
            None => self.inner.open_file(name, create),
        }
    }
    fn exists(&self, name: &str) -> io::Result<bool> {
        Ok(self.logs.lock().contains_key(name) || self.inner.exists(name)?)
    }
    fn remove_file(&self, name: &str) -> io::Result<()> {
        self.inner.remove_file(name)
    }
    fn list_files(&self) -> io::Result<Vec<String>> {
        self.inner.list_files()
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.inner.sync_dir()
    }
    fn map_file(&self, name: &str, len: u64) -> io::Result<Option<Mapping>> {
        self.inner.map_file(name, len)
    }
    fn registry_dir(&self) -> Option<PathBuf> {
        self.inner.registry_dir()
    }
}
