//! The committer: one background thread that merges frozen MemTables into
//! the space in key order (§5.3).
//!
//! It takes every frozen MemTable waiting (oldest first; one, unless it
//! fell behind the writers) and commits them as one: their logs are
//! durable already (rotation synced them); the committer walks the newest
//! version of each key across them in key order (`newest_of`), groups the
//! keys that fall into one interval, computes the
//! interval's new content off-lock (`merge`), then applies the edits to the
//! space and the sparse index under `index`'s write lock, which it holds
//! only for that group. It then records the pair count and the committed
//! generation (the batch's newest) in the space's metadata words, syncs
//! the space once, publishes a view of the result for readers (`view`),
//! removes the batch's logs and hands its MemTables to the retiring thread.
//!
//! Invariants: every interval start is the start of a tagged extent
//! (`PAIR_TAG`), so recovery can find pair boundaries; intervals stay under
//! the split thresholds unless a single pair is larger; the space's
//! metadata words name the last generation whose every write is in the
//! space as of the same commit point.

pub(crate) mod merge;
pub(crate) mod newest_versions;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::space_err;
use crate::error::Result;
use crate::index::interval::{Builder, IntervalData};
use crate::index::interval_cache::CacheRef;
use crate::index::sparse::{separator, IntervalMeta, IntervalPos, NewInterval, UNKNOWN_COUNT};
use crate::index::{CommitterIndex, PAIR_TAG};
use crate::store::{CommitPoint, CommitterMailbox, Store};
use crate::write::memtable::EntryRef;
use crate::write::FrozenMemTable;
use merge::{merge, split_points, Update};

/// The tracing target of the committer's events: each commit's summary
/// (`commit`), the space's work during it (`commit space`), and a
/// prefetcher that could not start (`no prefetcher`).
pub(crate) const TRACE_TARGET: &str = "flexdb::commit";

/// Frozen MemTables of at most this many entries have their invariants
/// checked before a commit, in debug builds.
#[cfg(debug_assertions)]
const DEBUG_CHECK_ENTRIES: usize = 1 << 14;

