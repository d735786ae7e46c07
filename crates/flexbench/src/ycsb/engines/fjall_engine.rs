//! fjall (an LSM-tree in Rust): one keyspace, no compression, block cache
//! of flexdb's cache size. Its journal is written to the OS on every write
//! and synced only with `--sync` (fjall's default durability).
//!
//! A run with transactions (workloads t, ts) opens the database as an
//! `OptimisticTxDatabase` (fjall's serializable snapshot isolation, its
//! only optimistic level) and runs the transfers through it; the other
//! operations use the plain handles inside it, as a plain run would.

use std::path::Path;

use fjall::{
    Database, Keyspace, KeyspaceCreateOptions, OptimisticTxDatabase, OptimisticTxKeyspace,
    PersistMode, Readable,
};

use crate::ycsb::engine::{Engine, EngineConfig, Result};

struct FjallEngine {
    db: Database,
    ks: Keyspace,
    /// The transactional handles, when the run has transactions.
    tx: Option<(OptimisticTxDatabase, OptimisticTxKeyspace)>,
    sync: bool,
}

fn keyspace_options(cfg: &EngineConfig) -> KeyspaceCreateOptions {
    KeyspaceCreateOptions::default()
        .max_memtable_size(cfg.memtable_bytes as u64)
        .data_block_compression_policy(fjall::config::CompressionPolicy::disabled())
        .index_block_compression_policy(fjall::config::CompressionPolicy::disabled())
}

fn err(e: fjall::Error) -> String {
    format!("fjall: {e}")
}

/// Opens (creating if needed) a fjall database in `dir`.
pub fn open(dir: &Path, cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    if cfg.transactions {
        let txdb = OptimisticTxDatabase::builder(dir)
            .cache_size(cfg.cache_bytes as u64)
            .open()
            .map_err(err)?;
        let txks = txdb
            .keyspace("ycsb", || keyspace_options(cfg))
            .map_err(err)?;
        return Ok(Box::new(FjallEngine {
            db: txdb.inner().clone(),
            ks: txks.inner().clone(),
            tx: Some((txdb, txks)),
            sync: cfg.sync,
        }));
    }
    let db = Database::builder(dir)
        .cache_size(cfg.cache_bytes as u64)
        .open()
        .map_err(err)?;
    let ks = db.keyspace("ycsb", || keyspace_options(cfg)).map_err(err)?;
    Ok(Box::new(FjallEngine {
        db,
        ks,
        tx: None,
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
    /// fjall has one optimistic level, serializable: both workloads run
    /// the same transaction (its reads are tracked, its commit checks them).
    fn transfer(&self, a: &[u8], b: &[u8], new_a: &[u8], new_b: &[u8], _: bool) -> Result<bool> {
        let Some((txdb, txks)) = &self.tx else {
            return Err("fjall: opened without transactions".into());
        };
        let mut tx = txdb.write_tx().map_err(err)?;
        if self.sync {
            tx = tx.durability(Some(PersistMode::SyncData));
        }
        std::hint::black_box(tx.get(txks, a).map_err(err)?);
        std::hint::black_box(tx.get(txks, b).map_err(err)?);
        tx.insert(txks, a, new_a);
        tx.insert(txks, b, new_b);
        Ok(tx.commit().map_err(err)?.is_ok())
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
