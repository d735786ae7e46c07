//! Versioned 64 KiB blocks: a space's content that can be decoded back
//! into (id, version) pairs and hashed, for crash tests that compare a
//! recovered space with the states it may be in.

/// Bytes of one block.
pub const BLOCK: usize = 64 << 10;

/// The block of `id` at version `ver`: its two words repeated.
pub fn block(id: u32, ver: u32) -> Vec<u8> {
    let mut w = [0u8; 8];
    w[..4].copy_from_slice(&id.to_le_bytes());
    w[4..].copy_from_slice(&ver.to_le_bytes());
    w.repeat(BLOCK / 8)
}

/// A hash of a decoded state.
pub fn hash(state: &[(u32, u32)]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &(a, b) in state {
        for x in a.to_le_bytes().into_iter().chain(b.to_le_bytes()) {
            h = (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3);
        }
    }
    h ^ state.len() as u64
}

/// The (id, version) pairs of a space's bytes; `None` if they are not
/// whole blocks.
pub fn decode(bytes: &[u8]) -> Option<Vec<(u32, u32)>> {
    if !bytes.len().is_multiple_of(BLOCK) {
        return None;
    }
    bytes
        .chunks(BLOCK)
        .map(|b| {
            let w = &b[..8];
            if !b.chunks(8).all(|c| c == w) {
                return None;
            }
            let id = u32::from_le_bytes(w[..4].try_into().ok()?);
            let ver = u32::from_le_bytes(w[4..].try_into().ok()?);
            Some((id, ver))
        })
        .collect()
}

/// One random step on a space of blocks mirrored by `state`: an insert
/// while it holds fewer than `low` blocks (and sometimes below `high`),
/// else a removal with probability `remove`, else an overwrite.
pub fn random_step(
    space: &flexspace::FlexSpace,
    rng: &mut rand::rngs::StdRng,
    state: &mut Vec<(u32, u32)>,
    next_id: &mut u32,
    (low, high, remove): (usize, usize, f64),
) -> flexspace::Result<()> {
    use rand::Rng;
    let n = state.len();
    if n < low || (n < high && rng.gen_bool(0.2)) {
        let i = rng.gen_range(0..=n);
        state.insert(i, (*next_id, 0));
        *next_id += 1;
        space.insert((i * BLOCK) as u64, &block(*next_id - 1, 0))
    } else if rng.gen_bool(remove) {
        let i = rng.gen_range(0..n);
        state.remove(i);
        space.collapse((i * BLOCK) as u64, BLOCK as u64)
    } else {
        let i = rng.gen_range(0..n);
        state[i].1 += 1;
        space.write((i * BLOCK) as u64, &block(state[i].0, state[i].1))
    }
}
