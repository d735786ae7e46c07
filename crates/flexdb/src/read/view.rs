//! What readers read: a frozen copy of the sparse index and of the space's
//! extent index, published by the committer between its groups, so that a
//! reader never waits for the committer's edits (the issue's "readers must
//! not wait on the committer for long", docs/DESIGN.md "Readers read a
//! published view").
//!
//! Invariants:
//! - A view is one state between two of the committer's groups: its index
//!   and its space snapshot were copied together, with the committer (the
//!   only thread changing either) between groups.
//! - A view is published before the MemTable it commits is retired from
//!   the list readers consult, and a reader loads the view after that list,
//!   so whatever a reader misses in the MemTables it saw is in its view or
//!   in a MemTable it saw. (A view older than a MemTable's commit is
//!   answered by that MemTable, still in the list.)
//! - Only cache words change in a published view: readers install the
//!   intervals they read from the view's snapshot, and the committer
//!   forwards the word of an interval it rewrote without changing its key
//!   range (`forward`), marked `FORWARDED`. A word read from a view's
//!   snapshot replacing a forwarded word is older than the word it
//!   replaced, so it is never carried into the committer's index (which
//!   would then merge later commits into stale content). So a word names
//!   the content of its interval's keys at the view's state or later, and
//!   the later changes come from a MemTable that every reader of the view
//!   still consults (the one being committed) or that began after the
//!   reader did: a get or scan sees each key at a state no older than when
//!   it began.
//! - A view records the newest MemTable generation its space may hold
//!   (`gen`) and, before the committer forwards any word of a later commit
//!   into it, that commit's newest generation (`forwarded_gen`): snapshots
//!   (`read::snapshot`) use a view only if it holds nothing of their active
//!   generation, and a forwarded word only under the same condition.
//! - The committer drops a replaced view itself once no reader holds it,
//!   so no reader pays for freeing one, and its snapshot stops holding
//!   freed space back (and the extent index node blocks the space
//!   rewrote since: a view's snapshot shares the space's index nodes,
//!   copy on write, `flexspace::Snapshot`). It never waits for a view a
//!   snapshot or iterator pins (`pins`): those ask it to reap when they
//!   let go.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use parking_lot::{Mutex, RwLock};

use crate::error::{space_err, Result};
use crate::index::interval_cache::{CacheRef, FORWARDED};
use crate::index::sparse::{IntervalPos, SparseIndex};
use crate::index::CommitterIndex;

/// The tracing target of view publication.
pub(crate) const TRACE_TARGET: &str = "flexdb::view";

/// The tracing target of the extent indexes' memory breakdown (debug
/// level; at most one event per `MEMORY_EVERY`, from `publish`).
pub(crate) const MEMORY_TARGET: &str = "flexdb::index_memory";

/// The shortest time between two memory breakdowns.
const MEMORY_EVERY: Duration = Duration::from_secs(2);

/// A published state for readers (see the module docs).
pub(crate) struct PublishedView {
    pub sparse: SparseIndex,
    pub space: flexspace::Snapshot,
    /// The newest MemTable generation whose writes the view's space may
    /// hold, even in part (the commit's newest; at open, the newest
    /// replayed, since a crash may have left part of a commit in the
    /// space). A snapshot uses the view only when this is below its active
    /// generation (`read::snapshot`).
    pub gen: u64,
    /// The committer index's `version` the view was copied at: the index
    /// still describes the view's space while its version is this.
    pub version: u64,
    /// The newest generation whose content was forwarded into the view's
    /// cache words (`forward`), set (`Release`) before any word of that
    /// commit is forwarded: a reader that loaded a `FORWARDED` word
    /// (`Acquire`) and then reads this sees at least the generation of the
    /// content the word names.
    pub forwarded_gen: AtomicU64,
    /// Snapshots and iterators holding the view for longer than a read
    /// (`read::snapshot::ReadPoint`): `reap` does not wait for them.
    pub pins: AtomicUsize,
    /// Whether a reader has loaded the view (see [`ViewPublisher::forward`]).
    read: AtomicBool,
}

