//! Rebuilding the sparse index after a crash (§5.4): the space is sampled
//! every `SAMPLE_STEP` bytes; at each sample point the first tagged extent
//! (a pair boundary) within the next step gives an anchor key, read with
//! one small read, so the cost is proportional to the samples and not to
//! the data; the samples are read by several threads at once.
//!
//! Invariants: every anchor is the verified key of a pair that starts on a
//! tagged extent; intervals cover the space without gaps, in offset order,
//! the first one from offset 0 with the empty anchor; their pair counts are
//! unknown (`UNKNOWN_COUNT`) until the committer reads them.

use flexspace::FlexSpace;

use crate::codec::{decode_pair, Decoded};
use crate::error::{space_err, Error, Result};
use crate::index::sparse::{IntervalMeta, NewInterval, SparseIndex, UNKNOWN_COUNT};

/// Bytes between samples when the sparse index is rebuilt (§5.4: 8 KiB).
pub(crate) const SAMPLE_STEP: u64 = 8 << 10;

/// Sampled anchors: (offset, key) in offset order.
type Anchors = Vec<(u64, Vec<u8>)>;

/// Rebuilds the sparse index by sampling the space.
pub(crate) fn rebuild_index(space: &FlexSpace) -> Result<SparseIndex> {
    let len = space.len();
    let samples: Vec<u64> = (1..len.div_ceil(SAMPLE_STEP))
        .map(|i| i * SAMPLE_STEP)
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let chunk = samples.len().div_ceil(threads).max(1);
    let found: Vec<Result<Anchors>> = std::thread::scope(|s| {
        let handles: Vec<_> = samples
            .chunks(chunk)
            .map(|part| s.spawn(move || sample_anchors(space, part)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Corrupt {
                        file: "data".into(),
                        detail: "a sampling thread failed".into(),
                    })
                })
            })
            .collect()
    });
    let mut anchors: Vec<(u64, Vec<u8>)> = vec![(0, Vec::new())];
    for part in found {
        for (off, key) in part? {
            if anchors.last().is_some_and(|(o, _)| *o == off) {
                continue;
            }
            if anchors.last().is_some_and(|(_, k)| *k >= key) {
                return Err(Error::Corrupt {
                    file: "data".into(),
                    detail: format!("the pair at offset {off} is out of key order"),
                });
            }
            anchors.push((off, key));
        }
    }
    let mut intervals = Vec::with_capacity(anchors.len());
    for (i, (off, key)) in anchors.iter().enumerate() {
        let end = anchors.get(i + 1).map_or(len, |(o, _)| *o);
        let size = u32::try_from(end - off).map_err(|_| Error::Corrupt {
            file: "data".into(),
            detail: format!("no pair boundary is tagged in the 4 GiB after offset {off}"),
        })?;
        intervals.push(NewInterval {
            anchor: key.clone(),
            meta: IntervalMeta {
                size,
                count: if size == 0 { 0 } else { UNKNOWN_COUNT },
                ..IntervalMeta::default()
            },
        });
    }
    Ok(SparseIndex::build(intervals))
}

/// For each sample point, the first tagged extent in the step after it and
/// the key of the pair that starts there. The whole pair is read and its
/// checksum verified: an anchor taken from damaged bytes would send lookups
/// to the wrong interval, where a missing key would look absent instead of
/// failing.
fn sample_anchors(space: &FlexSpace, samples: &[u64]) -> Result<Anchors> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 512];
    for &x in samples {
        let Some((off, _)) = space.next_tagged(x, x + SAMPLE_STEP).map_err(space_err)? else {
            continue;
        };
        if out.last().is_some_and(|(o, _): &(u64, Vec<u8>)| *o == off) {
            continue;
        }
        let bad = |what: &str| Error::Corrupt {
            file: "data".into(),
            detail: format!("the pair at offset {off}: {what}"),
        };
        let key = loop {
            let n = space.read(off, &mut buf).map_err(space_err)?;
            match decode_pair(&buf[..n]) {
                Decoded::Pair { key, .. } => break key.to_vec(),
                Decoded::Incomplete { need } if n == buf.len() && need > n => {
                    buf.resize(need, 0);
                }
                Decoded::Incomplete { .. } => return Err(bad("truncated by the end of the space")),
                Decoded::Invalid => return Err(bad("fails its checksum or length check")),
            }
        };
        buf.truncate(512);
        out.push((off, key));
    }
    Ok(out)
}
