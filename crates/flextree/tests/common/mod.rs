//! A naive model of the extent index: a vector of extents in logical order.
//!
//! Every operation is written the obvious O(N) way; the tree must agree with
//! it on the byte-to-address mapping and on tags.

#![allow(dead_code)]

use flextree::{FlexTree, Piece, MAX_SPACE};

/// One model extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MExt {
    pub len: u64,
    pub addr: Option<u64>,
    pub tag: u16,
}

#[derive(Clone, Debug, Default)]
pub struct Model {
    pub ext: Vec<MExt>,
}

impl Model {
    pub fn len(&self) -> u64 {
        self.ext.iter().map(|e| e.len).sum()
    }

    /// Splits so that an extent starts at `off` (`off <= len`); returns its
    /// index (`ext.len()` at the end).
    pub fn split_at(&mut self, off: u64) -> usize {
        let mut start = 0;
        for i in 0..self.ext.len() {
            let e = self.ext[i];
            if start == off {
                return i;
            }
            if off < start + e.len {
                let d = off - start;
                self.ext[i].len = d;
                self.ext.insert(
                    i + 1,
                    MExt {
                        len: e.len - d,
                        addr: e.addr.map(|a| a + d),
                        tag: 0,
                    },
                );
                return i + 1;
            }
            start += e.len;
        }
        self.ext.len()
    }

    pub fn insert(&mut self, off: u64, len: u64, addr: Option<u64>) {
        let i = self.split_at(off);
        self.ext.insert(i, MExt { len, addr, tag: 0 });
    }

    pub fn collapse(&mut self, off: u64, len: u64) {
        let i = self.split_at(off);
        let j = self.split_at(off + len);
        self.ext.drain(i..j);
    }

    pub fn remap(&mut self, off: u64, len: u64, addr: u64) {
        let i = self.split_at(off);
        let j = self.split_at(off + len);
        let mut at = addr;
        for e in &mut self.ext[i..j] {
            e.addr = Some(at);
            at += e.len;
        }
    }

    /// The range becomes one extent with the tag of the extent that
    /// started at `off` (0 if `off` was inside an extent).
    pub fn remap_merged(&mut self, off: u64, len: u64, addr: u64) {
        let i = self.split_at(off);
        let j = self.split_at(off + len);
        let tag = self.ext[i].tag;
        self.ext.splice(
            i..j,
            [MExt {
                len,
                addr: Some(addr),
                tag,
            }],
        );
    }

    pub fn set_tag(&mut self, off: u64, tag: u16) {
        if tag == 0 && !self.starts().any(|(s, _)| s == off) {
            return;
        }
        let i = self.split_at(off);
        self.ext[i].tag = tag;
    }

    pub fn get_tag(&self, off: u64) -> u16 {
        self.starts()
            .find(|&(s, _)| s == off)
            .map_or(0, |(_, e)| e.tag)
    }

    pub fn lookup(&self, off: u64) -> Option<u64> {
        let (s, e) = self
            .starts()
            .find(|&(s, e)| off < s + e.len)
            .expect("offset inside the space");
        e.addr.map(|a| a + (off - s))
    }

    /// (start, extent) pairs.
    pub fn starts(&self) -> impl Iterator<Item = (u64, MExt)> + '_ {
        let mut start = 0;
        self.ext.iter().map(move |&e| {
            let s = start;
            start += e.len;
            (s, e)
        })
    }

    /// Non-zero tags by offset.
    pub fn tags(&self) -> Vec<(u64, u16)> {
        self.starts()
            .filter(|(_, e)| e.tag != 0)
            .map(|(s, e)| (s, e.tag))
            .collect()
    }

    /// The mapping of `off..off + len` as maximal contiguous pieces.
    pub fn pieces(&self, off: u64, len: u64) -> Vec<Piece> {
        let end = off + len;
        let raw = self
            .starts()
            .filter(|&(s, e)| s + e.len > off && s < end)
            .map(|(s, e)| {
                let from = s.max(off);
                let to = (s + e.len).min(end);
                Piece {
                    addr: e.addr.map(|a| a + (from - s)),
                    len: to - from,
                }
            });
        coalesce(raw)
    }

    /// Whether growing by `len` stays within the largest space.
    pub fn fits(&self, len: u64) -> bool {
        self.len().checked_add(len).is_some_and(|t| t <= MAX_SPACE)
    }
}

/// Merges adjacent pieces that continue each other.
pub fn coalesce(pieces: impl IntoIterator<Item = Piece>) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    for p in pieces {
        if let Some(last) = out.last_mut() {
            let continues = match (last.addr, p.addr) {
                (None, None) => true,
                (Some(a), Some(b)) => a + last.len == b,
                _ => false,
            };
            if continues {
                last.len += p.len;
                continue;
            }
        }
        out.push(p);
    }
    out
}

/// Asserts that `tree` and `model` agree on everything observable.
pub fn assert_same(tree: &FlexTree, model: &Model) {
    let total = model.len();
    assert_eq!(tree.len(), total, "length");
    let exts: Vec<_> = tree.extents_from(0).unwrap().collect();
    assert_eq!(exts.len() as u64, tree.extent_count(), "extent count");
    let mut at = 0;
    for e in &exts {
        assert_eq!(e.offset, at, "extents are contiguous");
        assert!(e.len > 0);
        at += e.len;
    }
    assert_eq!(at, total);
    if total == 0 {
        return;
    }
    let pieces = coalesce(tree.query(0, total).unwrap());
    assert_eq!(pieces, model.pieces(0, total), "mapping");
    let tree_tags: Vec<_> = exts
        .iter()
        .filter(|e| e.tag != 0)
        .map(|e| (e.offset, e.tag))
        .collect();
    assert_eq!(tree_tags, model.tags(), "tags");
}
