//! The write path: a write is logged (`wal`), then inserted into the active
//! MemTable and made visible; a full MemTable is frozen (rotation) for the
//! committer, behind at most `Options::max_frozen_memtables` others, with
//! a new log.
//!
//! Invariants:
//! - Writers are serialized by the writer lock (`WriteHead`); sequence
//!   numbers are handed out under it, in log order, and `visible` only
//!   grows, to the last sequence number of a whole batch.
//! - Logs are durable in order: rotation links the new log to the old one
//!   (`Wal::link`: a chain record naming the old log's end, and a sync of
//!   the new log syncs the old one first), so a synced write in a newer
//!   log implies every write before it is durable, and replay takes a
//!   newer log's writes only after the older log's whole. The old log's
//!   own sync runs on a thread, off the writer lock.
//! - The list of MemTables readers consult (`MemTables`) is replaced whole,
//!   never edited in place: by rotation under the writer lock, and by the
//!   committer when it retires a committed MemTable.

mod arena;
mod backpressure;
pub(crate) mod chunk_pool;
mod hash_sizing;
pub(crate) mod memtable;
pub(crate) mod memtable_list;
pub(crate) mod range_tombstones;
mod write_order;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::batch::{encode_expiring_single, encode_single, BatchOp, WriteBatch};
use crate::codec::check_stored_sizes;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::wal::log_files::new_wal;
use crate::wal::next_log::{NextLog, PreparedLog};
use crate::wal::MAX_RECORD;
pub(crate) use backpressure::{deferring_pace, MAX_SLEEP};
use memtable::MemTable;
pub(crate) use memtable_list::{FrozenMemTable, MemTables, WriteHead};

/// The `tracing` target of the write path's events: stalls, rotations
/// and writes that held or waited for the writer lock over
/// [`SLOW_WRITE`] (at debug level; nothing is timed without a subscriber).
pub(crate) const TRACE_TARGET: &str = "flexdb::write";

/// A write that takes longer than this is traced, with its parts.
const SLOW_WRITE: Duration = Duration::from_millis(1);

fn us(d: Duration) -> u64 {
    d.as_micros() as u64
}

/// A log is synced by a thread of its own once its MemTable is this
/// fraction full (`PRESYNC_AT_EIGHTHS` eighths), so that the sync after
/// its rotation has only the rest to write.
const PRESYNC_AT_EIGHTHS: usize = 7;
/// MemTables smaller than this are not synced ahead nor right after
/// their rotation (a thread per rotation of a tiny table would cost more
/// than the sync it saves).
const PRESYNC_MIN_MEMTABLE: usize = 16 << 20;

/// Syncs `wal` on a thread of its own: ahead of its rotation (see
/// `PRESYNC_AT_EIGHTHS`), and right after it. Best effort: a failed sync
/// marks the log failed, and the next append or sync reports it; without
/// the thread, the next log's first sync or the committer syncs it.
fn sync_on_thread(wal: Arc<crate::wal::Wal>, what: &'static str) {
    let _ = std::thread::Builder::new()
        .name("flexdb-presync".into())
        .spawn(move || {
            let t = Instant::now();
            let r = wal.sync();
            tracing::debug!(
                target: TRACE_TARGET,
                took_us = us(t.elapsed()),
                ok = r.is_ok(),
                what,
                "log synced"
            );
        });
}

/// The next log is prepared on a thread of its own once the active
/// MemTable is this fraction full (`PREPARE_AT_EIGHTHS` eighths), so that
/// its rotation swaps logs (`wal::next_log`).
const PREPARE_AT_EIGHTHS: usize = 7;

/// What a helper thread needs to make the next log (`wal::next_log`).
struct LogToPrepare {
    storage: Arc<dyn flexspace::Storage>,
    opts: crate::options::Options,
    next_log: Arc<NextLog>,
    gen: u64,
    first: u64,
    spare: Option<String>,
    /// What the next MemTable is made from: the active one's shared key
    /// prefix, the pool, and the keys it will hold when full (projected).
    table: (Vec<u8>, Arc<chunk_pool::ChunkPool>, usize),
}

