//! The interface `flexbench ycsb` drives, and the engines behind it.
//!
//! Invariants: every engine runs with its write-ahead log (or journal) on
//! and, unless `sync` is set, no fsync per write; `open` creates the store
//! when the directory holds none; an engine that was not compiled in is
//! refused with the cargo feature that would build it.

use std::path::Path;
use std::time::Duration;

pub use super::engines::*;

/// Errors of the harness and the engines, as messages.
pub type Result<T> = std::result::Result<T, String>;

/// How to configure an engine.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Bytes of the engine's user-space cache (flexdb's interval cache,
    /// RocksDB's block cache, fjall's block cache; LMDB has none).
    pub cache_bytes: usize,
    /// MemTable (write buffer) size in bytes (flexdb, RocksDB, fjall).
    pub memtable_bytes: usize,
    /// flexdb: frozen MemTables that may wait for the committer (`None`:
    /// flexdb's default).
    pub max_frozen: Option<usize>,
    /// Sync the write-ahead log on every write.
    pub sync: bool,
    /// flexdb: read the data file with `pread`, not through a mapping.
    pub pread: bool,
    /// flexdb: keep the rows of keys read often (`Options::row_cache`).
    pub row_cache: bool,
    /// flexdb: garbage-collection thresholds (high, low); `None`: the
    /// store's defaults.
    pub gc_garbage: Option<(f64, f64)>,
    /// flexdb: puts are puts with this time to live (`--ttl-secs`).
    pub ttl: Option<Duration>,
    /// The run includes transactions (workloads t, ts): peers open their
    /// transactional flavour (RocksDB's `OptimisticTransactionDB`, fjall's
    /// `OptimisticTxDatabase`) for the whole run. flexdb has one flavour.
    #[cfg_attr(not(any(feature = "rocksdb", feature = "fjall")), allow(dead_code))]
    pub transactions: bool,
}

/// Counters an engine may expose.
#[derive(Clone, Debug, Default)]
pub struct EngineStats {
    /// The longest time a reader waited for a writer since the previous
    /// call (or open).
    pub max_reader_wait: Option<Duration>,
    /// Bytes of memory held by the engine's index (flexdb: the sparse
    /// index; RocksDB: table readers' index and filter memory outside the
    /// block cache).
    pub index_bytes: Option<u64>,
    /// Bytes of memory held by flexdb's extent index (FlexTree).
    pub extent_index_bytes: Option<u64>,
    /// Extents in flexdb's data file (its extent index's entries).
    pub extents: Option<u64>,
    /// Hits over lookups of the engine's cache since the previous call (or
    /// open); `None` when the engine does not count them or had none.
    pub cache_hit_ratio: Option<f64>,
    /// Hits over lookups of the engine's row cache since the previous call
    /// (flexdb's hot-key rows); `None` when it has none or had no lookups.
    pub row_hit_ratio: Option<f64>,
    /// Bytes of memory held only because a live snapshot needs them
    /// (flexdb: MemTables and published views pinned by snapshots).
    pub snapshot_held_bytes: Option<u64>,
    /// The store's disk bytes by what they hold (flexdb: live data,
    /// garbage, wal, checkpoint, log, other; see `flexdb::Stats`).
    pub disk_parts: Option<std::collections::BTreeMap<String, u64>>,
    /// Bytes the engine's garbage collection relocated since open
    /// (flexdb's space).
    pub gc_relocated_bytes: Option<u64>,
    /// Bytes the write-ahead log's files take on disk (flexdb).
    pub disk_wal_bytes: Option<u64>,
    /// Bytes written since open by what wrote them (flexdb: wal, data,
    /// tree, log; `gc_relocated` and `defragmented_intervals` as counts of
    /// what the data writes include).
    pub written_parts: Option<std::collections::BTreeMap<String, u64>>,
    /// Counts since open of what the engine's log rotations did (flexdb:
    /// memtables_committed, commits, logs_prepared, logs_reused: a log
    /// not reused was a fresh file whose pages are faulted in as it fills).
    pub log_rotations: Option<std::collections::BTreeMap<String, u64>>,
    /// The engine's own memory by what holds it (flexdb: memtables,
    /// memtable_pool, cache, row_cache, sparse_index, extent_index,
    /// snapshot_held; see `flexdb::Stats`), to set beside the process's
    /// resident memory.
    pub memory_parts: Option<std::collections::BTreeMap<String, u64>>,
}

