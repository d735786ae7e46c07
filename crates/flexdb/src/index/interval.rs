//! The decoded content of one interval: its pairs exactly as they lie in the
//! space, with the offset and 16-bit key fingerprint of each.
//!
//! Invariants: `bytes` is the concatenation of `offs.len()` valid pair
//! records (every checksum verified when the interval was parsed, or the
//! records were encoded by this process), sorted by strictly increasing
//! key; `offs[i]` is where record `i` starts and `fps[i]` is the
//! fingerprint of its key. `expiring` is set when some record has a
//! deadline (it may be set when none has: it only spares the walks of
//! intervals without deadlines from looking). An `IntervalData` is immutable: the committer
//! builds a new one for every change (write-through), so a reader holding an
//! `Arc` keeps a consistent view.

use crate::codec::{decode_pair, get_varint, split_value_field, Decoded};

/// A 16-bit fingerprint of a key.
#[inline]
pub fn fingerprint(key: &[u8]) -> u16 {
    fingerprint_of(crc32c::crc32c(key))
}

/// The fingerprint of a key whose `crc32c` is `h` (a read that hashed the
/// key already does not hash it again).
#[inline]
pub fn fingerprint_of(h: u32) -> u16 {
    (h ^ (h >> 16)) as u16
}

/// The pairs of one interval.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IntervalData {
    bytes: Box<[u8]>,
    offs: Box<[u32]>,
    fps: Box<[u16]>,
    /// Extents of the space the interval spans, at most: exact when it was
    /// read, then bounded by the committer as it edits the interval (each
    /// edit adds at most two; a part of a split spans at most what the
    /// whole did; a join at most what its two halves did). 0 for an empty
    /// interval, and as built by [`Builder::finish`]: whoever builds an
    /// interval for the space sets it.
    pub extents: u32,
    /// Some record may have a deadline.
    expiring: bool,
}

/// Builds an [`IntervalData`] pair by pair.
#[derive(Default)]
pub struct Builder {
    bytes: Vec<u8>,
    offs: Vec<u32>,
    fps: Vec<u16>,
    expiring: bool,
}

impl Builder {
    /// An empty builder.
    #[cfg(test)]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty builder with room for `pairs` pairs in `bytes` bytes, so
    /// that building grows no buffer.
    pub fn with_capacity(pairs: usize, bytes: usize) -> Self {
        Builder {
            bytes: Vec::with_capacity(bytes),
            offs: Vec::with_capacity(pairs),
            fps: Vec::with_capacity(pairs),
            expiring: false,
        }
    }

    /// Appends pair `i` of `from` as it is (its fingerprint is reused).
    #[inline]
    pub fn push_existing(&mut self, from: &IntervalData, i: usize) {
        self.offs.push(self.bytes.len() as u32);
        self.fps.push(from.fps[i]);
        self.bytes.extend_from_slice(from.record(i));
        self.expiring |= from.expiring && from.expires(i) != 0;
    }

    /// Appends pairs `range` of `from` as they are, with one copy of
    /// their bytes.
    pub fn push_range(&mut self, from: &IntervalData, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        let start = from.offset(range.start);
        let end = from.end(range.end - 1);
        let base = self.bytes.len() as u32;
        let from_start = from.offs[range.start];
        self.offs.extend(
            from.offs[range.clone()]
                .iter()
                .map(|&o| base + (o - from_start)),
        );
        self.fps.extend_from_slice(&from.fps[range]);
        self.bytes.extend_from_slice(&from.bytes[start..end]);
        self.expiring |= from.expiring;
    }

    /// Appends `(key, value)`, encoding it.
    #[cfg(test)]
    pub fn push_pair(&mut self, key: &[u8], value: &[u8]) {
        self.push_pair_expiring(key, value, 0);
    }

    /// Appends `(key, value)` with deadline `expires` (0: none), encoding
    /// it.
    pub fn push_pair_expiring(&mut self, key: &[u8], value: &[u8], expires: u64) {
        self.offs.push(self.bytes.len() as u32);
        self.fps.push(fingerprint(key));
        crate::codec::encode_pair_expiring(&mut self.bytes, key, value, expires);
        self.expiring |= expires != 0;
    }

