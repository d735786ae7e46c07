//! The write-ahead log: numbered, checksummed records with group commit.
//!
//! File format (docs/FORMAT.md): a 16-byte header (`FLEXWAL1`, format
//! version, zero) then records `crc32c u32 | len u32 | seq u64 | payload`,
//! the CRC covering `len`, `seq` and the payload.
//!
//! Invariants:
//! - Records are written in sequence order and sequence numbers are
//!   consecutive, so replay returns a prefix of the appended records: it
//!   stops at the first torn or corrupt record.
//! - `append(.., sync: true)` returns only after its record and every record
//!   before it are durable. Concurrent appenders share writes and fsyncs:
//!   whoever finds no flush in progress becomes the leader and writes
//!   everything buffered so far (group commit).
//! - After an I/O error the log refuses further appends (its tail is
//!   unknown); reopening recovers the durable prefix.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flextree::StorageFile;
use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"FLEXWAL1";
const FORMAT_VERSION: u32 = 1;
const HEADER_LEN: u64 = 16;
const RECORD_HEAD: usize = 16;
/// The largest payload of one record (a batch of maximal pairs is refused
/// before it gets here).
pub const MAX_RECORD: usize = 1 << 30;

/// One replayed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its sequence number.
    pub seq: u64,
    /// Its payload.
    pub payload: Vec<u8>,
}

struct State {
    next_seq: u64,
    /// Encoded records not yet handed to a leader.
    buf: Vec<u8>,
    /// File offset where `buf` starts (everything before it is written or
    /// being written by the leader).
    buf_start: u64,
    /// File offset up to which records are written.
    written: u64,
    /// File offset up to which records are durable.
    synced: u64,
    /// Offset up to which some waiting appender asked for durability.
    sync_wanted: u64,
    leader: bool,
    failed: bool,
}

/// A write-ahead log on one file.
pub struct Wal {
    file: Arc<dyn StorageFile>,
    path: PathBuf,
    state: Mutex<State>,
    flushed: Condvar,
}

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        file: path.to_path_buf(),
        source,
    }
}

fn encode_record(out: &mut Vec<u8>, seq: u64, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
}

impl Wal {
    /// Starts a new, empty log in `file` (truncated first) whose first record
    /// will have sequence number `first_seq`. `path` names the file in
    /// errors.
    pub fn create(file: Arc<dyn StorageFile>, path: &Path, first_seq: u64) -> Result<Wal> {
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        header.extend_from_slice(&[0; 4]);
        let io = |e| io_err(path, e);
        file.set_len(0).map_err(io)?;
        file.write_all_at(0, &header).map_err(io)?;
        file.sync().map_err(io)?;
        Ok(Self::at(file, path, first_seq, HEADER_LEN))
    }

    fn at(file: Arc<dyn StorageFile>, path: &Path, next_seq: u64, end: u64) -> Wal {
        Wal {
            file,
            path: path.to_path_buf(),
            state: Mutex::new(State {
                next_seq,
                buf: Vec::new(),
                buf_start: end,
                written: end,
                synced: end,
                sync_wanted: end,
                leader: false,
                failed: false,
            }),
            flushed: Condvar::new(),
        }
    }

