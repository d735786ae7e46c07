//! The committer: one background thread that merges frozen MemTables into
//! the space in key order (§5.3). Here: its loop and one commit; in
//! `mailbox` how it is woken and stopped, in `newest_versions` the walk
//! over the tables, in `group` and `merge` how a group of updates is
//! applied, in `prefetch` the thread that loads intervals ahead of it.
//!
//! It takes every frozen MemTable waiting (oldest first; one, unless it
//! fell behind the writers) and commits them as one: their logs are
//! durable already (rotation synced them); the committer walks the newest
//! version of each key across them in key order (`newest_versions`), groups the
//! keys that fall into one interval, computes the
//! interval's new content off-lock (`merge`), then applies the edits to the
//! space and the sparse index under `index`'s write lock, which it holds
//! only for that group. It then records the pair count and the committed
//! generation (the batch's newest) in the space's metadata words, syncs
//! the space once, publishes a view of the result for readers (`read::view`),
//! removes the batch's logs and hands its MemTables to the retiring thread.
//!
//! A commit that fails for want of room (`Error::NoSpace`: the device is
//! full) stops nothing: the committer tells `flush` waiters and stalled
//! writers (`CommitterMailbox::no_space`), waits (10 ms, doubling to 1 s,
//! or until woken by a rotation or a flush) and commits every frozen
//! MemTable again, from the start. That is sound because a failed group
//! applied nothing (`group::apply_group`: the space refuses before its
//! first edit, or the commit stops the store), the space's own failed
//! commit is made again whole by its next one, and merging a version the
//! space already holds changes nothing (`merge`). Meanwhile the MemTables
//! stay in the readers' list and their logs on disk.
//!
//! An interval that cannot be read (`Error::Corrupt`) does not stop a
//! commit: its updates are held back and every other interval committed.
//! The held updates must not be lost, so from the batch that held some on
//! (`Store::held_logs_from`) no log is retired and the space's metadata
//! never name a generation committed: every open replays those logs
//! (merging what the space holds already changes nothing) and holds the
//! updates back again, until the interval is mended and they commit.
//! Reads of the interval's keys fail with `Corrupt` meanwhile.
//!
//! Invariants: every interval start is the start of a tagged extent
//! (`PAIR_TAG`), so recovery can find pair boundaries; intervals stay under
//! the split thresholds unless a single pair is larger; the space's
//! metadata words name the last generation whose every write is in the
//! space as of the same commit point.

mod group;
mod idle_compact;
pub(crate) mod idle_sort;
pub(crate) mod mailbox;
mod merge;
mod newest_versions;
mod prefetch;
mod range_delete;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::space_err;
use crate::error::Result;
use crate::store::{CommitPoint, Store};
use crate::write::memtable::EntryRef;
use crate::write::FrozenMemTable;
use mailbox::MailboxGuard;

/// The tracing target of the committer's events: each commit's summary
/// (`commit`), the space's work during it (`commit space`), and a
/// prefetcher that could not start (`no prefetcher`).
pub(crate) const TRACE_TARGET: &str = "flexdb::commit";

/// Frozen MemTables of at most this many entries have their invariants
/// checked before a commit, in debug builds.
#[cfg(debug_assertions)]
const DEBUG_CHECK_ENTRIES: usize = 1 << 14;

/// The first wait after a commit failed for want of room...
const NO_SPACE_WAIT: Duration = Duration::from_millis(10);
/// ...doubling after each failure up to this.
const NO_SPACE_WAIT_MAX: Duration = Duration::from_secs(1);

/// How often an idle committer looks for replaced views no reader holds.
const VIEW_REAP_PERIOD: Duration = Duration::from_millis(20);
/// How long the committer waits with nothing to commit before it frees the
/// memory kept for MemTables to come (`Store::chunks`) and the spare logs...
const POOL_IDLE: Duration = Duration::from_secs(1);
/// ...unless the writes that came meanwhile would fill a MemTable within
/// this many such waits: a store written to steadily keeps them however
/// long its MemTables take to fill (a MemTable of fresh memory faults in
/// every page, and a new log allocates every block).
const BUSY_WAITS: usize = 8;

