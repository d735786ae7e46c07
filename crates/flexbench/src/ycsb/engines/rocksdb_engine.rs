//! RocksDB (crate `rocksdb`), configured as RocksDB's tuning guide advises
//! for flash (docs/BENCHMARKS.md lists every option set here), without
//! compression, with a block cache of the size of flexdb's cache.
//!
//! A run with transactions (workloads t, ts) opens the same store as an
//! `OptimisticTransactionDB` (RocksDB's optimistic concurrency control,
//! the peer of flexdb's): every other operation then goes through that
//! handle too.

use std::path::Path;

use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, ErrorKind, OptimisticTransactionDB,
    OptimisticTransactionOptions, Options, ReadOptions, WriteBatch, WriteOptions, DB,
};

use crate::ycsb::engine::{Engine, EngineConfig, EngineStats, Result};

/// The handle a run opened: plain, or with optimistic transactions.
enum Handle {
    Plain(DB),
    Optimistic(OptimisticTransactionDB),
}

/// Runs `$body` with `$db` bound to whichever handle is open (the two
/// share RocksDB's `DBCommon` methods but not a trait).
macro_rules! with_db {
    ($self:expr, $db:ident => $body:expr) => {
        match &$self.db {
            Handle::Plain($db) => $body,
            Handle::Optimistic($db) => $body,
        }
    };
}

struct RocksEngine {
    db: Handle,
    write: WriteOptions,
    _cache: Cache,
}

fn err(e: rocksdb::Error) -> String {
    format!("rocksdb: {e}")
}

/// The options flexbench runs RocksDB with.
pub fn options(cfg: &EngineConfig, cache: &Cache) -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    // Tuning guide, "Setup Options and Basic Tuning".
    o.set_level_compaction_dynamic_level_bytes(true);
    o.set_max_background_jobs(4);
    o.set_bytes_per_sync(1 << 20);
    o.set_compaction_pri(rocksdb::CompactionPri::MinOverlappingRatio);
    // Memtables of flexdb's size (`--memtable-mb`, flexdb's default unless
    // set).
    o.set_write_buffer_size(cfg.memtable_bytes);
    o.set_max_write_buffer_number(3);
    o.set_target_file_size_base(64 << 20);
    o.set_compression_type(DBCompressionType::None);
    o.set_bottommost_compression_type(DBCompressionType::None);
    let mut t = BlockBasedOptions::default();
    t.set_block_size(16 << 10);
    t.set_block_cache(cache);
    t.set_cache_index_and_filter_blocks(true);
    t.set_pin_l0_filter_and_index_blocks_in_cache(true);
    t.set_format_version(5);
    t.set_bloom_filter(10.0, false);
    o.set_block_based_table_factory(&t);
    o
}

/// Opens (creating if needed) a RocksDB store in `dir`.
pub fn open(dir: &Path, cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    let cache = Cache::new_lru_cache(cfg.cache_bytes.max(1 << 20));
    let opts = options(cfg, &cache);
    let db = if cfg.transactions {
        Handle::Optimistic(OptimisticTransactionDB::open(&opts, dir).map_err(err)?)
    } else {
        Handle::Plain(DB::open(&opts, dir).map_err(err)?)
    };
    let mut write = WriteOptions::default();
    write.set_sync(cfg.sync);
    write.disable_wal(false);
    Ok(Box::new(RocksEngine {
        db,
        write,
        _cache: cache,
    }))
}

impl RocksEngine {
    /// Reads up to `n` pairs with a raw iterator from the first key `>=
    /// start` up, or, when `reverse`, from the last key `<= start` down.
    fn read_from(&self, start: &[u8], n: usize, reverse: bool) -> Result<usize> {
        with_db!(self, db => {
            let mut it = db.raw_iterator_opt(ReadOptions::default());
            if reverse {
                it.seek_for_prev(start);
            } else {
                it.seek(start);
            }
            let mut count = 0;
            while count < n && it.valid() {
                std::hint::black_box((it.key(), it.value()));
                count += 1;
                if reverse {
                    it.prev();
                } else {
                    it.next();
                }
            }
            it.status().map_err(err)?;
            Ok(count)
        })
    }
}

