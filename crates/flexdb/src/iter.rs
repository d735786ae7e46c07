//! Iterators over key ranges.
//!
//! An iterator merges the MemTables that existed when it was created (read
//! at its snapshot) with a walk over the intervals of the space. Each end
//! refills a buffer in chunks: it reads up to `CHUNK` keys from every
//! source, and only the keys up to the smallest last key of a source that
//! filled its chunk are certain to be complete; those are merged (the
//! newest MemTable wins, deletions hide pairs) and emitted. The space is
//! read under the sparse index's shared lock one chunk at a time, so a long
//! scan never holds the committer back.
//!
//! Invariants: the front only moves up and the back only moves down
//! (except by `seek`/`seek_back`); the two ends never cross; every key
//! emitted lies in the range; each key is seen at a state no older than
//! the iterator's creation.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use crate::error::Result;
use crate::memtable::{within_end, within_start, MemTable, Version};
use crate::store::Shared;

/// A pair yielded by an iterator: `(key, value)`.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// A merged pair on its way to a buffer.
type LivePair = (Box<[u8]>, Box<[u8]>);

/// Keys each source reads per refill.
const CHUNK: usize = 64;

/// An iterator over the pairs of a key range, from [`crate::Db::range`].
/// Forward with `next`, backward with `next_back` (`.rev()`); the two ends
/// never cross. Each key is seen at a state no older than the iterator's
/// creation; writes made after it may or may not be seen (a batch written
/// after creation may be seen in part, as the committer moves it into the
/// space key by key).
pub struct Iter<'a> {
    shared: &'a Shared,
    snapshot: u64,
    /// Newest first.
    mems: Vec<Arc<MemTable>>,
    /// The range as asked for.
    range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    /// What is left: `lo` rises as the front emits, `hi` falls as the back
    /// does.
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    /// Fetched by the front, not yet emitted, ascending; every key in it
    /// is below `lo`'s region and below every key in `back`.
    front: VecDeque<KeyValue>,
    /// Fetched by the back, not yet emitted, descending.
    back: VecDeque<KeyValue>,
    /// Nothing is left to fetch between `lo` and `hi`.
    exhausted: bool,
    /// An error ended the iteration.
    failed: bool,
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// One source's chunk: its keys in order, and whether it may have more.
struct Chunk {
    items: Vec<(Box<[u8]>, Version)>,
    full: bool,
}

impl<'a> Iter<'a> {
    pub(crate) fn new(shared: &'a Shared, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Iter<'a> {
        let snapshot = shared.visible.load(std::sync::atomic::Ordering::Acquire);
        let mems = {
            let m = shared.mems.read();
            let mut v = vec![m.active.clone()];
            v.extend(m.frozen.iter().rev().map(|f| f.mem.clone()));
            v
        };
        let empty = bounds_cross(&lo, &hi);
        Iter {
            shared,
            snapshot,
            mems,
            range: (lo.clone(), hi.clone()),
            lo,
            hi,
            front: VecDeque::new(),
            back: VecDeque::new(),
            exhausted: empty,
            failed: false,
        }
    }

    /// Moves the front of the iterator to the first key `>= key` (within the
    /// range); the next `next()` returns it.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        let key = key.as_ref();
        self.front.clear();
        self.lo = if within_start(key, as_ref(&self.range.0)) {
            Bound::Included(key.to_vec())
        } else {
            self.range.0.clone()
        };
        // What the back fetched below the new front is no longer in range.
        while self
            .back
            .back()
            .is_some_and(|(k, _)| !within_start(k, as_ref(&self.lo)))
        {
            self.back.pop_back();
        }
        self.exhausted = bounds_cross(&self.lo, &self.hi);
    }

