//! Applying range deletes to the space: a commit removes every key its
//! tables' range deletes cover before it merges their point writes (those
//! the range deletes did not override, `commit::commit`).
//!
//! A range is walked interval by interval from its start. An interval
//! wholly inside it (its anchor at or after the range's start and the next
//! anchor at or before its end) is dropped whole: a run of such intervals
//! (up to `RUN_INTERVALS`) becomes one collapse of their bytes in the space
//! and leaves the sparse index under one hold of its write lock, so
//! deleting a million adjacent pairs costs a few collapses, not a million
//! deletions, and leaves nothing behind for reads to skip. An interval the
//! range covers in part (at either end, or the first interval, which never
//! leaves the index) has its covered keys deleted through the ordinary
//! merge (`group::apply_group`).
//!
//! Invariants: as `group`'s: the space and the index change together under
//! the index's write lock, the pair count with them (and into the space's
//! metadata words); a failed collapse changed nothing. Applying a range
//! twice removes nothing the second time, so a commit replayed after a
//! crash (`commit` module docs) may apply it again.

use std::sync::atomic::Ordering;

use super::group::{apply_group, find_interval, Damaged};
use super::merge::Update;
use crate::error::{space_err, Error, Result};
use crate::index::sparse::UNKNOWN_COUNT;
use crate::store::{CommitPoint, Store};
use crate::write::memtable::EntryRef;
use crate::write::range_tombstones::TombstoneList;
use crate::write::FrozenMemTable;

/// The range deletes of a commit's tables, sorted for lookups: applied
/// first (`spans`), and the point versions they override skipped
/// (`hides`) by the committer and its prefetcher alike.
pub(super) struct Overrides(Option<TombstoneList>);

impl Overrides {
    /// Those of `batch`'s tables.
    pub fn of(batch: &[FrozenMemTable]) -> Overrides {
        let all: Vec<_> = batch
            .iter()
            .flat_map(|f| f.mem.range_tombstones(u64::MAX))
            .collect();
        Overrides((!all.is_empty()).then(|| TombstoneList::new(all)))
    }

    /// How many range deletes.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, TombstoneList::len)
    }

    /// Their union as disjoint spans in key order.
    pub fn spans(&self) -> Vec<Span> {
        let all = self.0.iter().flat_map(|l| l.iter());
        disjoint(all.map(|t| (t.start.clone(), t.end.clone())).collect())
    }

    /// Whether a range delete newer than version `e` covers its key.
    #[inline]
    pub fn hides(&self, e: &EntryRef<'_>) -> bool {
        self.0
            .as_ref()
            .is_some_and(|l| l.covering(e.key, u64::MAX).is_some_and(|t| t > e.seq))
    }
}

/// Whole intervals dropped under one hold of the index's write lock.
const RUN_INTERVALS: usize = 1024;

/// A key range to remove: every key `start <= k < end` (`end` unset: to
/// the last key).
pub(super) type Span = (Box<[u8]>, Option<Box<[u8]>>);

/// What applying range deletes did.
#[derive(Default)]
pub(super) struct RangesDone {
    /// Pairs removed.
    pub pairs: u64,
    /// Intervals dropped whole.
    pub dropped: u64,
    /// Collapses of runs of whole intervals.
    pub runs: u64,
    /// Intervals the ranges cover in part that could not be read (their
    /// keys stay; the caller keeps the logs, as for held point updates).
    pub held: usize,
    /// The first such interval's error.
    pub damage: Option<Error>,
}

/// The union of `ranges` as disjoint spans in key order.
pub(super) fn disjoint(mut ranges: Vec<Span>) -> Vec<Span> {
    ranges.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<Span> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        if let Some(last) = out.last_mut() {
            // Overlapping or touching the last span: extend it.
            let reaches = last.1.as_deref().is_none_or(|e| *start <= *e);
            if reaches {
                last.1 = match (last.1.take(), end) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                continue;
            }
        }
        out.push((start, end));
    }
    out
}

/// Removes every key of `spans` (disjoint, in key order) from the space.
pub(super) fn delete_spans(shared: &Store, spans: &[Span]) -> Result<RangesDone> {
    let mut done = RangesDone::default();
    for (start, end) in spans {
        delete_span(shared, start, end.as_deref(), &mut done)?;
    }
    // Readers' installs into the view since the last carry (the first
    // carry after a phase of reads finds them all: 37-65 ms after 1 s of
    // gets at 10 M pairs), once rather than per run.
    shared.views.carry_installs(&shared.index);
    Ok(done)
}

/// Whether a key bound `bound` (an interval's next anchor; `None`: none)
/// is at or before the span's `end`: the interval's keys all lie below it.
fn ends_within(bound: Option<&[u8]>, end: Option<&[u8]>) -> bool {
    match (bound, end) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(b), Some(e)) => b <= e,
    }
}

