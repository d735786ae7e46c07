//! A full consistency check (`Db::check`) and its report.
//!
//! The check reads the published view (the sparse index and the space as
//! of the last commit, `read::view`) interval by interval, holding no lock
//! of the store: writers, the committer and readers go on meanwhile. It
//! verifies every record's checksum, strictly increasing keys, that every
//! interval starts on a pair boundary with its first key at or above its
//! anchor and its last below the next interval's anchor, that known counts
//! match the pairs, that the pair count matches (when no commit ran since
//! the view), and the space's own metadata (`FlexSpace::check`).
//!
//! A record that fails its checksum or length check makes the rest of its
//! interval unreadable (records are found by walking from the interval's
//! start), not the store's: the walk goes on at the next interval, which
//! starts on a pair boundary (a tagged extent). Each such stretch is
//! reported as a [`DamagedRange`]: the keys that may be lost lie strictly
//! between the last key read before it and the next interval's anchor.
//!
//! Invariants: `problems` is empty exactly when every check passed; every
//! damaged stretch is in `damaged` (and, up to `MAX_PROBLEMS` lines, in
//! `problems`), however many there are.

use std::sync::atomic::Ordering;

use crate::codec::{decode_pair, Decoded};
use crate::error::space_err;
use crate::error::Result;
use crate::index::sparse::UNKNOWN_COUNT;
use crate::read::view::PublishedView;
use crate::store::Store;

/// What `Db::check` verified and what it found wrong.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Pairs read and verified in the space.
    pub pairs: u64,
    /// Intervals of the sparse index checked against the space.
    pub intervals: u64,
    /// Bytes of the space read.
    pub bytes: u64,
    /// Pairs still in MemTables (not yet committed; checked for order only).
    pub memtable_pairs: u64,
    /// Every problem found, one sentence each naming the file or structure
    /// (the first `MAX_PROBLEMS`, then a line counting the rest).
    pub problems: Vec<String>,
    /// Every stretch of the data that could not be read, with the keys it
    /// may have held.
    pub damaged: Vec<DamagedRange>,
}

/// A stretch of the space's data that failed its checks: the pairs from
/// `offset` to the end of their interval cannot be read. The keys they
/// held lie strictly above `after` (none: from the first key) and below
/// `before` (none: to the last key).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DamagedRange {
    /// Offset in the space of the first record that failed.
    pub offset: u64,
    /// The last key read intact before it, if any.
    pub after: Option<Vec<u8>>,
    /// The next interval's anchor (every key from there on is above the
    /// damage), if there is a next interval.
    pub before: Option<Vec<u8>>,
    /// The anchor of the interval holding the damage: reads of any key
    /// from here up to `before` fail with `Corrupt` (the interval is read
    /// whole), though the pairs up to `after` can be salvaged.
    pub interval_from: Vec<u8>,
}

impl std::fmt::Display for DamagedRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |k: &Option<Vec<u8>>, none: &str| match k {
            Some(k) => format!("\"{}\"", k.escape_ascii()),
            None => none.to_string(),
        };
        write!(
            f,
            "data: the record at offset {} fails its checksum or length check; keys after {} and before {} may be lost",
            self.offset,
            show(&self.after, "the first key"),
            show(&self.before, "the last key"),
        )
    }
}

impl CheckReport {
    /// Whether every check passed.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Problems reported in full before the rest are only counted.
const MAX_PROBLEMS: usize = 100;

/// The problems found so far: the first `MAX_PROBLEMS` in full.
#[derive(Default)]
struct Problems {
    lines: Vec<String>,
    more: usize,
}

impl Problems {
    fn push(&mut self, p: String) {
        if self.lines.len() < MAX_PROBLEMS {
            self.lines.push(p);
        } else {
            self.more += 1;
        }
    }

    fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    fn finish(mut self) -> Vec<String> {
        if self.more > 0 {
            self.lines
                .push(format!("and {} more problems not listed", self.more));
        }
        self.lines
    }
}

/// Holds a view for the check (`PublishedView::pins`): the committer
/// does not wait for it to be let go of when it retires the view.
pub(super) struct Pinned<'a>(&'a PublishedView);

