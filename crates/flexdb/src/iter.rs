//! Iterators over key ranges.
//!
//! (Skeleton: the bodies land in the following commits.)

use crate::error::Result;

/// A pair yielded by an iterator: `(key, value)`.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// An iterator over the pairs of a key range, from [`crate::Db::range`].
/// Forward with `next`, backward with `next_back` (`.rev()`); the two ends
/// never cross. Each key is seen at a state no older than the iterator's
/// creation.
pub struct Iter<'a> {
    _db: std::marker::PhantomData<&'a ()>,
}

impl Iter<'_> {
    /// Moves the front of the iterator to the first key `>= key` (within the
    /// range); the next `next()` returns it.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        let _ = key;
        todo!()
    }

    /// Moves the back of the iterator to the last key `<= key` (within the
    /// range); the next `next_back()` returns it.
    pub fn seek_back(&mut self, key: impl AsRef<[u8]>) {
        let _ = key;
        todo!()
    }
}

impl Iterator for Iter<'_> {
    type Item = Result<KeyValue>;
    fn next(&mut self) -> Option<Self::Item> {
        todo!()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        todo!()
    }
}