    /// Bytes so far.
    pub fn len_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The finished interval.
    pub fn finish(self) -> IntervalData {
        IntervalData {
            bytes: self.bytes.into_boxed_slice(),
            offs: self.offs.into_boxed_slice(),
            fps: self.fps.into_boxed_slice(),
            extents: 0,
            expiring: self.expiring,
        }
    }
}

/// Walks the pair records of an interval's bytes as read from the space,
/// verifying every record and the key order, and calls `each(pos, key,
/// value, expires)` for each (`pos`: where its record starts). The error
/// says what is wrong, for a corruption report.
fn walk_records<'a>(
    bytes: &'a [u8],
    mut each: impl FnMut(usize, &'a [u8], &'a [u8], u64),
) -> Result<(), String> {
    let mut pos = 0usize;
    let mut last: Option<&[u8]> = None;
    while pos < bytes.len() {
        match decode_pair(&bytes[pos..]) {
            Decoded::Pair {
                key,
                value,
                expires,
                len,
            } => {
                if last.is_some_and(|l| l >= key) {
                    return Err(format!(
                        "pair at byte {pos} of the interval is out of order"
                    ));
                }
                if pos > u32::MAX as usize {
                    return Err("interval larger than 4 GiB".into());
                }
                each(pos, key, value, expires);
                last = Some(key);
                pos += len;
            }
            Decoded::Incomplete { .. } => {
                return Err(format!("pair at byte {pos} of the interval is truncated"))
            }
            Decoded::Invalid => {
                return Err(format!(
                    "pair at byte {pos} of the interval fails its checksum or length check"
                ))
            }
        }
    }
    Ok(())
}

/// What [`search_records`] found in an interval's bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct Searched<'a> {
    /// The value of the key searched for and its deadline (0: none), if
    /// the interval holds it.
    pub value: Option<(&'a [u8], u64)>,
    /// The interval's first and last keys (`None`: no pairs).
    pub first: Option<&'a [u8]>,
    pub last: Option<&'a [u8]>,
}

/// Searches an interval's bytes as read from the space for `key`, checking
/// them exactly as [`IntervalData::parse`] does (every record, the key
/// order) but building nothing: for a get whose interval is not worth
/// caching.
pub fn search_records<'a>(bytes: &'a [u8], key: &[u8]) -> Result<Searched<'a>, String> {
    let mut found = Searched {
        value: None,
        first: None,
        last: None,
    };
    walk_records(bytes, |_, k, v, expires| {
        if k == key {
            found.value = Some((v, expires));
        }
        found.first.get_or_insert(k);
        found.last = Some(k);
    })?;
    Ok(found)
}

impl IntervalData {
    /// Parses `bytes` read from the space, verifying every record and the key
    /// order. The error says what is wrong, for a corruption report.
    pub fn parse(bytes: Vec<u8>, extents: u32) -> Result<IntervalData, String> {
        // Sized for pairs of about 100 bytes, the datasets' smallest.
        let guess = bytes.len() / 96 + 1;
        let mut offs = Vec::with_capacity(guess);
        let mut fps = Vec::with_capacity(guess);
        let mut expiring = false;
        walk_records(&bytes, |pos, key, _, expires| {
            offs.push(pos as u32);
            fps.push(fingerprint(key));
            expiring |= expires != 0;
        })?;
        Ok(IntervalData {
            bytes: bytes.into_boxed_slice(),
            offs: offs.into_boxed_slice(),
            fps: fps.into_boxed_slice(),
            extents,
            expiring,
        })
    }

    /// Number of pairs.
    #[inline]
    pub fn len(&self) -> usize {
        self.offs.len()
    }

    /// Whether the interval holds no pair.
    pub fn is_empty(&self) -> bool {
        self.offs.is_empty()
    }

    /// Bytes of the encoded pairs.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// The encoded bytes of every pair.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Starts loading the offsets (through which every pair is found) and
    /// the first `max` bytes of the records into the CPU cache, so that a
    /// walk over the pairs (an iterator's binary search and merge) does not
    /// wait for each line in turn.
    #[inline]
    pub fn prefetch_head(&self, max: usize) {
        let [(offsets, offsets_len), (bytes, bytes_len)] = self.lines();
        flexsys::prefetch::at(offsets, offsets_len);
        flexsys::prefetch::at(bytes, bytes_len.min(max));
    }

