//! Applying the committer's updates, one group at a time: the updates that
//! fall into one interval are merged with its content off-lock (`merge`),
//! and the index's write lock is then held only to edit the space and bring
//! the sparse index into line; the view's copy of a rewritten interval is
//! forwarded, and the replaced cache entries are dropped after the lock.
//!
//! Invariants: every interval start is the start of a tagged extent
//! (`PAIR_TAG`), so recovery can find pair boundaries; intervals stay under
//! the split thresholds (`SPLIT_PAIRS`, `SPLIT_BYTES`) unless a single pair
//! is larger; the pair count changes with the space, under the same lock,
//! and never falls below zero; `CommitterIndex::version` grows with every
//! change, so a reader that let go of the lock can tell its find is stale.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::merge::{merge, split_points, Edit, Merged, Update};
use crate::error::{space_err, Error, Result};
use crate::index::interval::{Builder, IntervalData};
use crate::index::interval_cache::CacheRef;
use crate::index::sparse::{separator, IntervalMeta, IntervalPos, NewInterval, UNKNOWN_COUNT};
use crate::index::{CommitterIndex, PAIR_TAG};
use crate::store::{CommitPoint, Store};
use crate::write::memtable::EntryRef;

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

/// What a commit's group loop did.
#[derive(Default)]
pub(super) struct GroupsDone {
    /// Updates applied (or found already there).
    pub count: usize,
    /// Groups applied.
    pub groups: usize,
    /// Updates held back: they fall into intervals that could not be read
    /// (see `Damaged`).
    pub held: usize,
    /// The first such interval's error.
    pub damage: Option<Error>,
}

/// The group loop of a commit (`commit::commit`). The updates that fall
/// into an interval found corrupt are held back (counted, not applied;
/// the caller keeps their logs) and the loop goes on with the next
/// interval.
pub(super) fn commit_groups<'m>(
    shared: &Store,
    entries: &mut std::iter::Peekable<impl Iterator<Item = EntryRef<'m>>>,
    progress: &AtomicUsize,
    share: &BatchShare,
) -> Result<GroupsDone> {
    let mut group: Vec<Update<'_>> = Vec::with_capacity(GROUP_UPDATES);
    let mut done = GroupsDone::default();
    while let Some(first) = entries.next() {
        group.clear();
        group.push(update(first));
        let target = match find_interval(shared, first.key)? {
            Ok(target) => target,
            Err(Damaged { bound, error }) => {
                // Every update of the interval stays out of the space.
                let mut held = 1;
                while entries
                    .next_if(|e| bound.as_deref().is_none_or(|b| e.key < b))
                    .is_some()
                {
                    held += 1;
                }
                tracing::warn!(
                    target: super::TRACE_TARGET,
                    error = %error,
                    updates = held,
                    "updates held back: their interval is corrupt"
                );
                done.held += held;
                done.damage.get_or_insert(error);
                continue;
            }
        };
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
        done.count += group.len();
        done.groups += 1;
        if done.groups % 64 == 0 {
            shared.views.carry_installs(&shared.index);
            shared.views.reap(Duration::ZERO);
        }
        progress.store(done.count + done.held, Ordering::Release);
        if done.groups % SHARE_EVERY == 0 {
            shared
                .writes
                .set_committed(share.merged(done.count + done.held));
        }
    }
    Ok(done)
}

/// Groups between two reports of a commit's share of the writers' backlog
/// (each a store to a line every writer reads).
const SHARE_EVERY: usize = 16;

/// The bytes and distinct keys of the frozen MemTables a commit merges:
/// the part of the writers' backlog the newest versions merged so far
/// stand for (`WriteSide::set_committed`).
pub(super) struct BatchShare {
    bytes: usize,
    keys: usize,
}

impl BatchShare {
    /// A commit of tables of `bytes` in all, with `keys` distinct keys
    /// summed over them (a key in two tables counts twice and is merged
    /// once: the share then runs behind, which slows writers sooner, never
    /// later).
    pub(super) fn new(bytes: usize, keys: usize) -> Self {
        BatchShare { bytes, keys }
    }

