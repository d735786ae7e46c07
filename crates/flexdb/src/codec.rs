//! Byte encodings shared by the space and the WAL: LEB128 varints and the
//! key-value pair record.
//!
//! A pair record is `varint(key_len) varint(value_len) key value crc32c`,
//! where the CRC32C (little-endian, 4 bytes) covers everything before it.
//! A pair with a deadline (expiry) has bit 32 of its value-length field
//! set ([`EXPIRES_FLAG`]) and its deadline, 8 bytes little-endian (Unix
//! milliseconds, never 0), between the value and the CRC.
//! Invariants: `encode_pair` followed by `decode_pair` gives back the same
//! key, value and deadline; `decode_pair` never panics and never returns a
//! pair whose checksum did not verify.

use crate::error::{Error, Result};

/// The largest key, in bytes.
pub const MAX_KEY_LEN: usize = 64 * 1024;
/// The largest key as stored: a key of [`MAX_KEY_LEN`] bytes behind its
/// keyspace's prefix (`keyspace::encoding`).
pub(crate) const MAX_STORED_KEY_LEN: usize = MAX_KEY_LEN + crate::keyspace::encoding::PREFIX_LEN;
/// The largest value, in bytes.
pub const MAX_VALUE_LEN: usize = 64 * 1024 * 1024;

// The varints are flexsys's (the extent index's leaves use them too).
pub use flexsys::varint::{get as get_varint, len as varint_len, put as put_varint};

/// Checks the size limits of a key and a value.
pub fn check_sizes(key: &[u8], value: Option<&[u8]>) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max: MAX_KEY_LEN,
        });
    }
    if let Some(v) = value {
        if v.len() > MAX_VALUE_LEN {
            return Err(Error::ValueTooLarge {
                len: v.len(),
                max: MAX_VALUE_LEN,
            });
        }
    }
    Ok(())
}

/// Checks the size limits of a stored key (a user's key behind its
/// keyspace prefix) and a value.
pub(crate) fn check_stored_sizes(key: &[u8], value: Option<&[u8]>) -> Result<()> {
    if key.len() > MAX_STORED_KEY_LEN {
        return Err(Error::KeyTooLarge {
            len: key
                .len()
                .saturating_sub(crate::keyspace::encoding::PREFIX_LEN),
            max: MAX_KEY_LEN,
        });
    }
    check_sizes(&[], value)
}

/// The bit of a record's value-length field that says an 8-byte deadline
/// follows the value (no value is that long).
pub const EXPIRES_FLAG: u64 = 1 << 32;

/// The value-length field of a record: the length, and the flag when the
/// pair has a deadline (`expires` nonzero).
#[inline]
fn value_field(value: &[u8], expires: u64) -> u64 {
    value.len() as u64 | if expires != 0 { EXPIRES_FLAG } else { 0 }
}

/// The encoded size of a pair record.
#[cfg(test)]
pub fn pair_len(key: &[u8], value: &[u8]) -> usize {
    pair_len_expiring(key, value, 0)
}

/// The encoded size of a pair record with deadline `expires` (0: none).
pub fn pair_len_expiring(key: &[u8], value: &[u8], expires: u64) -> usize {
    varint_len(key.len() as u64)
        + varint_len(value_field(value, expires))
        + key.len()
        + value.len()
        + if expires != 0 { 8 } else { 0 }
        + 4
}

/// Appends the record of `(key, value)` to `out`.
#[cfg(test)]
pub fn encode_pair(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    encode_pair_expiring(out, key, value, 0)
}

