//! Opening a store: creation, or recovery after a clean close or a crash
//! (§5.4).
//!
//! Recovery: the space recovers its own last commit point; its metadata
//! words give the pair count, the last generation whose writes are all in
//! the space, and the highest sequence number used. Logs of generations up
//! to that one are removed; the others are replayed, each into a frozen
//! MemTable that the committer will merge. A log holds one generation's
//! writes and depends on no other, so the logs are replayed on several
//! threads at once (each also synced by a helper thread meanwhile); their
//! results are then taken oldest first, as a sequential replay would take
//! them, and the first log that fails (in generation order) fails the
//! open. The sparse index is the one saved at a clean close when it
//! describes the space as recovered, and otherwise rebuilt by sampling the
//! space (`rebuild`).
//!
//! Invariants: after `open` returns, every write whose sync returned before
//! the crash is in a MemTable or the space, the writes of the replayed logs
//! form a prefix of the write order, and sequence numbers continue above
//! every one used before.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use flexspace::{FileStorage, FlexSpace, Storage, StorageFile};
use parking_lot::RwLock;
use tracing::Level;

use crate::batch::WriteBatch;
use crate::commit::mailbox::CommitterMailbox;
use crate::error::{io_err, space_err};
use crate::error::{Error, Result};
use crate::index::interval_cache::IntervalCache;
use crate::index::sparse::SparseIndex;
use crate::index::CommitterIndex;
use crate::options::Options;
use crate::read::view::{PublishedView, ViewPublisher};
use crate::recovery::manifest;
use crate::recovery::rebuild::rebuild_index;
use crate::stats::Counters;
use crate::store::{CommitPoint, Store};
use crate::wal::log_files::new_wal;
use crate::wal::Wal;
use crate::write::chunk_pool::ChunkPool;
use crate::write::memtable::MemTable;
use crate::write::memtable_list::WriteSide;
use crate::write::{FrozenMemTable, WriteHead};

/// Opens the store in `dir` on real files.
pub(crate) fn open_dir(dir: &Path, opts: Options) -> Result<Store> {
    if !dir.exists() && !opts.create_if_missing {
        return Err(Error::NotFound(dir.to_path_buf()));
    }
    if dir.exists() && !dir.is_dir() {
        return Err(Error::NotAStore(
            dir.to_path_buf(),
            "not a directory".into(),
        ));
    }
    let storage = FileStorage::open(dir, opts.create_if_missing).map_err(|e| match e {
        flexspace::Error::Locked(p) => Error::Locked(p),
        flexspace::Error::NotAFlexSpace(p) => Error::NotFound(p),
        flexspace::Error::Io { file, source } => Error::Io {
            file: dir.join(file),
            source,
        },
        e => Error::NotAStore(dir.to_path_buf(), e.to_string()),
    })?;
    open_storage(Arc::new(storage), dir, opts, true)
}

/// Opens the store on any storage backend (`dir` names it in errors; with
/// `real`, it is the directory the backend's files are in).
pub(crate) fn open_storage(
    storage: Arc<dyn Storage>,
    dir: &Path,
    opts: Options,
    real: bool,
) -> Result<Store> {
    let real_dir = real.then(|| dir.to_path_buf());
    validate(&opts)?;
    let found = manifest::inspect(storage.as_ref()).map_err(|e| in_dir(e, dir))?;
    match found {
        manifest::DirContents::Store if opts.error_if_exists => {
            Err(Error::AlreadyExists(dir.to_path_buf()))
        }
        manifest::DirContents::Store => {
            recover(storage, dir, real_dir, opts).map_err(|e| in_dir(e, dir))
        }
        manifest::DirContents::Foreign(why) => Err(Error::NotAStore(dir.to_path_buf(), why)),
        manifest::DirContents::Nothing if !opts.create_if_missing => {
            Err(Error::NotFound(dir.to_path_buf()))
        }
        manifest::DirContents::Nothing => {
            create(storage, dir, real_dir, opts).map_err(|e| in_dir(e, dir))
        }
    }
}

/// Makes file names in errors full paths.
fn in_dir(e: Error, dir: &Path) -> Error {
    match e {
        Error::Io { file, source } if file.is_relative() => Error::Io {
            file: dir.join(file),
            source,
        },
        Error::Corrupt { file, detail } if file.is_relative() => Error::Corrupt {
            file: dir.join(file),
            detail,
        },
        e => e,
    }
}

