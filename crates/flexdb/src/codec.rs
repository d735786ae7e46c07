//! Byte encodings shared by the space and the WAL: LEB128 varints and the
//! key-value pair record.
//!
//! A pair record is `varint(key_len) varint(value_len) key value crc32c`,
//! where the CRC32C (little-endian, 4 bytes) covers everything before it.
//! Invariants: `encode_pair` followed by `decode_pair` gives back the same
//! key and value; `decode_pair` never panics and never returns a pair whose
//! checksum did not verify.

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

/// The encoded size of a pair record.
pub fn pair_len(key: &[u8], value: &[u8]) -> usize {
    varint_len(key.len() as u64) + varint_len(value.len() as u64) + key.len() + value.len() + 4
}

/// Appends the record of `(key, value)` to `out`.
pub fn encode_pair(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    let start = out.len();
    put_varint(out, key.len() as u64);
    put_varint(out, value.len() as u64);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
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
    if klen > MAX_STORED_KEY_LEN as u64 || vlen > MAX_VALUE_LEN as u64 {
        return Decoded::Invalid;
    }
    let head = a + b;
    let body = head + klen as usize + vlen as usize;
    let len = body + 4;
    if buf.len() < len {
        return Decoded::Incomplete { need: len };
    }
    let mut crc = [0u8; 4];
    crc.copy_from_slice(&buf[body..len]);
    if u32::from_le_bytes(crc) != crc32c::crc32c(&buf[..body]) {
        return Decoded::Invalid;
    }
    Decoded::Pair {
        key: &buf[head..head + klen as usize],
        value: &buf[head + klen as usize..body],
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
                Decoded::Pair { key: k, value: v, len } => {
                    prop_assert_eq!(k, &key[..]);
                    prop_assert_eq!(v, &value[..]);
                    prop_assert_eq!(len, b.len() - 3);
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }
    }
}
