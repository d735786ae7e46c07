//! Expiry: pairs written with a time to live (`Db::put_with_ttl`,
//! `WriteBatch::put_with_ttl`).
//!
//! A write turns each time to live into a deadline (Unix milliseconds, by
//! the store's `clock`) kept with the pair everywhere it lives: the log
//! payload (`batch`), the MemTable entry (`write::arena`) and the pair
//! record in the space (`codec`). Every read judges the deadline against
//! the time of the read (`clock::Now`): an expired version reads as a
//! deletion, so it hides the older versions too.
//!
//! Space is reclaimed without a scan of the store. The same write puts an
//! entry into the expiry queue, a keyspace of its own (`KsId::EXPIRY`)
//! whose keys sort by deadline: `prefix, deadline (8 bytes big-endian),
//! tag (8 bytes, a hash of the pair's stored key)`, value the pair's
//! stored key. The expiry thread wakes every `Options::expiry_interval`,
//! walks the queue up to now and, in one batch per run of entries, deletes
//! each pair whose newest version still has the entry's deadline, and the
//! entries. The committer then removes those pairs from the space as it
//! merges the deletions, and drops any other expired pair of an interval
//! it rewrites (`commit::merge`).
//!
//! Invariants: a queue entry exists for every pair with a deadline written
//! since the store's format 3 (entries may outlive their pairs: an
//! overwrite, a delete or a keyspace drop leaves its entry, which the
//! sweep removes when its deadline comes); the sweep deletes a pair only
//! when no write of its key came after the state it read (the batch is
//! validated under the writer lock as a transaction is, `Store::validate`),
//! so a newer write is never lost; the sweep never makes a visible pair
//! disappear early (it deletes only versions already expired).

mod api;

pub use api::ValueAndTtl;

use std::ops::Bound;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::batch::{BatchOp, WriteBatch};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::keyspace::encoding::{KsId, PREFIX_LEN};
use crate::read::iter::Iter;
use crate::read::snapshot::ReadPoint;
use crate::store::Store;

/// Bytes of a queue key: prefix, deadline, tag.
const QUEUE_KEY_LEN: usize = PREFIX_LEN + 8 + 8;

/// Queue entries one sweep batch handles at most (its validation and
/// append hold the writer lock).
const SWEEP_BATCH: usize = 256;

/// Conflicting runs in a row after which a sweep stops.
const MAX_CONFLICTS: usize = 8;

/// The queue key of a pair with stored key `key` and deadline `expires`:
/// its tag is two CRC32Cs of the key (the second seeded with the first),
/// the same in every build.
pub(crate) fn queue_key(expires: u64, key: &[u8]) -> [u8; QUEUE_KEY_LEN] {
    let a = crc32c::crc32c(key);
    let b = crc32c::crc32c_append(!a, key);
    let mut k = [0u8; QUEUE_KEY_LEN];
    k[..PREFIX_LEN].copy_from_slice(&KsId::EXPIRY.prefix());
    k[PREFIX_LEN..PREFIX_LEN + 8].copy_from_slice(&expires.to_be_bytes());
    k[PREFIX_LEN + 8..PREFIX_LEN + 12].copy_from_slice(&a.to_be_bytes());
    k[PREFIX_LEN + 12..].copy_from_slice(&b.to_be_bytes());
    k
}

/// The deadline a queue key names (`None`: not a queue key).
fn queue_deadline(qkey: &[u8]) -> Option<u64> {
    if qkey.len() != QUEUE_KEY_LEN || qkey[..PREFIX_LEN] != KsId::EXPIRY.prefix() {
        return None;
    }
    let d: [u8; 8] = qkey[PREFIX_LEN..PREFIX_LEN + 8].try_into().ok()?;
    Some(u64::from_be_bytes(d))
}

/// `batch` with each put with a time to live turned into a put with its
/// deadline by `clock`, and each put with a deadline (one given as it is,
/// e.g. a batch decoded from a log) followed by its queue entry (puts
/// after it in the batch still win: an entry names a pair, not a
/// version). A deadline of 0 is refused.
pub(crate) fn resolve(batch: &WriteBatch, clock: &Clock) -> Result<WriteBatch> {
    let mut out = WriteBatch::new();
    out.store = batch.store;
    for op in batch.ops() {
        let (key, value, expires) = match op {
            BatchOp::PutWithTtl { key, value, ttl } => (key, value, clock.deadline(*ttl)?),
            BatchOp::PutExpiring { expires: 0, .. } => {
                return Err(Error::InvalidArgument(
                    "a put with a deadline of 0 (a deadline is a Unix time in milliseconds)".into(),
                ))
            }
            BatchOp::PutExpiring {
                key,
                value,
                expires,
            } => (key, value, *expires),
            other => {
                out.push_op(other.clone());
                continue;
            }
        };
        out.put_expiring_stored(key.clone(), value.clone(), expires);
        out.put_stored(queue_key(expires, key).to_vec(), key.clone())?;
    }
    Ok(out)
}

/// One sweep's work: queue entries looked at, pairs deleted, and whether
/// it stopped early (conflicts, or the store closing) with entries due.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Swept {
    pub entries: u64,
    pub pairs: u64,
    pub stopped_early: bool,
}