    /// Moves the back of the iterator to the last key `<= key` (within the
    /// range); the next `next_back()` returns it.
    pub fn seek_back(&mut self, key: impl AsRef<[u8]>) {
        let key = key.as_ref();
        self.back.clear();
        self.hi = if within_end(key, as_ref(&self.range.1)) {
            Bound::Included(key.to_vec())
        } else {
            self.range.1.clone()
        };
        while self
            .front
            .back()
            .is_some_and(|(k, _)| !within_end(k, as_ref(&self.hi)))
        {
            self.front.pop_back();
        }
        self.exhausted = bounds_cross(&self.lo, &self.hi);
    }

    /// Reads the next chunk of keys above `lo` into `front`.
    fn fill_front(&mut self) -> Result<()> {
        let mut chunks = Vec::with_capacity(self.mems.len() + 1);
        for m in &self.mems {
            let mut items = Vec::new();
            m.scan_forward(
                as_ref(&self.lo),
                as_ref(&self.hi),
                self.snapshot,
                CHUNK,
                &mut items,
            );
            let full = items.len() == CHUNK;
            chunks.push(Chunk { items, full });
        }
        chunks.push(self.space_forward()?);
        let (merged, horizon) = merge_chunks(chunks, false);
        for (k, v) in merged {
            self.front.push_back((k.into_vec(), v.into_vec()));
        }
        match horizon {
            Some(h) => self.lo = Bound::Excluded(h.into_vec()),
            None => {
                // Everything left was fetched: the region ends at the last
                // key the front holds (so a later seek of the back cannot
                // fetch it again).
                if let Some((k, _)) = self.front.back() {
                    self.lo = Bound::Excluded(k.clone());
                }
                self.exhausted = true;
            }
        }
        Ok(())
    }

    /// Reads the next chunk of keys below `hi` into `back`.
    fn fill_back(&mut self) -> Result<()> {
        let mut chunks = Vec::with_capacity(self.mems.len() + 1);
        for m in &self.mems {
            let mut items = Vec::new();
            m.scan_backward(
                as_ref(&self.hi),
                as_ref(&self.lo),
                self.snapshot,
                CHUNK,
                &mut items,
            );
            let full = items.len() == CHUNK;
            chunks.push(Chunk { items, full });
        }
        chunks.push(self.space_backward()?);
        let (merged, horizon) = merge_chunks(chunks, true);
        for (k, v) in merged {
            self.back.push_back((k.into_vec(), v.into_vec()));
        }
        match horizon {
            Some(h) => self.hi = Bound::Excluded(h.into_vec()),
            None => {
                if let Some((k, _)) = self.back.back() {
                    self.hi = Bound::Excluded(k.clone());
                }
                self.exhausted = true;
            }
        }
        Ok(())
    }

    /// Up to `CHUNK` pairs of the space above `lo` (and within `hi`).
    fn space_forward(&self) -> Result<Chunk> {
        let st = self.shared.read_state();
        let mut items = Vec::new();
        let start: &[u8] = match &self.lo {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[],
        };
        let mut f = st.sparse.find(start);
        loop {
            if st.sparse.meta(&f).size > 0 {
                let data = self.shared.interval(&st, &f)?;
                let mut i = match &self.lo {
                    Bound::Included(k) => data.lower_bound(k),
                    Bound::Excluded(k) => data.upper_bound(k),
                    Bound::Unbounded => 0,
                };
                while i < data.len() {
                    let (k, v) = data.pair(i);
                    if !within_end(k, as_ref(&self.hi)) {
                        return Ok(Chunk { items, full: false });
                    }
                    items.push((k.into(), Some(v.into())));
                    if items.len() == CHUNK {
                        return Ok(Chunk { items, full: true });
                    }
                    i += 1;
                }
            }
            match st.sparse.next(&f) {
                Some(n) => {
                    if !within_end(st.sparse.anchor(&n), as_ref(&self.hi)) {
                        return Ok(Chunk { items, full: false });
                    }
                    f = n;
                }
                None => return Ok(Chunk { items, full: false }),
            }
        }
    }

