//! An arena skip list: one writer at a time, any number of lock-free
//! readers; the MemTable's ordered map (§5.3: "a thread-safe skip list
//! that supports concurrent access of one writer and multiple readers").
//!
//! Every node (header, tower of next pointers, key bytes, value bytes) is
//! carved out of large arena chunks, so an insert costs no heap allocation,
//! a lookup touches one cache line per level for short keys, iteration is a
//! pointer walk, and dropping the list frees a handful of chunks instead of
//! every entry (docs/DESIGN.md has the measurements against
//! crossbeam-skiplist that motivated it).
//!
//! Invariants:
//! - Nodes are never freed, moved or unlinked while the list lives; a chunk
//!   never moves once allocated (the chunk list only grows).
//! - A node's fields other than its tower are written before the node is
//!   linked, and never after; tower pointers are only ever set with
//!   `Release` stores, and read with `Acquire` loads, so a reader that
//!   reaches a node sees it fully initialized.
//! - Level 0 links every node in order: key ascending, then sequence number
//!   descending (the newest version of a key comes first).
//! - Inserts are serialized by the writer mutex; `(key, seq)` pairs are
//!   unique (the store hands out each sequence number once).

use std::cmp::Ordering as CmpOrdering;
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Levels of the tallest tower: with a branching factor of 4 this indexes
/// 4^12 = 16 M entries in O(log n).
const MAX_HEIGHT: usize = 12;
/// Bytes of an ordinary arena chunk (one huge page).
const CHUNK: usize = crate::chunk::ALIGN;
/// The value length that marks a deletion.
const TOMBSTONE: u32 = u32::MAX;

/// The fixed part of a node; the tower of `height` pointers follows, then
/// the key bytes, then the value bytes.
#[repr(C)]
struct Node {
    seq: u64,
    klen: u32,
    vlen: u32,
    height: u32,
    _pad: u32,
    tower: [AtomicPtr<Node>; 0],
}

impl Node {
    /// The tower pointer at `level`.
    ///
    /// # Safety
    /// `node` points to an initialized node whose height exceeds `level`.
    #[inline]
    unsafe fn next(node: NonNull<Node>, level: usize) -> &'static AtomicPtr<Node> {
        // SAFETY: the caller guarantees `level < height`; the tower lies
        // right after the header inside the node's allocation, which lives
        // (unmoved) as long as the list, and the `'static` reference never
        // escapes a borrow of the list (see `SkipList`'s methods).
        unsafe {
            &*node
                .as_ptr()
                .cast::<u8>()
                .add(size_of::<Node>())
                .cast::<AtomicPtr<Node>>()
                .add(level)
        }
    }

    /// The key and value bytes (the value is empty for a deletion).
    ///
    /// # Safety
    /// `node` points to an initialized, linked node of a live list.
    #[inline]
    unsafe fn bytes<'a>(node: NonNull<Node>) -> (&'a [u8], Option<&'a [u8]>) {
        // SAFETY: the header was written before the node was published
        // and is never written again; the key and value bytes follow the
        // tower inside the same allocation.
        unsafe {
            let n = node.as_ref();
            let base = node
                .as_ptr()
                .cast::<u8>()
                .add(size_of::<Node>() + n.height as usize * size_of::<AtomicPtr<Node>>());
            let key = std::slice::from_raw_parts(base, n.klen as usize);
            let value = (n.vlen != TOMBSTONE)
                .then(|| std::slice::from_raw_parts(base.add(n.klen as usize), n.vlen as usize));
            (key, value)
        }
    }
}

/// What only the writer touches.
struct Writer {
    chunks: Vec<crate::chunk::Chunk>,
    /// Free bytes at the end of the last ordinary chunk.
    free: usize,
    /// Where they start.
    cursor: *mut u8,
    rng: u64,
}

// SAFETY: `cursor` points into a chunk owned by `chunks` of the same
// `Writer`; moving the `Writer` between threads moves the ownership with it.
unsafe impl Send for Writer {}

/// The skip list. Keys and values are byte strings; each entry also has a
/// sequence number and may be a deletion (no value).
pub struct SkipList {
    head: NonNull<Node>,
    height: AtomicUsize,
    len: AtomicUsize,
    /// Bytes of the arena taken by nodes.
    memory: AtomicUsize,
    writer: Mutex<Writer>,
}

// SAFETY: readers only follow `Acquire`-loaded pointers to nodes that were
// fully written before their `Release` publication, and never write; the
// writer is serialized by `writer`. The nodes live in chunks owned by the
// list, which outlive every shared borrow of it.
unsafe impl Send for SkipList {}
// SAFETY: as above.
unsafe impl Sync for SkipList {}