/// Whether the store counts as idle after a wait in which the active
/// MemTable grew by `grew` bytes (`None`: it was replaced meanwhile).
fn idle_after(grew: Option<usize>, memtable_bytes: usize) -> bool {
    grew.is_some_and(|g| g.saturating_mul(BUSY_WAITS) < memtable_bytes)
}

/// Waits for work for up to `POOL_IDLE` (the caller holds `work`); true if
/// none came and the store stayed idle meanwhile (`idle_after`).
fn wait_found_idle(shared: &Store, work: &mut MailboxGuard<'_>) -> bool {
    let active = shared.writes.mems().active.clone();
    let before = active.approximate_bytes();
    let timed_out = work.wait_for(POOL_IDLE);
    let mems = shared.writes.mems();
    let grew = Arc::ptr_eq(&mems.active, &active)
        .then(|| active.approximate_bytes().saturating_sub(before));
    timed_out && mems.frozen.is_empty() && idle_after(grew, shared.opts.memtable_bytes)
}

/// The committer thread's body.
pub(crate) fn run(shared: Arc<Store>) {
    // Committed MemTables and their logs are let go of by a thread of their
    // own: closing the last handle of an unlinked log frees its blocks,
    // which on a file system mounted with `discard` waits for the device
    // (0.1-0.2 s for a 256 MiB log), and unmapping a MemTable's arena takes
    // milliseconds more. Neither is the committer's business.
    let (retire, retired) = std::sync::mpsc::channel::<FrozenMemTable>();
    std::thread::scope(|scope| {
        let retirer = std::thread::Builder::new()
            .name("flexdb-retire".into())
            .spawn_scoped(scope, move || retired.into_iter().for_each(drop));
        // Without the thread, what is sent is dropped here instead.
        let retire = retirer.is_ok().then_some(retire);
        commit_loop(&shared, retire.as_ref());
        // Leaving the scope closes the channel and joins the retirer.
    });
}

/// The committer's loop: commits frozen MemTables, oldest first, until the
/// store shuts down or stops; hands each committed one to `retire`.
fn commit_loop(shared: &Store, retire: Option<&std::sync::mpsc::Sender<FrozenMemTable>>) {
    let (mut release_pool, mut committed) = (false, false);
    let mut idle = idle_compact::IdleCompaction::default();
    // While commits fail for want of room: the wait before the next try.
    let mut no_space: Option<Duration> = None;
    loop {
        // Views replaced by the last commit that readers still held (never
        // dropped under `work`: freeing one takes milliseconds).
        let views_left = shared.views.reap(Duration::ZERO);
        // What the views dropped here held in the space's grace epochs.
        shared.space.release_freed();
        idle.after_reap(shared, views_left);
        // Memory kept for MemTables to come, let go of once a wait of
        // `POOL_IDLE` found the store idle (`idle_after`; freed here for
        // the same reason).
        if std::mem::take(&mut release_pool) {
            shared.chunks.release();
            // Likewise the WAL's disk space beyond the active log's
            // (`wal::footprint`; best effort: what is not given back is
            // only disk space).
            let _ = shared.shrink_wal();
        }
        let batch: Vec<FrozenMemTable> = {
            let mut work = shared.mailbox.lock();
            if work.stopped() {
                return;
            }
            if let Some(wait) = no_space {
                // Out of room: a shutdown gives up (the MemTables' logs
                // hold every write for the next open); else wait a while,
                // or until a rotation or a flush wakes us, and try again.
                if work.shutting_down() {
                    return;
                }
                work.wait_for(wait);
                if work.stopped() || work.shutting_down() {
                    return;
                }
            }
            // Every MemTable waiting, committed as one (see `commit`).
            let next: Vec<FrozenMemTable> = shared.writes.mems().frozen.iter().cloned().collect();
            match next {
                n if !n.is_empty() => n,
                _ if work.shutting_down() => return,
                _ if work.take_reap() => continue,
                _ if work.republish_wanted() => {
                    drop(work);
                    if let Err(e) = republish(shared) {
                        if !failed(shared, &e, &mut no_space) {
                            return;
                        }
                    }
                    continue;
                }
                _ if idle.running() => {
                    drop(work);
                    if let Err(e) = idle.step(shared) {
                        if !failed(shared, &e, &mut no_space) {
                            return;
                        }
                    }
                    continue;
                }
                _ => {
                    if views_left {
                        work.wait_for(VIEW_REAP_PERIOD);
                    } else if idle_sort::wanted(shared) {
                        idle_sort::wait_then_sort(shared, work);
                    } else if std::mem::take(&mut committed)
                        || shared.chunks.kept_bytes() > 0
                        || shared.spare_logs.len() > 0
                        || idle.armed()
                    {
                        // (Just after a commit the retiring thread may still
                        // be handing the MemTables' memory to the pool.)
                        release_pool = wait_found_idle(shared, &mut work);
                        drop(work);
                        idle.after_wait(shared, release_pool);
                    } else {
                        work.wait();
                    }
                    continue;
                }
            }
        };
        if let Err(e) = commit(shared, &batch) {
            if !failed(shared, &e, &mut no_space) {
                return;
            }
            continue;
        }
        no_space = None;
        committed = true;
        idle.committed();
        // A send fails only if the retirer is gone, and then returns the
        // MemTable, dropped here (as is the batch without a retirer).
        if let Some(r) = retire {
            for frozen in batch {
                let _ = r.send(frozen);
            }
        }
    }
}

