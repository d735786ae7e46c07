//! `WriteBatch`: writes applied atomically, and its WAL payload encoding.
//!
//! Payload: `varint(count)` then per operation a kind byte and its bytes:
//! 1 put (`varint(key_len) key varint(value_len) value`), 2 delete
//! (`varint(key_len) key`), 3 range delete (`varint(len) start varint(len)
//! end`: every key `start <= k < end`), 4 range delete to the end
//! (`varint(len) start`: every key `k >= start`), 5 put with a deadline
//! (as 1, then the deadline: 8 bytes little-endian, Unix milliseconds,
//! never 0). A batch holds puts with a time to live (`put_with_ttl`) until
//! it is written; the write turns each into a put with a deadline (and an
//! entry of the expiry queue, `expiry`), so a payload never holds a TTL.
//! Invariant: `decode(encode(b)) == b` for a batch without a time to live
//! (one comes back as the put with a deadline it was encoded as);
//! decoding never panics and rejects
//! trailing or missing bytes, unknown kinds, oversized keys and ranges
//! whose start is not below their end.

use std::ops::{Bound, RangeBounds};

use crate::codec::{check_sizes, check_stored_sizes, get_varint, put_varint, MAX_STORED_KEY_LEN};
use crate::error::{Error, Result};
use crate::keyspace::encoding::{encode, KsId};

const PUT: u8 = 1;
const DELETE: u8 = 2;
const DELETE_RANGE: u8 = 3;
const DELETE_RANGE_TO_END: u8 = 4;
const PUT_EXPIRING: u8 = 5;

/// The longest bound of a range delete: a key, and one byte more (an
/// inclusive end `k` is stored as the exclusive end `k\0`).
pub(crate) const MAX_BOUND_LEN: usize = MAX_STORED_KEY_LEN + 1;

/// A range of keys as a range delete stores it: every key `k` with
/// `start <= k` and, when `end` is set, `k < end`. Inclusive ends and
/// exclusive starts become the next key (`k` followed by a zero byte),
/// which is exact for byte strings. `None` when the range holds no key
/// (its start at or past its end is refused by [`key_range`]).
pub(crate) type KeyRange = (Vec<u8>, Option<Vec<u8>>);

/// The range `range` names, as a range delete stores it: oversized bounds
/// are refused (`KeyTooLarge`), and so is a start past the end
/// (`InvalidArgument`); `Ok(None)` for a range that holds no key (its
/// start equal to its end).
pub(crate) fn key_range<K, R>(range: R) -> Result<Option<KeyRange>>
where
    K: AsRef<[u8]> + ?Sized,
    R: RangeBounds<K>,
{
    let given = |b: Bound<&K>| -> Result<Option<Vec<u8>>> {
        match b {
            Bound::Included(k) | Bound::Excluded(k) => {
                check_sizes(k.as_ref(), None)?;
                Ok(Some(k.as_ref().to_vec()))
            }
            Bound::Unbounded => Ok(None),
        }
    };
    let (lo, hi) = (given(range.start_bound())?, given(range.end_bound())?);
    if let (Some(l), Some(h)) = (&lo, &hi) {
        if l > h {
            return Err(Error::InvalidArgument(format!(
                "a range delete's start ({}) is past its end ({})",
                show(l),
                show(h)
            )));
        }
    }
    // The next key after `k`: `k` and a zero byte.
    let after = |mut k: Vec<u8>| {
        k.push(0);
        k
    };
    let start = match (range.start_bound(), lo) {
        (Bound::Excluded(_), Some(k)) => after(k),
        (_, k) => k.unwrap_or_default(),
    };
    let end = match (range.end_bound(), hi) {
        (Bound::Included(_), Some(k)) => Some(after(k)),
        (_, k) => k,
    };
    // (`a..a`, `(Excluded(a), Excluded(a))`: empty, not backwards.)
    Ok(match &end {
        Some(e) if start >= *e => None,
        _ => Some((start, end)),
    })
}

/// A key for an error message: printable ASCII as it is, else hex, cut.
fn show(k: &[u8]) -> String {
    let cut = &k[..k.len().min(40)];
    let more = if k.len() > 40 { "..." } else { "" };
    if cut.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}{more}", String::from_utf8_lossy(cut))
    } else {
        let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}{more}")
    }
}

