//! What the WAL's tests of both formats share: an in-memory file, its
//! bytes, the chunked replay's verdict, and the damaged copies of a log
//! the replay must judge as the whole-file reference reading does.
//!
//! Invariant: `damaged_copies` yields every cut, every one-bit flip and
//! zeroed stretches (each with a zero tail, as a preallocated file has).

use std::sync::Arc;

use flexspace::{MemFile, StorageFile};

use super::{Record, Wal};

pub(super) fn mem() -> Arc<dyn StorageFile> {
    Arc::new(MemFile::new())
}

pub(super) fn bytes_of(f: &dyn StorageFile) -> Vec<u8> {
    let mut b = vec![0; f.len().unwrap() as usize];
    f.read_exact_at(0, &mut b).unwrap();
    b
}

/// Calls `check` with every cut of `bytes`, every copy with one bit
/// flipped, and copies with `zeros` bytes zeroed every `step` bytes
/// followed by a zero tail of `tail` bytes, each with what was done.
pub(super) fn damaged_copies(
    bytes: &[u8],
    step: usize,
    zeros: usize,
    tail: usize,
    mut check: impl FnMut(Vec<u8>, &str),
) {
    for cut in 0..bytes.len() {
        check(bytes[..cut].to_vec(), &format!("cut at {cut}"));
    }
    for at in 0..bytes.len() {
        let mut b = bytes.to_vec();
        b[at] ^= 0x10;
        check(b, &format!("flip at {at}"));
    }
    for at in (0..bytes.len()).step_by(step) {
        let mut b = bytes.to_vec();
        let end = (at + zeros).min(b.len());
        b[at..end].fill(0);
        b.resize(b.len() + tail, 0);
        check(b, &format!("zeros at {at}"));
    }
}

/// What a replay found: the records and the chain record, or whether the
/// error was corruption.
pub(super) type Verdict = Result<(Vec<Record>, Option<(u64, u64)>), bool>;

/// What replay with `chunk`-byte reads gives: the records and the chain
/// record, or whether the error was corruption.
pub(super) fn replay_with(f: &dyn StorageFile, chunk: usize) -> Verdict {
    let mut recs = Vec::new();
    Wal::replay_chunked(f, "wal", chunk, |seq, payload| {
        recs.push(Record {
            seq,
            payload: payload.to_vec(),
        });
        Ok(())
    })
    .map(|done| {
        assert_eq!(done.records, recs.len() as u64);
        assert_eq!(done.last_seq, recs.last().map(|r| r.seq));
        (recs, done.chain)
    })
    .map_err(|e| e.is_corruption())
}
