//! The MemTable: the newest writes until the committer merges them into the
//! space.
//!
//! Every write is kept as its own version in an arena (`arena`), linked to
//! the previous version of its key. A hash table maps each key to its newest
//! version, so a point write or read costs one or two cache misses instead
//! of the twenty a skip list needs on a big table (docs/DESIGN.md has the
//! measurements). Ordered access (iterators, the committer) uses a sorted
//! *view*: the newest version of each key as of some number of writes,
//! built on demand by sorting and kept as three sorted runs (a large main
//! run, a middle run and a small tail), so that interleaved writes and
//! scans re-sort only the tail and copy the main run only when the middle
//! run outgrows `MID_MAX` keys.
//!
//! A reader at snapshot `s` follows a key's versions from the newest until
//! one has a sequence number `<= s`. Writers publish a sequence number only
//! after every version up to it is inserted, which makes a `WriteBatch`
//! visible all at once (and leaves room for snapshots).
//!
//! Invariants:
//! - One writer at a time (the `writer` mutex); readers never block writers
//!   and are never blocked by them: the hash table and the write order
//!   (`write_order`) are read without a lock.
//! - The current view is loaded without a lock; one reader at a time
//!   (`build`) extends and publishes it. A reader that finds the view stale
//!   while another builds it does not wait: it sorts the writes the view
//!   lacks into a private view of its own (unless those are many, as in a
//!   table frozen and not yet sorted, where building once beats sorting in
//!   every reader).
//! - A hash slot is published (`Release`) only after its entry is complete,
//!   and always names the newest version of its key; a table is replaced
//!   only by a complete copy, and replaced tables are kept until the
//!   MemTable drops, so a reader holding one never sees freed memory. A
//!   table made ahead (`ask_ahead`) is reachable by no reader until the
//!   writer swaps it in, rehashed. Only when the MemTable drops (no reader
//!   left: readers hold it by `Arc`) does its current table's memory, or
//!   the one made ahead, go to the pool for another MemTable; replaced
//!   tables are freed.
//! - Versions are never removed while the table lives; a deletion is a
//!   version without a value (a tombstone) so it can hide the pair in the
//!   space until it is committed.
//! - Every key summary of a table skips the same prefix (`hint`): given
//!   when the table is made, or fixed by the first summary made, and never
//!   changed after, since summaries under different prefixes do not
//!   compare. Fixing it reads the writer's state under the writer lock:
//!   the one time a reader (the first to sort) may wait for a writer.

use std::cmp::Ordering as CmpOrdering;
use std::ops::Bound;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};
use parking_lot::Mutex;

pub use crate::write::arena::EntryRef;
use crate::write::arena::{Arena, EntryPtr};
use crate::write::chunk_pool::{self, Chunk, ChunkPool};
use crate::write::hash_sizing::{grown_slots, projected_slots, slots_for};
use crate::write::range_tombstones::{RangeTombstone, RangeTombstones, TombstoneList};
use crate::write::write_order::WriteOrder;

/// A value version: `None` is a deletion.
pub type Version = Option<Box<[u8]>>;

/// Entries the sorted tail of a view may hold before it is merged into the
/// middle run...
const TAIL_MAX: usize = 128;
/// ...and entries the middle run may hold before it is merged into the main
/// run. A write seen by a scan then costs about `TAIL_MAX / 2 + MID_MAX /
/// TAIL_MAX + main / MID_MAX` entries merged, where one tail over the main
/// run cost `TAIL_MAX / 2 + main / TAIL_MAX` (docs/DESIGN.md, "Scans: the
/// misses of several intervals overlap").
const MID_MAX: usize = 8192;
/// Unsorted writes a reader sorts into a private view rather than wait for
/// the reader building the shared one.
const PRIVATE_MAX: usize = 1 << 14;
/// Keys a table made without a hint must hold for its first summary to take
/// their shared prefix as its hint (see [`MemTable::hint`]).
const HINT_MIN_KEYS: usize = 256;
/// Bytes counted per entry on top of the arena (hash slot and view slot).
const INDEX_OVERHEAD: usize = 32;
/// How far ahead of itself [`MemTable::newest`] asks for entries to be
/// loaded into the CPU cache...
const NEWEST_PREFETCH_AHEAD: usize = 16;
/// ...and how many of each entry's first bytes (header, key and the start
/// of the value).
const NEWEST_PREFETCH_BYTES: usize = 192;
/// How many hash slots ahead of itself the sort of a whole table asks for
/// the entry a slot names...
const SLOTS_PREFETCH_AHEAD: usize = 16;
/// ...and how many of its first bytes (header and key, for the summary).
const SLOTS_PREFETCH_BYTES: usize = 64;

/// The hash table: open addressing, linear probing. A slot holds the top 16
/// bits of the key's hash and a 48-bit entry pointer; 0 is empty.
struct Table {
    /// Slots less one (a power of two less one).
    mask: usize,
    mem: TableMemory,
}

/// Where a table's slots live.
enum TableMemory {
    /// A small table: the global allocator's.
    Heap(Box<[AtomicU64]>),
    /// A table of at least a chunk: a chunk of its own, which goes back to
    /// the MemTables' pool when the MemTable drops.
    Chunk(Chunk),
}

fn pack(hash: u32, e: EntryPtr) -> u64 {
    (u64::from(hash >> 16) << 48) | (e.as_ptr() as u64 & ((1 << 48) - 1))
}

fn unpack(slot: u64) -> Option<EntryPtr> {
    EntryPtr::from_raw((slot & ((1 << 48) - 1)) as *mut _)
}

fn hash(key: &[u8]) -> u32 {
    crc32c::crc32c(key)
}

// `Table::new` relies on it.
const _: () = assert!(
    size_of::<u64>() == size_of::<AtomicU64>() && align_of::<u64>() == align_of::<AtomicU64>()
);

/// The smallest table made ahead, off the writer lock, when a table
/// projects it will need it (`MemTable::ask_ahead`): 8 MiB of slots, which
/// a fresh fault costs tens of milliseconds to zero on a virtual machine.
const AHEAD_MIN_SLOTS: usize = 1 << 20;

/// Bytes of a page the kernel maps at a time (the smallest; a huge page is
/// faulted in by its first write all the same).
const PAGE: usize = 4096;

impl Table {
    /// An empty table of `slots` slots (a power of two). The slots come
    /// zeroed from the allocator (fresh pages for a big table, zeroed by
    /// the kernel as they are first touched), not written one by one: a
    /// table of millions of slots is made in microseconds.
    fn new(slots: usize) -> Table {
        Self::made(slots, None, false)
    }

    /// An empty table of `slots` slots (a power of two). A table of a
    /// chunk or more is a chunk of its own: one `pool` kept, zeroed here,
    /// when it has one of that size; else a new one whose pages are
    /// faulted in here when `fault_in` (so that a thread other than the
    /// writers pays for them; docs/DESIGN.md, "Hash tables made ahead"),
    /// or as they are first touched.
    fn made(slots: usize, pool: Option<&ChunkPool>, fault_in: bool) -> Table {
        debug_assert!(slots.is_power_of_two());
        let bytes = slots * size_of::<AtomicU64>();
        if bytes < chunk_pool::ALIGN {
            let zeros: Box<[u64]> = vec![0u64; slots].into_boxed_slice();
            // SAFETY: `AtomicU64` has the same size, alignment (asserted
            // above) and bit validity as `u64`, so the boxed slice of zeros
            // is a valid boxed slice of `AtomicU64` zeros with the same
            // allocation layout.
            let heap = unsafe { Box::from_raw(Box::into_raw(zeros) as *mut [AtomicU64]) };
            return Table {
                mask: slots - 1,
                mem: TableMemory::Heap(heap),
            };
        }
        let chunk = match pool.and_then(|p| p.take_table(bytes)) {
            Some(kept) => {
                // SAFETY: the chunk is ours, at least `bytes` long (a kept
                // table of this size) and nothing else refers to it.
                unsafe { std::ptr::write_bytes(kept.as_ptr(), 0, bytes) };
                kept
            }
            None => {
                let fresh = Chunk::new(bytes);
                if fault_in {
                    for at in (0..bytes).step_by(PAGE) {
                        // SAFETY: within the chunk, which is ours; writing
                        // the zero it holds changes no byte but faults the
                        // page in (volatile: the write is not elided).
                        unsafe { std::ptr::write_volatile(fresh.as_ptr().add(at), 0) };
                    }
                }
                fresh
            }
        };
        Table {
            mask: slots - 1,
            mem: TableMemory::Chunk(chunk),
        }
    }

    /// The slots.
    #[inline]
    fn slots(&self) -> &[AtomicU64] {
        match &self.mem {
            TableMemory::Heap(heap) => heap,
            // SAFETY: the chunk holds at least `mask + 1` slots' bytes,
            // `ALIGN`-aligned (enough for `AtomicU64`), zeroed when the
            // table was made and written since only through these atomics;
            // the table owns the chunk, which never moves, for as long as
            // the slice borrows `self`.
            TableMemory::Chunk(c) => unsafe {
                std::slice::from_raw_parts(c.as_ptr().cast::<AtomicU64>(), self.mask + 1)
            },
        }
    }

    /// The chunk of a table that has one, to keep for the next table.
    fn into_chunk(self) -> Option<Chunk> {
        match self.mem {
            TableMemory::Chunk(c) => Some(c),
            TableMemory::Heap(_) => None,
        }
    }

