//! Opening a store: creation, or recovery after a clean close or a crash
//! (§5.4).
//!
//! Recovery: the space recovers its own last commit point; its metadata
//! words give the pair count, the last generation whose writes are all in
//! the space, and the highest sequence number used. Logs of generations up
//! to that one are removed; the others are replayed, oldest first, each into
//! a frozen MemTable that the committer will merge. The sparse index is
//! rebuilt by sampling the space every `SAMPLE_STEP` bytes: at each sample
//! point the first tagged extent (a pair boundary) within the next step
//! gives an anchor key, read with one small read, so the cost is
//! proportional to the samples and not to the data; the samples are read by
//! several threads at once.
//!
//! Invariants: after `open` returns, every write whose sync returned before
//! the crash is in a MemTable or the space, the writes of the replayed logs
//! form a prefix of the write order, and sequence numbers continue above
//! every one used before.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use flexspace::{FileStorage, FlexSpace, Storage};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::batch::{BatchOp, WriteBatch};
use crate::cache::IntervalCache;
use crate::codec::{decode_pair, Decoded};
use crate::error::{Error, Result};
use crate::files;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sparse::{Meta, NewInterval, SparseIndex, UNKNOWN_COUNT};
use crate::store::{
    io_err, new_wal, space_err, Counters, Frozen, MemTables, Shared, State, Work, Writer,
};
use crate::wal::Wal;

/// Bytes between samples when the sparse index is rebuilt (§5.4: 8 KiB).
pub(crate) const SAMPLE_STEP: u64 = 8 << 10;

