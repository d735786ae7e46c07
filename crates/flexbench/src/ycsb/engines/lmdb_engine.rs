//! LMDB (crate `heed`): a copy-on-write B+-tree in one memory-mapped file.
//! It has no write-ahead log; without `--sync` it runs with `NO_SYNC`
//! (commits reach the page cache, not the disk, like the others' WAL
//! writes without fsync). One write transaction per write.

use std::path::Path;

use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions};

use crate::ycsb::engine::{Engine, EngineConfig, Result};

struct LmdbEngine {
    env: Env,
    db: Database<Bytes, Bytes>,
}

fn err(e: heed::Error) -> String {
    format!("lmdb: {e}")
}

/// The map size: the most the file may grow to (it is sparse).
const MAP_SIZE: usize = 1 << 40;

/// Opens (creating if needed) an LMDB environment in `dir`.
pub fn open(dir: &Path, cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    let mut opts = EnvOpenOptions::new();
    opts.map_size(MAP_SIZE).max_dbs(1).max_readers(256);
    let flags = if cfg.sync {
        EnvFlags::empty()
    } else {
        EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC
    };
    // SAFETY: the directory is ours alone, opened once per process, and
    // the flags only relax durability (documented above).
    let env = unsafe {
        opts.flags(flags);
        opts.open(dir)
    }
    .map_err(err)?;
    let mut wtxn = env.write_txn().map_err(err)?;
    let db: Database<Bytes, Bytes> = env.create_database(&mut wtxn, None).map_err(err)?;
    wtxn.commit().map_err(err)?;
    Ok(Box::new(LmdbEngine { env, db }))
}

impl Engine for LmdbEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut w = self.env.write_txn().map_err(err)?;
        self.db.put(&mut w, key, value).map_err(err)?;
        w.commit().map_err(err)
    }
    fn get(&self, key: &[u8]) -> Result<Option<usize>> {
        let r = self.env.read_txn().map_err(err)?;
        Ok(self
            .db
            .get(&r, key)
            .map_err(err)?
            .map(|v| std::hint::black_box(v).len()))
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        let mut w = self.env.write_txn().map_err(err)?;
        self.db.delete(&mut w, key).map_err(err)?;
        w.commit().map_err(err)
    }
    /// heed's `delete_range` in one write transaction: LMDB has no range
    /// tombstone, so the cursor deletes every pair of the range, and the
    /// commit is part of the call.
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<Option<u64>> {
        let mut w = self.env.write_txn().map_err(err)?;
        let range = (
            std::ops::Bound::Included(start),
            std::ops::Bound::Excluded(end),
        );
        let n = self.db.delete_range(&mut w, &range).map_err(err)?;
        w.commit().map_err(err)?;
        Ok(Some(n as u64))
    }
    fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
        let r = self.env.read_txn().map_err(err)?;
        // LMDB refuses an empty key, also as a bound: "" means from the start.
        let from = if start.is_empty() {
            std::ops::Bound::Unbounded
        } else {
            std::ops::Bound::Included(start)
        };
        let range = (from, std::ops::Bound::Unbounded);
        let mut count = 0;
        for item in self.db.range(&r, &range).map_err(err)?.take(n) {
            std::hint::black_box(item.map_err(err)?);
            count += 1;
        }
        Ok(count)
    }
    fn scan_back(&self, start: &[u8], n: usize) -> Result<usize> {
        let r = self.env.read_txn().map_err(err)?;
        // (An empty key, refused as a bound, is below every stored key.)
        if start.is_empty() {
            return Ok(0);
        }
        let range = (std::ops::Bound::Unbounded, std::ops::Bound::Included(start));
        let mut count = 0;
        for item in self.db.rev_range(&r, &range).map_err(err)?.take(n) {
            std::hint::black_box(item.map_err(err)?);
            count += 1;
        }
        Ok(count)
    }
    fn flush(&self) -> Result<()> {
        self.env.force_sync().map_err(err)
    }
    fn close(self: Box<Self>) -> Result<()> {
        let LmdbEngine { env, db: _ } = *self;
        env.force_sync().map_err(err)?;
        env.prepare_for_closing().wait();
        Ok(())
    }
}