/// One entry, borrowed from the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The sequence number.
    pub seq: u64,
    /// The value, or `None` for a deletion.
    pub value: Option<&'a [u8]>,
}

fn compare(key: &[u8], seq: u64, node: NonNull<Node>) -> CmpOrdering {
    // SAFETY: callers pass linked nodes of a live list.
    let (nkey, _) = unsafe { Node::bytes(node) };
    // SAFETY: as above; `seq` is part of the immutable header.
    let nseq = unsafe { node.as_ref().seq };
    key.cmp(nkey).then_with(|| nseq.cmp(&seq))
}

impl Default for SkipList {
    fn default() -> Self {
        Self::new()
    }
}

impl SkipList {
    /// An empty list.
    pub fn new() -> SkipList {
        let mut w = Writer {
            chunks: Vec::new(),
            free: 0,
            cursor: ptr::null_mut(),
            rng: 0x9E37_79B9_7F4A_7C15,
        };
        let head = Self::alloc_node(&mut w, MAX_HEIGHT, 0, 0);
        // SAFETY: `alloc_node` returned room for a node of MAX_HEIGHT with
        // no key or value; the header and tower are written here before the
        // list exists, so nothing reads them concurrently.
        unsafe {
            head.as_ptr().write(Node {
                seq: 0,
                klen: 0,
                vlen: 0,
                height: MAX_HEIGHT as u32,
                _pad: 0,
                tower: [],
            });
            for l in 0..MAX_HEIGHT {
                Node::next(head, l).store(ptr::null_mut(), Ordering::Relaxed);
            }
        }
        SkipList {
            head,
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            memory: AtomicUsize::new(0),
            writer: Mutex::new(w),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the arena taken by entries (the chunks hold up to one
    /// chunk more).
    pub fn memory(&self) -> usize {
        self.memory.load(Ordering::Relaxed)
    }

    /// Room for a node of `height` with `klen + vlen` bytes, 8-aligned.
    fn alloc_node(w: &mut Writer, height: usize, klen: usize, vlen: usize) -> NonNull<Node> {
        let size = (size_of::<Node>() + height * size_of::<AtomicPtr<Node>>() + klen + vlen)
            .next_multiple_of(align_of::<Node>());
        if size > CHUNK / 4 {
            // A big entry gets a chunk of its own, so the current chunk's
            // free tail is not wasted.
            let chunk = crate::chunk::Chunk::new(size);
            let p = chunk.as_ptr();
            w.chunks.push(chunk);
            // SAFETY: a chunk's pointer is never null.
            return unsafe { NonNull::new_unchecked(p.cast()) };
        }
        if w.free < size {
            let chunk = crate::chunk::Chunk::new(CHUNK);
            w.cursor = chunk.as_ptr();
            w.free = chunk.len();
            w.chunks.push(chunk);
        }
        let p = w.cursor;
        // SAFETY: `size <= free`, so `cursor + size` stays within the chunk
        // (or one past its end).
        w.cursor = unsafe { w.cursor.add(size) };
        w.free -= size;
        // SAFETY: `cursor` points into a live chunk, never null.
        unsafe { NonNull::new_unchecked(p.cast()) }
    }

    fn random_height(w: &mut Writer) -> usize {
        // xorshift64*: cheap and good enough for tower heights.
        let mut x = w.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        w.rng = x;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        // Each extra level with probability 1/4.
        let h = 1 + ((r.trailing_zeros() as usize) / 2);
        h.min(MAX_HEIGHT)
    }

    /// The first node at or after `(key, seq)` and, when `preds` is given,
    /// the last node before it on every level.
    fn seek(
        &self,
        key: &[u8],
        seq: u64,
        mut preds: Option<&mut [NonNull<Node>; MAX_HEIGHT]>,
    ) -> Option<NonNull<Node>> {
        let mut x = self.head;
        let mut level = self.height.load(Ordering::Acquire) - 1;
        loop {
            // SAFETY: `x` is the head or a linked node, both taller than
            // `level` (a node is only reached on levels it is linked at).
            let next = NonNull::new(unsafe { Node::next(x, level) }.load(Ordering::Acquire));
            match next {
                Some(n) if compare(key, seq, n) == CmpOrdering::Greater => x = n,
                _ => {
                    if let Some(p) = preds.as_deref_mut() {
                        p[level] = x;
                    }
                    if level == 0 {
                        return next;
                    }
                    level -= 1;
                }
            }
        }
    }

    /// Inserts an entry (a deletion when `value` is `None`). Writers are
    /// serialized; readers are never blocked.
    pub fn insert(&self, key: &[u8], seq: u64, value: Option<&[u8]>) {
        let vlen = value.map_or(0, <[u8]>::len);
        assert!(
            key.len() < u32::MAX as usize && vlen < TOMBSTONE as usize,
            "entry too large for the skip list"
        );
        let mut w = self.writer.lock();
        let height = Self::random_height(&mut w);
        let node = Self::alloc_node(&mut w, height, key.len(), vlen);
        self.memory.fetch_add(
            size_of::<Node>() + height * size_of::<AtomicPtr<Node>>() + key.len() + vlen,
            Ordering::Relaxed,
        );
        // SAFETY: `node` has room for the header, `height` tower slots and
        // the key and value bytes; nothing else refers to it until it is
        // linked below.
        unsafe {
            node.as_ptr().write(Node {
                seq,
                klen: key.len() as u32,
                vlen: if value.is_some() {
                    vlen as u32
                } else {
                    TOMBSTONE
                },
                height: height as u32,
                _pad: 0,
                tower: [],
            });
            let base = node
                .as_ptr()
                .cast::<u8>()
                .add(size_of::<Node>() + height * size_of::<AtomicPtr<Node>>());
            ptr::copy_nonoverlapping(key.as_ptr(), base, key.len());
            if let Some(v) = value {
                ptr::copy_nonoverlapping(v.as_ptr(), base.add(key.len()), v.len());
            }
            for l in 0..height {
                Node::next(node, l).store(ptr::null_mut(), Ordering::Relaxed);
            }
        }
        let mut preds = [self.head; MAX_HEIGHT];
        let cur = self.height.load(Ordering::Relaxed);
        if height > cur {
            // Levels above the current height start at the head.
            self.height.store(height, Ordering::Release);
        }
        self.seek(key, seq, Some(&mut preds));
        for (level, pred) in preds.iter().enumerate().take(height) {
            // SAFETY: `pred` is the head or a node linked on `level`; `node`
            // is ours and `level < height`. The Release store publishes the
            // node's contents to readers that Acquire-load the pointer.
            unsafe {
                let after = Node::next(*pred, level).load(Ordering::Relaxed);
                Node::next(node, level).store(after, Ordering::Relaxed);
                Node::next(*pred, level).store(node.as_ptr(), Ordering::Release);
            }
        }
        self.len.fetch_add(1, Ordering::Relaxed);
        drop(w);
    }

    fn entry<'a>(&'a self, node: NonNull<Node>) -> EntryRef<'a> {
        // SAFETY: `node` is linked in this list, which `'a` borrows.
        let (key, value) = unsafe { Node::bytes(node) };
        // SAFETY: as above.
        let seq = unsafe { node.as_ref().seq };
        EntryRef { key, seq, value }
    }

    /// The first entry at or after `(key, seq)` in list order.
    pub fn lower_bound(&self, key: &[u8], seq: u64) -> Option<EntryRef<'_>> {
        self.seek(key, seq, None).map(|n| self.entry(n))
    }