impl LogToPrepare {
    /// Makes the log and hands it to the slot (an error too: the rotation
    /// then makes the log itself and reports what fails).
    fn run(self) {
        let t = Instant::now();
        let reused = self.spare.is_some();
        // It follows the log of the generation before its own, active now.
        let follows = self.gen.checked_sub(1);
        let made = new_wal(
            &self.storage,
            &self.opts,
            self.gen,
            self.first,
            self.spare,
            follows,
        );
        let t_log = t.elapsed();
        // Sized for as many keys as the active table will hold
        // (`hash_sizing`), as the rotation would make it.
        let (hint, pool, keys) = self.table;
        let mem = made.is_ok().then(|| {
            Arc::new(MemTable::sized(
                &hint,
                Some(pool),
                self.opts.memtable_bytes,
                keys,
                true,
            ))
        });
        tracing::debug!(
            target: TRACE_TARGET,
            gen = self.gen,
            took_us = us(t.elapsed()),
            log_us = us(t_log),
            reused,
            ok = made.is_ok(),
            "next log prepared"
        );
        let gen = self.gen;
        self.next_log.finish(
            gen,
            made.map(|wal| PreparedLog {
                gen,
                wal,
                reused,
                mem,
            }),
        );
    }
}

/// The keys a MemTable holding `keys` keys in `bytes` bytes will hold at
/// `full` bytes, at the same rate.
fn projected_keys(keys: usize, bytes: usize, full: usize) -> usize {
    if bytes == 0 || bytes >= full {
        return keys;
    }
    (keys as u128 * full as u128 / bytes as u128).min(usize::MAX as u128) as usize
}

/// Prepares the next log on a thread of its own; on this thread, after the
/// writer lock, when no thread can be started.
fn prepare_next_log(job: LogToPrepare) {
    // The job stays here when the thread cannot be started.
    let job = Arc::new(parking_lot::Mutex::new(Some(job)));
    let on_thread = job.clone();
    let spawned = std::thread::Builder::new()
        .name("flexdb-next-log".into())
        .spawn(move || {
            if let Some(job) = on_thread.lock().take() {
                job.run();
            }
        });
    if spawned.is_err() {
        if let Some(job) = job.lock().take() {
            job.run();
        }
    }
}

/// Grows `wal` ahead of its writers on a thread of its own (see
/// `wal::grow_ahead`); on this thread, after the writer lock, when no
/// thread can be started.
fn grow_ahead(wal: Arc<crate::wal::Wal>) {
    let on_thread = wal.clone();
    let spawned = std::thread::Builder::new()
        .name("flexdb-grow-log".into())
        .spawn(move || {
            let t = Instant::now();
            on_thread.grow_ahead();
            tracing::debug!(
                target: TRACE_TARGET,
                took_us = us(t.elapsed()),
                "log grown ahead of its writers"
            );
        });
    if spawned.is_err() {
        wal.grow_ahead();
    }
}

/// MemTables with fewer entries than this are left for the committer to
/// sort: it takes it well under a millisecond.
const SORT_AHEAD_ENTRIES: usize = 1 << 16;

/// Sorts a MemTable just frozen behind another on a thread of its own, at
/// the lowest priority, while the committer works on the older one: the
/// committer then walks it without sorting it (7% of the committer's time
/// in a profile of 100% puts at 10 M pairs). Best effort: without the
/// thread, or when it is late, the committer sorts the table itself.
fn sort_ahead(mem: &Arc<MemTable>) {
    if mem.len() < SORT_AHEAD_ENTRIES {
        return;
    }
    let mem = mem.clone();
    let _ = std::thread::Builder::new()
        .name("flexdb-sort".into())
        .spawn(move || {
            crate::threads::lowest_priority();
            mem.prepare_newest();
        });
}

