//! A full consistency check (`Db::check`) and its report.
//!
//! The check walks the published view (the sparse index and the space as
//! of the last commit, `read::view`) interval by interval (`walk`),
//! holding no lock of the store: writers, the committer and readers go on
//! meanwhile. It verifies every record's checksum, strictly increasing
//! keys, that every interval starts on a pair boundary with its first key
//! at or above its anchor and its last below the next interval's anchor,
//! that known counts match the pairs, that the pair count matches (when
//! no commit ran since the view), and the space's own metadata
//! (`FlexSpace::check`). A record that fails its checksum or length check
//! ends its interval's walk, not the check: it is reported as a
//! [`DamagedRange`] with the keys that may be lost, and the walk goes on
//! at the next interval.
//!
//! Invariants: `problems` is empty exactly when every check passed; every
//! damaged stretch is in `damaged` (and, up to `MAX_PROBLEMS` lines, in
//! `problems`), however many there are.

use crate::error::space_err;
use crate::error::Result;
use crate::index::sparse::UNKNOWN_COUNT;
use crate::recovery::walk::{Damage, End, Walk};
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
    let mut walk = Walk::new(&view);
    let len = view.space.len();
    if view.sparse.total() != len {
        problems.push(format!(
            "sparse index: its intervals cover {} bytes, the space holds {len}",
            view.sparse.total()
        ));
    }
    report.intervals = walk.len() as u64;
    let mut damaged_any = false;
    while let Some(step) = walk.next_step() {
        let (i, iv) = (step.index, step.interval);
        let damage = match step.end {
            End::Whole => None,
            End::Damaged { why, range } => Some((why, range)),
        };
        match damage {
            Some((Damage::PastSpace { end, len }, _)) => {
                problems.push(format!(
                    "sparse index: interval {i} ends at {end}, past the end of the space ({len})"
                ));
                break;
            }
            Some((Damage::Unreadable(e), range)) => {
                problems.push(format!("data: interval {i} at offset {}: {e}", iv.offset));
                report.damaged.push(range);
                damaged_any = true;
                continue;
            }
            _ => {}
        }
        if step.after.is_some_and(|k| k >= iv.anchor.as_slice()) {
            problems.push(format!(
                "sparse index: anchor of interval {i} is not above the previous pair"
            ));
        }
        let mut prev = step.after;
        for p in &step.pairs {
            let at = p.offset;
            if p.key < iv.anchor.as_slice() {
                problems.push(format!(
                    "sparse index: the pair at offset {at} lies below its interval's anchor"
                ));
            }
            if step.next_anchor.is_some_and(|b| p.key >= b) {
                problems.push(format!(
                    "sparse index: the pair at offset {at} lies at or above the next interval's anchor"
                ));
            }
            if prev.is_some_and(|k| k >= p.key) {
                problems.push(format!("data: the pair at offset {at} is out of key order"));
            }
            prev = Some(p.key);
        }
        report.pairs += step.pairs.len() as u64;
        match damage {
            None => {
                let pairs = step.pairs.len() as u64;
                if iv.count != UNKNOWN_COUNT && u64::from(iv.count) != pairs {
                    problems.push(format!(
                        "sparse index: interval {i} counts {} pairs, the space holds {pairs}",
                        iv.count
                    ));
                }
            }
            Some((Damage::RunsPast, range)) => problems.push(format!(
                "data: the pair at offset {} runs past the end of interval {i}",
                range.offset
            )),
            Some((_, range)) => {
                problems.push(range.to_string());
                report.damaged.push(range);
                damaged_any = true;
            }
        }
        report.bytes = iv.offset + u64::from(iv.size);
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