    /// Entries in order from the first at or after `(key, seq)`.
    pub fn iter_from(&self, key: &[u8], seq: u64) -> Iter<'_> {
        Iter {
            list: self,
            next: self.seek(key, seq, None),
        }
    }

    /// Every entry in order.
    pub fn iter(&self) -> Iter<'_> {
        // SAFETY: the head is taller than level 0.
        let first = unsafe { Node::next(self.head, 0) }.load(Ordering::Acquire);
        Iter {
            list: self,
            next: NonNull::new(first),
        }
    }

    /// The last node on every level (the predecessors of the end).
    fn seek_end(&self, preds: &mut [NonNull<Node>; MAX_HEIGHT]) {
        let mut x = self.head;
        let mut level = self.height.load(Ordering::Acquire) - 1;
        loop {
            // SAFETY: as in `seek`.
            match NonNull::new(unsafe { Node::next(x, level) }.load(Ordering::Acquire)) {
                Some(n) => x = n,
                None => {
                    preds[level] = x;
                    if level == 0 {
                        return;
                    }
                    level -= 1;
                }
            }
        }
    }

    /// Entries in order from a node some positions before `(key, seq)` (or
    /// before the end when `key` is `None`), or from the start: a window
    /// that ends at that position, for reverse scans. Returns the iterator
    /// and whether it starts at the beginning.
    pub fn iter_before(&self, key: Option<&[u8]>, seq: u64) -> (Iter<'_>, bool) {
        let mut preds = [self.head; MAX_HEIGHT];
        match key {
            Some(k) => {
                self.seek(k, seq, Some(&mut preds));
            }
            None => self.seek_end(&mut preds),
        }
        // The predecessor on level 3 lies about 4^3 = 64 nodes back.
        let height = self.height.load(Ordering::Acquire);
        let level = 3.min(height - 1);
        let start = preds[level];
        let from_head = start == self.head;
        let next = if from_head {
            // SAFETY: the head is taller than level 0.
            NonNull::new(unsafe { Node::next(self.head, 0) }.load(Ordering::Acquire))
        } else {
            Some(start)
        };
        (Iter { list: self, next }, from_head)
    }
}