    /// The slot holding `key` or, if none does, the empty slot where it
    /// goes, and the entry found.
    fn probe(&self, key: &[u8], h: u32) -> (usize, Option<EntryPtr>) {
        let tag = u64::from(h >> 16);
        let slots = self.slots();
        let mut i = h as usize & self.mask;
        loop {
            let s = slots[i].load(Ordering::Acquire);
            let Some(e) = unpack(s) else {
                return (i, None);
            };
            // SAFETY: published entries live as long as the MemTable that
            // owns this table (tables never outlive it).
            if s >> 48 == tag && unsafe { e.key() } == key {
                return (i, Some(e));
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// Puts every key of `old` in `new` (empty, more than twice its keys'
/// slots), asking for the entries' headers ahead of the walk.
fn rehash(old: &Table, new: &Table) {
    let (from, to) = (old.slots(), new.slots());
    for (i, s) in from.iter().enumerate() {
        if let Some(ahead) = from
            .get(i + SLOTS_PREFETCH_AHEAD)
            .and_then(|s| unpack(s.load(Ordering::Relaxed)))
        {
            flexsys::prefetch::at(ahead.as_ptr().cast(), 1);
        }
        let v = s.load(Ordering::Relaxed);
        if let Some(e) = unpack(v) {
            // SAFETY: `e` is a published entry of the arena of the MemTable
            // both tables belong to.
            let h = unsafe { e.header() }.hash;
            let mut i = h as usize & new.mask;
            while to[i].load(Ordering::Relaxed) != 0 {
                i = (i + 1) & new.mask;
            }
            to[i].store(v, Ordering::Relaxed);
        }
    }
}

/// An entry of a sorted run: the key's summary (for comparisons that
/// touch no entry), the version, and its `meta` (sequence number and
/// flags: what a scan asks of it, so that it need not touch the entry;
/// the 32-byte element has room for it).
type Sorted = (u128, EntryPtr, u64);

/// `meta` flag: the version is a deletion.
const META_DELETED: u64 = 1 << 63;
/// `meta` flag: the version has a deadline.
const META_DEADLINE: u64 = 1 << 62;

/// The `meta` of version `e`.
fn meta_of(e: &EntryRef<'_>) -> u64 {
    let deleted = if e.value.is_none() { META_DELETED } else { 0 };
    let deadline = if e.expires != 0 { META_DEADLINE } else { 0 };
    debug_assert!(e.seq < META_DEADLINE);
    e.seq | deleted | deadline
}

/// The sequence number in a `meta`.
fn meta_seq(meta: u64) -> u64 {
    meta & !(META_DELETED | META_DEADLINE)
}

/// A sorted run: the newest version of each key, in key order.
type Run = Vec<Sorted>;

/// The newest version of each key among the first `upto` entries, sorted:
/// a main run, a middle run and a small tail run, each newer than the one
/// before it (the newer wins on equal keys).
pub(crate) struct SortedRuns {
    main: Arc<Run>,
    /// Every `SAMPLE_STRIDE`-th summary of `main`, for seeks (`lower`).
    main_sample: Arc<Vec<u128>>,
    mid: Arc<Run>,
    tail: Run,
    upto: usize,
}

/// Positions in a view's main, middle and tail runs.
type Pos = [usize; 3];

/// A key a scan found: its newest version visible at the scan's snapshot,
/// in the table's arena (read it with [`MemTable::found`] on the same
/// table), and whether the scan reads it as a value (`false`: deleted).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    entry: EntryPtr,
    live: bool,
    /// The version may have a deadline (`false`: it has none).
    deadline: bool,
}

impl Found {
    /// Whether the version may have a deadline: if not, whether it is
    /// read as a value is known without touching it (`live`).
    pub(crate) fn may_expire(self) -> bool {
        self.deadline
    }

    /// Whether the scan reads the version as a value, expiry aside.
    pub(crate) fn live(self) -> bool {
        self.live
    }
}

/// Entries a scan asks the cache for ahead of the one it reads, in each
/// run: entries lie in write order in the arena, so in key order each is a
/// cache miss, and a walk that waits for each in turn took 88 % of a
/// MemTable scan's time (docs/experiments/2026-12-06-memtable-scan-prefetch.md).
const PREFETCH_AHEAD: usize = 8;
/// Bytes of an entry prefetched by a scan: its header and the first 32
/// bytes of its key, which the iterator reads when it lends the pair (a
/// scan itself reads most versions from their run elements, and touches
/// an entry only for an old snapshot, a range delete or a far bound of
/// the same summary). Its value is asked for by the iterator just before
/// the pair is lent (`MemTable::prefetch_value`): a scan reads more pairs
/// than its caller takes (64 at a time), and prefetching the values of
/// all of them kept more lines in flight than the core tracks
/// (docs/experiments/2026-12-06-memtable-scan-prefetch.md).
const PREFETCH_ENTRY_BYTES: usize = 64;

/// Bytes of a value asked for ahead of its read (`prefetch_value`).
const PREFETCH_VALUE_BYTES: usize = 256;

/// The entry `k` places past `pos` in `run`, going forward or backward.
fn ahead(run: &Run, pos: usize, k: usize, forward: bool) -> Option<EntryPtr> {
    let at = if forward {
        pos.checked_add(k)?
    } else {
        pos.checked_sub(k + 1)?
    };
    run.get(at).map(|x| x.1)
}

/// Asks for the first entries a scan from `pos` will read (up to `max`
/// of each run, and at most `PREFETCH_AHEAD`).
fn prefetch_first(v: &SortedRuns, pos: &Pos, forward: bool, max: usize) {
    for (run, &p) in v.runs().iter().zip(pos) {
        for k in 0..PREFETCH_AHEAD.min(max) {
            match ahead(run, p, k, forward) {
                Some(e) => flexsys::prefetch::at(e.as_ptr().cast(), PREFETCH_ENTRY_BYTES),
                None => break,
            }
        }
    }
}

/// Asks for the entry `PREFETCH_AHEAD` places past each run's position,
/// after a step moved the positions.
fn prefetch_next(v: &SortedRuns, pos: &Pos, forward: bool) {
    for (run, &p) in v.runs().iter().zip(pos) {
        if let Some(e) = ahead(run, p, PREFETCH_AHEAD - 1, forward) {
            flexsys::prefetch::at(e.as_ptr().cast(), PREFETCH_ENTRY_BYTES);
        }
    }
}

impl SortedRuns {
    fn empty() -> SortedRuns {
        SortedRuns {
            main: Arc::new(Vec::new()),
            main_sample: Arc::new(Vec::new()),
            mid: Arc::new(Vec::new()),
            tail: Vec::new(),
            upto: 0,
        }
    }

    /// The runs, oldest first.
    fn runs(&self) -> [&Run; 3] {
        [&self.main, &self.mid, &self.tail]
    }

    /// The samples of the runs (only the main run has one).
    fn samples(&self) -> [&[u128]; 3] {
        [&self.main_sample, &[], &[]]
    }
}

/// Entries of a main run per summary in its sample: a seek searches the
/// sample, asks for the window of `SAMPLE_STRIDE` entries it leaves all at
/// once, then searches the window. (A plain binary search of a main run of
/// a million keys, 24 MiB, takes its last ten or so misses one after
/// another: a tenth of creating an iterator from Python.)
const SAMPLE_STRIDE: usize = 32;

/// The sample of `run`: every `SAMPLE_STRIDE`-th summary.
fn sample_of(run: &Run) -> Vec<u128> {
    run.iter().step_by(SAMPLE_STRIDE).map(|x| x.0).collect()
}

struct InsertSide {
    arena: Arena,
    /// Entries written.
    written: usize,
    /// Distinct keys (slots in use).
    keys: usize,
    /// The first key written and how much of it every key written shares.
    first: Vec<u8>,
    shared: usize,
    /// Whether a bigger table is being made ahead (`MemTable::ask_ahead`).
    ahead: Ahead,
}

/// The table made ahead of a growth, as the writer knows it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ahead {
    /// Not yet asked: the table has not reached its projection point.
    NotAsked,
    /// Being made on a thread of its own, or made (`MemTable::ahead`).
    Asked,
    /// Asked and used, or not needed: tables grow on the writer's thread.
    Settled,
}

/// A loaded view: the published one, or a reader's private one.
pub(crate) type SortedRunsRef = Guard<Arc<SortedRuns>>;

/// An ordered table of write versions: one writer at a time (the store's
/// writer lock), any number of concurrent readers.
pub struct MemTable {
    /// The bytes at which the table is frozen (0: unknown), for sizing its
    /// hash table (`hash_sizing`).
    expected_bytes: usize,
    /// The prefix the keys' summaries skip (see [`summary`]): given, or
    /// else fixed by the first summary made ([`MemTable::hint`]).
    hint: OnceLock<Box<[u8]>>,
    writer: Mutex<InsertSide>,
    table: AtomicPtr<Table>,
    /// Where the hash table's memory comes from and goes back to.
    pool: Option<Arc<ChunkPool>>,
    /// A bigger hash table made off the writer lock (`ask_ahead`), once
    /// ready.
    ahead: Arc<Mutex<Option<Table>>>,
    /// Tables replaced by bigger ones, freed when the MemTable drops
    /// (readers may still hold references to them until then).
    retired: Mutex<Vec<Retired>>,
    /// The write order, appended by the writer, copied by view builders.
    order: WriteOrder,
    /// Entries published.
    len: AtomicUsize,
    bytes: AtomicUsize,
    /// The newest published sorted view.
    view: ArcSwap<SortedRuns>,
    /// Held by the one reader extending and publishing `view`.
    build: Mutex<()>,
    /// Its range deletes (`range_tombstones`).
    ranges: RangeTombstones,
    /// The heads (`head_of`) of the smallest and the largest key written
    /// (`u64::MAX` and 0 while none is), stored before the entry is
    /// published: a scan whose range lies wholly outside them skips the
    /// table without sorting it (`may_hold`).
    heads: [AtomicU64; 2],
}

/// A key's first eight bytes, big-endian, zero-padded: `a < b` implies
/// `head_of(a) <= head_of(b)`.
fn head_of(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

impl Default for MemTable {
    fn default() -> Self {
        Self::new()
    }
}

/// A hash table replaced by a bigger one: readers that loaded it before
/// may still read it, so it lives, unowned by any `Box`, until the MemTable
/// drops.
struct Retired(*mut Table);

// SAFETY: a retired table is only read (its slots are atomics) until it is
// freed, once, by the MemTable's drop, which no reader outlives.
unsafe impl Send for Retired {}

impl Drop for Retired {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::into_raw` and is freed only
        // here; a `Retired` drops only with its MemTable (`&mut`: no reader
        // holds the table any more).
        drop(unsafe { Box::from_raw(self.0) });
    }
}

impl Drop for MemTable {
    fn drop(&mut self) {
        let t = *self.table.get_mut();
        // SAFETY: the table was created by `Box::into_raw` and, with `&mut
        // self`, no reader can hold it any more.
        let table = unsafe { Box::from_raw(t) };
        // A table made ahead and never swapped in is as good for the next
        // MemTable (the pool keeps the newest it is given).
        let made = self.ahead.lock().take();
        if let Some(pool) = &self.pool {
            for chunk in [made, Some(*table)]
                .into_iter()
                .flatten()
                .filter_map(Table::into_chunk)
            {
                pool.give_table(chunk);
            }
        }
    }
}

/// The first 16 bytes of a key as a big-endian number (zero padded): equal
/// prefixes fall back to a full comparison.
/// An order-preserving 128-bit summary of a key, given a prefix `hint`
/// that most keys share: keys sorted by (summary, key) are sorted by key,
/// whatever the hint. A key that starts with the hint gets tag 1 and the
/// 15 bytes after the hint, so keys sharing a long prefix (`user000…`)
/// still differ in their summaries and compare without touching their
/// entries; other keys sort wholly below (tag 0) or above (tag 2) them,
/// each tag ordered by the key's first 15 bytes.
#[inline]
fn summary(hint: &[u8], key: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    let rest = match key.strip_prefix(hint) {
        Some(rest) => {
            b[0] = 1;
            rest
        }
        None => {
            b[0] = if key < hint { 0 } else { 2 };
            key
        }
    };
    let n = rest.len().min(15);
    b[1..1 + n].copy_from_slice(&rest[..n]);
    u128::from_be_bytes(b)
}

/// Length of the common prefix of `a` and `b`.
fn common_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl MemTable {
    /// An empty table (whose keys' prefix is found when it is first
    /// sorted).
    pub fn new() -> Self {
        Self::with_hint(&[])
    }

    /// An empty table whose keys are expected to share `hint` (any hint is
    /// correct; a shared one makes ordering cheaper).
    pub fn with_hint(hint: &[u8]) -> Self {
        Self::pooled(hint, None)
    }

    /// An empty table whose keys are expected to share `hint`, whose memory
    /// comes from `pool` (when given) and goes back to it when the table
    /// drops.
    pub(crate) fn pooled(hint: &[u8], pool: Option<Arc<ChunkPool>>) -> Self {
        Self::sized(hint, pool, 0, 0, false)
    }

    /// [`MemTable::pooled`], for a table frozen at `expected_bytes` (0:
    /// unknown) that will likely hold about `expected_keys` keys (0:
    /// unknown): its hash table is sized for them (`hash_sizing`), so it
    /// rarely grows under the writer lock. The table is one `pool` kept
    /// when it has one of that size, else a new one faulted in here when
    /// `fault_in` (for a MemTable made off the writer lock).
    pub(crate) fn sized(
        hint: &[u8],
        pool: Option<Arc<ChunkPool>>,
        expected_bytes: usize,
        expected_keys: usize,
        fault_in: bool,
    ) -> Self {
        let table = Table::made(slots_for(expected_keys), pool.as_deref(), fault_in);
        MemTable {
            expected_bytes,
            hint: match hint {
                [] => OnceLock::new(),
                h => OnceLock::from(Box::from(h)),
            },
            writer: Mutex::new(InsertSide {
                arena: Arena::with_pool(pool.clone()),
                written: 0,
                keys: 0,
                first: Vec::new(),
                shared: 0,
                ahead: Ahead::NotAsked,
            }),
            table: AtomicPtr::new(Box::into_raw(Box::new(table))),
            pool,
            ahead: Arc::new(Mutex::new(None)),
            retired: Mutex::new(Vec::new()),
            order: WriteOrder::default(),
            len: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            view: ArcSwap::from_pointee(SortedRuns::empty()),
            build: Mutex::new(()),
            ranges: RangeTombstones::default(),
            heads: [AtomicU64::new(u64::MAX), AtomicU64::new(0)],
        }
    }

    fn table(&self) -> &Table {
        // SAFETY: the pointer always names a live table: the current one is
        // freed only on drop, replaced ones are kept in `retired` until then.
        unsafe { &*self.table.load(Ordering::Acquire) }
    }

    /// An entry of this table, borrowed for the table's lifetime.
    fn entry(&self, e: EntryPtr) -> EntryRef<'_> {
        // SAFETY: every `EntryPtr` this table hands around points into its
        // own arena, which lives as long as `self`.
        unsafe { e.get() }
    }

    /// The previous version of `e`'s key.
    fn prev(&self, e: EntryPtr) -> Option<EntryPtr> {
        // SAFETY: as in `entry`.
        EntryPtr::from_raw(unsafe { e.header() }.prev.cast_mut())
    }

    /// Checks what the module docs promise, panicking with what is wrong
    /// (takes the writer lock, so no write runs meanwhile): the published
    /// length and byte count match the writer's; every entry in the write
    /// order is linked to the previous write of its key, whose sequence
    /// number is lower, or to nothing if it is the key's first; the hash
    /// table names exactly the newest version of every key, one slot a key,
    /// at most half full; the published sorted view covers no more than
    /// was written, and each of its runs holds distinct keys in strictly
    /// increasing order.
    #[cfg(any(test, debug_assertions))]
    pub fn check_invariants(&self) {
        let w = self.writer.lock();
        let written = w.written;
        assert_eq!(
            self.len(),
            written,
            "memtable: len is not the entries written"
        );
        assert_eq!(
            self.bytes.load(Ordering::Relaxed),
            w.arena.used() + written * INDEX_OVERHEAD,
            "memtable: the byte count is not the arena's and the index's"
        );
        let mut newest: std::collections::HashMap<&[u8], EntryPtr> =
            std::collections::HashMap::new();
        for (i, e) in self.order.copy(0, written).into_iter().enumerate() {
            let entry = self.entry(e);
            let before = newest.get(entry.key).copied();
            match self.prev(e) {
                Some(p) => {
                    let older = self.entry(p);
                    assert_eq!(
                        before,
                        Some(p),
                        "memtable: entry {i} is not linked to its key's previous write"
                    );
                    assert!(
                        older.seq < entry.seq,
                        "memtable: entry {i} (seq {}) is not newer than its previous version (seq {})",
                        entry.seq,
                        older.seq
                    );
                }
                None => assert!(
                    before.is_none(),
                    "memtable: entry {i} is not linked to its key's earlier version"
                ),
            }
            newest.insert(entry.key, e);
        }
        assert_eq!(
            newest.len(),
            w.keys,
            "memtable: the distinct key count is off"
        );
        let table = self.table();
        let used = table
            .slots()
            .iter()
            .filter(|s| s.load(Ordering::Acquire) != 0)
            .count();
        assert_eq!(
            used, w.keys,
            "memtable: hash slots in use are not one a key"
        );
        assert!(
            w.keys * 2 <= table.slots().len(),
            "memtable: the hash table is more than half full"
        );
        for (key, e) in &newest {
            assert_eq!(
                table.probe(key, hash(key)).1,
                Some(*e),
                "memtable: the hash table does not name the newest version of a key"
            );
        }
        drop(w);
        let v = self.view.load();
        assert!(
            v.upto <= written,
            "memtable: the view covers unwritten entries"
        );
        for run in v.runs() {
            for pair in run.windows(2) {
                assert_eq!(
                    self.cmp_key(&pair[0], &pair[1]),
                    CmpOrdering::Less,
                    "memtable: a sorted run is not in strictly increasing key order"
                );
            }
        }
    }

    /// Records a write of `key` at `seq` (a deletion when `value` is `None`).
    pub fn insert(&self, key: &[u8], seq: u64, value: Option<&[u8]>) {
        self.insert_hashed(key, hash(key), seq, value, 0);
    }

    /// Records a put of `key` at `seq` whose value expires at `expires`
    /// (Unix milliseconds; 0: never).
    pub fn insert_expiring(&self, key: &[u8], seq: u64, value: &[u8], expires: u64) {
        self.insert_hashed(key, hash(key), seq, Some(value), expires);
    }

    /// [`MemTable::insert`] with the key's hash as [`MemTable::warm`]
    /// returned it (a function of the key alone, so any table's `warm`
    /// will do), and the value's deadline (0: none).
    pub fn insert_hashed(&self, key: &[u8], h: u32, seq: u64, value: Option<&[u8]>, expires: u64) {
        debug_assert_eq!(h, hash(key));
        let mut w = self.writer.lock();
        if w.written == 0 {
            w.first = key.to_vec();
            w.shared = key.len();
        } else if w.shared > 0 {
            w.shared = w.shared.min(common_len(&w.first, key));
        }
        let head = head_of(key);
        // (Only the writer stores them; readers see them by the `Release`
        // stores that publish the entry.)
        if head < self.heads[0].load(Ordering::Relaxed) {
            self.heads[0].store(head, Ordering::Relaxed);
        }
        if head > self.heads[1].load(Ordering::Relaxed) {
            self.heads[1].store(head, Ordering::Relaxed);
        }
        let table = self.table();
        let (slot, found) = table.probe(key, h);
        let e = w.arena.push(key, seq, value, expires, found, h);
        self.order.set(w.written, e);
        w.written += 1;
        table.slots()[slot].store(pack(h, e), Ordering::Release);
        let bytes = w.arena.used() + w.written * INDEX_OVERHEAD;
        if found.is_none() {
            w.keys += 1;
            if w.ahead == Ahead::NotAsked {
                self.ask_ahead(&mut w, table.slots().len(), bytes);
            }
            if w.keys * 2 > table.slots().len() {
                self.grow(&mut w, table, bytes);
            }
        }
        self.bytes.store(bytes, Ordering::Relaxed);
        self.len.store(w.written, Ordering::Release);
    }

    /// Whether some key written before the reader's `Acquire` of the
    /// table's length (or of a sequence number published after it) may lie
    /// between `lo` and `hi`: false when every such key is below `lo` or
    /// above `hi` by its first eight bytes alone, or none was written. A
    /// scan of another keyspace than the table's keys (the expiry thread's
    /// walk of its queue every second, a server's other databases) then
    /// neither sorts the table nor reads it.
    pub(crate) fn may_hold(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        let (min, max) = (
            self.heads[0].load(Ordering::Relaxed),
            self.heads[1].load(Ordering::Relaxed),
        );
        if min > max {
            return false;
        }
        let below = match lo {
            Bound::Included(k) | Bound::Excluded(k) => max < head_of(k),
            Bound::Unbounded => false,
        };
        let above = match hi {
            Bound::Included(k) | Bound::Excluded(k) => min > head_of(k),
            Bound::Unbounded => false,
        };
        !(below || above)
    }

    /// Records a range delete of every key `start <= k < end` (`end`
    /// unset: to the last key) at `seq` (`range_tombstones`).
    pub fn delete_range(&self, start: &[u8], end: Option<&[u8]>, seq: u64) {
        self.ranges.push(start, end, seq);
    }

    /// Its range deletes numbered `<= snapshot`.
    pub(crate) fn range_tombstones(&self, snapshot: u64) -> Vec<RangeTombstone> {
        self.ranges.visible(snapshot)
    }

    /// All its range deletes, sorted for lookups (`None`: it has none).
    pub(crate) fn range_list(&self) -> Option<Arc<TombstoneList>> {
        self.ranges.list()
    }

    /// Brings what an insert of `key` will read (its hash slot and the
    /// key's newest entry) into this core's cache, without a lock, so that
    /// the insert, which runs under the store's writer lock, does not wait
    /// for memory there. Only a hint: the table may change meanwhile.
    /// Returns the key's hash, for [`MemTable::insert_hashed`].
    pub fn warm(&self, key: &[u8]) -> u32 {
        let h = hash(key);
        let _ = std::hint::black_box(self.table().probe(key, h));
        h
    }

    /// Once the table holds enough of its bytes to project the keys it
    /// will hold when full (`hash_sizing`), and that takes a table of at
    /// least `AHEAD_MIN_SLOTS` more than twice its `slots`, has that table
    /// made on a thread of its own: faulting in tens of megabytes of fresh
    /// pages under the writer lock held writers up for 200 ms in a 10 M
    /// load (docs/DESIGN.md, "Hash tables made ahead"). Until it is ready,
    /// the table doubles as before (writer only).
    fn ask_ahead(&self, w: &mut InsertSide, slots: usize, bytes: usize) {
        let Some(wanted) = projected_slots(w.keys, bytes, self.expected_bytes) else {
            return;
        };
        w.ahead = Ahead::Settled;
        if wanted < AHEAD_MIN_SLOTS || wanted <= slots.saturating_mul(2) {
            return;
        }
        let (ready, pool) = (self.ahead.clone(), self.pool.clone());
        let spawned = std::thread::Builder::new()
            .name("flexdb-table-ahead".into())
            .spawn(move || {
                let table = Table::made(wanted, pool.as_deref(), true);
                *ready.lock() = Some(table);
            });
        if spawned.is_ok() {
            w.ahead = Ahead::Asked;
        }
    }

    /// Replaces the table by a bigger one, more than twice the keys: the
    /// one made ahead when it is ready and big enough, else one of the
    /// size `hash_sizing` gives, or twice the old one while one is being
    /// made ahead (writer only).
    fn grow(&self, w: &mut InsertSide, old: &Table, bytes: usize) {
        let doubled = old.slots().len() * 2;
        let wanted = grown_slots(old.slots().len(), w.keys, bytes, self.expected_bytes);
        let made = match w.ahead {
            Ahead::Asked => self.ahead.lock().take(),
            _ => None,
        };
        let new = match made {
            Some(t) if t.slots().len() >= doubled => {
                w.ahead = Ahead::Settled;
                t
            }
            Some(_too_small) => {
                w.ahead = Ahead::Settled;
                Table::made(wanted, self.pool.as_deref(), false)
            }
            None if w.ahead == Ahead::Asked => Table::new(doubled),
            None => Table::made(wanted, self.pool.as_deref(), false),
        };
        rehash(old, &new);
        let old_ptr = self
            .table
            .swap(Box::into_raw(Box::new(new)), Ordering::AcqRel);
        // Kept as a raw pointer, not turned back into a `Box` (which would
        // claim it unique while `old` and readers still borrow it: Miri's
        // Stacked Borrows check caught that).
        self.retired.lock().push(Retired(old_ptr));
    }

    /// The newest version of `key` with a sequence number `<= snapshot`:
    /// `Some(None)` for a deletion, `None` when the table has no version.
    #[cfg(test)]
    pub fn get(&self, key: &[u8], snapshot: u64) -> Option<Version> {
        Some(self.get_ref(key, snapshot)?.map(Box::from))
    }

    /// [`MemTable::get_ref`] with the value's deadline (0: none).
    #[cfg(test)]
    pub fn get_expiring(&self, key: &[u8], snapshot: u64) -> Option<Option<(&[u8], u64)>> {
        self.get_ref_hashed(key, hash(key), snapshot)
    }

    /// [`MemTable::get`] without a copy: the value borrowed from the
    /// table's arena, valid for as long as the table is.
    #[cfg(test)]
    pub fn get_ref(&self, key: &[u8], snapshot: u64) -> Option<Option<&[u8]>> {
        Some(
            self.get_ref_hashed(key, hash(key), snapshot)?
                .map(|(v, _)| v),
        )
    }

    /// [`get_ref`](Self::get_ref) for a key whose `crc32c` is `h` (the
    /// table's hash), with the value's deadline (0: none; expired or not:
    /// the reader judges, and an expired version hides older ones as a
    /// deletion does).
    pub fn get_ref_hashed(
        &self,
        key: &[u8],
        h: u32,
        snapshot: u64,
    ) -> Option<Option<(&[u8], u64)>> {
        debug_assert_eq!(h, hash(key));
        // An empty table (the active one after a commit, in read-mostly
        // work) costs no probe of its slots. A reader that loaded the
        // visible sequence number after a write (Release after `len`) sees
        // that write counted.
        if self.len.load(Ordering::Acquire) == 0 {
            // (A table of range deletes alone hides what they cover.)
            return self.ranges.covering(key, snapshot).map(|_| None);
        }
        let (_, found) = self.table().probe(key, h);
        let e = found.and_then(|f| self.visible(f, snapshot));
        if let Some(t) = self.ranges.covering(key, snapshot) {
            // A range delete after the key's newest visible version (or
            // with none here) removes it, and every older version.
            if e.is_none_or(|e| self.entry(e).seq < t) {
                return Some(None);
            }
        }
        let entry = self.entry(e?);
        Some(entry.value.map(|v| (v, entry.expires)))
    }

    /// The sequence number of the newest write of `key` in the table, a
    /// version or a range delete covering it, if it has one (for a
    /// transaction's validation, under the writer lock).
    pub fn newest_seq(&self, key: &[u8]) -> Option<u64> {
        let (_, found) = self.table().probe(key, hash(key));
        let point = found.map(|f| self.entry(f).seq);
        point.max(self.ranges.covering(key, u64::MAX))
    }

    /// Whether a key between `from` and `end` has a version with a
    /// sequence number above `after` (for a transaction's validation,
    /// under the writer lock, so the sorted view covers every write).
    /// (A range delete numbered above `after` that shares a key with the
    /// range counts, whether or not it removed anything.)
    pub fn changed_in_range(&self, from: Bound<&[u8]>, end: Bound<&[u8]>, after: u64) -> bool {
        if self.ranges.newer_overlapping(from, end, after) {
            return true;
        }
        let (v, _) = self.sorted_runs();
        let (runs, samples) = (v.runs(), v.samples());
        let mut pos: Pos = std::array::from_fn(|r| self.start(runs[r], samples[r], from));
        while let Some(pick) = self.step(&v, &mut pos, true) {
            let e = self.entry(pick.1);
            if !within_end(e.key, end) {
                return false;
            }
            if e.seq > after {
                return true;
            }
        }
        false
    }

    /// The newest version at or after `e` with a sequence number
    /// `<= snapshot`.
    fn visible(&self, mut e: EntryPtr, snapshot: u64) -> Option<EntryPtr> {
        while self.entry(e).seq > snapshot {
            e = self.prev(e)?;
        }
        Some(e)
    }

    /// The prefix every summary of this table skips. A table made without
    /// one (the first after an open) takes, when its first summary is
    /// made, the prefix its keys share by then if it holds `HINT_MIN_KEYS`
    /// keys or more (fewer say little about the keys to come), else none.
    /// Fixed from then on: summaries made under different hints do not
    /// compare.
    fn hint(&self) -> &[u8] {
        self.hint.get_or_init(|| {
            let w = self.writer.lock();
            if w.keys >= HINT_MIN_KEYS {
                w.first[..w.shared].into()
            } else {
                Box::default()
            }
        })
    }

    /// The prefix every key written so far shares (a hint for the next
    /// table).
    pub fn shared_prefix(&self) -> Vec<u8> {
        let w = self.writer.lock();
        w.first[..w.shared].to_vec()
    }

    /// Approximate memory held, in bytes.
    pub fn approximate_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed) + self.ranges.bytes()
    }

    /// Distinct keys written (waits for a writer inserting).
    pub fn keys(&self) -> usize {
        self.writer.lock().keys
    }

    /// Slots of the hash table (tests of its sizing).
    #[cfg(test)]
    pub(crate) fn slots(&self) -> usize {
        self.table().slots().len()
    }

    /// Number of versions.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Whether the table holds no write (no version, no range delete).
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.ranges.is_empty()
    }

    /// Orders `(prefix, entry)` by key ascending, then newest first.
    fn cmp_entries(&self, a: &Sorted, b: &Sorted) -> CmpOrdering {
        a.0.cmp(&b.0).then_with(|| {
            let (x, y) = (self.entry(a.1), self.entry(b.1));
            x.key.cmp(y.key).then_with(|| y.seq.cmp(&x.seq))
        })
    }

    /// Version `e` as an element of a sorted run, under `hint`.
    fn sorted(&self, hint: &[u8], e: EntryPtr) -> Sorted {
        let r = self.entry(e);
        (summary(hint, r.key), e, meta_of(&r))
    }

    /// The newest version of each key among `entries`, sorted by key.
    fn sort_newest(&self, entries: &[EntryPtr]) -> Run {
        if entries.is_empty() {
            // (No summary: the first one made fixes the hint.)
            return Vec::new();
        }
        let hint = self.hint();
        let mut run: Run = entries.iter().map(|&e| self.sorted(hint, e)).collect();
        run.sort_unstable_by(|a, b| self.cmp_entries(a, b));
        run.dedup_by(|later, first| {
            first.0 == later.0 && self.entry(first.1).key == self.entry(later.1).key
        });
        run
    }

    /// Merges two sorted runs; on equal keys `newer` wins.
    fn merge_runs(&self, older: &Run, newer: &Run) -> Run {
        let mut out = Vec::with_capacity(older.len() + newer.len());
        let (mut i, mut j) = (0, 0);
        while i < older.len() && j < newer.len() {
            match self.cmp_key(&older[i], &newer[j]) {
                CmpOrdering::Less => {
                    out.push(older[i]);
                    i += 1;
                }
                CmpOrdering::Greater => {
                    out.push(newer[j]);
                    j += 1;
                }
                CmpOrdering::Equal => {
                    out.push(newer[j]);
                    i += 1;
                    j += 1;
                }
            }
        }
        out.extend_from_slice(&older[i..]);
        out.extend_from_slice(&newer[j..]);
        out
    }

    fn cmp_key(&self, a: &Sorted, b: &Sorted) -> CmpOrdering {
        a.0.cmp(&b.0)
            .then_with(|| self.entry(a.1).key.cmp(self.entry(b.1).key))
    }

    /// The next key of the view's runs merged, from positions `pos`,
    /// moving them past it: going forward, the smallest key at the
    /// positions; backward, the largest key just below them. On equal keys
    /// the newest run's entry wins and every run holding the key moves.
    /// `None` when all are exhausted.
    fn step(&self, v: &SortedRuns, pos: &mut Pos, forward: bool) -> Option<Sorted> {
        let runs = v.runs();
        let mut best: Option<Sorted> = None;
        // The runs whose entry at their position holds `best`'s key.
        let mut tied = [false; 3];
        for (r, run) in runs.iter().enumerate() {
            let at = if forward {
                run.get(pos[r]).copied()
            } else {
                pos[r].checked_sub(1).map(|k| run[k])
            };
            let Some(c) = at else { continue };
            let Some(b) = best else {
                best = Some(c);
                tied[r] = true;
                continue;
            };
            match self.cmp_key(&c, &b) {
                CmpOrdering::Equal => {
                    best = Some(c);
                    tied[r] = true;
                }
                o if (o == CmpOrdering::Less) == forward => {
                    best = Some(c);
                    tied = [false; 3];
                    tied[r] = true;
                }
                _ => {}
            }
        }
        for (p, _) in pos.iter_mut().zip(tied).filter(|(_, t)| *t) {
            if forward {
                *p += 1
            } else {
                *p -= 1
            }
        }
        best
    }

    /// A sorted view of every entry written so far, and how long the call
    /// waited, if it did: only when many writes are unsorted (a table just
    /// frozen) and another reader is sorting them.
    pub(crate) fn sorted_runs(&self) -> (SortedRunsRef, Option<Duration>) {
        let cur = self.view.load();
        // Read the length after the view: a view covering more than it
        // (published meanwhile) is as good, since readers filter by
        // snapshot.
        let upto = self.len();
        if cur.upto >= upto {
            return (cur, None);
        }
        let mut waited = None;
        let builder = if upto - cur.upto > PRIVATE_MAX {
            Some(lock_timed(&self.build, &mut waited))
        } else {
            self.build.try_lock()
        };
        let Some(_builder) = builder else {
            // Another reader is publishing a view: sort what this one lacks
            // into a private view instead of waiting for it.
            let v = self.extended(&cur, upto, false);
            return (Guard::from_inner(Arc::new(v)), waited);
        };
        let cur = self.view.load_full();
        let upto = self.len();
        if cur.upto >= upto {
            return (Guard::from_inner(cur), waited);
        }
        let v = Arc::new(self.extended(&cur, upto, true));
        self.view.store(v.clone());
        (Guard::from_inner(v), waited)
    }

    /// `cur` extended to the first `upto` entries. Only the writes since
    /// `cur` need sorting: its tail holds the ones before them already and
    /// takes them by a linear merge, so a scan after each write costs
    /// O(tail), not a sort of the whole tail. When `fold` (a view to
    /// publish; a private one is used once), a tail grown past `TAIL_MAX`
    /// is merged into the middle run, and a middle run grown past
    /// `MID_MAX` into the main run.
    fn extended(&self, cur: &SortedRuns, upto: usize, fold: bool) -> SortedRuns {
        let new = self.order.copy(cur.upto, upto);
        let fresh = self.sort_newest(&new);
        let tail = if cur.tail.is_empty() {
            fresh
        } else {
            self.merge_runs(&cur.tail, &fresh)
        };
        let (mut main, mut mid) = (cur.main.clone(), cur.mid.clone());
        let mut main_sample = cur.main_sample.clone();
        if tail.len() <= TAIL_MAX || !fold {
            return SortedRuns {
                main,
                main_sample,
                mid,
                tail,
                upto,
            };
        }
        let merged = if mid.is_empty() {
            tail
        } else {
            self.merge_runs(&mid, &tail)
        };
        if merged.len() <= MID_MAX {
            mid = Arc::new(merged);
        } else {
            // (A first sort of many writes has no main run to merge with:
            // copying the run into a new one took a quarter of sorting a
            // million.)
            main = Arc::new(if main.is_empty() {
                merged
            } else {
                self.merge_runs(&main, &merged)
            });
            main_sample = Arc::new(sample_of(&main));
            mid = Arc::new(Vec::new());
        }
        SortedRuns {
            main,
            main_sample,
            mid,
            tail: Vec::new(),
            upto,
        }
    }

    /// Index of the first element of `run` at or after (after, when
    /// `exclusive`) `key`; `sample` is the run's sample or empty.
    fn lower(&self, run: &Run, sample: &[u128], key: &[u8], exclusive: bool) -> usize {
        if run.is_empty() {
            // (No summary: the first one made fixes the hint.)
            return 0;
        }
        let p = summary(self.hint(), key);
        // Summaries order keys (a key's summary is at most a greater key's),
        // so the answer lies after every sampled entry of a smaller summary
        // and at or before every one of a greater summary.
        let (mut lo, mut hi) = (0, run.len());
        if !sample.is_empty() {
            let below = sample.partition_point(|&s| s < p);
            let at_most = below + sample[below..].partition_point(|&s| s <= p);
            if below > 0 {
                lo = (below - 1) * SAMPLE_STRIDE + 1;
            }
            hi = hi.min(at_most * SAMPLE_STRIDE);
            if hi - lo <= SAMPLE_STRIDE {
                let window = &run[lo..hi];
                flexsys::prefetch::at(window.as_ptr().cast(), size_of_val(window));
            }
        }
        lo + run[lo..hi].partition_point(|x| match x.0.cmp(&p) {
            CmpOrdering::Less => true,
            CmpOrdering::Greater => false,
            CmpOrdering::Equal => {
                let k = self.entry(x.1).key;
                if exclusive {
                    k <= key
                } else {
                    k < key
                }
            }
        })
    }

    fn start(&self, run: &Run, sample: &[u128], from: Bound<&[u8]>) -> usize {
        match from {
            Bound::Included(k) => self.lower(run, sample, k, false),
            Bound::Excluded(k) => self.lower(run, sample, k, true),
            Bound::Unbounded => 0,
        }
    }

    fn end(&self, run: &Run, sample: &[u128], from: Bound<&[u8]>) -> usize {
        match from {
            Bound::Included(k) => self.lower(run, sample, k, true),
            Bound::Excluded(k) => self.lower(run, sample, k, false),
            Bound::Unbounded => run.len(),
        }
    }

    /// Up to `max` keys after `from` (in key order, visible at `snapshot`),
    /// each with its newest visible version and that version's deadline
    /// (0: none), stopping at `end`, copied out. Returns how long it
    /// waited for the table's locks, if it did. (Iterators borrow instead:
    /// [`MemTable::scan_entries`].)
    pub fn scan_forward(
        &self,
        from: Bound<&[u8]>,
        end: Bound<&[u8]>,
        snapshot: u64,
        max: usize,
        out: &mut Vec<(Box<[u8]>, Version, u64)>,
    ) -> Option<Duration> {
        self.scan_copied(from, end, snapshot, max, true, out)
    }

    /// Like [`MemTable::scan_forward`] in reverse: up to `max` keys before
    /// `from`, in descending order, stopping at `end` (a lower bound).
    #[cfg(test)]
    pub fn scan_backward(
        &self,
        from: Bound<&[u8]>,
        end: Bound<&[u8]>,
        snapshot: u64,
        max: usize,
        out: &mut Vec<(Box<[u8]>, Version, u64)>,
    ) -> Option<Duration> {
        self.scan_copied(from, end, snapshot, max, false, out)
    }

    fn scan_copied(
        &self,
        from: Bound<&[u8]>,
        end: Bound<&[u8]>,
        snapshot: u64,
        max: usize,
        forward: bool,
        out: &mut Vec<(Box<[u8]>, Version, u64)>,
    ) -> Option<Duration> {
        self.scan_entries(from, end, snapshot, max, forward, |found| {
            // SAFETY: `found` comes from this table's own scan.
            let (key, value, expires) = unsafe { self.found(found) };
            out.push((key.into(), value.map(Box::from), expires));
        })
    }

    /// Up to `max` keys from `from` (after it going forward, before it
    /// backward, in key order), each found with its newest version visible
    /// at `snapshot` and handed to `push` without a copy, stopping at `end`
    /// (the far bound). Returns how long it waited for the table's locks,
    /// if it did. Used by iterators, which refill in chunks.
    pub(crate) fn scan_entries(
        &self,
        from: Bound<&[u8]>,
        end: Bound<&[u8]>,
        snapshot: u64,
        max: usize,
        forward: bool,
        mut push: impl FnMut(Found),
    ) -> Option<Duration> {
        let (v, waited) = self.sorted_runs();
        let (runs, samples) = (v.runs(), v.samples());
        let mut pos: Pos = std::array::from_fn(|r| {
            if forward {
                self.start(runs[r], samples[r], from)
            } else {
                self.end(runs[r], samples[r], from)
            }
        });
        prefetch_first(&v, &pos, forward, max);
        // The far bound's summary: an entry whose summary lies strictly
        // within it lies within it (summaries keep the keys' order), so
        // most steps read nothing of the entry but its run element.
        let far = match end {
            Bound::Included(k) | Bound::Excluded(k) => Some(k),
            Bound::Unbounded => None,
        };
        let mut far_summary = None;
        let mut taken = 0;
        while taken < max {
            let Some(pick) = self.step(&v, &mut pos, forward) else {
                break;
            };
            prefetch_next(&v, &pos, forward);
            if let Some(k) = far {
                let s = *far_summary.get_or_insert_with(|| summary(self.hint(), k));
                let inside = if forward { pick.0 < s } else { pick.0 > s };
                let key = || self.entry(pick.1).key;
                let within = inside
                    || if forward {
                        within_end(key(), end)
                    } else {
                        within_start(key(), end)
                    };
                if !within {
                    break;
                }
            }
            if meta_seq(pick.2) <= snapshot && self.ranges.is_empty() {
                // The run's version is the one the scan reads, and no range
                // delete of this table hides it: its meta says it all.
                push(Found {
                    entry: pick.1,
                    live: pick.2 & META_DELETED == 0,
                    deadline: pick.2 & META_DEADLINE != 0,
                });
                taken += 1;
            } else if let Some(e) = self.visible(pick.1, snapshot) {
                let key = self.entry(pick.1).key;
                push(Found {
                    entry: e,
                    live: self.scanned_live(key, e, snapshot),
                    deadline: self.entry(e).expires != 0,
                });
                taken += 1;
            }
        }
        waited
    }

    /// Whether a scan at `snapshot` reads `key`'s newest visible version
    /// `e` as a value: not a deletion, and not under a range delete of
    /// this table made after it.
    fn scanned_live(&self, key: &[u8], e: EntryPtr, snapshot: u64) -> bool {
        let entry = self.entry(e);
        entry.value.is_some()
            && self
                .ranges
                .covering(key, snapshot)
                .is_none_or(|t| t <= entry.seq)
    }

    /// Asks for the first bytes of the value of a pair a scan found,
    /// ahead of its read.
    ///
    /// # Safety
    /// As for [`MemTable::found`].
    pub(crate) unsafe fn prefetch_value(&self, found: Found) {
        if let Some(v) = self.entry(found.entry).value {
            flexsys::prefetch::at(v.as_ptr(), v.len().min(PREFETCH_VALUE_BYTES));
        }
    }

    /// The key, value (`None`: deleted) and deadline (0: none) a scan of
    /// this table found, borrowed from its arena.
    ///
    /// # Safety
    /// `found` was handed out by [`MemTable::scan_entries`] of this very
    /// table (another table's entry may lie in freed memory).
    pub(crate) unsafe fn found(&self, found: Found) -> (&[u8], Option<&[u8]>, u64) {
        let entry = self.entry(found.entry);
        if found.live {
            (entry.key, entry.value, entry.expires)
        } else {
            (entry.key, None, 0)
        }
    }

    /// The newest version of every key, in key order, borrowed from the
    /// table (for the committer, on a frozen table).
    ///
    /// Built from the hash table, which names exactly the newest version of
    /// each key, so only distinct keys are sorted (not every version), unless
    /// a view of the whole table exists already.
    pub fn newest(&self) -> impl Iterator<Item = EntryRef<'_>> + '_ {
        let v = self.newest_view();
        let mut pos: Pos = [0; 3];
        std::iter::from_fn(move || {
            let p = self.step(&v, &mut pos, true)?.1;
            // The entries lie in the arena in write order, not key order:
            // each is a cache miss unless asked for ahead of the walk.
            if let Some(&(_, ahead, _)) = v.main.get(pos[0] + NEWEST_PREFETCH_AHEAD) {
                flexsys::prefetch::at(ahead.as_ptr().cast(), NEWEST_PREFETCH_BYTES);
            }
            Some(self.entry(p))
        })
    }

    /// Sorts the table for [`MemTable::newest`] ahead of time (on a frozen
    /// table: writes made after it are sorted again by `newest`).
    pub fn prepare_newest(&self) {
        self.newest_view();
    }

    /// How many of the table's entries its sorted view covers.
    pub(crate) fn sorted_upto(&self) -> usize {
        self.view.load().upto
    }

    /// Entries written that its published sorted view does not cover yet
    /// (a scan sorts them first).
    pub(crate) fn unsorted(&self) -> usize {
        self.len().saturating_sub(self.sorted_upto())
    }

    /// Sorts every entry written so far into the published view, as a
    /// scan would, so that the next scan finds nothing to sort. For an
    /// idle store (`commit::idle_sort`).
    pub(crate) fn sort_view(&self) {
        let _ = self.sorted_runs();
    }

    /// The view `newest` walks: the current one if it covers every entry,
    /// else one sorted from the hash table (and kept).
    fn newest_view(&self) -> Arc<SortedRuns> {
        let upto = self.len();
        let current = self.view.load_full();
        if current.upto >= upto {
            current
        } else {
            // Every entry below `upto` was in its slot before `len` said so;
            // a slot may name a newer version since, which readers of the
            // view skip by snapshot as usual.
            //
            // The slots name entries anywhere in the arena: each key read
            // for its summary is a cache miss unless asked for ahead. The
            // run is sized once (a table of a million keys would otherwise
            // be copied as it doubles).
            let slots = self.table().slots();
            let hint = self.hint();
            let mut run: Run = Vec::with_capacity(upto.min(slots.len()));
            for (i, slot) in slots.iter().enumerate() {
                if let Some(ahead) = slots
                    .get(i + SLOTS_PREFETCH_AHEAD)
                    .and_then(|s| unpack(s.load(Ordering::Relaxed)))
                {
                    flexsys::prefetch::at(ahead.as_ptr().cast(), SLOTS_PREFETCH_BYTES);
                }
                if let Some(e) = unpack(slot.load(Ordering::Acquire)) {
                    run.push(self.sorted(hint, e));
                }
            }
            run.sort_unstable_by(|a, b| self.cmp_key(a, b));
            let v = Arc::new(SortedRuns {
                main_sample: Arc::new(sample_of(&run)),
                main: Arc::new(run),
                upto,
                ..SortedRuns::empty()
            });
            let _builder = self.build.lock();
            if self.view.load().upto < upto {
                self.view.store(v.clone());
            }
            v
        }
    }
}