/// Removes `start..end`: first the runs of whole intervals in the middle,
/// then the keys of the interval where the span ends, then of the one
/// where it starts. (In that order because an interval left with few pairs
/// joins a neighbour, `group::small_interval`: the boundary intervals
/// edited first would swallow the middle ones one by one.)
fn delete_span(
    shared: &Store,
    start: &[u8],
    end: Option<&[u8]>,
    done: &mut RangesDone,
) -> Result<()> {
    let before_end = |k: &[u8]| end.is_none_or(|e| k < e);
    // The interval where the span starts, unless it starts at its anchor
    // (and is not the first interval, which stays): edited last.
    let left = {
        let st = shared.index.read();
        let f = st.sparse.find(start);
        let at_anchor = st.sparse.compare_anchor(&f, start) == std::cmp::Ordering::Equal;
        if at_anchor && st.sparse.prev(&f).is_some() {
            None
        } else {
            Some(st.sparse.next_anchor(&f))
        }
    };
    // Where the middle begins: the anchor after the left interval.
    let mut from = match &left {
        None => Some(start.to_vec()),
        Some(bound) => bound.clone(),
    };
    // The middle: runs of whole intervals.
    let mut after_damage = false;
    while let Some(f) = from.as_deref().filter(|f| before_end(f)) {
        match whole_run(shared, f, end)? {
            Middle::Run(mut run) => {
                run.keep_first = after_damage;
                after_damage = false;
                from = drop_run(shared, run, done)?;
            }
            Middle::Damaged { bound, error } => {
                // Its keys stay (the caller keeps the logs); the walk goes on
                // past it.
                hold_back(done, error);
                after_damage = true;
                from = bound;
            }
            Middle::Ends => break,
        }
    }
    // The interval where the span ends (the one at `from`, if the span
    // reaches into it), then the one where it starts.
    if let Some(f) = from.as_deref().filter(|f| before_end(f)) {
        delete_in_part(shared, f, start, end, done)?;
    }
    if left.is_some() {
        delete_in_part(shared, start, start, end, done)?;
    }
    Ok(())
}

/// A run of whole intervals to drop, starting at the interval whose anchor
/// is `from`.
struct Run {
    /// The run's first interval's anchor.
    first: Vec<u8>,
    intervals: usize,
    bytes: u64,
    pairs: u64,
    /// The key bound after the run (`None`: it ends the space).
    bound: Option<Vec<u8>>,
    /// The first interval stays, emptied: it follows a corrupt interval
    /// that stays, whose key range would otherwise take in the run's keys
    /// (and reads of them would fail as reads of it do).
    keep_first: bool,
}

/// What the middle of a span holds at the interval anchored at `from`.
enum Middle {
    /// A run of intervals wholly inside the span.
    Run(Run),
    /// An interval wholly inside the span whose pairs could not be counted
    /// (a corrupt interval, after a reopen); `bound` is the next anchor.
    Damaged {
        bound: Option<Vec<u8>>,
        error: Error,
    },
    /// No interval wholly inside the span starts at `from`: the span ends
    /// in it (or it is the first interval, which never leaves the index).
    Ends,
}

/// Records an interval held back: its keys stay, and the caller keeps the
/// logs that name them (as for point updates into a corrupt interval).
fn hold_back(done: &mut RangesDone, error: Error) {
    tracing::warn!(
        target: super::TRACE_TARGET,
        error = %error,
        "a range delete held back: an interval it covers is corrupt"
    );
    done.held += 1;
    done.damage.get_or_insert(error);
}

/// The run of intervals wholly inside `from..end` that starts with the
/// interval anchored at `from` exactly, if that one is wholly inside and
/// not the first interval (which never leaves the index).
fn whole_run(shared: &Store, from: &[u8], end: Option<&[u8]>) -> Result<Middle> {
    let st = shared.index.read();
    let f = st.sparse.find(from);
    if st.sparse.compare_anchor(&f, from) != std::cmp::Ordering::Equal
        || st.sparse.prev(&f).is_none()
    {
        return Ok(Middle::Ends);
    }
    let mut run = Run {
        first: from.to_vec(),
        intervals: 0,
        bytes: 0,
        pairs: 0,
        bound: None,
        keep_first: false,
    };
    let mut g = f;
    loop {
        let bound = st.sparse.next_anchor(&g);
        if !ends_within(bound.as_deref(), end) {
            break;
        }
        let meta = st.sparse.meta(&g);
        let pairs = match meta.count {
            // (After a crash, counts are not known until read.)
            UNKNOWN_COUNT => match shared.interval(&st, &g) {
                Ok(data) => data.len() as u64,
                // The run ends before it; the next call reports it.
                Err(error) if error.is_corruption() => {
                    if run.intervals == 0 {
                        return Ok(Middle::Damaged { bound, error });
                    }
                    break;
                }
                Err(e) => return Err(e),
            },
            n => u64::from(n),
        };
        run.intervals += 1;
        run.bytes += u64::from(meta.size);
        run.pairs += pairs;
        run.bound = bound;
        if run.intervals == RUN_INTERVALS {
            break;
        }
        match st.sparse.next(&g) {
            Some(n) => g = n,
            None => break,
        }
    }
    Ok(if run.intervals > 0 {
        Middle::Run(run)
    } else {
        Middle::Ends
    })
}

