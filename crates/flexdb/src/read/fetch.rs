//! Fetching an interval's content: from the interval cache, or read from
//! the space (a view's snapshot for readers, the live space for the
//! committer and its prefetcher) and then cached.
//!
//! Invariants: a read is planned under the index that names the interval
//! and performed with no lock of the store held; its result is cached only
//! if the interval's cache word has not moved on since the plan, and only
//! after its keys were checked against the interval's key range. A
//! reader's fetch never waits for the cache's lock.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::RwLockReadGuard;

use crate::error::{space_err, Error, Result};
use crate::index::interval::{search_records, IntervalData, Searched};
use crate::index::interval_cache::CacheRef;
use crate::index::sparse::{IntervalPos, SparseIndex};
use crate::index::CommitterIndex;
use crate::read::frequency::interval_hash;
use crate::read::view::PublishedView;
use crate::store::Store;

/// An interval found in the cache, or planned for a read.
// Returned once per lookup and never stored: boxing the plan would cost an
// allocation per cache miss to save a move.
#[allow(clippy::large_enum_variant)]
enum Fetch<'s> {
    Cached(Arc<IntervalData>),
    Planned(Planned<'s>),
}

/// A read of an interval planned under `index` (see
/// [`Store::cached_or_plan`]).
struct Planned<'s> {
    plan: flexspace::ReadPlan<'s>,
    offset: u64,
    size: usize,
    /// The interval's cache word when planned.
    word: u64,
}

fn corrupt_interval(offset: u64, detail: String) -> Error {
    Error::Corrupt {
        file: "data".into(),
        detail: format!("interval at offset {offset}: {detail}"),
    }
}

/// The pairs read for the interval at `f` must lie in its key range.
fn check_key_range(sparse: &SparseIndex, f: &IntervalPos, data: &IntervalData) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    if sparse.strays(f, data.key(0), data.key(data.len() - 1)) {
        return Err(corrupt_interval(
            f.offset,
            "its keys lie outside the range the sparse index gives it".into(),
        ));
    }
    Ok(())
}

