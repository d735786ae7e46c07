//! RocksDB (crate `rocksdb`), configured as RocksDB's tuning guide advises
//! for flash (docs/BENCHMARKS.md lists every option set here), without
//! compression, with a block cache of the size of flexdb's cache.

use std::path::Path;

use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, Options, ReadOptions, WriteOptions, DB,
};

use crate::ycsb::engine::{Engine, EngineConfig, EngineStats, Result};

struct RocksEngine {
    db: DB,
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
    let db = DB::open(&options(cfg, &cache), dir).map_err(err)?;
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
        let mut it = self.db.raw_iterator_opt(ReadOptions::default());
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
    }
}

impl Engine for RocksEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.put_opt(key, value, &self.write).map_err(err)
    }
    fn get(&self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.db.get_pinned(key).map_err(err)?.map(|v| v.len()))
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        self.db.delete_opt(key, &self.write).map_err(err)
    }
    fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
        self.read_from(start, n, false)
    }
    fn scan_back(&self, start: &[u8], n: usize) -> Result<usize> {
        self.read_from(start, n, true)
    }
    fn flush(&self) -> Result<()> {
        self.db.flush().map_err(err)?;
        self.db.flush_wal(true).map_err(err)
    }
    fn close(self: Box<Self>) -> Result<()> {
        // Dropping the DB closes it (and syncs nothing more: every write
        // is in the WAL, which recovery replays).
        self.db.flush_wal(true).map_err(err)?;
        drop(self);
        Ok(())
    }
    fn stats(&self) -> EngineStats {
        EngineStats {
            max_reader_wait: None,
            index_bytes: self
                .db
                .property_int_value("rocksdb.estimate-table-readers-mem")
                .ok()
                .flatten(),
            extent_index_bytes: None,
            cache_hit_ratio: None,
            snapshot_held_bytes: None,
        }
    }
}