/// Takes `m`, adding the time it waited to `waited` when it was not free.
fn lock_timed<'m, T>(
    m: &'m Mutex<T>,
    waited: &mut Option<Duration>,
) -> parking_lot::MutexGuard<'m, T> {
    if let Some(g) = m.try_lock() {
        return g;
    }
    let t = std::time::Instant::now();
    let g = m.lock();
    *waited = Some(waited.unwrap_or_default() + t.elapsed());
    g
}

/// Whether `k` lies before the upper bound `end`.
pub fn within_end(k: &[u8], end: Bound<&[u8]>) -> bool {
    match end {
        Bound::Included(e) => k <= e,
        Bound::Excluded(e) => k < e,
        Bound::Unbounded => true,
    }
}

/// Whether `k` lies after the lower bound `start`.
pub fn within_start(k: &[u8], start: Bound<&[u8]>) -> bool {
    match start {
        Bound::Included(s) => k >= s,
        Bound::Excluded(s) => k > s,
        Bound::Unbounded => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    #[test]
    fn a_table_sized_for_its_bytes_stops_growing_early_and_reads_back() {
        let expected = 8 << 20;
        let mem = MemTable::sized(&[], None, expected, 0, false);
        let key = |i: u64| format!("key{:010}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20);
        let (mut i, mut slots_at_sixteenth) = (0u64, None);
        while mem.approximate_bytes() < expected {
            mem.insert(key(i).as_bytes(), i + 1, Some(b"value"));
            i += 1;
            if slots_at_sixteenth.is_none() && mem.approximate_bytes() >= expected / 16 {
                slots_at_sixteenth = Some(mem.slots());
            }
        }
        assert!(
            i as usize * 2 <= mem.slots(),
            "{i} keys in {} slots",
            mem.slots()
        );
        // Past 1/16 of its bytes the table no longer grew (it projected
        // its final size at its first growth past 1/32).
        assert_eq!(slots_at_sixteenth, Some(mem.slots()));
        for j in (0..i).step_by(97) {
            assert_eq!(
                mem.get(key(j).as_bytes(), u64::MAX),
                Some(Some(Box::from(&b"value"[..]))),
                "{j}"
            );
        }
    }

    #[test]
    fn a_table_made_ahead_replaces_the_doublings_and_goes_back_to_the_pool() {
        // Small pairs in 32 MiB project about 480,000 keys: 2 Mi slots,
        // past `AHEAD_MIN_SLOTS`, made on a thread of its own.
        let expected = 32 << 20;
        let pool = Arc::new(ChunkPool::new(0));
        let mem = MemTable::sized(&[], Some(pool.clone()), expected, 0, false);
        let key = |i: u64| format!("key{:010}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20);
        let ahead = |m: &MemTable| m.writer.lock().ahead;
        let mut i = 0u64;
        let mut put = |m: &MemTable| {
            m.insert(key(i).as_bytes(), i + 1, Some(b"value"));
            i += 1;
        };
        while ahead(&mem) == Ahead::NotAsked {
            put(&mem);
        }
        assert_eq!(ahead(&mem), Ahead::Asked);
        let asked_at = mem.slots();
        let waited = std::time::Instant::now();
        let made = loop {
            if let Some(t) = mem.ahead.lock().as_ref() {
                break t.slots().len();
            }
            assert!(waited.elapsed().as_secs() < 120, "the table was never made");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert!(made >= AHEAD_MIN_SLOTS && made > 2 * asked_at, "{made}");
        while ahead(&mem) == Ahead::Asked {
            put(&mem);
        }
        assert_eq!(mem.slots(), made, "the growth took the table made ahead");
        while mem.approximate_bytes() < expected {
            put(&mem);
        }
        assert_eq!(mem.slots(), made, "and grew no more");
        mem.check_invariants();
        for j in (0..i).step_by(101) {
            assert_eq!(
                mem.get(key(j).as_bytes(), u64::MAX),
                Some(Some(Box::from(&b"value"[..]))),
                "{j}"
            );
        }
        // Its table goes to the pool, and a table of that size comes from
        // there, zeroed.
        let keys = mem.keys();
        drop(mem);
        assert_eq!(pool.kept_bytes(), made * 8);
        let next = MemTable::sized(&[], Some(pool.clone()), expected, keys, false);
        assert_eq!(next.slots(), made);
        assert_eq!(pool.kept_bytes(), 0);
        next.check_invariants();
        assert_eq!(next.get(key(0).as_bytes(), u64::MAX), None);
        next.insert(key(0).as_bytes(), 1, Some(b"again"));
        assert_eq!(
            next.get(key(0).as_bytes(), u64::MAX),
            Some(Some(Box::from(&b"again"[..])))
        );
    }

    #[test]
    fn a_table_hinted_with_its_keys_never_grows() {
        let mem = MemTable::sized(&[], None, 0, 50_000, false);
        let slots = mem.slots();
        for i in 0..50_000u64 {
            mem.insert(format!("k{i:08}").as_bytes(), i + 1, Some(b"v"));
        }
        assert_eq!(mem.slots(), slots);
        assert_eq!(mem.keys(), 50_000);
        assert_eq!(
            mem.get(b"k00049999", u64::MAX),
            Some(Some(Box::from(&b"v"[..])))
        );
    }

    proptest::proptest! {
        /// Summaries never contradict key order, whatever the hint.
        #[test]
        fn summaries_preserve_key_order(
            hint in proptest::collection::vec(0u8..4, 0..6),
            a in proptest::collection::vec(0u8..4, 0..24),
            b in proptest::collection::vec(0u8..4, 0..24),
        ) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            proptest::prop_assert!(summary(&hint, &lo) <= summary(&hint, &hi));
        }
    }

    #[test]
    fn tables_sorted_under_any_hint_agree() {
        let mut rng = StdRng::seed_from_u64(7);
        let keys: Vec<Vec<u8>> = (0..2000)
            .map(|_| {
                let n = rng.gen_range(0..12);
                (0..n).map(|_| rng.gen_range(b'a'..b'e')).collect()
            })
            .collect();
        let mut expected: Vec<Vec<u8>> = keys.clone();
        expected.sort();
        expected.dedup();
        for hint in [&b""[..], b"a", b"ab", b"c", b"zz", b"abcdabcd"] {
            let t = MemTable::with_hint(hint);
            for (i, k) in keys.iter().enumerate() {
                t.insert(k, i as u64 + 1, Some(k));
            }
            let got: Vec<Vec<u8>> = t.newest().map(|e| e.key.to_vec()).collect();
            assert_eq!(got, expected, "hint {hint:?}");
        }
    }

    #[test]
    fn a_table_sorted_ahead_walks_the_same_versions_and_resorts_later_writes() {
        let t = MemTable::new();
        for i in 0..500u64 {
            let k = format!("k{:03}", (i * 7) % 300);
            t.insert(k.as_bytes(), i + 1, Some(&i.to_le_bytes()));
        }
        t.prepare_newest();
        let prepared = t.view.load_full();
        assert_eq!(prepared.upto, 500);
        let walk = |t: &MemTable| -> Vec<(Vec<u8>, u64)> {
            t.newest()
                .map(|e| {
                    (
                        e.key.to_vec(),
                        u64::from_le_bytes(e.value.unwrap().try_into().unwrap()),
                    )
                })
                .collect()
        };
        let first = walk(&t);
        // `newest` took the prepared order instead of sorting again.
        assert!(Arc::ptr_eq(&prepared, &t.view.load_full()));
        assert_eq!(first.len(), 300);
        assert!(first.windows(2).all(|w| w[0].0 < w[1].0));
        // Each key's newest version: i with (i * 7) % 300 == key, largest.
        for (k, i) in &first {
            let want = (0..500u64)
                .filter(|j| format!("k{:03}", (j * 7) % 300).as_bytes() == &k[..])
                .max();
            assert_eq!(Some(*i), want);
        }
        // A write after the preparation is sorted in by the next walk.
        t.insert(b"k000", 1000, Some(&1000u64.to_le_bytes()));
        let second = walk(&t);
        assert_eq!(second[0], (b"k000".to_vec(), 1000));
    }

    #[test]
    fn a_table_made_without_a_hint_takes_its_keys_prefix_at_its_first_sort() {
        // Few keys: the first summary fixes no hint.
        let t = MemTable::new();
        for i in 0..HINT_MIN_KEYS as u64 - 1 {
            t.insert(format!("user{i:012}").as_bytes(), i + 1, Some(b"v"));
        }
        t.prepare_newest();
        assert_eq!(t.hint(), b"");
        // Enough keys: their shared prefix, kept though later keys do not
        // share it, and the order stays right.
        let t = MemTable::new();
        let n = 3 * HINT_MIN_KEYS as u64;
        for i in 0..n {
            t.insert(
                format!("user{:012}", i * 7 % n).as_bytes(),
                i + 1,
                Some(b"v"),
            );
        }
        // A scan of the empty view before any write fixes nothing either.
        let fresh = MemTable::new();
        let mut out = Vec::new();
        fresh.scan_forward(Bound::Included(b"user"), Bound::Unbounded, 1, 8, &mut out);
        assert!(out.is_empty() && fresh.hint.get().is_none());
        t.prepare_newest();
        assert_eq!(t.hint(), b"user000000000");
        t.insert(b"a", n + 1, Some(b"v"));
        t.insert(b"zz", n + 2, Some(b"v"));
        assert_eq!(t.hint(), b"user000000000");
        let keys: Vec<Vec<u8>> = t.newest().map(|e| e.key.to_vec()).collect();
        let mut want: Vec<Vec<u8>> = (0..n)
            .map(|i| format!("user{i:012}").into_bytes())
            .collect();
        want.insert(0, b"a".to_vec());
        want.push(b"zz".to_vec());
        assert_eq!(keys, want);
        // A given hint is kept whatever the keys.
        let t = MemTable::with_hint(b"x");
        t.insert(b"user1", 1, Some(b"v"));
        t.prepare_newest();
        assert_eq!(t.hint(), b"x");
    }

    #[test]
    fn the_shared_prefix_of_written_keys_is_the_next_hint() {
        let t = MemTable::new();
        assert_eq!(t.shared_prefix(), b"");
        t.insert(b"user0001", 1, Some(b"v"));
        assert_eq!(t.shared_prefix(), b"user0001");
        t.insert(b"user0042", 2, Some(b"v"));
        t.insert(b"user0050", 3, None);
        assert_eq!(t.shared_prefix(), b"user00");
        t.insert(b"x", 4, Some(b"v"));
        assert_eq!(t.shared_prefix(), b"");
    }

    fn v(s: &str) -> Version {
        Some(s.as_bytes().into())
    }

    #[test]
    fn snapshots_see_the_newest_version_at_or_below_them() {
        let t = MemTable::new();
        t.insert(b"k", 3, Some(b"three"));
        t.insert(b"k", 5, Some(b"five"));
        t.insert(b"j", 6, Some(b"j6"));
        t.insert(b"k", 9, None);
        t.insert(b"l", 10, Some(b"l10"));
        assert_eq!(t.get(b"k", 2), None);
        assert_eq!(t.get(b"k", 3), Some(v("three")));
        assert_eq!(t.get(b"k", 8), Some(v("five")));
        assert_eq!(t.get(b"k", 9), Some(None));
        assert_eq!(t.get(b"k", u64::MAX), Some(None));
        assert_eq!(t.get(b"kk", u64::MAX), None);
        assert_eq!(t.get(b"j", 5), None);
        assert_eq!(t.len(), 5);
        let newest: Vec<_> = t
            .newest()
            .map(|e| (Box::<[u8]>::from(e.key), e.value.map(Box::from)))
            .collect();
        assert_eq!(
            newest,
            vec![
                (b"j".to_vec().into(), v("j6")),
                (b"k".to_vec().into(), None),
                (b"l".to_vec().into(), v("l10")),
            ]
        );
    }

    /// Every key of `t` a forward scan at the newest snapshot sees.
    fn scanned(t: &MemTable) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let waited = t.scan_forward(
            Bound::Unbounded,
            Bound::Unbounded,
            u64::MAX,
            usize::MAX,
            &mut out,
        );
        assert_eq!(waited, None, "a reader waited");
        out.into_iter().map(|(k, ..)| k.into_vec()).collect()
    }

    #[test]
    fn deadlines_are_kept_with_their_versions() {
        let t = MemTable::new();
        t.insert(b"k", 1, Some(b"old"));
        t.insert_expiring(b"k", 2, b"new", 77);
        t.insert_expiring(b"j", 3, b"v", 5);
        t.insert(b"j", 4, None);
        assert_eq!(t.get_expiring(b"k", 1), Some(Some((&b"old"[..], 0))));
        assert_eq!(t.get_expiring(b"k", 2), Some(Some((&b"new"[..], 77))));
        assert_eq!(t.get_expiring(b"j", 3), Some(Some((&b"v"[..], 5))));
        assert_eq!(t.get_expiring(b"j", 4), Some(None));
        let mut out = Vec::new();
        t.scan_forward(Bound::Unbounded, Bound::Unbounded, 3, 10, &mut out);
        let got: Vec<_> = out
            .iter()
            .map(|(k, v, x)| (k.to_vec(), v.is_some(), *x))
            .collect();
        assert_eq!(
            got,
            vec![(b"j".to_vec(), true, 5), (b"k".to_vec(), true, 77)]
        );
        let deadlines: Vec<u64> = t.newest().map(|e| e.expires).collect();
        assert_eq!(deadlines, vec![0, 77], "the deletion of j has none");
    }

    #[test]
    fn a_reader_finding_the_view_being_built_sorts_a_private_one() {
        let t = MemTable::new();
        for i in 0..100u32 {
            t.insert(format!("k{i:04}").as_bytes(), u64::from(i) + 1, Some(b"v"));
        }
        assert_eq!(scanned(&t).len(), 100);
        assert_eq!(t.sorted_upto(), 100);
        // Another reader is building: writes since are still seen, in
        // order, without waiting, and the private view is not published.
        let builder = t.build.lock();
        for i in (100..300u32).rev() {
            t.insert(format!("k{i:04}").as_bytes(), u64::from(i) + 1, Some(b"v"));
        }
        let keys = scanned(&t);
        let expected: Vec<Vec<u8>> = (0..300u32)
            .map(|i| format!("k{i:04}").into_bytes())
            .collect();
        assert_eq!(keys, expected);
        assert_eq!(t.sorted_upto(), 100);
        drop(builder);
        assert_eq!(scanned(&t), expected);
        assert_eq!(t.sorted_upto(), 300);
    }

    #[test]
    fn many_unsorted_writes_wait_for_the_reader_building_the_view() {
        let t = MemTable::new();
        let n = PRIVATE_MAX as u32 + 10;
        for i in 0..n {
            t.insert(&i.to_be_bytes(), u64::from(i) + 1, Some(b"v"));
        }
        let builder = t.build.lock();
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut out = Vec::new();
                let waited =
                    t.scan_forward(Bound::Unbounded, Bound::Unbounded, u64::MAX, 3, &mut out);
                (waited, out.len())
            });
            std::thread::sleep(Duration::from_millis(50));
            drop(builder);
            let (waited, found) = reader.join().unwrap();
            assert_eq!(found, 3);
            assert!(
                waited.is_some_and(|w| w >= Duration::from_millis(40)),
                "{waited:?}"
            );
        });
        assert_eq!(t.sorted_upto(), n as usize);
    }

    #[test]
    fn tables_replaced_by_growth_stay_readable_until_the_memtable_drops() {
        // Small enough for Miri: past `INITIAL_SLOTS / 2` keys the hash
        // table grows; the replaced one is retired (readers may still
        // hold it), then freed with the MemTable.
        let t = MemTable::new();
        let first = t.slots();
        let old = t.table();
        for i in 0..700u32 {
            t.insert(format!("k{i}").as_bytes(), u64::from(i) + 1, Some(b"v"));
        }
        assert!(t.slots() > first, "the table grew");
        // The replaced table is still there for a reader that loaded it.
        assert_eq!(old.slots().len(), first);
        assert!(old.probe(b"k1", hash(b"k1")).1.is_some());
        for i in (0..700u32).step_by(7) {
            let k = format!("k{i}");
            assert_eq!(
                t.get(k.as_bytes(), u64::MAX),
                Some(Some(Box::from(&b"v"[..])))
            );
        }
    }

    #[test]
    fn may_hold_is_false_only_for_ranges_without_keys() {
        let mut rng = StdRng::seed_from_u64(11);
        let t = MemTable::new();
        let none: Bound<&[u8]> = Bound::Unbounded;
        assert!(!t.may_hold(none, none), "an empty table holds nothing");
        let mut model = std::collections::BTreeSet::new();
        let key = |rng: &mut StdRng| -> Vec<u8> {
            let len = rng.gen_range(0..12);
            (0..len).map(|_| rng.gen_range(b'a'..=b'f')).collect()
        };
        for seq in 1..200u64 {
            let k = key(&mut rng);
            t.insert(&k, seq, Some(b"v"));
            model.insert(k);
            for _ in 0..20 {
                let (a, b) = (key(&mut rng), key(&mut rng));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let bounds = [
                    (Bound::Included(&lo[..]), Bound::Included(&hi[..])),
                    (Bound::Excluded(&lo[..]), Bound::Excluded(&hi[..])),
                    (Bound::Included(&lo[..]), Bound::Unbounded),
                    (Bound::Unbounded, Bound::Excluded(&hi[..])),
                ];
                for (l, h) in bounds {
                    if l != Bound::Unbounded && h != Bound::Unbounded && lo == hi {
                        continue;
                    }
                    if model.range::<[u8], _>((l, h)).next().is_some() {
                        assert!(t.may_hold(l, h), "{l:?}..{h:?} holds a key");
                    }
                }
            }
        }
        // Keys of one keyspace, a range of another: skipped.
        assert!(!t.may_hold(Bound::Included(b"\xff\xff\xff\xff\xfe"), none));
        assert!(t.may_hold(none, none));
        let m = MemTable::new();
        m.insert(b"mmm", 1, Some(b"v"));
        m.insert(b"mnopqrstuv", 2, None);
        assert!(!m.may_hold(none, Bound::Excluded(b"a")));
        assert!(!m.may_hold(Bound::Included(b"n"), none));
        assert!(m.may_hold(Bound::Included(b"mn"), Bound::Included(b"mo")));
    }

    #[test]
    fn seeks_through_the_sample_of_a_main_run_match_a_model() {
        // A main run far longer than `SAMPLE_STRIDE`, with runs of keys
        // whose summaries tie (they differ only past the summary's bytes)
        // so that the sampled bounds meet equal summaries on both sides.
        let t = MemTable::new();
        let mut model = std::collections::BTreeSet::new();
        let mut seq = 0;
        for i in 0..12_000u32 {
            let k = if i % 3 == 0 {
                format!("p{:03}-same-sixteen-bytes-{i:05}", i / 1200)
            } else {
                format!("k{:06}", i * 7919 % 100_000)
            };
            seq += 1;
            t.insert(k.as_bytes(), seq, Some(b"v"));
            model.insert(k.into_bytes());
        }
        let mut warm = Vec::new();
        t.scan_forward(Bound::Unbounded, Bound::Unbounded, u64::MAX, 1, &mut warm);
        let v = t.sorted_runs().0;
        assert!(v.main.len() > 10 * SAMPLE_STRIDE && v.mid.is_empty());
        let probes: Vec<Vec<u8>> = model
            .iter()
            .step_by(7)
            .flat_map(|k| {
                let mut below = k.clone();
                *below.last_mut().unwrap() -= 1;
                [k.clone(), below, [k.as_slice(), b"\0"].concat()]
            })
            .chain([b"".to_vec(), b"a".to_vec(), b"zzz".to_vec()])
            .collect();
        let copied = |out: Vec<(Box<[u8]>, Version, u64)>| -> Vec<Vec<u8>> {
            out.into_iter().map(|(k, ..)| k.into_vec()).collect()
        };
        for p in &probes {
            for exclusive in [false, true] {
                let from = if exclusive {
                    Bound::Excluded(&p[..])
                } else {
                    Bound::Included(&p[..])
                };
                let mut out = Vec::new();
                t.scan_forward(from, Bound::Unbounded, u64::MAX, 3, &mut out);
                let want: Vec<Vec<u8>> = model
                    .range::<[u8], _>((from, Bound::Unbounded))
                    .take(3)
                    .cloned()
                    .collect();
                assert_eq!(copied(out), want, "forward from {from:?}");
                let mut out = Vec::new();
                t.scan_backward(from, Bound::Unbounded, u64::MAX, 3, &mut out);
                let want: Vec<Vec<u8>> = model
                    .range::<[u8], _>((Bound::Unbounded, from))
                    .rev()
                    .take(3)
                    .cloned()
                    .collect();
                assert_eq!(copied(out), want, "backward from {from:?}");
            }
        }
    }

    /// A version of the model below: key, sequence number, value
    /// (`None`: deleted), deadline.
    type ModelVersion = (Vec<u8>, u64, Option<Vec<u8>>, u64);

    /// What a scan of the versions and range deletes `ranges` (start,
    /// end, sequence number) should find: each key of `lo..hi` (bounds as
    /// given) with a version at or below `snapshot`, with its newest such
    /// value (`None`: deleted or under a newer range delete) and deadline
    /// (0 unless a value), ascending or descending, at most `max`.
    #[allow(clippy::type_complexity)]
    fn model_scan(
        versions: &[ModelVersion],
        ranges: &[(Vec<u8>, Option<Vec<u8>>, u64)],
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        snapshot: u64,
        max: usize,
        forward: bool,
    ) -> Vec<(Vec<u8>, Option<Vec<u8>>, u64)> {
        let mut newest: BTreeMap<&[u8], &ModelVersion> = BTreeMap::new();
        for v in versions.iter().filter(|v| v.1 <= snapshot) {
            newest.insert(&v.0, v);
        }
        let hidden = |k: &[u8], seq: u64| {
            ranges.iter().any(|(s, e, t)| {
                *t <= snapshot && *t > seq && k >= &s[..] && e.as_deref().is_none_or(|e| k < e)
            })
        };
        let found = newest
            .iter()
            .filter(|(k, _)| std::ops::RangeBounds::contains(&(lo, hi), *k))
            .map(|(k, v)| match (&v.2, hidden(k, v.1)) {
                (Some(val), false) => (k.to_vec(), Some(val.clone()), v.3),
                _ => (k.to_vec(), None, 0),
            });
        if forward {
            found.take(max).collect()
        } else {
            found.rev().take(max).collect()
        }
    }

    fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
        b.as_ref().map(Vec::as_slice)
    }

    /// Scans read most versions from their run elements alone (sequence
    /// number, deletion, deadline; the far bound by summary): keys that
    /// share their summaries (the same 15 bytes after the prefix), old
    /// snapshots, deletions, deadlines and range deletes must read as the
    /// entries say, either way, with any bounds.
    #[test]
    fn scans_from_run_elements_match_a_model() {
        for (seed, with_ranges) in [(1u64, false), (2, true), (3, false), (4, true)] {
            let mut rng = StdRng::seed_from_u64(seed);
            let t = MemTable::new();
            let mut versions: Vec<ModelVersion> = Vec::new();
            let mut ranges = Vec::new();
            // Two groups of keys whose summaries tie within each group.
            let key = |rng: &mut StdRng| {
                let group = [
                    "tied-summary-aaaaaaaaaaaaaaa",
                    "tied-summary-aaaaaaaaaaaaaab",
                ];
                format!("{}{:03}", group[rng.gen_range(0..2)], rng.gen_range(0..150)).into_bytes()
            };
            for seq in 1..6000u64 {
                let k = key(&mut rng);
                if with_ranges && rng.gen_ratio(1, 200) {
                    let (a, b) = (key(&mut rng), key(&mut rng));
                    let (a, b) = if a <= b { (a, b) } else { (b, a) };
                    let end = rng.gen_bool(0.8).then_some(b);
                    t.delete_range(&a, end.as_deref(), seq);
                    ranges.push((a, end, seq));
                    continue;
                }
                let value = rng.gen_bool(0.8).then(|| seq.to_be_bytes().to_vec());
                let expires = match &value {
                    Some(v) if rng.gen_bool(0.3) => {
                        t.insert_expiring(&k, seq, v, 1_000 + seq);
                        1_000 + seq
                    }
                    _ => {
                        t.insert(&k, seq, value.as_deref());
                        0
                    }
                };
                versions.push((k, seq, value, expires));
                if seq % 250 != 0 {
                    continue;
                }
                for _ in 0..20 {
                    let snapshot = rng.gen_range(0..=seq);
                    let bound = |rng: &mut StdRng, k: Vec<u8>| match rng.gen_range(0..3) {
                        0 => Bound::Included(k),
                        1 => Bound::Excluded(k),
                        _ => Bound::Unbounded,
                    };
                    let (a, b) = (key(&mut rng), key(&mut rng));
                    let (a, b) = if a <= b { (a, b) } else { (b, a) };
                    let (lo, hi) = (bound(&mut rng, a), bound(&mut rng, b));
                    let max = rng.gen_range(1..80);
                    for forward in [true, false] {
                        let mut out = Vec::new();
                        if forward {
                            t.scan_forward(as_ref(&lo), as_ref(&hi), snapshot, max, &mut out);
                        } else {
                            t.scan_backward(as_ref(&hi), as_ref(&lo), snapshot, max, &mut out);
                        }
                        let got: Vec<_> = out
                            .into_iter()
                            .map(|(k, v, e)| (k.to_vec(), v.map(|v| v.to_vec()), e))
                            .collect();
                        let want = model_scan(
                            &versions,
                            &ranges,
                            as_ref(&lo),
                            as_ref(&hi),
                            snapshot,
                            max,
                            forward,
                        );
                        assert_eq!(
                            got, want,
                            "seed {seed} snapshot {snapshot} forward {forward}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn scans_respect_bounds_snapshots_and_limits() {
        let t = MemTable::new();
        for (i, k) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            t.insert(k.as_bytes(), i as u64 + 1, Some(k.as_bytes()));
        }
        for (i, k) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            t.insert(k.as_bytes(), i as u64 + 10, None);
        }
        let keys = |out: &Vec<(Box<[u8]>, Version, u64)>| {
            out.iter()
                .map(|(k, v, _)| (String::from_utf8(k.to_vec()).unwrap(), v.is_some()))
                .collect::<Vec<_>>()
        };
        let mut out = Vec::new();
        t.scan_forward(
            Bound::Excluded(b"a"),
            Bound::Included(b"d"),
            100,
            10,
            &mut out,
        );
        assert_eq!(
            keys(&out),
            vec![
                ("b".into(), false),
                ("c".into(), false),
                ("d".into(), false)
            ]
        );
        out.clear();
        t.scan_forward(Bound::Unbounded, Bound::Unbounded, 3, 2, &mut out);
        assert_eq!(keys(&out), vec![("a".into(), true), ("b".into(), true)]);
        out.clear();
        t.scan_forward(Bound::Included(b"c"), Bound::Unbounded, 3, 10, &mut out);
        assert_eq!(keys(&out), vec![("c".into(), true)]);
        out.clear();
        t.scan_backward(Bound::Unbounded, Bound::Excluded(b"a"), 12, 10, &mut out);
        assert_eq!(
            keys(&out),
            vec![
                ("e".into(), true),
                ("d".into(), true),
                ("c".into(), false),
                ("b".into(), false)
            ]
        );
        out.clear();
        t.scan_backward(Bound::Excluded(b"d"), Bound::Unbounded, 100, 2, &mut out);
        assert_eq!(keys(&out), vec![("c".into(), false), ("b".into(), false)]);
        out.clear();
        t.scan_backward(Bound::Included(b"b"), Bound::Unbounded, 1, 5, &mut out);
        assert_eq!(keys(&out), vec![("a".into(), true)]);
    }

    #[test]
    fn views_match_a_model_while_writes_interleave_with_scans() {
        let mut rng = StdRng::seed_from_u64(11);
        let t = MemTable::new();
        let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        for seq in 1..30_000u64 {
            // Keys sharing long prefixes exercise the full comparisons.
            let k = format!("prefix-{:05}", rng.gen_range(0..5000)).into_bytes();
            let val = rng.gen_bool(0.8).then(|| seq.to_le_bytes().to_vec());
            t.insert(&k, seq, val.as_deref());
            model.insert(k, val);
            if seq % 997 == 0 || rng.gen_ratio(1, 300) {
                t.check_invariants();
                let from = format!("prefix-{:05}", rng.gen_range(0..5000)).into_bytes();
                let mut out = Vec::new();
                t.scan_forward(
                    Bound::Included(&from),
                    Bound::Unbounded,
                    u64::MAX,
                    40,
                    &mut out,
                );
                let want: Vec<_> = model
                    .range(from.clone()..)
                    .take(40)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let got: Vec<_> = out
                    .into_iter()
                    .map(|(k, v, _)| (k.to_vec(), v.map(|v| v.to_vec())))
                    .collect();
                assert_eq!(got, want);
                let mut out = Vec::new();
                t.scan_backward(
                    Bound::Excluded(&from),
                    Bound::Unbounded,
                    u64::MAX,
                    40,
                    &mut out,
                );
                let want: Vec<_> = model
                    .range(..from)
                    .rev()
                    .take(40)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let got: Vec<_> = out
                    .into_iter()
                    .map(|(k, v, _)| (k.to_vec(), v.map(|v| v.to_vec())))
                    .collect();
                assert_eq!(got, want);
            }
        }
        let got: Vec<_> = t
            .newest()
            .map(|e| (e.key.to_vec(), e.value.map(<[u8]>::to_vec)))
            .collect();
        let want: Vec<_> = model.into_iter().collect();
        assert_eq!(got, want);
        t.check_invariants();
        assert!(t.approximate_bytes() > 30_000 * 16);
    }

    /// Scans often enough that tails fold into the middle run, over enough
    /// keys that the middle run folds into the main run, so the same key can
    /// sit in all three runs at once: the newest version must win either way.
    #[test]
    fn three_runs_fold_and_the_newest_version_wins_both_ways() {
        let mut rng = StdRng::seed_from_u64(12);
        let t = MemTable::new();
        let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        let key = |n: u32| format!("k{n:06}").into_bytes();
        let mut mains = std::collections::HashSet::new();
        for seq in 1..60_000u64 {
            // Half the writes to a few hundred hot keys, half over 40,000.
            let n = if rng.gen_bool(0.5) {
                rng.gen_range(0..300)
            } else {
                rng.gen_range(0..40_000)
            };
            let val = rng.gen_bool(0.9).then(|| seq.to_le_bytes().to_vec());
            t.insert(&key(n), seq, val.as_deref());
            model.insert(key(n), val);
            if seq % 97 == 0 {
                let from = key(rng.gen_range(0..40_000));
                let forward = rng.gen_bool(0.5);
                let mut out = Vec::new();
                let want: Vec<_> = if forward {
                    t.scan_forward(
                        Bound::Included(&from),
                        Bound::Unbounded,
                        u64::MAX,
                        30,
                        &mut out,
                    );
                    model.range(from.clone()..).take(30).collect()
                } else {
                    t.scan_backward(
                        Bound::Included(&from),
                        Bound::Unbounded,
                        u64::MAX,
                        30,
                        &mut out,
                    );
                    model.range(..=from.clone()).rev().take(30).collect()
                };
                let got: Vec<_> = out
                    .into_iter()
                    .map(|(k, v, _)| (k.to_vec(), v.map(|v| v.to_vec())))
                    .collect();
                let want: Vec<_> = want
                    .into_iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "seq {seq}, forward {forward}");
                let v = t.view.load();
                assert!(v.tail.len() <= TAIL_MAX && v.mid.len() <= MID_MAX);
                mains.insert(Arc::as_ptr(&v.main) as usize);
            }
        }
        // The main run was rebuilt several times (the middle run overflowed).
        assert!(mains.len() > 2, "{} main runs", mains.len());
        let got: Vec<_> = t
            .newest()
            .map(|e| (e.key.to_vec(), e.value.map(<[u8]>::to_vec)))
            .collect();
        assert_eq!(got, model.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn readers_run_while_the_writer_inserts() {
        let t = Arc::new(MemTable::new());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let t = t.clone();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut rng = StdRng::seed_from_u64(r);
                    let mut rounds = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        // Values name their own key, so any torn or stale
                        // read would show.
                        let k = rng.gen_range(0..20_000u32).to_be_bytes();
                        if let Some(Some(v)) = t.get(&k, u64::MAX) {
                            assert_eq!(&v[..4], &k);
                        }
                        if rounds.is_multiple_of(64) {
                            let mut out = Vec::new();
                            t.scan_forward(
                                Bound::Included(&k),
                                Bound::Unbounded,
                                u64::MAX,
                                64,
                                &mut out,
                            );
                            for w in out.windows(2) {
                                assert!(w[0].0 < w[1].0);
                            }
                            for (k, v, _) in &out {
                                assert_eq!(&v.as_ref().unwrap()[..4], &k[..]);
                            }
                        }
                        rounds += 1;
                    }
                    rounds
                })
            })
            .collect();
        let mut rng = StdRng::seed_from_u64(9);
        let mut distinct = std::collections::HashSet::new();
        for seq in 1..200_000u64 {
            let k = rng.gen_range(0..20_000u32).to_be_bytes();
            distinct.insert(k);
            let mut v = k.to_vec();
            v.extend_from_slice(&seq.to_le_bytes());
            t.insert(&k, seq, Some(&v));
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        assert_eq!(t.len(), 199_999);
        assert_eq!(t.newest().count(), distinct.len());
    }

    /// Every version of a key in the model below: (seq, value).
    type Versions = Vec<(u64, Option<Vec<u8>>)>;

    /// A MemTable operation of the model test below.
    #[derive(Clone, Debug)]
    enum Op {
        Put(u8, u8),
        Delete(u8),
        Get(u8, u64),
        Scan(u8, bool),
        Newest,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (any::<u8>(), any::<u8>()).prop_map(|(k, v)| Op::Put(k % 64, v)),
            1 => any::<u8>().prop_map(|k| Op::Delete(k % 64)),
            2 => (any::<u8>(), 0u64..400).prop_map(|(k, s)| Op::Get(k % 64, s)),
            1 => (any::<u8>(), any::<bool>()).prop_map(|(k, f)| Op::Scan(k % 64, f)),
            1 => Just(Op::Newest),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Any sequence of writes, reads and scans keeps the MemTable's
        /// invariants (checked after every operation) and matches a model
        /// of every version.
        #[test]
        fn any_operations_keep_the_invariants(
            hint in proptest::collection::vec(b'a'..b'c', 0..3),
            ops in proptest::collection::vec(op(), 1..300),
        ) {
            let t = MemTable::with_hint(&hint);
            // Every version of every key: (seq, value).
            let mut model: BTreeMap<Vec<u8>, Versions> = BTreeMap::new();
            let key = |k: u8| format!("ab{}-{k:03}", k % 3).into_bytes();
            let mut seq = 0u64;
            for op in ops {
                match op {
                    Op::Put(k, v) => {
                        seq += 1;
                        t.insert(&key(k), seq, Some(&[v]));
                        model.entry(key(k)).or_default().push((seq, Some(vec![v])));
                    }
                    Op::Delete(k) => {
                        seq += 1;
                        t.insert(&key(k), seq, None);
                        model.entry(key(k)).or_default().push((seq, None));
                    }
                    Op::Get(k, at) => {
                        let want = model.get(&key(k)).and_then(|vs| {
                            vs.iter().rev().find(|(s, _)| *s <= at).map(|(_, v)| v.clone())
                        });
                        let got = t.get(&key(k), at).map(|v| v.map(|v| v.to_vec()));
                        proptest::prop_assert_eq!(got, want);
                    }
                    Op::Scan(k, forward) => {
                        let from = key(k);
                        let mut out = Vec::new();
                        let newest = |(k, vs): (&Vec<u8>, &Versions)| {
                            (k.clone(), vs.last().and_then(|v| v.1.clone()))
                        };
                        let want: Vec<_> = if forward {
                            t.scan_forward(Bound::Included(&from), Bound::Unbounded, u64::MAX, 10, &mut out);
                            model.range(from.clone()..).take(10).map(newest).collect()
                        } else {
                            t.scan_backward(Bound::Excluded(&from), Bound::Unbounded, u64::MAX, 10, &mut out);
                            model.range(..from.clone()).rev().take(10).map(newest).collect()
                        };
                        let got: Vec<_> = out
                            .into_iter()
                            .map(|(k, v, _)| (k.to_vec(), v.map(|v| v.to_vec())))
                            .collect();
                        proptest::prop_assert_eq!(got, want);
                    }
                    Op::Newest => {
                        let got: Vec<_> = t.newest().map(|e| (e.key.to_vec(), e.seq)).collect();
                        let want: Vec<_> = model
                            .iter()
                            .map(|(k, vs)| (k.clone(), vs.last().map_or(0, |v| v.0)))
                            .collect();
                        proptest::prop_assert_eq!(got, want);
                    }
                }
                t.check_invariants();
            }
        }
    }

    /// A broken invariant is reported, not passed over.
    #[test]
    #[should_panic(expected = "memtable: len is not the entries written")]
    fn a_wrong_length_fails_the_check() {
        let t = MemTable::new();
        t.insert(b"k", 1, Some(b"v"));
        t.len.store(2, Ordering::Release);
        t.check_invariants();
    }
}