fn validate(opts: &Options) -> Result<()> {
    if opts.memtable_bytes < 4096 {
        return Err(Error::InvalidArgument(
            "memtable_bytes must be at least 4096".into(),
        ));
    }
    if opts.max_space_bytes < 8 * flexspace::SEGMENT_SIZE {
        return Err(Error::InvalidArgument(format!(
            "max_space_bytes must be at least {}",
            8 * flexspace::SEGMENT_SIZE
        )));
    }
    Ok(())
}

fn space_options(opts: &Options, create: bool) -> flexspace::Options {
    // The store's durability comes from its write-ahead log: the space only
    // needs to commit when the committer finishes a MemTable (it syncs then),
    // not every megabyte of index log on its own.
    flexspace::Options::new()
        .create(create)
        .max_data_size(opts.max_space_bytes)
        .commit_log_bytes(256 << 20)
        // The committer runs the space's maintenance itself, between groups
        // and outside the store's locks (see `committer::apply_group`), so a
        // garbage-collection round never runs while readers wait on `index`.
        .auto_maintenance(false)
        // Reads through a mapping where the options ask for it (see
        // `Options::mmap_reads`; storage without real files maps nothing).
        .mmap_reads(opts.mmap_reads)
}

/// The tracing target of recovery's step timings.
pub(crate) const TRACE_TARGET: &str = "flexdb::recovery";

fn create(
    storage: Arc<dyn Storage>,
    dir: &Path,
    real_dir: Option<PathBuf>,
    opts: Options,
) -> Result<Store> {
    manifest::remove_leftovers(&storage)?;
    let space = FlexSpace::open_with_storage(storage.clone(), space_options(&opts, true))
        .map_err(space_err)?;
    let gen = 1;
    let wal = new_wal(&storage, real_dir.as_deref(), &opts, gen, 1, None)?;
    // The manifest last: a store exists once it is durable.
    manifest::write_manifest(storage.as_ref())?;
    assemble(
        storage,
        dir,
        real_dir,
        opts,
        space,
        SparseIndex::new(),
        0,
        WriteHead {
            next_seq: 1,
            active: Arc::new(MemTable::new()),
            wal,
            gen,
        },
        VecDeque::new(),
        0,
    )
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    storage: Arc<dyn Storage>,
    dir: &Path,
    real_dir: Option<PathBuf>,
    opts: Options,
    space: FlexSpace,
    sparse: SparseIndex,
    pairs: u64,
    writer: WriteHead,
    frozen: VecDeque<FrozenMemTable>,
    committed_gen: u64,
) -> Result<Store> {
    let mut writer = writer;
    // Up to the MemTables a commit may retire at once: what a backlog of
    // them held before, so keeping it never raises the peak (see `write::chunk_pool`).
    let chunks = Arc::new(ChunkPool::new(
        opts.memtable_bytes.saturating_mul(crate::write::MAX_FROZEN),
    ));
    if writer.active.is_empty() {
        writer.active = Arc::new(MemTable::pooled(&[], Some(chunks.clone())));
    }
    let visible = writer.next_seq - 1;
    let view = PublishedView::copy(&sparse, &space)?;
    let trace_views = tracing::enabled!(target: crate::read::view::TRACE_TARGET, Level::DEBUG);
    Ok(Store {
        dir: dir.to_path_buf(),
        real_dir,
        cache: IntervalCache::new(opts.cache_bytes),
        opts,
        storage,
        space,
        writes: WriteSide::new(writer, frozen, visible),
        index: RwLock::new(CommitterIndex {
            sparse,
            pairs,
            version: 0,
        }),
        mailbox: CommitterMailbox::new(committed_gen),
        counters: Counters::default(),
        trace: tracing::enabled!(target: crate::commit::TRACE_TARGET, Level::DEBUG),
        views: ViewPublisher::new(view, trace_views),
        chunks,
        // As many as one commit retires.
        spare_logs: crate::wal::spare_logs::SpareLogs::new(crate::write::MAX_FROZEN),
    })
}

