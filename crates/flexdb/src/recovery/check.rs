//! A full consistency check (`Db::check`) and its report.
//!
//! The check reads the whole space pair by pair under the sparse index's
//! shared lock (the committer waits; readers do not) and verifies: every
//! record's checksum, strictly increasing keys, that every interval of the
//! sparse index starts on a pair boundary with an anchor between the
//! previous interval's last key and its own first key, that interval sizes
//! and known counts match the pairs, that the pair count matches, and the
//! space's own metadata (`FlexSpace::check`).
//!
//! Invariant: `problems` is empty exactly when every check passed.

use crate::codec::{decode_pair, Decoded};
use crate::error::space_err;
use crate::error::Result;
use crate::index::sparse::UNKNOWN_COUNT;
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
    /// Every problem found, one sentence each naming the file or structure.
    pub problems: Vec<String>,
}

impl CheckReport {
    /// Whether every check passed.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Problems reported in full before the rest are only counted.
const MAX_PROBLEMS: usize = 100;

pub(crate) fn check(shared: &Store) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    let mut problems = Vec::new();
    {
        let m = shared.writes.mems();
        report.memtable_pairs =
            m.active.len() as u64 + m.frozen.iter().map(|f| f.mem.len() as u64).sum::<u64>();
    }
    let st = shared.index.read();
    for p in shared.space.check().map_err(space_err)? {
        problems.push(format!("space: {p}"));
    }
    let len = shared.space.len();
    if st.sparse.total() != len {
        problems.push(format!(
            "sparse index: its intervals cover {} bytes, the space holds {len}",
            st.sparse.total()
        ));
    }
    // Interval boundaries, in order.
    let mut intervals: Vec<(u64, Vec<u8>, u32, u16)> = Vec::new();
    st.sparse
        .for_each(|a, off, m| intervals.push((off, a.to_vec(), m.size, m.count)));
    report.intervals = intervals.len() as u64;
    let mut next_interval = 0usize;
    let mut pos = 0u64;
    let mut last_key: Option<Vec<u8>> = None;
    let mut in_interval = 0u64;
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_at = 0u64;
    const READ: usize = 1 << 20;
    while pos < len {
        while next_interval < intervals.len() && intervals[next_interval].0 <= pos {
            let (off, anchor, _, _) = &intervals[next_interval];
            if *off < pos {
                problems.push(format!(
                    "sparse index: interval {next_interval} starts at {off}, inside a pair"
                ));
            }
            close_interval(&intervals, next_interval, in_interval, &mut problems);
            if last_key.as_ref().is_some_and(|k| k >= anchor) {
                problems.push(format!(
                    "sparse index: anchor of interval {next_interval} is not above the previous pair"
                ));
            }
            next_interval += 1;
            in_interval = 0;
        }
        // Make sure the record at `pos` is in the buffer.
        let rel = (pos - buf_at) as usize;
        let decoded = if rel <= buf.len() {
            decode_pair(&buf[rel..])
        } else {
            Decoded::Incomplete { need: 1 }
        };
        let (key, rec_len) = match decoded {
            Decoded::Pair { key, len: l, .. } => (key.to_vec(), l),
            Decoded::Incomplete { need } => {
                let rest = (len - pos) as usize;
                if buf_at == pos && buf.len() >= rest {
                    problems.push(format!(
                        "data: the pair at offset {pos} runs past the end of the space"
                    ));
                    break;
                }
                buf.resize(need.max(READ).min(rest), 0);
                let n = shared.space.read(pos, &mut buf).map_err(space_err)?;
                buf.truncate(n);
                buf_at = pos;
                continue;
            }
            Decoded::Invalid => {
                problems.push(format!(
                    "data: the record at offset {pos} fails its checksum or length check"
                ));
                break;
            }
        };
        if next_interval > 0 {
            let anchor = &intervals[next_interval - 1].1;
            if &key < anchor {
                problems.push(format!(
                    "sparse index: the pair at offset {pos} lies below its interval's anchor"
                ));
            }
        }
        if last_key.as_ref().is_some_and(|k| *k >= key) {
            problems.push(format!(
                "data: the pair at offset {pos} is out of key order"
            ));
        }
        last_key = Some(key);
        report.pairs += 1;
        in_interval += 1;
        pos += rec_len as u64;
        if problems.len() > MAX_PROBLEMS {
            break;
        }
    }
    report.bytes = pos;
    if next_interval > 0 {
        close_interval(&intervals, next_interval, in_interval, &mut problems);
    }
    if next_interval < intervals.len() && problems.is_empty() {
        // Trailing intervals must be empty.
        for (i, iv) in intervals.iter().enumerate().skip(next_interval) {
            if iv.2 != 0 {
                problems.push(format!(
                    "sparse index: interval {i} lies past the end of the space"
                ));
            }
        }
    }
    if report.pairs != st.pairs && problems.is_empty() {
        problems.push(format!(
            "pair count: the store records {}, the space holds {}",
            st.pairs, report.pairs
        ));
    }
    report.problems = problems;
    Ok(report)
}

/// Checks the count of the interval before `next` (the one just walked).
fn close_interval(
    intervals: &[(u64, Vec<u8>, u32, u16)],
    next: usize,
    pairs: u64,
    problems: &mut Vec<String>,
) {
    if next == 0 {
        return;
    }
    let (_, _, _, count) = intervals[next - 1];
    if count != UNKNOWN_COUNT && u64::from(count) != pairs {
        problems.push(format!(
            "sparse index: interval {} counts {count} pairs, the space holds {pairs}",
            next - 1
        ));
    }
}
