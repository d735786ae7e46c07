//! Opening a store read-only (`Options::read_only`), beside a writer
//! process or not, and loading a newer state for `Db::catch_up`.
//!
//! A load: the logs are opened first (`read_only_logs`), then the space opens read-only (registered in the reader registry
//! first, then loaded and validated by flexspace, `read_only.rs` there);
//! its metadata words name the last generation whose writes are all in
//! the space (`committed_gen`); every log above it is replayed into a
//! frozen MemTable, taken in order by the same chain rules as recovery
//! (a chained log whose predecessor was read shorter than its chain record
//! says is left out, with every later one: the writes read are a prefix of
//! the write order). Then the load is validated: every log read must
//! still have the header it had when it was opened, and every generation
//! the space's newest commit on file names beyond `committed_gen` must be
//! among the logs read. The writer removes a log, or renames it to a spare
//! whose header a takeover rewrites before any record, only after a commit
//! naming its generation is durable, and never uses a name again: so every
//! record read was the log's own, and the state holds every write of the
//! generations the space may hold part of. (Requiring the newest commit to name `committed_gen` still, the
//! first design, starved readers beside a writer whose MemTables filled
//! faster than a load took.) Any failure (a log read mid-reuse, a torn record that looks like
//! damage, a commit meanwhile) is retried, [`TRIES`] times with a short
//! backoff, then reported as `Error::Unstable` naming the last failure.
//!
//! Invariants: nothing on disk changes (the storage is opened read-only,
//! nothing is removed, synced or created but the registry entry); the
//! store holds the space's state at its commit point plus a prefix of the
//! later writes; no thread is started (no committer: the frozen MemTables
//! stay frozen, and reads merge them as they would a backlog).

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flexspace::{FileStorage, FlexSpace, MemFile, Storage};

use crate::error::{space_err, Error, Result};
use crate::options::Options;
use crate::recovery::manifest;
use crate::recovery::open::{assemble, in_dir, lost_predecessor, space_options, validate};
use crate::recovery::read_only_logs::OpenedLogs;
use crate::recovery::rebuild::rebuild_index;
use crate::recovery::replay::replay_logs;
use crate::store::{CommitPoint, Store};
use crate::wal::Wal;
use crate::write::memtable::MemTable;
use crate::write::{FrozenMemTable, WriteHead};

/// Loads tried before a read-only open (or a catch-up) gives up.
pub(crate) const TRIES: u32 = 50;

/// Opens the store in `dir` read-only.
pub(crate) fn open_dir(dir: &Path, opts: Options) -> Result<Store> {
    validate(&opts)?;
    if !dir.exists() {
        return Err(Error::NotFound(dir.to_path_buf()));
    }
    let storage = FileStorage::open_read_only(dir).map_err(|e| match e {
        flexspace::Error::NotAFlexSpace(p) => Error::NotAStore(p, "not a directory".into()),
        e => Error::NotAStore(dir.to_path_buf(), e.to_string()),
    })?;
    open_storage(Arc::new(storage), dir, opts)
}

/// Opens the store on `storage` read-only (`dir` names it in errors).
pub(crate) fn open_storage(storage: Arc<dyn Storage>, dir: &Path, opts: Options) -> Result<Store> {
    validate(&opts)?;
    let version = match manifest::inspect(storage.as_ref()).map_err(|e| in_dir(e, dir))? {
        manifest::DirContents::Store(v) => v,
        manifest::DirContents::Foreign(why) => {
            return Err(Error::NotAStore(dir.to_path_buf(), why))
        }
        manifest::DirContents::Nothing => return Err(Error::NotFound(dir.to_path_buf())),
    };
    // Format 2 is read as format 3 (a writable open only rewrites its
    // manifest); format 1 stores keys another way.
    if version < 2 {
        return Err(Error::NeedsUpgrade {
            path: dir.to_path_buf(),
            version,
        });
    }
    let mut last = None;
    for attempt in 0..TRIES {
        // A commit meanwhile is likely again at once: the first tries go
        // straight on, then back off (2 ms doubling, at most 16 ms).
        if attempt > 2 {
            std::thread::sleep(Duration::from_millis(1 << (attempt - 2).min(4)));
        }
        match load(&storage, dir, &opts) {
            Ok(store) => {
                return Ok(Store {
                    format_version: version,
                    ..store
                })
            }
            Err(e) if retryable(&e) => last = Some(e),
            Err(e) => return Err(in_dir(e, dir)),
        }
    }
    Err(Error::Unstable {
        tries: TRIES,
        last: last.map_or_else(String::new, |e| in_dir(e, dir).to_string()),
    })
}

