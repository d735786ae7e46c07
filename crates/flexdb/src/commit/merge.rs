//! Merging MemTable writes into one interval: the new content of the
//! interval and the edits that turn the old bytes in the space into the new.
//!
//! Both inputs are sorted by key. The walk copies unchanged pairs and
//! collects every maximal run of changed bytes (new, replaced or removed
//! pairs with no unchanged pair between them) as one [`Edit`], so a burst
//! of adjacent inserts becomes one insert-range of the space.
//!
//! Invariants: applying the edits in order, each at
//! `interval offset + new_start`, to the old bytes gives exactly
//! `data.bytes()` (edits are non-overlapping and listed left to right, and
//! an edit's position in the new layout is where its old bytes started
//! once the earlier edits are applied); a pair whose value and deadline
//! are unchanged is never rewritten; deleting a missing key changes
//! nothing. Given `now`, a pair expired by then (an update's or one the
//! interval holds) is left out, as a deletion would leave it out: no read
//! from `now` on could see it (`expiry`).

use crate::index::interval::{Builder, IntervalData};

/// One write to merge: a key and its new value (`None`: delete it).
#[derive(Clone, Copy, Debug)]
pub struct Update<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The new value, or `None` for a deletion.
    pub value: Option<&'a [u8]>,
    /// The new value's deadline (0: none).
    pub expires: u64,
}

/// One replacement of old bytes by new ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edit {
    /// Where the replacement starts in the new interval (and where the old
    /// bytes start once the earlier edits are applied).
    pub new_start: usize,
    /// End of the new bytes in the new interval.
    pub new_end: usize,
    /// Bytes of the old interval replaced.
    pub old_len: usize,
}

/// The outcome of a merge.
pub struct Merged {
    /// The interval's new content.
    pub data: IntervalData,
    /// The edits, left to right.
    pub edits: Vec<Edit>,
    /// Pairs added minus pairs removed.
    pub pairs_delta: i64,
}

/// Merges `updates` (sorted by key, at most one per key) into `old`,
/// leaving out the pairs expired at `now` (Unix milliseconds; 0: keeps
/// every pair).
pub fn merge(old: &IntervalData, updates: &[Update<'_>], now: u64) -> Merged {
    let expired = |expires: u64| expires != 0 && expires <= now;
    let new_bytes: usize = updates
        .iter()
        .map(|u| {
            u.value
                .map_or(0, |v| crate::codec::pair_len_expiring(u.key, v, u.expires))
        })
        .sum();
    let mut out = Builder::with_capacity(old.len() + updates.len(), old.size() + new_bytes);
    let mut edits = Vec::new();
    let mut pairs_delta = 0i64;
    // An open run of changes: (old start, new start).
    let mut run: Option<(usize, usize)> = None;
    let close =
        |run: &mut Option<(usize, usize)>, old_at: usize, out: &Builder, edits: &mut Vec<Edit>| {
            if let Some((old_start, new_start)) = run.take() {
                let e = Edit {
                    new_start,
                    new_end: out.len_bytes(),
                    old_len: old_at - old_start,
                };
                if e.old_len > 0 || e.new_end > e.new_start {
                    edits.push(e);
                }
            }
        };
    let (mut i, mut j) = (0, 0);
    let n = old.len();
    while i < n || j < updates.len() {
        let old_at = if i < n { old.offset(i) } else { old.size() };
        let order = match (i < n, j < updates.len()) {
            (true, true) => old.key(i).cmp(updates[j].key),
            (true, false) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                // Unchanged pairs end any run; copy all of them up to the
                // next update's key at once.
                let next = match updates.get(j) {
                    Some(u) => old.lower_bound_from(u.key, i + 1),
                    None => n,
                };
                if now != 0 && old.expiring() {
                    // One at a time: the expired ones go (extending a run),
                    // the others end it.
                    for k in i..next {
                        if expired(old.expires(k)) {
                            run.get_or_insert((old.offset(k), out.len_bytes()));
                            pairs_delta -= 1;
                        } else {
                            close(&mut run, old.offset(k), &out, &mut edits);
                            out.push_existing(old, k);
                        }
                    }
                } else {
                    close(&mut run, old_at, &out, &mut edits);
                    out.push_range(old, i..next);
                }
                i = next;
            }
            std::cmp::Ordering::Greater => {
                let Update {
                    key,
                    value,
                    expires,
                } = updates[j];
                if let Some(v) = value.filter(|_| !expired(expires)) {
                    run.get_or_insert((old_at, out.len_bytes()));
                    out.push_pair_expiring(key, v, expires);
                    pairs_delta += 1;
                }
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let Update {
                    key,
                    value,
                    expires,
                } = updates[j];
                match value.filter(|_| !expired(expires)) {
                    Some(v) if old.entry(i).1 == v && old.expires(i) == expires => {
                        close(&mut run, old_at, &out, &mut edits);
                        out.push_existing(old, i);
                    }
                    Some(v) => {
                        run.get_or_insert((old_at, out.len_bytes()));
                        out.push_pair_expiring(key, v, expires);
                    }
                    None => {
                        run.get_or_insert((old_at, out.len_bytes()));
                        pairs_delta -= 1;
                    }
                }
                i += 1;
                j += 1;
            }
        }
    }
    close(&mut run, old.size(), &out, &mut edits);
    Merged {
        data: out.finish(),
        edits,
        pairs_delta,
    }
}

