//! How the keys of every keyspace share the store's one sorted space.
//!
//! A stored key is the user's key behind a keyspace prefix:
//!
//! - the default keyspace stores a key as it is, unless it starts with
//!   `0xFF`; such a key is stored as `FF 00 00 00 00` and the key;
//! - keyspace number `n` (`1 <= n < 2^32 - 1`) stores a key as `FF`, `n`
//!   in four big-endian bytes, and the key;
//! - the catalog (number `2^32 - 1`) stores one pair per keyspace under
//!   its name, and the next number to give out under the empty name.
//!
//! Invariants: within one keyspace, encoding keeps the keys' order and
//! is one-to-one; a keyspace's stored keys are exactly those in
//! `bounds(id)` (the default keyspace: every key below `FF 00 00 00 01`;
//! keyspace `n`: `[FF n, FF n+1)`), so the keyspaces never mix and a
//! whole keyspace is one range; decoding a stored key is dropping the
//! five-byte prefix of a key that starts with `FF`. A default-keyspace
//! key that does not start with `FF` (nearly all of them) is stored
//! without a copy.

use std::borrow::Cow;
use std::ops::Bound;

/// The byte every keyspace prefix starts with.
pub(crate) const TAG: u8 = 0xFF;
/// Bytes of a keyspace prefix.
pub const PREFIX_LEN: usize = 5;

/// A keyspace's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct KsId(pub u32);

impl KsId {
    /// The default keyspace (`Db`'s own methods).
    pub const DEFAULT: KsId = KsId(0);
    /// The catalog of named keyspaces.
    pub const CATALOG: KsId = KsId(u32::MAX);
    /// The first number a named keyspace gets.
    pub const FIRST: u32 = 1;
    /// The expiry queue (`expiry`): the deadlines of pairs with one.
    pub const EXPIRY: KsId = KsId(u32::MAX - 1);
    /// One past the last number a named keyspace may get.
    pub const END: u32 = u32::MAX - 1;

    /// The prefix of this keyspace's stored keys.
    pub fn prefix(self) -> [u8; PREFIX_LEN] {
        let n = self.0.to_be_bytes();
        [TAG, n[0], n[1], n[2], n[3]]
    }
}

/// The stored key of `key` in keyspace `id`.
#[inline]
pub(crate) fn encode(id: KsId, key: &[u8]) -> Cow<'_, [u8]> {
    if id == KsId::DEFAULT && key.first() != Some(&TAG) {
        return Cow::Borrowed(key);
    }
    let mut k = Vec::with_capacity(PREFIX_LEN + key.len());
    k.extend_from_slice(&id.prefix());
    k.extend_from_slice(key);
    Cow::Owned(k)
}

/// [`encode`] of a key a read was asked for, refusing one longer than
/// [`crate::MAX_KEY_LEN`] (`Error::KeyTooLarge`).
#[inline]
pub(crate) fn encode_read(id: KsId, key: &[u8]) -> crate::Result<Cow<'_, [u8]>> {
    crate::codec::check_sizes(key, None)?;
    Ok(encode(id, key))
}

/// The user's key of a stored key (the key without its keyspace prefix).
#[inline]
pub(crate) fn decode(stored: &[u8]) -> &[u8] {
    if stored.first() == Some(&TAG) && stored.len() >= PREFIX_LEN {
        &stored[PREFIX_LEN..]
    } else {
        stored
    }
}

/// [`decode`] of an owned key, in place.
pub(crate) fn decode_vec(mut stored: Vec<u8>) -> Vec<u8> {
    if stored.first() == Some(&TAG) && stored.len() >= PREFIX_LEN {
        stored.drain(..PREFIX_LEN);
    }
    stored
}

