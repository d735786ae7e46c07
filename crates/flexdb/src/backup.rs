//! Online backup (`Snapshot::backup`, `Db::backup`, `flexdb backup`): a
//! consistent copy of a live store, as of a snapshot, that opens as a
//! normal store.
//!
//! Two methods ([`BackupMethod`]):
//! - *Physical* (the default): the snapshot's view of the space is
//!   exported (`flexspace::Snapshot::export`): its extent index written
//!   afresh and every data segment it maps copied at the same offset,
//!   sharing the file system's blocks with the source where it can
//!   (a reflink: XFS, Btrfs), in-kernel copies otherwise. Then the
//!   snapshot's MemTables, which hold what the view's space lacks, are
//!   written into the new store: first their range deletes (as of the
//!   snapshot's sequence number), then, for every key they hold a version
//!   of, the snapshot's version of it (a put with its deadline, or a
//!   delete). The result reads as the snapshot: a key no table names reads
//!   as in the view (or deleted, if a range delete covers it), any other as
//!   the snapshot read it. Fast and, on a file system that shares blocks,
//!   nearly free in disk; the backup carries the garbage of the segments it
//!   copies.
//!   A store holding back updates into a corrupt interval (their logs
//!   kept, `commit`) is refused (`Corrupt`): neither the view nor the
//!   MemTables hold those updates, and the backup would lose them.
//! - *Logical*: the snapshot's pairs, in key order, are written in batches
//!   into a new store. Slower, but compact: no garbage.
//!
//! Either way the new store is made in a staging directory beside the
//! destination (`DEST.backup-partial`), closed (every pair committed to
//! its space, checkpointed and synced) and only then renamed to `DEST`,
//! and the parent directory synced. Writers and the committer of the
//! source go on meanwhile: the snapshot holds the state it names (its
//! MemTables and the view of the space it read from, whose segments are
//! not reused while it lives), nothing more. Restoring is opening the
//! backup.
//!
//! Invariants: the source is only read. `DEST` is either absent (or an
//! empty directory) or holds a whole backup: never part of one. A backup
//! that fails removes its staging directory; a crash may leave it, and the
//! next backup to the same destination refuses to start until it is
//! removed (its name says what it is). Destinations refused, with nothing
//! changed: a non-empty directory, a file, a path inside the source's
//! directory.

use std::ops::Bound;
use std::path::{Path, PathBuf};

use crate::batch::WriteBatch;
use crate::error::{space_err, Error, Result};
use crate::read::snapshot::Snapshot;
use crate::{Db, Options};

/// Pairs written to the backup per batch (and between progress calls).
const BATCH_PAIRS: usize = 4096;
/// Bytes of keys and values after which a batch is written whatever its
/// pairs (a batch is one log record, of at most `wal::format::MAX_RECORD`
/// bytes, and is held in memory whole: 4,096 values of up to 64 MiB
/// each would be neither).
const BATCH_BYTES: u64 = 64 << 20;
/// The backup store's MemTables at most (it is written once: bigger ones
/// would only take memory from the source's process).
const BACKUP_MEMTABLE_BYTES: usize = 64 << 20;
/// The backup store's cache while it is written (it is not read).
const BACKUP_CACHE_BYTES: usize = 16 << 20;
/// What the staging directory's name adds to the destination's.
const STAGING_SUFFIX: &str = ".backup-partial";

/// How a backup copies the store (see the module docs of `backup.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackupMethod {
    /// The snapshot's data segments, sharing the file system's blocks
    /// with the source where it can (reflink), then what its MemTables
    /// hold. The backup keeps the garbage of the segments it copies.
    #[default]
    Physical,
    /// Every pair of the snapshot written into a new store: slower, but
    /// the backup holds no garbage.
    Logical,
}

/// Progress of a backup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackupProgress {
    /// Pairs written one by one so far (a physical backup writes only the
    /// snapshot's MemTables' pairs so).
    pub pairs: u64,
    /// Bytes done so far: data segments written or shared, and keys and
    /// values of pairs written.
    pub bytes: u64,
    /// About how many bytes there are to do in all (data segments, and
    /// the MemTables' or, for a logical backup, the space's bytes).
    pub total_bytes: u64,
}

