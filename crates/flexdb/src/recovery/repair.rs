//! Salvaging a damaged store into a new one (`Db::repair`, `flexdb
//! repair`).
//!
//! The damaged store is opened with `Options::salvage`, so that recovery
//! keeps what its files allow instead of refusing the damage: the space's
//! log up to the damaged entry, each write-ahead log up to its damaged
//! record, and logs that follow a missing one (each thing given up is one
//! line of [`RepairReport::salvaged`]). Then the published view is walked
//! as `check` walks it (`recovery::walk`): each pair that verifies goes
//! to the new store, and each stretch that does not is reported as lost
//! with the key range it may have held. Last, the MemTables the logs were
//! replayed into, newer than the space, are written over those pairs,
//! oldest first, deletions included.
//!
//! Invariants: the new store holds exactly the pairs read intact from the
//! space, overwritten by the replayed writes in their order; every key
//! range that may have held a pair that was not read is in `lost`. A
//! salvaging open writes to the store it opens (it truncates logs and
//! starts a new one), so `repair_dir` opens a copy and leaves the damaged
//! files as they were.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flexspace::{FileStorage, Storage};

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::recovery::check::DamagedRange;
use crate::recovery::open::open_storage;
use crate::recovery::walk::{End, Walk};
use crate::store::Store;
use crate::Db;

/// What `Db::repair` salvaged and what it could not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Pairs read intact from the space and written to the new store.
    pub pairs: u64,
    /// Writes replayed from the write-ahead logs and applied over them
    /// (puts and deletes; the newest version of each key per log).
    pub replayed: u64,
    /// Stretches of the data that could not be read, with the keys they
    /// may have held.
    pub lost: Vec<DamagedRange>,
    /// What opening the damaged store gave up, one sentence each naming
    /// the file (for example the commits after a damaged log entry).
    pub salvaged: Vec<String>,
    /// The repaired store.
    pub into: PathBuf,
    /// Where the damaged store was moved to, when it was repaired in place.
    pub original: Option<PathBuf>,
}

impl RepairReport {
    /// Whether everything was salvaged: nothing lost, nothing given up.
    pub fn is_complete(&self) -> bool {
        self.lost.is_empty() && self.salvaged.is_empty()
    }
}

/// Progress of a repair: intervals of the damaged space read so far, of
/// how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepairProgress {
    /// Intervals read.
    pub done: u64,
    /// Intervals in all.
    pub total: u64,
}

/// Pairs written to the new store per batch.
const BATCH_PAIRS: usize = 4096;

/// Opens the store on `from` with salvage (which writes to `from`: pass a
/// copy) and writes what it can read into `into`.
pub(crate) fn repair_storage(
    from: Arc<dyn Storage>,
    name: &Path,
    into: &Db,
    progress: &mut dyn FnMut(RepairProgress),
) -> Result<RepairReport> {
    let mut opts = Options::new().cache_bytes(16 << 20);
    opts.salvage = true;
    let store = open_storage(from, name, opts)?;
    // Keys as format 2 stores them, or (format 1) the user's as they are.
    let keys = match store.format_version {
        1 => Keys::Format1,
        _ => Keys::Stored,
    };
    let mut report = RepairReport {
        salvaged: store.salvaged.clone(),
        into: into.path().to_path_buf(),
        ..RepairReport::default()
    };
    copy_space(&store, keys, into, &mut report, progress)?;
    copy_memtables(&store, keys, into, &mut report)?;
    into.flush()?;
    // The copied catalog names the keyspaces from now on.
    into.reload_keyspaces()?;
    Ok(report)
}

/// How the damaged store's keys map to the new store's.
#[derive(Clone, Copy)]
enum Keys {
    /// As stored (format 2): copied as they are.
    Stored,
    /// A format-1 store's: the default keyspace's keys.
    Format1,
}

impl Keys {
    /// A put of `key`, with its deadline `expires` (0: none; format 1
    /// has none).
    fn put(self, batch: &mut WriteBatch, key: &[u8], value: &[u8], expires: u64) -> Result<()> {
        match self {
            Keys::Stored if expires != 0 => {
                batch.put_expiring_stored(key.to_vec(), value.to_vec(), expires);
                Ok(())
            }
            Keys::Stored => batch.put_stored(key.to_vec(), value.to_vec()),
            Keys::Format1 => batch.put(key, value).map(|_| ()),
        }
    }

    fn delete(self, batch: &mut WriteBatch, key: &[u8]) -> Result<()> {
        match self {
            Keys::Stored => batch.delete_stored(key.to_vec()),
            Keys::Format1 => batch.delete(key).map(|_| ()),
        }
    }

    fn delete_range(self, batch: &mut WriteBatch, start: &[u8], end: Option<&[u8]>) -> Result<()> {
        match self {
            Keys::Stored => batch.push_range(start, end),
            Keys::Format1 => {
                let (start, end) = crate::keyspace::encoding::encode_delete_range(
                    crate::keyspace::KsId::DEFAULT,
                    start.to_vec(),
                    end.map(<[u8]>::to_vec),
                );
                batch.push_range(&start, end.as_deref())
            }
        }
    }
}