/// How to cut an interval of `count` pairs and `size` bytes that is over a
/// split threshold: the pair indexes where parts 2.. start. Parts aim at
/// three quarters of the thresholds so they have room to grow; a pair
/// larger than a part stays whole.
pub fn split_points(data: &IntervalData, max_pairs: usize, max_bytes: usize) -> Vec<usize> {
    let count = data.len();
    if count < 2 || (count <= max_pairs && data.size() <= max_bytes) {
        return Vec::new();
    }
    let target_pairs = (max_pairs * 3 / 4).max(1);
    let target_bytes = (max_bytes * 3 / 4).max(1);
    let parts = count
        .div_ceil(target_pairs)
        .max(data.size().div_ceil(target_bytes))
        .max(2);
    let per_pairs = count.div_ceil(parts);
    let per_bytes = data.size().div_ceil(parts);
    let mut cuts = Vec::new();
    let mut start = 0usize;
    for i in 1..count {
        let pairs = i - start;
        let bytes = data.offset(i) - data.offset(start);
        let next = data.end(i) - data.offset(start);
        if pairs >= per_pairs || bytes >= per_bytes || next > max_bytes {
            cuts.push(i);
            start = i;
        }
    }
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn interval(pairs: &BTreeMap<Vec<u8>, Vec<u8>>) -> IntervalData {
        let mut b = Builder::new();
        for (k, v) in pairs {
            b.push_pair(k, v);
        }
        b.finish()
    }

    /// Pairs with deadlines (0: none).
    fn interval_expiring(pairs: &BTreeMap<Vec<u8>, (Vec<u8>, u64)>) -> IntervalData {
        let mut b = Builder::new();
        for (k, (v, x)) in pairs {
            b.push_pair_expiring(k, v, *x);
        }
        b.finish()
    }

    /// Deadlines around `NOW`: none, passed, to come.
    const NOW: u64 = 10;
    fn deadline() -> impl Strategy<Value = u64> {
        prop_oneof![Just(0u64), Just(5u64), Just(NOW), Just(15u64)]
    }

    fn apply_edits(old: &[u8], new: &[u8], edits: &[Edit]) -> Vec<u8> {
        let mut bytes = old.to_vec();
        for e in edits {
            bytes.splice(
                e.new_start..e.new_start + e.old_len,
                new[e.new_start..e.new_end].iter().copied(),
            );
        }
        bytes
    }

    proptest! {
        #[test]
        fn edits_turn_old_bytes_into_new(
            old in proptest::collection::btree_map(
                proptest::collection::vec(0u8..6, 1..4),
                proptest::collection::vec(any::<u8>(), 0..6), 0..20),
            ups in proptest::collection::btree_map(
                proptest::collection::vec(0u8..6, 1..4),
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..6)), 0..20),
            old_deadlines in proptest::collection::vec(deadline(), 20),
            up_deadlines in proptest::collection::vec(deadline(), 20),
            now in prop_oneof![Just(0u64), Just(NOW)],
        ) {
            let old: BTreeMap<Vec<u8>, (Vec<u8>, u64)> = old
                .into_iter()
                .zip(old_deadlines)
                .map(|((k, v), x)| (k, (v, x)))
                .collect();
            let data = interval_expiring(&old);
            let updates: Vec<Update<'_>> = ups
                .iter()
                .zip(&up_deadlines)
                .map(|((k, v), &x)| Update { key: k, value: v.as_deref(), expires: x })
                .collect();
            let m = merge(&data, &updates, now);
            let mut model = old.clone();
            for u in &updates {
                match u.value {
                    Some(v) => { model.insert(u.key.to_vec(), (v.to_vec(), u.expires)); }
                    None => { model.remove(u.key); }
                }
            }
            // At `now`, what expired is gone (0: nothing is judged).
            if now != 0 {
                model.retain(|_, (_, x)| *x == 0 || *x > now);
            }
            let want = interval_expiring(&model);
            prop_assert_eq!(m.data.bytes(), want.bytes());
            for i in 0..m.data.len() {
                prop_assert_eq!(m.data.entry(i), want.entry(i));
            }
            prop_assert_eq!(m.pairs_delta, model.len() as i64 - old.len() as i64);
            prop_assert_eq!(apply_edits(data.bytes(), m.data.bytes(), &m.edits), m.data.bytes().to_vec());
            // Edits are separated by unchanged bytes and each changes something.
            for w in m.edits.windows(2) {
                prop_assert!(w[0].new_end < w[1].new_start);
            }
            for e in &m.edits {
                prop_assert!(e.old_len > 0 || e.new_end > e.new_start);
            }
        }
    }

    #[test]
    fn unchanged_values_and_missing_deletes_write_nothing() {
        let mut old = BTreeMap::new();
        old.insert(b"a".to_vec(), b"1".to_vec());
        old.insert(b"b".to_vec(), b"2".to_vec());
        let data = interval(&old);
        let m = merge(
            &data,
            &[
                Update {
                    key: b"a",
                    value: Some(b"1"),
                    expires: 0,
                },
                Update {
                    key: b"c",
                    value: None,
                    expires: 0,
                },
            ],
            0,
        );
        assert!(m.edits.is_empty());
        assert_eq!(m.data, data);
        // Adjacent inserts become one edit.
        let m = merge(
            &data,
            &[
                Update {
                    key: b"aa",
                    value: Some(b"x"),
                    expires: 0,
                },
                Update {
                    key: b"ab",
                    value: Some(b"y"),
                    expires: 0,
                },
            ],
            0,
        );
        assert_eq!(m.edits.len(), 1);
        assert_eq!(m.edits[0].old_len, 0);
        assert_eq!(m.pairs_delta, 2);
    }

    #[test]
    fn split_points_respect_thresholds() {
        let mut old = BTreeMap::new();
        for i in 0..100u32 {
            old.insert(i.to_be_bytes().to_vec(), vec![0u8; 100]);
        }
        let data = interval(&old);
        let cuts = split_points(&data, 16, 16 << 10);
        let mut starts = vec![0];
        starts.extend(&cuts);
        starts.push(100);
        for w in starts.windows(2) {
            let n = w[1] - w[0];
            assert!((1..=16).contains(&n), "part of {n} pairs");
        }
        // One big pair stays whole; small neighbours go to their own parts.
        let mut big = BTreeMap::new();
        big.insert(b"a".to_vec(), vec![1u8; 10]);
        big.insert(b"b".to_vec(), vec![1u8; 40_000]);
        big.insert(b"c".to_vec(), vec![1u8; 10]);
        let data = interval(&big);
        assert_eq!(split_points(&data, 16, 16 << 10), vec![1, 2]);
        // Nothing to split.
        assert!(split_points(&interval(&BTreeMap::new()), 16, 16 << 10).is_empty());
    }
}
