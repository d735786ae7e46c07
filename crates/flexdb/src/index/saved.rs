//! The sparse index saved at a clean close (`SPARSE`), so that the next open
//! loads it with one read instead of sampling the whole space (§5.4's
//! rebuild stays the path after a crash).
//!
//! The file names the space state it describes by the space's commit id
//! (checkpoint version, commit sequence) and length. A commit id names one
//! content forever: it changes with every commit and checkpoint, and the
//! file is written only after the checkpoint it names is durable.
//!
//! Invariants: `load` returns an index only when the file's checksum
//! verifies, its commit id and length equal the space's as opened, its
//! anchors are strictly increasing from the empty key, and its interval
//! sizes add up to the space's length; otherwise it returns `None` and the
//! caller samples (a stale, damaged or missing file costs time, never
//! data). The file is replaced atomically (temporary file, sync, rename,
//! directory sync).

use flexspace::Storage;

use crate::codec::{get_varint, put_varint};
use crate::error::Result;
use crate::index::sparse::{IntervalMeta, NewInterval, SparseIndex, UNKNOWN_COUNT};

/// The saved index's file name.
pub const SPARSE: &str = "SPARSE";
/// Its temporary name while it is written.
pub const SPARSE_TMP: &str = "SPARSE.tmp";
const MAGIC: &[u8; 8] = b"FLEXSPIX";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 48;

/// Writes `sparse`, which describes the space at `commit_id` with `len`
/// bytes.
pub fn save(
    storage: &dyn Storage,
    commit_id: (u64, u64),
    len: u64,
    sparse: &SparseIndex,
) -> Result<()> {
    let mut b = Vec::with_capacity(HEADER_LEN + sparse.len() as usize * 24);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&commit_id.0.to_le_bytes());
    b.extend_from_slice(&commit_id.1.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&sparse.len().to_le_bytes());
    sparse.for_each(|anchor, _, meta| {
        put_varint(&mut b, anchor.len() as u64);
        b.extend_from_slice(anchor);
        put_varint(&mut b, u64::from(meta.size));
        put_varint(&mut b, u64::from(meta.count));
    });
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    crate::recovery::manifest::replace_file(storage, SPARSE_TMP, SPARSE, &b)
}