/// Drops a run of whole intervals: one collapse of their bytes, their
/// entries out of the index, under one hold of its write lock. Returns
/// the key bound after the run.
fn drop_run(shared: &Store, run: Run, done: &mut RangesDone) -> Result<Option<Vec<u8>>> {
    let space = &shared.space;
    // Made before the lock, as a group's room is (`group::apply_group`).
    space.reserve(4096).map_err(space_err)?;
    if space.maintenance_due() {
        space.maintain().map_err(space_err)?;
    }
    let mut st = flexsys::lock_wait::write_polling(&shared.index);
    st.version += 1;
    let f = st.sparse.find(&run.first);
    // A failed collapse changed nothing: the commit can be tried again.
    space.collapse(f.offset, run.bytes).map_err(space_err)?;
    let words = if run.keep_first {
        // (Resized first: a leaf shared with a view is copied before the
        // word is taken out of it.)
        st.sparse.resize(&f, 0, 0);
        let mut words = vec![st.sparse.meta(&f).cache.swap(0, Ordering::Relaxed)];
        if let Some(g) = st.sparse.next(&f).filter(|_| run.intervals > 1) {
            words.extend(st.sparse.remove_run(&g, run.intervals - 1));
        }
        words
    } else {
        st.sparse.remove_run(&f, run.intervals)
    };
    debug_assert_eq!(words.len(), run.intervals);
    st.pairs = st.pairs.saturating_sub(run.pairs);
    let mut point = CommitPoint::read(space);
    point.pairs = st.pairs;
    point
        .write(space)
        .map_err(|e| Error::Stopped(format!("a range delete failed half way through: {e}")))?;
    drop(st);
    for w in words {
        shared.uncache(w);
    }
    done.pairs += run.pairs;
    done.dropped += run.intervals as u64;
    done.runs += 1;
    shared
        .counters
        .range_intervals_dropped
        .fetch_add(run.intervals as u64, Ordering::Relaxed);
    Ok(run.bound)
}

/// Deletes the keys of `start..end` in the interval holding `from`, which
/// the span covers in part (or which is the first interval).
fn delete_in_part(
    shared: &Store,
    from: &[u8],
    start: &[u8],
    end: Option<&[u8]>,
    done: &mut RangesDone,
) -> Result<()> {
    let target = match find_interval(shared, from)? {
        Ok(t) => t,
        Err(Damaged { error, .. }) => {
            hold_back(done, error);
            return Ok(());
        }
    };
    let data = &target.data;
    let lo = data.lower_bound(start);
    let hi = end.map_or(data.len(), |e| data.lower_bound(e));
    if lo < hi {
        let updates: Vec<Update<'_>> = (lo..hi)
            .map(|i| Update {
                key: data.key(i),
                value: None,
                expires: 0,
            })
            .collect();
        apply_group(shared, &target, &updates)?;
        done.pairs += (hi - lo) as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(s: &str, e: Option<&str>) -> Span {
        (s.as_bytes().into(), e.map(|e| e.as_bytes().into()))
    }

    #[test]
    fn ranges_become_disjoint_spans_in_key_order() {
        let got = disjoint(vec![
            span("m", Some("p")),
            span("a", Some("c")),
            span("b", Some("d")),
            span("d", Some("e")),
            span("x", None),
            span("o", Some("q")),
            span("y", Some("z")),
        ]);
        assert_eq!(
            got,
            vec![span("a", Some("e")), span("m", Some("q")), span("x", None)]
        );
        assert_eq!(disjoint(Vec::new()), Vec::<Span>::new());
    }

    #[test]
    fn an_interval_ends_within_a_span_when_its_bound_does() {
        assert!(ends_within(Some(b"c"), Some(b"c")));
        assert!(!ends_within(Some(b"d"), Some(b"c")));
        assert!(!ends_within(None, Some(b"c")));
        assert!(ends_within(None, None));
        assert!(ends_within(Some(b"z"), None));
    }
}