    /// Where the offsets and the bytes lie, and their lengths in bytes (for
    /// prefetching: see `IntervalCache::prefetch_entry`).
    pub(crate) fn lines(&self) -> [(*const u8, usize); 2] {
        [
            (self.offs.as_ptr().cast(), size_of_val(&*self.offs)),
            (self.bytes.as_ptr(), self.bytes.len()),
        ]
    }

    /// Where the fingerprints lie, and their length in bytes (a point
    /// lookup scans them first: see `IntervalCache::prefetch_lookup`).
    pub(crate) fn fingerprint_line(&self) -> (*const u8, usize) {
        (self.fps.as_ptr().cast(), size_of_val(&*self.fps))
    }

    /// Like [`IntervalData::prefetch_head`], for the offsets and the last
    /// `max` bytes (a backward walk starts there).
    #[inline]
    pub fn prefetch_tail(&self, max: usize) {
        let [(offsets, offsets_len), _] = self.lines();
        flexsys::prefetch::at(offsets, offsets_len);
        flexsys::prefetch::bytes(&self.bytes[self.bytes.len().saturating_sub(max)..]);
    }

    /// Where pair `i` starts within the interval.
    #[inline]
    pub fn offset(&self, i: usize) -> usize {
        self.offs[i] as usize
    }

    /// Where pair `i` ends within the interval.
    #[inline]
    pub fn end(&self, i: usize) -> usize {
        self.offs
            .get(i + 1)
            .map_or(self.bytes.len(), |&o| o as usize)
    }

    /// The encoded record of pair `i`.
    #[inline]
    pub fn record(&self, i: usize) -> &[u8] {
        &self.bytes[self.offset(i)..self.end(i)]
    }

    /// Key and value of pair `i` (records were verified, so the header
    /// parses; a malformed one yields empty slices rather than a panic).
    #[inline]
    pub fn pair(&self, i: usize) -> (&[u8], &[u8]) {
        let (k, v, _) = self.entry(i);
        (k, v)
    }

    /// Key, value and deadline (0: none) of pair `i` (as [`Self::pair`]).
    #[inline]
    pub fn entry(&self, i: usize) -> (&[u8], &[u8], u64) {
        let rec = self.record(i);
        let Some((klen, a)) = get_varint(rec) else {
            return (&[], &[], 0);
        };
        let Some((field, b)) = get_varint(&rec[a..]) else {
            return (&[], &[], 0);
        };
        let Some((vlen, has_deadline)) = split_value_field(field) else {
            return (&[], &[], 0);
        };
        let k = a + b;
        let v = k + klen as usize;
        let Some(value) = rec.get(v..v + vlen) else {
            return (&[], &[], 0);
        };
        let expires = match has_deadline {
            true => rec
                .get(v + vlen..v + vlen + 8)
                .and_then(|d| d.try_into().ok())
                .map_or(0, u64::from_le_bytes),
            false => 0,
        };
        (&rec[k..v], value, expires)
    }

    /// The deadline of pair `i` (0: none).
    #[inline]
    pub fn expires(&self, i: usize) -> u64 {
        if self.expiring {
            self.entry(i).2
        } else {
            0
        }
    }

    /// Whether some pair may have a deadline (when not, none has).
    #[inline]
    pub fn expiring(&self) -> bool {
        self.expiring
    }

    /// Key of pair `i`.
    #[inline]
    pub fn key(&self, i: usize) -> &[u8] {
        self.pair(i).0
    }

    /// Index of the pair holding `key`, found by fingerprint first.
    #[cfg(test)]
    pub fn find(&self, key: &[u8]) -> Option<usize> {
        self.find_hashed(key, crc32c::crc32c(key))
    }

    /// [`find`](Self::find) for a key whose `crc32c` is `h`.
    pub fn find_hashed(&self, key: &[u8], h: u32) -> Option<usize> {
        let fp = fingerprint_of(h);
        self.fps
            .iter()
            .enumerate()
            .filter(|&(_, &f)| f == fp)
            .map(|(i, _)| i)
            .find(|&i| self.key(i) == key)
    }