/// Runs `f` on the thread's payload buffer, unless it is gone (a write
/// from a thread-local destructor) or in use: then on a fresh one. `f`
/// runs exactly once. A buffer grown past 1 MiB (a huge value) is not
/// kept.
fn with_payload_buffer<R>(mut f: impl FnMut(&mut Vec<u8>) -> R) -> R {
    thread_local! {
        static PAYLOAD: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let reused = PAYLOAD.try_with(|cell| {
        let mut buf = cell.try_borrow_mut().ok()?;
        let r = f(&mut buf);
        if buf.capacity() > 1 << 20 {
            *buf = Vec::new();
        }
        Some(r)
    });
    match reused {
        Ok(Some(r)) => r,
        _ => f(&mut Vec::new()),
    }
}

impl Store {
    /// Applies `batch` atomically; with `sync`, returns once it is durable.
    pub fn write(&self, batch: &WriteBatch, sync: bool) -> Result<()> {
        self.write_checked(batch, sync, || Ok(()))
    }

    /// Applies `batch` atomically if `check`, run under the writer lock
    /// (no other write runs between it and the batch), passes; with
    /// `sync`, returns once it is durable. A failed check writes nothing.
    pub fn write_checked(
        &self,
        batch: &WriteBatch,
        sync: bool,
        check: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        self.check_stopped()?;
        for op in batch.ops() {
            match op {
                BatchOp::Put { key, value }
                | BatchOp::PutExpiring { key, value, .. }
                | BatchOp::PutWithTtl { key, value, .. } => check_stored_sizes(key, Some(value))?,
                BatchOp::Delete { key } => check_stored_sizes(key, None)?,
                // (`WriteBatch::delete_range` checked the bounds.)
                BatchOp::DeleteRange { .. } => {}
            }
        }
        if batch.is_empty() {
            return if sync { self.sync() } else { Ok(()) };
        }
        // Times to live become deadlines, by the store's clock, each with
        // its entry in the expiry queue (`expiry`).
        let resolved;
        let batch = if batch.has_ttls() {
            resolved = crate::expiry::resolve(batch, &self.clock)?;
            &resolved
        } else {
            batch
        };
        self.append(&batch.encode(), batch.len(), sync, check, |mem, seq| {
            for (i, op) in batch.ops().iter().enumerate() {
                let s = seq + i as u64;
                match op {
                    BatchOp::Put { key, value } => mem.insert(key, s, Some(value)),
                    BatchOp::Delete { key } => mem.insert(key, s, None),
                    BatchOp::DeleteRange { start, end } => {
                        mem.delete_range(start, end.as_deref(), s)
                    }
                    BatchOp::PutExpiring {
                        key,
                        value,
                        expires,
                    } => mem.insert_expiring(key, s, value, *expires),
                    // (None left: resolved above.)
                    BatchOp::PutWithTtl { key, value, .. } => mem.insert(key, s, Some(value)),
                }
            }
        })
    }

    /// Applies one put (`value` set) or delete, as a batch of one would be
    /// applied, without building the batch: the payload is encoded into a
    /// buffer the thread reuses.
    pub fn write_one(&self, key: &[u8], value: Option<&[u8]>, sync: bool) -> Result<()> {
        self.check_stopped()?;
        check_stored_sizes(key, value)?;
        with_payload_buffer(|buf| {
            encode_single(buf, key, value);
            // The insert's cache misses, taken before the writer lock
            // rather than under it (docs/DESIGN.md, "The writers' own
            // limit, and three changes to their path").
            let h = self.writes.mems().active.warm(key);
            self.append(
                buf,
                1,
                sync,
                || Ok(()),
                |mem, seq| mem.insert_hashed(key, h, seq, value, 0),
            )
        })
    }

    /// Applies one put with a time to live, as a batch of one would be
    /// applied (its deadline by the store's clock, its expiry-queue entry
    /// in the same record), without building the batch.
    pub fn write_one_expiring(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        sync: bool,
    ) -> Result<()> {
        self.check_stopped()?;
        check_stored_sizes(key, Some(value))?;
        let expires = self.clock.deadline(ttl)?;
        let queue_key = crate::expiry::queue_key(expires, key);
        with_payload_buffer(|buf| {
            encode_expiring_single(buf, key, value, expires, &queue_key);
            self.append(
                buf,
                2,
                sync,
                || Ok(()),
                |mem, seq| {
                    mem.insert_expiring(key, seq, value, expires);
                    mem.insert(&queue_key, seq + 1, Some(key));
                },
            )
        })
    }

    /// Logs `payload` (a batch of `ops` operations) under the next sequence
    /// numbers, lets `apply` insert them into the active MemTable (the first
    /// at the sequence number given), and makes them visible; with `sync`,
    /// returns once they are durable. `check` runs first, under the writer
    /// lock: when it fails, nothing is written.
    #[inline]
    fn append(
        &self,
        payload: &[u8],
        ops: usize,
        sync: bool,
        check: impl FnOnce() -> Result<()>,
        apply: impl FnOnce(&MemTable, u64),
    ) -> Result<()> {
        if payload.len() > MAX_RECORD {
            return Err(Error::BatchTooLarge {
                len: payload.len(),
                max: MAX_RECORD,
            });
        }
        let t0 = tracing::enabled!(target: TRACE_TARGET, tracing::Level::DEBUG).then(Instant::now);
        // Smooth backpressure, before the writer lock (`backpressure`).
        let table = self.opts.memtable_bytes;
        let delay = if backpressure::defer_pace(payload.len()) {
            Duration::ZERO
        } else {
            self.writes.pace(payload.len(), table)
        };
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let t_paced = t0.map(|_| Instant::now());
        let mut w = self.writes.lock_spinning();
        let t_locked = t0.map(|_| Instant::now());
        let gen = w.gen;
        self.make_room(&mut w)?;
        // A rotation's old log is synced on a thread started after the
        // writer lock (a thread started under it may take the lock
        // holder's core for milliseconds on a busy machine). Small tables
        // rotate too often for a thread each: the committer syncs their
        // logs (and a sync of the new log does, first).
        let rotated = (w.gen != gen && table >= PRESYNC_MIN_MEMTABLE)
            .then(|| {
                let mems = self.writes.mems();
                let old = mems.frozen.iter().rev().find(|f| f.gen == gen);
                old.map(|f| f.wal.clone())
            })
            .flatten();
        check()?;
        let t_room = t0.map(|_| Instant::now());
        let seq = w.next_seq;
        let end = match w.wal.append(seq, payload) {
            Ok(end) => end,
            Err(e) => {
                // A full device logged nothing: this write fails alone.
                self.stop_unless_no_space(&e);
                return Err(e);
            }
        };
        let t_logged = t0.map(|_| Instant::now());
        let len_before = w.active.len();
        apply(&w.active, seq);
        // Every `SORT_MIN` entries the committer is told, so that it sorts
        // them if the store goes idle (`commit::idle_sort`).
        let sort_min = crate::commit::idle_sort::SORT_MIN;
        let wake_sorter = len_before / sort_min != w.active.len() / sort_min;
        let last = seq + ops as u64 - 1;
        w.next_seq = last + 1;
        self.writes.set_visible(last);
        // Every few MiB the log's new pages are written back early (not
        // under the writer lock), so no sync meets a log full of them.
        let write_back = w.wal.write_back_due(end);
        let wal = (sync || write_back).then(|| w.wal.clone());
        let ahead = table >= PRESYNC_MIN_MEMTABLE
            && w.active.approximate_bytes() >= table / 8 * PRESYNC_AT_EIGHTHS
            && self.writes.claim_presync(w.gen);
        let presync_wal = ahead.then(|| w.wal.clone());
        let grow_wal = w.wal.claim_grow_ahead(end).then(|| w.wal.clone());
        let next_log = (w.active.approximate_bytes() >= table / 8 * PREPARE_AT_EIGHTHS
            && self.writes.next_log.claim(w.gen + 1))
        .then(|| self.log_to_prepare(&w));
        drop(w);
        let t_unlocked = t0.map(|_| Instant::now());
        if wake_sorter {
            self.mailbox.wake_committer();
        }
        if let Some(job) = next_log {
            prepare_next_log(job);
        }
        if let Some(wal) = presync_wal {
            sync_on_thread(wal, "ahead of its rotation");
        }
        if let Some(wal) = rotated {
            sync_on_thread(wal, "after its rotation");
        }
        if let Some(wal) = grow_wal {
            grow_ahead(wal);
        }
        if let Some(wal) = wal {
            if write_back {
                wal.write_back(end);
            }
            if sync {
                if let Err(e) = wal.sync_to(end) {
                    // (A full device refused the buffered log's write: the
                    // write is in the MemTable and the buffer, and the next
                    // sync writes it.)
                    self.stop_unless_no_space(&e);
                    return Err(e);
                }
            }
        }
        if let (Some(t0), Some(paced), Some(locked), Some(room), Some(logged), Some(unlocked)) =
            (t0, t_paced, t_locked, t_room, t_logged, t_unlocked)
        {
            let total = t0.elapsed();
            if total >= SLOW_WRITE {
                tracing::debug!(
                    target: TRACE_TARGET,
                    total_us = us(total),
                    paced_us = us(paced - t0),
                    lock_wait_us = us(locked - paced),
                    room_us = us(room - locked),
                    log_append_us = us(logged - room),
                    insert_us = us(unlocked - logged),
                    after_lock_us = us(unlocked.elapsed()),
                    write_back,
                    sync,
                    "slow write"
                );
            }
        }
        Ok(())
    }

    /// The preparation of the active log's successor, claimed by the caller
    /// (under the writer lock `w`): its records are numbered from the
    /// writer's next sequence number on, and it takes a spare if there is
    /// one (`wal::next_log`).
    fn log_to_prepare(&self, w: &WriteHead) -> LogToPrepare {
        LogToPrepare {
            storage: self.storage.clone(),
            opts: self.opts.clone(),
            next_log: self.writes.next_log.clone(),
            gen: w.gen + 1,
            first: w.next_seq,
            spare: self.spare_logs.take(),
            table: (
                w.active.shared_prefix(),
                self.chunks.clone(),
                projected_keys(
                    w.active.keys(),
                    w.active.approximate_bytes(),
                    self.opts.memtable_bytes,
                ),
            ),
        }
    }

    /// Rotates a full MemTable, stalling while the committer's backlog is
    /// full.
    fn make_room(&self, w: &mut parking_lot::MutexGuard<'_, WriteHead>) -> Result<()> {
        while w.active.approximate_bytes() >= self.opts.memtable_bytes {
            if !self.writes.frozen_full(&self.writes.mems()) {
                return self.rotate(w);
            }
            // The committer wakes us after each commit; the timeout only
            // guards against a lost wakeup.
            let t = Instant::now();
            self.writes.stall(w, Duration::from_millis(10));
            tracing::debug!(
                target: TRACE_TARGET,
                waited_us = us(t.elapsed()),
                frozen = self.writes.mems().frozen.len(),
                "writer stalled: the committer's backlog is full"
            );
            self.check_stopped()?;
            // The committer's last attempt failed for want of room: the
            // write fails rather than wait for room someone else must
            // make (the committer retries on its own, a flush at once).
            self.mailbox.check_no_space()?;
        }
        Ok(())
    }

    /// Freezes the active MemTable and starts a new one with a new log,
    /// linked to the old one (`Wal::link`), so logs are durable in order (a
    /// synced write in a newer log implies every write before it is
    /// durable); the writer that rotated starts the old log's sync on a
    /// thread after the writer lock.
    pub fn rotate(&self, w: &mut WriteHead) -> Result<()> {
        if w.active.is_empty() {
            return Ok(());
        }
        let t0 = Instant::now();
        let mut next_mem = None;
        let r = (|| {
            // The old log's buffered records go to the file now (no fsync:
            // a write, or nothing for a mapped log), so that a store that
            // stops before its next sync still leaves every acknowledged
            // write with the operating system.
            w.wal.flush()?;
            let gen = w.gen + 1;
            // The log prepared ahead (`wal::next_log`), else one made now.
            let (wal, reused, prepared) = match self.writes.next_log.take(gen) {
                Some(p) => {
                    next_mem = p.mem;
                    (p.wal, p.reused, true)
                }
                None => {
                    let spare = self.spare_logs.take();
                    let reused = spare.is_some();
                    let wal = new_wal(
                        &self.storage,
                        &self.opts,
                        gen,
                        w.next_seq,
                        spare,
                        Some(w.gen),
                    )?;
                    (wal, reused, false)
                }
            };
            wal.link(w.wal.clone(), w.gen)?;
            if reused {
                self.counters.logs_reused.fetch_add(1, Ordering::Relaxed);
            }
            if prepared {
                self.counters.logs_prepared.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, Error>((gen, wal, reused, prepared))
        })();
        let t_new_log = Instant::now();
        let (gen, wal, reused, prepared) = match r {
            Ok(x) => x,
            Err(e) => {
                // A full device: nothing changed (the new log, if made, is
                // made again by the next rotation; a spare it took is
                // removed by the next open), and the next write retries.
                self.stop_unless_no_space(&e);
                return Err(e);
            }
        };
        // Made with the prepared log, or now: sized for as many keys as
        // the table it follows (`hash_sizing`).
        let active = next_mem.unwrap_or_else(|| {
            Arc::new(MemTable::sized(
                &w.active.shared_prefix(),
                Some(self.chunks.clone()),
                self.opts.memtable_bytes,
                w.active.keys(),
                false,
            ))
        });
        let t_table = Instant::now();
        let frozen = FrozenMemTable {
            mem: w.active.clone(),
            wal: w.wal.clone(),
            gen: w.gen,
        };
        // Readers load the old list or the new one, never wait.
        let before = self.writes.replace_mems(|m| {
            let mut m = MemTables::clone(m);
            m.frozen.push_back(frozen.clone());
            m.active = active.clone();
            m.active_gen = gen;
            m
        });
        let committer_busy = !before.frozen.is_empty();
        if committer_busy {
            sort_ahead(&w.active);
        }
        w.active = active;
        w.wal = wal;
        w.gen = gen;
        self.mailbox.wake_committer();
        tracing::debug!(
            target: TRACE_TARGET,
            gen,
            total_us = us(t0.elapsed()),
            new_log_us = us(t_new_log - t0),
            new_table_us = us(t_table - t_new_log),
            publish_us = us(t_table.elapsed()),
            reused,
            prepared,
            frozen = before.frozen.len() + 1,
            "rotated"
        );
        Ok(())
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        let wal = self.writes.lock().wal.clone();
        wal.sync().inspect_err(|e| self.stop_unless_no_space(e))
    }

    /// Commits every write so far to the space and waits until it is
    /// durable there.
    pub fn flush(&self) -> Result<()> {
        let target = {
            let mut w = self.writes.lock();
            self.rotate(&mut w)?;
            match self.writes.mems().frozen.back() {
                Some(f) => f.gen,
                None => return Ok(()),
            }
        };
        self.mailbox.wait_committed(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes made while their pace is deferred count their logged bytes
    /// for the caller to book, whatever kind of write they are; the store's
    /// own books are untouched by them.
    #[test]
    fn deferred_writes_report_what_they_logged() {
        let dir = tempfile::tempdir().unwrap();
        let opts = crate::Options::new().create_if_missing(true);
        let db = crate::Db::open(dir.path(), opts).unwrap();
        let (r, done) = deferring_pace(|| {
            db.put("key", [7u8; 100])?;
            let mut batch = WriteBatch::new();
            batch.put(b"a", &[1u8; 50])?;
            batch.delete(b"key")?;
            db.write(batch)?;
            db.delete_range("a".."b")
        });
        r.unwrap();
        assert_eq!(done.writes, 3);
        assert!(done.bytes >= 3 + 100 + 1 + 50 + 3 + 2, "{done:?}");
        let ((), none) = deferring_pace(|| ());
        assert_eq!(none.writes + none.bytes, 0);
        let (got, wait) = db.with_pace_deferred(|| db.put("b", "v"));
        got.unwrap();
        assert_eq!(wait, Duration::ZERO, "an idle store slows nothing");
        assert_eq!(db.get("b").unwrap().as_deref(), Some(&b"v"[..]));
    }

    #[test]
    fn a_table_sorted_ahead_is_sorted_by_the_thread() {
        let mem = Arc::new(MemTable::new());
        let n = SORT_AHEAD_ENTRIES as u64 + 10;
        for i in 0..n {
            let k = format!("{:08}", (i * 7919) % n);
            mem.insert(k.as_bytes(), i + 1, Some(b"v"));
        }
        sort_ahead(&mem);
        // The thread runs at the lowest priority: give it time.
        let deadline = Instant::now() + Duration::from_secs(60);
        while mem.sorted_upto() < mem.len() {
            assert!(Instant::now() < deadline, "never sorted");
            std::thread::sleep(Duration::from_millis(5));
        }
        let keys: Vec<_> = mem.newest().map(|e| e.key.to_vec()).collect();
        assert_eq!(keys.len() as u64, n);
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }
}