    /// Opens an existing log, returning it (positioned after its last valid
    /// record, the torn tail cut off) and the valid records in order.
    /// `next_seq` is used when the log holds no record.
    pub fn open(
        file: Arc<dyn StorageFile>,
        path: &Path,
        next_seq: u64,
    ) -> Result<(Wal, Vec<Record>)> {
        let corrupt = |detail: &str| Error::Corrupt {
            file: path.to_path_buf(),
            detail: detail.to_string(),
        };
        let len = file.len().map_err(|e| io_err(path, e))?;
        if len < HEADER_LEN {
            return Err(corrupt("shorter than the log header"));
        }
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(0, &mut bytes)
            .map_err(|e| io_err(path, e))?;
        if &bytes[..8] != MAGIC {
            return Err(corrupt("not a FlexDB write-ahead log"));
        }
        if bytes[8..12] != FORMAT_VERSION.to_le_bytes() {
            return Err(corrupt("unknown log format version"));
        }
        let mut records = Vec::new();
        let mut pos = HEADER_LEN as usize;
        let mut expect: Option<u64> = None;
        while pos + RECORD_HEAD <= bytes.len() {
            let h = &bytes[pos..pos + RECORD_HEAD];
            let crc = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let plen = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
            let mut s = [0u8; 8];
            s.copy_from_slice(&h[8..16]);
            let seq = u64::from_le_bytes(s);
            let end = pos + RECORD_HEAD + plen;
            if plen > MAX_RECORD || end > bytes.len() {
                break;
            }
            if crc32c::crc32c(&bytes[pos + 4..end]) != crc {
                break;
            }
            if expect.is_some_and(|e| e != seq) {
                break;
            }
            expect = Some(seq + 1);
            records.push(Record {
                seq,
                payload: bytes[pos + RECORD_HEAD..end].to_vec(),
            });
            pos = end;
        }
        // Cut a torn tail so new records follow the last valid one.
        if (pos as u64) < len {
            file.set_len(pos as u64).map_err(|e| io_err(path, e))?;
            file.sync().map_err(|e| io_err(path, e))?;
        }
        let next = expect.unwrap_or(next_seq);
        Ok((Self::at(file, path, next, pos as u64), records))
    }

    /// The sequence number the next record will get.
    pub fn next_seq(&self) -> u64 {
        self.state.lock().next_seq
    }

    /// Bytes in the log file (header included), buffered bytes too.
    pub fn len(&self) -> u64 {
        let st = self.state.lock();
        st.buf_start + st.buf.len() as u64
    }