/// One operation of an encoded batch, borrowed from the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpRef<'a> {
    /// Set `key` to `value`.
    Put {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Remove `key`.
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// Remove every key `k` with `start <= k` and, when `end` is set,
    /// `k < end`.
    DeleteRange {
        /// The first key removed (inclusive).
        start: &'a [u8],
        /// The key bound (exclusive); `None`: to the last key.
        end: Option<&'a [u8]>,
    },
    /// Set `key` to `value` until `expires`.
    PutExpiring {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
        /// The deadline, Unix milliseconds (never 0).
        expires: u64,
    },
    /// Set `key` to `value` for `ttl` from the write (a batch's op until
    /// it is written).
    PutWithTtl {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
        /// The time to live (nonzero).
        ttl: std::time::Duration,
    },
}

fn encode_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Appends a range delete's encoding to `out`.
fn encode_range(out: &mut Vec<u8>, start: &[u8], end: Option<&[u8]>) {
    out.push(if end.is_some() {
        DELETE_RANGE
    } else {
        DELETE_RANGE_TO_END
    });
    encode_bytes(out, start);
    if let Some(end) = end {
        encode_bytes(out, end);
    }
}

/// Appends one operation's encoding to `out`: a put when `value` is set,
/// a delete otherwise.
fn encode_op(out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    out.push(if value.is_some() { PUT } else { DELETE });
    put_varint(out, key.len() as u64);
    out.extend_from_slice(key);
    if let Some(value) = value {
        put_varint(out, value.len() as u64);
        out.extend_from_slice(value);
    }
}

/// Appends a put with a deadline's encoding to `out`.
fn encode_expiring(out: &mut Vec<u8>, key: &[u8], value: &[u8], expires: u64) {
    out.push(PUT_EXPIRING);
    encode_bytes(out, key);
    encode_bytes(out, value);
    out.extend_from_slice(&expires.to_le_bytes());
}

/// Sets `out` to the payload of a batch holding the one operation given
/// (as [`encode_op`] reads it), the same bytes [`WriteBatch::encode`]
/// writes for such a batch, without building the batch.
pub(crate) fn encode_single(out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    out.clear();
    out.reserve(1 + 1 + 10 + key.len() + 10 + value.map_or(0, <[u8]>::len));
    put_varint(out, 1);
    encode_op(out, key, value);
}

/// Sets `out` to the payload of a batch holding a put with deadline
/// `expires` and its expiry-queue entry `queue_key` → `key` (as
/// `expiry::resolve` makes them), without building the batch.
pub(crate) fn encode_expiring_single(
    out: &mut Vec<u8>,
    key: &[u8],
    value: &[u8],
    expires: u64,
    queue_key: &[u8],
) {
    out.clear();
    out.reserve(2 + 2 * 10 + 2 * key.len() + value.len() + 8 + 10 + queue_key.len());
    put_varint(out, 2);
    encode_expiring(out, key, value, expires);
    encode_op(out, queue_key, Some(key));
}

/// One write of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BatchOp {
    /// Set `key` to `value`.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Remove `key`.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// Remove every key `k` with `start <= k` and, when `end` is set,
    /// `k < end` (see [`WriteBatch::delete_range`]).
    DeleteRange {
        /// The first key removed (inclusive).
        start: Vec<u8>,
        /// The key bound (exclusive); `None`: to the last key.
        end: Option<Vec<u8>>,
    },
    /// Set `key` to `value` until `expires` (Unix milliseconds): a put
    /// with a time to live as written (read back from a log).
    PutExpiring {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// The deadline, Unix milliseconds (never 0).
        expires: u64,
    },
    /// Set `key` to `value` for `ttl` from when the batch is written (see
    /// [`WriteBatch::put_with_ttl`]).
    PutWithTtl {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// The time to live (nonzero).
        ttl: std::time::Duration,
    },
}

impl BatchOp {
    /// The operation, borrowed.
    pub fn as_ref(&self) -> OpRef<'_> {
        match self {
            BatchOp::Put { key, value } => OpRef::Put { key, value },
            BatchOp::Delete { key } => OpRef::Delete { key },
            BatchOp::DeleteRange { start, end } => OpRef::DeleteRange {
                start,
                end: end.as_deref(),
            },
            BatchOp::PutExpiring {
                key,
                value,
                expires,
            } => OpRef::PutExpiring {
                key,
                value,
                expires: *expires,
            },
            BatchOp::PutWithTtl { key, value, ttl } => OpRef::PutWithTtl {
                key,
                value,
                ttl: *ttl,
            },
        }
    }
}

