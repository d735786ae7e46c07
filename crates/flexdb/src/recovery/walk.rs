//! The walk over a published view's data that `check` and `repair` share:
//! interval by interval in key order, each read whole and decoded into the
//! pairs that verify, with the damage that ended it, if any.
//!
//! The walk pins the view (`PublishedView::pins`) and takes no lock of the
//! store: writers, the committer and readers go on meanwhile, and the view
//! stays as it was published.
//!
//! A record that fails its checksum or length check makes the rest of its
//! interval unreadable (records are found by walking from the interval's
//! start), not the store's: the walk goes on at the next interval, which
//! starts on a pair boundary (a tagged extent). Each such stretch comes
//! with a [`DamagedRange`]: the keys that may be lost lie strictly between
//! the last key read intact before it (in this interval or an earlier one)
//! and the next interval's anchor.
//!
//! Invariants: every interval of the view's sparse index is yielded once,
//! in key order; a step's `pairs` are exactly the records that verify from
//! the interval's start up to its `end`; `after` is the last key of the
//! last pair yielded by an earlier step.

use std::sync::atomic::Ordering;

use crate::codec::{decode_pair, Decoded};
use crate::read::view::PublishedView;
use crate::recovery::check::DamagedRange;

/// Holds a view for the walk (`PublishedView::pins`): the committer
/// does not wait for it to be let go of when it retires the view.
struct Pinned<'a>(&'a PublishedView);

impl<'a> Pinned<'a> {
    fn new(view: &'a PublishedView) -> Self {
        view.pins.fetch_add(1, Ordering::AcqRel);
        Pinned(view)
    }
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        self.0.pins.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One interval of the view, as the sparse index describes it.
pub(super) struct Interval {
    /// Where the interval starts in the space.
    pub offset: u64,
    /// The interval's anchor: every key in it is at or above this one.
    pub anchor: Vec<u8>,
    /// The interval's bytes.
    pub size: u32,
    /// The pairs the index counts in it (`UNKNOWN_COUNT`: not counted).
    pub count: u16,
}

/// A pair that verified, where it lies.
pub(super) struct Pair<'w> {
    /// Offset of its record in the space.
    pub offset: u64,
    /// The key.
    pub key: &'w [u8],
    /// The value.
    pub value: &'w [u8],
    /// Its deadline (0: none).
    pub expires: u64,
}

/// Why an interval's pairs stop short of its end.
pub(super) enum Damage {
    /// The record at the damage's offset fails its checksum or length
    /// check.
    Invalid,
    /// The record at the damage's offset claims more bytes than the
    /// interval has left.
    RunsPast,
    /// The interval could not be read at all.
    Unreadable(flexspace::Error),
    /// The interval ends at `end`, past the end of the space (`len`): it
    /// was not read.
    PastSpace {
        /// Where the interval ends.
        end: u64,
        /// The space's length.
        len: u64,
    },
}

/// How an interval's walk ended.
pub(super) enum End {
    /// The pairs fill the interval exactly.
    Whole,
    /// The pairs stop at damage; the keys in `range` may be lost.
    Damaged {
        /// What went wrong.
        why: Damage,
        /// Where, and the keys it may have held.
        range: DamagedRange,
    },
}

/// One interval, read and decoded.
pub(super) struct Step<'w> {
    /// The interval's position in key order.
    pub index: usize,
    /// The interval.
    pub interval: &'w Interval,
    /// The next interval's anchor, if there is a next interval.
    pub next_anchor: Option<&'w [u8]>,
    /// The last key read intact before this interval, if any.
    pub after: Option<&'w [u8]>,
    /// The pairs that verified, in the order they lie.
    pub pairs: Vec<Pair<'w>>,
    /// How the interval ended.
    pub end: End,
}

/// A walk over a pinned view's intervals (see the module docs).
pub(super) struct Walk<'v> {
    view: &'v PublishedView,
    _pin: Pinned<'v>,
    intervals: Vec<Interval>,
    next: usize,
    buf: Vec<u8>,
    /// The last key read intact before the interval last yielded.
    after: Option<Vec<u8>>,
    /// The last key of the interval last yielded, if it had a pair.
    pending: Option<Vec<u8>>,
}

impl<'v> Walk<'v> {
    /// Pins `view` and lists its intervals.
    pub(super) fn new(view: &'v PublishedView) -> Self {
        let pin = Pinned::new(view);
        let mut intervals = Vec::new();
        view.sparse.for_each(|a, offset, m| {
            intervals.push(Interval {
                offset,
                anchor: a.to_vec(),
                size: m.size,
                count: m.count,
            })
        });
        Walk {
            view,
            _pin: pin,
            intervals,
            next: 0,
            buf: Vec::new(),
            after: None,
            pending: None,
        }
    }

    /// The intervals in all.
    pub(super) fn len(&self) -> usize {
        self.intervals.len()
    }

    /// The next interval, read and decoded; `None` after the last.
    pub(super) fn next_step(&mut self) -> Option<Step<'_>> {
        let index = self.next;
        let iv = self.intervals.get(index)?;
        self.next += 1;
        if let Some(k) = self.pending.take() {
            self.after = Some(k);
        }
        let next_anchor = self.intervals.get(index + 1).map(|n| n.anchor.as_slice());
        let damaged = |why, offset, after: Option<&[u8]>| End::Damaged {
            why,
            range: DamagedRange {
                offset,
                after: after.map(<[u8]>::to_vec),
                before: next_anchor.map(<[u8]>::to_vec),
                interval_from: iv.anchor.clone(),
            },
        };
        let step = |pairs, end| Step {
            index,
            interval: iv,
            next_anchor,
            after: self.after.as_deref(),
            pairs,
            end,
        };
        let len = self.view.space.len();
        let end = iv.offset + u64::from(iv.size);
        let unread = if end > len {
            Some(Damage::PastSpace { end, len })
        } else {
            self.buf.resize(iv.size as usize, 0);
            let read = self
                .view
                .space
                .plan_read(iv.offset, u64::from(iv.size))
                .and_then(|p| p.read(&mut self.buf));
            read.err().map(Damage::Unreadable)
        };
        if let Some(why) = unread {
            let ended = damaged(why, iv.offset, self.after.as_deref());
            return Some(step(Vec::new(), ended));
        }
        let mut pairs = Vec::new();
        let mut pos = 0;
        let mut stop = None;
        while pos < self.buf.len() {
            let offset = iv.offset + pos as u64;
            match decode_pair(&self.buf[pos..]) {
                Decoded::Pair {
                    key,
                    value,
                    expires,
                    len,
                } => {
                    pairs.push(Pair {
                        offset,
                        key,
                        value,
                        expires,
                    });
                    pos += len;
                }
                Decoded::Incomplete { .. } => {
                    stop = Some((Damage::RunsPast, offset));
                    break;
                }
                Decoded::Invalid => {
                    stop = Some((Damage::Invalid, offset));
                    break;
                }
            }
        }
        let last: Option<&[u8]> = pairs.last().map(|p: &Pair<'_>| p.key);
        self.pending = last.map(<[u8]>::to_vec);
        let end = match stop {
            None => End::Whole,
            Some((why, offset)) => damaged(why, offset, last.or(self.after.as_deref())),
        };
        Some(step(pairs, end))
    }
}
