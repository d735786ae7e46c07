//! The newest version of every key across several frozen MemTables, in key
//! order: what the committer merges into the space when it commits more
//! than one MemTable at once.
//!
//! Invariants: the tables are given oldest first, and each one's stream
//! (`MemTable::newest`) yields its keys in strictly increasing order; the
//! merged stream then yields every key of any table once, in strictly
//! increasing order, with the version of the newest table that holds it
//! (a deletion included: it must still remove the pair from the space).

use std::iter::Peekable;

use crate::write::memtable::EntryRef;

/// Merges per-table streams of newest versions (oldest table first).
pub(crate) struct NewestOf<'m, I: Iterator<Item = EntryRef<'m>>> {
    streams: Vec<Peekable<I>>,
}

impl<'m, I: Iterator<Item = EntryRef<'m>>> NewestOf<'m, I> {
    /// `streams`: one per table, oldest table first.
    pub fn new(streams: impl IntoIterator<Item = I>) -> Self {
        NewestOf {
            streams: streams.into_iter().map(Iterator::peekable).collect(),
        }
    }
}

impl<'m, I: Iterator<Item = EntryRef<'m>>> Iterator for NewestOf<'m, I> {
    type Item = EntryRef<'m>;

    fn next(&mut self) -> Option<EntryRef<'m>> {
        if let [only] = &mut self.streams[..] {
            return only.next();
        }
        // The smallest key at the head of any stream.
        let key: &'m [u8] = self
            .streams
            .iter_mut()
            .filter_map(|s| s.peek().map(|e| e.key))
            .min()?;
        // Every stream holding it moves past it; the newest one's version
        // (the last stream that holds it) is the one returned.
        let mut newest = None;
        for s in &mut self.streams {
            if let Some(e) = s.next_if(|e| e.key == key) {
                newest = Some(e);
            }
        }
        newest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write::memtable::MemTable;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        #[test]
        fn the_newest_table_wins_and_keys_come_once_in_order(
            tables in proptest::collection::vec(
                proptest::collection::vec(
                    (proptest::collection::vec(0u8..8, 1..3),
                     proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3))),
                    0..24),
                1..4),
        ) {
            let mut seq = 0u64;
            let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            let mems: Vec<MemTable> = tables
                .iter()
                .map(|writes| {
                    let m = MemTable::new();
                    for (k, v) in writes {
                        seq += 1;
                        m.insert(k, seq, v.as_deref());
                        model.insert(k.clone(), v.clone());
                    }
                    m
                })
                .collect();
            let merged: Vec<(Vec<u8>, Option<Vec<u8>>)> =
                NewestOf::new(mems.iter().map(MemTable::newest))
                    .map(|e| (e.key.to_vec(), e.value.map(<[u8]>::to_vec)))
                    .collect();
            let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = model.into_iter().collect();
            prop_assert_eq!(merged, want);
        }
    }
}