impl OpRef<'_> {
    /// The operation, copied.
    pub fn to_owned(&self) -> BatchOp {
        match *self {
            OpRef::Put { key, value } => BatchOp::Put {
                key: key.to_vec(),
                value: value.to_vec(),
            },
            OpRef::Delete { key } => BatchOp::Delete { key: key.to_vec() },
            OpRef::DeleteRange { start, end } => BatchOp::DeleteRange {
                start: start.to_vec(),
                end: end.map(<[u8]>::to_vec),
            },
            OpRef::PutExpiring {
                key,
                value,
                expires,
            } => BatchOp::PutExpiring {
                key: key.to_vec(),
                value: value.to_vec(),
                expires,
            },
            OpRef::PutWithTtl { key, value, ttl } => BatchOp::PutWithTtl {
                key: key.to_vec(),
                value: value.to_vec(),
                ttl,
            },
        }
    }
}

/// A group of writes applied all or nothing, also across a crash.
///
/// ```
/// use flexdb::WriteBatch;
/// let mut batch = WriteBatch::new();
/// batch.put(b"apple", b"red").unwrap();
/// batch.delete(b"pear").unwrap();
/// assert_eq!(batch.len(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
    /// The store its named keyspaces belong to (its address), once one
    /// was added (`keyspace::WriteBatch::put_in`).
    pub(crate) store: Option<usize>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put (in the default keyspace; [`WriteBatch::put_in`] for
    /// another); oversized keys or values are refused here.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<&mut Self> {
        check_sizes(key, Some(value))?;
        self.ops.push(BatchOp::Put {
            key: encode(KsId::DEFAULT, key).into_owned(),
            value: value.to_vec(),
        });
        Ok(self)
    }

    /// Adds a put whose pair expires `ttl` after the batch is written (in
    /// the default keyspace; [`WriteBatch::put_with_ttl_in`] for another):
    /// from then on no read sees it, and its space is reclaimed (see
    /// [`crate::Db::put_with_ttl`]). A `ttl` of zero, or one too long for a
    /// deadline, is refused (`InvalidArgument`) when the batch is written.
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut batch = flexdb::WriteBatch::new();
    /// batch.put_with_ttl(b"session:42", b"alice", Duration::from_secs(3600)).unwrap();
    /// assert_eq!(batch.len(), 1);
    /// ```
    pub fn put_with_ttl(
        &mut self,
        key: &[u8],
        value: &[u8],
        ttl: std::time::Duration,
    ) -> Result<&mut Self> {
        check_sizes(key, Some(value))?;
        check_ttl(ttl)?;
        self.ops.push(BatchOp::PutWithTtl {
            key: encode(KsId::DEFAULT, key).into_owned(),
            value: value.to_vec(),
            ttl,
        });
        Ok(self)
    }

    /// Adds a put with a time to live of a key as stored.
    pub(crate) fn put_with_ttl_stored(
        &mut self,
        key: Vec<u8>,
        value: Vec<u8>,
        ttl: std::time::Duration,
    ) -> Result<()> {
        check_stored_sizes(&key, Some(&value))?;
        check_ttl(ttl)?;
        self.ops.push(BatchOp::PutWithTtl { key, value, ttl });
        Ok(())
    }

    /// Adds a put with a deadline of a key as stored (the write's own
    /// resolution of a time to live, and repair).
    pub(crate) fn put_expiring_stored(&mut self, key: Vec<u8>, value: Vec<u8>, expires: u64) {
        self.ops.push(BatchOp::PutExpiring {
            key,
            value,
            expires,
        });
    }

    /// Appends an operation as it is.
    pub(crate) fn push_op(&mut self, op: BatchOp) {
        self.ops.push(op);
    }

    /// Whether it holds a put with a time to live or a deadline (the
    /// write resolves them: deadlines, and their expiry-queue entries).
    pub(crate) fn has_ttls(&self) -> bool {
        self.ops
            .iter()
            .any(|op| matches!(op, BatchOp::PutWithTtl { .. } | BatchOp::PutExpiring { .. }))
    }

    /// Adds a delete (in the default keyspace).
    pub fn delete(&mut self, key: &[u8]) -> Result<&mut Self> {
        check_sizes(key, None)?;
        self.ops.push(BatchOp::Delete {
            key: encode(KsId::DEFAULT, key).into_owned(),
        });
        Ok(self)
    }

    /// Adds a put of a key as stored (behind its keyspace prefix).
    pub(crate) fn put_stored(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        check_stored_sizes(&key, Some(&value))?;
        self.ops.push(BatchOp::Put { key, value });
        Ok(())
    }

    /// Adds a delete of a key as stored.
    pub(crate) fn delete_stored(&mut self, key: Vec<u8>) -> Result<()> {
        check_stored_sizes(&key, None)?;
        self.ops.push(BatchOp::Delete { key });
        Ok(())
    }

    /// Adds a range delete: every key in `range` is removed when the
    /// batch is applied, in the order of the batch's operations (a put of
    /// a key in the range added after it stands; one added before it is
    /// removed). `range` may be any range of keys (`a..b`, `a..=b`, `a..`,
    /// `..`). A start past the end is refused (`InvalidArgument`), as are
    /// oversized bounds (`KeyTooLarge`); an empty range adds nothing.
    ///
    /// ```
    /// use flexdb::WriteBatch;
    /// let mut batch = WriteBatch::new();
    /// batch.delete_range("user:0100".."user:0200").unwrap();
    /// batch.put(b"user:0150", b"kept").unwrap(); // after the range delete
    /// assert!(batch.delete_range("b".."a").is_err());
    /// ```
    pub fn delete_range<K, R>(&mut self, range: R) -> Result<&mut Self>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        self.delete_range_in_id(KsId::DEFAULT, range)
    }

    /// Adds a range delete as a tombstone stores it (`start <= k < end`,
    /// bounds of up to `MAX_BOUND_LEN` bytes, as [`key_range`] makes
    /// them): for the transaction's commit and repair, which hand back
    /// ranges they keep.
    pub(crate) fn push_range(&mut self, start: &[u8], end: Option<&[u8]>) -> Result<()> {
        let op = OpRef::DeleteRange { start, end };
        if !valid(op) {
            return Err(Error::InvalidArgument(format!(
                "a range delete's bounds are out of order or too long ({} bytes, {} bytes)",
                start.len(),
                end.map_or(0, <[u8]>::len)
            )));
        }
        self.ops.push(op.to_owned());
        Ok(())
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The operations in the order they were added, keys as stored: a
    /// key of a named keyspace, or a default-keyspace key that starts
    /// with `0xFF`, behind its five-byte keyspace prefix (docs/FORMAT.md).
    pub fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.ops.clear();
    }

    /// The WAL payload of this batch (puts with a time to live get their
    /// deadline from the system clock, now).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, self.ops.len() as u64);
        for op in &self.ops {
            match op {
                BatchOp::Put { key, value } => encode_op(&mut out, key, Some(value)),
                BatchOp::Delete { key } => encode_op(&mut out, key, None),
                BatchOp::DeleteRange { start, end } => {
                    encode_range(&mut out, start, end.as_deref())
                }
                BatchOp::PutExpiring {
                    key,
                    value,
                    expires,
                } => encode_expiring(&mut out, key, value, *expires),
                // A store's write resolves these first (`expiry`), by its
                // own clock, adding the expiry queue's entries; a batch
                // encoded by hand takes its deadlines from the system
                // clock now.
                BatchOp::PutWithTtl { key, value, ttl } => {
                    let expires = crate::clock::Clock::default()
                        .deadline(*ttl)
                        .unwrap_or(u64::MAX);
                    encode_expiring(&mut out, key, value, expires)
                }
            }
        }
        out
    }

    /// Decodes a WAL payload; `None` when it is malformed.
    pub fn decode(buf: &[u8]) -> Option<WriteBatch> {
        let mut ops = Vec::new();
        walk(buf, |op| ops.push(op.to_owned()))?;
        Some(WriteBatch { ops, store: None })
    }

    /// Calls `f(op)` for each operation of a WAL payload in order,
    /// borrowing from `buf` without a copy, and returns the number of operations. A malformed payload
    /// gives `None` and `f` is not called at all: the whole payload is
    /// checked before the first call, so a batch is applied all or nothing.
    pub fn for_each_op<'a>(buf: &'a [u8], f: impl FnMut(OpRef<'a>)) -> Option<usize> {
        walk(buf, |_| {})?;
        walk(buf, f)
    }
}

