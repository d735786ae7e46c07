//! The committer: one background thread that merges frozen MemTables into
//! the space in key order (§5.3).
//!
//! For each frozen MemTable, oldest first: its log is durable already
//! (rotation synced it); the committer walks its newest versions in key
//! order, groups the keys that fall into one interval, computes the
//! interval's new content off-lock (`merge`), then applies the edits to the
//! space and the sparse index under `state`'s write lock, which it holds
//! only for that group. It then records the pair count and the committed
//! generation in the space's metadata words, syncs the space, drops the
//! MemTable and removes its log.
//!
//! Invariants: every interval start is the start of a tagged extent
//! (`PAIR_TAG`), so recovery can find pair boundaries; intervals stay under
//! the split thresholds unless a single pair is larger; the space's
//! metadata words name the last generation whose every write is in the
//! space as of the same commit point.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::cache::CacheRef;
use crate::error::Result;
use crate::interval::{Builder, IntervalData};
use crate::memtable::EntryRef;
use crate::merge::{merge, split_points, Update};
use crate::sparse::{separator, Found, Meta, NewInterval, UNKNOWN_COUNT};
use crate::store::{space_err, Frozen, Shared, PAIR_TAG};

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

/// CPU time of the calling thread (for the `FLEXDB_TRACE` report).
fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The committer thread's body.
pub(crate) fn run(shared: Arc<Shared>) {
    loop {
        let frozen = {
            let mut work = shared.work.lock();
            loop {
                if work.stopped.is_some() {
                    return;
                }
                let next = shared
                    .mems
                    .read()
                    .frozen
                    .front()
                    .map(|f| (f.mem.clone(), f.wal.clone(), f.gen));
                if let Some(n) = next {
                    break n;
                }
                if work.shutdown {
                    return;
                }
                shared.work_cv.wait(&mut work);
            }
        };
        let (mem, wal, gen) = frozen;
        let result = commit(&shared, &Frozen { mem, wal, gen });
        if let Err(e) = result {
            shared.stop(format!("committer: {e}"));
            return;
        }
    }
}

/// Commits one frozen MemTable and retires it.
fn commit(shared: &Shared, frozen: &Frozen) -> Result<()> {
    let t0 = std::time::Instant::now();
    let c0 = thread_cpu();
    frozen.wal.sync()?;
    // Stream the newest versions in key order, one interval's group at a
    // time, borrowing keys and values from the table.
    let mut entries = frozen.mem.newest().peekable();
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
    }
    if shared.trace {
        eprintln!(
            "commit gen {}: {count} updates {groups} groups in {:?} (cpu {:?}, {:.2} us/update), longest index hold {:?}, longest reader wait {:?}",
            frozen.gen,
            t0.elapsed(),
            thread_cpu() - c0,
            (thread_cpu() - c0).as_secs_f64() * 1e6 / count.max(1) as f64,
            std::time::Duration::from_nanos(
                shared.counters.max_commit_hold_ns.swap(0, Ordering::Relaxed)
            ),
            std::time::Duration::from_nanos(
                shared.counters.trace_reader_wait_ns.swap(0, Ordering::Relaxed)
            ),
        );
    }
    let pairs = shared.state.read().pairs;
    let max_seq = shared.visible.load(Ordering::Acquire);
    shared
        .space
        .set_user_meta([pairs, frozen.gen, max_seq])
        .map_err(space_err)?;
    shared.space.sync().map_err(space_err)?;
    {
        let mut m = shared.mems.write();
        if m.frozen.front().is_some_and(|f| f.gen == frozen.gen) {
            m.frozen.pop_front();
        }
    }
    let name = crate::files::wal_name(frozen.gen);
    shared
        .counters
        .wal_bytes_retired
        .fetch_add(frozen.wal.written_bytes(), Ordering::Relaxed);
    // A log that survives a crash here is recognised as committed by its
    // generation and removed on the next open.
    if let Err(e) = shared.storage.remove_file(&name) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(crate::store::io_err(&name)(e));
        }
    }
    let mut work = shared.work.lock();
    work.committed_gen = work.committed_gen.max(frozen.gen);
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
    f: Found,
    data: Arc<IntervalData>,
    bound: Option<Vec<u8>>,
}

/// Finds the interval holding `key`. Only this thread changes the index and
/// the space, so what it reads stays valid after the read lock goes.
fn find_interval(shared: &Shared, key: &[u8]) -> Result<Target> {
    let st = shared.read_state();
    let f = st.sparse.find(key);
    let data = shared.interval(&st, &f)?;
    let bound = st.sparse.next_anchor(&f);
    Ok(Target { f, data, bound })
}