/// The keyspace a stored key belongs to.
pub(crate) fn keyspace_of(stored: &[u8]) -> KsId {
    match stored {
        [TAG, a, b, c, d, ..] => KsId(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => KsId::DEFAULT,
    }
}

/// The range of stored keys keyspace `id` owns: `[start, end)`, `end`
/// `None` for the catalog (the last keyspace).
pub(crate) fn bounds(id: KsId) -> (Vec<u8>, Option<Vec<u8>>) {
    let start = if id == KsId::DEFAULT {
        Vec::new()
    } else {
        id.prefix().to_vec()
    };
    let end = (id != KsId::CATALOG).then(|| KsId(id.0 + 1).prefix().to_vec());
    (start, end)
}

/// Stored-key bounds of a range of user keys in keyspace `id`: an open
/// end becomes the keyspace's own.
pub(crate) fn encode_range(
    id: KsId,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let (start, end) = bounds(id);
    let own = |k: Vec<u8>| match encode(id, &k) {
        Cow::Borrowed(_) => k,
        Cow::Owned(s) => s,
    };
    let lo = match lo {
        Bound::Included(k) => Bound::Included(own(k)),
        Bound::Excluded(k) => Bound::Excluded(own(k)),
        Bound::Unbounded if start.is_empty() => Bound::Unbounded,
        Bound::Unbounded => Bound::Included(start),
    };
    let hi = match hi {
        Bound::Included(k) => Bound::Included(own(k)),
        Bound::Excluded(k) => Bound::Excluded(own(k)),
        Bound::Unbounded => end.map_or(Bound::Unbounded, Bound::Excluded),
    };
    (lo, hi)
}

/// A range delete's stored bounds (`start <= k < end`) from the user's
/// (`end` `None`: to the keyspace's end).
pub(crate) fn encode_delete_range(
    id: KsId,
    start: Vec<u8>,
    end: Option<Vec<u8>>,
) -> (Vec<u8>, Option<Vec<u8>>) {
    let lo = if start.is_empty() {
        bounds(id).0
    } else {
        encode(id, &start).into_owned()
    };
    let hi = match end {
        Some(e) => Some(encode(id, &e).into_owned()),
        None => bounds(id).1,
    };
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn within(id: KsId, stored: &[u8]) -> bool {
        let (start, end) = bounds(id);
        stored >= &start[..] && end.is_none_or(|e| stored < &e[..])
    }

    #[test]
    fn keys_land_in_their_keyspace_and_decode_back() {
        for id in [
            KsId::DEFAULT,
            KsId(1),
            KsId(7),
            KsId(u32::MAX - 1),
            KsId::CATALOG,
        ] {
            for key in [
                &b""[..],
                b"a",
                b"\xff",
                b"\xff\xff\xff\xff\xff\xff",
                b"\x00",
            ] {
                let s = encode(id, key);
                assert!(within(id, &s), "{id:?} {key:?} -> {s:?}");
                assert_eq!(decode(&s), key, "{id:?} {key:?}");
                assert_eq!(decode_vec(s.to_vec()), key);
                assert_eq!(keyspace_of(&s), id);
            }
        }
        // Default keys without the tag are stored as they are.
        assert!(matches!(encode(KsId::DEFAULT, b"abc"), Cow::Borrowed(_)));
    }

    #[test]
    fn open_ends_become_the_keyspace_bounds() {
        let (lo, hi) = encode_range(KsId::DEFAULT, Bound::Unbounded, Bound::Unbounded);
        assert_eq!(lo, Bound::Unbounded);
        assert_eq!(hi, Bound::Excluded(vec![TAG, 0, 0, 0, 1]));
        let (lo, hi) = encode_range(KsId(3), Bound::Unbounded, Bound::Unbounded);
        assert_eq!(lo, Bound::Included(vec![TAG, 0, 0, 0, 3]));
        assert_eq!(hi, Bound::Excluded(vec![TAG, 0, 0, 0, 4]));
        assert_eq!(
            encode_delete_range(KsId(3), Vec::new(), None),
            (vec![TAG, 0, 0, 0, 3], Some(vec![TAG, 0, 0, 0, 4]))
        );
        assert_eq!(
            encode_delete_range(KsId::DEFAULT, b"a".to_vec(), None),
            (b"a".to_vec(), Some(vec![TAG, 0, 0, 0, 1]))
        );
    }

    proptest! {
        /// Encoding keeps the order of keys within a keyspace, and keys
        /// of different keyspaces never interleave.
        #[test]
        fn order_is_kept_within_and_between_keyspaces(
            a in proptest::collection::vec(prop_oneof![Just(0xFFu8), any::<u8>()], 0..8),
            b in proptest::collection::vec(prop_oneof![Just(0xFFu8), any::<u8>()], 0..8),
            i in prop_oneof![Just(0u32), 1u32..5, Just(u32::MAX - 1), Just(u32::MAX)],
            j in prop_oneof![Just(0u32), 1u32..5, Just(u32::MAX - 1), Just(u32::MAX)],
        ) {
            let (ea, eb) = (encode(KsId(i), &a), encode(KsId(j), &b));
            if i == j {
                prop_assert_eq!(a.cmp(&b), ea.cmp(&eb));
            } else {
                prop_assert_eq!(i.cmp(&j), ea.cmp(&eb));
            }
        }
    }
}
