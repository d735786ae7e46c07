//! Replaying a log: the valid prefix of its records, in order, read in
//! chunks through a sliding window; then a scan of the rest for an intact
//! record that would show the damage was synced (corruption) rather than a
//! crash's torn tail. Versions 1 and 2 are read here, version 3 by
//! `replay3` through the same window.
//!
//! Invariants: the callback sees only records that verify, in order, and
//! each at most once; corruption is reported after the valid prefix was
//! handed over; a record numbered at or below the header's floor (an older
//! log's, left in a reused file) ends replay.

use flexspace::StorageFile;

use super::format::*;
#[cfg(test)]
use super::Record;
use super::{io_err, Wal};
use crate::error::{Error, Result};

/// Bytes replay reads from the file at a time.
pub const REPLAY_CHUNK: usize = 16 << 20;

/// What replay found in a log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Valid records replayed.
    pub records: u64,
    /// The sequence number of the last of them.
    pub last_seq: Option<u64>,
    /// The file offset where they end (where replay stopped).
    pub end: u64,
    /// The log's chain record (version 3): the generation of the log
    /// before it and the offset where that log's records end.
    pub chain: Option<(u64, u64)>,
    /// A sync of this log completed while it was written (its durable-
    /// length slot or a sync mark says so; version 3 only).
    pub synced_once: bool,
    /// How many generations back the log this one follows is, as its
    /// header recorded at creation (version 4; 0 when not recorded).
    pub back: u32,
}

/// A window of a file that replay slides forward: the bytes asked for are
/// read in chunks of at least `chunk` bytes, and bytes already read are
/// kept (moved to the front) rather than read again.
pub(super) struct Window<'a> {
    file: &'a dyn StorageFile,
    name: &'a str,
    /// The file's length.
    len: u64,
    chunk: usize,
    /// `buf[..filled]` holds the file's bytes from offset `start`.
    buf: Vec<u8>,
    start: u64,
    filled: usize,
}

impl<'a> Window<'a> {
    fn new(file: &'a dyn StorageFile, name: &'a str, len: u64, chunk: usize) -> Self {
        Window {
            file,
            name,
            len,
            chunk: chunk.max(RECORD_HEAD),
            buf: Vec::new(),
            start: 0,
            filled: 0,
        }
    }

    /// The file's length.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// The bytes read at a time.
    pub(super) fn chunk(&self) -> usize {
        self.chunk
    }

    /// The file's bytes `[at, at + n)`, `None` when they pass its end.
    pub(super) fn get(&mut self, at: u64, n: usize) -> Result<Option<&[u8]>> {
        let Some(end) = at.checked_add(n as u64).filter(|&e| e <= self.len) else {
            return Ok(None);
        };
        if at < self.start || end > self.start + self.filled as u64 {
            self.fill(at, n)?;
        }
        let off = (at - self.start) as usize;
        Ok(Some(&self.buf[off..off + n]))
    }

    /// Loads `[at, at + max(n, chunk))` (clipped to the file); the caller
    /// checked `at + n <= len`.
    fn fill(&mut self, at: u64, n: usize) -> Result<()> {
        let want = (n.max(self.chunk) as u64).min(self.len - at) as usize;
        let loaded = self.start..self.start + self.filled as u64;
        let kept = if loaded.contains(&at) {
            let off = (at - self.start) as usize;
            self.buf.copy_within(off..self.filled, 0);
            self.filled - off
        } else {
            0
        };
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        } else if self.buf.len() > self.chunk && want <= self.chunk {
            // Give back what one oversized record needed.
            self.buf.truncate(self.chunk.max(kept));
            self.buf.shrink_to_fit();
        }
        if kept < want {
            self.file
                .read_exact_at(at + kept as u64, &mut self.buf[kept..want])
                .map_err(|e| io_err(self.name, e))?;
        }
        self.start = at;
        self.filled = want.max(kept);
        Ok(())
    }

    /// The valid record at `at` whose sequence number is above `after`
    /// (any, when `None`): its sequence number and payload.
    fn record(&mut self, at: u64, after: Option<u64>) -> Result<Option<(u64, &[u8])>> {
        let Some(h) = self.get(at, RECORD_HEAD)? else {
            return Ok(None);
        };
        let (crc, plen, seq) = (u32_at(h, 0), u32_at(h, 4) as usize, u64_at(h, 8));
        if after.is_some_and(|a| seq <= a) || plen > MAX_RECORD {
            return Ok(None);
        }
        let Some(r) = self.get(at, RECORD_HEAD + plen)? else {
            return Ok(None);
        };
        if crc32c::crc32c(&r[4..]) != crc {
            return Ok(None);
        }
        Ok(Some((seq, &r[RECORD_HEAD..])))
    }
}

/// The index of the first non-zero byte of `b`. Zero runs (a log's
/// preallocated tail) are skipped 64 bytes at a time.
pub(super) fn first_nonzero(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(block) = b.get(i..i + 64) {
        if block.iter().fold(0, |a, &x| a | x) != 0 {
            break;
        }
        i += 64;
    }
    b[i..].iter().position(|&x| x != 0).map(|j| i + j)
}

