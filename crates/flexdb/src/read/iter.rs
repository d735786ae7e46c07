//! Iterators over key ranges.
//!
//! An iterator merges the MemTables that existed when it was created (read
//! at its snapshot) with a walk over the intervals of the space. Each end
//! refills a buffer in chunks: it reads up to `CHUNK` keys from every source
//! (fewer when its limit, `Iter::limit`, leaves fewer to yield), and only
//! the keys up to the smallest last key of a source that filled its chunk
//! are certain to be complete; those are merged (the newest MemTable wins,
//! deletions hide pairs) and buffered. Pairs from the space are buffered as
//! references into the decoded interval they come from (shared, immutable),
//! so a pair is copied once, into the `Vec`s the caller receives. A chunk
//! whose only source is the space is not buffered at all: it is kept as runs
//! of positions in those intervals (`read::runs`), and
//! `next_ref`/`next_back_ref` lend from there. Every chunk reads the same
//! point in the store's history (`read::snapshot::ReadPoint`), taken when
//! the iterator was created: its MemTables at its sequence number, and the
//! view it holds (the committer's later views are not looked at), so a scan
//! never waits for the committer nor holds it back, and sees one state
//! throughout. A transaction's iterator also merges the transaction's own
//! writes (`overlay`), as the newest source.
//!
//! Invariants: an end's runs come before the pairs it buffers, and while it
//! has runs it buffers none; every key buffered by the front is below every
//! key buffered by the back and below the unfetched region (`lo`, `hi`); the
//! front only moves up and the back only moves down (except by
//! `seek`/`seek_back`); the two ends never cross; every key emitted lies in
//! the range; every key is seen as of the iterator's point, and nothing
//! written after it; the two ends together yield no more pairs than the
//! limit; a pair one end took from what the other fetched, or a seek
//! dropped, bounds the region left (`Iter::taken_across`), so that a later
//! seek back over it fetches it again.

use std::collections::{BTreeMap, VecDeque};
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::Arc;

use crate::clock::Now;
use crate::error::Result;
use crate::index::interval::IntervalData;
use crate::index::sparse::{IntervalPos, SparseIndex};
use crate::keyspace::encoding;
use crate::keyspace::KsId;
use crate::read::runs::Runs;
use crate::read::snapshot::ReadPoint;
use crate::read::walk_ahead::WalkAhead;
use crate::write::memtable::{within_end, within_start, Found, Version};
use crate::write::range_tombstones::{RangeTombstone, TombstoneList};

/// A transaction's own writes.
#[derive(Clone, Default)]
pub(crate) struct WriteSet {
    /// Point writes: a value, or `None` for a deletion.
    pub pairs: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Range deletes (`seq` unused), each older than every write of
    /// `pairs` it covers: a range delete drops the point writes made
    /// before it from `pairs`.
    pub ranges: Vec<RangeTombstone>,
}

impl WriteSet {
    /// Whether it holds no write.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty() && self.ranges.is_empty()
    }

    /// Writes held: point writes and range deletes.
    pub fn len(&self) -> usize {
        self.pairs.len() + self.ranges.len()
    }

    /// What it says of `key`: `Some(value)` (`Some(None)`: deleted, by a
    /// point delete or a range delete), `None` when it does not write it.
    pub fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        match self.pairs.get(key) {
            Some(v) => Some(v.as_deref()),
            None => self.ranges.iter().any(|r| r.covers(key)).then_some(None),
        }
    }
}

/// The range deletes of one source of an iterator (those numbered up to
/// `seq`), which hide what the sources after it (older MemTables, the
/// space) hold in their ranges. (What they hide in their own source, the
/// source's scan hides: see `MemTable::scan_forward`.)
struct Hide {
    source: usize,
    list: Arc<TombstoneList>,
    seq: u64,
}

impl Hide {
    fn covers(&self, key: &[u8]) -> bool {
        self.list.covering(key, self.seq).is_some()
    }
}

/// A pair yielded by an iterator: `(key, value)`.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// A pair lent with its deadline (0: none): `(key, value, deadline)`.
pub(crate) type EntryRef<'a> = (&'a [u8], &'a [u8], u64);

/// Keys each source reads per refill.
const CHUNK: usize = 64;
/// Pairs ahead of the one lent whose value is asked for
/// (`Item::prefetch_value`).
const VALUE_AHEAD: usize = 4;
/// Bytes of each interval an iterator's fill prefetches (the whole of a
/// typical interval; a chunk of 64 udb pairs spans about 10 KiB).
const PREFETCH_BYTES: usize = 8 << 10;

/// A pair found by a source: a transaction's write (copied; `None`: a
/// deletion), a version in the arena of MemTable `m` of the iterator's
/// point (`live`: read as a value, not deleted nor expired), or pair `i` of
/// decoded interval `d` of the iterator's `held` list. (Holding one
/// reference per interval instead of one per pair keeps scans of the same
/// hot intervals by several threads off each other's reference counts.)
#[derive(Clone)]
enum Item {
    Mem(Box<[u8]>, Version, u64),
    Arena { m: u32, found: Found, live: bool },
    Space { d: u32, i: u32 },
}