/// Applies a group of updates that all fall into one interval.
fn apply_group(shared: &Shared, target: &Target, updates: &[Update<'_>]) -> Result<()> {
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
    let mut st = shared.state.write();
    let _hold = shared.trace.then(|| HoldTimer::start(shared));
    let base = f.offset;
    let new = &merged.data;
    for e in &merged.edits {
        let bytes = &new.bytes()[e.new_start..e.new_end];
        space
            .update_tagged(base + e.new_start as u64, bytes, e.old_len as u64, PAIR_TAG)
            .map_err(space_err)?;
    }
    // A removal at the interval's start leaves the pair now there on an
    // untagged extent tail: tag it again.
    if merged.edits[0].new_start == 0 && merged.edits[0].new_end == 0 && !new.is_empty() {
        space.set_tag(base, PAIR_TAG).map_err(space_err)?;
    }
    st.pairs = (st.pairs as i64 + merged.pairs_delta).max(0) as u64;
    let meta = st.sparse.meta(&f);
    let old_cache = meta.cache.load(Ordering::Relaxed);
    let fragmented = meta.fragmented || data.extents as usize > data.len() / 2 + 1;
    let new_size = new.size() as u32;
    if fragmented && new.size() > 0 {
        space.defrag(base, new.size() as u64).map_err(space_err)?;
        shared.counters.defragmented.fetch_add(1, Ordering::Relaxed);
    }
    st.sparse.set_fragmented(&f, false);
    shared.uncache(old_cache);
    let cuts = split_points(new, SPLIT_PAIRS, SPLIT_BYTES);
    if !cuts.is_empty() {
        st.sparse.resize(&f, new_size, 0);
        let mut parts = Vec::with_capacity(cuts.len() + 1);
        let mut starts = vec![0usize];
        starts.extend(&cuts);
        starts.push(new.len());
        for w in starts.windows(2) {
            let (a, b) = (w[0], w[1]);
            let mut builder = Builder::new();
            for i in a..b {
                builder.push_record(new.key(i), new.record(i));
            }
            let part = Arc::new(builder.finish());
            let anchor = if a == 0 {
                Vec::new()
            } else {
                space
                    .set_tag(base + new.offset(a) as u64, PAIR_TAG)
                    .map_err(space_err)?;
                separator(new.key(a - 1), new.key(a))
            };
            let r = shared.cache.insert(None, part.clone());
            parts.push(NewInterval {
                anchor,
                meta: meta_of(&part, r),
            });
        }
        st.sparse.split(&f, parts);
        return Ok(());
    }
    st.sparse.resize(&f, new_size, new.len() as u16);
    let data = Arc::new(merged.data);
    if data.is_empty() {
        // An empty interval joins its predecessor (the first stays).
        if let Some(prev) = st.sparse.prev_anchor(&f) {
            let p = st.sparse.find(&prev);
            let pm = st.sparse.meta(&p);
            let (count, cache) = (pm.count, pm.cache.load(Ordering::Relaxed));
            st.sparse.merge_next(&p, count, cache);
            return Ok(());
        }
    } else if data.len() <= MERGE_PAIRS {
        if let Some(next) = st.sparse.next(&f) {
            let nm = st.sparse.meta(&next);
            let fits = nm.count != UNKNOWN_COUNT
                && data.len() + (nm.count as usize) < SPLIT_PAIRS
                && data.size() + (nm.size as usize) < SPLIT_BYTES;
            let next_data = CacheRef::unpack(nm.cache.load(Ordering::Relaxed))
                .and_then(|r| shared.cache.get(Some(r)));
            if let (true, Some(nd)) = (fits, next_data) {
                let mut b = Builder::new();
                for d in [&data, &nd] {
                    for i in 0..d.len() {
                        b.push_record(d.key(i), d.record(i));
                    }
                }
                let joined = Arc::new(b.finish());
                shared.uncache(nm.cache.load(Ordering::Relaxed));
                let r = shared.cache.insert(None, joined.clone());
                st.sparse.merge_next(&f, joined.len() as u16, r.pack());
                return Ok(());
            }
        }
    }
    let r = shared.cache.insert(None, data);
    st.sparse.meta(&f).cache.store(r.pack(), Ordering::Release);
    Ok(())
}

/// Records how long the committer held `state` exclusively (dropped just
/// before the guard it follows, so it times the hold).
struct HoldTimer<'a> {
    shared: &'a Shared,
    start: std::time::Instant,
}

impl<'a> HoldTimer<'a> {
    fn start(shared: &'a Shared) -> Self {
        HoldTimer {
            shared,
            start: std::time::Instant::now(),
        }
    }
}

impl Drop for HoldTimer<'_> {
    fn drop(&mut self) {
        let ns = self.start.elapsed().as_nanos() as u64;
        let c = &self.shared.counters;
        c.max_commit_hold_ns.fetch_max(ns, Ordering::Relaxed);
    }
}

fn meta_of(data: &IntervalData, r: CacheRef) -> Meta {
    let m = Meta {
        size: data.size() as u32,
        count: data.len() as u16,
        ..Meta::default()
    };
    m.cache.store(r.pack(), Ordering::Relaxed);
    m
}
