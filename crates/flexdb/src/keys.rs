//! A list of byte strings stored back to back in one buffer: the anchors
//! and pivots of the sparse index's nodes. One allocation per node instead
//! of one per key, and a binary search touches consecutive memory.
//!
//! Invariant: key `i` is `bytes[ends[i - 1]..ends[i]]` (`ends[-1]` = 0) and
//! `ends` never decreases.

/// Keys stored contiguously.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Keys {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl Keys {
    /// No keys.
    pub fn new() -> Keys {
        Keys::default()
    }

    /// Number of keys.
    #[inline]
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    #[inline]
    fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.ends[i - 1] as usize
        }
    }

    /// Key `i`.
    #[inline]
    pub fn get(&self, i: usize) -> &[u8] {
        &self.bytes[self.start(i)..self.ends[i] as usize]
    }

    /// Appends a key.
    pub fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len() as u32);
    }

    /// Inserts `keys` before key `at`.
    pub fn insert_many<'a>(&mut self, at: usize, keys: impl IntoIterator<Item = &'a [u8]>) {
        let from = self.start(at);
        let tail = self.bytes.split_off(from);
        let mut new_ends = Vec::new();
        for k in keys {
            self.bytes.extend_from_slice(k);
            new_ends.push(self.bytes.len() as u32);
        }
        let added = (self.bytes.len() - from) as u32;
        self.bytes.extend_from_slice(&tail);
        for e in &mut self.ends[at..] {
            *e += added;
        }
        self.ends.splice(at..at, new_ends);
    }

    /// Inserts one key before key `at`.
    pub fn insert(&mut self, at: usize, key: &[u8]) {
        self.insert_many(at, [key]);
    }

    /// Removes key `at`.
    pub fn remove(&mut self, at: usize) {
        let (start, end) = (self.start(at), self.ends[at] as usize);
        self.bytes.drain(start..end);
        self.ends.remove(at);
        let removed = (end - start) as u32;
        for e in &mut self.ends[at..] {
            *e -= removed;
        }
    }

    /// Replaces key `at`.
    pub fn set(&mut self, at: usize, key: &[u8]) {
        self.remove(at);
        self.insert(at, key);
    }

    /// Moves keys `from..` into a new list.
    pub fn split_off(&mut self, from: usize) -> Keys {
        let base = self.start(from) as u32;
        let bytes = self.bytes.split_off(base as usize);
        let ends = self.ends.split_off(from).iter().map(|e| e - base).collect();
        self.bytes.shrink_to_fit();
        Keys { bytes, ends }
    }

    /// Bytes of memory held.
    pub fn memory(&self) -> usize {
        self.bytes.capacity() + self.ends.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_match_a_vec_of_vecs() {
        let mut k = Keys::new();
        let mut m: Vec<Vec<u8>> = Vec::new();
        let ops: &[(&str, usize, &[u8])] = &[
            ("push", 0, b"bb"),
            ("push", 0, b""),
            ("insert", 0, b"a"),
            ("insert", 3, b"zzz"),
            ("set", 1, b"bbbb"),
            ("remove", 0, b""),
            ("insert", 1, b"c"),
        ];
        for (op, at, key) in ops {
            match *op {
                "push" => {
                    k.push(key);
                    m.push(key.to_vec());
                }
                "insert" => {
                    k.insert(*at, key);
                    m.insert(*at, key.to_vec());
                }
                "set" => {
                    k.set(*at, key);
                    m[*at] = key.to_vec();
                }
                _ => {
                    k.remove(*at);
                    m.remove(*at);
                }
            }
            assert_eq!(k.len(), m.len());
            for (i, want) in m.iter().enumerate() {
                assert_eq!(k.get(i), &want[..]);
            }
        }
        let tail = k.split_off(2);
        assert_eq!(tail.len(), m.len() - 2);
        assert_eq!(tail.get(0), &m[2][..]);
        assert_eq!(k.len(), 2);
        k.insert_many(1, [&b"x"[..], b"y"]);
        assert_eq!(k.get(1), b"x");
        assert_eq!(k.get(2), b"y");
        assert_eq!(k.get(3), &m[1][..]);
        assert!(k.memory() > 0);
    }
}