/// What the buffered pairs of an iterator borrow from: the decoded
/// intervals they come from, and the iterator's read point, whose
/// MemTables hold the rest.
struct Held {
    intervals: Vec<Arc<IntervalData>>,
    point: Arc<ReadPoint>,
}

impl Held {
    /// Key, value (`None`: deleted) and deadline of an `Item::Arena`.
    fn found(&self, m: u32, found: Found) -> (&[u8], Option<&[u8]>, u64) {
        // SAFETY: an `Item::Arena` is made only in `mem_chunks`, from a
        // scan of MemTable `m` of the iterator's point, which is this
        // point (the point's list never changes).
        unsafe { self.point.mems[m as usize].found(found) }
    }
}

impl Item {
    /// Asks for the item's value ahead of its read: a MemTable's pairs lie
    /// in write order, each value a cache miss of its own. (An interval's
    /// pairs are contiguous and prefetched with it.)
    fn prefetch_value(&self, held: &Held) {
        if let Item::Arena { m, found, .. } = self {
            // SAFETY: as in `Held::found`.
            unsafe { held.point.mems[*m as usize].prefetch_value(*found) }
        }
    }

    fn key<'h>(&'h self, held: &'h Held) -> &'h [u8] {
        match self {
            Item::Mem(k, ..) => k,
            Item::Arena { m, found, .. } => held.found(*m, *found).0,
            Item::Space { d, i } => held.intervals[*d as usize].key(*i as usize),
        }
    }

    /// Not a deletion, and not expired as of `now`.
    fn is_live(&self, held: &Held, now: &Now) -> bool {
        match self {
            Item::Mem(_, v, _) => v.is_some(),
            Item::Arena { live, .. } => *live,
            Item::Space { d, i } => !now.expired(held.intervals[*d as usize].expires(*i as usize)),
        }
    }

    /// Key and value, borrowed (a live item: deletions never reach the
    /// caller).
    fn pair_ref<'h>(&'h self, held: &'h Held) -> (&'h [u8], &'h [u8]) {
        match self {
            Item::Mem(k, v, _) => (k, v.as_deref().unwrap_or_default()),
            Item::Arena { m, found, .. } => {
                let (k, v, _) = held.found(*m, *found);
                (k, v.unwrap_or_default())
            }
            Item::Space { d, i } => held.intervals[*d as usize].pair(*i as usize),
        }
    }

    /// The deadline of a live item (0: none).
    fn expires(&self, held: &Held) -> u64 {
        match self {
            Item::Mem(_, _, expires) => *expires,
            Item::Arena { m, found, .. } => held.found(*m, *found).2,
            Item::Space { d, i } => held.intervals[*d as usize].expires(*i as usize),
        }
    }

    fn into_pair(self, held: &Held) -> KeyValue {
        match self {
            Item::Mem(k, v, _) => (k.into_vec(), v.map(<[u8]>::into_vec).unwrap_or_default()),
            Item::Arena { m, found, .. } => {
                let (k, v, _) = held.found(m, found);
                (k.to_vec(), v.unwrap_or_default().to_vec())
            }
            Item::Space { d, i } => {
                let (k, v) = held.intervals[d as usize].pair(i as usize);
                (k.to_vec(), v.to_vec())
            }
        }
    }
}

/// An iterator over the pairs of a key range, from [`crate::Db::range`]
/// (and `iter`, `prefix`, and the same methods of [`crate::Snapshot`] and
/// [`crate::Transaction`]). Forward with `next`, backward with `next_back`
/// (`.rev()`); the two ends never cross.
///
/// An iterator reads one consistent state: the store as of its creation
/// (an implicit snapshot), or as of the snapshot or transaction it came
/// from, with a transaction's own writes merged in. Writes made after it
/// are never seen, and a batch written before it is seen whole. It holds
/// no borrow of the store (the lifetime parameter is always `'static`,
/// kept for source compatibility); while it lives it pins what a
/// [`crate::Snapshot`] pins.
pub struct Iter<'a> {
    /// A transaction's writes, merged in as the newest source.
    overlay: Option<Arc<WriteSet>>,
    /// The range deletes of the sources, as of the point.
    hides: Vec<Hide>,
    _compat: PhantomData<&'a ()>,
    /// The range as asked for.
    range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    /// What is left: `lo` rises as the front fetches, `hi` falls as the back
    /// does.
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    /// Fetched by the front, not yet emitted, ascending: `front_runs`,
    /// then `front` (only one of them holds pairs).
    front_runs: Runs,
    front: VecDeque<Item>,
    /// Fetched by the back, not yet emitted, descending: `back_runs`, then
    /// `back`.
    back_runs: Runs,
    back: VecDeque<Item>,
    /// The read point, and the intervals the runs, `front`, `back` and
    /// `lent` refer to (cleared when the runs and buffers are empty,
    /// before a fetch; a pair lent from them is not borrowed past that
    /// call).
    held: Held,
    /// The pair last lent by `next_ref`/`next_back_ref` from `front` or
    /// `back` (left stale, never read again, when they lend from runs).
    lent: Option<Item>,
    /// Nothing is left to fetch between `lo` and `hi`.
    exhausted: bool,
    /// An error ended the iteration.
    failed: bool,
    /// The keyspace whose keys it yields (decoded) and seeks to (encoded);
    /// `None`: keys as stored, for the store's own use.
    ks: Option<KsId>,
    /// An error to yield first (a dropped keyspace's).
    pending: Option<crate::Error>,
    /// Pairs still to yield, front and back together (`Iter::limit`;
    /// `usize::MAX`: no limit). A refill reads no more than this.
    left: usize,
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether the anchor of the interval at `f` lies before the upper bound
/// `end` (compared in place).
fn anchor_within_end(sparse: &SparseIndex, f: &IntervalPos, end: Bound<&[u8]>) -> bool {
    use std::cmp::Ordering::{Greater, Less};
    match end {
        Bound::Included(e) => sparse.compare_anchor(f, e) != Greater,
        Bound::Excluded(e) => sparse.compare_anchor(f, e) == Less,
        Bound::Unbounded => true,
    }
}