/// The saved index, if the file describes the space at `commit_id` with
/// `len` bytes and verifies.
pub fn load(storage: &dyn Storage, commit_id: (u64, u64), len: u64) -> Option<SparseIndex> {
    if !storage.exists(SPARSE).ok()? {
        return None;
    }
    let f = storage.open_file(SPARSE, false).ok()?;
    let size = usize::try_from(f.len().ok()?).ok()?;
    if size < HEADER_LEN + 4 {
        return None;
    }
    let mut b = vec![0u8; size];
    f.read_exact_at(0, &mut b).ok()?;
    parse(&b, commit_id, len)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn parse(b: &[u8], commit_id: (u64, u64), len: u64) -> Option<SparseIndex> {
    if b.len() < HEADER_LEN + 4 {
        return None;
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if crc32c::crc32c(body).to_le_bytes() != crc {
        return None;
    }
    if &body[..8] != MAGIC || body[8..12] != VERSION.to_le_bytes() {
        return None;
    }
    if (u64_at(body, 16), u64_at(body, 24)) != commit_id || u64_at(body, 32) != len {
        return None;
    }
    let count = usize::try_from(u64_at(body, 40)).ok()?;
    // Each interval takes at least three bytes: a corrupt count cannot
    // make us reserve more than the file could hold.
    let mut intervals: Vec<NewInterval> = Vec::with_capacity(count.min(body.len() / 3));
    let mut pos = HEADER_LEN;
    let mut total = 0u64;
    let next = |pos: &mut usize| -> Option<u64> {
        let (v, n) = get_varint(body.get(*pos..)?)?;
        *pos += n;
        Some(v)
    };
    for i in 0..count {
        let alen = usize::try_from(next(&mut pos)?).ok()?;
        let anchor = body.get(pos..pos.checked_add(alen)?)?.to_vec();
        pos += alen;
        let size = u32::try_from(next(&mut pos)?).ok()?;
        let pairs = u16::try_from(next(&mut pos)?).ok()?;
        let ordered = match intervals.last() {
            None => anchor.is_empty(),
            Some(prev) => prev.anchor < anchor,
        };
        if !ordered || (size == 0 && i > 0) || (size == 0) != (pairs == 0) && pairs != UNKNOWN_COUNT
        {
            return None;
        }
        total += u64::from(size);
        intervals.push(NewInterval {
            anchor,
            meta: IntervalMeta {
                size,
                count: pairs,
                ..IntervalMeta::default()
            },
        });
    }
    if pos != body.len() || total != len || intervals.is_empty() {
        return None;
    }
    Some(SparseIndex::build(intervals))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexspace::FaultStorage;

    fn sample() -> SparseIndex {
        let mk = |a: &[u8], size: u32, count: u16| NewInterval {
            anchor: a.to_vec(),
            meta: IntervalMeta {
                size,
                count,
                ..IntervalMeta::default()
            },
        };
        SparseIndex::build(vec![
            mk(b"", 100, 3),
            mk(b"k", 50, 2),
            mk(b"m", 70, UNKNOWN_COUNT),
        ])
    }

    fn intervals(s: &SparseIndex) -> Vec<(Vec<u8>, u64, u32, u16)> {
        let mut v = Vec::new();
        s.for_each(|a, off, m| v.push((a.to_vec(), off, m.size, m.count)));
        v
    }

    #[test]
    fn round_trip_and_every_mismatch_falls_back() {
        let st = FaultStorage::new();
        let s = sample();
        save(&st, (4, 7), 220, &s).unwrap();
        let got = load(&st, (4, 7), 220).expect("the saved index loads");
        assert_eq!(intervals(&got), intervals(&s));
        assert!(load(&st, (4, 8), 220).is_none(), "another commit id");
        assert!(load(&st, (5, 7), 220).is_none(), "another checkpoint");
        assert!(load(&st, (4, 7), 221).is_none(), "another length");
    }

    #[test]
    fn damage_and_truncation_fall_back() {
        let st = FaultStorage::new();
        save(&st, (1, 0), 220, &sample()).unwrap();
        let f = st.open_file(SPARSE, false).unwrap();
        let len = f.len().unwrap() as usize;
        let mut good = vec![0u8; len];
        f.read_exact_at(0, &mut good).unwrap();
        for i in 0..len {
            let mut bad = good.clone();
            bad[i] ^= 0x20;
            assert!(parse(&bad, (1, 0), 220).is_none(), "flip at {i}");
        }
        for cut in [HEADER_LEN + 4, len / 2, len - 1] {
            assert!(parse(&good[..cut], (1, 0), 220).is_none(), "cut at {cut}");
        }
        assert!(load(&FaultStorage::new(), (1, 0), 220).is_none(), "no file");
    }

    /// A file whose header and checksum are right around `entries` (raw
    /// interval records) with an interval count of `count`.
    fn sealed(len: u64, count: u64, entries: &[u8]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        for w in [1u64, 0, len, count] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(entries);
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// What a parsed file must be: a valid index covering `len` bytes.
    fn check_parsed(s: &SparseIndex, len: u64) {
        s.check_invariants();
        assert_eq!(s.total(), len);
    }

    use proptest::prelude::*;
    use proptest::sample::Index;

    proptest! {
        /// Any bytes: no index or a valid one, never a panic.
        #[test]
        fn arbitrary_bytes_give_none_or_a_valid_index(
            b in proptest::collection::vec(any::<u8>(), 0..300),
            len in 0..3000u64,
        ) {
            if let Some(s) = parse(&b, (1, 0), len) {
                check_parsed(&s, len);
            }
        }

        /// Sealed files of arbitrary intervals (unordered anchors, zero
        /// sizes, counts that do not match, a huge interval count): the
        /// structural checks, not the checksum, must refuse them; a count
        /// field cannot reserve more than the file holds.
        #[test]
        fn sealed_arbitrary_intervals_are_checked(
            intervals in proptest::collection::vec(
                (proptest::collection::vec(0u8..4, 0..3), 0..100u32, prop_oneof![0..4u16, Just(UNKNOWN_COUNT)]),
                0..8),
            count in prop_oneof![Just(None), Just(Some(u64::MAX)), (0..10u64).prop_map(Some)],
            extra in proptest::collection::vec(any::<u8>(), 0..3),
        ) {
            let mut entries = Vec::new();
            let mut len = 0u64;
            for (anchor, size, pairs) in &intervals {
                put_varint(&mut entries, anchor.len() as u64);
                entries.extend_from_slice(anchor);
                put_varint(&mut entries, u64::from(*size));
                put_varint(&mut entries, u64::from(*pairs));
                len += u64::from(*size);
            }
            entries.extend_from_slice(&extra);
            let count = count.unwrap_or(intervals.len() as u64);
            let b = sealed(len, count, &entries);
            match parse(&b, (1, 0), len) {
                Some(s) => {
                    check_parsed(&s, len);
                    prop_assert!(extra.is_empty() && count == intervals.len() as u64);
                    let mut got = Vec::new();
                    s.for_each(|a, _, m| got.push((a.to_vec(), m.size, m.count)));
                    prop_assert_eq!(got, intervals);
                }
                None => {
                    let ordered = intervals.first().is_some_and(|f| f.0.is_empty())
                        && intervals.windows(2).all(|w| w[0].0 < w[1].0);
                    let sizes = intervals.iter().enumerate().all(|(i, (_, size, pairs))| {
                        (*size > 0 || i == 0) && ((*size == 0) == (*pairs == 0) || *pairs == UNKNOWN_COUNT)
                    });
                    prop_assert!(
                        !(ordered && sizes && extra.is_empty() && count == intervals.len() as u64),
                        "a valid file was refused"
                    );
                }
            }
        }

        /// Flips, cuts and splices of a real file: no index (the caller
        /// samples the space) or exactly the saved one.
        #[test]
        fn damaged_files_fall_back(
            flips in proptest::collection::vec((any::<Index>(), 0..8u8), 0..3),
            cut in proptest::option::of(any::<Index>()),
            splice in proptest::option::of((any::<Index>(), any::<Index>(), 1..20usize)),
        ) {
            let st = FaultStorage::new();
            let want = sample();
            save(&st, (1, 0), 220, &want).unwrap();
            let f = st.open_file(SPARSE, false).unwrap();
            let mut b = vec![0u8; f.len().unwrap() as usize];
            f.read_exact_at(0, &mut b).unwrap();
            for (at, bit) in &flips {
                let at = at.index(b.len());
                b[at] ^= 1 << bit;
            }
            if let Some((from, to, n)) = splice {
                let (from, to) = (from.index(b.len()), to.index(b.len()));
                let n = n.min(b.len() - from).min(b.len() - to);
                let src = b[from..from + n].to_vec();
                b[to..to + n].copy_from_slice(&src);
            }
            if let Some(cut) = cut {
                b.truncate(cut.index(b.len()));
            }
            if let Some(s) = parse(&b, (1, 0), 220) {
                check_parsed(&s, 220);
                prop_assert_eq!(intervals(&s), intervals(&want));
            }
        }
    }
}