/// Opens the store in `dir` on real files.
pub(crate) fn open_dir(dir: &Path, opts: Options) -> Result<Shared> {
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
) -> Result<Shared> {
    let real_dir = real.then(|| dir.to_path_buf());
    validate(&opts)?;
    let found = files::inspect(storage.as_ref()).map_err(|e| in_dir(e, dir))?;
    match found {
        files::Found::Store if opts.error_if_exists => Err(Error::AlreadyExists(dir.to_path_buf())),
        files::Found::Store => recover(storage, dir, real_dir, opts).map_err(|e| in_dir(e, dir)),
        files::Found::Foreign(why) => Err(Error::NotAStore(dir.to_path_buf(), why)),
        files::Found::Nothing if !opts.create_if_missing => Err(Error::NotFound(dir.to_path_buf())),
        files::Found::Nothing => create(storage, dir, real_dir, opts).map_err(|e| in_dir(e, dir)),
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
        // garbage-collection round never runs while readers wait on `state`.
        .auto_maintenance(false)
}

/// Whether `FLEXDB_TRACE` asks for timings on stderr.
fn trace_enabled() -> bool {
    std::env::var_os("FLEXDB_TRACE").is_some()
}

fn create(
    storage: Arc<dyn Storage>,
    dir: &Path,
    real_dir: Option<PathBuf>,
    opts: Options,
) -> Result<Shared> {
    files::remove_leftovers(&storage)?;
    let space = FlexSpace::open_with_storage(storage.clone(), space_options(&opts, true))
        .map_err(space_err)?;
    let gen = 1;
    let wal = new_wal(&storage, real_dir.as_deref(), &opts, gen)?;
    // The manifest last: a store exists once it is durable.
    files::write_manifest(storage.as_ref())?;
    Ok(assemble(
        storage,
        dir,
        real_dir,
        opts,
        space,
        SparseIndex::new(),
        0,
        Writer {
            next_seq: 1,
            active: Arc::new(MemTable::new()),
            wal,
            gen,
        },
        VecDeque::new(),
        0,
    ))
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
    writer: Writer,
    frozen: VecDeque<Frozen>,
    committed_gen: u64,
) -> Shared {
    let visible = writer.next_seq - 1;
    Shared {
        dir: dir.to_path_buf(),
        real_dir,
        cache: IntervalCache::new(opts.cache_bytes),
        opts,
        storage,
        space,
        mems: RwLock::new(MemTables {
            active: writer.active.clone(),
            frozen,
        }),
        writer: Mutex::new(writer),
        state: RwLock::new(State {
            sparse,
            pairs,
            version: 0,
        }),
        visible: AtomicU64::new(visible),
        work: Mutex::new(Work {
            committed_gen,
            ..Work::default()
        }),
        work_cv: Condvar::new(),
        stall_cv: Condvar::new(),
        flushed_cv: Condvar::new(),
        counters: Counters::default(),
        trace: trace_enabled(),
    }
}

fn recover(
    storage: Arc<dyn Storage>,
    dir: &Path,
    real_dir: Option<PathBuf>,
    opts: Options,
) -> Result<Shared> {
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
    let [pairs, committed_gen, max_seq] = space.user_meta();
    let mut next_seq = max_seq + 1;
    let mut frozen = VecDeque::new();
    let mut last_gen = committed_gen;
    for (gen, name) in files::list_wals(storage.as_ref())? {
        if gen <= committed_gen {
            storage.remove_file(&name).map_err(io_err(&name))?;
            continue;
        }
        let file = storage.open_file(&name, false).map_err(io_err(&name))?;
        // What a crashed process wrote may still sit in the page cache only:
        // make it durable before serving it.
        file.sync().map_err(io_err(&name))?;
        let mem = Arc::new(MemTable::new());
        for r in Wal::read(file.as_ref(), &name)? {
            let batch = WriteBatch::decode(&r.payload).ok_or_else(|| Error::Corrupt {
                file: name.clone().into(),
                detail: format!("record {} is not a valid write batch", r.seq),
            })?;
            for (i, op) in batch.ops().iter().enumerate() {
                let seq = r.seq + i as u64;
                match op {
                    BatchOp::Put { key, value } => mem.insert(key, seq, Some(value)),
                    BatchOp::Delete { key } => mem.insert(key, seq, None),
                }
            }
            next_seq = next_seq.max(r.seq + batch.len() as u64);
        }
        last_gen = gen;
        if mem.is_empty() {
            storage.remove_file(&name).map_err(io_err(&name))?;
            continue;
        }
        // The committer reads the log only to sync it, which is done.
        let len = file.len().map_err(io_err(&name))?;
        let wal = Arc::new(Wal::detached(file, &name, len));
        frozen.push_back(Frozen { mem, wal, gen });
    }
    let t_replay = t0.elapsed();
    let gen = last_gen + 1;
    let wal = new_wal(&storage, real_dir.as_deref(), &opts, gen)?;
    let t_wal = t0.elapsed();
    // The index saved by a clean close, when it describes this very state
    // of the space; otherwise the space is sampled.
    let saved = crate::index_file::load(storage.as_ref(), space.commit_id(), space.len());
    let loaded = saved.is_some();
    let sparse = match saved {
        Some(s) => s,
        None => rebuild_index(&space)?,
    };
    if trace_enabled() {
        eprintln!(
            "recover: space {t_space:?}, log replay {:?}, new log {:?}, sparse index {} {:?} ({} intervals)",
            t_replay - t_space,
            t_wal - t_replay,
            if loaded { "loaded" } else { "sampled" },
            t0.elapsed() - t_wal,
            sparse.len(),
        );
    }
    // Every generation below the oldest replayed one is in the space.
    let committed_gen = frozen.front().map_or(gen - 1, |f: &Frozen| f.gen - 1);
    Ok(assemble(
        storage,
        dir,
        real_dir,
        opts,
        space,
        sparse,
        pairs,
        Writer {
            next_seq,
            active: Arc::new(MemTable::new()),
            wal,
            gen,
        },
        frozen,
        committed_gen,
    ))
}

/// Sampled anchors: (offset, key) in offset order.
type Anchors = Vec<(u64, Vec<u8>)>;

/// Rebuilds the sparse index by sampling the space.
pub(crate) fn rebuild_index(space: &FlexSpace) -> Result<SparseIndex> {
    let len = space.len();
    let samples: Vec<u64> = (1..len.div_ceil(SAMPLE_STEP))
        .map(|i| i * SAMPLE_STEP)
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let chunk = samples.len().div_ceil(threads).max(1);
    let found: Vec<Result<Anchors>> = std::thread::scope(|s| {
        let handles: Vec<_> = samples
            .chunks(chunk)
            .map(|part| s.spawn(move || sample_anchors(space, part)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Corrupt {
                        file: "data".into(),
                        detail: "a sampling thread failed".into(),
                    })
                })
            })
            .collect()
    });
    let mut anchors: Vec<(u64, Vec<u8>)> = vec![(0, Vec::new())];
    for part in found {
        for (off, key) in part? {
            if anchors.last().is_some_and(|(o, _)| *o == off) {
                continue;
            }
            if anchors.last().is_some_and(|(_, k)| *k >= key) {
                return Err(Error::Corrupt {
                    file: "data".into(),
                    detail: format!("the pair at offset {off} is out of key order"),
                });
            }
            anchors.push((off, key));
        }
    }
    let mut intervals = Vec::with_capacity(anchors.len());
    for (i, (off, key)) in anchors.iter().enumerate() {
        let end = anchors.get(i + 1).map_or(len, |(o, _)| *o);
        let size = u32::try_from(end - off).map_err(|_| Error::Corrupt {
            file: "data".into(),
            detail: format!("no pair boundary is tagged in the 4 GiB after offset {off}"),
        })?;
        intervals.push(NewInterval {
            anchor: key.clone(),
            meta: Meta {
                size,
                count: if size == 0 { 0 } else { UNKNOWN_COUNT },
                ..Meta::default()
            },
        });
    }
    Ok(SparseIndex::build(intervals))
}

/// For each sample point, the first tagged extent in the step after it and
/// the key of the pair that starts there. The whole pair is read and its
/// checksum verified: an anchor taken from damaged bytes would send lookups
/// to the wrong interval, where a missing key would look absent instead of
/// failing.
fn sample_anchors(space: &FlexSpace, samples: &[u64]) -> Result<Anchors> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 512];
    for &x in samples {
        let Some((off, _)) = space.next_tagged(x, x + SAMPLE_STEP).map_err(space_err)? else {
            continue;
        };
        if out.last().is_some_and(|(o, _): &(u64, Vec<u8>)| *o == off) {
            continue;
        }
        let bad = |what: &str| Error::Corrupt {
            file: "data".into(),
            detail: format!("the pair at offset {off}: {what}"),
        };
        let key = loop {
            let n = space.read(off, &mut buf).map_err(space_err)?;
            match decode_pair(&buf[..n]) {
                Decoded::Pair { key, .. } => break key.to_vec(),
                Decoded::Incomplete { need } if n == buf.len() && need > n => {
                    buf.resize(need, 0);
                }
                Decoded::Incomplete { .. } => return Err(bad("truncated by the end of the space")),
                Decoded::Invalid => return Err(bad("fails its checksum or length check")),
            }
        };
        buf.truncate(512);
        out.push((off, key));
    }
    Ok(out)
}