/// Whether the anchor of the interval at `f` is at or below the upper
/// bound `end`'s key (so every key before that interval lies within `end`).
fn anchor_at_or_below(sparse: &SparseIndex, f: &IntervalPos, end: Bound<&[u8]>) -> bool {
    match end {
        Bound::Included(e) | Bound::Excluded(e) => {
            sparse.compare_anchor(f, e) != std::cmp::Ordering::Greater
        }
        Bound::Unbounded => true,
    }
}

/// Whether the anchor of the interval at `f` lies after the lower bound
/// `start` (compared in place).
fn anchor_within_start(sparse: &SparseIndex, f: &IntervalPos, start: Bound<&[u8]>) -> bool {
    use std::cmp::Ordering::{Greater, Less};
    match start {
        Bound::Included(s) => sparse.compare_anchor(f, s) != Less,
        Bound::Excluded(s) => sparse.compare_anchor(f, s) == Greater,
        Bound::Unbounded => true,
    }
}

/// The nearer of the far bound `end` and `cap` (an inclusive bound, when
/// set): the lower of the two going forward, the higher going backward.
fn tighter<'b>(end: Bound<&'b [u8]>, cap: Option<&'b [u8]>, reverse: bool) -> Bound<&'b [u8]> {
    let Some(c) = cap else { return end };
    let cap_is_nearer = if reverse {
        within_start(c, end)
    } else {
        within_end(c, end)
    };
    if cap_is_nearer {
        Bound::Included(c)
    } else {
        end
    }
}

/// Up to `chunk` of a transaction's writes between `lo` and `hi` (and
/// within `cap`), ascending, or descending when `reverse`.
fn overlay_chunk(
    o: &WriteSet,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    reverse: bool,
    cap: Option<&[u8]>,
    chunk: usize,
) -> Chunk {
    let (from, to) = if reverse {
        (tighter(as_ref(lo), cap, true), as_ref(hi))
    } else {
        (as_ref(lo), tighter(as_ref(hi), cap, false))
    };
    let mut items = Vec::new();
    if !refs_cross(from, to) {
        let item = |(k, v): (&Vec<u8>, &Option<Vec<u8>>)| {
            Item::Mem(k.as_slice().into(), v.as_deref().map(Box::from), 0)
        };
        let r = o.pairs.range::<[u8], _>((from, to));
        if reverse {
            items.extend(r.rev().take(chunk).map(item));
        } else {
            items.extend(r.take(chunk).map(item));
        }
    }
    let full = items.len() == chunk;
    Chunk { items, full }
}

/// Whether no key lies between `lo` and `hi` (borrowed bounds; also
/// guards `BTreeMap::range`, which panics on such bounds).
fn refs_cross(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
    }
}

/// Whether no key lies between `lo` and `hi`.
fn bounds_cross(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    refs_cross(as_ref(lo), as_ref(hi))
}

/// One source's chunk: its keys in order, and whether it may have more.
struct Chunk {
    items: Vec<Item>,
    full: bool,
}

impl Iter<'static> {
    /// An iterator over the pairs of keyspace `ks` whose stored keys lie in
    /// `lo..hi` (bounds within the keyspace's, as
    /// `keyspace::encoding::encode_range` makes them) as of `point`, with
    /// `overlay` merged in; it yields and seeks the keyspace's own keys.
    pub(crate) fn new(
        point: Arc<ReadPoint>,
        ks: KsId,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        overlay: Option<Arc<WriteSet>>,
    ) -> Iter<'static> {
        let mut it = Self::new_stored(point, lo, hi, overlay);
        it.ks = Some(ks);
        it
    }

    /// An iterator that yields its error `e` once, then nothing.
    pub(crate) fn failed(point: Arc<ReadPoint>, e: crate::Error) -> Iter<'static> {
        // An empty range, so that no seek can open it.
        let none = || Bound::Excluded(Vec::new());
        let mut it = Self::new_stored(point, none(), none(), None);
        it.pending = Some(e);
        it
    }

    /// An iterator over the stored keys in `lo..hi` as of `point`, with
    /// `overlay` merged in, yielding keys as stored (every keyspace's).
    pub(crate) fn new_stored(
        point: Arc<ReadPoint>,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        overlay: Option<Arc<WriteSet>>,
    ) -> Iter<'static> {
        let empty = bounds_cross(&lo, &hi);
        // Sources in `mem_chunks`' order: the overlay (if any), then the
        // MemTables newest first.
        let first_mem = usize::from(overlay.is_some());
        let mut hides: Vec<Hide> = overlay
            .iter()
            .filter(|o| !o.ranges.is_empty())
            .map(|o| Hide {
                source: 0,
                list: Arc::new(TombstoneList::new(o.ranges.clone())),
                seq: u64::MAX,
            })
            .collect();
        for (i, m) in point.mems.iter().enumerate() {
            if let Some(list) = m.range_list() {
                hides.push(Hide {
                    source: first_mem + i,
                    list,
                    seq: point.seq,
                });
            }
        }
        Iter {
            overlay,
            hides,
            _compat: PhantomData,
            range: (lo.clone(), hi.clone()),
            lo,
            hi,
            front_runs: Runs::new(false),
            front: VecDeque::new(),
            back_runs: Runs::new(true),
            back: VecDeque::new(),
            held: Held {
                intervals: Vec::new(),
                point,
            },
            lent: None,
            exhausted: empty,
            failed: false,
            ks: None,
            pending: None,
            left: usize::MAX,
        }
    }
}