/// What a backup wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackupReport {
    /// The backup's directory.
    pub dest: PathBuf,
    /// How it was copied.
    pub method: BackupMethod,
    /// Pairs in the backup, every keyspace's, as stored (those of the
    /// keyspace catalog and the expiry queue included).
    pub pairs: u64,
    /// Bytes copied: data-file bytes not shared with the source, and keys
    /// and values of pairs written one by one.
    pub bytes: u64,
    /// Bytes of the backup's data file that share the source's blocks (a
    /// reflink; 0 where the file system cannot, and for a logical backup).
    pub shared_bytes: u64,
    /// Bytes the backup takes on disk (every file's allocation; shared
    /// blocks counted, though the file system stores them once).
    pub disk_bytes: u64,
}

/// What one method copied.
#[derive(Default)]
struct Copied {
    pairs: u64,
    bytes: u64,
    shared_bytes: u64,
}

/// See [`Snapshot::backup_with`].
pub(crate) fn backup(
    snap: &Snapshot,
    dest: &Path,
    method: BackupMethod,
    progress: &mut dyn FnMut(BackupProgress),
) -> Result<BackupReport> {
    let store = &snap.point.store;
    // (Not `Store::check_stopped`: a read-only store backs up too.)
    store.mailbox.check_stopped()?;
    let Destination { target, staging } = check_destination(&store.dir, dest)?;
    std::fs::create_dir(&staging).map_err(io(&staging))?;
    let copied = (|| {
        let copied = match method {
            BackupMethod::Physical => physical(snap, &staging, progress)?,
            BackupMethod::Logical => logical(snap, &staging, progress)?,
        };
        let disk_bytes = disk_bytes(&staging)?;
        // An empty directory at `target` (allowed) is replaced atomically;
        // a rename that fails (the directory filled meanwhile, another
        // file system) leaves the staging directory, removed below.
        std::fs::rename(&staging, &target).map_err(io(&target))?;
        Ok((copied, disk_bytes))
    })();
    let (copied, disk_bytes) = match copied {
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
        method,
        pairs: copied.pairs,
        bytes: copied.bytes,
        shared_bytes: copied.shared_bytes,
        disk_bytes,
    })
}

/// The options of the store a backup is written into (in `staging`).
fn backup_options(snap: &Snapshot, create: bool) -> Options {
    let src = &snap.point.store.opts;
    Options {
        cache_bytes: BACKUP_CACHE_BYTES,
        memtable_bytes: src.memtable_bytes.min(BACKUP_MEMTABLE_BYTES),
        sync_writes: false,
        ..src.clone()
    }
    .create_if_missing(create)
    .error_if_exists(create)
    .read_only(false)
}

/// The bytes of the snapshot's MemTables (what a backup writes of them, about).
fn memtable_bytes(snap: &Snapshot) -> u64 {
    snap.point
        .mems
        .iter()
        .map(|m| m.approximate_bytes() as u64)
        .sum()
}