/// Every pair of the published view that verifies, into `into`.
fn copy_space(
    store: &Store,
    keys: Keys,
    into: &Db,
    report: &mut RepairReport,
    progress: &mut dyn FnMut(RepairProgress),
) -> Result<()> {
    let view = store.views.load_full();
    let mut walk = Walk::new(&view);
    let total = walk.len() as u64;
    let mut batch = WriteBatch::new();
    let mut in_batch = 0;
    while let Some(step) = walk.next_step() {
        // Keys out of order or outside the interval (damage that
        // verified) go in as they come: the later one wins, as a scan
        // would have met them.
        for p in &step.pairs {
            keys.put(&mut batch, p.key, p.value, p.expires)?;
        }
        in_batch += step.pairs.len();
        report.pairs += step.pairs.len() as u64;
        if let End::Damaged { range, .. } = step.end {
            report.lost.push(range);
        }
        if in_batch >= BATCH_PAIRS {
            into.write(std::mem::take(&mut batch))?;
            in_batch = 0;
        }
        progress(RepairProgress {
            done: step.index as u64 + 1,
            total,
        });
    }
    if in_batch > 0 {
        into.write(batch)?;
    }
    Ok(())
}

/// The replayed writes, oldest MemTable first, over the space's pairs.
fn copy_memtables(store: &Store, keys: Keys, into: &Db, report: &mut RepairReport) -> Result<()> {
    let mems = store.writes.mems();
    let tables = mems
        .frozen
        .iter()
        .map(|f| &f.mem)
        .chain(std::iter::once(&mems.active));
    for mem in tables {
        // Its range deletes first, then the writes they did not override
        // (as the committer applies them).
        let ranges = mem.range_list();
        if let Some(list) = &ranges {
            let mut deletes = WriteBatch::new();
            for t in list.iter() {
                keys.delete_range(&mut deletes, &t.start, t.end.as_deref())?;
            }
            into.write(deletes)?;
        }
        let mut batch = WriteBatch::new();
        for e in mem.newest() {
            if ranges
                .as_ref()
                .is_some_and(|l| l.covering(e.key, u64::MAX).is_some_and(|t| t > e.seq))
            {
                continue;
            }
            match e.value {
                Some(v) => keys.put(&mut batch, e.key, v, e.expires)?,
                None => keys.delete(&mut batch, e.key)?,
            }
            report.replayed += 1;
            if batch.len() >= BATCH_PAIRS {
                into.write(std::mem::take(&mut batch))?;
            }
        }
        if !batch.is_empty() {
            into.write(batch)?;
        }
    }
    Ok(())
}

/// Repairs the store in `dir` into `into` (a new directory), or in place
/// when `into` is `None`: the salvaged store then takes `dir`'s place and
/// the damaged one is kept beside it as `DIR.before-repair-SECONDS`.
pub(crate) fn repair_dir(
    dir: &Path,
    into: Option<&Path>,
    progress: &mut dyn FnMut(RepairProgress),
) -> Result<RepairReport> {
    let io = |file: &Path| {
        let file = file.to_path_buf();
        move |source| Error::Io { file, source }
    };
    // A path like `.` has no name to put beside it.
    let dir = &dir.canonicalize().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::NotFound(dir.to_path_buf()),
        _ => io(dir)(e),
    })?;
    // Held until the end: nobody opens the damaged store meanwhile.
    let lock = FileStorage::open(dir, false).map_err(|e| match e {
        flexspace::Error::Locked(p) => Error::Locked(p),
        flexspace::Error::NotAFlexSpace(p) => Error::NotFound(p),
        e => Error::NotAStore(dir.to_path_buf(), e.to_string()),
    })?;
    if !matches!(
        crate::recovery::manifest::inspect(&lock)?,
        crate::recovery::manifest::DirContents::Store(_)
    ) {
        return Err(Error::NotAStore(
            dir.to_path_buf(),
            "no store manifest".into(),
        ));
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let sibling = |what: &str| {
        let mut name = dir.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".{what}-{stamp}"));
        dir.with_file_name(name)
    };
    let target = into.map_or_else(|| sibling("repaired"), Path::to_path_buf);
    let work = sibling("repair-work");
    std::fs::create_dir(&work).map_err(io(&work))?;
    let result = (|| {
        for name in lock.list_files().map_err(io(dir))? {
            if name != "lock" {
                std::fs::copy(dir.join(&name), work.join(&name)).map_err(io(&dir.join(&name)))?;
            }
        }
        let new = Db::open(
            &target,
            Options::new().create_if_missing(true).error_if_exists(true),
        )?;
        let from = FileStorage::open(&work, false)
            .map_err(|e| Error::NotAStore(work.clone(), e.to_string()))?;
        let mut report = repair_storage(Arc::new(from), dir, &new, progress)?;
        new.close()?;
        report.into = target.clone();
        Ok(report)
    })();
    let cleaned = std::fs::remove_dir_all(&work).map_err(io(&work));
    let mut report = result?;
    cleaned?;
    if into.is_none() {
        drop(lock);
        let original = sibling("before-repair");
        std::fs::rename(dir, &original).map_err(io(dir))?;
        std::fs::rename(&target, dir).map_err(io(&target))?;
        report.into = dir.to_path_buf();
        report.original = Some(original);
    }
    Ok(report)
}
