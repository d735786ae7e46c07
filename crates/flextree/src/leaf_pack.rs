//! Leaf pages of tree-file format 2: many leaves packed into one page, each
//! as a variable-length *record* (layout in docs/FORMAT.md).
//!
//! A record is the leaf's entry count and, per entry, the length, the tag
//! and the address as the difference from where the previous entry ended
//! (zigzag LEB128 varints): neighbouring extents of a leaf are often
//! contiguous or close, so an entry takes a few bytes instead of 16.
//!
//! Invariants:
//! - A page holds 1..=`SLOTS` records; record `i` ends at the `u16` offset
//!   in directory slot `i` and starts where record `i - 1` ended (the first
//!   after the directory). A record is addressed by its *node id*
//!   `page << SLOT_BITS | slot`; an internal node's id has slot 0.
//! - Any leaf's record fits in an empty page (`MAX_RECORD`), so packing
//!   never fails for want of room, only starts a new page.
//! - Decoding checks every bound (record inside the page, varints not
//!   overlong, entry count, zero lengths, address range) and returns
//!   `Corrupt`, never panics, whatever the bytes.

use flexsys::varint::put as put_varint;

use crate::error::{Error, Result};
use crate::extent::{MAX_ADDR, MAX_SPACE};
use crate::node::{addr_of, pack, tag_of, Leaf, HOLE_ADDR, LEAF_CAP};

/// Bits of a node id that hold the slot within its page.
pub(crate) const SLOT_BITS: u32 = 5;
/// Records one page can hold.
pub(crate) const SLOTS: usize = 1 << SLOT_BITS;
/// Bytes before the directory (shared with the other node pages: CRC,
/// kind, zero, count, version).
pub(crate) const PAGE_HEADER: usize = 16;
/// The largest encoded leaf: an entry count and `LEAF_CAP` entries of at
/// most 10 + 3 + 10 bytes.
pub(crate) const MAX_RECORD: usize = 1 + LEAF_CAP * 23;

/// The page of node id `id`.
#[inline]
pub(crate) fn page_of(id: u32) -> u32 {
    id >> SLOT_BITS
}

/// The slot of node id `id` in its page.
#[inline]
pub(crate) fn slot_of(id: u32) -> usize {
    (id as usize) & (SLOTS - 1)
}

/// The node id of `slot` in `page`, `None` when the page number is too
/// large for an id.
#[inline]
pub(crate) fn node_id(page: u32, slot: usize) -> Option<u32> {
    (page < (1 << (32 - SLOT_BITS))).then_some(page << SLOT_BITS | slot as u32)
}

fn corrupt(msg: String) -> Error {
    Error::Corrupt(msg)
}

fn zigzag(v: u64) -> u64 {
    let s = v as i64;
    ((s << 1) ^ (s >> 63)) as u64
}

fn unzigzag(v: u64) -> u64 {
    (v >> 1) ^ (v & 1).wrapping_neg()
}

/// Reads one varint at `*at` from `b`, advancing `*at`.
fn get_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let (v, n) = flexsys::varint::get(b.get(*at..)?)?;
    *at += n;
    Some(v)
}

/// Appends the record of leaf `l` to `out`.
pub(crate) fn encode_record(l: &Leaf, out: &mut Vec<u8>) {
    put_varint(out, l.count as u64);
    let mut expect = 0u64;
    for i in 0..l.count {
        let (len, word) = (l.len[i], l.word[i]);
        let addr = addr_of(word).unwrap_or(HOLE_ADDR);
        put_varint(out, len);
        put_varint(out, u64::from(tag_of(word)));
        put_varint(out, zigzag(addr.wrapping_sub(expect)));
        expect = addr.wrapping_add(len);
    }
}