    /// Whether the log holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == HEADER_LEN
    }

    /// Appends one record and returns its sequence number. The record is
    /// written to the file before this returns; with `sync` it is also
    /// durable.
    pub fn append(&self, payload: &[u8], sync: bool) -> Result<u64> {
        if payload.len() > MAX_RECORD {
            return Err(Error::ValueTooLarge {
                len: payload.len(),
                max: MAX_RECORD,
            });
        }
        let mut st = self.state.lock();
        if st.failed {
            return Err(self.failed_error());
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        encode_record(&mut st.buf, seq, payload);
        let my_end = st.buf_start + st.buf.len() as u64;
        if sync {
            st.sync_wanted = st.sync_wanted.max(my_end);
        }
        self.wait_for(st, my_end, sync)?;
        Ok(seq)
    }

    /// Makes every appended record durable.
    pub fn sync(&self) -> Result<()> {
        let mut st = self.state.lock();
        if st.failed {
            return Err(self.failed_error());
        }
        let end = st.buf_start + st.buf.len() as u64;
        st.sync_wanted = st.sync_wanted.max(end);
        self.wait_for(st, end, true)
    }

    fn failed_error(&self) -> Error {
        io_err(
            &self.path,
            std::io::Error::other("an earlier write to the log failed"),
        )
    }

    /// Waits until `end` is written (and synced if `sync`), leading flushes
    /// whenever nobody else is.
    fn wait_for<'a>(
        &'a self,
        mut st: parking_lot::MutexGuard<'a, State>,
        end: u64,
        sync: bool,
    ) -> Result<()> {
        loop {
            if st.failed {
                return Err(self.failed_error());
            }
            if st.written >= end && (!sync || st.synced >= end) {
                return Ok(());
            }
            if st.leader {
                self.flushed.wait(&mut st);
                continue;
            }
            st.leader = true;
            let data = std::mem::take(&mut st.buf);
            let start = st.buf_start;
            let stop = start + data.len() as u64;
            st.buf_start = stop;
            let need_sync = st.sync_wanted > st.synced;
            drop(st);
            let mut result = Ok(());
            if !data.is_empty() {
                result = self.file.write_all_at(start, &data);
            }
            if result.is_ok() && need_sync {
                result = self.file.sync();
            }
            st = self.state.lock();
            st.leader = false;
            if let Err(e) = result {
                st.failed = true;
                self.flushed.notify_all();
                return Err(io_err(&self.path, e));
            }
            st.written = stop;
            if need_sync {
                st.synced = stop;
            }
            // Give the buffer's allocation back for reuse when it is idle.
            if st.buf.is_empty() && st.buf.capacity() < data.capacity() {
                let mut data = data;
                data.clear();
                st.buf = data;
            }
            self.flushed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flextree::MemFile;

    fn mem() -> Arc<dyn StorageFile> {
        Arc::new(MemFile::new())
    }

    #[test]
    fn records_replay_in_order() {
        let f = mem();
        let p = Path::new("wal");
        let wal = Wal::create(f.clone(), p, 10).unwrap();
        for i in 0..100u32 {
            let seq = wal.append(&i.to_le_bytes(), i % 7 == 0).unwrap();
            assert_eq!(seq, 10 + u64::from(i));
        }
        drop(wal);
        let (wal, recs) = Wal::open(f, p, 0).unwrap();
        assert_eq!(recs.len(), 100);
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r.seq, 10 + i as u64);
            assert_eq!(r.payload, (i as u32).to_le_bytes());
        }
        assert_eq!(wal.next_seq(), 110);
    }

    #[test]
    fn torn_tail_is_cut_and_appends_continue() {
        let f = mem();
        let p = Path::new("wal");
        let wal = Wal::create(f.clone(), p, 0).unwrap();
        for i in 0..10u8 {
            wal.append(&[i; 20], false).unwrap();
        }
        let len = f.len().unwrap();
        for cut in [len - 1, len - 20, len - 36, HEADER_LEN + 5] {
            let copy: Arc<dyn StorageFile> = Arc::new(MemFile::from_bytes({
                let mut b = vec![0; cut as usize];
                f.read_exact_at(0, &mut b).unwrap();
                b
            }));
            let (wal2, recs) = Wal::open(copy.clone(), p, 0).unwrap();
            let n = recs.len();
            assert!(n < 10);
            for (i, r) in recs.iter().enumerate() {
                assert_eq!(r.payload, [i as u8; 20]);
            }
            wal2.append(b"next", true).unwrap();
            drop(wal2);
            let (_, recs) = Wal::open(copy, p, 0).unwrap();
            assert_eq!(recs.len(), n + 1);
            assert_eq!(recs[n].payload, b"next");
        }
    }

    #[test]
    fn corrupt_record_ends_replay() {
        let f = mem();
        let p = Path::new("wal");
        let wal = Wal::create(f.clone(), p, 0).unwrap();
        for i in 0..5u8 {
            wal.append(&[i; 8], false).unwrap();
        }
        // Flip a payload byte of the third record.
        let third = HEADER_LEN + 2 * (RECORD_HEAD as u64 + 8) + RECORD_HEAD as u64;
        let mut b = [0u8; 1];
        f.read_exact_at(third, &mut b).unwrap();
        f.write_all_at(third, &[b[0] ^ 1]).unwrap();
        let (_, recs) = Wal::open(f, p, 0).unwrap();
        assert_eq!(recs.len(), 2);
    }

    #[test]
    fn not_a_log_is_corruption() {
        let f: Arc<dyn StorageFile> =
            Arc::new(MemFile::from_bytes(b"hello world, not a log".to_vec()));
        assert!(matches!(
            Wal::open(f, Path::new("x"), 0),
            Err(Error::Corrupt { .. })
        ));
        let f: Arc<dyn StorageFile> = Arc::new(MemFile::from_bytes(vec![1, 2]));
        assert!(matches!(
            Wal::open(f, Path::new("x"), 0),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn concurrent_appenders_share_the_log() {
        let f = mem();
        let p = Path::new("wal");
        let wal = Arc::new(Wal::create(f.clone(), p, 0).unwrap());
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let wal = wal.clone();
                std::thread::spawn(move || {
                    for i in 0..200u32 {
                        let mut payload = vec![t];
                        payload.extend_from_slice(&i.to_le_bytes());
                        wal.append(&payload, i % 3 == 0).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        drop(wal);
        let (_, recs) = Wal::open(f, p, 0).unwrap();
        assert_eq!(recs.len(), 800);
        // Each thread's records appear in its own order.
        let mut last = [None::<u32>; 4];
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r.seq, i as u64);
            let t = r.payload[0] as usize;
            let n = u32::from_le_bytes([r.payload[1], r.payload[2], r.payload[3], r.payload[4]]);
            assert!(last[t].is_none_or(|l| l < n));
            last[t] = Some(n);
        }
    }
}