/// Parses a payload, calling `f` for each operation as it goes; `None`
/// (possibly after calls for a prefix) when it is malformed.
fn walk<'a>(buf: &'a [u8], mut f: impl FnMut(OpRef<'a>)) -> Option<usize> {
    let bytes = |pos: &mut usize| -> Option<&'a [u8]> {
        let (len, n) = get_varint(buf.get(*pos..)?)?;
        let start = *pos + n;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        let out = buf.get(start..end)?;
        *pos = end;
        Some(out)
    };
    let (count, mut pos) = get_varint(buf)?;
    let mut n = 0;
    for _ in 0..count {
        let kind = *buf.get(pos)?;
        pos += 1;
        let key = bytes(&mut pos)?;
        let op = match kind {
            PUT => OpRef::Put {
                key,
                value: bytes(&mut pos)?,
            },
            DELETE => OpRef::Delete { key },
            DELETE_RANGE => OpRef::DeleteRange {
                start: key,
                end: Some(bytes(&mut pos)?),
            },
            DELETE_RANGE_TO_END => OpRef::DeleteRange {
                start: key,
                end: None,
            },
            PUT_EXPIRING => {
                let value = bytes(&mut pos)?;
                let d = buf.get(pos..pos + 8)?;
                pos += 8;
                OpRef::PutExpiring {
                    key,
                    value,
                    expires: u64::from_le_bytes(d.try_into().ok()?),
                }
            }
            _ => return None,
        };
        if !valid(op) {
            return None;
        }
        f(op);
        n += 1;
    }
    (pos == buf.len()).then_some(n)
}