/// Decodes a record into `leaf` (count, lengths, words); returns the span
/// of the leaf. `what` names the record in errors.
pub(crate) fn decode_record(rec: &[u8], leaf: &mut Leaf, what: &dyn Fn() -> String) -> Result<u64> {
    let bad = |m: &str| corrupt(format!("{}: {m}", what()));
    let mut at = 0;
    let count = get_varint(rec, &mut at).ok_or_else(|| bad("truncated record"))?;
    if count > LEAF_CAP as u64 {
        return Err(bad("too many entries"));
    }
    let mut expect = 0u64;
    let mut span = 0u64;
    for i in 0..count as usize {
        let (Some(len), Some(tag), Some(delta)) = (
            get_varint(rec, &mut at),
            get_varint(rec, &mut at),
            get_varint(rec, &mut at),
        ) else {
            return Err(bad("truncated record"));
        };
        let addr = expect.wrapping_add(unzigzag(delta));
        if len == 0 {
            return Err(bad("zero-length extent"));
        }
        let tag = u16::try_from(tag).map_err(|_| bad("tag out of range"))?;
        if addr != HOLE_ADDR && (addr > MAX_ADDR || MAX_ADDR - addr < len - 1) {
            return Err(bad("address out of range"));
        }
        leaf.len[i] = len;
        leaf.word[i] = pack((addr != HOLE_ADDR).then_some(addr), tag);
        expect = addr.wrapping_add(len);
        span = span
            .checked_add(len)
            .filter(|&s| s <= MAX_SPACE)
            .ok_or_else(|| bad("leaf spans more than 2^63 bytes"))?;
    }
    if at != rec.len() {
        return Err(bad("trailing bytes after the record"));
    }
    leaf.count = count as usize;
    Ok(span)
}

/// The bytes of record `slot` in a leaf page `b` of `count` records
/// (the page's checksum and kind already verified).
pub(crate) fn record_in(b: &[u8], count: usize, slot: usize) -> Option<&[u8]> {
    if slot >= count || count > SLOTS {
        return None;
    }
    let dir = PAGE_HEADER;
    let first = dir + 2 * count;
    let end_of = |i: usize| usize::from(u16::from_le_bytes([b[dir + 2 * i], b[dir + 2 * i + 1]]));
    let start = if slot == 0 { first } else { end_of(slot - 1) };
    let end = end_of(slot);
    (first <= start && start <= end && end <= b.len()).then(|| &b[start..end])
}

/// Fills leaf pages one record at a time: [`LeafPage::fits`] says whether
/// one more record fits, [`LeafPage::push`] adds it, [`LeafPage::finish`]
/// lays out the page image (without the sealed header fields).
pub(crate) struct LeafPage {
    /// End of each record relative to the start of `body`.
    ends: Vec<u16>,
    body: Vec<u8>,
}

impl LeafPage {
    pub fn new() -> Self {
        LeafPage {
            ends: Vec::with_capacity(SLOTS),
            body: Vec::with_capacity(2 * MAX_RECORD),
        }
    }

    /// Records in the page so far.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether a record of `n` bytes fits next to those already pushed.
    pub fn fits(&self, n: usize, page_size: usize) -> bool {
        let count = self.ends.len() + 1;
        count <= SLOTS && PAGE_HEADER + 2 * count + self.body.len() + n <= page_size
    }

    /// Adds a record (the caller checked `fits`); returns its slot.
    pub fn push(&mut self, rec: &[u8]) -> usize {
        self.body.extend_from_slice(rec);
        self.ends.push(self.body.len() as u16);
        self.ends.len() - 1
    }

