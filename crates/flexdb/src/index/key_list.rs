//! A list of byte strings stored as their longest common prefix, kept once,
//! followed by every string's remaining suffix back to back: the anchors and
//! pivots of the sparse index's nodes. One allocation for the bytes and one
//! for the ends per node instead of one per key; a binary search compares
//! the searched key with the prefix once and then touches only the short
//! suffixes, in consecutive memory. Anchors of neighbouring intervals share
//! long prefixes (keys such as `user` + zero-padded numbers, cut at the
//! shortest separator), so a node keeps a few bytes per key.
//!
//! Invariants:
//! - `bytes[..plen]` is the longest common prefix of the keys (all of the
//!   key when there is one, empty when there are none).
//! - Key `i` is `bytes[..plen]` followed by
//!   `bytes[plen + end(i - 1)..plen + end(i)]` (`end(-1)` = 0); the ends
//!   never decrease.
//! - `ends` is of the narrowest width that holds the suffixes' total
//!   length: `Byte` (u8) up to 255 bytes (a leaf of short suffixes),
//!   `Narrow` (u16) up to `u16::MAX`, `Wide` (u32) beyond (only for very
//!   long keys).
//! - Every edit re-encodes the list into vectors of exactly the size it
//!   needs (or inline, below), so `memory` has no slack to hide. Edits are O(bytes of the
//!   node), like the moves of an unencoded list.
//! - A list whose bytes fit `INLINE_BYTES` and whose ends fit
//!   `INLINE_ENDS` (of one or two bytes) keeps them inside the
//!   `KeyList` itself, not in allocations of their own: a node of short anchors is then one
//!   block of memory with the node that holds it, and a search reaches
//!   its bytes without first loading where they lie
//!   (`experiments/2026-12-08-sparse-leaf-inline.md`).

use std::cmp::Ordering;

use smallvec::SmallVec;

/// The most bytes of a list [`KeyList::prefetch`] asks for: a leaf of 64
/// short anchors takes about 300, and lists of long keys are rare enough
/// not to be worth hundreds of prefetches per search.
const PREFETCH_BYTES: usize = 1024;

/// Bytes (prefix and suffixes) a list keeps inline: a leaf of 64 short
/// anchors takes about 300.
pub(crate) const INLINE_BYTES: usize = 448;
/// How far into a list (from its start) a search of an inline list of
/// short keys reads: its ends and its bytes up to about 300 (see
/// `INLINE_BYTES`), which `smallvec` 1.x keeps at the start of its
/// struct (a prefetch hint only: see `sparse::KEYS_TAIL`).
pub(crate) const SEARCHED_INLINE: usize = std::mem::offset_of!(KeyList, bytes) + 320;
/// Ends a list keeps inline: one per key of a full node.
const INLINE_ENDS: usize = 64;

type Bytes = SmallVec<[u8; INLINE_BYTES]>;

/// Where each key's suffix ends, relative to the end of the prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ends {
    Byte(SmallVec<[u8; INLINE_ENDS]>),
    Narrow(SmallVec<[u16; INLINE_ENDS]>),
    Wide(Vec<u32>),
}

/// Keys stored as a common prefix and suffixes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct KeyList {
    /// First, so that a search's probes start on the lines after the
    /// node's start (see the module doc).
    ends: Ends,
    plen: u32,
    bytes: Bytes,
}

impl Default for KeyList {
    fn default() -> Self {
        KeyList {
            bytes: Bytes::new(),
            plen: 0,
            ends: Ends::Byte(SmallVec::new()),
        }
    }
}

