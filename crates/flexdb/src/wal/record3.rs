//! Version-3 records (docs/FORMAT.md): a compact head, and two small kinds
//! besides the write batches.
//!
//! A record is `crc32c u32 | varint(len << 2 | kind) | body`, the body of
//! `len` bytes:
//! - a batch (kind 1): `varint(seq - expected) | payload`, where
//!   `expected` is the log's first sequence number for its first batch and
//!   the previous batch's number plus one after that (1 byte for a run of
//!   single writes); `len` counts the varint and the payload;
//! - a sync mark (kind 2): `varint(synced) | varint(expected - first)`:
//!   appended before the first batch after a sync, it says the log was
//!   durable up to `synced` (an absolute offset) when it was written, and
//!   which number the next batch is expected to carry;
//! - a chain record (kind 3, only as a log's first record): `varint(gen) |
//!   varint(end)`: the log before this one is generation `gen` and its
//!   records end at byte `end` (rotation writes it; see `wal::chain`).
//!
//! The CRC covers everything after it and is seeded with the CRC of the
//! header's first sequence number (`salt`): records an older log left in a
//! file this log took over are numbered from another first number and never
//! verify as this log's, which version 2 got from absolute sequence numbers.
//!
//! Invariants: kind 0 is no record, so an all-zero head never parses (a
//! preallocated tail ends replay); marks and chain records have bodies of
//! at most `SMALL_BODY` bytes, so their varint byte is below 0x80 and their
//! whole size at most `MAX_SMALL`; parsing never panics on any bytes.

use flexsys::varint::{get as get_varint, put as put_varint};

use super::format::{u32_at, MAX_RECORD};

/// A batch of writes.
pub(super) const BATCH: u8 = 1;
/// A sync mark.
pub(super) const MARK: u8 = 2;
/// A chain record.
pub(super) const CHAIN: u8 = 3;
/// The largest body of a mark or a chain record (two varints).
pub(super) const SMALL_BODY: usize = 20;
/// The most bytes a mark or a chain record takes.
pub(super) const MAX_SMALL: usize = 5 + SMALL_BODY;
/// The fewest bytes a record takes (a CRC and one varint byte).
pub(super) const MIN_RECORD: usize = 5;
/// The most bytes a head (CRC and length varint) takes.
pub(super) const MAX_HEAD: usize = 4 + 5;

/// The CRC seed of a log whose header's first sequence number is `first`.
pub(super) fn salt(first: u64) -> u32 {
    crc32c::crc32c(&first.to_le_bytes())
}

/// A parsed head: the kind, the body's length and the head's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) kind: u8,
    pub(super) body: usize,
    pub(super) len: usize,
}

impl Head {
    /// The whole record's length.
    pub(super) fn record_len(&self) -> usize {
        self.len + self.body
    }
}

/// Parses the head at the start of `b`, `None` when it cannot be one (too
/// short, kind 0, a small kind with a body over `SMALL_BODY`, a batch over
/// the largest record).
pub(super) fn parse_head(b: &[u8]) -> Option<Head> {
    let (v, n) = get_varint(b.get(4..)?)?;
    let kind = (v & 3) as u8;
    let body = usize::try_from(v >> 2).ok()?;
    let fits = match kind {
        BATCH => body <= MAX_RECORD + 10,
        MARK | CHAIN => body <= SMALL_BODY,
        _ => false,
    };
    fits.then_some(Head {
        kind,
        body,
        len: 4 + n,
    })
}

/// Whether `rec` (a whole record) carries a CRC that verifies under `salt`.
pub(super) fn verifies(rec: &[u8], salt: u32) -> bool {
    rec.len() >= MIN_RECORD && crc32c::crc32c_append(salt, &rec[4..]) == u32_at(rec, 0)
}

/// Two varints filling `body` exactly.
pub(super) fn two_varints(body: &[u8]) -> Option<(u64, u64)> {
    let (a, n) = get_varint(body)?;
    let (b, m) = get_varint(&body[n..])?;
    (n + m == body.len()).then_some((a, b))
}

/// A batch's body: its sequence number's distance from the expected one,
/// and its payload.
pub(super) fn batch_body(body: &[u8]) -> Option<(u64, &[u8])> {
    let (delta, n) = get_varint(body)?;
    Some((delta, &body[n..]))
}

fn finish(out: &mut [u8], start: usize, salt: u32) {
    let crc = crc32c::crc32c_append(salt, &out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
}

fn encode(out: &mut Vec<u8>, salt: u32, kind: u8, fields: &[u64], payload: &[u8]) {
    // Straight into `out` (no buffer of its own: this runs for every write).
    let n: usize = fields.iter().map(|&f| flexsys::varint::len(f)).sum();
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    put_varint(out, ((n + payload.len()) as u64) << 2 | u64::from(kind));
    for &f in fields {
        put_varint(out, f);
    }
    out.extend_from_slice(payload);
    finish(out, start, salt);
}

/// Appends a batch record numbered `expected + delta`.
pub(super) fn encode_batch(out: &mut Vec<u8>, salt: u32, delta: u64, payload: &[u8]) {
    encode(out, salt, BATCH, &[delta], payload);
}

/// Appends a sync mark: durable up to `synced`, the next batch expected
/// `expected_rel` above the first sequence number.
pub(super) fn encode_mark(out: &mut Vec<u8>, salt: u32, synced: u64, expected_rel: u64) {
    encode(out, salt, MARK, &[synced, expected_rel], &[]);
}

/// Appends a chain record: the previous log is generation `gen`, its
/// records end at `end`.
pub(super) fn encode_chain(out: &mut Vec<u8>, salt: u32, gen: u64, end: u64) {
    encode(out, salt, CHAIN, &[gen, end], &[]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_back_and_verify_only_under_their_salt() {
        let (s, other) = (salt(100), salt(7));
        let mut b = Vec::new();
        encode_batch(&mut b, s, 0, &[9; 150]);
        let h = parse_head(&b).unwrap();
        assert_eq!((h.kind, h.record_len()), (BATCH, b.len()));
        // 150 bytes of payload: a head of 6 bytes and one of sequence.
        assert_eq!(b.len(), 150 + 7);
        assert!(verifies(&b, s) && !verifies(&b, other));
        assert_eq!(batch_body(&b[h.len..]), Some((0, &[9u8; 150][..])));
        for (kind, f) in [
            (MARK, encode_mark as fn(&mut Vec<u8>, u32, u64, u64)),
            (CHAIN, encode_chain),
        ] {
            let mut b = Vec::new();
            f(&mut b, s, u64::MAX, 1 << 40);
            let h = parse_head(&b).unwrap();
            assert_eq!((h.kind, h.record_len()), (kind, b.len()));
            assert!(b.len() <= MAX_SMALL && b[4] < 0x80);
            assert_eq!(two_varints(&b[h.len..]), Some((u64::MAX, 1 << 40)));
            assert!(verifies(&b, s));
        }
    }

    #[test]
    fn an_all_zero_head_is_no_record() {
        assert_eq!(parse_head(&[0; 16]), None);
        assert_eq!(parse_head(&[1, 2, 3, 4]), None);
        // A small kind claiming a long body.
        assert_eq!(parse_head(&[0, 0, 0, 0, (30 << 2) | MARK]), None);
    }
}