    /// The bytes `merged` newest versions stand for: the tables' bytes in
    /// proportion.
    pub(super) fn merged(&self, merged: usize) -> usize {
        if self.keys == 0 {
            return 0;
        }
        let part = self.bytes as u128 * merged.min(self.keys) as u128 / self.keys as u128;
        usize::try_from(part).unwrap_or(self.bytes)
    }
}

fn update(e: EntryRef<'_>) -> Update<'_> {
    Update {
        key: e.key,
        value: e.value,
        expires: e.expires,
    }
}

/// The interval a group goes to: where it is, its content, and the key
/// bound of the next interval.
pub(super) struct Target {
    pub f: IntervalPos,
    pub data: Arc<IntervalData>,
    pub bound: Option<Vec<u8>>,
    /// The interval's fragmentation mark.
    marked: bool,
}

/// An interval whose content failed its checks (`Error::Corrupt`).
pub(super) struct Damaged {
    /// The key bound of the next interval.
    pub bound: Option<Vec<u8>>,
    pub error: Error,
}

/// Finds the interval holding `key`, or says it is damaged. Only this
/// thread changes the index and the space, so what it reads stays valid
/// after the read lock goes.
pub(super) fn find_interval(
    shared: &Store,
    key: &[u8],
) -> Result<std::result::Result<Target, Damaged>> {
    let st = shared.index.read();
    let f = st.sparse.find(key);
    let bound = st.sparse.next_anchor(&f);
    let data = match shared.interval(&st, &f) {
        Ok(data) => data,
        Err(error) if error.is_corruption() => return Ok(Err(Damaged { bound, error })),
        Err(e) => return Err(e),
    };
    let marked = st.sparse.meta(&f).fragmented;
    Ok(Ok(Target {
        f,
        data,
        bound,
        marked,
    }))
}

/// Applies a group of updates that all fall into one interval: the new
/// content, its cache entries and the interval's parts are made before
/// `index` is taken, which is then held only to edit the space and bring
/// the index into line; the cache entries replaced are dropped after.
pub(super) fn apply_group(shared: &Store, target: &Target, updates: &[Update<'_>]) -> Result<()> {
    let (f, data) = (target.f, &target.data);
    let merged = merge(data, updates, shared.clock.now_ms());
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
    let Merged {
        data: mut new,
        edits,
        pairs_delta,
    } = merged;
    // §5.2: a fragmented interval is rewritten whole when next updated, in
    // one insert of its new bytes (no read back of the old ones).
    let limit = data.len() / 2 + 1;
    let mut extents = data.extents;
    if !target.marked && extents as usize > limit {
        // The bound of a cached interval grows by two an edit, but a pair
        // rewritten where an earlier edit left it on an extent of its own
        // adds none (a hot key): count before rewriting 16 pairs for it.
        if let Ok(n) = space.extents_in(f.offset, data.size() as u64) {
            extents = u32::try_from(n).unwrap_or(u32::MAX);
        }
    }
    let fragmented = target.marked || extents as usize > limit;
    let rewrite = fragmented && !new.is_empty();
    let cuts = split_points(&new, SPLIT_PAIRS, SPLIT_BYTES);
    // An upper bound of the extents the new content spans, known for every
    // interval (an empty one spans none), so that §5.2 also finds the
    // intervals that never left the cache.
    new.extents = if rewrite {
        1
    } else {
        extents.saturating_add(2 * edits.len() as u32)
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
    edit_space(shared, f.offset, data, &new, &edits, rewrite, &cuts).map_err(|(e, applied)| {
        if applied {
            // The space holds part of the group and the index none of it:
            // only a reopen (which replays the logs) mends that.
            Error::Stopped(format!("a commit failed half way through an interval: {e}"))
        } else {
            // Nothing changed: the group can be applied again (the
            // committer retries a commit that found no room).
            e
        }
    })?;
    // The entry the index names now (a reader may have installed a fresh
    // copy since the interval was found) is the one to drop.
    let old_word = st.sparse.meta(&f).cache.load(Ordering::Relaxed);
    st.pairs = pairs_after(st.pairs, pairs_delta);
    if pairs_delta != 0 {
        // The count goes into the space's metadata words with the edits:
        // the space may commit before this commit's end (a collection or
        // a checkpoint in `reserve` or `maintain` for a later group), and a
        // crash then recovers these edits, which replaying the logs does
        // not count again (merging what the space holds changes nothing).
        let mut point = CommitPoint::read(space);
        point.pairs = st.pairs;
        point.write(space).map_err(|e| {
            Error::Stopped(format!("a commit failed half way through an interval: {e}"))
        })?;
    }
    st.sparse.set_fragmented(&f, false);
    // The cache word of a neighbour the interval joined, if it did, and
    // the word the published view held for the interval if it was given
    // the new one (see `ViewPublisher::forward`).
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
/// extent. On an error, also whether an edit before it was applied (a
/// space mutation that fails changes nothing).
fn edit_space(
    shared: &Store,
    base: u64,
    data: &IntervalData,
    new: &IntervalData,
    edits: &[Edit],
    rewrite: bool,
    cuts: &[usize],
) -> std::result::Result<(), (Error, bool)> {
    let space = &shared.space;
    let mut applied = false;
    let mut step = |r: flexspace::Result<()>| match r {
        Ok(()) => {
            applied = true;
            Ok(())
        }
        Err(e) => Err((space_err(e), applied)),
    };
    if rewrite {
        step(space.update_tagged(base, new.bytes(), data.size() as u64, PAIR_TAG))?;
        shared.counters.defragmented.fetch_add(1, Ordering::Relaxed);
    } else {
        for e in edits {
            let bytes = &new.bytes()[e.new_start..e.new_end];
            step(space.update_tagged(
                base + e.new_start as u64,
                bytes,
                e.old_len as u64,
                PAIR_TAG,
            ))?;
        }
        // A removal at the interval's start leaves the pair now there on an
        // untagged extent tail: tag it again.
        let first = edits[0];
        if first.new_start == 0 && first.new_end == 0 && !new.is_empty() {
            step(space.set_tag(base, PAIR_TAG))?;
        }
    }
    for &a in cuts {
        step(space.set_tag(base + new.offset(a) as u64, PAIR_TAG))?;
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
            // The parts share the interval's extents as they share its
            // pairs (a whole count each would rewrite every part early).
            part.extents = share_of_extents(new.extents, b - a, new.len());
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

/// The extents of a part of `part` pairs out of `whole` that spans
/// `extents` in all: its share, rounded up (an estimate: edits need not
/// fall evenly).
fn share_of_extents(extents: u32, part: usize, whole: usize) -> u32 {
    let share = (u64::from(extents) * part as u64).div_ceil(whole.max(1) as u64);
    u32::try_from(share).unwrap_or(u32::MAX)
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
    fn a_commit_share_is_its_tables_bytes_in_proportion() {
        let share = super::BatchShare::new(1000, 10);
        assert_eq!(share.merged(0), 0);
        assert_eq!(share.merged(5), 500);
        assert_eq!(share.merged(10), 1000);
        // Never past the tables' bytes; a table without keys counts none.
        assert_eq!(share.merged(11), 1000);
        assert_eq!(super::BatchShare::new(1000, 0).merged(3), 0);
        assert_eq!(super::BatchShare::new(usize::MAX, 3).merged(3), usize::MAX);
    }

    #[test]
    fn split_parts_share_the_extents_by_pairs() {
        // Halves of 17 pairs over 9 extents: 8 and 9 pairs, shares rounded up.
        assert_eq!(super::share_of_extents(9, 8, 17), 5);
        assert_eq!(super::share_of_extents(9, 9, 17), 5);
        // The whole keeps the whole count; a rewritten interval's 1 stays 1.
        assert_eq!(super::share_of_extents(9, 17, 17), 9);
        assert_eq!(super::share_of_extents(1, 3, 17), 1);
        assert_eq!(super::share_of_extents(0, 3, 17), 0);
        // No overflow at the bound's top, no division by zero.
        assert_eq!(super::share_of_extents(u32::MAX, 16, 16), u32::MAX);
        assert_eq!(super::share_of_extents(4, 0, 0), 0);
    }
}