impl Iter<'_> {
    /// Makes the iterator yield at most `n` more pairs, from the front and
    /// the back together, and read no more of the store than those need:
    /// a scan that wants 50 pairs then reads about 50, not a whole refill
    /// of 64 from every source. (`take(n)` yields as many, but the
    /// iterator cannot see it and reads ahead as usual.)
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = flexdb::Db::open(dir.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k, "v").unwrap();
    /// }
    /// let keys: Vec<Vec<u8>> = db.range("b"..).limit(2).map(|kv| kv.unwrap().0).collect();
    /// assert_eq!(keys, [b"b".to_vec(), b"c".to_vec()]);
    /// ```
    pub fn limit(mut self, n: usize) -> Self {
        self.left = n;
        self
    }

    /// Moves the front of the iterator to the first key `>= key` (within the
    /// range); the next `next()` returns it.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        let key = self.stored(key.as_ref());
        let key = &key[..];
        self.front.clear();
        self.front_runs.clear();
        Self::spill(&mut self.back_runs, &mut self.back);
        self.lo = if within_start(key, as_ref(&self.range.0)) {
            Bound::Included(key.to_vec())
        } else {
            self.range.0.clone()
        };
        // What the back fetched below the new front is no longer in range;
        // the region left reaches up to it again (a later seek of the
        // front below it fetches it anew).
        let mut dropped = None;
        while self
            .back
            .back()
            .is_some_and(|i| !within_start(i.key(&self.held), as_ref(&self.lo)))
        {
            dropped = self.back.pop_back();
        }
        if let Some(i) = dropped {
            self.hi = Bound::Included(i.key(&self.held).to_vec());
        }
        self.exhausted = bounds_cross(&self.lo, &self.hi);
    }

    /// Moves the back of the iterator to the last key `<= key` (within the
    /// range); the next `next_back()` returns it.
    pub fn seek_back(&mut self, key: impl AsRef<[u8]>) {
        let key = self.stored(key.as_ref());
        let key = &key[..];
        self.back.clear();
        self.back_runs.clear();
        self.hi = if within_end(key, as_ref(&self.range.1)) {
            Bound::Included(key.to_vec())
        } else {
            self.range.1.clone()
        };
        // As in `seek`: what the front fetched above the new back is
        // dropped, and the region left reaches down to it again.
        Self::spill(&mut self.front_runs, &mut self.front);
        let mut dropped = None;
        while self
            .front
            .back()
            .is_some_and(|i| !within_end(i.key(&self.held), as_ref(&self.hi)))
        {
            dropped = self.front.pop_back();
        }
        if let Some(i) = dropped {
            self.lo = Bound::Included(i.key(&self.held).to_vec());
        }
        self.exhausted = bounds_cross(&self.lo, &self.hi);
    }

    /// `key` as stored (in the iterator's keyspace, if it has one).
    fn stored<'k>(&self, key: &'k [u8]) -> std::borrow::Cow<'k, [u8]> {
        match self.ks {
            Some(id) => encoding::encode(id, key),
            None => std::borrow::Cow::Borrowed(key),
        }
    }

    /// The MemTables' chunks, each stopping at `cap` (the last key of a
    /// full space chunk: nothing past it can be merged this round, so
    /// copying it would be wasted) as well as at the range's far end.
    fn mem_chunks(&self, reverse: bool, cap: Option<&[u8]>) -> Vec<Chunk> {
        let point = &*self.held.point;
        let chunk = self.chunk();
        let mut chunks = Vec::with_capacity(point.mems.len() + 2);
        if let Some(o) = &self.overlay {
            chunks.push(overlay_chunk(o, &self.lo, &self.hi, reverse, cap, chunk));
        }
        let now = Now::new(&point.store.clock);
        for (m, table) in point.mems.iter().enumerate() {
            let (from, end) = if reverse {
                (as_ref(&self.hi), tighter(as_ref(&self.lo), cap, true))
            } else {
                (as_ref(&self.lo), tighter(as_ref(&self.hi), cap, false))
            };
            let (lo, hi) = if reverse { (end, from) } else { (from, end) };
            if !table.may_hold(lo, hi) {
                // No key of the table lies here: an empty, complete chunk.
                chunks.push(Chunk {
                    items: Vec::new(),
                    full: false,
                });
                continue;
            }
            let mut items = Vec::with_capacity(chunk);
            let waited = table.scan_entries(from, end, point.seq, chunk, !reverse, |found| {
                // An expired version is a deletion: it hides the older ones.
                // (Only a version with a deadline is touched here.)
                let live = found.live()
                    && (!found.may_expire() || {
                        // SAFETY: `found` comes from this table's scan.
                        let (_, _, expires) = unsafe { table.found(found) };
                        !now.expired(expires)
                    });
                items.push(Item::Arena {
                    m: m as u32,
                    found,
                    live,
                });
            });
            if let Some(w) = waited {
                point
                    .store
                    .counters
                    .record_reader_wait(w, point.store.trace);
            }
            let full = items.len() == chunk;
            chunks.push(Chunk { items, full });
        }
        chunks
    }

    /// The runs of the front end (of the back end, when `reverse`).
    fn runs_of(&mut self, reverse: bool) -> &mut Runs {
        if reverse {
            &mut self.back_runs
        } else {
            &mut self.front_runs
        }
    }

    /// Reads the next chunk of keys above `lo` into `front` (below `hi`
    /// into `back`, when `reverse`).
    fn fill(&mut self, reverse: bool) -> Result<()> {
        let idle = self.front_runs.is_empty() && self.back_runs.is_empty();
        if idle && self.front.is_empty() && self.back.is_empty() {
            self.held.intervals.clear();
        }
        let (mut runs, full) = if reverse {
            self.space_backward()?
        } else {
            self.space_forward()?
        };
        let held = &self.held;
        let last = runs
            .ends()
            .map(|(_, (d, i))| held.intervals[d as usize].key(i as usize));
        let cap = last.filter(|_| full);
        let mut chunks = self.mem_chunks(reverse, cap);
        if self.space_alone(&chunks, &runs) {
            // Lent from the runs: nothing to merge nor buffer.
            let last = last.map(<[u8]>::to_vec);
            *self.runs_of(reverse) = runs;
            if let Some(k) = last {
                *if reverse { &mut self.hi } else { &mut self.lo } = Bound::Excluded(k);
            }
            self.exhausted = !full;
            return Ok(());
        }
        let items = runs.drain().map(|(d, i)| Item::Space { d, i }).collect();
        // The emptied runs keep their allocation for the next fill.
        *self.runs_of(reverse) = runs;
        chunks.push(Chunk { items, full });
        let (out, bound) = if reverse {
            (&mut self.back, &mut self.hi)
        } else {
            (&mut self.front, &mut self.lo)
        };
        let now = Now::new(&self.held.point.store.clock);
        let before = out.len();
        let horizon = merge_chunks(chunks, reverse, out, &self.held, &self.hides, &now);
        // The first values read next (`next_ref` asks for the later ones).
        for item in out.iter().skip(before).take(VALUE_AHEAD + 1) {
            item.prefetch_value(&self.held);
        }
        match horizon {
            Some(h) => *bound = Bound::Excluded(h),
            None => {
                // Everything left was fetched: the region ends at the last
                // key this end holds (so a later seek of the other end
                // cannot fetch it again).
                if let Some(i) = out.back() {
                    *bound = Bound::Excluded(i.key(&self.held).to_vec());
                }
                self.exhausted = true;
            }
        }
        Ok(())
    }

    /// Whether the space's chunk (`runs`) can be lent as it is: no other
    /// source has a pair up to its end (`chunks`, theirs), no range delete
    /// of a newer source covers one of its keys, and none of its pairs may
    /// have expired.
    fn space_alone(&self, chunks: &[Chunk], runs: &Runs) -> bool {
        let intervals = &self.held.intervals;
        if chunks.iter().any(|c| !c.items.is_empty()) || runs.any_expiring(intervals) {
            return false;
        }
        match runs.ends() {
            None => true,
            Some(((d0, i0), (d1, i1))) => {
                let a = intervals[d0 as usize].key(i0 as usize);
                let b = intervals[d1 as usize].key(i1 as usize);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                !self.hides.iter().any(|h| h.list.any_within(lo, hi, h.seq))
            }
        }
    }

    /// Up to `chunk()` pairs of the space above `lo` (and within `hi`), as
    /// runs of the intervals it holds, and whether it read all `chunk()`.
    fn space_forward(&mut self) -> Result<(Runs, bool)> {
        let chunk = self.chunk();
        let mut runs = std::mem::replace(&mut self.front_runs, Runs::new(false));
        runs.clear();
        let point = &*self.held.point;
        let (shared, view, gen) = (&*point.store, &*point.view, point.active_gen);
        let mut taken = 0;
        let start: &[u8] = match &self.lo {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[],
        };
        let mut f = view.sparse.find(start);
        // The chunk's intervals, asked for ahead of the walk (their misses
        // overlap instead of coming one after another).
        let ahead = WalkAhead::new(
            &view.sparse,
            &f,
            chunk,
            (&shared.cache, &shared.interval_freq),
            false,
        );
        let (mut first, mut k) = (true, 0);
        loop {
            ahead.reached(k, &shared.cache, PREFETCH_BYTES);
            k += 1;
            let next = view.sparse.next(&f);
            if view.sparse.meta(&f).size > 0 {
                let d = self.held.intervals.len() as u32;
                self.held
                    .intervals
                    .push(shared.view_interval_at(view, &f, gen)?);
                let data = &self.held.intervals[d as usize];
                data.prefetch_head(PREFETCH_BYTES);
                let i = match (&self.lo, first) {
                    (Bound::Included(k), true) => data.lower_bound(k),
                    (Bound::Excluded(k), true) => data.upper_bound(k),
                    _ => 0,
                };
                // Where the range ends in this interval: its end when the
                // next interval's anchor is at or below the range's end
                // (every key here lies below that anchor), else by binary
                // search.
                let end = match &self.hi {
                    Bound::Unbounded => data.len(),
                    _ if next
                        .as_ref()
                        .is_some_and(|n| anchor_at_or_below(&view.sparse, n, as_ref(&self.hi))) =>
                    {
                        data.len()
                    }
                    Bound::Included(k) => data.upper_bound(k),
                    Bound::Excluded(k) => data.lower_bound(k),
                };
                let take = end.saturating_sub(i).min(chunk - taken);
                runs.push(d, i, i + take);
                taken += take;
                if taken == chunk {
                    return Ok((runs, true));
                }
                if end < data.len() {
                    return Ok((runs, false));
                }
            }
            first = false;
            match next {
                Some(n) => {
                    if !anchor_within_end(&view.sparse, &n, as_ref(&self.hi)) {
                        return Ok((runs, false));
                    }
                    f = n;
                }
                None => return Ok((runs, false)),
            }
        }
    }

    /// Up to `chunk()` pairs of the space below `hi` (and within `lo`), in
    /// descending order, as runs taken from their ends, and whether it
    /// read all `chunk()`.
    fn space_backward(&mut self) -> Result<(Runs, bool)> {
        let chunk = self.chunk();
        let mut runs = std::mem::replace(&mut self.back_runs, Runs::new(true));
        runs.clear();
        let point = &*self.held.point;
        let (shared, view, gen) = (&*point.store, &*point.view, point.active_gen);
        let mut taken = 0;
        let mut f = match &self.hi {
            Bound::Included(k) | Bound::Excluded(k) => view.sparse.find(k),
            Bound::Unbounded => view.sparse.last(),
        };
        // As going forward: the chunk's intervals asked for ahead.
        let ahead = WalkAhead::new(
            &view.sparse,
            &f,
            chunk,
            (&shared.cache, &shared.interval_freq),
            true,
        );
        let (mut first, mut k) = (true, 0);
        loop {
            ahead.reached(k, &shared.cache, PREFETCH_BYTES);
            k += 1;
            let anchor_in = anchor_within_start(&view.sparse, &f, as_ref(&self.lo));
            if view.sparse.meta(&f).size > 0 {
                let d = self.held.intervals.len() as u32;
                self.held
                    .intervals
                    .push(shared.view_interval_at(view, &f, gen)?);
                let data = &self.held.intervals[d as usize];
                data.prefetch_tail(PREFETCH_BYTES);
                let i = match (&self.hi, first) {
                    (Bound::Included(k), true) => data.upper_bound(k),
                    (Bound::Excluded(k), true) => data.lower_bound(k),
                    _ => data.len(),
                };
                // Where the range starts in this interval: its start when
                // its anchor (its first key) lies in the range, else by
                // binary search.
                let start = match &self.lo {
                    _ if anchor_in => 0,
                    Bound::Included(k) => data.lower_bound(k),
                    Bound::Excluded(k) => data.upper_bound(k),
                    Bound::Unbounded => 0,
                };
                let take = i.saturating_sub(start).min(chunk - taken);
                runs.push(d, i - take, i);
                taken += take;
                if taken == chunk {
                    return Ok((runs, true));
                }
                if start > 0 {
                    return Ok((runs, false));
                }
            }
            first = false;
            // The interval's anchor is at or below all its keys: when it is
            // below the range, no earlier interval can hold anything.
            if !anchor_in {
                return Ok((runs, false));
            }
            match view.sparse.prev(&f) {
                Some(p) => f = p,
                None => return Ok((runs, false)),
            }
        }
    }
}