/// An iterator over entries in list order.
pub struct Iter<'a> {
    list: &'a SkipList,
    next: Option<NonNull<Node>>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = EntryRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<EntryRef<'a>> {
        let n = self.next?;
        // SAFETY: `n` is linked in the list `'a` borrows; every linked node
        // has a level-0 pointer.
        self.next = NonNull::new(unsafe { Node::next(n, 0) }.load(Ordering::Acquire));
        Some(self.list.entry(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    #[test]
    fn ordered_by_key_then_newest_first() {
        let l = SkipList::new();
        l.insert(b"b", 1, Some(b"b1"));
        l.insert(b"a", 2, Some(b"a2"));
        l.insert(b"b", 3, None);
        l.insert(b"", 4, Some(b""));
        l.insert(b"ab", 5, Some(&[7u8; 300_000]));
        let got: Vec<_> = l.iter().map(|e| (e.key.to_vec(), e.seq)).collect();
        assert_eq!(
            got,
            vec![
                (b"".to_vec(), 4),
                (b"a".to_vec(), 2),
                (b"ab".to_vec(), 5),
                (b"b".to_vec(), 3),
                (b"b".to_vec(), 1)
            ]
        );
        let e = l.lower_bound(b"b", u64::MAX).unwrap();
        assert_eq!((e.seq, e.value), (3, None));
        let e = l.lower_bound(b"b", 2).unwrap();
        assert_eq!((e.seq, e.value), (1, Some(&b"b1"[..])));
        assert!(l.lower_bound(b"c", u64::MAX).is_none());
        assert_eq!(
            l.lower_bound(b"ab", 9).unwrap().value.unwrap().len(),
            300_000
        );
        assert_eq!(l.len(), 5);
        assert!(l.memory() >= 300_000);
    }

    #[test]
    fn matches_a_model_and_windows_end_where_asked() {
        let mut rng = StdRng::seed_from_u64(3);
        let l = SkipList::new();
        let mut model = BTreeMap::new();
        for seq in 1..20_000u64 {
            let k = rng.gen_range(0..3000u32).to_be_bytes().to_vec();
            let v = (rng.gen_bool(0.9)).then(|| vec![seq as u8; rng.gen_range(0..40)]);
            l.insert(&k, seq, v.as_deref());
            model.insert((k, std::cmp::Reverse(seq)), v);
        }
        let got: Vec<_> = l
            .iter()
            .map(|e| {
                (
                    (e.key.to_vec(), std::cmp::Reverse(e.seq)),
                    e.value.map(<[u8]>::to_vec),
                )
            })
            .collect();
        let want: Vec<_> = model.into_iter().collect();
        assert_eq!(got, want);
        for _ in 0..200 {
            let k = rng.gen_range(0..3100u32).to_be_bytes();
            let (window, from_start) = l.iter_before(Some(&k), u64::MAX);
            let w: Vec<_> = window
                .take_while(|e| {
                    (e.key, std::cmp::Reverse(e.seq)) < (&k[..], std::cmp::Reverse(u64::MAX))
                })
                .collect();
            // The window holds the entries right before the position.
            let before: Vec<_> = l.iter().filter(|e| e.key < &k[..]).collect();
            assert!(before.ends_with(&w));
            assert!(from_start == (w.len() == before.len()));
        }
    }

    #[test]
    fn readers_run_while_the_writer_inserts() {
        let l = Arc::new(SkipList::new());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let l = l.clone();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut rounds = 0;
                    while !stop.load(Ordering::Relaxed) {
                        // Every reader sees a sorted list whose values match
                        // their keys.
                        let mut last: Option<(Vec<u8>, u64)> = None;
                        for e in l.iter() {
                            let v = e.value.unwrap();
                            assert_eq!(v, &e.seq.to_le_bytes());
                            if let Some((k, s)) = &last {
                                assert!(
                                    (k.as_slice(), std::cmp::Reverse(*s))
                                        < (e.key, std::cmp::Reverse(e.seq))
                                );
                            }
                            last = Some((e.key.to_vec(), e.seq));
                        }
                        rounds += 1;
                    }
                    rounds
                })
            })
            .collect();
        let mut rng = StdRng::seed_from_u64(9);
        for seq in 1..50_000u64 {
            let k = rng.gen_range(0..10_000u32).to_be_bytes();
            l.insert(&k, seq, Some(&seq.to_le_bytes()));
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        assert_eq!(l.iter().count(), 49_999);
    }
}