impl PublishedView {
    /// A view of `sparse` over the space as it is now, whose space holds
    /// writes of generations up to `gen` at most.
    pub fn copy(
        sparse: &SparseIndex,
        space: &flexspace::FlexSpace,
        gen: u64,
        version: u64,
    ) -> Result<PublishedView> {
        Ok(PublishedView {
            sparse: sparse.clone(),
            space: space.snapshot().map_err(space_err)?,
            gen,
            version,
            forwarded_gen: AtomicU64::new(0),
            pins: AtomicUsize::new(0),
            read: AtomicBool::new(false),
        })
    }

    /// Whether a snapshot whose active generation is `active_gen` may use
    /// the cache word `word` it loaded (`Acquire`) from this view: any but
    /// a forwarded word, which names content of the commit running since
    /// the view was published, is usable only if that commit holds
    /// nothing of `active_gen` or later.
    #[inline]
    pub fn word_usable_at(&self, word: u64, active_gen: u64) -> bool {
        !CacheRef::forwarded(word) || self.forwarded_gen.load(Ordering::Acquire) < active_gen
    }
}

/// A cache word a reader installed in a view (see
/// [`ViewPublisher::carry_installs`]).
struct Install {
    anchor: Vec<u8>,
    /// The word the reader found (and replaced).
    seen: u64,
    word: u64,
    size: u32,
}

/// Installs kept for the committer at most; later ones are dropped (they
/// stay in the view, which is all that is lost).
const MAX_INSTALLS: usize = 1 << 16;

/// How long `publish` waits for readers to let go of the view it replaced
/// before leaving it to a later `reap`.
const RETIRE_WAIT: Duration = Duration::from_millis(5);

/// The whole view protocol: the view readers load, the views the committer
/// replaced until their last reader lets go, and the cache words readers
/// installed, for the committer to carry into its index (see the module
/// docs).
pub(crate) struct ViewPublisher {
    /// What readers read; replaced only by the committer.
    current: ArcSwap<PublishedView>,
    /// Views the committer replaced, until their last reader lets go.
    retired: Mutex<Vec<Arc<PublishedView>>>,
    /// Intervals readers cached in a view, for the committer to carry into
    /// its index.
    installs: Mutex<Vec<Install>>,
    /// Whether `publish` emits its timings (`TRACE_TARGET` at debug level,
    /// decided once at open).
    trace: bool,
    /// When `publish` last emitted the memory breakdown (`MEMORY_TARGET`).
    memory_logged: Mutex<Option<Instant>>,
}

impl ViewPublisher {
    /// A publisher whose first view is `first`; `trace` as for the field.
    pub fn new(first: PublishedView, trace: bool) -> ViewPublisher {
        ViewPublisher {
            current: ArcSwap::from_pointee(first),
            retired: Mutex::new(Vec::new()),
            installs: Mutex::new(Vec::new()),
            trace,
            memory_logged: Mutex::new(None),
        }
    }

    /// The current view, for one read. Never waits: loading it takes no
    /// lock and touches no count other threads write (`arc_swap`'s
    /// per-thread debt slots; the committer's swap pays the debts of the
    /// view it replaces).
    #[inline]
    pub fn load(&self) -> arc_swap::Guard<Arc<PublishedView>> {
        let view = self.current.load();
        // Set once a view: the flag's line is then only read.
        if !view.read.load(Ordering::Relaxed) {
            view.read.store(true, Ordering::Relaxed);
        }
        view
    }