/// After the committer's work failed with `e`: for want of room, tells
/// the mailbox, sets the wait before the next try and returns true (go
/// on); else stops the store and returns false.
fn failed(shared: &Store, e: &crate::Error, no_space: &mut Option<Duration>) -> bool {
    if !e.is_no_space() {
        shared.stop(format!("committer: {e}"));
        return false;
    }
    let wait = no_space.map_or(NO_SPACE_WAIT, |w| (w * 2).min(NO_SPACE_WAIT_MAX));
    *no_space = Some(wait);
    tracing::debug!(target: TRACE_TARGET, error = %e, retry_in = ?wait, "no space to commit");
    shared.mailbox.no_space(e.to_string());
    // Writers stalled on the full backlog fail rather than wait.
    shared.writes.wake_stalled(true);
    true
}

/// Publishes a fresh view of the space (nothing new committed: `compact`
/// moved data, and the old view holds the segments it emptied).
fn republish(shared: &Store) -> Result<()> {
    // The same generation as the view it replaces: nothing changed
    // logically (with logs held back, the committed generation the space
    // names is below it, and a view tagged with it would let the row cache
    // serve rows of an older view: `read::row_cache`).
    let gen = shared.views.load().gen;
    shared.views.publish(&shared.index, &shared.space, gen)?;
    shared.mailbox.republished();
    Ok(())
}