/// A key-value store under test. Shared between the client threads.
pub trait Engine: Send + Sync {
    /// Sets `key` to `value`.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// The length of the value of `key`, if present (the value is read).
    fn get(&self, key: &[u8]) -> Result<Option<usize>>;
    /// Removes `key` (YCSB's core workloads never delete; kept for
    /// completeness of the interface and its tests).
    #[allow(dead_code)]
    fn delete(&self, key: &[u8]) -> Result<()>;
    /// Reads up to `n` pairs from the first key `>= start`; returns how
    /// many it read.
    fn scan(&self, start: &[u8], n: usize) -> Result<usize>;
    /// Reads up to `n` pairs from the last key `<= start` down, in
    /// descending order (`--scan-reverse`); returns how many it read.
    fn scan_back(&self, start: &[u8], n: usize) -> Result<usize>;
    /// One transfer: in one optimistic transaction (serializable if
    /// `serializable`, else snapshot isolation), reads `a` and `b` and
    /// writes `new_a` to `a` and `new_b` to `b`. `Ok(true)` if it
    /// committed, `Ok(false)` if it aborted on a conflict (nothing
    /// written). Engines without transactions refuse.
    fn transfer(
        &self,
        a: &[u8],
        b: &[u8],
        new_a: &[u8],
        new_b: &[u8],
        serializable: bool,
    ) -> Result<bool> {
        let _ = (a, b, new_a, new_b, serializable);
        Err("this engine runs no transactions in flexbench (workloads t, ts)".into())
    }
    /// Removes every key in `[start, end)` with the engine's own range
    /// delete, as one operation (`flexbench range-delete`); returns how
    /// many pairs it removed when the engine counts them (LMDB, `mem`),
    /// else `None`. Engines without one here refuse.
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<Option<u64>> {
        let _ = (start, end);
        Err("this engine runs no range deletes in flexbench (range-delete)".into())
    }
    /// Takes a point-in-time view that lives until the returned value is
    /// dropped (`--hold-snapshot`); `None` for engines without one here.
    fn pin_snapshot(&self) -> Result<Option<Box<dyn std::any::Any + Send>>> {
        Ok(None)
    }
    /// Moves buffered writes to the engine's main structure (memtables to
    /// the space or to tables) and makes them durable.
    fn flush(&self) -> Result<()>;
    /// Rewrites the store until its garbage is gone and gives the space
    /// back (the `compact` phase); engines without one here refuse.
    fn compact(&self) -> Result<()> {
        Err("this engine runs no full compaction in flexbench (phase compact)".into())
    }
    /// Closes the store cleanly.
    fn close(self: Box<Self>) -> Result<()>;
    /// The engine's counters.
    fn stats(&self) -> EngineStats {
        EngineStats::default()
    }
    /// A probe of the engine's own memory by part (`EngineStats::
    /// memory_parts`) that another thread may call while the engine runs,
    /// changing nothing; dropped before the engine closes. `None`: the
    /// engine does not count its memory.
    fn memory_probe(&self) -> Option<MemoryProbe> {
        None
    }
}

/// See [`Engine::memory_probe`].
pub type MemoryProbe = Box<dyn Fn() -> std::collections::BTreeMap<String, u64> + Send>;

/// The engines `--engine` accepts (`mem` is the harness's own in-memory
/// reference, not a benchmark peer).
pub const ENGINES: [&str; 5] = ["flexdb", "rocksdb", "lmdb", "fjall", "mem"];

/// Opens (creating if needed) engine `name` in directory `dir`.
pub fn open(name: &str, dir: &Path, cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    match name {
        "flexdb" => flexdb_engine::open(dir, cfg),
        "mem" => mem_engine::open(),
        "rocksdb" => rocksdb_engine::open(dir, cfg),
        "lmdb" => lmdb_engine::open(dir, cfg),
        "fjall" => fjall_engine::open(dir, cfg),
        other => Err(format!(
            "unknown engine '{other}' (expected one of {})",
            ENGINES.join(", ")
        )),
    }
}

/// Whether engine `name` was compiled into this binary.
pub fn compiled_in(name: &str) -> Result<()> {
    let feature = match name {
        "flexdb" | "mem" => return Ok(()),
        "rocksdb" if cfg!(feature = "rocksdb") => return Ok(()),
        "lmdb" if cfg!(feature = "lmdb") => return Ok(()),
        "fjall" if cfg!(feature = "fjall") => return Ok(()),
        "rocksdb" | "lmdb" | "fjall" => name,
        other => {
            return Err(format!(
                "unknown engine '{other}' (expected one of {})",
                ENGINES.join(", ")
            ))
        }
    };
    Err(format!(
        "engine '{name}' is not compiled into this flexbench: rebuild with \
         `cargo build --release -p flexbench --features {feature}` (or --features peers)"
    ))
}