    /// Publishes the committer's index and the space as they are now (call
    /// from the committer, between groups).
    /// `gen`: the newest generation the space holds writes of.
    pub fn publish(
        &self,
        index: &RwLock<CommitterIndex>,
        space: &flexspace::FlexSpace,
        gen: u64,
    ) -> Result<()> {
        let t0 = Instant::now();
        self.carry_installs(index);
        let t1 = Instant::now();
        // Segments the commit (or collection rounds) emptied and the
        // commit's sync quarantined wait in the current grace epoch: the
        // epoch moves on first, so the new view registers after them and
        // does not hold them (segments still pending a space commit it may
        // hold until the next publish; `Db::flush` republishes for those).
        space.release_freed();
        let view = {
            let st = index.read();
            Arc::new(PublishedView::copy(&st.sparse, space, gen, st.version)?)
        };
        let t2 = Instant::now();
        let logging = tracing::enabled!(target: MEMORY_TARGET, tracing::Level::DEBUG);
        // The extent index blocks the space rewrote since the view being
        // replaced was published: what one commit copies on write.
        let rewritten = if logging {
            self.current.load().space.index_bytes()
        } else {
            0
        };
        let old = self.current.swap(view);
        self.retired.lock().push(old);
        self.reap(RETIRE_WAIT);
        // The view just retired, once dropped, was the last reader of the
        // segments the commit before this publish (and the collection
        // rounds before that) emptied: they are free from now on, not one
        // publish later (the new view registered in a later grace epoch).
        space.release_freed();
        if self.trace {
            tracing::debug!(
                target: TRACE_TARGET,
                carry_installs = ?(t1 - t0),
                copy = ?(t2 - t1),
                replace = ?t2.elapsed(),
                "view published"
            );
        }
        if logging {
            self.log_memory(space, t2 - t1, rewritten);
        }
        Ok(())
    }

