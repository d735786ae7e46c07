//! The logical log: fixed-size checksummed entries grouped into committed
//! batches (§4.2; byte layout in docs/FORMAT.md).
//!
//! Invariants: a batch is applied on recovery only when its commit entry
//! follows it intact (count and CRC over the batch verify, and its sequence
//! number is above the previous commit's), so replay yields whole commits:
//! never part of one. Replay stops at the first entry that does not verify.
//! The header names the tree version the entries apply to. Writers write
//! format version 2; readers also accept version 1 (which lacks
//! `RemapMerged` entries).
//!
//! Torn tail or damage: every commit writes its batch and commit entry
//! and syncs the log before the next one begins, so only the last batch
//! can be unsynced when the machine stops. Writes reach the device in
//! whole 512-byte sectors, and an entry (32 bytes, at a multiple of 32)
//! lies inside one sector, so a crash leaves each entry of that batch
//! either whole or as it was before: zeros, past the log's synced end.
//! Replay therefore reports [`Damage`] (the caller refuses the log as
//! corrupt rather than roll back to an earlier commit) when it stops at
//! an entry that is neither valid nor zeros, at a verified entry with an
//! unknown operation, or anywhere (zeros or a commit that does not match
//! its batch included) when a verified commit entry further on is
//! numbered beyond the next commit: that commit was written after the
//! stop point was synced.

/// Bytes of one entry.
pub const ENTRY: usize = 32;
/// Bytes of the log header.
pub const HEADER: usize = 32;
const MAGIC: &[u8; 8] = b"FLEXLOG1";
const FORMAT_VERSION: u32 = 2;
const OLDEST_VERSION: u32 = 1;

const OP_INSERT: u8 = 1;
const OP_HOLE: u8 = 2;
const OP_COLLAPSE: u8 = 3;
const OP_REMAP: u8 = 4;
const OP_TAG: u8 = 5;
const OP_COMMIT: u8 = 6;
const OP_META: u8 = 7;
const OP_REMAP_MERGED: u8 = 8;

/// One logged operation on the extent index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogOp {
    /// `len` bytes at physical `addr` inserted at `loff`; a nonzero `tag`
    /// is then set on the extent starting at `loff`.
    Insert {
        /// Logical offset.
        loff: u64,
        /// Length.
        len: u64,
        /// Physical address.
        addr: u64,
        /// Tag of the new extent (0: none).
        tag: u16,
    },
    /// A hole of `len` bytes inserted at `loff`.
    Hole {
        /// Logical offset.
        loff: u64,
        /// Length.
        len: u64,
    },
    /// `len` bytes removed at `loff`.
    Collapse {
        /// Logical offset.
        loff: u64,
        /// Length.
        len: u64,
    },
    /// `loff..loff + len` now maps to `addr` (GC relocation, defrag).
    Remap {
        /// Logical offset.
        loff: u64,
        /// Length.
        len: u64,
        /// New physical address.
        addr: u64,
    },
    /// `loff..loff + len` now maps to `addr` as one extent that keeps only
    /// the tag of the extent starting at `loff` (defragmentation, GC).
    RemapMerged {
        /// Logical offset.
        loff: u64,
        /// Length.
        len: u64,
        /// New physical address.
        addr: u64,
    },
    /// The extent at `loff` gets `tag`.
    Tag {
        /// Logical offset.
        loff: u64,
        /// The tag.
        tag: u16,
    },
    /// The layer above's metadata words (see `FlexSpace::set_user_meta`).
    Meta {
        /// The three words.
        words: [u64; 3],
    },
}

fn raw(op: u8, tag: u16, a: u64, b: u64, c: u64) -> [u8; ENTRY] {
    let mut e = [0u8; ENTRY];
    e[0] = op;
    e[2..4].copy_from_slice(&tag.to_le_bytes());
    e[8..16].copy_from_slice(&a.to_le_bytes());
    e[16..24].copy_from_slice(&b.to_le_bytes());
    e[24..32].copy_from_slice(&c.to_le_bytes());
    let crc = entry_crc(&e);
    e[4..8].copy_from_slice(&crc.to_le_bytes());
    e
}

