//! LEB128 varints: seven bits a byte, low bits first, the high bit set on
//! every byte but the last. The leaf records of the extent index, the
//! store's pair records, write batches and write-ahead log records use
//! them.
//!
//! Invariants: `put` then `get` gives back the value and the bytes `put`
//! wrote (`len` of them); `get` never panics, reads at most 10 bytes and
//! refuses a varint that runs past its input or past 64 bits.

/// Appends `v` as a LEB128 varint.
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a LEB128 varint from the start of `buf`: (value, bytes used).
/// `None` when `buf` ends first or the varint is longer than 10 bytes or
/// above `u64::MAX`.
#[inline]
pub fn get(buf: &[u8]) -> Option<(u64, usize)> {
    // Values under 128 (most lengths) take one byte.
    match buf.first() {
        Some(&b) if b < 0x80 => return Some((u64::from(b), 1)),
        None => return None,
        _ => {}
    }
    get_long(buf)
}

#[cold]
fn get_long(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        let part = u64::from(b & 0x7f);
        if i == 9 && part > 1 {
            return None;
        }
        v |= part << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// The number of bytes [`put`] writes for `v`.
pub fn len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_round_trip_and_bad_varints_are_refused() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put(&mut b, v);
            assert_eq!(b.len(), len(v));
            assert_eq!(get(&b), Some((v, b.len())));
            assert_eq!(get(&b[..b.len() - 1]), None);
        }
        // Eleven continuation bytes are not a varint.
        assert_eq!(get(&[0xff; 11]), None);
        // A 10th byte above 1 would overflow 64 bits.
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert_eq!(get(&over), None);
        assert_eq!(get(&[]), None);
    }

    #[test]
    fn every_value_of_a_sweep_round_trips() {
        for shift in 0..64 {
            let v = 1u64 << shift;
            for x in [v - 1, v, v + 1, v.wrapping_mul(3)] {
                let mut b = vec![0xAA];
                put(&mut b, x);
                assert_eq!(b.len() - 1, len(x));
                assert_eq!(get(&b[1..]), Some((x, len(x))));
            }
        }
    }
}