impl Store {
    /// Deletes the pairs whose deadline passed, and their queue entries,
    /// up to now (see the module docs). A run that meets a concurrent
    /// write of one of its keys is read again; after `MAX_CONFLICTS` in a
    /// row the rest waits for the next sweep.
    pub(crate) fn sweep_expired(self: &Arc<Self>) -> Result<Swept> {
        let mut total = Swept::default();
        let mut conflicts = 0;
        loop {
            if self.expiry.stopping() {
                // Closing: the rest waits for the next open.
                total.stopped_early = true;
                return Ok(total);
            }
            let now = self.clock.now_ms();
            let point = ReadPoint::take(self, false);
            let lo = KsId::EXPIRY.prefix().to_vec();
            let mut hi = lo.clone();
            hi.extend_from_slice(&now.saturating_add(1).to_be_bytes());
            let mut it = Iter::new_stored(
                point.clone(),
                Bound::Included(lo),
                Bound::Excluded(hi),
                None,
            );
            let mut batch = WriteBatch::new();
            let mut keys = Vec::new();
            let mut run = Swept::default();
            while let Some(pair) = it.next_ref() {
                let (qkey, key) = pair?;
                run.entries += 1;
                if let Some(deadline) = queue_deadline(qkey) {
                    let current = match point.get_entry_with(key, |e| e.map(|(_, x)| x)) {
                        Ok(current) => current,
                        // Not a stored key (a damaged or hand-made entry):
                        // only the entry goes, or it would stop every sweep.
                        Err(Error::KeyTooLarge { .. }) => None,
                        Err(e) => return Err(e),
                    };
                    if current == Some(deadline) && deadline <= now {
                        batch.delete_stored(key.to_vec())?;
                        keys.push(key.to_vec());
                        run.pairs += 1;
                    }
                }
                batch.delete_stored(qkey.to_vec())?;
                keys.push(qkey.to_vec());
                if run.entries as usize >= SWEEP_BATCH {
                    break;
                }
            }
            drop(it);
            if batch.is_empty() {
                return Ok(total);
            }
            let full = run.entries as usize >= SWEEP_BATCH;
            match self.write_checked(&batch, false, || self.validate(&point, keys.iter(), &[])) {
                Ok(()) => {
                    total.entries += run.entries;
                    total.pairs += run.pairs;
                    conflicts = 0;
                }
                // A key written meanwhile (or a rotation that left no
                // history to tell): read the run again.
                Err(Error::Conflict) if conflicts < MAX_CONFLICTS => {
                    conflicts += 1;
                    continue;
                }
                Err(Error::Conflict) => {
                    total.stopped_early = true;
                    return Ok(total);
                }
                Err(e) => return Err(e),
            }
            if !full {
                return Ok(total);
            }
        }
    }
}

/// The expiry thread's handle: woken to stop, or by its period.
#[derive(Default)]
pub(crate) struct ExpiryState {
    stop: Mutex<bool>,
    wake: Condvar,
}

impl ExpiryState {
    /// Asks the thread to stop (it finishes the run of the sweep it is
    /// in).
    pub fn stop(&self) {
        *self.stop.lock() = true;
        self.wake.notify_all();
    }

    /// Whether the store is closing.
    fn stopping(&self) -> bool {
        *self.stop.lock()
    }
}

/// Starts the store's expiry thread.
pub(crate) fn start(store: &Arc<Store>) -> Result<JoinHandle<()>> {
    let s = store.clone();
    std::thread::Builder::new()
        .name("flexdb-expiry".into())
        .spawn(move || run(&s))
        .map_err(|e| Error::Io {
            file: store.dir.clone(),
            source: e,
        })
}

fn run(store: &Arc<Store>) {
    // (Not lowered in priority: it takes the writer lock, and a holder
    // that the scheduler passes over would stall every writer.)
    let every = store.opts.expiry_interval.max(Duration::from_millis(1));
    loop {
        {
            let mut stop = store.expiry.stop.lock();
            if *stop {
                return;
            }
            store.expiry.wake.wait_for(&mut stop, every);
            if *stop {
                return;
            }
        }
        if store.check_stopped().is_err() {
            return;
        }
        if let Err(e) = store.sweep_expired() {
            tracing::warn!(target: "flexdb::expiry", error = %e, "expiry sweep failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_keys_sort_by_deadline_and_name_it() {
        let a = queue_key(5, b"zzz");
        let b = queue_key(6, b"aaa");
        assert!(a < b);
        assert_eq!(queue_deadline(&a), Some(5));
        assert_eq!(queue_deadline(&b), Some(6));
        assert_eq!(queue_key(5, b"k"), queue_key(5, b"k"));
        assert_eq!(queue_deadline(b"short"), None);
    }

    #[test]
    fn a_sweep_does_not_sort_memtables_without_queue_entries() {
        // The queue's keys sort after every default-keyspace key: a sweep
        // of a store written without TTLs must not sort its MemTable (it
        // did, every second, costing a tenth of a put phase's CPU).
        let dir = tempfile::tempdir().unwrap();
        let db =
            crate::Db::open(dir.path(), crate::Options::new().create_if_missing(true)).unwrap();
        for i in 0..5000u32 {
            db.put(format!("key{i:06}"), b"value").unwrap();
        }
        assert_eq!(db.remove_expired().unwrap(), 0);
        let active = db.store().writes.mems().active.clone();
        assert_eq!(active.sorted_upto(), 0, "the sweep sorted the MemTable");
        // A pair with a TTL puts a queue entry into the table: the sweep
        // reads (and sorts) it then.
        db.put_with_ttl(b"short", b"lived", Duration::from_secs(60))
            .unwrap();
        assert_eq!(db.remove_expired().unwrap(), 0);
        assert!(active.sorted_upto() > 5000);
        db.close().unwrap();
    }
}