/// An interval splits above this many pairs (§5.1: 16).
pub(crate) const SPLIT_PAIRS: usize = 16;
/// An interval splits above this many bytes (§5.1: 16 KiB).
pub(crate) const SPLIT_BYTES: usize = 16 << 10;
/// A group applied under one hold of the write lock: at most this many
/// updates...
const GROUP_UPDATES: usize = 64;
/// ...and this many bytes of new values.
const GROUP_BYTES: usize = 256 << 10;
/// An interval this small after deletions merges with its successor when
/// both fit under the split thresholds.
const MERGE_PAIRS: usize = 4;

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
fn wait_found_idle(
    shared: &Store,
    work: &mut parking_lot::MutexGuard<'_, CommitterMailbox>,
) -> bool {
    let active = shared.mems.load().active.clone();
    let before = active.approximate_bytes();
    let timed_out = shared.work_cv.wait_for(work, POOL_IDLE).timed_out();
    let mems = shared.mems.load();
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
    loop {
        // Views replaced by the last commit that readers still held (never
        // dropped under `work`: freeing one takes milliseconds).
        let views_left = shared.views.reap(Duration::ZERO);
        // Memory kept for MemTables to come, let go of once a wait of
        // `POOL_IDLE` found the store idle (`idle_after`; freed here for
        // the same reason).
        if std::mem::take(&mut release_pool) {
            shared.chunks.release();
            // Likewise the spare logs' files (and so their disk space). A
            // spare that cannot be removed holds nothing anyone needs; the
            // next open removes it.
            let _ = shared.spare_logs.remove_all(&*shared.storage);
        }
        let batch: Vec<FrozenMemTable> = {
            let mut work = shared.work.lock();
            if work.stopped.is_some() {
                return;
            }
            // Every MemTable waiting, committed as one (see `commit`).
            let next: Vec<FrozenMemTable> = shared.mems.load().frozen.iter().cloned().collect();
            match next {
                n if !n.is_empty() => n,
                _ if work.shutdown => return,
                _ => {
                    if views_left {
                        shared.work_cv.wait_for(&mut work, VIEW_REAP_PERIOD);
                    } else if std::mem::take(&mut committed)
                        || shared.chunks.kept_bytes() > 0
                        || shared.spare_logs.len() > 0
                    {
                        // (Just after a commit the retiring thread may still
                        // be handing the MemTables' memory to the pool.)
                        release_pool = wait_found_idle(shared, &mut work);
                    } else {
                        shared.work_cv.wait(&mut work);
                    }
                    continue;
                }
            }
        };
        if let Err(e) = commit(shared, &batch) {
            shared.stop(format!("committer: {e}"));
            return;
        }
        committed = true;
        // A send fails only if the retirer is gone, and then returns the
        // MemTable, dropped here (as is the batch without a retirer).
        if let Some(r) = retire {
            for frozen in batch {
                let _ = r.send(frozen);
            }
        }
    }
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
    // Stream the newest versions in key order, one interval's group at a
    // time, borrowing keys and values from the tables. (Sorting happens
    // here, once; the prefetcher reuses the views.)
    let mut entries = newest_of(batch).peekable();
    let progress = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let (count, groups) = std::thread::scope(|scope| {
        let _stop = StopOnDrop(&done);
        let prefetcher = std::thread::Builder::new()
            .name("flexdb-prefetch".into())
            .spawn_scoped(scope, || prefetch(shared, batch, &progress, &done));
        if let Err(e) = prefetcher {
            // Not fatal: the committer reads what it needs itself.
            tracing::debug!(target: TRACE_TARGET, error = %e, "no prefetcher");
        }
        commit_groups(shared, &mut entries, &progress)
    })?;
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
    finish_commit(shared, batch)
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

/// Updates the prefetcher may run ahead of the committer...
const PREFETCH_AHEAD: usize = 4096;
/// ...and how far ahead of it a prefetcher that fell behind starts
/// loading again: the intervals in between are the committer's own.
const PREFETCH_LEAD: usize = 256;

/// Walks the same keys as the committer, a little ahead of it, and loads
/// each interval they fall into into the cache, so that the committer
/// (whose thread is the store's write bottleneck) finds them there instead
/// of reading the space itself. Uses what the other core has spare; a
/// prefetched interval is an ordinary cache entry, so being wrong or late
/// costs nothing but the read.
fn prefetch(shared: &Store, batch: &[FrozenMemTable], progress: &AtomicUsize, done: &AtomicBool) {
    crate::threads::lowest_priority();
    // The next interval's anchor: keys below it fall into the interval
    // loaded last.
    let mut bound: Option<Vec<u8>> = None;
    for (n, e) in newest_of(batch).enumerate() {
        while n > progress.load(Ordering::Acquire) + PREFETCH_AHEAD {
            if done.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        if done.load(Ordering::Acquire) {
            return;
        }
        // Behind the committer (the prefetcher runs at the lowest
        // priority, and the clients may have had both cores): what the
        // committer passed is committed, and what it is about to reach it
        // reads before a load here could finish, so skip to a lead.
        if n < progress.load(Ordering::Acquire) + PREFETCH_LEAD {
            continue;
        }
        if bound.as_deref().is_some_and(|b| e.key < b) {
            continue;
        }
        // Not `read_state`: the prefetcher's waits are not a reader's, and
        // it polls rather than parks, so the committer's unlock never has
        // to wake it. The read itself happens with the index released, so
        // the committer never waits for it.
        let fetched = shared.interval_of(
            e.key,
            || flexsys::lock_wait::read_polling(&shared.index),
            |st, f| bound = st.sparse.next_anchor(f),
        );
        if fetched.is_err() {
            return;
        }
        if bound.is_none() {
            // The last interval holds every key left.
            return;
        }
    }
}

/// The group loop of [`commit`]: returns (updates, groups).
fn commit_groups<'m>(
    shared: &Store,
    entries: &mut std::iter::Peekable<impl Iterator<Item = EntryRef<'m>>>,
    progress: &AtomicUsize,
) -> Result<(usize, usize)> {
    let mut group: Vec<Update<'_>> = Vec::with_capacity(GROUP_UPDATES);
    let (mut count, mut groups) = (0usize, 0usize);
    while let Some(first) = entries.next() {
        group.clear();
        group.push(update(first));
        let target = find_interval(shared, first.key)?;
        let mut bytes = first.key.len() + first.value.map_or(0, <[u8]>::len);
        while group.len() < GROUP_UPDATES && bytes < GROUP_BYTES {
            let Some(next) = entries.peek() else { break };
            if target.bound.as_deref().is_some_and(|b| next.key >= b) {
                break;
            }
            bytes += next.key.len() + next.value.map_or(0, <[u8]>::len);
            group.extend(entries.next().map(update));
        }
        apply_group(shared, &target, &group)?;
        count += group.len();
        groups += 1;
        if groups % 64 == 0 {
            shared.views.carry_installs(&shared.index);
            shared.views.reap(Duration::ZERO);
        }
        progress.store(count, Ordering::Release);
    }
    Ok((count, groups))
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
    let max_seq = shared.visible.load(Ordering::Acquire);
    CommitPoint {
        pairs,
        committed_gen: last.gen,
        max_seq,
    }
    .write(&shared.space)?;
    shared.space.sync().map_err(space_err)?;
    // Readers see the commit before the MemTables leave their list.
    shared.views.publish(&shared.index, &shared.space)?;
    // Readers load the old list or the new one, never wait.
    shared.mems.rcu(|m| {
        let mut m = crate::write::MemTables::clone(m);
        while m.frozen.front().is_some_and(|f| f.gen <= last.gen) {
            m.frozen.pop_front();
        }
        m
    });
    for frozen in batch {
        shared
            .counters
            .wal_bytes_retired
            .fetch_add(frozen.wal.written_bytes(), Ordering::Relaxed);
        // Nothing appends to a frozen log (its rotation synced it), so a
        // new log may take its file over. A log that survives a crash here
        // is recognised as committed by its generation and removed on the
        // next open.
        shared
            .spare_logs
            .retire(&*shared.storage, frozen.gen, &frozen.wal)?;
    }
    shared.counters.commits.fetch_add(1, Ordering::Relaxed);
    shared
        .counters
        .memtables_committed
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    let mut work = shared.work.lock();
    work.committed_gen = work.committed_gen.max(last.gen);
    shared.flushed_cv.notify_all();
    drop(work);
    // Stalled writers wait on `stall_cv` under the writer lock.
    let _w = shared.writer.lock();
    shared.stall_cv.notify_all();
    Ok(())
}

fn update(e: EntryRef<'_>) -> Update<'_> {
    Update {
        key: e.key,
        value: e.value,
    }
}

/// The interval a group goes to: where it is, its content, and the key
/// bound of the next interval.
struct Target {
    f: IntervalPos,
    data: Arc<IntervalData>,
    bound: Option<Vec<u8>>,
    /// The interval's fragmentation mark.
    marked: bool,
}

/// Finds the interval holding `key`. Only this thread changes the index and
/// the space, so what it reads stays valid after the read lock goes.
fn find_interval(shared: &Store, key: &[u8]) -> Result<Target> {
    let st = shared.index.read();
    let f = st.sparse.find(key);
    let data = shared.interval(&st, &f)?;
    let bound = st.sparse.next_anchor(&f);
    let marked = st.sparse.meta(&f).fragmented;
    Ok(Target {
        f,
        data,
        bound,
        marked,
    })
}

/// Applies a group of updates that all fall into one interval: the new
/// content, its cache entries and the interval's parts are made before
/// `index` is taken, which is then held only to edit the space and bring
/// the index into line; the cache entries replaced are dropped after.
fn apply_group(shared: &Store, target: &Target, updates: &[Update<'_>]) -> Result<()> {
    let (f, data) = (target.f, &target.data);
    let merged = merge(data, updates);
    if merged.edits.is_empty() {
        return Ok(());
    }
    let space = &shared.space;
    // Room for the edits and a defragmentation of the whole interval, made
    // (and any due commit, checkpoint or collection done) before the lock:
    // the space then never collects garbage inside a mutation below.
    space
        .reserve(2 * merged.data.size() as u64 + 4096)
        .map_err(space_err)?;
    if space.maintenance_due() {
        space.maintain().map_err(space_err)?;
    }
    let merge::Merged {
        data: mut new,
        edits,
        pairs_delta,
    } = merged;
    // §5.2: a fragmented interval is rewritten whole when next updated, in
    // one insert of its new bytes (no read back of the old ones).
    let fragmented = target.marked || data.extents as usize > data.len() / 2 + 1;
    let rewrite = fragmented && !new.is_empty();
    let cuts = split_points(&new, SPLIT_PAIRS, SPLIT_BYTES);
    // An upper bound of the extents the new content spans, known for every
    // interval (an empty one spans none), so that §5.2 also finds the
    // intervals that never left the cache.
    new.extents = if rewrite {
        1
    } else {
        data.extents.saturating_add(2 * edits.len() as u32)
    };
    let new = Arc::new(new);
    let new_size = new.size() as u32;
    // What the index will point to, made (and cached) before the lock.
    let change = if !cuts.is_empty() {
        IndexChange::Split(split_parts(shared, &new, &cuts))
    } else if new.len() > MERGE_PAIRS {
        IndexChange::Cached(shared.cache.insert(None, new.clone()), new.len() as u16)
    } else {
        IndexChange::Small(new.clone())
    };
    let mut st = flexsys::lock_wait::write_polling(&shared.index);
    let hold = shared
        .trace
        .then(|| HoldTimer::start(&shared.counters.max_commit_hold_ns));
    st.version += 1;
    edit_space(shared, f.offset, data, &new, &edits, rewrite, &cuts)?;
    // The entry the index names now (a reader may have installed a fresh
    // copy since the interval was found) is the one to drop.
    let old_word = st.sparse.meta(&f).cache.load(Ordering::Relaxed);
    st.pairs = pairs_after(st.pairs, pairs_delta);
    st.sparse.set_fragmented(&f, false);
    // The cache word of a neighbour the interval joined, if it did, and
    // the word the published view held for the interval if it was given
    // the new one (see `Store::forward`).
    let (joined_word, view_word) = match change {
        IndexChange::Split(parts) => {
            st.sparse.resize(&f, new_size, 0);
            st.sparse.split(&f, parts);
            (None, None)
        }
        IndexChange::Cached(r, count) => {
            st.sparse.resize(&f, new_size, count);
            st.sparse.meta(&f).cache.store(r.pack(), Ordering::Release);
            // The interval kept its keys: readers of the view may read the
            // new content.
            let view_word = shared
                .views
                .forward(&st.sparse, &f, updates[0].key, r.pack());
            (None, view_word)
        }
        IndexChange::Small(data) => {
            st.sparse.resize(&f, new_size, data.len() as u16);
            (small_interval(shared, &mut st, &f, data), None)
        }
    };
    drop(hold);
    drop(st);
    shared.uncache(old_word);
    // A word a reader had installed in the view instead goes too.
    if let Some(w) = view_word.filter(|&w| CacheRef::unpack(w) != CacheRef::unpack(old_word)) {
        shared.uncache(w);
    }
    if let Some(word) = joined_word {
        shared.uncache(word);
    }
    Ok(())
}

/// The pair count after a group changed it by `delta`. The count and the
/// space change together, so a count below zero is a bug: it fails debug
/// builds (and so the tests); a release build keeps the count at zero.
fn pairs_after(pairs: u64, delta: i64) -> u64 {
    let after = i128::from(pairs) + i128::from(delta);
    debug_assert!(
        after >= 0,
        "the pair count fell below zero: {pairs} pairs changed by {delta}"
    );
    u64::try_from(after.max(0)).unwrap_or(u64::MAX)
}

/// How a group changes the index, prepared before `index` is taken.
enum IndexChange {
    /// The interval splits into these parts (already cached).
    Split(Vec<NewInterval>),
    /// The interval keeps its place with this content, cached, and this
    /// many pairs (too many to join a neighbour).
    Cached(CacheRef, u16),
    /// The interval has this content, few pairs or none (not yet cached:
    /// it may join a neighbour).
    Small(Arc<IntervalData>),
}

/// Writes a group's edits to the space (the caller holds `index`): the
/// interval at `base`, whose content was `data`, becomes `new`;
/// every interval start, and so every cut in `cuts`, starts a tagged
/// extent.
fn edit_space(
    shared: &Store,
    base: u64,
    data: &IntervalData,
    new: &IntervalData,
    edits: &[merge::Edit],
    rewrite: bool,
    cuts: &[usize],
) -> Result<()> {
    let space = &shared.space;
    if rewrite {
        space
            .update_tagged(base, new.bytes(), data.size() as u64, PAIR_TAG)
            .map_err(space_err)?;
        shared.counters.defragmented.fetch_add(1, Ordering::Relaxed);
    } else {
        for e in edits {
            let bytes = &new.bytes()[e.new_start..e.new_end];
            space
                .update_tagged(base + e.new_start as u64, bytes, e.old_len as u64, PAIR_TAG)
                .map_err(space_err)?;
        }
        // A removal at the interval's start leaves the pair now there on an
        // untagged extent tail: tag it again.
        let first = edits[0];
        if first.new_start == 0 && first.new_end == 0 && !new.is_empty() {
            space.set_tag(base, PAIR_TAG).map_err(space_err)?;
        }
    }
    for &a in cuts {
        space
            .set_tag(base + new.offset(a) as u64, PAIR_TAG)
            .map_err(space_err)?;
    }
    Ok(())
}

/// The parts an interval with content `new` splits into at `cuts`, each
/// cached, with its anchor (the first keeps the interval's own).
fn split_parts(shared: &Store, new: &IntervalData, cuts: &[usize]) -> Vec<NewInterval> {
    let mut starts = Vec::with_capacity(cuts.len() + 2);
    starts.push(0usize);
    starts.extend(cuts);
    starts.push(new.len());
    starts
        .windows(2)
        .map(|w| {
            let (a, b) = (w[0], w[1]);
            let mut builder = Builder::with_capacity(b - a, new.end(b - 1) - new.offset(a));
            builder.push_range(new, a..b);
            let mut part = builder.finish();
            part.extents = new.extents;
            let part = Arc::new(part);
            let anchor = if a == 0 {
                Vec::new()
            } else {
                separator(new.key(a - 1), new.key(a))
            };
            let r = shared.cache.insert(None, part.clone());
            NewInterval {
                anchor,
                meta: interval_meta_of(&part, r),
            }
        })
        .collect()
}

/// Points the interval at `f` (already resized) to its new content `data`,
/// of at most `MERGE_PAIRS` pairs, joining it to a neighbour when it
/// became empty or the two fit in one. Returns the cache word of the
/// neighbour it joined, for the caller to drop from the cache once it has
/// let go of the index.
fn small_interval(
    shared: &Store,
    st: &mut CommitterIndex,
    f: &IntervalPos,
    data: Arc<IntervalData>,
) -> Option<u64> {
    if data.is_empty() {
        // An empty interval joins its predecessor (the first stays).
        if let Some(p) = st.sparse.prev(f) {
            let pm = st.sparse.meta(&p);
            let (count, cache) = (pm.count, pm.cache.load(Ordering::Relaxed));
            st.sparse.merge_next(&p, count, cache);
            return None;
        }
    } else if data.len() <= MERGE_PAIRS {
        if let Some(next) = st.sparse.next(f) {
            let nm = st.sparse.meta(&next);
            let fits = nm.count != UNKNOWN_COUNT
                && data.len() + (nm.count as usize) < SPLIT_PAIRS
                && data.size() + (nm.size as usize) < SPLIT_BYTES;
            let next_word = nm.cache.load(Ordering::Relaxed);
            let next_data = CacheRef::unpack(next_word).and_then(|r| shared.cache.get(Some(r)));
            if let (true, Some(nd)) = (fits, next_data) {
                let mut b = Builder::with_capacity(data.len() + nd.len(), data.size() + nd.size());
                b.push_range(&data, 0..data.len());
                b.push_range(&nd, 0..nd.len());
                let mut joined = b.finish();
                joined.extents = data.extents.saturating_add(nd.extents);
                let joined = Arc::new(joined);
                let r = shared.cache.insert(None, joined.clone());
                st.sparse.merge_next(f, joined.len() as u16, r.pack());
                return Some(next_word);
            }
        }
    }
    let r = shared.cache.insert(None, data);
    st.sparse.meta(f).cache.store(r.pack(), Ordering::Release);
    None
}

/// Records how long the committer held a lock exclusively (dropped just
/// before the guard it follows, so it times the hold) into a maximum.
struct HoldTimer<'a> {
    max_ns: &'a AtomicU64,
    start: std::time::Instant,
}

impl<'a> HoldTimer<'a> {
    fn start(max_ns: &'a AtomicU64) -> Self {
        HoldTimer {
            max_ns,
            start: std::time::Instant::now(),
        }
    }
}

impl Drop for HoldTimer<'_> {
    fn drop(&mut self) {
        let ns = self.start.elapsed().as_nanos() as u64;
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
    }
}

fn interval_meta_of(data: &IntervalData, r: CacheRef) -> IntervalMeta {
    let m = IntervalMeta {
        size: data.size() as u32,
        count: data.len() as u16,
        ..IntervalMeta::default()
    };
    m.cache.store(r.pack(), Ordering::Relaxed);
    m
}

#[cfg(test)]
mod tests {
    use super::POOL_IDLE;
    use crate::write::MAX_FROZEN;
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
    /// writes come, and let go of (lazily: see `chunk`) once the store has
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
    fn the_pair_count_follows_each_group() {
        assert_eq!(super::pairs_after(10, 5), 15);
        assert_eq!(super::pairs_after(10, -10), 0);
        assert_eq!(super::pairs_after(u64::MAX - 1, 1), u64::MAX);
    }

    /// A group that removes more pairs than the space holds is a bug the
    /// tests must see, not a count quietly kept at zero.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "the pair count fell below zero")]
    fn a_negative_pair_count_is_caught() {
        super::pairs_after(3, -4);
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
    /// removed once the store has been idle a while, and never left behind
    /// by a close; what the reused logs held reads back after a reopen.
    #[test]
    fn committed_logs_are_taken_over_by_new_ones_and_removed_when_idle() {
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
        let kept = db.shared().spare_logs.len();
        assert!(kept > 0 && kept <= MAX_FROZEN);
        let t = Instant::now();
        while !spares(dir.path()).is_empty() {
            assert!(t.elapsed() < POOL_IDLE * 4, "spare logs removed when idle");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(db.shared().spare_logs.len(), 0);
        // A close removes the spares too.
        for i in 0..3000u32 {
            let (k, v) = (format!("key{:06}", i * 7 % 4000), vec![!i as u8; 50]);
            db.put(&k, &v).unwrap();
            model.insert(k.into_bytes(), v);
        }
        db.flush().unwrap();
        assert!(!spares(dir.path()).is_empty());
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
            .map(crate::recovery::manifest::wal_tmp_name)
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
    /// while writes fill `MAX_FROZEN` MemTables, so that it must commit the
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
        while db.shared().mems.load().frozen.len() < MAX_FROZEN {
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
