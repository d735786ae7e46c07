//! Replaying a version-3 log (`record3`): the valid prefix of its records
//! through the sliding window, then a scan of the rest for an intact sync
//! mark that would show the damage was synced (corruption) rather than a
//! crash's torn tail.
//!
//! A batch's sequence number is its distance from the expected one added
//! to it, so the numbers only grow; records an older log left in the file
//! never verify (their CRC seed differs), so the first of them ends replay
//! as a torn record would. A mark must agree with what precedes it (the
//! offset it calls synced lies at or before it, the number it expects is
//! the one expected there); one that does not is damage.
//!
//! The scan looks for marks only: they are small (at most `MAX_SMALL`
//! bytes, so a candidate costs a short CRC at most), their length byte is
//! below 0x80 with kind 2 (one byte in eight passes that test), and a mark
//! that vouches says `synced` beyond the damage and at or before itself and
//! expects a number at least the one expected at the damage, and at most
//! that plus the bytes between (each batch takes more bytes than it has
//! operations). A zero byte where the length varint would be is no mark,
//! so zero runs are skipped in blocks.
//!
//! Invariants: the callback sees only records that verify, in order, each
//! once; the verdict does not depend on the chunk size (the tests compare
//! it with a whole-file reading).

use super::format::Header;
use super::record3::*;
use super::replay::{first_nonzero, Replayed, Window};
use crate::error::{Error, Result};

/// Replays the records of a version-3 log whose header `h` the window
/// `w` has read; see `Wal::replay`.
pub(super) fn replay(
    w: &mut Window<'_>,
    h: &Header,
    mut f: impl FnMut(u64, &[u8]) -> Result<()>,
    corrupt: impl Fn(&str) -> Error,
) -> Result<Replayed> {
    let salt = salt(h.first);
    let mut done = Replayed {
        end: h.len,
        back: h.back,
        ..Replayed::default()
    };
    let mut expected = h.first;
    let mut pos = h.len;
    loop {
        let avail = (w.len() - pos).min(MAX_HEAD as u64) as usize;
        let Some(head) = w.get(pos, avail)?.and_then(parse_head) else {
            break;
        };
        let Some(rec) = w.get(pos, head.record_len())? else {
            break;
        };
        if !verifies(rec, salt) {
            break;
        }
        let body = &rec[head.len..];
        match head.kind {
            BATCH => {
                let Some((delta, payload)) = batch_body(body) else {
                    break;
                };
                let Some(seq) = expected.checked_add(delta).filter(|&s| s < u64::MAX) else {
                    break;
                };
                f(seq, payload)?;
                expected = seq + 1;
                done.records += 1;
                done.last_seq = Some(seq);
            }
            MARK => {
                let Some((synced, rel)) = two_varints(body) else {
                    break;
                };
                if synced > pos || expected.checked_sub(h.first) != Some(rel) {
                    break;
                }
                done.synced_once |= synced > h.len;
            }
            _ => {
                let Some(link) = two_varints(body).filter(|_| pos == h.len) else {
                    break;
                };
                done.chain = Some(link);
            }
        }
        pos += head.record_len() as u64;
    }
    done.end = pos;
    done.synced_once |= h.durable > h.len;
    if pos < h.durable {
        return Err(corrupt(&format!(
            "the record at byte {pos} is damaged, below the {} bytes the log had synced",
            h.durable
        )));
    }
    let expected_rel = expected - h.first;
    let mut q = pos + 1;
    while q + MIN_RECORD as u64 <= w.len() {
        let n = (w.chunk() as u64)
            .max(2 * MAX_SMALL as u64)
            .min(w.len() - q) as usize;
        let found = match w.get(q, n)? {
            Some(win) => mark_candidate(win, q, pos, expected_rel),
            None => None,
        };
        let Some(c) = found else {
            // Candidates that start in the last `MAX_SMALL - 1` bytes may
            // not fit in this window: the next one starts there.
            q += (n.saturating_sub(MAX_SMALL - 1)).max(1) as u64;
            continue;
        };
        let c = q + c as u64;
        let vouches = match w.get(c, MAX_SMALL.min((w.len() - c) as usize))? {
            Some(b) => parse_head(b)
                .and_then(|hd| b.get(..hd.record_len()))
                .is_some_and(|rec| verifies(rec, salt)),
            None => false,
        };
        if vouches {
            return Err(corrupt(&format!(
                "the record at byte {pos} is damaged, but a later sync mark shows it was synced"
            )));
        }
        q = c + 1;
    }
    Ok(done)
}

/// The first position `c` in `win` (which starts at file offset `base`)
/// of what could be an intact mark vouching for bytes at `pos` (see the
/// module's documentation; its CRC is left to the caller). Only marks
/// wholly inside `win` are looked at.
fn mark_candidate(win: &[u8], base: u64, pos: u64, expected_rel: u64) -> Option<usize> {
    let mut c = 0;
    while c + MIN_RECORD <= win.len() {
        // A mark's length byte is not zero: jump to the next non-zero byte
        // where one could be.
        let z = c + 4 + first_nonzero(&win[c + 4..])?;
        c = c.max(z - 4);
        let b = win[c + 4];
        let body = usize::from(b >> 2);
        if b & 0x83 == MARK && body <= SMALL_BODY {
            let at = base + c as u64;
            let plausible = win
                .get(c + 5..c + 5 + body)
                .and_then(two_varints)
                .is_some_and(|(synced, rel)| {
                    synced > pos
                        && synced <= at
                        && rel >= expected_rel
                        && rel - expected_rel <= at - pos
                });
            if plausible {
                return Some(c);
            }
        }
        c += 1;
    }
    None
}