impl Store {
    /// The interval at `f` in `sparse` if it is cached; otherwise a plan
    /// to read it made by `plan` (from the space `sparse` describes). The
    /// plan holds no lock of this store, so a caller holding one can let
    /// it go before the read (a read may wait for the device). `reader` as
    /// for [`Store::install`].
    fn cached_or_plan<'p>(
        &self,
        sparse: &SparseIndex,
        f: &IntervalPos,
        reader: bool,
        plan: impl FnOnce(u64, u64) -> flexspace::Result<flexspace::ReadPlan<'p>>,
    ) -> Result<Fetch<'p>> {
        let word = sparse.meta(f).cache.load(Ordering::Acquire);
        self.cached_or_plan_word(sparse, f, word, reader, plan)
    }

    /// As `cached_or_plan`, with the interval's cache word loaded already.
    fn cached_or_plan_word<'p>(
        &self,
        sparse: &SparseIndex,
        f: &IntervalPos,
        word: u64,
        reader: bool,
        plan: impl FnOnce(u64, u64) -> flexspace::Result<flexspace::ReadPlan<'p>>,
    ) -> Result<Fetch<'p>> {
        let meta = sparse.meta(f);
        let r = CacheRef::unpack(word);
        let cached = if reader {
            self.cache.get_nowait(r)
        } else {
            self.cache.get(r)
        };
        if let Some(d) = cached {
            return Ok(Fetch::Cached(d));
        }
        let size = meta.size as usize;
        let plan = plan(f.offset, size as u64).map_err(space_err)?;
        Ok(Fetch::Planned(Planned {
            plan,
            offset: f.offset,
            size,
            word,
        }))
    }

    /// Reads and parses a planned interval (no lock needed).
    fn read_planned(&self, p: &Planned<'_>) -> Result<IntervalData> {
        let mut buf = vec![0u8; p.size];
        let (n, extents) = p.plan.read(&mut buf).map_err(space_err)?;
        if n != p.size {
            return Err(corrupt_interval(
                p.offset,
                format!("the space ends {n} bytes into a {}-byte interval", p.size),
            ));
        }
        IntervalData::parse(buf, extents as u32).map_err(|d| corrupt_interval(p.offset, d))
    }

    /// Caches `data`, read by the plan `p` of the interval that `f` finds
    /// in `sparse`, unless that interval's cache word moved on since the
    /// plan (the committer changed it, or a racing reader installed its
    /// copy): the caller may still use `data`, a consistent state of the
    /// interval as of the plan. Checks the keys against the interval's
    /// range. `reader`: a reader's call, which never waits for the cache's
    /// lock (it reads the space instead, or leaves the data uncached), not
    /// the committer's or the prefetcher's.
    fn install(
        &self,
        sparse: &SparseIndex,
        f: &IntervalPos,
        p: &Planned<'_>,
        data: IntervalData,
        reader: bool,
    ) -> Result<Arc<IntervalData>> {
        let meta = sparse.meta(f);
        let data = Arc::new(data);
        if meta.cache.load(Ordering::Acquire) == p.word && meta.size as usize == p.size {
            check_key_range(sparse, f, &data)?;
            let r = if reader {
                match self.cache.try_insert(data.clone(), interval_hash(f.offset)) {
                    Some(r) => r,
                    // The cache is busy: not cached this time.
                    None => return Ok(data),
                }
            } else {
                self.cache.insert(None, data.clone())
            };
            // A racing reader may have installed its own copy meanwhile;
            // either is the same content.
            let installed = meta
                .cache
                .compare_exchange(p.word, r.pack(), Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            match (installed, reader) {
                // Carried into the committer's index unless the view's
                // protocol rules it out (see `ViewPublisher::note_install`).
                (true, true) => self
                    .views
                    .note_install(p.word, r.pack(), p.size, || sparse.anchor(f)),
                (true, false) => {}
                // Left to CLOCK if the cache is busy.
                (false, true) => self.cache.try_remove(r),
                (false, false) => self.cache.remove(r),
            }
        }
        Ok(data)
    }

    /// For a get that missed the cache: `read` applied to the value of
    /// `key` (`None`: absent), read from the view's snapshot of the space
    /// into this thread's buffer and searched there, checked as a parse
    /// checks it (`interval::search_records`, and the key range) but with
    /// nothing decoded or cached. `None` when a check fails, without
    /// calling `read`: the caller reads the interval whole, which reports
    /// what is wrong. `read` as for `Store::get_with`.
    pub fn get_in_place<R>(
        &self,
        view: &PublishedView,
        f: &IntervalPos,
        key: &[u8],
        read: &mut impl FnMut(Option<(&[u8], u64)>) -> R,
    ) -> Result<Option<R>> {
        thread_local! {
            static BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
        }
        let size = view.sparse.meta(f).size as usize;
        let plan = view
            .space
            .plan_read(f.offset, size as u64)
            .map_err(space_err)?;
        // Taken out while in use: a `read` that gets again finds it empty.
        let mut buf = BUF.with(std::cell::Cell::take);
        if buf.len() < size {
            buf.resize(size, 0);
        }
        let out = match plan.read(&mut buf[..size]) {
            Ok((n, _)) if n == size => match search_records(&buf[..size], key) {
                Ok(Searched {
                    value,
                    first: Some(first),
                    last: Some(last),
                }) if !view.sparse.strays(f, first, last) => Some(read(value)),
                _ => None,
            },
            Ok(_) => None,
            Err(e) => {
                BUF.with(|b| b.set(buf));
                return Err(space_err(e));
            }
        };
        // A buffer grown for a huge interval is not kept.
        if buf.len() <= 1 << 20 {
            BUF.with(|b| b.set(buf));
        }
        Ok(out)
    }

    /// The content of the interval at `f` in `view`, from the cache or read
    /// from the view's snapshot of the space (and then cached in the view).
    pub fn view_interval(
        &self,
        view: &PublishedView,
        f: &IntervalPos,
    ) -> Result<Arc<IntervalData>> {
        self.fetch(&view.sparse, f, true, |o, n| view.space.plan_read(o, n))
    }

    /// The content of the interval at `f` in `view` as a snapshot whose
    /// active generation is `active_gen` must see it: as `view_interval`
    /// gives it, unless the interval's cache word was forwarded with
    /// content of that generation or a later one
    /// (`PublishedView::word_usable_at`); then read from the view's
    /// snapshot of the space, and not cached (the view's word names
    /// content newer readers want).
    pub fn view_interval_at(
        &self,
        view: &PublishedView,
        f: &IntervalPos,
        active_gen: u64,
    ) -> Result<Arc<IntervalData>> {
        let word = view.sparse.meta(f).cache.load(Ordering::Acquire);
        let plan = |o, n| view.space.plan_read(o, n);
        let door = interval_hash(f.offset);
        self.interval_freq.record(door);
        if view.word_usable_at(word, active_gen) {
            return match self.cached_or_plan_word(&view.sparse, f, word, true, plan)? {
                Fetch::Cached(d) => Ok(d),
                Fetch::Planned(p) => {
                    let data = self.read_planned(&p)?;
                    if self.admits(door, p.size) {
                        self.install(&view.sparse, f, &p, data, true)
                    } else {
                        check_key_range(&view.sparse, f, &data)?;
                        Ok(Arc::new(data))
                    }
                }
            };
        }
        let size = view.sparse.meta(f).size as usize;
        let p = Planned {
            plan: plan(f.offset, size as u64).map_err(space_err)?,
            offset: f.offset,
            size,
            word,
        };
        let data = self.read_planned(&p)?;
        check_key_range(&view.sparse, f, &data)?;
        Ok(Arc::new(data))
    }

    /// Whether a reader caches an interval it missed, of admission hash
    /// `door` and `size` bytes: not on its first miss in a window
    /// (`doorkeeper`), nor when it was read no more often lately than the
    /// entry it would evict (`frequency`).
    pub(crate) fn admits(&self, door: u64, size: usize) -> bool {
        self.interval_door.admit((door >> 32) as u32)
            && self.cache.admits(size, |victim| {
                self.interval_freq.estimate(door) > self.interval_freq.estimate(victim)
            })
    }

    /// The content of the interval at `f` in `sparse`, from the cache or
    /// read by a plan that `plan` makes (and then cached); `reader` as for
    /// [`Store::install`].
    fn fetch<'p>(
        &self,
        sparse: &SparseIndex,
        f: &IntervalPos,
        reader: bool,
        plan: impl FnOnce(u64, u64) -> flexspace::Result<flexspace::ReadPlan<'p>>,
    ) -> Result<Arc<IntervalData>> {
        match self.cached_or_plan(sparse, f, reader, plan)? {
            Fetch::Cached(d) => Ok(d),
            Fetch::Planned(p) => {
                if !reader {
                    self.counters
                        .trace_committer_reads
                        .fetch_add(1, Ordering::Relaxed);
                }
                let data = self.read_planned(&p)?;
                self.install(sparse, f, &p, data, reader)
            }
        }
    }

    /// For the prefetcher: caches the interval of the committer's index
    /// holding `key` (unless it is empty), read from the space with the
    /// index released. `lock` takes the index shared; `peek` sees where
    /// the interval is under the first hold.
    pub fn interval_of<'s>(
        &'s self,
        key: &[u8],
        lock: impl Fn() -> RwLockReadGuard<'s, CommitterIndex>,
        peek: impl FnOnce(&CommitterIndex, &IntervalPos),
    ) -> Result<Option<Arc<IntervalData>>> {
        let st = lock();
        let f = st.sparse.find(key);
        peek(&st, &f);
        if st.sparse.meta(&f).size == 0 {
            return Ok(None);
        }
        let planned =
            match self.cached_or_plan(&st.sparse, &f, false, |o, n| self.space.plan_read(o, n))? {
                Fetch::Cached(data) => return Ok(Some(data)),
                Fetch::Planned(p) => p,
            };
        let version = st.version;
        drop(st);
        let data = self.read_planned(&planned)?;
        let st = lock();
        let f = if st.version == version {
            f
        } else {
            st.sparse.find(key)
        };
        self.install(&st.sparse, &f, &planned, data, false)
            .map(Some)
    }

    /// The content of the interval at `f` in the committer's index, from
    /// the cache or read from the live space (and then cached). The caller
    /// holds `index` throughout (the committer, `check`).
    pub fn interval(&self, st: &CommitterIndex, f: &IntervalPos) -> Result<Arc<IntervalData>> {
        self.fetch(&st.sparse, f, false, |o, n| self.space.plan_read(o, n))
    }

    /// Drops `r` from the cache if it is set.
    pub fn uncache(&self, packed: u64) {
        if let Some(r) = CacheRef::unpack(packed) {
            self.cache.remove(r);
        }
    }
}
