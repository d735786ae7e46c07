//! Online backup (`Snapshot::backup`, `Db::backup`, `flexdb backup`): a
//! consistent copy of a live store, as of a snapshot, that opens as a
//! normal store.
//!
//! The copy is logical: the snapshot's pairs, in key order, are written in
//! batches into a new store made in a staging directory beside the
//! destination (`DEST.backup-partial`), which is closed (every pair
//! committed to its space, checkpointed and synced) and only then renamed
//! to `DEST`, and the parent directory synced. Writers and the committer of
//! the source go on meanwhile: the snapshot holds the state it names
//! (its MemTables and the view of the space it read from), nothing more.
//! Restoring is opening the backup. A logical copy is also compact: it
//! holds no garbage, whatever the source held.
//!
//! Invariants: the source is only read. `DEST` is either absent (or an
//! empty directory) or holds a whole backup: never part of one. A backup
//! that fails removes its staging directory; a crash may leave it, and the
//! next backup to the same destination refuses to start until it is
//! removed (its name says what it is). Destinations refused, with nothing
//! changed: a non-empty directory, a file, a path inside the source's
//! directory.

use std::path::{Path, PathBuf};

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::read::snapshot::Snapshot;
use crate::{Db, Options};

/// Pairs written to the backup per batch (and between progress calls).
const BATCH_PAIRS: usize = 4096;
/// The backup store's MemTables at most (it is written in key order, once:
/// bigger ones would only take memory from the source's process).
const BACKUP_MEMTABLE_BYTES: usize = 64 << 20;
/// The backup store's cache while it is written (it is not read).
const BACKUP_CACHE_BYTES: usize = 16 << 20;
/// What the staging directory's name adds to the destination's.
const STAGING_SUFFIX: &str = ".backup-partial";

/// Progress of a backup: pairs copied so far, out of about how many.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackupProgress {
    /// Pairs copied so far.
    pub pairs: u64,
    /// Bytes of keys and values copied so far.
    pub bytes: u64,
    /// The source's pair count when the backup started (the snapshot's own
    /// count is known only at the end; a store being written may hold more
    /// or fewer).
    pub total_pairs: u64,
}

/// What a backup wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackupReport {
    /// The backup's directory.
    pub dest: PathBuf,
    /// Pairs copied: the snapshot's pairs.
    pub pairs: u64,
    /// Bytes of keys and values copied.
    pub bytes: u64,
    /// Bytes the backup takes on disk (every file's allocation).
    pub disk_bytes: u64,
}