/// Merges the chunks of the sources (MemTables newest first, the space
/// last), each ascending (descending when `reverse`), appending the live
/// pairs up to the horizon to `out`, except those a range delete of a
/// newer source hides (`hides`) and those expired as of `now`. Returns the
/// horizon: the key up to which every source is complete (`None`: every
/// source is exhausted).
fn merge_chunks(
    chunks: Vec<Chunk>,
    reverse: bool,
    out: &mut VecDeque<Item>,
    held: &Held,
    hides: &[Hide],
    now: &Now,
) -> Option<Vec<u8>> {
    let before = |a: &[u8], b: &[u8]| if reverse { a > b } else { a < b };
    let horizon: Option<Vec<u8>> = chunks
        .iter()
        .filter(|c| c.full)
        .filter_map(|c| c.items.last().map(|i| i.key(held)))
        .reduce(|a, b| if before(a, b) { a } else { b })
        .map(<[u8]>::to_vec);
    // The common cases: only one source has pairs here (the space, or a
    // MemTable holding all the recent writes), and no range delete of a
    // newer source covers any of them. Nothing to merge.
    let mut with_items = chunks
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.items.is_empty());
    let single = match (with_items.next(), with_items.next()) {
        (Some((s, _)), None) => Some(s),
        _ => None,
    };
    let unhidden = |items: &[Item], s: usize| {
        let mut newer = hides.iter().filter(|h| h.source < s).peekable();
        match (newer.peek(), items.first(), items.last()) {
            (Some(_), Some(a), Some(b)) => {
                let (a, b) = (a.key(held), b.key(held));
                let (lo, hi) = if reverse { (b, a) } else { (a, b) };
                !newer.any(|h| h.list.any_within(lo, hi, h.seq))
            }
            _ => true,
        }
    };
    if let Some(s) = single.filter(|&s| unhidden(&chunks[s].items, s)) {
        let is_space = s == chunks.len() - 1;
        let items = chunks
            .into_iter()
            .nth(s)
            .map(|c| c.items)
            .unwrap_or_default();
        let all_live = is_space && !held.intervals.iter().any(|d| d.expiring());
        if out.is_empty() {
            // The chunk's buffer becomes the queue (no move of each item:
            // that took an eighth of a Python scan of 50).
            *out = VecDeque::from(items);
            if !all_live {
                out.retain(|i| i.is_live(held, now));
            }
        } else if all_live {
            out.extend(items);
        } else {
            out.extend(items.into_iter().filter(|i| i.is_live(held, now)));
        }
        return horizon;
    }
    let mut sources: Vec<Vec<Item>> = chunks.into_iter().map(|c| c.items).collect();
    // (source, index) of the live items to emit, in order. Each source's
    // next key is decoded once, when it comes to the front.
    let mut picks: Vec<(usize, usize)> = Vec::new();
    {
        let mut pos = vec![0usize; sources.len()];
        let mut fronts: Vec<Option<&[u8]>> = sources
            .iter()
            .map(|s| s.first().map(|i| i.key(held)))
            .collect();
        loop {
            // The next key over all sources; on ties the newest source (the
            // lowest index) wins and the others' versions are dropped.
            let mut best: Option<(usize, &[u8])> = None;
            for (s, front) in fronts.iter().enumerate() {
                if let Some(k) = *front {
                    if best.is_none_or(|(_, b)| before(k, b)) {
                        best = Some((s, k));
                    }
                }
            }
            let Some((s, key)) = best else { break };
            if horizon.as_deref().is_some_and(|h| before(h, key)) {
                break;
            }
            let hidden = |key: &[u8]| hides.iter().any(|h| h.source < s && h.covers(key));
            if sources[s][pos[s]].is_live(held, now) && !hidden(key) {
                picks.push((s, pos[s]));
            }
            for t in 0..sources.len() {
                if t == s || fronts[t] == Some(key) {
                    pos[t] += 1;
                    fronts[t] = sources[t].get(pos[t]).map(|i| i.key(held));
                }
            }
        }
    }
    // Moved out of their sources, which are dropped right after (the
    // placeholder left behind is never read).
    out.extend(
        picks
            .into_iter()
            .map(|(s, i)| std::mem::replace(&mut sources[s][i], Item::Space { d: 0, i: 0 })),
    );
    horizon
}