fn recover(
    storage: Arc<dyn Storage>,
    dir: &Path,
    real_dir: Option<PathBuf>,
    opts: Options,
) -> Result<Store> {
    let t0 = std::time::Instant::now();
    let space = FlexSpace::open_with_storage(storage.clone(), space_options(&opts, false))
        .map_err(|e| match e {
            flexspace::Error::NotAFlexSpace(_) => Error::Corrupt {
                file: "tree".into(),
                detail: "the store's space is missing or not a flexspace".into(),
            },
            e => space_err(e),
        })?;
    let t_space = t0.elapsed();
    let CommitPoint {
        pairs,
        committed_gen,
        max_seq,
    } = CommitPoint::read(&space);
    let mut next_seq = max_seq + 1;
    let mut frozen = VecDeque::new();
    let mut last_gen = committed_gen;
    let mut logs = Vec::new();
    manifest::remove_unfinished_wals(storage.as_ref())?;
    for (gen, name) in manifest::list_wals(storage.as_ref())? {
        if gen <= committed_gen {
            storage.remove_file(&name).map_err(io_err(&name))?;
        } else {
            logs.push((gen, name));
        }
    }
    // Each log holds one generation's writes and nothing of the others:
    // they are replayed at once, each into its own MemTable, and then
    // taken in generation order as one sequential replay would.
    for ((gen, name), replayed) in logs.iter().zip(replay_logs(&storage, &logs)) {
        let (mem, file, next) = replayed?;
        next_seq = next_seq.max(next);
        last_gen = *gen;
        if mem.is_empty() {
            storage.remove_file(name).map_err(io_err(name))?;
            continue;
        }
        // The committer reads the log only to sync it, which is done.
        let len = file.len().map_err(io_err(name))?;
        let wal = Arc::new(Wal::detached(file, name, len));
        frozen.push_back(FrozenMemTable {
            mem,
            wal,
            gen: *gen,
        });
    }
    let t_replay = t0.elapsed();
    let gen = last_gen + 1;
    let wal = new_wal(&storage, real_dir.as_deref(), &opts, gen, next_seq, None)?;
    let t_wal = t0.elapsed();
    // The index saved by a clean close, when it describes this very state
    // of the space; otherwise the space is sampled.
    let saved = crate::index::saved::load(storage.as_ref(), space.commit_id(), space.len());
    let loaded = saved.is_some();
    let sparse = match saved {
        Some(s) => s,
        None => rebuild_index(&space)?,
    };
    tracing::debug!(
        target: TRACE_TARGET,
        space = ?t_space,
        log_replay = ?(t_replay - t_space),
        new_log = ?(t_wal - t_replay),
        sparse_index = if loaded { "loaded" } else { "sampled" },
        sparse_index_time = ?(t0.elapsed() - t_wal),
        intervals = sparse.len(),
        "store recovered"
    );
    // Every generation below the oldest replayed one is in the space.
    let committed_gen = frozen
        .front()
        .map_or(gen - 1, |f: &FrozenMemTable| f.gen - 1);
    assemble(
        storage,
        dir,
        real_dir,
        opts,
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

/// One replayed log: its MemTable, its file, and the sequence number after
/// its last write (0 when it holds none).
type ReplayedLog = (Arc<MemTable>, Arc<dyn StorageFile>, u64);

/// Replays `logs` (generation and file name), several at a time, and
/// returns what each gave, in the order of `logs`. Every log is also synced
/// (what a crashed process wrote may still sit in the page cache only) by
/// one more thread while the others replay.
fn replay_logs(storage: &Arc<dyn Storage>, logs: &[(u64, String)]) -> Vec<Result<ReplayedLog>> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8)
        .min(logs.len());
    let next = AtomicUsize::new(0);
    let mut out: Vec<Option<Result<ReplayedLog>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, AtomicOrdering::Relaxed);
                        let Some((_, name)) = logs.get(i) else {
                            return done;
                        };
                        done.push((i, replay_log(storage, name)));
                    }
                })
            })
            .collect();
        let mut out: Vec<Option<Result<ReplayedLog>>> = (0..logs.len()).map(|_| None).collect();
        for h in handles {
            for (i, r) in h.join().unwrap_or_default() {
                out[i] = Some(r);
            }
        }
        out
    });
    out.iter_mut()
        .map(|r| {
            // A log whose replay thread panicked has no result.
            r.take().unwrap_or_else(|| {
                Err(Error::Corrupt {
                    file: "wal".into(),
                    detail: "a log replay thread failed".into(),
                })
            })
        })
        .collect()
}