fn entry_crc(e: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&e[0..4]), &e[8..ENTRY])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The entry of `op`.
pub fn entry(op: &LogOp) -> [u8; ENTRY] {
    match *op {
        LogOp::Insert {
            loff,
            len,
            addr,
            tag,
        } => raw(OP_INSERT, tag, loff, len, addr),
        LogOp::Hole { loff, len } => raw(OP_HOLE, 0, loff, len, 0),
        LogOp::Collapse { loff, len } => raw(OP_COLLAPSE, 0, loff, len, 0),
        LogOp::Remap { loff, len, addr } => raw(OP_REMAP, 0, loff, len, addr),
        LogOp::RemapMerged { loff, len, addr } => raw(OP_REMAP_MERGED, 0, loff, len, addr),
        LogOp::Tag { loff, tag } => raw(OP_TAG, tag, loff, 0, 0),
        LogOp::Meta { words: [a, b, c] } => raw(OP_META, 0, a, b, c),
    }
}

/// The commit entry numbered `seq` closing a batch of `count` entries whose
/// bytes have CRC-32C `crc`.
pub fn commit_entry(seq: u64, count: u64, crc: u32) -> [u8; ENTRY] {
    raw(OP_COMMIT, 0, seq, count, u64::from(crc))
}

/// Appends the entry of `op`.
#[cfg(test)]
pub fn encode(out: &mut Vec<u8>, op: &LogOp) {
    out.extend_from_slice(&entry(op));
}

/// Appends the commit entry closing `batch` (the encoded entries since the
/// previous commit), numbered `seq`.
#[cfg(test)]
pub fn encode_commit(out: &mut Vec<u8>, seq: u64, batch: &[u8]) {
    let count = (batch.len() / ENTRY) as u64;
    out.extend_from_slice(&commit_entry(seq, count, crc32c::crc32c(batch)));
}

/// The log header for tree version `version`.
pub fn header(version: u64) -> Vec<u8> {
    let mut h = vec![0u8; HEADER];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&version.to_le_bytes());
    let crc = crc32c::crc32c(&h[..28]);
    h[28..32].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The tree version a header names; `None` when it is not a valid header.
pub fn parse_header(h: &[u8]) -> Option<u64> {
    if h.len() < HEADER || &h[0..8] != MAGIC || h[28..32] != crc32c::crc32c(&h[..28]).to_le_bytes()
    {
        return None;
    }
    let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
        return None;
    }
    Some(u64_at(h, 16))
}

/// What replay found in the entries after the header.
pub struct Replay {
    /// The committed batches, in order.
    pub batches: Vec<Vec<LogOp>>,
    /// Bytes (after the header) covered by those batches.
    pub valid_len: usize,
    /// The last commit's sequence number (0 if none).
    pub last_seq: u64,
    /// Why replay stopped before the end, when that cannot be a torn
    /// tail (see the module's doc).
    pub damage: Option<Damage>,
}

/// An entry inside the synced part of the log that does not verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Byte offset of the entry, counted from the first entry.
    pub at: usize,
    /// What is wrong with it.
    pub why: String,
}

/// Why an entry stopped replay.
enum Stop {
    /// Zeros: never written, as past a torn tail.
    Zeros,
    /// A verified commit entry that does not close its batch (the mix of
    /// two writes of the same unsynced tail can give one).
    Unmatched,
    /// Bytes no crash can leave: damage wherever it is.
    Damaged(String),
}