#[cfg(test)]
impl EngineConfig {
    /// Engines with a 1 MiB cache and 4 MiB MemTables (tests).
    pub fn small() -> EngineConfig {
        EngineConfig {
            cache_bytes: 1 << 20,
            memtable_bytes: 4 << 20,
            max_frozen: None,
            sync: false,
            pread: false,
            row_cache: true,
            gc_garbage: None,
            ttl: None,
            transactions: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_missing_engines_are_explained() {
        assert!(compiled_in("flexdb").is_ok());
        assert!(compiled_in("nope").unwrap_err().contains("unknown engine"));
        for peer in ["rocksdb", "lmdb", "fjall"] {
            let compiled = match peer {
                "rocksdb" => cfg!(feature = "rocksdb"),
                "lmdb" => cfg!(feature = "lmdb"),
                _ => cfg!(feature = "fjall"),
            };
            let r = compiled_in(peer);
            assert_eq!(r.is_ok(), compiled, "{peer}");
            if let Err(e) = r {
                assert!(e.contains(&format!("--features {peer}")), "{e}");
            }
        }
    }

    /// Right after the call (before any flush), a range delete removed
    /// exactly the keys of `[start, end)`, on every compiled engine that
    /// has one; the others refuse.
    #[test]
    fn range_deletes_remove_exactly_the_range() {
        for name in ENGINES.iter().filter(|n| compiled_in(n).is_ok()) {
            let dir = tempfile::tempdir().unwrap();
            let cfg = EngineConfig::small();
            let e = open(name, dir.path(), &cfg).unwrap();
            for i in 0..100u32 {
                e.put(format!("k{i:03}").as_bytes(), b"v").unwrap();
            }
            match e.delete_range(b"k010", b"k020") {
                Ok(n) => assert!(matches!(n, None | Some(10)), "{name}: {n:?}"),
                Err(err) => {
                    assert_eq!(*name, "fjall", "{name}: {err}");
                    continue;
                }
            }
            for (key, present) in [
                ("k009", true),
                ("k010", false),
                ("k019", false),
                ("k020", true),
            ] {
                assert_eq!(
                    e.get(key.as_bytes()).unwrap().is_some(),
                    present,
                    "{name} {key}"
                );
            }
            assert_eq!(e.scan(b"", usize::MAX).unwrap(), 90, "{name}");
            assert_eq!(e.scan(b"k015", 5).unwrap(), 5, "{name}");
            e.close().unwrap();
        }
    }

    #[test]
    fn every_compiled_engine_behaves_like_a_sorted_map() {
        // flexdb a second time reading with `pread` (`--pread`).
        let runs = ENGINES
            .iter()
            .filter(|n| compiled_in(n).is_ok())
            .map(|n| (*n, false))
            .chain([("flexdb", true)]);
        for (name, pread) in runs {
            let dir = tempfile::tempdir().unwrap();
            let cfg = EngineConfig {
                cache_bytes: 1 << 20,
                memtable_bytes: 4 << 20,
                max_frozen: None,
                sync: false,
                pread,
                row_cache: true,
                gc_garbage: None,
                ttl: None,
                transactions: false,
            };
            let e = open(name, dir.path(), &cfg).unwrap();
            e.put(b"b", b"22").unwrap();
            e.put(b"a", b"1").unwrap();
            e.put(b"c", b"333").unwrap();
            assert_eq!(e.get(b"b").unwrap(), Some(2), "{name}");
            assert_eq!(e.get(b"x").unwrap(), None, "{name}");
            assert_eq!(e.scan(b"a", 2).unwrap(), 2, "{name}");
            assert_eq!(e.scan(b"bb", 10).unwrap(), 1, "{name}");
            e.delete(b"c").unwrap();
            assert_eq!(e.scan(b"", 10).unwrap(), 2, "{name}");
            e.put(b"b", b"4444").unwrap();
            e.flush().unwrap();
            e.close().unwrap();
            if name == "mem" {
                continue;
            }
            // Persistent engines keep everything across a clean close.
            let e = open(name, dir.path(), &cfg).unwrap();
            assert_eq!(e.get(b"b").unwrap(), Some(4), "{name}");
            assert_eq!(e.get(b"c").unwrap(), None, "{name}");
            assert_eq!(e.scan(b"", usize::MAX).unwrap(), 2, "{name}");
            e.close().unwrap();
        }
    }
}