/// A commit RocksDB refused because of a conflict (`Busy`), or because
/// its MemTable history was too short to check for one (`TryAgain`): the
/// transaction wrote nothing and may be retried.
fn is_conflict(e: &rocksdb::Error) -> bool {
    matches!(e.kind(), ErrorKind::Busy | ErrorKind::TryAgain)
}

impl Engine for RocksEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        with_db!(self, db => db.put_opt(key, value, &self.write).map_err(err))
    }
    fn get(&self, key: &[u8]) -> Result<Option<usize>> {
        with_db!(self, db => Ok(db.get_pinned(key).map_err(err)?.map(|v| v.len())))
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        with_db!(self, db => db.delete_opt(key, &self.write).map_err(err))
    }
    /// RocksDB's `DeleteRange` through a `WriteBatch` (the crate's only
    /// range delete on the default column family of a store opened without
    /// column families): one range tombstone in the WAL and the MemTable;
    /// compactions drop the covered pairs later. A store opened with
    /// transactions refuses (the crate has no range delete in a
    /// transactional batch; `range-delete` never opens one).
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<Option<u64>> {
        let Handle::Plain(db) = &self.db else {
            return Err("rocksdb: no range delete on a store opened with transactions".into());
        };
        let mut batch = WriteBatch::default();
        batch.delete_range(start, end);
        db.write_opt(batch, &self.write).map_err(err)?;
        Ok(None)
    }
    fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
        self.read_from(start, n, false)
    }
    fn scan_back(&self, start: &[u8], n: usize) -> Result<usize> {
        self.read_from(start, n, true)
    }
    /// Snapshot isolation: the transaction reads at the snapshot taken
    /// when it began, and its commit fails if a key it writes was written
    /// after that. Serializable: the reads are also `get_for_update`, so
    /// the keys read are checked too (here they are the keys written).
    fn transfer(
        &self,
        a: &[u8],
        b: &[u8],
        new_a: &[u8],
        new_b: &[u8],
        serializable: bool,
    ) -> Result<bool> {
        let Handle::Optimistic(db) = &self.db else {
            return Err("rocksdb: opened without transactions".into());
        };
        let mut topts = OptimisticTransactionOptions::default();
        topts.set_snapshot(true);
        let txn = db.transaction_opt(&self.write, &topts);
        let snapshot = txn.snapshot();
        let mut read = ReadOptions::default();
        read.set_snapshot(&snapshot);
        for key in [a, b] {
            let value = if serializable {
                txn.get_pinned_for_update_opt(key, true, &read)
            } else {
                txn.get_pinned_opt(key, &read)
            };
            std::hint::black_box(value.map_err(err)?.map(|v| v.len()));
        }
        txn.put(a, new_a).map_err(err)?;
        txn.put(b, new_b).map_err(err)?;
        drop(read);
        drop(snapshot);
        match txn.commit() {
            Ok(()) => Ok(true),
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(err(e)),
        }
    }
    fn flush(&self) -> Result<()> {
        with_db!(self, db => {
            db.flush().map_err(err)?;
            db.flush_wal(true).map_err(err)
        })
    }
    fn close(self: Box<Self>) -> Result<()> {
        // Dropping the DB closes it (and syncs nothing more: every write
        // is in the WAL, which recovery replays).
        with_db!(self, db => db.flush_wal(true).map_err(err))?;
        drop(self);
        Ok(())
    }
    fn stats(&self) -> EngineStats {
        EngineStats {
            max_reader_wait: None,
            index_bytes: with_db!(self, db => db
                .property_int_value("rocksdb.estimate-table-readers-mem")
                .ok()
                .flatten()),
            extent_index_bytes: None,
            extents: None,
            cache_hit_ratio: None,
            row_hit_ratio: None,
            snapshot_held_bytes: None,
            disk_parts: None,
            gc_relocated_bytes: None,
            disk_wal_bytes: None,
            written_parts: None,
            log_rotations: None,
        }
    }
}