/// See [`Snapshot::backup_with_progress`].
pub(crate) fn backup(
    snap: &Snapshot,
    dest: &Path,
    progress: &mut dyn FnMut(BackupProgress),
) -> Result<BackupReport> {
    let store = &snap.point.store;
    // (Not `Store::check_stopped`: a read-only store backs up too.)
    store.mailbox.check_stopped()?;
    let Destination { target, staging } = check_destination(&store.dir, dest)?;
    std::fs::create_dir(&staging).map_err(io(&staging))?;
    let copied = (|| {
        let src = &store.opts;
        let opts = Options {
            cache_bytes: BACKUP_CACHE_BYTES,
            memtable_bytes: src.memtable_bytes.min(BACKUP_MEMTABLE_BYTES),
            sync_writes: false,
            ..src.clone()
        }
        .create_if_missing(true)
        .error_if_exists(true)
        .read_only(false);
        let into = Db::open(&staging, opts)?;
        let total_pairs = store.index.read().pairs;
        let mut done = BackupProgress {
            total_pairs,
            ..BackupProgress::default()
        };
        let mut batch = WriteBatch::new();
        let mut in_batch = 0;
        // Every keyspace's pairs and the catalog, keys as stored.
        let mut pairs = snap.stored_pairs();
        while let Some(pair) = pairs.next_entry_ref() {
            let (k, v, expires) = pair?;
            done.pairs += 1;
            done.bytes += (k.len() + v.len()) as u64;
            // Deadlines go with their pairs (and the expiry queue's
            // entries with the rest).
            match expires {
                0 => batch.put_stored(k.to_vec(), v.to_vec())?,
                x => batch.put_expiring_stored(k.to_vec(), v.to_vec(), x),
            }
            in_batch += 1;
            if in_batch == BATCH_PAIRS {
                into.write(std::mem::take(&mut batch))?;
                in_batch = 0;
                progress(done);
            }
        }
        if in_batch > 0 {
            into.write(batch)?;
        }
        progress(done);
        // Commits, checkpoints and syncs every file of the backup.
        into.close()?;
        let disk_bytes = disk_bytes(&staging)?;
        // An empty directory at `target` (allowed) is replaced atomically;
        // a rename that fails (the directory filled meanwhile, another
        // file system) leaves the staging directory, removed below.
        std::fs::rename(&staging, &target).map_err(io(&target))?;
        Ok((done, disk_bytes))
    })();
    let (done, disk_bytes) = match copied {
        Ok(done) => done,
        Err(e) => {
            // Best effort: the error that stopped the backup is the one to
            // report; a staging directory left behind (a crash) is refused
            // by name next time.
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    // The backup is whole at `target` from here; an error syncing its
    // parent says it may not survive a crash (see `Snapshot::backup`).
    let parent = parent_of(&target);
    std::fs::File::open(&parent)
        .and_then(|d| d.sync_all())
        .map_err(io(&parent))?;
    Ok(BackupReport {
        dest: dest.to_path_buf(),
        pairs: done.pairs,
        bytes: done.bytes,
        disk_bytes,
    })
}

/// Where a backup goes: `target`, the destination with its parent
/// resolved, and the staging directory beside it.
struct Destination {
    target: PathBuf,
    staging: PathBuf,
}

/// Checks that `dest` may take a backup of the store in `source` and
/// returns where it goes: `dest` must be absent or an empty directory (not
/// a symbolic link), outside `source`, and no staging directory of an
/// earlier backup may be in the way.
fn check_destination(source: &Path, dest: &Path) -> Result<Destination> {
    let refuse = |why: String| Err(Error::InvalidArgument(why));
    let shown = dest.display();
    match std::fs::symlink_metadata(dest) {
        Ok(m) if m.file_type().is_symlink() => {
            return refuse(format!("backup destination {shown} is a symbolic link"))
        }
        Ok(m) if !m.is_dir() => return refuse(format!("backup destination {shown} is a file")),
        Ok(_) => {
            let mut entries = std::fs::read_dir(dest).map_err(io(dest))?;
            if entries.next().is_some() {
                return refuse(format!("backup destination {shown} is not empty"));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(dest)(e)),
    }
    let parent = parent_of(dest);
    let parent = parent.canonicalize().map_err(io(&parent))?;
    let source = source.canonicalize().map_err(io(source))?;
    if parent.starts_with(&source) {
        return refuse(format!(
            "backup destination {shown} is inside the store's directory {}",
            source.display()
        ));
    }
    let name = match dest.components().next_back() {
        Some(std::path::Component::Normal(name)) => name,
        _ => return refuse(format!("backup destination {shown} has no name")),
    };
    let mut staging_name = name.to_os_string();
    staging_name.push(STAGING_SUFFIX);
    let staging = parent.join(staging_name);
    if staging.symlink_metadata().is_ok() {
        return refuse(format!(
            "{} is in the way: the staging directory of a backup that did not finish; remove it",
            staging.display()
        ));
    }
    Ok(Destination {
        target: parent.join(name),
        staging,
    })
}

/// The directory `path` is in (`.` for a bare name).
fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The allocation of every file in `dir`.
fn disk_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let m = entry.metadata().map_err(io(&entry.path()))?;
        total += allocated(&m);
    }
    Ok(total)
}

/// The bytes a file's blocks take (its length where blocks are not known).
#[cfg(unix)]
fn allocated(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    m.blocks() * 512
}

#[cfg(not(unix))]
fn allocated(m: &std::fs::Metadata) -> u64 {
    m.len()
}

/// An I/O error on `file`.
fn io(file: &Path) -> impl Fn(std::io::Error) -> Error {
    let file = file.to_path_buf();
    move |e| crate::error::io_err(&file.display().to_string())(e)
}