/// Commits the frozen MemTables of `batch` (oldest first, consecutive
/// generations, all those waiting) as one: the newest version of each key
/// across them is merged into the space in one walk, so a key written in
/// several of them is merged once, and an interval that several of them
/// change is read, merged and written back once. Then retires them.
fn commit(shared: &Store, batch: &[FrozenMemTable]) -> Result<()> {
    let t0 = std::time::Instant::now();
    let c0 = crate::threads::thread_cpu();
    let s0 = shared.trace.then(|| shared.space.stats());
    for frozen in batch {
        // A frozen table takes no more writes: small ones (as the tests
        // make) are checked whole in debug builds.
        #[cfg(debug_assertions)]
        if frozen.mem.len() <= DEBUG_CHECK_ENTRIES {
            frozen.mem.check_invariants();
        }
        frozen.wal.sync()?;
    }
    // Words this commit forwards into the view name content of the
    // batch's generations (see `PublishedView::forwarded_gen`).
    if let Some(last) = batch.last() {
        shared.views.begin_forwarding(last.gen);
    }
    // Range deletes first: every key they cover leaves the space (whole
    // intervals in runs, `range_delete`), and the point writes they
    // override are not merged.
    let overrides = range_delete::Overrides::of(batch);
    let ranges = if overrides.len() == 0 {
        range_delete::RangesDone::default()
    } else {
        let t = std::time::Instant::now();
        let done = range_delete::delete_spans(shared, &overrides.spans())?;
        tracing::debug!(
            target: TRACE_TARGET,
            tombstones = overrides.len(),
            pairs = done.pairs,
            intervals_dropped = done.dropped,
            runs = done.runs,
            took = ?t.elapsed(),
            "range deletes applied"
        );
        done
    };
    // Stream the newest versions in key order, one interval's group at a
    // time, borrowing keys and values from the tables. (Sorting happens
    // here, once; the prefetcher reuses the views.)
    let mut entries = newest_of(batch).filter(|e| !overrides.hides(e)).peekable();
    let progress = AtomicUsize::new(0);
    // What the walk merges comes off the writers' backlog as it goes.
    let share = group::BatchShare::new(
        batch.iter().map(|f| f.mem.approximate_bytes()).sum(),
        batch.iter().map(|f| f.mem.keys()).sum(),
    );
    let _share_ends = shared.writes.share_committed();
    let done = AtomicBool::new(false);
    let applied = std::thread::scope(|scope| {
        let _stop = StopOnDrop(&done);
        let prefetcher = std::thread::Builder::new()
            .name("flexdb-prefetch".into())
            .spawn_scoped(scope, || {
                prefetch::prefetch(shared, batch, &overrides, &progress, &done)
            });
        if let Err(e) = prefetcher {
            // Not fatal: the committer reads what it needs itself.
            tracing::debug!(target: TRACE_TARGET, error = %e, "no prefetcher");
        }
        group::commit_groups(shared, &mut entries, &progress, &share)
    })?;
    let (count, groups) = (applied.count, applied.groups);
    if applied.held + ranges.held > 0 {
        // Updates into a corrupt interval: their logs, and every later
        // one, stay (see `finish_commit`).
        let mut from = shared.held_logs_from.lock();
        if from.is_none() {
            *from = batch.first().map(|f| f.gen);
            tracing::warn!(
                target: TRACE_TARGET,
                from = ?*from,
                error = ?applied
                    .damage
                    .as_ref()
                    .or(ranges.damage.as_ref())
                    .map(ToString::to_string),
                "logs kept: a commit held back updates into a corrupt interval"
            );
        }
    }
    if shared.trace {
        let cpu = crate::threads::thread_cpu() - c0;
        tracing::debug!(
            target: TRACE_TARGET,
            gens = %gens(batch),
            updates = count,
            groups,
            time = ?t0.elapsed(),
            cpu = ?cpu,
            us_per_update = cpu.as_secs_f64() * 1e6 / count.max(1) as f64,
            committer_reads = shared.counters.trace_committer_reads.swap(0, Ordering::Relaxed),
            longest_index_hold = ?Duration::from_nanos(
                shared.counters.max_commit_hold_ns.swap(0, Ordering::Relaxed)
            ),
            longest_reader_wait = ?Duration::from_nanos(
                shared.counters.trace_reader_wait_ns.swap(0, Ordering::Relaxed)
            ),
            reader_waits_over_100us = shared.counters.trace_slow_waits[0].swap(0, Ordering::Relaxed),
            reader_waits_over_1ms = shared.counters.trace_slow_waits[1].swap(0, Ordering::Relaxed),
            "commit"
        );
        if let Some(s0) = s0 {
            let s1 = shared.space.stats();
            tracing::debug!(
                target: TRACE_TARGET,
                gens = %gens(batch),
                gc_runs = s1.gc_runs - s0.gc_runs,
                gc_relocated_kib = (s1.gc_relocated_bytes - s0.gc_relocated_bytes) >> 10,
                checkpoints = s1.checkpoints - s0.checkpoints,
                tree_written_mib = (s1.tree_bytes_written - s0.tree_bytes_written) >> 20,
                data_written_mib = (s1.data_bytes_written - s0.data_bytes_written) >> 20,
                "commit space"
            );
        }
    }
    finish_commit(shared, batch)?;
    shared
        .counters
        .range_deletes_committed
        .fetch_add(overrides.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// The newest version of every key of `batch`'s tables, in key order.
fn newest_of(batch: &[FrozenMemTable]) -> impl Iterator<Item = EntryRef<'_>> + '_ {
    newest_versions::NewestOf::new(batch.iter().map(|f| f.mem.newest()))
}

/// The generations of a batch, for the trace: `7` or `7..=8`.
fn gens(batch: &[FrozenMemTable]) -> String {
    match (batch.first(), batch.last()) {
        (Some(a), Some(b)) if a.gen != b.gen => format!("{}..={}", a.gen, b.gen),
        (Some(a), _) => a.gen.to_string(),
        _ => String::new(),
    }
}

/// Sets the flag when dropped (also when the committer fails or panics),
/// so the prefetcher never outlives the group loop it follows.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Records the committed MemTables of `batch` as durable in the space and
/// retires them: the space's metadata words name the batch's newest
/// generation, so a crash before this sync replays every log of the batch
/// (newest version last, as the walk merged them) and one after it none.
fn finish_commit(shared: &Store, batch: &[FrozenMemTable]) -> Result<()> {
    let Some(last) = batch.last() else {
        return Ok(());
    };
    let pairs = shared.index.read().pairs;
    let max_seq = shared.writes.visible();
    // With updates held back (a corrupt interval), the generations from
    // the first that held some are never named committed: the next open
    // replays their logs, merging what the space holds already again
    // (a no-op) and holding back those updates again.
    let held_from = *shared.held_logs_from.lock();
    let committed_gen = match held_from {
        Some(h) => last.gen.min(h.saturating_sub(1)),
        None => last.gen,
    };
    CommitPoint {
        pairs,
        committed_gen,
        max_seq,
    }
    .write(&shared.space)?;
    shared.space.sync().map_err(space_err)?;
    // Readers see the commit before the MemTables leave their list.
    shared
        .views
        .publish(&shared.index, &shared.space, last.gen)?;
    // Readers load the old list or the new one, never wait. Writers do
    // (the writer lock) until the batch's logs are retired: a rotation and
    // the next log's preparation in between would find neither the
    // committed log gone nor its spare (`in_use` below would be stale),
    // two files over the WAL's bound for as long as they last.
    let w = shared.writes.lock();
    shared.writes.replace_mems(|m| {
        let mut m = crate::write::MemTables::clone(m);
        while m.frozen.front().is_some_and(|f| f.gen <= last.gen) {
            m.frozen.pop_front();
        }
        m
    });
    // Its tables left the backlog whole.
    shared.writes.set_committed(0);
    for frozen in batch {
        if held_from.is_some_and(|h| frozen.gen >= h) {
            // Kept under its name for the next open (see above).
            continue;
        }
        shared
            .counters
            .wal_bytes_retired
            .fetch_add(frozen.wal.written_bytes(), Ordering::Relaxed);
        // Nothing appends to a frozen log (its rotation synced it), so a
        // new log may take its file over. A log that survives a crash here
        // is recognised as committed by its generation and removed on the
        // next open.
        // The WAL's footprint stays within the MemTables' bound (see
        // `spare_logs`): the active log and the frozen ones count.
        // (A log prepared ahead of its rotation took a spare, or is one
        // file more for a moment, as a rotation making its log was.)
        let in_use = 1 + shared.writes.mems().frozen.len();
        shared
            .spare_logs
            .retire(&*shared.storage, frozen.gen, &frozen.wal, in_use)?;
    }
    drop(w);
    // Caught up, the active MemTable barely begun (after a flush, or
    // writes slower than commits): the WAL shrinks to the active log
    // (`wal::footprint`; best effort), before a flush waiting for this
    // commit returns.
    if crate::wal::footprint::caught_up(&shared.writes.mems(), shared.opts.memtable_bytes) {
        let _ = shared.shrink_wal();
    }
    shared.counters.commits.fetch_add(1, Ordering::Relaxed);
    shared
        .counters
        .memtables_committed
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    shared.mailbox.committed(last.gen);
    // Stalled writers wait on `stall_cv` under the writer lock.
    shared.writes.wake_stalled(true);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::POOL_IDLE;
    use crate::{Db, Options};
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    /// Waits until `f` holds, failing the test if `limit` passes first.
    fn poll(what: &str, limit: Duration, f: &dyn Fn() -> bool) {
        let t = Instant::now();
        while !f() {
            assert!(t.elapsed() < limit, "{what} within {limit:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The memory of committed MemTables is kept for the next ones while
    /// writes come, and let go of (lazily: see `chunk_pool`) once the store has
    /// been idle a while.
    #[test]
    fn memtable_memory_is_kept_while_writes_come_and_freed_when_idle() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::new()
            .create_if_missing(true)
            .memtable_bytes(64 << 10);
        let db = Db::open(dir.path(), opts).unwrap();
        let pool = &db.shared().chunks;
        for i in 0..3000u32 {
            db.put(format!("key{i:06}"), [7u8; 100]).unwrap();
        }
        db.flush().unwrap();
        assert!(db.stats().memtables_committed >= 3);
        poll("the committed tables' memory kept", POOL_IDLE / 2, &|| {
            pool.kept_bytes() > 0
        });
        poll("the kept memory freed", POOL_IDLE * 4, &|| {
            pool.kept_bytes() == 0
        });
        // Writes go on as before.
        db.put("after", "idle").unwrap();
        db.flush().unwrap();
        assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"idle"[..]));
    }

    /// A store written to steadily, but too slowly to fill a MemTable
    /// within `POOL_IDLE`, keeps the memory kept for the next MemTable,
    /// and lets go of it once the writes stop.
    #[test]
    fn memtable_memory_is_kept_while_writes_come_slowly() {
        let dir = tempfile::tempdir().unwrap();
        // Several chunks a MemTable, so that the pool keeps more than the
        // next MemTable takes.
        let memtable = 2 * crate::write::chunk_pool::ALIGN;
        let opts = Options::new()
            .create_if_missing(true)
            .memtable_bytes(memtable);
        let db = Db::open(dir.path(), opts).unwrap();
        let pool = &db.shared().chunks;
        for i in 0..120_000u32 {
            db.put(format!("key{i:06}"), [7u8; 100]).unwrap();
        }
        db.flush().unwrap();
        let chunks = 3 * crate::write::chunk_pool::ALIGN;
        poll("the committed tables' memory kept", POOL_IDLE / 2, &|| {
            pool.kept_bytes() >= chunks
        });
        let committed = db.stats().memtables_committed;
        // A fifth of a MemTable a second (counting only keys and values),
        // paced by the clock: several times `idle_after`'s bar, and short
        // of filling the MemTable in the time the loop runs.
        let rate = memtable / 5;
        let t = Instant::now();
        let (mut written, mut i) = (0usize, 0u32);
        while t.elapsed() < POOL_IDLE * 11 / 5 {
            let due = (t.elapsed().as_secs_f64() * rate as f64) as usize;
            while written < due {
                db.put(format!("slow{i:06}"), [9u8; 100]).unwrap();
                (written, i) = (written + 110, i + 1);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            db.stats().memtables_committed,
            committed,
            "no MemTable filled meanwhile"
        );
        // The active MemTable took at most two chunks.
        assert!(
            pool.kept_bytes() >= chunks - 2 * crate::write::chunk_pool::ALIGN,
            "the memory is kept across waits in which writes came"
        );
        poll(
            "the kept memory freed once writes stop",
            POOL_IDLE * 4,
            &|| pool.kept_bytes() == 0,
        );
    }

    #[test]
    fn a_wait_is_idle_below_a_share_of_a_memtable() {
        let m = 1 << 20;
        assert!(super::idle_after(Some(0), m));
        assert!(super::idle_after(Some(m / super::BUSY_WAITS - 1), m));
        assert!(!super::idle_after(Some(m / super::BUSY_WAITS), m));
        assert!(!super::idle_after(Some(usize::MAX), m));
        // A MemTable replaced during the wait: writes filled one.
        assert!(!super::idle_after(None, m));
    }

    /// The spare logs in a store directory (named as logs being created).
    fn spares(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".log.new"))
            .collect();
        names.sort();
        names
    }

    /// Committed logs' files are taken over by new logs while writes come,
    /// removed once the committer has caught up (a flush: `wal::footprint`),
    /// and never left behind by a close; what the reused logs held reads
    /// back after a reopen.
    #[test]
    fn committed_logs_are_taken_over_by_new_ones_and_removed_when_caught_up() {
        let dir = tempfile::tempdir().unwrap();
        let opts = || {
            Options::new()
                .create_if_missing(true)
                .memtable_bytes(64 << 10)
        };
        let db = Db::open(dir.path(), opts()).unwrap();
        let mut model = BTreeMap::new();
        for i in 0..6000u32 {
            let (k, v) = (
                format!("key{:06}", i % 2500),
                vec![i as u8; 80 + i as usize % 60],
            );
            db.put(&k, &v).unwrap();
            model.insert(k.into_bytes(), v);
        }
        db.flush().unwrap();
        let stats = db.stats();
        assert!(stats.memtables_committed >= 4, "{stats:?}");
        assert!(stats.logs_reused >= 2, "{stats:?}");
        // Caught up: no spare left once the flush returns.
        assert_eq!(db.shared().spare_logs.len(), 0);
        assert_eq!(spares(dir.path()), Vec::<String>::new());
        // A close leaves none either.
        for i in 0..3000u32 {
            let (k, v) = (format!("key{:06}", i * 7 % 4000), vec![!i as u8; 50]);
            db.put(&k, &v).unwrap();
            model.insert(k.into_bytes(), v);
        }
        db.close().unwrap();
        assert_eq!(spares(dir.path()), Vec::<String>::new());
        let db = Db::open(dir.path(), opts()).unwrap();
        let got: BTreeMap<Vec<u8>, Vec<u8>> = db.iter().map(|kv| kv.unwrap()).collect();
        assert_eq!(got, model);
    }

    /// A spare that cannot be removed does not keep the others on disk: each
    /// is tried, and the first failure reported.
    #[test]
    fn removing_spares_tries_every_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::new().create_if_missing(true)).unwrap();
        let names: Vec<String> = (900..903)
            .map(crate::wal::log_files::wal_tmp_name)
            .collect();
        // The middle one is a directory with something in it: unremovable.
        std::fs::create_dir(dir.path().join(&names[1])).unwrap();
        std::fs::write(dir.path().join(&names[1]).join("x"), b"x").unwrap();
        for n in [&names[0], &names[2]] {
            std::fs::write(dir.path().join(n), b"old log").unwrap();
        }
        let pool = &db.shared().spare_logs;
        for n in &names {
            assert!(pool.put(n.clone()));
        }
        assert!(db
            .shared()
            .spare_logs
            .remove_all(&*db.shared().storage)
            .is_err());
        assert!(!dir.path().join(&names[0]).exists());
        assert!(!dir.path().join(&names[2]).exists());
        assert_eq!(pool.len(), 0);
        std::fs::remove_dir_all(dir.path().join(&names[1])).unwrap();
    }

    /// Holds the committer inside its first commit (it waits for `index`)
    /// while writes fill `max_frozen_memtables` MemTables, so that it must commit the
    /// ones behind the first as one. Keys are overwritten and deleted
    /// across those MemTables, and most of the final versions lie in them,
    /// so the newest version of each key must win there.
    #[test]
    fn a_committer_that_fell_behind_commits_the_waiting_memtables_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::new()
            .create_if_missing(true)
            .memtable_bytes(32 << 10);
        let db = Db::open(dir.path(), opts).unwrap();
        let key = |i: u32| format!("key{i:05}").into_bytes();
        let mut model = BTreeMap::new();
        let held = db.shared().index.write();
        // Rounds over the same 600 keys (each round writes every key once,
        // a put or every fifth a delete, of a value naming the round) until
        // the backlog is full; writes never touch `index`.
        let mut writes = 0u32;
        while db.shared().writes.mems().frozen.len() < db.shared().writes.max_frozen {
            let (round, i) = (writes / 600, writes % 600);
            let k = key((i * 7 + round) % 600);
            if (i + round) % 5 == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("round {round} write {i}").into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            writes += 1;
            assert!(writes < 1_000_000, "the MemTables never filled");
        }
        drop(held);
        db.flush().unwrap();
        let stats = db.stats();
        assert!(
            stats.memtables_committed > stats.commits,
            "no commit held two MemTables: {} in {} commits",
            stats.memtables_committed,
            stats.commits
        );
        let scanned: BTreeMap<Vec<u8>, Vec<u8>> =
            db.range::<&[u8], _>(..).map(|kv| kv.unwrap()).collect();
        assert_eq!(scanned, model);
        for i in 0..600 {
            assert_eq!(db.get(key(i)).unwrap(), model.get(&key(i)).cloned());
        }
        assert_eq!(stats.pairs, model.len() as u64);
        db.check().unwrap();
    }

    /// The calling thread's nice value.
    #[cfg(target_os = "linux")]
    fn nice() -> i32 {
        // SAFETY: `gettid` takes no arguments and cannot fail.
        let tid = unsafe { libc::gettid() };
        // SAFETY: `getpriority` takes no pointers.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn lowest_priority_lowers_the_calling_thread_alone() {
        let before = nice();
        let lowered = std::thread::spawn(|| {
            crate::threads::lowest_priority();
            nice()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, 19);
        assert_eq!(nice(), before, "another thread's priority changed");
    }
}