    /// Emits where the extent indexes' memory goes (the space's, the
    /// current view's and the retired views' beyond what they share with the
    /// space's), at most once per
    /// `MEMORY_EVERY`. `copy`: how long the last view's copy took;
    /// `rewritten`: the bytes of extent index the commit before it copied
    /// on write.
    fn log_memory(&self, space: &flexspace::FlexSpace, copy: Duration, rewritten: u64) {
        {
            let mut last = self.memory_logged.lock();
            if last.is_some_and(|t| t.elapsed() < MEMORY_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let live = space.index_memory();
        let current = self.current.load().space.index_memory();
        // Measured outside the lock (each takes the space's read lock).
        let retired: Vec<Arc<PublishedView>> = self.retired.lock().clone();
        let retired: Vec<flexspace::IndexMemory> =
            retired.iter().map(|v| v.space.index_memory()).collect();
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        tracing::debug!(
            target: MEMORY_TARGET,
            extents = live.extents,
            live_leaves = live.leaves,
            live_fill = format_args!("{:.3}", live.leaf_fill),
            live_held_mib = format_args!("{:.1}", mib(live.held_bytes)),
            live_tree_mib = format_args!("{:.1}", mib(live.tree_bytes)),
            live_free_mib = format_args!("{:.1}", mib(live.free_bytes)),
            live_unused_mib = format_args!("{:.1}", mib(live.unused_bytes)),
            view_held_mib = format_args!("{:.1}", mib(current.held_bytes)),
            view_own_mib = format_args!("{:.1}", mib(current.own_bytes)),
            view_tree_mib = format_args!("{:.1}", mib(current.tree_bytes)),
            view_fill = format_args!("{:.3}", current.leaf_fill),
            retired = retired.len(),
            retired_own_mib =
                format_args!("{:.1}", mib(retired.iter().map(|m| m.own_bytes).sum())),
            commit_rewrote_mib = format_args!("{:.1}", mib(rewritten)),
            copy = ?copy,
            "extent index memory"
        );
    }

    /// The current view, held (for a snapshot).
    pub fn load_full(&self) -> Arc<PublishedView> {
        let view = self.load();
        Arc::clone(&view)
    }

    /// Whether `view` is the current view.
    pub fn is_current(&self, view: &Arc<PublishedView>) -> bool {
        Arc::ptr_eq(&self.current.load(), view)
    }

    /// Called by the committer before a commit of generations up to `gen`
    /// forwards anything into the current view (see
    /// `PublishedView::forwarded_gen`).
    pub fn begin_forwarding(&self, gen: u64) {
        self.current
            .load()
            .forwarded_gen
            .fetch_max(gen, Ordering::Release);
    }

    /// Notes that a reader replaced the cache word `seen` of the interval
    /// anchored at `anchor()` (of `size` bytes) in its view by `word`, for
    /// the committer to carry into its index (never waits: a busy list
    /// drops it). A forwarded `seen` named newer content than the reader
    /// read (the view's snapshot): that install stays in the view.
    pub fn note_install(
        &self,
        seen: u64,
        word: u64,
        size: usize,
        anchor: impl FnOnce() -> Vec<u8>,
    ) {
        if CacheRef::forwarded(seen) {
            return;
        }
        let anchor = anchor();
        if let Some(mut list) = self.installs.try_lock() {
            if list.len() < MAX_INSTALLS {
                list.push(Install {
                    anchor,
                    seen,
                    word,
                    size: size as u32,
                });
            }
        }
    }

    /// Carries the cache words readers installed in views into the
    /// committer's index, where they provably name the same content (see
    /// the module invariants): an install replaced a word naming the
    /// view's own content (one the view was published with or another
    /// reader installed, never a forwarded one, see `Store::install`), and
    /// the committer's index still holds that word, so the interval is
    /// unchanged since the view. Called by the committer between groups.
    pub fn carry_installs(&self, index: &RwLock<CommitterIndex>) {
        let list = std::mem::take(&mut *self.installs.lock());
        if list.is_empty() {
            return;
        }
        let st = index.read();
        for i in list {
            let f = st.sparse.find(&i.anchor);
            let meta = st.sparse.meta(&f);
            if meta.size == i.size && st.sparse.anchor(&f) == i.anchor {
                // Fails when the word moved on: then it is left as it is.
                let _ = meta.cache.compare_exchange(
                    i.seen,
                    i.word,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
            }
        }
    }

    /// Called by the committer after it rewrote the interval at `f` of its
    /// index `sparse`, which holds `key`, without changing its key range,
    /// and gave it the cache word `word`: gives the current view that word
    /// too when the view's interval holding `key` covers the same keys, so
    /// that readers find the new content cached rather than missing on the
    /// entry it replaced. Does nothing while no reader has loaded the view
    /// (a load, say), since only readers gain from it. Returns the word the
    /// view held, which names nothing else unless it is the word the
    /// committer replaced.
    pub fn forward(
        &self,
        sparse: &SparseIndex,
        f: &IntervalPos,
        key: &[u8],
        word: u64,
    ) -> Option<u64> {
        let view = self.current.load();
        if !view.read.load(Ordering::Relaxed) {
            return None;
        }
        let g = view.sparse.find(key);
        if !view.sparse.same_range(&g, sparse, f) {
            return None;
        }
        // Marked: the view's snapshot holds older content than the word
        // names, so a reader that misses on it reads that older content,
        // which `install` then keeps out of the committer's index.
        let forwarded = word | FORWARDED;
        Some(view.sparse.meta(&g).cache.swap(forwarded, Ordering::AcqRel))
    }

    /// Drops replaced views no reader holds any more, waiting up to `wait`
    /// for the last readers. Returns whether any is left that no snapshot
    /// or iterator pins (pinned ones wake the committer when let go).
    pub fn reap(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            let mut retired = self.retired.lock();
            let mut dropped = Vec::new();
            retired.retain(|v| {
                if Arc::strong_count(v) == 1 {
                    dropped.push(v.clone());
                    false
                } else {
                    true
                }
            });
            // Views pinned by snapshots or iterators are not waited for:
            // those may live long, and wake the committer when they let go
            // (`CommitterMailbox::want_reap`).
            let left = retired.iter().any(|v| v.pins.load(Ordering::Relaxed) == 0);
            drop(retired);
            // Freed here, outside the lock.
            drop(dropped);
            if !left || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Bytes of memory held by the sparse indexes (the committer's, and the
    /// published views' beyond the leaves they still share with it) and by
    /// the views' extent indexes beyond the node blocks they share with the
    /// space's.
    pub fn index_memory(&self, index: &RwLock<CommitterIndex>) -> (u64, u64) {
        let current = self.current.load_full();
        let retired: Vec<Arc<PublishedView>> = self.retired.lock().clone();
        let mut seen = std::collections::HashSet::new();
        let committer = index.read().sparse.memory_beside(&mut seen) as u64;
        std::iter::once(&current)
            .chain(&retired)
            .fold((committer, 0), |(s, e), v| {
                (
                    s + v.sparse.memory_beside(&mut seen) as u64,
                    e + v.space.index_bytes(),
                )
            })
    }

    /// Replaced views not dropped yet.
    #[cfg(test)]
    pub fn retired_len(&self) -> usize {
        self.retired.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::mpsc;
    use std::time::Duration;

    use crate::index::interval_cache::CacheRef;
    use crate::{Db, Options};

    fn key(i: u32) -> String {
        format!("key{i:06}")
    }

    /// Each commit's view shares the space's extent index nodes, reads
    /// through it see every commit, and once the commits are done a view
    /// adds (almost) no extent index memory to the space's.
    #[test]
    fn views_sharing_the_space_index_read_the_latest_commit() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::new()
            .create_if_missing(true)
            .memtable_bytes(64 << 10)
            .cache_bytes(16 << 10);
        let db = Db::open(dir.path(), opts).unwrap();
        for round in 0..6u32 {
            // Inserts move the extents of every later pair; overwrites and
            // deletions change them in place and shrink the space.
            for i in 0..3000u32 {
                let k = key((i * 7 + round * 13) % 4000);
                if (i + round) % 9 == 0 {
                    db.delete(&k).unwrap();
                } else {
                    db.put(&k, format!("{k} round {round}")).unwrap();
                }
            }
            db.flush().unwrap();
            let mut seen = 0;
            for i in 0..3000u32 {
                let k = key((i * 7 + round * 13) % 4000);
                let want =
                    ((i + round) % 9 != 0).then(|| format!("{k} round {round}").into_bytes());
                assert_eq!(db.get(&k).unwrap(), want, "{k} after round {round}");
                seen += 1;
            }
            assert_eq!(seen, 3000);
            db.check().unwrap();
            let views = &db.shared().views;
            views.reap(Duration::from_secs(1));
            let (_, view_bytes) = views.index_memory(&db.shared().index);
            let space_bytes = db.shared().space.index_memory().held_bytes;
            assert!(
                view_bytes * 10 < space_bytes,
                "round {round}: views add {view_bytes} to {space_bytes}"
            );
        }
    }

    fn value(i: u32) -> Vec<u8> {
        vec![i as u8; 100 + (i % 50) as usize]
    }

    /// The cache word of the interval holding `k` in `view`, and the
    /// content it names, if cached.
    fn cached_in(
        db: &Db,
        view: &super::PublishedView,
        k: &str,
    ) -> (
        u64,
        Option<std::sync::Arc<crate::index::interval::IntervalData>>,
    ) {
        let f = view.sparse.find(k.as_bytes());
        let word = view.sparse.meta(&f).cache.load(Ordering::Acquire);
        let data = db.shared().cache.get(CacheRef::unpack(word));
        (word, data)
    }

    /// A store of 200 pairs, all in the space.
    fn committed_store() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::new().create_if_missing(true)).unwrap();
        for i in 0..200 {
            db.put(key(i), value(i)).unwrap();
        }
        db.flush().unwrap();
        (dir, db)
    }

    #[test]
    fn a_commit_gives_the_view_the_intervals_it_rewrites_in_place() {
        let (_dir, db) = committed_store();
        let old = db.shared().views.load();
        let (before, _) = cached_in(&db, &old, &key(50));
        // A new value of the same length: the interval keeps its keys.
        let new_value = vec![0xAB; value(50).len()];
        db.put(key(50), &new_value).unwrap();
        db.flush().unwrap();
        // `old` was the published view during that commit.
        let (after, data) = cached_in(&db, &old, &key(50));
        assert_ne!(after, before);
        let data = data.expect("the forwarded word names a cached interval");
        assert_eq!(data.get(key(50).as_bytes()), Some(&new_value[..]));
        // The committer's index and the next view name the same entry; the
        // old view's word carries the mark.
        let (now, _) = cached_in(&db, &db.shared().views.load(), &key(50));
        assert_eq!(CacheRef::unpack(now), CacheRef::unpack(after));
        assert!(CacheRef::forwarded(after) && !CacheRef::forwarded(now));
    }

    /// A forwarded word names content newer than the view's snapshot. A
    /// reader that misses on it (the entry was evicted) reads the snapshot,
    /// which is older: what it installs must not be carried into the
    /// committer's index, which would then merge the next commit into the
    /// older content and lose the write.
    #[test]
    fn an_older_read_of_a_forwarded_interval_is_not_carried() {
        let (_dir, db) = committed_store();
        let old = db.shared().views.load();
        // Same length, so the interval keeps its size as well as its keys.
        let new_value = vec![0xAB; value(50).len()];
        db.put(key(50), &new_value).unwrap();
        db.flush().unwrap();
        let (forwarded, _) = cached_in(&db, &old, &key(50));
        db.shared()
            .cache
            .remove(CacheRef::unpack(forwarded).unwrap());
        // The reader misses and reads `old`'s snapshot: the old value.
        let f = old.sparse.find(key(50).as_bytes());
        let data = db.shared().view_interval(&old, &f).unwrap();
        assert_eq!(data.get(key(50).as_bytes()), Some(&value(50)[..]));
        db.shared().views.carry_installs(&db.shared().index);
        // The next commit into that interval keeps the newer value.
        db.put(key(51), vec![0xCD; value(51).len()]).unwrap();
        db.flush().unwrap();
        assert_eq!(db.get(key(50)).unwrap(), Some(new_value));
        assert!(db.check().unwrap().problems.is_empty());
    }

    #[test]
    fn an_interval_that_splits_is_not_forwarded() {
        let (_dir, db) = committed_store();
        let old = db.shared().views.load();
        let (before, _) = cached_in(&db, &old, &key(50));
        // Forty keys between key(50) and key(51): the interval splits.
        for j in 0..40 {
            db.put(format!("{}-{j:02}", key(50)), value(j)).unwrap();
        }
        db.flush().unwrap();
        let (after, data) = cached_in(&db, &old, &key(50));
        assert_eq!(after, before, "the old view keeps its word");
        assert!(data.is_none(), "the replaced entry left the cache");
        // The old view still reads the old content, from its snapshot.
        let f = old.sparse.find(key(50).as_bytes());
        let data = db.shared().view_interval(&old, &f).unwrap();
        assert_eq!(data.get(key(50).as_bytes()), Some(&value(50)[..]));
        assert_eq!(data.get(format!("{}-00", key(50)).as_bytes()), None);
    }

    #[test]
    fn reads_and_scans_complete_while_the_committer_holds_its_index() {
        let dir = tempfile::tempdir().unwrap();
        // A cache too small to hold an interval: every read goes to the
        // space (the view's snapshot of it).
        let opts = Options::new().create_if_missing(true).cache_bytes(1);
        let db = Db::open(dir.path(), opts).unwrap();
        for i in 0..3000 {
            db.put(key(i), value(i)).unwrap();
        }
        db.flush().unwrap();
        let db = &db;
        std::thread::scope(|s| {
            // The committer's exclusive hold of its index, for as long as
            // the reads take.
            let held = db.shared().index.write();
            let (tx, rx) = mpsc::channel();
            s.spawn(move || {
                let reads = (|| -> crate::Result<usize> {
                    for i in (0..3000).step_by(7) {
                        assert_eq!(db.get(key(i))?, Some(value(i)));
                    }
                    let mut n = 0;
                    for kv in db.range(key(100)..key(2100)) {
                        let (k, v) = kv?;
                        assert_eq!((k, v), (key(100 + n).into_bytes(), value(100 + n)));
                        n += 1;
                    }
                    Ok(n as usize)
                })();
                let _ = tx.send(reads);
            });
            let outcome = rx.recv_timeout(Duration::from_secs(60));
            drop(held);
            let scanned = outcome.expect("a reader waited for the committer's hold");
            assert_eq!(scanned.unwrap(), 2000);
        });
    }
}