/// Length of the common prefix of `a` and `b`.
fn lcp(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// `a <= b`, comparing short slices (suffixes are mostly a few bytes)
/// inline rather than through a call to `memcmp`.
#[inline]
fn at_most(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    if n > 8 {
        return a <= b;
    }
    for i in 0..n {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
    }
    a.len() <= b.len()
}

/// Index of the first key among `lo..ends.len()` whose suffix is above
/// `rest` (suffixes `lo..` in order), by binary search.
#[inline]
fn search<E: Copy + Into<u32>>(ends: &[E], suffixes: &[u8], lo: usize, rest: &[u8]) -> usize {
    let (mut lo, mut hi) = (lo, ends.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        let start = if mid == 0 {
            0
        } else {
            ends[mid - 1].into() as usize
        };
        let end = ends[mid].into() as usize;
        if at_most(&suffixes[start..end], rest) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

impl KeyList {
    /// No keys.
    pub fn new() -> KeyList {
        KeyList::default()
    }

    /// Encodes keys `prefix ++ piece[0] ++ piece[1]` for each of `pieces`
    /// (`prefix` must be their longest common prefix) into exact-size
    /// vectors.
    fn encode(prefix: &[u8], pieces: &[[&[u8]; 2]]) -> KeyList {
        let suffix_bytes: usize = pieces.iter().map(|[a, b]| a.len() + b.len()).sum();
        let mut bytes = Bytes::with_capacity(prefix.len() + suffix_bytes);
        bytes.extend_from_slice(prefix);
        let n = pieces.len();
        let mut ends = if suffix_bytes <= usize::from(u8::MAX) {
            Ends::Byte(SmallVec::with_capacity(n))
        } else if suffix_bytes <= usize::from(u16::MAX) {
            Ends::Narrow(SmallVec::with_capacity(n))
        } else {
            Ends::Wide(Vec::with_capacity(n))
        };
        for [a, b] in pieces {
            bytes.extend_from_slice(a);
            bytes.extend_from_slice(b);
            let end = bytes.len() - prefix.len();
            match &mut ends {
                // In range: the width was chosen for the largest end.
                Ends::Byte(v) => v.push(end as u8),
                Ends::Narrow(v) => v.push(end as u16),
                Ends::Wide(v) => v.push(end as u32),
            }
        }
        KeyList {
            bytes,
            plen: prefix.len() as u32,
            ends,
        }
    }

    /// Number of keys.
    #[inline]
    pub fn len(&self) -> usize {
        match &self.ends {
            Ends::Byte(v) => v.len(),
            Ends::Narrow(v) => v.len(),
            Ends::Wide(v) => v.len(),
        }
    }

    /// The prefix every key starts with (the longest one).
    #[inline]
    pub fn prefix(&self) -> &[u8] {
        &self.bytes[..self.plen as usize]
    }

    #[inline]
    fn end(&self, i: usize) -> usize {
        match &self.ends {
            Ends::Byte(v) => usize::from(v[i]),
            Ends::Narrow(v) => usize::from(v[i]),
            Ends::Wide(v) => v[i] as usize,
        }
    }

    /// What follows the prefix in key `i`.
    #[inline]
    pub fn suffix(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.end(i - 1) };
        let base = self.plen as usize;
        &self.bytes[base + start..base + self.end(i)]
    }

    /// Key `i` as a new vector.
    pub fn get(&self, i: usize) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(i, &mut out);
        out
    }

    /// Replaces the content of `out` with key `i`.
    pub fn write(&self, i: usize, out: &mut Vec<u8>) {
        let suffix = self.suffix(i);
        out.clear();
        out.reserve(self.plen as usize + suffix.len());
        out.extend_from_slice(self.prefix());
        out.extend_from_slice(suffix);
    }

    /// Whether key `i` equals key `j` of `other`, without copying either.
    pub fn same_key(&self, i: usize, other: &KeyList, j: usize) -> bool {
        let (a, b) = (self.suffix(i), other.suffix(j));
        let (pa, pb) = (self.prefix(), other.prefix());
        pa.len() + a.len() == pb.len() + b.len() && pa.iter().chain(a).eq(pb.iter().chain(b))
    }

    /// Orders key `i` against `key`, in place.
    pub fn compare(&self, i: usize, key: &[u8]) -> Ordering {
        let p = self.prefix();
        let n = p.len().min(key.len());
        match p.cmp(&key[..n]) {
            // The key is shorter than the prefix and starts it.
            Ordering::Equal if n < p.len() => Ordering::Greater,
            Ordering::Equal => self.suffix(i).cmp(&key[n..]),
            other => other,
        }
    }

    /// Index of the first key among `lo..len()` that is above `key`
    /// (`len()` when none is); keys `lo..` must be in order.
    #[inline]
    pub fn upper_bound(&self, lo: usize, key: &[u8]) -> usize {
        let p = self.prefix();
        let n = p.len().min(key.len());
        match key[..n].cmp(p) {
            // Every key starts with the prefix, so all of them are above a
            // key below it, or below a key above it.
            Ordering::Less => return lo,
            Ordering::Greater => return self.len(),
            Ordering::Equal if n < p.len() => return lo,
            Ordering::Equal => {}
        }
        let suffixes = &self.bytes[p.len()..];
        let rest = &key[n..];
        match &self.ends {
            Ends::Byte(v) => search(v, suffixes, lo, rest),
            Ends::Narrow(v) => search(v, suffixes, lo, rest),
            Ends::Wide(v) => search(v, suffixes, lo, rest),
        }
    }

    /// Appends a key.
    #[cfg(test)]
    pub fn push(&mut self, key: &[u8]) {
        self.insert_many(self.len(), [key]);
    }

    /// A list of `keys`.
    pub fn from_keys<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> KeyList {
        let mut k = KeyList::new();
        k.insert_many(0, keys);
        k
    }

    /// Inserts `keys` before key `at`.
    pub fn insert_many<'a>(&mut self, at: usize, keys: impl IntoIterator<Item = &'a [u8]>) {
        let new: Vec<&[u8]> = keys.into_iter().collect();
        let Some(&first) = new.first() else { return };
        let old = self.prefix();
        // The new longest common prefix: the old one, or the first new key
        // when there was none, cut where a new key departs from it.
        let base = if self.len() == 0 { first } else { old };
        let plen = new
            .iter()
            .fold(base.len(), |p, k| p.min(lcp(&base[..p], k)));
        let cut = plen.min(old.len());
        let mut pieces = Vec::with_capacity(self.len() + new.len());
        pieces.extend((0..at).map(|i| [&old[cut..], self.suffix(i)]));
        pieces.extend(new.iter().map(|k| [&k[plen..], &[][..]]));
        pieces.extend((at..self.len()).map(|i| [&old[cut..], self.suffix(i)]));
        *self = KeyList::encode(&base[..plen], &pieces);
    }

    /// Inserts one key before key `at`.
    pub fn insert(&mut self, at: usize, key: &[u8]) {
        self.insert_many(at, [key]);
    }

    /// The keys at `indexes` (in that order) as a new list.
    fn select(&self, indexes: impl Iterator<Item = usize> + Clone) -> KeyList {
        let Some(first) = indexes.clone().next() else {
            return KeyList::new();
        };
        // The prefix grows by what the remaining suffixes share.
        let s0 = self.suffix(first);
        let grow = indexes
            .clone()
            .fold(s0.len(), |g, i| g.min(lcp(&s0[..g], self.suffix(i))));
        let mut prefix = Vec::with_capacity(self.plen as usize + grow);
        prefix.extend_from_slice(self.prefix());
        prefix.extend_from_slice(&s0[..grow]);
        let pieces: Vec<[&[u8]; 2]> = indexes
            .map(|i| [&self.suffix(i)[grow..], &[][..]])
            .collect();
        KeyList::encode(&prefix, &pieces)
    }

    /// Removes key `at`.
    pub fn remove(&mut self, at: usize) {
        self.remove_range(at..at + 1);
    }

    /// Removes keys `range` (one rebuild of the list, whatever its length).
    pub fn remove_range(&mut self, range: std::ops::Range<usize>) {
        *self = self.select((0..self.len()).filter(|i| !range.contains(i)));
    }

    /// Replaces key `at`.
    pub fn set(&mut self, at: usize, key: &[u8]) {
        self.remove(at);
        self.insert(at, key);
    }

    /// Moves keys `from..` into a new list.
    pub fn split_off(&mut self, from: usize) -> KeyList {
        let tail = self.select(from..self.len());
        *self = self.select(0..from);
        tail
    }

    /// Asks for the cache lines of the list (its ends, and its bytes up to
    /// `PREFETCH_BYTES`: all of them unless the keys are long), so that a
    /// search's probes, which depend on one another, find them loaded
    /// rather than waiting for each in turn.
    #[inline]
    pub fn prefetch(&self) {
        flexsys::prefetch::at(self.bytes.as_ptr(), self.bytes.len().min(PREFETCH_BYTES));
        let (ends, width) = match &self.ends {
            Ends::Byte(v) => (v.as_ptr().cast::<u8>(), 1),
            Ends::Narrow(v) => (v.as_ptr().cast(), 2),
            Ends::Wide(v) => (v.as_ptr().cast(), 4),
        };
        flexsys::prefetch::at(ends, self.len() * width);
    }

    /// Bytes of memory held outside the list (allocated capacity; what
    /// is kept inline is counted with whatever holds the list).
    pub fn memory(&self) -> usize {
        let heap = |spilled: bool, bytes: usize| if spilled { bytes } else { 0 };
        heap(self.bytes.spilled(), self.bytes.capacity())
            + match &self.ends {
                Ends::Byte(v) => heap(v.spilled(), v.capacity()),
                Ends::Narrow(v) => heap(v.spilled(), v.capacity() * 2),
                Ends::Wide(v) => v.capacity() * 4,
            }
    }

    /// Whether the list's bytes and ends are all inline (see the module
    /// doc).
    #[inline]
    pub fn is_inline(&self) -> bool {
        !self.bytes.spilled()
            && match &self.ends {
                Ends::Byte(v) => !v.spilled(),
                Ends::Narrow(v) => !v.spilled(),
                Ends::Wide(_) => false,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn keys_compare_equal_across_lists_with_other_prefixes() {
        // Prefixes "user00" and "user": the same keys, split differently.
        let a = KeyList::from_keys([&b"user001"[..], b"user002"]);
        let b = KeyList::from_keys([&b"user002"[..], b"user1"]);
        assert_eq!(a.prefix(), b"user00");
        assert_eq!(b.prefix(), b"user");
        assert!(a.same_key(1, &b, 0));
        assert!(!a.same_key(0, &b, 0));
        assert!(!a.same_key(1, &b, 1));
        let c = KeyList::from_keys([&b"user00"[..]]);
        assert!(!a.same_key(0, &c, 0), "a key is not equal to its prefix");
    }

    /// Checks `k` against the plain list `m`, and the encoding's invariants.
    fn same(k: &KeyList, m: &[Vec<u8>]) {
        assert_eq!(k.len(), m.len());
        for (i, want) in m.iter().enumerate() {
            assert_eq!(&k.get(i), want);
            assert_eq!(k.compare(i, want), Ordering::Equal);
        }
        let lcp_all = match m.split_first() {
            None => 0,
            Some((f, rest)) => rest.iter().fold(f.len(), |p, x| p.min(lcp(&f[..p], x))),
        };
        assert_eq!(k.prefix().len(), lcp_all, "the prefix is the longest");
        let suffix_bytes = k.bytes.len() - k.prefix().len();
        let width = match k.ends {
            Ends::Byte(_) => 1,
            Ends::Narrow(_) => 2,
            Ends::Wide(_) => 4,
        };
        let want = match suffix_bytes {
            0..=0xff => 1,
            0x100..=0xffff => 2,
            _ => 4,
        };
        assert_eq!(width, want, "the narrowest ends");
        if k.bytes.spilled() {
            assert_eq!(k.bytes.capacity(), k.bytes.len(), "exact allocation");
        } else {
            assert!(k.bytes.len() <= INLINE_BYTES, "inline only when it fits");
        }
        assert_eq!(
            k.is_inline(),
            k.bytes.len() <= INLINE_BYTES && width <= 2 && k.len() <= INLINE_ENDS,
            "inline exactly when it fits"
        );
        // Equal content, equal encoding.
        assert_eq!(
            *k,
            KeyList::from_keys(m.iter().map(Vec::as_slice)),
            "canonical"
        );
    }

    #[test]
    fn edits_match_a_vec_of_vecs() {
        let mut k = KeyList::new();
        let mut m: Vec<Vec<u8>> = Vec::new();
        let ops: &[(&str, usize, &[u8])] = &[
            ("push", 0, b"bb"),
            ("push", 0, b""),
            ("insert", 0, b"a"),
            ("insert", 3, b"zzz"),
            ("set", 1, b"bbbb"),
            ("remove", 0, b""),
            ("insert", 1, b"c"),
        ];
        for (op, at, key) in ops {
            match *op {
                "push" => {
                    k.push(key);
                    m.push(key.to_vec());
                }
                "insert" => {
                    k.insert(*at, key);
                    m.insert(*at, key.to_vec());
                }
                "set" => {
                    k.set(*at, key);
                    m[*at] = key.to_vec();
                }
                _ => {
                    k.remove(*at);
                    m.remove(*at);
                }
            }
            same(&k, &m);
        }
        let tail = k.split_off(2);
        assert_eq!(tail.len(), m.len() - 2);
        assert_eq!(tail.get(0), m[2]);
        assert_eq!(k.len(), 2);
        k.insert_many(1, [&b"x"[..], b"y"]);
        assert_eq!(k.get(1), b"x");
        assert_eq!(k.get(2), b"y");
        assert_eq!(k.get(3), m[1]);
        // Four short keys: inline, nothing held outside the list.
        assert!(k.is_inline());
        assert_eq!(k.memory(), 0);
        let long = vec![7u8; 2 * INLINE_BYTES];
        k.insert(0, &long);
        assert!(!k.is_inline());
        assert!(k.memory() >= long.len());
    }

    #[test]
    fn prefix_follows_edits() {
        let mut k = KeyList::from_keys([&b"user0012"[..], b"user0013", b"user0019"]);
        assert_eq!(k.prefix(), b"user001");
        assert_eq!(k.suffix(0), b"2");
        // An anchor equal to the prefix: its suffix is empty.
        k.insert(0, b"user001");
        assert_eq!(k.prefix(), b"user001");
        assert_eq!(k.suffix(0), b"");
        // A key that departs early shortens the prefix for all.
        k.push(b"user1");
        assert_eq!(k.prefix(), b"user");
        assert_eq!(k.get(1), b"user0012");
        // Removing it lengthens the prefix again.
        k.remove(4);
        assert_eq!(k.prefix(), b"user001");
        // The empty key (the first anchor of the index) leaves no prefix.
        k.insert(0, b"");
        assert_eq!(k.prefix(), b"");
        assert_eq!(k.get(0), b"");
        assert_eq!(k.get(2), b"user0012");
        // A split gives each half the prefix of its own keys.
        let tail = k.split_off(2);
        assert_eq!(k.prefix(), b"");
        assert_eq!(tail.prefix(), b"user001");
        let tail2 = {
            let mut t = tail.clone();
            t.split_off(2)
        };
        assert_eq!(tail2.prefix(), b"user0019");
        assert_eq!(tail2.suffix(0), b"");
        // One key: all of it is the prefix; none: nothing.
        let mut one = KeyList::from_keys([&b"abc"[..]]);
        assert_eq!(one.prefix(), b"abc");
        one.remove(0);
        assert_eq!(one, KeyList::new());
        assert_eq!(one.memory(), 0);
    }

    #[test]
    fn upper_bound_matches_a_linear_scan() {
        let lists: Vec<Vec<Vec<u8>>> = vec![
            vec![],
            vec![b"".to_vec()],
            vec![b"ab".to_vec()],
            vec![b"".to_vec(), b"ab".to_vec(), b"abc".to_vec(), b"b".to_vec()],
            vec![
                b"user001".to_vec(),
                b"user0012".to_vec(),
                b"user002".to_vec(),
            ],
            vec![
                vec![0xff],
                vec![0xff, 0xff],
                vec![0xff, 0xff, 0x00],
                vec![0xff, 0xff, 0xff],
            ],
        ];
        let probes: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"ab".to_vec(),
            b"ab\0".to_vec(),
            b"abd".to_vec(),
            b"user".to_vec(),
            b"user00".to_vec(),
            b"user001".to_vec(),
            b"user0011".to_vec(),
            b"user0012".to_vec(),
            b"user0012\xff".to_vec(),
            b"user003".to_vec(),
            b"z".to_vec(),
            vec![0xff],
            vec![0xff, 0xfe],
            vec![0xff, 0xff],
            vec![0xff, 0xff, 0xff, 0xff],
        ];
        for list in &lists {
            let k = KeyList::from_keys(list.iter().map(Vec::as_slice));
            same(&k, list);
            // A hint only, on every shape (the empty list too).
            k.prefetch();
            for p in &probes {
                for lo in 0..=list.len() {
                    let want = (lo..list.len())
                        .find(|&i| list[i] > *p)
                        .unwrap_or(list.len());
                    assert_eq!(k.upper_bound(lo, p), want, "{list:?} {p:?} {lo}");
                }
                for (i, x) in list.iter().enumerate() {
                    assert_eq!(k.compare(i, p), x.as_slice().cmp(p));
                }
            }
        }
    }

    #[test]
    fn short_comparison_matches_slice_order() {
        let words: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            vec![1],
            vec![0xff],
            vec![0xff, 0xff],
            vec![0xff; 8],
            vec![0xff; 9],
            b"user0000".to_vec(),
            b"user00001".to_vec(),
            b"user0001".to_vec(),
            b"user000100000000".to_vec(),
        ];
        for a in &words {
            for b in &words {
                assert_eq!(at_most(a, b), a <= b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn long_keys_use_wide_ends() {
        // KeyList of 64 KiB that share most of their bytes, and ones that do
        // not: the suffixes outgrow u8 and u16 offsets and come back.
        let long = |fill: u8, last: u8| {
            let mut v = vec![fill; 64 << 10];
            v[(64 << 10) - 1] = last;
            v
        };
        let mut m = vec![long(b'a', 1), long(b'a', 2)];
        let mut k = KeyList::from_keys(m.iter().map(Vec::as_slice));
        assert_eq!(k.prefix().len(), (64 << 10) - 1);
        assert!(matches!(k.ends, Ends::Byte(_)));
        m.push(long(b'b', 0));
        k.push(&m[2]);
        assert!(matches!(k.ends, Ends::Wide(_)));
        same(&k, &m);
        k.prefetch();
        assert_eq!(k.upper_bound(0, &long(b'a', 1)), 1);
        assert_eq!(k.upper_bound(0, &long(b'a', 3)), 2);
        assert_eq!(k.upper_bound(0, &long(b'b', 0)), 3);
        k.remove(2);
        m.remove(2);
        assert!(matches!(k.ends, Ends::Byte(_)));
        same(&k, &m);
        // 300 suffix bytes need u16 ends.
        let mut mid: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 100]).collect();
        let mut k = KeyList::from_keys(mid.iter().map(Vec::as_slice));
        assert!(matches!(k.ends, Ends::Narrow(_)));
        k.prefetch();
        same(&k, &mid);
        k.remove(0);
        mid.remove(0);
        assert!(matches!(k.ends, Ends::Byte(_)));
        same(&k, &mid);
    }

    #[test]
    fn random_edits_match_a_vec_of_vecs() {
        let mut rng = StdRng::seed_from_u64(9);
        let mut k = KeyList::new();
        let mut m: Vec<Vec<u8>> = Vec::new();
        // Short keys over a tiny alphabet share prefixes and repeat.
        let key = |rng: &mut StdRng| -> Vec<u8> {
            let len = rng.gen_range(0..6);
            (0..len)
                .map(|_| [b'a', b'b', 0xff][rng.gen_range(0..3)])
                .collect()
        };
        for _ in 0..3000 {
            match rng.gen_range(0..6) {
                0..=2 => {
                    let at = rng.gen_range(0..=m.len());
                    let n = rng.gen_range(1..4);
                    let new: Vec<Vec<u8>> = (0..n).map(|_| key(&mut rng)).collect();
                    k.insert_many(at, new.iter().map(Vec::as_slice));
                    m.splice(at..at, new);
                }
                3 if !m.is_empty() => {
                    let at = rng.gen_range(0..m.len());
                    k.remove(at);
                    m.remove(at);
                }
                4 if !m.is_empty() => {
                    let at = rng.gen_range(0..m.len());
                    let x = key(&mut rng);
                    k.set(at, &x);
                    m[at] = x;
                }
                _ => {
                    let at = rng.gen_range(0..=m.len());
                    let tail = k.split_off(at);
                    let mt = m.split_off(at);
                    same(&tail, &mt);
                    // Put it back half of the time.
                    if rng.gen_bool(0.5) {
                        k.insert_many(k.len(), mt.iter().map(Vec::as_slice));
                        m.extend(mt);
                    }
                }
            }
            same(&k, &m);
        }
    }
}