impl Iter<'_> {
    /// Keys each source reads in the next refill: `CHUNK`, or fewer when
    /// fewer pairs are left to yield (`limit`).
    fn chunk(&self) -> usize {
        CHUNK.min(self.left).max(1)
    }

    /// Counts `item` against the limit.
    fn yielded(&mut self, item: Option<Item>) -> Option<Result<Item>> {
        let item = item?;
        self.left -= 1;
        Some(Ok(item))
    }

    /// The next item from the front, fetching as needed.
    fn advance_front(&mut self) -> Option<Result<Item>> {
        if let Some(e) = self.pending.take() {
            return Some(Err(e));
        }
        if self.left == 0 {
            return None;
        }
        loop {
            if let Some((d, i)) = self.front_runs.pop() {
                return self.yielded(Some(Item::Space { d, i }));
            }
            if let Some(item) = self.front.pop_front() {
                return self.yielded(Some(item));
            }
            if self.failed {
                return None;
            }
            if self.exhausted {
                // Only what the back fetched is left: its smallest first.
                Self::spill(&mut self.back_runs, &mut self.back);
                let item = self.back.pop_back();
                self.taken_across(item.as_ref(), false);
                return self.yielded(item);
            }
            if let Err(e) = self.fill(false) {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }

    /// The next item from the back, fetching as needed.
    fn advance_back(&mut self) -> Option<Result<Item>> {
        if let Some(e) = self.pending.take() {
            return Some(Err(e));
        }
        if self.left == 0 {
            return None;
        }
        loop {
            if let Some((d, i)) = self.back_runs.pop() {
                return self.yielded(Some(Item::Space { d, i }));
            }
            if let Some(item) = self.back.pop_front() {
                return self.yielded(Some(item));
            }
            if self.failed {
                return None;
            }
            if self.exhausted {
                Self::spill(&mut self.front_runs, &mut self.front);
                let item = self.front.pop_back();
                self.taken_across(item.as_ref(), true);
                return self.yielded(item);
            }
            if let Err(e) = self.fill(true) {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }

    /// Like [`Iterator::next`], but lends the pair instead of copying it
    /// into two new `Vec`s: the slices stay valid until the next call on
    /// this iterator. The way to read many pairs without an allocation
    /// each.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = flexdb::Db::open(dir.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
    /// db.put(b"a", b"1").unwrap();
    /// db.put(b"b", b"22").unwrap();
    /// let mut it = db.iter();
    /// let mut bytes = 0;
    /// while let Some(pair) = it.next_ref() {
    ///     let (key, value) = pair.unwrap();
    ///     bytes += key.len() + value.len();
    /// }
    /// assert_eq!(bytes, 5);
    /// ```
    pub fn next_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        if self.left > 0 {
            if let Some((d, i)) = self.front_runs.pop() {
                return Some(Ok(self.lend_held(d, i)));
            }
        }
        let next = self.advance_front()?;
        if let Some(ahead) = self.front.get(VALUE_AHEAD) {
            ahead.prefetch_value(&self.held);
        }
        Some(self.lend(next))
    }

    /// Whether the next [`Iter::next_ref`] (or `next`) answers from what
    /// the iterator has already fetched, without reading the store: a
    /// pop from memory, cheap enough for a binding to make while holding
    /// a global lock. `false`: it fetches the next chunk (which may read
    /// from disk).
    pub fn next_is_buffered(&self) -> bool {
        self.pending.is_some()
            || !self.front_runs.is_empty()
            || !self.front.is_empty()
            || self.failed
            || self.exhausted
    }

    /// [`Iter::next_is_buffered`] for [`Iter::next_back_ref`] (and
    /// `next_back`).
    pub fn next_back_is_buffered(&self) -> bool {
        self.pending.is_some()
            || !self.back_runs.is_empty()
            || !self.back.is_empty()
            || self.failed
            || self.exhausted
    }

    /// Like [`DoubleEndedIterator::next_back`], lending the pair as
    /// [`Iter::next_ref`] does.
    pub fn next_back_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        if self.left > 0 {
            if let Some((d, i)) = self.back_runs.pop() {
                return Some(Ok(self.lend_held(d, i)));
            }
        }
        let next = self.advance_back()?;
        if let Some(ahead) = self.back.get(VALUE_AHEAD) {
            ahead.prefetch_value(&self.held);
        }
        Some(self.lend(next))
    }

    /// [`Iter::next_ref`] with the pair's deadline (0: none), keys as
    /// stored (for copies that keep deadlines: backup).
    pub(crate) fn next_entry_ref(&mut self) -> Option<Result<EntryRef<'_>>> {
        let next = self.advance_front()?;
        Some(next.map(|item| {
            let item = self.lent.insert(item);
            let (k, v) = item.pair_ref(&self.held);
            (k, v, item.expires(&self.held))
        }))
    }

    /// Records that one end (the back, when `by_back`) took `item` from
    /// what the other end fetched: the region left to fetch becomes that
    /// key alone, on the side of the end that took it, so that a later
    /// seek of either end fetches it again exactly when that end's range
    /// then covers it (and no pair is yielded twice nor lost).
    fn taken_across(&mut self, item: Option<&Item>, by_back: bool) {
        let Some(item) = item else { return };
        let key = item.key(&self.held).to_vec();
        if by_back {
            self.lo = Bound::Included(key.clone());
            self.hi = Bound::Excluded(key);
        } else {
            self.lo = Bound::Excluded(key.clone());
            self.hi = Bound::Included(key);
        }
    }

    /// Moves what an end's runs hold into its buffer `queue`, ahead of
    /// what it buffers, for the operations that work on buffered items.
    fn spill(runs: &mut Runs, queue: &mut VecDeque<Item>) {
        if runs.is_empty() {
            return;
        }
        let mut items: VecDeque<Item> = runs.drain().map(|(d, i)| Item::Space { d, i }).collect();
        items.append(queue);
        *queue = items;
    }

    /// Lends pair `i` of held interval `d`, taken from a run, counting it
    /// against the limit: straight from the interval, with no item, and
    /// `lent` is not needed to keep it.
    #[inline]
    fn lend_held(&mut self, d: u32, i: u32) -> (&[u8], &[u8]) {
        self.left -= 1;
        let (k, v) = self.held.intervals[d as usize].pair(i as usize);
        (self.ks.map_or(k, |_| encoding::decode(k)), v)
    }

    /// Keeps `item` as the lent pair and borrows its key and value.
    fn lend(&mut self, item: Result<Item>) -> Result<(&[u8], &[u8])> {
        let item = self.lent.insert(item?);
        let (k, v) = item.pair_ref(&self.held);
        Ok((self.ks.map_or(k, |_| encoding::decode(k)), v))
    }

    /// The pair of `item`, copied, its key decoded when the iterator has
    /// a keyspace.
    fn own(&self, item: Item) -> KeyValue {
        let (k, v) = item.into_pair(&self.held);
        match self.ks {
            Some(_) => (encoding::decode_vec(k), v),
            None => (k, v),
        }
    }
}

impl Iterator for Iter<'_> {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.advance_front()?;
        Some(item.map(|i| self.own(i)))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let item = self.advance_back()?;
        Some(item.map(|i| self.own(i)))
    }
}