/// Decodes committed batches from `entries` up to the first invalid entry.
pub fn replay(entries: &[u8]) -> Replay {
    let mut out = Replay {
        batches: Vec::new(),
        valid_len: 0,
        last_seq: 0,
        damage: None,
    };
    let mut batch = Vec::new();
    let mut batch_start = 0;
    let mut stop = None;
    for (i, e) in entries.chunks_exact(ENTRY).enumerate() {
        if e[4..8] != entry_crc(e).to_le_bytes() {
            stop = Some((
                i,
                if e.iter().all(|&b| b == 0) {
                    Stop::Zeros
                } else {
                    Stop::Damaged("the entry's checksum does not match".into())
                },
            ));
            break;
        }
        let (a, b, c) = (u64_at(e, 8), u64_at(e, 16), u64_at(e, 24));
        let tag = u16::from_le_bytes([e[2], e[3]]);
        let op = match e[0] {
            OP_INSERT => LogOp::Insert {
                loff: a,
                len: b,
                addr: c,
                tag,
            },
            OP_HOLE => LogOp::Hole { loff: a, len: b },
            OP_COLLAPSE => LogOp::Collapse { loff: a, len: b },
            OP_REMAP => LogOp::Remap {
                loff: a,
                len: b,
                addr: c,
            },
            OP_REMAP_MERGED => LogOp::RemapMerged {
                loff: a,
                len: b,
                addr: c,
            },
            OP_TAG => LogOp::Tag { loff: a, tag },
            OP_META => LogOp::Meta { words: [a, b, c] },
            OP_COMMIT => {
                let end = i * ENTRY;
                let body = &entries[batch_start..end];
                if b != batch.len() as u64
                    || c != u64::from(crc32c::crc32c(body))
                    || a <= out.last_seq
                {
                    stop = Some((i, Stop::Unmatched));
                    break;
                }
                out.last_seq = a;
                out.batches.push(std::mem::take(&mut batch));
                batch_start = end + ENTRY;
                out.valid_len = batch_start;
                continue;
            }
            op => {
                stop = Some((i, Stop::Damaged(format!("unknown operation {op}"))));
                break;
            }
        };
        batch.push(op);
    }
    out.damage = stop.and_then(|(i, why)| match why {
        Stop::Damaged(why) => Some(Damage { at: i * ENTRY, why }),
        Stop::Zeros | Stop::Unmatched => {
            later_commit(&entries[(i + 1) * ENTRY..], out.last_seq + 1).map(|seq| Damage {
                at: i * ENTRY,
                why: format!(
                    "replay stops here, but commit {seq} further on was written after this \
                     part of the log was synced"
                ),
            })
        }
    });
    out
}