impl<'a> Pinned<'a> {
    pub(super) fn new(view: &'a PublishedView) -> Self {
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
    pub offset: u64,
    pub anchor: Vec<u8>,
    pub size: u32,
    pub count: u16,
}

/// The intervals of `view`'s sparse index, in key order.
pub(super) fn view_intervals(view: &PublishedView) -> Vec<Interval> {
    let mut intervals = Vec::new();
    view.sparse.for_each(|a, offset, m| {
        intervals.push(Interval {
            offset,
            anchor: a.to_vec(),
            size: m.size,
            count: m.count,
        })
    });
    intervals
}

pub(crate) fn check(shared: &Store) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    let mut problems = Problems::default();
    {
        let m = shared.writes.mems();
        report.memtable_pairs =
            m.active.len() as u64 + m.frozen.iter().map(|f| f.mem.len() as u64).sum::<u64>();
    }
    for p in shared.space.check().map_err(space_err)? {
        problems.push(format!("space: {p}"));
    }
    let view = shared.views.load_full();
    let _pin = Pinned::new(&view);
    let len = view.space.len();
    if view.sparse.total() != len {
        problems.push(format!(
            "sparse index: its intervals cover {} bytes, the space holds {len}",
            view.sparse.total()
        ));
    }
    let intervals = view_intervals(&view);
    report.intervals = intervals.len() as u64;
    let mut last_key: Option<Vec<u8>> = None;
    let mut buf: Vec<u8> = Vec::new();
    let mut damaged_any = false;
    for (i, iv) in intervals.iter().enumerate() {
        let next_anchor = intervals.get(i + 1).map(|n| n.anchor.clone());
        let end = iv.offset + u64::from(iv.size);
        if end > len {
            problems.push(format!(
                "sparse index: interval {i} ends at {end}, past the end of the space ({len})"
            ));
            break;
        }
        buf.resize(iv.size as usize, 0);
        let read = view
            .space
            .plan_read(iv.offset, u64::from(iv.size))
            .and_then(|p| p.read(&mut buf));
        if let Err(e) = read {
            problems.push(format!("data: interval {i} at offset {}: {e}", iv.offset));
            report.damaged.push(DamagedRange {
                offset: iv.offset,
                after: last_key.clone(),
                before: next_anchor,
                interval_from: iv.anchor.clone(),
            });
            damaged_any = true;
            continue;
        }
        if last_key.as_ref().is_some_and(|k| *k >= iv.anchor) {
            problems.push(format!(
                "sparse index: anchor of interval {i} is not above the previous pair"
            ));
        }
        let (mut pos, mut pairs) = (0usize, 0u64);
        while pos < buf.len() {
            let at = iv.offset + pos as u64;
            let (key, rec_len) = match decode_pair(&buf[pos..]) {
                Decoded::Pair { key, len, .. } => (key, len),
                Decoded::Incomplete { .. } => {
                    problems.push(format!(
                        "data: the pair at offset {at} runs past the end of interval {i}"
                    ));
                    break;
                }
                Decoded::Invalid => {
                    let d = DamagedRange {
                        offset: at,
                        after: last_key.clone(),
                        before: next_anchor.clone(),
                        interval_from: iv.anchor.clone(),
                    };
                    problems.push(d.to_string());
                    report.damaged.push(d);
                    damaged_any = true;
                    break;
                }
            };
            if key < iv.anchor.as_slice() {
                problems.push(format!(
                    "sparse index: the pair at offset {at} lies below its interval's anchor"
                ));
            }
            if next_anchor.as_deref().is_some_and(|b| key >= b) {
                problems.push(format!(
                    "sparse index: the pair at offset {at} lies at or above the next interval's anchor"
                ));
            }
            if last_key.as_deref().is_some_and(|k| k >= key) {
                problems.push(format!("data: the pair at offset {at} is out of key order"));
            }
            last_key = Some(key.to_vec());
            report.pairs += 1;
            pairs += 1;
            pos += rec_len;
        }
        if pos == buf.len() && iv.count != UNKNOWN_COUNT && u64::from(iv.count) != pairs {
            problems.push(format!(
                "sparse index: interval {i} counts {} pairs, the space holds {pairs}",
                iv.count
            ));
        }
        report.bytes = end;
    }
    // The pair count of the store, if no group changed the index since
    // the view was published (else it counts pairs the view does not
    // hold); with damage the walk cannot count the pairs.
    {
        let st = shared.index.read();
        if st.version == view.version
            && !damaged_any
            && problems.is_empty()
            && report.pairs != st.pairs
        {
            problems.push(format!(
                "pair count: the store records {}, the space holds {}",
                st.pairs, report.pairs
            ));
        }
    }
    report.problems = problems.finish();
    Ok(report)
}
