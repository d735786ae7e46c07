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
//! open. A log that follows (by its header or chain record) a generation
//! the space never committed and of which no log is left means the space
//! lost commits: `Corrupt`, never the older state (`lost_predecessor`).
//! The sparse index is the one saved at a clean close when it
//! describes the space as recovered, and otherwise rebuilt by sampling the
//! space (`rebuild`).
//!
//! Invariants: after `open` returns, every write whose sync returned before
//! the crash is in a MemTable or the space, the writes of the replayed logs
//! form a prefix of the write order, and sequence numbers continue above
//! every one used before.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use flexspace::{FileStorage, FlexSpace, Storage, StorageFile};
use parking_lot::RwLock;
use tracing::Level;

use crate::commit::mailbox::CommitterMailbox;
use crate::error::{io_err, space_err};
use crate::error::{Error, Result};
use crate::index::interval_cache::IntervalCache;
use crate::index::sparse::SparseIndex;
use crate::index::CommitterIndex;
use crate::options::Options;
use crate::read::view::{PublishedView, ViewPublisher};
use crate::recovery::rebuild::rebuild_index;
use crate::recovery::replay::replay_logs;
use crate::recovery::{manifest, TRACE_TARGET};
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
    // Before anything is created: nonsense options leave no directory.
    validate(&opts)?;
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
    open_storage(Arc::new(storage), dir, opts)
}

/// Opens the store on any storage backend (`dir` names it in errors).
pub(crate) fn open_storage(storage: Arc<dyn Storage>, dir: &Path, opts: Options) -> Result<Store> {
    validate(&opts)?;
    let found = manifest::inspect(storage.as_ref()).map_err(|e| in_dir(e, dir))?;
    match found {
        manifest::DirContents::Store(_) if opts.error_if_exists => {
            Err(Error::AlreadyExists(dir.to_path_buf()))
        }
        manifest::DirContents::Store(version) => recover(storage, dir, opts)
            .map(|store| Store {
                format_version: version,
                ..store
            })
            .map_err(|e| in_dir(e, dir)),
        manifest::DirContents::Foreign(why) => Err(Error::NotAStore(dir.to_path_buf(), why)),
        manifest::DirContents::Nothing if !opts.create_if_missing => {
            Err(Error::NotFound(dir.to_path_buf()))
        }
        manifest::DirContents::Nothing => create(storage, dir, opts).map_err(|e| in_dir(e, dir)),
    }
}