/// The number of a verified commit entry in `entries` numbered above
/// `next` (the number the next commit would take), if there is one.
fn later_commit(entries: &[u8], next: u64) -> Option<u64> {
    entries
        .chunks_exact(ENTRY)
        .filter(|e| e[0] == OP_COMMIT && e[4..8] == entry_crc(e).to_le_bytes())
        .map(|e| u64_at(e, 8))
        .find(|&seq| seq > next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Vec<u8>, Vec<Vec<LogOp>>) {
        let batches = vec![
            vec![
                LogOp::Insert {
                    loff: 1,
                    len: 2,
                    addr: 3,
                    tag: 4,
                },
                LogOp::Tag { loff: 1, tag: 9 },
                LogOp::Meta { words: [5, 6, 7] },
            ],
            vec![],
            vec![
                LogOp::Collapse { loff: 0, len: 1 },
                LogOp::Hole {
                    loff: 5,
                    len: 1 << 62,
                },
                LogOp::Remap {
                    loff: 0,
                    len: 2,
                    addr: 77,
                },
                LogOp::RemapMerged {
                    loff: 1,
                    len: 3,
                    addr: 99,
                },
            ],
        ];
        let mut out = Vec::new();
        for (i, b) in batches.iter().enumerate() {
            let start = out.len();
            for op in b {
                encode(&mut out, op);
            }
            let body = out[start..].to_vec();
            encode_commit(&mut out, i as u64 + 1, &body);
        }
        (out, batches)
    }

    #[test]
    fn batches_round_trip() {
        let (bytes, batches) = sample();
        let r = replay(&bytes);
        assert_eq!(r.batches, batches);
        assert_eq!(r.valid_len, bytes.len());
        assert_eq!(r.last_seq, 3);
        assert_eq!(parse_header(&header(42)), Some(42));
    }

    #[test]
    fn torn_or_flipped_entries_end_replay_at_a_commit() {
        let (bytes, batches) = sample();
        for cut in 0..bytes.len() {
            let r = replay(&bytes[..cut]);
            assert!(r.batches.len() <= batches.len());
            assert_eq!(r.batches[..], batches[..r.batches.len()]);
            assert_eq!(r.damage, None, "cut at {cut}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            let r = replay(&b);
            assert_eq!(r.batches[..], batches[..r.batches.len()], "flip at {i}");
            assert!(r.batches.len() < batches.len());
            // No crash leaves such an entry: the flip is reported where it is.
            let d = r.damage.expect("a flip is damage");
            assert_eq!(d.at, i / ENTRY * ENTRY, "flip at {i}: {d:?}");
        }
        let mut h = header(1);
        h[17] ^= 1;
        assert_eq!(parse_header(&h), None);
        // Version 1 headers are still read; unknown versions are not.
        for (v, ok) in [(1u32, true), (3, false), (0, false)] {
            let mut h = header(5);
            h[8..12].copy_from_slice(&v.to_le_bytes());
            let crc = crc32c::crc32c(&h[..28]);
            h[28..32].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(parse_header(&h), ok.then_some(5), "version {v}");
        }
    }

    /// A crash leaves the unsynced last batch torn at entry granularity:
    /// zeros where its sectors never landed, or a mix of two writes of the
    /// same tail. Neither is damage; zeros before a commit numbered past
    /// the next one are.
    #[test]
    fn torn_tails_are_not_damage_but_zeros_before_a_later_commit_are() {
        let (bytes, batches) = sample();
        let last_start = bytes.len() - 5 * ENTRY; // the third batch: 4 + commit
        for gone in 0..5 {
            let mut b = bytes.clone();
            b[last_start + gone * ENTRY..][..ENTRY].fill(0);
            let r = replay(&b);
            assert_eq!(r.batches.len(), 2, "entry {gone} zeroed");
            assert_eq!(r.damage, None, "entry {gone} zeroed");
        }
        // The same tail written twice, differently, both halves landing.
        let mut other = Vec::new();
        let op = LogOp::Tag { loff: 3, tag: 3 };
        encode(&mut other, &op);
        let mut b = bytes.clone();
        b[last_start..last_start + ENTRY].copy_from_slice(&other);
        let r = replay(&b);
        assert_eq!((r.batches.len(), r.damage), (2, None));
        // A zeroed entry in the first batch, though, precedes commits 2 and 3.
        let mut b = bytes.clone();
        b[..ENTRY].fill(0);
        let r = replay(&b);
        assert!(r.batches.is_empty());
        let d = r.damage.expect("commit 2 follows the zeros");
        assert_eq!(d.at, 0);
        assert!(d.why.contains("commit 2"), "{}", d.why);
        assert_eq!(replay(&bytes).batches, batches);
        // An entry that verifies but names no operation is damage too.
        let mut b = bytes.clone();
        b[..ENTRY].copy_from_slice(&raw(99, 0, 1, 2, 3));
        assert!(replay(&b)
            .damage
            .unwrap()
            .why
            .contains("unknown operation 99"));
    }

    use proptest::prelude::*;

    proptest! {
        /// Any bytes: replay never panics, covers whole batches only
        /// (`valid_len` ends on a commit entry inside the input); replaying
        /// the bytes it
        /// covers gives the same batches; and any bytes parse as a header
        /// or not, never a panic.
        #[test]
        fn replay_of_any_bytes_is_whole_batches(
            bytes in proptest::collection::vec(any::<u8>(), 0..400),
            prefix_sample in any::<bool>(),
        ) {
            let bytes = if prefix_sample {
                // Valid batches in front, so replay gets past the first one.
                let mut b = sample().0;
                b.extend_from_slice(&bytes);
                b
            } else {
                bytes
            };
            let r = replay(&bytes);
            prop_assert!(r.valid_len <= bytes.len() && r.valid_len / ENTRY * ENTRY == r.valid_len);
            let again = replay(&bytes[..r.valid_len]);
            prop_assert_eq!(&again.batches, &r.batches);
            prop_assert_eq!(again.last_seq, r.last_seq);
            prop_assert_eq!(again.valid_len, r.valid_len);
            if prefix_sample {
                prop_assert!(r.batches.len() >= 3);
            }
            let _ = parse_header(&bytes);
        }
    }
}
