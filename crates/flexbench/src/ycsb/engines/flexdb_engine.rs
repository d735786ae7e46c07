//! FlexDB through its public API.

use std::ops::Bound;
use std::path::Path;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::ycsb::engine::{Engine, EngineConfig, EngineStats, MemoryProbe, Result};

struct FlexDbEngine {
    /// Shared with the memory probes of the RSS sampler (`memory_probe`).
    db: Arc<flexdb::Db>,
    /// Every put's time to live (`EngineConfig::ttl`).
    ttl: Option<std::time::Duration>,
    /// Cache hits and lookups at the previous `stats` call.
    cache_counts: std::sync::Mutex<(u64, u64)>,
    row_counts: std::sync::Mutex<(u64, u64)>,
}

/// Opens (creating if needed) a FlexDB store in `dir`.
pub fn open(dir: &Path, cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    let mut opts = flexdb::Options::new()
        .create_if_missing(true)
        .cache_bytes(cfg.cache_bytes)
        .memtable_bytes(cfg.memtable_bytes)
        .sync_writes(cfg.sync)
        .mmap_reads(!cfg.pread)
        .row_cache(cfg.row_cache);
    if let Some((high, low)) = cfg.gc_garbage {
        opts = opts.gc_garbage(high, low);
    }
    if let Some(n) = cfg.max_frozen {
        opts = opts.max_frozen_memtables(n);
    }
    let db = flexdb::Db::open(dir, opts).map_err(|e| format!("flexdb: {e}"))?;
    Ok(Box::new(FlexDbEngine {
        db: Arc::new(db),
        ttl: cfg.ttl,
        cache_counts: Default::default(),
        row_counts: Default::default(),
    }))
}

fn err(e: flexdb::Error) -> String {
    format!("flexdb: {e}")
}

/// Reads up to `n` pairs of `it`, from its top end down when `reverse`:
/// lent pairs, as the peers' engines read them (RocksDB's raw iterator,
/// LMDB's cursor), no copy per pair.
fn read_lent(mut it: flexdb::Iter<'_>, n: usize, reverse: bool) -> Result<usize> {
    let mut count = 0;
    while count < n {
        let pair = if reverse {
            it.next_back_ref()
        } else {
            it.next_ref()
        };
        match pair {
            Some(pair) => {
                std::hint::black_box(pair.map_err(err)?);
                count += 1;
            }
            None => break,
        }
    }
    Ok(count)
}

/// Hits over lookups since the counts `last` holds (then updated to
/// these); `None` without lookups.
fn window_ratio(last: &std::sync::Mutex<(u64, u64)>, hits: u64, lookups: u64) -> Option<f64> {
    let mut last = last
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (h, l) = (hits.saturating_sub(last.0), lookups.saturating_sub(last.1));
    *last = (hits, lookups);
    (l > 0).then(|| h as f64 / l as f64)
}