/// Syncs and replays one log into a new MemTable; the sync runs on its own
/// thread meanwhile (both only read the file's content, which nothing
/// writes during recovery).
fn replay_log(storage: &Arc<dyn Storage>, name: &str) -> Result<ReplayedLog> {
    let file = storage.open_file(name, false).map_err(io_err(name))?;
    let mem = Arc::new(MemTable::new());
    let mut next_seq = 0;
    let t0 = std::time::Instant::now();
    let (synced, replayed) = std::thread::scope(|s| {
        // What a crashed process wrote may still sit in the page cache
        // only: it is made durable before it is served.
        let sync = s.spawn(|| file.sync());
        let replayed = Wal::replay(file.as_ref(), name, |seq, payload| {
            let mut i = 0;
            let n = WriteBatch::for_each_op(payload, |key, value| {
                mem.insert(key, seq + i, value);
                i += 1;
            })
            .ok_or_else(|| Error::Corrupt {
                file: name.into(),
                detail: format!("record {seq} is not a valid write batch"),
            })?;
            next_seq = next_seq.max(seq + n as u64);
            Ok(())
        });
        let t_replay = t0.elapsed();
        let synced = sync
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the sync thread failed")));
        tracing::debug!(
            target: TRACE_TARGET,
            log = name,
            records = replayed.as_ref().map_or(0, |r| r.records),
            replay = ?t_replay,
            synced_after = ?t0.elapsed(),
            "log replayed"
        );
        (synced, replayed)
    });
    synced.map_err(io_err(name))?;
    replayed?;
    Ok((mem, file, next_seq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    type Newest = BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)>;

    fn newest(mem: &MemTable) -> Newest {
        mem.newest()
            .map(|e| (e.key.to_vec(), (e.seq, e.value.map(<[u8]>::to_vec))))
            .collect()
    }

    #[test]
    fn parallel_replay_gives_what_sequential_replay_gives() {
        let storage: Arc<dyn Storage> = Arc::new(flexspace::FaultStorage::new());
        let mut logs = Vec::new();
        let mut models = Vec::new();
        let mut seq = 1;
        for gen in 1..=6u64 {
            let name = manifest::wal_name(gen);
            let file = storage.open_file(&name, true).unwrap();
            let wal = Wal::create(file.clone(), &name, None, 0).unwrap();
            let mut model = Newest::new();
            // Log 4 stays empty; log 5 is not a log at all.
            let batches = if gen == 4 { 0 } else { 150 * gen };
            for i in 0..batches {
                let mut b = WriteBatch::new();
                for j in 0..1 + i % 4 {
                    let key = format!("k{:03}", (i * 7 + j * 13 + gen) % 300).into_bytes();
                    let s = seq + b.len() as u64;
                    if (i + j) % 5 == 2 {
                        b.delete(&key).unwrap();
                        model.insert(key, (s, None));
                    } else {
                        let value = vec![(i + j) as u8; (i % 40) as usize];
                        b.put(&key, &value).unwrap();
                        model.insert(key, (s, Some(value)));
                    }
                }
                wal.append(seq, &b.encode()).unwrap();
                seq += b.len() as u64;
            }
            wal.sync().unwrap();
            if gen == 5 {
                file.write_all_at(0, b"NOTALOG!").unwrap();
            }
            models.push((model, seq));
            logs.push((gen, name));
        }
        let parallel = replay_logs(&storage, &logs);
        assert_eq!(parallel.len(), logs.len());
        for (((gen, name), got), (model, next)) in logs.iter().zip(parallel).zip(models) {
            let sequential = replay_log(&storage, name);
            if *gen == 5 {
                assert!(matches!(got, Err(Error::Corrupt { .. })));
                assert!(matches!(sequential, Err(Error::Corrupt { .. })));
                continue;
            }
            let (pm, _, pn) = got.unwrap();
            let (sm, _, sn) = sequential.unwrap();
            assert_eq!(newest(&pm), model, "log {gen}");
            assert_eq!(newest(&sm), model, "log {gen}");
            assert_eq!(pm.len(), sm.len());
            assert_eq!((pn, sn), if *gen == 4 { (0, 0) } else { (next, next) });
        }
    }
}
