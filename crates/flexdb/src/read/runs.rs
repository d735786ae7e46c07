//! Pairs of the space an iterator lends by position, without a buffered
//! item per pair.
//!
//! When a forward refill finds the space to be the only source of its
//! chunk (no MemTable nor transaction write lies there, no range delete of
//! a newer source covers it, no pair may have expired), the chunk is kept
//! as runs of positions in the decoded intervals the iterator holds: pair
//! `next..end` of held interval `d`, then the next run. `Iter::next_ref`
//! lends straight from there; everything else first turns the runs back
//! into buffered items (`Iter::spill`). The back does the same going down:
//! its runs are taken from their ends.
//!
//! Invariants: every run in `list[at..]` is non-empty (`next < end`); the
//! pairs come out in the order of the end that holds them (ascending for
//! the front, descending for the back).

use crate::index::interval::IntervalData;
use std::sync::Arc;

/// Pairs `next..end` of held interval `d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub d: u32,
    pub next: u32,
    pub end: u32,
}

/// The runs of one refill, consumed in order: each run from its start,
/// or from its end when `reverse`.
#[derive(Default)]
pub(crate) struct Runs {
    list: Vec<Run>,
    at: usize,
    reverse: bool,
}

impl Runs {
    /// No runs, to be taken from their ends when `reverse`.
    pub fn new(reverse: bool) -> Runs {
        Runs {
            reverse,
            ..Runs::default()
        }
    }

    /// Appends pairs `from..end` of held interval `d` (nothing when the
    /// run is empty).
    pub fn push(&mut self, d: u32, from: usize, end: usize) {
        if from < end {
            self.list.push(Run {
                d,
                next: from as u32,
                end: end as u32,
            });
        }
    }

    /// Takes the next pair: `(d, i)`.
    #[inline]
    pub fn pop(&mut self) -> Option<(u32, u32)> {
        let r = self.list.get_mut(self.at)?;
        let i = if self.reverse {
            r.end -= 1;
            r.end
        } else {
            r.next += 1;
            r.next - 1
        };
        if r.next == r.end {
            self.at += 1;
        }
        Some((r.d, i))
    }

    /// Whether no pair is left.
    pub fn is_empty(&self) -> bool {
        self.at == self.list.len()
    }

    /// Drops every pair, keeping the allocation.
    pub fn clear(&mut self) {
        self.list.clear();
        self.at = 0;
    }

    /// The pairs left, in order, as `(d, i)`; leaves none.
    pub fn drain(&mut self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let at = std::mem::replace(&mut self.at, 0);
        let reverse = self.reverse;
        self.list.drain(..).skip(at).flat_map(move |r| {
            (0..r.end - r.next).map(move |k| match reverse {
                true => (r.d, r.end - 1 - k),
                false => (r.d, r.next + k),
            })
        })
    }

    /// First and last `(d, i)` left, in order.
    pub fn ends(&self) -> Option<((u32, u32), (u32, u32))> {
        let (first, last) = (self.list.get(self.at)?, self.list.last()?);
        Some(if self.reverse {
            ((first.d, first.end - 1), (last.d, last.next))
        } else {
            ((first.d, first.next), (last.d, last.end - 1))
        })
    }

    /// Whether some interval the runs left lie in may hold a deadline.
    pub fn any_expiring(&self, intervals: &[Arc<IntervalData>]) -> bool {
        self.list[self.at..]
            .iter()
            .any(|r| intervals[r.d as usize].expiring())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_every_pair_in_order_and_drains_the_rest() {
        let mut r = Runs::default();
        r.push(0, 3, 5);
        r.push(1, 2, 2); // empty: skipped
        r.push(2, 0, 3);
        assert_eq!(r.ends(), Some(((0, 3), (2, 2))));
        assert_eq!(r.pop(), Some((0, 3)));
        assert_eq!(r.pop(), Some((0, 4)));
        assert_eq!(r.ends(), Some(((2, 0), (2, 2))));
        assert_eq!(r.pop(), Some((2, 0)));
        let rest: Vec<_> = r.drain().collect();
        assert_eq!(rest, [(2, 1), (2, 2)]);
        assert!(r.is_empty());
        assert_eq!(r.pop(), None);
        assert_eq!(r.ends(), None);
        r.push(4, 0, 1);
        assert_eq!(r.pop(), Some((4, 0)));
        assert!(r.is_empty());
        r.push(5, 0, 2);
        r.clear();
        assert!(r.is_empty());
        assert_eq!(r.pop(), None);
    }

    #[test]
    fn reverse_runs_are_taken_from_their_ends() {
        let mut r = Runs::new(true);
        r.push(0, 3, 6);
        r.push(1, 1, 3);
        assert_eq!(r.ends(), Some(((0, 5), (1, 1))));
        assert_eq!(r.pop(), Some((0, 5)));
        assert_eq!(r.pop(), Some((0, 4)));
        assert_eq!(r.pop(), Some((0, 3)));
        assert_eq!(r.ends(), Some(((1, 2), (1, 1))));
        assert_eq!(r.pop(), Some((1, 2)));
        let rest: Vec<_> = r.drain().collect();
        assert_eq!(rest, [(1, 1)]);
        assert!(r.is_empty());
        r.push(2, 0, 3);
        assert_eq!(r.pop(), Some((2, 2)));
        let rest: Vec<_> = r.drain().collect();
        assert_eq!(rest, [(2, 1), (2, 0)]);
    }
}