impl Engine for FlexDbEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        match self.ttl {
            Some(ttl) => self.db.put_with_ttl(key, value, ttl),
            None => self.db.put(key, value),
        }
        .map_err(err)
    }
    fn get(&self, key: &[u8]) -> Result<Option<usize>> {
        // Borrowed, not copied: like the peers' zero-copy gets (LMDB's
        // slice of its mapping, RocksDB's pinned value).
        self.db
            .get_with(key, |v| v.map(|v| std::hint::black_box(v).len()))
            .map_err(err)
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        self.db.delete(key).map_err(err)
    }
    /// `Db::delete_range`: one logged record and a range tombstone; the
    /// committer takes the range out of the space later (`flush` waits).
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<Option<u64>> {
        self.db
            .delete_range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .map_err(err)?;
        Ok(None)
    }
    fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
        let it = self
            .db
            .range::<[u8], _>((Bound::Included(start), Bound::Unbounded))
            .limit(n);
        read_lent(it, n, false)
    }
    fn scan_back(&self, start: &[u8], n: usize) -> Result<usize> {
        let it = self
            .db
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(start)))
            .limit(n);
        read_lent(it, n, true)
    }
    fn transfer(
        &self,
        a: &[u8],
        b: &[u8],
        new_a: &[u8],
        new_b: &[u8],
        serializable: bool,
    ) -> Result<bool> {
        let isolation = if serializable {
            flexdb::Isolation::Serializable
        } else {
            flexdb::Isolation::Snapshot
        };
        let mut txn = self.db.transaction(isolation);
        std::hint::black_box(txn.get(a).map_err(err)?);
        std::hint::black_box(txn.get(b).map_err(err)?);
        txn.put(a, new_a).map_err(err)?;
        txn.put(b, new_b).map_err(err)?;
        match txn.commit() {
            Ok(()) => Ok(true),
            Err(flexdb::Error::Conflict) => Ok(false),
            Err(e) => Err(err(e)),
        }
    }
    fn pin_snapshot(&self) -> Result<Option<Box<dyn std::any::Any + Send>>> {
        Ok(Some(Box::new(self.db.snapshot())))
    }
    fn flush(&self) -> Result<()> {
        self.db.flush().map_err(err)
    }
    fn compact(&self) -> Result<()> {
        self.db.compact().map(drop).map_err(err)
    }
    fn close(self: Box<Self>) -> Result<()> {
        match Arc::try_unwrap(self.db) {
            Ok(db) => db.close().map_err(err),
            Err(_) => Err("flexdb: closed while a memory probe holds the store".into()),
        }
    }
    fn memory_probe(&self) -> Option<MemoryProbe> {
        let db = self.db.clone();
        Some(Box::new(move || memory_parts(&db.memory_stats())))
    }
    fn stats(&self) -> EngineStats {
        let s = self.db.stats();
        // The harness asks once per workload: each asks for its own window.
        let cache_hit_ratio = window_ratio(&self.cache_counts, s.cache_hits, s.cache_lookups);
        let row_hit_ratio = window_ratio(&self.row_counts, s.row_cache_hits, s.row_cache_lookups);
        EngineStats {
            max_reader_wait: Some(self.db.take_max_reader_wait()),
            index_bytes: Some(s.sparse_index_bytes),
            extent_index_bytes: Some(s.extent_index_bytes),
            extents: Some(s.extents),
            cache_hit_ratio,
            row_hit_ratio,
            snapshot_held_bytes: Some(s.snapshot_held_bytes),
            memory_parts: Some(memory_parts(&s.memory())),
            disk_parts: Some(parts([
                ("live", s.disk_live_bytes),
                ("garbage", s.disk_garbage_bytes),
                ("garbage_free", s.disk_garbage_free_bytes),
                ("garbage_held", s.space_held_bytes),
                ("wal", s.disk_wal_bytes),
                ("checkpoint", s.disk_checkpoint_bytes),
                ("log", s.disk_log_bytes),
                ("other", s.disk_other_bytes),
            ])),
            gc_relocated_bytes: Some(s.gc_relocated_bytes),
            disk_wal_bytes: Some(s.disk_wal_bytes),
            written_parts: Some(parts([
                ("wal", s.wal_bytes_written),
                ("data", s.data_bytes_written),
                ("tree", s.tree_bytes_written),
                ("log", s.log_bytes_written),
                ("gc_relocated", s.gc_relocated_bytes),
                ("defragmented_intervals", s.defragmented_intervals),
            ])),
            log_rotations: Some(parts([
                ("memtables_committed", s.memtables_committed),
                ("commits", s.commits),
                ("logs_prepared", s.logs_prepared),
                ("logs_reused", s.logs_reused),
            ])),
        }
    }
}

/// The store's own memory by what holds it (`EngineStats::memory_parts`).
fn memory_parts(s: &flexdb::MemoryStats) -> BTreeMap<String, u64> {
    parts([
        ("memtables", s.memtable_bytes + s.backlog_bytes),
        ("memtable_pool", s.memtable_pool_bytes),
        ("cache", s.cache_bytes),
        ("row_cache", s.row_cache_bytes),
        ("sparse_index", s.sparse_index_bytes),
        ("extent_index", s.extent_index_bytes),
        ("snapshot_held", s.snapshot_held_bytes),
    ])
}

/// Named figures as the report's maps hold them.
fn parts<const N: usize>(named: [(&str, u64); N]) -> BTreeMap<String, u64> {
    named.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}