/// The first position `q` in `win` (which starts at file offset `base`) of
/// a header that could be an intact record vouching for bytes at `pos`:
/// its sequence number fits after `after` (see `Wal::replay`) and its
/// `synced` field lies beyond `pos`. Only headers wholly inside `win` are
/// looked at.
pub(super) fn candidate(win: &[u8], base: u64, pos: u64, after: Option<u64>) -> Option<usize> {
    let mut q = 0;
    while q + RECORD_HEAD <= win.len() {
        // `synced > pos >= HEADER_LEN`: a header whose `synced` bytes are
        // all zero is no candidate, so jump to the first one with a
        // non-zero byte there.
        let z = q + 16 + first_nonzero(&win[q + 16..])?;
        q = q.max(z.saturating_sub(RECORD_HEAD - 1));
        let h = win.get(q..q + RECORD_HEAD)?;
        let p = base + q as u64;
        let seq = u64_at(h, 8);
        let plausible = match after {
            Some(a) => seq > a && seq - a <= p - pos + 1,
            None => true,
        };
        if plausible && u64_at(h, 16) > pos {
            return Some(q);
        }
        q += 1;
    }
    None
}

impl Wal {
    /// Reads the valid records of an existing log, in order (see
    /// [`Wal::replay`], which hands them over without collecting them).
    #[cfg(test)]
    pub fn read(file: &dyn StorageFile, name: &str) -> Result<Vec<Record>> {
        let mut records = Vec::new();
        Self::replay(file, name, |seq, payload| {
            records.push(Record {
                seq,
                payload: payload.to_vec(),
            });
            Ok(())
        })?;
        Ok(records)
    }

    /// Replays an existing log: calls `f(seq, payload)` for each valid
    /// record, in order, with the payload borrowed from the read buffer:
    /// everything up to the first torn or corrupt record (a crash's torn
    /// tail). The file is read in chunks of [`REPLAY_CHUNK`] bytes (a
    /// record larger than that is read whole). A damaged record below the
    /// durable length, or one that an intact later record says was synced,
    /// is corruption and an error, returned after `f` saw the records
    /// before it; an error from `f` ends replay with that error.
    pub fn replay(
        file: &dyn StorageFile,
        name: &str,
        f: impl FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<Replayed> {
        Self::replay_chunked(file, name, REPLAY_CHUNK, f)
    }

    pub(super) fn replay_chunked(
        file: &dyn StorageFile,
        name: &str,
        chunk: usize,
        mut f: impl FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<Replayed> {
        let corrupt = |detail: &str| Error::Corrupt {
            file: name.into(),
            detail: detail.to_string(),
        };
        let len = file.len().map_err(|e| io_err(name, e))?;
        let mut w = Window::new(file, name, len, chunk);
        let mut done = Replayed {
            end: HEADER_LEN,
            ..Replayed::default()
        };
        // A log gets its name only once its header is durable (see
        // `log_files`): a torn header is damage, and the writes the log held
        // are lost, so it is reported, never read as an empty log.
        let truncated = |n: u64| {
            corrupt(&format!(
                "truncated to {len} bytes, inside its {n}-byte header"
            ))
        };
        let Some(start) = w.get(0, V1_HEADER_LEN as usize)? else {
            return Err(truncated(V1_HEADER_LEN));
        };
        let n = header_len(start).map_err(|e| corrupt(&e))?;
        let Some(bytes) = w.get(0, n as usize)? else {
            return Err(truncated(n));
        };
        let header = parse_header(bytes).map_err(|e| corrupt(&e))?;
        let Header {
            len: records_at,
            floor,
            durable,
            ..
        } = header;
        if len < durable {
            return Err(corrupt(&format!(
                "truncated to {len} bytes, below the {durable} bytes it had synced"
            )));
        }
        if header.version >= 3 {
            return super::replay3::replay(&mut w, &header, f, corrupt);
        }
        done.end = records_at;
        let mut pos = records_at;
        loop {
            // An all-zero header (the preallocated tail) is the end; it
            // never verifies anyway (its CRC is not 0).
            match w.get(pos, RECORD_HEAD)? {
                Some(h) if h.iter().any(|&b| b != 0) => {}
                _ => break,
            }
            // Records of an older log that left the file to this one carry
            // numbers at or below `floor`, so the first of them ends replay.
            let Some((seq, payload)) = w.record(pos, done.last_seq.or(floor))? else {
                break;
            };
            f(seq, payload)?;
            pos += (RECORD_HEAD + payload.len()) as u64;
            done.records += 1;
            done.last_seq = Some(seq);
        }
        done.end = pos;
        if pos < durable {
            return Err(corrupt(&format!(
                "the record at byte {pos} is damaged, below the {durable} bytes the log had synced"
            )));
        }
        // A record's operations take consecutive sequence numbers and each
        // takes at least one payload byte, so a record that starts `d`
        // bytes further has a number at most `d + 1` above the last good
        // one: that bound keeps the scan cheap (a random sequence number
        // almost never qualifies, and no checksum is computed for it), and
        // zero runs are skipped in blocks.
        let after = done.last_seq.or(floor);
        let mut q = pos + 1;
        while q + RECORD_HEAD as u64 <= len {
            let n = (w.chunk as u64).min(len - q) as usize;
            let found = match w.get(q, n)? {
                Some(win) => candidate(win, q, pos, after),
                None => None,
            };
            let Some(c) = found else {
                q += (n - (RECORD_HEAD - 1)) as u64;
                continue;
            };
            let c = q + c as u64;
            if w.record(c, after)?.is_some() {
                return Err(corrupt(&format!(
                    "the record at byte {pos} is damaged, but a later record shows it was synced"
                )));
            }
            q = c + 1;
        }
        Ok(done)
    }
}