    /// Up to `CHUNK` pairs of the space below `hi` (and within `lo`), in
    /// descending order.
    fn space_backward(&self) -> Result<Chunk> {
        let st = self.shared.read_state();
        let mut items = Vec::new();
        let mut f = match &self.hi {
            Bound::Included(k) | Bound::Excluded(k) => st.sparse.find(k),
            Bound::Unbounded => st.sparse.last(),
        };
        loop {
            if st.sparse.meta(&f).size > 0 {
                let data = self.shared.interval(&st, &f)?;
                let mut i = match &self.hi {
                    Bound::Included(k) => data.upper_bound(k),
                    Bound::Excluded(k) => data.lower_bound(k),
                    Bound::Unbounded => data.len(),
                };
                while i > 0 {
                    i -= 1;
                    let (k, v) = data.pair(i);
                    if !within_start(k, as_ref(&self.lo)) {
                        return Ok(Chunk { items, full: false });
                    }
                    items.push((k.into(), Some(v.into())));
                    if items.len() == CHUNK {
                        return Ok(Chunk { items, full: true });
                    }
                }
            }
            // The interval's anchor is at or below all its keys: when it is
            // below the range, no earlier interval can hold anything.
            if !within_start(st.sparse.anchor(&f), as_ref(&self.lo)) {
                return Ok(Chunk { items, full: false });
            }
            match st.sparse.prev_anchor(&f).map(<[u8]>::to_vec) {
                Some(p) => f = st.sparse.find(&p),
                None => return Ok(Chunk { items, full: false }),
            }
        }
    }
}

/// Whether no key lies between `lo` and `hi`.
fn bounds_cross(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
    }
}

/// Merges the chunks of the sources (MemTables newest first, the space
/// last), each ascending (descending when `reverse`). Returns the live pairs
/// up to the horizon and the horizon: the key up to which every source is
/// complete (`None`: every source is exhausted, all keys are complete).
fn merge_chunks(chunks: Vec<Chunk>, reverse: bool) -> (Vec<LivePair>, Option<Box<[u8]>>) {
    let before = |a: &[u8], b: &[u8]| if reverse { a > b } else { a < b };
    let horizon: Option<Box<[u8]>> = chunks
        .iter()
        .filter(|c| c.full)
        .filter_map(|c| c.items.last().map(|(k, _)| k.clone()))
        .reduce(|a, b| if before(&a, &b) { a } else { b });
    let mut pos = vec![0usize; chunks.len()];
    let mut out = Vec::new();
    loop {
        // The next key over all sources, and the newest source holding it.
        let mut best: Option<(usize, &[u8])> = None;
        for (s, c) in chunks.iter().enumerate() {
            if let Some((k, _)) = c.items.get(pos[s]) {
                if best.is_none_or(|(_, b)| before(k, b)) {
                    best = Some((s, k));
                }
            }
        }
        let Some((s, key)) = best else { break };
        if horizon.as_deref().is_some_and(|h| before(h, key)) {
            break;
        }
        let key: Box<[u8]> = key.into();
        let value = chunks[s].items[pos[s]].1.clone();
        for (t, c) in chunks.iter().enumerate() {
            if c.items.get(pos[t]).is_some_and(|(k, _)| *k == key) {
                pos[t] += 1;
            }
        }
        if let Some(v) = value {
            out.push((key, v));
        }
    }
    (out, horizon)
}

impl Iterator for Iter<'_> {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(kv) = self.front.pop_front() {
                return Some(Ok(kv));
            }
            if self.failed {
                return None;
            }
            if self.exhausted {
                // Only what the back fetched is left: its smallest first.
                return self.back.pop_back().map(Ok);
            }
            if let Err(e) = self.fill_front() {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(kv) = self.back.pop_front() {
                return Some(Ok(kv));
            }
            if self.failed {
                return None;
            }
            if self.exhausted {
                return self.front.pop_back().map(Ok);
            }
            if let Err(e) = self.fill_back() {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}