/// Appends the record of `(key, value)` with deadline `expires` (Unix
/// milliseconds; 0: none) to `out`.
pub fn encode_pair_expiring(out: &mut Vec<u8>, key: &[u8], value: &[u8], expires: u64) {
    let start = out.len();
    put_varint(out, key.len() as u64);
    put_varint(out, value_field(value, expires));
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    if expires != 0 {
        out.extend_from_slice(&expires.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Splits a record's value-length field into the value's length and
/// whether a deadline follows; `None` when it is not a valid field.
#[inline]
pub fn split_value_field(field: u64) -> Option<(usize, bool)> {
    let len = field & !EXPIRES_FLAG;
    (len <= MAX_VALUE_LEN as u64).then_some((len as usize, field & EXPIRES_FLAG != 0))
}

/// What [`decode_pair`] found at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A verified pair and the record's total length.
    Pair {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
        /// The deadline (Unix milliseconds; 0: none).
        expires: u64,
        /// Bytes the record occupies.
        len: usize,
    },
    /// The buffer ends before the record does; at least `need` bytes are
    /// required to decode it.
    Incomplete {
        /// Total record length when known, else a lower bound.
        need: usize,
    },
    /// The bytes are not a valid record (bad lengths or checksum).
    Invalid,
}

/// Decodes the pair record at the start of `buf`.
pub fn decode_pair(buf: &[u8]) -> Decoded<'_> {
    let Some((klen, a)) = get_varint(buf) else {
        return if buf.len() < 10 {
            Decoded::Incomplete {
                need: buf.len() + 1,
            }
        } else {
            Decoded::Invalid
        };
    };
    let Some((vlen, b)) = get_varint(&buf[a..]) else {
        return if buf.len() < a + 10 {
            Decoded::Incomplete {
                need: buf.len() + 1,
            }
        } else {
            Decoded::Invalid
        };
    };
    let Some((vlen, has_deadline)) = split_value_field(vlen) else {
        return Decoded::Invalid;
    };
    if klen > MAX_STORED_KEY_LEN as u64 {
        return Decoded::Invalid;
    }
    let head = a + b;
    let value_end = head + klen as usize + vlen;
    let body = value_end + if has_deadline { 8 } else { 0 };
    let len = body + 4;
    if buf.len() < len {
        return Decoded::Incomplete { need: len };
    }
    let mut crc = [0u8; 4];
    crc.copy_from_slice(&buf[body..len]);
    if u32::from_le_bytes(crc) != crc32c::crc32c(&buf[..body]) {
        return Decoded::Invalid;
    }
    let expires = if has_deadline {
        let mut d = [0u8; 8];
        d.copy_from_slice(&buf[value_end..body]);
        match u64::from_le_bytes(d) {
            0 => return Decoded::Invalid,
            d => d,
        }
    } else {
        0
    };
    Decoded::Pair {
        key: &buf[head..head + klen as usize],
        value: &buf[head + klen as usize..value_end],
        expires,
        len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn corrupt_pairs_are_invalid_or_incomplete() {
        let mut b = Vec::new();
        encode_pair(&mut b, b"key", b"value");
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x10;
            assert!(
                !matches!(decode_pair(&c), Decoded::Pair { key, value, .. } if key == b"key" && value == b"value"),
                "flip at {i} went unnoticed"
            );
        }
        for cut in 0..b.len() {
            assert!(matches!(decode_pair(&b[..cut]), Decoded::Incomplete { .. }));
        }
    }

    #[test]
    fn oversized_inputs_are_typed_errors() {
        assert!(matches!(
            check_sizes(&vec![0; MAX_KEY_LEN + 1], None),
            Err(Error::KeyTooLarge { .. })
        ));
        assert!(check_sizes(&vec![0; MAX_KEY_LEN], Some(&[])).is_ok());
    }

    proptest! {
        #[test]
        fn pairs_round_trip(key in proptest::collection::vec(any::<u8>(), 0..300),
                            value in proptest::collection::vec(any::<u8>(), 0..3000)) {
            let mut b = vec![7u8; 3];
            encode_pair(&mut b, &key, &value);
            prop_assert_eq!(b.len() - 3, pair_len(&key, &value));
            match decode_pair(&b[3..]) {
                Decoded::Pair { key: k, value: v, expires, len } => {
                    prop_assert_eq!(k, &key[..]);
                    prop_assert_eq!(v, &value[..]);
                    prop_assert_eq!(expires, 0);
                    prop_assert_eq!(len, b.len() - 3);
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }

        #[test]
        fn pairs_with_deadlines_round_trip(key in proptest::collection::vec(any::<u8>(), 0..300),
                            value in proptest::collection::vec(any::<u8>(), 0..3000),
                            expires in 1u64..) {
            let mut b = Vec::new();
            encode_pair_expiring(&mut b, &key, &value, expires);
            prop_assert_eq!(b.len(), pair_len_expiring(&key, &value, expires));
            match decode_pair(&b) {
                Decoded::Pair { key: k, value: v, expires: e, len } => {
                    prop_assert_eq!(k, &key[..]);
                    prop_assert_eq!(v, &value[..]);
                    prop_assert_eq!(e, expires);
                    prop_assert_eq!(len, b.len());
                }
                other => prop_assert!(false, "{:?}", other),
            }
            for cut in 0..b.len() {
                let incomplete = matches!(decode_pair(&b[..cut]), Decoded::Incomplete { .. });
                prop_assert!(incomplete, "cut at {}", cut);
            }
        }
    }
}