/// Whether a failed load may succeed when tried again: damage or an I/O
/// error that a writer's concurrent change may explain, not a refusal of
/// the file system (no right to register, a read-only medium).
fn retryable(e: &Error) -> bool {
    use std::io::ErrorKind::{NotADirectory, PermissionDenied, ReadOnlyFilesystem};
    match e {
        Error::Corrupt { .. } => true,
        Error::Io { source, .. } => !matches!(
            source.kind(),
            PermissionDenied | ReadOnlyFilesystem | NotADirectory
        ),
        _ => false,
    }
}

/// One validated load (see the module documentation).
fn load(storage: &Arc<dyn Storage>, dir: &Path, opts: &Options) -> Result<Store> {
    // Before the space: what the writer retires while it loads stays
    // readable (`read_only_logs`).
    let opened = Arc::new(OpenedLogs::open(storage)?);
    // And while it loads, every few milliseconds: a log made and retired
    // during the load is read too (else the load is retried).
    let loaded = AtomicBool::new(false);
    let space = std::thread::scope(|s| {
        s.spawn(|| {
            while !loaded.load(Ordering::Acquire) {
                if opened.refresh().is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let space = FlexSpace::open_with_storage(
            storage.clone(),
            space_options(opts, false).read_only(true),
        );
        loaded.store(true, Ordering::Release);
        space
    })
    .map_err(|e| match e {
        flexspace::Error::NotAFlexSpace(_) => Error::NotAStore(
            dir.to_path_buf(),
            "the store's space is missing or not a flexspace".into(),
        ),
        e => space_err(e),
    })?;
    opened.refresh()?;
    let CommitPoint {
        pairs,
        committed_gen,
        max_seq,
    } = CommitPoint::read(&space);
    let logs = opened.above(committed_gen)?;
    let present: std::collections::BTreeSet<u64> = logs.iter().map(|(gen, _)| *gen).collect();
    let mut next_seq = max_seq + 1;
    let mut last_gen = committed_gen;
    let mut taken: Option<(u64, u64)> = None;
    // The logs whose writes the state holds (empty ones too).
    let mut read: Vec<(u64, &str)> = Vec::new();
    let mut frozen = VecDeque::new();
    let through: Arc<dyn Storage> = opened.clone();
    for ((gen, name), replayed) in logs.iter().zip(replay_logs(&through, &logs, false)) {
        let (mem, file, next, found, _) = replayed?;
        let prev = match found.back {
            0 => found.chain.map(|(prev_gen, _)| prev_gen),
            back => Some(gen.saturating_sub(u64::from(back))),
        };
        if prev.is_some_and(|p| lost_predecessor(p, committed_gen, &present)) {
            return Err(Error::Corrupt {
                file: name.into(),
                detail: "the log it follows is gone (a writer retired it meanwhile?)".into(),
            });
        }
        if let Some((prev_gen, prev_end)) = found.chain {
            if prev_gen > committed_gen && taken != Some((prev_gen, prev_end)) {
                // The log before it was read shorter than it ended: this
                // one and every later one hold writes after a gap.
                break;
            }
        }
        taken = Some((*gen, found.end));
        read.push((*gen, name));
        last_gen = *gen;
        next_seq = next_seq.max(next);
        if mem.is_empty() {
            continue;
        }
        let len = file.len().map_err(crate::error::io_err(name))?;
        frozen.push_back(FrozenMemTable {
            mem,
            wal: Arc::new(Wal::detached(file, name, len)),
            gen: *gen,
        });
    }
    // The validation: no log read was taken over as a spare before it
    // was read (its header is as first read), and every generation the
    // newest commit on file names beyond the space loaded is among them,
    // so the state holds all of its writes.
    let (_, words) = space.latest_commit().map_err(space_err)?;
    for (_, name) in &read {
        if !opened.unchanged(name)? {
            return Err(Error::Corrupt {
                file: (*name).into(),
                detail: "the log was taken over as a spare while it was read".into(),
            });
        }
    }
    let newest = words[1];
    if let Some(gen) = (committed_gen + 1..=newest).find(|g| !read.iter().any(|(r, _)| r == g)) {
        return Err(Error::Corrupt {
            file: "log".into(),
            detail: format!(
                "generation {newest} was committed while the logs above {committed_gen} \
                 were read, and the log of {gen} was not read"
            ),
        });
    }
    let sparse = match crate::index::saved::load(storage.as_ref(), space.commit_id(), space.len()) {
        Some(s) => s,
        None => rebuild_index(&space)?,
    };
    let gen = last_gen + 1;
    let committed_gen = frozen
        .front()
        .map_or(gen - 1, |f: &FrozenMemTable| f.gen - 1);
    // Never written: every write is refused before it reaches the log.
    let wal = Arc::new(Wal::detached(Arc::new(MemFile::new()), "read-only", 0));
    assemble(
        storage.clone(),
        dir,
        opts.clone(),
        space,
        sparse,
        pairs,
        WriteHead {
            next_seq,
            active: Arc::new(MemTable::new()),
            wal,
            gen,
        },
        frozen,
        committed_gen,
    )
}