    /// Writes the directory and records into the zeroed page image `b`
    /// and empties the builder; returns the record count.
    pub fn finish(&mut self, b: &mut [u8]) -> usize {
        let count = self.ends.len();
        let first = PAGE_HEADER + 2 * count;
        b[first..first + self.body.len()].copy_from_slice(&self.body);
        for (i, &end) in self.ends.iter().enumerate() {
            let end = (first + usize::from(end)) as u16;
            b[PAGE_HEADER + 2 * i..PAGE_HEADER + 2 * i + 2].copy_from_slice(&end.to_le_bytes());
        }
        self.ends.clear();
        self.body.clear();
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn leaf_of(entries: &[(u64, Option<u64>, u16)]) -> Leaf {
        let mut l = Leaf::new();
        for (i, &(len, addr, tag)) in entries.iter().enumerate() {
            l.set_entry(i, len, addr, tag);
        }
        l.count = entries.len();
        l
    }

    fn round_trip(l: &Leaf) -> (Leaf, u64, usize) {
        let mut rec = Vec::new();
        encode_record(l, &mut rec);
        assert!(rec.len() <= MAX_RECORD);
        let mut back = Leaf::new();
        let span = decode_record(&rec, &mut back, &|| "test".into()).unwrap();
        (back, span, rec.len())
    }

    #[test]
    fn records_round_trip_holes_tags_and_extremes() {
        let l = leaf_of(&[
            (100, Some(0), 0),
            (MAX_SPACE / 4, None, 7),
            (1 << 40, Some(1), u16::MAX),
            (2, Some(MAX_ADDR - 1), 3),
            (1, Some(MAX_ADDR), 0),
        ]);
        let (back, span, _) = round_trip(&l);
        assert_eq!(back.count, l.count);
        assert_eq!(back.len[..l.count], l.len[..l.count]);
        assert_eq!(back.word[..l.count], l.word[..l.count]);
        assert_eq!(span, l.len[..l.count].iter().sum::<u64>());
        let (empty, span, n) = round_trip(&Leaf::new());
        assert_eq!((empty.count, span, n), (0, 0, 1));
    }

    #[test]
    fn contiguous_entries_take_a_few_bytes() {
        let entries: Vec<_> = (0..LEAF_CAP as u64)
            .map(|i| (100, Some((1 << 40) | (i * 100)), 0))
            .collect();
        let (_, _, n) = round_trip(&leaf_of(&entries));
        // Count, then the first entry (~9 bytes) and 3 bytes per entry.
        assert!(n <= 1 + 9 + 3 * (LEAF_CAP - 1), "{n} bytes");
    }

    #[test]
    fn random_leaves_round_trip_and_pack_into_pages() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut page = LeafPage::new();
        let mut packed: Vec<Leaf> = Vec::new();
        let mut image = vec![0u8; 2048];
        for _ in 0..500 {
            let n = rng.gen_range(0..=LEAF_CAP);
            let entries: Vec<_> = (0..n)
                .map(|_| {
                    let bits = rng.gen_range(1..40);
                    let len = rng.gen_range(1..1u64 << bits);
                    let mapped = rng.gen_bool(0.9);
                    let addr = rng.gen_range(0..=MAX_ADDR - len + 1);
                    (len, mapped.then_some(addr), rng.gen())
                })
                .collect();
            let l = leaf_of(&entries);
            let mut rec = Vec::new();
            encode_record(&l, &mut rec);
            if !page.fits(rec.len(), image.len()) {
                let count = page.finish(&mut image);
                assert_eq!(count, packed.len());
                for (slot, want) in packed.iter().enumerate() {
                    let mut got = Leaf::new();
                    let r = record_in(&image, count, slot).unwrap();
                    decode_record(r, &mut got, &|| "test".into()).unwrap();
                    assert_eq!(got.count, want.count);
                    assert_eq!(got.len[..got.count], want.len[..want.count]);
                    assert_eq!(got.word[..got.count], want.word[..want.count]);
                }
                assert!(record_in(&image, count, count).is_none());
                packed.clear();
                image.fill(0);
            }
            assert!(page.fits(rec.len(), image.len()) || page.len() > 0);
            assert_eq!(page.push(&rec), packed.len());
            packed.push(l);
        }
    }

    #[test]
    fn corrupt_records_are_errors_never_panics() {
        let entries: Vec<_> = (0..20u64).map(|i| (10 + i, Some(i * 1000), 1)).collect();
        let mut rec = Vec::new();
        encode_record(&leaf_of(&entries), &mut rec);
        let mut rng = StdRng::seed_from_u64(9);
        let mut leaf = Leaf::new();
        for cut in 0..rec.len() {
            assert!(decode_record(&rec[..cut], &mut leaf, &|| "t".into()).is_err());
        }
        for _ in 0..5000 {
            let mut bad = rec.clone();
            let at = rng.gen_range(0..bad.len());
            bad[at] = rng.gen();
            // Either an error or some leaf that passes every check.
            if let Ok(span) = decode_record(&bad, &mut leaf, &|| "t".into()) {
                assert_eq!(span, leaf.len[..leaf.count].iter().sum::<u64>());
                assert!(leaf.len[..leaf.count].iter().all(|&l| l > 0));
            }
        }
        // An overlong varint and a count above the cap.
        let overlong = [0xffu8; 11];
        assert!(decode_record(&overlong, &mut leaf, &|| "t".into()).is_err());
        assert!(decode_record(&[65], &mut leaf, &|| "t".into()).is_err());
        assert!(decode_record(&[1, 0, 0, 0], &mut leaf, &|| "t".into()).is_err());
    }
}