/// Refuses a time to live of zero (the rest of its checks need the
/// clock: `clock::Clock::deadline`).
pub(crate) fn check_ttl(ttl: std::time::Duration) -> Result<()> {
    if ttl.is_zero() {
        return Err(Error::InvalidArgument(
            "a time to live of zero (a pair that never lives; delete it instead)".into(),
        ));
    }
    Ok(())
}

/// Whether a decoded operation is one a batch can hold: keys and values
/// within their limits, a range's bounds within `MAX_BOUND_LEN` and its
/// start below its end.
fn valid(op: OpRef<'_>) -> bool {
    match op {
        OpRef::Put { key, value } => check_stored_sizes(key, Some(value)).is_ok(),
        OpRef::PutExpiring {
            key,
            value,
            expires,
        } => expires != 0 && check_stored_sizes(key, Some(value)).is_ok(),
        OpRef::PutWithTtl { key, value, ttl } => {
            check_ttl(ttl).is_ok() && check_stored_sizes(key, Some(value)).is_ok()
        }
        OpRef::Delete { key } => check_stored_sizes(key, None).is_ok(),
        OpRef::DeleteRange { start, end } => {
            start.len() <= MAX_BOUND_LEN
                && end.is_none_or(|e| e.len() <= MAX_BOUND_LEN && start < e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::MAX_KEY_LEN;
    use proptest::prelude::*;

    #[test]
    fn malformed_payloads_are_rejected() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v").unwrap().delete(b"x").unwrap();
        let enc = b.encode();
        assert_eq!(WriteBatch::decode(&enc), Some(b));
        for cut in 0..enc.len() {
            assert_eq!(WriteBatch::decode(&enc[..cut]), None, "cut at {cut}");
        }
        let mut extra = enc.clone();
        extra.push(0);
        assert_eq!(WriteBatch::decode(&extra), None);
        let mut bad_kind = enc;
        bad_kind[1] = 9;
        assert_eq!(WriteBatch::decode(&bad_kind), None);
    }

    #[test]
    fn a_single_put_with_a_deadline_encodes_as_its_batch() {
        let mut b = WriteBatch::new();
        b.put_expiring_stored(b"k".to_vec(), b"v".to_vec(), 99);
        b.put_stored(b"q".to_vec(), b"k".to_vec()).unwrap();
        let mut out = vec![1, 2, 3];
        encode_expiring_single(&mut out, b"k", b"v", 99, b"q");
        assert_eq!(out, b.encode());
    }

    #[test]
    fn puts_with_deadlines_round_trip_and_refuse_a_zero_deadline() {
        let mut b = WriteBatch::new();
        b.put_expiring_stored(b"k".to_vec(), b"v".to_vec(), 1234);
        b.put(b"x", b"y").unwrap();
        let enc = b.encode();
        assert_eq!(WriteBatch::decode(&enc), Some(b.clone()));
        for cut in 0..enc.len() {
            assert_eq!(WriteBatch::decode(&enc[..cut]), None, "cut at {cut}");
        }
        let mut zero = WriteBatch::new();
        zero.put_expiring_stored(b"k".to_vec(), b"v".to_vec(), 0);
        assert_eq!(WriteBatch::decode(&zero.encode()), None);
        assert!(matches!(
            WriteBatch::new().put_with_ttl(b"k", b"v", std::time::Duration::ZERO),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn for_each_op_borrows_every_op_or_none() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v")
            .unwrap()
            .delete(b"x")
            .unwrap()
            .delete_range("a".."c")
            .unwrap()
            .put(b"", b"")
            .unwrap()
            .delete_range("q"..)
            .unwrap();
        let enc = b.encode();
        let mut seen = Vec::new();
        let n = WriteBatch::for_each_op(&enc, |op| seen.push(op.to_owned()));
        assert_eq!(n, Some(5));
        assert_eq!(seen, b.ops());
        // A malformed payload calls nothing, even for its valid prefix.
        for cut in 0..enc.len() {
            let mut calls = 0;
            assert_eq!(WriteBatch::for_each_op(&enc[..cut], |_| calls += 1), None);
            assert_eq!(calls, 0, "cut at {cut}");
        }
    }

    #[test]
    fn ranges_take_any_bounds_and_refuse_bad_ones() {
        let r = |b: &mut WriteBatch| b.ops().last().cloned();
        let mut b = WriteBatch::new();
        b.delete_range("a".."c").unwrap();
        let want = |s: &[u8], e: Option<&[u8]>| BatchOp::DeleteRange {
            start: s.to_vec(),
            end: e.map(<[u8]>::to_vec),
        };
        assert_eq!(r(&mut b), Some(want(b"a", Some(b"c"))));
        b.delete_range("a"..="c").unwrap();
        assert_eq!(r(&mut b), Some(want(b"a", Some(b"c\0"))));
        b.delete_range::<str, _>((Bound::Excluded("a"), Bound::Unbounded))
            .unwrap();
        // An open end is the default keyspace's end (keyspace::encoding).
        let end = [0xFF, 0, 0, 0, 1];
        assert_eq!(r(&mut b), Some(want(b"a\0", Some(&end))));
        b.delete_range::<str, _>(..).unwrap();
        assert_eq!(r(&mut b), Some(want(b"", Some(&end))));
        assert_eq!(b.len(), 4);
        // Empty: nothing added. Backwards: refused, nothing added.
        b.delete_range("m".."m").unwrap();
        b.delete_range::<str, _>((Bound::Excluded("m"), Bound::Included("m")))
            .unwrap();
        b.delete_range::<str, _>((Bound::Excluded("m"), Bound::Excluded("m")))
            .unwrap();
        match b.delete_range::<str, _>((Bound::Excluded("n"), Bound::Included("m"))) {
            // The message names the keys as given.
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains("\"n\"") && m.contains("\"m\""), "{m}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            b.delete_range("n".."m"),
            Err(Error::InvalidArgument(_))
        ));
        let huge = vec![7u8; MAX_KEY_LEN + 1];
        assert!(matches!(
            b.delete_range(&huge[..]..),
            Err(Error::KeyTooLarge { .. })
        ));
        assert_eq!(b.len(), 4);
        // The longest bounds still encode and decode.
        let key = vec![7u8; MAX_KEY_LEN];
        b.delete_range(&key[..]..=&key[..]).unwrap();
        assert_eq!(WriteBatch::decode(&b.encode()), Some(b.clone()));
    }

    #[test]
    fn a_range_whose_start_is_not_below_its_end_does_not_decode() {
        for (s, e) in [(&b"b"[..], &b"a"[..]), (b"b", b"b")] {
            let mut out = Vec::new();
            put_varint(&mut out, 1);
            encode_range(&mut out, s, Some(e));
            assert_eq!(WriteBatch::decode(&out), None);
        }
    }

    #[test]
    fn oversized_key_is_refused() {
        let mut b = WriteBatch::new();
        assert!(b.put(&vec![0; MAX_KEY_LEN + 1], b"").is_err());
        assert!(b.is_empty());
    }

    proptest! {
        #[test]
        fn batches_round_trip(ops in proptest::collection::vec(
            (0..4u8, proptest::collection::vec(any::<u8>(), 0..40), proptest::collection::vec(any::<u8>(), 0..80)), 0..20)) {
            let mut b = WriteBatch::new();
            for (kind, k, v) in ops {
                match kind {
                    0 => { b.put(&k, &v).unwrap(); }
                    1 => { b.delete(&k).unwrap(); }
                    2 if k < v => { b.delete_range(&k[..]..&v[..]).unwrap(); }
                    _ => { b.delete_range(&k[..]..).unwrap(); }
                }
            }
            prop_assert_eq!(WriteBatch::decode(&b.encode()), Some(b));
        }

        #[test]
        fn a_single_op_encodes_as_its_batch(
            put in any::<bool>(),
            k in proptest::collection::vec(any::<u8>(), 0..300),
            v in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut b = WriteBatch::new();
            let value = put.then_some(&v[..]);
            if put { b.put(&k, &v).unwrap(); } else { b.delete(&k).unwrap(); }
            // A reused buffer holding something else first.
            let mut out = vec![7u8; 5];
            encode_single(&mut out, &encode(KsId::DEFAULT, &k), value);
            prop_assert_eq!(&out, &b.encode());
        }

        /// Any bytes: `None`, or a batch that `for_each_op` walks the same
        /// way and that encodes to a payload decoding to itself (a varint
        /// may have been overlong); never a panic, never an allocation a
        /// count field asked for.
        #[test]
        fn arbitrary_payloads_decode_or_are_refused(
            mut buf in proptest::collection::vec(any::<u8>(), 0..200),
            huge_count in any::<bool>(),
        ) {
            if huge_count {
                // A count of 2^63 in front: bounded by the bytes, not by it.
                let mut b = Vec::new();
                put_varint(&mut b, 1 << 63);
                b.extend_from_slice(&buf);
                buf = b;
            }
            let decoded = WriteBatch::decode(&buf);
            let mut seen = Vec::new();
            let n = WriteBatch::for_each_op(&buf, |op| seen.push(op.to_owned()));
            prop_assert_eq!(n, decoded.as_ref().map(WriteBatch::len));
            if let Some(b) = decoded {
                prop_assert_eq!(b.ops(), &seen[..]);
                prop_assert_eq!(WriteBatch::decode(&b.encode()), Some(b));
            }
        }

        /// Flips, cuts and splices of a real payload: `None` or a batch
        /// that is exactly what the damaged bytes say (re-encoding it and
        /// decoding gives it back).
        #[test]
        fn damaged_payloads_decode_or_are_refused(
            ops in proptest::collection::vec((any::<bool>(), proptest::collection::vec(any::<u8>(), 0..20), proptest::collection::vec(any::<u8>(), 0..40)), 1..8),
            flip in proptest::option::of((any::<proptest::sample::Index>(), 0..8u8)),
            cut in proptest::option::of(any::<proptest::sample::Index>()),
            splice in proptest::option::of((any::<proptest::sample::Index>(), any::<proptest::sample::Index>(), 1..20usize)),
        ) {
            let mut b = WriteBatch::new();
            for (put, k, v) in &ops {
                if *put { b.put(k, v).unwrap(); } else { b.delete(k).unwrap(); }
            }
            let mut buf = b.encode();
            if let Some((at, bit)) = flip {
                let at = at.index(buf.len());
                buf[at] ^= 1 << bit;
            }
            if let Some((from, to, n)) = splice {
                let (from, to) = (from.index(buf.len()), to.index(buf.len()));
                let n = n.min(buf.len() - from).min(buf.len() - to);
                let src = buf[from..from + n].to_vec();
                buf[to..to + n].copy_from_slice(&src);
            }
            if let Some(cut) = cut {
                let at = cut.index(buf.len());
                buf.truncate(at);
                if flip.is_none() && splice.is_none() {
                    prop_assert_eq!(WriteBatch::decode(&buf), None, "a cut payload decoded");
                }
            }
            if let Some(got) = WriteBatch::decode(&buf) {
                prop_assert_eq!(WriteBatch::decode(&got.encode()), Some(got));
            }
        }
    }
}