/// Makes file names in errors full paths.
pub(super) fn in_dir(e: Error, dir: &Path) -> Error {
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

/// The smallest MemTable `Options` accepts (tests run with it so that the
/// committer runs between almost every pair of writes).
const MIN_MEMTABLE_BYTES: usize = 1024;

/// The largest MemTable `Options` accepts, whatever the machine (its log
/// is sized from it, in 64-bit arithmetic with room to spare).
const MAX_MEMTABLE_BYTES: usize = 1 << 40;

/// The largest data file `Options::max_space_bytes` may ask for: the
/// space's own bound (64 TiB), checked here to name the store's option.
const MAX_SPACE_BYTES: u64 = flexspace::MAX_DATA_SIZE;

pub(super) fn validate(opts: &Options) -> Result<()> {
    if opts.memtable_bytes < MIN_MEMTABLE_BYTES {
        return Err(Error::InvalidArgument(format!(
            "memtable_bytes must be at least {MIN_MEMTABLE_BYTES}"
        )));
    }
    if opts.max_frozen_memtables == 0 {
        return Err(Error::InvalidArgument(
            "max_frozen_memtables must be at least 1".into(),
        ));
    }
    if opts.max_space_bytes < 8 * flexspace::SEGMENT_SIZE {
        return Err(Error::InvalidArgument(format!(
            "max_space_bytes must be at least {}",
            8 * flexspace::SEGMENT_SIZE
        )));
    }
    if opts.max_space_bytes > MAX_SPACE_BYTES {
        return Err(Error::InvalidArgument(format!(
            "max_space_bytes ({}) must be at most {MAX_SPACE_BYTES}",
            opts.max_space_bytes
        )));
    }
    if opts.memtable_bytes > MAX_MEMTABLE_BYTES {
        return Err(Error::InvalidArgument(format!(
            "memtable_bytes must be at most {MAX_MEMTABLE_BYTES}"
        )));
    }
    // The caches size tables from `cache_bytes` up front (the row cache's
    // ways, the frequency sketch): a budget beyond the machine's memory
    // would exhaust it as they are made. A MemTable lives in memory too.
    if let Some(phys) = flexsys::memory::physical_memory() {
        for (name, bytes) in [
            ("cache_bytes", opts.cache_bytes),
            ("memtable_bytes", opts.memtable_bytes),
        ] {
            if bytes as u64 > phys {
                return Err(Error::InvalidArgument(format!(
                    "{name} ({bytes}) exceeds the machine's memory ({phys} bytes)"
                )));
            }
        }
    }
    let (high, low) = (opts.gc_garbage_high, opts.gc_garbage_low);
    if !(low > 0.0 && low <= high && high <= 1.0) {
        return Err(Error::InvalidArgument(format!(
            "gc_garbage needs 0 < low <= high <= 1 (got high {high}, low {low})"
        )));
    }
    if opts.expiry_interval < std::time::Duration::from_millis(1) {
        return Err(Error::InvalidArgument(format!(
            "expiry_interval must be at least 1 ms (got {:?})",
            opts.expiry_interval
        )));
    }
    Ok(())
}

pub(super) fn space_options(opts: &Options, create: bool) -> flexspace::Options {
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
        .gc_garbage(opts.gc_garbage_high, opts.gc_garbage_low)
        .salvage(opts.salvage)
}

fn create(storage: Arc<dyn Storage>, dir: &Path, opts: Options) -> Result<Store> {
    manifest::remove_leftovers(&storage)?;
    let space = FlexSpace::open_with_storage(storage.clone(), space_options(&opts, true))
        .map_err(space_err)?;
    let gen = 1;
    let wal = new_wal(&storage, &opts, gen, 1, None, None)?;
    // The manifest last: a store exists once it is durable.
    manifest::write_manifest(storage.as_ref())?;
    assemble(
        storage,
        dir,
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
pub(super) fn assemble(
    storage: Arc<dyn Storage>,
    dir: &Path,
    opts: Options,
    space: FlexSpace,
    sparse: SparseIndex,
    pairs: u64,
    writer: WriteHead,
    frozen: VecDeque<FrozenMemTable>,
    committed_gen: u64,
) -> Result<Store> {
    let mut writer = writer;
    let max_frozen = opts.max_frozen_memtables;
    // Up to the MemTables a commit may retire at once: what a backlog of
    // them held before, so keeping it never raises the peak (see
    // `write::chunk_pool`), and one hash table (which the next MemTable
    // would otherwise fault in fresh).
    let chunks = Arc::new(ChunkPool::new(
        opts.memtable_bytes.saturating_mul(max_frozen),
    ));
    if writer.active.is_empty() {
        writer.active = Arc::new(MemTable::sized(
            &[],
            Some(chunks.clone()),
            opts.memtable_bytes,
            0,
            false,
        ));
    }
    let visible = writer.next_seq - 1;
    // The space may hold part of any replayed generation (a crash can
    // leave part of a commit in it): at most those below the active one.
    let view = PublishedView::copy(&sparse, &space, writer.gen - 1, 0)?;
    let trace_views = tracing::enabled!(target: crate::read::view::TRACE_TARGET, Level::DEBUG);
    let row_bytes = if opts.row_cache {
        opts.cache_bytes / ROW_CACHE_SHARE
    } else {
        0
    };
    Ok(Store {
        dir: dir.to_path_buf(),
        cache: IntervalCache::new(opts.cache_bytes - row_bytes),
        rows: crate::read::row_cache::RowCache::new(row_bytes),
        interval_door: crate::read::doorkeeper::Doorkeeper::new(
            (opts.cache_bytes - row_bytes) / TYPICAL_INTERVAL,
        ),
        interval_freq: crate::read::frequency::FrequencySketch::new(
            (opts.cache_bytes - row_bytes) / TYPICAL_INTERVAL,
        ),
        clock: crate::clock::Clock::new(opts.clock.clone()),
        expiry: Default::default(),
        opts,
        storage,
        space,
        writes: WriteSide::new(writer, frozen, visible, max_frozen),
        index: RwLock::new(CommitterIndex {
            sparse,
            pairs,
            version: 0,
        }),
        mailbox: CommitterMailbox::new(committed_gen),
        counters: Counters::default(),
        trace: tracing::enabled!(target: crate::commit::TRACE_TARGET, Level::DEBUG),
        views: ViewPublisher::new(view, trace_views),
        snapshots: Default::default(),
        chunks,
        // As many as one commit retires.
        spare_logs: crate::wal::spare_logs::SpareLogs::new(max_frozen),
        salvaged: Vec::new(),
        held_logs_from: Default::default(),
        keyspaces: Default::default(),
        format_version: manifest::FORMAT_VERSION,
    })
}

/// The row cache takes this share of `Options::cache_bytes` (one part in
/// so many), the interval cache the rest.
const ROW_CACHE_SHARE: usize = 16;

/// The interval size the interval cache's admission window is sized for
/// (16 pairs of about 130 bytes).
const TYPICAL_INTERVAL: usize = 2 << 10;

fn recover(storage: Arc<dyn Storage>, dir: &Path, opts: Options) -> Result<Store> {
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
    // taken in generation order as one sequential replay would, each
    // only after the one it is linked to (see the module's doc).
    let mut taken: Option<(u64, u64)> = None;
    // What the log made below follows: the newest log taken with writes,
    // else the committed generation.
    let mut follows = committed_gen;
    let present: std::collections::BTreeSet<u64> = logs.iter().map(|(gen, _)| *gen).collect();
    let mut dropped = Vec::new();
    let mut empty = Vec::new();
    let mut salvaged: Vec<String> = space.salvaged().to_vec();
    for ((gen, name), replayed) in logs.iter().zip(replay_logs(&storage, &logs, opts.salvage)) {
        let (mem, file, next, found, lost) = replayed?;
        if let Some(why) = lost {
            salvaged.push(format!("{name}: {why}; the writes after it are lost"));
        }
        last_gen = *gen;
        // The log this one follows: as its header recorded it at creation
        // (version 4), else as its chain record names it.
        let prev = match found.back {
            0 => found.chain.map(|(prev_gen, _)| prev_gen),
            back => Some(gen.saturating_sub(u64::from(back))),
        };
        if let Some(prev_gen) = prev {
            if !opts.salvage && lost_predecessor(prev_gen, committed_gen, &present) {
                return Err(Error::Corrupt {
                    file: "log".into(),
                    detail: format!(
                        "the space's commits end at generation {committed_gen}, but {name} \
                         follows generation {prev_gen}, whose write-ahead log is gone: the \
                         space's log lost its latest commits (cut or rolled back), or that \
                         write-ahead log was removed"
                    ),
                });
            }
        }
        if let Some((prev_gen, prev_end)) = found.chain {
            if prev_gen > committed_gen && taken != Some((prev_gen, prev_end)) && opts.salvage {
                salvaged.push(format!(
                    "{name}: follows log {prev_gen}, which is missing, shorter or damaged; its writes are taken anyway"
                ));
            } else if prev_gen > committed_gen && taken != Some((prev_gen, prev_end)) {
                if found.synced_once {
                    return Err(Error::Corrupt {
                        file: name.into(),
                        detail: format!(
                            "the log was synced, so log {prev_gen} was durable up to byte \
                             {prev_end}, but that log is missing, shorter or damaged"
                        ),
                    });
                }
                dropped.push(name.clone());
                continue;
            }
        }
        taken = Some((*gen, found.end));
        next_seq = next_seq.max(next);
        if mem.is_empty() {
            empty.push(name.clone());
            continue;
        }
        follows = *gen;
        // The committer reads the log only to sync it, which is done.
        let len = file.len().map_err(io_err(name))?;
        let wal = Arc::new(Wal::detached(file, name, len));
        frozen.push_back(FrozenMemTable {
            mem,
            wal,
            gen: *gen,
        });
    }
    // Newest first, each removal durable before the next, so that a crash
    // meanwhile leaves no log whose predecessor is gone but for the
    // dropped ones (which are dropped again: their predecessor is not
    // taken).
    remove_newest_first(storage.as_ref(), &dropped)?;
    if !dropped.is_empty() {
        tracing::debug!(target: TRACE_TARGET, logs = ?dropped, "logs after a torn log dropped");
    }
    // Only now, when no dropped log is left that follows one of them, and
    // the same way: a log is never left behind a removed predecessor
    // (`lost_predecessor`).
    remove_newest_first(storage.as_ref(), &empty)?;
    let t_replay = t0.elapsed();
    let gen = last_gen + 1;
    let wal = new_wal(&storage, &opts, gen, next_seq, None, Some(follows))?;
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
    let mut store = assemble(
        storage,
        dir,
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
    )?;
    store.salvaged = salvaged;
    Ok(store)
}

/// Removes the logs `names` (oldest first), newest first, syncing the
/// directory after each removal: on a device that reorders directory
/// changes, removals made together may survive a crash in any subset, and
/// an older log's removal kept while a newer one's is lost leaves that
/// newer log behind a missing predecessor, which the next open takes for
/// lost commits (`lost_predecessor`; seen in `tests/crash.rs`, a crash
/// during a recovery that removed two empty logs).
fn remove_newest_first(storage: &dyn Storage, names: &[String]) -> Result<()> {
    for name in names.iter().rev() {
        storage.remove_file(name).map_err(io_err(name))?;
        storage.sync_dir().map_err(io_err("."))?;
    }
    Ok(())
}

/// Whether a log that follows generation `prev_gen` (as its header or
/// chain record says) lost writes that are nowhere now: the space never
/// committed `prev_gen` (its commits end at `committed_gen`) and no log of
/// it is `present`. Logs are removed only once the space committed their
/// generation, or when they hold no write: by recovery (newest first,
/// each removal durable before the next, `remove_newest_first`, after
/// every log that follows one; the log an open makes follows the
/// newest log it took with writes, else the committed generation) and by a
/// close (the log prepared ahead first). So this is damage: the space's
/// log lost commits (a cut at an entry boundary reads as an older state)
/// or a log was removed.
pub(super) fn lost_predecessor(
    prev_gen: u64,
    committed_gen: u64,
    present: &std::collections::BTreeSet<u64>,
) -> bool {
    prev_gen > committed_gen && !present.contains(&prev_gen)
}

#[cfg(test)]
mod tests {
    use flexspace::{CrashModel, FaultStorage, Storage};

    /// On a device that reorders directory changes, logs removed by
    /// `remove_newest_first` never leave a newer log behind a removed older
    /// one, whatever the crash keeps; removed together without the syncs
    /// between them, they do.
    #[test]
    fn removed_logs_never_leave_a_newer_one_behind() {
        let names: Vec<String> = (3..6).map(crate::wal::log_files::wal_name).collect();
        let mut broken_without = 0;
        for seed in 0..200u64 {
            for synced in [true, false] {
                let st = FaultStorage::with_model(CrashModel::Reorder { seed });
                for n in &names {
                    st.open_file(n, true)
                        .unwrap()
                        .write_all_at(0, b"log")
                        .unwrap();
                }
                st.sync_dir().unwrap();
                if synced {
                    super::remove_newest_first(&st, &names).unwrap();
                } else {
                    for n in names.iter().rev() {
                        st.remove_file(n).unwrap();
                    }
                }
                let image = st.crash_image();
                let files = image.list_files().unwrap();
                let present: Vec<bool> = names.iter().map(|n| files.contains(n)).collect();
                // A removed log with a newer one still present: the state
                // the next open reads as lost commits.
                let behind = present.windows(2).any(|w| !w[0] && w[1]);
                if synced {
                    assert!(!behind, "seed {seed}: {present:?}");
                } else if behind {
                    broken_without += 1;
                }
            }
        }
        assert!(
            broken_without > 0,
            "the model never reorders: the test proves nothing"
        );
    }
}