    /// The value of `key`.
    #[cfg(test)]
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.find(key).map(|i| self.pair(i).1)
    }

    /// The value of `key` and its deadline (0: none), for a key whose
    /// `crc32c` is `h`. (Expired or not: the reader judges.)
    pub fn get_hashed(&self, key: &[u8], h: u32) -> Option<(&[u8], u64)> {
        self.find_hashed(key, h).map(|i| {
            let (_, v, e) = self.entry(i);
            (v, e)
        })
    }

    /// The first index in `lo..hi` whose key fails `below` (binary search;
    /// `below` holds for a prefix of the keys, which are sorted).
    fn partition(&self, mut lo: usize, mut hi: usize, below: impl Fn(&[u8]) -> bool) -> usize {
        while lo < hi {
            let mid = (lo + hi) / 2;
            if below(self.key(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Index of the first pair whose key is `>= key` (binary search).
    pub fn lower_bound(&self, key: &[u8]) -> usize {
        self.partition(0, self.len(), |k| k < key)
    }

    /// Index of the first pair at or after `from` whose key is `>= key`,
    /// for a caller walking forward: a galloping search from `from`, so a
    /// nearby answer costs a few comparisons.
    pub fn lower_bound_from(&self, key: &[u8], from: usize) -> usize {
        let n = self.len();
        // Keys in `from..lo` are below `key`; `hi` is `n` or holds a key at
        // or above it.
        let (mut lo, mut hi, mut step) = (from.min(n), from.min(n), 1);
        while hi < n && self.key(hi) < key {
            lo = hi + 1;
            hi = (hi + step).min(n);
            step *= 2;
        }
        self.partition(lo, hi, |k| k < key)
    }

    /// Index of the first pair whose key is `> key`.
    pub fn upper_bound(&self, key: &[u8]) -> usize {
        self.partition(0, self.len(), |k| k <= key)
    }

    /// Bytes of memory the interval holds (charged to the cache).
    pub fn charge(&self) -> usize {
        self.bytes.len() + self.offs.len() * 6 + size_of::<Self>() + 64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: u8) -> IntervalData {
        let mut b = Builder::new();
        for i in 0..n {
            b.push_pair(&[b'k', i], &vec![i; i as usize]);
        }
        b.finish()
    }

    #[test]
    fn prefetch_covers_any_slice_and_changes_nothing() {
        let d = sample(40);
        let before = d.clone();
        for max in [0, 1, 63, 64, 65, 1000, usize::MAX] {
            d.prefetch_head(max);
            d.prefetch_tail(max);
        }
        IntervalData::default().prefetch_head(usize::MAX);
        IntervalData::default().prefetch_tail(usize::MAX);
        // Unaligned starts and ends, down to single bytes.
        let bytes = d.bytes();
        for a in 0..70.min(bytes.len()) {
            flexsys::prefetch::bytes(&bytes[a..]);
            flexsys::prefetch::bytes(&bytes[a..a]);
            flexsys::prefetch::bytes(&bytes[..bytes.len() - a]);
        }
        assert_eq!(d, before);
    }

    #[test]
    fn lookups_and_bounds() {
        let d = sample(10);
        assert_eq!(d.len(), 10);
        assert_eq!(d.get(&[b'k', 4]), Some(&[4u8, 4, 4, 4][..]));
        assert_eq!(d.get(&[b'k', 0]), Some(&[][..]));
        assert_eq!(d.get(b"zz"), None);
        assert_eq!(d.lower_bound(&[b'k', 4]), 4);
        assert_eq!(d.upper_bound(&[b'k', 4]), 5);
        assert_eq!(d.lower_bound(b"a"), 0);
        assert_eq!(d.lower_bound(b"z"), 10);
        assert_eq!(d.pair(9), (&[b'k', 9][..], &[9u8; 9][..]));
    }

    #[test]
    fn galloping_bound_agrees_with_binary_search() {
        for n in [0u8, 1, 2, 5, 17, 40] {
            let d = sample(n);
            for k in 0..=n {
                for probe in [vec![b'k', k], vec![b'k', k, 0], vec![b'a'], vec![b'z']] {
                    let want = d.lower_bound(&probe);
                    for from in 0..=usize::from(n) + 1 {
                        let got = d.lower_bound_from(&probe, from);
                        assert_eq!(
                            got,
                            want.max(from.min(d.len())),
                            "n {n} {probe:?} from {from}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_copied_range_equals_pairs_copied_one_by_one() {
        let d = sample(20);
        for (a, b) in [(0, 0), (0, 20), (3, 9), (19, 20), (7, 8)] {
            let mut whole = Builder::new();
            whole.push_pair(b"a", b"first");
            whole.push_range(&d, a..b);
            let mut single = Builder::new();
            single.push_pair(b"a", b"first");
            for i in a..b {
                single.push_existing(&d, i);
            }
            assert_eq!(whole.finish(), single.finish(), "range {a}..{b}");
        }
    }

    #[test]
    fn parse_round_trips_and_rejects_damage() {
        let d = sample(12);
        let p = IntervalData::parse(d.bytes().to_vec(), 3).unwrap();
        assert_eq!(p.len(), 12);
        assert_eq!(p.extents, 3);
        assert_eq!(p.bytes(), d.bytes());
        for i in 0..d.size() {
            let mut b = d.bytes().to_vec();
            b[i] ^= 0x04;
            assert!(IntervalData::parse(b, 1).is_err(), "flip at {i}");
        }
        assert!(IntervalData::parse(d.bytes()[..d.size() - 1].to_vec(), 1).is_err());
        // Out of order pairs are refused.
        let mut b = Builder::new();
        b.push_pair(b"b", b"");
        b.push_pair(b"a", b"");
        assert!(IntervalData::parse(b.finish().bytes().to_vec(), 1).is_err());
    }

    use proptest::prelude::*;
    use proptest::sample::Index;

    /// What a parsed interval must be: records that decode and verify one
    /// after another to the end, keys strictly increasing, fingerprints
    /// and lookups agreeing with them.
    fn check_parsed(d: &IntervalData) {
        let mut pos = 0;
        for i in 0..d.len() {
            assert_eq!(d.offset(i), pos);
            let Decoded::Pair { key, len, .. } = decode_pair(&d.bytes()[pos..]) else {
                panic!("record {i} does not decode");
            };
            assert_eq!(d.key(i), key);
            assert_eq!(d.find(key), Some(i));
            if i > 0 {
                assert!(d.key(i - 1) < key);
            }
            pos += len;
        }
        assert_eq!(pos, d.size());
    }

    proptest! {
        /// Any bytes: an error or a valid interval, never a panic.
        #[test]
        fn arbitrary_bytes_parse_or_fail(b in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(d) = IntervalData::parse(b, 0) {
                check_parsed(&d);
            }
        }

        /// Records of arbitrary pairs, in any order, with flips, a cut or
        /// a splice: parsed exactly when the bytes are still records in
        /// strictly increasing key order; a single flip is always caught.
        #[test]
        fn damaged_records_are_refused(
            pairs in proptest::collection::vec(
                (proptest::collection::vec(0u8..3, 0..4), proptest::collection::vec(any::<u8>(), 0..150)),
                0..8),
            flip in proptest::option::of((any::<Index>(), 0..8u8)),
            cut in proptest::option::of(any::<Index>()),
            splice in proptest::option::of((any::<Index>(), any::<Index>(), 1..40usize)),
        ) {
            let mut bytes = Vec::new();
            for (k, v) in &pairs {
                crate::codec::encode_pair(&mut bytes, k, v);
            }
            let sorted = pairs.windows(2).all(|w| w[0].0 < w[1].0);
            let damaged = flip.is_some() || cut.is_some() || splice.is_some();
            if let Some((at, bit)) = flip {
                if !bytes.is_empty() {
                    let at = at.index(bytes.len());
                    bytes[at] ^= 1 << bit;
                }
            }
            if let Some((from, to, n)) = splice {
                if !bytes.is_empty() {
                    let (from, to) = (from.index(bytes.len()), to.index(bytes.len()));
                    let n = n.min(bytes.len() - from).min(bytes.len() - to);
                    let src = bytes[from..from + n].to_vec();
                    bytes[to..to + n].copy_from_slice(&src);
                }
            }
            if let Some(cut) = cut {
                let at = cut.index(bytes.len() + 1);
                bytes.truncate(at);
            }
            let original = bytes.clone();
            match IntervalData::parse(bytes, 2) {
                Ok(d) => {
                    check_parsed(&d);
                    prop_assert_eq!(d.bytes(), &original[..]);
                    if !damaged {
                        prop_assert!(sorted);
                        prop_assert_eq!(d.len(), pairs.len());
                    }
                    if flip.is_some() && cut.is_none() && splice.is_none() && !pairs.is_empty() {
                        prop_assert!(false, "a flipped bit was accepted");
                    }
                }
                Err(e) => {
                    prop_assert!(damaged || !sorted, "valid records refused: {}", e);
                    prop_assert!(e.contains("byte"), "the error names no offset: {}", e);
                }
            }
        }
    }
}
