//! fjall (an LSM-tree in Rust): one keyspace, no compression, block cache
//! of flexdb's cache size. Its journal is written to the OS on every write
//! and synced only with `--sync` (fjall's default durability).

use std::path::Path;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use crate::ycsb::engine::{Engine, EngineConfig, Result};

struct FjallEngine {
    db: Database,
    ks: Keyspace,
    sync: bool,
}

fn err(e: fjall::Error) -> String {
    format!("fjall: {e}")
}

/// Opens (creating if needed) a fjall database in `dir`.
pub fn open(dir: &Path, cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    let db = Database::builder(dir)
        .cache_size(cfg.cache_bytes as u64)
        .open()
        .map_err(err)?;
    let ks = db
        .keyspace("ycsb", || {
            KeyspaceCreateOptions::default()
                .max_memtable_size(cfg.memtable_bytes as u64)
                .data_block_compression_policy(fjall::config::CompressionPolicy::disabled())
                .index_block_compression_policy(fjall::config::CompressionPolicy::disabled())
        })
        .map_err(err)?;
    Ok(Box::new(FjallEngine {
        db,
        ks,
        sync: cfg.sync,
    }))
}

impl Engine for FjallEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.ks.insert(key, value).map_err(err)?;
        if self.sync {
            self.db.persist(PersistMode::SyncData).map_err(err)?;
        }
        Ok(())
    }
    fn get(&self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.ks.get(key).map_err(err)?.map(|v| v.len()))
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        self.ks.remove(key).map_err(err)?;
        if self.sync {
            self.db.persist(PersistMode::SyncData).map_err(err)?;
        }
        Ok(())
    }
    fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
        let mut count = 0;
        for g in self.ks.range::<&[u8], _>(start..).take(n) {
            std::hint::black_box(g.into_inner().map_err(err)?);
            count += 1;
        }
        Ok(count)
    }
    fn scan_back(&self, start: &[u8], n: usize) -> Result<usize> {
        let mut count = 0;
        for g in self.ks.range::<&[u8], _>(..=start).rev().take(n) {
            std::hint::black_box(g.into_inner().map_err(err)?);
            count += 1;
        }
        Ok(count)
    }
    fn flush(&self) -> Result<()> {
        self.ks.rotate_memtable_and_wait().map_err(err)?;
        self.db.persist(PersistMode::SyncAll).map_err(err)
    }
    fn close(self: Box<Self>) -> Result<()> {
        self.db.persist(PersistMode::SyncAll).map_err(err)?;
        drop(self);
        Ok(())
    }
}