/// A physical backup into `staging` (see the module docs).
fn physical(
    snap: &Snapshot,
    staging: &Path,
    progress: &mut dyn FnMut(BackupProgress),
) -> Result<Copied> {
    let point = &snap.point;
    // Updates into a damaged interval that a commit held back live only in
    // the logs kept from this generation on (their MemTables are retired):
    // neither the view's space nor the point's MemTables hold them, so a
    // copy of the two would lose them. (Checked after the point was
    // taken: a commit sets this before it retires a MemTable.)
    if let Some(gen) = *point.store.held_logs_from.lock() {
        return Err(Error::Corrupt {
            file: "data".into(),
            detail: format!(
                "updates into a damaged interval are held back in the logs from generation \
                 {gen}: a physical backup would lose them (repair the store first)"
            ),
        });
    }
    let mem_bytes = memtable_bytes(snap);
    let mut done = BackupProgress::default();
    let exported = {
        let storage = flexspace::FileStorage::open(staging, true).map_err(space_err)?;
        let exported = point
            .view
            .space
            .export(&storage, &mut |p| {
                done.bytes = p.bytes;
                done.total_bytes = p.total_segments * flexspace::SEGMENT_SIZE + mem_bytes;
                progress(done);
            })
            .map_err(space_err)?;
        crate::recovery::manifest::write_manifest(&storage)?;
        exported
    };
    done.total_bytes = done.bytes + mem_bytes;
    progress(done);
    let mut copied = Copied {
        bytes: exported.copied_bytes,
        shared_bytes: exported.shared_bytes,
        ..Copied::default()
    };
    let into = Db::open(staging, backup_options(snap, false))?;
    // Range deletes first, oldest table first (all of them delete: their
    // order does not matter), then every key the tables name, as the
    // snapshot reads it: a write after a range delete is such a key.
    let mut batch = WriteBatch::new();
    for m in point.mems.iter().rev() {
        for t in m.range_tombstones(point.seq) {
            batch.push_range(&t.start, t.end.as_deref())?;
        }
    }
    let mut in_batch = 0;
    let mut batch_bytes = 0u64;
    let mut keys = Vec::new();
    for m in &point.mems {
        let mut from: Bound<Vec<u8>> = Bound::Unbounded;
        loop {
            keys.clear();
            m.scan_forward(
                bound_ref(&from),
                Bound::Unbounded,
                point.seq,
                BATCH_PAIRS,
                &mut keys,
            );
            let Some((last, _, _)) = keys.last() else {
                break;
            };
            from = Bound::Excluded(last.to_vec());
            for (key, _, _) in keys.drain(..) {
                let before = done.bytes;
                let mut op = Ok(());
                point.get_entry_with(&key, |version| {
                    op = match version {
                        Some((v, 0)) => {
                            done.bytes += (key.len() + v.len()) as u64;
                            batch.put_stored(key.to_vec(), v.to_vec())
                        }
                        Some((v, deadline)) => {
                            done.bytes += (key.len() + v.len()) as u64;
                            batch.put_expiring_stored(key.to_vec(), v.to_vec(), deadline);
                            Ok(())
                        }
                        None => batch.delete_stored(key.to_vec()),
                    }
                })?;
                op?;
                done.pairs += 1;
                in_batch += 1;
                batch_bytes += key.len() as u64 + (done.bytes - before);
                if batch_bytes >= BATCH_BYTES {
                    into.write(std::mem::take(&mut batch))?;
                    (in_batch, batch_bytes) = (0, 0);
                }
            }
            if in_batch >= BATCH_PAIRS {
                into.write(std::mem::take(&mut batch))?;
                (in_batch, batch_bytes) = (0, 0);
                done.total_bytes = done.total_bytes.max(done.bytes);
                progress(done);
            }
        }
    }
    if !batch.is_empty() {
        into.write(batch)?;
    }
    done.total_bytes = done.bytes;
    progress(done);
    copied.bytes += done.bytes - exported.copied_bytes - exported.shared_bytes;
    into.flush()?;
    copied.pairs = into.stats().pairs;
    // Commits, checkpoints and syncs every file of the backup.
    into.close()?;
    Ok(copied)
}

/// `b` borrowed.
fn bound_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// A logical backup into `staging` (see the module docs).
fn logical(
    snap: &Snapshot,
    staging: &Path,
    progress: &mut dyn FnMut(BackupProgress),
) -> Result<Copied> {
    let point = &snap.point;
    let into = Db::open(staging, backup_options(snap, true))?;
    let mut done = BackupProgress {
        total_bytes: point.view.space.len() + memtable_bytes(snap),
        ..BackupProgress::default()
    };
    let mut batch = WriteBatch::new();
    let mut in_batch = 0;
    let mut batch_bytes = 0u64;
    // Every keyspace's pairs and the catalog, keys as stored.
    let mut pairs = snap.stored_pairs();
    while let Some(pair) = pairs.next_entry_ref() {
        let (k, v, expires) = pair?;
        done.pairs += 1;
        done.bytes += (k.len() + v.len()) as u64;
        done.total_bytes = done.total_bytes.max(done.bytes);
        // Deadlines go with their pairs (and the expiry queue's
        // entries with the rest).
        match expires {
            0 => batch.put_stored(k.to_vec(), v.to_vec())?,
            x => batch.put_expiring_stored(k.to_vec(), v.to_vec(), x),
        }
        in_batch += 1;
        batch_bytes += (k.len() + v.len()) as u64;
        if in_batch == BATCH_PAIRS || batch_bytes >= BATCH_BYTES {
            into.write(std::mem::take(&mut batch))?;
            (in_batch, batch_bytes) = (0, 0);
            progress(done);
        }
    }
    if in_batch > 0 {
        into.write(batch)?;
    }
    done.total_bytes = done.bytes;
    progress(done);
    // Commits, checkpoints and syncs every file of the backup.
    into.close()?;
    Ok(Copied {
        pairs: done.pairs,
        bytes: done.bytes,
        shared_bytes: 0,
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
