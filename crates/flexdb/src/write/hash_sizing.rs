//! How many slots a MemTable's hash table gets, so that it rarely grows
//! while writers wait.
//!
//! Growing the table rehashes every key under the writer lock, one cache
//! miss per key (the hash is read from the entry): the late doublings of a
//! big table held the lock for 50–160 ms in a load of 3 M pairs with
//! 128 MiB MemTables (docs/DESIGN.md, "Write path", has the trace). So a
//! table is sized for a whole MemTable early: from the keys the previous
//! table held, when there was one (rotation), and otherwise, at its first
//! growth past `1 / PROJECT_AT` of the MemTable's bytes, for the keys it
//! will hold when full at the rate it has gained them so far.
//!
//! Invariants: every size is a power of two of at least `INITIAL_SLOTS`;
//! a grown size is at least twice the old one (a table holds at most half
//! its slots in keys, which the probe relies on); a projection never asks
//! for more than `MAX_PROJECTED_SLOTS`.

/// Slots of a table made with no hint (grows by doubling from there).
pub(crate) const INITIAL_SLOTS: usize = 1 << 10;
/// The most slots a projection or a hint asks for (2 GiB of slots):
/// beyond it a table doubles as before.
const MAX_PROJECTED_SLOTS: usize = 1 << 28;
/// A table projects its final key count once it holds this fraction of
/// its MemTable's bytes (earlier, the rate of new keys says little).
const PROJECT_AT: usize = 32;

/// Slots for a table expected to hold `keys` keys: a quarter more for
/// margin, twice that (half full at most), to a power of two.
pub(crate) fn slots_for(keys: usize) -> usize {
    keys.saturating_add(keys / 4)
        .saturating_mul(2)
        .checked_next_power_of_two()
        .unwrap_or(MAX_PROJECTED_SLOTS)
        .clamp(INITIAL_SLOTS, MAX_PROJECTED_SLOTS)
}

/// The size a table of `slots` slots grows to when `keys` keys fill half
/// of it, its MemTable holding `bytes` of the `expected` bytes it is
/// frozen at (`expected` 0: unknown, the table doubles).
pub(crate) fn grown_slots(slots: usize, keys: usize, bytes: usize, expected: usize) -> usize {
    let doubled = slots.saturating_mul(2);
    projected_slots(keys, bytes, expected).map_or(doubled, |p| doubled.max(p))
}

/// The slots a table holding `keys` keys in `bytes` of the `expected`
/// bytes it is frozen at needs when full, once it holds `1 / PROJECT_AT`
/// of them (`None` before, or when `expected` is 0: unknown).
pub(crate) fn projected_slots(keys: usize, bytes: usize, expected: usize) -> Option<usize> {
    if expected == 0 || bytes == 0 || bytes < expected / PROJECT_AT {
        return None;
    }
    let projected = (keys as u128 * expected as u128 / bytes as u128) as usize;
    Some(slots_for(projected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_gives_room_for_its_keys_at_half_load() {
        assert_eq!(slots_for(0), INITIAL_SLOTS);
        assert_eq!(slots_for(100), INITIAL_SLOTS);
        for keys in [1_000usize, 65_537, 3_000_000] {
            let s = slots_for(keys);
            assert!(s.is_power_of_two());
            assert!(s >= 2 * keys + keys / 2, "{keys} -> {s}");
            assert!(s <= 8 * keys, "{keys} -> {s}");
        }
        assert_eq!(slots_for(usize::MAX), MAX_PROJECTED_SLOTS);
    }

    #[test]
    fn an_unknown_or_young_table_doubles() {
        assert_eq!(grown_slots(1024, 513, 100_000, 0), 2048);
        // 1/64 of a 512 MiB MemTable: too early to project.
        assert_eq!(grown_slots(1024, 513, 8 << 20, 512 << 20), 2048);
    }

    #[test]
    fn a_table_past_its_projection_point_grows_once_to_its_final_size() {
        let expected = 512 << 20;
        // 1/16 of the bytes in 131,073 keys: about 2.1 M keys when full.
        let s = grown_slots(1 << 18, (1 << 17) + 1, expected / 16, expected);
        assert_eq!(s, 1 << 23);
        // At that size the table never grows again before it is full.
        let final_keys = ((1usize << 17) + 1) * 16;
        assert!(final_keys * 2 <= s);
        // A projection below a doubling (a table past its bytes) doubles.
        assert_eq!(
            grown_slots(1 << 20, 1 << 19, expected * 2, expected),
            1 << 21
        );
    }
}
