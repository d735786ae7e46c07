//! `WriteBatch`: writes applied atomically, and its WAL payload encoding.
//!
//! Payload: `varint(count)` then per operation a kind byte (1 put, 2
//! delete), `varint(key_len) key`, and for a put `varint(value_len) value`.
//! Invariant: `decode(encode(b)) == b`; decoding never panics and rejects
//! trailing or missing bytes.

use crate::codec::{check_sizes, get_varint, put_varint};
use crate::error::Result;

const PUT: u8 = 1;
const DELETE: u8 = 2;

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

/// Sets `out` to the payload of a batch holding the one operation given
/// (as [`encode_op`] reads it), the same bytes [`WriteBatch::encode`]
/// writes for such a batch, without building the batch.
pub(crate) fn encode_single(out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    out.clear();
    out.reserve(1 + 1 + 10 + key.len() + 10 + value.map_or(0, <[u8]>::len));
    put_varint(out, 1);
    encode_op(out, key, value);
}

/// One write of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put; oversized keys or values are refused here.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<&mut Self> {
        check_sizes(key, Some(value))?;
        self.ops.push(BatchOp::Put {
            key: key.to_vec(),
            value: value.to_vec(),
        });
        Ok(self)
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: &[u8]) -> Result<&mut Self> {
        check_sizes(key, None)?;
        self.ops.push(BatchOp::Delete { key: key.to_vec() });
        Ok(self)
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The operations in the order they were added.
    pub fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.ops.clear();
    }

    /// The WAL payload of this batch.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, self.ops.len() as u64);
        for op in &self.ops {
            match op {
                BatchOp::Put { key, value } => encode_op(&mut out, key, Some(value)),
                BatchOp::Delete { key } => encode_op(&mut out, key, None),
            }
        }
        out
    }

    /// Decodes a WAL payload; `None` when it is malformed.
    pub fn decode(buf: &[u8]) -> Option<WriteBatch> {
        let mut ops = Vec::new();
        walk(buf, |key, value| {
            ops.push(match value {
                Some(value) => BatchOp::Put {
                    key: key.to_vec(),
                    value: value.to_vec(),
                },
                None => BatchOp::Delete { key: key.to_vec() },
            })
        })?;
        Some(WriteBatch { ops })
    }

    /// Calls `f(key, value)` for each operation of a WAL payload in order
    /// (`value` is `None` for a delete), borrowing from `buf` without a
    /// copy, and returns the number of operations. A malformed payload
    /// gives `None` and `f` is not called at all: the whole payload is
    /// checked before the first call, so a batch is applied all or nothing.
    pub fn for_each_op(buf: &[u8], f: impl FnMut(&[u8], Option<&[u8]>)) -> Option<usize> {
        walk(buf, |_, _| {})?;
        walk(buf, f)
    }
}

/// Parses a payload, calling `f` for each operation as it goes; `None`
/// (possibly after calls for a prefix) when it is malformed.
fn walk<'a>(buf: &'a [u8], mut f: impl FnMut(&'a [u8], Option<&'a [u8]>)) -> Option<usize> {
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
        let value = match kind {
            PUT => Some(bytes(&mut pos)?),
            DELETE => None,
            _ => return None,
        };
        check_sizes(key, value).ok()?;
        f(key, value);
        n += 1;
    }
    (pos == buf.len()).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn for_each_op_borrows_every_op_or_none() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v")
            .unwrap()
            .delete(b"x")
            .unwrap()
            .put(b"", b"")
            .unwrap();
        let enc = b.encode();
        let mut seen = Vec::new();
        let n =
            WriteBatch::for_each_op(&enc, |k, v| seen.push((k.to_vec(), v.map(<[u8]>::to_vec))));
        assert_eq!(n, Some(3));
        let want: Vec<_> = b
            .ops()
            .iter()
            .map(|op| match op {
                BatchOp::Put { key, value } => (key.clone(), Some(value.clone())),
                BatchOp::Delete { key } => (key.clone(), None),
            })
            .collect();
        assert_eq!(seen, want);
        // A malformed payload calls nothing, even for its valid prefix.
        for cut in 0..enc.len() {
            let mut calls = 0;
            assert_eq!(
                WriteBatch::for_each_op(&enc[..cut], |_, _| calls += 1),
                None
            );
            assert_eq!(calls, 0, "cut at {cut}");
        }
    }

    #[test]
    fn oversized_key_is_refused() {
        let mut b = WriteBatch::new();
        assert!(b.put(&vec![0; crate::MAX_KEY_LEN + 1], b"").is_err());
        assert!(b.is_empty());
    }

    proptest! {
        #[test]
        fn batches_round_trip(ops in proptest::collection::vec(
            (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..40), proptest::collection::vec(any::<u8>(), 0..80)), 0..20)) {
            let mut b = WriteBatch::new();
            for (put, k, v) in ops {
                if put { b.put(&k, &v).unwrap(); } else { b.delete(&k).unwrap(); }
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
            encode_single(&mut out, &k, value);
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
            let n = WriteBatch::for_each_op(&buf, |k, v| seen.push((k.to_vec(), v.map(<[u8]>::to_vec))));
            prop_assert_eq!(n, decoded.as_ref().map(WriteBatch::len));
            if let Some(b) = decoded {
                let ops: Vec<_> = b.ops().iter().map(|op| match op {
                    BatchOp::Put { key, value } => (key.clone(), Some(value.clone())),
                    BatchOp::Delete { key } => (key.clone(), None),
                }).collect();
                prop_assert_eq!(ops, seen);
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
